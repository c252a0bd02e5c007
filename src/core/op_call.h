// How an op's front end becomes a registry record and goes through the one dispatcher entry.
//
//   IGNIS_OP(add_Tensor, "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor",
//            Tensor(const Tensor&, const Tensor&, Scalar), add, {.differentiable = true});
//   Tensor add(const Tensor& a, const Tensor& b, Scalar alpha) {
//     IGNIS_DISPATCH(add_Tensor, add, a, b, alpha);
//     ... the op: checks, output metadata, the kernel, the autograd record ...
//   }
//
// IGNIS_DISPATCH costs one thread-local check when no interposer is installed. When one is, it
// boxes the arguments, runs the interposers, and the innermost of them re-enters the function,
// which then runs its body (the `redispatch` flag lets exactly that call through).
#pragma once

#include <array>
#include <initializer_list>
#include <tuple>
#include <type_traits>
#include <utility>

#include "core/dispatch.h"
#include "ignis/conv.h"
#include "ignis/op_registry.h"

namespace ignis::op {

struct RecordOptions {
  /// Records a graph node (its backward, written in ignis ops) when an input requires grad.
  bool differentiable = false;
  /// "kernel", "composite", "view", "factory" or "random".
  const char* kind = "kernel";
  /// The kernel tables the op runs; its devices are those with a kernel in every one.
  std::initializer_list<const KernelTable*> stubs = {};
};

namespace detail {

// Trivial (zero-initialised, no constructor), so that reading it from another translation
// unit needs no TLS wrapper call: the fast path is one load from the thread's static TLS block.
struct State {
  bool interposing;  // an interposer is installed and not suspended
  bool redispatch;   // the next dispatched call runs its body (set by the innermost)
};
extern thread_local constinit State tls_state __attribute__((tls_model("initial-exec")));

inline bool take_redispatch() {
  if (tls_state.redispatch) {
    tls_state.redispatch = false;
    return true;
  }
  return false;
}

/// Runs the interposer stack around `kernel` (which re-enters the op with redispatch set).
void run_interposers(Call& call, const std::function<void()>& kernel);

// ---- boxing a C++ argument into an IValue

inline IValue box(const Tensor& t) { return t.defined() ? IValue(t) : IValue(); }
inline IValue box(const std::vector<Tensor>& v) { return IValue(v); }
inline IValue box(Scalar s) { return IValue(s); }
inline IValue box(double d) { return IValue(d); }
inline IValue box(float d) { return IValue(static_cast<double>(d)); }
inline IValue box(bool b) { return IValue(b); }
inline IValue box(int64_t i) { return IValue(i); }
inline IValue box(int i) { return IValue(static_cast<int64_t>(i)); }
inline IValue box(IntArrayRef v) { return IValue(std::vector<int64_t>(v.begin(), v.end())); }
inline IValue box(const std::vector<int64_t>& v) { return IValue(v); }
inline IValue box(const std::vector<bool>& v) { return IValue(v); }
inline IValue box(const std::vector<double>& v) { return IValue(v); }
inline IValue box(DType d) { return IValue(d); }
inline IValue box(Device d) { return IValue(d); }
inline IValue box(const std::string& s) { return IValue(s); }
inline IValue box(const char* s) { return IValue(std::string(s)); }
inline IValue box(const PaddingMode& p) { return IValue(p.value); }  // a str in the schema
inline IValue box(MemoryFormat f) { return IValue(f); }
inline IValue box(const TensorOptions& o) { return IValue(o); }
template <class T>
IValue box(const std::optional<T>& o) {
  return o ? box(*o) : IValue();
}

// ---- the schema type a C++ parameter type stands for (checked by validate_registry)

template <class T>
struct arg_type;
#define IGNIS_ARG_TYPE(T, A)                     \
  template <>                                    \
  struct arg_type<T> {                           \
    static constexpr ArgType value = ArgType::A; \
  }
IGNIS_ARG_TYPE(Tensor, Tensor);
IGNIS_ARG_TYPE(std::optional<Tensor>, OptionalTensor);
IGNIS_ARG_TYPE(std::vector<Tensor>, TensorList);
IGNIS_ARG_TYPE(int64_t, Int);
IGNIS_ARG_TYPE(int, Int);
IGNIS_ARG_TYPE(std::optional<int64_t>, OptionalInt);
IGNIS_ARG_TYPE(IntArrayRef, IntList);
IGNIS_ARG_TYPE(std::vector<int64_t>, IntList);
IGNIS_ARG_TYPE(std::optional<std::vector<int64_t>>, OptionalIntList);
IGNIS_ARG_TYPE(double, Float);
IGNIS_ARG_TYPE(std::optional<double>, OptionalFloat);
IGNIS_ARG_TYPE(std::vector<double>, FloatList);
IGNIS_ARG_TYPE(bool, Bool);
IGNIS_ARG_TYPE(std::optional<bool>, OptionalBool);
IGNIS_ARG_TYPE(std::vector<bool>, BoolList);
IGNIS_ARG_TYPE(Scalar, Scalar);
IGNIS_ARG_TYPE(std::optional<Scalar>, OptionalScalar);
IGNIS_ARG_TYPE(DType, ScalarType);
IGNIS_ARG_TYPE(std::optional<DType>, OptionalScalarType);
IGNIS_ARG_TYPE(Device, Device);
IGNIS_ARG_TYPE(std::string, String);
IGNIS_ARG_TYPE(PaddingMode, String);
IGNIS_ARG_TYPE(MemoryFormat, MemoryFormat);
IGNIS_ARG_TYPE(TensorOptions, TensorOptions);
IGNIS_ARG_TYPE(std::optional<TensorOptions>, OptionalTensorOptions);
#undef IGNIS_ARG_TYPE
template <class T>
constexpr ArgType arg_type_v = arg_type<std::remove_cvref_t<T>>::value;

// ---- unboxing for call_boxed (replay): checks the IValue's kind against the parameter

[[noreturn]] void bad_argument(const Record& rec, size_t i, std::string_view expected,
                               const IValue& got);

template <class T>
struct Unbox;  // Unbox<T>::get(value, record, index) -> something convertible to T

template <>
struct Unbox<Tensor> {
  static Tensor get(const IValue& v, const Record& r, size_t i) {
    if (v.is_none()) return Tensor();
    if (!v.is<Tensor>()) bad_argument(r, i, "Tensor", v);
    return v.get<Tensor>();
  }
};
template <>
struct Unbox<std::vector<Tensor>> {
  static const std::vector<Tensor>& get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<std::vector<Tensor>>()) bad_argument(r, i, "Tensor[]", v);
    return v.get<std::vector<Tensor>>();
  }
};
template <>
struct Unbox<int64_t> {
  static int64_t get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<int64_t>()) bad_argument(r, i, "int", v);
    return v.get<int64_t>();
  }
};
template <>
struct Unbox<int> {
  static int get(const IValue& v, const Record& r, size_t i) {
    return static_cast<int>(Unbox<int64_t>::get(v, r, i));
  }
};
template <>
struct Unbox<double> {
  static double get(const IValue& v, const Record& r, size_t i) {
    if (v.is<int64_t>()) return static_cast<double>(v.get<int64_t>());
    if (!v.is<double>()) bad_argument(r, i, "float", v);
    return v.get<double>();
  }
};
template <>
struct Unbox<bool> {
  static bool get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<bool>()) bad_argument(r, i, "bool", v);
    return v.get<bool>();
  }
};
template <>
struct Unbox<std::vector<int64_t>> {
  static const std::vector<int64_t>& get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<std::vector<int64_t>>()) bad_argument(r, i, "int[]", v);
    return v.get<std::vector<int64_t>>();
  }
};
template <>
struct Unbox<IntArrayRef> {
  static IntArrayRef get(const IValue& v, const Record& r, size_t i) {
    return IntArrayRef(Unbox<std::vector<int64_t>>::get(v, r, i));
  }
};
template <>
struct Unbox<std::vector<bool>> {
  static const std::vector<bool>& get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<std::vector<bool>>()) bad_argument(r, i, "bool[]", v);
    return v.get<std::vector<bool>>();
  }
};
template <>
struct Unbox<std::vector<double>> {
  static std::vector<double> get(const IValue& v, const Record& r, size_t i) {
    if (v.is<std::vector<int64_t>>()) {
      const auto& ints = v.get<std::vector<int64_t>>();
      return std::vector<double>(ints.begin(), ints.end());
    }
    if (!v.is<std::vector<double>>()) bad_argument(r, i, "float[]", v);
    return v.get<std::vector<double>>();
  }
};
template <>
struct Unbox<Scalar> {
  static Scalar get(const IValue& v, const Record& r, size_t i) {
    if (v.is<Scalar>()) return v.get<Scalar>();
    if (v.is<int64_t>()) return Scalar(v.get<int64_t>());
    if (v.is<double>()) return Scalar(v.get<double>());
    if (v.is<bool>()) return Scalar(v.get<bool>());
    bad_argument(r, i, "Scalar", v);
  }
};
template <class T>
struct UnboxExact {
  static const T& get(const IValue& v, const Record& r, size_t i) {
    if (!v.is<T>()) bad_argument(r, i, arg_type_name(arg_type_v<T>), v);
    return v.get<T>();
  }
};
template <>
struct Unbox<DType> : UnboxExact<DType> {};
template <>
struct Unbox<Device> : UnboxExact<Device> {};
template <>
struct Unbox<std::string> : UnboxExact<std::string> {};
template <>
struct Unbox<PaddingMode> {
  static PaddingMode get(const IValue& v, const Record& r, size_t i) {
    return PaddingMode(Unbox<std::string>::get(v, r, i));
  }
};
template <>
struct Unbox<MemoryFormat> : UnboxExact<MemoryFormat> {};
template <>
struct Unbox<TensorOptions> : UnboxExact<TensorOptions> {};
template <class T>
struct Unbox<std::optional<T>> {
  static std::optional<T> get(const IValue& v, const Record& r, size_t i) {
    if (v.is_none()) return std::nullopt;
    return Unbox<T>::get(v, r, i);
  }
};

