// Regression tests for differences from PyTorch that the differential check
// (tests/pytorch/diffcheck.py) found at edge values: each asserts PyTorch's value.
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ignis/ignis.h"

using namespace ignis;
namespace F = ignis::nn::functional;

namespace {

constexpr double kInf = std::numeric_limits<double>::infinity();
const double kNaN = std::nan("");

std::vector<double> vals(const Tensor& t) {
  Tensor c = t.detach().to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

TEST(EdgeNumerics, BceWithLogitsOfAnInfiniteLogitIsPyTorchs) {
  // (1 - t) * x + softplus(-x): x = +inf, t = 0 gives +inf (not inf - inf * 0 = NaN). Where
  // (1 - t) * x itself is 0 * inf, PyTorch's value is NaN, and so is ignis's.
  Tensor x = tensor(std::vector<double>{kInf, -kInf, kInf, -kInf});
  Tensor t = tensor(std::vector<double>{0.0, 1.0, 1.0, 0.0});
  const auto l = vals(binary_cross_entropy_with_logits(x, t, {}, {}, "none"));
  EXPECT_EQ(l[0], kInf);
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_TRUE(std::isnan(l[2]));
  EXPECT_TRUE(std::isnan(l[3]));
}

TEST(EdgeNumerics, HuberAndSmoothL1GradientsAreFiniteAtInfiniteDifferences) {
  Tensor x = tensor(std::vector<double>{kInf, -kInf, 0.5}).requires_grad_(true);
  Tensor t = zeros({3}, kFloat64);
  F::huber_loss(x, t, "sum", 1.5).backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1.5, -1.5, 0.5}));
  Tensor y = x.detach().requires_grad_(true);
  F::smooth_l1_loss(y, t, "sum", 2.0).backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{1.0, -1.0, 0.25}));
}

TEST(EdgeNumerics, KlDivOfANegativeOrNaNTargetIsNaNNotZero) {
  Tensor input = tensor(std::vector<double>{-1.0, -1.0, -1.0, -1.0});
  Tensor target = tensor(std::vector<double>{-0.5, kNaN, 0.0, 0.5});
  const auto l = vals(F::kl_div(input, target, "none"));
  EXPECT_TRUE(std::isnan(l[0]));
  EXPECT_TRUE(std::isnan(l[1]));
  EXPECT_EQ(l[2], 0.0);  // 0 log 0 = 0
  EXPECT_NEAR(l[3], 0.5 * (std::log(0.5) + 1.0), 1e-7);
}

TEST(EdgeNumerics, ProdGradientBesideOneZeroIsNaNWhenAnotherElementIsInfinite) {
  Tensor x = tensor(std::vector<double>{2.0, 0.0, kInf}).requires_grad_(true);
  prod(x).backward();
  const auto g = vals(x.grad());
  EXPECT_TRUE(std::isnan(g[0]));  // 0 * inf
  EXPECT_EQ(g[1], kInf);          // 2 * inf
  EXPECT_EQ(g[2], 0.0);           // 2 * 0: its own inf does not enter
  Tensor y = tensor(std::vector<double>{2.0, 0.0, 3.0}).requires_grad_(true);
  prod(y).backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0.0, 6.0, 0.0}));
}

TEST(EdgeNumerics, AnIgnoredTargetContributesZeroWhateverItsLogitsHold) {
  Tensor logits = tensor(std::vector<double>{kInf, 0.0, 1.0, 2.0}).reshape({2, 2});
  Tensor target = tensor(std::vector<int64_t>{-100, 1});
  const auto none = vals(F::cross_entropy(logits, target, {}, -100, "none"));
  EXPECT_EQ(none[0], 0.0);
  EXPECT_NEAR(none[1], std::log1p(std::exp(-1.0)), 1e-6);
  const auto smoothed = vals(F::cross_entropy(logits, target, {}, -100, "none", 0.1));
  EXPECT_EQ(smoothed[0], 0.0);
  const double mean = vals(F::cross_entropy(logits, target, {}, -100, "mean"))[0];
  EXPECT_NEAR(mean, std::log1p(std::exp(-1.0)), 1e-6);
}

