// CPU kernels of sort, topk, mode and the scans cumprod and logcumsumexp. Each line along the
// dim is independent: lines are split over the OpenMP pool (parallel_for) when the work is
// large. Sorting orders NaN above +inf, as PyTorch does.
#include <algorithm>
#include <cmath>
#include <numeric>
#include <vector>

#include "cpu/reduce.h"
#include "ops/sort.h"

namespace ignis::cpu {
namespace {

template <class T>
bool is_nan(T v) {
  if constexpr (std::is_floating_point_v<acc_t<T>>) {
    return std::isnan(static_cast<acc_t<T>>(v));
  } else {
    return false;
  }
}

/// a before b ascending: a < b, NaN above everything (and NaNs equal to each other).
template <class T>
bool less_nan(T a, T b) {
  using A = acc_t<T>;
  if (is_nan(a)) return false;
  if (is_nan(b)) return true;
  return static_cast<A>(a) < static_cast<A>(b);
}

/// Lines of a dense [outer, n, inner] block: line t starts at (t / inner) * n * inner + t % inner
/// and steps by inner. Runs f(t, buf) for every line, over the pool when the work (lines *
/// cost) is large; buf is n positions of scratch, one allocation per chunk of lines.
template <class F>
void for_lines(int64_t outer, int64_t n, int64_t inner, int64_t cost, const F& f) {
  parallel_for(0, outer * inner, std::max<int64_t>(kGrainSize / std::max<int64_t>(cost, 1), 1),
               [&](int64_t b, int64_t e) {
                 std::vector<int64_t> buf(static_cast<size_t>(n));
                 for (int64_t t = b; t < e; ++t) f(t, buf);
               });
}

int64_t sort_cost(int64_t n) {
  int64_t lg = 1;
  while ((int64_t{1} << lg) < n) ++lg;
  return n * lg;
}

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                 bool descending) {
  if (x.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, x.dim() == 0 ? 0 : dim);
  const int64_t n = L.n, inner = L.inner;
  dispatch_dtype(x.dtype(), "sort", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    T* vo = values.defined() ? values.data_ptr<T>() : nullptr;
    int64_t* io = indices.data_ptr<int64_t>();
    for_lines(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<int64_t>& idx) {
      const int64_t base = (t / inner) * n * inner + t % inner;
      std::iota(idx.begin(), idx.end(), 0);
      const T* line = p + base;
      if (descending) {
        std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
          return less_nan(line[b * inner], line[a * inner]);
        });
      } else {
        std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
          return less_nan(line[a * inner], line[b * inner]);
        });
      }
      for (int64_t k = 0; k < n; ++k) {
        io[base + k * inner] = idx[k];
        if (vo) vo[base + k * inner] = line[idx[k] * inner];
      }
    });
  });
}

void topk_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                 int64_t k, bool largest) {
  if (values.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, x.dim() == 0 ? 0 : dim);
  const int64_t n = L.n, inner = L.inner;
  dispatch_dtype(x.dtype(), "topk", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    T* vo = values.data_ptr<T>();
    int64_t* io = indices.data_ptr<int64_t>();
    for_lines(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<int64_t>& idx) {
      const int64_t o = t / inner, i = t % inner;
      const T* line = p + o * n * inner + i;
      std::iota(idx.begin(), idx.end(), 0);
      // Ties broken by position, so the order is total and the result deterministic.
      auto cmp = [&](int64_t a, int64_t b) {
        const T va = line[a * inner], vb = line[b * inner];
        if (largest ? less_nan(vb, va) : less_nan(va, vb)) return true;
        if (largest ? less_nan(va, vb) : less_nan(vb, va)) return false;
        return a < b;
      };
      std::partial_sort(idx.begin(), idx.begin() + k, idx.end(), cmp);
      const int64_t ob = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        io[ob + j * inner] = idx[j];
        vo[ob + j * inner] = line[idx[j] * inner];
      }
    });
  });
}

void mode_kernel(const Tensor& indices, const Tensor& x, int64_t dim) {
  if (indices.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, x.dim() == 0 ? 0 : dim);
  const int64_t n = L.n, inner = L.inner;
  dispatch_dtype(x.dtype(), "mode", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    int64_t* io = indices.data_ptr<int64_t>();
    for_lines(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<int64_t>& idx) {
      const T* line = p + (t / inner) * n * inner + t % inner;
      std::iota(idx.begin(), idx.end(), 0);
      std::stable_sort(idx.begin(), idx.end(), [&](int64_t a, int64_t b) {
        return less_nan(line[a * inner], line[b * inner]);
      });
      // Runs of equal values in ascending order; the first longest run wins (the smallest
      // value), and its last element is the last occurrence (the sort is stable). NaN != NaN.
      int64_t best = -1, best_len = 0;
      for (int64_t s = 0; s < n;) {
        int64_t e = s + 1;
        const T v = line[idx[s] * inner];
        while (e < n && !is_nan(v) &&
               static_cast<acc_t<T>>(line[idx[e] * inner]) == static_cast<acc_t<T>>(v)) {
          ++e;
        }
        if (e - s > best_len) {
          best_len = e - s;
          best = idx[e - 1];
        }
        s = e;
      }
      io[t] = best;
    });
  });
}

template <class T>
void scan_lines(const T* p, T* o, int64_t outer, int64_t n, int64_t inner, int kind) {
  using A = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;
  parallel_for(0, outer * inner, std::max<int64_t>(kGrainSize / std::max<int64_t>(n, 1), 1),
               [&](int64_t b, int64_t e) {
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t base = (t / inner) * n * inner + t % inner;
                   if (kind == 0) {
                     A acc = 1;
                     for (int64_t k = 0; k < n; ++k) {
                       acc *= static_cast<A>(static_cast<acc_t<T>>(p[base + k * inner]));
                       o[base + k * inner] = static_cast<T>(acc);
                     }
                   } else if constexpr (std::is_floating_point_v<A>) {
                     // log(exp(acc) + exp(v)) = max + log1p(exp(min - max)); when both are the same
                     // infinity (min - max would be NaN) the result is that infinity.
                     A acc = -std::numeric_limits<A>::infinity();
                     for (int64_t k = 0; k < n; ++k) {
                       const A v = static_cast<A>(static_cast<acc_t<T>>(p[base + k * inner]));
                       if (std::isnan(v) || std::isnan(acc)) {
                         acc = std::numeric_limits<A>::quiet_NaN();
                       } else {
                         const A lo = std::min(acc, v), hi = std::max(acc, v);
                         acc = (lo != hi || std::isfinite(lo)) ? hi + std::log1p(std::exp(lo - hi))
                                                               : acc;
                       }
                       o[base + k * inner] = static_cast<T>(acc);
                     }
                   }
                 }
               });
}

void scan_kernel(const Tensor& out, const Tensor& x, int64_t dim, int kind) {
  if (out.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, x.dim() == 0 ? 0 : dim);
  dispatch_dtype(x.dtype(), kind == 0 ? "cumprod" : "logcumsumexp", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL(kind == 0 ? "cumprod" : "logcumsumexp", ": bool inputs are promoted first");
    } else {
      scan_lines(static_cast<const T*>(L.data), out.data_ptr<T>(), L.outer, L.n, L.inner, kind);
    }
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(sort_stub, CPU, &sort_kernel);
IGNIS_REGISTER_KERNEL(topk_stub, CPU, &topk_kernel);
IGNIS_REGISTER_KERNEL(mode_stub, CPU, &mode_kernel);
IGNIS_REGISTER_KERNEL(scan_stub, CPU, &scan_kernel);
}  // namespace ignis::cpu
