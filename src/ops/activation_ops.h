// Kernel stubs and fused backward ops of the activations of ignis/activation_ops.def (front ends
// in ops/activation_ops.cpp, CPU kernels in cpu/activation_kernels.cpp), and the stubs of the
// binary math ops of ignis/binary_ops.def (front ends in ops/binary_math.cpp).
#pragma once

#include "ops/elementwise.h"

namespace ignis {

/// selu's alpha and scale: selu is elu(x, kSeluAlpha, kSeluScale).
inline constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
inline constexpr double kSeluScale = 1.0507009873554804934193349852946;

// For each activation: `name_stub` (the forward, of x) and `name_backward_stub` (g * f'(x), of
// g and x), and the differentiable backward op name_backward(g, x, params...) (params as doubles).
#define IGNIS_ACTIVATION_DOUBLE_PARAM(n, d) , double n
#define IGNIS_ACTIVATION_OP(name, Functor, dtypes, dx, ...)                 \
  IGNIS_DECLARE_STUB(name##_stub, ElementwiseFn);                           \
  IGNIS_DECLARE_STUB(name##_backward_stub, ElementwiseFn);                  \
  Tensor name##_backward(const Tensor& g, const Tensor& x IGNIS_PARAMS_MAP( \
                                              IGNIS_ACTIVATION_DOUBLE_PARAM, __VA_ARGS__));
#include "ignis/activation_ops.def"

#define IGNIS_BINARY_OP(name, ...) IGNIS_DECLARE_STUB(name##_stub, ElementwiseFn);
#define IGNIS_BINARY_SCALAR_OP(name, ...) IGNIS_DECLARE_STUB(name##_stub, ElementwiseFn);
#include "ignis/binary_ops.def"
/// a / b rounded toward -inf (PyTorch's floor division of floats), for remainder's backward.
IGNIS_DECLARE_STUB(floor_quotient_stub, ElementwiseFn);

}  // namespace ignis
