// The autograd API: grad mode, backward/grad, custom functions, anomaly mode, gradcheck.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <tuple>
#include <type_traits>
#include <typeinfo>
#include <vector>

#include "ignis/autograd_node.h"
#include "ignis/tensor.h"

namespace ignis {

/// Whether ops record autograd history on this thread.
bool is_grad_enabled();
void set_grad_enabled(bool enabled);

/// Turns off graph recording for its scope (torch.no_grad()).
class NoGradGuard {
 public:
  NoGradGuard() : prev_(is_grad_enabled()) { set_grad_enabled(false); }
  ~NoGradGuard() { set_grad_enabled(prev_); }
  NoGradGuard(const NoGradGuard&) = delete;
  NoGradGuard& operator=(const NoGradGuard&) = delete;

 private:
  bool prev_;
};

/// Turns graph recording on (or to `enabled`) for its scope.
class AutoGradMode {
 public:
  explicit AutoGradMode(bool enabled) : prev_(is_grad_enabled()) { set_grad_enabled(enabled); }
  ~AutoGradMode() { set_grad_enabled(prev_); }
  AutoGradMode(const AutoGradMode&) = delete;
  AutoGradMode& operator=(const AutoGradMode&) = delete;

 private:
  bool prev_;
};

namespace autograd {

using variable_list = std::vector<Tensor>;

/// Runs backward from `tensors`, accumulating into the .grad() of the leaves.
void backward(const variable_list& tensors, const variable_list& grad_tensors = {},
              std::optional<bool> retain_graph = std::nullopt, bool create_graph = false);

/// Returns d(outputs)/d(inputs) without touching .grad(). With create_graph the results have
/// history, so they can be differentiated again.
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs = {},
                   std::optional<bool> retain_graph = std::nullopt, bool create_graph = false,
                   bool allow_unused = false);

/// autograd::grad's options by name: `grad({y}, {x}, {}, {.create_graph = true})`.
struct GradOptions {
  /// Keep the graph for another backward (default: create_graph).
  std::optional<bool> retain_graph = std::nullopt;
  /// Give the results history, so they can be differentiated again.
  bool create_graph = false;
  /// An input the outputs do not depend on gets an undefined gradient instead of an error.
  bool allow_unused = false;
};
variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, const GradOptions& options);

/// Queues `fn` to run on this thread once the running backward has finished its graph (call it
/// from a hook during backward), like PyTorch's Variable._execution_engine.queue_callback.
/// Callbacks run in order and may queue more; none run if the backward throws.
void queue_callback(std::function<void()> fn);

/// Anomaly mode: backward checks every gradient it computes and throws, naming the forward op,
/// when one holds NaN or Inf.
bool is_anomaly_enabled();
void set_anomaly_enabled(bool enabled);
class DetectAnomalyGuard {
 public:
  DetectAnomalyGuard() : prev_(is_anomaly_enabled()) { set_anomaly_enabled(true); }
  ~DetectAnomalyGuard() { set_anomaly_enabled(prev_); }
  DetectAnomalyGuard(const DetectAnomalyGuard&) = delete;
  DetectAnomalyGuard& operator=(const DetectAnomalyGuard&) = delete;

 private:
  bool prev_;
};

/// The context of a custom Function: tensors saved for backward (checked against in-place
/// modification), plus any other values in `saved_data`.
class AutogradContext {
 public:
  void save_for_backward(const variable_list& tensors);
  variable_list get_saved_variables() const;
  void mark_non_differentiable(const variable_list& outputs);
  /// needs_input_grad(i): whether the i-th tensor argument of forward needs a gradient.
  bool needs_input_grad(size_t i) const;
  std::vector<std::pair<std::string, Scalar>> saved_data;
  Scalar saved(const std::string& key) const;
  void save(const std::string& key, Scalar v) { saved_data.emplace_back(key, v); }

 private:
  friend struct CustomFunctionAccess;
  variable_list to_save_;                     // what forward saved, until the node exists
  std::vector<std::shared_ptr<void>> saved_;  // SavedVariables (private type)
  std::vector<bool> needs_input_grad_;
  std::vector<const TensorImpl*> non_differentiable_;
  std::weak_ptr<Node> node_;
};

namespace detail {
/// Connects the outputs of a custom function's forward to a node that calls `backward`.
void record_custom(const char* name, const std::shared_ptr<AutogradContext>& ctx,
                   const variable_list& inputs, variable_list& outputs,
                   std::function<variable_list(AutogradContext*, variable_list)> backward);
std::vector<bool> needs_grad_flags(const variable_list& inputs);
/// Fills ctx's needs_input_grad before forward runs.
void init_context(AutogradContext& ctx, const variable_list& inputs);
template <class T>
void collect_tensors(variable_list& out, const T& arg) {
  if constexpr (std::is_same_v<std::decay_t<T>, Tensor>) out.push_back(arg);
}
}  // namespace detail

/// A custom differentiable function, as torch::autograd::Function:
///   struct MultiplyGate : Function<MultiplyGate> {
///     static Tensor forward(AutogradContext* ctx, Tensor x, Tensor y);
///     static variable_list backward(AutogradContext* ctx, variable_list grad_outputs);
///   };
///   Tensor z = MultiplyGate::apply(x, y);
/// forward runs without recording; backward gets one gradient per output (zeros where none
/// flowed) and returns one per tensor argument of forward (an undefined Tensor for none). It may
/// use any differentiable ignis op, so custom functions support double backward. The node is
/// named after the struct: "MultiplyGateBackward".
template <class Derived>
struct Function {
  template <class... Args>
  static auto apply(Args&&... args) {
    auto ctx = std::make_shared<AutogradContext>();
    variable_list inputs;
    (detail::collect_tensors(inputs, args), ...);
    detail::init_context(*ctx, inputs);
    using Out = decltype(Derived::forward(ctx.get(), std::forward<Args>(args)...));
    variable_list outputs;
    Out result;
    {
      NoGradGuard no_grad;
      result = Derived::forward(ctx.get(), std::forward<Args>(args)...);
    }
    if constexpr (std::is_same_v<Out, Tensor>) {
      outputs.push_back(result);
    } else {
      outputs = result;
    }
    detail::record_custom(
        typeid(Derived).name(), ctx, inputs, outputs,
        [](AutogradContext* c, variable_list g) { return Derived::backward(c, std::move(g)); });
    if constexpr (std::is_same_v<Out, Tensor>) {
      return outputs[0];
    } else {
      return outputs;
    }
  }
};

/// Options of gradcheck / gradgradcheck (PyTorch's defaults).
struct GradcheckOptions {
  double eps = 1e-6;
  double atol = 1e-5;
  double rtol = 1e-3;
  /// Throw an ignis::Error describing the first mismatch instead of returning false.
  bool raise_exception = true;
};

/// Compares the analytical Jacobian of fn (by backward) with central finite differences, in
/// float64, for every input that requires grad.
bool gradcheck(const std::function<variable_list(const variable_list&)>& fn,
               const variable_list& inputs, GradcheckOptions opts = {});
/// gradcheck of the gradient itself (second derivatives through create_graph).
bool gradgradcheck(const std::function<variable_list(const variable_list&)>& fn,
                   const variable_list& inputs, GradcheckOptions opts = {});

}  // namespace autograd
}  // namespace ignis
