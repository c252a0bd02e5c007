// Custom autograd functions (Function<Derived>): the context that carries saved tensors from
// forward to backward, and the node that calls the user's backward.
#include <cxxabi.h>

#include <cstdlib>
#include <mutex>
#include <unordered_map>

#include "autograd/node.h"
#include "ignis/ops.h"

namespace ignis::autograd {

/// The one place that touches AutogradContext's private state.
struct CustomFunctionAccess {
  static variable_list& to_save(AutogradContext& c) { return c.to_save_; }
  static std::vector<std::shared_ptr<void>>& saved(AutogradContext& c) { return c.saved_; }
  static std::vector<bool>& needs(AutogradContext& c) { return c.needs_input_grad_; }
  static std::vector<const TensorImpl*>& non_diff(AutogradContext& c) {
    return c.non_differentiable_;
  }
  static std::weak_ptr<Node>& node(AutogradContext& c) { return c.node_; }
};

namespace {

using Access = CustomFunctionAccess;
using BackwardFn = std::function<variable_list(AutogradContext*, variable_list)>;

// "N5ignis12MultiplyGateE" -> "MultiplyGate": demangled, namespaces and enclosing scopes
// (a function for a local struct) stripped; template arguments kept.
std::string readable_name(const char* mangled) {
  int status = 0;
  char* d = abi::__cxa_demangle(mangled, nullptr, nullptr, &status);
  std::string full = (status == 0 && d != nullptr) ? d : mangled;
  std::free(d);
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i + 1 < full.size(); ++i) {
    char ch = full[i];
    if (ch == '<' || ch == '(') ++depth;
    if (ch == '>' || ch == ')') --depth;
    if (depth == 0 && ch == ':' && full[i + 1] == ':') start = i + 2;
  }
  return full.substr(start);
}

const std::string& cached_name(const char* mangled) {
  static std::mutex mu;
  static std::unordered_map<const char*, std::string> names;
  std::lock_guard<std::mutex> lock(mu);
  auto it = names.find(mangled);
  if (it == names.end()) it = names.emplace(mangled, readable_name(mangled) + "Backward").first;
  return it->second;
}

struct OutputMeta {
  Shape shape;
  DType dtype;
  bool differentiable;
};

class CustomNode final : public Node {
 public:
  CustomNode(std::string name, std::shared_ptr<AutogradContext> ctx, BackwardFn fn,
             std::vector<OutputMeta> outs)
      : name_(std::move(name)), ctx_(std::move(ctx)), fn_(std::move(fn)), outs_(std::move(outs)) {}

  variable_list apply(variable_list&& grads) override {
    // Like PyTorch's default (materialize_grads): backward sees a zero gradient, never an
    // undefined one, for outputs that got none.
    for (size_t i = 0; i < grads.size() && i < outs_.size(); ++i) {
      if (!grads[i].defined()) grads[i] = zeros(outs_[i].shape, outs_[i].dtype);
    }
    variable_list r = fn_(ctx_.get(), std::move(grads));
    const size_t n = num_inputs();
    // Extra trailing gradients are allowed only when undefined (for non-tensor arguments).
    while (r.size() > n && !r.back().defined()) r.pop_back();
    IGNIS_CHECK(r.size() == n, "backward: function ", name_,
                " returned an incorrect number of "
                "gradients (expected ",
                n, ", one per tensor argument of forward, got ", r.size(), ")");
    for (size_t i = 0; i < n; ++i) {
      if (!needs_input_grad(i)) r[i] = Tensor();
    }
    return r;
  }
  std::string name() const override { return name_; }
  void release_variables() override {
    for (auto& p : Access::saved(*ctx_)) static_cast<SavedVariable*>(p.get())->reset();
  }

 private:
  std::string name_;
  std::shared_ptr<AutogradContext> ctx_;
  BackwardFn fn_;
  std::vector<OutputMeta> outs_;
};

}  // namespace

