// Nodes of the autograd graph and the recording helper every differentiable op uses.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/autograd_node.h"

namespace ignis::autograd {

class PackedTensor;

/// A tensor saved for backward. Records the storage version at save time and refuses to unpack
/// if it changed. An op's own output is saved without its grad_fn (which would be a reference
/// cycle) and gets it back on unpack. While saved-tensor hooks are installed on the thread
/// (autograd::graph::SavedTensorsHooks) it holds what their pack hook returned instead.
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  /// `node` is the node that owns this saved variable (for saved outputs).
  Tensor unpack(const Node* node = nullptr) const;
  void reset() {
    data_ = Tensor();
    packed_.reset();
    was_reset_ = true;
  }
  bool defined() const { return data_.defined() || packed_ != nullptr; }

 private:
  Tensor data_;
  std::shared_ptr<const PackedTensor> packed_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool was_reset_ = false;
  bool requires_grad_ = false;
  std::weak_ptr<Node> grad_fn_;  // for saved inputs that are non-leaf
};

/// A tensor saved only when `needed` (the other operand needs its gradient): an empty saved
/// variable otherwise, so nothing is held for a gradient no one asked for.
inline SavedVariable save_if(const Tensor& t, bool needed) {
  return needed ? SavedVariable(t, false) : SavedVariable();
}

/// True while the backward running on this thread frees the graph as it goes (no retain_graph):
/// then a node may drop a saved tensor as soon as it has used it.
bool backward_keeps_graph();
/// True while the backward running on this thread accumulates into .grad() (autograd::backward),
/// false under autograd::grad.
bool backward_accumulates();

/// The context a backward lambda gets: which inputs need a gradient, and its node.
struct BackwardCtx {
  const Node* node;
  bool needs_input_grad(size_t i) const { return node->needs_input_grad(i); }
  Tensor unpack(const SavedVariable& v) const { return v.unpack(node); }
  /// Releases a saved tensor that this backward no longer needs, unless the graph is kept for
  /// another backward (a later unpack then reports the freed graph, as after release).
  void release(SavedVariable& v) const {
    if (!backward_keeps_graph()) v.reset();
  }
};

/// "log_softmax" -> "LogSoftmaxBackward0": PyTorch's name for the node of a forward op.
std::string backward_name(const char* op);

/// A node whose backward is a lambda written in ignis ops; the lambda's captures are the saved
/// state. Released (and refusing a second backward) after backward without retain_graph.
template <class F>
class LambdaNode final : public Node {
 public:
  LambdaNode(const char* op, F f) : op_(op), f_(std::move(f)) {}
  variable_list apply(variable_list&& grads) override {
    if (!f_) throw_freed();
    BackwardCtx ctx{this};
    return (*f_)(ctx, grads);
  }
  std::string name() const override { return backward_name(op_); }
  void release_variables() override { f_.reset(); }

 private:
  [[noreturn]] void throw_freed() const {
    IGNIS_FAIL(
        "backward: trying to backward through the graph a second time (or to access saved "
        "tensors after they were freed) at ",
        name(),
        "; the saved tensors were freed by the first backward. Pass retain_graph=true to "
        "the first backward if you need to backward twice.");
  }
  const char* op_;
  std::optional<F> f_;
};

/// True when any of the tensors needs a gradient and grad mode is on.
bool any_needs_grad(std::initializer_list<const Tensor*> inputs);

/// Attaches `node` as grad_fn of `outputs` and connects it to the histories of `inputs`.
/// (By value: record() moves its reference into the last output, saving a count round trip.)
void connect(std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs,
             std::initializer_list<Tensor*> outputs);
void connect(const std::shared_ptr<Node>& node, const variable_list& inputs,
             variable_list& outputs);

/// Records one differentiable op: `backward(BackwardCtx&, const variable_list& grads)` returns
/// one gradient per input (undefined where none). Call only when any_needs_grad(inputs).
///   record("mul", {&a, &b}, {&out}, [sa = SavedVariable(a, false), ...](auto& ctx, auto& g)
///   {...});
template <class F>
void record(const char* op, std::initializer_list<const Tensor*> inputs,
            std::initializer_list<Tensor*> outputs, F&& backward) {
  using N = LambdaNode<std::decay_t<F>>;
  connect(std::allocate_shared<N>(pool::Allocator<N>(), op, std::forward<F>(backward)), inputs,
          outputs);
}

/// The gradient edge of a tensor: its grad_fn, or the AccumulateGrad of a leaf.
Edge gradient_edge(const Tensor& t);

}  // namespace ignis::autograd
