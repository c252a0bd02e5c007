// Activations: relu, leaky_relu, gelu, silu, softplus (tanh and sigmoid are in
// ignis/float_unary_ops.def). Their backward is a fused
// kernel (one pass over memory instead of a chain of ops), exposed as a differentiable op itself
// (threshold_backward, tanh_backward, ...) whose own backward is written in ignis ops, so double
// backward works.
#include "core/op_call.h"
#include "ops/unary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_OP_STUB(relu);
IGNIS_DEFINE_OP_STUB(leaky_relu);
IGNIS_DEFINE_OP_STUB(gelu);
constinit DispatchStub<ElementwiseFn> gelu_tanh_stub("gelu");
IGNIS_DEFINE_OP_STUB(silu);
IGNIS_DEFINE_OP_STUB(softplus);
IGNIS_DEFINE_OP_STUB(threshold_backward);
IGNIS_DEFINE_OP_STUB(tanh_backward);
IGNIS_DEFINE_OP_STUB(sigmoid_backward);
IGNIS_DEFINE_OP_STUB(leaky_relu_backward);
IGNIS_DEFINE_OP_STUB(gelu_backward);
constinit DispatchStub<ElementwiseFn> gelu_tanh_backward_stub("gelu_backward");
IGNIS_DEFINE_OP_STUB(silu_backward);
IGNIS_DEFINE_OP_STUB(softplus_backward);

#define ACTIVATION(name, stub)                                                 \
  IGNIS_OP(name, #name "(Tensor self) -> Tensor", Tensor(const Tensor&), name, \
           {.differentiable = true, .stubs = {&stub}})
ACTIVATION(relu, relu_stub);
ACTIVATION(silu, silu_stub);
#undef ACTIVATION
IGNIS_OP(leaky_relu, "leaky_relu(Tensor self, float negative_slope=0.01) -> Tensor",
         Tensor(const Tensor&, double), leaky_relu,
         {.differentiable = true, .stubs = {&leaky_relu_stub}});
IGNIS_OP(gelu, "gelu(Tensor self, *, str approximate='none') -> Tensor",
         Tensor(const Tensor&, const std::string&), gelu,
         {.differentiable = true, .stubs = {&gelu_stub, &gelu_tanh_stub}});
IGNIS_OP(softplus, "softplus(Tensor self, float beta=1, float threshold=20) -> Tensor",
         Tensor(const Tensor&, double, double), softplus,
         {.differentiable = true, .stubs = {&softplus_stub}});
#define INPLACE_ACTIVATION(name, stub)                                                  \
  IGNIS_OP_METHOD(name, #name "(Tensor(a!) self) -> Tensor(a!)", Tensor&() const, name, \
                  {.differentiable = true, .stubs = {&stub}})
INPLACE_ACTIVATION(relu_, relu_stub);
#undef INPLACE_ACTIVATION

namespace {
Tensor backward_kernel(const DispatchStub<ElementwiseFn>& stub, const Tensor& g, const Tensor& s,
                       OpArgs args = {}) {
  const DType t = to_floating(result_type(g, s));
  return binary_op(stub, g, s, t, t, args);
}
bool gelu_is_tanh(const std::string& approximate) {
  IGNIS_CHECK(approximate == "none" || approximate == "tanh",
              "gelu: approximate must be 'none' or 'tanh', but got '", approximate, "'");
  return approximate == "tanh";
}
}  // namespace

// ---- forward ops

Tensor relu(const Tensor& x) {
  IGNIS_DISPATCH(relu, relu, x);
  IGNIS_CHECK(x.dtype() != kBool, "relu: not supported for bool tensors");
  Tensor out = unary_op(relu_stub, x, x.dtype(), x.dtype());
  if (autograd::any_needs_grad({&x})) {
    autograd::record("relu", {&x}, {&out},
                     [so = save_output(out)](BackwardCtx& c, const TensorList& g) {
                       return TensorList{threshold_backward(g[0], c.unpack(so), 0)};
                     });
  }
  return out;
}

Tensor leaky_relu(const Tensor& x, double negative_slope) {
  IGNIS_DISPATCH(leaky_relu, leaky_relu, x, negative_slope);
  Tensor out = floating_unary(leaky_relu_stub, x, {negative_slope});
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "leaky_relu", {&x}, {&out},
        [sx = SavedVariable(x, false), negative_slope](BackwardCtx& c, const TensorList& g) {
          return TensorList{leaky_relu_backward(g[0], c.unpack(sx), negative_slope)};
        });
  }
  return out;
}

