// Elementwise ops beyond the op table: dtype promotion, integer and bool behaviour, special
// values, in-place forms (values, version counter, autograd), and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ignis/ignis.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

std::vector<double> vals(const Tensor& t) {
  NoGradGuard ng;
  Tensor c = t.detach().to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor bools(std::vector<bool> v) { return tensor(v); }

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

// ---- dtype promotion

// vmath's float sin/cos reduce accurately up to |x| = 1e5; larger arguments take std::sin/cos
// (the functors' exact path) in contiguous rows of every size, strided rows and in place.
TEST(ElementwiseMath, SinCosOfLargeFloatArgumentsAreExact) {
  std::vector<float> v(600, 0.5f);
  v[3] = 1e10f;
  v[300] = -3e7f;
  v[599] = 1e38f;
  const Tensor x = tensor(v);
  for (const bool strided : {false, true}) {
    const Tensor in = strided ? stack({x, x}, 1).select(1, 0) : x;  // stride 2 when strided
    ASSERT_EQ(in.is_contiguous(), !strided);
    const Tensor s = sin(in), c = cos(in);
    for (int i : {0, 3, 300, 599}) {
      EXPECT_FLOAT_EQ(s[i].item<float>(), std::sin(v[i])) << i;
      EXPECT_FLOAT_EQ(c[i].item<float>(), std::cos(v[i])) << i;
    }
  }
  Tensor y = x.clone();
  y.sin_();
  EXPECT_FLOAT_EQ(y[3].item<float>(), std::sin(1e10f));
  EXPECT_FLOAT_EQ(y[599].item<float>(), std::sin(1e38f));
  EXPECT_FLOAT_EQ(y[1].item<float>(), std::sin(0.5f));
}

TEST(ElementwiseDtype, FloatingMathPromotesIntegersAndBool) {
  Tensor i = tensor({1, 4, 9});
  Tensor s = sqrt(i);
  EXPECT_EQ(s.dtype(), kFloat32);
  EXPECT_EQ(vals(s), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(exp(bools({true, false})).dtype(), kFloat32);
  EXPECT_EQ(vals(exp(bools({true, false}))), (std::vector<double>{std::exp(1.0f), 1}));
  for (const Tensor& r : {log(i), log1p(i), rsqrt(i), sin(i), cos(i), tanh(i), sigmoid(i), gelu(i),
                          silu(i), softplus(i), leaky_relu(i)}) {
    EXPECT_EQ(r.dtype(), kFloat32);
  }
  EXPECT_EQ(exp(tensor({1.0}, kFloat64)).dtype(), kFloat64);
  EXPECT_EQ(exp(tensor({1.0}, kBFloat16)).dtype(), kBFloat16);
  EXPECT_NEAR(exp(tensor({1.0}, kBFloat16)).item<double>(), std::exp(1.0), 0.02);
}

TEST(ElementwiseDtype, IntegerOpsKeepIntegerDtype) {
  Tensor i = tensor({-3, 0, 2}, kInt32);
  EXPECT_EQ(abs(i).dtype(), kInt32);
  EXPECT_EQ(vals(abs(i)), (std::vector<double>{3, 0, 2}));
  EXPECT_EQ(vals(neg(i)), (std::vector<double>{3, 0, -2}));
  EXPECT_EQ(vals(-i), (std::vector<double>{3, 0, -2}));
  EXPECT_EQ(vals(sign(i)), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(sign(i).dtype(), kInt32);
  EXPECT_EQ(vals(relu(i)), (std::vector<double>{0, 0, 2}));
  EXPECT_EQ(relu(i).dtype(), kInt32);
  EXPECT_EQ(vals(clamp(i, -1, 1)), (std::vector<double>{-1, 0, 1}));
  EXPECT_EQ(clamp(i, -1, 1).dtype(), kInt32);
  for (const Tensor& r : {floor(i), ceil(i), round(i)}) {
    EXPECT_EQ(r.dtype(), kInt32);
    EXPECT_EQ(vals(r), (std::vector<double>{-3, 0, 2}));
    EXPECT_FALSE(r.is_same(i));
  }
  Tensor u = tensor({0, 5, 200}, kUInt8);
  EXPECT_EQ(vals(abs(u)), (std::vector<double>{0, 5, 200}));
  EXPECT_EQ(vals(sign(u)), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(relu(u)), (std::vector<double>{0, 5, 200}));
}

TEST(ElementwiseDtype, ClampPromotesWithItsBounds) {
  Tensor i = tensor({1, 2, 3});
  Tensor c = clamp(i, 1.5);
  EXPECT_EQ(c.dtype(), kFloat32);
  EXPECT_EQ(vals(c), (std::vector<double>{1.5, 2, 3}));
  EXPECT_EQ(clamp(i, std::nullopt, 2).dtype(), kInt64);
  EXPECT_EQ(vals(i.clamp_max(2)), (std::vector<double>{1, 2, 2}));
  // min > max: every element becomes max, like PyTorch.
  EXPECT_EQ(vals(clamp(tensor({0.0, 5.0, 10.0}), 6, 4)), (std::vector<double>{4, 4, 4}));
  // bool with an integer bound promotes to int64.
  EXPECT_EQ(clamp(bools({true, false}), 0).dtype(), kInt64);
  EXPECT_EQ(vals(clamp(bools({true, false}), 0, 0)), (std::vector<double>{0, 0}));
}

TEST(ElementwiseDtype, MaximumMinimumPromote) {
  Tensor a = tensor({1, 5}, kInt32), b = tensor({3, 2});
  EXPECT_EQ(maximum(a, b).dtype(), kInt64);
  EXPECT_EQ(vals(maximum(a, b)), (std::vector<double>{3, 5}));
  EXPECT_EQ(vals(minimum(a, b)), (std::vector<double>{1, 2}));
  // A 0-d float tensor takes part because it is of a higher category.
  Tensor m = maximum(a, scalar_tensor(2.5, kFloat64));
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(vals(m), (std::vector<double>{2.5, 5}));
  // A 0-d float64 against a float32 tensor: same category, the dimensioned tensor wins.
  EXPECT_EQ(maximum(tensor({1.0f}), scalar_tensor(2.0, kFloat64)).dtype(), kFloat32);
  Tensor bm = maximum(bools({true, false, false}), bools({false, true, false}));
  EXPECT_EQ(bm.dtype(), kBool);
  EXPECT_EQ(vals(bm), (std::vector<double>{1, 1, 0}));
}

TEST(ElementwiseDtype, ComparisonsPromoteThenGiveBool) {
  Tensor i = tensor({1, 2, 3});
  Tensor r = i > 1.5;
  EXPECT_EQ(r.dtype(), kBool);
  EXPECT_EQ(vals(r), (std::vector<double>{0, 1, 1}));
  EXPECT_EQ(vals(i == 2.0), (std::vector<double>{0, 1, 0}));
  EXPECT_EQ(vals(eq(i, tensor({1.0, 2.5, 3.0}))), (std::vector<double>{1, 0, 1}));
  EXPECT_EQ(vals(tensor({1, 2}, kInt32) < tensor({2, 2}, kInt64)), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(bools({true, false}) == tensor({1, 0})), (std::vector<double>{1, 1}));
  // NaN compares unequal to everything, itself included.
  Tensor n = tensor({kNan, 1.0});
  EXPECT_EQ(vals(n == n), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(n != n), (std::vector<double>{1, 0}));
}

TEST(ElementwiseDtype, WherePromotesItsOperands) {
  Tensor c = bools({true, false});
  Tensor w = where(c, tensor({1.0f, 2.0f}), tensor({3.0, 4.0}, kFloat64));
  EXPECT_EQ(w.dtype(), kFloat64);
  EXPECT_EQ(vals(w), (std::vector<double>{1, 4}));
  Tensor wi = where(c, tensor({1, 2}), 0.5);
  EXPECT_EQ(wi.dtype(), kFloat32);
  EXPECT_EQ(vals(wi), (std::vector<double>{1, 0.5}));
  Tensor ws = where(c, 7, tensor({1, 2}, kInt32));
  EXPECT_EQ(ws.dtype(), kInt32);
  EXPECT_EQ(vals(ws), (std::vector<double>{7, 2}));
  // Broadcast of all three.
  Tensor wb = where(bools({true, false, true}), tensor({1.0, 2.0}).reshape({2, 1}), tensor(0.0));
  EXPECT_TRUE(wb.sizes().equals({2, 3}));
  EXPECT_EQ(vals(wb), (std::vector<double>{1, 0, 1, 2, 0, 2}));
}

// ---- pow

TEST(ElementwisePow, IntegerPow) {
  Tensor b = tensor({-2, 2, 1, -1, 0, 3});
  Tensor e = tensor({3, -1, -3, -3, 0, 4});
  Tensor p = pow(b, e);
  EXPECT_EQ(p.dtype(), kInt64);
  EXPECT_EQ(vals(p), (std::vector<double>{-8, 0, 1, -1, 1, 81}));
  EXPECT_EQ(vals(pow(b, 2)), (std::vector<double>{4, 4, 1, 1, 0, 9}));
  EXPECT_EQ(pow(b, 2).dtype(), kInt64);
  EXPECT_EQ(vals(pow(tensor({2, 3}, kInt32), 3)), (std::vector<double>{8, 27}));
  EXPECT_EQ(vals(pow(2, tensor({0, 1, 10}))), (std::vector<double>{1, 2, 1024}));
  EXPECT_EQ(pow(2, tensor({0, 1, 10})).dtype(), kInt64);
  // Large integer powers stay exact (no float round trip).
  EXPECT_EQ(pow(tensor({3}), 39).item<int64_t>(), 4052555153018976267LL);
}

TEST(ElementwisePow, FloatExponentsPromote) {
  Tensor i = tensor({4, 9});
  EXPECT_EQ(pow(i, 0.5).dtype(), kFloat32);
  EXPECT_EQ(vals(pow(i, 0.5)), (std::vector<double>{2, 3}));
  EXPECT_EQ(pow(2.5, tensor({1, 2})).dtype(), kFloat32);
  EXPECT_NEAR(vals(pow(2.5, tensor({1, 2})))[1], 6.25, 1e-6);
  EXPECT_EQ(pow(tensor({1, 2}), tensor({0.5})).dtype(), kFloat32);
  // The special-cased exponents agree with std::pow.
  Tensor x = tensor({0.5, 2.0, 3.0}, kFloat64);
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, 1.0, 0.0, -2.25}) {
    std::vector<double> got = vals(pow(x, e));
    for (size_t k = 0; k < got.size(); ++k) {
      EXPECT_NEAR(got[k], std::pow(vals(x)[k], e), 1e-12) << "exponent " << e;
    }
  }
}

TEST(ElementwisePow, PowersOneAndZeroKeepPowsValuesAtTheEdges) {
  // x ** 1 and x ** 0 run as a copy and a fill (x ** 1 is x ** 2's backward), with pow's values:
  // x itself (NaN, the infinities and -0 kept, bit for bit) and 1 everywhere, NaN included.
  const std::vector<double> xs = {-2.5, -0.0, 0.0, 1e-310, 3.25, INFINITY, -INFINITY, NAN};
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = tensor(xs, dt);
    const std::vector<double> one = vals(pow(x, 1)), zero = vals(x.pow(0));
    for (size_t k = 0; k < xs.size(); ++k) {
      const double xk = vals(x)[k];
      EXPECT_TRUE(std::isnan(xk) ? std::isnan(one[k]) : one[k] == std::pow(xk, 1.0))
          << dtype_name(dt) << " " << xk << " ** 1 = " << one[k];
      EXPECT_EQ(std::signbit(one[k]), std::signbit(xk)) << dtype_name(dt) << " " << xk;
      EXPECT_EQ(zero[k], std::pow(xk, 0.0)) << dtype_name(dt) << " " << xk << " ** 0";
    }
  }
  const Tensor i = tensor({-3, 0, 7});
  EXPECT_EQ(vals(pow(i, 1)), (std::vector<double>{-3, 0, 7}));
  EXPECT_EQ(vals(pow(i, 0)), (std::vector<double>{1, 1, 1}));
  EXPECT_EQ(pow(i, 1).dtype(), kInt64);
  // In place, and through a view.
  Tensor y = tensor({{1.5, NAN}, {-0.0, 4.0}}).t();
  y.pow_(0);
  EXPECT_EQ(vals(y), (std::vector<double>{1, 1, 1, 1}));
}

