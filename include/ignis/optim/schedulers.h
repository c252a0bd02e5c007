// Learning-rate schedulers (torch.optim.lr_scheduler). Each step() sets the learning rate of
// every parameter group of its optimizer, with PyTorch's chainable formulas, so schedulers can be
// combined (ChainedScheduler multiplies their effects; SequentialLR switches at milestones):
//
//   optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
//   optim::StepLR sched(opt, /*step_size=*/30, /*gamma=*/0.1);
//   for (int epoch = 0; epoch < 100; ++epoch) { train(opt); sched.step(); }
#pragma once

#include <array>
#include <cstdint>
#include <functional>
#include <limits>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ignis/optim/optimizer.h"

namespace ignis::optim {

/// The base of the epoch-driven schedulers. A scheduler keeps a reference to its optimizer,
/// which must outlive it.
class LRScheduler {
 public:
  virtual ~LRScheduler() = default;
  LRScheduler(const LRScheduler&) = delete;
  LRScheduler& operator=(const LRScheduler&) = delete;

  /// Advances one epoch and sets the groups' learning rates.
  virtual void step();
  /// Jumps to `epoch`, using the closed form where the scheduler has one (PyTorch's deprecated
  /// step(epoch), which SequentialLR uses at its milestones).
  virtual void step(int64_t epoch);
  /// The learning rates set by the last step (one per group).
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  /// The rates the schedule starts from: each group's initial_lr.
  const std::vector<double>& base_lrs() const { return base_lrs_; }
  int64_t last_epoch() const { return last_epoch_; }
  Optimizer& optimizer() const { return *optimizer_; }
  const std::string& name() const { return name_; }

  /// The chainable form used by step(): new rates from the groups' current rates at
  /// last_epoch() (PyTorch's get_lr()).
  virtual std::vector<double> get_lr() = 0;
  /// The closed form at last_epoch() (PyTorch's _get_closed_form_lr), if the scheduler has one.
  virtual std::optional<std::vector<double>> closed_form_lr() const { return std::nullopt; }

  /// last_epoch, step_count (0-d int64), base_lrs, last_lr (1-D float64).
  virtual OptimizerStateDict state_dict() const;
  /// Restores a state_dict(); throws naming missing, unexpected or mis-sized entries.
  virtual void load_state_dict(const OptimizerStateDict& state);

 protected:
  /// Records each group's initial_lr (when last_epoch == -1; otherwise they must exist, as when
  /// resuming) and takes them as base_lrs. Derived constructors end with initial_step().
  LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch);
  /// For schedulers made of others (no initial_lr bookkeeping).
  struct Composite {};
  LRScheduler(std::string name, Optimizer& optimizer, Composite);
  /// The first step, from the constructor (PyTorch's _initial_step).
  void initial_step();
  /// Sets the groups' rates and records them as last_lr.
  void apply(const std::vector<double>& lrs);
  std::vector<double> group_lrs() const;

  std::string name_;
  Optimizer* optimizer_;
  std::vector<double> base_lrs_;
  std::vector<double> last_lr_;
  int64_t last_epoch_ = -1;
  int64_t step_count_ = 0;

  friend class SequentialLR;
};

