// CUDA kernels of the unary math ops, pow, clamp, maximum and minimum (the list shared with the
// CPU: ops/unary_kernels.inc), and of the activations with their fused backward ops: the
// functors of ops/functors.h over gpu_kernel, registered for the same stubs as
// cpu/unary_kernels.cpp and cpu/unary_activation_kernels.cpp.
#include "cuda/loops.cuh"
#include "ops/unary.h"

namespace ignis::cuda {
#define IGNIS_ELEMENTWISE_LOOP gpu_kernel
#define IGNIS_KERNEL_DEVICE CUDA
#include "ops/unary_kernels.inc"
#undef IGNIS_ELEMENTWISE_LOOP
#undef IGNIS_KERNEL_DEVICE

namespace {
// The activations' backward ops: out = F(grad, saved), floating dtypes.
template <class F>
void binary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "binary", [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}
}  // namespace

IGNIS_REGISTER_KERNEL(relu_stub, CUDA, &unary_kernel<fn::Relu>);
IGNIS_REGISTER_KERNEL(leaky_relu_stub, CUDA, &unary_float_kernel<fn::LeakyRelu>);
IGNIS_REGISTER_KERNEL(gelu_stub, CUDA, &unary_float_kernel<fn::Gelu>);
IGNIS_REGISTER_KERNEL(gelu_tanh_stub, CUDA, &unary_float_kernel<fn::GeluTanh>);
IGNIS_REGISTER_KERNEL(silu_stub, CUDA, &unary_float_kernel<fn::Silu>);
IGNIS_REGISTER_KERNEL(softplus_stub, CUDA, &unary_float_kernel<fn::Softplus>);
IGNIS_REGISTER_KERNEL(threshold_backward_stub, CUDA, &binary_float_kernel<fn::ThresholdBackward>);
IGNIS_REGISTER_KERNEL(tanh_backward_stub, CUDA, &binary_float_kernel<fn::TanhBackward>);
IGNIS_REGISTER_KERNEL(sigmoid_backward_stub, CUDA, &binary_float_kernel<fn::SigmoidBackward>);
IGNIS_REGISTER_KERNEL(leaky_relu_backward_stub, CUDA, &binary_float_kernel<fn::LeakyReluBackward>);
IGNIS_REGISTER_KERNEL(gelu_backward_stub, CUDA, &binary_float_kernel<fn::GeluBackward>);
IGNIS_REGISTER_KERNEL(gelu_tanh_backward_stub, CUDA, &binary_float_kernel<fn::GeluTanhBackward>);
IGNIS_REGISTER_KERNEL(silu_backward_stub, CUDA, &binary_float_kernel<fn::SiluBackward>);
IGNIS_REGISTER_KERNEL(softplus_backward_stub, CUDA, &binary_float_kernel<fn::SoftplusBackward>);

}  // namespace ignis::cuda
