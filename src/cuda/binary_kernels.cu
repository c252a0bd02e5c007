// CUDA kernels of the binary arithmetic ops: the functors of ops/functors.h over gpu_kernel.
#include "cuda/loops.cuh"
#include "ops/binary.h"

namespace ignis::cuda {
namespace {
template <class F>
void binary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "binary", [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}
template <class F>
void binary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "binary", [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}
}  // namespace

IGNIS_REGISTER_KERNEL(add_stub, CUDA, &binary_kernel<fn::Add>);
IGNIS_REGISTER_KERNEL(sub_stub, CUDA, &binary_kernel<fn::Sub>);
IGNIS_REGISTER_KERNEL(mul_stub, CUDA, &binary_kernel<fn::Mul>);
IGNIS_REGISTER_KERNEL(div_stub, CUDA, &binary_float_kernel<fn::Div>);
}  // namespace ignis::cuda
