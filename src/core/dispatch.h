// Kernels registered by (op, device): each op declares a stub with a kernel signature; each
// backend registers its kernel at static-initialisation time. No central op enum, no switch.
#pragma once

#include "ignis/device.h"
#include "ignis/dtype.h"
#include "ignis/error.h"

#include <string_view>
#include <type_traits>

namespace ignis {

/// What the op registry sees of a stub: its name and which device types have a kernel.
struct KernelTable {
  virtual bool has_kernel(DeviceType type) const = 0;
  virtual const char* name() const = 0;
};

struct BadIndex;  // ops/index.h

namespace detail {
/// The meta device's kernel: nothing to compute, since a meta tensor has no data; front ends
/// have already produced the outputs' metadata. Only kernels returning nothing (or a BadIndex:
/// no index can be checked without data) get one; a kernel whose result decides the output's
/// shape (nonzero, masked_select) has none, so such ops fail on meta naming the op.
template <class Fn>
struct MetaKernel {
  static constexpr Fn value = nullptr;
};
template <class R, class... A>
  requires(std::is_void_v<R> || std::is_same_v<R, BadIndex>)
struct MetaKernel<R (*)(A...)> {
  static R noop(A...) { return R(); }
  static constexpr R (*value)(A...) = &noop;
};
}  // namespace detail

template <class Fn>
struct DispatchStub : KernelTable {
  const char* op;  // the op's name for messages ("add" for add_stub)
  Fn table[kNumDeviceTypes] = {};
  // constexpr: stubs are constant-initialised, before any kernel registrar runs.
  explicit constexpr DispatchStub(const char* name) : op(op_buf_) {
    table[static_cast<int>(DeviceType::Meta)] = detail::MetaKernel<Fn>::value;
    size_t n = 0;
    while (name[n] != '\0' && n + 1 < sizeof(op_buf_)) {
      op_buf_[n] = name[n];
      ++n;
    }
    op_buf_[n] = '\0';
    if (n > 5 && std::string_view(op_buf_ + n - 5) == "_stub") op_buf_[n - 5] = '\0';
  }
  DispatchStub(const DispatchStub&) = delete;
  DispatchStub& operator=(const DispatchStub&) = delete;
  Fn operator[](Device d) const {
    Fn f = table[static_cast<int>(d.type)];
    if (__builtin_expect(f == nullptr, 0)) {
      IGNIS_FAIL(op, ": no kernel for device ", d.str(),
                 d.is_cuda() ? " (ignis was built without a CUDA backend)"
                 : d.is_meta() ? " (its output depends on the input's values, which a meta "
                                 "tensor does not have)"
                               : "");
    }
    return f;
  }
  bool has_kernel(DeviceType type) const override {
    return table[static_cast<int>(type)] != nullptr;
  }
  const char* name() const override { return op; }

 private:
  char op_buf_[64] = {};
};

template <class Fn>
struct KernelRegistrar {
  KernelRegistrar(DispatchStub<Fn>& stub, DeviceType dev, Fn fn) {
    stub.table[static_cast<int>(dev)] = fn;
  }
};

/// IGNIS_DECLARE_STUB(add_stub, BinaryFn) in a header; IGNIS_DEFINE_STUB in one .cpp;
/// IGNIS_REGISTER_KERNEL(add_stub, CPU, &fn) in the backend's .cpp.
#define IGNIS_DECLARE_STUB(name, Fn) extern ::ignis::DispatchStub<Fn> name
#define IGNIS_DEFINE_STUB(name, Fn) constinit ::ignis::DispatchStub<Fn> name(#name)
#define IGNIS_CONCAT_(a, b) a##b
#define IGNIS_CONCAT(a, b) IGNIS_CONCAT_(a, b)
#define IGNIS_REGISTER_KERNEL(stub, DEV, fn)                                    \
  static ::ignis::KernelRegistrar<std::remove_reference_t<decltype(stub.table[0])>> IGNIS_CONCAT(        \
      reg_##stub##_, __LINE__)(stub, ::ignis::DeviceType::DEV, fn)

/// Calls `f.template operator()<T>()` with the C++ type of `dtype`:
///   dispatch_dtype(t, "exp", [&]<class T>() { ... });
template <class F>
decltype(auto) dispatch_dtype(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::Bool: return f.template operator()<bool>();
    case DType::UInt8: return f.template operator()<uint8_t>();
    case DType::Int32: return f.template operator()<int32_t>();
    case DType::Int64: return f.template operator()<int64_t>();
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
  }
  IGNIS_FAIL(op, ": unsupported dtype ", dtype);
}

/// Same, floating dtypes only (float32, float64, bfloat16).
template <class F>
decltype(auto) dispatch_floating(DType dtype, const char* op, F&& f) {
  switch (dtype) {
    case DType::BFloat16: return f.template operator()<BFloat16>();
    case DType::Float32: return f.template operator()<float>();
    case DType::Float64: return f.template operator()<double>();
    default: break;
  }
  IGNIS_FAIL(op, ": expected a floating point tensor but got ", dtype);
}

/// The type arithmetic on T is done in: float for bfloat16, else T itself.
template <class T>
struct acc_type {
  using type = T;
};
template <>
struct acc_type<BFloat16> {
  using type = float;
};
template <class T>
using acc_t = typename acc_type<T>::type;

}  // namespace ignis
