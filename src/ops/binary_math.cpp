// The binary math ops of ignis/binary_ops.def (atan2, fmod, remainder), generated from their
// one-line records: for each, its kernel stub, its registry records (tensor and scalar other,
// out of place and in place), its front ends and its methods. The operands broadcast through
// TensorIter; the backward gives gradients of the output's shape and the engine sums them down.
#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/activation_ops.h"
#include "ops/unary.h"

namespace ignis {
namespace {

using autograd::BackwardCtx;
using autograd::SavedVariable;

/// The dtypes a binary op takes (the list's dtypes column).
enum class BinaryDtypes { FLOAT, INTEGRAL };

/// The compute dtype of op(a, b): PyTorch's result_type, to_floating for FLOAT ops; INTEGRAL
/// ops refuse bool.
template <BinaryDtypes D>
DType binary_dtype(const Tensor& a, const Tensor& b, const char* op) {
  const DType t = result_type(a, b);
  if constexpr (D == BinaryDtypes::FLOAT) {
    return to_floating(t);
  } else {
    IGNIS_CHECK(t != kBool, op, ": not supported for bool tensors (shapes ", a.sizes(), " and ",
                b.sizes(), ", dtypes ", a.dtype(), " and ", b.dtype(), ")");
    return t;
  }
}

/// In place: the kernel writes into self when no autograd is involved; otherwise self takes the
/// values and history of the out-of-place op run on a clone of self.
template <class OutOfPlace>
Tensor& inplace_binary(Tensor& self, const Tensor& other, const DispatchStub<ElementwiseFn>& stub,
                       DType compute, const char* op, OutOfPlace f) {
  if (autograd::any_needs_grad({&self, &other})) {
    check_inplace(self, op);
    return inplace_from(self, f(self.clone(), other), op);
  }
  inplace_op(stub, self, other, compute);
  return self;
}

/// a // b (PyTorch's div(a, b, rounding_mode="floor") for floats): the quotient in remainder's
/// gradient for its divisor. Piecewise constant: no gradient of its own.
Tensor floor_quotient(const Tensor& a, const Tensor& b) {
  const DType t = to_floating(result_type(a, b));
  return binary_op(floor_quotient_stub, a, b, t, t);
}

}  // namespace

IGNIS_DEFINE_OP_STUB(floor_quotient);

#define IGNIS_BINARY_RECORD_OPTS(name)                \
  {                                                   \
    .differentiable = true, .stubs = { &name##_stub } \
  }
/// The tensor-tensor form; `ovl` is the overload name ("" or ".Tensor") and `id` its record id.
#define IGNIS_BINARY_TENSOR(name, id, ovl, Functor, dtypes, ga_expr, gb_expr)                     \
  IGNIS_OP(id, #name ovl "(Tensor self, Tensor other) -> Tensor",                                 \
           Tensor(const Tensor&, const Tensor&), name, IGNIS_BINARY_RECORD_OPTS(name));           \
  IGNIS_OP_METHOD(id##_inplace, #name "_" ovl "(Tensor(a!) self, Tensor other) -> Tensor(a!)",    \
                  Tensor&(const Tensor&) const, name##_, IGNIS_BINARY_RECORD_OPTS(name));         \
  Tensor name(const Tensor& self, const Tensor& other) {                                          \
    IGNIS_DISPATCH(id, name, self, other);                                                        \
    const DType t = binary_dtype<BinaryDtypes::dtypes>(self, other, #name);                       \
    Tensor out = binary_op(name##_stub, self, other, t, t);                                       \
    if (autograd::any_needs_grad({&self, &other})) {                                              \
      autograd::record(#name, {&self, &other}, {&out},                                            \
                       [sa = SavedVariable(self, false), sb = SavedVariable(other, false)](       \
                           BackwardCtx& c, const TensorList& gs) {                                \
                         const Tensor& g = gs[0];                                                 \
                         const Tensor a = c.unpack(sa), b = c.unpack(sb);                         \
                         return TensorList{c.needs_input_grad(0) ? Tensor(ga_expr) : Tensor(),    \
                                           c.needs_input_grad(1) ? Tensor(gb_expr) : Tensor()};   \
                       });                                                                        \
    }                                                                                             \
    return out;                                                                                   \
  }                                                                                               \
  Tensor Tensor::name(const Tensor& other) const { return ignis::name(*this, other); }            \
  Tensor& Tensor::name##_(const Tensor& other) const {                                            \
    IGNIS_DISPATCH_METHOD(id##_inplace, name##_, other);                                          \
    return inplace_binary(mut(), other, name##_stub,                                              \
                          binary_dtype<BinaryDtypes::dtypes>(mut(), other, #name "_"), #name "_", \
                          [](const Tensor& a, const Tensor& b) { return ignis::name(a, b); });    \
  }

#define IGNIS_BINARY_OP(name, Functor, dtypes, ga, gb) \
  IGNIS_DEFINE_OP_STUB(name);                          \
  IGNIS_BINARY_TENSOR(name, name, "", Functor, dtypes, ga, gb)
/// With the scalar overloads, which wrap the scalar as a 0-d tensor of the promoted dtype.
#define IGNIS_BINARY_SCALAR_OP(name, Functor, dtypes, ga, gb)                                     \
  IGNIS_DEFINE_OP_STUB(name);                                                                     \
  IGNIS_BINARY_TENSOR(name, name##_Tensor, ".Tensor", Functor, dtypes, ga, gb)                    \
  IGNIS_OP(name##_Scalar, #name ".Scalar(Tensor self, Scalar other) -> Tensor",                   \
           Tensor(const Tensor&, Scalar), name, {.differentiable = true, .kind = "composite"});   \
  IGNIS_OP_METHOD(name##_Scalar_inplace,                                                          \
                  #name "_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",                  \
                  Tensor&(Scalar) const, name##_, {.differentiable = true, .kind = "composite"}); \
  Tensor name(const Tensor& self, Scalar other) {                                                 \
    IGNIS_DISPATCH(name##_Scalar, name, self, other);                                             \
    return name(self, wrap_scalar(other, result_type(self, other), self.device()));               \
  }                                                                                               \
  Tensor Tensor::name(Scalar other) const { return ignis::name(*this, other); }                   \
  Tensor& Tensor::name##_(Scalar other) const {                                                   \
    IGNIS_DISPATCH_METHOD(name##_Scalar_inplace, name##_, other);                                 \
    return name##_(wrap_scalar(other, result_type(mut(), other), device()));                      \
  }
#include "ignis/binary_ops.def"

// remainder with a Scalar self (Python's `2 % t`).
IGNIS_OP(remainder_Scalar_Tensor, "remainder.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
         Tensor(Scalar, const Tensor&), remainder, {.differentiable = true, .kind = "composite"});
Tensor remainder(Scalar self, const Tensor& other) {
  IGNIS_DISPATCH(remainder_Scalar_Tensor, remainder, self, other);
  return remainder(wrap_scalar(self, result_type(other, self), other.device()), other);
}

}  // namespace ignis