TEST(ElementwisePow, Errors) {
  EXPECT_THAT(error_of([] {
                pow(tensor({2, 3}), -1);
              }),
              HasSubstr("pow: integers to negative integer powers are not allowed"));
  EXPECT_THAT(error_of([] { pow(bools({true}), bools({true})); }), HasSubstr("pow: "));
  EXPECT_THAT(error_of([] {
                pow(zeros({2, 3}), zeros({4}));
              }),
              HasSubstr("pow: shapes [2, 3] and [4] cannot be broadcast"));
}

TEST(ElementwisePow, GradientsAtZeroBase) {
  Tensor x = tensor({0.0, 0.0, 2.0}, kFloat64).requires_grad_();
  Tensor e = tensor({2.0, 0.0, 3.0}, kFloat64).requires_grad_();
  pow(x, e).sum().backward();
  // d/dx: e x^(e-1) (0 where e == 0); d/de: x^e log x, taken as 0 at x == 0.
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 0, 12}));
  std::vector<double> ge = vals(e.grad());
  EXPECT_EQ(ge[0], 0);
  EXPECT_EQ(ge[1], 0);
  EXPECT_NEAR(ge[2], 8 * std::log(2.0), 1e-12);
  Tensor y = tensor({0.0, 1.5}, kFloat64).requires_grad_();
  pow(y, 0).sum().backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0, 0}));
}

