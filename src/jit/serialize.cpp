// Saving and loading graphs: one safetensors file whose tensors are the graph's held values and
// whose metadata holds the graph as JSON (docs/graph-mode.md, "The file format"). The loader
// treats the file as untrusted input: every name, op, argument, dtype and shape is checked, and
// the graph is run once on the meta device to check every node's recorded output.
#include "ignis/serialize.h"

#include <cinttypes>
#include <cmath>
#include <cstdio>
#include <set>
#include <sstream>
#include <unordered_map>

#include "core/schema_default.h"
#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "io/json.h"
#include "jit/serialize.h"

#include "core/schema_default.h"

namespace ignis::jit {

namespace {

// Limits on what a file may declare (far above any real model's graph).
constexpr size_t kMaxValues = 1'000'000;
constexpr size_t kMaxNodes = 1'000'000;
constexpr size_t kMaxNameBytes = 256;
constexpr size_t kMaxDims = 16;
constexpr size_t kMaxListLen = 1024;
constexpr size_t kMaxStringBytes = 1024;
constexpr int64_t kMaxAttrInt = int64_t{1} << 48;

// ---- writing

void put_double(std::ostringstream& os, double d) {
  if (std::isnan(d)) {
    os << "\"nan\"";
  } else if (std::isinf(d)) {
    os << (d > 0 ? "\"inf\"" : "\"-inf\"");
  } else {
    char buf[40];
    std::snprintf(buf, sizeof(buf), "%.17g", d);
    os << buf;
  }
}

std::string memory_format_name(MemoryFormat m) {
  return m == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous_format";
}

void put_attr(std::ostringstream& os, const op::IValue& v) {
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          os << "null";
        } else if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>>) {
          IGNIS_CHECK(false, "graph save: a tensor held as an attribute");
        } else if constexpr (std::is_same_v<T, int64_t>) {
          os << x;
        } else if constexpr (std::is_same_v<T, double>) {
          put_double(os, x);
        } else if constexpr (std::is_same_v<T, bool>) {
          os << (x ? "true" : "false");
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << x[i];
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) os << (i ? "," : "") << (x[i] ? "true" : "false");
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          os << "[";
          for (size_t i = 0; i < x.size(); ++i) {
            if (i) os << ",";
            put_double(os, x[i]);
          }
          os << "]";
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (x.is_floating_point()) {
            os << "{\"float\":";
            put_double(os, x.template to<double>());
            os << "}";
          } else if (x.is_integral()) {
            os << "{\"int\":" << x.template to<int64_t>() << "}";
          } else {
            os << "{\"bool\":" << (x.template to<bool>() ? "true" : "false") << "}";
          }
        } else if constexpr (std::is_same_v<T, DType>) {
          os << json::quote(dtype_name(x));
        } else if constexpr (std::is_same_v<T, Device>) {
          os << json::quote(x.str());
        } else if constexpr (std::is_same_v<T, std::string>) {
          os << json::quote(x);
        } else if constexpr (std::is_same_v<T, MemoryFormat>) {
          os << json::quote(memory_format_name(x));
        } else if constexpr (std::is_same_v<T, TensorOptions>) {
          os << "{\"dtype\":"
             << (x.has_dtype() ? json::quote(dtype_name(x.dtype())) : std::string("null"))
             << ",\"device\":" << json::quote(x.device().str())
             << ",\"requires_grad\":" << (x.requires_grad() ? "true" : "false") << "}";
        }
      },
      v.storage());
}

// ---- reading

struct Reader {
  std::string where;  // "graph file" or "<path>"

  template <class... A>
  [[noreturn]] void fail(const A&... a) const {
    std::ostringstream os;
    os << where << ": ";
    (os << ... << a);
    throw Error(os.str());
  }

