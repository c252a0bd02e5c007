// Binary arithmetic: add, sub, mul, div. Each op is one record: promotion, the kernel call, and
// its backward written in ignis ops (the engine un-broadcasts the results).
#include "autograd/node.h"
#include "ops/binary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(add_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(sub_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(mul_stub, ElementwiseFn);
IGNIS_DEFINE_STUB(div_stub, ElementwiseFn);

Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType t = result_type(a, b);
  Tensor out = binary_op(add_stub, a, b, t, t, {alpha.to_double()});
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("add", {&a, &b}, {&out},
                     [alpha = alpha.to_double()](BackwardCtx& c, const TensorList& g) {
                       return TensorList{g[0], c.needs_input_grad(1)
                                                   ? (alpha == 1 ? g[0] : g[0] * alpha)
                                                   : Tensor()};
                     });
  }
  return out;
}

Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha) {
  const DType t = result_type(a, b);
  IGNIS_CHECK(t != kBool, "sub: subtraction of two bool tensors is not supported; use "
              "logical_xor or logical_not");
  Tensor out = binary_op(sub_stub, a, b, t, t, {alpha.to_double()});
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("sub", {&a, &b}, {&out},
                     [alpha = alpha.to_double()](BackwardCtx& c, const TensorList& g) {
                       return TensorList{g[0], c.needs_input_grad(1) ? g[0] * (-alpha)
                                                                     : Tensor()};
                     });
  }
  return out;
}

Tensor mul(const Tensor& a, const Tensor& b) {
  const DType t = result_type(a, b);
  Tensor out = binary_op(mul_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("mul", {&a, &b}, {&out},
                     [sa = SavedVariable(a, false), sb = SavedVariable(b, false)](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{
                           c.needs_input_grad(0) ? g[0] * c.unpack(sb) : Tensor(),
                           c.needs_input_grad(1) ? g[0] * c.unpack(sa) : Tensor()};
                     });
  }
  return out;
}

Tensor div(const Tensor& a, const Tensor& b) {
  const DType t = to_floating(result_type(a, b));
  Tensor out = binary_op(div_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("div", {&a, &b}, {&out},
                     [sa = SavedVariable(a, false), sb = SavedVariable(b, false)](
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
  return add(a, wrap_scalar(b, result_type(a, b), a.device()), alpha);
}
Tensor sub(const Tensor& a, Scalar b, Scalar alpha) {
  return sub(a, wrap_scalar(b, result_type(a, b), a.device()), alpha);
}
Tensor rsub(const Tensor& a, Scalar b) {
  return sub(wrap_scalar(b, result_type(a, b), a.device()), a);
}
Tensor mul(const Tensor& a, Scalar b) {
  return mul(a, wrap_scalar(b, result_type(a, b), a.device()));
}
Tensor div(const Tensor& a, Scalar b) {
  return div(a, wrap_scalar(b, result_type(a, b), a.device()));
}
Tensor div(Scalar a, const Tensor& b) {
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

Tensor& Tensor::add_(const Tensor& o, Scalar alpha) {
  return inplace_binary(*this, o, add_stub, result_type(*this, o), {alpha.to_double()}, "add_",
                        [&](const Tensor& a, const Tensor& b) { return ignis::add(a, b, alpha); });
}
Tensor& Tensor::add_(Scalar o, Scalar alpha) {
  return add_(wrap_scalar(o, result_type(*this, o), device()), alpha);
}
Tensor& Tensor::sub_(const Tensor& o, Scalar alpha) {
  return inplace_binary(*this, o, sub_stub, result_type(*this, o), {alpha.to_double()}, "sub_",
                        [&](const Tensor& a, const Tensor& b) { return ignis::sub(a, b, alpha); });
}
Tensor& Tensor::sub_(Scalar o, Scalar alpha) {
  return sub_(wrap_scalar(o, result_type(*this, o), device()), alpha);
}
Tensor& Tensor::mul_(const Tensor& o) {
  return inplace_binary(*this, o, mul_stub, result_type(*this, o), {}, "mul_",
                        [](const Tensor& a, const Tensor& b) { return ignis::mul(a, b); });
}
Tensor& Tensor::mul_(Scalar o) { return mul_(wrap_scalar(o, result_type(*this, o), device())); }
Tensor& Tensor::div_(const Tensor& o) {
  return inplace_binary(*this, o, div_stub, to_floating(result_type(*this, o)), {}, "div_",
                        [](const Tensor& a, const Tensor& b) { return ignis::div(a, b); });
}
Tensor& Tensor::div_(Scalar o) { return div_(wrap_scalar(o, result_type(*this, o), device())); }

}  // namespace ignis
