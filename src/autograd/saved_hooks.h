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

/// The saved-tensor hook guards alive on this thread; read on every save (constant-initialised:
/// one thread-local load, no call).
extern thread_local constinit size_t t_saved_hooks_depth __attribute__((tls_model("initial-exec")));
inline bool saved_hooks_active() { return t_saved_hooks_depth != 0; }

/// Refuses to unpack a saved tensor whose storage was written after it was saved.
void check_saved_version(const Node* node, DType dtype, IntArrayRef sizes, bool is_output,
                         uint32_t now, uint32_t saved);

/// A saved tensor given to pack: what pack returned, the hooks to unpack it with, what the
/// unpacked tensor is checked against, and a saved input's history (SavedVariable keeps the rest:
/// its version, whether it is an output, an output's number).
class PackedTensor {
 public:
  PackedTensor(const Tensor& t, bool is_output);
  /// Unpacks through the hook and checks the result against the saved tensor (`node` names the
  /// owner in errors; `version`: the saved tensor's at save time): a fresh alias, with a saved
  /// input's history (an output's is the caller's to give).
  Tensor unpack(const Node* node, uint32_t version) const;

 private:
  std::shared_ptr<const HookPair> hooks_;
  std::any packed_;
  Shape shape_;
  DType dtype_;
  Device device_;
  std::weak_ptr<StorageImpl> storage_;  // for the version check while the storage lives
  Edge history_;                        // a saved input's: its grad_fn or a leaf's accumulator
  bool is_output_ = false;
};

/// A tensor sharing t's storage, shape and strides, without autograd history.
Tensor alias_without_history(const Tensor& t);

}  // namespace ignis::autograd
