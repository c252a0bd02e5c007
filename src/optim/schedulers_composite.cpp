// OneCycleLR, ChainedScheduler, SequentialLR and ReduceLROnPlateau (PyTorch's formulas).
#include <algorithm>
#include <cmath>
#include <limits>
#include <numbers>

#include "ignis/ops.h"
#include "ignis/optim/schedulers.h"
#include "optim/state_util.h"

namespace ignis::optim {

namespace {

// Refuses keys outside `keys` and the "schedulers." prefix.
void check_unexpected(const std::string& op, const OptimizerStateDict& sd,
                      const std::vector<std::string>& keys, bool nested) {
  for (const auto& [k, v] : sd) {
    bool known = std::find(keys.begin(), keys.end(), k) != keys.end() ||
                 (nested && k.rfind("schedulers.", 0) == 0);
    IGNIS_CHECK(known, op, ": unexpected key '", k, "'");
  }
}

// Nested state dicts of sub-schedulers as "schedulers.<k>.<key>".
void save_nested(OptimizerStateDict& out, const std::vector<std::shared_ptr<LRScheduler>>& ss) {
  for (size_t k = 0; k < ss.size(); ++k) {
    const std::string prefix = "schedulers." + std::to_string(k) + ".";
    for (auto& [key, v] : ss[k]->state_dict()) out.emplace_back(prefix + key, v);
  }
}

void load_nested(const std::string& op, const OptimizerStateDict& sd,
                 const std::vector<std::shared_ptr<LRScheduler>>& ss) {
  for (const auto& [k, v] : sd) {
    if (k.rfind("schedulers.", 0) != 0) continue;
    size_t dot = k.find('.', 11);
    std::string idx = k.substr(11, dot == std::string::npos ? std::string::npos : dot - 11);
    bool ok = dot != std::string::npos && !idx.empty() &&
              std::all_of(idx.begin(), idx.end(), [](char c) { return c >= '0' && c <= '9'; }) &&
              std::stoull(idx) < ss.size();
    IGNIS_CHECK(ok, op, ": unexpected key '", k, "' (there are ", ss.size(), " schedulers)");
  }
  for (size_t k = 0; k < ss.size(); ++k) {
    const std::string prefix = "schedulers." + std::to_string(k) + ".";
    OptimizerStateDict sub;
    for (const auto& [key, v] : sd) {
      if (key.rfind(prefix, 0) == 0) sub.emplace_back(key.substr(prefix.size()), v);
    }
    ss[k]->load_state_dict(sub);
  }
}

Optimizer& first_optimizer(const char* name, const std::vector<std::shared_ptr<LRScheduler>>& ss) {
  IGNIS_CHECK(!ss.empty(), name, ": expects at least one scheduler, but got none");
  for (size_t k = 0; k < ss.size(); ++k) {
    IGNIS_CHECK(ss[k], name, ": scheduler ", k, " is null");
  }
  return ss[0]->optimizer();
}

}  // namespace

// ---- OneCycleLR

OneCycleLR::OneCycleLR(Optimizer& optimizer, double max_lr, int64_t total_steps,
                       OneCycleLROptions options, int64_t last_epoch)
    : OneCycleLR(optimizer, std::vector<double>(optimizer.param_groups().size(), max_lr),
                 total_steps, std::move(options), last_epoch) {}

OneCycleLR::OneCycleLR(Optimizer& optimizer, std::vector<double> max_lrs, int64_t total_steps,
                       OneCycleLROptions options, int64_t last_epoch)
    : LRScheduler("OneCycleLR", optimizer, Composite{}), total_steps_(total_steps),
      o_(std::move(options)) {
  IGNIS_CHECK(total_steps > 0, "OneCycleLR: expected a positive total_steps, but got ",
              total_steps);
  IGNIS_CHECK(o_.pct_start() >= 0 && o_.pct_start() <= 1, "OneCycleLR: expected pct_start "
              "between 0 and 1, but got ", o_.pct_start());
  IGNIS_CHECK(o_.anneal_strategy() == "cos" || o_.anneal_strategy() == "linear",
              "OneCycleLR: anneal_strategy must be one of 'cos' or 'linear', instead got '",
              o_.anneal_strategy(), "'");
  auto& groups = optimizer.param_groups();
  IGNIS_CHECK(max_lrs.size() == groups.size(), "OneCycleLR: expected ", groups.size(),
              " values for max_lr (one per parameter group), got ", max_lrs.size());
  const double total = static_cast<double>(total_steps);
  const double pct = o_.pct_start();
  if (o_.three_phase()) {
    phases_ = {{pct * total - 1, 0, 1, 1, 0},
               {2 * pct * total - 2, 1, 0, 0, 1},
               {total - 1, 0, 2, 1, 1}};
  } else {
    phases_ = {{pct * total - 1, 0, 1, 1, 0}, {total - 1, 1, 2, 0, 1}};
  }
  if (o_.cycle_momentum()) {
    if (optimizer.defaults().has("momentum")) momentum_key_ = "momentum";
    else if (optimizer.defaults().has("betas.0")) momentum_key_ = "betas.0";
    IGNIS_CHECK(!momentum_key_.empty(), "OneCycleLR: optimizer ", optimizer.name(),
                " must support momentum or beta1 with the cycle_momentum option enabled");
  }
  for (size_t i = 0; i < groups.size(); ++i) {
    const double initial = max_lrs[i] / o_.div_factor();
    group_lrs_.push_back({initial, max_lrs[i], initial / o_.final_div_factor()});
    if (last_epoch == -1) {
      groups[i].initial_lr = initial;
      if (!momentum_key_.empty()) groups[i].options().set(momentum_key_, o_.max_momentum());
    } else {
      IGNIS_CHECK(groups[i].initial_lr, "OneCycleLR: initial_lr is not set in param_groups[", i,
                  "] when resuming with last_epoch=", last_epoch);
    }
    base_lrs_.push_back(*groups[i].initial_lr);
  }
  last_epoch_ = last_epoch;
  initial_step();
}

double OneCycleLR::anneal(double start, double end, double pct) const {
  if (o_.anneal_strategy() == "linear") return (end - start) * pct + start;
  const double cos_out = std::cos(std::numbers::pi * pct) + 1;
  return end + (start - end) / 2.0 * cos_out;
}

std::vector<double> OneCycleLR::get_lr() {
  const int64_t step_num = last_epoch_;
  IGNIS_CHECK(step_num <= total_steps_, "OneCycleLR: tried to step ", step_num,
              " times; the specified number of total steps is ", total_steps_);
  const double s = static_cast<double>(step_num);
  const double momenta[2] = {o_.base_momentum(), o_.max_momentum()};
  auto& groups = optimizer_->param_groups();
  std::vector<double> lrs;
  for (size_t i = 0; i < group_lrs_.size() && i < groups.size(); ++i) {
    double start_step = 0, lr = 0;
    for (size_t k = 0; k < phases_.size(); ++k) {
      const Phase& ph = phases_[k];
      if (s <= ph.end_step || k + 1 == phases_.size()) {
        IGNIS_CHECK(ph.end_step != start_step, "OneCycleLR: phase ", k, " has no steps "
                    "(total_steps=", total_steps_, ", pct_start=", o_.pct_start(),
                    "); use more total_steps");
        const double pct = (s - start_step) / (ph.end_step - start_step);
        lr = anneal(group_lrs_[i][ph.start_lr], group_lrs_[i][ph.end_lr], pct);
        if (!momentum_key_.empty()) {
          groups[i].options().set(momentum_key_, anneal(momenta[ph.start_m], momenta[ph.end_m],
                                                         pct));
        }
        break;
      }
      start_step = ph.end_step;
    }
    lrs.push_back(lr);
  }
  return lrs;
}

// ---- ChainedScheduler

ChainedScheduler::ChainedScheduler(std::vector<std::shared_ptr<LRScheduler>> schedulers)
    : LRScheduler("ChainedScheduler", first_optimizer("ChainedScheduler", schedulers),
                  Composite{}),
      schedulers_(std::move(schedulers)) {
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    IGNIS_CHECK(&schedulers_[k]->optimizer() == optimizer_, "ChainedScheduler: expects all "
                "schedulers to belong to the same optimizer, but scheduler ", k, " (",
                schedulers_[k]->name(), ") has a different one");
  }
  last_lr_ = group_lrs();
}

