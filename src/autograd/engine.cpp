// The backward engine: discovers the graph from the roots, then runs nodes in reverse
// topological order (a node runs once all its consumers have sent their gradients, which are
// summed in its input buffer). Gradients are un-broadcast and cast here, once, for every op.
#include <queue>
#include <unordered_map>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "ignis/ops.h"
#include "ops/copy.h"
#include "profiler/profiler_hooks.h"

namespace ignis::autograd {

thread_local bool AccumulateGrad::create_graph = false;

namespace {

/// Whether the backward running on this thread keeps the graph (true outside any backward).
thread_local bool t_keep_graph = true;
/// Whether the backward running on this thread accumulates into .grad() (backward) rather than
/// returning gradients (grad).
thread_local bool t_accumulates = true;

bool anomaly_enabled = false;

/// The callbacks queued during the backward running on this thread (null outside backward).
thread_local std::vector<std::function<void()>>* t_callbacks = nullptr;

void run_hooks(const std::vector<Node::Hook>& hooks, uint32_t nr, Tensor& g) {
  for (const auto& h : hooks) {
    if (h.output_nr != nr || !g.defined()) continue;
    Tensor r = h.fn(g);
    if (r.defined()) g = r;
  }
}

void run_leaf_hooks(const Tensor& leaf, Tensor& g) {
  AutogradMeta* m = leaf.autograd_meta();
  if (m == nullptr) return;
  for (auto& [handle, fn] : m->hooks) {
    if (!g.defined()) break;
    Tensor r = fn(g);
    if (r.defined()) g = r;
  }
}

void accumulate(Tensor& slot, const Tensor& g) {
  if (!g.defined()) return;
  slot = slot.defined() ? add(slot, g) : g;
}

// Makes a gradient returned for input i of `node` match the input: un-broadcast, cast.
Tensor validate(const Node& node, size_t i, Tensor g) {
  const InputMeta& meta = node.inputs()[i];
  if (!g.defined()) return g;
  if (!g.sizes().equals(meta.shape)) {
    // The forward broadcast this input: sum the gradient back to its shape.
    const IntArrayRef gs = g.sizes();
    bool ok = meta.shape.size() <= gs.size();
    for (size_t k = 0; ok && k < meta.shape.size(); ++k) {
      int64_t want = meta.shape[meta.shape.size() - 1 - k];
      int64_t have = gs[gs.size() - 1 - k];
      ok = want == have || want == 1;
    }
    IGNIS_CHECK(ok, "backward: ", node.name(), " returned an invalid gradient at index ", i,
                ": got shape ", gs, " but expected a shape that sums to ", meta.shape);
    g = sum_to_size(g, meta.shape);
  }
  if (g.dtype() != meta.dtype) {
    IGNIS_CHECK(g.is_floating_point() || !is_floating_point(meta.dtype), "backward: ", node.name(),
                " returned an invalid gradient at index ", i, ": expected dtype ", meta.dtype,
                " but got ", g.dtype());
    g = g.to(meta.dtype);
  }
  return g;
}

void check_anomaly(const Node& node, const variable_list& grads) {
  for (size_t i = 0; i < grads.size(); ++i) {
    const Tensor& g = grads[i];
    if (!g.defined() || !g.is_floating_point() || g.numel() == 0) continue;
    NoGradGuard ng;
    if (!isfinite(g).all().item<bool>()) {
      IGNIS_FAIL("anomaly detected: function '", node.name(), "' returned nan or inf values in ",
                 "its ", i, "th output (the gradient of a ", g.sizes(),
                 " input of its forward op)");
    }
  }
}

struct Capture {
  Node* node;
  uint32_t input_nr;  // for non-leaf inputs: which output of node
  bool is_leaf;
  Tensor grad;
};

// The ready queue: latest created first, except that AccumulateGrad nodes come before all
// others (PyTorch gives them sequence number UINT64_MAX): a leaf's gradient, and its
// post-accumulate-grad hooks (DDP's bucket readiness), come as soon as they are ready instead of
// after the rest of backward, so that DDP's bucket all-reduces overlap the backward of the
// earlier layers. The priority is computed once, at push; ties go by sequence number.
struct Ready {
  bool leaf;
  uint64_t seq;
  Node* node;
  explicit Ready(Node* n)
      : leaf(dynamic_cast<AccumulateGrad*>(n) != nullptr), seq(n->sequence_nr()), node(n) {}
  bool operator<(const Ready& o) const { return leaf != o.leaf ? o.leaf : seq < o.seq; }
};

// Runs backward from `roots` with gradients `root_grads`. With captures (autograd::grad), the
// gradients reaching them are stored there and no leaf .grad() is touched.
void execute(const std::vector<Edge>& roots, const variable_list& root_grads, bool keep_graph,
             bool create_graph, std::vector<Capture>* captures) {
  // 1. Discover the graph: dependency counts (how many consumers will send a gradient).
  std::unordered_map<Node*, int> deps;
  std::vector<Node*> stack;
  std::unordered_set<Node*> seen;
  for (const Edge& e : roots) {
    if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
  }
  while (!stack.empty()) {
    Node* n = stack.back();
    stack.pop_back();
    for (const InputMeta& in : n->inputs()) {
      Node* next = in.edge.fn.get();
      if (next == nullptr) continue;
      ++deps[next];
      if (seen.insert(next).second) stack.push_back(next);
    }
  }
  // 2. With captures, only nodes on a path to a captured input need to run.
  std::unordered_set<Node*> needed;
  if (captures != nullptr) {
    // A topological order (every consumer before what it consumes; DFS discovery order is not
    // one when paths share nodes), resolved in reverse so that children come first.
    std::vector<Node*> order;
    std::unordered_map<Node*, int> pending = deps;
    for (Node* n : seen) {
      if (pending[n] == 0) order.push_back(n);
    }
    for (size_t i = 0; i < order.size(); ++i) {
      for (const InputMeta& in : order[i]->inputs()) {
        Node* next = in.edge.fn.get();
        if (next != nullptr && --pending[next] == 0) order.push_back(next);
      }
    }
    std::unordered_set<Node*> targets;
    for (const Capture& c : *captures) targets.insert(c.node);
    for (auto it = order.rbegin(); it != order.rend(); ++it) {
      Node* n = *it;
      bool need = false;
      for (const InputMeta& in : n->inputs()) {
        Node* next = in.edge.fn.get();
        if (next != nullptr && (targets.count(next) || needed.count(next))) need = true;
      }
      if (need) needed.insert(n);
    }
  }
  // 3. Seed the roots' buffers, then run in reverse topological order.
  std::unordered_map<Node*, variable_list> buffers;
  std::priority_queue<Ready> ready;
  for (size_t i = 0; i < roots.size(); ++i) {
    Node* n = roots[i].fn.get();
    if (n == nullptr) continue;
    auto& buf = buffers[n];
    if (buf.size() < n->num_outputs) buf.resize(n->num_outputs);
    accumulate(buf[roots[i].input_nr], root_grads[i]);
  }
  for (auto& [n, buf] : buffers) {
    if (deps[n] == 0) ready.emplace(n);
  }
  AutoGradMode mode(create_graph);
  bool prev_create = AccumulateGrad::create_graph;
  AccumulateGrad::create_graph = create_graph;
  std::vector<std::function<void()>> callbacks;
  struct Restore {
    bool v, keep, accumulates;
    std::vector<std::function<void()>>* callbacks;
    ~Restore() {
      AccumulateGrad::create_graph = v;
      t_keep_graph = keep;
      t_accumulates = accumulates;
      t_callbacks = callbacks;
    }
  } restore{prev_create, t_keep_graph, t_accumulates, t_callbacks};
  t_keep_graph = keep_graph;
  t_accumulates = captures == nullptr;
  t_callbacks = &callbacks;
  while (!ready.empty()) {
    Node* node = ready.top().node;
    ready.pop();
    variable_list grads = std::move(buffers[node]);
    buffers.erase(node);
    grads.resize(node->num_outputs);
    for (uint32_t k = 0; k < grads.size(); ++k) run_hooks(node->pre_hooks, k, grads[k]);
    for (auto& [nr, weak] : node->retained) {
      if (auto impl = weak.lock(); impl && nr < grads.size() && grads[nr].defined()) {
        auto& m = impl->ensure_autograd();
        m.grad = m.grad.defined() ? add(m.grad, grads[nr])
                                  : (create_graph ? grads[nr] : grads[nr].detach());
      }
    }
    auto* acc = dynamic_cast<AccumulateGrad*>(node);
    if (captures != nullptr) {
      for (Capture& c : *captures) {
        if (c.node != node) continue;
        Tensor g = grads[c.is_leaf ? 0 : c.input_nr];
        if (c.is_leaf && acc != nullptr) run_leaf_hooks(acc->leaf(), g);
        accumulate(c.grad, g);
      }
      if (acc != nullptr || !needed.count(node)) continue;
    }
    bool any = false;
    for (const Tensor& g : grads) any = any || g.defined();
    variable_list out;
    if (any) {
      // A backward node is an interval of an active profile (named as PyTorch users see it).
      profiler::detail::Scope scope("backward", [&] { return node->name(); });
      out = node->apply(std::move(grads));
      IGNIS_CHECK(out.size() == node->num_inputs(), "backward: ", node->name(), " returned ",
                  out.size(), " gradients but its forward had ", node->num_inputs(),
                  " tensor inputs");
      for (size_t i = 0; i < out.size(); ++i) {
        out[i] = node->needs_input_grad(i) ? validate(*node, i, std::move(out[i])) : Tensor();
      }
      if (anomaly_enabled) check_anomaly(*node, out);
    }
    if (!keep_graph) node->release_variables();
    for (size_t i = 0; i < node->num_inputs(); ++i) {
      const Edge& e = node->next_edge(i);
      if (!e.valid()) continue;
      Node* next = e.fn.get();
      if (i < out.size() && out[i].defined()) {
        auto& buf = buffers[next];
        if (buf.size() < next->num_outputs) buf.resize(next->num_outputs);
        accumulate(buf[e.input_nr], out[i]);
      }
      if (--deps[next] == 0) {
        // Runs even when no gradient reached it, so that its own consumers are released.
        auto& buf = buffers[next];
        if (buf.size() < next->num_outputs) buf.resize(next->num_outputs);
        ready.emplace(next);
      }
    }
  }
  // Callbacks queued by hooks (DDP's final wait), in order; they may queue more.
  for (size_t i = 0; i < callbacks.size(); ++i) {
    auto fn = std::move(callbacks[i]);
    fn();
  }
}

Tensor root_grad(const Tensor& out, const Tensor& given, size_t i) {
  if (given.defined()) {
    IGNIS_CHECK(given.sizes().equals(out.sizes()), "backward: gradient ", i, " has shape ",
                given.sizes(), " but the output has shape ", out.sizes());
    IGNIS_CHECK(given.dtype() == out.dtype(), "backward: gradient ", i, " has dtype ",
                given.dtype(), " but the output has dtype ", out.dtype());
    return given;
  }
  IGNIS_CHECK(out.numel() == 1,
              "backward: grad can be implicitly created only for outputs with "
              "one element, but output ",
              i, " has shape ", out.sizes(), "; pass a gradient of that shape");
  return ones_like(out);
}

void prepare_roots(const variable_list& outputs, const variable_list& grads,
                   std::vector<Edge>& roots, variable_list& root_grads, const char* fn) {
  IGNIS_CHECK(grads.empty() || grads.size() == outputs.size(), fn, ": got ", outputs.size(),
              " outputs but ", grads.size(), " gradients");
  for (size_t i = 0; i < outputs.size(); ++i) {
    const Tensor& out = outputs[i];
    IGNIS_CHECK(out.defined(), fn, ": output ", i, " is an undefined tensor");
    IGNIS_CHECK(out.requires_grad(), fn, ": element ", i,
                " of tensors does not require grad "
                "and does not have a grad_fn");
    roots.push_back(gradient_edge(out));
    root_grads.push_back(root_grad(out, grads.empty() ? Tensor() : grads[i], i));
  }
}
}  // namespace

bool backward_keeps_graph() { return t_keep_graph; }
bool backward_accumulates() { return t_accumulates; }

void queue_callback(std::function<void()> fn) {
  IGNIS_CHECK(t_callbacks != nullptr,
              "queue_callback: no backward is running on this thread "
              "(queue callbacks from a hook during backward)");
  t_callbacks->push_back(std::move(fn));
}

bool is_anomaly_enabled() { return anomaly_enabled; }
void set_anomaly_enabled(bool enabled) { anomaly_enabled = enabled; }

void backward(const variable_list& tensors, const variable_list& grad_tensors,
              std::optional<bool> retain_graph, bool create_graph) {
  std::vector<Edge> roots;
  variable_list root_grads;
  prepare_roots(tensors, grad_tensors, roots, root_grads, "backward");
  execute(roots, root_grads, retain_graph.value_or(create_graph), create_graph, nullptr);
}

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, std::optional<bool> retain_graph,
                   bool create_graph, bool allow_unused) {
  std::vector<Edge> roots;
  variable_list root_grads;
  prepare_roots(outputs, grad_outputs, roots, root_grads, "grad");
  std::vector<Capture> captures;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& in = inputs[i];
    IGNIS_CHECK(in.defined() && in.requires_grad(), "grad: input ", i, " does not require grad");
    Edge e = gradient_edge(in);
    captures.push_back({e.fn.get(), e.input_nr, in.is_leaf(), Tensor()});
  }
  // Keep leaf accumulators alive for the duration (gradient_edge may have just created them).
  std::vector<std::shared_ptr<Node>> keep;
  for (const Tensor& in : inputs) keep.push_back(gradient_edge(in).fn);
  execute(roots, root_grads, retain_graph.value_or(create_graph), create_graph, &captures);
  variable_list result;
  for (size_t i = 0; i < captures.size(); ++i) {
    IGNIS_CHECK(captures[i].grad.defined() || allow_unused, "grad: input ", i,
                " was not used in the graph (pass allow_unused=true, or {.allow_unused = true}, to "
                "get an undefined gradient for it)");
    Tensor g = captures[i].grad;
    if (g.defined() && !create_graph) g = g.detach();
    result.push_back(g);
  }
  return result;
}

