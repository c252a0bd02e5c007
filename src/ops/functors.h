// One scalar functor per elementwise op. The same functor is called by the CPU loops
// (cpu/loops.h), and will be by CUDA kernels and fused graph-mode kernels: keep them free of
// anything but arithmetic on their arguments (IGNIS_HD) and ignis::vmath.
// Functors are called with the op's compute type (float for bfloat16 storage); `p` carries the
// op's scalar parameters (alpha, slopes, bounds).
#pragma once

#include <cmath>
#include <type_traits>

#include "cpu/vec_math.h"
#include "ignis/dtype.h"

namespace ignis {

/// Scalar parameters of an elementwise op (meaning per op; unused ones stay 0).
struct OpArgs {
  double a = 0;
  double b = 0;
};

namespace fn {

template <class T>
constexpr bool is_float_v = std::is_floating_point_v<T>;

// ---- binary arithmetic
struct Add {  // a + alpha * b
  OpArgs p;
  template <class T>
  IGNIS_HD auto operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a || b;
    else return static_cast<T>(a + static_cast<T>(p.a) * b);
  }
};
struct Sub {  // a - alpha * b
  OpArgs p;
  template <class T>
  IGNIS_HD T operator()(T a, T b) const { return static_cast<T>(a - static_cast<T>(p.a) * b); }
};
struct Mul {
  OpArgs p;
  template <class T>
  IGNIS_HD auto operator()(T a, T b) const {
    if constexpr (std::is_same_v<T, bool>) return a && b;
    else return static_cast<T>(a * b);
  }
};
struct Div {  // true division (callers promote integers to float first)
  OpArgs p;
  template <class T>
  IGNIS_HD T operator()(T a, T b) const { return a / b; }
};

}  // namespace fn
}  // namespace ignis
