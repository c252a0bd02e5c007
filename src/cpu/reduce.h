// CPU reduction driver: sees x as a dense [outer, n, inner] block (n = the reduced elements of
// each output) and runs a reducer over it, vectorised and in parallel.
// A reducer is a small struct with
//   using acc_type;  acc_type identity() const;
//   acc_type step(acc_type acc, V v) const;        // fold one element, V = acc_t<T> (vectorisable)
//   acc_type merge(acc_type a, acc_type b) const;  // combine partial results
//   Out finish(acc_type a, int64_t n) const;       // the output value from n elements
// The loops take `get_r(k)`, the reducer of output k, so that two-pass reductions (var,
// logsumexp) can give each output a reducer holding its first-pass result.
#pragma once

#include <algorithm>
#include <cmath>
#include <limits>
#include <memory>
#include <type_traits>
#include <vector>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "cpu/lane_fold.h"
#include "cpu/parallel.h"
#include "ops/reduce.h"
#include "ops/reduce_layout.h"
#include "ops/reducers.h"

namespace ignis::cpu {


constexpr int kLanes = 32;        // independent accumulators per row (GCC vectorises 32 well)
constexpr int64_t kBlock = 4096;  // rows longer than this are summed pairwise (accuracy)
constexpr int64_t kTile = 256;    // outputs per column tile
constexpr int64_t kColLeaf = 64;  // longer columns are folded pairwise (accuracy)

/// Folds the n elements at p with kLanes independent accumulators so that the compiler can
/// vectorise without reassociating floating point adds.
template <class T, class R>
typename R::acc_type reduce_block(const T* p, int64_t n, const R& r) {
  using A = typename R::acc_type;
  if (n < kLanes) {
    A a = r.identity();
    for (int64_t i = 0; i < n; ++i) a = r.step(a, static_cast<acc_t<T>>(p[i]));
    return a;
  }
  A acc[kLanes];
  for (auto& a : acc) a = r.identity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = r.step(acc[j], static_cast<acc_t<T>>(p[i + j]));
  }
  for (; i < n; ++i) acc[0] = r.step(acc[0], static_cast<acc_t<T>>(p[i]));
  if constexpr (std::is_arithmetic_v<A> && !std::is_same_v<A, bool>) {
    // The reducers' merges take vectors of A too (ops/reducers.h): the lanes fold in registers.
    return ignis_fold_lanes<kLanes>(acc, [&](auto a, auto b) { return r.merge(a, b); });
  } else {
    for (int w = kLanes / 2; w > 0; w /= 2) {
      for (int j = 0; j < w; ++j) acc[j] = r.merge(acc[j], acc[j + w]);
    }
    return acc[0];
  }
}

/// A row of any length: blocks of kBlock combined pairwise (a binary counter of partial
/// results, no recursion), so float sums lose O(log n) ulps, not O(n).
template <class T, class R>
typename R::acc_type reduce_row(const T* p, int64_t n, const R& r) {
  using A = typename R::acc_type;
  if (n <= kBlock) return reduce_block(p, n, r);
  A stack[64];
  int sp = 0;
  int64_t count = 0;
  for (int64_t i = 0; i < n; i += kBlock) {
    A v = reduce_block(p + i, std::min(kBlock, n - i), r);
    for (int64_t c = ++count; (c & 1) == 0; c >>= 1) v = r.merge(stack[--sp], v);
    stack[sp++] = v;
  }
  A total = stack[--sp];
  while (sp > 0) total = r.merge(stack[--sp], total);
  return total;
}

/// Output rows [0, outer) of length n each: o[k] = finish(fold of row k).
template <class T, class Out, class GetR>
void reduce_rows(const T* p, int64_t outer, int64_t n, Out* o, const GetR& get_r) {
  using R = std::remove_cvref_t<decltype(get_r(int64_t{0}))>;
  using A = typename R::acc_type;
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  if (outer * n <= kGrainSize || nt == 1 || outer >= nt) {
    parallel_for(0, outer, std::max<int64_t>(kGrainSize / std::max<int64_t>(n, 1), 1),
                 [&](int64_t b, int64_t e) {
                   for (int64_t k = b; k < e; ++k) {
                     const R r = get_r(k);
                     o[k] = r.finish(reduce_row(p + k * n, n, r), n);
                   }
                 });
    return;
  }
  // Fewer rows than threads: split each row into chunks, then merge the partials in order.
  const int64_t c = std::min<int64_t>((nt + outer - 1) / outer, std::max<int64_t>(n / 4096, 1));
  std::unique_ptr<A[]> part(new A[outer * c]);  // not vector: A may be bool
  parallel_for(0, outer * c, 1, [&](int64_t b, int64_t e) {
    for (int64_t t = b; t < e; ++t) {
      const int64_t k = t / c, j = t % c;
      const int64_t lo = n * j / c, hi = n * (j + 1) / c;
      part[t] = reduce_row(p + k * n + lo, hi - lo, get_r(k));
    }
  });
  for (int64_t k = 0; k < outer; ++k) {
    const R r = get_r(k);
    A a = part[k * c];
    for (int64_t j = 1; j < c; ++j) a = r.merge(a, part[k * c + j]);
    o[k] = r.finish(a, n);
  }
}

