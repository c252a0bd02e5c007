// CPU kernels of softmax and log_softmax (forward and backward) along one dim.
// Rows (the softmax dim innermost, the training hot case) take three passes: the max, the sum
// of exp(x - max) (softmax stores the exponentials on the way), and the normalisation. With
// inner dims the same passes run over tiles of columns, vectorised across them.
#include "cpu/lane_fold.h"
#include "cpu/reduce.h"
#include "cpu/vec_math.h"

namespace ignis::cpu {
namespace {

// exp_of: ops/reducers.h (vmath's exp for float).

// Softmax's elementwise cost is several times a sum's: smaller chunks per thread.
constexpr int64_t kSoftmaxGrain = kGrainSize / 4;

// Plain max: a NaN in the row makes the sum NaN anyway, so it need not win here.
template <class A>
struct RowMax {
  using acc_type = A;
  A identity() const { return -std::numeric_limits<A>::infinity(); }
  A step(A a, A v) const { return v > a ? v : a; }
  template <class V>  // A, or a vector of A (cpu/lane_fold.h)
  V merge(V a, V b) const {
    return b > a ? b : a;
  }
  A finish(A a, int64_t) const { return a; }
};

// Float32 and float64 store exp(x - max) in y during the sum; bfloat16 would round it, so it
// recomputes the exponential in the last pass instead.
template <class T>
constexpr bool kStoreExp = std::is_same_v<T, acc_t<T>>;

template <class T, bool Log>
void softmax_row(const T* __restrict x, T* __restrict y, int64_t n) {
  using A = acc_t<T>;
  const A m = reduce_row(x, n, RowMax<A>{});
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A e = exp_of(static_cast<A>(x[i + j]) - m);
      if constexpr (!Log && kStoreExp<T>) y[i + j] = e;
      acc[j] += e;
    }
  }
  for (; i < n; ++i) {
    const A e = exp_of(static_cast<A>(x[i]) - m);
    if constexpr (!Log && kStoreExp<T>) y[i] = e;
    acc[0] += e;
  }
  const A total = ignis_fold_lanes<kLanes>(acc, [](auto a, auto b) { return a + b; });
  if constexpr (Log) {
    // (x - max) - log(sum), not x - (max + log(sum)): with large logits max + log(sum) rounds
    // to max's ulp and the result loses its low digits (PyTorch subtracts them separately too).
    const A ls = std::log(total);
    for (int64_t k = 0; k < n; ++k) y[k] = static_cast<T>((static_cast<A>(x[k]) - m) - ls);
  } else {
    const A inv = A(1) / total;
    if constexpr (kStoreExp<T>) {
      for (int64_t k = 0; k < n; ++k) y[k] = y[k] * inv;
    } else {
      for (int64_t k = 0; k < n; ++k) y[k] = static_cast<T>(exp_of(static_cast<A>(x[k]) - m) * inv);
    }
  }
}

// Columns [i0, i0 + w) of one outer block: x[r * inner + i], r < n.
template <class T, bool Log>
void softmax_tile(const T* __restrict x, T* __restrict y, int64_t n, int64_t inner, int64_t w) {
  using A = acc_t<T>;
  A m[kTile], s[kTile];
  for (int64_t i = 0; i < w; ++i) {
    m[i] = -std::numeric_limits<A>::infinity();
    s[i] = 0;
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    for (int64_t i = 0; i < w; ++i) {
      const A v = static_cast<A>(xr[i]);
      m[i] = v > m[i] ? v : m[i];
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
    for (int64_t i = 0; i < w; ++i) {
      const A e = exp_of(static_cast<A>(xr[i]) - m[i]);
      if constexpr (!Log && kStoreExp<T>) yr[i] = e;
      s[i] += e;
    }
  }
  for (int64_t i = 0; i < w; ++i) s[i] = Log ? std::log(s[i]) : A(1) / s[i];  // see softmax_row
  for (int64_t r = 0; r < n; ++r) {
    const T* xr = x + r * inner;
    T* yr = y + r * inner;
    for (int64_t i = 0; i < w; ++i) {
      if constexpr (Log) {
        yr[i] = static_cast<T>((static_cast<A>(xr[i]) - m[i]) - s[i]);
      } else if constexpr (kStoreExp<T>) {
        yr[i] = yr[i] * s[i];
      } else {
        yr[i] = static_cast<T>(exp_of(static_cast<A>(xr[i]) - m[i]) * s[i]);
      }
    }
  }
}

/// Runs row(k) for rows k < outer, or tile(ob, i0, w) over column tiles, in parallel.
template <class Row, class Tile>
void for_rows_or_tiles(const ReduceLayout& L, const Row& row, const Tile& tile) {
  if (L.inner == 1) {
    parallel_for(0, L.outer, std::max<int64_t>(kSoftmaxGrain / std::max<int64_t>(L.n, 1), 1),
                 [&](int64_t b, int64_t e) {
                   for (int64_t k = b; k < e; ++k) row(k);
                 });
    return;
  }
  const int64_t tiles = (L.inner + kTile - 1) / kTile;
  const int64_t work = std::max<int64_t>(L.n * std::min(L.inner, kTile), 1);
  parallel_for(0, L.outer * tiles, std::max<int64_t>(kSoftmaxGrain / work, 1),
               [&](int64_t b, int64_t e) {
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t i0 = (t % tiles) * kTile;
                   tile(t / tiles, i0, std::min(kTile, L.inner - i0));
                 }
               });
}