// ---- boxing results

inline void box_result(std::vector<IValue>& out, const Tensor& t) { out.push_back(box(t)); }
inline void box_result(std::vector<IValue>& out, const std::vector<Tensor>& v) {
  out.emplace_back(v);
}
inline void box_result(std::vector<IValue>& out, bool b) { out.emplace_back(b); }
inline void box_result(std::vector<IValue>& out, Scalar s) { out.emplace_back(s); }
template <class... T>
void box_result(std::vector<IValue>& out, const std::tuple<T...>& t) {
  std::apply([&](const auto&... e) { (box_result(out, e), ...); }, t);
}

/// The slow path of IGNIS_DISPATCH: box, run the interposers, return what the body returned.
template <class Body, class... A>
decltype(auto) interpose(const Record& rec, Body&& body, const A&... a) {
  std::array<IValue, sizeof...(A)> boxed{box(a)...};
  Call call{rec, IValueView(boxed.data(), boxed.size()), {}};
  using R = decltype(body());
  if constexpr (std::is_void_v<R>) {
    run_interposers(call, [&] {
      tls_state.redispatch = true;
      body();
    });
  } else if constexpr (std::is_reference_v<R>) {
    std::remove_reference_t<R>* result = nullptr;
    run_interposers(call, [&] {
      tls_state.redispatch = true;
      result = &body();
      call.outputs.clear();
      box_result(call.outputs, *result);
    });
    return static_cast<R>(*result);
  } else {
    std::optional<R> result;
    run_interposers(call, [&] {
      tls_state.redispatch = true;
      result.emplace(body());
      call.outputs.clear();
      box_result(call.outputs, *result);
    });
    return R(std::move(*result));
  }
}

