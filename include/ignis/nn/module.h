// nn::Module: the base of every layer and model. Parameters, buffers and submodules are
// registered by name, so they are found by dotted names (`fc1.weight`) in named_parameters()
// and state_dict(), as in PyTorch.
#pragma once

#include <functional>
#include <memory>
#include <ostream>
#include <string>
#include <utility>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::nn {

/// An ordered name -> tensor list (PyTorch's OrderedDict of a state_dict).
using NamedTensors = std::vector<std::pair<std::string, Tensor>>;
using StateDict = NamedTensors;

class Module : public std::enable_shared_from_this<Module> {
 public:
  Module() = default;
  virtual ~Module() = default;
  Module(const Module&) = delete;
  Module& operator=(const Module&) = delete;
  /// Movable, so that `Sequential(Linear(784, 512), ReLU())` can take modules by value.
  Module(Module&&) = default;
  Module& operator=(Module&&) = default;

  /// The type name printed in summaries ("Linear").
  virtual std::string type_name() const { return "Module"; }
  /// The computation of a module with one tensor in and one out (Sequential uses this).
  /// Modules with other signatures define their own forward and leave this one throwing.
  virtual Tensor forward(const Tensor& x);
  Tensor operator()(const Tensor& x) { return forward(x); }
  /// Extra text inside the parentheses when printed: "in_features=784, out_features=512".
  virtual std::string extra_repr() const { return ""; }

  /// Registers a trainable tensor (requires_grad set unless requires_grad is false).
  Tensor& register_parameter(const std::string& name, Tensor t, bool requires_grad = true);
  /// Registers persistent state that is not trained (batch-norm running statistics).
  Tensor& register_buffer(const std::string& name, Tensor t);
  template <class M>
  std::shared_ptr<M> register_module(const std::string& name, std::shared_ptr<M> m) {
    add_child(name, m);
    return m;
  }
  /// Replaces a registered submodule (or adds it).
  void replace_module(const std::string& name, std::shared_ptr<Module> m);

  std::vector<Tensor> parameters(bool recurse = true) const;
  NamedTensors named_parameters(bool recurse = true) const;
  std::vector<Tensor> buffers(bool recurse = true) const;
  NamedTensors named_buffers(bool recurse = true) const;
  std::vector<std::shared_ptr<Module>> children() const;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_children() const;
  /// This module and every descendant, depth first (this module first, named "").
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> named_modules();
  std::vector<std::shared_ptr<Module>> modules();

  /// A parameter or buffer by dotted name; throws listing what exists when absent.
  Tensor& get(const std::string& dotted_name);
  std::shared_ptr<Module> child(const std::string& name) const;

  virtual void train(bool on = true);
  void eval() { train(false); }
  bool is_training() const { return training_; }
  void zero_grad(bool set_to_none = true);
  /// Moves/casts parameters and buffers in place (floating tensors only for dtype casts).
  void to(Device device);
  void to(DType dtype);
  /// Calls fn on this module and every descendant (children first, like PyTorch's apply).
  void apply(const std::function<void(Module&)>& fn);

  /// Parameters then buffers of every module, by dotted name (detached, sharing storage).
  StateDict state_dict() const;
  /// Copies values in by name. strict: missing and unexpected keys are errors; a shape
  /// mismatch is always an error. The error lists every missing key, unexpected key and
  /// mismatch at once.
  void load_state_dict(const StateDict& state, bool strict = true);
  /// Throws what load_state_dict would throw for `state`, changing nothing.
  void check_state_dict(const StateDict& state, bool strict = true) const;

  int64_t num_parameters(bool trainable_only = false) const;
  /// The module tree with each module's own parameter count, like Keras's model.summary().
  std::string summary() const;
  /// PyTorch-style repr: Sequential(\n  (0): Linear(in_features=..., ...)\n ...).
  void pretty_print(std::ostream& os, int indent = 0) const;

 protected:
  void add_child(const std::string& name, std::shared_ptr<Module> m);

 private:
  void collect(const std::string& prefix, bool recurse, bool params, NamedTensors& out) const;
  NamedTensors params_;
  NamedTensors buffers_;
  std::vector<std::pair<std::string, std::shared_ptr<Module>>> children_;
  bool training_ = true;
};

std::ostream& operator<<(std::ostream& os, const Module& m);

}  // namespace ignis::nn
