// CUDA kernels of the activations of ignis/activation_ops.def (forward and fused backward) and of
// the binary math ops of ignis/binary_ops.def, registered for the stubs of
// cpu/activation_kernels.cpp. Integer division checks its divisor for zeros first, as on the
// CPU (an error, not a garbage value): one pass over the divisor, read back by the host.
#include <type_traits>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/activation_functors.h"
#include "ops/activation_ops.h"

namespace ignis::cuda {
namespace {

enum class Dtypes { FLOAT, ANY, INTEGRAL };

template <class F, Dtypes D>
void unary(const TensorIter& it, DType dt, OpArgs args) {
  if constexpr (D == Dtypes::FLOAT) {
    dispatch_floating(dt, "activation", [&]<class T>() { gpu_kernel<T, T>(it, F{args}); });
  } else {
    dispatch_dtype(dt, "activation", [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>)
        IGNIS_FAIL("activation: not supported for bool");
      else
        gpu_kernel<T, T>(it, F{args});
    });
  }
}
template <class F>
void backward(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "activation backward",
                    [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
}

// flag = 1 when some element of operand 2 (the divisor) is zero.
template <class T>
__global__ void any_zero_kernel(int64_t n, Operands<3> ops, Geometry<3> g, int* flag) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    char* p[3];
    operand_ptrs(g, ops, i, p);
    if (*reinterpret_cast<const T*>(p[2]) == T(0)) *flag = 1;
  }
}

template <class T>
void check_divisor(const TensorIter& it, DType dt, const char* op) {
  if (it.numel == 0) return;
  DeviceGuard guard(it.device.index);
  auto stream = current_stream(it.device);
  const Geometry<3> g = geometry_of<3>(it, op);
  const Tensor flag = make_tensor({1}, kInt32, it.device);
  int* f = static_cast<int*>(flag.data_ptr());
  IGNIS_CUDA_CHECK(cudaMemsetAsync(f, 0, sizeof(int), stream));
  any_zero_kernel<T><<<blocks_for(it.numel), kThreads, 0, stream>>>(it.numel, operands_of<3>(it), g,
                                                                     f);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  int zero = 0;
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(&zero, f, sizeof(int), cudaMemcpyDeviceToHost, stream));
  wait_for_stream(stream);
  IGNIS_CHECK(zero == 0, op, ": integer division by zero (ZeroDivisionError): the divisor, of dtype ",
              dtype_name(dt), ", has a zero");
}

template <class F>
constexpr bool integer_division_v = requires { F::kIntegerDivision; };

template <class F, Dtypes D>
void binary(const TensorIter& it, DType dt, OpArgs args, const char* op) {
  if constexpr (D == Dtypes::FLOAT) {
    dispatch_floating(dt, op, [&]<class T>() { gpu_kernel<T, T, T>(it, F{args}); });
  } else {
    dispatch_dtype(dt, op, [&]<class T>() {
      if constexpr (std::is_same_v<T, bool>) {
        IGNIS_FAIL(op, ": not supported for bool tensors");
      } else {
        if constexpr (integer_division_v<F> && !std::is_floating_point_v<acc_t<T>>) {
          check_divisor<T>(it, dt, op);
        }
        gpu_kernel<T, T, T>(it, F{args});
      }
    });
  }
}

}  // namespace

#define IGNIS_ACTIVATION_OP(name, Functor, dtypes, ...)                            \
  IGNIS_REGISTER_KERNEL(name##_stub, CUDA, (&unary<fn::Functor, Dtypes::dtypes>)); \
  IGNIS_REGISTER_KERNEL(name##_backward_stub, CUDA, &backward<fn::Functor##Backward>);
#include "ignis/activation_ops.def"

#define IGNIS_BINARY_OP(name, Functor, dtypes, ...)                                            \
  IGNIS_REGISTER_KERNEL(name##_stub, CUDA, (+[](const TensorIter& it, DType dt, OpArgs args) { \
                          binary<fn::Functor, Dtypes::dtypes>(it, dt, args, #name);            \
                        }));
#define IGNIS_BINARY_SCALAR_OP IGNIS_BINARY_OP
#include "ignis/binary_ops.def"
IGNIS_REGISTER_KERNEL(floor_quotient_stub, CUDA, (+[](const TensorIter& it, DType dt, OpArgs args) {
                        binary<fn::FloorDivide, Dtypes::FLOAT>(it, dt, args, "remainder");
                      }));

}  // namespace ignis::cuda
