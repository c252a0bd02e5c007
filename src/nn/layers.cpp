#include "ignis/nn/layers.h"

#include <cmath>
#include <sstream>

#include "core/op_call.h"
#include "ignis/autograd.h"
#include "ignis/nn/conv.h"
#include "ignis/nn/init.h"

namespace ignis::nn {

namespace {
std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
}  // namespace

// ---- functional

IGNIS_OP(dropout, "dropout(Tensor input, float p=0.5, bool train=True) -> Tensor",
         Tensor(const Tensor&, double, bool), functional::dropout,
         {.differentiable = true, .kind = "random"});
IGNIS_OP(embedding, "embedding(Tensor input, Tensor weight, int? padding_idx=None) -> Tensor",
         Tensor(const Tensor&, const Tensor&, std::optional<int64_t>), functional::embedding,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(rms_norm,
         "rms_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, float? eps=None) -> "
         "Tensor",
         Tensor(const Tensor&, IntArrayRef, const Tensor&, std::optional<double>),
         functional::rms_norm, {.differentiable = true, .kind = "composite"});
IGNIS_OP(layer_norm,
         "layer_norm(Tensor input, int[] normalized_shape, Tensor? weight=None, "
         "Tensor? bias=None, float eps=1e-05) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, const Tensor&, const Tensor&, double),
         functional::layer_norm, {.differentiable = true, .kind = "composite"});

Tensor functional::dropout(const Tensor& x, double p, bool training) {
  IGNIS_DISPATCH(dropout, functional::dropout, x, p, training);
  IGNIS_CHECK(p >= 0 && p <= 1, "dropout: probability has to be between 0 and 1, but got ", p);
  if (!training || p == 0) return x;
  if (p == 1) return x * 0;
  Tensor keep = (rand(x.sizes(), TensorOptions(x.dtype()).device(x.device())) >= p).to(x.dtype());
  return x * (keep * (1.0 / (1.0 - p)));
}

Tensor functional::embedding(const Tensor& indices, const Tensor& weight,
                             std::optional<int64_t> padding_idx) {
  IGNIS_DISPATCH(embedding, functional::embedding, indices, weight, padding_idx);
  IGNIS_CHECK(weight.dim() == 2, "embedding: weight must be 2-d, got shape ", weight.sizes());
  IGNIS_CHECK(indices.dtype() == kInt64 || indices.dtype() == kInt32,
              "embedding: indices must be int64 or int32, got ", indices.dtype());
  Shape out_shape = indices.sizes().shape();
  out_shape.push_back(weight.size(1));
  Tensor out;
  try {
    out = index_select(weight, 0, indices.reshape({-1})).reshape(out_shape);
  } catch (const Error& e) {  // an index outside [0, num_embeddings): name the op
    IGNIS_FAIL("embedding: ", e.what(), " (num_embeddings = ", weight.size(0), ")");
  }
  if (padding_idx) {
    // Rows of the padding index give the weight's padding row (as PyTorch: a pretrained padding
    // vector is kept) and send it no gradient.
    out = where((indices != *padding_idx).unsqueeze(-1), out, out.detach());
  }
  return out;
}

namespace {
// The trailing dims `shape` names in x (layer_norm, rms_norm), checked with `op`'s name.
std::vector<int64_t> normalized_dims(const char* op, const Tensor& x, IntArrayRef shape) {
  const int64_t k = static_cast<int64_t>(shape.size());
  IGNIS_CHECK(k >= 1 && x.dim() >= k, op, ": normalized_shape ", shape,
              " does not fit input of shape ", x.sizes());
  for (int64_t i = 0; i < k; ++i) {
    IGNIS_CHECK(x.size(x.dim() - k + i) == shape[i], op, ": normalized_shape ", shape,
                " does not match the trailing dims of input of shape ", x.sizes());
  }
  std::vector<int64_t> dims;
  for (int64_t i = x.dim() - k; i < x.dim(); ++i) dims.push_back(i);
  return dims;
}
}  // namespace

Tensor functional::layer_norm(const Tensor& x, IntArrayRef shape, const Tensor& weight,
                              const Tensor& bias, double eps) {
  IGNIS_DISPATCH(layer_norm, functional::layer_norm, x, shape, weight, bias, eps);
  const std::vector<int64_t> dims = normalized_dims("layer_norm", x, shape);
  Tensor mu = x.mean(dims, true);
  Tensor xc = x - mu;
  Tensor var = (xc * xc).mean(dims, true);
  Tensor y = xc * rsqrt(var + eps);
  if (weight.defined()) y = y * weight;
  if (bias.defined()) y = y + bias;
  return y;
}

Tensor functional::rms_norm(const Tensor& x, IntArrayRef shape, const Tensor& weight,
                            std::optional<double> eps) {
  IGNIS_DISPATCH(rms_norm, functional::rms_norm, x, shape, weight, eps);
  IGNIS_CHECK(x.is_floating_point(), "rms_norm: expected a floating point input, but got ",
              x.dtype());
  const std::vector<int64_t> dims = normalized_dims("rms_norm", x, shape);
  if (weight.defined()) {
    IGNIS_CHECK(weight.sizes().equals(shape), "rms_norm: weight of shape ", weight.sizes(),
                " must be normalized_shape ", shape);
  }
  IGNIS_CHECK(!eps || *eps >= 0, "rms_norm: eps must be non-negative, but got ", eps.value_or(0));
  // PyTorch's: eps = finfo(dtype).eps; bfloat16 computed in float32 and cast back.
  const double e = eps ? *eps
                       : x.dtype() == kFloat64   ? 2.220446049250313e-16
                         : x.dtype() == kBFloat16 ? 0.0078125
                                                  : 1.1920928955078125e-07;
  const Tensor xf = x.dtype() == kBFloat16 ? x.to(kFloat32) : x;
  Tensor y = (xf * rsqrt((xf * xf).mean(dims, true) + e)).to(x.dtype());
  if (weight.defined()) y = y * weight;
  return y;
}

// ---- Linear

Linear::Linear(int64_t in, int64_t out, bool with_bias) : in_features(in), out_features(out) {
  IGNIS_CHECK(in > 0 && out > 0, "Linear: in_features and out_features must be positive, got ", in,
              " and ", out);
  weight = register_parameter("weight", empty({out, in}));
  if (with_bias) bias = register_parameter("bias", empty({out}));
  reset_parameters();
}

void Linear::reset_parameters() {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(in_features));
    init::uniform_(bias, -bound, bound);
  }
}

