// Comparisons (eq ne lt le gt ge), logical ops, isnan/isinf/isfinite, where, allclose, equal.
// Comparisons promote their inputs like arithmetic does, then produce bool; they record no
// history (not differentiable). where is differentiable in its two value operands.
#include <algorithm>
#include <cmath>

#include "core/op_call.h"
#include "ops/unary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_OP_STUB(eq);
IGNIS_DEFINE_OP_STUB(ne);
IGNIS_DEFINE_OP_STUB(lt);
IGNIS_DEFINE_OP_STUB(le);
IGNIS_DEFINE_OP_STUB(gt);
IGNIS_DEFINE_OP_STUB(ge);
IGNIS_DEFINE_OP_STUB(logical_and);
IGNIS_DEFINE_OP_STUB(logical_or);
IGNIS_DEFINE_OP_STUB(logical_not);
IGNIS_DEFINE_OP_STUB(isnan);
IGNIS_DEFINE_OP_STUB(isinf);
IGNIS_DEFINE_OP_STUB(isfinite);
IGNIS_DEFINE_OP_STUB(where);

#define COMPARE(name)                                                              \
  IGNIS_OP(name##_Tensor, #name ".Tensor(Tensor self, Tensor other) -> Tensor",    \
           Tensor(const Tensor&, const Tensor&), name, {.stubs = {&name##_stub}}); \
  IGNIS_OP(name##_Scalar, #name ".Scalar(Tensor self, Scalar other) -> Tensor",    \
           Tensor(const Tensor&, Scalar), name, {.stubs = {&name##_stub}})
COMPARE(eq);
COMPARE(ne);
COMPARE(lt);
COMPARE(le);
COMPARE(gt);
COMPARE(ge);
#undef COMPARE
IGNIS_OP(logical_and, "logical_and(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), logical_and, {.stubs = {&logical_and_stub}});
IGNIS_OP(logical_or, "logical_or(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), logical_or, {.stubs = {&logical_or_stub}});
#define PREDICATE(name)                                                        \
  IGNIS_OP(name, #name "(Tensor self) -> Tensor", Tensor(const Tensor&), name, \
           {.stubs = {&name##_stub}})
PREDICATE(logical_not);
PREDICATE(isnan);
PREDICATE(isinf);
PREDICATE(isfinite);
#undef PREDICATE
IGNIS_OP(where_self, "where.self(Tensor condition, Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&), where,
         {.differentiable = true, .stubs = {&where_stub}});
IGNIS_OP(where_ScalarOther,
         "where.ScalarOther(Tensor condition, Tensor self, Scalar other) -> Tensor",
         Tensor(const Tensor&, const Tensor&, Scalar), where,
         {.differentiable = true, .stubs = {&where_stub}});
IGNIS_OP(where_ScalarSelf,
         "where.ScalarSelf(Tensor condition, Scalar self, Tensor other) -> Tensor",
         Tensor(const Tensor&, Scalar, const Tensor&), where,
         {.differentiable = true, .stubs = {&where_stub}});
IGNIS_OP(allclose,
         "allclose(Tensor self, Tensor other, float rtol=1e-05, float atol=1e-08, bool "
         "equal_nan=False) -> bool",
         bool(const Tensor&, const Tensor&, double, double, bool), allclose, {.kind = "composite"});
IGNIS_OP(equal, "equal(Tensor self, Tensor other) -> bool", bool(const Tensor&, const Tensor&),
         equal, {.kind = "composite"});

namespace {
Tensor compare(const DispatchStub<ElementwiseFn>& stub, const Tensor& a, const Tensor& b) {
  return binary_op(stub, a, b, result_type(a, b), kBool);
}
Tensor compare(const DispatchStub<ElementwiseFn>& stub, const Tensor& a, Scalar b) {
  const DType t = result_type(a, b);
  return binary_op(stub, a, wrap_scalar(b, t, a.device()), t, kBool);
}
// isnan and friends: a kernel for floating inputs, a constant for integers and bool.
Tensor float_predicate(const DispatchStub<ElementwiseFn>& stub, const Tensor& x,
                       bool integral_value) {
  if (!x.is_floating_point()) return full(x.sizes(), integral_value, x.options().dtype(kBool));
  return unary_op(stub, x, x.dtype(), kBool);
}
}  // namespace

Tensor eq(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(eq_Tensor, eq, a, b);
  return compare(eq_stub, a, b);
}
Tensor ne(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(ne_Tensor, ne, a, b);
  return compare(ne_stub, a, b);
}
Tensor lt(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(lt_Tensor, lt, a, b);
  return compare(lt_stub, a, b);
}
Tensor le(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(le_Tensor, le, a, b);
  return compare(le_stub, a, b);
}
Tensor gt(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(gt_Tensor, gt, a, b);
  return compare(gt_stub, a, b);
}
Tensor ge(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(ge_Tensor, ge, a, b);
  return compare(ge_stub, a, b);
}
Tensor eq(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(eq_Scalar, eq, a, b);
  return compare(eq_stub, a, b);
}
Tensor ne(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(ne_Scalar, ne, a, b);
  return compare(ne_stub, a, b);
}
Tensor lt(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(lt_Scalar, lt, a, b);
  return compare(lt_stub, a, b);
}
Tensor le(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(le_Scalar, le, a, b);
  return compare(le_stub, a, b);
}
Tensor gt(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(gt_Scalar, gt, a, b);
  return compare(gt_stub, a, b);
}
Tensor ge(const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(ge_Scalar, ge, a, b);
  return compare(ge_stub, a, b);
}

Tensor logical_and(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(logical_and, logical_and, a, b);
  return compare(logical_and_stub, a, b);
}
Tensor logical_or(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(logical_or, logical_or, a, b);
  return compare(logical_or_stub, a, b);
}
Tensor logical_not(const Tensor& x) {
  IGNIS_DISPATCH(logical_not, logical_not, x);
  return unary_op(logical_not_stub, x, x.dtype(), kBool);
}

Tensor isnan(const Tensor& x) {
  IGNIS_DISPATCH(isnan, isnan, x);
  return float_predicate(isnan_stub, x, false);
}
Tensor isinf(const Tensor& x) {
  IGNIS_DISPATCH(isinf, isinf, x);
  return float_predicate(isinf_stub, x, false);
}
Tensor isfinite(const Tensor& x) {
  IGNIS_DISPATCH(isfinite, isfinite, x);
  return float_predicate(isfinite_stub, x, true);
}

// ---- where

Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(where_self, where, cond, a, b);
  IGNIS_CHECK(cond.dtype() == kBool,
              "where: expected condition to be a bool tensor, but got a tensor with dtype ",
              cond.dtype());
  IGNIS_CHECK(cond.device() == a.device() && a.device() == b.device(),
              "where: expected all tensors on the same device, but got condition on ",
              cond.device().str(), ", a on ", a.device().str(), " and b on ", b.device().str());
  const DType t = result_type(a, b);
  Shape shape;
  try {
    shape = broadcast_shapes(broadcast_shapes(cond.sizes(), a.sizes()), b.sizes());
  } catch (const Error&) {
    IGNIS_FAIL("where: shapes ", cond.sizes(), " (condition), ", a.sizes(), " and ", b.sizes(),
               " cannot be broadcast");
  }
  const Tensor ca = cast(a, t), cb = cast(b, t);
  Tensor out = make_tensor(shape, t, a.device());
  TensorIter it = TensorIter::build(out, {&cond, &ca, &cb});
  where_stub[a.device()](it, t, {});
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("where", {&a, &b}, {&out},
                     [sc = SavedVariable(cond, false)](BackwardCtx& c, const TensorList& g) {
                       const Tensor cv = c.unpack(sc);
                       return TensorList{c.needs_input_grad(0) ? where(cv, g[0], 0.0) : Tensor(),
                                         c.needs_input_grad(1) ? where(cv, 0.0, g[0]) : Tensor()};
                     });
  }
  return out;
}

Tensor where(const Tensor& cond, const Tensor& a, Scalar b) {
  IGNIS_DISPATCH(where_ScalarOther, where, cond, a, b);
  return where(cond, a, wrap_scalar(b, result_type(a, b), a.device()));
}

Tensor where(const Tensor& cond, Scalar a, const Tensor& b) {
  IGNIS_DISPATCH(where_ScalarSelf, where, cond, a, b);
  return where(cond, wrap_scalar(a, result_type(b, a), b.device()), b);
}

// ---- whole-tensor predicates

bool allclose(const Tensor& a, const Tensor& b, double rtol, double atol, bool equal_nan) {
  IGNIS_DISPATCH(allclose, allclose, a, b, rtol, atol, equal_nan);
  Shape shape;
  try {
    shape = broadcast_shapes(a.sizes(), b.sizes());
  } catch (const Error&) {
    IGNIS_FAIL("allclose: shapes ", a.sizes(), " and ", b.sizes(), " cannot be broadcast");
  }
  NoGradGuard ng;
  // Compared in float64 (exact for every dtype but int64 beyond 2^53).
  const Tensor da = a.to(kCPU).to(kFloat64).expand(shape).contiguous();
  const Tensor db = b.to(kCPU).to(kFloat64).expand(shape).contiguous();
  const double* x = da.data_ptr<double>();
  const double* y = db.data_ptr<double>();
  for (int64_t i = 0, n = da.numel(); i < n; ++i) {
    if (x[i] == y[i]) continue;  // also equal infinities
    if (std::isnan(x[i]) || std::isnan(y[i])) {
      if (equal_nan && std::isnan(x[i]) && std::isnan(y[i])) continue;
      return false;
    }
    if (std::isinf(x[i]) || std::isinf(y[i])) return false;
    if (!(std::fabs(x[i] - y[i]) <= atol + rtol * std::fabs(y[i]))) return false;
  }
  return true;
}

bool equal(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(equal, equal, a, b);
  if (!a.sizes().equals(b.sizes())) return false;
  const Tensor e = eq(a, b).to(kCPU);
  const bool* p = e.data_ptr<bool>();
  return std::all_of(p, p + e.numel(), [](bool v) { return v; });
}

// ---- operators and methods

Tensor operator==(const Tensor& a, const Tensor& b) { return eq(a, b); }
Tensor operator==(const Tensor& a, Scalar b) { return eq(a, b); }
Tensor operator!=(const Tensor& a, const Tensor& b) { return ne(a, b); }
Tensor operator!=(const Tensor& a, Scalar b) { return ne(a, b); }
Tensor operator<(const Tensor& a, const Tensor& b) { return lt(a, b); }
Tensor operator<(const Tensor& a, Scalar b) { return lt(a, b); }
Tensor operator<=(const Tensor& a, const Tensor& b) { return le(a, b); }
Tensor operator<=(const Tensor& a, Scalar b) { return le(a, b); }
Tensor operator>(const Tensor& a, const Tensor& b) { return gt(a, b); }
Tensor operator>(const Tensor& a, Scalar b) { return gt(a, b); }
Tensor operator>=(const Tensor& a, const Tensor& b) { return ge(a, b); }
Tensor operator>=(const Tensor& a, Scalar b) { return ge(a, b); }
Tensor operator&&(const Tensor& a, const Tensor& b) { return logical_and(a, b); }
Tensor operator||(const Tensor& a, const Tensor& b) { return logical_or(a, b); }
Tensor operator!(const Tensor& a) { return logical_not(a); }

Tensor Tensor::eq(const Tensor& o) const { return ignis::eq(*this, o); }
Tensor Tensor::eq(Scalar o) const { return ignis::eq(*this, o); }
Tensor Tensor::ne(const Tensor& o) const { return ignis::ne(*this, o); }
Tensor Tensor::ne(Scalar o) const { return ignis::ne(*this, o); }
Tensor Tensor::lt(const Tensor& o) const { return ignis::lt(*this, o); }
Tensor Tensor::lt(Scalar o) const { return ignis::lt(*this, o); }
Tensor Tensor::le(const Tensor& o) const { return ignis::le(*this, o); }
Tensor Tensor::le(Scalar o) const { return ignis::le(*this, o); }
Tensor Tensor::gt(const Tensor& o) const { return ignis::gt(*this, o); }
Tensor Tensor::gt(Scalar o) const { return ignis::gt(*this, o); }
Tensor Tensor::ge(const Tensor& o) const { return ignis::ge(*this, o); }
Tensor Tensor::ge(Scalar o) const { return ignis::ge(*this, o); }
Tensor Tensor::logical_and(const Tensor& o) const { return ignis::logical_and(*this, o); }
Tensor Tensor::logical_or(const Tensor& o) const { return ignis::logical_or(*this, o); }
Tensor Tensor::logical_not() const { return ignis::logical_not(*this); }

}  // namespace ignis
