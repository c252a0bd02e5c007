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

namespace ignis::autograd {

class Node;

/// Where the gradient of one input of a node goes: input `input_nr` of node `fn`.
struct Edge {
  std::shared_ptr<Node> fn;
  uint32_t input_nr = 0;
  bool valid() const { return fn != nullptr; }
};

/// What a gradient flowing to an input must look like. The engine un-broadcasts (sum_to_size)
/// and casts every gradient to this, in one place, so that backward formulas stay one-liners.
struct InputMeta {
  Edge edge;
  Shape shape;
  DType dtype;
};

/// A node: the backward of one forward op. Its inputs (in backward) are the gradients of the
/// forward op's outputs; it returns the gradients of the forward op's inputs.
class Node : public std::enable_shared_from_this<Node> {
 public:
  Node();
  virtual ~Node() = default;
  virtual variable_list apply(variable_list&& grad_outputs) = 0;
  /// PyTorch's node names: "MulBackward0", "LogSoftmaxBackward0" (the forward op's name in
  /// CamelCase + "Backward0"); a custom Function's is its class name + "Backward".
  virtual std::string name() const = 0;
  /// Frees saved tensors once backward ran without retain_graph.
  virtual void release_variables() {}

  /// Pool-allocated, as the node itself: recording an op allocates nothing from malloc.
  using InputList = std::vector<InputMeta, pool::Allocator<InputMeta>>;
  InputList& inputs() { return inputs_; }
  const InputList& inputs() const { return inputs_; }
  size_t num_inputs() const { return inputs_.size(); }
  const Edge& next_edge(size_t i) const { return inputs_[i].edge; }
  bool needs_input_grad(size_t i) const { return i < inputs_.size() && inputs_[i].edge.valid(); }
  uint64_t sequence_nr() const { return sequence_nr_; }
  uint32_t num_outputs = 1;

  /// Hooks on the gradient of output i (tensor hooks and retain_grad of non-leaf tensors).
  struct Hook {
    size_t handle;
    uint32_t output_nr;
    GradHook fn;
  };
  std::vector<Hook> pre_hooks;
  /// Non-leaf tensors that retain their gradient: output_nr -> tensor impl (weak).
  std::vector<std::pair<uint32_t, std::weak_ptr<TensorImpl>>> retained;

 private:
  InputList inputs_;
  uint64_t sequence_nr_;
};

/// A tensor saved for backward. Records the storage version at save time and refuses to unpack
/// if it changed. An op's own output is saved without its grad_fn (which would be a reference
/// cycle) and gets it back on unpack.
class SavedVariable {
 public:
  SavedVariable() = default;
  SavedVariable(const Tensor& t, bool is_output);
  /// `node` is the node that owns this saved variable (for saved outputs).
  Tensor unpack(const Node* node = nullptr) const;
  void reset() { data_ = Tensor(); was_reset_ = true; }
  bool defined() const { return data_.defined(); }

 private:
  Tensor data_;
  uint32_t version_ = 0;
  uint32_t output_nr_ = 0;
  bool is_output_ = false;
  bool was_reset_ = false;
  bool requires_grad_ = false;
  std::weak_ptr<Node> grad_fn_;  // for saved inputs that are non-leaf
};

/// True while the backward running on this thread frees the graph as it goes (no retain_graph):
/// then a node may drop a saved tensor as soon as it has used it.
bool backward_keeps_graph();

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
    IGNIS_FAIL("backward: trying to backward through the graph a second time (or to access saved "
               "tensors after they were freed) at ", name(),
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
///   record("mul", {&a, &b}, {&out}, [sa = SavedVariable(a, false), ...](auto& ctx, auto& g) {...});
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
