// The few standard headers that graph mode's embedded functors include (jit/codegen.cpp's
// kPrelude: ignis/dtype.h, cpu/vec_math.h, ops/functors.h), written for NVRTC, which has no
// standard library: <cmath> over CUDA's math functions, the type traits and limits the functors
// use, bit_cast, the fixed-width integers. Handed to nvrtcCreateProgram as in-memory headers, so
// that kernels compile wherever libnvrtc is, without CUDA's include directory.
#pragma once

namespace ignis::cuda::detail {

struct NvrtcHeader {
  const char* name;
  const char* text;
};

inline constexpr NvrtcHeader kNvrtcStdHeaders[] = {
    {"cstdint", R"(#pragma once
typedef signed char int8_t;
typedef short int16_t;
typedef int int32_t;
typedef long long int64_t;
typedef unsigned char uint8_t;
typedef unsigned short uint16_t;
typedef unsigned int uint32_t;
typedef unsigned long long uint64_t;
namespace std {
using ::int8_t; using ::int16_t; using ::int32_t; using ::int64_t;
using ::uint8_t; using ::uint16_t; using ::uint32_t; using ::uint64_t;
}
)"},
    {"type_traits", R"(#pragma once
namespace std {
template <class T, T v> struct integral_constant { static constexpr T value = v; };
using true_type = integral_constant<bool, true>;
using false_type = integral_constant<bool, false>;
template <class A, class B> struct is_same : false_type {};
template <class A> struct is_same<A, A> : true_type {};
template <class A, class B> inline constexpr bool is_same_v = is_same<A, B>::value;
template <class T> struct remove_cv { using type = T; };
template <class T> struct remove_cv<const T> { using type = T; };
template <class T> struct remove_cv<volatile T> { using type = T; };
template <class T> struct remove_cv<const volatile T> { using type = T; };
template <class T> using remove_cv_t = typename remove_cv<T>::type;
template <class T> inline constexpr bool is_floating_point_v =
    is_same_v<remove_cv_t<T>, float> || is_same_v<remove_cv_t<T>, double> ||
    is_same_v<remove_cv_t<T>, long double>;
template <class T> inline constexpr bool is_integral_v =
    is_same_v<remove_cv_t<T>, bool> || is_same_v<remove_cv_t<T>, char> ||
    is_same_v<remove_cv_t<T>, signed char> || is_same_v<remove_cv_t<T>, unsigned char> ||
    is_same_v<remove_cv_t<T>, short> || is_same_v<remove_cv_t<T>, unsigned short> ||
    is_same_v<remove_cv_t<T>, int> || is_same_v<remove_cv_t<T>, unsigned> ||
    is_same_v<remove_cv_t<T>, long> || is_same_v<remove_cv_t<T>, unsigned long> ||
    is_same_v<remove_cv_t<T>, long long> || is_same_v<remove_cv_t<T>, unsigned long long>;
template <class T> inline constexpr bool is_arithmetic_v = is_integral_v<T> || is_floating_point_v<T>;
template <class T> inline constexpr bool is_signed_v = is_arithmetic_v<T> && T(-1) < T(0);
template <class T> inline constexpr bool is_unsigned_v = is_arithmetic_v<T> && T(0) < T(-1);
template <bool B, class T, class F> struct conditional { using type = T; };
template <class T, class F> struct conditional<false, T, F> { using type = F; };
template <bool B, class T, class F> using conditional_t = typename conditional<B, T, F>::type;
template <bool B, class T = void> struct enable_if {};
template <class T> struct enable_if<true, T> { using type = T; };
template <bool B, class T = void> using enable_if_t = typename enable_if<B, T>::type;
template <class T> struct make_unsigned { using type = T; };
template <> struct make_unsigned<signed char> { using type = unsigned char; };
template <> struct make_unsigned<char> { using type = unsigned char; };
template <> struct make_unsigned<short> { using type = unsigned short; };
template <> struct make_unsigned<int> { using type = unsigned; };
template <> struct make_unsigned<long> { using type = unsigned long; };
template <> struct make_unsigned<long long> { using type = unsigned long long; };
template <class T> using make_unsigned_t = typename make_unsigned<T>::type;
}
)"},
    {"limits", R"(#pragma once
namespace std {
template <class T> struct numeric_limits;
template <> struct numeric_limits<float> {
  static constexpr bool is_specialized = true;
  __device__ static float infinity() { return __int_as_float(0x7f800000); }
  __device__ static float quiet_NaN() { return __int_as_float(0x7fc00000); }
  __device__ static float max() { return __int_as_float(0x7f7fffff); }
  __device__ static float lowest() { return __int_as_float(0xff7fffff); }
  __device__ static float min() { return __int_as_float(0x00800000); }
  __device__ static float epsilon() { return __int_as_float(0x34000000); }
};
template <> struct numeric_limits<double> {
  static constexpr bool is_specialized = true;
  __device__ static double infinity() { return __longlong_as_double(0x7ff0000000000000ll); }
  __device__ static double quiet_NaN() { return __longlong_as_double(0x7ff8000000000000ll); }
  __device__ static double max() { return __longlong_as_double(0x7fefffffffffffffll); }
  __device__ static double lowest() { return __longlong_as_double(0xffefffffffffffffull); }
  __device__ static double min() { return __longlong_as_double(0x0010000000000000ll); }
  __device__ static double epsilon() { return __longlong_as_double(0x3cb0000000000000ll); }
};
}
)"},
    {"bit", R"(#pragma once
namespace std {
template <class To, class From>
__device__ inline To bit_cast(const From& from) {
  static_assert(sizeof(To) == sizeof(From), "bit_cast: sizes differ");
  To to;
  memcpy(&to, &from, sizeof(To));
  return to;
}
}
)"},
    {"cstring", R"(#pragma once
namespace std { using ::memcpy; }
)"},
    {"cmath", R"(#pragma once
namespace std {
#define IGNIS_NVRTC_MATH1(name) \
  __device__ inline float name(float x) { return ::name##f(x); } \
  __device__ inline double name(double x) { return ::name(x); }
#define IGNIS_NVRTC_MATH2(name) \
  __device__ inline float name(float x, float y) { return ::name##f(x, y); } \
  __device__ inline double name(double x, double y) { return ::name(x, y); }
IGNIS_NVRTC_MATH1(exp) IGNIS_NVRTC_MATH1(exp2) IGNIS_NVRTC_MATH1(expm1)
IGNIS_NVRTC_MATH1(log) IGNIS_NVRTC_MATH1(log2) IGNIS_NVRTC_MATH1(log10) IGNIS_NVRTC_MATH1(log1p)
IGNIS_NVRTC_MATH1(sqrt) IGNIS_NVRTC_MATH1(cbrt) IGNIS_NVRTC_MATH1(fabs)
IGNIS_NVRTC_MATH1(sin) IGNIS_NVRTC_MATH1(cos) IGNIS_NVRTC_MATH1(tan)
IGNIS_NVRTC_MATH1(asin) IGNIS_NVRTC_MATH1(acos) IGNIS_NVRTC_MATH1(atan)
IGNIS_NVRTC_MATH1(sinh) IGNIS_NVRTC_MATH1(cosh) IGNIS_NVRTC_MATH1(tanh)
IGNIS_NVRTC_MATH1(asinh) IGNIS_NVRTC_MATH1(acosh) IGNIS_NVRTC_MATH1(atanh)
IGNIS_NVRTC_MATH1(erf) IGNIS_NVRTC_MATH1(erfc) IGNIS_NVRTC_MATH1(lgamma) IGNIS_NVRTC_MATH1(tgamma)
IGNIS_NVRTC_MATH1(floor) IGNIS_NVRTC_MATH1(ceil) IGNIS_NVRTC_MATH1(trunc) IGNIS_NVRTC_MATH1(round)
IGNIS_NVRTC_MATH1(nearbyint) IGNIS_NVRTC_MATH1(rint)
IGNIS_NVRTC_MATH2(pow) IGNIS_NVRTC_MATH2(fmod) IGNIS_NVRTC_MATH2(atan2) IGNIS_NVRTC_MATH2(copysign)
IGNIS_NVRTC_MATH2(fmin) IGNIS_NVRTC_MATH2(fmax) IGNIS_NVRTC_MATH2(remainder) IGNIS_NVRTC_MATH2(hypot)
#undef IGNIS_NVRTC_MATH1
#undef IGNIS_NVRTC_MATH2
__device__ inline float abs(float x) { return ::fabsf(x); }
__device__ inline double abs(double x) { return ::fabs(x); }
__device__ inline bool isnan(float x) { return ::isnan(x); }
__device__ inline bool isnan(double x) { return ::isnan(x); }
__device__ inline bool isinf(float x) { return ::isinf(x); }
__device__ inline bool isinf(double x) { return ::isinf(x); }
__device__ inline bool isfinite(float x) { return ::isfinite(x); }
__device__ inline bool isfinite(double x) { return ::isfinite(x); }
__device__ inline bool signbit(float x) { return ::signbit(x); }
__device__ inline bool signbit(double x) { return ::signbit(x); }
}
)"},
    // dtype.h's printing, which kernels never call.
    {"ostream", R"(#pragma once
namespace std {
struct ostream {
  template <class T> ostream& operator<<(const T&) { return *this; }
};
}
)"},
    {"string_view", R"(#pragma once
namespace std {
struct string_view {
  const char* p_ = nullptr;
  unsigned long long n_ = 0;
  constexpr string_view(const char* s) : p_(s) { while (s[n_] != 0) ++n_; }
  constexpr const char* data() const { return p_; }
  constexpr unsigned long long size() const { return n_; }
};
}
)"},
};

}  // namespace ignis::cuda::detail
