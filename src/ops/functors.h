// One scalar functor per elementwise op. The same functor is called by the CPU loops
// (cpu/loops.h), and will be by CUDA kernels and fused graph-mode kernels: keep them free of
// anything but arithmetic on their arguments (IGNIS_HD) and ignis::vmath.
// Functors are called with the op's compute type (float for bfloat16 storage); `p` carries the
// op's scalar parameters (alpha, slopes, bounds).
#pragma once

#include <bit>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>

#include "cpu/vec_math.h"
#include "ignis/dtype.h"

namespace ignis {

/// Scalar parameters of an elementwise op (meaning per op; unused ones stay 0).
struct OpArgs {
  double a = 0;
  double b = 0;
  double c = 0;
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


// Functors with transcendental bodies are large: force inlining so that the elementwise loops
// calling them stay vectorisable (an out-of-line call blocks vectorisation).
#if defined(__CUDACC__)
#define IGNIS_FN_INLINE __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define IGNIS_FN_INLINE inline __attribute__((always_inline))
#else
#define IGNIS_FN_INLINE inline
#endif

// ---- unary math (floating ops are called with float or double only; integer and bool inputs
// are promoted by the front end where PyTorch promotes them)
namespace detail {
/// base^exp for integers by repeated squaring, wrapping like the hardware (computed unsigned).
/// Negative exponents: 1 for base 1, +-1 for base -1, else 0 (truncated 1/base^n).
template <class T>
IGNIS_HD IGNIS_FN_INLINE T ipow(T base, T exp) {
  if constexpr (std::is_signed_v<T>) {
    if (exp < 0) {
      if (base == 1) return 1;
      if (base == -1) return (exp & 1) ? T(-1) : T(1);
      return 0;
    }
  }
  using U = std::make_unsigned_t<std::conditional_t<sizeof(T) < 4, unsigned, T>>;
  U r = 1, b = static_cast<U>(base);
  for (U e = static_cast<U>(exp); e != 0; e >>= 1) {
    if (e & 1u) r *= b;
    b *= b;
  }
  return static_cast<T>(r);
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T fexp(T x) {
  if constexpr (std::is_same_v<T, float>) return vmath::exp(x);
  else return std::exp(x);
}
/// x^e: for float on a CPU with AVX2 vmath::pow (its double arithmetic vectorizes there; within
/// 1 ulp of powf, a call per element), else std::pow.
template <class T>
IGNIS_HD IGNIS_FN_INLINE T fpow(T x, T e) {
#if !defined(__CUDA_ARCH__) && defined(__AVX2__)
  if constexpr (std::is_same_v<T, float>) return vmath::pow(x, e);
#endif
  return std::pow(x, e);
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T ftanh(T x) {
  if constexpr (std::is_same_v<T, float>) return vmath::tanh(x);
  else return std::tanh(x);
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T fsigmoid(T x) {
  if constexpr (std::is_same_v<T, float>) return vmath::sigmoid(x);
  else return T(1) / (T(1) + std::exp(-x));
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T ferf(T x) {
  if constexpr (std::is_same_v<T, float>) return vmath::erf(x);
  else return std::erf(x);
}
template <class T>
IGNIS_HD IGNIS_FN_INLINE T flog1p(T x) {
  if constexpr (std::is_same_v<T, float>) return vmath::log1p(x);
  else return std::log1p(x);
}
/// c ? a : b, computed without a branch for float: GCC would otherwise move the work of the
/// branch not taken into control flow, and the loop would not vectorise.
template <class T>
IGNIS_HD IGNIS_FN_INLINE T select(bool c, T a, T b) {
  if constexpr (std::is_same_v<T, float>) {
    const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
#if defined(__CUDA_ARCH__)
    return __uint_as_float((__float_as_uint(a) & m) | (__float_as_uint(b) & ~m));
#else
    return std::bit_cast<float>((std::bit_cast<std::uint32_t>(a) & m) |
                                (std::bit_cast<std::uint32_t>(b) & ~m));
#endif
  } else {
    return c ? a : b;
  }
}
constexpr double kSqrt1_2 = 0.70710678118654752440;      // 1/sqrt(2)
constexpr double kInvSqrt2Pi = 0.39894228040143267794;   // 1/sqrt(2*pi)
constexpr double kSqrt2OverPi = 0.79788456080286535588;  // sqrt(2/pi)
constexpr double kGeluCoef = 0.044715;
}  // namespace detail

struct Neg {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return static_cast<T>(-x); }
};
struct Abs {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (is_float_v<T>) return std::fabs(x);
    else if constexpr (std::is_unsigned_v<T>) return x;
    else return x < 0 ? static_cast<T>(-x) : x;
  }
};
struct Sign {  // 0 for 0 and NaN
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, bool> || std::is_unsigned_v<T>) return static_cast<T>(x != 0);
    else return static_cast<T>((T(0) < x) - (x < T(0)));
  }
};
struct Exp {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return detail::fexp(x); }
};
struct Log {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::log(x);
    else return std::log(x);
  }
};
struct Log1p {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return detail::flog1p(x); }
};
struct Sqrt {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::sqrt(x); }
};
struct Rsqrt {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return T(1) / std::sqrt(x); }
};
// vmath's float sin and cos reduce their argument accurately up to |x| = 1e5; beyond, the loops
// call the functor's exact path (see cpu/loops.h: has_exact_path) for the few such elements.
namespace detail {
template <class T>
IGNIS_HD IGNIS_FN_INLINE bool float_beyond_1e5(T x) {
  return std::is_same_v<T, float> && (x > T(1e5)) | (x < T(-1e5));
}
}  // namespace detail
struct Sin {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::sin(x);
    else return std::sin(x);
  }
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool needs_exact(T x) const { return detail::float_beyond_1e5(x); }
  template <class T>
  IGNIS_HD T exact(T x) const { return std::sin(x); }
};
struct Cos {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::cos(x);
    else return std::cos(x);
  }
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool needs_exact(T x) const { return detail::float_beyond_1e5(x); }
  template <class T>
  IGNIS_HD T exact(T x) const { return std::cos(x); }
};
// Functors of one std:: function each (float and double overloads; CUDA has the same names).
#define IGNIS_STD_UNARY_FUNCTOR(Name, f)                                 \
  struct Name {                                                          \
    OpArgs p;                                                            \
    template <class T>                                                   \
    IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::f(x); } \
  };
