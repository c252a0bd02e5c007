// The registry of op records, schema parsing, boxed values and the interposer stack.
#include <algorithm>
#include <cctype>
#include <map>
#include <mutex>
#include <sstream>

#include "core/op_call.h"
#include "core/schema_default.h"
#include "core/tensor_impl.h"

namespace ignis::op {

namespace {

struct TypeName {
  ArgType type;
  std::string_view name;
};
constexpr TypeName kTypeNames[] = {
    {ArgType::Tensor, "Tensor"},
    {ArgType::OptionalTensor, "Tensor?"},
    {ArgType::TensorList, "Tensor[]"},
    {ArgType::Int, "int"},
    {ArgType::OptionalInt, "int?"},
    {ArgType::IntList, "int[]"},
    {ArgType::OptionalIntList, "int[]?"},
    {ArgType::Float, "float"},
    {ArgType::OptionalFloat, "float?"},
    {ArgType::FloatList, "float[]"},
    {ArgType::Bool, "bool"},
    {ArgType::OptionalBool, "bool?"},
    {ArgType::BoolList, "bool[]"},
    {ArgType::Scalar, "Scalar"},
    {ArgType::OptionalScalar, "Scalar?"},
    {ArgType::ScalarType, "ScalarType"},
    {ArgType::OptionalScalarType, "ScalarType?"},
    {ArgType::Device, "Device"},
    {ArgType::String, "str"},
    {ArgType::MemoryFormat, "MemoryFormat"},
    {ArgType::TensorOptions, "TensorOptions"},
    {ArgType::OptionalTensorOptions, "TensorOptions?"},
    {ArgType::OptionalTensorList, "Tensor?[]"},
};

std::string_view trim(std::string_view s) {
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.front()))) s.remove_prefix(1);
  while (!s.empty() && std::isspace(static_cast<unsigned char>(s.back()))) s.remove_suffix(1);
  return s;
}

/// Splits at top-level commas (not inside brackets or parentheses).
std::vector<std::string_view> split_args(std::string_view s) {
  std::vector<std::string_view> parts;
  int depth = 0;
  size_t start = 0;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == '[' || s[i] == '(') ++depth;
    if (s[i] == ']' || s[i] == ')') --depth;
    if (s[i] == ',' && depth == 0) {
      parts.push_back(trim(s.substr(start, i - start)));
      start = i + 1;
    }
  }
  if (!trim(s.substr(start)).empty()) parts.push_back(trim(s.substr(start)));
  return parts;
}

struct Registry {
  std::map<std::string, std::unique_ptr<Record>, std::less<>> records;
  std::vector<std::string> problems;
  // Each record's stubs: the CUDA backend registers its kernels during static initialisation
  // too, in an order that is not known, so "cuda" joins a record's devices at the first lookup.
  std::map<const Record*, std::vector<const KernelTable*>> stubs;
  std::once_flag devices_done;
};
Registry& registry() {
  static Registry r;
  return r;
}
// Adds "cuda" to the devices of every record whose stubs all have a CUDA kernel (composites,
// without stubs of their own, run wherever their parts do, and list only the CPU and meta).
Registry& finished_registry() {
  Registry& reg = registry();
  std::call_once(reg.devices_done, [&reg] {
    for (auto& [rec, stubs] : reg.stubs) {
      bool cuda = !stubs.empty();
      for (const KernelTable* k : stubs) cuda = cuda && k->has_kernel(DeviceType::CUDA);
      if (cuda) const_cast<Record*>(rec)->devices.push_back("cuda");
    }
  });
  return reg;
}

thread_local std::vector<Interposer*> tls_stack;
thread_local int tls_suspended = 0;

void refresh_state() { detail::tls_state.interposing = !tls_stack.empty() && tls_suspended == 0; }

/// Suspends interposition for a scope (an interposer's own code), resumes it for another.
struct Suspend {
  int delta;
  explicit Suspend(int d) : delta(d) {
    tls_suspended += delta;
    refresh_state();
  }
  ~Suspend() {
    tls_suspended -= delta;
    refresh_state();
  }
};

