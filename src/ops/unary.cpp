// Unary math (neg, abs, sign, rounding), pow, clamp, maximum and minimum. The floating unary ops
// (exp, log, sqrt, trig, ...) are generated from ignis/float_unary_ops.def in ops/float_unary.cpp.
// Each op: dtype rule, kernel call, and a backward written in ignis ops (so it can be
// differentiated again). Floating math promotes integer and bool inputs to float32 like PyTorch.
#include "ops/unary.h"

#include "core/op_call.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_OP_STUB(neg);
IGNIS_DEFINE_OP_STUB(abs);
IGNIS_DEFINE_OP_STUB(sign);
IGNIS_DEFINE_OP_STUB(floor);
IGNIS_DEFINE_OP_STUB(ceil);
IGNIS_DEFINE_OP_STUB(round);
IGNIS_DEFINE_OP_STUB(trunc);
IGNIS_DEFINE_OP_STUB(pow);
constinit DispatchStub<ElementwiseFn> pow_scalar_stub("pow");
IGNIS_DEFINE_OP_STUB(clamp);
constinit DispatchStub<ElementwiseFn> clamp_min_stub("clamp");
constinit DispatchStub<ElementwiseFn> clamp_max_stub("clamp");
IGNIS_DEFINE_OP_STUB(maximum);
IGNIS_DEFINE_OP_STUB(minimum);

#define UNARY_OP(name, stub)                                                   \
  IGNIS_OP(name, #name "(Tensor self) -> Tensor", Tensor(const Tensor&), name, \
           {.differentiable = true, .stubs = {&stub}})
UNARY_OP(neg, neg_stub);
UNARY_OP(abs, abs_stub);
UNARY_OP(sign, sign_stub);
UNARY_OP(floor, floor_stub);
UNARY_OP(ceil, ceil_stub);
UNARY_OP(round, round_stub);
UNARY_OP(trunc, trunc_stub);
#undef UNARY_OP
IGNIS_OP(pow_Tensor_Tensor, "pow.Tensor_Tensor(Tensor self, Tensor exponent) -> Tensor",
         Tensor(const Tensor&, const Tensor&), pow, {.differentiable = true, .stubs = {&pow_stub}});
IGNIS_OP(pow_Tensor_Scalar, "pow.Tensor_Scalar(Tensor self, Scalar exponent) -> Tensor",
         Tensor(const Tensor&, Scalar), pow, {.differentiable = true, .stubs = {&pow_scalar_stub}});
IGNIS_OP(pow_Scalar, "pow.Scalar(Scalar self, Tensor exponent) -> Tensor",
         Tensor(Scalar, const Tensor&), pow, {.differentiable = true, .stubs = {&pow_stub}});
IGNIS_OP(clamp, "clamp(Tensor self, Scalar? min, Scalar? max=None) -> Tensor",
         Tensor(const Tensor&, std::optional<Scalar>, std::optional<Scalar>), clamp,
         {.differentiable = true, .stubs = {&clamp_stub, &clamp_min_stub, &clamp_max_stub}});
IGNIS_OP(maximum, "maximum(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), maximum,
         {.differentiable = true, .stubs = {&maximum_stub}});
IGNIS_OP(minimum, "minimum(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), minimum,
         {.differentiable = true, .stubs = {&minimum_stub}});
IGNIS_OP_METHOD(pow_, "pow_(Tensor(a!) self, Scalar exponent) -> Tensor(a!)", Tensor&(Scalar) const,
                pow_, {.differentiable = true, .stubs = {&pow_scalar_stub}});
#define INPLACE_UNARY_OP(name, stub)                                                    \
  IGNIS_OP_METHOD(name, #name "(Tensor(a!) self) -> Tensor(a!)", Tensor&() const, name, \
                  {.differentiable = true, .stubs = {&stub}})
INPLACE_UNARY_OP(neg_, neg_stub);
INPLACE_UNARY_OP(trunc_, trunc_stub);
#undef INPLACE_UNARY_OP
IGNIS_OP_METHOD(clamp_, "clamp_(Tensor(a!) self, Scalar? min, Scalar? max=None) -> Tensor(a!)",
                Tensor&(std::optional<Scalar>, std::optional<Scalar>) const, clamp_,
                {.differentiable = true, .stubs = {&clamp_stub, &clamp_min_stub, &clamp_max_stub}});

