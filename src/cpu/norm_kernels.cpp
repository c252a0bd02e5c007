// CPU kernels of batch norm on x seen as a contiguous [N, C, M] block.
// With rows of M >= kShortRow elements every pass runs over x in memory order, split over rows:
// per-row partial results (a mean and sum of squared deviations, or the gradient sums) are
// merged per channel in double, then one more pass writes the output. Sums run in blocks of up
// to kBlock elements with kLanes independent accumulators in the compute type (vectorised), so
// float32 statistics stay accurate for large batches. With short rows (BatchNorm1d on [N, C]:
// M = 1) the loops run across channels instead, which are contiguous in memory then; M = 1 is
// also how a channels-last input arrives ([N*H*W, C, 1], ops/norm.cpp).
#include <algorithm>
#include <cmath>
#include <vector>

#include "cpu/lane_fold.h"
#include "cpu/parallel.h"
#include "ops/norm.h"

namespace ignis::cpu {
namespace {

constexpr int kLanes = 32;  // GCC vectorises 32 independent accumulators well
constexpr int64_t kBlock = 4096;
// Rows shorter than this take the across-channel loops.
constexpr int64_t kShortRow = 16;

template <class T>
using A_ = acc_t<T>;

/// sum(p[0..m)) in A, vectorised.
template <class T>
A_<T> block_sum(const T* __restrict p, int64_t m) {
  using A = A_<T>;
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] += static_cast<A>(p[i + j]);
  }
  for (; i < m; ++i) acc[0] += static_cast<A>(p[i]);
  return ignis_fold_lanes<kLanes>(acc, [](auto a, auto b) { return a + b; });
}

/// sum((p - mu)^2) in A, vectorised.
template <class T>
A_<T> block_sqdev(const T* __restrict p, int64_t m, A_<T> mu) {
  using A = A_<T>;
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A d = static_cast<A>(p[i + j]) - mu;
      acc[j] += d * d;
    }
  }
  for (; i < m; ++i) {
    const A d = static_cast<A>(p[i]) - mu;
    acc[0] += d * d;
  }
  return ignis_fold_lanes<kLanes>(acc, [](auto a, auto b) { return a + b; });
}

/// sum(g) and sum(g * (x - mu)) in A, vectorised.
template <class T>
void block_grad_sums(const T* __restrict g, const T* __restrict x, int64_t m, A_<T> mu, A_<T>& sg,
                     A_<T>& sgx) {
  using A = A_<T>;
  A a[kLanes] = {}, b[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    // Two plain loops vectorise cleanly; one loop updating both arrays does not.
    for (int j = 0; j < kLanes; ++j) a[j] += static_cast<A>(g[i + j]);
    for (int j = 0; j < kLanes; ++j)
      b[j] += static_cast<A>(g[i + j]) * (static_cast<A>(x[i + j]) - mu);
  }
  for (; i < m; ++i) {
    const A gv = static_cast<A>(g[i]);
    a[0] += gv;
    b[0] += gv * (static_cast<A>(x[i]) - mu);
  }
  sg = ignis_fold_lanes<kLanes>(a, [](auto u, auto v) { return u + v; });
  sgx = ignis_fold_lanes<kLanes>(b, [](auto u, auto v) { return u + v; });
}

/// Channels per parallel chunk: enough elements to be worth a thread.
int64_t channel_grain(int64_t per_channel) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(per_channel, 1));
}

// ---- statistics

// Long rows: one pass over x in memory order (rows of a channel are M elements apart, so a
// channel-by-channel sweep would defeat the hardware prefetcher). Each row (in blocks of at most
// kBlock elements) gets its mean and sum of squared deviations from two passes while it sits in
// L1; the rows of a channel are then merged in double with Chan's parallel formula.
template <class T>
void stats_rows(const T* x, int64_t n, int64_t ch, int64_t m, A_<T>* mean, A_<T>* var) {
  using A = A_<T>;
  std::vector<double> row_mean(static_cast<size_t>(n * ch)), row_m2(row_mean.size());
  parallel_for(0, n * ch, std::max<int64_t>(1, kGrainSize / m), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      double count = 0, mu = 0, m2 = 0;
      for (int64_t k = 0; k < m; k += kBlock) {
        const int64_t len = std::min(kBlock, m - k);
        const A bmean = block_sum(x + r * m + k, len) / static_cast<A>(len);
        const double bm2 = block_sqdev(x + r * m + k, len, bmean);
        const double nb = static_cast<double>(len), total = count + nb;
        const double delta = static_cast<double>(bmean) - mu;
        mu += delta * nb / total;
        m2 += bm2 + delta * delta * count * nb / total;
        count = total;
      }
      row_mean[r] = mu;
      row_m2[r] = m2;
    }
  });
  const double mm = static_cast<double>(m);
  for (int64_t c = 0; c < ch; ++c) {
    double count = 0, mu = 0, m2 = 0;
    for (int64_t i = 0; i < n; ++i) {
      const double total = count + mm, delta = row_mean[i * ch + c] - mu;
      mu += delta * mm / total;
      m2 += row_m2[i * ch + c] + delta * delta * count * mm / total;
      count = total;
    }
    mean[c] = static_cast<A>(mu);
    var[c] = static_cast<A>(m2 / count);
  }
}

