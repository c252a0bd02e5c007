// The modules of ignis/nn/layers_extra.h and the options forms of F::interpolate and F::embedding.
#include "ignis/nn/layers_extra.h"

#include <cmath>
#include <sstream>

#include "ignis/nn/functional.h"
#include "ignis/autograd.h"
#include "ignis/nn/init.h"
#include "nn/conv_padding.h"

namespace ignis::nn {

namespace {

std::string list(const std::vector<int64_t>& v) {
  std::ostringstream os;
  if (v.size() == 1) {
    os << v[0];
    return os.str();
  }
  os << "(";
  for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
  os << ")";
  return os.str();
}

template <size_t D>
std::vector<int64_t> vec(const std::array<int64_t, D>& a) {
  return std::vector<int64_t>(a.begin(), a.end());
}

std::string yes_no(bool v) { return v ? "True" : "False"; }

std::string num(double v) {
  std::ostringstream os;
  os << v;
  return os.str();
}

template <int D>
void check_conv_options(const char* m, const detail::ConvOptions<D>& o, bool transposed) {
  IGNIS_CHECK(o.in_channels() > 0 && o.out_channels() > 0, m,
              ": in_channels and out_channels must be positive, but got ", o.in_channels(), " and ",
              o.out_channels());
  IGNIS_CHECK(
      o.groups() > 0 && o.in_channels() % o.groups() == 0 && o.out_channels() % o.groups() == 0, m,
      ": in_channels (", o.in_channels(), ") and out_channels (", o.out_channels(),
      ") must be divisible by groups (", o.groups(), ")");
  for (int i = 0; i < D; ++i) {
    IGNIS_CHECK(o.kernel_size()[i] > 0, m, ": kernel_size must be positive, but got ",
                list(vec(o.kernel_size())));
  }
  IGNIS_CHECK(o.padding_mode_str().empty(), m, ": padding must be integers, but got '",
              o.padding_mode_str(), "'");
  detail::check_padding_mode(m, o.padding_mode(), transposed);
}

// Weight and bias as PyTorch's _ConvNd.reset_parameters.
void conv_reset(Tensor& weight, Tensor& bias) {
  init::kaiming_uniform_(weight, std::sqrt(5.0));
  if (bias.defined()) {
    const auto [fan_in, fan_out] = init::calculate_fan_in_and_fan_out(weight);
    const double bound = fan_in > 0 ? 1.0 / std::sqrt(static_cast<double>(fan_in)) : 0.0;
    init::uniform_(bias, -bound, bound);
  }
}

template <int D>
std::string conv_repr(const detail::ConvOptions<D>& o, bool transposed) {
  std::ostringstream os;
  os << o.in_channels() << ", " << o.out_channels()
     << ", kernel_size=" << list(vec(o.kernel_size())) << ", stride=" << list(vec(o.stride()));
  if (o.padding() != std::array<int64_t, D>{}) os << ", padding=" << list(vec(o.padding()));
  if (transposed && o.output_padding() != std::array<int64_t, D>{}) {
    os << ", output_padding=" << list(vec(o.output_padding()));
  }
  std::array<int64_t, D> ones;
  ones.fill(1);
  if (o.dilation() != ones) os << ", dilation=" << list(vec(o.dilation()));
  if (o.groups() != 1) os << ", groups=" << o.groups();
  if (!o.bias()) os << ", bias=False";
  if (o.padding_mode() != "zeros") os << ", padding_mode=" << o.padding_mode();
  return os.str();
}

}  // namespace

// ---- Conv3d, ConvTranspose1d

Conv3d::Conv3d(const Conv3dOptions& o) : options(o) {
  check_conv_options("Conv3d", o, false);
  const auto& k = o.kernel_size();
  weight = register_parameter(
      "weight", empty({o.out_channels(), o.in_channels() / o.groups(), k[0], k[1], k[2]}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}
void Conv3d::reset_parameters() { conv_reset(weight, bias); }
std::string Conv3d::extra_repr() const { return conv_repr(options, false); }
Tensor Conv3d::forward(const Tensor& x) {
  const auto& o = options;
  if (o.padding_mode() != "zeros") {
    return conv3d(detail::mode_pad(x, o), weight, bias, vec(o.stride()), {0}, vec(o.dilation()),
                  o.groups());
  }
  return conv3d(x, weight, bias, vec(o.stride()), vec(o.padding()), vec(o.dilation()), o.groups());
}

ConvTranspose1d::ConvTranspose1d(const ConvTranspose1dOptions& o) : options(o) {
  check_conv_options("ConvTranspose1d", o, true);
  weight = register_parameter(
      "weight", empty({o.in_channels(), o.out_channels() / o.groups(), o.kernel_size()[0]}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}
void ConvTranspose1d::reset_parameters() { conv_reset(weight, bias); }
std::string ConvTranspose1d::extra_repr() const { return conv_repr(options, true); }
Tensor ConvTranspose1d::forward(const Tensor& x) {
  const auto& o = options;
  return conv_transpose1d(x, weight, bias, o.stride()[0], o.padding()[0], o.output_padding()[0],
                          o.groups(), o.dilation()[0]);
}

// ---- pooling

template <int D>
std::string detail::MaxPoolNd<D>::extra_repr() const {
  const auto& o = options;
  return "kernel_size=" + list(o.kernel_size()) +
         ", stride=" + list(o.stride().empty() ? o.kernel_size() : o.stride()) +
         ", padding=" + list(o.padding()) + ", dilation=" + list(o.dilation()) +
         ", ceil_mode=" + yes_no(o.ceil_mode());
}
template <int D>
Tensor detail::MaxPoolNd<D>::forward(const Tensor& x) {
  return functional::max_pool1d(x, options);
}
template <>
Tensor detail::MaxPoolNd<3>::forward(const Tensor& x) {
  return functional::max_pool3d(x, options);
}
template <int D>
std::string detail::AvgPoolNd<D>::extra_repr() const {
  const auto& o = options;
  return "kernel_size=" + list(o.kernel_size()) +
         ", stride=" + list(o.stride().empty() ? o.kernel_size() : o.stride()) +
         ", padding=" + list(o.padding());
}
template <int D>
Tensor detail::AvgPoolNd<D>::forward(const Tensor& x) {
  return functional::avg_pool1d(x, options);
}
template <>
Tensor detail::AvgPoolNd<3>::forward(const Tensor& x) {
  return functional::avg_pool3d(x, options);
}
template class detail::MaxPoolNd<1>;
template class detail::MaxPoolNd<3>;
template class detail::AvgPoolNd<1>;
template class detail::AvgPoolNd<3>;

// ---- InstanceNorm

InstanceNormBase::InstanceNormBase(const InstanceNormOptions& o, int spatial, const char* name)
    : options(o), spatial_(spatial), name_(name) {
  IGNIS_CHECK(o.num_features() > 0, name, ": num_features must be positive, but got ",
              o.num_features());
  const int64_t c = o.num_features();
  if (o.affine()) {
    weight = register_parameter("weight", ones({c}));
    bias = register_parameter("bias", zeros({c}));
  }
  if (o.track_running_stats()) {
    running_mean = register_buffer("running_mean", zeros({c}));
    running_var = register_buffer("running_var", ones({c}));
    num_batches_tracked = register_buffer("num_batches_tracked", zeros({}, kInt64));
  }
}

void InstanceNormBase::reset_running_stats() {
  if (!options.track_running_stats()) return;
  NoGradGuard ng;
  running_mean.zero_();
  running_var.fill_(1);
  num_batches_tracked.zero_();
}

void InstanceNormBase::reset_parameters() {
  reset_running_stats();
  if (!options.affine()) return;
  NoGradGuard ng;
  weight.fill_(1);
  bias.zero_();
}

std::string InstanceNormBase::extra_repr() const {
  const auto& o = options;
  return std::to_string(o.num_features()) + ", eps=" + num(o.eps()) +
         ", momentum=" + num(o.momentum()) + ", affine=" + yes_no(o.affine()) +
         ", track_running_stats=" + yes_no(o.track_running_stats());
}

Tensor InstanceNormBase::forward(const Tensor& x) {
  IGNIS_CHECK(x.dim() == spatial_ + 1 || x.dim() == spatial_ + 2, name_, ": expected a ",
              spatial_ + 1, "-D (unbatched) or ", spatial_ + 2,
              "-D (batched) input, but got shape ", x.sizes());
  const bool unbatched = x.dim() == spatial_ + 1;
  const Tensor xb = unbatched ? x.unsqueeze(0) : x;
  IGNIS_CHECK(xb.size(1) == options.num_features() || !options.affine(), name_, ": expected ",
              options.num_features(), " channels (num_features), but got input of shape ",
              x.sizes());
  const bool use_input_stats = is_training() || !options.track_running_stats();
  const Tensor y = ignis::instance_norm(xb, running_mean, running_var, weight, bias,
                                        use_input_stats, options.momentum(), options.eps());
  if (is_training() && options.track_running_stats()) {
    NoGradGuard ng;
    num_batches_tracked.add_(1);
  }
  return unbatched ? y.squeeze(0) : y;
}

// ---- distances, rearrangement

std::string CosineSimilarity::extra_repr() const {
  return "dim=" + std::to_string(options.dim()) + ", eps=" + num(options.eps());
}
Tensor CosineSimilarity::forward(const Tensor&) {
  IGNIS_FAIL("CosineSimilarity: forward takes two inputs, forward(x1, x2)");
}
Tensor CosineSimilarity::forward(const Tensor& x1, const Tensor& x2) {
  return functional::cosine_similarity(x1, x2, options);
}

std::string PairwiseDistance::extra_repr() const {
  return "p=" + num(options.p()) + ", eps=" + num(options.eps()) +
         ", keepdim=" + yes_no(options.keepdim());
}
Tensor PairwiseDistance::forward(const Tensor&) {
  IGNIS_FAIL("PairwiseDistance: forward takes two inputs, forward(x1, x2)");
}
Tensor PairwiseDistance::forward(const Tensor& x1, const Tensor& x2) {
  return functional::pairwise_distance(x1, x2, options);
}

std::string PixelShuffle::extra_repr() const {
  return "upscale_factor=" + std::to_string(options.upscale_factor());
}
Tensor PixelShuffle::forward(const Tensor& x) { return functional::pixel_shuffle(x, options); }

std::string PixelUnshuffle::extra_repr() const {
  return "downscale_factor=" + std::to_string(options.downscale_factor());
}
Tensor PixelUnshuffle::forward(const Tensor& x) { return functional::pixel_unshuffle(x, options); }

std::string Unfold::extra_repr() const {
  const auto& o = options;
  return "kernel_size=" + list(o.kernel_size()) + ", dilation=" + list(o.dilation()) +
         ", padding=" + list(o.padding()) + ", stride=" + list(o.stride());
}
Tensor Unfold::forward(const Tensor& x) { return functional::unfold(x, options); }

std::string Fold::extra_repr() const {
  const auto& o = options;
  return "output_size=" + list(o.output_size()) + ", kernel_size=" + list(o.kernel_size()) +
         ", dilation=" + list(o.dilation()) + ", padding=" + list(o.padding()) +
         ", stride=" + list(o.stride());
}
Tensor Fold::forward(const Tensor& x) { return functional::fold(x, options); }

// ---- functional forms with options

Tensor functional::interpolate(const Tensor& x, const InterpolateFuncOptions& o) {
  IGNIS_CHECK(o.size().has_value() != o.scale_factor().has_value(),
              "interpolate: exactly one of size and scale_factor must be set");
  if (o.size()) return ignis::interpolate(x, IntArrayRef(*o.size()), o.mode(), o.align_corners());
  return ignis::interpolate(x, *o.scale_factor(), o.mode(), o.align_corners());
}

Tensor functional::embedding(const Tensor& indices, const Tensor& weight,
                             const EmbeddingFuncOptions& o) {
  if (o.max_norm()) embedding_renorm_(weight, indices, *o.max_norm(), o.norm_type());
  return functional::embedding(indices, weight, o.padding_idx());
}

}  // namespace ignis::nn