  const json::Value& member(const json::Value& obj, std::string_view key,
                            const std::string& ctx) const {
    const json::Value* v = obj.find(key);
    if (v == nullptr) fail(ctx, " has no \"", key, "\"");
    return *v;
  }
  const json::Array& array(const json::Value& v, const std::string& ctx) const {
    if (v.kind != json::Value::Kind::Array) fail(ctx, " must be an array");
    return *v.arr;
  }
  const std::string& string(const json::Value& v, const std::string& ctx) const {
    if (v.kind != json::Value::Kind::String) fail(ctx, " must be a string");
    return v.str;
  }
  int64_t integer(const json::Value& v, const std::string& ctx) const {
    if (v.kind != json::Value::Kind::Number || !v.is_integer) fail(ctx, " must be an integer");
    return v.integer;
  }
  std::string name(const json::Value& v, const std::string& ctx) const {
    const std::string& s = string(v, ctx);
    if (s.empty() || s.size() > kMaxNameBytes) {
      fail(ctx, " must be a name of 1 to ", kMaxNameBytes, " bytes");
    }
    for (char c : s) {
      if (c <= ' ' || c > '~' || c == '%' || c == '"' || c == '\\') {
        fail(ctx, " '", json::printable(s),
             "' may hold only printable ASCII without spaces, "
             "'%', quotes or backslashes");
      }
    }
    return s;
  }
  DType dtype(const json::Value& v, const std::string& ctx) const {
    const std::string& s = string(v, ctx);
    for (DType t : {DType::Bool, DType::UInt8, DType::Int32, DType::Int64, DType::BFloat16,
                    DType::Float32, DType::Float64}) {
      if (dtype_name(t) == s) return t;
    }
    fail(ctx, ": unknown dtype '", json::printable(s), "'");
  }
  Device device(const json::Value& v, const std::string& ctx) const {
    const std::string& s = string(v, ctx);
    if (s == "cpu") return kCPU;
    fail(ctx, ": device '", json::printable(s),
         "' is not supported (graph files hold cpu graphs; load(path, device) moves them)");
  }
  double number(const json::Value& v, const std::string& ctx) const {
    if (v.kind == json::Value::Kind::Number) return v.number;
    if (v.kind == json::Value::Kind::String) {
      if (v.str == "nan") return std::nan("");
      if (v.str == "inf") return INFINITY;
      if (v.str == "-inf") return -INFINITY;
    }
    fail(ctx, " must be a number (or \"nan\", \"inf\", \"-inf\")");
  }
  int64_t attr_int(const json::Value& v, const std::string& ctx) const {
    const int64_t i = integer(v, ctx);
    if (i > kMaxAttrInt || i < -kMaxAttrInt) fail(ctx, ": ", i, " is out of range");
    return i;
  }
  const json::Array& list(const json::Value& v, const std::string& ctx) const {
    const json::Array& a = array(v, ctx);
    if (a.size() > kMaxListLen) fail(ctx, " has more than ", kMaxListLen, " elements");
    return a;
  }

  op::IValue attribute(const json::Value& v, op::ArgType t, const std::string& ctx) const {
    using AT = op::ArgType;
    const bool null = v.kind == json::Value::Kind::Null;
    switch (t) {
      case AT::OptionalInt:
      case AT::OptionalIntList:
      case AT::OptionalFloat:
      case AT::OptionalBool:
      case AT::OptionalScalar:
      case AT::OptionalScalarType:
      case AT::OptionalTensorOptions:
        if (null) return op::IValue();
        break;
      default: break;
    }
    switch (t) {
      case AT::Int:
      case AT::OptionalInt: return attr_int(v, ctx);
      case AT::IntList:
      case AT::OptionalIntList: {
        std::vector<int64_t> r;
        for (const json::Value& e : list(v, ctx)) r.push_back(attr_int(e, ctx + " element"));
        return r;
      }
      case AT::Float:
      case AT::OptionalFloat: return number(v, ctx);
      case AT::FloatList: {
        std::vector<double> r;
        for (const json::Value& e : list(v, ctx)) r.push_back(number(e, ctx + " element"));
        return r;
      }
      case AT::Bool:
      case AT::OptionalBool:
        if (v.kind != json::Value::Kind::Bool) fail(ctx, " must be true or false");
        return v.b;
      case AT::BoolList: {
        std::vector<bool> r;
        for (const json::Value& e : list(v, ctx)) {
          if (e.kind != json::Value::Kind::Bool) fail(ctx, " elements must be true or false");
          r.push_back(e.b);
        }
        return r;
      }
      case AT::Scalar:
      case AT::OptionalScalar: {
        if (v.kind != json::Value::Kind::Object || v.obj->size() != 1) {
          fail(ctx, " must be {\"int\": n}, {\"float\": x} or {\"bool\": b}");
        }
        const auto& [k, x] = v.obj->front();
        if (k == "int") return Scalar(attr_int(x, ctx));
        if (k == "float") return Scalar(number(x, ctx));
        if (k == "bool" && x.kind == json::Value::Kind::Bool) return Scalar(x.b);
        fail(ctx, " must be {\"int\": n}, {\"float\": x} or {\"bool\": b}");
      }
      case AT::ScalarType:
      case AT::OptionalScalarType: return dtype(v, ctx);
      case AT::Device: return device(v, ctx);
      case AT::String: {
        const std::string& s = string(v, ctx);
        if (s.size() > kMaxStringBytes) fail(ctx, " is longer than ", kMaxStringBytes, " bytes");
        for (char c : s) {
          if (c < ' ' || c > '~') fail(ctx, " may hold only printable ASCII");
        }
        return s;
      }
      case AT::MemoryFormat: {
        const std::string& s = string(v, ctx);
        if (s == "contiguous_format") return MemoryFormat::Contiguous;
        if (s == "channels_last") return MemoryFormat::ChannelsLast;
        fail(ctx, ": unknown memory format '", json::printable(s), "'");
      }
      case AT::TensorOptions:
      case AT::OptionalTensorOptions: {
        if (v.kind != json::Value::Kind::Object) fail(ctx, " must be an object");
        TensorOptions o;
        const json::Value& d = member(v, "dtype", ctx);
        if (d.kind != json::Value::Kind::Null) o = o.dtype(dtype(d, ctx + " dtype"));
        o = o.device(device(member(v, "device", ctx), ctx + " device"));
        const json::Value& rg = member(v, "requires_grad", ctx);
        if (rg.kind != json::Value::Kind::Bool) fail(ctx, " requires_grad must be true or false");
        return o.requires_grad(rg.b);
      }
      case AT::Tensor:
      case AT::OptionalTensor:
      case AT::TensorList:
      case AT::OptionalTensorList: break;
    }
    fail(ctx, ": not an attribute type");
  }
};

