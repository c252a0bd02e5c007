// CPU kernel of max/min over one dim with indices (max(dim), min(dim), argmax, argmin).
// The first occurrence wins; NaN beats every number (the first NaN is taken).
#include "cpu/reduce.h"

namespace ignis::cpu {
namespace {

template <class A>
inline bool is_nan(A v) {
  if constexpr (std::is_floating_point_v<A>) {
    return v != v;
  } else {
    return false;
  }
}

// Rows: the extreme value by the vectorised reducer, then the first index holding it.
template <class T, bool IsMax>
void minmax_rows(const T* p, int64_t outer, int64_t n, T* vals, int64_t* idx) {
  using A = acc_t<T>;
  std::unique_ptr<A[]> best(new A[outer]);
  const MinMaxReducer<A, IsMax> r;
  reduce_rows<T, A>(
      p, outer, n, best.get(), [&r](int64_t) -> const auto& { return r; });
  parallel_for(0, outer, std::max<int64_t>(kGrainSize / n, 1), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) {
      const T* row = p + k * n;
      const A m = best[k];
      int64_t i = 0;
      if (is_nan(m)) {
        while (i < n && !is_nan(static_cast<A>(row[i]))) ++i;
      } else {
        while (i < n && static_cast<A>(row[i]) != m) ++i;
      }
      if (vals) vals[k] = static_cast<T>(m);
      idx[k] = i;
    }
  });
}

// Columns: a tile of running (value, index) pairs, vectorised across the outputs.
template <class T, bool IsMax>
void minmax_cols(const T* p, int64_t outer, int64_t n, int64_t inner, T* vals, int64_t* idx) {
  using A = acc_t<T>;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t work = n * std::min(inner, kTile);
  parallel_for(0, outer * tiles, std::max<int64_t>(kGrainSize / work, 1),
               [&](int64_t b, int64_t e) {
                 A best[kTile];
                 int64_t at[kTile];
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t ob = t / tiles, i0 = (t % tiles) * kTile;
                   const int64_t w = std::min(kTile, inner - i0);
                   const T* base = p + ob * n * inner + i0;
                   for (int64_t i = 0; i < w; ++i) {
                     best[i] = static_cast<A>(base[i]);
                     at[i] = 0;
                   }
                   for (int64_t r = 1; r < n; ++r) {
                     const T* row = base + r * inner;
                     for (int64_t i = 0; i < w; ++i) {
                       const A v = static_cast<A>(row[i]), b = best[i];
                       bool better = IsMax ? (v > b) : (v < b);
                       if constexpr (std::is_floating_point_v<A>)
                         better = better | ((v != v) & (b == b));
                       best[i] = better ? v : b;
                       at[i] = better ? r : at[i];
                     }
                   }
                   const int64_t k0 = ob * inner + i0;
                   for (int64_t i = 0; i < w; ++i) {
                     if (vals) vals[k0 + i] = static_cast<T>(best[i]);
                     idx[k0 + i] = at[i];
                   }
                 }
               });
}

void minmax_dim_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                       bool is_max) {
  if (indices.numel() == 0) return;
  ReducePlan plan;
  plan.mask = x.dim() == 0 ? 0 : (uint64_t{1} << dim);
  plan.reduced_numel = x.dim() == 0 ? 1 : x.sizes()[dim];
  const ReduceLayout L = reduce_layout(x, plan);
  int64_t* idx = indices.data_ptr<int64_t>();
  dispatch_dtype(x.dtype(), is_max ? "max" : "min", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    T* vals = values.defined() ? values.data_ptr<T>() : nullptr;
    auto run = [&]<bool IsMax>() {
      if (L.inner == 1) {
        minmax_rows<T, IsMax>(p, L.outer, L.n, vals, idx);
      } else {
        minmax_cols<T, IsMax>(p, L.outer, L.n, L.inner, vals, idx);
      }
    };
    if (is_max) {
      run.template operator()<true>();
    } else {
      run.template operator()<false>();
    }
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(minmax_dim_stub, CPU, &minmax_dim_kernel);
}  // namespace ignis::cpu
