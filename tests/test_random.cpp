// Random and range creation: seeded reproducibility (also across thread counts), distribution
// moments within loose statistical bounds (fixed seeds, so the tests are deterministic),
// randperm permutations, in-place fills, arange/linspace/eye values and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <numeric>

#include "ignis/generator.h"
#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

struct Moments {
  double mean = 0, var = 0, skew = 0, kurt = 0, min = 0, max = 0;
};
Moments moments(const Tensor& t) {
  const std::vector<double> v = vals(t);
  Moments m;
  const double n = static_cast<double>(v.size());
  for (double x : v) m.mean += x / n;
  for (double x : v) {
    const double d = x - m.mean;
    m.var += d * d / n;
    m.skew += d * d * d / n;
    m.kurt += d * d * d * d / n;
  }
  m.skew /= std::pow(m.var, 1.5);
  m.kurt /= m.var * m.var;
  m.min = *std::min_element(v.begin(), v.end());
  m.max = *std::max_element(v.begin(), v.end());
  return m;
}

// ---- seeds and streams

TEST(Random, SeedReproducesTheStream) {
  manual_seed(42);
  const Tensor a = rand({100}), b = randn({7, 3});
  manual_seed(42);
  EXPECT_TRUE(equal(rand({100}), a));
  EXPECT_TRUE(equal(randn({7, 3}), b));
  // The stream moves on: the next draw differs.
  EXPECT_FALSE(equal(rand({100}), a));
  manual_seed(43);
  EXPECT_FALSE(equal(rand({100}), a));
}

TEST(Random, DrawsReserveCounters) {
  manual_seed(7);
  Generator& g = default_generator();
  EXPECT_EQ(g.seed(), 7u);
  EXPECT_EQ(g.offset(), 0u);
  rand({3, 4});
  EXPECT_EQ(g.offset(), 12u);
  randn({5});
  EXPECT_EQ(g.offset(), 17u);
  // Restoring the state replays the draw.
  const Tensor x = rand({4});
  g.set_state(7, 17);
  EXPECT_TRUE(equal(rand({4}), x));
  // Element i of a fill is a pure function of counter offset + i.
  manual_seed(9);
  const Tensor whole = rand({10}, kFloat64);
  const std::vector<double> w = vals(whole);
  for (uint64_t i = 0; i < 10; ++i) EXPECT_EQ(w[i], Generator::uniform(9, i));
}

TEST(Random, ThreadCountDoesNotChangeTheStream) {
  ThreadGuard guard;
  const int64_t n = 300000;  // large enough to be split over threads
  set_num_threads(1);
  manual_seed(11);
  const Tensor u1 = rand({n}), z1 = randn({n}), i1 = randint(0, 1000, {n}), d1 = randn({n}, kFloat64);
  set_num_threads(2);
  manual_seed(11);
  const Tensor u2 = rand({n}), z2 = randn({n}), i2 = randint(0, 1000, {n}), d2 = randn({n}, kFloat64);
  EXPECT_TRUE(equal(u1, u2));
  EXPECT_TRUE(equal(z1, z2));
  EXPECT_TRUE(equal(i1, i2));
  EXPECT_TRUE(equal(d1, d2));
}

// ---- distributions (fixed seeds: the bounds are several standard errors wide)

TEST(Random, UniformMoments) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    manual_seed(100);
    const Tensor u = rand({200000}, dt);
    EXPECT_EQ(u.dtype(), dt);
    const Moments m = moments(u);
    EXPECT_NEAR(m.mean, 0.5, 0.005);
    EXPECT_NEAR(m.var, 1.0 / 12, 0.002);
    EXPECT_GE(m.min, 0.0);
    EXPECT_LT(m.max, 1.0);
  }
  manual_seed(101);
  Tensor t = empty({100000});
  t.uniform_(-3, 5);
  const Moments m = moments(t);
  EXPECT_NEAR(m.mean, 1.0, 0.05);
  EXPECT_NEAR(m.var, 64.0 / 12, 0.1);
  EXPECT_GE(m.min, -3.0);
  EXPECT_LT(m.max, 5.0);
}

TEST(Random, NormalMoments) {
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    SCOPED_TRACE(std::string(dtype_name(dt)));
    manual_seed(200);
    const Moments m = moments(randn({200000}, dt));
    EXPECT_NEAR(m.mean, 0.0, 0.01);
    EXPECT_NEAR(m.var, 1.0, 0.02);
    EXPECT_NEAR(m.skew, 0.0, 0.03);
    EXPECT_NEAR(m.kurt, 3.0, 0.08);
    EXPECT_LT(m.min, -3.5);
    EXPECT_GT(m.max, 3.5);
  }
  manual_seed(201);
  Tensor t = empty({100000}, kFloat64);
  t.normal_(2, 0.5);
  const Moments m = moments(t);
  EXPECT_NEAR(m.mean, 2.0, 0.01);
  EXPECT_NEAR(std::sqrt(m.var), 0.5, 0.01);
  // The fraction within one standard deviation is about 68.27%.
  const std::vector<double> v = vals(t);
  const double within = std::count_if(v.begin(), v.end(), [](double x) {
    return std::abs(x - 2.0) < 0.5;
  }) / static_cast<double>(v.size());
  EXPECT_NEAR(within, 0.6827, 0.01);
}

