// optim::Optimizer: the base of every optimizer. Parameters live in parameter groups, each with
// its own options (learning rate, momentum, ...); per-parameter state (momentum buffers, Adam's
// moments) is created lazily by step(). The update formulas follow PyTorch's single-tensor
// (foreach=False) implementations.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <unordered_map>
#include <utility>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::optim {

/// A serialisable state: named tensors, scalars as 0-d float64/int64 tensors (the same type as
/// nn::StateDict, so checkpoint code can save both alike).
using OptimizerStateDict = std::vector<std::pair<std::string, Tensor>>;

/// Re-evaluates the model and returns the loss (passed to step()).
using LossClosure = std::function<Tensor()>;

/// Declares a chainable option like LibTorch's TORCH_ARG: `opts.momentum(0.9)` sets and returns
/// *this, `opts.momentum()` reads.
#define IGNIS_OPTIM_ARG(T, name)                      \
 public:                                              \
  auto& name(const T& v) {                            \
    name##_ = v;                                      \
    return *this;                                     \
  }                                                   \
  const T& name() const noexcept { return name##_; }  \
  T& name() noexcept { return name##_; }              \
                                                      \
 private:                                             \
  T name##_

/// A named hyperparameter slot of an options object (a double or a bool), used by state_dict and
/// by schedulers that cycle momentum.
struct HParamRef {
  const char* name;
  double* d = nullptr;
  bool* b = nullptr;
  double get() const { return d ? *d : (*b ? 1.0 : 0.0); }
  void set(double v) const {
    if (d) *d = v;
    else *b = v != 0;
  }
};

/// The options of a parameter group. Each optimizer defines its own (SGDOptions, AdamOptions...).
class OptimizerOptions {
 public:
  virtual ~OptimizerOptions() = default;
  virtual std::unique_ptr<OptimizerOptions> clone() const = 0;
  /// The options type name, e.g. "SGDOptions".
  virtual const char* type_name() const = 0;
  /// Every hyperparameter by name ("lr", "momentum", "betas.0", ...), lr first.
  virtual std::vector<HParamRef> hparams() = 0;

  double get_lr() const;
  void set_lr(double lr);
  /// Whether a hyperparameter of this name exists; its value; sets it (throws when absent).
  bool has(const std::string& name) const;
  double get(const std::string& name) const;
  void set(const std::string& name, double value);
};

/// Per-parameter state of an optimizer (SGDParamState, AdamParamState...).
class OptimizerParamState {
 public:
  virtual ~OptimizerParamState() = default;
  /// The step counter, or nullptr for optimizers that keep none (SGD).
  virtual int64_t* step_count() { return nullptr; }
  /// Named tensor slots ("exp_avg", ...); a slot is undefined until the state creates it.
  virtual std::vector<std::pair<const char*, Tensor*>> tensors() = 0;
};

/// A list of parameters with their own options; a group built without options takes the
/// optimizer's defaults.
class ParamGroup {
 public:
  ParamGroup(std::vector<Tensor> params) : params_(std::move(params)) {}  // NOLINT: implicit
  ParamGroup(std::vector<Tensor> params, std::unique_ptr<OptimizerOptions> options)
      : params_(std::move(params)), options_(std::move(options)) {}
  /// Options passed by value (`ParamGroup(ps, SGDOptions(0.1))`).
  template <class O, std::enable_if_t<std::is_base_of_v<OptimizerOptions, O>, int> = 0>
  ParamGroup(std::vector<Tensor> params, const O& options)
      : params_(std::move(params)), options_(options.clone()) {}
  ParamGroup(const ParamGroup& o);
  ParamGroup& operator=(const ParamGroup& o);
  ParamGroup(ParamGroup&&) = default;
  ParamGroup& operator=(ParamGroup&&) = default;

  std::vector<Tensor>& params() { return params_; }
  const std::vector<Tensor>& params() const { return params_; }
  bool has_options() const { return options_ != nullptr; }
  OptimizerOptions& options();
  const OptimizerOptions& options() const;
  void set_options(std::unique_ptr<OptimizerOptions> options) { options_ = std::move(options); }
  double lr() const { return options().get_lr(); }
  void set_lr(double lr) { options().set_lr(lr); }
  /// The learning rate schedulers start from (PyTorch's group['initial_lr']), set by the first
  /// scheduler attached to the optimizer.
  std::optional<double> initial_lr;

 private:
  std::vector<Tensor> params_;
  std::unique_ptr<OptimizerOptions> options_;
};
using OptimizerParamGroup = ParamGroup;

class Optimizer {
 public:
  virtual ~Optimizer() = default;
  Optimizer(const Optimizer&) = delete;
  Optimizer& operator=(const Optimizer&) = delete;

  /// One update of every parameter that has a gradient. With a closure, calls it first (with
  /// grad mode on) and returns its loss; otherwise returns an undefined tensor.
  virtual Tensor step(const LossClosure& closure = nullptr) = 0;
  /// Clears the gradients: resets them to undefined, or zeroes them in place.
  void zero_grad(bool set_to_none = true);

  /// Appends a group (validated like the constructor's; options default to the defaults).
  void add_param_group(ParamGroup group);
  std::vector<ParamGroup>& param_groups() { return groups_; }
  const std::vector<ParamGroup>& param_groups() const { return groups_; }
  /// Every parameter of every group, in order (their position is the index in state_dict).
  std::vector<Tensor> parameters() const;
  /// The number of parameters.
  size_t size() const;
  const OptimizerOptions& defaults() const { return *defaults_; }
  OptimizerOptions& defaults() { return *defaults_; }
  /// The optimizer's name ("SGD"), used in error messages.
  const std::string& name() const { return name_; }

  /// The state of one parameter (nullptr before its first update).
  OptimizerParamState* state(const Tensor& param);
  const OptimizerParamState* state(const Tensor& param) const;
  template <class S>
  S* state_as(const Tensor& param) {
    return dynamic_cast<S*>(state(param));
  }

  /// A snapshot of the state, as named tensors (copies, so later steps don't change it):
  ///   state.<i>.<slot>             per-parameter tensors (i counts parameters over all groups)
  ///   state.<i>.step               0-d int64 step counter (optimizers that keep one)
  ///   param_groups.<g>.params      1-D int64 parameter indices of group g
  ///   param_groups.<g>.<hparam>    0-d float64 hyperparameters (bools as 0/1), initial_lr if set
  OptimizerStateDict state_dict() const;
  /// Restores a state_dict() of an optimizer of the same type over parameters of the same
  /// shapes: hyperparameters and state. Checks everything before changing anything; unknown,
  /// missing or mis-shaped entries throw naming them.
  void load_state_dict(const OptimizerStateDict& state_dict);
  /// Throws what load_state_dict would throw for `state_dict`, changing nothing.
  void check_state_dict(const OptimizerStateDict& state_dict) const;

 protected:
  Optimizer(std::string name, std::unique_ptr<OptimizerOptions> defaults);
  /// Throws (naming the optimizer) when options are invalid or of another optimizer's type.
  virtual void validate_options(const OptimizerOptions& options) const = 0;
  /// A fresh, empty per-parameter state.
  virtual std::unique_ptr<OptimizerParamState> make_state() const = 0;
  /// The state of `param`, created empty by make_state() when absent.
  OptimizerParamState& state_or_create(const Tensor& param);
  /// Calls the closure (if any) with grad mode on.
  static Tensor call_closure(const LossClosure& closure);

  std::string name_;
  std::unique_ptr<OptimizerOptions> defaults_;
  std::vector<ParamGroup> groups_;
  std::unordered_map<const TensorImpl*, std::unique_ptr<OptimizerParamState>> state_;

 private:
  struct LoadPlan;
  /// Checks every entry of `state_dict` and fills `plan` with what loading it changes.
  void plan_load(const OptimizerStateDict& state_dict, LoadPlan& plan) const;
};

}  // namespace ignis::optim