// ---- special values and rounding

TEST(ElementwiseValues, RoundHalfToEven) {
  Tensor x = tensor({-2.5, -1.5, -0.5, 0.5, 1.5, 2.5, 2.6, -2.6});
  EXPECT_EQ(vals(round(x)), (std::vector<double>{-2, -2, -0, 0, 2, 2, 3, -3}));
  EXPECT_EQ(vals(floor(x)), (std::vector<double>{-3, -2, -1, 0, 1, 2, 2, -3}));
  EXPECT_EQ(vals(ceil(x)), (std::vector<double>{-2, -1, -0, 1, 2, 3, 3, -2}));
  EXPECT_TRUE(std::signbit(vals(round(tensor({-0.4})))[0]));
}

TEST(ElementwiseValues, NanPropagates) {
  Tensor n = tensor({kNan, 1.0});
  EXPECT_TRUE(std::isnan(vals(maximum(n, tensor({0.0, 0.0})))[0]));
  EXPECT_TRUE(std::isnan(vals(maximum(tensor({0.0, 0.0}), n))[0]));
  EXPECT_TRUE(std::isnan(vals(minimum(n, tensor({0.0, 0.0})))[0]));
  EXPECT_TRUE(std::isnan(vals(minimum(tensor({0.0, 0.0}), n))[0]));
  EXPECT_TRUE(std::isnan(vals(clamp(n, 0, 0.5))[0]));
  EXPECT_TRUE(std::isnan(vals(relu(n))[0]));
  EXPECT_EQ(vals(sign(n))[0], 0);
  EXPECT_TRUE(std::isnan(vals(exp(n))[0]));
  EXPECT_TRUE(std::isnan(vals(tanh(n))[0]));
}

