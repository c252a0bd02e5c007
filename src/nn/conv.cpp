// Convolution and pooling modules: parameters, PyTorch's default initialisation, reprs.
#include "ignis/nn/conv.h"

#include <cmath>
#include <sstream>

#include "ignis/nn/init.h"
#include "ignis/ops.h"
#include "nn/conv_padding.h"

namespace ignis::nn {

namespace {

template <size_t D>
std::string tup(const std::array<int64_t, D>& v) {
  std::ostringstream os;
  os << "(";
  for (size_t i = 0; i < D; ++i) os << (i ? ", " : "") << v[i];
  os << (D == 1 ? ",)" : ")");
  return os.str();
}

template <size_t D>
IntArrayRef ar(const std::array<int64_t, D>& a) {
  return IntArrayRef(a.data(), D);
}

template <int D>
void check_options(const char* m, const detail::ConvOptions<D>& o, bool transposed) {
  IGNIS_CHECK(o.in_channels() > 0 && o.out_channels() > 0, m,
              ": in_channels and out_channels must be positive, but got ", o.in_channels(), " and ",
              o.out_channels());
  IGNIS_CHECK(o.groups() > 0, m, ": groups must be positive, but got ", o.groups());
  IGNIS_CHECK(o.in_channels() % o.groups() == 0, m, ": in_channels (", o.in_channels(),
              ") must be divisible by groups (", o.groups(), ")");
  IGNIS_CHECK(o.out_channels() % o.groups() == 0, m, ": out_channels (", o.out_channels(),
              ") must be divisible by groups (", o.groups(), ")");
  for (int i = 0; i < D; ++i) {
    IGNIS_CHECK(o.kernel_size()[i] > 0, m, ": kernel_size must be positive, but got ",
                tup(o.kernel_size()));
  }
  const std::string& ps = o.padding_mode_str();
  IGNIS_CHECK(ps.empty() || (!transposed && (ps == "same" || ps == "valid")), m,
              ": padding must be integers", transposed ? "" : ", 'same' or 'valid'", ", but got '",
              ps, "'");
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
  os << o.in_channels() << ", " << o.out_channels() << ", kernel_size=" << tup(o.kernel_size())
     << ", stride=" << tup(o.stride());
  if (!o.padding_mode_str().empty()) {
    os << ", padding=" << o.padding_mode_str();
  } else if (o.padding() != std::array<int64_t, D>{}) {
    os << ", padding=" << tup(o.padding());
  }
  if (transposed && o.output_padding() != std::array<int64_t, D>{}) {
    os << ", output_padding=" << tup(o.output_padding());
  }
  std::array<int64_t, D> ones;
  ones.fill(1);
  if (o.dilation() != ones) os << ", dilation=" << tup(o.dilation());
  if (o.groups() != 1) os << ", groups=" << o.groups();
  if (!o.bias()) os << ", bias=False";
  if (o.padding_mode() != "zeros") os << ", padding_mode=" << o.padding_mode();
  return os.str();
}

}  // namespace

// ---- Conv2d

Conv2d::Conv2d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
               int64_t dilation, int64_t groups, bool bias)
    : Conv2d(Conv2dOptions(in, out, k)
                 .stride(stride)
                 .padding(padding)
                 .dilation(dilation)
                 .groups(groups)
                 .bias(bias)) {}