void run_level(Call& call, const std::function<void()>& kernel, size_t level) {
  if (level == 0) {
    kernel();
    return;
  }
  Interposer* ip = tls_stack[level - 1];
  Suspend own(1);  // ops the interposer calls itself are not interposed
  bool ran = false;
  ip->around(call, [&] {
    IGNIS_CHECK(!ran, call.op.schema.full_name(), ": an interposer ran the op twice");
    ran = true;
    Suspend resume(-1);
    run_level(call, kernel, level - 1);
  });
  IGNIS_CHECK(ran, call.op.schema.full_name(), ": an interposer did not run the op");
}

bool compatible(ArgType schema, ArgType cpp) {
  if (schema == cpp) return true;
  // An undefined Tensor stands for None, as in LibTorch's signatures.
  return (schema == ArgType::OptionalTensor && cpp == ArgType::Tensor) ||
         (schema == ArgType::OptionalTensorList && cpp == ArgType::TensorList);
}

}  // namespace

/// The value of a schema default ("1", "-1", "0.01", "None", "True", "[]", "[1, 2]", "'none'").
IValue detail::parse_default(const Argument& a) {
  IGNIS_CHECK(a.default_value.has_value(), "op schema: argument '", a.name, "' has no default");
  std::string_view d = trim(*a.default_value);
  IGNIS_CHECK(!d.empty(), "op schema: argument '", a.name, "' has an empty default");
  if (d == "None") return IValue();
  if (d == "True" || d == "False") return IValue(d == "True");
  if (d.size() >= 2 && (d.front() == '"' || d.front() == '\'')) {
    return IValue(std::string(d.substr(1, d.size() - 2)));
  }
  if (d.front() == '[') {
    const std::vector<std::string_view> elems = split_args(d.substr(1, d.size() - 2));
    if (a.type == ArgType::FloatList) {
      std::vector<double> v;
      for (std::string_view e : elems) v.push_back(std::stod(std::string(e)));
      return IValue(v);
    }
    std::vector<int64_t> v;
    for (std::string_view e : elems) v.push_back(std::stoll(std::string(e)));
    return IValue(v);
  }
  const std::string s(d);
  if (a.type == ArgType::Float || a.type == ArgType::OptionalFloat) return IValue(std::stod(s));
  if (a.type == ArgType::Scalar || a.type == ArgType::OptionalScalar) {
    if (s.find_first_of(".eE") != std::string::npos) return IValue(Scalar(std::stod(s)));
    return IValue(Scalar(static_cast<int64_t>(std::stoll(s))));
  }
  if (a.type == ArgType::Int || a.type == ArgType::OptionalInt)
    return IValue(int64_t(std::stoll(s)));
  if (a.type == ArgType::MemoryFormat) {
    return IValue(s == "channels_last" ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
  }
  if (a.type == ArgType::TensorOptions || a.type == ArgType::ScalarType ||
      a.type == ArgType::OptionalScalarType) {
    // "{}" (the default options), or a dtype name: "int64" (options of that dtype).
    if (s == "{}") return IValue(TensorOptions());
    for (DType t : {kBool, kUInt8, kInt32, kInt64, kBFloat16, kFloat32, kFloat64}) {
      if (s == dtype_name(t)) {
        if (a.type == ArgType::TensorOptions) return IValue(TensorOptions(t));
        return IValue(t);
      }
    }
  }
  IGNIS_FAIL("op schema: cannot read the default '", s, "' of argument '", a.name, "' (",
             arg_type_name(a.type), ")");
}

namespace detail {

thread_local constinit State tls_state __attribute__((tls_model("initial-exec"))) = {};

void run_interposers(Call& call, const std::function<void()>& kernel) {
  run_level(call, kernel, tls_stack.size());
}

void bad_argument(const Record& rec, size_t i, std::string_view expected, const IValue& got) {
  const auto& args = rec.schema.arguments;
  std::string which = std::to_string(i);
  if (i < args.size()) which = args[i].name;
  std::string value;
  if (!got.is_none()) value = got.str();
  IGNIS_FAIL(rec.schema.full_name(), ": argument '", which, "' expects ", expected, " but got ",
             got.kind(), value.empty() ? "" : " ", value);
}

}  // namespace detail

std::string_view arg_type_name(ArgType t) {
  for (const TypeName& n : kTypeNames) {
    if (n.type == t) return n.name;
  }
  return "?";
}

std::string_view IValue::kind() const {
  return std::visit(
      [](const auto& v) -> std::string_view {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          return "None";
        else if constexpr (std::is_same_v<T, Tensor>)
          return "Tensor";
        else if constexpr (std::is_same_v<T, std::vector<Tensor>>)
          return "Tensor[]";
        else if constexpr (std::is_same_v<T, int64_t>)
          return "int";
        else if constexpr (std::is_same_v<T, double>)
          return "float";
        else if constexpr (std::is_same_v<T, bool>)
          return "bool";
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          return "int[]";
        else if constexpr (std::is_same_v<T, std::vector<bool>>)
          return "bool[]";
        else if constexpr (std::is_same_v<T, Scalar>)
          return "Scalar";
        else if constexpr (std::is_same_v<T, DType>)
          return "ScalarType";
        else if constexpr (std::is_same_v<T, Device>)
          return "Device";
        else if constexpr (std::is_same_v<T, std::string>)
          return "str";
        else if constexpr (std::is_same_v<T, MemoryFormat>)
          return "MemoryFormat";
        else
          return "TensorOptions";
      },
      v_);
}

namespace {
std::string tensor_str(const Tensor& t) {
  if (!t.defined()) return "None";
  std::ostringstream os;
  os << t.dtype() << shape_str(t.sizes());
  if (!t.device().is_cpu()) os << "@" << t.device().str();
  return os.str();
}
std::string scalar_str(Scalar s) {
  std::ostringstream os;
  if (s.is_bool())
    os << (s.to_int() ? "True" : "False");
  else if (s.is_integral())
    os << s.to_int();
  else
    os << s.to_double();
  return os.str();
}
}  // namespace

std::string IValue::str() const {
  std::ostringstream os;
  std::visit(
      [&](const auto& v) {
        using T = std::decay_t<decltype(v)>;
        if constexpr (std::is_same_v<T, std::monostate>)
          os << "None";
        else if constexpr (std::is_same_v<T, Tensor>)
          os << tensor_str(v);
        else if constexpr (std::is_same_v<T, std::vector<Tensor>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << tensor_str(v[i]);
          os << "]";
        } else if constexpr (std::is_same_v<T, bool>)
          os << (v ? "True" : "False");
        else if constexpr (std::is_same_v<T, std::vector<int64_t>>)
          os << shape_str(v);
        else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << (v[i] ? "True" : "False");
          os << "]";
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          os << "[";
          for (size_t i = 0; i < v.size(); ++i) os << (i ? ", " : "") << v[i];
          os << "]";
        } else if constexpr (std::is_same_v<T, Scalar>)
          os << scalar_str(v);
        else if constexpr (std::is_same_v<T, Device>)
          os << v.str();
        else if constexpr (std::is_same_v<T, std::string>)
          os << "'" << v << "'";
        else if constexpr (std::is_same_v<T, MemoryFormat>) {
          os << (v == MemoryFormat::ChannelsLast ? "channels_last" : "contiguous_format");
        } else if constexpr (std::is_same_v<T, TensorOptions>) {
          os << "TensorOptions(dtype=" << v.dtype() << ", device=" << v.device().str()
             << (v.requires_grad() ? ", requires_grad=True" : "") << ")";
        } else
          os << v;
      },
      v_);
  return os.str();
}

