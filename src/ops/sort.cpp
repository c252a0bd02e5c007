// Sorting and selection along a dim: sort, argsort, topk, median, mode. NaN is greater than
// +inf (PyTorch's order). The values are elements of x picked by the indices, so every backward
// is one scatter_add of the gradient to the picked positions (twice differentiable: its own
// backward is a gather).
#include "ops/sort.h"

#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"
#include "ops/elementwise.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(sort_stub, SortFn);
IGNIS_DEFINE_STUB(topk_stub, TopkFn);
IGNIS_DEFINE_STUB(mode_stub, ModeFn);

using TensorPair = std::tuple<Tensor, Tensor>;  // one macro argument

IGNIS_OP(sort,
         "sort(Tensor self, int dim=-1, bool descending=False) -> (Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, bool), sort,
         {.differentiable = true, .stubs = {&sort_stub}});
IGNIS_OP(sort_stable,
         "sort.stable(Tensor self, *, bool? stable, int dim=-1, bool descending=False) -> "
         "(Tensor values, Tensor indices)",
         TensorPair(const Tensor&, std::optional<bool>, int64_t, bool), sort,
         {.differentiable = true, .stubs = {&sort_stub}});
IGNIS_OP(argsort, "argsort(Tensor self, int dim=-1, bool descending=False) -> Tensor",
         Tensor(const Tensor&, int64_t, bool), argsort, {.stubs = {&sort_stub}});
IGNIS_OP(argsort_stable,
         "argsort.stable(Tensor self, *, bool stable, int dim=-1, bool descending=False) -> Tensor",
         Tensor(const Tensor&, bool, int64_t, bool), argsort, {.stubs = {&sort_stub}});
IGNIS_OP(topk,
         "topk(Tensor self, int k, int dim=-1, bool largest=True, bool sorted=True) -> "
         "(Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, int64_t, bool, bool), topk,
         {.differentiable = true, .stubs = {&topk_stub}});
IGNIS_OP(median, "median(Tensor self) -> Tensor", Tensor(const Tensor&), median,
         {.differentiable = true, .stubs = {&sort_stub}});
IGNIS_OP(median_dim,
         "median.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, bool), median,
         {.differentiable = true, .stubs = {&sort_stub}});
IGNIS_OP(mode,
         "mode(Tensor self, int dim=-1, bool keepdim=False) -> (Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, bool), mode,
         {.differentiable = true, .stubs = {&mode_stub}});

namespace {

/// Records the backward of values = x's elements at `indices` along d (both of shape `shape`):
/// the gradient goes back to the picked positions.
void record_pick(const char* op, const Tensor& x, Tensor& values, const Tensor& indices,
                 int64_t d) {
  if (!autograd::any_needs_grad({&x})) return;
  autograd::record(
      op, {&x}, {&values},
      [si = SavedVariable(indices, false), d, shape = x.sizes().shape()](BackwardCtx& c,
                                                                         const TensorList& g) {
        return TensorList{zeros(shape, g[0].options()).scatter_add(d, c.unpack(si), g[0])};
      });
}

/// 0-d inputs run as 1-element vectors; the results are reshaped back.
Tensor as_line(const Tensor& x) {
  if (x.dim() > 0) return x;
  return x.reshape({1});
}

TensorPair sort_impl(const Tensor& x, int64_t dim, bool descending, bool want_values,
                     const char* op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  if (x.dim() == 0) {
    auto [v, i] = sort_impl(x.reshape({1}), 0, descending, want_values, op);
    return {want_values ? v.reshape({}) : Tensor(), i.reshape({})};
  }
  Tensor values = want_values ? make_tensor(x.sizes(), x.dtype(), x.device()) : Tensor();
  Tensor indices = make_tensor(x.sizes(), kInt64, x.device());
  sort_stub[x.device()](values, indices, x, d, descending);
  if (want_values) record_pick(op, x, values, indices, d);
  return {values, indices};
}

void check_nonempty_dim(const Tensor& x, int64_t d, const char* op) {
  IGNIS_CHECK(x.dim() == 0 || x.size(d) > 0, op, ": cannot reduce dimension ", d, " of size 0 (",
              "input shape ", x.sizes(), ")");
}

/// values/indices of shape keep (x's shape with 1 at d) to the op's output shape.
TensorPair finish_dim(Tensor values, Tensor indices, const Tensor& x, int64_t d, bool keepdim) {
  if (x.dim() == 0) return {values.reshape({}), indices.reshape({})};
  if (keepdim) return {values, indices};
  return {values.squeeze(d), indices.squeeze(d)};
}

}  // namespace

TensorPair sort(const Tensor& x, int64_t dim, bool descending) {
  IGNIS_DISPATCH(sort, sort, x, dim, descending);
  return sort_impl(x, dim, descending, true, "sort");
}
TensorPair sort(const Tensor& x, std::optional<bool> stable, int64_t dim, bool descending) {
  IGNIS_DISPATCH(sort_stable, sort, x, stable, dim, descending);
  return sort_impl(x, dim, descending, true, "sort");  // always stable
}
Tensor argsort(const Tensor& x, int64_t dim, bool descending) {
  IGNIS_DISPATCH(argsort, argsort, x, dim, descending);
  return std::get<1>(sort_impl(x, dim, descending, false, "argsort"));
}
Tensor argsort(const Tensor& x, bool stable, int64_t dim, bool descending) {
  IGNIS_DISPATCH(argsort_stable, argsort, x, stable, dim, descending);
  return std::get<1>(sort_impl(x, dim, descending, false, "argsort"));
}