TEST(ElementwiseValues, Extremes) {
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = tensor({-kInf, kInf, 0.0, -1.0}, dt);
    std::vector<double> e = vals(exp(x)), l = vals(log(x)), s = vals(sqrt(x));
    EXPECT_EQ(e[0], 0);
    EXPECT_EQ(e[1], kInf);
    EXPECT_EQ(l[2], -kInf);
    EXPECT_TRUE(std::isnan(l[3]));
    EXPECT_TRUE(std::isnan(s[3]));
    EXPECT_EQ(vals(tanh(x))[0], -1);
    EXPECT_EQ(vals(sigmoid(x))[1], 1);
    EXPECT_EQ(vals(sigmoid(x))[0], 0);
    EXPECT_EQ(vals(log1p(tensor({-1.0}, dt)))[0], -kInf);
    // softplus is linear above the threshold and does not overflow.
    EXPECT_EQ(vals(softplus(tensor({1000.0}, dt)))[0], 1000);
    EXPECT_NEAR(vals(softplus(tensor({-1000.0}, dt)))[0], 0, 1e-30);
  }
}

TEST(ElementwiseValues, PredicatesOnIntegersAndFloats) {
  Tensor i = tensor({1, 2});
  EXPECT_EQ(vals(isnan(i)), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(isinf(i)), (std::vector<double>{0, 0}));
  EXPECT_EQ(vals(isfinite(i)), (std::vector<double>{1, 1}));
  EXPECT_EQ(isfinite(i).dtype(), kBool);
  Tensor f = tensor({kNan, kInf, -kInf, 0.0}, kBFloat16);
  EXPECT_EQ(vals(isnan(f)), (std::vector<double>{1, 0, 0, 0}));
  EXPECT_EQ(vals(isinf(f)), (std::vector<double>{0, 1, 1, 0}));
  EXPECT_EQ(vals(isfinite(f)), (std::vector<double>{0, 0, 0, 1}));
}

