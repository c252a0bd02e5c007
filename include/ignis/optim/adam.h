// Adam and AdamW (PyTorch's torch.optim.Adam / AdamW).
#pragma once

#include <tuple>

#include "ignis/optim/optimizer.h"

namespace ignis::optim {

/// (beta1, beta2): decay rates of the first and second moment averages.
using Betas = std::tuple<double, double>;

/// Options of Adam (PyTorch's defaults).
class AdamOptions : public OptimizerOptions {
 public:
  AdamOptions(double lr = 1e-3) : lr_(lr) {}
  IGNIS_OPTIM_ARG(double, lr);
  IGNIS_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  IGNIS_OPTIM_ARG(double, eps) = 1e-8;
  IGNIS_OPTIM_ARG(double, weight_decay) = 0;
  IGNIS_OPTIM_ARG(bool, amsgrad) = false;
  IGNIS_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<AdamOptions>(*this);
  }
  const char* type_name() const override { return "AdamOptions"; }
  std::vector<HParamRef> hparams() override;
};

/// Options of AdamW: Adam's, with decoupled weight decay defaulting to 1e-2.
class AdamWOptions : public OptimizerOptions {
 public:
  AdamWOptions(double lr = 1e-3) : lr_(lr) {}
  IGNIS_OPTIM_ARG(double, lr);
  IGNIS_OPTIM_ARG(Betas, betas) = {0.9, 0.999};
  IGNIS_OPTIM_ARG(double, eps) = 1e-8;
  IGNIS_OPTIM_ARG(double, weight_decay) = 1e-2;
  IGNIS_OPTIM_ARG(bool, amsgrad) = false;
  IGNIS_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<AdamWOptions>(*this);
  }
  const char* type_name() const override { return "AdamWOptions"; }
  std::vector<HParamRef> hparams() override;
};

struct AdamParamState : OptimizerParamState {
  int64_t step = 0;
  Tensor exp_avg, exp_avg_sq, max_exp_avg_sq;
  int64_t* step_count() override { return &step; }
  std::vector<std::pair<const char*, Tensor*>> tensors() override {
    return {{"exp_avg", &exp_avg}, {"exp_avg_sq", &exp_avg_sq},
            {"max_exp_avg_sq", &max_exp_avg_sq}};
  }
};

/// For each parameter p with gradient g (negated when maximize), t = step count:
///   g += weight_decay * p                              (Adam only: L2 penalty)
///   p *= 1 - lr * weight_decay                         (AdamW only: decoupled decay)
///   m = lerp(m, g, 1 - beta1);  v = beta2 * v + (1 - beta2) * g * g
///   v_hat = amsgrad ? (v_max = max(v_max, v)) : v
///   p -= lr / (1 - beta1^t) * m / (sqrt(v_hat) / sqrt(1 - beta2^t) + eps)
class Adam : public Optimizer {
 public:
  Adam(std::vector<ParamGroup> groups, AdamOptions defaults = AdamOptions());
  Adam(std::vector<Tensor> params, AdamOptions defaults = AdamOptions());
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  std::unique_ptr<OptimizerParamState> make_state() const override {
    return std::make_unique<AdamParamState>();
  }
};

class AdamW : public Optimizer {
 public:
  AdamW(std::vector<ParamGroup> groups, AdamWOptions defaults = AdamWOptions());
  AdamW(std::vector<Tensor> params, AdamWOptions defaults = AdamWOptions());
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  std::unique_ptr<OptimizerParamState> make_state() const override {
    return std::make_unique<AdamParamState>();
  }
};

}  // namespace ignis::optim
