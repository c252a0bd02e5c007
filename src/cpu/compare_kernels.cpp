// CPU kernels of comparisons, logical ops, isnan/isinf/isfinite (bool outputs) and where.
#include "cpu/loops.h"
#include "ops/unary.h"

namespace ignis::cpu {
namespace {

/// bool out = F(a, b), a and b of dtype `dt`.
template <class F>
void compare_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "compare", [&]<class T>() { cpu_kernel<bool, T, T>(it, F{args}); });
}
/// bool out = F(x), x of dtype `dt`.
template <class F>
void predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "predicate", [&]<class T>() { cpu_kernel<bool, T>(it, F{args}); });
}
/// Same, floating x only.
template <class F>
void float_predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "predicate", [&]<class T>() { cpu_kernel<bool, T>(it, F{args}); });
}

void where_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "where", [&]<class T>() { cpu_kernel<T, bool, T, T>(it, fn::Where{args}); });
}

}  // namespace

IGNIS_REGISTER_KERNEL(eq_stub, CPU, &compare_kernel<fn::Eq>);
IGNIS_REGISTER_KERNEL(ne_stub, CPU, &compare_kernel<fn::Ne>);
IGNIS_REGISTER_KERNEL(lt_stub, CPU, &compare_kernel<fn::Lt>);
IGNIS_REGISTER_KERNEL(le_stub, CPU, &compare_kernel<fn::Le>);
IGNIS_REGISTER_KERNEL(gt_stub, CPU, &compare_kernel<fn::Gt>);
IGNIS_REGISTER_KERNEL(ge_stub, CPU, &compare_kernel<fn::Ge>);
IGNIS_REGISTER_KERNEL(logical_and_stub, CPU, &compare_kernel<fn::LogicalAnd>);
IGNIS_REGISTER_KERNEL(logical_or_stub, CPU, &compare_kernel<fn::LogicalOr>);
IGNIS_REGISTER_KERNEL(logical_not_stub, CPU, &predicate_kernel<fn::LogicalNot>);
IGNIS_REGISTER_KERNEL(isnan_stub, CPU, &float_predicate_kernel<fn::IsNan>);
IGNIS_REGISTER_KERNEL(isinf_stub, CPU, &float_predicate_kernel<fn::IsInf>);
IGNIS_REGISTER_KERNEL(isfinite_stub, CPU, &float_predicate_kernel<fn::IsFinite>);
IGNIS_REGISTER_KERNEL(where_stub, CPU, &where_kernel);

}  // namespace ignis::cpu
