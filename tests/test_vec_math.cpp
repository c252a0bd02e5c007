// Accuracy and special-value tests for src/cpu/vec_math.h.
//
// Each function is evaluated through a plain loop over a float array (which GCC vectorizes at -O3,
// so the SIMD code path is what gets tested) and compared with the double-precision std:: function
// rounded to float. Sweeps use 2^20 points per range, uniform and log-spaced. Results whose exact
// value is subnormal or overflows are excluded from the ulp statistics and checked separately.
//
// Max errors measured exhaustively (every float in the range, GCC 12, -O3 -march=native):
//   exp 1, expm1 1, log 1, log1p 1, tanh 2, sigmoid 2, erf 2 (3 without FMA contraction),
//   sin/cos 2 for |x| <= 1e4 and 3 for |x| <= 1e5; pow 1 (sampled: exponents of every kind over
//   1e-30 to 1e30, and x and y both varying).
#include <gtest/gtest.h>

#include <algorithm>
#include <cfloat>
#include <cmath>
#include <cstdint>
#include <cstdio>
#include <cstring>
#include <limits>
#include <vector>

#include "cpu/vec_math.h"

namespace vm = ignis::vmath;

// Compile check: GCC vectorizes this loop at -O3 (-fopt-info-vec-optimized reports it).
void exp_array(const float* x, float* y, long n) {
  for (long i = 0; i < n; ++i) y[i] = vm::exp(x[i]);
}

