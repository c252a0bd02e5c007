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

#include "core/tensor_impl.h"
#include "cpu/lane_fold.h"
#include "cpu/parallel.h"
#include "ops/functors.h"
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
// (the result does not depend on the thread count). A task is a chunk and a block of at most
// kChanBlock channels, so few rows with many channels (BatchNorm1d on [16, 8192]) still split
// over the threads; it sweeps its rows in memory order, vectorised over the channels, and sweeps
// them again while they are in cache when a statistic needs the first sweep's result. The
// chunks' results are merged per channel in double, in chunk order.
// A row of 64 channels is four vectors: too short a loop to pay its call and set-up. So every
// m == 1 pass runs over tiles of whole rows (kTile / C of them, when a task spans all the
// channels) as one flat loop, against per-channel vectors repeated once per row of the tile.
constexpr int64_t kChunk = 256;
constexpr int64_t kChanBlock = 256;
constexpr int64_t kTile = 1024;

/// Rows per tile for a task over w of the C channels (one row unless it spans them all).
inline int64_t tile_rows(int64_t w, int64_t C) {
  return w == C && C > 0 ? std::max<int64_t>(1, kTile / C) : 1;
}

/// Calls f(r, len) over rows [r0, r1): tiles of b rows as spans of len = b * w elements, then
/// the rows left over one at a time (len = w).
template <class F>
void for_each_span(int64_t r0, int64_t r1, int64_t b, int64_t w, F f) {
  int64_t r = r0;
  for (; r + b <= r1; r += b) f(r, b * w);
  for (; r < r1; ++r) f(r, w);
}

/// v[0..w) repeated b times.
template <class A>
std::vector<A> tiled(const A* v, int64_t w, int64_t b) {
  std::vector<A> t(static_cast<size_t>(w * b));
  for (int64_t j = 0; j < b; ++j) std::copy(v, v + w, t.begin() + j * w);
  return t;
}

/// out[c] = sum over the b rows of a tile of acc[j * w + c], in order.
template <class A>
void fold_tile(const A* acc, int64_t w, int64_t b, A* out) {
  std::copy(acc, acc + w, out);
  for (int64_t j = 1; j < b; ++j)
    for (int64_t c = 0; c < w; ++c) out[c] += acc[j * w + c];
}

/// Runs f(r, len) over the R rows of an [R, C] block on the threads, as tiles of whole rows.
template <class F>
void for_each_row_span(int64_t R, int64_t C, F f) {
  const int64_t b = tile_rows(C, C);
  const int64_t tiles = (R + b - 1) / b;
  parallel_for(
      0, tiles, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(b * C, 1)),
      [&](int64_t t0, int64_t t1) { for_each_span(t0 * b, std::min(R, t1 * b), b, C, f); });
}

// Row helpers: restrict-qualified parameters so that GCC vectorises over the channels.
template <class T>
void add_row(A_<T>* __restrict acc, const T* __restrict x, int64_t n) {
  for (int64_t c = 0; c < n; ++c) acc[c] += static_cast<A_<T>>(x[c]);
}

template <class T>
void add_sqdev_row(A_<T>* __restrict acc, const T* __restrict x, const A_<T>* __restrict mu,
                   int64_t n) {
  for (int64_t c = 0; c < n; ++c) {
    const A_<T> d = static_cast<A_<T>>(x[c]) - mu[c];
    acc[c] += d * d;
  }
}

template <class T>
void add_grad_row(A_<T>* __restrict sg, A_<T>* __restrict sgx, const T* __restrict g,
                  const T* __restrict x, const A_<T>* __restrict mu, int64_t n) {
  for (int64_t c = 0; c < n; ++c) sg[c] += static_cast<A_<T>>(g[c]);
  for (int64_t c = 0; c < n; ++c) {
    sgx[c] += static_cast<A_<T>>(g[c]) * (static_cast<A_<T>>(x[c]) - mu[c]);
  }
}

