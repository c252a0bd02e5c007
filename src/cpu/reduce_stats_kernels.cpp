// CPU kernels of the statistical reductions: norm, var/std (two-pass), logsumexp (two-pass).
#include "cpu/reduce.h"
#include "cpu/vec_math.h"

namespace ignis::cpu {
namespace {

template <class A>
inline A exp_of(A v) {
  if constexpr (std::is_same_v<A, float>) {
    return vmath::exp(v);
  } else {
    return std::exp(v);
  }
}

template <class A>
inline A abs_of(A v) {
  return v < A(0) ? -v : v;  // keeps NaN; vectorises
}

// ---- norm: one reducer per kind of p
template <class A>
struct L2Reducer : SumReducer<A> {
  A step(A a, A v) const { return a + v * v; }
  A finish(A a, int64_t) const { return std::sqrt(a); }
};
template <class A>
struct L1Reducer : SumReducer<A> {
  A step(A a, A v) const { return a + abs_of(v); }
};
template <class A>
struct L0Reducer : SumReducer<A> {
  A step(A a, A v) const { return a + static_cast<A>(v != A(0)); }
};
template <class A, bool IsMax>
struct LInfReducer : MinMaxReducer<A, IsMax> {
  A step(A a, A v) const { return MinMaxReducer<A, IsMax>::step(a, abs_of(v)); }
};
template <class A>
struct LpReducer : SumReducer<A> {
  A p;
  A step(A a, A v) const { return a + std::pow(abs_of(v), p); }
  A finish(A a, int64_t) const { return std::pow(a, A(1) / p); }
};

void norm_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, double p) {
  dispatch_floating(x.dtype(), "norm", [&]<class T>() {
    using A = acc_t<T>;
    if (p == 2) {
      run_reduction<T, T>(out, x, plan, L2Reducer<A>{});
    } else if (p == 1) {
      run_reduction<T, T>(out, x, plan, L1Reducer<A>{});
    } else if (p == 0) {
      run_reduction<T, T>(out, x, plan, L0Reducer<A>{});
    } else if (std::isinf(p)) {
      if (p > 0) {
        run_reduction<T, T>(out, x, plan, LInfReducer<A, true>{});
      } else {
        run_reduction<T, T>(out, x, plan, LInfReducer<A, false>{});
      }
    } else {
      LpReducer<A> r;
      r.p = static_cast<A>(p);
      run_reduction<T, T>(out, x, plan, r);
    }
  });
}

// ---- var / std: the mean, then the sum of squared deviations from it
template <class A>
struct SqDevReducer : SumReducer<A> {
  A mean;
  A divisor;  // max(n - correction, 0)
  bool take_sqrt;
  A step(A a, A v) const {
    const A d = v - mean;
    return a + d * d;
  }
  A finish(A a, int64_t) const {
    const A v = a / divisor;
    return take_sqrt ? std::sqrt(v) : v;
  }
};

void var_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, int64_t correction,
                bool take_sqrt) {
  const int64_t n = plan.reduced_numel;
  dispatch_floating(x.dtype(), "var", [&]<class T>() {
    // Double accumulation for every dtype, as PyTorch's CPU var: float32 squares of |x| beyond
    // ~1e19 would overflow to inf where the variance itself is finite.
    using A = double;
    const A divisor = static_cast<A>(std::max<int64_t>(n - correction, 0));
    run_two_pass<T, T>(out, x, plan, MeanReducer<A>{}, [&](A mean) {
      SqDevReducer<A> r;
      r.mean = mean;
      r.divisor = divisor;
      r.take_sqrt = take_sqrt;
      return r;
    });
  });
}

// ---- logsumexp: the max m, then log(sum(exp(x - m))) + m (m = 0 when infinite: all -inf
// gives -inf, and any +inf gives +inf, instead of NaN)
template <class A>
struct LseReducer : SumReducer<A> {
  A shift;
  A step(A a, A v) const { return a + exp_of(v - shift); }
  A finish(A a, int64_t) const { return std::log(a) + shift; }
};

void logsumexp_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "logsumexp", [&]<class T>() {
    using A = acc_t<T>;
    run_two_pass<T, T>(out, x, plan, MinMaxReducer<A, true>{}, [](A m) {
      LseReducer<A> r;
      r.shift = std::isinf(m) ? A(0) : m;
      return r;
    });
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(norm_stub, CPU, &norm_kernel);
IGNIS_REGISTER_KERNEL(var_stub, CPU, &var_kernel);
IGNIS_REGISTER_KERNEL(logsumexp_stub, CPU, &logsumexp_kernel);
}  // namespace ignis::cpu
