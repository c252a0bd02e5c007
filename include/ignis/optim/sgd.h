// Stochastic gradient descent with momentum (PyTorch's torch.optim.SGD).
#pragma once

#include "ignis/optim/optimizer.h"

namespace ignis::optim {

/// Options of SGD (PyTorch's defaults).
class SGDOptions : public OptimizerOptions {
 public:
  // Implicit, as LibTorch's: optim::SGD opt(params, 0.01) takes a plain learning rate.
  SGDOptions(double lr = 1e-3) : lr_(lr) {}
  IGNIS_OPTIM_ARG(double, lr);
  IGNIS_OPTIM_ARG(double, momentum) = 0;
  IGNIS_OPTIM_ARG(double, dampening) = 0;
  IGNIS_OPTIM_ARG(double, weight_decay) = 0;
  IGNIS_OPTIM_ARG(bool, nesterov) = false;
  IGNIS_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<SGDOptions>(*this);
  }
  const char* type_name() const override { return "SGDOptions"; }
  std::vector<HParamRef> hparams() override;
};

struct SGDParamState : OptimizerParamState {
  Tensor momentum_buffer;
  std::vector<std::pair<const char*, Tensor*>> tensors() override {
    return {{"momentum_buffer", &momentum_buffer}};
  }
};

/// For each parameter p with gradient g (g negated when maximize):
///   g += weight_decay * p
///   buf = g (first step) or momentum * buf + (1 - dampening) * g
///   g = nesterov ? g + momentum * buf : buf        (when momentum != 0)
///   p -= lr * g
class SGD : public Optimizer {
 public:
  SGD(std::vector<ParamGroup> groups, SGDOptions defaults = SGDOptions());
  SGD(std::vector<Tensor> params, SGDOptions defaults = SGDOptions());
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  std::unique_ptr<OptimizerParamState> make_state() const override {
    return std::make_unique<SGDParamState>();
  }
};

}  // namespace ignis::optim