TEST(ElementwiseValues, LogicalOps) {
  Tensor a = tensor({0.0, 1.0, -2.0, 0.0}), b = tensor({0, 0, 3, 5});
  EXPECT_EQ(vals(logical_and(a, b)), (std::vector<double>{0, 0, 1, 0}));
  EXPECT_EQ(vals(a || b), (std::vector<double>{0, 1, 1, 1}));
  EXPECT_EQ(vals(!a), (std::vector<double>{1, 0, 0, 1}));
  EXPECT_EQ((a && b).dtype(), kBool);
  EXPECT_EQ(logical_not(b).dtype(), kBool);
  Tensor m = bools({true, false});
  EXPECT_EQ(vals(m.logical_not()), (std::vector<double>{0, 1}));
  EXPECT_EQ(vals(m.logical_and(bools({true, true}))), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(abs(m)), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(sign(m)), (std::vector<double>{1, 0}));
}

TEST(ElementwiseValues, AllcloseAndEqual) {
  Tensor a = tensor({1.0, 2.0, kInf});
  EXPECT_TRUE(allclose(a, tensor({1.0 + 1e-9, 2.0, kInf})));
  EXPECT_FALSE(allclose(a, tensor({1.001, 2.0, kInf})));
  EXPECT_TRUE(allclose(a, tensor({1.001, 2.0, kInf}), 1e-2));
  EXPECT_FALSE(allclose(a, tensor({1.0, 2.0, -kInf})));
  EXPECT_FALSE(allclose(tensor({1.0}), tensor({kInf}), 1e-5, 1e300));
  EXPECT_FALSE(allclose(tensor({kNan}), tensor({kNan})));
  EXPECT_TRUE(allclose(tensor({kNan}), tensor({kNan}), 1e-5, 1e-8, true));
  EXPECT_TRUE(allclose(tensor({{1.0, 1.0}, {1.0, 1.0}}), tensor({1.0})));  // broadcasts
  EXPECT_TRUE(allclose(tensor({1, 2}), tensor({1.0, 2.0}, kFloat64)));
  EXPECT_THAT(error_of([] { allclose(zeros({2}), zeros({3})); }),
              HasSubstr("allclose: shapes [2] and [3] cannot be broadcast"));
  EXPECT_TRUE(equal(tensor({1, 2}), tensor({1, 2})));
  EXPECT_FALSE(equal(tensor({1, 2}), tensor({1, 3})));
  EXPECT_FALSE(equal(tensor({1.0}), tensor({1.0, 1.0})));
  EXPECT_FALSE(equal(tensor({kNan}), tensor({kNan})));
  EXPECT_TRUE(equal(zeros({0, 3}), zeros({0, 3})));
}

