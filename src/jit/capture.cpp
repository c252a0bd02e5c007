// Capture: the graph tracer (an interposer on the registry's call path, plus a hook on host
// reads) and jit::compile's guarded cache of traced graphs.
#include <memory>
#include <sstream>
#include <unordered_map>
#include <unordered_set>

#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/jit.h"
#include "jit/host_read.h"

namespace ignis::jit {

namespace {

bool returns_host_value(const op::Record& rec) {
  for (const std::string& r : rec.schema.returns) {
    if (r.rfind("Tensor", 0) != 0) return true;
  }
  return false;
}

// An op whose output shape depends on the values of its inputs: a kernel op without a meta
// kernel (the meta device runs shape rules alone, and these have none), except one_hot with an
// explicit number of classes.
bool data_dependent_shape(const op::Call& call) {
  const op::Record& rec = call.op;
  if (rec.kind != "kernel") return false;
  for (const std::string& d : rec.devices)
    if (d == "meta") return false;
  if (rec.schema.name == "one_hot") {
    const op::IValue& n = call.arg("num_classes");
    return !(n.is<int64_t>() && n.get<int64_t>() >= 0);
  }
  return true;
}

class GraphTracer final : public op::Interposer, public detail::HostReadHook {
 public:
  GraphTracer(Graph& g, const std::vector<std::pair<std::string, Tensor>>& params,
              const std::vector<std::pair<std::string, Tensor>>& buffers)
      : g_(g) {
    for (const auto& [name, t] : params) named_[t.impl()] = {name, ValueKind::Parameter};
    for (const auto& [name, t] : buffers) named_[t.impl()] = {name, ValueKind::Buffer};
  }

  void add_input(const Tensor& x) {
    IGNIS_CHECK(x.defined(), "jit::trace: example input ", g_.inputs.size(), " is undefined");
    std::string name = "x";
    name += std::to_string(g_.inputs.size());
    const int id = new_value(ValueKind::Input, std::move(name), x, false);
    g_.inputs.push_back(id);
  }

