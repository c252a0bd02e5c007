// CPU elementwise loops over a TensorIter: out[i] = f(in0[i], in1[i], ...). The functor is the
// op's scalar functor (ops/functors.h), shared with the CUDA and fused kernels. Contiguous and
// scalar-broadcast inner loops are written so that the compiler vectorises them.
#pragma once

#include <algorithm>
#include <array>
#include <concepts>
#include <cstring>
#include <tuple>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor_iter.h"
#include "cpu/parallel.h"

namespace ignis::cpu {

template <class T>
inline T load(const char* p) {
  T v;
  std::memcpy(&v, p, sizeof(T));
  return v;
}

/// Calls row(ptrs, n, inner_strides) for every run of the innermost dim within flat range
/// [begin, end) of the iteration space.
template <class Row>
void for_each_row(const TensorIter& it, int64_t begin, int64_t end, const Row& row) {
  const int nt = it.ntensors;
  const int nd = it.ndim;
  int64_t idx[16] = {0};
  IGNIS_CHECK(nd <= 16, "elementwise: more than 16 non-mergeable dims");
  // Multi-index of `begin`.
  int64_t rem = begin;
  for (int d = 0; d < nd; ++d) {
    idx[d] = rem % it.shape[d];
    rem /= it.shape[d];
  }
  char* ptrs[TensorIter::kMaxOperands];
  int64_t inner[TensorIter::kMaxOperands];
  for (int i = 0; i < nt; ++i) inner[i] = it.strides[i][0];
  int64_t pos = begin;
  while (pos < end) {
    for (int i = 0; i < nt; ++i) {
      char* p = it.data[i];
      for (int d = 0; d < nd; ++d) p += idx[d] * it.strides[i][d];
      ptrs[i] = p;
    }
    int64_t n = std::min(it.shape[0] - idx[0], end - pos);
    row(ptrs, n, inner);
    pos += n;
    idx[0] += n;
    for (int d = 0; d < nd - 1 && idx[d] == it.shape[d]; ++d) {
      idx[d] = 0;
      ++idx[d + 1];
    }
  }
}

/// A unary functor with an exact path for rare inputs its fast body does not handle (vmath's
/// float sin beyond |x| = 1e5): `f.needs_exact(x)` picks them, `f.exact(x)` computes them.
template <class F, class T>
concept has_exact_path = requires(const F& f, T x) {
  { f.needs_exact(x) } -> std::convertible_to<bool>;
  f.exact(x);
};

namespace detail {
/// out[k] = f(in[k]) over a contiguous row of a functor with an exact path: blocks with no rare
/// input run the vectorised body; a block with one runs element by element. The test comes
/// before any write, so out may alias in (in-place ops).
template <class Out, class In, class F>
inline void exact_path_row(Out* o, const In* in, int64_t n, const F& f) {
  using A = acc_t<In>;
  constexpr int64_t kBlock = 256;
  for (int64_t k0 = 0; k0 < n; k0 += kBlock) {
    const int64_t k1 = std::min(n, k0 + kBlock);
    bool rare = false;
    for (int64_t k = k0; k < k1; ++k) rare |= f.needs_exact(static_cast<A>(in[k]));
    if (!rare) {
      for (int64_t k = k0; k < k1; ++k) o[k] = static_cast<Out>(f(static_cast<A>(in[k])));
      continue;
    }
    for (int64_t k = k0; k < k1; ++k) {
      const A x = static_cast<A>(in[k]);
      o[k] = static_cast<Out>(f.needs_exact(x) ? f.exact(x) : f(x));
    }
  }
}

template <class Out, class... In, class F, size_t... I>
inline void row_loop(char** ptrs, int64_t n, const int64_t* s, const F& f,
                     std::index_sequence<I...>) {
  using A = std::tuple<acc_t<In>...>;
  // Contiguous: the hot path, vectorised.
  if (((s[I + 1] == static_cast<int64_t>(sizeof(In))) && ...) && s[0] == sizeof(Out)) {
    if constexpr (sizeof...(In) == 1 && (has_exact_path<F, acc_t<In>> && ...)) {
      return exact_path_row(reinterpret_cast<Out*>(ptrs[0]),
                            reinterpret_cast<const In*>(ptrs[1])..., n, f);
    }
    Out* __restrict o = reinterpret_cast<Out*>(ptrs[0]);
    std::tuple<const In*...> in{reinterpret_cast<const In*>(ptrs[I + 1])...};
    for (int64_t k = 0; k < n; ++k) {
      o[k] = static_cast<Out>(f(static_cast<std::tuple_element_t<I, A>>(std::get<I>(in)[k])...));
    }
    return;
  }
  // Binary op with one operand broadcast along the row (tensor-scalar): hoist it.
  if constexpr (sizeof...(In) == 2) {
    using A0 = std::tuple_element_t<0, A>;
    using A1 = std::tuple_element_t<1, A>;
    using In0 = std::tuple_element_t<0, std::tuple<In...>>;
    using In1 = std::tuple_element_t<1, std::tuple<In...>>;
    if (s[0] == sizeof(Out) && s[1] == sizeof(In0) && s[2] == 0) {
      Out* __restrict o = reinterpret_cast<Out*>(ptrs[0]);
      const In0* a = reinterpret_cast<const In0*>(ptrs[1]);
      const A1 b = static_cast<A1>(load<In1>(ptrs[2]));
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(static_cast<A0>(a[k]), b));
      return;
    }
    if (s[0] == sizeof(Out) && s[1] == 0 && s[2] == sizeof(In1)) {
      Out* __restrict o = reinterpret_cast<Out*>(ptrs[0]);
      const A0 a = static_cast<A0>(load<In0>(ptrs[1]));
      const In1* b = reinterpret_cast<const In1*>(ptrs[2]);
      for (int64_t k = 0; k < n; ++k) o[k] = static_cast<Out>(f(a, static_cast<A1>(b[k])));
      return;
    }
  }
  for (int64_t k = 0; k < n; ++k) {
    Out r;
    if constexpr (sizeof...(In) == 1 && (has_exact_path<F, acc_t<In>> && ...)) {
      const auto x = static_cast<std::tuple_element_t<0, A>>(load<In...>(ptrs[1] + k * s[1]));
      r = static_cast<Out>(f.needs_exact(x) ? f.exact(x) : f(x));
    } else {
      r = static_cast<Out>(
          f(static_cast<std::tuple_element_t<I, A>>(load<In>(ptrs[I + 1] + k * s[I + 1]))...));
    }
    std::memcpy(ptrs[0] + k * s[0], &r, sizeof(Out));
  }
}
}  // namespace detail

/// Runs `f` (called with acc_t of each input type, returning something convertible to Out)
/// over the iterator, in parallel when large.
template <class Out, class... In, class F>
void cpu_kernel(const TensorIter& it, const F& f) {
  if (it.numel == 0) return;
  auto row = [&](char** ptrs, int64_t n, const int64_t* s) {
    detail::row_loop<Out, In...>(ptrs, n, s, f, std::index_sequence_for<In...>{});
  };
  if (it.numel <= kGrainSize) {
    if (it.ndim == 1) {  // one row: skip the index bookkeeping (tiny tensors' fast path)
      // A fixed-size copy of the pointers (a loop over ntensors became a memcpy call).
      std::array<char*, TensorIter::kMaxOperands> ptrs = it.data;
      int64_t inner[TensorIter::kMaxOperands];
      for (int i = 0; i < it.ntensors; ++i) inner[i] = it.strides[i][0];
      row(ptrs.data(), it.numel, inner);
      return;
    }
    for_each_row(it, 0, it.numel, row);
    return;
  }
  parallel_for(0, it.numel, kGrainSize, [&](int64_t b, int64_t e) { for_each_row(it, b, e, row); });
}

}  // namespace ignis::cpu