/// Runs f(k, r0, r1, c0, c1) for every (chunk k of rows [r0, r1), channel block [c0, c1)) of an
/// [R, C] block, over the threads.
template <class F>
void for_each_chunk(int64_t R, int64_t C, F f) {
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  const int64_t blocks = (C + kChanBlock - 1) / kChanBlock;
  const int64_t task_work = kChunk * std::max<int64_t>(1, std::min(C, kChanBlock));
  parallel_for(0, chunks * blocks, std::max<int64_t>(1, kGrainSize / task_work),
               [&](int64_t b, int64_t e) {
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t k = t / blocks;
                   const int64_t c0 = (t % blocks) * kChanBlock, c1 = std::min(C, c0 + kChanBlock);
                   f(k, k * kChunk, std::min(R, (k + 1) * kChunk), c0, c1);
                 }
               });
}

/// Per channel, the mean and biased variance: per chunk a mean and a sum of squared deviations
/// from it (two sweeps over the chunk, the second from cache), then merged in double: the mean
/// weighted by the chunks' rows, and M2 = sum(m2_k) + sum(n_k * (mean_k - mean)^2). The merge
/// runs over chunks in order, vectorised over the channels.
template <class T>
void stats_one(const T* x, int64_t R, int64_t C, A_<T>* mean, A_<T>* var) {
  using A = A_<T>;
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  // Every entry is written by its chunk's task. (From the caching allocator: a fresh heap
  // block of this size would page-fault on every call.)
  const Tensor parts = make_tensor({2 * chunks * C}, kFloat64);
  double* part_mean = parts.data_ptr<double>();
  double* part_m2 = part_mean + chunks * C;
  for_each_chunk(R, C, [&](int64_t k, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
    const int64_t w = c1 - c0, b = tile_rows(w, C);
    A acc[kTile], mu[kChanBlock], m2[kChanBlock];
    std::fill(acc, acc + b * w, A(0));
    for_each_span(r0, r1, b, w, [&](int64_t r, int64_t len) { add_row(acc, x + r * C + c0, len); });
    fold_tile(acc, w, b, mu);
    for (int64_t c = 0; c < w; ++c) mu[c] /= static_cast<A>(r1 - r0);
    const std::vector<A> mu_t = tiled(mu, w, b);
    std::fill(acc, acc + b * w, A(0));
    for_each_span(r0, r1, b, w, [&](int64_t r, int64_t len) {
      add_sqdev_row(acc, x + r * C + c0, mu_t.data(), len);
    });
    fold_tile(acc, w, b, m2);
    for (int64_t c = 0; c < w; ++c) {
      part_mean[k * C + c0 + c] = mu[c];
      part_m2[k * C + c0 + c] = m2[c];
    }
  });
  auto rows_of = [&](int64_t k) {
    return static_cast<double>(std::min(R, (k + 1) * kChunk) - k * kChunk);
  };
  std::vector<double> mu(static_cast<size_t>(C), 0.0), m2(mu.size(), 0.0);
  for (int64_t k = 0; k < chunks; ++k) {
    const double nk = rows_of(k);
    for (int64_t c = 0; c < C; ++c) mu[c] += nk * part_mean[k * C + c];
  }
  const double inv_r = 1.0 / static_cast<double>(R);
  for (int64_t c = 0; c < C; ++c) mu[c] *= inv_r;
  for (int64_t k = 0; k < chunks; ++k) {
    const double nk = rows_of(k);
    for (int64_t c = 0; c < C; ++c) {
      const double d = part_mean[k * C + c] - mu[c];
      m2[c] += part_m2[k * C + c] + nk * d * d;
    }
  }
  for (int64_t c = 0; c < C; ++c) {
    mean[c] = static_cast<A>(mu[c]);
    var[c] = static_cast<A>(m2[c] * inv_r);
  }
}

// ---- the normalisation pass: y = (x - center[c]) * scale[c] + shift[c], then the epilogue of
// the fused batch_norm_relu: + other (the residual, x's shape and layout) and a ReLU. Training
// centres on the batch mean and shifts by the bias: a channel of equal values gives exactly the
// bias, where x * scale + (bias - mean * scale) would leave the rounding error of two products
// of mean's size (1e25 for values of 1e30). Eval passes its folded shift and a centre of 0.

/// Per-channel vectors of the pass.
template <class A>
struct ChannelAffine {
  const A* center;
  const A* scale;
  const A* shift;
};

/// One value of the pass, in the compute type.
template <bool kOther, bool kRelu, class T>
inline T affine_value(T x, T c, T s, T t, T other) {
  T v = (x - c) * s + t;
  if constexpr (kOther) v += other;
  if constexpr (kRelu) v = fn::Relu{}(v);
  return v;
}