Tensor gelu(const Tensor& x, const std::string& approximate) {
  IGNIS_DISPATCH(gelu, gelu, x, approximate);
  const bool tanh_approx = gelu_is_tanh(approximate);
  Tensor out = floating_unary(tanh_approx ? gelu_tanh_stub : gelu_stub, x);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "gelu", {&x}, {&out},
        [sx = SavedVariable(x, false), tanh_approx](BackwardCtx& c, const TensorList& g) {
          return TensorList{gelu_backward(g[0], c.unpack(sx), tanh_approx)};
        });
  }
  return out;
}

Tensor silu(const Tensor& x) {
  IGNIS_DISPATCH(silu, silu, x);
  Tensor out = floating_unary(silu_stub, x);
  if (autograd::any_needs_grad({&x})) {
    autograd::record("silu", {&x}, {&out},
                     [sx = SavedVariable(x, false)](BackwardCtx& c, const TensorList& g) {
                       return TensorList{silu_backward(g[0], c.unpack(sx))};
                     });
  }
  return out;
}

Tensor softplus(const Tensor& x, double beta, double threshold) {
  IGNIS_DISPATCH(softplus, softplus, x, beta, threshold);
  IGNIS_CHECK(beta != 0, "softplus: beta must be nonzero");
  Tensor out = floating_unary(softplus_stub, x, {beta, threshold});
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "softplus", {&x}, {&out},
        [sx = SavedVariable(x, false), beta, threshold](BackwardCtx& c, const TensorList& g) {
          return TensorList{softplus_backward(g[0], c.unpack(sx), beta, threshold)};
        });
  }
  return out;
}

// ---- fused backward ops. Each is linear in g: d/dg is the op itself applied to the incoming
// gradient gg; d/d(saved) is gg * g * (the second derivative), in ignis ops.

Tensor threshold_backward(const Tensor& g, const Tensor& y, double threshold) {
  Tensor out = backward_kernel(threshold_backward_stub, g, y, {threshold});
  if (autograd::any_needs_grad({&g, &y})) {
    autograd::record(
        "threshold_backward", {&g, &y}, {&out},
        [sy = SavedVariable(y, false), threshold](BackwardCtx& c, const TensorList& gg) {
          // Piecewise constant in y: no gradient for it.
          return TensorList{threshold_backward(gg[0], c.unpack(sy), threshold), Tensor()};
        });
  }
  return out;
}

Tensor tanh_backward(const Tensor& g, const Tensor& y) {
  Tensor out = backward_kernel(tanh_backward_stub, g, y);
  if (autograd::any_needs_grad({&g, &y})) {
    autograd::record("tanh_backward", {&g, &y}, {&out},
                     [sg = SavedVariable(g, false), sy = SavedVariable(y, false)](
                         BackwardCtx& c, const TensorList& gg) {
                       const Tensor yv = c.unpack(sy);
                       return TensorList{
                           c.needs_input_grad(0) ? tanh_backward(gg[0], yv) : Tensor(),
                           c.needs_input_grad(1) ? gg[0] * c.unpack(sg) * yv * -2.0 : Tensor()};
                     });
  }
  return out;
}

Tensor sigmoid_backward(const Tensor& g, const Tensor& y) {
  Tensor out = backward_kernel(sigmoid_backward_stub, g, y);
  if (autograd::any_needs_grad({&g, &y})) {
    autograd::record(
        "sigmoid_backward", {&g, &y}, {&out},
        [sg = SavedVariable(g, false), sy = SavedVariable(y, false)](BackwardCtx& c,
                                                                     const TensorList& gg) {
          const Tensor yv = c.unpack(sy);
          return TensorList{
              c.needs_input_grad(0) ? sigmoid_backward(gg[0], yv) : Tensor(),
              c.needs_input_grad(1) ? gg[0] * c.unpack(sg) * (1.0 - yv * 2.0) : Tensor()};
        });
  }
  return out;
}

Tensor leaky_relu_backward(const Tensor& g, const Tensor& x, double negative_slope) {
  Tensor out = backward_kernel(leaky_relu_backward_stub, g, x, {negative_slope});
  if (autograd::any_needs_grad({&g, &x})) {
    autograd::record(
        "leaky_relu_backward", {&g, &x}, {&out},
        [sx = SavedVariable(x, false), negative_slope](BackwardCtx& c, const TensorList& gg) {
          return TensorList{leaky_relu_backward(gg[0], c.unpack(sx), negative_slope), Tensor()};
        });
  }
  return out;
}