// Short rows: x is [n, ch * m] with the channels' elements side by side; each thread takes a range
// of channels and sweeps the batch, accumulating per column in double.
template <class T>
void stats_cols(const T* x, int64_t n, int64_t ch, int64_t m, A_<T>* mean, A_<T>* var) {
  const double count = static_cast<double>(n * m);
  const int64_t width = ch * m;
  parallel_for(0, ch, channel_grain(n * m), [&](int64_t b, int64_t e) {
    const int64_t c0 = b * m, c1 = e * m;
    std::vector<double> s(static_cast<size_t>(c1 - c0), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T* row = x + i * width;
      for (int64_t j = c0; j < c1; ++j) s[j - c0] += static_cast<double>(row[j]);
    }
    for (int64_t c = b; c < e; ++c) {
      double t = 0;
      for (int64_t k = 0; k < m; ++k) t += s[(c - b) * m + k];
      mean[c] = static_cast<A_<T>>(t / count);
    }
    std::fill(s.begin(), s.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T* row = x + i * width;
      for (int64_t j = c0; j < c1; ++j) {
        const double d = static_cast<double>(row[j]) - static_cast<double>(mean[j / m]);
        s[j - c0] += d * d;
      }
    }
    for (int64_t c = b; c < e; ++c) {
      double t = 0;
      for (int64_t k = 0; k < m; ++k) t += s[(c - b) * m + k];
      var[c] = static_cast<A_<T>>(t / count);
    }
  });
}

// ---- m == 1: x is [R, C] rows with the channels contiguous (BatchNorm1d on [N, C], or a
// channels-last [N, C, H, W] as [N*H*W, C, 1]). The rows are cut into fixed chunks of kChunk
// (the result does not depend on the thread count); within a chunk each channel is summed in A
// across rows (vectorised over the channels), the chunks' sums in double, in order.
constexpr int64_t kChunk = 256;

/// Per chunk of rows, the per-channel sums of f into part[chunk * C + c] (double). The tasks are
/// (chunk, block of kChanBlock channels) pairs, so few rows with many channels (BatchNorm1d on
/// [16, 8192]) still split over the threads; each channel's sum runs over its chunk's rows in
/// order whatever the split. f(acc, r, c0, c1) adds row r's terms of channels [c0, c1) to acc[c].
constexpr int64_t kChanBlock = 256;

template <class T, class F>
void chunk_sums(int64_t R, int64_t C, std::vector<double>& part, F f) {
  using A = A_<T>;
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  const int64_t blocks = (C + kChanBlock - 1) / kChanBlock;
  part.assign(static_cast<size_t>(chunks * C), 0.0);
  const int64_t task_work = kChunk * std::min(C, kChanBlock);
  parallel_for(0, chunks * blocks, std::max<int64_t>(1, kGrainSize / task_work),
               [&](int64_t b, int64_t e) {
                 std::vector<A> acc(static_cast<size_t>(C));
                 A* __restrict ap = acc.data();
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t k = t / blocks;
                   const int64_t c0 = (t % blocks) * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
                   std::fill(ap + c0, ap + c1, A(0));
                   for (int64_t r = k * kChunk; r < std::min(R, (k + 1) * kChunk); ++r) {
                     f(ap, r, c0, c1);
                   }
                   for (int64_t c = c0; c < c1; ++c) part[k * C + c] = ap[c];
                 }
               });
}

/// Sums the chunks' partial sums per channel, in chunk order.
void fold_chunks(const std::vector<double>& part, int64_t C, std::vector<double>& out) {
  out.assign(static_cast<size_t>(C), 0.0);
  for (size_t i = 0; i < part.size(); ++i) out[i % static_cast<size_t>(C)] += part[i];
}