IGNIS_STD_UNARY_FUNCTOR(Exp2, exp2)
IGNIS_STD_UNARY_FUNCTOR(Log2, log2)
IGNIS_STD_UNARY_FUNCTOR(Log10, log10)
IGNIS_STD_UNARY_FUNCTOR(Tan, tan)
IGNIS_STD_UNARY_FUNCTOR(Asin, asin)
IGNIS_STD_UNARY_FUNCTOR(Acos, acos)
IGNIS_STD_UNARY_FUNCTOR(Atan, atan)
IGNIS_STD_UNARY_FUNCTOR(Sinh, sinh)
IGNIS_STD_UNARY_FUNCTOR(Cosh, cosh)
IGNIS_STD_UNARY_FUNCTOR(Asinh, asinh)
IGNIS_STD_UNARY_FUNCTOR(Acosh, acosh)
IGNIS_STD_UNARY_FUNCTOR(Atanh, atanh)
IGNIS_STD_UNARY_FUNCTOR(Erfc, erfc)
#undef IGNIS_STD_UNARY_FUNCTOR
struct Expm1 {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_same_v<T, float>) return vmath::expm1(x);
    else return std::expm1(x);
  }
};
struct Erf {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return detail::ferf(x); }
};
/// The inverse error function, computed in double for every dtype: Giles' rational
/// approximation ("Approximating the erfinv function", GPU Computing Gems, 2011), then two
/// Halley steps, on erf for |x| <= 0.5 and on erfc(y) = 1 - |x| above (1 - |x| is exact there,
/// and erfc keeps its relative precision near |x| = 1). +-inf at +-1, NaN outside [-1, 1].
struct Erfinv {
  OpArgs p;
  template <class T>
  IGNIS_HD T operator()(T xt) const {
    const double x = static_cast<double>(xt);
    const double a = x < 0 ? -x : x;
    if (!(a <= 1)) return std::numeric_limits<T>::quiet_NaN();
    if (a == 1) return static_cast<T>(x * std::numeric_limits<double>::infinity());
    double w = -std::log((1 - a) * (1 + a)), r;
    if (w < 5) {
      w -= 2.5;
      r = 2.81022636e-08;
      r = 3.43273939e-07 + r * w;
      r = -3.5233877e-06 + r * w;
      r = -4.39150654e-06 + r * w;
      r = 0.00021858087 + r * w;
      r = -0.00125372503 + r * w;
      r = -0.00417768164 + r * w;
      r = 0.246640727 + r * w;
      r = 1.50140941 + r * w;
    } else {
      w = std::sqrt(w) - 3;
      r = -0.000200214257;
      r = 0.000100950558 + r * w;
      r = 0.00134934322 + r * w;
      r = -0.00367342844 + r * w;
      r = 0.00573950773 + r * w;
      r = -0.0076224613 + r * w;
      r = 0.00943887047 + r * w;
      r = 1.00167406 + r * w;
      r = 2.83297682 + r * w;
    }
    double y = r * a;
    // Halley steps on f(y) = erf(y) - a: f' = 2/sqrt(pi) exp(-y^2), f''/f' = -2y.
    for (int i = 0; i < 2; ++i) {
      const double f = a <= 0.5 ? std::erf(y) - a : (1 - a) - std::erfc(y);
      const double d = f / (1.1283791670955126 * std::exp(-y * y));
      y -= d / (1 + y * d);
    }
    return static_cast<T>(std::copysign(y, x));
  }
};
struct Floor {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::floor(x); }
};
struct Ceil {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::ceil(x); }
};
struct Round {  // half to even (the default rounding mode)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::nearbyint(x); }
};

