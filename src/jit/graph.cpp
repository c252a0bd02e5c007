// The graph IR: printing, invariants, editing helpers and the executor.
#include <omp.h>

#include <algorithm>
#include <cstdio>
#include <exception>
#include <sstream>
#include <unordered_set>

#include "autograd/saved_hooks.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/allocator.h"
#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/jit.h"
#include "jit/branch_plan.h"
#include "jit/direct.h"
#include "jit/host_read.h"
#include "jit/passes.h"
#include "jit/planned_arena.h"

namespace ignis::jit {

namespace detail {
thread_local constinit HostReadHook* tls_host_read_hook __attribute__((tls_model("initial-exec"))) =
    nullptr;
}  // namespace detail

std::string_view value_kind_name(ValueKind k) {
  switch (k) {
    case ValueKind::Input: return "input";
    case ValueKind::Parameter: return "parameter";
    case ValueKind::Buffer: return "buffer";
    case ValueKind::Constant: return "constant";
    case ValueKind::Result: return "result";
  }
  return "?";
}

std::string Node::name() const { return op ? op->schema.full_name() : "<no op>"; }

std::vector<int> Node::inputs() const {
  std::vector<int> r;
  for (const Arg& a : args) {
    if (a.kind == Arg::Kind::Tensor && a.value >= 0) r.push_back(a.value);
    if (a.kind == Arg::Kind::TensorList)
      for (int v : a.values)
        if (v >= 0) r.push_back(v);
  }
  return r;
}

namespace {

std::string type_str(const Value& v) {
  std::ostringstream os;
  os << v.dtype << shape_str(v.sizes);
  if (!v.device.is_cpu()) os << " @" << v.device.str();
  return os.str();
}

}  // namespace

std::string Graph::str() const {
  std::ostringstream os;
  auto name_of = [&](int id) {
    return id < 0 ? std::string("None") : "%" + values[static_cast<size_t>(id)].name;
  };
  os << "graph(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = values[static_cast<size_t>(inputs[i])];
    os << (i ? ", " : "") << "%" << v.name << " : " << type_str(v);
  }
  os << "):\n";
  for (const Node& n : nodes) {
    os << "  ";
    for (size_t i = 0; i < n.outputs.size(); ++i) {
      const Value& v = values[static_cast<size_t>(n.outputs[i])];
      os << (i ? ", " : "") << "%" << v.name << " : " << type_str(v);
    }
    os << (n.outputs.empty() ? "" : " = ") << n.name() << "(";
    for (size_t i = 0; i < n.args.size(); ++i) {
      const Arg& a = n.args[i];
      os << (i ? ", " : "");
      if (a.kind == Arg::Kind::Tensor) {
        os << name_of(a.value);
      } else if (a.kind == Arg::Kind::TensorList) {
        os << "[";
        for (size_t k = 0; k < a.values.size(); ++k) os << (k ? ", " : "") << name_of(a.values[k]);
        os << "]";
      } else {
        if (n.op && i < n.op->schema.arguments.size()) os << n.op->schema.arguments[i].name << "=";
        os << a.attr.str();
      }
    }
    os << ")\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << name_of(outputs[i]);
  os << ")\n";
  for (ValueKind k : {ValueKind::Parameter, ValueKind::Buffer, ValueKind::Constant}) {
    bool first = true;
    for (const Value& v : values) {
      if (v.kind != k) continue;
      os << (first ? std::string(value_kind_name(k)) + "s:" : ";") << " %" << v.name << " : "
         << type_str(v);
      first = false;
    }
    if (!first) os << "\n";
  }
  return os.str();
}

void Graph::lint() const {
  const size_t nv = values.size();
  IGNIS_CHECK(tensors.size() == nv, "graph: ", nv, " values but ", tensors.size(), " tensor slots");
  {
    std::unordered_set<std::string_view> names;
    for (const Value& v : values) {
      IGNIS_CHECK(names.insert(v.name).second, "graph: the name %", v.name,
                  " is used by two values");
    }
  }
  std::vector<char> defined(nv, 0);
  auto check_ref = [&](int id, const std::string& where) {
    IGNIS_CHECK(id >= 0 && static_cast<size_t>(id) < nv, "graph: ", where, " refers to value ", id,
                " but the graph has ", nv, " values");
    IGNIS_CHECK(defined[static_cast<size_t>(id)], "graph: ", where, " uses %",
                values[static_cast<size_t>(id)].name, " before it is defined");
  };
  for (int id : inputs) {
    IGNIS_CHECK(id >= 0 && static_cast<size_t>(id) < nv, "graph: input refers to value ", id,
                " but the graph has ", nv, " values");
    IGNIS_CHECK(values[static_cast<size_t>(id)].kind == ValueKind::Input, "graph: input %",
                values[static_cast<size_t>(id)].name, " is a ",
                value_kind_name(values[static_cast<size_t>(id)].kind), ", not an input");
    IGNIS_CHECK(!defined[static_cast<size_t>(id)], "graph: input %",
                values[static_cast<size_t>(id)].name, " is listed twice");
    defined[static_cast<size_t>(id)] = 1;
  }
  for (size_t id = 0; id < nv; ++id) {
    const Value& v = values[id];
    if (v.kind == ValueKind::Input) {
      IGNIS_CHECK(defined[id], "graph: %", v.name, " is an input value but not a graph input");
    }
    if (v.held()) {
      IGNIS_CHECK(tensors[id].defined(), "graph: ", value_kind_name(v.kind), " %", v.name,
                  " has no tensor");
      defined[id] = 1;
    }
  }
  for (size_t i = 0; i < nodes.size(); ++i) {
    const Node& n = nodes[i];
    const std::string where = "node " + std::to_string(i) + " (" + n.name() + ")";
    IGNIS_CHECK(n.op != nullptr, "graph: ", where, " has no op");
    IGNIS_CHECK(n.args.size() == n.op->schema.arguments.size(), "graph: ", where, " has ",
                n.args.size(), " arguments but its schema takes ", n.op->schema.arguments.size());
    for (size_t k = 0; k < n.args.size(); ++k) {
      const op::Argument& sa = n.op->schema.arguments[k];
      const Arg& a = n.args[k];
      const bool list = sa.type == op::ArgType::TensorList ||
                        sa.type == op::ArgType::OptionalTensorList;
      const Arg::Kind want = list             ? Arg::Kind::TensorList
                             : sa.is_tensor() ? Arg::Kind::Tensor
                                              : Arg::Kind::Attribute;
      IGNIS_CHECK(a.kind == want, "graph: ", where, " argument '", sa.name,
                  "' is of the wrong kind for its schema type ", op::arg_type_name(sa.type));
      if (a.kind == Arg::Kind::Tensor) {
        if (a.value >= 0) {
          check_ref(a.value, where);
        } else {
          IGNIS_CHECK(sa.type == op::ArgType::OptionalTensor, "graph: ", where, " argument '",
                      sa.name, "' is None but its type is ", op::arg_type_name(sa.type));
        }
      }
      if (a.kind == Arg::Kind::TensorList) {
        for (int v : a.values) {
          if (v >= 0) {
            check_ref(v, where);
          } else {
            IGNIS_CHECK(sa.type == op::ArgType::OptionalTensorList, "graph: ", where,
                        " argument '", sa.name, "' has a None entry but its type is ",
                        op::arg_type_name(sa.type));
          }
        }
      }
    }
    for (int o : n.outputs) {
      IGNIS_CHECK(o >= 0 && static_cast<size_t>(o) < nv, "graph: ", where, " defines value ", o,
                  " but the graph has ", nv, " values");
      IGNIS_CHECK(values[static_cast<size_t>(o)].kind == ValueKind::Result, "graph: ", where,
                  " defines %", values[static_cast<size_t>(o)].name, ", which is a ",
                  value_kind_name(values[static_cast<size_t>(o)].kind));
      IGNIS_CHECK(!defined[static_cast<size_t>(o)], "graph: ", where, " redefines %",
                  values[static_cast<size_t>(o)].name);
      defined[static_cast<size_t>(o)] = 1;
    }
  }
  for (int o : outputs) check_ref(o, "the graph's return");
}

int Graph::add_value(Value v, Tensor held) {
  values.push_back(std::move(v));
  tensors.push_back(std::move(held));
  return static_cast<int>(values.size()) - 1;
}

void Graph::replace_uses(int from, int to) {
  for (Node& n : nodes) {
    for (Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor && a.value == from) a.value = to;
      if (a.kind == Arg::Kind::TensorList)
        for (int& v : a.values)
          if (v == from) v = to;
    }
  }
  for (int& o : outputs)
    if (o == from) o = to;
}

