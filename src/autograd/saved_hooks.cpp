// Saved-tensor hooks: the thread's stack of hooks, packing a saved tensor through the innermost
// ones and unpacking it with its history restored, and save_on_cpu.
#include "autograd/saved_hooks.h"

#include <vector>

#include "autograd/accumulate_grad.h"
#include "autograd/node.h"
#include "ignis/autograd.h"

namespace ignis::autograd {

namespace {
thread_local std::vector<std::shared_ptr<const HookPair>> t_hooks;
}  // namespace

thread_local constinit size_t t_saved_hooks_depth = 0;  // t_hooks.size()

void check_saved_version(const Node* node, DType dtype, IntArrayRef sizes, bool is_output,
                         uint32_t now, uint32_t saved) {
  IGNIS_CHECK(now == saved,
              "backward: one of the tensors needed for gradient computation "
              "has been modified by an in-place operation: a ",
              dtype, " tensor of shape ", sizes, (is_output ? " (an output of " : " (an input of "),
              node ? node->name() : std::string("?"), ") is at version ", now,
              "; expected version ", saved, " instead.");
}

Tensor alias_without_history(const Tensor& t) {
  return make_view(t, t.impl()->sizes().shape(), t.impl()->strides().shape(), t.impl()->offset());
}

PackedTensor::PackedTensor(const Tensor& t, bool is_output)
    : hooks_(t_hooks.back()),
      shape_(t.sizes().shape()),
      dtype_(t.dtype()),
      device_(t.device()),
      storage_(t.impl()->storage()),
      history_(is_output ? Edge() : gradient_edge(t)),
      is_output_(is_output) {
  NoGradGuard no_grad;
  const uint32_t before = t._version();
  packed_ = hooks_->pack(alias_without_history(t));
  IGNIS_CHECK(t._version() == before,
              "saved_tensors_hooks: the pack hook modified the tensor it was given in place (a ",
              dtype_, " tensor of shape ", t.sizes(), "); a pack hook must not modify its input");
}

Tensor PackedTensor::unpack(const Node* node, uint32_t version) const {
  Tensor d;
  {
    NoGradGuard no_grad;
    d = hooks_->unpack(packed_);
  }
  const std::string at = node ? " at " + node->name() : std::string();
  IGNIS_CHECK(d.defined(), "saved_tensors_hooks: the unpack hook returned an undefined tensor", at,
              "; expected a ", dtype_, " tensor of shape ", IntArrayRef(shape_), " on ", device_);
  IGNIS_CHECK(d.sizes().equals(shape_) && d.dtype() == dtype_ && d.device() == device_,
              "saved_tensors_hooks: the unpack hook returned a ", d.dtype(), " tensor of shape ",
              d.sizes(), " on ", d.device(), at, " but a ", dtype_, " tensor of shape ",
              IntArrayRef(shape_), " on ", device_, " was saved");
  if (auto s = storage_.lock()) {
    check_saved_version(node, dtype_, shape_, is_output_,
                        s->version.load(std::memory_order_relaxed), version);
  }
  // A fresh alias; a saved input's gets its history, so gradients computed from it (with
  // create_graph) reach the saved tensor's producer or leaf.
  Tensor t = alias_without_history(d);
  if (history_.valid()) {
    auto& m = t.impl()->ensure_autograd();
    m.requires_grad = true;
    if (dynamic_cast<const AccumulateGrad*>(history_.fn.get()) != nullptr) {
      m.grad_accumulator = history_.fn;
    } else {
      m.grad_fn = history_.fn;
      m.output_nr = history_.input_nr;
    }
  }
  return t;
}

namespace graph {

SavedTensorsHooks::SavedTensorsHooks(PackHook pack, UnpackHook unpack) {
  IGNIS_CHECK(pack != nullptr && unpack != nullptr,
              "saved_tensors_hooks: both the pack and the unpack hook must be set");
  t_hooks.push_back(std::make_shared<const HookPair>(HookPair{std::move(pack), std::move(unpack)}));
  t_saved_hooks_depth = t_hooks.size();
}

SavedTensorsHooks::~SavedTensorsHooks() {
  t_hooks.pop_back();
  t_saved_hooks_depth = t_hooks.size();
}

namespace {
struct OnCpu {
  Tensor data;
  Device device;
  bool pinned;
};
}  // namespace

SaveOnCpu::SaveOnCpu(bool pin_memory)
    : SavedTensorsHooks(
          [pin_memory](const Tensor& t) -> std::any {
            if (t.device().is_cpu()) return OnCpu{t, t.device(), false};
            Tensor host = t.to(kCPU);
            const bool pin = pin_memory && host.numel() > 0;
            return OnCpu{pin ? host.pin_memory() : host, t.device(), pin};
          },
          [](const std::any& p) {
            const auto& c = std::any_cast<const OnCpu&>(p);
            return c.device.is_cpu() ? c.data : c.data.to(c.device, c.pinned);
          }) {}

}  // namespace graph
}  // namespace ignis::autograd
