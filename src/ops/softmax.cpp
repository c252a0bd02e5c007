// softmax and log_softmax along one dim: fused, numerically stable kernels. Backward runs a fused
// kernel too, unless a graph of the backward is being built (create_graph): then it is written
// in ignis ops so that it can be differentiated again.
#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/elementwise.h"
#include "ops/reduce.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(softmax_stub, SoftmaxFn);
IGNIS_DEFINE_STUB(softmax_backward_stub, SoftmaxBackwardFn);

IGNIS_OP(softmax_int, "softmax.int(Tensor self, int dim) -> Tensor", Tensor(const Tensor&, int64_t),
         softmax, {.differentiable = true, .stubs = {&softmax_stub, &softmax_backward_stub}});
IGNIS_OP(log_softmax_int, "log_softmax.int(Tensor self, int dim) -> Tensor",
         Tensor(const Tensor&, int64_t), log_softmax,
         {.differentiable = true, .stubs = {&softmax_stub, &softmax_backward_stub}});

namespace {

Tensor softmax_backward(const Tensor& grad, const Tensor& y, int64_t d, bool log) {
  const Tensor g = cast(grad, y.dtype());
  if (!is_grad_enabled()) {
    Tensor gi = make_tensor(y.sizes(), y.dtype(), y.device());
    softmax_backward_stub[y.device()](gi, g.expand(y.sizes()), y, d, log);
    return gi;
  }
  if (log) return g - exp(y) * sum(g, d, true);
  return y * (g - sum(g * y, d, true));
}

Tensor softmax_impl(const Tensor& x, int64_t dim, bool log, const char* op) {
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point tensor, but got ", x.dtype());
  const int64_t d = wrap_dim(dim, x.dim(), op);
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  softmax_stub[x.device()](out, x, d, log);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out},
                     [so = save_reduce_output(out), d, log](BackwardCtx& c, const TensorList& g) {
                       return TensorList{softmax_backward(g[0], c.unpack(so), d, log)};
                     });
  }
  return out;
}

}  // namespace

Tensor softmax(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(softmax_int, softmax, x, dim);
  return softmax_impl(x, dim, false, "softmax");
}
Tensor log_softmax(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(log_softmax_int, log_softmax, x, dim);
  return softmax_impl(x, dim, true, "log_softmax");
}

Tensor Tensor::softmax(int64_t dim) const { return ignis::softmax(*this, dim); }
Tensor Tensor::log_softmax(int64_t dim) const { return ignis::log_softmax(*this, dim); }

}  // namespace ignis
