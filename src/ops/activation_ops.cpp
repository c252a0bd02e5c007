// The activations of ignis/activation_ops.def, generated from their one-line records: for each,
// its kernel stubs, its registry records (out of place and in place), its front ends (dtype
// rule, the kernel call, the backward recorded) and its fused backward op, which is itself
// differentiable (its derivative in x is the list's `dx` column), so double backward works.
#include "ops/activation_ops.h"

#include "core/op_call.h"
#include "ops/unary.h"

namespace ignis {
namespace {

using autograd::BackwardCtx;
using autograd::SavedVariable;

/// The dtypes an activation takes (the list's dtypes column).
enum class ActivationDtypes { FLOAT, ANY };

/// The compute dtype of an activation of `x`: to_floating for FLOAT ops; x's own for ANY ops,
/// which refuse bool (PyTorch: "Bool inputs not supported for hardtanh").
template <ActivationDtypes D>
DType activation_dtype(const Tensor& x, const char* op) {
  if constexpr (D == ActivationDtypes::FLOAT) {
    return to_floating(x.dtype());
  } else {
    IGNIS_CHECK(x.dtype() != kBool, op, ": bool inputs are not supported (got a tensor of shape ",
                x.sizes(), " and dtype bool)");
    return x.dtype();
  }
}

/// The kernel's OpArgs from the params in order (the first argument is a placeholder that lets
/// the generated call put a comma before each param).
OpArgs op_args(int, double a = 0, double b = 0, double c = 0) { return {a, b, c}; }

Tensor backward_kernel(const DispatchStub<ElementwiseFn>& stub, const Tensor& g, const Tensor& x,
                       OpArgs args) {
  const DType t = to_floating(result_type(g, x));
  return binary_op(stub, g, x, t, t, args);
}

/// d/dx of mish'(x) = t + x s (1 - t^2): s (1 - t^2) (2 + x (1 - s) - 2 x s t), with
/// s = sigmoid(x), t = tanh(softplus(x)) (the `dx` column of mish).
Tensor mish_second_derivative(const Tensor& x) {
  const Tensor s = sigmoid(x);
  const Tensor t = tanh(softplus(x));
  return s * (1.0 - t * t) * (2.0 + x * (1.0 - s) - x * s * t * 2.0);
}

}  // namespace

#define IGNIS_ACT_DOUBLE(n, d) , n.to_double()
#define IGNIS_ACT_CAPTURE_DOUBLE(n, d) , n = n.to_double()
#define IGNIS_ACT_CAPTURE(n, d) , n
#define IGNIS_ACTIVATION_OP(name, Functor, dtypes, dx_expr, ...)                                  \
  IGNIS_DEFINE_OP_STUB(name);                                                                     \
  IGNIS_DEFINE_OP_STUB(name##_backward);                                                          \
  IGNIS_OP(name,                                                                                  \
           #name "(Tensor self" IGNIS_PARAMS_MAP(IGNIS_PARAM_SCHEMA, __VA_ARGS__) ") -> Tensor",  \
           Tensor(const Tensor& IGNIS_PARAMS_MAP(IGNIS_PARAM_TYPE, __VA_ARGS__)), name,           \
           {.differentiable = true, .stubs = {&name##_stub}});                                    \
  IGNIS_OP(name##_,                                                                               \
           #name "_(Tensor(a!) self" IGNIS_PARAMS_MAP(IGNIS_PARAM_SCHEMA,                         \
                                                      __VA_ARGS__) ") -> Tensor(a!)",             \
           const Tensor&(const Tensor& IGNIS_PARAMS_MAP(IGNIS_PARAM_TYPE, __VA_ARGS__)), name##_, \
           {.differentiable = true, .stubs = {&name##_stub}});                                    \
  Tensor name##_backward(const Tensor& g, const Tensor& x IGNIS_PARAMS_MAP(                       \
                                              IGNIS_ACTIVATION_DOUBLE_PARAM, __VA_ARGS__)) {      \
    Tensor out = backward_kernel(name##_backward_stub, g, x,                                      \
                                 op_args(0 IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__)));      \
    if (autograd::any_needs_grad({&g, &x})) {                                                     \
      autograd::record(                                                                           \
          #name "_backward", {&g, &x}, {&out},                                                    \
          [sg = SavedVariable(g, false),                                                          \
           sx = SavedVariable(x, false) IGNIS_PARAMS_MAP(IGNIS_ACT_CAPTURE, __VA_ARGS__)](        \
              BackwardCtx& c, const TensorList& ggs) {                                            \
            const Tensor& gg = ggs[0];                                                            \
            const Tensor x = c.unpack(sx);                                                        \
            Tensor dg, dx;                                                                        \
            if (c.needs_input_grad(0))                                                            \
              dg = name##_backward(gg, x IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__));         \
            if (c.needs_input_grad(1)) {                                                          \
              [[maybe_unused]] const Tensor g = c.unpack(sg);                                     \
              dx = dx_expr;                                                                       \
            }                                                                                     \
            return TensorList{dg, dx};                                                            \
          });                                                                                     \
    }                                                                                             \
    return out;                                                                                   \
  }                                                                                               \
  Tensor name(const Tensor& self IGNIS_PARAMS_MAP(IGNIS_PARAM_DEF, __VA_ARGS__)) {                \
    IGNIS_DISPATCH(name, name, self IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__));              \
    const DType t = activation_dtype<ActivationDtypes::dtypes>(self, #name);                      \
    Tensor out = unary_op(name##_stub, self, t, t,                                                \
                          op_args(0 IGNIS_PARAMS_MAP(IGNIS_ACT_DOUBLE, __VA_ARGS__)));            \
    if (autograd::any_needs_grad({&self})) {                                                      \
      autograd::record(                                                                           \
          #name, {&self}, {&out},                                                                 \
          [sx = SavedVariable(self, false) IGNIS_PARAMS_MAP(                                      \
               IGNIS_ACT_CAPTURE_DOUBLE, __VA_ARGS__)](BackwardCtx& c, const TensorList& g) {     \
            return TensorList{name##_backward(                                                    \
                g[0], c.unpack(sx) IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__))};              \
          });                                                                                     \
    }                                                                                             \
    return out;                                                                                   \
  }                                                                                               \
  const Tensor& name##_(const Tensor& self IGNIS_PARAMS_MAP(IGNIS_PARAM_DEF, __VA_ARGS__)) {      \
    IGNIS_DISPATCH(name##_, name##_, self IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__));        \
    /* A Tensor is a handle: the write goes to the shared data, as LibTorch's in-place ops. */    \
    Tensor& s = const_cast<Tensor&>(self);                                                        \
    const DType t = activation_dtype<ActivationDtypes::dtypes>(self, #name "_");                  \
    return inplace_unary(s, name##_stub, t,                                                       \
                         op_args(0 IGNIS_PARAMS_MAP(IGNIS_ACT_DOUBLE, __VA_ARGS__)), #name "_",   \
                         true, [&](const Tensor& x) {                                             \
                           return ignis::name(x IGNIS_PARAMS_MAP(IGNIS_PARAM_ARG, __VA_ARGS__));  \
                         });                                                                      \
  }
#include "ignis/activation_ops.def"

}  // namespace ignis