  void around(op::Call& call, const std::function<void()>& next) override {
    if (data_dependent_shape(call)) {
      IGNIS_CHECK(false, "jit::trace: ", call.op.schema.full_name(),
                  depth_ > 0 ? " (called by " + outer_ + ")" : std::string(),
                  " has an output shape that depends on tensor values; a graph needs shapes known "
                  "at trace time");
    }
    if (depth_ > 0) {  // inside a traced op: part of it
      next();
      return;
    }
    const std::string name = call.op.schema.full_name();
    // Writes the tracer has not seen (code outside the registry) would be missing in the graph.
    const std::vector<Tensor> args = call.input_tensors();
    for (const Tensor& t : args) check_unseen_write(t);
    bool dynamic = call.op.kind == "random";  // a fresh draw on every run
    for (const Tensor& t : args) dynamic = dynamic || is_dynamic(t);
    if (returns_host_value(call.op)) {
      // A host value computed from constants alone is a constant: the call is not recorded.
      IGNIS_CHECK(!dynamic, "jit::trace: ", name, " returns a host value (",
                  call.op.schema.returns.empty() ? "" : call.op.schema.returns[0],
                  "): the traced function reads tensor data on the host, and a graph cannot "
                  "depend on tensor values");
      next();
      return;
    }
    Node n;
    n.op = &call.op;
    for (size_t i = 0; i < call.args.size(); ++i) {
      const op::IValue& v = call.args[i];
      const op::Argument& sa = call.op.schema.arguments[i];
      if (sa.type == op::ArgType::TensorList || sa.type == op::ArgType::OptionalTensorList) {
        Arg a;  // a None entry of a Tensor?[] is -1
        a.kind = Arg::Kind::TensorList;
        for (const Tensor& t : v.get<std::vector<Tensor>>()) a.values.push_back(value_of(t));
        n.args.push_back(std::move(a));
      } else if (sa.is_tensor()) {
        n.args.push_back(Arg::tensor(v.is<Tensor>() ? value_of(v.get<Tensor>()) : -1));
      } else {
        n.args.push_back(Arg::attribute(v));
      }
    }
    ++depth_;
    outer_ = name;
    try {
      next();
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    for (const Tensor& out : call.output_tensors()) {
      // A new SSA value even for an in-place op's result (self after the write).
      n.outputs.push_back(new_value(ValueKind::Result, std::to_string(results_++), out, false));
      producer_[n.outputs.back()] = name;
      if (dynamic) dynamic_.insert(n.outputs.back());
    }
    for (const Tensor& t : args) note_version(t);  // the op may have written its inputs
    g_.nodes.push_back(std::move(n));
  }

  /// Throws when `t`'s storage was written since the tracer last saw it, by code outside the
  /// registry (a graph would not repeat the write).
  void check_unseen_write(const Tensor& t) {
    if (!t.defined()) return;
    auto it = versions_.find(t.impl()->storage().get());
    if (it == versions_.end() || it->second == t.impl()->version()) return;
    auto id = ids_.find(t.impl());
    IGNIS_CHECK(false, "jit::trace: ",
                id != ids_.end() ? "%" + g_.values[static_cast<size_t>(id->second)].name
                                 : std::string("a tensor"),
                " was written in place by code the tracer does not see (not a registry op: a "
                "kernel called directly, or a write through data_ptr()); the graph would miss the "
                "write (write through registry ops: copy_, index_put_, scatter)");
  }

  void note_version(const Tensor& t) {
    if (!t.defined()) return;
    const std::shared_ptr<StorageImpl>& s = t.impl()->storage();
    auto [it, fresh] = versions_.try_emplace(s.get(), t.impl()->version());
    if (fresh) {
      alive_storages_.push_back(s);  // keys versions_: its address must not be reused either
    } else {
      it->second = t.impl()->version();
    }
  }

  /// Whether `t` depends on the graph's inputs, parameters, buffers or random draws (a value
  /// that can change between runs); constants and results computed from them alone do not.
  bool is_dynamic(const Tensor& t) const {
    if (!t.defined()) return false;
    auto it = ids_.find(t.impl());
    if (it != ids_.end()) return dynamic_.count(it->second) > 0;
    return named_.count(t.impl()) > 0;
  }

  void on_host_read(const Tensor& t, const char* what) override {
    if (depth_ > 0) return;  // an op reading its own operands (a documented sync point)
    if (!is_dynamic(t)) {
      // Computed from constants: the same at every run, so reading it is fine. data_ptr() may
      // also write (host data into a fresh `empty` tensor): from here on the graph uses the
      // tensor itself, as a constant, rather than recomputing it.
      auto it = ids_.find(t.impl());
      if (std::string_view(what) == "data_ptr" && it != ids_.end() &&
          g_.values[static_cast<size_t>(it->second)].kind == ValueKind::Result) {
        std::string name = "c";
        name += std::to_string(constants_++);
        new_value(ValueKind::Constant, std::move(name), t, true);
      }
      return;
    }
    auto it = ids_.find(t.impl());
    std::string which;
    if (it != ids_.end()) {
      const Value& v = g_.values[static_cast<size_t>(it->second)];
      auto p = producer_.find(it->second);
      which = "%" + v.name +
              (p != producer_.end() ? " (the output of " + p->second + ")"
                                    : " (" + std::string(value_kind_name(v.kind)) + ")");
    } else if (auto nit = named_.find(t.impl()); nit != named_.end()) {
      which =
          "%" + nit->second.first + " (" + std::string(value_kind_name(nit->second.second)) + ")";
    } else {
      return;  // a tensor the trace has not seen: host data being written into a new constant
    }
    IGNIS_CHECK(false, "jit::trace: ", what, "() reads ", which,
                " on the host while tracing; a graph cannot depend on tensor values (compute "
                "with tensor ops, or keep the host read out of the traced function)");
  }

  int value_of(const Tensor& t) {
    if (!t.defined()) return -1;
    auto it = ids_.find(t.impl());
    if (it != ids_.end()) return it->second;
    auto nit = named_.find(t.impl());
    if (nit != named_.end()) return new_value(nit->second.second, nit->second.first, t, true);
    std::string name = "c";
    name += std::to_string(constants_++);
    return new_value(ValueKind::Constant, std::move(name), t, true);
  }

 private:
  int new_value(ValueKind kind, std::string name, const Tensor& t, bool held) {
    Value v;
    v.kind = kind;
    v.name = std::move(name);
    v.sizes = Shape(t.sizes().begin(), t.sizes().end());
    v.dtype = t.dtype();
    v.device = t.device();
    const int id = g_.add_value(std::move(v), held ? t : Tensor());
    ids_[t.impl()] = id;
    if (kind == ValueKind::Input || kind == ValueKind::Parameter || kind == ValueKind::Buffer)
      dynamic_.insert(id);
    note_version(t);
    // So that no later tensor reuses this one's address while tracing. A weak reference: the
    // impl is freed with its last user, as in eager, and with it its storage (a trace's peak
    // memory is eager's), but not its memory, which holds the control block too (tensors are
    // made by allocate_shared).
    alive_.push_back(t.impl_ptr());
    return id;
  }

  Graph& g_;
  int depth_ = 0;
  int results_ = 0;
  int constants_ = 0;
  std::string outer_;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::unordered_map<const TensorImpl*, std::pair<std::string, ValueKind>> named_;
  std::unordered_map<int, std::string> producer_;
  std::unordered_set<int> dynamic_;
  std::unordered_map<const StorageImpl*, uint32_t> versions_;  // as last seen by the tracer
  std::vector<std::weak_ptr<TensorImpl>> alive_;
  std::vector<std::weak_ptr<StorageImpl>> alive_storages_;
};

// Installs the tracer's host-read hook for a scope.
class HostReadGuard {
 public:
  explicit HostReadGuard(detail::HostReadHook* h) : prev_(detail::tls_host_read_hook) {
    detail::tls_host_read_hook = h;
  }
  ~HostReadGuard() { detail::tls_host_read_hook = prev_; }
  HostReadGuard(const HostReadGuard&) = delete;
  HostReadGuard& operator=(const HostReadGuard&) = delete;

