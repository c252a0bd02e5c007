// The tail graph mode fuses onto a convolution or a linear (conv2d_pointwise, linear_pointwise):
// an activation and a residual add, in either order. One description for both ops: the
// activations' names, the oneDNN post-op chain they become, and the composite they mean.
#pragma once

#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "ignis/tensor.h"

namespace ignis::jit::detail {

enum class Activation : int { none = 0, relu, gelu, gelu_tanh, silu };

/// The activation named `name` ("none", "relu", "gelu", "gelu_tanh", "silu"); an ignis::Error
/// naming `op` and the name otherwise.
Activation activation_named(const char* op, const std::string& name);

/// The post-op chain: activation then `residual` (the op that adds the residual: a sum for a
/// convolution, a binary add for a matmul), or the residual first when `add_first`. Returns the
/// residual's index in the chain (-1 without one).
template <class AddResidual>
int append_post_ops(dnnl::post_ops& ops, Activation act, bool residual, bool add_first,
                    AddResidual&& add_residual) {
  int at = -1;
  if (residual && add_first) {
    at = ops.len();
    add_residual(ops);
  }
  switch (act) {
    case Activation::relu: ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f); break;
    case Activation::gelu:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_erf, 0.f, 0.f);
      break;
    case Activation::gelu_tanh:
      ops.append_eltwise(1.f, dnnl::algorithm::eltwise_gelu_tanh, 0.f, 0.f);
      break;
    case Activation::silu: ops.append_eltwise(1.f, dnnl::algorithm::eltwise_swish, 1.f, 0.f); break;
    case Activation::none: break;
  }
  if (residual && !add_first) {
    at = ops.len();
    add_residual(ops);
  }
  return at;
}

/// The same tail run as ops (autograd records each): activation(y) + other, or
/// activation(y + other) when `add_first`; `other` may be undefined.
Tensor apply_pointwise(const Tensor& y, const Tensor& other, Activation act, bool add_first);

}  // namespace ignis::jit::detail