std::vector<int> Graph::use_counts() const {
  std::vector<int> uses(values.size(), 0);
  for (const Node& n : nodes)
    for (int v : n.inputs()) ++uses[static_cast<size_t>(v)];
  for (int o : outputs) ++uses[static_cast<size_t>(o)];
  return uses;
}

void Graph::compact() {
  std::vector<char> keep(values.size(), 0);
  for (int i : inputs) keep[static_cast<size_t>(i)] = 1;
  for (const Node& n : nodes) {
    for (int v : n.inputs()) keep[static_cast<size_t>(v)] = 1;
    for (int v : n.outputs) keep[static_cast<size_t>(v)] = 1;
  }
  for (int o : outputs) keep[static_cast<size_t>(o)] = 1;
  std::vector<int> remap(values.size(), -1);
  std::vector<Value> nv;
  std::vector<Tensor> nt;
  for (size_t id = 0; id < values.size(); ++id) {
    if (!keep[id]) continue;
    remap[id] = static_cast<int>(nv.size());
    nv.push_back(std::move(values[id]));
    nt.push_back(std::move(tensors[id]));
  }
  auto m = [&](int id) { return id < 0 ? -1 : remap[static_cast<size_t>(id)]; };
  for (Node& n : nodes) {
    for (Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor) a.value = m(a.value);
      for (int& v : a.values) v = m(v);
    }
    for (int& v : n.outputs) v = m(v);
  }
  for (int& i : inputs) i = m(i);
  for (int& o : outputs) o = m(o);
  values = std::move(nv);
  tensors = std::move(nt);
  // Results numbered in node order, unnamed constants in value order.
  int r = 0;
  for (const Node& n : nodes)
    for (int v : n.outputs) values[static_cast<size_t>(v)].name = std::to_string(r++);
  int c = 0;
  for (Value& v : values) {
    if (v.kind == ValueKind::Constant && !v.name.empty() && v.name[0] == 'c' &&
        v.name.find('.') == std::string::npos) {
      v.name = std::string("c") + std::to_string(c++);
    }
  }
}