variable_list grad(const variable_list& outputs, const variable_list& inputs,
                   const variable_list& grad_outputs, const GradOptions& options) {
  return grad(outputs, inputs, grad_outputs, options.retain_graph, options.create_graph,
              options.allow_unused);
}

variable_list AccumulateGrad::apply(variable_list&& grads) {
  const Tensor leaf = this->leaf();
  if (!leaf.defined()) return {};  // the leaf is gone: no one can see its gradient
  Tensor g = std::move(grads[0]);
  run_leaf_hooks(leaf, g);
  if (!g.defined()) return {};
  AutogradMeta& m = leaf.impl()->ensure_autograd();
  if (!m.grad.defined()) {
    if (create_graph) {
      m.grad = g;
    } else {
      // Own the gradient (later accumulation writes into it in place), channels-last when the
      // leaf is (PyTorch's gradient layout contract), else contiguous.
      NoGradGuard ng;
      const bool leaf_cl = is_channels_last(leaf);
      const bool leaf_layout =
          g.is_contiguous() ? !leaf_cl : leaf_cl && g.strides().equals(leaf.strides());
      if (g.impl_ptr().use_count() <= 2 && g.impl()->storage().use_count() == 1 && leaf_layout) {
        m.grad = g.detach();
      } else {
        m.grad = make_tensor_like(leaf, g.sizes(), g.dtype(), g.device());
        copy_into(m.grad, g);
      }
    }
  } else if (create_graph) {
    m.grad = add(m.grad, g);
  } else {
    NoGradGuard ng;
    m.grad.add_(g);
  }
  for (size_t i = 0; i < post_hooks.size(); ++i) post_hooks[i].second(leaf);
  return {};
}

}  // namespace ignis::autograd