TEST(Random, RandintRangeAndUniformity) {
  manual_seed(300);
  const Tensor r = randint(-3, 4, {70000});
  EXPECT_EQ(r.dtype(), kInt64);
  std::vector<int64_t> counts(7, 0);
  for (double x : vals(r)) {
    ASSERT_GE(x, -3);
    ASSERT_LT(x, 4);
    ++counts[static_cast<size_t>(x + 3)];
  }
  for (int64_t c : counts) EXPECT_NEAR(c, 10000, 500);
  const Tensor r2 = randint(5, {3, 4}, kInt32);
  EXPECT_EQ(r2.dtype(), kInt32);
  EXPECT_EQ(r2.sizes().vec(), (std::vector<int64_t>{3, 4}));
  for (double x : vals(r2)) EXPECT_TRUE(x >= 0 && x < 5);
  const Tensor rf = randint(0, 10, {100}, kFloat32);
  for (double x : vals(rf)) EXPECT_EQ(x, std::floor(x));
  // The full int64 range works.
  const Tensor big = randint(std::numeric_limits<int64_t>::min(),
                             std::numeric_limits<int64_t>::max(), {10});
  EXPECT_EQ(big.numel(), 10);
}

TEST(Random, RandpermIsAPermutation) {
  manual_seed(400);
  for (int64_t n : {0, 1, 2, 10, 1000}) {
    const Tensor p = randperm(n);
    EXPECT_EQ(p.dtype(), kInt64);
    std::vector<double> v = vals(p);
    std::sort(v.begin(), v.end());
    std::vector<double> want(static_cast<size_t>(n));
    std::iota(want.begin(), want.end(), 0.0);
    EXPECT_EQ(v, want);
  }
  manual_seed(401);
  const Tensor a = randperm(50);
  manual_seed(401);
  EXPECT_TRUE(equal(randperm(50), a));
  EXPECT_FALSE(equal(randperm(50), a));
  EXPECT_FALSE(equal(a, arange(50)));  // 1/50! chance of a false failure, and the seed is fixed
  EXPECT_EQ(randperm(5, kInt32).dtype(), kInt32);
  // Every position takes every value about equally often.
  std::vector<int64_t> first(4, 0);
  for (int k = 0; k < 4000; ++k) ++first[static_cast<size_t>(randperm(4)[0].item<int64_t>())];
  for (int64_t c : first) EXPECT_NEAR(c, 1000, 120);
}

TEST(Random, LikeAndOptions) {
  const Tensor x = zeros({2, 3}, kFloat64);
  const Tensor r = rand_like(x);
  EXPECT_EQ(r.dtype(), kFloat64);
  EXPECT_EQ(r.sizes().vec(), (std::vector<int64_t>{2, 3}));
  EXPECT_EQ(randn_like(x, kFloat32).dtype(), kFloat32);
  const Tensor g = randn({3}, TensorOptions().requires_grad(true));
  EXPECT_TRUE(g.requires_grad());
  EXPECT_TRUE(g.is_leaf());
  EXPECT_EQ(rand({0, 4}).numel(), 0);
}

TEST(Random, InPlaceFills) {
  // A strided view is filled in its own row-major order.
  manual_seed(500);
  Tensor base = zeros({3, 4});
  Tensor view = base.t();
  const uint32_t v0 = base._version();
  view.uniform_(0, 1);
  EXPECT_GT(base._version(), v0);
  manual_seed(500);
  EXPECT_TRUE(equal(view, rand({4, 3})));
  // A leaf that requires grad: refused unless under NoGradGuard.
  Tensor w = zeros({3}).requires_grad_();
  EXPECT_THAT(error_of([&] { w.uniform_(-1, 1); }), HasSubstr("uniform_: a leaf tensor"));
  EXPECT_THAT(error_of([&] { w.normal_(); }), HasSubstr("normal_: a leaf tensor"));
  {
    NoGradGuard ng;
    w.normal_(0, 0.1);
  }
  EXPECT_TRUE(w.requires_grad());
  const std::vector<double> wv = vals(w);
  EXPECT_TRUE(std::any_of(wv.begin(), wv.end(), [](double x) { return x != 0; }));
  EXPECT_TRUE(std::all_of(wv.begin(), wv.end(), [](double x) { return std::abs(x) < 1; }));
  // uniform_(a, a) gives a.
  Tensor c = empty({5});
  c.uniform_(2, 2);
  EXPECT_TRUE(equal(c, full({5}, 2.0)));
}

