// Scans and NaN-aware reductions: cumprod, logcumsumexp (kernels), var_mean, std_mean, nansum,
// nanmean (composites). Backward formulas are PyTorch's, in ignis ops.
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"
#include "ops/sort.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(scan_stub, ScanFn);

using TensorPair = std::tuple<Tensor, Tensor>;  // one macro argument

IGNIS_OP(cumprod, "cumprod(Tensor self, int dim, *, ScalarType? dtype=None) -> Tensor",
         Tensor(const Tensor&, int64_t, std::optional<DType>), cumprod,
         {.differentiable = true, .stubs = {&scan_stub}});
IGNIS_OP(logcumsumexp, "logcumsumexp(Tensor self, int dim) -> Tensor",
         Tensor(const Tensor&, int64_t), logcumsumexp,
         {.differentiable = true, .stubs = {&scan_stub}});
IGNIS_OP(var_mean,
         "var_mean(Tensor self, int[] dim=[], int correction=1, bool keepdim=False) -> "
         "(Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef, int64_t, bool), var_mean,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(std_mean,
         "std_mean(Tensor self, int[] dim=[], int correction=1, bool keepdim=False) -> "
         "(Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef, int64_t, bool), std_mean,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(
    nansum,
    "nansum(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
    Tensor(const Tensor&, IntArrayRef, bool, std::optional<DType>), nansum,
    {.differentiable = true, .kind = "composite"});
IGNIS_OP(nanmean,
         "nanmean(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> "
         "Tensor",
         Tensor(const Tensor&, IntArrayRef, bool, std::optional<DType>), nanmean,
         {.differentiable = true, .kind = "composite"});

namespace {

constexpr int kCumprod = 0, kLogcumsumexp = 1;

/// Cumulative sum from the end of dim.
Tensor reverse_cumsum(const Tensor& v, int64_t d) { return flip(cumsum(flip(v, {d}), d), {d}); }

/// d cumprod / dx_i = sum_{k >= i} g_k prod_{j <= k, j != i} x_j, exact with zeros (PyTorch's
/// cumprod_backward). With no zero it is reverse_cumsum(g * out) / x. With zeros, positions
/// before the first zero use that formula, the first zero gets the products with itself left
/// out, and later positions get 0. When the backward itself is differentiated (grad mode on)
/// the zero case builds the sum explicitly, as a function of every element, in O(n^2).
Tensor cumprod_backward(const Tensor& g, const Tensor& x, const Tensor& out, int64_t d) {
  if (x.numel() == 0) return zeros_like(x);
  const Tensor zero = eq(x, 0);
  if (!any(zero).item<bool>()) return reverse_cumsum(g * out, d) / x;
  if (is_grad_enabled()) {
    const int64_t n = x.size(d);
    Shape big = x.sizes().shape();
    big.insert(big.begin() + d, n);  // [..., n (left out: i), n (the line: j, then k), ...]
    Shape at(big.size(), 1);
    at[d] = n;
    at[d + 1] = n;
    const Tensor pos = arange(n, TensorOptions(kInt64).device(x.device()));
    const Tensor same = eq(pos.view({n, 1}), pos.view({1, n})).view(at);
    const Tensor later = le(pos.view({n, 1}), pos.view({1, n})).view(at);  // k >= i
    const Tensor others = cumprod(where(same, 1, x.unsqueeze(d).expand(big)), d + 1);
    return sum(where(later, g.unsqueeze(d) * others, 0), {d + 1});
  }
  const Tensor seen = cumsum(zero, d);  // zeros up to and including each position
  const Tensor before = eq(seen, 0);
  const Tensor first = logical_and(zero, eq(seen, 1));
  const Tensor a = where(before, reverse_cumsum(g * out, d) / where(before, x, 1), 0);
  const Tensor p = cumprod(where(first, 1, x), d);  // the first zero left out
  return a + where(first, reverse_cumsum(g * p, d), 0);
}

/// PyTorch's logcumsumexp_backward: grad_i = sum_{k >= i} g_k exp(x_i - out_k), with the
/// positive and negative parts of g summed separately in log space (stable).
Tensor logcumsumexp_backward(const Tensor& g, const Tensor& x, const Tensor& out, int64_t d) {
  if (x.numel() == 0) return zeros_like(x);
  auto reverse_lcse = [d](const Tensor& v) { return flip(logcumsumexp(flip(v, {d}), d), {d}); };
  const double lowest = g.dtype() == kFloat64 ? std::numeric_limits<double>::lowest()
                                              : std::numeric_limits<float>::lowest();
  const Tensor log_abs = log(abs(g));
  const Tensor log_pos = where(gt(g, 0), log_abs, lowest);
  const Tensor log_neg = where(lt(g, 0), log_abs, lowest);
  return exp(reverse_lcse(log_pos - out) + x) - exp(reverse_lcse(log_neg - out) + x);
}

Tensor scan(const Tensor& x, int64_t dim, int kind, const char* op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  scan_stub[x.device()](out, x, x.dim() == 0 ? 0 : d, kind);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out},
                     [sx = SavedVariable(x, false), so = save_reduce_output(out), kind, d](
                         BackwardCtx& c, const TensorList& g) {
                       const Tensor xv = c.unpack(sx), ov = c.unpack(so);
                       // A 0-d scan is the identity (logcumsumexp(x) = x), whose gradient is g
                       // even where x is NaN or infinite (exp(x - out) would be NaN there).
                       if (xv.dim() == 0) return TensorList{g[0]};
                       return TensorList{kind == kCumprod ? cumprod_backward(g[0], xv, ov, d)
                                                          : logcumsumexp_backward(g[0], xv, ov, d)};
                     });
  }
  return out;
}

