// CPU kernels of sort, topk, mode and the scans cumprod and logcumsumexp. Each line along the
// dim is independent: lines are split over the OpenMP pool (parallel_for) when the work is
// large. Sorting orders NaN above +inf, as PyTorch does.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>
#include <utility>
#include <vector>

#include "cpu/reduce.h"
#include "ops/log_math.h"
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
/// cost) is large; buf is n elements of scratch, one allocation per chunk of lines.
template <class B, class F>
void for_lines(int64_t outer, int64_t n, int64_t inner, int64_t cost, const F& f) {
  parallel_for(0, outer * inner, std::max<int64_t>(kGrainSize / std::max<int64_t>(cost, 1), 1),
               [&](int64_t b, int64_t e) {
                 std::vector<B> buf(static_cast<size_t>(n));
                 for (int64_t t = b; t < e; ++t) f(t, buf);
               });
}

int64_t sort_cost(int64_t n) {
  int64_t lg = 1;
  while ((int64_t{1} << lg) < n) ++lg;
  return n * lg;
}

/// A line's elements as (value, position) pairs, contiguous for the sort.
template <class T>
using Key = std::pair<acc_t<T>, int64_t>;

template <class T>
void load_line(const T* line, int64_t inner, std::vector<Key<T>>& kv) {
  for (size_t k = 0; k < kv.size(); ++k) {
    kv[k] = {static_cast<acc_t<T>>(line[static_cast<int64_t>(k) * inner]), int64_t(k)};
  }
}

/// Stable sort of the pairs by value, NaN above everything: the NaNs are moved to their end
/// first (in order), so the numbers sort with a plain comparison.
template <class T>
void sort_keys(std::vector<Key<T>>& kv, bool descending) {
  auto first = kv.begin(), last = kv.end();
  if constexpr (std::is_floating_point_v<acc_t<T>>) {
    auto is_num = [](const Key<T>& a) { return !std::isnan(a.first); };
    if (descending) {
      first =
          std::stable_partition(kv.begin(), kv.end(), [&](const Key<T>& a) { return !is_num(a); });
    } else {
      last = std::stable_partition(kv.begin(), kv.end(), is_num);
    }
  }
  if (descending) {
    std::stable_sort(first, last,
                     [](const Key<T>& a, const Key<T>& b) { return a.first > b.first; });
  } else {
    std::stable_sort(first, last,
                     [](const Key<T>& a, const Key<T>& b) { return a.first < b.first; });
  }
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
    for_lines<Key<T>>(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<Key<T>>& kv) {
      const int64_t base = (t / inner) * n * inner + t % inner;
      const T* line = p + base;
      load_line(line, inner, kv);
      sort_keys<T>(kv, descending);
      for (int64_t k = 0; k < n; ++k) {
        io[base + k * inner] = kv[k].second;
        if (vo) vo[base + k * inner] = line[kv[k].second * inner];
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
    for_lines<Key<T>>(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<Key<T>>& kv) {
      const int64_t o = t / inner, i = t % inner;
      const T* line = p + o * n * inner + i;
      load_line(line, inner, kv);
      // Ties broken by position, so the order is total and the result deterministic.
      auto cmp = [&](const Key<T>& a, const Key<T>& b) {
        if (largest ? less_nan(b.first, a.first) : less_nan(a.first, b.first)) return true;
        if (largest ? less_nan(a.first, b.first) : less_nan(b.first, a.first)) return false;
        return a.second < b.second;
      };
      std::partial_sort(kv.begin(), kv.begin() + k, kv.end(), cmp);
      const int64_t ob = o * k * inner + i;
      for (int64_t j = 0; j < k; ++j) {
        io[ob + j * inner] = kv[j].second;
        vo[ob + j * inner] = line[kv[j].second * inner];
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
    for_lines<Key<T>>(L.outer, n, inner, sort_cost(n), [&](int64_t t, std::vector<Key<T>>& kv) {
      load_line(p + (t / inner) * n * inner + t % inner, inner, kv);
      sort_keys<T>(kv, false);
      // Runs of equal values in ascending order; the first longest run wins (the smallest
      // value), and its last element is the last occurrence (the sort is stable). NaN != NaN.
      int64_t best = -1, best_len = 0;
      for (int64_t s = 0; s < n;) {
        int64_t e = s + 1;
        while (e < n && kv[e].first == kv[s].first) ++e;
        if (e - s > best_len) {
          best_len = e - s;
          best = kv[e - 1].second;
        }
        s = e;
      }
      io[t] = best;
    });
  });
}


/// Scans along n of a dense [outer, n, inner] block, in double (int64 for integers) as PyTorch's
/// CPU kernels. Columns are taken kTile at a time, so that each step reads a contiguous run of
/// the block (rows when inner = 1); tiles are split over the pool.
template <class T>
void scan_lines(const T* p, T* o, int64_t outer, int64_t n, int64_t inner, int kind) {
  using A = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t work = std::max<int64_t>(n * std::min(inner, kTile), 1);
  parallel_for(
      0, outer * tiles, std::max<int64_t>(kGrainSize / work, 1), [&](int64_t b, int64_t e) {
        A acc[kTile];
        for (int64_t t = b; t < e; ++t) {
          const int64_t ob = t / tiles, i0 = (t % tiles) * kTile;
          const int64_t w = std::min(kTile, inner - i0);
          for (int64_t i = 0; i < w; ++i) {
            acc[i] = kind == 0 ? A(1) : A(-std::numeric_limits<double>::infinity());
          }
          for (int64_t k = 0; k < n; ++k) {
            const int64_t off = (ob * n + k) * inner + i0;
            if (kind == 0) {
              for (int64_t i = 0; i < w; ++i) {
                acc[i] *= static_cast<A>(static_cast<acc_t<T>>(p[off + i]));
                o[off + i] = static_cast<T>(acc[i]);
              }
            } else if constexpr (std::is_floating_point_v<A>) {
              for (int64_t i = 0; i < w; ++i) {
                acc[i] = log_add_exp(acc[i], static_cast<A>(static_cast<acc_t<T>>(p[off + i])));
                o[off + i] = static_cast<T>(acc[i]);
              }
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
