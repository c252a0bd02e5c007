// op_table_dump: writes every registry call the op table's samples make, with its results and
// (in float64) the gradients of its differentiable inputs, as JSON lines — the input of
// tests/pytorch/diffcheck.py, which replays each call in PyTorch (torch.ops.aten.<op>.<overload>)
// and compares. Each call is also replayed with its floating inputs replaced by edge values
// (NaN, ±inf, ±0, domain edges, large magnitudes), where hand-written references say nothing.
//
//   op_table_dump OUT.jsonl [ENTRY_SUBSTRING]
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iostream>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/op_registry.h"
#include "op_table.h"

namespace ignis::testing {
namespace {

std::vector<Tensor> cast_floating(const std::vector<Tensor>& in, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) out.push_back(t.defined() && t.is_floating_point() ? t.to(dtype) : t);
  return out;
}

// ---- JSON writing

void number(std::ostream& os, double v) {
  if (std::isnan(v)) {
    os << "NaN";
  } else if (std::isinf(v)) {
    os << (v > 0 ? "Infinity" : "-Infinity");
  } else {
    char buf[40];
    std::snprintf(buf, sizeof buf, "%.17g", v);
    std::string s = buf;
    if (s.find_first_of(".e") == std::string::npos) s += ".0";  // stays a float in Python
    os << s;
  }
}

void string(std::ostream& os, std::string_view s) {
  os << '"';
  for (char c : s) {
    if (c == '"' || c == '\\') os << '\\' << c;
    else if (static_cast<unsigned char>(c) < 0x20) os << ' ';
    else os << c;
  }
  os << '"';
}

void tensor(std::ostream& os, const Tensor& t) {
  if (!t.defined()) {
    os << "null";
    return;
  }
  os << "{\"t\":\"tensor\",\"dtype\":\"" << dtype_name(t.dtype()) << "\",\"shape\":[";
  for (int64_t i = 0; i < t.dim(); ++i) os << (i ? "," : "") << t.size(i);
  os << "],\"data\":[";
  const std::vector<double> v = values(t);
  for (size_t i = 0; i < v.size(); ++i) {
    if (i) os << ',';
    if (t.is_floating_point()) number(os, v[i]);
    else os << static_cast<int64_t>(v[i]);
  }
  os << "]}";
}

void value(std::ostream& os, const op::IValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          os << "null";
        } else if constexpr (std::is_same_v<T, Tensor>) {
          tensor(os, x);
        } else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          os << "{\"t\":\"tensors\",\"v\":[";
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) os << ',';
            tensor(os, x[i]);
          }
          os << "]}";
        } else if constexpr (std::is_same_v<T, int64_t>) {
          os << x;
        } else if constexpr (std::is_same_v<T, double>) {
          number(os, x);
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>> ||
                             std::is_same_v<T, std::vector<bool>> ||
                             std::is_same_v<T, std::vector<double>>) {
          os << '[';
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) os << ',';
            if constexpr (std::is_same_v<T, std::vector<double>>) number(os, x[i]);
            else if constexpr (std::is_same_v<T, std::vector<bool>>) os << (x[i] ? "true" : "false");
            else os << x[i];
          }
          os << ']';
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (x.is_bool()) os << (x.template to<bool>() ? "true" : "false");
          else if (x.is_integral()) os << x.to_int();
          else number(os, x.to_double());
        } else if constexpr (std::is_same_v<T, DType>) {
          os << "{\"t\":\"dtype\",\"v\":\"" << dtype_name(x) << "\"}";
        } else if constexpr (std::is_same_v<T, Device>) {
          os << "{\"t\":\"device\",\"v\":";
          string(os, x.str());
          os << '}';
        } else if constexpr (std::is_same_v<T, std::string>) {
          string(os, x);
        } else if constexpr (std::is_same_v<T, MemoryFormat>) {
          os << "{\"t\":\"memory_format\",\"v\":\""
             << (x == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous") << "\"}";
        } else if constexpr (std::is_same_v<T, TensorOptions>) {
          os << "{\"t\":\"options\",\"dtype\":";
          if (x.has_dtype()) os << '"' << dtype_name(x.dtype()) << '"';
          else os << "null";
          os << ",\"device\":";
          string(os, x.device().str());
          os << '}';
        }
      },
      v.storage());
}

// ---- recording the calls a sample makes

struct Recorded {
  const op::Record* op;
  std::vector<op::IValue> args;  // inputs as they were before the call (cloned)
  std::vector<op::IValue> outputs;
};

op::IValue snapshot(const op::IValue& v) {
  if (v.is<Tensor>() && v.get<Tensor>().defined()) return v.get<Tensor>().detach().clone();
  if (v.is<std::vector<Tensor>>()) {
    std::vector<Tensor> c;
    for (const Tensor& t : v.get<std::vector<Tensor>>())
      c.push_back(t.defined() ? t.detach().clone() : t);
    return c;
  }
  return v;
}