/// A row of m elements of one channel (long rows).
template <bool kOther, bool kRelu, class T>
void affine_row(T* __restrict y, const T* __restrict x, const T* __restrict o, int64_t m, A_<T> c,
                A_<T> s, A_<T> t) {
  using A = A_<T>;
  for (int64_t k = 0; k < m; ++k) {
    y[k] = static_cast<T>(affine_value<kOther, kRelu>(static_cast<A>(x[k]), c, s, t,
                                                      kOther ? static_cast<A>(o[k]) : A(0)));
  }
}

/// A row of C channels side by side (m == 1).
template <bool kOther, bool kRelu, class T>
void affine_row_one(T* __restrict y, const T* __restrict x, const T* __restrict o,
                    const A_<T>* __restrict c, const A_<T>* __restrict s, const A_<T>* __restrict t,
                    int64_t C) {
  using A = A_<T>;
  for (int64_t j = 0; j < C; ++j) {
    y[j] = static_cast<T>(affine_value<kOther, kRelu>(static_cast<A>(x[j]), c[j], s[j], t[j],
                                                      kOther ? static_cast<A>(o[j]) : A(0)));
  }
}

/// The pass over x as [n, ch, m] in memory order, split over the threads: rows of a channel
/// (m >= kShortRow), rows of channels side by side (m == 1), or [n, ch * m] rows (short rows).
template <bool kOther, bool kRelu, class T>
void affine_pass(T* y, const T* x, const T* o, int64_t n, int64_t ch, int64_t m,
                 const ChannelAffine<A_<T>>& k) {
  using A = A_<T>;
  if (m >= kShortRow) {
    parallel_for(0, n * ch, std::max<int64_t>(1, kGrainSize / m), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        const int64_t c = r % ch;
        affine_row<kOther, kRelu>(y + r * m, x + r * m, kOther ? o + r * m : nullptr, m,
                                  k.center[c], k.scale[c], k.shift[c]);
      }
    });
    return;
  }
  if (m == 1) {
    const int64_t b = tile_rows(ch, ch);
    const std::vector<A> c = tiled(k.center, ch, b), s = tiled(k.scale, ch, b),
                         t = tiled(k.shift, ch, b);
    for_each_row_span(n, ch, [&](int64_t r, int64_t len) {
      const int64_t at = r * ch;
      affine_row_one<kOther, kRelu>(y + at, x + at, kOther ? o + at : nullptr, c.data(), s.data(),
                                    t.data(), len);
    });
    return;
  }
  const int64_t width = ch * m;
  parallel_for(0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(width, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t i = b; i < e; ++i) {
                   const int64_t at = i * width;
                   for (int64_t j = 0; j < width; ++j) {
                     const int64_t c = j / m;
                     y[at + j] = static_cast<T>(affine_value<kOther, kRelu>(
                         static_cast<A>(x[at + j]), k.center[c], k.scale[c], k.shift[c],
                         kOther ? static_cast<A>(o[at + j]) : A(0)));
                   }
                 }
               });
}

/// affine_pass with the epilogue chosen at run time (o null: no residual).
template <class T>
void affine_pass(T* y, const T* x, const T* o, bool relu, int64_t n, int64_t ch, int64_t m,
                 const ChannelAffine<A_<T>>& k) {
  if (o != nullptr) {
    if (relu)
      affine_pass<true, true>(y, x, o, n, ch, m, k);
    else
      affine_pass<true, false>(y, x, o, n, ch, m, k);
  } else {
    if (relu)
      affine_pass<false, true>(y, x, o, n, ch, m, k);
    else
      affine_pass<false, false>(y, x, o, n, ch, m, k);
  }
}

