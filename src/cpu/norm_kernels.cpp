// CPU kernels of batch norm on x seen as a contiguous [N, C, M] block.
// Work is split over channels (each thread owns whole channels: no reduction
// across threads). A channel is N rows of M contiguous elements; rows are
// summed in blocks of up to kBlock elements with kLanes independent
// accumulators in the compute type (vectorised), and the block sums are added
// in double, so float32 statistics stay accurate for large batches. When M is
// small (BatchNorm1d on [N, C]: M = 1) the loops run across channels instead,
// which are contiguous in memory then.
#include <algorithm>
#include <vector>

#include "cpu/parallel.h"
#include "ops/norm.h"

namespace ignis::cpu {
namespace {

constexpr int kLanes = 16;
constexpr int64_t kBlock = 4096;
// Rows shorter than this take the across-channel loops.
constexpr int64_t kShortRow = 16;

template <class T> using A_ = acc_t<T>;

/// sum(p[0..m)) in A, vectorised.
template <class T> A_<T> block_sum(const T *__restrict p, int64_t m) {
  using A = A_<T>;
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    for (int j = 0; j < kLanes; ++j)
      acc[j] += static_cast<A>(p[i + j]);
  }
  for (; i < m; ++i)
    acc[0] += static_cast<A>(p[i]);
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j)
      acc[j] += acc[j + w];
  }
  return acc[0];
}

/// sum((p - mu)^2) in A, vectorised.
template <class T>
A_<T> block_sqdev(const T *__restrict p, int64_t m, A_<T> mu) {
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
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j)
      acc[j] += acc[j + w];
  }
  return acc[0];
}

/// sum(g) and sum(g * (x - mu)) in A, vectorised.
template <class T>
void block_grad_sums(const T *__restrict g, const T *__restrict x, int64_t m,
                     A_<T> mu, A_<T> &sg, A_<T> &sgx) {
  using A = A_<T>;
  A a[kLanes] = {}, b[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= m; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A gv = static_cast<A>(g[i + j]);
      a[j] += gv;
      b[j] += gv * (static_cast<A>(x[i + j]) - mu);
    }
  }
  for (; i < m; ++i) {
    const A gv = static_cast<A>(g[i]);
    a[0] += gv;
    b[0] += gv * (static_cast<A>(x[i]) - mu);
  }
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) {
      a[j] += a[j + w];
      b[j] += b[j + w];
    }
  }
  sg = a[0];
  sgx = b[0];
}

/// Channels per parallel chunk: enough elements to be worth a thread.
int64_t channel_grain(int64_t per_channel) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(per_channel, 1));
}

// ---- statistics

template <class T>
void stats_rows(const T *x, int64_t n, int64_t ch, int64_t m, A_<T> *mean,
                A_<T> *var) {
  const double count = static_cast<double>(n * m);
  parallel_for(0, ch, channel_grain(n * m), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double s = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T *row = x + (i * ch + c) * m;
        for (int64_t k = 0; k < m; k += kBlock)
          s += block_sum(row + k, std::min(kBlock, m - k));
      }
      const A_<T> mu = static_cast<A_<T>>(s / count);
      double q = 0;
      for (int64_t i = 0; i < n; ++i) {
        const T *row = x + (i * ch + c) * m;
        for (int64_t k = 0; k < m; k += kBlock) {
          q += block_sqdev(row + k, std::min(kBlock, m - k), mu);
        }
      }
      mean[c] = mu;
      var[c] = static_cast<A_<T>>(q / count);
    }
  });
}