void ChainedScheduler::step() {
  for (auto& s : schedulers_) s->step();
  last_lr_ = group_lrs();
}

void ChainedScheduler::step(int64_t epoch) {
  IGNIS_FAIL("ChainedScheduler: step(epoch) is not supported; call step()");
}

OptimizerStateDict ChainedScheduler::state_dict() const {
  OptimizerStateDict out{{"last_lr", vec_tensor(last_lr_)}};
  save_nested(out, schedulers_);
  return out;
}

void ChainedScheduler::load_state_dict(const OptimizerStateDict& sd) {
  const std::string op = "ChainedScheduler.load_state_dict";
  check_unexpected(op, sd, {"last_lr"}, true);
  std::vector<double> last = read_vec(op, sd, "last_lr");
  load_nested(op, sd, schedulers_);
  last_lr_ = std::move(last);
}

// ---- SequentialLR

SequentialLR::SequentialLR(Optimizer& optimizer,
                           std::vector<std::shared_ptr<LRScheduler>> schedulers,
                           std::vector<int64_t> milestones, int64_t last_epoch)
    : LRScheduler("SequentialLR", optimizer, Composite{}), schedulers_(std::move(schedulers)),
      milestones_(std::move(milestones)) {
  first_optimizer("SequentialLR", schedulers_);
  for (size_t k = 0; k < schedulers_.size(); ++k) {
    IGNIS_CHECK(&schedulers_[k]->optimizer() == &optimizer, "SequentialLR: expects all "
                "schedulers to belong to the same optimizer, but scheduler ", k, " (",
                schedulers_[k]->name(), ") has a different one");
  }
  IGNIS_CHECK(milestones_.size() + 1 == schedulers_.size(), "SequentialLR: expects the number "
              "of schedulers to be one more than the number of milestones, but got ",
              schedulers_.size(), " schedulers and ", milestones_.size(), " milestones");
  IGNIS_CHECK(std::is_sorted(milestones_.begin(), milestones_.end()),
              "SequentialLR: milestones must be in increasing order");
  last_epoch_ = last_epoch + 1;
  // Undo the initial steps of the sub-schedulers, then start the first one afresh.
  for (ParamGroup& g : optimizer.param_groups()) {
    IGNIS_CHECK(g.initial_lr, "SequentialLR: a parameter group has no initial_lr");
    g.set_lr(*g.initial_lr);
  }
  for (auto& s : schedulers_) s->last_epoch_ -= 1;
  schedulers_[0]->initial_step();
  last_lr_ = schedulers_[0]->get_last_lr();
}