TensorPair topk(const Tensor& x, int64_t k, int64_t dim, bool largest, bool sorted) {
  IGNIS_DISPATCH(topk, topk, x, k, dim, largest, sorted);
  (void)sorted;  // the k values always come sorted
  const int64_t d = wrap_dim(dim, x.dim(), "topk");
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  IGNIS_CHECK(k >= 0 && k <= n, "topk: k = ", k, " is out of range for dimension ", d, " of size ",
              n, " (input shape ", x.sizes(), ")");
  const Tensor xl = as_line(x);
  // A 0-d input gives its element for k = 0 too, as PyTorch does (a 0-d result has one element).
  const int64_t kk = x.dim() == 0 ? 1 : k;
  Shape shape = xl.sizes().shape();
  shape[d] = kk;
  Tensor values = make_tensor(shape, x.dtype(), x.device());
  Tensor indices = make_tensor(shape, kInt64, x.device());
  topk_stub[x.device()](values, indices, xl, d, kk, largest);
  record_pick("topk", xl, values, indices, d);
  if (x.dim() == 0) return {values.reshape({}), indices.reshape({})};
  return {values, indices};
}

TensorPair median(const Tensor& x, int64_t dim, bool keepdim) {
  IGNIS_DISPATCH(median_dim, median, x, dim, keepdim);
  const int64_t d = wrap_dim(dim, x.dim(), "median");
  check_nonempty_dim(x, d, "median");
  const Tensor xl = as_line(x);
  Tensor values, pick;
  {
    NoGradGuard ng;
    // The lower middle of the sorted line, or its first NaN (NaNs sort last, in their order).
    const Tensor order = std::get<1>(sort_impl(xl, d, false, false, "median"));
    const int64_t n = xl.size(d);
    const Tensor nans = sum(isnan(xl), {d}, true);
    const Tensor k = where(gt(nans, 0), rsub(nans, n), (n - 1) / 2);
    pick = order.gather(d, k);
    values = xl.gather(d, pick);
  }
  record_pick("median", xl, values, pick, d);
  return finish_dim(values, pick, x, d, keepdim);
}

Tensor median(const Tensor& x) {
  IGNIS_DISPATCH(median, median, x);
  if (x.numel() == 0) {
    IGNIS_CHECK(x.is_floating_point(), "median: cannot take the median of an empty ", x.dtype(),
                " tensor (shape ", x.sizes(), ")");
    return full({}, std::numeric_limits<double>::quiet_NaN(), x.options());
  }
  Tensor out, value;
  {
    NoGradGuard ng;
    out = std::get<0>(ignis::median(x.reshape({x.numel()}), 0, false)).clone();
    value = out.clone();
  }
  if (autograd::any_needs_grad({&x})) {
    // As PyTorch's median(): the gradient is split evenly among the elements equal to the
    // median (the NaNs, when it is NaN), not sent to one index as median(dim) does.
    autograd::record("median", {&x}, {&out},
                     [sx = SavedVariable(x, false), value](BackwardCtx& c, const TensorList& g) {
                       const Tensor xv = c.unpack(sx);
                       const Tensor mask =
                           logical_or(eq(xv, value), logical_and(isnan(xv), isnan(value)));
                       return TensorList{where(mask, g[0] / sum(mask), 0)};
                     });
  }
  return out;
}

TensorPair mode(const Tensor& x, int64_t dim, bool keepdim) {
  IGNIS_DISPATCH(mode, mode, x, dim, keepdim);
  const int64_t d = wrap_dim(dim, x.dim(), "mode");
  check_nonempty_dim(x, d, "mode");
  const Tensor xl = as_line(x);
  Shape keep = xl.sizes().shape();
  keep[d] = 1;
  Tensor pick = make_tensor(keep, kInt64, x.device());
  mode_stub[x.device()](pick, xl, d);
  Tensor values;
  {
    NoGradGuard ng;
    values = xl.gather(d, pick);
  }
  record_pick("mode", xl, values, pick, d);
  return finish_dim(values, pick, x, d, keepdim);
}

TensorPair Tensor::sort(int64_t dim, bool descending) const {
  return ignis::sort(*this, dim, descending);
}
TensorPair Tensor::sort(std::optional<bool> stable, int64_t dim, bool descending) const {
  return ignis::sort(*this, stable, dim, descending);
}
Tensor Tensor::argsort(int64_t dim, bool descending) const {
  return ignis::argsort(*this, dim, descending);
}
Tensor Tensor::argsort(bool stable, int64_t dim, bool descending) const {
  return ignis::argsort(*this, stable, dim, descending);
}
TensorPair Tensor::topk(int64_t k, int64_t dim, bool largest, bool sorted) const {
  return ignis::topk(*this, k, dim, largest, sorted);
}
Tensor Tensor::median() const { return ignis::median(*this); }
TensorPair Tensor::median(int64_t dim, bool keepdim) const {
  return ignis::median(*this, dim, keepdim);
}
TensorPair Tensor::mode(int64_t dim, bool keepdim) const {
  return ignis::mode(*this, dim, keepdim);
}

}  // namespace ignis