void softmax_kernel(const Tensor& out, const Tensor& x, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, dim);
  dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    T* o = out.data_ptr<T>();
    const int64_t block = L.n * L.inner;
    auto run = [&]<bool Log>() {
      for_rows_or_tiles(
          L, [&](int64_t k) { softmax_row<T, Log>(p + k * L.n, o + k * L.n, L.n); },
          [&](int64_t ob, int64_t i0, int64_t w) {
            softmax_tile<T, Log>(p + ob * block + i0, o + ob * block + i0, L.n, L.inner, w);
          });
    };
    if (log) {
      run.template operator()<true>();
    } else {
      run.template operator()<false>();
    }
  });
}

// ---- backward: softmax gi = y * (g - sum(g * y)); log_softmax gi = g - exp(y) * sum(g)
template <class T, bool Log>
void softmax_backward_row(const T* __restrict g, const T* __restrict y, T* __restrict gi,
                          int64_t n) {
  using A = acc_t<T>;
  A acc[kLanes] = {};
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) {
      const A gv = static_cast<A>(g[i + j]);
      acc[j] += Log ? gv : gv * static_cast<A>(y[i + j]);
    }
  }
  for (; i < n; ++i) {
    const A gv = static_cast<A>(g[i]);
    acc[0] += Log ? gv : gv * static_cast<A>(y[i]);
  }
  const A s = ignis_fold_lanes<kLanes>(acc, [](auto a, auto b) { return a + b; });
  for (int64_t k = 0; k < n; ++k) {
    const A gv = static_cast<A>(g[k]), yv = static_cast<A>(y[k]);
    gi[k] = static_cast<T>(Log ? gv - exp_of(yv) * s : yv * (gv - s));
  }
}

template <class T, bool Log>
void softmax_backward_tile(const T* __restrict g, const T* __restrict y, T* __restrict gi,
                           int64_t n, int64_t inner, int64_t w) {
  using A = acc_t<T>;
  A s[kTile];
  for (int64_t i = 0; i < w; ++i) s[i] = 0;
  for (int64_t r = 0; r < n; ++r) {
    const T* gr = g + r * inner;
    const T* yr = y + r * inner;
    for (int64_t i = 0; i < w; ++i) {
      const A gv = static_cast<A>(gr[i]);
      s[i] += Log ? gv : gv * static_cast<A>(yr[i]);
    }
  }
  for (int64_t r = 0; r < n; ++r) {
    const int64_t off = r * inner;
    for (int64_t i = 0; i < w; ++i) {
      const A gv = static_cast<A>(g[off + i]), yv = static_cast<A>(y[off + i]);
      gi[off + i] = static_cast<T>(Log ? gv - exp_of(yv) * s[i] : yv * (gv - s[i]));
    }
  }
}

void softmax_backward_kernel(const Tensor& grad_in, const Tensor& g, const Tensor& y, int64_t dim,
                             bool log) {
  if (grad_in.numel() == 0) return;
  const ReduceLayout Lg = dim_layout(g, dim);
  const ReduceLayout Ly = dim_layout(y, dim);
  dispatch_floating(y.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&]<class T>() {
    const T* gp = static_cast<const T*>(Lg.data);
    const T* yp = static_cast<const T*>(Ly.data);
    T* o = grad_in.data_ptr<T>();
    const int64_t n = Ly.n, block = Ly.n * Ly.inner;
    auto run = [&]<bool Log>() {
      for_rows_or_tiles(
          Ly,
          [&](int64_t k) { softmax_backward_row<T, Log>(gp + k * n, yp + k * n, o + k * n, n); },
          [&](int64_t ob, int64_t i0, int64_t w) {
            const int64_t off = ob * block + i0;
            softmax_backward_tile<T, Log>(gp + off, yp + off, o + off, n, Ly.inner, w);
          });
    };
    if (log) {
      run.template operator()<true>();
    } else {
      run.template operator()<false>();
    }
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(softmax_stub, CPU, &softmax_kernel);
IGNIS_REGISTER_KERNEL(softmax_backward_stub, CPU, &softmax_backward_kernel);
}  // namespace ignis::cpu
