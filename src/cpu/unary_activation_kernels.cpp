// CPU kernels of the activations and of their fused backward ops (g, saved) -> input grad.
#include "cpu/loops.h"
#include "ops/unary.h"

namespace ignis::cpu {
namespace {

template <class F>
void unary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "unary", [&]<class T>() { cpu_kernel<T, T>(it, F{args}); });
}
template <class F>
void unary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "unary", [&]<class T>() { cpu_kernel<T, T>(it, F{args}); });
}
template <class F>
void binary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "binary", [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
}

}  // namespace

IGNIS_REGISTER_KERNEL(relu_stub, CPU, &unary_kernel<fn::Relu>);
IGNIS_REGISTER_KERNEL(leaky_relu_stub, CPU, &unary_float_kernel<fn::LeakyRelu>);
IGNIS_REGISTER_KERNEL(gelu_stub, CPU, &unary_float_kernel<fn::Gelu>);
IGNIS_REGISTER_KERNEL(gelu_tanh_stub, CPU, &unary_float_kernel<fn::GeluTanh>);
IGNIS_REGISTER_KERNEL(silu_stub, CPU, &unary_float_kernel<fn::Silu>);
IGNIS_REGISTER_KERNEL(softplus_stub, CPU, &unary_float_kernel<fn::Softplus>);
IGNIS_REGISTER_KERNEL(threshold_backward_stub, CPU, &binary_float_kernel<fn::ThresholdBackward>);
IGNIS_REGISTER_KERNEL(tanh_backward_stub, CPU, &binary_float_kernel<fn::TanhBackward>);
IGNIS_REGISTER_KERNEL(sigmoid_backward_stub, CPU, &binary_float_kernel<fn::SigmoidBackward>);
IGNIS_REGISTER_KERNEL(leaky_relu_backward_stub, CPU, &binary_float_kernel<fn::LeakyReluBackward>);
IGNIS_REGISTER_KERNEL(gelu_backward_stub, CPU, &binary_float_kernel<fn::GeluBackward>);
IGNIS_REGISTER_KERNEL(gelu_tanh_backward_stub, CPU, &binary_float_kernel<fn::GeluTanhBackward>);
IGNIS_REGISTER_KERNEL(silu_backward_stub, CPU, &binary_float_kernel<fn::SiluBackward>);
IGNIS_REGISTER_KERNEL(softplus_backward_stub, CPU, &binary_float_kernel<fn::SoftplusBackward>);

}  // namespace ignis::cpu