TEST(EdgeNumerics, EvalBatchNormInputGradientDoesNotDependOnTheInput) {
  // Running statistics: d out / d x = weight / sqrt(var + eps), finite even where x is NaN.
  Tensor x = tensor(std::vector<double>{kNaN, 1.0, kInf, 2.0}).reshape({2, 2}).requires_grad_(true);
  Tensor mean = zeros({2}, kFloat64), var = ones({2}, kFloat64);
  Tensor w = tensor(std::vector<double>{2.0, 3.0});
  batch_norm(x, mean, var, w, Tensor(), false, 0.1, 0.0).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{2.0, 3.0, 2.0, 3.0}));
}

TEST(EdgeNumerics, Float32VarianceOfHugeValuesDoesNotOverflow) {
  // Squares of 1e30 overflow float32; PyTorch accumulates in double and so does ignis.
  Tensor x = tensor(std::vector<float>{1e30f, -1e30f, 0.0f, 1e30f});
  const std::vector<double> v = {1e30f, -1e30f, 0.0f, 1e30f};
  double m = 0;
  for (double e : v) m += e / 4;
  double ss = 0;
  for (double e : v) ss += (e - m) * (e - m);
  const double s = vals(x.std())[0];
  EXPECT_TRUE(std::isfinite(s));
  EXPECT_NEAR(s, std::sqrt(ss / 3), 1e-6 * std::sqrt(ss / 3));
}

TEST(EdgeNumerics, ZeroDimLogcumsumexpPassesTheGradientThroughAtNaNAndInf) {
  // A 0-d logcumsumexp is the identity: PyTorch's gradient is the incoming one, 1 here, also
  // where exp(x - out) is NaN (x NaN or infinite).
  for (double v : {kNaN, kInf, -kInf, 2.5}) {
    Tensor x = tensor(std::vector<double>{v}).reshape({}).requires_grad_(true);
    Tensor y = logcumsumexp(x, 0);
    y.backward();
    EXPECT_EQ(vals(x.grad()), (std::vector<double>{1.0})) << "x = " << v;
  }
}

TEST(EdgeNumerics, PreluWeightGradientIgnoresPositiveInfinities) {
  // PyTorch: d/dw = sum of x where x <= 0; a channel of positive values (inf included) gives 0.
  Tensor x = tensor(std::vector<double>{kInf, -2.0, 3.0, -kInf}, kFloat64).reshape({2, 2});
  x.requires_grad_(true);
  Tensor w = tensor(std::vector<double>{0.25, 0.5}, kFloat64).requires_grad_(true);
  Tensor y = prelu(x, w);
  EXPECT_EQ(vals(y), (std::vector<double>{kInf, -1.0, 3.0, -kInf}));
  y.sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1.0, 0.5, 1.0, 0.5}));
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{0.0, -kInf}));
  // An infinite slope does not touch the gradient of a positive input.
  Tensor x2 = tensor(std::vector<double>{1.0, -2.0}, kFloat64).reshape({1, 2}).requires_grad_(true);
  Tensor w2 = tensor(std::vector<double>{kInf, 0.5}, kFloat64).requires_grad_(true);
  prelu(x2, w2).sum().backward();
  EXPECT_EQ(vals(x2.grad()), (std::vector<double>{1.0, 0.5}));
  EXPECT_EQ(vals(w2.grad()), (std::vector<double>{0.0, -2.0}));
}

TEST(EdgeNumerics, MultilabelMarginLossLeavesOutPairsOfInfinitiesItDoesNotUse) {
  // Row 0: every class a target, so no pair and a loss of 0 (PyTorch), though 1 - x_t + x_k is
  // inf - inf for t = k = 1. Row 1: one target; its unused target slots must not bring in x_0.
  Tensor x =
      tensor(std::vector<double>{3000.0, -kInf, 2.0, -kInf, 1.0, 0.5}, kFloat64).reshape({2, 3});
  x.requires_grad_(true);
  Tensor t = tensor(std::vector<int64_t>{1, 2, 0, 1, -1, -1}).reshape({2, 3});
  Tensor l = F::multilabel_margin_loss(x, t, "none");
  const auto v = vals(l);
  EXPECT_EQ(v[0], 0.0);
  EXPECT_NEAR(v[1], 0.5 / 3, 1e-15);
  l.sum().backward();
  const auto g = vals(x.grad());
  const std::vector<double> want = {0.0, 0.0, 0.0, 0.0, -1.0 / 3, 1.0 / 3};
  for (size_t i = 0; i < want.size(); ++i) EXPECT_NEAR(g[i], want[i], 1e-15) << i;
}

}  // namespace