struct Trunc {  // toward zero
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return std::trunc(x); }
};

// ---- binary math of ignis/binary_ops.def. Integer fmod and remainder divide: functors with
// kIntegerDivision have their divisor checked for zeros before the kernel runs (an error, as
// PyTorch's ZeroDivisionError); the functor itself returns 0 there and for MIN % -1 rather than
// trap.
struct Atan2 {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const { return std::atan2(a, b); }
};
namespace detail {
template <class T>
IGNIS_HD IGNIS_FN_INLINE T int_mod(T a, T b) {  // a % b, truncated; 0 for b == 0 and b == -1
  if constexpr (std::is_signed_v<T>) {
    if (b == T(0) || b == T(-1)) return T(0);
  } else {
    if (b == T(0)) return T(0);
  }
  return static_cast<T>(a % b);
}
}  // namespace detail
struct Fmod {  // the sign of the dividend a (C's fmod)
  OpArgs p;
  static constexpr bool kIntegerDivision = true;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) return std::fmod(a, b);
    else return detail::int_mod(a, b);
  }
};
struct Remainder {  // the sign of the divisor b (Python's %): fmod, shifted by b when signs differ
  OpArgs p;
  static constexpr bool kIntegerDivision = true;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) {
      const T m = std::fmod(a, b);
      return (m != T(0) && ((b < T(0)) != (m < T(0)))) ? m + b : m;
    } else {
      const T m = detail::int_mod(a, b);
      if constexpr (std::is_signed_v<T>) {
        return (m != T(0) && ((b < T(0)) != (m < T(0)))) ? static_cast<T>(m + b) : m;
      } else {
        return m;
      }
    }
  }
};