void check_floating(const Tensor& x, const char* op) {
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point tensor, but got ", x.dtype());
}

}  // namespace

Tensor cumprod(const Tensor& x, int64_t dim, std::optional<DType> dtype) {
  IGNIS_DISPATCH(cumprod, cumprod, x, dim, dtype);
  const DType t = dtype ? *dtype : is_integral(x.dtype(), true) ? kInt64 : x.dtype();
  IGNIS_CHECK(t != kBool, "cumprod: bool is not a valid result dtype");
  return scan(cast(x, t), dim, kCumprod, "cumprod");
}

Tensor logcumsumexp(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(logcumsumexp, logcumsumexp, x, dim);
  return scan(cast(x, to_floating(x.dtype())), dim, kLogcumsumexp, "logcumsumexp");
}

TensorPair var_mean(const Tensor& x, IntArrayRef dim, int64_t correction, bool keepdim) {
  IGNIS_DISPATCH(var_mean, var_mean, x, dim, correction, keepdim);
  check_floating(x, "var_mean");
  return {var(x, dim, correction, keepdim), mean(x, dim, keepdim)};
}
TensorPair std_mean(const Tensor& x, IntArrayRef dim, int64_t correction, bool keepdim) {
  IGNIS_DISPATCH(std_mean, std_mean, x, dim, correction, keepdim);
  check_floating(x, "std_mean");
  return {ignis::std(x, dim, correction, keepdim), mean(x, dim, keepdim)};
}

Tensor nansum(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  IGNIS_DISPATCH(nansum, nansum, x, dim, keepdim, dtype);
  if (!x.is_floating_point()) return sum(x, dim, keepdim, dtype);
  Tensor out;
  {
    NoGradGuard ng;
    out = sum(where(isnan(x), 0, x), dim, keepdim, dtype);
  }
  if (autograd::any_needs_grad({&x})) {
    // PyTorch's backward, g * !isnan(x): a NaN gradient (nanmean of an all-NaN line) stays NaN
    // at the NaN inputs too.
    const ReducePlan plan = make_reduce_plan(x, dim, keepdim, "nansum");
    autograd::record("nansum", {&x}, {&out},
                     [sx = SavedVariable(x, false), keep = plan.keep_shape](BackwardCtx& c,
                                                                            const TensorList& g) {
                       return TensorList{g[0].reshape(keep) * logical_not(isnan(c.unpack(sx)))};
                     });
  }
  return out;
}
Tensor nanmean(const Tensor& x, IntArrayRef dim, bool keepdim, std::optional<DType> dtype) {
  IGNIS_DISPATCH(nanmean, nanmean, x, dim, keepdim, dtype);
  check_floating(x, "nanmean");
  const Tensor count = sum(logical_not(isnan(x)), dim, keepdim);
  return ignis::nansum(x, dim, keepdim, dtype) / count;
}

Tensor Tensor::cumprod(int64_t dim, std::optional<DType> dtype) const {
  return ignis::cumprod(*this, dim, dtype);
}
Tensor Tensor::logcumsumexp(int64_t dim) const { return ignis::logcumsumexp(*this, dim); }
Tensor Tensor::nansum(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  return ignis::nansum(*this, dims, keepdim, dtype);
}
Tensor Tensor::nanmean(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  return ignis::nanmean(*this, dims, keepdim, dtype);
}

}  // namespace ignis
