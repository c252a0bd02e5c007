// The op registry: every op of the public API is one named record with a schema (its tensor
// inputs, typed attributes and outputs), and every call of it goes through one dispatcher entry
// that runs the calling thread's stack of interposers (profiler, tracer; later autocast) around
// the op. When no interposer is installed the entry costs one thread-local check.
#pragma once

#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::op {

/// The type of a schema argument, spelled as in PyTorch's schemas ("Tensor?", "int[]", ...).
enum class ArgType : uint8_t {
  Tensor,                 // Tensor
  OptionalTensor,         // Tensor?  (an undefined Tensor is None)
  TensorList,             // Tensor[]
  Int,                    // int      (int64)
  OptionalInt,            // int?
  IntList,                // int[]
  OptionalIntList,        // int[]?
  Float,                  // float    (double)
  OptionalFloat,          // float?
  FloatList,              // float[]
  Bool,                   // bool
  OptionalBool,           // bool?
  BoolList,               // bool[]
  Scalar,                 // Scalar
  OptionalScalar,         // Scalar?
  ScalarType,             // ScalarType  (a DType)
  OptionalScalarType,     // ScalarType?
  Device,                 // Device
  String,                 // str
  MemoryFormat,           // MemoryFormat
  TensorOptions,          // TensorOptions  (dtype, device, requires_grad; LibTorch's options)
  OptionalTensorOptions,  // TensorOptions?
  OptionalTensorList,     // Tensor?[]  (C++: std::vector<Tensor>, an undefined entry is None)
};
std::string_view arg_type_name(ArgType t);

/// A boxed value: one argument or result of an op call, as an interposer or a replay sees it.
class IValue {
 public:
  using Storage = std::variant<std::monostate, Tensor, std::vector<Tensor>, int64_t, double, bool,
                               std::vector<int64_t>, std::vector<bool>, std::vector<double>, Scalar,
                               DType, Device, std::string, MemoryFormat, TensorOptions>;
  IValue() = default;
  template <class T>
  IValue(T v) : v_(std::move(v)) {}  // NOLINT: implicit, like c10::IValue

  bool is_none() const { return std::holds_alternative<std::monostate>(v_); }
  template <class T>
  bool is() const {
    return std::holds_alternative<T>(v_);
  }
  template <class T>
  const T& get() const {
    return std::get<T>(v_);
  }
  const Storage& storage() const { return v_; }
  /// The kind of value held, for messages: "Tensor", "int", "float", "str", "None", ...
  std::string_view kind() const;
  /// Readable form: a tensor as "float32[2, 3]", lists as "[1, 2]", strings quoted.
  std::string str() const;

 private:
  Storage v_;
};

/// A read-only view of boxed values (the part of std::span the registry needs; the public
/// headers stay usable from C++17).
class IValueView {
 public:
  IValueView() = default;
  IValueView(const IValue* data, size_t size) : data_(data), size_(size) {}
  IValueView(const std::vector<IValue>& v) : data_(v.data()), size_(v.size()) {}  // NOLINT
  const IValue* begin() const { return data_; }
  const IValue* end() const { return data_ + size_; }
  size_t size() const { return size_; }
  bool empty() const { return size_ == 0; }
  const IValue& operator[](size_t i) const { return data_[i]; }

 private:
  const IValue* data_ = nullptr;
  size_t size_ = 0;
};

/// One argument of a schema: its name, type and default value as written ("1", "None", "[]").
struct Argument {
  std::string name;
  ArgType type;
  std::optional<std::string> default_value;
  bool keyword_only = false;  // after `*` in the schema
  bool is_tensor() const {
    return type == ArgType::Tensor || type == ArgType::OptionalTensor ||
           type == ArgType::TensorList || type == ArgType::OptionalTensorList;
  }
};

/// An op's signature, parsed from PyTorch's schema syntax:
///   "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor"
/// Tensor arguments are the op's inputs; every other argument is a typed attribute.
struct Schema {
  std::string name;      // "add"
  std::string overload;  // "Tensor" ("" when the op has one form)
  std::vector<Argument> arguments;
  std::vector<std::string> returns;  // "Tensor", "Tensor(a!)", "Tensor[]", "bool", ...
  /// "add.Tensor": the unique name a record is looked up by.
  std::string full_name() const { return overload.empty() ? name : name + "." + overload; }
  /// The schema string again, normalised.
  std::string str() const;
  /// Index of the argument called `arg`, or -1.
  int index_of(std::string_view arg) const;
};

/// Parses a schema string; throws ignis::Error naming the text and the fault.
Schema parse_schema(std::string_view text);

struct Record;

/// One op call as interposers see it: the record, every argument boxed in schema order (tensor
/// inputs, non-differentiable ones and constants alike, and the attributes), and the results
/// once the op has run.
struct Call {
  const Record& op;
  IValueView args;
  std::vector<IValue> outputs;  // filled when the op returns
  /// The argument called `name` (an attribute or an input); throws if the schema has none.
  const IValue& arg(std::string_view name) const;
  /// The tensor inputs, in order (undefined optional ones and list elements included).
  std::vector<Tensor> input_tensors() const;
  std::vector<Tensor> output_tensors() const;
};

/// Code that runs around every op call on the thread that installed it (an InterposerGuard).
/// `next()` runs the op — and the interposers installed before this one — exactly once; after
/// it, `call.outputs` holds the results. Ops that the interposer itself calls outside `next()`
/// are not interposed (so a tracer may clone a tensor without tracing the clone).
class Interposer {
 public:
  virtual ~Interposer() = default;
  virtual void around(Call& call, const std::function<void()>& next) = 0;
};

/// Installs an interposer on the calling thread for its scope (innermost runs first).
class InterposerGuard {
 public:
  explicit InterposerGuard(Interposer* interposer);
  ~InterposerGuard();
  InterposerGuard(const InterposerGuard&) = delete;
  InterposerGuard& operator=(const InterposerGuard&) = delete;

 private:
  Interposer* interposer_;
};

/// Calls an op by name with boxed arguments (defaults filled in from the schema), through the
/// dispatcher and so through the interposers: what a replay of a trace, and later Python
/// bindings, use. Throws naming the op on an unknown name, a missing argument or an argument of
/// the wrong type.
std::vector<IValue> call_boxed(std::string_view full_name, std::vector<IValue> args);

/// What a registered op is: its schema, how it is differentiated and computed.
struct Record {
  Schema schema;
  /// Differentiable: records a graph node, its backward written in ignis ops, when an input
  /// requires grad (and grad mode is on).
  bool differentiable = false;
  /// "kernel" (runs device kernels), "composite" (a composition of other records),
  /// "view" (no data moves), "factory" (creates tensors from attributes), "random".
  std::string kind;
  /// The device types with a kernel for every stub the op runs ("cpu", "meta"); composites
  /// run on whatever their parts run on.
  std::vector<std::string> devices;
  /// Unboxes `args` (complete, in schema order) and calls the op's front end.
  std::vector<IValue> (*boxed)(IValueView args, const Record& rec) = nullptr;
  /// Argument types of the C++ front end, to check the schema against (see validate_registry).
  std::vector<ArgType> cpp_types;
};

/// The record of `full_name` ("add.Tensor", or "relu" for an op with one form); nullptr if none.
const Record* find(std::string_view full_name);
/// Every registered record, sorted by full name.
std::vector<const Record*> all_records();
/// Problems with the registry (a schema whose arguments disagree with its C++ front end, a
/// duplicate name); empty when consistent.
std::vector<std::string> validate_registry();

}  // namespace ignis::op
