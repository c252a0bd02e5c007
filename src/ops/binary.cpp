// Binary arithmetic: add, sub, mul, div. Each op is one record: promotion, the kernel call, and
// its backward written in ignis ops (the engine un-broadcasts the results).
#include "ops/binary.h"

#include "autograd/node.h"
#include "core/op_call.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::save_if;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(add_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(sub_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(mul_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(div_stub, ElementwiseFn);

#define BINARY_STUBS(stub)                     \
  {                                            \
    .differentiable = true, .stubs = { &stub } \
  }
IGNIS_OP(add_Tensor, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, Scalar), add, BINARY_STUBS(add_stub));
IGNIS_OP(sub_Tensor, "sub.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, Scalar), sub, BINARY_STUBS(sub_stub));
IGNIS_OP(mul_Tensor, "mul.Tensor(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), mul, BINARY_STUBS(mul_stub));
IGNIS_OP(div_Tensor, "div.Tensor(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), div, BINARY_STUBS(div_stub));
IGNIS_OP(add_Scalar, "add.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
         Tensor(const Tensor&, Scalar, Scalar), add, BINARY_STUBS(add_stub));
IGNIS_OP(sub_Scalar, "sub.Scalar(Tensor self, Scalar other, Scalar alpha=1) -> Tensor",
         Tensor(const Tensor&, Scalar, Scalar), sub, BINARY_STUBS(sub_stub));
IGNIS_OP(rsub_Scalar, "rsub.Scalar(Tensor self, Scalar other) -> Tensor",
         Tensor(const Tensor&, Scalar), rsub, BINARY_STUBS(sub_stub));
IGNIS_OP(mul_Scalar, "mul.Scalar(Tensor self, Scalar other) -> Tensor",
         Tensor(const Tensor&, Scalar), mul, BINARY_STUBS(mul_stub));
IGNIS_OP(div_Scalar, "div.Scalar(Tensor self, Scalar other) -> Tensor",
         Tensor(const Tensor&, Scalar), div, BINARY_STUBS(div_stub));
IGNIS_OP(div_Scalar_Tensor, "div.Scalar_Tensor(Scalar self, Tensor other) -> Tensor",
         Tensor(Scalar, const Tensor&), div, BINARY_STUBS(div_stub));
IGNIS_OP_METHOD(add__Tensor,
                "add_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
                Tensor&(const Tensor&, Scalar) const, add_, BINARY_STUBS(add_stub));
IGNIS_OP_METHOD(add__Scalar,
                "add_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)",
                Tensor&(Scalar, Scalar) const, add_, BINARY_STUBS(add_stub));
IGNIS_OP_METHOD(sub__Tensor,
                "sub_.Tensor(Tensor(a!) self, Tensor other, *, Scalar alpha=1) -> Tensor(a!)",
                Tensor&(const Tensor&, Scalar) const, sub_, BINARY_STUBS(sub_stub));
IGNIS_OP_METHOD(sub__Scalar,
                "sub_.Scalar(Tensor(a!) self, Scalar other, Scalar alpha=1) -> Tensor(a!)",
                Tensor&(Scalar, Scalar) const, sub_, BINARY_STUBS(sub_stub));
IGNIS_OP_METHOD(mul__Tensor, "mul_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
                Tensor&(const Tensor&) const, mul_, BINARY_STUBS(mul_stub));
IGNIS_OP_METHOD(mul__Scalar, "mul_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
                Tensor&(Scalar) const, mul_, BINARY_STUBS(mul_stub));
IGNIS_OP_METHOD(div__Tensor, "div_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)",
                Tensor&(const Tensor&) const, div_, BINARY_STUBS(div_stub));
IGNIS_OP_METHOD(div__Scalar, "div_.Scalar(Tensor(a!) self, Scalar other) -> Tensor(a!)",
                Tensor&(Scalar) const, div_, BINARY_STUBS(div_stub));
#undef BINARY_STUBS

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  IGNIS_DISPATCH(add_Tensor, add, a, b, alpha);
  const DType t = result_type(a, b);
  Tensor out = binary_op(add_stub, a, b, t, t, {alpha.to_double()});
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record(
        "add", {&a, &b}, {&out}, [alpha = alpha.to_double()](BackwardCtx& c, const TensorList& g) {
          return TensorList{g[0],
                            c.needs_input_grad(1) ? (alpha == 1 ? g[0] : g[0] * alpha) : Tensor()};
        });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  IGNIS_DISPATCH(sub_Tensor, sub, a, b, alpha);
  const DType t = result_type(a, b);
  IGNIS_CHECK(t != kBool,
              "sub: subtraction of two bool tensors is not supported; use "
              "logical_xor or logical_not");
  Tensor out = binary_op(sub_stub, a, b, t, t, {alpha.to_double()});
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("sub", {&a, &b}, {&out},
                     [alpha = alpha.to_double()](BackwardCtx& c, const TensorList& g) {
                       return TensorList{g[0], c.needs_input_grad(1) ? g[0] * (-alpha) : Tensor()};
                     });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(mul_Tensor, mul, a, b);
  const DType t = result_type(a, b);
  Tensor out = binary_op(mul_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    // Each operand is saved for the other's gradient only (x * 0.5 keeps nothing alive).
    autograd::record("mul", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = save_if(b, needs_grad(a))](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{c.needs_input_grad(0) ? g[0] * c.unpack(sb) : Tensor(),
                                         c.needs_input_grad(1) ? g[0] * c.unpack(sa) : Tensor()};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(div_Tensor, div, a, b);
  const DType t = to_floating(result_type(a, b));
  Tensor out = binary_op(div_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("div", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = SavedVariable(b, false)](
                         BackwardCtx& c, const TensorList& g) {
                       Tensor bv = c.unpack(sb);
                       return TensorList{
                           c.needs_input_grad(0) ? g[0] / bv : Tensor(),
                           c.needs_input_grad(1) ? -g[0] * c.unpack(sa) / (bv * bv) : Tensor()};
                     });
  }
  return out;
}

// ---- scalar operands become 0-d tensors of the promoted dtype
Tensor add(const Tensor& a, Scalar b, Scalar alpha) {
  IGNIS_DISPATCH(add_Scalar, add, a, b, alpha);
  return add(a, wrap_scalar(b, result_type(a, b), a.device()), alpha);
}
Tensor sub(const Tensor& a, Scalar b, Scalar alpha) {
  IGNIS_DISPATCH(sub_Scalar, sub, a, b, alpha);
  return sub(a, wrap_scalar(b, result_type(a, b), a.device()), alpha);
}
Tensor rsub(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(rsub_Scalar, rsub, a, b);
  return sub(wrap_scalar(b, result_type(a, b), a.device()), a);
}
Tensor mul(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(mul_Scalar, mul, a, b);
  return mul(a, wrap_scalar(b, result_type(a, b), a.device()));
}
Tensor div(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(div_Scalar, div, a, b);
  return div(a, wrap_scalar(b, result_type(a, b), a.device()));
}
Tensor div(Scalar a, const Tensor& b) {
  IGNIS_DISPATCH(div_Scalar_Tensor, div, a, b);
  return div(wrap_scalar(a, result_type(b, a), b.device()), b);
}

Tensor operator+(const Tensor& a, const Tensor& b) { return add(a, b); }
Tensor operator+(const Tensor& a, Scalar b) { return add(a, b); }
Tensor operator+(Scalar a, const Tensor& b) { return add(b, a); }
Tensor operator-(const Tensor& a, const Tensor& b) { return sub(a, b); }
Tensor operator-(const Tensor& a, Scalar b) { return sub(a, b); }
Tensor operator-(Scalar a, const Tensor& b) { return rsub(b, a); }
Tensor operator*(const Tensor& a, const Tensor& b) { return mul(a, b); }
Tensor operator*(const Tensor& a, Scalar b) { return mul(a, b); }
Tensor operator*(Scalar a, const Tensor& b) { return mul(b, a); }
Tensor operator/(const Tensor& a, const Tensor& b) { return div(a, b); }
Tensor operator/(const Tensor& a, Scalar b) { return div(a, b); }
Tensor operator/(Scalar a, const Tensor& b) { return div(a, b); }

Tensor Tensor::add(const Tensor& o, Scalar alpha) const { return ignis::add(*this, o, alpha); }
Tensor Tensor::add(Scalar o, Scalar alpha) const { return ignis::add(*this, o, alpha); }
Tensor Tensor::sub(const Tensor& o, Scalar alpha) const { return ignis::sub(*this, o, alpha); }
Tensor Tensor::sub(Scalar o, Scalar alpha) const { return ignis::sub(*this, o, alpha); }
Tensor Tensor::mul(const Tensor& o) const { return ignis::mul(*this, o); }
Tensor Tensor::mul(Scalar o) const { return ignis::mul(*this, o); }
Tensor Tensor::div(const Tensor& o) const { return ignis::div(*this, o); }
Tensor Tensor::div(Scalar o) const { return ignis::div(*this, o); }

// ---- in place: a kernel writing into self when no autograd is involved; otherwise the
// out-of-place op recorded on a clone, whose result and history self then takes.
namespace {
template <class OutOfPlace>
Tensor& inplace_binary(Tensor& self, const Tensor& other, const DispatchStub<ElementwiseFn>& stub,
                       DType compute, OpArgs args, const char* op, OutOfPlace f) {
  if (autograd::any_needs_grad({&self, &other})) {
    check_inplace(self, op);
    return inplace_from(self, f(self.clone(), other), op);
  }
  inplace_op(stub, self, other, compute, args);
  return self;
}
}  // namespace

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) const {
  IGNIS_DISPATCH_METHOD(add__Tensor, add_, o, alpha);
  return inplace_binary(mut(), o, add_stub, result_type(mut(), o), {alpha.to_double()}, "add_",
                        [&](const Tensor& a, const Tensor& b) { return ignis::add(a, b, alpha); });
}
Tensor& Tensor::add_(Scalar o, Scalar alpha) const {
  IGNIS_DISPATCH_METHOD(add__Scalar, add_, o, alpha);
  return add_(wrap_scalar(o, result_type(mut(), o), device()), alpha);
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) const {
  IGNIS_DISPATCH_METHOD(sub__Tensor, sub_, o, alpha);
  return inplace_binary(mut(), o, sub_stub, result_type(mut(), o), {alpha.to_double()}, "sub_",
                        [&](const Tensor& a, const Tensor& b) { return ignis::sub(a, b, alpha); });
}
Tensor& Tensor::sub_(Scalar o, Scalar alpha) const {
  IGNIS_DISPATCH_METHOD(sub__Scalar, sub_, o, alpha);
  return sub_(wrap_scalar(o, result_type(mut(), o), device()), alpha);
}
Tensor& Tensor::mul_(const Tensor& o) const {
  IGNIS_DISPATCH_METHOD(mul__Tensor, mul_, o);
  return inplace_binary(mut(), o, mul_stub, result_type(mut(), o), {}, "mul_",
                        [](const Tensor& a, const Tensor& b) { return ignis::mul(a, b); });
}
Tensor& Tensor::mul_(Scalar o) const {
  IGNIS_DISPATCH_METHOD(mul__Scalar, mul_, o);
  return mul_(wrap_scalar(o, result_type(mut(), o), device()));
}
Tensor& Tensor::div_(const Tensor& o) const {
  IGNIS_DISPATCH_METHOD(div__Tensor, div_, o);
  return inplace_binary(mut(), o, div_stub, to_floating(result_type(mut(), o)), {}, "div_",
                        [](const Tensor& a, const Tensor& b) { return ignis::div(a, b); });
}
Tensor& Tensor::div_(Scalar o) const {
  IGNIS_DISPATCH_METHOD(div__Scalar, div_, o);
  return div_(wrap_scalar(o, result_type(mut(), o), device()));
}

}  // namespace ignis
