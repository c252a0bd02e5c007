// CPU kernels of the activations of ignis/activation_ops.def (forward and fused backward) and of
// the binary math ops of ignis/binary_ops.def: their functors over cpu_kernel.
#include <type_traits>

#include "cpu/loops.h"
#include "ops/activation_functors.h"
#include "ops/activation_ops.h"

namespace ignis::cpu {
namespace {

enum class Dtypes { FLOAT, ANY, INTEGRAL };

template <class F, Dtypes D>
void unary(const TensorIter& it, DType dt, OpArgs args) {
  if constexpr (D == Dtypes::FLOAT) {
    dispatch_floating(dt, "activation", [&]<class T>() { cpu_kernel<T, T>(it, F{args}); });
  } else {
    dispatch_dtype(dt, "activation", [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>)
        IGNIS_FAIL("activation: not supported for bool");
      else
        cpu_kernel<T, T>(it, F{args});
    });
  }
}
template <class F>
void backward(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "activation backward",
                    [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
}

/// Throws if operand 2 (the divisor) of an integer division has a zero, before anything is
/// written (PyTorch: "ZeroDivisionError").
template <class T>
void check_divisor(const TensorIter& it, DType dt, const char* op) {
  bool zero = false;
  for_each_row(it, 0, it.numel, [&](char** ptrs, int64_t n, const int64_t* inner) {
    for (int64_t k = 0; k < n && !zero; ++k) zero = load<T>(ptrs[2] + k * inner[2]) == T(0);
  });
  IGNIS_CHECK(!zero, op, ": integer division by zero (ZeroDivisionError): the divisor, of dtype ",
              dtype_name(dt), ", has a zero");
}

template <class F>
constexpr bool integer_division_v = requires {
  F::kIntegerDivision;
};

template <class F, Dtypes D>
void binary(const TensorIter& it, DType dt, OpArgs args, const char* op) {
  if constexpr (D == Dtypes::FLOAT) {
    dispatch_floating(dt, op, [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
  } else {
    dispatch_dtype(dt, op, [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>) {
        IGNIS_FAIL(op, ": not supported for bool tensors");
      } else {
        if constexpr (integer_division_v<F> && !std::is_floating_point_v<acc_t<T>>) {
          check_divisor<T>(it, dt, op);
        }
        cpu_kernel<T, T, T>(it, F{args});
      }
    });
  }
}

}  // namespace

#define IGNIS_ACTIVATION_OP(name, Functor, dtypes, ...)                           \
  IGNIS_REGISTER_KERNEL(name##_stub, CPU, (&unary<fn::Functor, Dtypes::dtypes>)); \
  IGNIS_REGISTER_KERNEL(name##_backward_stub, CPU, &backward<fn::Functor##Backward>);
#include "ignis/activation_ops.def"

#define IGNIS_BINARY_OP(name, Functor, dtypes, ...)                                           \
  IGNIS_REGISTER_KERNEL(name##_stub, CPU, (+[](const TensorIter& it, DType dt, OpArgs args) { \
                          binary<fn::Functor, Dtypes::dtypes>(it, dt, args, #name);           \
                        }));
#define IGNIS_BINARY_SCALAR_OP IGNIS_BINARY_OP
#include "ignis/binary_ops.def"
IGNIS_REGISTER_KERNEL(floor_quotient_stub, CPU, (+[](const TensorIter& it, DType dt, OpArgs args) {
                        binary<fn::FloorDivide, Dtypes::FLOAT>(it, dt, args, "remainder");
                      }));

}  // namespace ignis::cpu