// Ops whose front end reads tensor data on the host (documented sync points): they cannot run
// on the meta device, so their outputs' recorded shapes are taken as given and their arguments
// are checked by the op itself when the graph runs.
bool reads_host_data(const std::string& op) {
  return op == "nll_loss" || op == "cross_entropy_loss" || op == "binary_cross_entropy";
}

// The graph on the meta device: runs each node through its front end (shape and dtype rules
// alone) and compares every output with what the file records.
void check_on_meta(const Graph& g, const Reader& r) {
  std::vector<Tensor> env(g.values.size());
  auto meta_of = [](const Value& v) {
    return empty(IntArrayRef(v.sizes.data(), v.sizes.size()), TensorOptions(v.dtype).device(kMeta));
  };
  for (size_t id = 0; id < g.values.size(); ++id)
    if (g.values[id].kind != ValueKind::Result) env[id] = meta_of(g.values[id]);
  NoGradGuard no_grad;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string ctx = "node " + std::to_string(i) + " (" + n.name() + ")";
    std::vector<op::IValue> args;
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor) {
        args.emplace_back(a.value >= 0 ? env[static_cast<size_t>(a.value)] : Tensor());
      } else if (a.kind == Arg::Kind::TensorList) {
        std::vector<Tensor> l;
        for (int v : a.values) l.push_back(v >= 0 ? env[static_cast<size_t>(v)] : Tensor());
        args.emplace_back(std::move(l));
      } else if (a.attr.is<Device>()) {
        args.emplace_back(kMeta);  // factories and copies create meta tensors here
      } else if (a.attr.is<TensorOptions>()) {
        args.emplace_back(a.attr.get<TensorOptions>().device(kMeta));
      } else {
        args.push_back(a.attr);
      }
    }
    std::vector<Tensor> outs;
    try {
      for (op::IValue& o : n.op->boxed(op::IValueView(args), *n.op)) {
        if (o.is<Tensor>()) outs.push_back(o.get<Tensor>());
        if (o.is<std::vector<Tensor>>())
          for (const Tensor& t : o.get<std::vector<Tensor>>()) outs.push_back(t);
      }
    } catch (const Error& e) {
      if (!reads_host_data(n.op->schema.name)) r.fail(ctx, ": ", e.what());
      outs.clear();
      for (int o : n.outputs) outs.push_back(meta_of(g.values[static_cast<size_t>(o)]));
    }
    if (outs.size() != n.outputs.size()) {
      r.fail(ctx, " returns ", outs.size(), " tensors but the file records ", n.outputs.size());
    }
    for (size_t k = 0; k < outs.size(); ++k) {
      const Value& v = g.values[static_cast<size_t>(n.outputs[k])];
      if (!outs[k].sizes().equals(v.sizes) || outs[k].dtype() != v.dtype) {
        r.fail(ctx, " gives ", outs[k].dtype(), shape_str(outs[k].sizes()),
               " but the file records %", v.name, " as ", v.dtype, shape_str(v.sizes));
      }
      env[static_cast<size_t>(n.outputs[k])] = outs[k];
    }
  }
}