// Records the outermost calls only: what a composite calls inside is its own business.
class Recorder final : public op::Interposer {
 public:
  std::vector<Recorded> calls;
  void around(op::Call& call, const std::function<void()>& next) override {
    if (depth_ > 0) {
      next();
      return;
    }
    Recorded r{&call.op, {}, {}};
    for (const op::IValue& a : call.args) r.args.push_back(snapshot(a));
    ++depth_;
    try {
      next();
    } catch (...) {
      --depth_;
      throw;
    }
    --depth_;
    for (const op::IValue& o : call.outputs) r.outputs.push_back(snapshot(o));
    calls.push_back(std::move(r));
  }

 private:
  int depth_ = 0;
};

bool is_inplace(const op::Record& rec) {
  for (const std::string& r : rec.schema.returns)
    if (r.find('!') != std::string::npos) return true;
  return rec.schema.name.back() == '_';
}

bool floating_tensor(const op::IValue& v) {
  return v.is<Tensor>() && v.get<Tensor>().defined() && v.get<Tensor>().is_floating_point();
}

// Deterministic weights for the gradient's vector-Jacobian product (sum(out * w)): not all ones,
// so that ops whose outputs sum to a constant (softmax) still have a gradient to compare.
Tensor weights_like(const Tensor& t) {
  std::vector<double> w(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < w.size(); ++i) w[i] = std::cos(0.7 * static_cast<double>(i) + 0.3);
  return from_values(w, t.sizes());
}

// Gradients of sum(out_k * w_k) over the floating outputs with respect to every floating tensor
// argument, in float64. Empty when the op is not differentiable here.
struct Grads {
  std::vector<Tensor> weights;
  std::vector<int> arg_index;
  std::vector<Tensor> grads;
  std::string error;
};

Grads gradients(const Recorded& r) {
  Grads g;
  if (!r.op->differentiable || is_inplace(*r.op)) return g;
  std::vector<op::IValue> args;
  std::vector<Tensor> leaves;
  for (size_t i = 0; i < r.args.size(); ++i) {
    if (floating_tensor(r.args[i]) && r.args[i].get<Tensor>().dtype() == kFloat64) {
      Tensor leaf = r.args[i].get<Tensor>().detach().clone().requires_grad_(true);
      args.emplace_back(leaf);
      leaves.push_back(leaf);
      g.arg_index.push_back(static_cast<int>(i));
    } else {
      args.push_back(r.args[i]);
    }
  }
  if (leaves.empty()) return g;
  try {
    std::vector<op::IValue> outs = op::call_boxed(r.op->schema.full_name(), args);
    Tensor loss;
    for (const op::IValue& o : outs) {
      if (!floating_tensor(o) || !o.get<Tensor>().requires_grad()) {
        g.weights.emplace_back();
        continue;
      }
      const Tensor& out = o.get<Tensor>();
      Tensor w = weights_like(out);
      g.weights.push_back(w);
      Tensor term = (out * w).sum();
      loss = loss.defined() ? loss + term : term;
    }
    if (!loss.defined()) return Grads{};
    g.grads = autograd::grad({loss}, leaves, {}, false, false, true);
  } catch (const std::exception& e) {
    g.error = e.what();
  }
  return g;
}

// Edge values of floating inputs, cycled through each input with a different offset so that
// pairs of inputs meet in different combinations.
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<double> kEdges = {std::nan(""), kInf, -kInf, 0.0,   -0.0,  1.0,   -1.0,
                                    0.5,          -0.5, 2.0,   1e-30, 88.8,  -88.8, 1e30,
                                    -1e30,        3000, -3000, 1e-7,  0.999, -0.999};

op::IValue edge_tensor(const Tensor& t, size_t offset) {
  std::vector<double> v(static_cast<size_t>(t.numel()));
  for (size_t i = 0; i < v.size(); ++i) v[i] = kEdges[(i * 7 + offset * 3) % kEdges.size()];
  return from_values(v, t.sizes()).to(t.dtype());
}

class Writer {
 public:
  explicit Writer(std::ostream& os) : os_(os) {}