template <class T>
void stats_one(const T* x, int64_t R, int64_t C, A_<T>* mean, A_<T>* var) {
  using A = A_<T>;
  std::vector<double> part, tot;
  chunk_sums<T>(R, C, part, [&](A* __restrict acc, int64_t r, int64_t c0, int64_t c1) {
    const T* __restrict row = x + r * C;
    for (int64_t c = c0; c < c1; ++c) acc[c] += static_cast<A>(row[c]);
  });
  fold_chunks(part, C, tot);
  for (int64_t c = 0; c < C; ++c) mean[c] = static_cast<A>(tot[c] / static_cast<double>(R));
  chunk_sums<T>(R, C, part, [&](A* __restrict acc, int64_t r, int64_t c0, int64_t c1) {
    const T* __restrict row = x + r * C;
    for (int64_t c = c0; c < c1; ++c) {
      const A d = static_cast<A>(row[c]) - mean[c];
      acc[c] += d * d;
    }
  });
  fold_chunks(part, C, tot);
  for (int64_t c = 0; c < C; ++c) var[c] = static_cast<A>(tot[c] / static_cast<double>(R));
}

/// y[r] = x[r] * s + t over the m elements of one row.
template <class T>
void affine_row(T* __restrict y, const T* __restrict x, int64_t m, A_<T> s, A_<T> t) {
  for (int64_t k = 0; k < m; ++k) y[k] = static_cast<T>(static_cast<A_<T>>(x[k]) * s + t);
}

/// Short rows: y = x * scale[c] + shift[c] over [n, ch * m], rows split over threads.
// kOne: m == 1 ([R, C] rows: BatchNorm1d, or channels-last NHWC as [N*H*W, C, 1]), j is the
// channel without a division.
template <class T, bool kOne = false>
void affine_cols(T* y, const T* x, int64_t n, int64_t ch, int64_t m, const A_<T>* scale,
                 const A_<T>* shift) {
  using A = A_<T>;
  const int64_t width = ch * m;
  parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(width, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) {
                   for (int64_t j = 0; j < width; ++j) {
                     const int64_t c = kOne ? j : j / m;
                     y[i * width + j] =
                         static_cast<T>(static_cast<A>(x[i * width + j]) * scale[c] + shift[c]);
                   }
                 }
               });
}

// Training forward: the statistics, then y = x * scale[c] + shift[c] with the scale and shift
// folded from them, the weight, the bias and eps (two passes over x, one over y).
void train_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                  const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    A* pm = mean.data_ptr<A>();
    A* pv = var.data_ptr<A>();
    A* pi = invstd.data_ptr<A>();
    const A* pw = weight.defined() ? weight.data_ptr<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data_ptr<A>() : nullptr;
    auto coef = [&](int64_t c, A& s, A& t) {
      const A inv = A(1) / std::sqrt(pv[c] + static_cast<A>(eps));
      pi[c] = inv;
      s = pw ? pw[c] * inv : inv;
      t = (pb ? pb[c] : A(0)) - pm[c] * s;
    };
    if (m < kShortRow) {
      if (m == 1) {
        stats_one(px, n, ch, pm, pv);
      } else {
        stats_cols(px, n, ch, m, pm, pv);
      }
      std::vector<A> scale(static_cast<size_t>(ch)), shift(scale.size());
      for (int64_t c = 0; c < ch; ++c) coef(c, scale[c], shift[c]);
      if (m == 1) {
        affine_cols<T, true>(py, px, n, ch, m, scale.data(), shift.data());
      } else {
        affine_cols(py, px, n, ch, m, scale.data(), shift.data());
      }
      return;
    }
    stats_rows(px, n, ch, m, pm, pv);
    std::vector<A> scale(static_cast<size_t>(ch)), shift(scale.size());
    for (int64_t c = 0; c < ch; ++c) coef(c, scale[c], shift[c]);
    parallel_for(0, n * ch, std::max<int64_t>(1, kGrainSize / m), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        affine_row(py + r * m, px + r * m, m, scale[r % ch], shift[r % ch]);
      }
    });
  });
}

// ---- eval: y = x * scale[c] + shift[c]

void affine_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    const T* px = x.data_ptr<T>();
    T* py = y.data_ptr<T>();
    const A* ps = scale.data_ptr<A>();
    const A* pt = shift.data_ptr<A>();
    if (m < kShortRow) {
      if (m == 1) {
        affine_cols<T, true>(py, px, n, ch, m, ps, pt);
      } else {
        affine_cols(py, px, n, ch, m, ps, pt);
      }
      return;
    }
    parallel_for(0, n * ch, std::max<int64_t>(1, kGrainSize / m), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) affine_row(py + r * m, px + r * m, m, ps[r % ch], pt[r % ch]);
    });
  });
}

