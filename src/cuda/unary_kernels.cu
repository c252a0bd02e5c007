// CUDA kernels of the unary math ops, pow, clamp, maximum and minimum, and of the activations
// with their fused backward ops: the functors of ops/functors.h over gpu_kernel, registered for
// the same stubs as cpu/unary_kernels.cpp and cpu/unary_activation_kernels.cpp.
#include "cuda/loops.cuh"
#include "ops/unary.h"

namespace ignis::cuda {
namespace {

template <class F>
void unary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "unary", [&]<class T>() { gpu_kernel<T, T>(it, F{args}); });
}
template <class F>
void unary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "unary", [&]<class T>() { gpu_kernel<T, T>(it, F{args}); });
}
template <class F>
void binary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "binary", [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}
template <class F>
void binary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "binary", [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}

void pow_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "pow", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("pow: not supported for bool tensors");
    } else {
      gpu_kernel<T, T, T>(it, fn::Pow{args});
    }
  });
}

// x ^ scalar: the exact forms the CPU kernel picks for the common exponents.
void pow_scalar_kernel(const TensorIter& it, DType dt, OpArgs args) {
  const double e = args.a;
  dispatch_dtype(dt, "pow", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("pow: not supported for bool tensors");
    } else {
      if (e == 2) return gpu_kernel<T, T>(it, fn::Square{args});
      if (e == 3) return gpu_kernel<T, T>(it, fn::Cube{args});
      if constexpr (fn::is_float_v<acc_t<T>>) {
        if (e == 0.5) return gpu_kernel<T, T>(it, fn::Sqrt{args});
        if (e == -0.5) return gpu_kernel<T, T>(it, fn::Rsqrt{args});
        if (e == -1) return gpu_kernel<T, T>(it, fn::Reciprocal{args});
      }
      gpu_kernel<T, T>(it, fn::PowScalar{args});
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(neg_stub, CUDA, &unary_kernel<fn::Neg>);
IGNIS_REGISTER_KERNEL(abs_stub, CUDA, &unary_kernel<fn::Abs>);
IGNIS_REGISTER_KERNEL(sign_stub, CUDA, &unary_kernel<fn::Sign>);
#define IGNIS_FLOAT_UNARY_OP(name, Functor, ...) \
  IGNIS_REGISTER_KERNEL(name##_stub, CUDA, &unary_float_kernel<fn::Functor>);
#include "ignis/float_unary_ops.def"
IGNIS_REGISTER_KERNEL(floor_stub, CUDA, &unary_float_kernel<fn::Floor>);
IGNIS_REGISTER_KERNEL(ceil_stub, CUDA, &unary_float_kernel<fn::Ceil>);
IGNIS_REGISTER_KERNEL(round_stub, CUDA, &unary_float_kernel<fn::Round>);
IGNIS_REGISTER_KERNEL(trunc_stub, CUDA, &unary_float_kernel<fn::Trunc>);
IGNIS_REGISTER_KERNEL(pow_stub, CUDA, &pow_kernel);
IGNIS_REGISTER_KERNEL(pow_scalar_stub, CUDA, &pow_scalar_kernel);
IGNIS_REGISTER_KERNEL(clamp_stub, CUDA, &unary_kernel<fn::Clamp>);
IGNIS_REGISTER_KERNEL(clamp_min_stub, CUDA, &unary_kernel<fn::ClampMin>);
IGNIS_REGISTER_KERNEL(clamp_max_stub, CUDA, &unary_kernel<fn::ClampMax>);
IGNIS_REGISTER_KERNEL(maximum_stub, CUDA, &binary_kernel<fn::Maximum>);
IGNIS_REGISTER_KERNEL(minimum_stub, CUDA, &binary_kernel<fn::Minimum>);

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
