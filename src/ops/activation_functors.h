// The scalar functors of the activations of ignis/activation_ops.def: for each op `Functor`
// (its forward, of x) and `FunctorBackward` (g * f'(x), of the gradient g and the input x).
// Like every functor (ops/functors.h) they do arithmetic only, so that CUDA and fused kernels
// can share them; p holds the op's parameters in the order of its list entry (a, b, c).
// Edge values follow PyTorch's CPU kernels (tests/pytorch/gen_activation_cases.py checks them).
#pragma once

#include "ops/functors.h"

namespace ignis::fn {

namespace detail {
/// min(max(x, 0), 6) with NaN propagated (PyTorch's relu6 inside hardswish and hardsigmoid).
template <class T>
IGNIS_HD IGNIS_FN_INLINE T clamp_0_6(T x) {
  const T t = x < T(0) ? T(0) : x;
  return t > T(6) ? T(6) : t;
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T fexpm1(T x) {
  if constexpr (std::is_same_v<T, float>)
    return vmath::expm1(x);
  else
    return std::expm1(x);
}
}  // namespace detail

/// elu: scale x for x > 0, else alpha scale (exp(input_scale x) - 1). p: alpha, scale,
/// input_scale.
struct Elu {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    // + 0: elu(-0) is +0, as PyTorch's exp(x) - 1 gives (expm1 keeps the sign of the zero)
    const T neg = static_cast<T>(p.a * p.b) * detail::fexpm1(x * static_cast<T>(p.c)) + T(0);
    return detail::select(x <= T(0), neg, x * static_cast<T>(p.b));
  }
};
struct EluBackward {  // NaN takes the positive branch, as PyTorch's x <= 0 test gives
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T neg = g * static_cast<T>(p.a * p.b * p.c) * detail::fexp(x * static_cast<T>(p.c));
    return detail::select(x <= T(0), neg, g * static_cast<T>(p.b));
  }
};

/// hardtanh: x clamped to [min_val, max_val] (p.a, p.b); every dtype but bool. With min > max
/// every element becomes max, as PyTorch's clamp gives.
struct Hardtanh {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T lo = static_cast<T>(p.a), hi = static_cast<T>(p.b);
    const T t = x < lo ? lo : x;
    return t > hi ? hi : t;
  }
};
struct HardtanhBackward {  // g strictly inside (min_val, max_val), else 0
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    return (x <= static_cast<T>(p.a)) | (x >= static_cast<T>(p.b)) ? T(0) : g;
  }
};

/// hardswish: x relu6(x + 3) / 6.
struct Hardswish {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return x * detail::clamp_0_6(x + T(3)) / T(6);
  }
};
struct HardswishBackward {  // 0 below -3, x / 3 + 1/2 on [-3, 3), 1 from 3 (PyTorch's kernel)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T mid = g * (x / T(3) + T(0.5));
    return x < T(-3) ? T(0) : (x < T(3) ? mid : g);
  }
};

/// hardsigmoid: relu6(x + 3) / 6.
struct Hardsigmoid {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return detail::clamp_0_6(x + T(3)) / T(6);
  }
};
struct HardsigmoidBackward {  // 1/6 strictly inside (-3, 3)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    return (x > T(-3)) & (x < T(3)) ? g / T(6) : T(0);
  }
};

/// mish: x tanh(softplus(x)), softplus(x) = log1p(exp(x)) (inf for large x, so tanh gives 1).
struct Mish {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return x * detail::ftanh(detail::flog1p(detail::fexp(x)));
  }
};
struct MishBackward {  // t + x sigmoid(x) (1 - t^2), t = tanh(softplus(x))
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T t = detail::ftanh(detail::flog1p(detail::fexp(x)));
    return g * (t + x * detail::fsigmoid(x) * (T(1) - t * t));
  }
};

/// log_sigmoid: min(x, 0) - log1p(exp(-|x|)), stable for large |x| (x itself far below 0,
/// -exp(-x) far above; +0 at +inf, as PyTorch's).
struct LogSigmoid {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T m = x < T(0) ? x : T(0);
    const T ax = x < T(0) ? -x : x;
    return m - detail::flog1p(detail::fexp(-ax));
  }
};
struct LogSigmoidBackward {  // 1 - sigmoid(x) = sigmoid(-x)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    return g * detail::fsigmoid(-x);
  }
};

/// a / b rounded toward -inf, as PyTorch's div(rounding_mode="floor") computes it for floats:
/// (a - fmod(a, b)) / b, less one where the signs of b and the fmod differ, then rounded to
/// the nearest integer. Python's `//`: 1 // -inf is -1, inf // 1 is NaN. (The quotient in
/// remainder's gradient for its divisor.)
struct FloorDivide {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const {
    if (b == T(0)) return a / b;
    const T mod = std::fmod(a, b);
    T div = (a - mod) / b;
    if (mod != T(0) && (b < T(0)) != (mod < T(0))) div -= T(1);
    if (div == T(0)) return std::copysign(T(0), a / b);
    const T fl = std::floor(div);
    return div - fl > T(0.5) ? fl + T(1) : fl;
  }
};

}  // namespace ignis::fn
