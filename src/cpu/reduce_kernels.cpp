// CPU kernels of the summing reductions.
#include "cpu/reduce.h"

namespace ignis::cpu {
namespace {

template <class T>
struct SumReducer {
  using acc_type = acc_t<T>;
  acc_type identity() const { return acc_type(0); }
  acc_type step(acc_type a, acc_type v) const { return a + v; }
  acc_type merge(acc_type a, acc_type b) const { return a + b; }
  T finish(acc_type a, int64_t) const { return static_cast<T>(a); }
};

void sum_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), "sum", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("sum: bool inputs are summed as int64");
    } else {
      run_reduction<T, T>(out, x, plan, SumReducer<T>{});
    }
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(sum_stub, CPU, &sum_kernel);
}  // namespace ignis::cpu