namespace {
// The result dtype of a tensor of dtype `t` with a scalar operand (result_type(Tensor, Scalar)).
DType scalar_result_type(DType t, Scalar s) {
  const DType st = s.is_floating_point() ? default_dtype() : s.is_integral() ? kInt64 : kBool;
  return dtype_category(st) > dtype_category(t) ? promote_types(t, st) : t;
}

// Rounding ops: identity (a copy) on integers, zero gradient on floats (like PyTorch).
Tensor rounding(const DispatchStub<ElementwiseFn>& stub, const char* op, const Tensor& x) {
  if (!x.is_floating_point()) return x.clone();
  Tensor out = unary_op(stub, x, x.dtype(), x.dtype());
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out}, [](BackwardCtx&, const TensorList& g) {
      return TensorList{zeros_like(g[0])};
    });
  }
  return out;
}
}  // namespace

Tensor neg(const Tensor& x) {
  IGNIS_DISPATCH(neg, neg, x);
  IGNIS_CHECK(x.dtype() != kBool,
              "neg: negation, the `-` operator, on a bool tensor is not supported; "
              "if you are trying to invert a mask, use logical_not() or `!` instead");
  Tensor out = unary_op(neg_stub, x, x.dtype(), x.dtype());
  if (autograd::any_needs_grad({&x})) {
    autograd::record("neg", {&x}, {&out},
                     [](BackwardCtx&, const TensorList& g) { return TensorList{neg(g[0])}; });
  }
  return out;
}

Tensor abs(const Tensor& x) {
  IGNIS_DISPATCH(abs, abs, x);
  Tensor out = unary_op(abs_stub, x, x.dtype(), x.dtype());
  if (autograd::any_needs_grad({&x})) {
    autograd::record("abs", {&x}, {&out},
                     [sx = SavedVariable(x, false)](BackwardCtx& c, const TensorList& g) {
                       return TensorList{g[0] * sign(c.unpack(sx))};
                     });
  }
  return out;
}

Tensor sign(const Tensor& x) {
  IGNIS_DISPATCH(sign, sign, x);
  Tensor out = unary_op(sign_stub, x, x.dtype(), x.dtype());
  if (autograd::any_needs_grad({&x})) {
    autograd::record("sign", {&x}, {&out}, [](BackwardCtx&, const TensorList& g) {
      return TensorList{zeros_like(g[0])};
    });
  }
  return out;
}

Tensor floor(const Tensor& x) {
  IGNIS_DISPATCH(floor, floor, x);
  return rounding(floor_stub, "floor", x);
}
Tensor ceil(const Tensor& x) {
  IGNIS_DISPATCH(ceil, ceil, x);
  return rounding(ceil_stub, "ceil", x);
}
Tensor round(const Tensor& x) {
  IGNIS_DISPATCH(round, round, x);
  return rounding(round_stub, "round", x);
}
Tensor trunc(const Tensor& x) {
  IGNIS_DISPATCH(trunc, trunc, x);
  return rounding(trunc_stub, "trunc", x);
}

// ---- pow

Tensor pow(const Tensor& a, const Tensor& e) {
  IGNIS_DISPATCH(pow_Tensor_Tensor, pow, a, e);
  const DType t = result_type(a, e);
  IGNIS_CHECK(t != kBool, "pow: not supported for bool tensors (", a.dtype(), " ^ ", e.dtype(),
              ")");
  Tensor out = binary_op(pow_stub, a, e, t, t);
  if (autograd::any_needs_grad({&a, &e})) {
    autograd::record("pow", {&a, &e}, {&out},
                     [sa = SavedVariable(a, false), se = SavedVariable(e, false),
                      so = save_output(out)](BackwardCtx& c, const TensorList& g) {
                       const Tensor av = c.unpack(sa), ev = c.unpack(se);
                       Tensor ga, ge;
                       if (c.needs_input_grad(0)) {
                         // x^0 is constant even where x^-1 is not finite.
                         ga = where(ev == 0, 0.0, g[0] * (ev * pow(av, ev - 1)));
                       }
                       if (c.needs_input_grad(1)) {
                         // d/de x^e = x^e log(x); 0 at x == 0 for e >= 0 (log(0) = -inf).
                         Tensor gy = g[0] * c.unpack(so);
                         ge = where(logical_and(ev >= 0, av == 0), 0.0, gy * log(av));
                       }
                       return TensorList{ga, ge};
                     });
  }
  return out;
}

