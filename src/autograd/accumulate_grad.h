// AccumulateGrad: the node at each leaf; runs the leaf's hooks and adds into .grad().
#pragma once

#include "autograd/node.h"

namespace ignis::autograd {

/// The leaf's AutogradMeta owns this node and the node refers to the leaf weakly: so a leaf's
/// accumulator lives as long as the leaf (recording ops on it allocates nothing for it), and
/// there is no reference cycle leaf -> node -> leaf. A graph outliving its leaf drops the
/// gradient that reaches the leaf, which no one could read anyway.
class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : leaf_(leaf.impl_ptr()) {}
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  /// The leaf (undefined once it was destroyed).
  Tensor leaf() const { return Tensor(leaf_.lock()); }
  /// Set by the engine for the duration of a backward with create_graph.
  static thread_local bool create_graph;
  /// Run with the leaf once its gradient was accumulated (register_post_accumulate_grad_hook).
  std::vector<std::pair<size_t, std::function<void(const Tensor&)>>> post_hooks;

 private:
  std::weak_ptr<TensorImpl> leaf_;
};

}  // namespace ignis::autograd
