// The op tracer (an interposer) and the replay of a trace through the registry.
#include "ignis/trace.h"

#include <cstdio>
#include <memory>
#include <sstream>
#include <unordered_map>

#include "core/tensor_impl.h"

namespace ignis::jit {

namespace {

class Tracer final : public op::Interposer {
 public:
  explicit Tracer(OpTrace& trace) : t_(trace) {}

  int add_input(const Tensor& x) {
    const int id = new_value(TraceValue::Kind::Input, static_cast<int>(t_.inputs.size()), x);
    t_.inputs.push_back(id);
    return id;
  }

  void around(op::Call& call, const std::function<void()>& next) override {
    if (depth_ > 0) {  // inside a traced op: part of it
      next();
      return;
    }
    TracedCall c;
    c.op = call.op.schema.full_name();
    for (const op::IValue& v : call.args) {
      c.tensor_args.push_back(-1);
      c.list_args.emplace_back();
      if (v.is<Tensor>()) {
        c.tensor_args.back() = value_of(v.get<Tensor>());
        c.args.emplace_back();  // the tensor itself is not kept in the call
      } else if (v.is<std::vector<Tensor>>()) {
        for (const Tensor& t : v.get<std::vector<Tensor>>())
          c.list_args.back().push_back(value_of(t));
        c.args.emplace_back(std::vector<Tensor>());
      } else {
        c.args.push_back(v);
      }
    }
    ++depth_;
    try {
      next();
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    for (const Tensor& out : call.output_tensors()) {
      // A new SSA value even for an in-place op's result (self after the write).
      c.outputs.push_back(new_value(TraceValue::Kind::Result, results_++, out));
    }
    t_.calls.push_back(std::move(c));
  }

  int value_of(const Tensor& t) {
    if (!t.defined()) return -1;
    auto it = ids_.find(t.impl());
    if (it != ids_.end()) return it->second;
    const int id = new_value(TraceValue::Kind::Constant, static_cast<int>(t_.constants.size()), t);
    t_.constants.push_back(t);
    return id;
  }

 private:
  int new_value(TraceValue::Kind kind, int index, const Tensor& t) {
    TraceValue v;
    v.kind = kind;
    v.index = index;
    v.sizes = Shape(t.sizes().begin(), t.sizes().end());
    v.dtype = t.dtype();
    const int id = static_cast<int>(t_.values.size());
    t_.values.push_back(std::move(v));
    ids_[t.impl()] = id;
    // So that no later tensor reuses this one's address while tracing. A weak reference: the
    // impl is freed with its last user, as in eager (its storage with it), but not its memory,
    // which holds the control block too (tensors are made by allocate_shared).
    alive_.push_back(t.impl_ptr());
    return id;
  }

  OpTrace& t_;
  int depth_ = 0;
  int results_ = 0;
  std::unordered_map<const TensorImpl*, int> ids_;
  std::vector<std::weak_ptr<TensorImpl>> alive_;
};

std::string value_type(const TraceValue& v) {
  std::ostringstream os;
  os << v.dtype << shape_str(v.sizes);
  return os.str();
}

}  // namespace

std::string TraceValue::name() const {
  char buf[32];
  const char* prefix = kind == Kind::Input ? "%x" : kind == Kind::Constant ? "%c" : "%";
  std::snprintf(buf, sizeof(buf), "%s%d", prefix, index);
  return buf;
}

OpTrace trace_ops(const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& fn,
                  const std::vector<Tensor>& example_inputs) {
  OpTrace trace;
  Tracer tracer(trace);
  for (const Tensor& x : example_inputs) tracer.add_input(x);
  std::vector<Tensor> outs;
  {
    op::InterposerGuard guard(&tracer);
    outs = fn(example_inputs);
  }
  for (const Tensor& o : outs) trace.outputs.push_back(tracer.value_of(o));
  return trace;
}

std::string OpTrace::str() const {
  std::ostringstream os;
  os << "trace(";
  for (size_t i = 0; i < inputs.size(); ++i) {
    const TraceValue& v = values[static_cast<size_t>(inputs[i])];
    os << (i ? ", " : "") << v.name() << " : " << value_type(v);
  }
  os << "):\n";
  auto name_of = [&](int id) {
    return id < 0 ? std::string("None") : values[static_cast<size_t>(id)].name();
  };
  for (const TracedCall& c : calls) {
    os << "  ";
    for (size_t i = 0; i < c.outputs.size(); ++i) {
      const TraceValue& v = values[static_cast<size_t>(c.outputs[i])];
      os << (i ? ", " : "") << v.name() << " : " << value_type(v);
    }
    os << (c.outputs.empty() ? "" : " = ") << c.op << "(";
    const op::Record* rec = op::find(c.op);
    for (size_t i = 0; i < c.args.size(); ++i) {
      os << (i ? ", " : "");
      const bool named = rec != nullptr && i < rec->schema.arguments.size() &&
                         !rec->schema.arguments[i].is_tensor();
      if (named) os << rec->schema.arguments[i].name << "=";
      if (c.tensor_args[i] >= 0 || (rec && i < rec->schema.arguments.size() &&
                                    rec->schema.arguments[i].type != op::ArgType::TensorList &&
                                    rec->schema.arguments[i].type !=
                                        op::ArgType::OptionalTensorList &&
                                    rec->schema.arguments[i].is_tensor())) {
        os << name_of(c.tensor_args[i]);
      } else if (c.args[i].is<std::vector<Tensor>>()) {
        os << "[";
        for (size_t k = 0; k < c.list_args[i].size(); ++k)
          os << (k ? ", " : "") << name_of(c.list_args[i][k]);
        os << "]";
      } else {
        os << c.args[i].str();
      }
    }
    os << ")\n";
  }
  os << "  return (";
  for (size_t i = 0; i < outputs.size(); ++i) os << (i ? ", " : "") << name_of(outputs[i]);
  os << ")\n";
  if (!constants.empty()) {
    os << "constants:";
    for (const TraceValue& v : values) {
      if (v.kind == TraceValue::Kind::Constant)
        os << " " << v.name() << " : " << value_type(v) << ";";
    }
    os << "\n";
  }
  return os.str();
}

std::vector<Tensor> OpTrace::replay(const std::vector<Tensor>& in) const {
  IGNIS_CHECK(in.size() == inputs.size(), "replay: the trace takes ", inputs.size(),
              " inputs but got ", in.size());
  std::vector<Tensor> env(values.size());
  for (size_t i = 0; i < inputs.size(); ++i) env[static_cast<size_t>(inputs[i])] = in[i];
  for (size_t id = 0; id < values.size(); ++id) {
    if (values[id].kind == TraceValue::Kind::Constant) {
      env[id] = constants[static_cast<size_t>(values[id].index)];
    }
  }
  auto get = [&](int id) { return id < 0 ? Tensor() : env[static_cast<size_t>(id)]; };
  for (const TracedCall& c : calls) {
    const op::Record* rec = op::find(c.op);
    IGNIS_CHECK(rec != nullptr, "replay: unknown op '", c.op,
                "' (not in the registry; see `ignis ops`)");
    IGNIS_CHECK(c.args.size() == rec->schema.arguments.size(), "replay: ", c.op,
                " was traced with ", c.args.size(), " arguments but its schema takes ",
                rec->schema.arguments.size(), " (", rec->schema.str(), ")");
    std::vector<op::IValue> args;
    args.reserve(c.args.size());
    for (size_t i = 0; i < c.args.size(); ++i) {
      if (c.tensor_args[i] >= 0) {
        args.emplace_back(get(c.tensor_args[i]));
      } else if (c.args[i].is<std::vector<Tensor>>()) {
        std::vector<Tensor> list;
        for (int id : c.list_args[i]) list.push_back(get(id));
        args.emplace_back(std::move(list));
      } else {
        args.push_back(c.args[i]);
      }
    }
    std::vector<op::IValue> outs = rec->boxed(op::IValueView(args), *rec);
    std::vector<Tensor> out_tensors;
    for (const op::IValue& v : outs) {
      if (v.is<Tensor>()) out_tensors.push_back(v.get<Tensor>());
      if (v.is<std::vector<Tensor>>()) {
        for (const Tensor& t : v.get<std::vector<Tensor>>()) out_tensors.push_back(t);
      }
    }
    IGNIS_CHECK(out_tensors.size() == c.outputs.size(), "replay: ", c.op, " returned ",
                out_tensors.size(), " tensors but the trace recorded ", c.outputs.size());
    for (size_t k = 0; k < c.outputs.size(); ++k)
      env[static_cast<size_t>(c.outputs[k])] = out_tensors[k];
  }
  std::vector<Tensor> result;
  for (int id : outputs) result.push_back(get(id));
  return result;
}

}  // namespace ignis::jit