/// lr = base_lr * gamma^(epoch / step_size) (integer division).
class StepLR : public LRScheduler {
 public:
  StepLR(Optimizer& optimizer, int64_t step_size, double gamma = 0.1, int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t step_size_;
  double gamma_;
};

/// lr = base_lr * gamma^(number of milestones <= epoch); repeated milestones count repeatedly.
class MultiStepLR : public LRScheduler {
 public:
  MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma = 0.1,
              int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  std::vector<int64_t> milestones_;  // sorted, with repeats
  double gamma_;
};

/// lr = base_lr * factor until total_iters, then base_lr.
class ConstantLR : public LRScheduler {
 public:
  ConstantLR(Optimizer& optimizer, double factor = 1.0 / 3, int64_t total_iters = 5,
             int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double factor_;
  int64_t total_iters_;
};

/// Linear warm-up (or decay): the factor goes from start_factor to end_factor over total_iters
/// epochs: lr = base_lr * (start + (end - start) * min(epoch, total_iters) / total_iters).
class LinearLR : public LRScheduler {
 public:
  LinearLR(Optimizer& optimizer, double start_factor = 1.0 / 3, double end_factor = 1.0,
           int64_t total_iters = 5, int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double start_factor_, end_factor_;
  int64_t total_iters_;
};

/// lr = base_lr * gamma^epoch.
class ExponentialLR : public LRScheduler {
 public:
  ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  double gamma_;
};

/// lr = eta_min + (base_lr - eta_min) * (1 + cos(pi * epoch / T_max)) / 2.
class CosineAnnealingLR : public LRScheduler {
 public:
  CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min = 0,
                    int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  std::optional<std::vector<double>> closed_form_lr() const override;

 private:
  int64_t T_max_;
  double eta_min_;
};

/// lr = base_lr * lambda(epoch), one function for all groups or one per group.
class LambdaLR : public LRScheduler {
 public:
  using Lambda = std::function<double(int64_t)>;
  LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch = -1);
  LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch = -1);
  std::vector<double> get_lr() override;

 private:
  std::vector<Lambda> lambdas_;
};

/// Options of OneCycleLR (PyTorch's defaults).
class OneCycleLROptions {
 public:
  OneCycleLROptions() = default;
  IGNIS_OPTIM_ARG(double, pct_start) = 0.3;
  /// "cos" or "linear".
  IGNIS_OPTIM_ARG(std::string, anneal_strategy) = "cos";
  /// Cycle momentum (SGD/RMSprop "momentum", Adam/AdamW beta1) inversely to the learning rate.
  IGNIS_OPTIM_ARG(bool, cycle_momentum) = true;
  IGNIS_OPTIM_ARG(double, base_momentum) = 0.85;
  IGNIS_OPTIM_ARG(double, max_momentum) = 0.95;
  /// initial_lr = max_lr / div_factor; min_lr = initial_lr / final_div_factor.
  IGNIS_OPTIM_ARG(double, div_factor) = 25;
  IGNIS_OPTIM_ARG(double, final_div_factor) = 1e4;
  /// Three phases (up, down to initial_lr, down to min_lr) instead of two (up, down to min_lr).
  IGNIS_OPTIM_ARG(bool, three_phase) = false;
};

/// The 1cycle policy: the rate rises from max_lr / div_factor to max_lr over pct_start of
/// total_steps, then anneals to min_lr. Step it once per batch.
class OneCycleLR : public LRScheduler {
 public:
  OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
             OneCycleLROptions options = {}, int64_t last_epoch = -1);
  /// One max_lr per parameter group.
  OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
             OneCycleLROptions options = {}, int64_t last_epoch = -1);
  std::vector<double> get_lr() override;
  int64_t total_steps() const { return total_steps_; }

 private:
  struct Phase {
    double end_step;
    int start_lr, end_lr;  // 0 initial, 1 max, 2 min
    int start_m, end_m;    // 0 base_momentum, 1 max_momentum
  };
  double anneal(double start, double end, double pct) const;
  int64_t total_steps_;
  OneCycleLROptions o_;
  std::vector<Phase> phases_;
  std::vector<std::array<double, 3>> group_lrs_;  // initial, max, min per group
  std::string momentum_key_;                      // "momentum", "betas.0" or "" (none)
};

/// Steps every scheduler each step (their effects multiply, through the chainable forms).
class ChainedScheduler : public LRScheduler {
 public:
  explicit ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers);
  void step() override;
  void step(int64_t epoch) override;
  std::vector<double> get_lr() override { return group_lrs(); }
  OptimizerStateDict state_dict() const override;
  void load_state_dict(const OptimizerStateDict& state) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
};