// Training forward: the statistics (one pass over x), then the normalisation pass centred on the
// mean, with the scale from the variance, eps and the weight, and the bias as the shift.
void train_impl(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                const Tensor& other, bool relu) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    const T* px = x.data_ptr<T>();
    A* pm = mean.data_ptr<A>();
    A* pv = var.data_ptr<A>();
    A* pi = invstd.data_ptr<A>();
    const A* pw = weight.defined() ? weight.data_ptr<A>() : nullptr;
    const A* pb = bias.defined() ? bias.data_ptr<A>() : nullptr;
    if (m == 1) {
      stats_one(px, n, ch, pm, pv);
    } else if (m < kShortRow) {
      stats_cols(px, n, ch, m, pm, pv);
    } else {
      stats_rows(px, n, ch, m, pm, pv);
    }
    std::vector<A> scale(static_cast<size_t>(ch)), shift(scale.size());
    for (int64_t c = 0; c < ch; ++c) {
      const A inv = A(1) / std::sqrt(pv[c] + static_cast<A>(eps));
      pi[c] = inv;
      scale[c] = pw ? pw[c] * inv : inv;
      shift[c] = pb ? pb[c] : A(0);
    }
    affine_pass(y.data_ptr<T>(), px, other.defined() ? other.data_ptr<T>() : nullptr, relu, n, ch,
                m, ChannelAffine<A>{pm, scale.data(), shift.data()});
  });
}

void train_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                  const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  train_impl(y, mean, var, invstd, x, weight, bias, eps, Tensor(), false);
}

void train_relu_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                       const Tensor& x, const Tensor& weight, const Tensor& bias, double eps,
                       const Tensor& other) {
  train_impl(y, mean, var, invstd, x, weight, bias, eps, other, true);
}

// ---- eval: the normalisation pass with the given scale and shift

void affine_impl(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift,
                 const Tensor& other, bool relu) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = A_<T>;
    const std::vector<A> zero(static_cast<size_t>(x.size(1)), A(0));
    affine_pass(y.data_ptr<T>(), x.data_ptr<T>(), other.defined() ? other.data_ptr<T>() : nullptr,
                relu, x.size(0), x.size(1), x.size(2),
                ChannelAffine<A>{zero.data(), scale.data_ptr<A>(), shift.data_ptr<A>()});
  });
}

void affine_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  affine_impl(y, x, scale, shift, Tensor(), false);
}