// Short rows: x is [n, ch * m] with the channels' elements side by side; each
// thread takes a range of channels and sweeps the batch, accumulating per
// column in double.
template <class T>
void stats_cols(const T *x, int64_t n, int64_t ch, int64_t m, A_<T> *mean,
                A_<T> *var) {
  const double count = static_cast<double>(n * m);
  const int64_t width = ch * m;
  parallel_for(0, ch, channel_grain(n * m), [&](int64_t b, int64_t e) {
    const int64_t c0 = b * m, c1 = e * m;
    std::vector<double> s(static_cast<size_t>(c1 - c0), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T *row = x + i * width;
      for (int64_t j = c0; j < c1; ++j)
        s[j - c0] += static_cast<double>(row[j]);
    }
    for (int64_t c = b; c < e; ++c) {
      double t = 0;
      for (int64_t k = 0; k < m; ++k)
        t += s[(c - b) * m + k];
      mean[c] = static_cast<A_<T>>(t / count);
    }
    std::fill(s.begin(), s.end(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      const T *row = x + i * width;
      for (int64_t j = c0; j < c1; ++j) {
        const double d =
            static_cast<double>(row[j]) - static_cast<double>(mean[j / m]);
        s[j - c0] += d * d;
      }
    }
    for (int64_t c = b; c < e; ++c) {
      double t = 0;
      for (int64_t k = 0; k < m; ++k)
        t += s[(c - b) * m + k];
      var[c] = static_cast<A_<T>>(t / count);
    }
  });
}

void stats_kernel(const Tensor &mean, const Tensor &var, const Tensor &x) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    auto *pm = mean.data_ptr<A_<T>>();
    auto *pv = var.data_ptr<A_<T>>();
    if (m < kShortRow) {
      stats_cols(x.data_ptr<T>(), n, ch, m, pm, pv);
    } else {
      stats_rows(x.data_ptr<T>(), n, ch, m, pm, pv);
    }
  });
}

// ---- y = x * scale[c] + shift[c]

void affine_kernel(const Tensor &y, const Tensor &x, const Tensor &scale,
                   const Tensor &shift) {
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    const T *px = x.data_ptr<T>();
    T *py = y.data_ptr<T>();
    const A *ps = scale.data_ptr<A>();
    const A *pt = shift.data_ptr<A>();
    if (m < kShortRow) {
      const int64_t width = ch * m;
      parallel_for(
          0, n, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(width, 1)),
          [&](int64_t b, int64_t e) {
            for (int64_t i = b; i < e; ++i) {
              for (int64_t j = 0; j < width; ++j) {
                const int64_t c = j / m;
                py[i * width + j] = static_cast<T>(
                    static_cast<A>(px[i * width + j]) * ps[c] + pt[c]);
              }
            }
          });
      return;
    }
    parallel_for(0, n * ch, std::max<int64_t>(1, kGrainSize / m),
                 [&](int64_t b, int64_t e) {
                   for (int64_t r = b; r < e; ++r) {
                     const A s = ps[r % ch], t = pt[r % ch];
                     const T *__restrict xr = px + r * m;
                     T *__restrict yr = py + r * m;
                     for (int64_t k = 0; k < m; ++k)
                       yr[k] = static_cast<T>(static_cast<A>(xr[k]) * s + t);
                   }
                 });
  });
}

// ---- backward

// Per channel: G = sum(g), S = sum(g * (x - mean)); grad_bias = G, grad_weight
// = S * invstd; grad_input = k1 * g + k2 * x + k0 with k1 = w * invstd and,
// from batch statistics, k2 = -w * invstd^3 * S / count, k0 = -k1 * G / count -
// k2 * mean (else k2 = k0 = 0).
struct GradCoef {
  double k1 = 0, k2 = 0, k0 = 0;
};

GradCoef grad_coef(double sg, double sgx, double mu, double inv, double w,
                   double count, bool batch_stats) {
  GradCoef k;
  k.k1 = w * inv;
  if (batch_stats) {
    k.k2 = -w * inv * inv * inv * sgx / count;
    k.k0 = -k.k1 * sg / count - k.k2 * mu;
  }
  return k;
}

template <class T>
void apply_grad_row(T *__restrict gx, const T *__restrict g,
                    const T *__restrict x, int64_t m, const GradCoef &k) {
  using A = A_<T>;
  const A k1 = static_cast<A>(k.k1), k2 = static_cast<A>(k.k2),
          k0 = static_cast<A>(k.k0);
  for (int64_t i = 0; i < m; ++i) {
    gx[i] = static_cast<T>(k1 * static_cast<A>(g[i]) +
                           k2 * static_cast<A>(x[i]) + k0);
  }
}

