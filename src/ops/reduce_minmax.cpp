// Max/min reductions: amax, amin, max(), min(), max(dim), min(dim), argmax, argmin.
// NaN beats every number (as in PyTorch); indices point at the first occurrence.
#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(amax_stub, ReduceFn);
IGNIS_DEFINE_STUB(amin_stub, ReduceFn);
IGNIS_DEFINE_STUB(minmax_dim_stub, MinMaxDimFn);

using TensorPair = std::tuple<Tensor, Tensor>;  // one macro argument

IGNIS_OP(amax, "amax(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, bool), amax,
         {.differentiable = true, .stubs = {&amax_stub}});
IGNIS_OP(amin, "amin(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, bool), amin,
         {.differentiable = true, .stubs = {&amin_stub}});
IGNIS_OP(max_dim,
         "max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, bool), max,
         {.differentiable = true, .stubs = {&minmax_dim_stub}});
IGNIS_OP(min_dim,
         "min.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor values, Tensor indices)",
         TensorPair(const Tensor&, int64_t, bool), min,
         {.differentiable = true, .stubs = {&minmax_dim_stub}});
IGNIS_OP(argmax, "argmax(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>, bool), argmax,
         {.stubs = {&minmax_dim_stub}});
IGNIS_OP(argmin, "argmin(Tensor self, int? dim=None, bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>, bool), argmin,
         {.stubs = {&minmax_dim_stub}});
IGNIS_OP_METHOD(max, "max(Tensor self) -> Tensor", Tensor() const, max,
                {.differentiable = true, .stubs = {&amax_stub}});
IGNIS_OP_METHOD(min, "min(Tensor self) -> Tensor", Tensor() const, min,
                {.differentiable = true, .stubs = {&amin_stub}});

Tensor evenly_distribute(const Tensor& g, const Tensor& x, const Tensor& out, const Shape& keep,
                         const Shape& dims) {
  const Tensor o = out.reshape(keep);
  const Tensor mask = logical_or(eq(x, o), logical_and(isnan(x), isnan(o)));
  const Tensor count = sum(mask, dims, true);
  return where(mask, g.reshape(keep) / count, 0);
}

namespace {

Tensor extreme(const Tensor& x, IntArrayRef dims, bool keepdim, bool is_max, const char* op) {
  const ReducePlan plan = make_reduce_plan(x, dims, keepdim, op);
  check_nonempty_reduction(x, plan, op);
  Tensor out = make_tensor(plan.out_shape, x.dtype(), x.device());
  (is_max ? amax_stub : amin_stub)[x.device()](out, x, plan);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        op, {&x}, {&out},
        [sx = SavedVariable(x, false), so = save_reduce_output(out), keep = plan.keep_shape,
         rdims = plan.dims(x.dim())](BackwardCtx& c, const TensorList& g) {
          return TensorList{evenly_distribute(g[0], c.unpack(sx), c.unpack(so), keep, rdims)};
        });
  }
  return out;
}

/// values and indices of the max/min over one dim; `values` only when want_values.
std::tuple<Tensor, Tensor> extreme_dim(const Tensor& x, int64_t dim, bool keepdim, bool is_max,
                                       bool want_values, const char* op) {
  const ReducePlan plan = make_reduce_plan(x, IntArrayRef(dim), keepdim, op);
  check_nonempty_reduction(x, plan, op);
  const int64_t d = x.dim() == 0 ? 0 : wrap_dim(dim, x.dim(), op);
  Tensor values = want_values ? make_tensor(plan.out_shape, x.dtype(), x.device()) : Tensor();
  Tensor indices = make_tensor(plan.out_shape, kInt64, x.device());
  minmax_dim_stub[x.device()](values, indices, x, d, is_max);
  if (want_values && autograd::any_needs_grad({&x})) {
    // The gradient goes to the selected index: g where arange(n) == index along dim, else 0.
    autograd::record(
        op, {&x}, {&values},
        [si = SavedVariable(indices, false), keep = plan.keep_shape, d,
         n = x.dim() == 0 ? 1 : x.size(d), nd = x.dim()](BackwardCtx& c, const TensorList& g) {
          if (nd == 0) return TensorList{g[0].reshape(keep)};
          const Tensor idx = c.unpack(si);
          Shape at(static_cast<size_t>(nd), 1);
          at[d] = n;
          const Tensor pos = arange(n, TensorOptions(kInt64).device(idx.device()));
          const Tensor mask = eq(pos.view(at), idx.reshape(keep));
          return TensorList{where(mask, g[0].reshape(keep), 0)};
        });
  }
  return {values, indices};
}

