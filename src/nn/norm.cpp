#include "ignis/nn/norm.h"

#include <sstream>

#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::nn {

namespace {
std::string fmt(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}
const char* yes_no(bool b) { return b ? "true" : "false"; }
}  // namespace

// ---- BatchNorm1d / BatchNorm2d

BatchNormBase::BatchNormBase(int64_t features, double eps_, double momentum_, bool affine_,
                             bool track)
    : num_features(features),
      eps(eps_),
      momentum(momentum_),
      affine(affine_),
      track_running_stats(track) {
  IGNIS_CHECK(features > 0, "BatchNorm: num_features must be positive, but got ", features);
  IGNIS_CHECK(eps_ >= 0, "BatchNorm: eps must be non-negative, but got ", eps_);
  if (affine) {
    weight = register_parameter("weight", ones({features}));
    bias = register_parameter("bias", zeros({features}));
  }
  if (track) {
    running_mean = register_buffer("running_mean", zeros({features}));
    running_var = register_buffer("running_var", ones({features}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void BatchNormBase::reset_running_stats() {
  if (!track_running_stats) return;
  NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void BatchNormBase::reset_parameters() {
  reset_running_stats();
  if (!affine) return;
  NoGradGuard ng;
  weight.fill_(1);
  bias.zero_();
}

std::string BatchNormBase::extra_repr() const {
  return std::to_string(num_features) + ", eps=" + fmt(eps) + ", momentum=" + fmt(momentum) +
         ", affine=" + yes_no(affine) + ", track_running_stats=" + yes_no(track_running_stats);
}

Tensor BatchNormBase::forward(const Tensor& x) {
  check_input(x);
  // Batch statistics while training, and always when there are no running statistics.
  const bool use_batch = is_training() || !track_running_stats;
  Tensor y =
      ignis::batch_norm(x, running_mean, running_var, weight, bias, use_batch, momentum, eps);
  if (is_training() && track_running_stats) {  // counted once batch_norm accepted the batch
    NoGradGuard ng;
    num_batches_tracked.add_(1);
  }
  return y;
}

void BatchNorm1d::check_input(const Tensor& x) const {
  IGNIS_CHECK(x.dim() == 2 || x.dim() == 3,
              "BatchNorm1d: expected a 2-D [N, C] or 3-D [N, C, L] input, but "
              "got shape ",
              x.sizes());
  IGNIS_CHECK(x.size(1) == num_features, "BatchNorm1d: expected ", num_features,
              " channels (num_features) in dim 1, but got input of shape ", x.sizes());
}

void BatchNorm2d::check_input(const Tensor& x) const {
  IGNIS_CHECK(x.dim() == 4, "BatchNorm2d: expected a 4-D [N, C, H, W] input, but got shape ",
              x.sizes());
  IGNIS_CHECK(x.size(1) == num_features, "BatchNorm2d: expected ", num_features,
              " channels (num_features) in dim 1, but got input of shape ", x.sizes());
}

// ---- GroupNorm

GroupNorm::GroupNorm(int64_t groups, int64_t channels, double eps_, bool affine)
    : num_groups(groups), num_channels(channels), eps(eps_) {
  IGNIS_CHECK(groups > 0 && channels > 0 && channels % groups == 0, "GroupNorm: num_groups ",
              groups, " must be positive and divide num_channels ", channels);
  if (affine) {
    weight = register_parameter("weight", ones({channels}));
    bias = register_parameter("bias", zeros({channels}));
  }
}

std::string GroupNorm::extra_repr() const {
  return std::to_string(num_groups) + ", " + std::to_string(num_channels) + ", eps=" + fmt(eps) +
         ", affine=" + yes_no(weight.defined());
}

Tensor GroupNorm::forward(const Tensor& x) {
  IGNIS_CHECK(x.dim() >= 2 && x.size(1) == num_channels, "GroupNorm: expected an input [N, ",
              num_channels, ", *], but got shape ", x.sizes());
  return ignis::group_norm(x, num_groups, weight, bias, eps);
}

// ---- LocalResponseNorm, Dropout2d

LocalResponseNorm::LocalResponseNorm(int64_t size_, double alpha_, double beta_, double k_)
    : size(size_), alpha(alpha_), beta(beta_), k(k_) {
  IGNIS_CHECK(size_ > 0, "LocalResponseNorm: size must be positive, but got ", size_);
}

std::string LocalResponseNorm::extra_repr() const {
  return std::to_string(size) + ", alpha=" + fmt(alpha) + ", beta=" + fmt(beta) + ", k=" + fmt(k);
}

Dropout2d::Dropout2d(double p) : p_(p) {
  IGNIS_CHECK(p >= 0 && p <= 1, "Dropout2d: probability has to be between 0 and 1, but got ", p);
}

std::string Dropout2d::extra_repr() const { return "p=" + fmt(p_); }

// ---- Upsample

namespace {
void check_upsample_mode(const std::string& mode, std::optional<bool> align_corners) {
  IGNIS_CHECK(mode == "nearest" || mode == "bilinear" || mode == "bicubic",
              "Upsample: unsupported mode '", mode,
              "' (supported: 'nearest', 'bilinear', 'bicubic')");
  IGNIS_CHECK(mode == "bilinear" || mode == "bicubic" || !align_corners.has_value(),
              "Upsample: align_corners can only be set with modes 'bilinear' and 'bicubic', not '",
              mode, "'");
}
}  // namespace

Upsample::Upsample(std::vector<double> scale_factor, std::string mode,
                   std::optional<bool> align_corners)
    : scale_factor_(std::move(scale_factor)),
      mode_(std::move(mode)),
      align_corners_(align_corners) {
  IGNIS_CHECK(!scale_factor_.empty(), "Upsample: either size or scale_factor should be defined");
  check_upsample_mode(mode_, align_corners_);
}

Upsample::Upsample(std::vector<int64_t> size, std::string mode, std::optional<bool> align_corners)
    : size_(std::move(size)), mode_(std::move(mode)), align_corners_(align_corners) {
  IGNIS_CHECK(!size_.empty(), "Upsample: either size or scale_factor should be defined");
  check_upsample_mode(mode_, align_corners_);
}

std::string Upsample::extra_repr() const {
  std::ostringstream os;
  if (!size_.empty()) {
    os << "size=" << IntArrayRef(size_);
  } else {
    os << "scale_factor=[";
    for (size_t i = 0; i < scale_factor_.size(); ++i) os << (i ? ", " : "") << scale_factor_[i];
    os << "]";
  }
  os << ", mode='" << mode_ << "'";
  if (align_corners_) os << ", align_corners=" << yes_no(*align_corners_);
  return os.str();
}

Tensor Upsample::forward(const Tensor& x) {
  if (!size_.empty()) return ignis::interpolate(x, IntArrayRef(size_), mode_, align_corners_);
  return ignis::interpolate(x, scale_factor_, mode_, align_corners_);
}

}  // namespace ignis::nn
