// Epoch-driven learning-rate schedulers: PyTorch's chainable get_lr() formulas (used by step())
// and closed forms (used by step(epoch)).
#include "ignis/optim/schedulers.h"

#include <algorithm>
#include <cmath>
#include <numbers>

#include "ignis/ops.h"
#include "optim/state_util.h"

namespace ignis::optim {

namespace {

constexpr double kPi = std::numbers::pi;

// Python's a % b (the sign of b).
int64_t py_mod(int64_t a, int64_t b) {
  int64_t r = a % b;
  return (r != 0 && ((r < 0) != (b < 0))) ? r + b : r;
}

// Python's a // b.
int64_t py_floordiv(int64_t a, int64_t b) {
  int64_t q = a / b;
  return (a % b != 0 && ((a < 0) != (b < 0))) ? q - 1 : q;
}

// Checks that sd has exactly `keys` (plus keys under `nested_prefix`, when given).
void check_keys(const std::string& op, const OptimizerStateDict& sd,
                const std::vector<std::string>& keys, const std::string& nested_prefix = "") {
  std::vector<std::string> problems;
  for (const std::string& k : keys) {
    if (!find_key(sd, k)) problems.push_back("missing key '" + k + "'");
  }
  for (const auto& [k, v] : sd) {
    bool known = std::find(keys.begin(), keys.end(), k) != keys.end() ||
                 (!nested_prefix.empty() && k.rfind(nested_prefix, 0) == 0);
    if (!known) problems.push_back("unexpected key '" + k + "'");
    else if (!v.defined()) problems.push_back("entry '" + k + "' is an undefined tensor");
  }
  if (!problems.empty()) {
    std::string msg;
    for (const std::string& s : problems) msg += (msg.empty() ? "" : "; ") + s;
    detail::throw_error(op, ": ", msg);
  }
}

}  // namespace

// ---- LRScheduler

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, int64_t last_epoch)
    : name_(std::move(name)), optimizer_(&optimizer), last_epoch_(last_epoch) {
  auto& groups = optimizer.param_groups();
  for (size_t i = 0; i < groups.size(); ++i) {
    if (last_epoch == -1) {
      if (!groups[i].initial_lr) groups[i].initial_lr = groups[i].lr();
    } else {
      IGNIS_CHECK(groups[i].initial_lr, name_, ": initial_lr is not set in param_groups[", i,
                  "] when resuming with last_epoch=", last_epoch, " (create the scheduler with "
                  "last_epoch=-1, or load its state_dict)");
    }
    base_lrs_.push_back(*groups[i].initial_lr);
  }
}

LRScheduler::LRScheduler(std::string name, Optimizer& optimizer, Composite)
    : name_(std::move(name)), optimizer_(&optimizer) {}

void LRScheduler::initial_step() {
  step_count_ = 0;
  step();
}

std::vector<double> LRScheduler::group_lrs() const {
  std::vector<double> out;
  for (const ParamGroup& g : optimizer_->param_groups()) out.push_back(g.lr());
  return out;
}

void LRScheduler::apply(const std::vector<double>& lrs) {
  auto& groups = optimizer_->param_groups();
  for (size_t i = 0; i < std::min(lrs.size(), groups.size()); ++i) groups[i].set_lr(lrs[i]);
  last_lr_ = group_lrs();
}

void LRScheduler::step() {
  ++step_count_;
  ++last_epoch_;
  apply(get_lr());
}

void LRScheduler::step(int64_t epoch) {
  ++step_count_;
  last_epoch_ = epoch;
  std::optional<std::vector<double>> closed = closed_form_lr();
  apply(closed ? *closed : get_lr());
}

OptimizerStateDict LRScheduler::state_dict() const {
  return {{"last_epoch", scalar_tensor(last_epoch_, kInt64)},
          {"step_count", scalar_tensor(step_count_, kInt64)},
          {"base_lrs", vec_tensor(base_lrs_)},
          {"last_lr", vec_tensor(last_lr_)}};
}

