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

#include <cmath>

#include "core/dispatch.h"
#include "cpu/vec_math.h"
#include "ignis/dtype.h"  // IGNIS_HD

namespace ignis {

/// Sums in A.
template <class A>
struct SumReducer {
  using acc_type = A;
  IGNIS_HD A identity() const { return A(0); }
  IGNIS_HD A step(A a, A v) const { return a + v; }
  template <class V>  // A, or a vector of A (cpu/lane_fold.h)
  IGNIS_HD V merge(V a, V b) const {
    return a + b;
  }
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
  template <class V>  // A, or a vector of A (cpu/lane_fold.h): step's selects lane by lane
  IGNIS_HD V merge(V a, V b) const {
    const V m = (IsMax ? (b > a) : (b < a)) ? b : a;
    if constexpr (std::is_floating_point_v<A>) {
      return b != b ? b : m;
    } else {
      return m;
    }
  }
  IGNIS_HD A finish(A a, int64_t) const { return a; }
};

template <class A>
struct ProdReducer {
  using acc_type = A;
  IGNIS_HD A identity() const { return A(1); }
  IGNIS_HD A step(A a, A v) const { return a * v; }
  template <class V>  // A, or a vector of A (cpu/lane_fold.h)
  IGNIS_HD V merge(V a, V b) const {
    return a * b;
  }
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

/// The dtypes of sum and prod: integer and bool inputs fold in int64 (into an int64 output or
/// one of the input's dtype), floating ones in their arithmetic type. Calls
/// run.template operator()<T, Out>(reducer) with the input's type T and the output's Out.
template <template <class> class R, class Run>
void with_int64_or_same(DType x, DType out, const char* op, Run&& run) {
  dispatch_dtype(x, op, [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      IGNIS_CHECK(out == DType::Int64 || out == x, op, ": output dtype ", out, " for ", x,
                  " input");
      if (out == DType::Int64) {
        run.template operator()<T, int64_t>(R<int64_t>{});
      } else {
        run.template operator()<T, T>(R<int64_t>{});
      }
    } else {
      run.template operator()<T, T>(R<acc_t<T>>{});
    }
  });
}

// ---- the statistical reductions: norm, var / std (second pass), logsumexp (second pass)

template <class A>
IGNIS_HD inline A exp_of(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return vmath::exp(v);
  } else {
    return std::exp(v);
  }
}

template <class A>
IGNIS_HD inline A abs_of(A v) {
  return v < A(0) ? -v : v;  // keeps NaN; vectorises
}

template <class A>
struct L2Reducer : SumReducer<A> {
  IGNIS_HD A step(A a, A v) const { return a + v * v; }
  IGNIS_HD A finish(A a, int64_t) const { return std::sqrt(a); }
};
template <class A>
struct L1Reducer : SumReducer<A> {
  IGNIS_HD A step(A a, A v) const { return a + abs_of(v); }
};
template <class A>
struct L0Reducer : SumReducer<A> {
  IGNIS_HD A step(A a, A v) const { return a + static_cast<A>(v != A(0)); }
};
template <class A, bool IsMax>
struct LInfReducer : MinMaxReducer<A, IsMax> {
  IGNIS_HD A step(A a, A v) const { return MinMaxReducer<A, IsMax>::step(a, abs_of(v)); }
};
template <class A>
struct LpReducer : SumReducer<A> {
  A p;
  IGNIS_HD A step(A a, A v) const { return a + std::pow(abs_of(v), p); }
  IGNIS_HD A finish(A a, int64_t) const { return std::pow(a, A(1) / p); }
};

template <class A>
struct SqDevReducer : SumReducer<A> {
  A mean;
  A divisor;  // max(n - correction, 0)
  bool take_sqrt;
  IGNIS_HD A step(A a, A v) const {
    const A d = v - mean;
    return a + d * d;
  }
  IGNIS_HD A finish(A a, int64_t) const {
    const A v = a / divisor;
    return take_sqrt ? std::sqrt(v) : v;
  }
};

template <class A>
struct LseReducer : SumReducer<A> {
  A shift;
  IGNIS_HD A step(A a, A v) const { return a + exp_of(v - shift); }
  IGNIS_HD A finish(A a, int64_t) const { return std::log(a) + shift; }
};

// The second passes' reducers, made from each output's first-pass result.

/// var / std: the mean, then the squared deviations from it over max(n - correction, 0).
template <class A>
struct VarSecondPass {
  A divisor;
  bool take_sqrt;
  IGNIS_HD SqDevReducer<A> operator()(A mean) const {
    SqDevReducer<A> r;
    r.mean = mean;
    r.divisor = divisor;
    r.take_sqrt = take_sqrt;
    return r;
  }
};

/// logsumexp: the max m, then log(sum(exp(x - m))) + m (m = 0 when infinite: all -inf gives
/// -inf, and any +inf gives +inf, instead of NaN).
template <class A>
struct LseSecondPass {
  IGNIS_HD LseReducer<A> operator()(A m) const {
    LseReducer<A> r;
    r.shift = std::isinf(m) ? A(0) : m;
    return r;
  }
};

/// Calls f(reducer) with norm's reducer for p: 2, 1, 0 (count of nonzeros), +-inf (max/min of
/// |x|), else sum(|x|^p)^(1/p).
template <class A, class F>
void with_norm_reducer(double p, F&& f) {
  if (p == 2) return f(L2Reducer<A>{});
  if (p == 1) return f(L1Reducer<A>{});
  if (p == 0) return f(L0Reducer<A>{});
  if (std::isinf(p)) {
    if (p > 0) return f(LInfReducer<A, true>{});
    return f(LInfReducer<A, false>{});
  }
  LpReducer<A> r;
  r.p = static_cast<A>(p);
  f(r);
}

}  // namespace ignis