Graph parse(std::string_view text, const std::map<std::string, Tensor>& tensors,
            const std::string& where) {
  Reader r{where};
  const json::Value root = json::parse(text, (where + " graph").c_str());
  if (root.kind != json::Value::Kind::Object) r.fail("the graph must be a JSON object");
  const int64_t version = r.integer(r.member(root, "version", "the graph"), "version");
  if (version != kGraphFormatVersion) {
    r.fail("graph format version ", version, " is not supported (this build reads version ",
           kGraphFormatVersion, ")");
  }
  Graph g;
  std::unordered_map<std::string, int> ids;
  const json::Array& values = r.array(r.member(root, "values", "the graph"), "values");
  if (values.size() > kMaxValues) r.fail("more than ", kMaxValues, " values");
  std::set<std::string> used_tensors;
  for (size_t i = 0; i < values.size(); ++i) {
    const json::Value& jv = values[i];
    std::string ctx = "value " + std::to_string(i);
    if (jv.kind != json::Value::Kind::Object) r.fail(ctx, " must be an object");
    Value v;
    v.name = r.name(r.member(jv, "name", ctx), ctx + " name");
    ctx += " (%" + v.name + ")";
    const std::string& kind = r.string(r.member(jv, "kind", ctx), ctx + " kind");
    bool known = false;
    for (ValueKind k : {ValueKind::Input, ValueKind::Parameter, ValueKind::Buffer,
                        ValueKind::Constant, ValueKind::Result}) {
      if (value_kind_name(k) == kind) {
        v.kind = k;
        known = true;
      }
    }
    if (!known) r.fail(ctx, ": unknown kind '", json::printable(kind), "'");
    v.dtype = r.dtype(r.member(jv, "dtype", ctx), ctx + " dtype");
    v.device = r.device(r.member(jv, "device", ctx), ctx + " device");
    const json::Array& shape = r.array(r.member(jv, "shape", ctx), ctx + " shape");
    if (shape.size() > kMaxDims) r.fail(ctx, " has more than ", kMaxDims, " dims");
    int64_t numel = 1;
    for (const json::Value& d : shape) {
      const int64_t s = r.integer(d, ctx + " shape");
      if (s < 0) r.fail(ctx, " has a negative size ", s);
      if (s > 0 && numel > (int64_t{1} << 48) / s) r.fail(ctx, " has too many elements");
      numel *= s;
      v.sizes.push_back(s);
    }
    if (!ids.emplace(v.name, static_cast<int>(i)).second) {
      r.fail(ctx, ": the name is used twice");
    }
    Tensor held;
    if (v.held()) {
      auto it = tensors.find(v.name);
      if (it == tensors.end()) r.fail(ctx, ": the file holds no tensor of that name");
      held = it->second;
      if (!held.sizes().equals(v.sizes) || held.dtype() != v.dtype) {
        r.fail(ctx, ": the tensor is ", held.dtype(), shape_str(held.sizes()),
               " but the graph declares ", v.dtype, shape_str(v.sizes));
      }
      if (v.kind == ValueKind::Parameter && is_floating_point(v.dtype)) held.requires_grad_(true);
      used_tensors.insert(v.name);
    }
    g.add_value(std::move(v), held);
  }
  for (const auto& [name, t] : tensors) {
    if (!used_tensors.count(name)) {
      r.fail("the file holds a tensor '", json::printable(name),
             "' that no value of the graph "
             "uses");
    }
  }
  auto ref = [&](const json::Value& v, const std::string& ctx) {
    const std::string& s = r.string(v, ctx);
    auto it = ids.find(s);
    if (it == ids.end()) r.fail(ctx, " refers to an unknown value '", json::printable(s), "'");
    return it->second;
  };
  for (const json::Value& v : r.array(r.member(root, "inputs", "the graph"), "inputs"))
    g.inputs.push_back(ref(v, "inputs"));
  const json::Array& nodes = r.array(r.member(root, "nodes", "the graph"), "nodes");
  if (nodes.size() > kMaxNodes) r.fail("more than ", kMaxNodes, " nodes");
  for (size_t i = 0; i < nodes.size(); ++i) {
    const json::Value& jn = nodes[i];
    std::string ctx = "node " + std::to_string(i);
    if (jn.kind != json::Value::Kind::Object) r.fail(ctx, " must be an object");
    const std::string& op_name = r.string(r.member(jn, "op", ctx), ctx + " op");
    Node n;
    n.op = op::find(op_name);
    if (n.op == nullptr) {
      r.fail(ctx, ": unknown op '", json::printable(op_name), "' (not in the registry)");
    }
    ctx += " (" + op_name + ")";
    for (const std::string& ret : n.op->schema.returns) {
      if (ret.rfind("Tensor", 0) != 0)
        r.fail(ctx, ": returns a host value, not allowed in a graph");
    }
    bool has_meta = n.op->kind != "kernel";
    for (const std::string& d : n.op->devices) has_meta |= d == "meta";
    if (!has_meta && n.op->schema.name != "one_hot") {
      r.fail(ctx, ": its output shape depends on tensor values, not allowed in a graph");
    }
    const json::Array& args = r.array(r.member(jn, "args", ctx), ctx + " args");
    const auto& schema_args = n.op->schema.arguments;
    // A file written before the op gained trailing arguments with defaults leaves them out.
    bool defaults = args.size() < schema_args.size();
    for (size_t k = args.size(); k < schema_args.size(); ++k)
      defaults = defaults && schema_args[k].default_value.has_value();
    if (args.size() != schema_args.size() && !defaults) {
      r.fail(ctx, " has ", args.size(), " arguments but its schema takes ", schema_args.size(),
             " (", n.op->schema.str(), ")");
    }
    for (size_t k = 0; k < args.size(); ++k) {
      const op::Argument& sa = schema_args[k];
      const std::string actx = ctx + " argument '" + sa.name + "'";
      if (sa.type == op::ArgType::TensorList || sa.type == op::ArgType::OptionalTensorList) {
        Arg a;
        a.kind = Arg::Kind::TensorList;
        const bool nones = sa.type == op::ArgType::OptionalTensorList;  // null entries allowed
        for (const json::Value& e : r.list(args[k], actx)) {
          a.values.push_back(nones && e.kind == json::Value::Kind::Null ? -1 : ref(e, actx));
        }
        n.args.push_back(std::move(a));
      } else if (sa.is_tensor()) {
        n.args.push_back(
            Arg::tensor(args[k].kind == json::Value::Kind::Null ? -1 : ref(args[k], actx)));
      } else {
        n.args.push_back(Arg::attribute(r.attribute(args[k], sa.type, actx)));
      }
    }
    for (size_t k = args.size(); k < schema_args.size(); ++k) {
      const op::Argument& sa = schema_args[k];
      if (sa.type == op::ArgType::TensorList || sa.type == op::ArgType::OptionalTensorList) {
        Arg a;  // an empty list
        a.kind = Arg::Kind::TensorList;
        n.args.push_back(std::move(a));
      } else if (sa.is_tensor()) {
        n.args.push_back(Arg::tensor(-1));  // a tensor's only default is None
      } else {
        n.args.push_back(Arg::attribute(op::detail::parse_default(sa)));
      }
    }
    if (n.op->schema.name == "one_hot") {
      const op::IValue& nc = n.args[1].attr;
      if (!nc.is<int64_t>() || nc.get<int64_t>() < 0) {
        r.fail(ctx, ": one_hot without num_classes has a data-dependent shape");
      }
    }
    for (const json::Value& o : r.array(r.member(jn, "outputs", ctx), ctx + " outputs"))
      n.outputs.push_back(ref(o, ctx + " outputs"));
    g.nodes.push_back(std::move(n));
  }
  for (const json::Value& v : r.array(r.member(root, "outputs", "the graph"), "outputs"))
    g.outputs.push_back(ref(v, "outputs"));
  try {
    g.lint();
  } catch (const Error& e) {
    r.fail(e.what());
  }
  check_on_meta(g, r);
  return g;
}

}  // namespace