void SequentialLR::step() {
  ++last_epoch_;
  const size_t idx = static_cast<size_t>(
      std::upper_bound(milestones_.begin(), milestones_.end(), last_epoch_) - milestones_.begin());
  LRScheduler& s = *schedulers_[idx];
  if (idx > 0 && milestones_[idx - 1] == last_epoch_) {
    s.step(0);
  } else {
    s.step();
  }
  last_lr_ = s.get_last_lr();
}

void SequentialLR::step(int64_t epoch) {
  IGNIS_FAIL("SequentialLR: step(epoch) is not supported; call step()");
}

OptimizerStateDict SequentialLR::state_dict() const {
  OptimizerStateDict out{{"last_epoch", scalar_tensor(last_epoch_, kInt64)},
                         {"last_lr", vec_tensor(last_lr_)}};
  save_nested(out, schedulers_);
  return out;
}

void SequentialLR::load_state_dict(const OptimizerStateDict& sd) {
  const std::string op = "SequentialLR.load_state_dict";
  check_unexpected(op, sd, {"last_epoch", "last_lr"}, true);
  const int64_t last_epoch = static_cast<int64_t>(read_scalar(op, sd, "last_epoch"));
  std::vector<double> last = read_vec(op, sd, "last_lr");
  load_nested(op, sd, schedulers_);
  last_epoch_ = last_epoch;
  last_lr_ = std::move(last);
}

// ---- ReduceLROnPlateau