  void call(const std::string& entry, const std::string& sample, const std::string& variant,
            const op::Record& rec, const std::vector<op::IValue>& args,
            const std::vector<op::IValue>* outputs, const std::string& error, const Grads* g) {
    os_ << "{\"entry\":";
    string(os_, entry);
    os_ << ",\"sample\":";
    string(os_, sample);
    os_ << ",\"variant\":\"" << variant << "\",\"op\":";
    string(os_, rec.schema.full_name());
    os_ << ",\"kind\":\"" << rec.kind << "\",\"names\":[";
    for (size_t i = 0; i < rec.schema.arguments.size(); ++i) {
      if (i) os_ << ',';
      string(os_, rec.schema.arguments[i].name);
    }
    os_ << "],\"kwonly\":[";
    for (size_t i = 0; i < rec.schema.arguments.size(); ++i)
      os_ << (i ? "," : "") << (rec.schema.arguments[i].keyword_only ? "true" : "false");
    os_ << "],\"args\":[";
    for (size_t i = 0; i < args.size(); ++i) {
      if (i) os_ << ',';
      value(os_, args[i]);
    }
    os_ << ']';
    if (outputs) {
      os_ << ",\"outputs\":[";
      for (size_t i = 0; i < outputs->size(); ++i) {
        if (i) os_ << ',';
        value(os_, (*outputs)[i]);
      }
      os_ << ']';
    }
    if (!error.empty()) {
      os_ << ",\"error\":";
      string(os_, error);
    }
    if (g && (!g->grads.empty() || !g->error.empty())) {
      os_ << ",\"grad\":{\"inputs\":[";
      for (size_t i = 0; i < g->arg_index.size(); ++i) os_ << (i ? "," : "") << g->arg_index[i];
      os_ << "],\"weights\":[";
      for (size_t i = 0; i < g->weights.size(); ++i) {
        if (i) os_ << ',';
        tensor(os_, g->weights[i]);
      }
      os_ << "],\"values\":[";
      for (size_t i = 0; i < g->grads.size(); ++i) {
        if (i) os_ << ',';
        tensor(os_, g->grads[i]);
      }
      os_ << ']';
      if (!g->error.empty()) {
        os_ << ",\"error\":";
        string(os_, g->error);
      }
      os_ << '}';
    }
    os_ << "}\n";
    ++lines_;
  }
  size_t lines() const { return lines_; }

 private:
  std::ostream& os_;
  size_t lines_ = 0;
};

// The same call with its first two arguments, where they are floating tensors (self and other,
// input and target, input and weight), replaced by edge values; further tensors (a loss's class
// weights, running statistics, biases) keep their sampled values.
void write_edge_variant(Writer& w, const OpInfo& info, const OpSample& s, const Recorded& r) {
  if (r.op->kind == "random" || r.op->kind == "factory") return;
  std::vector<op::IValue> args;
  size_t replaced = 0;
  for (const op::IValue& a : r.args) {
    if (args.size() < 2 && floating_tensor(a) && a.get<Tensor>().numel() > 0) {
      args.push_back(edge_tensor(a.get<Tensor>(), replaced++));
    } else {
      args.push_back(snapshot(a));
    }
  }
  if (replaced == 0) return;
  std::vector<op::IValue> inputs;
  for (const op::IValue& a : args) inputs.push_back(snapshot(a));
  try {
    std::vector<op::IValue> outs = op::call_boxed(r.op->schema.full_name(), args);
    Recorded edge{r.op, inputs, outs};
    Grads g;
    if (!inputs.empty() && floating_tensor(inputs[0]) &&
        inputs[0].get<Tensor>().dtype() == kFloat64)
      g = gradients(edge);
    w.call(info.name, s.desc, "edge", *r.op, inputs, &outs, "", &g);
  } catch (const std::exception& e) {
    w.call(info.name, s.desc, "edge", *r.op, inputs, nullptr, e.what(), nullptr);
  }
}

int run(const std::string& path, const std::string& filter) {
  std::ofstream out(path);
  if (!out) {
    std::cerr << "op_table_dump: cannot write " << path << "\n";
    return 1;
  }
  Writer w(out);
  size_t entries = 0;
  for (const OpInfo& info : op_table()) {
    if (!filter.empty() && info.name.find(filter) == std::string::npos) continue;
    ++entries;
    for (const OpSample& s : info.samples()) {
      for (DType dt : {kFloat32, kFloat64}) {
        if (std::find(info.dtypes.begin(), info.dtypes.end(), dt) == info.dtypes.end()) continue;
        Recorder rec;
        try {
          op::InterposerGuard guard(&rec);
          (void)info.fn(cast_floating(s.inputs, dt));
        } catch (const std::exception& e) {
          std::cerr << "op_table_dump: " << info.name << " [" << s.desc << "]: " << e.what() << "\n";
          continue;
        }
        for (const Recorded& r : rec.calls) {
          Grads g = dt == kFloat64 ? gradients(r) : Grads{};
          w.call(info.name, s.desc, dtype_name(dt).data(), *r.op, r.args, &r.outputs, "", &g);
          write_edge_variant(w, info, s, r);
        }
      }
    }
  }
  std::cerr << "op_table_dump: " << entries << " entries, " << w.lines() << " calls -> " << path
            << "\n";
  return 0;
}

}  // namespace
}  // namespace ignis::testing

int main(int argc, char** argv) {
  if (argc < 2 || argc > 3) {
    std::cerr << "usage: op_table_dump OUT.jsonl [ENTRY_SUBSTRING]\n";
    return 2;
  }
  return ignis::testing::run(argv[1], argc == 3 ? argv[2] : "");
}