std::string Schema::str() const {
  std::ostringstream os;
  os << full_name() << "(";
  bool star = false;
  for (size_t i = 0; i < arguments.size(); ++i) {
    const Argument& a = arguments[i];
    if (i) os << ", ";
    if (a.keyword_only && !star) {
      os << "*, ";
      star = true;
    }
    os << arg_type_name(a.type) << " " << a.name;
    if (a.default_value) os << "=" << *a.default_value;
  }
  os << ") -> ";
  if (returns.size() == 1)
    os << returns[0];
  else {
    os << "(";
    for (size_t i = 0; i < returns.size(); ++i) os << (i ? ", " : "") << returns[i];
    os << ")";
  }
  return os.str();
}

int Schema::index_of(std::string_view arg) const {
  for (size_t i = 0; i < arguments.size(); ++i) {
    if (arguments[i].name == arg) return static_cast<int>(i);
  }
  return -1;
}

Schema parse_schema(std::string_view text) {
  const std::string whole(text);
  auto fail = [&](const std::string& why) -> Schema {
    IGNIS_FAIL("op schema '", whole, "': ", why);
  };
  const size_t open = text.find('(');
  const size_t arrow = text.rfind("->");
  if (open == std::string_view::npos || arrow == std::string_view::npos || arrow < open) {
    return fail("expected 'name(arguments) -> returns'");
  }
  const size_t close = text.rfind(')', arrow);
  if (close == std::string_view::npos || close < open) return fail("unbalanced parentheses");
  Schema s;
  std::string_view name = trim(text.substr(0, open));
  if (name.empty()) return fail("missing op name");
  const size_t dot = name.find('.');
  s.name = std::string(name.substr(0, dot));
  if (dot != std::string_view::npos) s.overload = std::string(name.substr(dot + 1));
  bool keyword_only = false;
  for (std::string_view part : split_args(text.substr(open + 1, close - open - 1))) {
    if (part == "*") {
      keyword_only = true;
      continue;
    }
    Argument a;
    a.keyword_only = keyword_only;
    const size_t eq = part.find('=');
    if (eq != std::string_view::npos) {
      a.default_value = std::string(trim(part.substr(eq + 1)));
      if (a.default_value->empty()) {
        return fail("argument '" + std::string(trim(part.substr(0, eq))) +
                    "' has an empty default");
      }
      part = trim(part.substr(0, eq));
    }
    const size_t sp = part.rfind(' ');
    if (sp == std::string_view::npos)
      return fail("argument '" + std::string(part) + "' has no type");
    a.name = std::string(trim(part.substr(sp + 1)));
    std::string type(trim(part.substr(0, sp)));
    // Alias annotations (Tensor(a!) self) mark in-place arguments; the type is what matters.
    if (const size_t paren = type.find('('); paren != std::string::npos) {
      const size_t end = type.find(')', paren);
      type.erase(paren, end == std::string::npos ? std::string::npos : end - paren + 1);
    }
    bool found = false;
    for (const TypeName& n : kTypeNames) {
      if (n.name == type) {
        a.type = n.type;
        found = true;
      }
    }
    if (!found) return fail("unknown type '" + type + "' of argument '" + a.name + "'");
    s.arguments.push_back(std::move(a));
  }
  std::string_view ret = trim(text.substr(arrow + 2));
  if (ret.size() >= 2 && ret.front() == '(' && ret.back() == ')') {
    for (std::string_view r : split_args(ret.substr(1, ret.size() - 2))) s.returns.emplace_back(r);
  } else if (!ret.empty()) {
    s.returns.emplace_back(ret);
  } else {
    return fail("missing return type");
  }
  return s;
}

