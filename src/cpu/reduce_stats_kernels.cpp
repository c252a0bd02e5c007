// CPU kernels of the statistical reductions: norm, var/std (two-pass), logsumexp (two-pass).
#include "cpu/reduce.h"
#include "cpu/vec_math.h"

namespace ignis::cpu {
namespace {

// ---- norm: one reducer per kind of p
void norm_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, double p) {
  dispatch_floating(x.dtype(), "norm", [&]<class T>() {
    with_norm_reducer<acc_t<T>>(p, [&](const auto& r) { run_reduction<T, T>(out, x, plan, r); });
  });
}

// ---- var / std: the mean, then the sum of squared deviations from it
void var_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, int64_t correction,
                bool take_sqrt) {
  const int64_t n = plan.reduced_numel;
  dispatch_floating(x.dtype(), "var", [&]<class T>() {
    // Double accumulation for every dtype, as PyTorch's CPU var: float32 squares of |x| beyond
    // ~1e19 would overflow to inf where the variance itself is finite.
    using A = double;
    const A divisor = static_cast<A>(std::max<int64_t>(n - correction, 0));
    run_two_pass<T, T>(out, x, plan, MeanReducer<A>{}, VarSecondPass<A>{divisor, take_sqrt});
  });
}

// ---- logsumexp: the max m, then log(sum(exp(x - m))) + m (m = 0 when infinite: all -inf
// gives -inf, and any +inf gives +inf, instead of NaN)
void logsumexp_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "logsumexp", [&]<class T>() {
    using A = acc_t<T>;
    run_two_pass<T, T>(out, x, plan, MinMaxReducer<A, true>{}, LseSecondPass<A>{});
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(norm_stub, CPU, &norm_kernel);
IGNIS_REGISTER_KERNEL(var_stub, CPU, &var_kernel);
IGNIS_REGISTER_KERNEL(logsumexp_stub, CPU, &logsumexp_kernel);
}  // namespace ignis::cpu