TEST(ElementwiseValues, LargeAndStridedInputsUseEveryPath) {
  // Large enough to run in parallel; a transposed view takes the strided path.
  Tensor x = arange(0, 300000).to(kFloat32).reshape({600, 500}) / 100000.0 - 1.5;
  Tensor xt = x.t();
  for (const Tensor& in : {x, xt}) {
    std::vector<double> v = vals(in);
    std::vector<double> e = vals(exp(in)), t = vals(tanh(in)), r = vals(relu(in));
    for (size_t k = 0; k < v.size(); k += 997) {
      const double xv = static_cast<float>(v[k]);
      EXPECT_NEAR(e[k], std::exp(xv), 2e-7 * std::exp(xv));
      EXPECT_NEAR(t[k], std::tanh(xv), 2e-7);
      EXPECT_EQ(r[k], xv > 0 ? xv : 0);
    }
    // where with a scalar operand (a hoisted fast path on flat inputs), and bool inputs.
    const Tensor m = in > 0;
    std::vector<double> w1 = vals(where(m, in, -7.0)), w2 = vals(where(m, 3, in));
    std::vector<double> la = vals(logical_and(m, in < 1)), ln = vals(!m);
    for (size_t k = 0; k < v.size(); k += 991) {
      const double xv = static_cast<float>(v[k]);
      EXPECT_EQ(w1[k], xv > 0 ? xv : -7.0);
      EXPECT_EQ(w2[k], xv > 0 ? 3.0 : xv);
      EXPECT_EQ(la[k], xv > 0 && xv < 1 ? 1 : 0);
      EXPECT_EQ(ln[k], xv > 0 ? 0 : 1);
    }
  }
}

// ---- autograd details

TEST(ElementwiseGrad, MaximumSplitsTies) {
  Tensor a = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor b = tensor({1.0, 5.0, 0.0}, kFloat64).requires_grad_();
  maximum(a, b).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{0.5, 0, 1}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{0.5, 1, 0}));
  Tensor c = tensor({2.0, 2.0}, kFloat64).requires_grad_();
  minimum(c, tensor(2.0, kFloat64)).sum().backward();  // broadcast 0-d operand
  EXPECT_EQ(vals(c.grad()), (std::vector<double>{0.5, 0.5}));
}

TEST(ElementwiseGrad, ClampAndReluMasks) {
  Tensor x = tensor({-2.0, -0.5, 0.5, 2.0}, kFloat64).requires_grad_();
  clamp(x, -1, 1).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 1, 0}));
  Tensor y = tensor({-1.0, 0.0, 1.0}, kFloat64).requires_grad_();
  relu(y).sum().backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0, 0, 1}));
  Tensor z = tensor({-1.0, 0.0, 1.0}, kFloat64).requires_grad_();
  abs(z).sum().backward();
  EXPECT_EQ(vals(z.grad()), (std::vector<double>{-1, 0, 1}));
}

TEST(ElementwiseGrad, RoundingOpsHaveZeroGradient) {
  Tensor x = tensor({-1.3, 0.7}, kFloat64).requires_grad_();
  Tensor y = floor(x) + ceil(x) + round(x) + sign(x) + x;
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 1}));
}

TEST(ElementwiseGrad, ComparisonsRecordNoHistory) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_FALSE((x > 1).requires_grad());
  EXPECT_FALSE(eq(x, x).requires_grad());
  EXPECT_FALSE(isnan(x).requires_grad());
  EXPECT_FALSE(logical_not(x).requires_grad());
}

TEST(ElementwiseGrad, WhereRoutesGradients) {
  Tensor c = bools({true, false, true});
  Tensor a = tensor({1.0, 2.0, 3.0}, kFloat64).requires_grad_();
  Tensor b = tensor(5.0, kFloat64).requires_grad_();
  where(c, a * 2, b).sum().backward();
  EXPECT_EQ(vals(a.grad()), (std::vector<double>{2, 0, 2}));
  EXPECT_EQ(vals(b.grad()), (std::vector<double>{1}));
  EXPECT_EQ(b.grad().dim(), 0);
}