/// acc[i] (i < w) = fold of column i over `rows` rows at p, `stride` elements apart; the reducer
/// of column i is get_r(k0 + i). Long columns are folded pairwise (blocks of kColLeaf rows), so
/// float sums lose O(log n) ulps, not O(n).
template <class T, class A, class GetR>
void fold_cols(const T* p, int64_t rows, int64_t stride, int64_t w, int64_t k0, A* acc,
               const GetR& get_r) {
  if (rows > kColLeaf) {
    const int64_t half = rows / 2;
    fold_cols(p, half, stride, w, k0, acc, get_r);
    A part[kTile];
    fold_cols(p + half * stride, rows - half, stride, w, k0, part, get_r);
    for (int64_t i = 0; i < w; ++i) acc[i] = get_r(k0 + i).merge(acc[i], part[i]);
    return;
  }
  for (int64_t i = 0; i < w; ++i) acc[i] = get_r(k0 + i).identity();
  for (int64_t k = 0; k < rows; ++k) {
    const T* row = p + k * stride;
    for (int64_t i = 0; i < w; ++i)
      acc[i] = get_r(k0 + i).step(acc[i], static_cast<acc_t<T>>(row[i]));
  }
}

/// Outputs [outer, inner], each folding n elements `inner` apart: vectorised across outputs.
template <class T, class Out, class GetR>
void reduce_cols(const T* p, int64_t outer, int64_t n, int64_t inner, Out* o, const GetR& get_r) {
  using R = std::remove_cvref_t<decltype(get_r(int64_t{0}))>;
  using A = typename R::acc_type;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t tasks = outer * tiles;
  const int nt = omp_in_parallel() ? 1 : omp_get_max_threads();
  auto tile = [&](int64_t t, int64_t r0, int64_t r1, A* acc) {
    const int64_t ob = t / tiles, i0 = (t % tiles) * kTile;
    const int64_t w = std::min(kTile, inner - i0);
    fold_cols(p + (ob * n + r0) * inner + i0, r1 - r0, inner, w, ob * inner + i0, acc, get_r);
    return w;
  };
  if (outer * n * inner <= kGrainSize || nt == 1 || tasks >= nt || n < 64) {
    const int64_t work = n * std::min(inner, kTile);
    parallel_for(0, tasks, std::max<int64_t>(kGrainSize / work, 1), [&](int64_t b, int64_t e) {
      A acc[kTile];
      for (int64_t t = b; t < e; ++t) {
        const int64_t w = tile(t, 0, n, acc);
        const int64_t k0 = (t / tiles) * inner + (t % tiles) * kTile;
        for (int64_t i = 0; i < w; ++i) o[k0 + i] = get_r(k0 + i).finish(acc[i], n);
      }
    });
    return;
  }
  // Fewer tiles than threads: split the rows too, then merge the partials in order.
  const int64_t c = std::min<int64_t>((nt + tasks - 1) / tasks, n / 32);
  const int64_t nout = outer * inner;
  std::unique_ptr<A[]> part(new A[c * nout]);
  parallel_for(0, tasks * c, 1, [&](int64_t b, int64_t e) {
    A acc[kTile];
    for (int64_t u = b; u < e; ++u) {
      const int64_t t = u / c, j = u % c;
      const int64_t w = tile(t, n * j / c, n * (j + 1) / c, acc);
      const int64_t k0 = (t / tiles) * inner + (t % tiles) * kTile;
      std::copy(acc, acc + w, part.get() + j * nout + k0);
    }
  });
  for (int64_t k = 0; k < nout; ++k) {
    const R r = get_r(k);
    A a = part[k];
    for (int64_t j = 1; j < c; ++j) a = r.merge(a, part[j * nout + k]);
    o[k] = r.finish(a, n);
  }
}

/// Reduces the layout L with per-output reducers get_r(k) into o.
template <class T, class Out, class GetR>
void reduce_layout_into(const ReduceLayout& L, Out* o, const GetR& get_r) {
  const T* p = static_cast<const T*>(L.data);
  if (L.inner == 1) {
    reduce_rows<T, Out>(p, L.outer, L.n, o, get_r);
  } else {
    reduce_cols<T, Out>(p, L.outer, L.n, L.inner, o, get_r);
  }
}

/// Reduces x (elements of type T) over plan's dims into out (contiguous, elements of type Out).
template <class T, class Out, class R>
void run_reduction(const Tensor& out, const Tensor& x, const ReducePlan& plan, const R& r) {
  Out* o = static_cast<Out*>(out.data_ptr());
  const int64_t nout = out.numel();
  if (nout == 0) return;
  if (plan.reduced_numel == 0) {
    std::fill(o, o + nout, static_cast<Out>(r.finish(r.identity(), 0)));
    return;
  }
  const ReduceLayout L = reduce_layout(x, plan);
  reduce_layout_into<T, Out>(L, o, [&r](int64_t) -> const R& { return r; });
}

/// Two-pass reductions: s_k = r1's result over output k's elements, then
/// out[k] = make2(s_k)'s result over the same elements (var: the mean, then squared deviations).
template <class T, class Out, class R1, class Make2>
void run_two_pass(const Tensor& out, const Tensor& x, const ReducePlan& plan, const R1& r1,
                  const Make2& make2) {
  using S = decltype(r1.finish(r1.identity(), 0));
  Out* o = static_cast<Out*>(out.data_ptr());
  const int64_t nout = out.numel();
  if (nout == 0) return;
  if (plan.reduced_numel == 0) {
    const auto r2 = make2(r1.finish(r1.identity(), 0));
    std::fill(o, o + nout, static_cast<Out>(r2.finish(r2.identity(), 0)));
    return;
  }
  const ReduceLayout L = reduce_layout(x, plan);
  std::unique_ptr<S[]> s(new S[nout]);
  reduce_layout_into<T, S>(L, s.get(), [&r1](int64_t) -> const R1& { return r1; });
  reduce_layout_into<T, Out>(L, o, [&](int64_t k) { return make2(s[k]); });
}


}  // namespace ignis::cpu
