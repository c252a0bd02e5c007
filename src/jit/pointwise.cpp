// The activations and residual tail shared by conv2d_pointwise and linear_pointwise.
#include "jit/pointwise.h"

#include "ignis/error.h"
#include "ignis/ops.h"

namespace ignis::jit::detail {

Activation activation_named(const char* op, const std::string& name) {
  if (name == "none") return Activation::none;
  if (name == "relu") return Activation::relu;
  if (name == "gelu") return Activation::gelu;
  if (name == "gelu_tanh") return Activation::gelu_tanh;
  if (name == "silu") return Activation::silu;
  IGNIS_FAIL(op, ": unknown activation '", name.substr(0, 64),
             "' (expected none, relu, gelu, gelu_tanh or silu)");
}

Tensor apply_pointwise(const Tensor& y, const Tensor& other, Activation act, bool add_first) {
  Tensor r = other.defined() && add_first ? add(y, other) : y;
  switch (act) {
    case Activation::relu: r = relu(r); break;
    case Activation::gelu: r = gelu(r); break;
    case Activation::gelu_tanh: r = gelu(r, "tanh"); break;
    case Activation::silu: r = silu(r); break;
    case Activation::none: break;
  }
  return other.defined() && !add_first ? add(r, other) : r;
}

}  // namespace ignis::jit::detail