// ---- powers: x^e for tensor e (Pow) or the scalar p.a (the others pick a cheap form of it)
struct Pow {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x, T e) const {
    if constexpr (is_float_v<T>) return detail::fpow(x, e);
    else return detail::ipow(x, e);
  }
};
struct PowScalar {  // x^p.a
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (is_float_v<T>) return detail::fpow(x, static_cast<T>(p.a));
    else return detail::ipow(x, static_cast<T>(p.a));
  }
};
struct PowOne {  // x^1: x itself, as pow gives it (NaN, the infinities and -0 included)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return x;
  }
};
struct PowZero {  // x^0: 1 for every x, NaN included (as pow and PyTorch give it)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T) const {
    return T(1);
  }
};
struct Square {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return static_cast<T>(x * x); }
};
struct Cube {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return static_cast<T>(x * x * x); }
};
struct Reciprocal {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return T(1) / x; }
};

/// Calls v with the functor computing x^p.a as eager's pow kernel does — a cheap exact form for
/// the common exponents (x, 1, x*x, x*x*x and, for floating types, sqrt, rsqrt, 1/x), pow
/// otherwise — and returns what v returns. The one list of those forms: eager's
/// pow_scalar_kernel, PowScalarAsEager (fused programs) and the interpreter (fused_runtime.h),
/// which picks the form once per instruction rather than per element, pick from it.
template <bool Floating, class V>
IGNIS_HD IGNIS_FN_INLINE decltype(auto) with_pow_form(OpArgs p, V&& v) {
  const double e = p.a;
  if (e == 1) return v(PowOne{p});
  if (e == 0) return v(PowZero{p});
  if (e == 2) return v(Square{p});
  if (e == 3) return v(Cube{p});
  if constexpr (Floating) {
    if (e == 0.5) return v(Sqrt{p});
    if (e == -0.5) return v(Rsqrt{p});
    if (e == -1) return v(Reciprocal{p});
  }
  return v(PowScalar{p});
}

/// x^p.a with eager's forms (with_pow_form), so a fused pow gives eager's values; the exponent is
/// a constant, so a generated kernel keeps one branch.
struct PowScalarAsEager {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return with_pow_form<true>(p, [x](auto f) { return f(x); });
  }
};

// ---- clamping and extrema (NaN propagates, like PyTorch)
struct Clamp {  // min p.a, then max p.b: with min > max every element becomes max
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T lo = static_cast<T>(p.a), hi = static_cast<T>(p.b);
    const T t = x < lo ? lo : x;
    return t > hi ? hi : t;
  }
};
struct ClampMin {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T lo = static_cast<T>(p.a);
    return x < lo ? lo : x;
  }
};
struct ClampMax {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T hi = static_cast<T>(p.a);
    return x > hi ? hi : x;
  }
};
struct Maximum {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) return (a > b || a != a) ? a : b;
    else return a > b ? a : b;
  }
};
struct Minimum {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T a, T b) const {
    if constexpr (is_float_v<T>) return (a < b || a != a) ? a : b;
    else return a < b ? a : b;
  }
};

// ---- activations (p: leaky_relu slope in a; softplus beta in a, threshold in b)
struct Relu {  // NaN stays NaN (PyTorch's clamp_min(x, 0))
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    if constexpr (std::is_unsigned_v<T>) return x;
    else return x < T(0) ? T(0) : x;
  }
};
struct Tanh {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return detail::ftanh(x); }
};
struct Sigmoid {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return detail::fsigmoid(x); }
};
struct LeakyRelu {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T y = x * static_cast<T>(p.a);  // computed unconditionally: a select vectorises
    return x > T(0) ? x : y;
  }
};
struct Gelu {  // x * Phi(x), Phi the standard normal CDF
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    return T(0.5) * x * (T(1) + detail::ferf(x * static_cast<T>(detail::kSqrt1_2)));
  }
};
struct GeluTanh {  // the tanh approximation
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T inner = static_cast<T>(detail::kSqrt2OverPi) *
                    (x + static_cast<T>(detail::kGeluCoef) * x * x * x);
    return T(0.5) * x * (T(1) + detail::ftanh(inner));
  }
};
struct Silu {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const { return x * detail::fsigmoid(x); }
};
struct Softplus {  // log(1 + exp(beta x)) / beta, or x where beta x > threshold
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T x) const {
    const T beta = static_cast<T>(p.a);
    const T bx = x * beta;
    return detail::select(bx > static_cast<T>(p.b), x, detail::flog1p(detail::fexp(bx)) / beta);
  }
};