const IValue& Call::arg(std::string_view name) const {
  const int i = op.schema.index_of(name);
  IGNIS_CHECK(i >= 0 && static_cast<size_t>(i) < args.size(), op.schema.full_name(),
              ": no argument named '", name, "' (schema ", op.schema.str(), ")");
  return args[static_cast<size_t>(i)];
}

namespace {
void collect_tensors(const IValue& v, std::vector<Tensor>& out) {
  if (v.is<Tensor>()) out.push_back(v.get<Tensor>());
  if (v.is<std::vector<Tensor>>()) {
    for (const Tensor& t : v.get<std::vector<Tensor>>()) out.push_back(t);
  }
}
}  // namespace

std::vector<Tensor> Call::input_tensors() const {
  std::vector<Tensor> out;
  for (const IValue& v : args) collect_tensors(v, out);
  return out;
}

std::vector<Tensor> Call::output_tensors() const {
  std::vector<Tensor> out;
  for (const IValue& v : outputs) collect_tensors(v, out);
  return out;
}

InterposerGuard::InterposerGuard(Interposer* interposer) : interposer_(interposer) {
  tls_stack.push_back(interposer);
  refresh_state();
}

InterposerGuard::~InterposerGuard() {
  // Guards nest (RAII), so this one's interposer is normally the top of the stack; a guard
  // destroyed out of order still takes out its own interposer (the latest entry of it).
  for (auto it = tls_stack.rbegin(); it != tls_stack.rend(); ++it) {
    if (*it == interposer_) {
      tls_stack.erase(std::next(it).base());
      break;
    }
  }
  refresh_state();
}

