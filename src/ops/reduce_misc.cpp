// Reductions and scans: prod, all, any, cumsum.
#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(prod_stub, ReduceFn);
IGNIS_DEFINE_STUB(all_stub, ReduceFn);
IGNIS_DEFINE_STUB(any_stub, ReduceFn);
IGNIS_DEFINE_STUB(cumsum_stub, CumsumFn);

IGNIS_OP(prod, "prod(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>, bool), prod,
         {.differentiable = true, .stubs = {&prod_stub}});
IGNIS_OP(all, "all(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>, bool), all, {.stubs = {&all_stub}});
IGNIS_OP(any, "any(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>, bool), any, {.stubs = {&any_stub}});
IGNIS_OP(cumsum, "cumsum(Tensor self, int dim) -> Tensor", Tensor(const Tensor&, int64_t), cumsum,
         {.differentiable = true, .stubs = {&cumsum_stub}});

namespace {

/// The product of the other elements along dim (all elements when dim is nullopt), for each
/// element, as a differentiable O(n^2) construction: the products of n copies of the line with
/// one element each replaced by 1. Used for double backward through zeros only.
Tensor prod_of_others(const Tensor& x, std::optional<int64_t> dim) {
  if (!dim) return prod_of_others(x.reshape({x.numel()}), 0).reshape(x.sizes());
  const int64_t d = *dim, n = x.size(d);
  Shape big = x.sizes().shape();
  big.insert(big.begin() + d, n);  // [..., n (which one is left out), n (the line), ...]
  Shape at(big.size(), 1);
  at[d] = n;
  at[d + 1] = n;
  const Tensor pos = arange(n, TensorOptions(kInt64).device(x.device()));
  const Tensor eye_mask = eq(pos.view({n, 1}), pos.view({1, n})).view(at);
  return prod(where(eye_mask, 1, x.unsqueeze(d).expand(big)), d + 1);
}

/// d prod / dx_i = the product of the other elements, correct with zeros: with no zero it is
/// out / x_i; with one zero that element gets the product of the rest and the others 0 (NaN
/// beside an inf or NaN); with two or more, nothing. When the backward itself is differentiated,
/// zeros need the product of the others as a function of every element (not a constant 0), so that
/// case builds it explicitly.
Tensor prod_backward(const Tensor& g, const Tensor& x, std::optional<int64_t> dim,
                     const Shape& keep) {
  const Tensor gk = g.reshape(keep);
  if (x.dim() == 0) return gk;
  const Tensor zero = eq(x, 0);
  if (is_grad_enabled() && any(zero).item<bool>()) return gk * prod_of_others(x, dim);
  const Tensor xs = where(zero, 1, x);
  const Tensor others = dim ? prod(xs, *dim, true) : prod(xs).reshape(keep);
  const Tensor nzero = dim ? sum(zero, *dim, true) : sum(zero).reshape(keep);
  // With one zero, the others' gradient is 0 times the rest: NaN where the rest (the other
  // elements but the zero) holds an inf or a NaN, as PyTorch's exclusive products give.
  const Tensor nonfinite = logical_not(isfinite(x)).to(x.dtype());
  const Tensor nf_count = dim ? sum(nonfinite, *dim, true) : sum(nonfinite).reshape(keep);
  const Tensor times_zero =
      where((nf_count - nonfinite) > 0, std::numeric_limits<double>::quiet_NaN(), zeros_like(x));
  const Tensor one_zero = where(eq(nzero, 1), where(zero, others, times_zero), 0);
  return gk * where(eq(nzero, 0), others / xs, one_zero);
}

Tensor all_any(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_all) {
  const ReducePlan plan = make_reduce_plan(x, dim, keepdim, is_all ? "all" : "any");
  Tensor out = make_tensor(plan.out_shape, kBool, x.device());
  (is_all ? all_stub : any_stub)[x.device()](out, x, plan);
  return out;
}

/// Cumulative sum along dim, from the end when reverse (the backward of the other direction).
Tensor cumsum_dir(const Tensor& x, int64_t dim, bool reverse) {
  const int64_t d = wrap_dim(dim, x.dim(), "cumsum");
  const DType out_t = is_integral(x.dtype(), true) ? kInt64 : x.dtype();
  const Tensor xc = cast(x, out_t);
  Tensor out = make_tensor(x.sizes(), out_t, x.device());
  cumsum_stub[x.device()](out, xc, d, reverse);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(reverse ? "cumsum_reverse" : "cumsum", {&x}, {&out},
                     [d, reverse](BackwardCtx&, const TensorList& g) {
                       return TensorList{cumsum_dir(g[0], d, !reverse)};
                     });
  }
  return out;
}

}  // namespace

Tensor prod(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IGNIS_DISPATCH(prod, prod, x, dim, keepdim);
  const DType out_t = is_integral(x.dtype(), true) ? kInt64 : x.dtype();
  const ReducePlan plan = make_reduce_plan(x, dim, keepdim, "prod");
  Tensor out = make_tensor(plan.out_shape, out_t, x.device());
  prod_stub[x.device()](out, x, plan);
  if (autograd::any_needs_grad({&x})) {
    const std::optional<int64_t> d =
        dim && x.dim() > 0 ? std::optional<int64_t>(wrap_dim(*dim, x.dim(), "prod")) : std::nullopt;
    autograd::record("prod", {&x}, {&out},
                     [sx = SavedVariable(x, false), d, keep = plan.keep_shape](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{prod_backward(g[0], c.unpack(sx), d, keep)};
                     });
  }
  return out;
}

Tensor all(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IGNIS_DISPATCH(all, all, x, dim, keepdim);
  return all_any(x, dim, keepdim, true);
}
Tensor any(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IGNIS_DISPATCH(any, any, x, dim, keepdim);
  return all_any(x, dim, keepdim, false);
}
Tensor cumsum(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(cumsum, cumsum, x, dim);
  return cumsum_dir(x, dim, false);
}

Tensor Tensor::prod() const { return ignis::prod(*this); }
Tensor Tensor::prod(int64_t dim, bool keepdim) const { return ignis::prod(*this, dim, keepdim); }
Tensor Tensor::all() const { return ignis::all(*this); }
Tensor Tensor::all(int64_t dim, bool keepdim) const { return ignis::all(*this, dim, keepdim); }
Tensor Tensor::any() const { return ignis::any(*this); }
Tensor Tensor::any(int64_t dim, bool keepdim) const { return ignis::any(*this, dim, keepdim); }
Tensor Tensor::cumsum(int64_t dim) const { return ignis::cumsum(*this, dim); }

}  // namespace ignis