// ---- fused backward of activations: (g, saved) -> grad of the input
struct ThresholdBackward {  // relu: g where y > p.a
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T y) const {
    return y <= static_cast<T>(p.a) ? T(0) : g;
  }
};
struct TanhBackward {  // from the output y
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T y) const { return g * (T(1) - y * y); }
};
struct SigmoidBackward {  // from the output y
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T y) const { return g * (T(1) - y) * y; }
};
struct LeakyReluBackward {  // from the input x
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T gs = g * static_cast<T>(p.a);
    return x > T(0) ? g : gs;
  }
};
struct GeluBackward {  // from x: Phi(x) + x phi(x)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T cdf = T(0.5) * (T(1) + detail::ferf(x * static_cast<T>(detail::kSqrt1_2)));
    const T pdf = static_cast<T>(detail::kInvSqrt2Pi) * detail::fexp(T(-0.5) * x * x);
    return g * (cdf + x * pdf);
  }
};
struct GeluTanhBackward {  // from x
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T k = static_cast<T>(detail::kSqrt2OverPi), c = static_cast<T>(detail::kGeluCoef);
    const T x2 = x * x;
    const T t = detail::ftanh(k * (x + c * x2 * x));
    const T dinner = k * (T(1) + T(3) * c * x2);
    return g * (T(0.5) * (T(1) + t) + T(0.5) * x * (T(1) - t * t) * dinner);
  }
};
struct SiluBackward {  // from x: s (1 + x (1 - s)), s = sigmoid(x)
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T s = detail::fsigmoid(x);
    return g * s * (T(1) + x * (T(1) - s));
  }
};
struct ClampBackward {  // clamp's: g where min <= x <= max (bounds included; p.a, p.b), else 0
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    return (x >= static_cast<T>(p.a)) & (x <= static_cast<T>(p.b)) ? g : T(0);
  }
};
struct SoftplusBackward {  // from x: sigmoid(beta x), or 1 above the threshold
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(T g, T x) const {
    const T bx = x * static_cast<T>(p.a);
    return detail::select(bx > static_cast<T>(p.b), g, g * detail::fsigmoid(bx));
  }
};

// ---- comparisons and logic (bool results)
struct Eq {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a == b; }
};
struct Ne {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a != b; }
};
struct Lt {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a < b; }
};
struct Le {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a <= b; }
};
struct Gt {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a > b; }
};
struct Ge {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return a >= b; }
};
struct LogicalAnd {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return (a != T(0)) & (b != T(0)); }
};
struct LogicalOr {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T a, T b) const { return (a != T(0)) | (b != T(0)); }
};
struct LogicalNot {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T x) const { return x == T(0); }
};
struct IsNan {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T x) const { return x != x; }
};
struct IsInf {
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T x) const {
    return std::fabs(x) == std::numeric_limits<T>::infinity();
  }
};
struct IsFinite {  // false for NaN and +-inf
  OpArgs p;
  template <class T>
  IGNIS_HD IGNIS_FN_INLINE bool operator()(T x) const {
    return std::fabs(x) < std::numeric_limits<T>::infinity();
  }
};
struct Where {  // c ? a : b (c: bool, or the uint8 bytes of a bool tensor)
  OpArgs p;
  template <class C, class T>
  IGNIS_HD IGNIS_FN_INLINE T operator()(C c, T a, T b) const { return c ? a : b; }
};

}  // namespace fn
}  // namespace ignis
