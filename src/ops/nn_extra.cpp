// instance_norm, normalize, cosine_similarity, pairwise_distance, pixel_shuffle / pixel_unshuffle
// and embedding_renorm_: compositions of ignis ops (each a record of kind "composite", its
// gradients those of the ops it is written with), as PyTorch writes them.
#include <algorithm>
#include <cmath>
#include <vector>

#include "core/op_call.h"
#include "ignis/autograd.h"
#include "ignis/nn_ops.h"
#include "ignis/ops.h"

namespace ignis {

#define COMPOSITE \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP(instance_norm,
         "instance_norm(Tensor input, Tensor? running_mean=None, Tensor? running_var=None, "
         "Tensor? weight=None, Tensor? bias=None, bool use_input_stats=True, float momentum=0.1, "
         "float eps=1e-05) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                double, double),
         instance_norm, COMPOSITE);
IGNIS_OP(normalize, "normalize(Tensor input, float p=2., int dim=1, float eps=1e-12) -> Tensor",
         Tensor(const Tensor&, double, int64_t, double), normalize, COMPOSITE);
IGNIS_OP(cosine_similarity,
         "cosine_similarity(Tensor x1, Tensor x2, int dim=1, float eps=1e-08) -> Tensor",
         Tensor(const Tensor&, const Tensor&, int64_t, double), cosine_similarity, COMPOSITE);
IGNIS_OP(pairwise_distance,
         "pairwise_distance(Tensor x1, Tensor x2, float p=2., float eps=1e-06, bool keepdim=False) "
         "-> Tensor",
         Tensor(const Tensor&, const Tensor&, double, double, bool), pairwise_distance, COMPOSITE);
IGNIS_OP(pixel_shuffle, "pixel_shuffle(Tensor self, int upscale_factor) -> Tensor",
         Tensor(const Tensor&, int64_t), pixel_shuffle, COMPOSITE);
IGNIS_OP(pixel_unshuffle, "pixel_unshuffle(Tensor self, int downscale_factor) -> Tensor",
         Tensor(const Tensor&, int64_t), pixel_unshuffle, COMPOSITE);
IGNIS_OP(embedding_renorm_,
         "embedding_renorm_(Tensor(a!) self, Tensor indices, float max_norm, float norm_type) -> "
         "Tensor(a!)",
         Tensor(const Tensor&, const Tensor&, double, double), embedding_renorm_,
         {.kind = "composite"});
#undef COMPOSITE

Tensor instance_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                     const Tensor& weight, const Tensor& bias, bool use_input_stats,
                     double momentum, double eps) {
  IGNIS_DISPATCH(instance_norm, instance_norm, x, running_mean, running_var, weight, bias,
                 use_input_stats, momentum, eps);
  const char* op = "instance_norm";
  IGNIS_CHECK(x.defined() && x.dim() >= 3, op,
              ": expected an input [N, C, *] with at least one spatial dim, but got input of "
              "shape ",
              x.defined() ? x.sizes() : Shape{});
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  const int64_t N = x.size(0), C = x.size(1);
  for (const Tensor* t : {&running_mean, &running_var, &weight, &bias}) {
    if (!t->defined()) continue;
    IGNIS_CHECK(t->dim() == 1 && t->size(0) == C, op,
                ": expected running statistics, weight and "
                "bias of shape [",
                C, "] (the channels of the input of shape ", x.sizes(), "), but got shape ",
                t->sizes());
  }
  IGNIS_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must be given together");
  Shape cshape(static_cast<size_t>(x.dim()), 1);  // [1, C, 1, ...]
  cshape[1] = C;
  std::vector<int64_t> dims;
  int64_t count = 1;
  for (int64_t d = 2; d < x.dim(); ++d) {
    dims.push_back(d);
    count *= x.size(d);
  }
  Tensor y;
  if (use_input_stats) {
    IGNIS_CHECK(count > 1 || x.numel() == 0, op,
                ": expected more than 1 spatial element when training, but got input of shape ",
                x.sizes());
    const Tensor mean = x.mean(dims, true);
    const Tensor var = x.var(dims, 0, true);
    y = (x - mean) / (var + eps).sqrt();
    if (running_mean.defined() && x.numel() > 0) {
      NoGradGuard ng;
      // The batch average of the instance statistics; the variance unbiased, as PyTorch.
      const Tensor m = mean.detach().reshape({N, C}).mean({0}).to(running_mean.dtype());
      const Tensor v = (var.detach().reshape({N, C}) * (static_cast<double>(count) / (count - 1)))
                           .mean({0})
                           .to(running_var.dtype());
      Tensor rm = running_mean, rv = running_var;  // handles onto the caller's buffers
      rm.mul_(1 - momentum).add_(m * momentum);
      rv.mul_(1 - momentum).add_(v * momentum);
    }
  } else {
    IGNIS_CHECK(running_mean.defined(), op,
                ": use_input_stats=false needs running_mean and running_var");
    y = (x - running_mean.view(cshape)) / (running_var.view(cshape) + eps).sqrt();
  }
  if (weight.defined()) y = y * weight.view(cshape);
  if (bias.defined()) y = y + bias.view(cshape);
  return y;
}

