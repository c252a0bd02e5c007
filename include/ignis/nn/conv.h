// Convolution and pooling layers (torch.nn.Conv2d, MaxPool2d, ...) and their functional forms.
// Parameter names match PyTorch ("weight", "bias"), so torchvision state_dict keys load as is.
#pragma once

#include <array>
#include <optional>
#include <string>

#include "ignis/conv.h"
#include "ignis/nn/module.h"

namespace ignis::nn {

namespace functional {
using ignis::adaptive_avg_pool2d;
using ignis::adaptive_max_pool2d;
using ignis::adaptive_max_pool2d_with_indices;
using ignis::avg_pool2d;
using ignis::conv1d;
using ignis::conv2d;
using ignis::conv2d_relu;
using ignis::conv_transpose2d;
using ignis::max_pool2d;
using ignis::max_pool2d_with_indices;
}  // namespace functional

namespace detail {
/// The options of a D-dimensional (transposed) convolution, with PyTorch-style chained setters:
/// `Conv2dOptions(3, 64, 3).stride(2).padding(1).bias(false)`. Per-dim values given as one number
/// apply to every spatial dim.
template <int D>
class ConvOptions {
 public:
  using Dims = std::array<int64_t, D>;
  ConvOptions(int64_t in_channels, int64_t out_channels, IntArrayRef kernel_size)
      : in_channels_(in_channels), out_channels_(out_channels), kernel_size_(dims(kernel_size)) {}

  ConvOptions& in_channels(int64_t v) {
    in_channels_ = v;
    return *this;
  }
  ConvOptions& out_channels(int64_t v) {
    out_channels_ = v;
    return *this;
  }
  ConvOptions& kernel_size(IntArrayRef v) {
    kernel_size_ = dims(v);
    return *this;
  }
  ConvOptions& stride(IntArrayRef v) {
    stride_ = dims(v);
    return *this;
  }
  /// Integer padding (clears a "same"/"valid" padding mode).
  ConvOptions& padding(IntArrayRef v) {
    padding_ = dims(v);
    padding_str_.clear();
    return *this;
  }
  /// "same" or "valid" (not for transposed convolutions).
  ConvOptions& padding(const std::string& v) {
    padding_str_ = v;
    return *this;
  }
  ConvOptions& padding(const char* v) { return padding(std::string(v)); }
  /// How the padding is filled: "zeros" (default), "reflect", "replicate" or "circular" (F::pad's
  /// modes; transposed convolutions take only "zeros").
  ConvOptions& padding_mode(const std::string& v) {
    padding_mode_ = v;
    return *this;
  }
  ConvOptions& output_padding(IntArrayRef v) {
    output_padding_ = dims(v);
    return *this;
  }
  ConvOptions& dilation(IntArrayRef v) {
    dilation_ = dims(v);
    return *this;
  }
  ConvOptions& groups(int64_t v) {
    groups_ = v;
    return *this;
  }
  ConvOptions& bias(bool v) {
    bias_ = v;
    return *this;
  }

  int64_t in_channels() const { return in_channels_; }
  int64_t out_channels() const { return out_channels_; }
  const Dims& kernel_size() const { return kernel_size_; }
  const Dims& stride() const { return stride_; }
  const Dims& padding() const { return padding_; }
  /// "same", "valid", or empty when the padding is given as integers.
  const std::string& padding_mode_str() const { return padding_str_; }
  const std::string& padding_mode() const { return padding_mode_; }
  const Dims& output_padding() const { return output_padding_; }
  const Dims& dilation() const { return dilation_; }
  int64_t groups() const { return groups_; }
  bool bias() const { return bias_; }