TEST(ElementwiseGrad, TanhSecondDerivative) {
  Tensor x = tensor({0.3, -1.2}, kFloat64).requires_grad_();
  Tensor y = tanh(x);
  Tensor g = autograd::grad({y.sum()}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  Tensor gg = autograd::grad({g.sum()}, {x})[0];
  std::vector<double> v = vals(gg), xv = vals(x);
  for (size_t k = 0; k < v.size(); ++k) {
    const double t = std::tanh(xv[k]);
    EXPECT_NEAR(v[k], -2 * t * (1 - t * t), 1e-12);
  }
}

// ---- in place

TEST(ElementwiseInplace, ValuesVersionAndIdentity) {
  Tensor x = tensor({1.0, 4.0, 9.0});
  const uint32_t v0 = x._version();
  Tensor& r = x.sqrt_();
  EXPECT_EQ(&r, &x);
  EXPECT_EQ(vals(x), (std::vector<double>{1, 2, 3}));
  EXPECT_GT(x._version(), v0);
  const uint32_t v1 = x._version();
  x.pow_(2).neg_();
  EXPECT_EQ(vals(x), (std::vector<double>{-1, -4, -9}));
  EXPECT_EQ(x._version(), v1 + 2);
  x.relu_();
  EXPECT_EQ(vals(x), (std::vector<double>{0, 0, 0}));
  x.exp_();
  EXPECT_EQ(vals(x), (std::vector<double>{1, 1, 1}));
  x.clamp_(std::nullopt, 0.5);
  EXPECT_EQ(vals(x), (std::vector<double>{0.5, 0.5, 0.5}));
  x.sigmoid_();
  EXPECT_NEAR(vals(x)[0], 1 / (1 + std::exp(-0.5)), 1e-6);
  x.tanh_();
  EXPECT_NEAR(vals(x)[0], std::tanh(1 / (1 + std::exp(-0.5))), 1e-6);
  EXPECT_EQ(x.dtype(), kFloat32);
}

TEST(ElementwiseInplace, ViewsWriteThroughToTheirBase) {
  Tensor base = tensor({{-1.0, 2.0}, {-3.0, 4.0}});
  Tensor col = base.select(1, 0);  // strided view
  col.neg_();
  EXPECT_EQ(vals(base), (std::vector<double>{1, 2, 3, 4}));
  base.t().clamp_(2, 3);
  EXPECT_EQ(vals(base), (std::vector<double>{2, 2, 3, 3}));
}

TEST(ElementwiseInplace, IntegerTensors) {
  Tensor i = tensor({-2, 3});
  i.neg_();
  EXPECT_EQ(vals(i), (std::vector<double>{2, -3}));
  i.clamp_(-1, 1);
  EXPECT_EQ(vals(i), (std::vector<double>{1, -1}));
  i.pow_(2);
  EXPECT_EQ(vals(i), (std::vector<double>{1, 1}));
  i.relu_();
  EXPECT_EQ(i.dtype(), kInt64);
  EXPECT_THAT(
      error_of([&] { i.exp_(); }),
      HasSubstr("exp_: result type float32 can't be cast to the desired output type int64"));
  EXPECT_THAT(error_of([&] { i.clamp_(0.5); }),
              HasSubstr("clamp_: result type float32 can't be cast"));
  EXPECT_THAT(error_of([&] { i.pow_(-1); }),
              HasSubstr("pow_: integers to negative integer powers are not allowed"));
  EXPECT_THAT(error_of([&] { i.sqrt_(); }), HasSubstr("sqrt_: result type float32"));
}

TEST(ElementwiseInplace, LeafRequiringGradIsRefused) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_();
  for (auto f : std::vector<std::function<void(Tensor&)>>{
           [](Tensor& t) { t.exp_(); }, [](Tensor& t) { t.relu_(); }, [](Tensor& t) { t.pow_(2); },
           [](Tensor& t) { t.clamp_(0); }, [](Tensor& t) { t.neg_(); },
           [](Tensor& t) { t.sigmoid_(); }, [](Tensor& t) { t.tanh_(); },
           [](Tensor& t) { t.sqrt_(); }}) {
    EXPECT_THAT(error_of([&] { f(w); }),
                HasSubstr("a leaf tensor that requires grad is being used in an in-place "
                          "operation"));
  }
  EXPECT_THAT(error_of([&] { w.exp_(); }), HasSubstr("exp_: "));
  EXPECT_EQ(vals(w), (std::vector<double>{1, 2}));  // untouched
  {
    NoGradGuard ng;  // allowed without grad mode (an optimizer step)
    w.clamp_(1.5);
  }
  EXPECT_EQ(vals(w), (std::vector<double>{1.5, 2}));
  EXPECT_TRUE(w.is_leaf());
}

