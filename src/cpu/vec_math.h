// ignis::vmath -- branch-free float32 transcendental functions that auto-vectorize.
//
// Every function is straight-line code: float arithmetic, compares feeding bitwise selects, and
// bit casts. There is no libm call, no lookup table and no branch, so a loop calling these
// functions (they are force-inlined) vectorizes with GCC and Clang at -O3 on any x86 level (SSE2
// to AVX-512), and the same code compiles for CUDA device code.
//
//  * exp/expm1: x = k*ln2 + r, k = round(x/ln2) via the 1.5*2^23 "magic number" (the integer k is
//    read from the bits, no float->int conversion). ln2 is split Cody-Waite style so k*ln2_hi is
//    exact. On |r| <= ln2/2, e^r = 1 + r + r^2*P(r) with P a degree-5 minimax fit. 2^k is built in
//    the exponent field; exp applies it as two factors so overflow and gradual underflow fall out.
//  * log/log1p: x = 2^e*m with m in [sqrt(1/2), sqrt(2)). With f = m-1 and s = f/(2+f),
//    log(m) = 2*atanh(s) = f - s*(f - s^2*T(s^2)), T a degree-2 minimax fit. log1p recovers the
//    rounding error c of u = 1+x exactly (two-sum) and adds c/u.
//  * tanh(x) = sign(x)*t/(t+2) with t = expm1(2|x|): no cancellation near 0.
//  * sigmoid: with e = exp(-|x|) <= 1 (never overflows): 1/(1+e) for x >= 0, e/(1+e) otherwise.
//  * erf: |x| < 0.9: x*P(x^2); otherwise 1 - exp(Q(|x|)), Q a minimax fit of log(erfc) on [0.9, 4].
//  * pow(x, y) = 2^(y log2|x|) in double (the float's 24 bits need the exponent's product to
//    about 2^-40 when it is as large as 150): |x| = 2^k z with z in [sqrt(1/2), sqrt(2)),
//    log(z) = 2 atanh(s), s = (z-1)/(z+1), by its series to s^17 (|s| <= 0.172: 3e-14 relative);
//    2^t = 2^n e^(f ln2), n = round(t), by e^g's Taylor series to g^10 (|g| <= 0.35: 2e-13);
//    rounded to float once at the end, so overflow and subnormal results fall out. Sign, NaN
//    and the special cases of C's pow (x = +-0, +-1, +-inf; y = +-0, +-inf, integers) are
//    selected. The double arithmetic vectorizes at half the lanes.
//  * sin/cos: k = round(x*2/pi), r = x - k*pi/2 with pi/2 split into 5 floats, the first four
//    holding <= 8 significant bits, so every k*C_i that matters is exact for |k| < 2^16 and the
//    reduction is accurate for |x| <= 1e5 (with or without FMA). Minimax odd/even polynomials on
//    [-pi/4, pi/4] and a quadrant select finish. Beyond 1e5 accuracy degrades (absolute error
//    ~1e-7 up to 2e6 when FMA contraction is on); beyond ~6e6 results are meaningless but stay in
//    [-1, 1].
//
// All polynomial coefficients are Remez fits made for this file. Max errors, measured over every
// float against a double-precision reference, are listed in tests/test_vec_math.cpp (<= 3 ulp).
// Requires IEEE semantics: FMA contraction is fine, -ffast-math is not (it breaks the error-free
// transformations and the NaN/inf handling).
#pragma once

#include <bit>
#include <cstdint>

#ifndef IGNIS_HD
#if defined(__CUDACC__)
#define IGNIS_HD __host__ __device__
#else
#define IGNIS_HD
#endif
#endif

#if defined(__CUDACC__)
#define IGNIS_VMATH_FN IGNIS_HD __forceinline__
#elif defined(__GNUC__) || defined(__clang__)
#define IGNIS_VMATH_FN IGNIS_HD inline __attribute__((always_inline))
#else
#define IGNIS_VMATH_FN IGNIS_HD inline
#endif