Tensor normalize(const Tensor& x, double p, int64_t dim, double eps) {
  IGNIS_DISPATCH(normalize, normalize, x, p, dim, eps);
  IGNIS_CHECK(x.defined() && x.is_floating_point(), "normalize: expected a floating point input",
              x.defined() ? ", but got " : "", x.defined() ? dtype_name(x.dtype()) : "");
  return x / x.norm(p, {dim}, true).clamp_min(eps);
}

Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim, double eps) {
  IGNIS_DISPATCH(cosine_similarity, cosine_similarity, x1, x2, dim, eps);
  IGNIS_CHECK(x1.is_floating_point() && x2.is_floating_point(),
              "cosine_similarity: expected floating point inputs, but got ", x1.dtype(), " and ",
              x2.dtype());
  const Shape s = broadcast_shapes(x1.sizes(), x2.sizes());
  const Tensor a = x1.expand(s), b = x2.expand(s);
  // PyTorch 1.13: each operand divided by its norm clamped at eps.
  const Tensor na = a.norm(2, {dim}, true).clamp_min(eps),
               nb = b.norm(2, {dim}, true).clamp_min(eps);
  return ((a / na) * (b / nb)).sum({dim});
}

Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p, double eps, bool keepdim) {
  IGNIS_DISPATCH(pairwise_distance, pairwise_distance, x1, x2, p, eps, keepdim);
  IGNIS_CHECK(x1.is_floating_point() && x2.is_floating_point(),
              "pairwise_distance: expected floating point inputs, but got ", x1.dtype(), " and ",
              x2.dtype());
  const int64_t nd = std::max(x1.dim(), x2.dim());
  IGNIS_CHECK(nd >= 1, "pairwise_distance: expected inputs with at least one dim, but got shapes ",
              x1.sizes(), " and ", x2.sizes());
  return (x1 - x2 + eps).norm(p, {nd - 1}, keepdim);
}

Tensor pixel_shuffle(const Tensor& x, int64_t r) {
  IGNIS_DISPATCH(pixel_shuffle, pixel_shuffle, x, r);
  const char* op = "pixel_shuffle";
  IGNIS_CHECK(x.dim() >= 3, op,
              ": expected an input [*, C r^2, H, W] of at least 3 dims, but got "
              "input of shape ",
              x.sizes());
  IGNIS_CHECK(r > 0, op, ": upscale_factor must be positive, but got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  IGNIS_CHECK(c % (r * r) == 0, op, ": the channels ", c, " of the input of shape ", x.sizes(),
              " must be divisible by upscale_factor^2 = ", r * r);
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  const auto b = static_cast<int64_t>(lead.size());
  Shape s6 = lead;
  for (int64_t v : {c / (r * r), r, r, h, w}) s6.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t i : {0, 3, 1, 4, 2}) perm.push_back(b + i);  // [C, H, r, W, r]
  Shape out = lead;
  for (int64_t v : {c / (r * r), h * r, w * r}) out.push_back(v);
  return x.reshape(s6).permute(perm).reshape(out);
}

Tensor pixel_unshuffle(const Tensor& x, int64_t r) {
  IGNIS_DISPATCH(pixel_unshuffle, pixel_unshuffle, x, r);
  const char* op = "pixel_unshuffle";
  IGNIS_CHECK(x.dim() >= 3, op,
              ": expected an input [*, C, H r, W r] of at least 3 dims, but got "
              "input of shape ",
              x.sizes());
  IGNIS_CHECK(r > 0, op, ": downscale_factor must be positive, but got ", r);
  const int64_t c = x.size(-3), h = x.size(-2), w = x.size(-1);
  IGNIS_CHECK(h % r == 0 && w % r == 0, op, ": the height ", h, " and width ", w,
              " of the input of shape ", x.sizes(), " must be divisible by downscale_factor ", r);
  Shape lead(x.sizes().begin(), x.sizes().end() - 3);
  const auto b = static_cast<int64_t>(lead.size());
  Shape s6 = lead;
  for (int64_t v : {c, h / r, r, w / r, r}) s6.push_back(v);
  std::vector<int64_t> perm;
  for (int64_t i = 0; i < b; ++i) perm.push_back(i);
  for (int64_t i : {0, 2, 4, 1, 3}) perm.push_back(b + i);  // [C, r, r, H, W]
  Shape out = lead;
  for (int64_t v : {c * r * r, h / r, w / r}) out.push_back(v);
  return x.reshape(s6).permute(perm).reshape(out);
}

Tensor embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                         double norm_type) {
  IGNIS_DISPATCH(embedding_renorm_, embedding_renorm_, weight, indices, max_norm, norm_type);
  const char* op = "embedding_renorm_";
  IGNIS_CHECK(weight.dim() == 2 && weight.is_floating_point(), op,
              ": expected a floating point 2-d weight, but got ", weight.dtype(), " of shape ",
              weight.sizes());
  IGNIS_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32, op,
              ": indices must be int64 or int32, but got ", indices.dtype());
  if (weight.device().is_meta()) return weight;
  NoGradGuard ng;
  const Tensor idx = indices.to(kInt64).contiguous();
  std::vector<int64_t> rows(idx.data_ptr<int64_t>(), idx.data_ptr<int64_t>() + idx.numel());
  std::sort(rows.begin(), rows.end());
  rows.erase(std::unique(rows.begin(), rows.end()), rows.end());
  const int64_t num = weight.size(0);
  for (int64_t i : rows) {
    IGNIS_CHECK(i >= 0 && i < num, op, ": index ", i, " is out of range for a weight of shape ",
                weight.sizes());
    Tensor row = weight.select(0, i);
    const double n = row.norm(norm_type).item<double>();
    if (n > max_norm) row.mul_(max_norm / (n + 1e-7));
  }
  return weight;
}

}  // namespace ignis