Tensor gelu_backward(const Tensor& g, const Tensor& x, bool tanh_approx) {
  Tensor out = backward_kernel(tanh_approx ? gelu_tanh_backward_stub : gelu_backward_stub, g, x);
  if (autograd::any_needs_grad({&g, &x})) {
    autograd::record("gelu_backward", {&g, &x}, {&out},
                     [sg = SavedVariable(g, false), sx = SavedVariable(x, false), tanh_approx](
                         BackwardCtx& c, const TensorList& gg) {
                       const Tensor xv = c.unpack(sx);
                       Tensor dg, dx;
                       if (c.needs_input_grad(0)) dg = gelu_backward(gg[0], xv, tanh_approx);
                       if (c.needs_input_grad(1)) {
                         Tensor second;  // d^2 gelu / dx^2
                         const Tensor x2 = xv * xv;
                         if (tanh_approx) {
                           // u = k (x + c x^3), t = tanh(u): gelu'' = (1 - t^2) (u' - x t u'^2 + 3
                           // k c x^2)
                           const double k = 0.79788456080286535588, cc = 0.044715;
                           const Tensor t = tanh((xv + x2 * xv * cc) * k);
                           const Tensor du = (x2 * (3 * cc) + 1.0) * k;
                           second = (1.0 - t * t) * (du - xv * t * du * du + x2 * (3 * k * cc));
                         } else {
                           // gelu'' = phi(x) (2 - x^2), phi the standard normal density
                           second = exp(x2 * -0.5) * 0.39894228040143267794 * (2.0 - x2);
                         }
                         dx = gg[0] * c.unpack(sg) * second;
                       }
                       return TensorList{dg, dx};
                     });
  }
  return out;
}

Tensor silu_backward(const Tensor& g, const Tensor& x) {
  Tensor out = backward_kernel(silu_backward_stub, g, x);
  if (autograd::any_needs_grad({&g, &x})) {
    autograd::record("silu_backward", {&g, &x}, {&out},
                     [sg = SavedVariable(g, false), sx = SavedVariable(x, false)](
                         BackwardCtx& c, const TensorList& gg) {
                       const Tensor xv = c.unpack(sx);
                       Tensor dg, dx;
                       if (c.needs_input_grad(0)) dg = silu_backward(gg[0], xv);
                       if (c.needs_input_grad(1)) {
                         // silu'' = s (1 - s) (2 + x (1 - 2 s)), s = sigmoid(x)
                         const Tensor s = sigmoid(xv);
                         dx = gg[0] * c.unpack(sg) * (s * (1.0 - s) * (xv * (1.0 - s * 2.0) + 2.0));
                       }
                       return TensorList{dg, dx};
                     });
  }
  return out;
}

Tensor softplus_backward(const Tensor& g, const Tensor& x, double beta, double threshold) {
  Tensor out = backward_kernel(softplus_backward_stub, g, x, {beta, threshold});
  if (autograd::any_needs_grad({&g, &x})) {
    autograd::record("softplus_backward", {&g, &x}, {&out},
                     [sg = SavedVariable(g, false), sx = SavedVariable(x, false), beta, threshold](
                         BackwardCtx& c, const TensorList& gg) {
                       const Tensor xv = c.unpack(sx);
                       Tensor dg, dx;
                       if (c.needs_input_grad(0))
                         dg = softplus_backward(gg[0], xv, beta, threshold);
                       if (c.needs_input_grad(1)) {
                         // beta s (1 - s) with s = sigmoid(beta x); 0 in the linear region
                         const Tensor bx = xv * beta;
                         const Tensor s = sigmoid(bx);
                         dx = where(bx > threshold, 0.0,
                                    gg[0] * c.unpack(sg) * (s * (1.0 - s) * beta));
                       }
                       return TensorList{dg, dx};
                     });
  }
  return out;
}

// ---- methods and in-place forms

Tensor Tensor::relu() const { return ignis::relu(*this); }

Tensor& Tensor::relu_() const {
  IGNIS_DISPATCH_METHOD(relu_, relu_);
  IGNIS_CHECK(dtype() != kBool, "relu_: not supported for bool tensors");
  return inplace_unary(mut(), relu_stub, dtype(), {}, "relu_", false,
                       [](const Tensor& x) { return ignis::relu(x); });
}

}  // namespace ignis
