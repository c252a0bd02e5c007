// Nodes, saved variables, grad mode, and connecting new nodes into the graph.
#include "autograd/node.h"

#include <atomic>

#include "autograd/accumulate_grad.h"
#include "autograd/saved_hooks.h"

namespace ignis {

namespace {
thread_local bool grad_enabled __attribute__((tls_model("initial-exec"))) = true;
}
bool is_grad_enabled() { return grad_enabled; }
void set_grad_enabled(bool enabled) { grad_enabled = enabled; }

namespace autograd {

namespace {
// Sequence numbers order ready nodes in the engine (latest first). Each thread takes them from
// a block it reserved with one atomic add, so creating a node executes no locked instruction:
// they increase with creation order on each thread and are unique across threads (the order of
// nodes made on different threads only decides which of two ready nodes runs first).
std::atomic<uint64_t> next_sequence_block{0};
constexpr uint64_t kSequenceBlock = 1024;
struct SequenceRange {
  uint64_t next, end;
};
thread_local constinit SequenceRange sequence_range
    __attribute__((tls_model("initial-exec"))) = {0, 0};

uint64_t take_sequence_nr() {
  SequenceRange& r = sequence_range;
  if (r.next == r.end) {
    r.next = next_sequence_block.fetch_add(kSequenceBlock, std::memory_order_relaxed);
    r.end = r.next + kSequenceBlock;
  }
  return r.next++;
}
}  // namespace

Node::Node() : sequence_nr_(take_sequence_nr()) {}

SavedVariable::SavedVariable(const Tensor& t, bool is_output) {
  if (!t.defined()) return;
  version_ = t._version();
  is_output_ = is_output;
  // An op's output is saved before record() gives it history, but it will require grad.
  requires_grad_ = is_output || t.requires_grad();
  if (is_output) output_nr_ = t.autograd_meta() ? t.autograd_meta()->output_nr : 0;
  if (saved_hooks_active()) {
    packed_ = std::make_shared<const PackedTensor>(t, is_output);
  } else {
    // An output as an alias without autograd meta: holding the output itself would make a
    // cycle (output -> grad_fn -> saved output).
    data_ = is_output ? alias_without_history(t) : t;
  }
}

std::string backward_name(const char* op) {
  std::string s;
  bool up = true;
  for (const char* p = op; *p != '\0'; ++p) {
    if (*p == '_') {
      up = true;
      continue;
    }
    s += up && *p >= 'a' && *p <= 'z' ? static_cast<char>(*p - 'a' + 'A') : *p;
    up = false;
  }
  return s + "Backward0";
}

Tensor SavedVariable::unpack(const Node* node) const {
  Tensor t;
  if (packed_ != nullptr) {
    t = packed_->unpack(node, version_);  // an input with its history, an output without
  } else {
    if (!data_.defined()) {
      if (!was_reset_) return Tensor();
      IGNIS_FAIL(
          "backward: trying to backward through the graph a second time (or to access "
          "saved tensors after they were freed)",
          node ? " at " + node->name() : std::string(),
          ". Pass retain_graph=true to the first backward if you need to backward twice.");
    }
    check_saved_version(node, data_.dtype(), data_.sizes(), is_output_, data_._version(), version_);
    if (!is_output_) return data_;
    t = alias_without_history(data_);
  }
  if (is_output_ && requires_grad_ && node != nullptr) {
    auto& m = t.impl()->ensure_autograd();
    m.requires_grad = true;
    m.grad_fn = const_cast<Node*>(node)->shared_from_this();
    m.output_nr = output_nr_;
  }
  return t;
}

bool any_needs_grad(std::initializer_list<const Tensor*> inputs) {
  if (!grad_enabled) return false;
  for (const Tensor* t : inputs) {
    const TensorImpl* impl = t->impl();
    if (impl != nullptr && impl->autograd() != nullptr && impl->autograd()->requires_grad) {
      return true;
    }
  }
  return false;
}

Edge gradient_edge(const Tensor& t) {
  AutogradMeta* m = t.autograd_meta();
  if (m == nullptr || !m->requires_grad) return {};
  if (m->grad_fn) return {m->grad_fn, m->output_nr};
  // A leaf: its AccumulateGrad node, shared by every op that uses it in this graph.
  if (!m->grad_accumulator) {
    m->grad_accumulator =
        std::allocate_shared<AccumulateGrad>(pool::Allocator<AccumulateGrad>(), t);
  }
  return {m->grad_accumulator, 0};
}

namespace {
void add_input(Node& node, const Tensor& t) {
  InputMeta meta;
  if (t.defined()) {
    meta.edge = gradient_edge(t);
    meta.shape = t.sizes().shape();
    meta.dtype = t.dtype();
  } else {
    meta.dtype = DType::Float32;
  }
  node.inputs().push_back(std::move(meta));
}
template <class P>
void set_history(P&& node, Tensor& out, uint32_t nr) {
  if (!out.defined()) return;
  auto& m = out.impl()->ensure_autograd();
  m.requires_grad = true;
  m.grad_fn = std::forward<P>(node);
  m.output_nr = nr;
}
}  // namespace

void connect(std::shared_ptr<Node> node, std::initializer_list<const Tensor*> inputs,
             std::initializer_list<Tensor*> outputs) {
  node->inputs().reserve(inputs.size());
  for (const Tensor* t : inputs) add_input(*node, *t);
  node->num_outputs = static_cast<uint32_t>(outputs.size());
  uint32_t nr = 0;
  for (Tensor* t : outputs) {
    if (nr + 1 == outputs.size()) {
      set_history(std::move(node), *t, nr);  // the last output takes our reference
    } else {
      set_history(node, *t, nr);
    }
    ++nr;
  }
}

void connect(const std::shared_ptr<Node>& node, const variable_list& inputs,
             variable_list& outputs) {
  node->inputs().reserve(inputs.size());
  for (const Tensor& t : inputs) add_input(*node, t);
  uint32_t nr = 0;
  for (Tensor& t : outputs) set_history(node, t, nr++);
  node->num_outputs = nr;
}

}  // namespace autograd
}  // namespace ignis