TEST(Random, Errors) {
  EXPECT_THAT(error_of([] { rand({2}, kInt64); }),
              HasSubstr("rand: expected a floating point dtype, but got int64"));
  EXPECT_THAT(error_of([] { randn({2}, kInt32); }),
              HasSubstr("randn: expected a floating point dtype, but got int32"));
  EXPECT_THAT(error_of([] { randint(5, 5, {2}); }),
              HasSubstr("randint: expected low < high, but got low=5 and high=5"));
  EXPECT_THAT(error_of([] { randint(0, 300, {2}, kUInt8); }),
              HasSubstr("randint: the range [0, 300) does not fit in dtype uint8"));
  EXPECT_THAT(error_of([] { randperm(-1); }),
              HasSubstr("randperm: n must be non-negative, but got n=-1"));
  EXPECT_THAT(error_of([] { randperm(300, kUInt8); }), HasSubstr("too large for dtype uint8"));
  EXPECT_THAT(error_of([] { zeros({2}).uniform_(1, 0); }),
              HasSubstr("uniform_: expected from <= to, but got from=1 > to=0"));
  EXPECT_THAT(error_of([] { zeros({2}).normal_(0, -1); }),
              HasSubstr("normal_: expected std >= 0, but got std=-1"));
  EXPECT_THAT(error_of([] { zeros({2}, kInt64).uniform_(); }),
              HasSubstr("uniform_: expected a floating point dtype, but got int64"));
}

// ---- ranges

TEST(Range, Arange) {
  const Tensor a = arange(5);
  EXPECT_EQ(a.dtype(), kInt64);
  EXPECT_TRUE(equal(a, tensor({0, 1, 2, 3, 4})));
  const Tensor f = arange(1, 2.5, 0.5);
  EXPECT_EQ(f.dtype(), kFloat32);
  EXPECT_TRUE(equal(f, tensor({1.0, 1.5, 2.0})));
  EXPECT_TRUE(equal(arange(10, 0, -3), tensor({10, 7, 4, 1})));
  EXPECT_TRUE(equal(arange(1.0, -1.0, -0.5), tensor({1.0, 0.5, 0.0, -0.5})));
  EXPECT_EQ(arange(0, 1, 0.1).numel(), 10);
  EXPECT_EQ(arange(3, 3).numel(), 0);
  EXPECT_EQ(arange(5, kFloat64).dtype(), kFloat64);
  EXPECT_TRUE(equal(arange(0, 2.5, 0.5, kInt64), tensor({0, 0, 1, 1, 2})));
  EXPECT_TRUE(equal(arange(-7, 7, 5), tensor({-7, -2, 3})));
  const std::vector<double> v = vals(arange(0, 100, 0.25, kFloat64));
  for (size_t i = 0; i < v.size(); ++i) ASSERT_EQ(v[i], 0.25 * static_cast<double>(i));
}

TEST(Range, ArangeErrors) {
  EXPECT_THAT(error_of([] { arange(0, 5, 0); }), HasSubstr("arange: step must be nonzero"));
  EXPECT_THAT(error_of([] { arange(0, 5, -1); }),
              HasSubstr("arange: upper bound and lower bound inconsistent with step sign"));
  EXPECT_THAT(error_of([] { arange(5, 0, 1); }),
              HasSubstr("inconsistent with step sign (start=5, end=0, step=1)"));
  EXPECT_THAT(error_of([] { arange(0, std::numeric_limits<double>::infinity()); }),
              HasSubstr("arange: unsupported range"));
}

TEST(Range, Linspace) {
  EXPECT_TRUE(equal(linspace(0, 1, 5), tensor({0.0, 0.25, 0.5, 0.75, 1.0})));
  EXPECT_TRUE(equal(linspace(3, 7, 1), tensor({3.0})));
  EXPECT_EQ(linspace(0, 1, 0).numel(), 0);
  const std::vector<double> v = vals(linspace(-1.3, 2.7, 7, kFloat64));
  EXPECT_EQ(v.front(), -1.3);
  EXPECT_EQ(v.back(), 2.7);
  for (size_t i = 0; i < v.size(); ++i) EXPECT_NEAR(v[i], -1.3 + 4.0 / 6 * i, 1e-15);
  EXPECT_TRUE(equal(linspace(0, 10, 4, kInt64), tensor({0, 3, 6, 10})));
  EXPECT_TRUE(equal(linspace(1, 0, 3), tensor({1.0, 0.5, 0.0})));
  EXPECT_THAT(error_of([] { linspace(0, 1, -1); }),
              HasSubstr("linspace: number of steps must be non-negative, but got -1"));
}

TEST(Range, Eye) {
  EXPECT_TRUE(equal(eye(3), tensor({{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}, {0.0, 0.0, 1.0}})));
  EXPECT_TRUE(equal(eye(2, 3), tensor({{1.0, 0.0, 0.0}, {0.0, 1.0, 0.0}})));
  EXPECT_TRUE(equal(eye(3, 2, kInt64), tensor({{1, 0}, {0, 1}, {0, 0}})));
  EXPECT_EQ(eye(0).sizes().vec(), (std::vector<int64_t>{0, 0}));
  EXPECT_EQ(eye(2, std::nullopt, kBool).dtype(), kBool);
  EXPECT_THAT(error_of([] { eye(-1); }), HasSubstr("eye: n must be greater or equal to 0"));
  EXPECT_THAT(error_of([] { eye(2, -3); }), HasSubstr("eye: m must be greater or equal to 0"));
}

}  // namespace
}  // namespace ignis