Tensor pow(const Tensor& a, Scalar e) {
  IGNIS_DISPATCH(pow_Tensor_Scalar, pow, a, e);
  const DType t = result_type(a, e);
  IGNIS_CHECK(t != kBool, "pow: not supported for bool tensors (", a.dtype(), " ^ bool)");
  IGNIS_CHECK(!(is_integral(t) && e.is_integral() && e.to_int() < 0),
              "pow: integers to negative integer powers are not allowed (", t, " tensor ^ ",
              e.to_int(), ")");
  const double ed = e.to_double();
  Tensor out = unary_op(pow_scalar_stub, a, t, t, {ed});
  if (autograd::any_needs_grad({&a})) {
    autograd::record("pow", {&a}, {&out},
                     [sa = SavedVariable(a, false), ed](BackwardCtx& c, const TensorList& g) {
                       if (ed == 0) return TensorList{zeros_like(g[0])};
                       return TensorList{g[0] * (pow(c.unpack(sa), ed - 1) * ed)};
                     });
  }
  return out;
}

Tensor pow(Scalar a, const Tensor& e) {
  IGNIS_DISPATCH(pow_Scalar, pow, a, e);
  return pow(wrap_scalar(a, result_type(e, a), e.device()), e);
}

// ---- clamp

Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max) {
  IGNIS_DISPATCH(clamp, clamp, x, min, max);
  IGNIS_CHECK(min || max, "clamp: at least one of 'min' or 'max' must not be None");
  DType t = x.dtype();
  if (min) t = scalar_result_type(t, *min);
  if (max) t = scalar_result_type(t, *max);
  IGNIS_CHECK(t != kBool, "clamp: not supported for bool tensors");
  Tensor out;
  if (min && max) {
    out = unary_op(clamp_stub, x, t, t, {min->to_double(), max->to_double()});
  } else {
    out =
        unary_op(min ? clamp_min_stub : clamp_max_stub, x, t, t, {(min ? *min : *max).to_double()});
  }
  if (autograd::any_needs_grad({&x})) {
    autograd::record("clamp", {&x}, {&out},
                     [sx = SavedVariable(x, false), min, max](BackwardCtx& c, const TensorList& g) {
                       return TensorList{clamp_backward(g[0], c.unpack(sx), min, max)};
                     });
  }
  return out;
}

Tensor clamp_backward(const Tensor& g, const Tensor& x, std::optional<Scalar> min,
                      std::optional<Scalar> max) {
  const Tensor keep = min && max ? logical_and(x >= *min, x <= *max) : min ? x >= *min : x <= *max;
  return where(keep, g, 0.0);
}

// ---- maximum / minimum: ties split the gradient evenly, like PyTorch

Tensor maximum(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(maximum, maximum, a, b);
  const DType t = result_type(a, b);
  Tensor out = binary_op(maximum_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("maximum", {&a, &b}, {&out},
                     [sa = SavedVariable(a, false), sb = SavedVariable(b, false)](
                         BackwardCtx& c, const TensorList& g) {
                       const Tensor av = c.unpack(sa), bv = c.unpack(sb);
                       const Tensor shared = where(av == bv, g[0] * 0.5, g[0]);
                       return TensorList{
                           c.needs_input_grad(0) ? where(av < bv, 0.0, shared) : Tensor(),
                           c.needs_input_grad(1) ? where(av > bv, 0.0, shared) : Tensor()};
                     });
  }
  return out;
}