void affine_relu_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift,
                        const Tensor& other) {
  affine_impl(y, x, scale, shift, other, true);
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

/// The gradient reaching the normalisation: g, or for batch_norm_relu g where the output y > 0
/// (ReLU's backward), which is also the residual's gradient go when that is wanted. The first
/// pass writes go; the second reads it back, or masks g again into a buffer.
template <class T>
struct GradIn {
  const T* g;
  const T* y = nullptr;  // the fused node's output: the ReLU's mask
  T* go = nullptr;       // the residual's gradient, written by the first pass
  bool needs_first_pass(bool need_sums) const { return need_sums || go != nullptr; }
  /// len elements from offset at: g itself, or masked into go (first pass) or buf.
  const T* at(int64_t off, int64_t len, T* buf, bool first_pass) const {
    if (y == nullptr) return g + off;
    if (go != nullptr && !first_pass) return go + off;
    T* dst = go != nullptr ? go + off : buf;
    mask_row(dst, g + off, y + off, len);
    return dst;
  }
  static void mask_row(T* __restrict dst, const T* __restrict g, const T* __restrict y,
                       int64_t len) {
    using A = A_<T>;
    for (int64_t i = 0; i < len; ++i) {
      dst[i] = static_cast<T>(fn::ThresholdBackward{}(static_cast<A>(g[i]), static_cast<A>(y[i])));
    }
  }
  /// A buffer for at(): empty when nothing is masked into one.
  std::vector<T> buffer(int64_t len) const {
    return std::vector<T>(y != nullptr ? static_cast<size_t>(len) : 0);
  }
};

// Long rows: per-row sums in one pass in memory order, summed per channel in double, then the
// gradient in a second pass in memory order; both in blocks of kBlock.
template <class T>
void backward_rows(T* gx, A_<T>* gw, A_<T>* gb, const GradIn<T>& gi, const T* x, int64_t n,
                   int64_t ch, int64_t m, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                   bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const bool need_sums = gw != nullptr || gb != nullptr || (gx != nullptr && batch_stats);
  const int64_t grain = std::max<int64_t>(1, kGrainSize / (2 * m));
  std::vector<double> row_g(static_cast<size_t>(n * ch), 0.0), row_gx(row_g.size(), 0.0);
  if (gi.needs_first_pass(need_sums)) {
    parallel_for(0, n * ch, grain, [&](int64_t b, int64_t e) {
      std::vector<T> buf = gi.buffer(std::min(kBlock, m));
      for (int64_t r = b; r < e; ++r) {
        double sg = 0, sgx = 0;
        for (int64_t k = 0; k < m; k += kBlock) {
          const int64_t len = std::min(kBlock, m - k);
          const T* g = gi.at(r * m + k, len, buf.data(), true);
          if (!need_sums) continue;
          A a, bb;
          block_grad_sums(g, x + r * m + k, len, mean[r % ch], a, bb);
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
    std::vector<T> buf = gi.buffer(std::min(kBlock, m));
    for (int64_t r = b; r < e; ++r) {
      for (int64_t k = 0; k < m; k += kBlock) {
        const int64_t len = std::min(kBlock, m - k);
        apply_grad_row(gx + r * m + k, gi.at(r * m + k, len, buf.data(), false), x + r * m + k, len,
                       coef[r % ch]);
      }
    }
  });
}

template <class T>
void backward_cols(T* gx, A_<T>* gw, A_<T>* gb, const GradIn<T>& gi, const T* x, int64_t n,
                   int64_t ch, int64_t m, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                   bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const int64_t width = ch * m;
  // The gradient reaching the normalisation at i (GradIn::at, one element).
  auto grad = [&](int64_t i, bool first_pass) {
    T one;
    return static_cast<double>(*gi.at(i, 1, &one, first_pass));
  };
  parallel_for(0, ch, channel_grain(2 * n * m), [&](int64_t b, int64_t e) {
    const int64_t c0 = b * m, c1 = e * m;
    std::vector<double> sg(static_cast<size_t>(c1 - c0), 0.0), sgx(sg.size(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        const double gv = grad(i * width + j, true);
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
        const double gk = k.k1 * grad(i * width + j, false);
        gx[i * width + j] = static_cast<T>(
            k.x_free ? gk : gk + k.k2 * static_cast<double>(x[i * width + j]) + k.k0);
      }
    }
  });
}

/// gx = k1 * g + k2 * x + k0 over one [C] row (k2 and k0 null: running statistics, gx = k1 * g).
template <class T>
void grad_row_one(T* __restrict gx, const T* __restrict g, const T* __restrict x,
                  const A_<T>* __restrict k1, const A_<T>* __restrict k2,
                  const A_<T>* __restrict k0, int64_t n) {
  using A = A_<T>;
  if (k2 == nullptr) {
    for (int64_t c = 0; c < n; ++c) gx[c] = static_cast<T>(k1[c] * static_cast<A>(g[c]));
    return;
  }
  for (int64_t c = 0; c < n; ++c) {
    gx[c] = static_cast<T>(k1[c] * static_cast<A>(g[c]) + k2[c] * static_cast<A>(x[c]) + k0[c]);
  }
}

/// m == 1 (see stats_one): the gradient sums per chunk of rows in one sweep over g and x, then
/// gx = k1 g + k2 x + k0 over the rows, vectorised over the channels.
template <class T>
void backward_one(T* gx, A_<T>* gw, A_<T>* gb, const GradIn<T>& gi, const T* x, int64_t R,
                  int64_t C, int64_t /*m*/, const A_<T>* mean, const A_<T>* invstd, const A_<T>* w,
                  bool batch_stats) {
  using A = A_<T>;
  const bool need_sums = gw != nullptr || gb != nullptr || (gx != nullptr && batch_stats);
  const int64_t chunks = (R + kChunk - 1) / kChunk;
  // Written by every chunk's task when the sums are needed, read only then.
  const Tensor parts = make_tensor({need_sums ? 2 * chunks * C : 0}, kFloat64);
  double* part_g = parts.data_ptr<double>();
  double* part_gx = part_g + (need_sums ? chunks * C : 0);
  if (gi.needs_first_pass(need_sums)) {
    for_each_chunk(R, C, [&](int64_t k, int64_t r0, int64_t r1, int64_t c0, int64_t c1) {
      const int64_t wd = c1 - c0, b = tile_rows(wd, C);
      A acc_g[kTile], acc_gx[kTile], sg[kChanBlock], sgx[kChanBlock];
      T buf[kTile];
      std::fill(acc_g, acc_g + b * wd, A(0));
      std::fill(acc_gx, acc_gx + b * wd, A(0));
      const std::vector<A> mean_t = tiled(mean + c0, wd, b);
      for_each_span(r0, r1, b, wd, [&](int64_t r, int64_t len) {
        const T* g = gi.at(r * C + c0, len, buf, true);
        if (need_sums) add_grad_row(acc_g, acc_gx, g, x + r * C + c0, mean_t.data(), len);
      });
      if (!need_sums) return;
      fold_tile(acc_g, wd, b, sg);
      fold_tile(acc_gx, wd, b, sgx);
      for (int64_t c = 0; c < wd; ++c) {
        part_g[k * C + c0 + c] = sg[c];
        part_gx[k * C + c0 + c] = sgx[c];
      }
    });
  }
  std::vector<double> sg(static_cast<size_t>(C), 0.0), sgx(sg.size(), 0.0);
  if (need_sums) {
    for (int64_t k = 0; k < chunks; ++k) {
      for (int64_t c = 0; c < C; ++c) {
        sg[c] += part_g[k * C + c];
        sgx[c] += part_gx[k * C + c];
      }
    }
  }
  std::vector<A> k1(static_cast<size_t>(C)), k2(k1.size()), k0(k1.size());
  for (int64_t c = 0; c < C; ++c) {
    if (gb != nullptr) gb[c] = static_cast<A>(sg[c]);
    if (gw != nullptr) gw[c] = static_cast<A>(sgx[c] * invstd[c]);
    const GradCoef kc = grad_coef(sg[c], sgx[c], mean[c], invstd[c], w ? w[c] : 1.0,
                                  static_cast<double>(R), batch_stats);
    k1[c] = static_cast<A>(kc.k1);
    k2[c] = static_cast<A>(kc.k2);
    k0[c] = static_cast<A>(kc.k0);
  }
  if (gx == nullptr) return;
  const int64_t b = tile_rows(C, C);
  const std::vector<A> k1_t = tiled(k1.data(), C, b), k2_t = tiled(k2.data(), C, b),
                       k0_t = tiled(k0.data(), C, b);
  const A* p2 = batch_stats ? k2_t.data() : nullptr;
  const A* p0 = batch_stats ? k0_t.data() : nullptr;
  for_each_row_span(R, C, [&](int64_t r, int64_t len) {
    T buf[kTile];
    std::vector<T> big = len > kTile ? gi.buffer(len) : std::vector<T>();
    const T* g = gi.at(r * C, len, len > kTile ? big.data() : buf, false);
    grad_row_one(gx + r * C, g, x + r * C, k1_t.data(), p2, p0, len);
  });
}

// The backward of batch_norm (y and go undefined) and of batch_norm_relu (y its output, go the
// residual's gradient when wanted).
void backward_impl(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& g,
                   const Tensor& x, const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                   bool batch_stats, const Tensor& y, const Tensor& go) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    T* pgx = gx.defined() ? gx.data_ptr<T>() : nullptr;
    A* pgw = gw.defined() ? gw.data_ptr<A>() : nullptr;
    A* pgb = gb.defined() ? gb.data_ptr<A>() : nullptr;
    const A* pw = weight.defined() ? weight.data_ptr<A>() : nullptr;
    GradIn<T> gi{g.data_ptr<T>(), y.defined() ? y.data_ptr<T>() : nullptr,
                 go.defined() ? go.data_ptr<T>() : nullptr};
    auto run = m == 1 ? &backward_one<T> : m < kShortRow ? &backward_cols<T> : &backward_rows<T>;
    run(pgx, pgw, pgb, gi, x.data_ptr<T>(), n, ch, m, mean.data_ptr<A>(), invstd.data_ptr<A>(), pw,
        batch_stats);
  });
}

void backward_kernel(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& g,
                     const Tensor& x, const Tensor& mean, const Tensor& invstd,
                     const Tensor& weight, bool batch_stats) {
  backward_impl(gx, gw, gb, g, x, mean, invstd, weight, batch_stats, Tensor(), Tensor());
}

void backward_relu_kernel(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& go,
                          const Tensor& g, const Tensor& y, const Tensor& x, const Tensor& mean,
                          const Tensor& invstd, const Tensor& weight, bool batch_stats) {
  backward_impl(gx, gw, gb, g, x, mean, invstd, weight, batch_stats, y, go);
}

}  // namespace

IGNIS_REGISTER_KERNEL(batch_norm_train_stub, CPU, &train_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CPU, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CPU, &backward_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_relu_train_stub, CPU, &train_relu_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_relu_stub, CPU, &affine_relu_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_relu_backward_stub, CPU, &backward_relu_kernel);

}  // namespace ignis::cpu
