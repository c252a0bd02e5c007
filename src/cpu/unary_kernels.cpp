// CPU kernels of the unary math ops, pow, clamp, maximum and minimum: the functors of
// ops/functors.h over cpu_kernel. The front ends (ops/unary.cpp) pick the compute dtype, so the
// floating kernels only see bfloat16, float32 and float64.
#include "cpu/loops.h"
#include "ops/unary.h"

namespace ignis::cpu {
namespace {

/// out = F(x), every dtype.
template <class F>
void unary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "unary", [&]<class T>() { cpu_kernel<T, T>(it, F{args}); });
}
/// out = F(x), floating dtypes.
template <class F>
void unary_float_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "unary", [&]<class T>() { cpu_kernel<T, T>(it, F{args}); });
}
/// out = F(a, b), every dtype.
template <class F>
void binary_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "binary", [&]<class T>() { cpu_kernel<T, T, T>(it, F{args}); });
}

void pow_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "pow", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("pow: not supported for bool tensors");
    } else {
      cpu_kernel<T, T, T>(it, fn::Pow{args});
    }
  });
}

// x ^ scalar: the common exponents get a cheap exact form (x*x, sqrt, 1/x) instead of pow.
void pow_scalar_kernel(const TensorIter& it, DType dt, OpArgs args) {
  const double e = args.a;
  dispatch_dtype(dt, "pow", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("pow: not supported for bool tensors");
    } else {
      if (e == 2) return cpu_kernel<T, T>(it, fn::Square{args});
      if (e == 3) return cpu_kernel<T, T>(it, fn::Cube{args});
      if constexpr (fn::is_float_v<acc_t<T>>) {
        if (e == 0.5) return cpu_kernel<T, T>(it, fn::Sqrt{args});
        if (e == -0.5) return cpu_kernel<T, T>(it, fn::Rsqrt{args});
        if (e == -1) return cpu_kernel<T, T>(it, fn::Reciprocal{args});
      }
      cpu_kernel<T, T>(it, fn::PowScalar{args});
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(neg_stub, CPU, &unary_kernel<fn::Neg>);
IGNIS_REGISTER_KERNEL(abs_stub, CPU, &unary_kernel<fn::Abs>);
IGNIS_REGISTER_KERNEL(sign_stub, CPU, &unary_kernel<fn::Sign>);
// The floating unary ops of ignis/float_unary_ops.def, each over its functor.
#define IGNIS_FLOAT_UNARY_OP(name, Functor, ...) \
  IGNIS_REGISTER_KERNEL(name##_stub, CPU, &unary_float_kernel<fn::Functor>);
#include "ignis/float_unary_ops.def"
IGNIS_REGISTER_KERNEL(floor_stub, CPU, &unary_float_kernel<fn::Floor>);
IGNIS_REGISTER_KERNEL(ceil_stub, CPU, &unary_float_kernel<fn::Ceil>);
IGNIS_REGISTER_KERNEL(round_stub, CPU, &unary_float_kernel<fn::Round>);
IGNIS_REGISTER_KERNEL(trunc_stub, CPU, &unary_float_kernel<fn::Trunc>);
IGNIS_REGISTER_KERNEL(pow_stub, CPU, &pow_kernel);
IGNIS_REGISTER_KERNEL(pow_scalar_stub, CPU, &pow_scalar_kernel);
IGNIS_REGISTER_KERNEL(clamp_stub, CPU, &unary_kernel<fn::Clamp>);
IGNIS_REGISTER_KERNEL(clamp_min_stub, CPU, &unary_kernel<fn::ClampMin>);
IGNIS_REGISTER_KERNEL(clamp_max_stub, CPU, &unary_kernel<fn::ClampMax>);
IGNIS_REGISTER_KERNEL(maximum_stub, CPU, &binary_kernel<fn::Maximum>);
IGNIS_REGISTER_KERNEL(minimum_stub, CPU, &binary_kernel<fn::Minimum>);

}  // namespace ignis::cpu