// ---- backward

// Per channel: G = sum(g), S = sum(g * (x - mean)); grad_bias = G, grad_weight = S * invstd;
// grad_input = k1 * g + k2 * x + k0 with k1 = w * invstd and, from batch statistics,
// k2 = -w * invstd^3 * S / count, k0 = -k1 * G / count - k2 * mean (else k2 = k0 = 0 and the
// input does not enter at all: x_free).
struct GradCoef {
  double k1 = 0, k2 = 0, k0 = 0;
  bool x_free = true;
};

GradCoef grad_coef(double sg, double sgx, double mu, double inv, double w, double count,
                   bool batch_stats) {
  GradCoef k;
  k.k1 = w * inv;
  if (batch_stats) {
    k.x_free = false;
    k.k2 = -w * inv * inv * inv * sgx / count;
    k.k0 = -k.k1 * sg / count - k.k2 * mu;
  }
  return k;
}

template <class T>
void apply_grad_row(T* __restrict gx, const T* __restrict g, const T* __restrict x, int64_t m,
                    const GradCoef& k) {
  using A = A_<T>;
  const A k1 = static_cast<A>(k.k1), k2 = static_cast<A>(k.k2), k0 = static_cast<A>(k.k0);
  if (k.x_free) {  // running statistics: the input does not enter (0 * NaN would)
    for (int64_t i = 0; i < m; ++i) gx[i] = static_cast<T>(k1 * static_cast<A>(g[i]));
    return;
  }
  for (int64_t i = 0; i < m; ++i) {
    gx[i] = static_cast<T>(k1 * static_cast<A>(g[i]) + k2 * static_cast<A>(x[i]) + k0);
  }
}

// Long rows: per-row sums in one pass in memory order, summed per channel in double, then the
// gradient in a second pass in memory order.
template <class T>
void backward_rows(T* gx, A_<T>* gw, A_<T>* gb, const T* g, const T* x, int64_t n, int64_t ch,
                   int64_t m, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                   bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const bool need_sums = gw != nullptr || gb != nullptr || (gx != nullptr && batch_stats);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / (2 * m));
  std::vector<double> row_g(static_cast<size_t>(n * ch), 0.0), row_gx(row_g.size(), 0.0);
  if (need_sums) {
    parallel_for(0, n * ch, grain, [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        double sg = 0, sgx = 0;
        for (int64_t k = 0; k < m; k += kBlock) {
          A a, bb;
          block_grad_sums(g + r * m + k, x + r * m + k, std::min(kBlock, m - k), mean[r % ch], a,
                          bb);
          sg += a;
          sgx += bb;
        }
        row_g[r] = sg;
        row_gx[r] = sgx;
      }
    });
  }
  std::vector<GradCoef> coef(static_cast<size_t>(ch));
  for (int64_t c = 0; c < ch; ++c) {
    double sg = 0, sgx = 0;
    for (int64_t i = 0; i < n; ++i) {
      sg += row_g[i * ch + c];
      sgx += row_gx[i * ch + c];
    }
    if (gb != nullptr) gb[c] = static_cast<A>(sg);
    if (gw != nullptr) gw[c] = static_cast<A>(sgx * invstd[c]);
    coef[c] = grad_coef(sg, sgx, mean[c], invstd[c], w ? w[c] : 1.0, count, batch_stats);
  }
  if (gx == nullptr) return;
  parallel_for(0, n * ch, grain, [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r)
      apply_grad_row(gx + r * m, g + r * m, x + r * m, m, coef[r % ch]);
  });
}

template <class T>
void backward_cols(T* gx, A_<T>* gw, A_<T>* gb, const T* g, const T* x, int64_t n, int64_t ch,
                   int64_t m, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                   bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const int64_t width = ch * m;
  parallel_for(0, ch, channel_grain(2 * n * m), [&](int64_t b, int64_t e) {
    const int64_t c0 = b * m, c1 = e * m;
    std::vector<double> sg(static_cast<size_t>(c1 - c0), 0.0), sgx(sg.size(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        const double gv = static_cast<double>(g[i * width + j]);
        sg[j - c0] += gv;
        sgx[j - c0] += gv * (static_cast<double>(x[i * width + j]) - mean[j / m]);
      }
    }
    std::vector<GradCoef> coef(static_cast<size_t>(e - b));
    for (int64_t c = b; c < e; ++c) {
      double tg = 0, tgx = 0;
      for (int64_t k = 0; k < m; ++k) {
        tg += sg[(c - b) * m + k];
        tgx += sgx[(c - b) * m + k];
      }
      if (gb != nullptr) gb[c] = static_cast<A>(tg);
      if (gw != nullptr) gw[c] = static_cast<A>(tgx * invstd[c]);
      coef[c - b] = grad_coef(tg, tgx, mean[c], invstd[c], w ? w[c] : 1.0, count, batch_stats);
    }
    if (gx == nullptr) return;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        const GradCoef& k = coef[j / m - b];
        const double gi = k.k1 * static_cast<double>(g[i * width + j]);
        gx[i * width + j] = static_cast<T>(
            k.x_free ? gi : gi + k.k2 * static_cast<double>(x[i * width + j]) + k.k0);
      }
    }
  });
}