 private:
  static Dims dims(IntArrayRef v) {
    IGNIS_CHECK(v.size() == 1 || v.size() == D, "ConvOptions: expected 1 or ", D,
                " values, but got ", v);
    Dims r;
    for (int i = 0; i < D; ++i) r[i] = v.size() == 1 ? v[0] : v[i];
    return r;
  }
  static Dims fill(int64_t v) {
    Dims r;
    r.fill(v);
    return r;
  }
  int64_t in_channels_, out_channels_;
  Dims kernel_size_;
  Dims stride_ = fill(1), padding_ = fill(0), output_padding_ = fill(0), dilation_ = fill(1);
  std::string padding_str_;
  std::string padding_mode_ = "zeros";
  int64_t groups_ = 1;
  bool bias_ = true;
};
}  // namespace detail

using Conv1dOptions = detail::ConvOptions<1>;
using Conv2dOptions = detail::ConvOptions<2>;
using ConvTranspose2dOptions = detail::ConvOptions<2>;

/// A 2-d convolution: weight [out, in / groups, kh, kw], bias [out]; initialised like PyTorch
/// (kaiming-uniform with a = sqrt(5); bias U(-1/sqrt(fan_in), 1/sqrt(fan_in))).
class Conv2d : public Module {
 public:
  Conv2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  explicit Conv2d(const Conv2dOptions& options);
  std::string type_name() const override { return "Conv2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x)): one fused oneDNN convolution when no autograd is involved (inference).
  Tensor forward_relu(const Tensor& x);
  void reset_parameters();
  Tensor weight, bias;
  Conv2dOptions options;
};

/// A 1-d convolution over [N, C, L]: weight [out, in / groups, k].
class Conv1d : public Module {
 public:
  Conv1d(int64_t in_channels, int64_t out_channels, int64_t kernel_size, int64_t stride = 1,
         int64_t padding = 0, int64_t dilation = 1, int64_t groups = 1, bool bias = true);
  explicit Conv1d(const Conv1dOptions& options);
  std::string type_name() const override { return "Conv1d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  Conv1dOptions options;
};

/// The transposed 2-d convolution: weight [in, out / groups, kh, kw], bias [out].
class ConvTranspose2d : public Module {
 public:
  ConvTranspose2d(int64_t in_channels, int64_t out_channels, int64_t kernel_size,
                  int64_t stride = 1, int64_t padding = 0, int64_t output_padding = 0,
                  int64_t groups = 1, bool bias = true, int64_t dilation = 1);
  explicit ConvTranspose2d(const ConvTranspose2dOptions& options);
  std::string type_name() const override { return "ConvTranspose2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  ConvTranspose2dOptions options;
};

/// Max over kernel x kernel windows; stride -1 means stride = kernel.
class MaxPool2d : public Module {
 public:
  MaxPool2d(int64_t kernel_size, int64_t stride = -1, int64_t padding = 0, int64_t dilation = 1,
            bool ceil_mode = false);
  std::string type_name() const override { return "MaxPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  int64_t kernel_size, stride, padding, dilation;
  bool ceil_mode;
};

class AvgPool2d : public Module {
 public:
  AvgPool2d(int64_t kernel_size, int64_t stride = -1, int64_t padding = 0, bool ceil_mode = false,
            bool count_include_pad = true,
            std::optional<int64_t> divisor_override = std::nullopt);
  std::string type_name() const override { return "AvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  int64_t kernel_size, stride, padding;
  bool ceil_mode, count_include_pad;
  std::optional<int64_t> divisor_override;
};

class AdaptiveAvgPool2d : public Module {
 public:
  explicit AdaptiveAvgPool2d(int64_t output_size) : output_size{output_size, output_size} {}
  AdaptiveAvgPool2d(int64_t out_h, int64_t out_w) : output_size{out_h, out_w} {}
  std::string type_name() const override { return "AdaptiveAvgPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  std::array<int64_t, 2> output_size;
};

class AdaptiveMaxPool2d : public Module {
 public:
  explicit AdaptiveMaxPool2d(int64_t output_size) : output_size{output_size, output_size} {}
  AdaptiveMaxPool2d(int64_t out_h, int64_t out_w) : output_size{out_h, out_w} {}
  std::string type_name() const override { return "AdaptiveMaxPool2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  std::array<int64_t, 2> output_size;
};

}  // namespace ignis::nn
