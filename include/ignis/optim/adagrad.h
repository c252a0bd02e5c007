// Adagrad (PyTorch's torch.optim.Adagrad).
#pragma once

#include "ignis/optim/optimizer.h"

namespace ignis::optim {

/// Options of Adagrad (PyTorch's defaults).
class AdagradOptions : public OptimizerOptions {
 public:
  AdagradOptions(double lr = 1e-2) : lr_(lr) {}
  IGNIS_OPTIM_ARG(double, lr);
  IGNIS_OPTIM_ARG(double, lr_decay) = 0;
  IGNIS_OPTIM_ARG(double, weight_decay) = 0;
  IGNIS_OPTIM_ARG(double, initial_accumulator_value) = 0;
  IGNIS_OPTIM_ARG(double, eps) = 1e-10;
  IGNIS_OPTIM_ARG(bool, maximize) = false;

 public:
  std::unique_ptr<OptimizerOptions> clone() const override {
    return std::make_unique<AdagradOptions>(*this);
  }
  const char* type_name() const override { return "AdagradOptions"; }
  std::vector<HParamRef> hparams() override;
};

struct AdagradParamState : OptimizerParamState {
  int64_t step = 0;
  Tensor sum;
  int64_t* step_count() override { return &step; }
  std::vector<std::pair<const char*, Tensor*>> tensors() override { return {{"sum", &sum}}; }
};

/// For each parameter p with gradient g (negated when maximize), t = step count:
///   g += weight_decay * p
///   clr = lr / (1 + (t - 1) * lr_decay)
///   sum += g * g;  p -= clr * g / (sqrt(sum) + eps)
/// The accumulator starts at initial_accumulator_value (created with the optimizer, as PyTorch).
class Adagrad : public Optimizer {
 public:
  Adagrad(std::vector<ParamGroup> groups, AdagradOptions defaults = AdagradOptions());
  Adagrad(std::vector<Tensor> params, AdagradOptions defaults = AdagradOptions());
  Tensor step(const LossClosure& closure = nullptr) override;

 protected:
  void validate_options(const OptimizerOptions& options) const override;
  std::unique_ptr<OptimizerParamState> make_state() const override {
    return std::make_unique<AdagradParamState>();
  }

 private:
  void init_state(const Tensor& p, const AdagradOptions& o);
};

}  // namespace ignis::optim
