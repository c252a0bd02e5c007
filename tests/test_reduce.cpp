// Reductions beyond the op table: dtype rules, indices and ties, NaN and infinity handling,
// large inputs on the parallel and column paths (checked against double loops), gradients at
// the special points (zeros, ties, constant inputs), and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <numeric>

#include "ignis/ignis.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;
using V = std::vector<double>;

const double kNan = std::numeric_limits<double>::quiet_NaN();
const double kInf = std::numeric_limits<double>::infinity();

V vals(const Tensor& t) {
  NoGradGuard ng;
  Tensor c = t.detach().to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return V(p, p + c.numel());
}

void expect_near(const Tensor& t, const V& want, double tol) {
  const V got = vals(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    if (std::isnan(want[i])) {
      EXPECT_TRUE(std::isnan(got[i])) << "element " << i << " is " << got[i] << ", not NaN";
    } else if (std::isinf(want[i])) {
      EXPECT_EQ(got[i], want[i]) << "element " << i;
    } else {
      EXPECT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << "element " << i;
    }
  }
}

template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  return "(no error)";
}

/// Deterministic values in [-1, 1) (an LCG: independent of ignis's RNG).
V pseudo(size_t n, uint64_t seed) {
  V v(n);
  uint64_t s = seed * 6364136223846793005ull + 1442695040888963407ull;
  for (double& x : v) {
    s = s * 6364136223846793005ull + 1442695040888963407ull;
    x = static_cast<double>(s >> 11) * 0x1.0p-53 * 2 - 1;
  }
  return v;
}
Tensor make(const V& v, IntArrayRef shape, DType dt = kFloat32) {
  return tensor(v, kFloat64).reshape(shape).to(dt);
}

/// Runs with several threads so that the parallel paths run even on a small machine.
class ReduceParallel : public ::testing::Test {
 protected:
  void SetUp() override {
    prev_ = get_num_threads();
    set_num_threads(4);
  }
  void TearDown() override { set_num_threads(prev_); }
  int prev_ = 1;
};

// ---- dtype rules

TEST(ReduceDtype, SumOfIntegersAndBoolIsInt64) {
  Tensor i = tensor({1, 2, 3, 4}, kInt32).reshape({2, 2});
  EXPECT_EQ(i.sum().dtype(), kInt64);
  EXPECT_EQ(i.sum().item<int64_t>(), 10);
  EXPECT_EQ(vals(sum(i, 0)), (V{4, 6}));
  EXPECT_EQ(sum(i, 0).dtype(), kInt64);
  Tensor b = tensor(std::vector<bool>{true, false, true});
  EXPECT_EQ(b.sum().dtype(), kInt64);
  EXPECT_EQ(b.sum().item<int64_t>(), 2);
  Tensor u = tensor({200, 100}, kUInt8);
  EXPECT_EQ(u.sum().item<int64_t>(), 300);  // no uint8 overflow
  EXPECT_EQ(i.sum(kFloat64).dtype(), kFloat64);
  EXPECT_EQ(i.sum({1}, false, kInt32).dtype(), kInt32);
  EXPECT_EQ(vals(i.sum({1}, false, kInt32)), (V{3, 7}));
  EXPECT_EQ(tensor({1.5, 2.0}, kBFloat16).sum().dtype(), kBFloat16);
}

TEST(ReduceDtype, OtherReductions) {
  Tensor i = tensor({3, -2, 5}, kInt32);
  EXPECT_EQ(i.prod().dtype(), kInt64);
  EXPECT_EQ(i.prod().item<int64_t>(), -30);
  EXPECT_EQ(i.amax().dtype(), kInt32);
  EXPECT_EQ(i.amax().item<int64_t>(), 5);
  EXPECT_EQ(i.min().item<int64_t>(), -2);
  EXPECT_EQ(i.argmax().dtype(), kInt64);
  EXPECT_EQ(cumsum(i, 0).dtype(), kInt64);
  EXPECT_EQ(vals(cumsum(i, 0)), (V{3, 1, 6}));
  auto [v, idx] = max(i, 0);
  EXPECT_EQ(v.dtype(), kInt32);
  EXPECT_EQ(idx.dtype(), kInt64);
  EXPECT_EQ(all(i).dtype(), kBool);
  EXPECT_EQ(any(tensor({0.0, 0.5})).dtype(), kBool);
  EXPECT_EQ(logsumexp(i, {0}).dtype(), kFloat32);
  EXPECT_NEAR(logsumexp(i, {0}).item<double>(),
              std::log(std::exp(3.0) + std::exp(-2.0) + std::exp(5.0)), 1e-5);
  Tensor b = tensor(std::vector<bool>{false, true});
  EXPECT_EQ(b.amax().dtype(), kBool);
  EXPECT_TRUE(b.amax().item<bool>());
  EXPECT_FALSE(b.amin().item<bool>());
  EXPECT_EQ(b.argmax().item<int64_t>(), 1);
}