std::vector<std::pair<std::string, Tensor>> Graph::named_parameters() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t id = 0; id < values.size(); ++id)
    if (values[id].kind == ValueKind::Parameter) r.emplace_back(values[id].name, tensors[id]);
  return r;
}

std::vector<std::pair<std::string, Tensor>> Graph::named_buffers() const {
  std::vector<std::pair<std::string, Tensor>> r;
  for (size_t id = 0; id < values.size(); ++id)
    if (values[id].kind == ValueKind::Buffer) r.emplace_back(values[id].name, tensors[id]);
  return r;
}

int Graph::count(std::string_view full_name) const {
  int c = 0;
  for (const Node& n : nodes) c += n.name() == full_name;
  return c;
}

Graph Graph::to(Device device) const {
  Graph g = *this;
  for (Value& v : g.values) v.device = device;
  NoGradGuard no_grad;
  for (Tensor& t : g.tensors) {
    if (!t.defined() || t.device() == device) continue;
    const bool leaf = t.requires_grad();
    t = t.detach().to(device);
    if (leaf) t.requires_grad_(true);
  }
  for (Node& n : g.nodes) {
    for (Arg& a : n.args) {
      if (a.kind != Arg::Kind::Attribute) continue;
      if (a.attr.is<Device>()) {
        a.attr = op::IValue(device);
      } else if (a.attr.is<TensorOptions>()) {
        a.attr = op::IValue(a.attr.get<TensorOptions>().device(device));
      }
    }
  }
  return g;
}

