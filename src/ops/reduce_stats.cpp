// Statistical reductions: var, std, norm, logsumexp. Backward formulas in ignis ops.
#include <cmath>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(var_stub, VarFn);
IGNIS_DEFINE_STUB(norm_stub, NormFn);
IGNIS_DEFINE_STUB(logsumexp_stub, ReduceFn);

IGNIS_OP(var, "var(Tensor self, int[] dim=[], int correction=1, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, int64_t, bool), var,
         {.differentiable = true, .stubs = {&var_stub}});
IGNIS_OP(std, "std(Tensor self, int[] dim=[], int correction=1, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, int64_t, bool), std,
         {.differentiable = true, .stubs = {&var_stub}});
IGNIS_OP(norm, "norm(Tensor self, float p=2, int[] dim=[], bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, double, IntArrayRef, bool), norm,
         {.differentiable = true, .stubs = {&norm_stub}});
IGNIS_OP(logsumexp, "logsumexp(Tensor self, int[] dim, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, bool), logsumexp,
         {.differentiable = true, .stubs = {&logsumexp_stub}});

namespace {

Tensor var_std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim, bool take_sqrt,
               const char* op) {
  IGNIS_CHECK(x.is_floating_point(), op,
              ": std and var only support floating point dtypes, "
              "but got ",
              x.dtype());
  const ReducePlan plan = make_reduce_plan(x, dims, keepdim, op);
  Tensor out = make_tensor(plan.out_shape, x.dtype(), x.device());
  var_stub[x.device()](out, x, plan, correction, take_sqrt);
  if (autograd::any_needs_grad({&x})) {
    const double scale =
        2.0 / static_cast<double>(std::max<int64_t>(plan.reduced_numel - correction, 0));
    autograd::record(
        op, {&x}, {&out},
        [sx = SavedVariable(x, false), so = save_reduce_output(out), keep = plan.keep_shape,
         rdims = plan.dims(x.dim()), scale, take_sqrt](BackwardCtx& c, const TensorList& g) {
          Tensor gk = g[0].reshape(keep);
          if (take_sqrt) {
            // d std = d var / (2 std); 0 where std is 0 (PyTorch's subgradient).
            const Tensor s = c.unpack(so).reshape(keep);
            const Tensor zero = eq(s, 0);
            gk = where(zero, 0, gk / (where(zero, 1, s) * 2));
          }
          const Tensor xv = c.unpack(sx);
          return TensorList{gk * (xv - mean(xv, rdims, true)) * scale};
        });
  }
  return out;
}

/// The gradient of the p-norm, 0 where the norm is 0 (PyTorch's subgradient) and written so
/// that no discarded branch holds inf or NaN (they would poison the double backward).
Tensor norm_backward(const Tensor& g, const Tensor& x, const Tensor& norm, double p,
                     const Shape& keep, const Shape& dims) {
  const Tensor gk = g.reshape(keep);
  const Tensor nk = norm.reshape(keep);
  if (p == 0) return zeros_like(x);
  if (p == 1) return gk * sign(x);
  const Tensor nzero = eq(nk, 0);
  if (std::isinf(p)) {
    const Tensor mask = eq(abs(x), nk);
    const Tensor count = sum(mask, dims, true);
    return sign(x) * where(mask, gk / count, 0);
  }
  const Tensor safe_n = where(nzero, 1, nk);
  if (p == 2) return x * where(nzero, 0, gk / safe_n);
  const Tensor xzero = eq(x, 0);
  const Tensor ax = where(xzero, 1, abs(x));  // |x| with 0 replaced by 1
  if (p < 1) {
    // sign(x) |x|^(p-1) (0 at x = 0) * g * norm^(1-p)
    return sign(x) * where(xzero, 0, pow(ax, p - 1)) * (gk * pow(nk, 1 - p));
  }
  const Tensor scale = where(nzero, 0, gk / pow(safe_n, p - 1));
  if (p < 2) return sign(x) * where(xzero, 0, pow(ax, p - 1)) * scale;
  return x * pow(ax, p - 2) * scale;
}

}  // namespace

Tensor var(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  IGNIS_DISPATCH(var, var, x, dims, correction, keepdim);
  return var_std(x, dims, correction, keepdim, false, "var");
}
Tensor std(const Tensor& x, IntArrayRef dims, int64_t correction, bool keepdim) {
  IGNIS_DISPATCH(std, std, x, dims, correction, keepdim);
  return var_std(x, dims, correction, keepdim, true, "std");
}

Tensor norm(const Tensor& x, double p, IntArrayRef dims, bool keepdim) {
  IGNIS_DISPATCH(norm, norm, x, p, dims, keepdim);
  IGNIS_CHECK(x.is_floating_point(), "norm: expected a floating point tensor, but got ", x.dtype());
  IGNIS_CHECK(!std::isnan(p), "norm: p must not be NaN");
  const ReducePlan plan = make_reduce_plan(x, dims, keepdim, "norm");
  if (std::isinf(p)) check_nonempty_reduction(x, plan, "norm");
  Tensor out = make_tensor(plan.out_shape, x.dtype(), x.device());
  norm_stub[x.device()](out, x, plan, p);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "norm", {&x}, {&out},
        [sx = SavedVariable(x, false), so = save_reduce_output(out), p, keep = plan.keep_shape,
         rdims = plan.dims(x.dim())](BackwardCtx& c, const TensorList& g) {
          return TensorList{norm_backward(g[0], c.unpack(sx), c.unpack(so), p, keep, rdims)};
        });
  }
  return out;
}

Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim) {
  IGNIS_DISPATCH(logsumexp, logsumexp, x, dims, keepdim);
  const Tensor xf = cast(x, to_floating(x.dtype()));
  const ReducePlan plan = make_reduce_plan(xf, dims, keepdim, "logsumexp");
  Tensor out = make_tensor(plan.out_shape, xf.dtype(), x.device());
  logsumexp_stub[x.device()](out, xf, plan);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "logsumexp", {&x}, {&out},
        [sx = SavedVariable(x, false), so = save_reduce_output(out), keep = plan.keep_shape](
            BackwardCtx& c, const TensorList& g) {
          return TensorList{g[0].reshape(keep) * exp(c.unpack(sx) - c.unpack(so).reshape(keep))};
        });
  }
  return out;
}

Tensor Tensor::var_all(bool unbiased) const { return ignis::var(*this, {}, unbiased ? 1 : 0); }
Tensor Tensor::std_all(bool unbiased) const { return ignis::std(*this, {}, unbiased ? 1 : 0); }

Tensor Tensor::var(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return ignis::var(*this, dims, correction, keepdim);
}
Tensor Tensor::std(IntArrayRef dims, int64_t correction, bool keepdim) const {
  return ignis::std(*this, dims, correction, keepdim);
}
Tensor Tensor::norm(double p, IntArrayRef dims, bool keepdim) const {
  return ignis::norm(*this, p, dims, keepdim);
}
Tensor Tensor::logsumexp(IntArrayRef dims, bool keepdim) const {
  return ignis::logsumexp(*this, dims, keepdim);
}

}  // namespace ignis