// ---- AutogradContext

void AutogradContext::save_for_backward(const variable_list& tensors) { to_save_ = tensors; }

variable_list AutogradContext::get_saved_variables() const {
  std::shared_ptr<Node> node = node_.lock();
  if (saved_.empty()) return to_save_;  // still in forward (or nothing was recorded)
  variable_list out;
  out.reserve(saved_.size());
  for (const auto& p : saved_)
    out.push_back(static_cast<SavedVariable*>(p.get())->unpack(node.get()));
  return out;
}

void AutogradContext::mark_non_differentiable(const variable_list& outputs) {
  for (const Tensor& t : outputs) {
    if (t.defined()) non_differentiable_.push_back(t.impl());
  }
}

bool AutogradContext::needs_input_grad(size_t i) const {
  return i < needs_input_grad_.size() && needs_input_grad_[i];
}

Scalar AutogradContext::saved(const std::string& key) const {
  for (const auto& [k, v] : saved_data) {
    if (k == key) return v;
  }
  std::string keys;
  for (const auto& kv : saved_data) keys += (keys.empty() ? "" : ", ") + kv.first;
  IGNIS_FAIL("AutogradContext::saved: no value saved under key '", key,
             "' (saved keys: ", keys.empty() ? "none" : keys, ")");
}

// ---- recording

namespace detail {

std::vector<bool> needs_grad_flags(const variable_list& inputs) {
  std::vector<bool> f(inputs.size(), false);
  if (!is_grad_enabled()) return f;
  for (size_t i = 0; i < inputs.size(); ++i)
    f[i] = inputs[i].defined() && inputs[i].requires_grad();
  return f;
}

void init_context(AutogradContext& ctx, const variable_list& inputs) {
  Access::needs(ctx) = needs_grad_flags(inputs);
}

void record_custom(const char* name, const std::shared_ptr<AutogradContext>& ctx,
                   const variable_list& inputs, variable_list& outputs, BackwardFn backward) {
  bool any = false;
  for (bool b : Access::needs(*ctx)) any = any || b;
  if (!any || !is_grad_enabled()) {
    Access::to_save(*ctx).clear();
    return;
  }
  const auto& non_diff = Access::non_diff(*ctx);
  auto is_non_diff = [&](const Tensor& t) {
    for (const TensorImpl* p : non_diff) {
      if (p == t.impl()) return true;
    }
    return false;
  };
  std::vector<OutputMeta> metas;
  variable_list to_connect(outputs.size());
  for (size_t i = 0; i < outputs.size(); ++i) {
    Tensor& out = outputs[i];
    if (!out.defined()) {
      metas.push_back({Shape{}, kFloat32, false});
      continue;
    }
    // An input returned as is (or any tensor with history) must not get this node as its
    // grad_fn: the output becomes an alias of it.
    const bool diff = out.is_floating_point() && !is_non_diff(out);
    bool alias = out.requires_grad();
    for (const Tensor& in : inputs) alias = alias || out.is_same(in);
    if (alias) out = out.detach();
    metas.push_back({out.sizes().shape(), out.dtype(), diff});
    if (diff) to_connect[i] = out;
  }
  auto node =
      std::make_shared<CustomNode>(cached_name(name), ctx, std::move(backward), std::move(metas));
  connect(node, inputs, to_connect);
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  Access::node(*ctx) = node;
  // Outputs are saved without their grad_fn (it would be a reference cycle through the node);
  // the version recorded now is checked when backward unpacks them.
  auto& saved = Access::saved(*ctx);
  for (const Tensor& t : Access::to_save(*ctx)) {
    bool is_output = false;
    for (const Tensor& out : to_connect) {
      if (t.defined() && out.defined() && t.is_same(out)) is_output = true;
    }
    saved.push_back(std::make_shared<SavedVariable>(t, is_output));
  }
  Access::to_save(*ctx).clear();
}

}  // namespace detail
}  // namespace ignis::autograd