std::vector<Tensor> Graph::run(const std::vector<Tensor>& in) const {
  // The executor shares the graph without owning it (the aliasing constructor, empty owner).
  Executor ex(std::shared_ptr<const Graph>(std::shared_ptr<const Graph>(), this));
  return ex.run(in);
}

// ---- executor

Executor::Executor(std::shared_ptr<const Graph> graph, ExecutorOptions opts)
    : graph_(std::move(graph)), opts_(opts) {
  const Graph& g = *graph_;
  g.lint();
  std::vector<int> last(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs()) last[static_cast<size_t>(v)] = static_cast<int>(i);
  std::vector<char> keep(g.values.size(), 0);
  for (int o : g.outputs) keep[static_cast<size_t>(o)] = 1;
  const std::vector<int> uses = g.use_counts();
  for (size_t id = 0; id < g.values.size(); ++id) keep[id] |= g.values[id].held();
  steps_.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    Step s;
    s.op = n.op;
    if (n.outputs.size() == 1) s.direct = detail::find_direct(*n.op);
    if (s.direct != nullptr) {
      s.state = detail::make_direct_state(g, n);
      // A packed weight this node alone reads (not an output) may be released after a run.
      const int w = s.state != nullptr ? n.args[1].value : -1;
      if (w >= 0 && uses[static_cast<size_t>(w)] == 1 &&
          g.values[static_cast<size_t>(w)].kind == ValueKind::Constant)
        s.weight = w;
    }
    s.outputs = n.outputs;
    for (const Arg& a : n.args) {
      s.frame_values.push_back(a.kind == Arg::Kind::Tensor ? a.value : -1);
      if (a.kind == Arg::Kind::Tensor) {
        s.frame.emplace_back(Tensor());
      } else if (a.kind == Arg::Kind::TensorList) {
        s.frame.emplace_back(std::vector<Tensor>());
      } else {
        s.frame.push_back(a.attr);
      }
    }
    for (int v : n.inputs()) {
      if (last[static_cast<size_t>(v)] == static_cast<int>(i) && !keep[static_cast<size_t>(v)]) {
        bool dup = false;
        for (int r : s.release) dup |= r == v;
        if (!dup) s.release.push_back(v);
      }
    }
    // Results nothing reads are freed at once.
    for (int v : n.outputs)
      if (last[static_cast<size_t>(v)] < 0 && !keep[static_cast<size_t>(v)]) s.release.push_back(v);
    steps_.push_back(std::move(s));
  }
  env_.resize(g.values.size());
  for (size_t id = 0; id < g.values.size(); ++id)
    if (g.values[id].held()) env_[id] = g.tensors[id];
  // Levels (branch_plan.h), and with parallel branches the groups the cost model runs them as.
  levels_ = detail::dependency_levels(g);
  if (opts_.parallel_branches && opts_.branch_cost_model)
    schedule_ = detail::plan_levels(g, levels_, omp_get_max_threads());
  else
    schedule_ = levels_;
  // Run by groups, a value is freed after the last group that reads it (a result nothing reads,
  // after its own group).
  std::vector<int> group(g.nodes.size(), 0);
  for (size_t k = 0; k < schedule_.size(); ++k)
    for (int i : schedule_[k]) group[static_cast<size_t>(i)] = static_cast<int>(k);
  std::vector<int> last_level(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    for (int v : g.nodes[i].inputs())
      last_level[static_cast<size_t>(v)] = std::max(last_level[static_cast<size_t>(v)], group[i]);
    for (int v : g.nodes[i].outputs)
      last_level[static_cast<size_t>(v)] = std::max(last_level[static_cast<size_t>(v)], group[i]);
  }
  level_release_.assign(schedule_.size(), {});
  for (size_t id = 0; id < g.values.size(); ++id) {
    if (keep[id] || last_level[id] < 0 || g.values[id].kind == ValueKind::Input) continue;
    level_release_[static_cast<size_t>(last_level[id])].push_back(static_cast<int>(id));
  }
}