// ---- the boxed entry of a front end (call_boxed, replay)

template <class F>
struct fn_traits;
template <class R, class... A>
struct fn_traits<R (*)(A...)> {
  using result = R;
  using args = std::tuple<std::remove_cvref_t<A>...>;
  static constexpr bool is_method = false;
};
template <class R, class... A>
struct fn_traits<R (Tensor::*)(A...)> {
  using result = R;
  using args = std::tuple<Tensor, std::remove_cvref_t<A>...>;  // self first
  static constexpr bool is_method = true;
};
template <class R, class... A>
struct fn_traits<R (Tensor::*)(A...) const> : fn_traits<R (Tensor::*)(A...)> {};

template <auto F>
std::vector<IValue> boxed_call(IValueView v, const Record& rec) {
  using Tr = fn_traits<decltype(F)>;
  using Args = typename Tr::args;
  return [&]<size_t... I>(std::index_sequence<I...>) {
    // Outlives the call: an in-place method returns a reference to it.
    Tensor self;
    if constexpr (Tr::is_method) self = Unbox<Tensor>::get(v[0], rec, 0);
    // By value: a free function's in-place form returns a reference to its (unboxed, temporary)
    // argument, which must be copied out before that temporary dies.
    auto invoke = [&]() -> std::remove_cvref_t<typename Tr::result> {
      if constexpr (Tr::is_method) {
        return (self.*F)(Unbox<std::tuple_element_t<I + 1, Args>>::get(v[I + 1], rec, I + 1)...);
      } else {
        return F(Unbox<std::tuple_element_t<I, Args>>::get(v[I], rec, I)...);
      }
    };
    std::vector<IValue> out;
    if constexpr (std::is_void_v<typename Tr::result>) {
      invoke();
    } else {
      box_result(out, invoke());
    }
    return out;
  }
  (std::make_index_sequence<std::tuple_size_v<Args> - (Tr::is_method ? 1 : 0)>());
}