/// Runs schedulers[0] until milestones[0], then schedulers[1] (restarted at its epoch 0) until
/// milestones[1], and so on. Typical use: LinearLR warm-up, then CosineAnnealingLR.
class SequentialLR : public LRScheduler {
 public:
  SequentialLR(Optimizer& optimizer, std::vector<std::shared_ptr<LRScheduler>> schedulers,
               std::vector<int64_t> milestones, int64_t last_epoch = -1);
  void step() override;
  void step(int64_t epoch) override;
  std::vector<double> get_lr() override { return group_lrs(); }
  OptimizerStateDict state_dict() const override;
  void load_state_dict(const OptimizerStateDict& state) override;
  const std::vector<std::shared_ptr<LRScheduler>>& schedulers() const { return schedulers_; }

 private:
  std::vector<std::shared_ptr<LRScheduler>> schedulers_;
  std::vector<int64_t> milestones_;
};

/// Options of ReduceLROnPlateau (PyTorch's defaults).
class ReduceLROnPlateauOptions {
 public:
  ReduceLROnPlateauOptions() = default;
  /// "min": reduce when the metric stops decreasing; "max": when it stops increasing.
  IGNIS_OPTIM_ARG(std::string, mode) = "min";
  /// new_lr = lr * factor (must be < 1).
  IGNIS_OPTIM_ARG(double, factor) = 0.1;
  /// Epochs without improvement tolerated before reducing.
  IGNIS_OPTIM_ARG(int64_t, patience) = 10;
  /// Minimal improvement: relative (best * (1 -+ threshold)) or absolute (best -+ threshold).
  IGNIS_OPTIM_ARG(double, threshold) = 1e-4;
  /// "rel" or "abs".
  IGNIS_OPTIM_ARG(std::string, threshold_mode) = "rel";
  /// Epochs to wait after a reduction before counting bad epochs again.
  IGNIS_OPTIM_ARG(int64_t, cooldown) = 0;
  /// Reductions smaller than eps are skipped.
  IGNIS_OPTIM_ARG(double, eps) = 1e-8;

 public:
  /// Lower bound of the rate: one value for all groups, or one per group.
  ReduceLROnPlateauOptions& min_lr(double v) {
    min_lr_ = {v};
    return *this;
  }
  ReduceLROnPlateauOptions& min_lr(std::vector<double> v) {
    min_lr_ = std::move(v);
    return *this;
  }
  const std::vector<double>& min_lr() const { return min_lr_; }

 private:
  std::vector<double> min_lr_ = {0.0};
};

/// Reduces the learning rate by `factor` when a metric has stopped improving for `patience`
/// epochs. Driven by the metric: step(validation_loss).
class ReduceLROnPlateau {
 public:
  explicit ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options = {});
  void step(double metric);
  const std::vector<double>& get_last_lr() const { return last_lr_; }
  int64_t last_epoch() const { return last_epoch_; }
  double best() const { return best_; }
  int64_t num_bad_epochs() const { return num_bad_epochs_; }
  int64_t cooldown_counter() const { return cooldown_counter_; }
  bool in_cooldown() const { return cooldown_counter_ > 0; }
  Optimizer& optimizer() const { return *optimizer_; }

  /// last_epoch, best, num_bad_epochs, cooldown_counter, last_lr.
  OptimizerStateDict state_dict() const;
  void load_state_dict(const OptimizerStateDict& state);

 private:
  bool is_better(double a, double best) const;
  Optimizer* optimizer_;
  ReduceLROnPlateauOptions o_;
  std::vector<double> min_lrs_;
  bool mode_min_, rel_;
  double best_;
  int64_t num_bad_epochs_ = 0;
  int64_t cooldown_counter_ = 0;
  int64_t last_epoch_ = 0;
  std::vector<double> last_lr_;
};

}  // namespace ignis::optim