void Executor::run_step(size_t i) {
  const Graph& g = *graph_;
  Step& s = steps_[i];
  const Node& n = g.nodes[i];
  if (s.direct != nullptr) {
    Tensor r = s.direct(n, env_, s.state.get());
    if (!r.defined() && s.weight >= 0) {  // a released weight that only its plain form serves
      rebuild_weight(i);
      r = s.direct(n, env_, s.state.get());
    }
    env_[static_cast<size_t>(s.outputs[0])] = std::move(r);
    return;
  }
  for (size_t k = 0; k < s.frame.size(); ++k) {
    const Arg& a = n.args[k];
    if (a.kind == Arg::Kind::Tensor) {
      s.frame[k] =
          a.value >= 0 ? op::IValue(env_[static_cast<size_t>(a.value)]) : op::IValue(Tensor());
    } else if (a.kind == Arg::Kind::TensorList) {
      std::vector<Tensor> list;
      list.reserve(a.values.size());
      for (int v : a.values) list.push_back(v >= 0 ? env_[static_cast<size_t>(v)] : Tensor());
      s.frame[k] = op::IValue(std::move(list));
    }
  }
  std::vector<op::IValue> outs = s.op->boxed(op::IValueView(s.frame), *s.op);
  size_t k = 0;
  for (op::IValue& o : outs) {
    if (o.is<Tensor>()) {
      IGNIS_CHECK(k < s.outputs.size(), "graph: node ", i, " (", n.name(),
                  ") returned more tensors than the graph records (", s.outputs.size(), ")");
      env_[static_cast<size_t>(s.outputs[k++])] = o.get<Tensor>();
    } else if (o.is<std::vector<Tensor>>()) {
      for (const Tensor& t : o.get<std::vector<Tensor>>()) {
        IGNIS_CHECK(k < s.outputs.size(), "graph: node ", i, " (", n.name(),
                    ") returned more tensors than the graph records (", s.outputs.size(), ")");
        env_[static_cast<size_t>(s.outputs[k++])] = t;
      }
    }
  }
  IGNIS_CHECK(k == s.outputs.size(), "graph: node ", i, " (", n.name(), ") returned ", k,
              " tensors but the graph records ", s.outputs.size());
  for (size_t a = 0; a < s.frame.size(); ++a) {
    if (s.frame_values[a] >= 0 || n.args[a].kind == Arg::Kind::TensorList)
      s.frame[a] = n.args[a].kind == Arg::Kind::TensorList ? op::IValue(std::vector<Tensor>())
                                                           : op::IValue(Tensor());
  }
}

