// Reductions that sum: sum, mean, sum_to_size. (Other reductions: ops/reduce_*.cpp.)
#include "ops/reduce.h"

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"

namespace ignis {

using autograd::BackwardCtx;

IGNIS_DEFINE_STUB(sum_stub, ReduceFn);
IGNIS_DEFINE_STUB(mean_stub, ReduceFn);

IGNIS_OP(sum,
         "sum(Tensor self, int[] dim=[], bool keepdim=False, *, ScalarType? dtype=None) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, bool, std::optional<DType>), sum,
         {.differentiable = true, .stubs = {&sum_stub}});
IGNIS_OP(mean, "mean(Tensor self, int[] dim=[], bool keepdim=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, bool), mean,
         {.differentiable = true, .stubs = {&mean_stub}});
IGNIS_OP(sum_to_size, "sum_to_size(Tensor self, int[] size) -> Tensor",
         Tensor(const Tensor&, IntArrayRef), sum_to_size, {.kind = "composite"});

ReducePlan make_reduce_plan(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  ReducePlan p;
  const int64_t nd = x.dim();
  IGNIS_CHECK(nd <= 64, op, ": tensors of more than 64 dims are not supported (got ", nd, ")");
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    IGNIS_CHECK(!p.is_reduced(w), op, ": dim ", w, " appears multiple times in the list of dims ",
                dims);
    p.mask |= uint64_t{1} << w;
  }
  if (dims.empty() && nd > 0) p.mask = nd == 64 ? ~uint64_t{0} : (uint64_t{1} << nd) - 1;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t s = x.sizes()[d];
    if (p.is_reduced(d)) {
      p.reduced_numel *= s;
      p.keep_shape.push_back(1);
      if (keepdim) p.out_shape.push_back(1);
    } else {
      p.keep_shape.push_back(s);
      p.out_shape.push_back(s);
    }
  }
  return p;
}

ReducePlan make_reduce_plan(const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                            const char* op) {
  if (!dim) return make_reduce_plan(x, IntArrayRef(), keepdim, op);
  return make_reduce_plan(x, IntArrayRef(*dim), keepdim, op);
}

void check_nonempty_reduction(const Tensor& x, const ReducePlan& plan, const char* op) {
  if (plan.reduced_numel != 0 || shape_numel(plan.out_shape) == 0) return;
  const uint64_t all = x.dim() >= 64 ? ~uint64_t{0} : (uint64_t{1} << x.dim()) - 1;
  if (plan.mask == all) {
    IGNIS_FAIL(op, ": cannot reduce an empty tensor of shape ", x.sizes(),
               " (the operation has no identity)");
  }
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (plan.is_reduced(d) && x.sizes()[d] == 0) {
      IGNIS_FAIL(op, ": cannot reduce over dim ", d, " of size 0 of an empty tensor of shape ",
                 x.sizes(), " (the operation has no identity)");
    }
  }
}

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype) {
  IGNIS_DISPATCH(sum, sum, x, dims, keepdim, dtype);
  const DType out_t = dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
  ReducePlan plan = make_reduce_plan(x, dims, keepdim, "sum");
  // Integers are summed straight into int64; other dtype changes cast first.
  const bool widen = out_t == kInt64 && is_integral(x.dtype(), true);
  const Tensor xc = widen ? x : cast(x, out_t);
  Tensor out = make_tensor(plan.out_shape, out_t, x.device());
  sum_stub[x.device()](out, xc, plan);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "sum", {&x}, {&out},
        [keep = plan.keep_shape, shape = x.sizes().shape()](BackwardCtx&, const TensorList& g) {
          return TensorList{g[0].reshape(keep).expand(shape)};
        });
  }
  return out;
}

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  IGNIS_DISPATCH(mean, mean, x, dims, keepdim);
  IGNIS_CHECK(x.is_floating_point(),
              "mean: could not infer output dtype; input dtype must be "
              "floating point, but got ",
              x.dtype());
  ReducePlan plan = make_reduce_plan(x, dims, keepdim, "mean");
  Tensor out = make_tensor(plan.out_shape, x.dtype(), x.device());
  mean_stub[x.device()](out, x, plan);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "mean", {&x}, {&out},
        [keep = plan.keep_shape, shape = x.sizes().shape(),
         n = static_cast<double>(plan.reduced_numel)](BackwardCtx&, const TensorList& g) {
          return TensorList{(g[0] / n).reshape(keep).expand(shape)};
        });
  }
  return out;
}

Tensor sum_to_size(const Tensor& x, IntArrayRef shape) {
  IGNIS_DISPATCH(sum_to_size, sum_to_size, x, shape);
  const int64_t lead = x.dim() - static_cast<int64_t>(shape.size());
  IGNIS_CHECK(lead >= 0, "sum_to_size: size ", shape, " is not expandable to size ", x.sizes());
  Shape dims;
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < lead) {
      dims.push_back(d);
      continue;
    }
    const int64_t want = shape[d - lead];
    IGNIS_CHECK(want == x.sizes()[d] || want == 1, "sum_to_size: size ", shape,
                " is not expandable to size ", x.sizes());
    if (want == 1 && x.sizes()[d] != 1) dims.push_back(d);
  }
  if (dims.empty()) return x.reshape(shape);
  return sum(x, dims, true).reshape(shape);
}

Tensor Tensor::sum(std::optional<DType> dtype) const { return ignis::sum(*this, {}, false, dtype); }
Tensor Tensor::sum(IntArrayRef dims, bool keepdim, std::optional<DType> dtype) const {
  return ignis::sum(*this, dims, keepdim, dtype);
}
Tensor Tensor::mean() const { return ignis::mean(*this); }
Tensor Tensor::mean(IntArrayRef dims, bool keepdim) const {
  return ignis::mean(*this, dims, keepdim);
}
Tensor Tensor::sum_to_size(IntArrayRef shape) const { return ignis::sum_to_size(*this, shape); }

}  // namespace ignis
