// CPU kernels of the one-pass reductions (sum, prod, amax, amin, all, any).
#include "cpu/reduce.h"

namespace ignis::cpu {

namespace {

/// Folds with an int64 accumulator for integer and bool inputs (sum, prod promote them to int64).
template <template <class> class R>
void int64_or_same_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan,
                          const char* op) {
  with_int64_or_same<R>(x.dtype(), out.dtype(), op, [&]<class T, class Out>(const auto& r) {
    run_reduction<T, Out>(out, x, plan, r);
  });
}

void sum_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<SumReducer>(out, x, plan, "sum");
}

void mean_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "mean",
                    [&]<class T>() { run_reduction<T, T>(out, x, plan, MeanReducer<acc_t<T>>{}); });
}

void prod_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<ProdReducer>(out, x, plan, "prod");
}

template <bool IsMax>
void minmax_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsMax ? "amax" : "amin", [&]<class T>() {
    run_reduction<T, T>(out, x, plan, MinMaxReducer<acc_t<T>, IsMax>{});
  });
}

template <bool IsAll>
void all_any_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsAll ? "all" : "any",
                 [&]<class T>() { run_reduction<T, bool>(out, x, plan, AllAnyReducer<IsAll>{}); });
}

}  // namespace
IGNIS_REGISTER_KERNEL(sum_stub, CPU, &sum_kernel);
IGNIS_REGISTER_KERNEL(mean_stub, CPU, &mean_kernel);
IGNIS_REGISTER_KERNEL(prod_stub, CPU, &prod_kernel);
IGNIS_REGISTER_KERNEL(amax_stub, CPU, &minmax_kernel<true>);
IGNIS_REGISTER_KERNEL(amin_stub, CPU, &minmax_kernel<false>);
IGNIS_REGISTER_KERNEL(all_stub, CPU, &all_any_kernel<true>);
IGNIS_REGISTER_KERNEL(any_stub, CPU, &all_any_kernel<false>);
}  // namespace ignis::cpu
