// A node of the autograd graph: the backward of one forward op (LibTorch's
// torch::autograd::Node). Users read it through Tensor::grad_fn(): its name() ("MulBackward0"),
// its sequence number and the edges to the nodes of its inputs; the engine and the ops' records
// use the rest.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "ignis/detail/object_pool.h"
#include "ignis/dtype.h"
#include "ignis/small_vector.h"
#include "ignis/tensor.h"

namespace ignis::autograd {

using variable_list = std::vector<Tensor>;

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

}  // namespace ignis::autograd