Conv2d::Conv2d(const Conv2dOptions& o) : options(o) {
  check_options("Conv2d", o, false);
  const auto& k = o.kernel_size();
  weight = register_parameter("weight",
                              empty({o.out_channels(), o.in_channels() / o.groups(), k[0], k[1]}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}

void Conv2d::reset_parameters() { conv_reset(weight, bias); }
std::string Conv2d::extra_repr() const { return conv_repr(options, false); }

Tensor Conv2d::forward(const Tensor& x) {
  const auto& o = options;
  if (o.padding_mode() != "zeros") {
    return conv2d(detail::mode_pad(x, o), weight, bias, ar(o.stride()), {0}, ar(o.dilation()),
                  o.groups());
  }
  if (!o.padding_mode_str().empty()) {
    return conv2d(x, weight, bias, ar(o.stride()), o.padding_mode_str(), ar(o.dilation()),
                  o.groups());
  }
  return conv2d(x, weight, bias, ar(o.stride()), ar(o.padding()), ar(o.dilation()), o.groups());
}

Tensor Conv2d::forward_relu(const Tensor& x) {
  const auto& o = options;
  if (!o.padding_mode_str().empty() || o.padding_mode() != "zeros") return ignis::relu(forward(x));
  return conv2d_relu(x, weight, bias, ar(o.stride()), ar(o.padding()), ar(o.dilation()),
                     o.groups());
}

// ---- Conv1d

Conv1d::Conv1d(int64_t in, int64_t out, int64_t k, int64_t stride, int64_t padding,
               int64_t dilation, int64_t groups, bool bias)
    : Conv1d(Conv1dOptions(in, out, k)
                 .stride(stride)
                 .padding(padding)
                 .dilation(dilation)
                 .groups(groups)
                 .bias(bias)) {}

Conv1d::Conv1d(const Conv1dOptions& o) : options(o) {
  check_options("Conv1d", o, false);
  weight = register_parameter(
      "weight", empty({o.out_channels(), o.in_channels() / o.groups(), o.kernel_size()[0]}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}

void Conv1d::reset_parameters() { conv_reset(weight, bias); }
std::string Conv1d::extra_repr() const { return conv_repr(options, false); }

Tensor Conv1d::forward(const Tensor& x) {
  const auto& o = options;
  if (o.padding_mode() != "zeros") {
    return conv1d(detail::mode_pad(x, o), weight, bias, ar(o.stride()), {0}, ar(o.dilation()),
                  o.groups());
  }
  if (!o.padding_mode_str().empty()) {
    return conv1d(x, weight, bias, ar(o.stride()), o.padding_mode_str(), ar(o.dilation()),
                  o.groups());
  }
  return conv1d(x, weight, bias, ar(o.stride()), ar(o.padding()), ar(o.dilation()), o.groups());
}

// ---- ConvTranspose2d

ConvTranspose2d::ConvTranspose2d(int64_t in, int64_t out, int64_t k, int64_t stride,
                                 int64_t padding, int64_t output_padding, int64_t groups, bool bias,
                                 int64_t dilation)
    : ConvTranspose2d(ConvTranspose2dOptions(in, out, k)
                          .stride(stride)
                          .padding(padding)
                          .output_padding(output_padding)
                          .groups(groups)
                          .bias(bias)
                          .dilation(dilation)) {}

ConvTranspose2d::ConvTranspose2d(const ConvTranspose2dOptions& o) : options(o) {
  check_options("ConvTranspose2d", o, true);
  const auto& k = o.kernel_size();
  weight = register_parameter("weight",
                              empty({o.in_channels(), o.out_channels() / o.groups(), k[0], k[1]}));
  if (o.bias()) bias = register_parameter("bias", empty({o.out_channels()}));
  reset_parameters();
}

void ConvTranspose2d::reset_parameters() { conv_reset(weight, bias); }
std::string ConvTranspose2d::extra_repr() const { return conv_repr(options, true); }

Tensor ConvTranspose2d::forward(const Tensor& x) {
  const auto& o = options;
  return conv_transpose2d(x, weight, bias, ar(o.stride()), ar(o.padding()), ar(o.output_padding()),
                          o.groups(), ar(o.dilation()));
}

// ---- pooling

MaxPool2d::MaxPool2d(int64_t k, int64_t s, int64_t p, int64_t d, bool ceil)
    : kernel_size(k), stride(s < 0 ? k : s), padding(p), dilation(d), ceil_mode(ceil) {}

std::string MaxPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << kernel_size << ", stride=" << stride << ", padding=" << padding
     << ", dilation=" << dilation << ", ceil_mode=" << (ceil_mode ? "True" : "False");
  return os.str();
}

Tensor MaxPool2d::forward(const Tensor& x) {
  return max_pool2d(x, kernel_size, stride, padding, dilation, ceil_mode);
}

AvgPool2d::AvgPool2d(int64_t k, int64_t s, int64_t p, bool ceil, bool include_pad,
                     std::optional<int64_t> divisor)
    : kernel_size(k),
      stride(s < 0 ? k : s),
      padding(p),
      ceil_mode(ceil),
      count_include_pad(include_pad),
      divisor_override(divisor) {}

std::string AvgPool2d::extra_repr() const {
  std::ostringstream os;
  os << "kernel_size=" << kernel_size << ", stride=" << stride << ", padding=" << padding;
  if (divisor_override) os << ", divisor_override=" << *divisor_override;
  return os.str();
}

Tensor AvgPool2d::forward(const Tensor& x) {
  return avg_pool2d(x, kernel_size, stride, padding, ceil_mode, count_include_pad,
                    divisor_override);
}

std::string AdaptiveAvgPool2d::extra_repr() const { return "output_size=" + tup(output_size); }
Tensor AdaptiveAvgPool2d::forward(const Tensor& x) {
  return adaptive_avg_pool2d(x, {output_size[0], output_size[1]});
}

std::string AdaptiveMaxPool2d::extra_repr() const { return "output_size=" + tup(output_size); }
Tensor AdaptiveMaxPool2d::forward(const Tensor& x) {
  return adaptive_max_pool2d(x, {output_size[0], output_size[1]});
}

}  // namespace ignis::nn