TEST(ReduceDtype, FloatingOnlyOpsRejectIntegers) {
  Tensor i = tensor({1, 2, 3});
  EXPECT_THAT(error_of([&] { mean(i); }), HasSubstr("mean: could not infer output dtype"));
  EXPECT_THAT(error_of([&] { var(i); }), HasSubstr("var: std and var only support floating"));
  EXPECT_THAT(error_of([&] { ignis::std(i); }), HasSubstr("std: "));
  EXPECT_THAT(error_of([&] { norm(i); }), HasSubstr("norm: expected a floating point tensor"));
  EXPECT_THAT(error_of([&] { softmax(i, 0); }), HasSubstr("softmax: expected a floating point"));
  EXPECT_THAT(error_of([&] { log_softmax(i, 0); }), HasSubstr("log_softmax: expected a floating"));
}

// ---- shapes

TEST(ReduceShape, KeepdimZeroDimAndEmpty) {
  Tensor x = make(pseudo(24, 1), {2, 3, 4});
  EXPECT_EQ(sum(x, {0, 2}, true).sizes().vec(), (std::vector<int64_t>{1, 3, 1}));
  EXPECT_EQ(sum(x, {0, 2}).sizes().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(x.sum().dim(), 0);
  EXPECT_EQ(amax(x, {}, true).sizes().vec(), (std::vector<int64_t>{1, 1, 1}));
  EXPECT_EQ(argmax(x, std::nullopt, true).sizes().vec(), (std::vector<int64_t>{1, 1, 1}));
  Tensor s = tensor(2.5);
  EXPECT_EQ(s.sum().item<double>(), 2.5);
  EXPECT_EQ(sum(s, 0).item<double>(), 2.5);
  EXPECT_EQ(sum(s, -1, true).dim(), 0);
  EXPECT_EQ(s.argmax().item<int64_t>(), 0);
  auto [mv, mi] = max(s, 0);
  EXPECT_EQ(mv.item<double>(), 2.5);
  EXPECT_EQ(mi.item<int64_t>(), 0);
  EXPECT_EQ(s.softmax(0).item<double>(), 1.0);
  EXPECT_EQ(cumsum(s, 0).item<double>(), 2.5);
  Tensor e = zeros({0, 3});
  EXPECT_EQ(vals(sum(e, 0)), (V{0, 0, 0}));
  EXPECT_EQ(vals(prod(e, 0)), (V{1, 1, 1}));
  EXPECT_EQ(sum(e, 1).sizes().vec(), (std::vector<int64_t>{0}));
  EXPECT_TRUE(std::isnan(e.mean().item<double>()));
  EXPECT_TRUE(e.all().item<bool>());
  EXPECT_FALSE(e.any().item<bool>());
  EXPECT_EQ(e.norm().item<double>(), 0);
  EXPECT_EQ(logsumexp(e, {0}).sizes().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(vals(logsumexp(e, {0})), (V{-kInf, -kInf, -kInf}));
  EXPECT_EQ(amax(e, 1).sizes().vec(), (std::vector<int64_t>{0}));  // reduced dim not empty
}

TEST(ReduceShape, ExpandedAndPermutedInputs) {
  Tensor row = make(V{1, 2, 3}, {1, 3});
  Tensor ex = row.expand({4, 3});  // stride 0 along dim 0
  EXPECT_EQ(vals(sum(ex, 0)), (V{4, 8, 12}));
  EXPECT_EQ(vals(sum(ex, 1)), (V{6, 6, 6, 6}));
  EXPECT_EQ(vals(amax(ex, 0)), (V{1, 2, 3}));
  Tensor base = make(pseudo(60, 2), {3, 4, 5}, kFloat64);
  Tensor p = base.permute({2, 0, 1});  // [5, 3, 4]
  const V b = vals(base);
  // sum over dims 0 and 2 of p = over base's dims 2 and 1: one value per base dim 0.
  V want(3, 0.0);
  for (int i = 0; i < 3; ++i)
    for (int j = 0; j < 20; ++j) want[i] += b[i * 20 + j];
  expect_near(sum(p, {0, 2}), want, 1e-12);
  // sum over dim 1 of p = over base's dim 0, output ordered as p's dims [5, 4].
  V want2(20, 0.0);
  for (int k = 0; k < 5; ++k)
    for (int j = 0; j < 4; ++j)
      for (int i = 0; i < 3; ++i) want2[k * 4 + j] += b[i * 20 + j * 5 + k];
  expect_near(sum(p, 1), want2, 1e-12);
  expect_near(
      var(p, {1}, 0),
      [&] {
        V w;
        for (int k = 0; k < 5; ++k)
          for (int j = 0; j < 4; ++j) {
            double m = 0, s = 0;
            for (int i = 0; i < 3; ++i) m += b[i * 20 + j * 5 + k] / 3;
            for (int i = 0; i < 3; ++i) s += std::pow(b[i * 20 + j * 5 + k] - m, 2) / 3;
            w.push_back(s);
          }
        return w;
      }(),
      1e-12);
}

// ---- indices, ties, NaN

TEST(ReduceIndices, FirstOccurrenceOfTies) {
  Tensor x = tensor({{1.0, 3.0, 3.0, 2.0}, {5.0, 5.0, 0.0, 5.0}});
  EXPECT_EQ(x.argmax().item<int64_t>(), 4);
  EXPECT_EQ(vals(argmax(x, 1)), (V{1, 0}));
  EXPECT_EQ(vals(argmin(x, 1)), (V{0, 2}));
  EXPECT_EQ(vals(argmax(x, 0)), (V{1, 1, 0, 1}));
  auto [v, i] = x.max(1, true);
  EXPECT_EQ(v.sizes().vec(), (std::vector<int64_t>{2, 1}));
  EXPECT_EQ(vals(v), (V{3, 5}));
  EXPECT_EQ(vals(i), (V{1, 0}));
  // Columns path (the reduced dim is not innermost): ties keep the first row.
  Tensor c = tensor({{2.0, 1.0}, {2.0, 4.0}, {0.0, 4.0}});
  auto [cv, ci] = max(c, 0);
  EXPECT_EQ(vals(cv), (V{2, 4}));
  EXPECT_EQ(vals(ci), (V{0, 1}));
  auto [nv, ni] = min(c, 0);
  EXPECT_EQ(vals(nv), (V{0, 1}));
  EXPECT_EQ(vals(ni), (V{2, 0}));
  Tensor ints = tensor({{4, 9, 9}, {-1, -1, -7}}, kInt32);
  EXPECT_EQ(vals(argmax(ints, 1)), (V{1, 0}));
  EXPECT_EQ(vals(argmin(ints, 0)), (V{1, 1, 1}));
}

TEST(ReduceNaN, NaNWinsAndIsIndexed) {
  Tensor x = tensor({{1.0, kNan, 3.0, kNan}, {2.0, -1.0, 0.5, 7.0}});
  EXPECT_TRUE(std::isnan(x.max().item<double>()));
  EXPECT_TRUE(std::isnan(x.min().item<double>()));
  expect_near(amax(x, 1), V{kNan, 7}, 0);
  expect_near(amin(x, 1), V{kNan, -1}, 0);
  expect_near(amax(x, 0), V{2, kNan, 3, kNan}, 0);
  EXPECT_EQ(vals(argmax(x, 1)), (V{1, 3}));
  EXPECT_EQ(vals(argmin(x, 1)), (V{1, 1}));
  EXPECT_EQ(x.argmax().item<int64_t>(), 1);
  auto [v, i] = max(x, 0);  // columns path
  expect_near(v, V{2, kNan, 3, kNan}, 0);
  EXPECT_EQ(vals(i), (V{1, 0, 0, 0}));
  Tensor first_row_finite = tensor({1.0, kNan, 5.0, kNan}).reshape({4, 1});
  auto [cv, ci] = min(first_row_finite, 0);
  EXPECT_TRUE(std::isnan(cv.item<double>()));
  EXPECT_EQ(ci.item<int64_t>(), 1);
  EXPECT_TRUE(std::isnan(x.norm(kInf).item<double>()));
  EXPECT_TRUE(std::isnan(x.sum().item<double>()));
  EXPECT_TRUE(x.any().item<bool>());  // NaN is nonzero
  EXPECT_TRUE(std::isnan(vals(logsumexp(x, {1}))[0]));
}

TEST(ReduceNaN, InfinitiesInLogsumexpAndSoftmax) {
  Tensor x = tensor({{-kInf, -kInf}, {kInf, 1.0}, {1000.0, 1001.0}});
  expect_near(logsumexp(x, {1}), V{-kInf, kInf, 1001 + std::log1p(std::exp(-1.0))}, 1e-6);
  Tensor s = softmax(tensor({{1000.0, 1001.0, -kInf}}), 1);
  expect_near(s, V{1 / (1 + std::exp(1.0)), 1 / (1 + std::exp(-1.0)), 0}, 1e-6);
  Tensor ls = log_softmax(tensor({{1000.0, 1001.0}}, kFloat64), 1);
  expect_near(ls, V{-std::log1p(std::exp(1.0)), -std::log1p(std::exp(-1.0))}, 1e-12);
}

// ---- large inputs on the parallel, split-row and column paths, against double loops

TEST_F(ReduceParallel, SumsOfLargeInputs) {
  Tensor x = make(pseudo(3'000'000, 3), {3'000'000});
  const V v = vals(x);  // the float32 values
  const double total = std::accumulate(v.begin(), v.end(), 0.0);
  EXPECT_NEAR(x.sum().item<double>(), total, 1e-3);  // pairwise float32 sum: error ~ sqrt(n) ulp
  EXPECT_NEAR(x.mean().item<double>(), total / 3e6, 1e-9);
  // Few long rows (rows split across threads).
  Tensor r = x.reshape({3, 1'000'000});
  V rows(3, 0.0);
  for (size_t k = 0; k < v.size(); ++k) rows[k / 1'000'000] += v[k];
  expect_near(sum(r, 1), rows, 1e-5);  // sums of ~1e6 terms with cancellation
  // A tall matrix summed over dim 0 (columns, rows split across threads).
  Tensor c = x.reshape({10'000, 300});
  V cols(300, 0.0);
  for (size_t k = 0; k < v.size(); ++k) cols[k % 300] += v[k];
  expect_near(sum(c, 0), cols, 1e-5);
  // A middle dim: [30, 1000, 100] over dim 1.
  Tensor m = x.reshape({30, 1000, 100});
  V mid(3000, 0.0);
  for (size_t k = 0; k < v.size(); ++k) mid[(k / 100'000) * 100 + k % 100] += v[k];
  expect_near(sum(m, 1), mid, 1e-5);
  // Float64 is exact to rounding.
  Tensor d = make(v, {10'000, 300}, kFloat64);
  expect_near(sum(d, 0), cols, 1e-12);
  EXPECT_NEAR(d.sum().item<double>(), total, 1e-9);
  // Transposed (non-contiguous) input: the column sums become row sums of the view.
  expect_near(sum(d.t(), 1), cols, 1e-12);
}

TEST_F(ReduceParallel, ExtremesOfLargeInputs) {
  V v = pseudo(2'000'000, 4);
  v[1'234'567] = 5;
  v[1'800'000] = 5;  // a later tie
  v[77] = -5;
  Tensor x = make(v, {2'000'000});
  EXPECT_EQ(x.max().item<double>(), 5);
  EXPECT_EQ(x.argmax().item<int64_t>(), 1'234'567);
  EXPECT_EQ(x.argmin().item<int64_t>(), 77);
  Tensor r = x.reshape({4, 500'000});
  EXPECT_EQ(vals(argmax(r, 1))[2], 234'567);
  EXPECT_EQ(vals(amax(r, 1))[3], 5);
  Tensor c = x.reshape({20'000, 100});
  auto [cv, ci] = max(c, 0);
  EXPECT_EQ(vals(cv)[67], 5);
  EXPECT_EQ(vals(ci)[67], 12'345);
  v[1'500'000] = kNan;
  Tensor n = make(v, {2'000'000});
  EXPECT_TRUE(std::isnan(n.amax().item<double>()));
  EXPECT_EQ(n.argmax().item<int64_t>(), 1'500'000);
  EXPECT_EQ(n.argmin().item<int64_t>(), 1'500'000);
  EXPECT_TRUE(n.any().item<bool>());
  EXPECT_FALSE(make(V(3'000'000, 0.0), {3'000'000}).any().item<bool>());
  EXPECT_TRUE(make(V(3'000'000, 2.0), {3'000'000}).all().item<bool>());
}

TEST_F(ReduceParallel, StatisticsOfLargeInputs) {
  V v0 = pseudo(1'000'000, 5);
  for (double& a : v0) a = 100 + a;  // a large mean: the two-pass variance keeps its digits
  Tensor x = make(v0, {1'000'000});
  const V v = vals(x);
  double m = 0, s = 0, s2 = 0, l = 0;
  for (double a : v) m += a / 1e6;
  for (double a : v) s += (a - m) * (a - m);
  for (double a : v) s2 += a * a;
  for (double a : v) l += std::exp(a - 101);
  EXPECT_NEAR(x.var().item<double>(), s / (1e6 - 1), 1e-5);
  EXPECT_NEAR(x.std({}, 0).item<double>(), std::sqrt(s / 1e6), 1e-5);
  EXPECT_NEAR(x.norm().item<double>(), std::sqrt(s2), 1e-5 * std::sqrt(s2));
  EXPECT_NEAR(logsumexp(x, {0}).item<double>(), 101 + std::log(l), 1e-4);
  Tensor c = x.reshape({2000, 500});  // var over columns
  V cv(500);
  for (int j = 0; j < 500; ++j) {
    double cm = 0, cs = 0;
    for (int i = 0; i < 2000; ++i) cm += v[i * 500 + j] / 2000;
    for (int i = 0; i < 2000; ++i) cs += std::pow(v[i * 500 + j] - cm, 2);
    cv[j] = cs / 1999;
  }
  expect_near(var(c, {0}), cv, 1e-4);
}

V ref_softmax(const V& v, int64_t rows, int64_t n, bool log) {
  V o(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mx = -kInf, s = 0;
    for (int64_t k = 0; k < n; ++k) mx = std::max(mx, v[r * n + k]);
    for (int64_t k = 0; k < n; ++k) s += std::exp(v[r * n + k] - mx);
    for (int64_t k = 0; k < n; ++k) {
      o[r * n + k] = log ? v[r * n + k] - mx - std::log(s) : std::exp(v[r * n + k] - mx) / s;
    }
  }
  return o;
}

TEST_F(ReduceParallel, SoftmaxOfLargeInputs) {
  V v0 = pseudo(512 * 1000, 6);
  for (double& a : v0) a *= 8;
  Tensor x = make(v0, {512, 1000});
  const V v = vals(x);
  expect_near(softmax(x, 1), ref_softmax(v, 512, 1000, false), 1e-5);
  expect_near(log_softmax(x, -1), ref_softmax(v, 512, 1000, true), 1e-5);
  expect_near(softmax(make(v, {512, 1000}, kFloat64), 1), ref_softmax(v, 512, 1000, false), 1e-13);
  expect_near(softmax(make(v, {512, 1000}, kBFloat16), 1),
              ref_softmax(vals(make(v, {512, 1000}, kBFloat16)), 512, 1000, false), 1e-2);
  // Over dim 0 (columns path): the transpose of a row softmax.
  Tensor t = make(v, {1000, 512}).t().contiguous();  // [512, 1000] values of v as [1000, 512]^T
  Tensor st = softmax(make(v, {1000, 512}), 0).t();
  expect_near(st, vals(softmax(t, 1)), 1e-6);
  // A non-contiguous input (transposed view).
  expect_near(log_softmax(make(v, {1000, 512}).t(), 1), vals(log_softmax(t, 1)), 1e-6);
}

TEST_F(ReduceParallel, CumsumOfLargeInputs) {
  const V v = vals(make(pseudo(300'000, 7), {300'000}));  // float32-representable
  Tensor x = make(v, {3, 100'000}, kFloat64);
  V want(v.size());
  for (int r = 0; r < 3; ++r) {
    double s = 0;
    for (int k = 0; k < 100'000; ++k) want[r * 100'000 + k] = s += v[r * 100'000 + k];
  }
  expect_near(cumsum(x, 1), want, 1e-12);
  Tensor c = make(v, {1000, 300}, kFloat32);
  V wc(v.size());
  for (int j = 0; j < 300; ++j) {
    double s = 0;
    for (int i = 0; i < 1000; ++i) wc[i * 300 + j] = s += v[i * 300 + j];
  }
  expect_near(cumsum(c, 0), wc, 1e-5);
}

// ---- gradients at special points

Tensor grad_of(const Tensor& x, const std::function<Tensor(const Tensor&)>& f) {
  Tensor xr = x.detach().clone().requires_grad_(true);
  f(xr).sum().backward();
  return xr.grad();
}

TEST(ReduceGrad, TiesSplitTheGradientEvenly) {
  Tensor x = tensor({{1.0, 3.0, 3.0}, {2.0, 2.0, 2.0}}, kFloat64);
  expect_near(grad_of(x, [](const Tensor& t) { return amax(t, 1); }),
              V{0, 0.5, 0.5, 1. / 3, 1. / 3, 1. / 3}, 1e-15);
  expect_near(grad_of(x, [](const Tensor& t) { return t.max(); }), V{0, 0.5, 0.5, 0, 0, 0}, 1e-15);
  expect_near(grad_of(x, [](const Tensor& t) { return t.min(); }), V{1, 0, 0, 0, 0, 0}, 1e-15);
  // max(dim) sends the gradient to the returned index only.
  expect_near(grad_of(x, [](const Tensor& t) { return std::get<0>(max(t, 1)); }),
              V{0, 1, 0, 1, 0, 0}, 0);
  expect_near(grad_of(x, [](const Tensor& t) { return std::get<0>(min(t, 0, true)); }),
              V{1, 0, 0, 0, 1, 1}, 0);
  // norm inf: ties share, with the sign of x.
  Tensor y = tensor({-2.0, 2.0, 1.0}, kFloat64);
  expect_near(grad_of(y, [](const Tensor& t) { return t.norm(kInf); }), V{-0.5, 0.5, 0}, 1e-15);
}

TEST(ReduceGrad, ProdWithZeros) {
  auto g = [](V v) {
    return grad_of(tensor(v, kFloat64), [](const Tensor& t) { return t.prod(); });
  };
  expect_near(g({2, 3, 4}), V{12, 8, 6}, 1e-15);
  expect_near(g({2, 0, 4}), V{0, 8, 0}, 1e-15);
  expect_near(g({0, 3, 0}), V{0, 0, 0}, 0);
  Tensor m = tensor({{2.0, 0.0, 5.0}, {0.0, 0.0, 1.0}, {1.0, 2.0, 3.0}}, kFloat64);
  expect_near(grad_of(m, [](const Tensor& t) { return prod(t, 1); }), V{0, 10, 0, 0, 0, 0, 6, 3, 2},
              1e-15);
  expect_near(grad_of(m, [](const Tensor& t) { return prod(t, 0); }), V{0, 0, 3, 2, 0, 15, 0, 0, 5},
              1e-15);
  // Second derivative through a zero: d/dx_j sum_i d prod / dx_i.
  Tensor x = tensor({1.5, 0.0, 3.0}, kFloat64).requires_grad_(true);
  x.prod().backward({}, true, true);
  Tensor first = x.grad();
  x.mutable_grad() = Tensor();
  first.sum().backward();
  expect_near(x.grad(), V{3, 4.5, 1.5}, 1e-15);
}

TEST(ReduceGrad, SubgradientsAtZero) {
  Tensor z = zeros({3}, kFloat64);
  expect_near(grad_of(z, [](const Tensor& t) { return t.norm(); }), V{0, 0, 0}, 0);
  expect_near(grad_of(z, [](const Tensor& t) { return t.norm(3); }), V{0, 0, 0}, 0);
  expect_near(grad_of(z, [](const Tensor& t) { return t.norm(1); }), V{0, 0, 0}, 0);
  Tensor c = full({4}, 2.0, kFloat64);
  expect_near(grad_of(c, [](const Tensor& t) { return t.std(); }), V{0, 0, 0, 0}, 0);
  Tensor x = tensor({3.0, 0.0, 4.0}, kFloat64);
  expect_near(grad_of(x, [](const Tensor& t) { return t.norm(); }), V{0.6, 0, 0.8}, 1e-15);
}

TEST(ReduceGrad, CumsumAndSoftmaxBackward) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64);
  Tensor w = tensor({{1.0, 10.0, 100.0}, {2.0, 20.0, 200.0}}, kFloat64);
  expect_near(grad_of(x, [&](const Tensor& t) { return cumsum(t, 1) * w; }),
              V{111, 110, 100, 222, 220, 200}, 1e-13);
  expect_near(grad_of(x, [&](const Tensor& t) { return cumsum(t, 0) * w; }),
              V{3, 30, 300, 2, 20, 200}, 1e-13);
  // The fused backward kernel agrees with the composite one (used under create_graph).
  for (bool log : {false, true}) {
    for (int64_t dim : {0, 1}) {
      Tensor a = x.detach().clone().requires_grad_(true);
      Tensor y = log ? log_softmax(a, dim) : softmax(a, dim);
      (y * w).sum().backward();
      Tensor b = x.detach().clone().requires_grad_(true);
      Tensor yb = log ? log_softmax(b, dim) : softmax(b, dim);
      (yb * w).sum().backward({}, true, true);
      expect_near(a.grad(), vals(b.grad()), 1e-13);
    }
  }
}

// ---- error messages

TEST(ReduceErrors, DimsOutOfRangeOrRepeated) {
  Tensor x = zeros({2, 3});
  EXPECT_THAT(error_of([&] { sum(x, 2); }), HasSubstr("sum: dimension 2 out of range"));
  EXPECT_THAT(error_of([&] { sum(x, -3); }), HasSubstr("out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([&] {
                sum(x, {1, -1});
              }),
              HasSubstr("sum: dim 1 appears multiple times in the list of dims"));
  EXPECT_THAT(error_of([&] { amax(x, {0, 0}); }), HasSubstr("amax: dim 0 appears multiple"));
  EXPECT_THAT(error_of([&] { max(x, 5); }), HasSubstr("max: dimension 5 out of range"));
  EXPECT_THAT(error_of([&] { argmin(x, -4); }), HasSubstr("argmin: dimension -4 out of range"));
  EXPECT_THAT(error_of([&] { softmax(x, 2); }), HasSubstr("softmax: dimension 2 out of range"));
  EXPECT_THAT(error_of([&] { cumsum(x, 3); }), HasSubstr("cumsum: dimension 3 out of range"));
  EXPECT_THAT(error_of([&] { prod(x, 2); }), HasSubstr("prod: dimension 2 out of range"));
  EXPECT_THAT(error_of([&] { x.var({0, 0}); }), HasSubstr("var: dim 0 appears multiple"));
  EXPECT_THAT(error_of([&] { x.all(7); }), HasSubstr("all: dimension 7 out of range"));
  EXPECT_THAT(error_of([&] { sum_to_size(x, {4}); }),
              HasSubstr("sum_to_size: size [4] is not expandable to size [2, 3]"));
}

TEST(ReduceErrors, EmptyReductionsWithoutIdentity) {
  Tensor e = zeros({0, 3});
  EXPECT_THAT(error_of([&] { e.max(); }), HasSubstr("max: cannot reduce an empty tensor"));
  EXPECT_THAT(error_of([&] { e.min(); }), HasSubstr("min: cannot reduce an empty tensor"));
  EXPECT_THAT(error_of([&] { amax(e, 0); }), HasSubstr("amax: cannot reduce over dim 0 of size 0"));
  EXPECT_THAT(error_of([&] { max(e, 0); }), HasSubstr("max: cannot reduce over dim 0 of size 0"));
  EXPECT_THAT(error_of([&] { e.argmax(); }), HasSubstr("argmax: cannot reduce an empty tensor"));
  EXPECT_THAT(error_of([&] { argmin(e, 0); }), HasSubstr("argmin: cannot reduce over dim 0"));
  EXPECT_THAT(error_of([&] { e.norm(kInf); }), HasSubstr("norm: cannot reduce an empty tensor"));
  // Reducing a non-empty dim of an empty tensor is fine.
  EXPECT_EQ(std::get<1>(max(e, 1)).sizes().vec(), (std::vector<int64_t>{0}));
}

}  // namespace
}  // namespace ignis