std::vector<Tensor> Executor::run(const std::vector<Tensor>& in) {
  const Graph& g = *graph_;
  IGNIS_CHECK(in.size() == g.inputs.size(), "graph: takes ", g.inputs.size(), " inputs but got ",
              in.size());
  for (size_t i = 0; i < in.size(); ++i) {
    const Value& v = g.values[static_cast<size_t>(g.inputs[i])];
    IGNIS_CHECK(in[i].defined(), "graph: input %", v.name, " is undefined");
    IGNIS_CHECK(
        in[i].sizes().equals(v.sizes) && in[i].dtype() == v.dtype && in[i].device() == v.device,
        "graph: input %", v.name, " was traced as ", type_str(v), " but got ", in[i].dtype(),
        shape_str(in[i].sizes()), in[i].device().is_cpu() ? "" : " @" + in[i].device().str(),
        " (trace again for new shapes: jit::compile does)");
    env_[static_cast<size_t>(g.inputs[i])] = in[i];
  }
  detail::PlannedArena* arena = arena_for_run();
  struct AfterRun {  // after Clear (declared first): the run's values are gone by then
    Executor* e;
    bool ok = false;
    ~AfterRun() { e->arena_after_run(ok); }
  } after_run{this};
  struct Clear {  // on an error, no tensor of this run stays referenced
    Executor* e;
    bool done = false;
    ~Clear() {
      if (done) return;
      const Graph& g = *e->graph_;
      for (size_t id = 0; id < g.values.size(); ++id)
        if (!g.values[id].held()) e->env_[id] = Tensor();
      for (Step& s : e->steps_)
        for (size_t k = 0; k < s.frame.size(); ++k) {
          if (s.frame_values[k] >= 0) s.frame[k] = op::IValue(Tensor());
        }
    }
  } clear{this};
  // Saved-tensor hooks are the calling thread's: with them installed (non-reentrant activation
  // checkpointing, SaveOnCpu) every node runs on this thread, in order, so that each saved
  // tensor goes through them, in the same order each run.
  const bool parallel = opts_.parallel_branches && !op::detail::tls_state.interposing &&
                        omp_get_max_threads() > 1 && !omp_in_parallel() &&
                        !autograd::saved_hooks_active();
  if (!parallel) {
    for (size_t i = 0; i < steps_.size(); ++i) {
      {
        detail::ArenaScope scope(arena, static_cast<int>(i));
        run_step(i);
      }
      for (int v : steps_[i].release) env_[static_cast<size_t>(v)] = Tensor();
    }
  } else {
    const bool grad = is_grad_enabled();
    for (size_t li = 0; li < schedule_.size(); ++li) {
      const std::vector<int>& level = schedule_[li];
      if (level.size() == 1) {
        detail::ArenaScope scope(arena, level[0]);
        run_step(static_cast<size_t>(level[0]));
      } else {
        std::exception_ptr error;
        const int nodes = static_cast<int>(level.size());
#pragma omp parallel for schedule(dynamic, 1) num_threads(std::min(nodes, omp_get_max_threads()))
        for (int k = 0; k < nodes; ++k) {
          try {
            AutoGradMode mode(grad);  // grad mode is per thread
            detail::ArenaScope scope(arena, level[static_cast<size_t>(k)]);
            run_step(static_cast<size_t>(level[static_cast<size_t>(k)]));
          } catch (...) {
#pragma omp critical(ignis_jit_executor_error)
            if (!error) error = std::current_exception();
          }
        }
        if (error) std::rethrow_exception(error);
      }
      // Freed once the whole level is done: a value may be read by several of its nodes.
      for (int v : level_release_[li]) env_[static_cast<size_t>(v)] = Tensor();
    }
  }
  std::vector<Tensor> result;
  result.reserve(g.outputs.size());
  for (int o : g.outputs) result.push_back(env_[static_cast<size_t>(o)]);
  for (int id : g.inputs) env_[static_cast<size_t>(id)] = Tensor();
  for (int o : g.outputs)
    if (!g.values[static_cast<size_t>(o)].held()) env_[static_cast<size_t>(o)] = Tensor();
  clear.done = true;
  after_run.ok = true;
  release_packed_weights();
  return result;
}

namespace {
detail::PackedWeight* packed_of(const std::shared_ptr<void>& state) {
  return static_cast<detail::PackedWeight*>(state.get());
}
}  // namespace

void Executor::release_packed_weights() {
  // The graph must be this executor's alone (nobody can read its tensors), and each weight held
  // by the graph and env_ only, its storage by nothing else (no view of it elsewhere).
  if (own_ == nullptr && graph_.use_count() != 1) return;
  int64_t freed = 0;
  for (Step& s : steps_) {
    if (s.weight < 0) continue;
    detail::PackedWeight* pw = packed_of(s.state);
    Tensor& t = env_[static_cast<size_t>(s.weight)];
    if (pw->released || pw->keep_plain || !pw->unpack || !pw->packs_plain(t)) continue;
    if (t.impl_ptr().use_count() != 2 || t.impl()->storage().use_count() != 1) continue;
    if (own_ == nullptr) {
      own_ = std::make_shared<Graph>(*graph_);
      graph_ = own_;  // the caller's graph (ours alone) and its handles go
    }
    freed += static_cast<int64_t>(t.impl()->storage()->nbytes);
    own_->tensors[static_cast<size_t>(s.weight)] = Tensor();
    t = Tensor();
    pw->released = true;
    pw->data = nullptr;
  }
  // The weights' blocks would stay in the caching allocator, which holds them for reuse: give
  // them back to the system (once: weights are released after the first runs).
  if (freed > 0) empty_cache(kCPU);
}

