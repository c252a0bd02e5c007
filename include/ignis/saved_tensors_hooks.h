// Hooks on the tensors autograd saves for backward (torch.autograd.graph.saved_tensors_hooks):
// while a guard is alive on a thread, every tensor an op saves for its backward is handed to
// `pack`, and the graph keeps what pack returns instead of the tensor; backward hands that back
// to `unpack`, which must return a tensor of the saved one's shape, dtype and device. The
// unpacked tensor gets the saved one's autograd history back, so gradients (and gradients of
// gradients) flow as without hooks.
//
//   {
//     autograd::graph::SaveOnCpu offload;      // GPU activations wait for backward in host memory
//     loss = model->forward(x).sum();
//   }
//   loss.backward();                            // each saved tensor copied back when needed
//
//   autograd::graph::SavedTensorsHooks hooks(   // float activations kept in bfloat16 (lossy)
//       [](const Tensor& t) -> std::any {
//         return std::make_pair(t.is_floating_point() ? t.to(kBFloat16) : t, t.dtype());
//       },
//       [](const std::any& p) {
//         const auto& [kept, dtype] = std::any_cast<const std::pair<Tensor, DType>&>(p);
//         return kept.to(dtype);
//       });
//
// Non-reentrant activation checkpointing (autograd::checkpoint with use_reentrant = false) is
// built on these hooks. Guards nest: the innermost one is used. Pack runs with grad mode off
// and must not modify its argument in place (checked); unpack runs with grad mode off. The graph
// keeps the unpack hook until it is freed, after the guard's scope: what it captures must live
// as long (capture by value or shared_ptr, not a reference to a local).
#pragma once

#include <any>
#include <functional>

#include "ignis/tensor.h"

namespace ignis::autograd::graph {

/// Returns what the graph keeps in place of a saved tensor.
using PackHook = std::function<std::any(const Tensor&)>;
/// Returns the saved tensor from what pack returned.
using UnpackHook = std::function<Tensor(const std::any&)>;

/// Installs pack/unpack hooks on this thread for its scope.
class SavedTensorsHooks {
 public:
  SavedTensorsHooks(PackHook pack, UnpackHook unpack);
  ~SavedTensorsHooks();
  SavedTensorsHooks(const SavedTensorsHooks&) = delete;
  SavedTensorsHooks& operator=(const SavedTensorsHooks&) = delete;
};

/// torch.autograd.graph.save_on_cpu: saved tensors on another device are copied to host memory
/// (page-locked with pin_memory, so the copy back can be non-blocking) and moved back to their
/// device in backward; CPU tensors are kept as they are.
class SaveOnCpu : public SavedTensorsHooks {
 public:
  explicit SaveOnCpu(bool pin_memory = false);
};

}  // namespace ignis::autograd::graph
