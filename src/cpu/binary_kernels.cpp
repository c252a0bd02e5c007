// CPU kernels of the binary arithmetic ops: the functors of ops/functors.h over cpu_kernel.
#include "cpu/loops.h"
#include "ops/binary.h"

namespace ignis::cpu {
/// out = F(a, b) for every dtype, all operands of dtype `dt`.
template <class F>
void binary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "binary", [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
}
/// Same, floating dtypes only.
template <class F>
void binary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "binary", [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
}

IGNIS_REGISTER_KERNEL(add_stub, CPU, &binary_kernel<fn::Add>);
IGNIS_REGISTER_KERNEL(sub_stub, CPU, &binary_kernel<fn::Sub>);
IGNIS_REGISTER_KERNEL(mul_stub, CPU, &binary_kernel<fn::Mul>);
IGNIS_REGISTER_KERNEL(div_stub, CPU, &binary_float_kernel<fn::Div>);
}  // namespace ignis::cpu