Registrar::Registrar(const char* schema, RecordOptions opts,
                     std::vector<IValue> (*boxed)(IValueView, const Record&),
                     std::vector<ArgType> cpp_types) {
  auto rec = std::make_unique<Record>();
  Registry& reg = registry();
  try {
    rec->schema = parse_schema(schema);
  } catch (const Error& e) {
    reg.problems.push_back(e.what());
    rec->schema.name = schema;
  }
  rec->differentiable = opts.differentiable;
  rec->kind = opts.kind;
  rec->boxed = boxed;
  rec->cpp_types = std::move(cpp_types);
  rec->devices.push_back("cpu");
  bool meta = true;
  for (const KernelTable* k : opts.stubs) meta = meta && k->has_kernel(DeviceType::Meta);
  if (meta) rec->devices.push_back("meta");
  const std::string key = rec->schema.full_name();
  record_ = rec.get();
  auto [it, inserted] = reg.records.emplace(key, std::move(rec));
  if (inserted) reg.stubs[it->second.get()].assign(opts.stubs.begin(), opts.stubs.end());
  if (!inserted) {
    reg.problems.push_back("duplicate op record '" + key + "'");
    record_ = it->second.get();
  }
}

const Record* find(std::string_view full_name) {
  const Registry& reg = finished_registry();
  auto it = reg.records.find(full_name);
  if (it != reg.records.end()) return it->second.get();
  return nullptr;
}

std::vector<const Record*> all_records() {
  std::vector<const Record*> out;
  for (const auto& [name, rec] : finished_registry().records) out.push_back(rec.get());
  return out;
}

std::vector<std::string> validate_registry() {
  std::vector<std::string> problems = registry().problems;
  for (const Record* r : all_records()) {
    const auto& args = r->schema.arguments;
    bool ok = args.size() == r->cpp_types.size();
    for (size_t i = 0; ok && i < args.size(); ++i) ok = compatible(args[i].type, r->cpp_types[i]);
    if (!ok) {
      std::string cpp;
      for (size_t i = 0; i < r->cpp_types.size(); ++i) {
        cpp += (i ? ", " : "") + std::string(arg_type_name(r->cpp_types[i]));
      }
      problems.push_back(r->schema.full_name() + ": schema " + r->schema.str() +
                         " does not match its C++ front end (" + cpp + ")");
    }
    for (const Argument& a : args) {
      if (!a.default_value) continue;
      try {
        detail::parse_default(a);
      } catch (const std::exception& e) {
        problems.push_back(r->schema.full_name() + ": " + e.what());
      }
    }
  }
  return problems;
}

std::vector<IValue> call_boxed(std::string_view full_name, std::vector<IValue> args) {
  const Record* rec = find(full_name);
  if (rec == nullptr) {
    // Suggest the overloads of a bare name ("add" -> add.Tensor, add.Scalar).
    std::string overloads;
    for (const Record* r : all_records()) {
      if (r->schema.name == full_name)
        overloads += (overloads.empty() ? "" : ", ") + r->schema.full_name();
    }
    IGNIS_FAIL("call_boxed: no op named '", full_name, "'",
               overloads.empty() ? std::string(" is registered (see `ignis ops`)")
                                 : "; did you mean one of: " + overloads);
  }
  const auto& schema_args = rec->schema.arguments;
  IGNIS_CHECK(args.size() <= schema_args.size(), full_name, ": ", args.size(),
              " arguments given but the schema takes ", schema_args.size(), " (", rec->schema.str(),
              ")");
  for (size_t i = args.size(); i < schema_args.size(); ++i) {
    IGNIS_CHECK(schema_args[i].default_value.has_value(), full_name, ": missing argument '",
                schema_args[i].name, "' (", rec->schema.str(), ")");
    args.push_back(detail::parse_default(schema_args[i]));
  }
  return rec->boxed(IValueView(args), *rec);
}

}  // namespace ignis::op