void LRScheduler::load_state_dict(const OptimizerStateDict& sd) {
  const std::string op = name_ + ".load_state_dict";
  check_keys(op, sd, {"last_epoch", "step_count", "base_lrs", "last_lr"});
  std::vector<double> base = tensor_vec(*find_key(sd, "base_lrs"));
  std::vector<double> last = tensor_vec(*find_key(sd, "last_lr"));
  IGNIS_CHECK(base.size() == base_lrs_.size(), op, ": the state dict has ", base.size(),
              " base_lrs but the scheduler has ", base_lrs_.size(), " parameter groups");
  const double last_epoch = read_scalar(op, sd, "last_epoch");
  const double step_count = read_scalar(op, sd, "step_count");
  last_epoch_ = static_cast<int64_t>(last_epoch);
  step_count_ = static_cast<int64_t>(step_count);
  base_lrs_ = std::move(base);
  last_lr_ = std::move(last);
}

// ---- StepLR

StepLR::StepLR(Optimizer& optimizer, int64_t step_size, double gamma, int64_t last_epoch)
    : LRScheduler("StepLR", optimizer, last_epoch), step_size_(step_size), gamma_(gamma) {
  IGNIS_CHECK(step_size > 0, "StepLR: step_size must be positive, got ", step_size);
  initial_step();
}

std::vector<double> StepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0 || py_mod(last_epoch_, step_size_) != 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::optional<std::vector<double>> StepLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) {
    lrs.push_back(b * std::pow(gamma_, static_cast<double>(py_floordiv(last_epoch_, step_size_))));
  }
  return lrs;
}

// ---- MultiStepLR

MultiStepLR::MultiStepLR(Optimizer& optimizer, std::vector<int64_t> milestones, double gamma,
                         int64_t last_epoch)
    : LRScheduler("MultiStepLR", optimizer, last_epoch),
      milestones_(std::move(milestones)), gamma_(gamma) {
  std::sort(milestones_.begin(), milestones_.end());
  initial_step();
}

std::vector<double> MultiStepLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  auto count = std::count(milestones_.begin(), milestones_.end(), last_epoch_);
  if (count == 0) return lrs;
  for (double& lr : lrs) lr *= std::pow(gamma_, static_cast<double>(count));
  return lrs;
}

std::optional<std::vector<double>> MultiStepLR::closed_form_lr() const {
  auto passed = std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) -
                milestones_.begin();
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(passed)));
  return lrs;
}

// ---- ConstantLR

ConstantLR::ConstantLR(Optimizer& optimizer, double factor, int64_t total_iters,
                       int64_t last_epoch)
    : LRScheduler("ConstantLR", optimizer, last_epoch), factor_(factor),
      total_iters_(total_iters) {
  IGNIS_CHECK(factor >= 0 && factor <= 1, "ConstantLR: constant multiplicative factor expected "
              "to be between 0 and 1, got ", factor);
  initial_step();
}

std::vector<double> ConstantLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= factor_;
  } else if (last_epoch_ == total_iters_) {
    for (double& lr : lrs) lr *= 1.0 / factor_;
  }
  return lrs;
}

std::optional<std::vector<double>> ConstantLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double after = last_epoch_ >= total_iters_ ? 1.0 : 0.0;
  for (double b : base_lrs_) lrs.push_back(b * (factor_ + after * (1 - factor_)));
  return lrs;
}

// ---- LinearLR

LinearLR::LinearLR(Optimizer& optimizer, double start_factor, double end_factor,
                   int64_t total_iters, int64_t last_epoch)
    : LRScheduler("LinearLR", optimizer, last_epoch), start_factor_(start_factor),
      end_factor_(end_factor), total_iters_(total_iters) {
  IGNIS_CHECK(start_factor > 0 && start_factor <= 1, "LinearLR: starting multiplicative factor "
              "expected to be greater than 0 and less or equal to 1, got ", start_factor);
  IGNIS_CHECK(end_factor >= 0 && end_factor <= 1, "LinearLR: ending multiplicative factor "
              "expected to be between 0 and 1, got ", end_factor);
  IGNIS_CHECK(total_iters >= 0, "LinearLR: total_iters must be >= 0, got ", total_iters);
  initial_step();
}

std::vector<double> LinearLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) {
    for (double& lr : lrs) lr *= start_factor_;
  } else if (last_epoch_ <= total_iters_) {
    const double d = end_factor_ - start_factor_;
    const double f = 1.0 + d / (static_cast<double>(total_iters_) * start_factor_ +
                                static_cast<double>(last_epoch_ - 1) * d);
    for (double& lr : lrs) lr *= f;
  }
  return lrs;
}

