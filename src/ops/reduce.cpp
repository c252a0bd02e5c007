// Reductions that sum: sum, mean, sum_to_size. (Other reductions: ops/reduce_*.cpp.)
#include "ops/reduce.h"

#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"

namespace ignis {

using autograd::BackwardCtx;

IGNIS_DEFINE_STUB(sum_stub, ReduceFn);

ReducePlan make_reduce_plan(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op) {
  ReducePlan p;
  const int64_t nd = x.dim();
  p.reduced.assign(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    int64_t w = wrap_dim(d, nd, op);
    if (nd == 0) continue;
    IGNIS_CHECK(!p.reduced[w] || dims.empty(), op, ": dim ", w, " appears multiple times in the "
                "list of dims ", dims);
    p.reduced[w] = true;
  }
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t s = x.sizes()[d];
    if (p.reduced[d]) {
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

Tensor sum(const Tensor& x, IntArrayRef dims, bool keepdim, std::optional<DType> dtype) {
  const DType out_t = dtype.value_or(is_integral(x.dtype(), true) ? kInt64 : x.dtype());
  ReducePlan plan = make_reduce_plan(x, dims, keepdim, "sum");
  const Tensor xc = cast(x, out_t);
  Tensor out = make_tensor(plan.out_shape, out_t, x.device());
  sum_stub[x.device()](out, xc, plan);
  if (autograd::any_needs_grad({&x})) {
    autograd::record("sum", {&x}, {&out},
                     [keep = plan.keep_shape, shape = x.sizes().shape()](BackwardCtx&,
                                                                          const TensorList& g) {
                       return TensorList{g[0].reshape(keep).expand(shape)};
                     });
  }
  return out;
}

Tensor mean(const Tensor& x, IntArrayRef dims, bool keepdim) {
  IGNIS_CHECK(x.is_floating_point(), "mean: could not infer output dtype; input dtype must be "
              "floating point, but got ", x.dtype());
  ReducePlan plan = make_reduce_plan(x, dims, keepdim, "mean");
  return sum(x, dims, keepdim) / static_cast<double>(plan.reduced_numel);
}

Tensor sum_to_size(const Tensor& x, IntArrayRef shape) {
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