 private:
  detail::HostReadHook* prev_;
};

Graph trace_impl(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                 const std::vector<Tensor>& example_inputs,
                 const std::vector<std::pair<std::string, Tensor>>& params,
                 const std::vector<std::pair<std::string, Tensor>>& buffers,
                 std::vector<Tensor>* traced_outputs) {
  Graph g;
  GraphTracer tracer(g, params, buffers);
  for (const Tensor& x : example_inputs) tracer.add_input(x);
  std::vector<Tensor> outs;
  {
    op::InterposerGuard guard(&tracer);
    HostReadGuard hook(&tracer);
    outs = fn(example_inputs);
  }
  for (const Tensor& o : outs) {
    IGNIS_CHECK(o.defined(), "jit::trace: the traced function returned an undefined tensor");
    tracer.check_unseen_write(o);
    g.outputs.push_back(tracer.value_of(o));
  }
  g.lint();
  if (traced_outputs) *traced_outputs = std::move(outs);
  return g;
}

std::function<std::vector<Tensor>(const std::vector<Tensor>&)> module_fn(
    const std::shared_ptr<nn::Module>& m) {
  return [m](const std::vector<Tensor>& in) {
    IGNIS_CHECK(in.size() == 1, "jit::trace: ", m->type_name(), "::forward takes one tensor but ",
                in.size(), " example inputs were given (trace a function for other signatures)");
    return std::vector<Tensor>{m->forward(in[0])};
  };
}

}  // namespace

Graph trace(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
            const std::vector<Tensor>& example_inputs,
            const std::vector<std::pair<std::string, Tensor>>& parameters,
            const std::vector<std::pair<std::string, Tensor>>& buffers) {
  return trace_impl(fn, example_inputs, parameters, buffers, nullptr);
}

Graph trace(const std::shared_ptr<nn::Module>& module, const std::vector<Tensor>& example_inputs) {
  IGNIS_CHECK(module != nullptr, "jit::trace: the module is null");
  return trace_impl(module_fn(module), example_inputs, module->named_parameters(),
                    module->named_buffers(), nullptr);
}

// ---- compile

CompiledModule::CompiledModule(std::shared_ptr<nn::Module> module, CompileOptions opts)
    : module_(std::move(module)), opts_(opts) {
  IGNIS_CHECK(module_ != nullptr, "jit::compile: the module is null");
  register_module("module", module_);
  train(module_->is_training());
}

std::string CompiledModule::signature(const std::vector<Tensor>& inputs) const {
  std::ostringstream os;
  os << (module_->is_training() ? "train" : "eval");
  for (const Tensor& x : inputs) {
    IGNIS_CHECK(x.defined(), "jit::compile: an input is undefined");
    os << ";" << x.dtype() << shape_str(x.sizes()) << "@" << x.device().str();
  }
  return os.str();
}

bool CompiledModule::matches_last(const std::vector<Tensor>& inputs) const {
  return last_ != nullptr && last_training_ == module_->is_training() && last_->accepts(inputs);
}

std::vector<Tensor> CompiledModule::forward(const std::vector<Tensor>& inputs) {
  // The guard's fast path: the same signature as the previous call.
  if (matches_last(inputs)) return last_->run(inputs);
  const std::string key = signature(inputs);
  auto it = cache_.find(key);
  if (it != cache_.end()) {
    last_ = it->second.get();
    last_training_ = module_->is_training();
    return last_->run(inputs);
  }
  IGNIS_CHECK(!opts_.freeze || !module_->is_training(), "jit::compile: freeze needs ",
              module_->type_name(), " in eval mode (call eval() first)");
  // The traced call is the call: its outputs are returned, so that random ops and batch-norm
  // statistics advance once, as in eager.
  std::vector<Tensor> outs;
  auto g = std::make_shared<Graph>(trace_impl(
      module_fn(module_), inputs, module_->named_parameters(), module_->named_buffers(), &outs));
  if (opts_.freeze) {
    freeze(*g);
  } else {
    optimize(*g);
  }
  ++traces_;
  auto ex = std::make_unique<Executor>(std::move(g),
                                       ExecutorOptions{.parallel_branches = opts_.parallel_branches,
                                                       .branch_cost_model = opts_.branch_cost_model,
                                                       .memory_arena = opts_.memory_arena});
  last_ = ex.get();
  last_training_ = module_->is_training();
  cache_[key] = std::move(ex);
  return outs;
}

Tensor CompiledModule::forward(const Tensor& x) { return forward(std::vector<Tensor>{x})[0]; }

const Graph& CompiledModule::graph() const {
  IGNIS_CHECK(last_ != nullptr, "jit::compile: no graph yet (the module has not been called)");
  return last_->graph();
}

ArenaStats CompiledModule::arena_stats() const {
  IGNIS_CHECK(last_ != nullptr, "jit::compile: no graph yet (the module has not been called)");
  return last_->arena_stats();
}

std::shared_ptr<CompiledModule> compile(std::shared_ptr<nn::Module> module, CompileOptions opts) {
  return std::make_shared<CompiledModule>(std::move(module), opts);
}

}  // namespace ignis::jit
