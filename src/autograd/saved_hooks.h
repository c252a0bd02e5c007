// Saved-tensor hooks inside autograd: the thread's hook stack and the packed form of a saved
// tensor (what a SavedVariable holds when hooks were active as it was saved).
#pragma once

#include <any>
#include <memory>

#include "core/tensor_impl.h"
#include "ignis/autograd_node.h"
#include "ignis/saved_tensors_hooks.h"

namespace ignis::autograd {

struct HookPair {
  graph::PackHook pack;
  graph::UnpackHook unpack;
};

/// Whether saved-tensor hooks are installed on this thread (one thread-local load).
bool saved_hooks_active();

/// Refuses to unpack a saved tensor whose storage was written after it was saved.
void check_saved_version(const Node* node, DType dtype, IntArrayRef sizes, bool is_output,
                         uint32_t now, uint32_t saved);

/// A saved tensor given to pack: what pack returned, the hooks to unpack it with, and what is
/// needed to check the unpacked tensor and give it the saved one's history back.
class PackedTensor {
 public:
  PackedTensor(const Tensor& t, bool is_output);
  /// Unpacks through the hook and checks the result against the saved tensor; `node` names the
  /// owner in errors. `version` is the saved tensor's version at save time.
  Tensor unpack(const Node* node, uint32_t version) const;
  bool requires_grad() const { return requires_grad_; }

 private:
  std::shared_ptr<const HookPair> hooks_;
  std::any packed_;
  Shape shape_;
  DType dtype_;
  Device device_;
  std::weak_ptr<StorageImpl> storage_;  // for the version check while the storage lives
  std::shared_ptr<Node> grad_fn_;       // a saved input's history: its grad_fn, ...
  std::shared_ptr<Node> accumulator_;   // ... or, for a leaf that requires grad, its accumulator
  uint32_t output_nr_ = 0;
  bool requires_grad_ = false;
  bool is_output_ = false;
};

/// A tensor sharing t's storage, shape and strides, without autograd history.
Tensor alias_without_history(const Tensor& t);

}  // namespace ignis::autograd