template <auto F>
std::vector<ArgType> cpp_arg_types() {
  using Args = typename fn_traits<decltype(F)>::args;
  return [&]<size_t... I>(std::index_sequence<I...>) {
    return std::vector<ArgType>{arg_type_v<std::tuple_element_t<I, Args>>...};
  }
  (std::make_index_sequence<std::tuple_size_v<Args>>());
}

}  // namespace detail

/// Registers a record at static initialisation and keeps it for the dispatch macro.
class Registrar {
 public:
  Registrar(const char* schema, RecordOptions opts,
            std::vector<IValue> (*boxed)(IValueView, const Record&),
            std::vector<ArgType> cpp_types);
  const Record& record() const { return *record_; }

 private:
  Record* record_;
};

template <class T, class Sig>
struct method_ptr;
template <class R, class... A>
struct method_ptr<Tensor, R(A...)> {
  using type = R (Tensor::*)(A...);
};
template <class R, class... A>
struct method_ptr<Tensor, R(A...) const> {
  using type = R (Tensor::*)(A...) const;
};

}  // namespace ignis::op

#define IGNIS_OP_REC(id) ignis_op_record_##id
/// Defines the record `id` of the free function `fn` whose C++ signature is SIG (a function type,
/// to pick the overload).
#define IGNIS_OP(id, schema, SIG, fn, ...)                                         \
  static const ::ignis::op::Registrar IGNIS_OP_REC(id)(                            \
      schema, ::ignis::op::RecordOptions __VA_ARGS__,                              \
      &::ignis::op::detail::boxed_call<static_cast<std::add_pointer_t<SIG>>(&fn)>, \
      ::ignis::op::detail::cpp_arg_types<static_cast<std::add_pointer_t<SIG>>(&fn)>())
/// Same for a Tensor method (in-place ops: `self` is the schema's first argument).
#define IGNIS_OP_METHOD(id, schema, SIG, method, ...)                                \
  static const ::ignis::op::Registrar IGNIS_OP_REC(id)(                              \
      schema, ::ignis::op::RecordOptions __VA_ARGS__,                                \
      &::ignis::op::detail::boxed_call<                                              \
          static_cast<typename ::ignis::op::method_ptr<::ignis::Tensor, SIG>::type>( \
              &::ignis::Tensor::method)>,                                            \
      ::ignis::op::detail::cpp_arg_types<                                            \
          static_cast<typename ::ignis::op::method_ptr<::ignis::Tensor, SIG>::type>( \
              &::ignis::Tensor::method)>())

/// The first statement of a free-function front end: the one call path.
#define IGNIS_DISPATCH(id, fn, ...)                                      \
  if (__builtin_expect(::ignis::op::detail::tls_state.interposing, 0) && \
      !::ignis::op::detail::take_redispatch())                           \
  return ::ignis::op::detail::interpose(                                 \
      IGNIS_OP_REC(id).record(), [&]() -> decltype(auto) { return fn(__VA_ARGS__); }, __VA_ARGS__)
/// Same in a Tensor method: `self` (*this) is boxed first.
#define IGNIS_DISPATCH_METHOD(id, method, ...)                                                  \
  if (__builtin_expect(::ignis::op::detail::tls_state.interposing, 0) &&                        \
      !::ignis::op::detail::take_redispatch())                                                  \
  return ::ignis::op::detail::interpose(                                                        \
      IGNIS_OP_REC(id).record(), [&]() -> decltype(auto) { return this->method(__VA_ARGS__); }, \
      *this __VA_OPT__(, ) __VA_ARGS__)