Tensor minimum(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(minimum, minimum, a, b);
  const DType t = result_type(a, b);
  Tensor out = binary_op(minimum_stub, a, b, t, t);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("minimum", {&a, &b}, {&out},
                     [sa = SavedVariable(a, false), sb = SavedVariable(b, false)](
                         BackwardCtx& c, const TensorList& g) {
                       const Tensor av = c.unpack(sa), bv = c.unpack(sb);
                       const Tensor shared = where(av == bv, g[0] * 0.5, g[0]);
                       return TensorList{
                           c.needs_input_grad(0) ? where(av > bv, 0.0, shared) : Tensor(),
                           c.needs_input_grad(1) ? where(av < bv, 0.0, shared) : Tensor()};
                     });
  }
  return out;
}

// ---- methods

Tensor Tensor::pow(const Tensor& e) const { return ignis::pow(*this, e); }
Tensor Tensor::pow(Scalar e) const { return ignis::pow(*this, e); }
Tensor Tensor::neg() const { return ignis::neg(*this); }
Tensor Tensor::abs() const { return ignis::abs(*this); }
Tensor Tensor::sign() const { return ignis::sign(*this); }
Tensor Tensor::floor() const { return ignis::floor(*this); }
Tensor Tensor::ceil() const { return ignis::ceil(*this); }
Tensor Tensor::round() const { return ignis::round(*this); }
Tensor Tensor::trunc() const { return ignis::trunc(*this); }
Tensor Tensor::clamp(std::optional<Scalar> min, std::optional<Scalar> max) const {
  return ignis::clamp(*this, min, max);
}
Tensor Tensor::maximum(const Tensor& o) const { return ignis::maximum(*this, o); }
Tensor Tensor::minimum(const Tensor& o) const { return ignis::minimum(*this, o); }

// ---- in place

Tensor& Tensor::pow_(Scalar e) const {
  IGNIS_DISPATCH_METHOD(pow_, pow_, e);
  const DType t = result_type(mut(), e);
  IGNIS_CHECK(!(is_integral(t) && e.is_integral() && e.to_int() < 0),
              "pow_: integers to negative integer powers are not allowed (", t, " tensor ^ ",
              e.to_int(), ")");
  return inplace_unary(mut(), pow_scalar_stub, t, {e.to_double()}, "pow_", true,
                       [&](const Tensor& x) { return ignis::pow(x, e); });
}
Tensor& Tensor::neg_() const {
  IGNIS_DISPATCH_METHOD(neg_, neg_);
  IGNIS_CHECK(dtype() != kBool,
              "neg_: negation, the `-` operator, on a bool tensor is not supported; "
              "if you are trying to invert a mask, use logical_not() or `!` instead");
  return inplace_unary(mut(), neg_stub, dtype(), {}, "neg_", false,
                       [](const Tensor& x) { return ignis::neg(x); });
}
Tensor& Tensor::trunc_() const {
  IGNIS_DISPATCH_METHOD(trunc_, trunc_);
  if (!is_floating_point()) return mut();  // integers are already whole
  return inplace_unary(mut(), trunc_stub, dtype(), {}, "trunc_", false,
                       [](const Tensor& x) { return ignis::trunc(x); });
}
Tensor& Tensor::clamp_(std::optional<Scalar> min, std::optional<Scalar> max) const {
  IGNIS_DISPATCH_METHOD(clamp_, clamp_, min, max);
  IGNIS_CHECK(min || max, "clamp_: at least one of 'min' or 'max' must not be None");
  DType t = dtype();
  if (min) t = scalar_result_type(t, *min);
  if (max) t = scalar_result_type(t, *max);
  IGNIS_CHECK(t != kBool, "clamp_: not supported for bool tensors");
  const auto& stub = min && max ? clamp_stub : min ? clamp_min_stub : clamp_max_stub;
  const OpArgs args = min && max ? OpArgs{min->to_double(), max->to_double()}
                                 : OpArgs{(min ? *min : *max).to_double()};
  return inplace_unary(mut(), stub, t, args, "clamp_", true,
                       [&](const Tensor& x) { return ignis::clamp(x, min, max); });
}

}  // namespace ignis