std::string graph_to_json(const Graph& g) {
  g.lint();
  std::ostringstream os;
  os << "{\"version\":" << kGraphFormatVersion << ",\n\"values\":[";
  for (size_t i = 0; i < g.values.size(); ++i) {
    const Value& v = g.values[i];
    os << (i ? ",\n" : "\n") << "{\"name\":" << json::quote(v.name)
       << ",\"kind\":" << json::quote(value_kind_name(v.kind))
       << ",\"dtype\":" << json::quote(dtype_name(v.dtype))
       << ",\"device\":" << json::quote(v.device.str()) << ",\"shape\":[";
    for (size_t d = 0; d < v.sizes.size(); ++d) os << (d ? "," : "") << v.sizes[d];
    os << "]}";
  }
  auto names = [&](const std::vector<int>& ids) {
    std::string s = "[";
    for (size_t i = 0; i < ids.size(); ++i) {
      if (i) s += ",";
      s += ids[i] < 0 ? std::string("null") : json::quote(g.values[static_cast<size_t>(ids[i])].name);
    }
    return s + "]";
  };
  os << "],\n\"inputs\":" << names(g.inputs) << ",\n\"outputs\":" << names(g.outputs)
     << ",\n\"nodes\":[";
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    os << (i ? ",\n" : "\n") << "{\"op\":" << json::quote(n.name()) << ",\"args\":[";
    for (size_t k = 0; k < n.args.size(); ++k) {
      const Arg& a = n.args[k];
      if (k) os << ",";
      if (a.kind == Arg::Kind::Tensor) {
        os << (a.value < 0 ? std::string("null")
                           : json::quote(g.values[static_cast<size_t>(a.value)].name));
      } else if (a.kind == Arg::Kind::TensorList) {
        os << names(a.values);
      } else {
        put_attr(os, a.attr);
      }
    }
    os << "],\"outputs\":" << names(n.outputs) << "}";
  }
  os << "]}\n";
  return os.str();
}