Tensor arg_extreme(const Tensor& x, std::optional<int64_t> dim, bool keepdim, bool is_max,
                   const char* op) {
  if (dim) return std::get<1>(extreme_dim(x, *dim, keepdim, is_max, false, op));
  // Over all elements: the index into the flattened tensor.
  IGNIS_CHECK(x.numel() > 0, op, ": cannot reduce an empty tensor of shape ", x.sizes(),
              " (the operation has no identity)");
  Tensor flat;
  {
    NoGradGuard ng;
    flat = x.reshape({x.numel()});
  }
  Tensor idx = std::get<1>(extreme_dim(flat, 0, false, is_max, false, op));
  if (keepdim) return idx.reshape(Shape(static_cast<size_t>(x.dim()), 1));
  return idx;
}

}  // namespace

Tensor amax(const Tensor& x, IntArrayRef dims, bool keepdim) {
  IGNIS_DISPATCH(amax, amax, x, dims, keepdim);
  return extreme(x, dims, keepdim, true, "amax");
}
Tensor amin(const Tensor& x, IntArrayRef dims, bool keepdim) {
  IGNIS_DISPATCH(amin, amin, x, dims, keepdim);
  return extreme(x, dims, keepdim, false, "amin");
}
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim) {
  IGNIS_DISPATCH(max_dim, max, x, dim, keepdim);
  return extreme_dim(x, dim, keepdim, true, true, "max");
}
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim) {
  IGNIS_DISPATCH(min_dim, min, x, dim, keepdim);
  return extreme_dim(x, dim, keepdim, false, true, "min");
}
Tensor argmax(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IGNIS_DISPATCH(argmax, argmax, x, dim, keepdim);
  return arg_extreme(x, dim, keepdim, true, "argmax");
}
Tensor argmin(const Tensor& x, std::optional<int64_t> dim, bool keepdim) {
  IGNIS_DISPATCH(argmin, argmin, x, dim, keepdim);
  return arg_extreme(x, dim, keepdim, false, "argmin");
}

Tensor Tensor::max() const {
  IGNIS_DISPATCH_METHOD(max, max);
  return extreme(*this, {}, false, true, "max");
}
Tensor Tensor::min() const {
  IGNIS_DISPATCH_METHOD(min, min);
  return extreme(*this, {}, false, false, "min");
}
std::tuple<Tensor, Tensor> Tensor::max(int64_t dim, bool keepdim) const {
  return ignis::max(*this, dim, keepdim);
}
std::tuple<Tensor, Tensor> Tensor::min(int64_t dim, bool keepdim) const {
  return ignis::min(*this, dim, keepdim);
}
Tensor Tensor::amax(IntArrayRef dims, bool keepdim) const {
  return ignis::amax(*this, dims, keepdim);
}
Tensor Tensor::amin(IntArrayRef dims, bool keepdim) const {
  return ignis::amin(*this, dims, keepdim);
}
Tensor Tensor::argmax(std::optional<int64_t> dim, bool keepdim) const {
  return ignis::argmax(*this, dim, keepdim);
}
Tensor Tensor::argmin(std::optional<int64_t> dim, bool keepdim) const {
  return ignis::argmin(*this, dim, keepdim);
}

}  // namespace ignis