TEST(ElementwiseInplace, AutogradThroughInplaceOps) {
  Tensor x = tensor({0.5, -1.0, 2.0}, kFloat64).requires_grad_();
  Tensor y = x * 1;
  y.pow_(2);  // saves its input: must run on a copy
  y.exp_();
  y.sum().backward();
  std::vector<double> xv = vals(x), g = vals(x.grad());
  for (size_t k = 0; k < 3; ++k) {
    EXPECT_NEAR(g[k], 2 * xv[k] * std::exp(xv[k] * xv[k]), 1e-12);
  }
  Tensor a = tensor({-1.0, 0.3, 2.0}, kFloat64).requires_grad_();
  Tensor b = a * 2;
  b.relu_().sigmoid_().tanh_();
  EXPECT_NE(b.grad_fn(), nullptr);
  b.sum().backward();
  std::vector<double> av = vals(a), ga = vals(a.grad());
  for (size_t k = 0; k < 3; ++k) {
    const double r = std::max(2 * av[k], 0.0), s = 1 / (1 + std::exp(-r)), t = std::tanh(s);
    const double want = (1 - t * t) * s * (1 - s) * (av[k] > 0 ? 2 : 0);
    EXPECT_NEAR(ga[k], want, 1e-12);
  }
  Tensor c = tensor({-2.0, 0.5, 4.0}, kFloat64).requires_grad_();
  Tensor d = c + 0;
  d.clamp_(-1, 1).neg_();
  d.sum().backward();
  EXPECT_EQ(vals(c.grad()), (std::vector<double>{0, -1, 0}));
}

TEST(ElementwiseInplace, ModifyingASavedTensorIsDetected) {
  Tensor x = tensor({0.5, 1.0}, kFloat64).requires_grad_();
  Tensor y = x * 1;
  Tensor z = sin(y);  // saves y
  y.exp_();
  EXPECT_THAT(error_of([&] { z.sum().backward(); }),
              HasSubstr("has been modified by an in-place operation"));
  Tensor a = x * 1;
  Tensor b = a.exp();  // saves its output b
  b.neg_();
  EXPECT_THAT(error_of([&] { b.sum().backward(); }),
              HasSubstr("has been modified by an in-place operation"));
}

// ---- errors

TEST(ElementwiseErrors, Messages) {
  EXPECT_THAT(error_of([] {
                maximum(zeros({2, 3}), zeros({4}));
              }),
              HasSubstr("maximum: shapes [2, 3] and [4] cannot be broadcast"));
  EXPECT_THAT(error_of([] { lt(zeros({2}), zeros({3})); }),
              HasSubstr("lt: shapes [2] and [3] cannot be broadcast"));
  EXPECT_THAT(error_of([] { where(ones({2}), zeros({2}), zeros({2})); }),
              HasSubstr("where: expected condition to be a bool tensor, but got a tensor with "
                        "dtype float32"));
  EXPECT_THAT(error_of([] { where(ones({2}, kBool), zeros({3}), zeros({2})); }),
              HasSubstr("where: shapes [2] (condition), [3] and [2] cannot be broadcast"));
  EXPECT_THAT(error_of([] { neg(bools({true})); }),
              HasSubstr("neg: negation, the `-` operator, on a bool tensor is not supported"));
  EXPECT_THAT(error_of([] { relu(bools({true})); }), HasSubstr("relu: "));
  EXPECT_THAT(error_of([] { clamp(tensor({1.0}), std::nullopt); }),
              HasSubstr("clamp: at least one of 'min' or 'max' must not be None"));
  EXPECT_THAT(error_of([] { clamp(bools({true}), false); }),
              HasSubstr("clamp: not supported for bool tensors"));
  EXPECT_THAT(error_of([] { gelu(tensor({1.0}), "exact"); }),
              HasSubstr("gelu: approximate must be 'none' or 'tanh', but got 'exact'"));
  EXPECT_THAT(error_of([] { softplus(tensor({1.0}), 0); }), HasSubstr("softplus: beta"));
}

}  // namespace
}  // namespace ignis