namespace ignis::vmath {
namespace detail {

IGNIS_VMATH_FN std::uint32_t bits(float f) {
#if defined(__CUDA_ARCH__)
  return __float_as_uint(f);
#else
  return std::bit_cast<std::uint32_t>(f);
#endif
}

IGNIS_VMATH_FN float from_bits(std::uint32_t u) {
#if defined(__CUDA_ARCH__)
  return __uint_as_float(u);
#else
  return std::bit_cast<float>(u);
#endif
}

// c ? a : b. Written with bit operations so that no compiler pass turns it into control flow:
// GCC otherwise threads or sinks code into branches and, unless AVX-512 masking is available,
// refuses to if-convert possibly trapping FP operations there, so the loop does not vectorize.
IGNIS_VMATH_FN float select(bool c, float a, float b) {
  const std::uint32_t m = 0u - static_cast<std::uint32_t>(c);
  return from_bits((bits(a) & m) | (bits(b) & ~m));
}

IGNIS_VMATH_FN std::uint64_t bits64(double d) {
#if defined(__CUDA_ARCH__)
  return static_cast<std::uint64_t>(__double_as_longlong(d));
#else
  return std::bit_cast<std::uint64_t>(d);
#endif
}

IGNIS_VMATH_FN double from_bits64(std::uint64_t u) {
#if defined(__CUDA_ARCH__)
  return __longlong_as_double(static_cast<long long>(u));
#else
  return std::bit_cast<double>(u);
#endif
}

IGNIS_VMATH_FN double select64(bool c, double a, double b) {
  const std::uint64_t m = 0u - static_cast<std::uint64_t>(c);
  return from_bits64((bits64(a) & m) | (bits64(b) & ~m));
}

IGNIS_VMATH_FN float inf() { return from_bits(0x7f800000u); }
IGNIS_VMATH_FN float qnan() { return from_bits(0x7fc00000u); }
IGNIS_VMATH_FN float fabs(float x) { return from_bits(bits(x) & 0x7fffffffu); }
IGNIS_VMATH_FN float copy_sign(float mag, float sgn) {
  return from_bits((bits(mag) & 0x7fffffffu) | (bits(sgn) & 0x80000000u));
}

// 2^n for n in [-126, 127], built directly in the exponent field.
IGNIS_VMATH_FN float pow2i(std::int32_t n) {
  return from_bits((static_cast<std::uint32_t>(n) + 127u) << 23);
}

// Rounds v (|v| < 2^22) to the nearest integer; also returns it as an int32 read from the bits.
IGNIS_VMATH_FN float round_int(float v, std::int32_t& k) {
  constexpr float kMagic = 0x1.8p23f;  // 1.5 * 2^23: the sum's ulp is 1
  const float t = v + kMagic;
  k = static_cast<std::int32_t>(bits(t) - bits(kMagic));
  return t - kMagic;
}

// ln2 = kLn2Hi + kLn2Lo, kLn2Hi has 16 significant bits so k*kLn2Hi is exact for |k| < 2^8.
constexpr float kLog2e = 0x1.715476p+0f;
constexpr float kLn2Hi = 0x1.62e4p-1f;
constexpr float kLn2Lo = 0x1.7f7d1cp-20f;

// x = k*ln2 + r, |r| <= ln2/2 (plus rounding slack).
IGNIS_VMATH_FN float exp_reduce(float x, std::int32_t& k) {
  const float kf = round_int(x * kLog2e, k);
  const float r = x - kf * kLn2Hi;  // exact
  return r - kf * kLn2Lo;
}

// e^r - 1 = r + r^2*P(r) on |r| <= ln2/2; |P - P_exact| < 1.4e-9.
IGNIS_VMATH_FN float expm1_poly(float r) {
  float p = 0x1.a17dfap-13f;
  p = p * r + 0x1.6d4318p-10f;
  p = p * r + 0x1.1110acp-7f;
  p = p * r + 0x1.5554eap-5f;
  p = p * r + 0x1.555556p-3f;
  p = p * r + 0.5f;
  return r + (r * r) * p;
}

// log(x) + corr for finite x > 0 (subnormals included), corr a small correction term.
IGNIS_VMATH_FN float log_core(float x, float corr) {
  constexpr std::uint32_t kSqrtHalf = 0x3f3504f3u;  // bits of sqrt(1/2)
  // Subnormals are scaled by 2^23 first; the exponent correction is read back from the scale.
  const float scale = select(x < 0x1p-126f, 0x1p23f, 1.0f);
  const std::uint32_t ix = bits(x * scale) - kSqrtHalf;
  const std::int32_t scale_exp = static_cast<std::int32_t>(bits(scale) >> 23) - 127;
  const float e = static_cast<float>((static_cast<std::int32_t>(ix) >> 23) - scale_exp);
  const float m = from_bits((ix & 0x007fffffu) + kSqrtHalf);  // in [sqrt(1/2), sqrt(2))
  const float f = m - 1.0f;                                   // exact
  const float s = f / (2.0f + f);
  const float z = s * s;
  // 2*atanh(s) = 2s + s*z*T(z) and 2s = f - s*f.
  const float t = z * (0x1.555576p-1f + z * (0x1.996182p-2f + z * 0x1.31a44cp-2f));
  const float lo = (e * kLn2Lo + corr) - s * (f - t);
  return e * kLn2Hi + (f + lo);
}

// sin(x + quadrant*pi/2).
IGNIS_VMATH_FN float sin_quadrant(float x, std::uint32_t quadrant) {
  // pi/2 = C1 + C2 + C3 + C4 + C5 with |error| < 1e-19; C1..C4 have <= 8 significant bits.
  constexpr float kC1 = 0x1.92p+0f, kC2 = 0x1.fcp-12f, kC3 = -0x1.58p-21f;
  constexpr float kC4 = 0x1.1p-30f, kC5 = 0x1.68c234p-39f;
  std::int32_t k;
  const float kf = round_int(x * 0x1.45f306p-1f, k);  // x * 2/pi
  // The first two steps are exact. The next two are exact whenever the result is small, and
  // otherwise their rounding errors e3, e4 are recovered exactly (Fast2Sum) and added back.
  const float r2 = (x - kf * kC1) - kf * kC2;
  const float p3 = kf * kC3, r3 = r2 - p3, e3 = (r2 - r3) - p3;
  const float p4 = kf * kC4, r4 = r3 - p4, e4 = (r3 - r4) - p4;
  const float r = r4 - (kf * kC5 - (e3 + e4));
  const float z = r * r;
  // sin(r) = r + r*z*S(z), cos(r) = 1 - z/2 + z^2*C(z) on |r| <= pi/4.
  const float sp = 0x1.994feep-13f;
  const float s = r + (r * z) * (-0x1.555546p-3f + z * (0x1.110766p-7f - z * sp));
  const float c =
      1.0f - 0.5f * z + (z * z) * (0x1.55554ap-5f + z * (-0x1.6c0c8ap-10f + z * 0x1.9a0216p-16f));
  const std::uint32_t q = static_cast<std::uint32_t>(k) + quadrant;
  float y = select((q & 1u) != 0u, c, s);
  y = from_bits(bits(y) ^ ((q & 2u) << 30));
  y = select(y > 1.0f, 1.0f, y);  // only matters far outside the accurate range; keeps NaN
  return select(y < -1.0f, -1.0f, y);
}

}  // namespace detail

// e^x. Overflows to +inf above ~88.72; results below FLT_MIN are subnormal (or 0 under FTZ).
// Below -104 (e^x rounds to 0) it is 0 without computing a subnormal product, which costs a
// microcode assist per element on x86: a masked softmax's -inf entries stay as fast as others.
IGNIS_VMATH_FN float exp(float x) {
  const bool zero = x < -104.0f;
  float xc = detail::select(x > 89.0f, 89.0f, x);  // comparisons are false for NaN: NaN stays
  xc = detail::select(zero, 0.0f, xc);
  std::int32_t k;
  const float r = detail::exp_reduce(xc, k);
  const float p = 1.0f + detail::expm1_poly(r);
  const std::int32_t k1 = k >> 1;  // k in [-150, 128]: both factors are normal
  return detail::select(zero, 0.0f, p * detail::pow2i(k1) * detail::pow2i(k - k1));
}

// e^x - 1, accurate (relative) for small |x|.
IGNIS_VMATH_FN float expm1(float x) {
  float xc = detail::select(x > 89.0f, 89.0f, x);
  xc = detail::select(x < -25.0f, -25.0f, xc);  // expm1(x) rounds to -1 below ~ -17.3
  std::int32_t k;
  const float r = detail::exp_reduce(xc, k);
  const float p = detail::expm1_poly(r);
  const bool big = k > 127;
  const float s = detail::pow2i(big ? 127 : k);
  const float y = p * s + (s - 1.0f);  // 2^k*(1+p) - 1, s-1 is exact for small k
  return detail::select(x == 0.0f, x, y * detail::select(big, 2.0f, 1.0f));  // expm1(-0) = -0
}

// Natural logarithm: log(0) = -inf, log(x < 0) = NaN, log(inf) = inf.
IGNIS_VMATH_FN float log(float x) {
  const float nan_or_inf = detail::select(x > 0.0f, x, detail::qnan());
  const float special = detail::select(x == 0.0f, -detail::inf(), nan_or_inf);
  return detail::select((x > 0.0f) & (x < detail::inf()), detail::log_core(x, 0.0f), special);
}

// log(1 + x), accurate (relative) for small |x|.
IGNIS_VMATH_FN float log1p(float x) {
  const float u = 1.0f + x;
  const float v = u - 1.0f;
  const float c = (1.0f - (u - v)) + (x - v);  // two-sum: u + c == 1 + x exactly
  const bool ok = (x > -1.0f) & (x < detail::inf());
  const float nan_or_inf = detail::select(x > -1.0f, x, detail::qnan());
  const float special = detail::select(x == -1.0f, -detail::inf(), nan_or_inf);
  const float y = detail::select(ok, detail::log_core(u, c / u), special);
  return detail::select(x == 0.0f, x, y);  // log1p(-0) = -0
}

IGNIS_VMATH_FN float tanh(float x) {
  float a = detail::fabs(x);
  a = detail::select(a > 10.0f, 10.0f, a);  // tanh(10) rounds to 1
  const float t = vmath::expm1(2.0f * a);
  return detail::copy_sign(t / (t + 2.0f), x);
}

// 1 / (1 + e^-x) without overflow for any x.
IGNIS_VMATH_FN float sigmoid(float x) {
  const float e = vmath::exp(-detail::fabs(x));
  return detail::select(x >= 0.0f, 1.0f, e) / (1.0f + e);
}

IGNIS_VMATH_FN float erf(float x) {
  const float a = detail::fabs(x);
  // |x| < 0.9: erf(x)/x = P(x^2).
  const float z = a * a;
  float p = -0x1.3f4f6ep-11f;
  p = p * z + 0x1.4876c8p-8f;
  p = p * z - 0x1.b6bee2p-6f;
  p = p * z + 0x1.ce1dd2p-4f;
  p = p * z - 0x1.8126fap-2f;
  p = p * z + 0x1.20dd74p+0f;
  // |x| >= 0.9: log(erfc(a)) = Q(a); erf rounds to 1 beyond ~3.92.
  const float b = detail::select(a > 4.0f, 4.0f, a);
  float q = 0x1.9fb26p-13f;
  q = q * b - 0x1.91cccap-9f;
  q = q * b + 0x1.6d9ccap-6f;
  q = q * b - 0x1.aa731cp-4f;
  q = q * b - 0x1.4621bap-1f;
  q = q * b - 0x1.20b752p+0f;
  q = q * b - 0x1.5d10dap-13f;
  const float y = detail::select(a < 0.9f, a * p, 1.0f - vmath::exp(q));
  return detail::copy_sign(y, x);
}

namespace detail {

// log2(a) for a double a = |x| of a finite float x > 0 (so a normal double): a = 2^k z with z in
// [sqrt(1/2), sqrt(2)) (k read from the bits after subtracting sqrt(1/2)'s), log(z) = 2 atanh(s).
IGNIS_VMATH_FN double log2_of_float(double a) {
  constexpr std::uint64_t kOff = 0x3fe6a09e667f3bcdull;  // the bits of sqrt(1/2)
  const std::uint64_t u = bits64(a);
  const std::uint64_t t = u - kOff;
  // k = t >> 52 (arithmetic), through the high word: 32-bit shifts vectorize on every x86 level.
  const std::int32_t hi = static_cast<std::int32_t>(static_cast<std::uint32_t>(t >> 32));
  const double k = static_cast<double>(hi >> 20);
  const double z = from_bits64(u - (t & (0xfffull << 52)));
  const double s = (z - 1.0) / (z + 1.0), s2 = s * s;
  double q = 1.0 / 17;
  q = q * s2 + 1.0 / 15;
  q = q * s2 + 1.0 / 13;
  q = q * s2 + 1.0 / 11;
  q = q * s2 + 1.0 / 9;
  q = q * s2 + 1.0 / 7;
  q = q * s2 + 1.0 / 5;
  q = q * s2 + 1.0 / 3;
  q = q * s2 + 1.0;
  constexpr double kTwoLog2e = 2.8853900817779268;  // 2 / ln 2
  return k + (s * q) * kTwoLog2e;
}

// 2^t for a double t (NaN stays NaN); t is clamped to [-200, 200], beyond which every float
// result is 0 or infinite.
IGNIS_VMATH_FN double exp2_wide(double t) {
  double tc = select64(t > 200.0, 200.0, t);  // comparisons are false for NaN: NaN stays
  tc = select64(tc < -200.0, -200.0, tc);
  constexpr double kMagic = 0x1.8p52;  // 1.5 * 2^52: the sum's ulp is 1
  const double sum = tc + kMagic;
  const double n = sum - kMagic;
  const std::int64_t ni = static_cast<std::int64_t>(bits64(sum) - bits64(kMagic));
  const double g = (tc - n) * 0.6931471805599453;  // ln 2; |g| <= 0.35
  double p = 1.0 / 3628800;
  p = p * g + 1.0 / 362880;
  p = p * g + 1.0 / 40320;
  p = p * g + 1.0 / 5040;
  p = p * g + 1.0 / 720;
  p = p * g + 1.0 / 120;
  p = p * g + 1.0 / 24;
  p = p * g + 1.0 / 6;
  p = p * g + 0.5;
  p = p * g + 1.0;
  p = p * g + 1.0;
  const double scale = from_bits64(static_cast<std::uint64_t>(ni + 1023) << 52);
  return select64(t != t, t, p * scale);
}

// Whether y is an integer (the infinities count as even ones; NaN is not), from its bits: the
// mantissa bits below the binary point are zero (a call to trunc keeps loops from vectorizing).
IGNIS_VMATH_FN bool is_integer(float y) {
  const std::uint32_t u = bits(y);
  const std::int32_t e = static_cast<std::int32_t>((u >> 23) & 0xffu) - 127;  // y = 1.m 2^e
  // The fraction's bits, 23 - e, in [0, 23] (0 from e = 23 on: every float there is an integer).
  const std::uint32_t shift = static_cast<std::uint32_t>(23 - (e < 0 ? 0 : (e > 23 ? 23 : e)));
  const bool whole = (u & ((1u << shift) - 1u)) == 0u;
  return (y == y) & (((e >= 0) & whole) | ((u << 1) == 0u));  // |y| < 1: only zero
}

}  // namespace detail

// x^y as C's powf gives it (special cases included), to within 1 ulp: computed in double and
// rounded once. Negative x with a non-integer y is NaN; an odd integer y keeps x's sign.
IGNIS_VMATH_FN float pow(float x, float y) {
  const float a = detail::fabs(x);
  const bool finite_pos = (a > 0.0f) & (a < detail::inf());
  double l = detail::log2_of_float(static_cast<double>(detail::select(finite_pos, a, 1.0f)));
  l = detail::select64(a == 0.0f, -static_cast<double>(detail::inf()), l);
  l = detail::select64(a == detail::inf(), static_cast<double>(detail::inf()), l);
  l = detail::select64(a != a, static_cast<double>(a), l);  // NaN
  const float m = static_cast<float>(detail::exp2_wide(static_cast<double>(y) * l));
  const bool y_int = detail::is_integer(y);
  const bool y_odd = y_int & !detail::is_integer(y * 0.5f);
  const bool negative = (detail::bits(x) >> 31) != 0u;
  float r = detail::select(negative & y_odd, -m, m);
  // A negative finite x to a finite non-integer power: NaN.
  r = detail::select((x < 0.0f) & (x > -detail::inf()) & !y_int & (detail::fabs(y) < detail::inf()),
                     detail::qnan(), r);
  // x^0 = 1 (x NaN too), 1^y = 1 (y NaN too), (-1)^+-inf = 1.
  const bool one = (y == 0.0f) | (x == 1.0f) | ((a == 1.0f) & (detail::fabs(y) == detail::inf()));
  return detail::select(one, 1.0f, r);
}

// <= 3 ulp for |x| <= 1e5 (fn::Sin and fn::Cos take std::sin / std::cos beyond); sin(+-inf) = NaN.
IGNIS_VMATH_FN float sin(float x) {
  const float y = detail::sin_quadrant(x, 0u);
  return detail::select(x == 0.0f, x, y);  // sin(-0) = -0
}
IGNIS_VMATH_FN float cos(float x) { return detail::sin_quadrant(x, 1u); }

}  // namespace ignis::vmath

#undef IGNIS_VMATH_FN