namespace {

constexpr int kPoints = 1 << 20;
constexpr float kInf = std::numeric_limits<float>::infinity();
constexpr float kNaN = std::numeric_limits<float>::quiet_NaN();

// Maps floats to integers so that adjacent floats differ by 1 (and -0 == +0).
int64_t ordinal(float f) {
  int32_t i;
  std::memcpy(&i, &f, sizeof i);
  return i < 0 ? -static_cast<int64_t>(i & 0x7fffffff) : i;
}

int64_t ulp_diff(float a, float b) {
  if (std::isnan(a) || std::isnan(b)) return std::isnan(a) && std::isnan(b) ? 0 : INT64_MAX;
  const int64_t d = ordinal(a) - ordinal(b);
  return d < 0 ? -d : d;
}

// Applies f over the array in a loop the compiler can vectorize.
template <class F>
std::vector<float> map_array(F f, const std::vector<float>& x) {
  std::vector<float> y(x.size());
  const float* xp = x.data();
  float* yp = y.data();
  const long n = static_cast<long>(x.size());
  for (long i = 0; i < n; ++i) yp[i] = f(xp[i]);
  return y;
}

std::vector<float> uniform(float lo, float hi, int n = kPoints) {
  std::vector<float> x(n);
  for (int i = 0; i < n; ++i) x[i] = static_cast<float>(lo + (double(hi) - lo) * i / (n - 1));
  return x;
}

// Log-spaced magnitudes in [lo, hi] (lo > 0); with both_signs the negatives are appended.
std::vector<float> logspace(float lo, float hi, bool both_signs, int n = kPoints) {
  std::vector<float> x;
  const double a = std::log(double(lo)), b = std::log(double(hi));
  for (int i = 0; i < n; ++i) x.push_back(static_cast<float>(std::exp(a + (b - a) * i / (n - 1))));
  if (both_signs)
    for (int i = 0; i < n; ++i) x.push_back(-x[i]);
  return x;
}

struct Stats {
  int64_t max_ulp = 0;
  float worst_x = 0;
  long count = 0;
};

template <class F, class R>
Stats measure(F f, R ref, const std::vector<float>& xs, Stats s = {}) {
  const std::vector<float> ys = map_array(f, xs);
  for (size_t i = 0; i < xs.size(); ++i) {
    const double r = ref(double(xs[i]));
    if (!(std::fabs(r) >= FLT_MIN && std::fabs(r) <= FLT_MAX)) continue;
    const int64_t d = ulp_diff(ys[i], static_cast<float>(r));
    ++s.count;
    if (d > s.max_ulp) s.max_ulp = d, s.worst_x = xs[i];
  }
  return s;
}

void report(const char* name, const Stats& s, int64_t bound) {
  std::printf("[ vmath    ] %-8s max error %lld ulp over %ld points (worst at x = %.9g)\n", name,
              static_cast<long long>(s.max_ulp), s.count, s.worst_x);
  EXPECT_GT(s.count, kPoints / 2) << name;
  EXPECT_LE(s.max_ulp, bound) << name << " worst at x = " << s.worst_x;
}

// Evaluates f(x) through the (vectorized) array loop.
template <class F>
float vec_eval(F f, float x) {
  const std::vector<float> y = map_array(f, std::vector<float>(64, x));
  return y[0];
}

// Checks f(x) == expected (NaN matches NaN) through both the scalar and the vector code path.
template <class F>
void expect_special(const char* name, F f, float x, float expected) {
  for (const float y : {f(x), vec_eval(f, x)}) {
    if (std::isnan(expected)) {
      EXPECT_TRUE(std::isnan(y)) << name << "(" << x << ") = " << y;
    } else {
      EXPECT_EQ(y, expected) << name << "(" << x << ")";
    }
  }
}

const auto kExp = [](float x) { return vm::exp(x); };
const auto kExpm1 = [](float x) { return vm::expm1(x); };
const auto kLog = [](float x) { return vm::log(x); };
const auto kLog1p = [](float x) { return vm::log1p(x); };
const auto kTanh = [](float x) { return vm::tanh(x); };
const auto kSigmoid = [](float x) { return vm::sigmoid(x); };
const auto kErf = [](float x) { return vm::erf(x); };
const auto kSin = [](float x) { return vm::sin(x); };
const auto kCos = [](float x) { return vm::cos(x); };

double sigmoid_ref(double x) { return 1.0 / (1.0 + std::exp(-x)); }

TEST(VecMath, ExpAccuracy) {
  const auto ref = [](double x) { return std::exp(x); };
  Stats s = measure(kExp, ref, uniform(-103.9f, 88.72f));
  s = measure(kExp, ref, logspace(1e-12f, 88.72f, true), s);
  report("exp", s, 2);
}

TEST(VecMath, Expm1Accuracy) {
  const auto ref = [](double x) { return std::expm1(x); };
  Stats s = measure(kExpm1, ref, uniform(-20.0f, 88.72f));
  s = measure(kExpm1, ref, logspace(1e-30f, 88.72f, true), s);
  report("expm1", s, 2);
}

TEST(VecMath, LogAccuracy) {
  const auto ref = [](double x) { return std::log(x); };
  Stats s = measure(kLog, ref, uniform(0.0f, 4.0f));
  s = measure(kLog, ref, uniform(0.5f, 2.0f), s);
  s = measure(kLog, ref, logspace(std::numeric_limits<float>::denorm_min(), FLT_MAX, false), s);
  report("log", s, 2);
}

TEST(VecMath, Log1pAccuracy) {
  const auto ref = [](double x) { return std::log1p(x); };
  Stats s = measure(kLog1p, ref, uniform(-1.0f, 4.0f));
  s = measure(kLog1p, ref, logspace(1e-30f, 1.0f, true), s);
  s = measure(kLog1p, ref, logspace(1.0f, 1e38f, false), s);
  report("log1p", s, 2);
}

TEST(VecMath, TanhAccuracy) {
  const auto ref = [](double x) { return std::tanh(x); };
  Stats s = measure(kTanh, ref, uniform(-12.0f, 12.0f));
  s = measure(kTanh, ref, logspace(1e-30f, 12.0f, true), s);
  report("tanh", s, 3);
}

TEST(VecMath, SigmoidAccuracy) {
  Stats s = measure(kSigmoid, sigmoid_ref, uniform(-90.0f, 90.0f));
  s = measure(kSigmoid, sigmoid_ref, logspace(1e-30f, 100.0f, true), s);
  report("sigmoid", s, 3);
}

TEST(VecMath, ErfAccuracy) {
  const auto ref = [](double x) { return std::erf(x); };
  Stats s = measure(kErf, ref, uniform(-5.0f, 5.0f));
  s = measure(kErf, ref, logspace(1e-30f, 5.0f, true), s);
  report("erf", s, 4);
}

TEST(VecMath, SinCosAccuracy) {
  const auto sin_ref = [](double x) { return std::sin(x); };
  const auto cos_ref = [](double x) { return std::cos(x); };
  for (const auto& xs :
       {uniform(-1e4f, 1e4f), uniform(-6.3f, 6.3f), logspace(1e-30f, 1e5f, true)}) {
    report("sin", measure(kSin, sin_ref, xs), 3);
    report("cos", measure(kCos, cos_ref, xs), 3);
  }
}

TEST(VecMath, PowAccuracy) {
  // Exponents of every kind (the constant of x ** e), over magnitudes from 1e-30 to 1e30, both
  // signs where the power of a negative number is real; then x and y both varying.
  Stats s;
  for (const float e : {1.5f, 2.7f, -0.3f, 0.25f, 0.1f, 3.0f, -2.0f, 7.0f, 11.5f, -13.25f, 100.0f,
                        -100.0f, 1e-4f}) {
    const auto f = [e](float x) { return vm::pow(x, e); };
    const auto ref = [e](double x) { return std::pow(x, double(e)); };
    s = measure(f, ref, logspace(1e-30f, 1e30f, std::trunc(e) == e, kPoints / 8), s);
    s = measure(f, ref, uniform(0.5f, 2.0f, kPoints / 8), s);
  }
  const std::vector<float> xs = logspace(1e-3f, 1e3f, false, 1024), ys = uniform(-12, 12, 1024);
  std::vector<float> x2, y2, out(xs.size() * ys.size());
  for (float x : xs)
    for (float y : ys) x2.push_back(x), y2.push_back(y);
  const long n = static_cast<long>(x2.size());
  for (long i = 0; i < n; ++i) out[i] = vm::pow(x2[i], y2[i]);  // vectorized
  int64_t worst = 0;
  for (long i = 0; i < n; ++i) {
    const double r = std::pow(double(x2[i]), double(y2[i]));
    if (std::fabs(r) >= FLT_MIN && std::fabs(r) <= FLT_MAX)
      worst = std::max(worst, ulp_diff(out[i], static_cast<float>(r)));
  }
  report("pow", s, 1);
  EXPECT_LE(worst, 1) << "pow with x and y varying";
}

TEST(VecMath, PowSpecialCasesAsPowf) {
  // Every pair of these as base and exponent gives powf's value (C's special cases: zeros,
  // ones, infinities, NaN, integers odd and even, negative bases; subnormal results), within 1
  // ulp and with its sign, through the scalar and the vector code paths.
  const float d = std::numeric_limits<float>::denorm_min();
  const std::vector<float> v = {0.0f, -0.0f, 1.0f,  -1.0f, 0.5f,    -0.5f,   2.0f,    -2.0f,
                                3.0f, -3.0f, 2.5f,  -2.5f, kInf,    -kInf,   kNaN,    d,
                                -d,   1e-3f, 150.0f, -151.0f, FLT_MAX, -FLT_MAX, 1e-20f, 0.75f};
  for (const float x : v) {
    for (const float y : v) {
      const float want = std::pow(x, y);
      const auto f = [y](float t) { return vm::pow(t, y); };
      for (const float got : {vm::pow(x, y), vec_eval(f, x)}) {
        if (std::isnan(want)) {
          EXPECT_TRUE(std::isnan(got)) << "pow(" << x << ", " << y << ") = " << got;
          continue;
        }
        EXPECT_LE(ulp_diff(got, want), 1) << "pow(" << x << ", " << y << "): " << got << " vs " << want;
        EXPECT_EQ(std::signbit(got), std::signbit(want)) << "pow(" << x << ", " << y << ")";
      }
    }
  }
}

TEST(VecMath, ExpArray) {
  const std::vector<float> x = uniform(-80.0f, 80.0f, 1000);
  std::vector<float> y(x.size());
  exp_array(x.data(), y.data(), static_cast<long>(x.size()));
  for (size_t i = 0; i < x.size(); ++i)
    EXPECT_LE(ulp_diff(y[i], static_cast<float>(std::exp(double(x[i])))), 2) << x[i];
}

TEST(VecMath, SpecialValues) {
  expect_special("exp", kExp, 0.0f, 1.0f);
  expect_special("exp", kExp, -kInf, 0.0f);
  expect_special("exp", kExp, kInf, kInf);
  expect_special("exp", kExp, kNaN, kNaN);
  expect_special("exp", kExp, 88.75f, kInf);
  expect_special("exp", kExp, 1000.0f, kInf);
  expect_special("exp", kExp, -104.0f, 0.0f);
  expect_special("exp", kExp, -1000.0f, 0.0f);
  EXPECT_LE(ulp_diff(vm::exp(88.72f), static_cast<float>(std::exp(double(88.72f)))), 1);

  expect_special("expm1", kExpm1, 0.0f, 0.0f);
  expect_special("expm1", kExpm1, 1e-20f, 1e-20f);
  expect_special("expm1", kExpm1, -kInf, -1.0f);
  expect_special("expm1", kExpm1, -100.0f, -1.0f);
  expect_special("expm1", kExpm1, kInf, kInf);
  expect_special("expm1", kExpm1, 100.0f, kInf);
  expect_special("expm1", kExpm1, kNaN, kNaN);

  expect_special("log", kLog, 1.0f, 0.0f);
  expect_special("log", kLog, 0.0f, -kInf);
  expect_special("log", kLog, -0.0f, -kInf);
  expect_special("log", kLog, -1.0f, kNaN);
  expect_special("log", kLog, -kInf, kNaN);
  expect_special("log", kLog, kInf, kInf);
  expect_special("log", kLog, kNaN, kNaN);
  const float dmin = std::numeric_limits<float>::denorm_min();
  EXPECT_EQ(vm::log(dmin), static_cast<float>(std::log(double(dmin))));

  expect_special("log1p", kLog1p, 0.0f, 0.0f);
  expect_special("log1p", kLog1p, 1e-30f, 1e-30f);
  expect_special("log1p", kLog1p, -1.0f, -kInf);
  expect_special("log1p", kLog1p, -2.0f, kNaN);
  expect_special("log1p", kLog1p, -kInf, kNaN);
  expect_special("log1p", kLog1p, kInf, kInf);
  expect_special("log1p", kLog1p, kNaN, kNaN);

  expect_special("tanh", kTanh, 0.0f, 0.0f);
  expect_special("tanh", kTanh, kInf, 1.0f);
  expect_special("tanh", kTanh, -kInf, -1.0f);
  expect_special("tanh", kTanh, 30.0f, 1.0f);
  expect_special("tanh", kTanh, -30.0f, -1.0f);
  expect_special("tanh", kTanh, kNaN, kNaN);
  EXPECT_TRUE(std::signbit(vm::tanh(-0.0f)));

  expect_special("sigmoid", kSigmoid, 0.0f, 0.5f);
  expect_special("sigmoid", kSigmoid, kInf, 1.0f);
  expect_special("sigmoid", kSigmoid, -kInf, 0.0f);
  expect_special("sigmoid", kSigmoid, 100.0f, 1.0f);
  expect_special("sigmoid", kSigmoid, -1000.0f, 0.0f);
  expect_special("sigmoid", kSigmoid, kNaN, kNaN);

  expect_special("erf", kErf, 0.0f, 0.0f);
  expect_special("erf", kErf, kInf, 1.0f);
  expect_special("erf", kErf, -kInf, -1.0f);
  expect_special("erf", kErf, 10.0f, 1.0f);
  expect_special("erf", kErf, kNaN, kNaN);

  expect_special("sin", kSin, 0.0f, 0.0f);
  expect_special("cos", kCos, 0.0f, 1.0f);
  expect_special("sin", kSin, kInf, kNaN);
  expect_special("cos", kCos, -kInf, kNaN);
  expect_special("sin", kSin, kNaN, kNaN);
  expect_special("cos", kCos, kNaN, kNaN);
  EXPECT_TRUE(std::signbit(vm::sin(-0.0f)));
}

// Subnormal results: gradual underflow is produced (flush to zero is also accepted).
TEST(VecMath, SubnormalResults) {
  const float dmin = std::numeric_limits<float>::denorm_min();
  for (const float x : uniform(-103.9f, -87.4f, 10000)) {
    const float e = vm::exp(x), s = vm::sigmoid(x);
    if (e != 0.0f) {
      EXPECT_NEAR(e, std::exp(double(x)), dmin) << x;
    }
    if (s != 0.0f) {
      EXPECT_NEAR(s, sigmoid_ref(x), dmin) << x;
    }
  }
}

// Saturating functions must stay in range and never produce NaN for finite inputs.
TEST(VecMath, NoNaNForFiniteInputs) {
  const std::vector<float> x = logspace(1e-38f, FLT_MAX, true);
  const std::vector<float> t = map_array(kTanh, x), s = map_array(kSigmoid, x),
                           e = map_array(kErf, x);
  const std::vector<float> ex = map_array(kExp, x), em = map_array(kExpm1, x);
  for (size_t i = 0; i < x.size(); ++i) {
    ASSERT_TRUE(t[i] >= -1.0f && t[i] <= 1.0f) << "tanh(" << x[i] << ") = " << t[i];
    ASSERT_TRUE(s[i] >= 0.0f && s[i] <= 1.0f) << "sigmoid(" << x[i] << ") = " << s[i];
    ASSERT_TRUE(e[i] >= -1.0f && e[i] <= 1.0f) << "erf(" << x[i] << ") = " << e[i];
    ASSERT_TRUE(ex[i] >= 0.0f) << "exp(" << x[i] << ") = " << ex[i];
    ASSERT_TRUE(em[i] >= -1.0f) << "expm1(" << x[i] << ") = " << em[i];
  }
}

TEST(VecMath, Symmetry) {
  for (const float x : uniform(0.0f, 6.0f, 100000)) {
    EXPECT_EQ(vm::tanh(-x), -vm::tanh(x));
    EXPECT_EQ(vm::erf(-x), -vm::erf(x));
    EXPECT_EQ(vm::sin(-x), -vm::sin(x));
    EXPECT_EQ(vm::cos(-x), vm::cos(x));
  }
}

}  // namespace