/// m == 1 (see stats_one): the gradient sums per chunk of rows, then gx = k1 g + k2 x + k0 over
/// the rows, vectorised over the channels.
template <class T>
void backward_one(T* gx, A_<T>* gw, A_<T>* gb, const T* g, const T* x, int64_t R, int64_t C,
                  int64_t /*m*/, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                  bool batch_stats) {
  using A = A_<T>;
  std::vector<double> part, sg, sgx;
  chunk_sums<T>(R, C, part, [&](A* __restrict acc, int64_t r, int64_t c0, int64_t c1) {
    const T* __restrict gr = g + r * C;
    for (int64_t c = c0; c < c1; ++c) acc[c] += static_cast<A>(gr[c]);
  });
  fold_chunks(part, C, sg);
  chunk_sums<T>(R, C, part, [&](A* __restrict acc, int64_t r, int64_t c0, int64_t c1) {
    const T* __restrict gr = g + r * C;
    const T* __restrict xr = x + r * C;
    for (int64_t c = c0; c < c1; ++c) {
      acc[c] += static_cast<A>(gr[c]) * (static_cast<A>(xr[c]) - mean[c]);
    }
  });
  fold_chunks(part, C, sgx);
  std::vector<A> k1(static_cast<size_t>(C)), k2(k1.size()), k0(k1.size());
  for (int64_t c = 0; c < C; ++c) {
    if (gb != nullptr) gb[c] = static_cast<A>(sg[c]);
    if (gw != nullptr) gw[c] = static_cast<A>(sgx[c] * invstd[c]);
    const GradCoef k = grad_coef(sg[c], sgx[c], mean[c], invstd[c], w ? w[c] : 1.0,
                                 static_cast<double>(R), batch_stats);
    k1[c] = static_cast<A>(k.k1);
    k2[c] = static_cast<A>(k.k2);
    k0[c] = static_cast<A>(k.k0);
  }
  if (gx == nullptr) return;
  const A* __restrict p1 = k1.data();
  const A* __restrict p2 = k2.data();
  const A* __restrict p0 = k0.data();
  parallel_for(0, R, std::max<int64_t>(1, kGrainSize / C), [&](int64_t b, int64_t e) {
    for (int64_t r = b; r < e; ++r) {
      T* __restrict o = gx + r * C;
      const T* __restrict gr = g + r * C;
      const T* __restrict xr = x + r * C;
      for (int64_t c = 0; c < C; ++c) {
        o[c] = static_cast<T>(batch_stats ? p1[c] * static_cast<A>(gr[c]) +
                                                p2[c] * static_cast<A>(xr[c]) + p0[c]
                                          : p1[c] * static_cast<A>(gr[c]));
      }
    }
  });
}

void backward_kernel(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& g,
                     const Tensor& x, const Tensor& mean, const Tensor& invstd,
                     const Tensor& weight, bool batch_stats) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    T* pgx = gx.defined() ? gx.data_ptr<T>() : nullptr;
    A* pgw = gw.defined() ? gw.data_ptr<A>() : nullptr;
    A* pgb = gb.defined() ? gb.data_ptr<A>() : nullptr;
    const A* pw = weight.defined() ? weight.data_ptr<A>() : nullptr;
    auto run = m == 1 ? &backward_one<T> : m < kShortRow ? &backward_cols<T> : &backward_rows<T>;
    run(pgx, pgw, pgb, g.data_ptr<T>(), x.data_ptr<T>(), n, ch, m, mean.data_ptr<A>(),
        invstd.data_ptr<A>(), pw, batch_stats);
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(batch_norm_train_stub, CPU, &train_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CPU, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CPU, &backward_kernel);

}  // namespace ignis::cpu
