// nn::init: fans and gains, and every initialiser against its distribution (bounds, sample mean
// and standard deviation on large seeded tensors), orthogonality, and errors.
#include <cmath>
#include <limits>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::to_vec;
using ::testing::HasSubstr;
namespace init = ignis::nn::init;

namespace {

using Fans = std::pair<int64_t, int64_t>;

struct Stats {
  double mean = 0, std = 0, min = 0, max = 0;
};

Stats stats_of(const std::vector<double>& v) {
  Stats s;
  s.min = std::numeric_limits<double>::infinity();
  s.max = -s.min;
  for (double x : v) {
    s.mean += x;
    s.min = std::min(s.min, x);
    s.max = std::max(s.max, x);
  }
  s.mean /= static_cast<double>(v.size());
  double ss = 0;
  for (double x : v) ss += (x - s.mean) * (x - s.mean);
  s.std = std::sqrt(ss / static_cast<double>(v.size() - 1));
  return s;
}

double fraction(const std::vector<double>& v, double lo, double hi) {
  int64_t n = 0;
  for (double x : v) n += (x >= lo && x <= hi);
  return static_cast<double>(n) / static_cast<double>(v.size());
}

// n samples of U(-b, b): within [-b, b], reaching close to both ends, mean 0, sd b / sqrt(3),
// and half of them in [-b/2, b/2].
void expect_uniform(const Tensor& t, double lo, double hi, const std::string& what) {
  const std::vector<double> v = to_vec(t);
  const double n = static_cast<double>(v.size());
  const Stats s = stats_of(v);
  const double width = hi - lo;
  const double sd = width / std::sqrt(12.0);
  EXPECT_GE(s.min, lo) << what;
  EXPECT_LE(s.max, hi) << what;
  EXPECT_LT(s.min, lo + 1e-3 * width) << what;
  EXPECT_GT(s.max, hi - 1e-3 * width) << what;
  EXPECT_NEAR(s.mean, (lo + hi) / 2, 5 * sd / std::sqrt(n)) << what;
  EXPECT_NEAR(s.std, sd, 0.01 * sd) << what;
  EXPECT_NEAR(fraction(v, lo + width / 4, hi - width / 4), 0.5, 0.01) << what;
}

// n samples of N(mean, sd): sample mean and sd, and 68.27% within one sd.
void expect_normal(const Tensor& t, double mean, double sd, const std::string& what) {
  const std::vector<double> v = to_vec(t);
  const double n = static_cast<double>(v.size());
  const Stats s = stats_of(v);
  EXPECT_NEAR(s.mean, mean, 5 * sd / std::sqrt(n)) << what;
  EXPECT_NEAR(s.std, sd, 0.01 * sd) << what;
  EXPECT_NEAR(fraction(v, mean - sd, mean + sd), 0.6827, 0.01) << what;
  EXPECT_NEAR(fraction(v, mean - 2 * sd, mean + 2 * sd), 0.9545, 0.005) << what;
}

}  // namespace

