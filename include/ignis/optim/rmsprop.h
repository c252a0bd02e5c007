// RMSprop (PyTorch's torch.optim.RMSprop).
#pragma once

#include "ignis/optim/optimizer.h"

namespace ignis::optim {

/// Options of RMSprop (PyTorch's defaults).
class RMSpropOptions : public OptimizerOptions {
 public:
  RMSpropOptions(double lr = 1e-2) : lr_(lr) {}
  IGNIS_OPTIM_ARG(double, lr);
  IGNIS_OPTIM_ARG(double, alpha) = 0.99;
  IGNIS_OPTIM_ARG(double, eps) = 1e-8;
  IGNIS_OPTIM_ARG(double, weight_decay) = 0;
  IGNIS_OPTIM_ARG(double, momentum) = 0;
  IGNIS_OPTIM_ARG(bool, centered) = false;
  IGNIS_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<RMSpropOptions>(*this);
  }
  const char* type_name() const override { return "RMSpropOptions"; }
  std::vector<HParamRef> hparams() override;
};

struct RMSpropParamState : OptimizerParamState {
  int64_t step = 0;
  Tensor square_avg, momentum_buffer, grad_avg;
  int64_t* step_count() override { return &step; }
  std::vector<std::pair<const char*, Tensor*>> tensors() override {
    return {{"square_avg", &square_avg}, {"momentum_buffer", &momentum_buffer},
            {"grad_avg", &grad_avg}};
  }
};

/// For each parameter p with gradient g (negated when maximize):
///   g += weight_decay * p
///   s = alpha * s + (1 - alpha) * g * g
///   avg = centered ? sqrt(s - ga * ga) + eps  with ga = lerp(ga, g, 1 - alpha)
///                  : sqrt(s) + eps
///   momentum > 0:  buf = momentum * buf + g / avg;  p -= lr * buf
///   otherwise:     p -= lr * g / avg
class RMSprop : public Optimizer {
 public:
  RMSprop(std::vector<ParamGroup> groups, RMSpropOptions defaults = RMSpropOptions());
  RMSprop(std::vector<Tensor> params, RMSpropOptions defaults = RMSpropOptions());
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  std::unique_ptr<OptimizerParamState> make_state() const override {
    return std::make_unique<RMSpropParamState>();
  }
};

}  // namespace ignis::optim
