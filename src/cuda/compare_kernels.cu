// CUDA kernels of comparisons, logical ops, isnan/isinf/isfinite (bool outputs) and where, over
// the functors of cpu/compare_kernels.cpp. bool operands are read as their bytes (0 or 1).
#include "cuda/loops.cuh"
#include "ops/unary.h"

namespace ignis::cuda {
namespace {

template <class T>
using load_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

template <class F>
void compare_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "compare",
                 [&]<class T>() { gpu_kernel<bool, load_t<T>, load_t<T>>(it, F{args}); });
}
template <class F>
void predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "predicate", [&]<class T>() { gpu_kernel<bool, load_t<T>>(it, F{args}); });
}
template <class F>
void float_predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "predicate", [&]<class T>() { gpu_kernel<bool, T>(it, F{args}); });
}
void where_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "where", [&]<class T>() {
    using L = load_t<T>;
    gpu_kernel<L, uint8_t, L, L>(it, fn::Where{args});
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(eq_stub, CUDA, &compare_kernel<fn::Eq>);
IGNIS_REGISTER_KERNEL(ne_stub, CUDA, &compare_kernel<fn::Ne>);
IGNIS_REGISTER_KERNEL(lt_stub, CUDA, &compare_kernel<fn::Lt>);
IGNIS_REGISTER_KERNEL(le_stub, CUDA, &compare_kernel<fn::Le>);
IGNIS_REGISTER_KERNEL(gt_stub, CUDA, &compare_kernel<fn::Gt>);
IGNIS_REGISTER_KERNEL(ge_stub, CUDA, &compare_kernel<fn::Ge>);
IGNIS_REGISTER_KERNEL(logical_and_stub, CUDA, &compare_kernel<fn::LogicalAnd>);
IGNIS_REGISTER_KERNEL(logical_or_stub, CUDA, &compare_kernel<fn::LogicalOr>);
IGNIS_REGISTER_KERNEL(logical_not_stub, CUDA, &predicate_kernel<fn::LogicalNot>);
IGNIS_REGISTER_KERNEL(isnan_stub, CUDA, &float_predicate_kernel<fn::IsNan>);
IGNIS_REGISTER_KERNEL(isinf_stub, CUDA, &float_predicate_kernel<fn::IsInf>);
IGNIS_REGISTER_KERNEL(isfinite_stub, CUDA, &float_predicate_kernel<fn::IsFinite>);
IGNIS_REGISTER_KERNEL(where_stub, CUDA, &where_kernel);

}  // namespace ignis::cuda