TEST(Init, FansAndGains) {
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({30, 20})), Fans(20, 30));
  // Conv weight [out, in, kh, kw]: the receptive field multiplies both.
  EXPECT_EQ(init::calculate_fan_in_and_fan_out(empty({8, 3, 5, 5})), Fans(75, 200));
  EXPECT_THAT(error_of([] { init::calculate_fan_in_and_fan_out(empty({7})); }),
              HasSubstr("fewer than 2 dimensions (shape [7])"));
  EXPECT_DOUBLE_EQ(init::calculate_gain("linear"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("sigmoid"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("conv2d"), 1.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("tanh"), 5.0 / 3.0);
  EXPECT_DOUBLE_EQ(init::calculate_gain("relu"), std::sqrt(2.0));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu"), std::sqrt(2.0 / (1 + 0.01 * 0.01)));
  EXPECT_DOUBLE_EQ(init::calculate_gain("leaky_relu", 0.2), std::sqrt(2.0 / 1.04));
  EXPECT_DOUBLE_EQ(init::calculate_gain("selu"), 0.75);
  EXPECT_THAT(error_of([] { init::calculate_gain("swish"); }),
              HasSubstr("calculate_gain: unsupported nonlinearity 'swish'"));
}

TEST(Init, ConstantZerosOnes) {
  Tensor t = empty({3, 4}).requires_grad_();
  init::constant_(t, -2.5);
  for (double v : to_vec(t)) EXPECT_EQ(v, -2.5);
  init::zeros_(t);
  for (double v : to_vec(t)) EXPECT_EQ(v, 0.0);
  init::ones_(t);
  for (double v : to_vec(t)) EXPECT_EQ(v, 1.0);
  // In place on a parameter, without recording history.
  EXPECT_TRUE(t.is_leaf());
  EXPECT_TRUE(t.requires_grad());
  EXPECT_EQ(t.grad_fn(), nullptr);
  Tensor d = empty({5}, kFloat64);
  EXPECT_TRUE(init::ones_(d).is_same(d));
  EXPECT_EQ(d.dtype(), kFloat64);
}

TEST(Init, UniformAndNormal) {
  manual_seed(1);
  Tensor t = empty({500, 400});
  init::uniform_(t, -0.3, 0.7);
  expect_uniform(t, -0.3, 0.7, "uniform_");
  init::uniform_(t);
  expect_uniform(t, 0.0, 1.0, "uniform_ default");
  init::normal_(t, 1.5, 0.2);
  expect_normal(t, 1.5, 0.2, "normal_");
  init::normal_(t);
  expect_normal(t, 0.0, 1.0, "normal_ default");
}

TEST(Init, XavierUniformAndNormal) {
  manual_seed(2);
  Tensor t = empty({300, 700}).requires_grad_();  // fan_in 700, fan_out 300
  const double a = std::sqrt(6.0 / 1000.0);
  init::xavier_uniform_(t);
  expect_uniform(t, -a, a, "xavier_uniform_");
  init::xavier_uniform_(t, 2.0);
  expect_uniform(t, -2 * a, 2 * a, "xavier_uniform_ gain 2");
  init::xavier_normal_(t);
  expect_normal(t, 0, std::sqrt(2.0 / 1000.0), "xavier_normal_");
  init::xavier_normal_(t, init::calculate_gain("tanh"));
  expect_normal(t, 0, 5.0 / 3.0 * std::sqrt(2.0 / 1000.0), "xavier_normal_ tanh gain");
  EXPECT_TRUE(t.is_leaf());
  // A conv-shaped weight: fans include the receptive field.
  Tensor c = empty({64, 32, 3, 3});  // fan_in 288, fan_out 576
  init::xavier_uniform_(c);
  const double ac = std::sqrt(6.0 / (288.0 + 576.0));
  expect_uniform(c, -ac, ac, "xavier_uniform_ conv");
}

TEST(Init, KaimingUniformAndNormal) {
  manual_seed(3);
  Tensor t = empty({400, 500});  // fan_in 500, fan_out 400
  // Default: a = 0 with leaky_relu, so gain sqrt(2); bound = gain * sqrt(3 / fan_in).
  init::kaiming_uniform_(t);
  const double b_in = std::sqrt(2.0) * std::sqrt(3.0 / 500.0);
  expect_uniform(t, -b_in, b_in, "kaiming_uniform_");
  init::kaiming_uniform_(t, 0, "fan_out", "relu");
  const double b_out = std::sqrt(2.0) * std::sqrt(3.0 / 400.0);
  expect_uniform(t, -b_out, b_out, "kaiming_uniform_ fan_out");
  // Linear's reset: a = sqrt(5) gives bound 1 / sqrt(fan_in).
  init::kaiming_uniform_(t, std::sqrt(5.0));
  expect_uniform(t, -1 / std::sqrt(500.0), 1 / std::sqrt(500.0), "kaiming_uniform_ sqrt(5)");
  init::kaiming_normal_(t);
  expect_normal(t, 0, std::sqrt(2.0 / 500.0), "kaiming_normal_");
  init::kaiming_normal_(t, 0.1, "fan_out", "leaky_relu");
  expect_normal(t, 0, std::sqrt(2.0 / 1.01) / std::sqrt(400.0), "kaiming_normal_ leaky fan_out");
  init::kaiming_normal_(t, 0, "fan_in", "tanh");
  expect_normal(t, 0, 5.0 / 3.0 / std::sqrt(500.0), "kaiming_normal_ tanh");

  EXPECT_THAT(error_of([&] { init::kaiming_uniform_(t, 0, "fan_avg"); }),
              HasSubstr("kaiming init: mode must be fan_in or fan_out, got 'fan_avg'"));
  Tensor empty_w = empty({4, 0});
  EXPECT_THAT(error_of([&] { init::kaiming_normal_(empty_w); }),
              HasSubstr("kaiming init: initializing a zero-element tensor (shape [4, 0])"));
  Tensor v = empty({10});
  EXPECT_THAT(error_of([&] { init::kaiming_uniform_(v); }), HasSubstr("fewer than 2 dimensions"));
}

TEST(Init, SeededInitialisersAreReproducible) {
  Tensor a = empty({20, 30}), b = empty({20, 30});
  manual_seed(42);
  init::kaiming_normal_(a);
  manual_seed(42);
  init::kaiming_normal_(b);
  EXPECT_TRUE(equal(a, b));
  init::kaiming_normal_(b);
  EXPECT_FALSE(equal(a, b));
}

namespace {
// Max |(M M^T)_ij - g^2 I_ij| of the rows of m ([r, c] float64 values).
double max_gram_error(const std::vector<double>& m, int64_t r, int64_t c, double g2, bool rows) {
  const int64_t n = rows ? r : c, len = rows ? c : r;
  auto at = [&](int64_t vec, int64_t k) { return rows ? m[vec * c + k] : m[k * c + vec]; };
  double worst = 0;
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < n; ++j) {
      double dot = 0;
      for (int64_t k = 0; k < len; ++k) dot += at(i, k) * at(j, k);
      worst = std::max(worst, std::abs(dot - (i == j ? g2 : 0.0)));
    }
  }
  return worst;
}
}  // namespace