std::string Linear::extra_repr() const {
  return "in_features=" + std::to_string(in_features) +
         ", out_features=" + std::to_string(out_features) +
         ", bias=" + (bias.defined() ? "true" : "false");
}

namespace {
void check_linear_input(const Tensor& x, int64_t in_features) {
  IGNIS_CHECK(x.dim() >= 1 && x.size(-1) == in_features, "Linear: input of shape ", x.sizes(),
              " does not end in in_features=", in_features);
}
}  // namespace

Tensor Linear::forward(const Tensor& x) {
  check_linear_input(x, in_features);
  return ignis::linear(x, weight, bias);
}

Tensor Linear::forward_relu(const Tensor& x) {
  check_linear_input(x, in_features);
  return ignis::linear_relu(x, weight, bias);
}

std::string Flatten::extra_repr() const {
  return "start_dim=" + std::to_string(start_) + ", end_dim=" + std::to_string(end_);
}

std::string Unflatten::extra_repr() const {
  std::ostringstream os;
  os << "dim=" << dim_ << ", unflattened_size=" << IntArrayRef(sizes_);
  return os.str();
}

std::string LeakyReLU::extra_repr() const { return "negative_slope=" + fmt(slope_); }

Dropout::Dropout(double p) : p_(p) {
  IGNIS_CHECK(p >= 0 && p <= 1, "Dropout: probability has to be between 0 and 1, but got ", p);
}
std::string Dropout::extra_repr() const { return "p=" + fmt(p_); }

// ---- Embedding

