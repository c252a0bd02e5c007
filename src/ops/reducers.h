// The reducers of the one-pass reductions, shared by the CPU driver (cpu/reduce.h) and the
// CUDA one (cuda/reduce_kernels.cu). A reducer is a small struct with
//   using acc_type;  acc_type identity() const;
//   acc_type step(acc_type acc, V v) const;        // fold one element, V = acc_t<T>
//   acc_type merge(acc_type a, acc_type b) const;  // combine partial results
//   Out finish(acc_type a, int64_t n) const;       // the output value from n elements
#pragma once

#include <cstdint>
#include <limits>
#include <type_traits>

#include "ignis/dtype.h"  // IGNIS_HD

namespace ignis {

/// Sums in A.
template <class A>
struct SumReducer {
  using acc_type = A;
  IGNIS_HD A identity() const { return A(0); }
  IGNIS_HD A step(A a, A v) const { return a + v; }
  IGNIS_HD A merge(A a, A b) const { return a + b; }
  IGNIS_HD A finish(A a, int64_t) const { return a; }
};

/// The mean in A (var's first pass).
template <class A>
struct MeanReducer : SumReducer<A> {
  IGNIS_HD A finish(A a, int64_t n) const { return a / static_cast<A>(n); }
};

/// Max (IsMax) or min in A; NaN beats every number (like PyTorch).
template <class A, bool IsMax>
struct MinMaxReducer {
  using acc_type = A;
  IGNIS_HD A identity() const {
    if constexpr (std::is_same_v<A, bool>) {
      return !IsMax;
    } else if constexpr (std::is_floating_point_v<A>) {
      return IsMax ? -std::numeric_limits<A>::infinity() : std::numeric_limits<A>::infinity();
    } else {
      return IsMax ? std::numeric_limits<A>::lowest() : std::numeric_limits<A>::max();
    }
  }
  IGNIS_HD A step(A a, A v) const {
    const A m = (IsMax ? (v > a) : (v < a)) ? v : a;
    if constexpr (std::is_floating_point_v<A>) {
      return v != v ? v : m;  // two selects, no branch: vectorises
    } else {
      return m;
    }
  }
  IGNIS_HD A merge(A a, A b) const { return step(a, b); }
  IGNIS_HD A finish(A a, int64_t) const { return a; }
};

template <class A>
struct ProdReducer {
  using acc_type = A;
  IGNIS_HD A identity() const { return A(1); }
  IGNIS_HD A step(A a, A v) const { return a * v; }
  IGNIS_HD A merge(A a, A b) const { return a * b; }
  IGNIS_HD A finish(A a, int64_t) const { return a; }
};

template <bool IsAll>
struct AllAnyReducer {
  using acc_type = bool;
  IGNIS_HD bool identity() const { return IsAll; }
  template <class V>
  IGNIS_HD bool step(bool a, V v) const {
    return IsAll ? (a & (v != V(0))) : (a | (v != V(0)));
  }
  IGNIS_HD bool merge(bool a, bool b) const { return IsAll ? (a & b) : (a | b); }
  IGNIS_HD bool finish(bool a, int64_t) const { return a; }
};

}  // namespace ignis