ReduceLROnPlateau::ReduceLROnPlateau(Optimizer& optimizer, ReduceLROnPlateauOptions options)
    : optimizer_(&optimizer), o_(std::move(options)) {
  IGNIS_CHECK(o_.factor() < 1.0, "ReduceLROnPlateau: factor should be < 1.0, got ", o_.factor());
  IGNIS_CHECK(o_.mode() == "min" || o_.mode() == "max", "ReduceLROnPlateau: mode '", o_.mode(),
              "' is unknown (expected 'min' or 'max')");
  IGNIS_CHECK(o_.threshold_mode() == "rel" || o_.threshold_mode() == "abs",
              "ReduceLROnPlateau: threshold mode '", o_.threshold_mode(),
              "' is unknown (expected 'rel' or 'abs')");
  const size_t n = optimizer.param_groups().size();
  IGNIS_CHECK(o_.min_lr().size() == 1 || o_.min_lr().size() == n, "ReduceLROnPlateau: expected ",
              n, " min_lrs (one per parameter group), got ", o_.min_lr().size());
  min_lrs_ = o_.min_lr();
  mode_min_ = o_.mode() == "min";
  rel_ = o_.threshold_mode() == "rel";
  best_ = mode_min_ ? std::numeric_limits<double>::infinity()
                    : -std::numeric_limits<double>::infinity();
  for (const ParamGroup& g : optimizer.param_groups()) last_lr_.push_back(g.lr());
}

bool ReduceLROnPlateau::is_better(double a, double best) const {
  if (mode_min_ && rel_) return a < best * (1.0 - o_.threshold());
  if (mode_min_) return a < best - o_.threshold();
  if (rel_) return a > best * (o_.threshold() + 1.0);
  return a > best + o_.threshold();
}

void ReduceLROnPlateau::step(double metric) {
  last_epoch_ += 1;
  if (is_better(metric, best_)) {
    best_ = metric;
    num_bad_epochs_ = 0;
  } else {
    num_bad_epochs_ += 1;
  }
  if (in_cooldown()) {
    cooldown_counter_ -= 1;
    num_bad_epochs_ = 0;  // bad epochs in cooldown do not count
  }
  auto& groups = optimizer_->param_groups();
  if (num_bad_epochs_ > o_.patience()) {
    for (size_t i = 0; i < groups.size(); ++i) {
      const double old_lr = groups[i].lr();
      const double min_lr = min_lrs_.size() == 1 ? min_lrs_[0] : min_lrs_.at(i);
      const double new_lr = std::max(old_lr * o_.factor(), min_lr);
      if (old_lr - new_lr > o_.eps()) groups[i].set_lr(new_lr);
    }
    cooldown_counter_ = o_.cooldown();
    num_bad_epochs_ = 0;
  }
  last_lr_.clear();
  for (const ParamGroup& g : groups) last_lr_.push_back(g.lr());
}

OptimizerStateDict ReduceLROnPlateau::state_dict() const {
  return {{"last_epoch", scalar_tensor(last_epoch_, kInt64)},
          {"best", scalar_tensor(best_, kFloat64)},
          {"num_bad_epochs", scalar_tensor(num_bad_epochs_, kInt64)},
          {"cooldown_counter", scalar_tensor(cooldown_counter_, kInt64)},
          {"last_lr", vec_tensor(last_lr_)}};
}

void ReduceLROnPlateau::load_state_dict(const OptimizerStateDict& sd) {
  const std::string op = "ReduceLROnPlateau.load_state_dict";
  check_unexpected(op, sd, {"last_epoch", "best", "num_bad_epochs", "cooldown_counter", "last_lr"},
                   false);
  const double last_epoch = read_scalar(op, sd, "last_epoch");
  const double best = read_scalar(op, sd, "best");
  const double bad = read_scalar(op, sd, "num_bad_epochs");
  const double cooldown = read_scalar(op, sd, "cooldown_counter");
  std::vector<double> last = read_vec(op, sd, "last_lr");
  last_epoch_ = static_cast<int64_t>(last_epoch);
  best_ = best;
  num_bad_epochs_ = static_cast<int64_t>(bad);
  cooldown_counter_ = static_cast<int64_t>(cooldown);
  last_lr_ = std::move(last);
}

}  // namespace ignis::optim