void Executor::rebuild_weight(size_t i) const {
  const Step& s = steps_[i];
  detail::PackedWeight* pw = packed_of(s.state);
  if (!pw->released) return;
  // Not from the planned arena: the weight outlives the run.
  const ignis::detail::StorageHook saved = ignis::detail::tls_storage_hook;
  ignis::detail::tls_storage_hook = {nullptr, 0, 0};
  Tensor plain;
  try {
    plain = pw->unpack();
  } catch (...) {
    ignis::detail::tls_storage_hook = saved;
    throw;
  }
  ignis::detail::tls_storage_hook = saved;
  own_->tensors[static_cast<size_t>(s.weight)] = plain;
  env_[static_cast<size_t>(s.weight)] = plain;
  pw->released = false;
  pw->keep_plain = true;  // needed plain once: kept (a profiled run would rebuild it every run)
  pw->data = plain.data_ptr();
  pw->version = plain._version();
}

const Graph& Executor::graph() const {
  for (size_t i = 0; i < steps_.size(); ++i)
    if (steps_[i].weight >= 0) rebuild_weight(i);
  return *graph_;
}

bool Executor::accepts(const std::vector<Tensor>& inputs) const {
  const Graph& g = *graph_;
  if (inputs.size() != g.inputs.size()) return false;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Value& v = g.values[static_cast<size_t>(g.inputs[i])];
    if (!inputs[i].defined() || inputs[i].dtype() != v.dtype || inputs[i].device() != v.device ||
        !inputs[i].sizes().equals(v.sizes))
      return false;
  }
  return true;
}

int64_t Executor::released_weight_bytes() const {
  int64_t bytes = 0;
  for (const Step& s : steps_) {
    if (s.weight < 0 || !packed_of(s.state)->released) continue;
    const detail::PackedWeight& pw = *packed_of(s.state);
    int64_t n = 1;
    for (int64_t d : pw.sizes) n *= d;
    bytes += n * static_cast<int64_t>(element_size(pw.dtype));
  }
  return bytes;
}

detail::PlannedArena* Executor::arena_for_run() {
  if (!opts_.memory_arena) return nullptr;
  constexpr int kMaxRecordings = 3;
  ++runs_;
  const bool grad = is_grad_enabled();
  const bool planned = arena_ != nullptr && !arena_->recording();
  // The first run warms up (pre-packed weights, compiled kernels, primitive caches): what it
  // allocates once is not the pattern of the runs after it.
  if (runs_ >= 2 && recordings_ < kMaxRecordings &&
      (!planned || arena_missed_ || arena_grad_ != grad)) {
    arena_ = std::shared_ptr<detail::PlannedArena>(detail::PlannedArena::create(),
                                                   [](detail::PlannedArena* a) { a->release(); });
    arena_grad_ = grad;
    arena_missed_ = false;
    ++recordings_;
    return arena_.get();
  }
  // An arena that planned nothing (every allocation kept past the run: a training step of
  // linear layers saves all it makes) is not worth its bookkeeping.
  if (!planned || arena_->stats().planned == 0) return nullptr;
  arena_->begin_run();
  return arena_.get();
}

void Executor::arena_after_run(bool ok) {
  if (arena_ == nullptr) return;
  if (arena_->recording()) {
    if (ok) {
      arena_->finish_recording();
    } else {
      arena_.reset();  // a failed run's pattern is not planned; the next run records
    }
    return;
  }
  arena_missed_ = arena_->stats().missed > 0;
}

ArenaStats Executor::arena_stats() const {
  ArenaStats s = arena_ != nullptr ? arena_->stats() : ArenaStats{};
  s.recordings = recordings_;
  return s;
}

}  // namespace ignis::jit