std::optional<std::vector<double>> LinearLR::closed_form_lr() const {
  std::vector<double> lrs;
  const double t = static_cast<double>(std::min(total_iters_, last_epoch_));
  for (double b : base_lrs_) {
    lrs.push_back(b * (start_factor_ + (end_factor_ - start_factor_) * t /
                                           static_cast<double>(total_iters_)));
  }
  return lrs;
}

// ---- ExponentialLR

ExponentialLR::ExponentialLR(Optimizer& optimizer, double gamma, int64_t last_epoch)
    : LRScheduler("ExponentialLR", optimizer, last_epoch), gamma_(gamma) {
  initial_step();
}

std::vector<double> ExponentialLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  if (last_epoch_ == 0) return lrs;
  for (double& lr : lrs) lr *= gamma_;
  return lrs;
}

std::optional<std::vector<double>> ExponentialLR::closed_form_lr() const {
  std::vector<double> lrs;
  for (double b : base_lrs_) lrs.push_back(b * std::pow(gamma_, static_cast<double>(last_epoch_)));
  return lrs;
}

// ---- CosineAnnealingLR

CosineAnnealingLR::CosineAnnealingLR(Optimizer& optimizer, int64_t T_max, double eta_min,
                                     int64_t last_epoch)
    : LRScheduler("CosineAnnealingLR", optimizer, last_epoch), T_max_(T_max), eta_min_(eta_min) {
  IGNIS_CHECK(T_max > 0, "CosineAnnealingLR: T_max must be positive, got ", T_max);
  initial_step();
}

std::vector<double> CosineAnnealingLR::get_lr() {
  std::vector<double> lrs = group_lrs();
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  if (last_epoch_ == 0) return lrs;
  if (step_count_ == 1 && last_epoch_ > 0) {  // resumed at last_epoch: the closed form
    for (size_t i = 0; i < lrs.size(); ++i) {
      lrs[i] = eta_min_ + (base_lrs_[i] - eta_min_) * (1 + std::cos(e * kPi / T)) / 2;
    }
  } else if (py_mod(last_epoch_ - 1 - T_max_, 2 * T_max_) == 0) {  // the cosine's minimum
    for (size_t i = 0; i < lrs.size(); ++i) {
      lrs[i] = lrs[i] + (base_lrs_[i] - eta_min_) * (1 - std::cos(kPi / T)) / 2;
    }
  } else {
    for (double& lr : lrs) {
      lr = (1 + std::cos(kPi * e / T)) / (1 + std::cos(kPi * (e - 1) / T)) * (lr - eta_min_) +
           eta_min_;
    }
  }
  return lrs;
}

std::optional<std::vector<double>> CosineAnnealingLR::closed_form_lr() const {
  const double e = static_cast<double>(last_epoch_), T = static_cast<double>(T_max_);
  std::vector<double> lrs;
  for (double b : base_lrs_) {
    lrs.push_back(eta_min_ + (b - eta_min_) * (1 + std::cos(kPi * e / T)) / 2);
  }
  return lrs;
}

// ---- LambdaLR

LambdaLR::LambdaLR(Optimizer& optimizer, Lambda lr_lambda, int64_t last_epoch)
    : LambdaLR(optimizer,
               std::vector<Lambda>(optimizer.param_groups().size(), std::move(lr_lambda)),
               last_epoch) {}

LambdaLR::LambdaLR(Optimizer& optimizer, std::vector<Lambda> lr_lambdas, int64_t last_epoch)
    : LRScheduler("LambdaLR", optimizer, last_epoch), lambdas_(std::move(lr_lambdas)) {
  IGNIS_CHECK(lambdas_.size() == optimizer.param_groups().size(), "LambdaLR: expected ",
              optimizer.param_groups().size(), " lr_lambdas (one per parameter group), but got ",
              lambdas_.size());
  for (size_t i = 0; i < lambdas_.size(); ++i) {
    IGNIS_CHECK(lambdas_[i], "LambdaLR: lr_lambda ", i, " is empty");
  }
  initial_step();
}

std::vector<double> LambdaLR::get_lr() {
  std::vector<double> lrs;
  for (size_t i = 0; i < base_lrs_.size(); ++i) {
    lrs.push_back(base_lrs_[i] * lambdas_[i](last_epoch_));
  }
  return lrs;
}

}  // namespace ignis::optim