TEST(Init, OrthogonalGivesOrthonormalRowsOrColumns) {
  manual_seed(4);
  // Tall [40, 10]: Q^T Q = I (orthonormal columns).
  Tensor tall = empty({40, 10}, kFloat64);
  init::orthogonal_(tall);
  EXPECT_LT(max_gram_error(to_vec(tall), 40, 10, 1.0, /*rows=*/false), 1e-12);
  // Wide [10, 40]: Q Q^T = I (orthonormal rows).
  Tensor wide = empty({10, 40}, kFloat64);
  init::orthogonal_(wide);
  EXPECT_LT(max_gram_error(to_vec(wide), 10, 40, 1.0, /*rows=*/true), 1e-12);
  // Square with a gain, in float32: Q^T Q = g^2 I.
  Tensor sq = empty({16, 16});
  init::orthogonal_(sq, 2.0);
  EXPECT_LT(max_gram_error(to_vec(sq), 16, 16, 4.0, false), 1e-5);
  EXPECT_LT(max_gram_error(to_vec(sq), 16, 16, 4.0, true), 1e-5);
  // A conv weight [8, 2, 3, 3] is treated as [8, 18]: orthonormal rows.
  Tensor conv = empty({8, 2, 3, 3}, kFloat64);
  init::orthogonal_(conv);
  EXPECT_EQ(conv.sizes().shape(), Shape({8, 2, 3, 3}));
  EXPECT_LT(max_gram_error(to_vec(conv), 8, 18, 1.0, true), 1e-12);
  // Also through matmul: Q^T Q against the identity.
  EXPECT_TRUE(allclose(matmul(tall.t(), tall), eye(10, std::nullopt, kFloat64), 0, 1e-12));
  // Random: two draws differ, and entries are spread (not a permutation of the identity).
  Tensor other = empty({40, 10}, kFloat64);
  init::orthogonal_(other);
  EXPECT_FALSE(allclose(other, tall));
  EXPECT_LT(to_vec(abs(tall).max())[0], 0.9);
  EXPECT_THAT(error_of([] {
                Tensor v = empty({5});
                init::orthogonal_(v);
              }),
              HasSubstr("orthogonal_: only tensors with 2 or more dimensions are supported, got "
                        "shape [5]"));
}
