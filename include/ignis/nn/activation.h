// The activations of torch::nn with options: ELU, SELU, CELU, Hardtanh, ReLU6, Hardswish,
// Hardsigmoid, Mish, LogSigmoid, Softmin, GLU, PReLU, and their functional forms
// (torch::nn::functional), spelled as LibTorch spells them:
//   nn::functional::elu(x, nn::functional::ELUFuncOptions().alpha(0.5));
//   nn::ELU elu(nn::ELUOptions().alpha(0.5).inplace(true));
#pragma once

#include <optional>
#include <string>

#include "ignis/nn/module.h"
#include "ignis/ops.h"

namespace ignis::nn {

/// A chainable option like LibTorch's TORCH_ARG: `opts.alpha(0.5)` sets it and returns *this,
/// `opts.alpha()` reads it.
#define IGNIS_ACTIVATION_ARG(T, name)                \
 public:                                             \
  auto& name(const T& v) {                           \
    name##_ = v;                                     \
    return *this;                                    \
  }                                                  \
  const T& name() const noexcept { return name##_; } \
                                                     \
 private:                                            \
  T name##_

struct ELUOptions {
  IGNIS_ACTIVATION_ARG(double, alpha) = 1.0;
  IGNIS_ACTIVATION_ARG(bool, inplace) = false;
};
struct SELUOptions {
  /* implicit */ SELUOptions(bool inplace = false) : inplace_(inplace) {}
  IGNIS_ACTIVATION_ARG(bool, inplace);
};
struct CELUOptions {
  IGNIS_ACTIVATION_ARG(double, alpha) = 1.0;
  IGNIS_ACTIVATION_ARG(bool, inplace) = false;
};
struct HardtanhOptions {
  IGNIS_ACTIVATION_ARG(double, min_val) = -1.0;
  IGNIS_ACTIVATION_ARG(double, max_val) = 1.0;
  IGNIS_ACTIVATION_ARG(bool, inplace) = false;
};
/// nn::ReLU(nn::ReLUOptions().inplace(true)) rectifies its input in place, as torchvision's models
/// do after a convolution or a linear layer: no second activation-sized tensor.
struct ReLUOptions {
  /* implicit */ ReLUOptions(bool inplace = false) : inplace_(inplace) {}
  IGNIS_ACTIVATION_ARG(bool, inplace);
};
struct ReLU6Options {
  /* implicit */ ReLU6Options(bool inplace = false) : inplace_(inplace) {}
  IGNIS_ACTIVATION_ARG(bool, inplace);
};
struct SoftminOptions {
  /* implicit */ SoftminOptions(int64_t dim) : dim_(dim) {}
  IGNIS_ACTIVATION_ARG(int64_t, dim);
};
struct GLUOptions {
  /* implicit */ GLUOptions(int64_t dim = -1) : dim_(dim) {}
  IGNIS_ACTIVATION_ARG(int64_t, dim);
};
struct PReLUOptions {
  /// One slope, or one per channel (dim 1 of the input).
  IGNIS_ACTIVATION_ARG(int64_t, num_parameters) = 1;
  /// The slopes' initial value.
  IGNIS_ACTIVATION_ARG(double, init) = 0.25;
};

namespace functional {

using ELUFuncOptions = ELUOptions;
using SELUFuncOptions = SELUOptions;
using CELUFuncOptions = CELUOptions;
using HardtanhFuncOptions = HardtanhOptions;
using ReLUFuncOptions = ReLUOptions;
using ReLU6FuncOptions = ReLU6Options;
using GLUFuncOptions = GLUOptions;
/// F::softmax(x, F::SoftmaxFuncOptions(1)), F::log_softmax(x, F::LogSoftmaxFuncOptions(1)).
struct SoftmaxFuncOptions {
  /* implicit */ SoftmaxFuncOptions(int64_t dim) : dim_(dim) {}
  IGNIS_ACTIVATION_ARG(int64_t, dim);
  /// The dtype the input is cast to first.
  IGNIS_ACTIVATION_ARG(std::optional<DType>, dtype) = std::nullopt;
};
struct LogSoftmaxFuncOptions {
  /* implicit */ LogSoftmaxFuncOptions(int64_t dim) : dim_(dim) {}
  IGNIS_ACTIVATION_ARG(int64_t, dim);
  IGNIS_ACTIVATION_ARG(std::optional<DType>, dtype) = std::nullopt;
};
struct SoftminFuncOptions {
  /* implicit */ SoftminFuncOptions(int64_t dim) : dim_(dim) {}
  IGNIS_ACTIVATION_ARG(int64_t, dim);
  /// The dtype the input is cast to first.
  IGNIS_ACTIVATION_ARG(std::optional<DType>, dtype) = std::nullopt;
};

// The tensor is taken by value, as in LibTorch: with inplace(true) the op writes into its data.
inline Tensor elu(Tensor input, const ELUFuncOptions& options = {}) {
  return options.inplace() ? ignis::elu_(input, options.alpha())
                           : ignis::elu(input, options.alpha());
}
inline Tensor selu(Tensor input, const SELUFuncOptions& options = {}) {
  return options.inplace() ? ignis::selu_(input) : ignis::selu(input);
}
inline Tensor celu(Tensor input, const CELUFuncOptions& options = {}) {
  return options.inplace() ? ignis::celu_(input, options.alpha())
                           : ignis::celu(input, options.alpha());
}
inline Tensor hardtanh(Tensor input, const HardtanhFuncOptions& options = {}) {
  return options.inplace() ? ignis::hardtanh_(input, options.min_val(), options.max_val())
                           : ignis::hardtanh(input, options.min_val(), options.max_val());
}
inline Tensor relu(Tensor input, const ReLUFuncOptions& options = {}) {
  return options.inplace() ? input.relu_() : ignis::relu(input);
}
inline Tensor relu6(Tensor input, const ReLU6FuncOptions& options = {}) {
  return options.inplace() ? ignis::relu6_(input) : ignis::relu6(input);
}
inline Tensor hardswish(Tensor input, bool inplace = false) {
  return inplace ? ignis::hardswish_(input) : ignis::hardswish(input);
}
inline Tensor hardsigmoid(Tensor input, bool inplace = false) {
  return inplace ? ignis::hardsigmoid_(input) : ignis::hardsigmoid(input);
}
inline Tensor mish(const Tensor& input) { return ignis::mish(input); }
/// log(sigmoid(x)), stable for large |x| (the op log_sigmoid).
inline Tensor logsigmoid(const Tensor& input) { return ignis::log_sigmoid(input); }
inline Tensor softmax(const Tensor& input, const SoftmaxFuncOptions& options) {
  return ignis::softmax(options.dtype() ? input.to(*options.dtype()) : input, options.dim());
}
inline Tensor log_softmax(const Tensor& input, const LogSoftmaxFuncOptions& options) {
  return ignis::log_softmax(options.dtype() ? input.to(*options.dtype()) : input, options.dim());
}
inline Tensor softmin(const Tensor& input, const SoftminFuncOptions& options) {
  return ignis::softmin(options.dtype() ? input.to(*options.dtype()) : input, options.dim());
}
inline Tensor glu(const Tensor& input, const GLUFuncOptions& options = {}) {
  return ignis::glu(input, options.dim());
}
inline Tensor prelu(const Tensor& input, const Tensor& weight) {
  return ignis::prelu(input, weight);
}

}  // namespace functional

class ELU : public Module {
 public:
  explicit ELU(const ELUOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "ELU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::elu(x, options); }
  ELUOptions options;
};

class SELU : public Module {
 public:
  explicit SELU(const SELUOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "SELU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::selu(x, options); }
  SELUOptions options;
};

class CELU : public Module {
 public:
  explicit CELU(const CELUOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "CELU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::celu(x, options); }
  CELUOptions options;
};

class Hardtanh : public Module {
 public:
  explicit Hardtanh(const HardtanhOptions& options = {});
  std::string type_name() const override { return "Hardtanh"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::hardtanh(x, options); }
  HardtanhOptions options;
};

class ReLU : public Module {
 public:
  explicit ReLU(const ReLUOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "ReLU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::relu(x, options); }
  ReLUOptions options;
};

class ReLU6 : public Module {
 public:
  explicit ReLU6(const ReLU6Options& options = {}) : options(options) {}
  std::string type_name() const override { return "ReLU6"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::relu6(x, options); }
  ReLU6Options options;
};

class Hardswish : public Module {
 public:
  std::string type_name() const override { return "Hardswish"; }
  Tensor forward(const Tensor& x) override { return ignis::hardswish(x); }
};

class Hardsigmoid : public Module {
 public:
  std::string type_name() const override { return "Hardsigmoid"; }
  Tensor forward(const Tensor& x) override { return ignis::hardsigmoid(x); }
};

class Mish : public Module {
 public:
  std::string type_name() const override { return "Mish"; }
  Tensor forward(const Tensor& x) override { return ignis::mish(x); }
};

class LogSigmoid : public Module {
 public:
  std::string type_name() const override { return "LogSigmoid"; }
  Tensor forward(const Tensor& x) override { return ignis::log_sigmoid(x); }
};

class Softmin : public Module {
 public:
  explicit Softmin(const SoftminOptions& options) : options(options) {}
  std::string type_name() const override { return "Softmin"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  Tensor forward(const Tensor& x) override { return ignis::softmin(x, options.dim()); }
  SoftminOptions options;
};

class GLU : public Module {
 public:
  explicit GLU(const GLUOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "GLU"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(options.dim()); }
  Tensor forward(const Tensor& x) override { return ignis::glu(x, options.dim()); }
  GLUOptions options;
};

/// prelu(x, weight) with a learnable `weight` of num_parameters slopes, all `init`.
class PReLU : public Module {
 public:
  explicit PReLU(const PReLUOptions& options = {});
  std::string type_name() const override { return "PReLU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return ignis::prelu(x, weight); }
  void reset_parameters();
  PReLUOptions options;
  Tensor weight;
};

#undef IGNIS_ACTIVATION_ARG

}  // namespace ignis::nn