template <class T>
void backward_rows(T *gx, A_<T> *gw, A_<T> *gb, const T *g, const T *x,
                   int64_t n, int64_t ch, int64_t m, const A_<T> *mean,
                   const A_<T> *invstd, const A_<T> *w, bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const bool need_sums =
      gw != nullptr || gb != nullptr || (gx != nullptr && batch_stats);
  parallel_for(0, ch, channel_grain(2 * n * m), [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      double sg = 0, sgx = 0;
      if (need_sums) {
        for (int64_t i = 0; i < n; ++i) {
          const int64_t off = (i * ch + c) * m;
          for (int64_t k = 0; k < m; k += kBlock) {
            A a, bb;
            block_grad_sums(g + off + k, x + off + k, std::min(kBlock, m - k),
                            mean[c], a, bb);
            sg += a;
            sgx += bb;
          }
        }
      }
      if (gb != nullptr)
        gb[c] = static_cast<A>(sg);
      if (gw != nullptr)
        gw[c] = static_cast<A>(sgx * invstd[c]);
      if (gx == nullptr)
        continue;
      const GradCoef k = grad_coef(sg, sgx, mean[c], invstd[c], w ? w[c] : 1.0,
                                   count, batch_stats);
      for (int64_t i = 0; i < n; ++i) {
        const int64_t off = (i * ch + c) * m;
        apply_grad_row(gx + off, g + off, x + off, m, k);
      }
    }
  });
}

template <class T>
void backward_cols(T *gx, A_<T> *gw, A_<T> *gb, const T *g, const T *x,
                   int64_t n, int64_t ch, int64_t m, const A_<T> *mean,
                   const A_<T> *invstd, const A_<T> *w, bool batch_stats) {
  using A = A_<T>;
  const double count = static_cast<double>(n * m);
  const int64_t width = ch * m;
  parallel_for(0, ch, channel_grain(2 * n * m), [&](int64_t b, int64_t e) {
    const int64_t c0 = b * m, c1 = e * m;
    std::vector<double> sg(static_cast<size_t>(c1 - c0), 0.0),
        sgx(sg.size(), 0.0);
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        const double gv = static_cast<double>(g[i * width + j]);
        sg[j - c0] += gv;
        sgx[j - c0] +=
            gv * (static_cast<double>(x[i * width + j]) - mean[j / m]);
      }
    }
    std::vector<GradCoef> coef(static_cast<size_t>(e - b));
    for (int64_t c = b; c < e; ++c) {
      double tg = 0, tgx = 0;
      for (int64_t k = 0; k < m; ++k) {
        tg += sg[(c - b) * m + k];
        tgx += sgx[(c - b) * m + k];
      }
      if (gb != nullptr)
        gb[c] = static_cast<A>(tg);
      if (gw != nullptr)
        gw[c] = static_cast<A>(tgx * invstd[c]);
      coef[c - b] = grad_coef(tg, tgx, mean[c], invstd[c], w ? w[c] : 1.0,
                              count, batch_stats);
    }
    if (gx == nullptr)
      return;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t j = c0; j < c1; ++j) {
        const GradCoef &k = coef[j / m - b];
        gx[i * width + j] =
            static_cast<T>(k.k1 * static_cast<double>(g[i * width + j]) +
                           k.k2 * static_cast<double>(x[i * width + j]) + k.k0);
      }
    }
  });
}

void backward_kernel(const Tensor &gx, const Tensor &gw, const Tensor &gb,
                     const Tensor &g, const Tensor &x, const Tensor &mean,
                     const Tensor &invstd, const Tensor &weight,
                     bool batch_stats) {
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    using A = A_<T>;
    const int64_t n = x.size(0), ch = x.size(1), m = x.size(2);
    T *pgx = gx.defined() ? gx.data_ptr<T>() : nullptr;
    A *pgw = gw.defined() ? gw.data_ptr<A>() : nullptr;
    A *pgb = gb.defined() ? gb.data_ptr<A>() : nullptr;
    const A *pw = weight.defined() ? weight.data_ptr<A>() : nullptr;
    auto run = m < kShortRow ? &backward_cols<T> : &backward_rows<T>;
    run(pgx, pgw, pgb, g.data_ptr<T>(), x.data_ptr<T>(), n, ch, m,
        mean.data_ptr<A>(), invstd.data_ptr<A>(), pw, batch_stats);
  });
}

} // namespace

IGNIS_REGISTER_KERNEL(batch_norm_stats_stub, CPU, &stats_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CPU, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CPU, &backward_kernel);

} // namespace ignis::cpu