Graph graph_from_json(std::string_view text, const std::map<std::string, Tensor>& tensors) {
  return parse(text, tensors, "graph");
}

void Graph::save(const std::string& path) const {
  lint();
  bool on_cpu = true;
  for (size_t id = 0; id < values.size(); ++id) {
    IGNIS_CHECK(!values[id].device.is_meta(), "graph save: %", values[id].name,
                " is on the meta device, which holds no data to save (Graph::to(kCPU) needs "
                "data too: trace the model on a real device)");
    on_cpu = on_cpu && values[id].device.is_cpu() &&
             (!values[id].held() || tensors[id].device().is_cpu());
  }
  if (!on_cpu) return to(kCPU).save(path);  // the file holds the CPU copy
  NamedTensorList held;
  for (size_t id = 0; id < values.size(); ++id) {
    if (values[id].held()) held.emplace_back(values[id].name, tensors[id].detach());
  }
  save_safetensors(path, held,
                   {{"format", "ignis.graph"},
                    {"ignis.graph.version", std::to_string(kGraphFormatVersion)},
                    {"ignis.graph", graph_to_json(*this)}});
}

namespace detail {

Graph graph_from_file(const SafetensorsFile& f, const std::string& path) {
  auto meta = [&](const char* key) -> const std::string& {
    auto it = f.metadata.find(key);
    IGNIS_CHECK(it != f.metadata.end(), path, ": not an ignis graph file (no '", key,
                "' in its metadata)");
    return it->second;
  };
  IGNIS_CHECK(meta("format") == "ignis.graph", path, ": not an ignis graph file (format '",
              json::printable(meta("format")), "')");
  const std::string& version = meta("ignis.graph.version");
  IGNIS_CHECK(version == std::to_string(kGraphFormatVersion), path, ": graph format version '",
              json::printable(version), "' is not supported (this build reads version ",
              kGraphFormatVersion, ")");
  std::map<std::string, Tensor> tensors;
  for (const auto& [name, t] : f.tensors) tensors[name] = t;
  return parse(meta("ignis.graph"), tensors, path);
}

}  // namespace detail

Graph load(const std::string& path, Device device) {
  Graph g = detail::graph_from_file(load_safetensors(path), path);
  return device.is_cpu() ? g : g.to(device);
}

}  // namespace ignis::jit
