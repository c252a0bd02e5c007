// Activations and math written from other records, as PyTorch writes them: selu and celu are
// elu with fixed or derived parameters, relu6 is hardtanh(0, 6), softmin is softmax(-x), glu
// halves its input, prelu scales the negative part by a per-channel weight, square is pow(x, 2).
// Their gradients come from the records they call (so they are twice differentiable).
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ops/activation_ops.h"
#include "ops/elementwise.h"

namespace ignis {

#define COMPOSITE \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP(selu, "selu(Tensor self) -> Tensor", Tensor(const Tensor&), selu, COMPOSITE);
IGNIS_OP(selu_, "selu_(Tensor(a!) self) -> Tensor(a!)", const Tensor&(const Tensor&), selu_,
         COMPOSITE);
IGNIS_OP(celu, "celu(Tensor self, Scalar alpha=1.0) -> Tensor", Tensor(const Tensor&, Scalar), celu,
         COMPOSITE);
IGNIS_OP(celu_, "celu_(Tensor(a!) self, Scalar alpha=1.0) -> Tensor(a!)",
         const Tensor&(const Tensor&, Scalar), celu_, COMPOSITE);
IGNIS_OP(relu6, "relu6(Tensor self) -> Tensor", Tensor(const Tensor&), relu6, COMPOSITE);
IGNIS_OP(relu6_, "relu6_(Tensor(a!) self) -> Tensor(a!)", const Tensor&(const Tensor&), relu6_,
         COMPOSITE);
IGNIS_OP(softmin, "softmin(Tensor self, int dim) -> Tensor", Tensor(const Tensor&, int64_t),
         softmin, COMPOSITE);
IGNIS_OP(glu, "glu(Tensor self, int dim=-1) -> Tensor", Tensor(const Tensor&, int64_t), glu,
         COMPOSITE);
IGNIS_OP(prelu, "prelu(Tensor self, Tensor weight) -> Tensor", Tensor(const Tensor&, const Tensor&),
         prelu, COMPOSITE);
IGNIS_OP(square, "square(Tensor self) -> Tensor", Tensor(const Tensor&), square, COMPOSITE);
IGNIS_OP_METHOD(square_, "square_(Tensor(a!) self) -> Tensor(a!)", Tensor&() const, square_,
                COMPOSITE);
#undef COMPOSITE

Tensor selu(const Tensor& x) {
  IGNIS_DISPATCH(selu, selu, x);
  return elu(x, kSeluAlpha, kSeluScale);
}
const Tensor& selu_(const Tensor& x) {
  IGNIS_DISPATCH(selu_, selu_, x);
  return elu_(x, kSeluAlpha, kSeluScale);
}

namespace {
double celu_input_scale(Scalar alpha, const char* op) {
  IGNIS_CHECK(alpha.to_double() != 0, op, ": alpha cannot be 0 (ZeroDivisionError)");
  return 1.0 / alpha.to_double();
}
}  // namespace

Tensor celu(const Tensor& x, Scalar alpha) {
  IGNIS_DISPATCH(celu, celu, x, alpha);
  return elu(x, alpha, 1, celu_input_scale(alpha, "celu"));
}
const Tensor& celu_(const Tensor& x, Scalar alpha) {
  IGNIS_DISPATCH(celu_, celu_, x, alpha);
  return elu_(x, alpha, 1, celu_input_scale(alpha, "celu_"));
}

Tensor relu6(const Tensor& x) {
  IGNIS_DISPATCH(relu6, relu6, x);
  return hardtanh(x, 0, 6);
}
const Tensor& relu6_(const Tensor& x) {
  IGNIS_DISPATCH(relu6_, relu6_, x);
  return hardtanh_(x, 0, 6);
}

Tensor softmin(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(softmin, softmin, x, dim);
  IGNIS_CHECK(x.is_floating_point(), "softmin: expected a floating point tensor, but got ",
              x.dtype(), " of shape ", x.sizes());
  return softmax(neg(x), dim);
}

Tensor glu(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(glu, glu, x, dim);
  IGNIS_CHECK(x.dim() > 0, "glu: 0-d tensors are not supported (the halved dim must be even)");
  IGNIS_CHECK(x.is_floating_point(), "glu: expected a floating point tensor, but got ", x.dtype(),
              " of shape ", x.sizes());
  const int64_t d = wrap_dim(dim, x.dim(), "glu");
  const int64_t n = x.size(d);
  IGNIS_CHECK(n % 2 == 0, "glu: halving dimension must be even, but dimension ", d, " is size ", n,
              " (input of shape ", x.sizes(), ")");
  return x.narrow(d, 0, n / 2) * sigmoid(x.narrow(d, n / 2, n / 2));
}

Tensor prelu(const Tensor& x, const Tensor& weight) {
  IGNIS_DISPATCH(prelu, prelu, x, weight);
  IGNIS_CHECK(weight.dim() <= 1, "prelu: expected weight to be a scalar or 1-D tensor, but got ",
              "shape ", weight.sizes());
  IGNIS_CHECK(x.is_floating_point() && weight.is_floating_point(),
              "prelu: expected floating point tensors, but got input ", x.dtype(), " and weight ",
              weight.dtype());
  const int64_t n = weight.numel();
  Tensor w;
  if (n == 1) {
    w = weight.reshape({});  // one slope for every element
  } else {
    // One slope per channel, dim 1 of the input (dim 0 of a 1-D input is not a channel dim).
    const int64_t channels = x.dim() >= 2 ? x.size(1) : 1;
    IGNIS_CHECK(x.dim() > 0 && channels == n, "prelu: weight has ", n,
                " elements but the input of shape ", x.sizes(), " has ", channels,
                " channel(s) (dim 1); give one weight or one per channel");
    std::vector<int64_t> shape(static_cast<size_t>(x.dim() - 1), 1);
    shape[0] = n;
    w = weight.reshape(shape);
  }
  // The slope multiplies only the non-positive part, so that a positive inf beside it gives the
  // weight a zero gradient (PyTorch's), not 0 * inf = NaN through where's untaken branch.
  const Tensor positive = x > 0;
  return where(positive, x, w * where(positive, 0, x));
}

Tensor square(const Tensor& x) {
  IGNIS_DISPATCH(square, square, x);
  return pow(x.dtype() == kBool ? cast(x, kInt64) : x, 2);
}
Tensor Tensor::square() const { return ignis::square(*this); }
Tensor& Tensor::square_() const {
  IGNIS_DISPATCH_METHOD(square_, square_);
  return pow_(2);
}

Tensor Tensor::prelu(const Tensor& weight) const { return ignis::prelu(*this, weight); }

}  // namespace ignis