Embedding::Embedding(int64_t num, int64_t dim, std::optional<int64_t> padding_idx)
    : num_(num), dim_(dim) {
  IGNIS_CHECK(num > 0 && dim > 0, "Embedding: num_embeddings and embedding_dim must be positive");
  if (padding_idx) {
    int64_t p = *padding_idx < 0 ? *padding_idx + num : *padding_idx;
    IGNIS_CHECK(p >= 0 && p < num, "Embedding: padding_idx ", *padding_idx,
                " must be within num_embeddings (", num, ")");
    padding_idx_ = p;
  }
  weight = register_parameter("weight", randn({num, dim}));
  if (padding_idx_) {
    NoGradGuard ng;
    weight.select(0, *padding_idx_).zero_();
  }
}

std::string Embedding::extra_repr() const {
  return std::to_string(num_) + ", " + std::to_string(dim_) +
         (padding_idx_ ? ", padding_idx=" + std::to_string(*padding_idx_) : "") +
         (max_norm_ ? ", max_norm=" + fmt(*max_norm_) : "");
}

Embedding::Embedding(const EmbeddingOptions& o)
    : Embedding(o.num_embeddings(), o.embedding_dim(), o.padding_idx()) {
  max_norm_ = o.max_norm();
  norm_type_ = o.norm_type();
}

Tensor Embedding::forward(const Tensor& indices) {
  if (max_norm_) embedding_renorm_(weight, indices, *max_norm_, norm_type_);
  return functional::embedding(indices, weight, padding_idx_);
}

// ---- LayerNorm

LayerNorm::LayerNorm(std::vector<int64_t> shape, double eps, bool affine)
    : shape_(std::move(shape)), eps_(eps) {
  IGNIS_CHECK(!shape_.empty(), "LayerNorm: normalized_shape must not be empty");
  if (affine) {
    weight = register_parameter("weight", ones(shape_));
    bias = register_parameter("bias", zeros(shape_));
  }
}

std::string LayerNorm::extra_repr() const {
  std::ostringstream os;
  os << IntArrayRef(shape_) << ", eps=" << eps_
     << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

Tensor LayerNorm::forward(const Tensor& x) {
  return functional::layer_norm(x, shape_, weight, bias, eps_);
}

RMSNorm::RMSNorm(std::vector<int64_t> shape, std::optional<double> eps, bool affine)
    : shape_(std::move(shape)), eps_(eps) {
  IGNIS_CHECK(!shape_.empty(), "RMSNorm: normalized_shape must not be empty");
  IGNIS_CHECK(!eps_ || *eps_ >= 0, "RMSNorm: eps must be non-negative, but got ", *eps_);
  if (affine) weight = register_parameter("weight", ones(shape_));
}

std::string RMSNorm::extra_repr() const {
  std::ostringstream os;
  os << IntArrayRef(shape_) << ", eps=";
  if (eps_) {
    os << *eps_;
  } else {
    os << "None";
  }
  os << ", elementwise_affine=" << (weight.defined() ? "true" : "false");
  return os.str();
}

Tensor RMSNorm::forward(const Tensor& x) { return functional::rms_norm(x, shape_, weight, eps_); }

// ---- containers

Tensor Sequential::forward(const Tensor& x) {
  Tensor h = x;
  for (const auto& m : mods_) h = m->forward(h);
  return h;
}

void Sequential::push_back(std::shared_ptr<Module> m) {
  push_back(std::to_string(mods_.size()), std::move(m));
}

void Sequential::push_back(const std::string& name, std::shared_ptr<Module> m) {
  add_child(name, m);
  mods_.push_back(std::move(m));
}

std::shared_ptr<Module> Sequential::operator[](size_t i) const {
  IGNIS_CHECK(i < mods_.size(), "Sequential: index ", i, " is out of range (size ", mods_.size(),
              ")");
  return mods_[i];
}

void ModuleList::push_back(std::shared_ptr<Module> m) {
  add_child(std::to_string(mods_.size()), m);
  mods_.push_back(std::move(m));
}

std::shared_ptr<Module> ModuleList::operator[](size_t i) const {
  IGNIS_CHECK(i < mods_.size(), "ModuleList: index ", i, " is out of range (size ", mods_.size(),
              ")");
  return mods_[i];
}

void ModuleDict::insert(const std::string& name, std::shared_ptr<Module> m) {
  add_child(name, std::move(m));
}

bool ModuleDict::contains(const std::string& name) const {
  for (const auto& [n, c] : named_children()) {
    if (n == name) return true;
  }
  return false;
}

}  // namespace ignis::nn
