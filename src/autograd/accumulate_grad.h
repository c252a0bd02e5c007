// AccumulateGrad: the node at each leaf; runs the leaf's hooks and adds into .grad().
#pragma once

#include "autograd/node.h"

namespace ignis::autograd {

class AccumulateGrad final : public Node {
 public:
  explicit AccumulateGrad(const Tensor& leaf) : leaf_(leaf) {}
  variable_list apply(variable_list&& grads) override;
  std::string name() const override { return "AccumulateGrad"; }
  const Tensor& leaf() const { return leaf_; }
  /// Set by the engine for the duration of a backward with create_graph.
  static thread_local bool create_graph;

 private:
  Tensor leaf_;
};

}  // namespace ignis::autograd
