// Linear algebra beyond the op table: error messages, large float32 products against a float64
// reference, odd layouts (packed, expanded, transposed), integer and bfloat16 products,
// gradients with broadcast batch dims, and independence from the thread count.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

// Restores the thread count a test changed.
struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

// max |got - want| / (sum_k |a_ik| |b_kj|): the error relative to the size of the terms summed.
double rel_error(const Tensor& got, const Tensor& a, const Tensor& b) {
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
  const std::vector<double> want = vals(matmul(a64, b64));
  const std::vector<double> scale = vals(matmul(abs(a64), abs(b64)));
  const std::vector<double> g = vals(got);
  double worst = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    worst = std::max(worst, std::abs(g[i] - want[i]) / std::max(scale[i], 1e-30));
  }
  return worst;
}

// A naive float64 product of 2-D tensors (independent of the kernels under test).
std::vector<double> naive(const Tensor& a, const Tensor& b) {
  const std::vector<double> av = vals(a), bv = vals(b);
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  std::vector<double> c(static_cast<size_t>(M * N), 0.0);
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t k = 0; k < K; ++k) {
      for (int64_t j = 0; j < N; ++j) c[i * N + j] += av[i * K + k] * bv[k * N + j];
    }
  }
  return c;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want,
                     double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) ASSERT_NEAR(got[i], want[i], tol) << "element " << i;
}

// ---- error messages

TEST(LinalgErrors, ShapeMismatch) {
  EXPECT_EQ(error_of([] { matmul(ones({2, 3}), ones({4, 5})); }),
            "matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { mm(ones({2, 3}), ones({4, 5})); }),
            "mm: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { matmul(ones({3}), ones({4})); }),
            "matmul: shapes [3] and [4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { matmul(ones({2, 3}), ones({4})); }),
            "matmul: shapes [2, 3] and [4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { matmul(ones({7, 2, 3}), ones({5, 4, 2})); }),
            "matmul: shapes [7, 2, 3] and [5, 4, 2] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { dot(ones({3}), ones({4})); }),
            "dot: shapes [3] and [4] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { bmm(ones({2, 2, 3}), ones({2, 4, 5})); }),
            "bmm: shapes [2, 2, 3] and [2, 4, 5] cannot be multiplied (3 != 4)");
  EXPECT_EQ(error_of([] { linear(ones({2, 3}), ones({5, 4})); }),
            "linear: input of shape [2, 3] and weight of shape [5, 4] cannot be multiplied "
            "(3 != 4)");
}

TEST(LinalgErrors, RanksBatchesAndDtypes) {
  EXPECT_THAT(error_of([] { matmul(ones({}), ones({3})); }),
              HasSubstr("matmul: both arguments need to be at least 1-D, but they are 0-D and 1-D"));
  EXPECT_THAT(error_of([] { mm(ones({2, 3, 4}), ones({4, 5})); }),
              HasSubstr("mm: expected 2-D tensors, but got 3-D and 2-D tensors"));
  EXPECT_THAT(error_of([] { bmm(ones({2, 3, 4}), ones({3, 4, 5})); }),
              HasSubstr("bmm: expected equal batch sizes, but got shapes [2, 3, 4] and [3, 4, 5]"));
  EXPECT_THAT(error_of([] { matmul(ones({2, 3, 4}), ones({3, 4, 5})); }),
              HasSubstr("matmul: batch dimensions of shapes [2, 3, 4] and [3, 4, 5] cannot be "
                        "broadcast"));
  EXPECT_THAT(error_of([] { matmul(ones({2, 3}), ones({3, 2}, kFloat64)); }),
              HasSubstr("matmul: expected both tensors to have the same dtype, but got float32 "
                        "and float64"));
  EXPECT_THAT(error_of([] { mm(ones({2, 2}, kBool), ones({2, 2}, kBool)); }),
              HasSubstr("mm: not implemented for bool tensors"));
  EXPECT_THAT(error_of([] { dot(ones({2, 2}), ones({2})); }),
              HasSubstr("dot: expected 1-D tensors, but got 2-D and 1-D tensors"));
  EXPECT_THAT(error_of([] { outer(ones({2, 2}), ones({2})); }),
              HasSubstr("outer: expected 1-D tensors"));
  EXPECT_THAT(error_of([] { addmm(ones({3}), ones({2, 3}), ones({3, 4})); }),
              HasSubstr("addmm: self of shape [3] cannot be broadcast to the product's shape "
                        "[2, 4]"));
  EXPECT_THAT(error_of([] { linear(ones({2, 3}), ones({3})); }),
              HasSubstr("linear: expected a 2-D weight"));
  EXPECT_THAT(error_of([] { linear(ones({2, 3}), ones({4, 3}), ones({5})); }),
              HasSubstr("linear: bias of shape [5] does not match out_features = 4"));
}

TEST(LinalgErrors, LinearReluNamesItself) {
  EXPECT_EQ(error_of([] { linear_relu(ones({2, 3}), ones({5, 4})); }),
            "linear_relu: input of shape [2, 3] and weight of shape [5, 4] cannot be multiplied "
            "(3 != 4)");
  EXPECT_THAT(error_of([] { linear_relu(ones({2, 3}), ones({3})); }),
              HasSubstr("linear_relu: expected a 2-D weight"));
  EXPECT_THAT(error_of([] { linear_relu(ones({2, 3}), ones({4, 3}), ones({5})); }),
              HasSubstr("linear_relu: bias of shape [5] does not match out_features = 4"));
  EXPECT_THAT(error_of([] { linear_relu(ones({2, 3}), ones({4, 3}), ones({4}, kFloat64)); }),
              HasSubstr("linear_relu: expected the bias to have the dtype and device of the input"));
  EXPECT_THAT(error_of([] { linear_relu(ones({2, 3}), ones({4, 3}, kFloat64)); }),
              HasSubstr("linear_relu: expected both tensors to have the same dtype"));
}

TEST(LinalgErrors, BinaryCrossEntropy) {
  EXPECT_EQ(error_of([] { binary_cross_entropy_with_logits(ones({3}), ones({2})); }),
            "binary_cross_entropy_with_logits: target size [2] must be the same as input size "
            "[3]");
  EXPECT_EQ(error_of([] {
              binary_cross_entropy_with_logits(ones({3}), ones({3}), Tensor(), Tensor(), "avg");
            }),
            "binary_cross_entropy_with_logits: invalid reduction 'avg' (expected 'none', 'mean' "
            "or 'sum')");
}

// ---- float32 products against float64

TEST(Linalg, LargeSgemmMatchesFloat64) {
  manual_seed(1);
  const Tensor a = randn({300, 257}), b = randn({257, 301});
  EXPECT_LT(rel_error(matmul(a, b), a, b), 1e-5);
  // Transposed views are read in place ('T' operands).
  const Tensor at = randn({257, 300}), bt = randn({301, 257});
  EXPECT_LT(rel_error(matmul(at.t(), bt.t()), at.t(), bt.t()), 1e-5);
  // The float64 reference itself against a naive loop.
  const Tensor a64 = a.to(kFloat64), b64 = b.to(kFloat64);
  expect_near_all(vals(matmul(a64, b64)), naive(a64, b64), 1e-9);
}

TEST(Linalg, OddLayoutsArePacked) {
  manual_seed(2);
  // Neither rows nor columns contiguous: a strided slice in both dims.
  const Tensor big = randn({20, 24});
  const Tensor a = big.slice(0, 0, std::nullopt, 2).slice(1, 0, std::nullopt, 3);  // [10, 8]
  const Tensor b = randn({8, 6});
  EXPECT_FALSE(a.is_contiguous());
  expect_near_all(vals(matmul(a, b)), naive(a, b), 1e-4);
  // Stride-0 rows (an expanded operand).
  const Tensor row = randn({1, 8}).expand({5, 8});
  expect_near_all(vals(matmul(row, b)), naive(row, b), 1e-4);
  // Expanded batch: bmm with a batch stride of 0.
  const Tensor m = randn({1, 3, 8}).expand({4, 3, 8});
  const Tensor bb = randn({4, 8, 6});
  const Tensor r = bmm(m, bb);
  for (int64_t i = 0; i < 4; ++i) expect_near_all(vals(r[i]), naive(m[i], bb[i]), 1e-4);
}

TEST(Linalg, SkinnyAndBatchedShapes) {
  manual_seed(3);
  // The inference MLP layer: one row against a transposed weight, plus bias.
  const Tensor x = randn({1, 512}), w = randn({256, 512}), bias = randn({256});
  const std::vector<double> y = vals(linear(x, w, bias));
  std::vector<double> want = naive(x, w.t());
  const std::vector<double> bv = vals(bias);
  for (size_t j = 0; j < want.size(); ++j) want[j] += bv[j];
  expect_near_all(y, want, 1e-3);
  // Many small products run in parallel over the batch.
  const Tensor a = randn({64, 5, 7}), b = randn({7, 3});
  const Tensor r = matmul(a, b);
  ASSERT_EQ(r.sizes().vec(), (std::vector<int64_t>{64, 5, 3}));
  for (int64_t i = 0; i < 64; i += 9) expect_near_all(vals(r[i]), naive(a[i], b), 1e-4);
  // Broadcast batch dims on both sides, not foldable: [2, 1, 3, 4] @ [1, 5, 4, 2].
  const Tensor p = randn({2, 1, 3, 4}), q = randn({1, 5, 4, 2});
  const Tensor pq = matmul(p, q);
  ASSERT_EQ(pq.sizes().vec(), (std::vector<int64_t>{2, 5, 3, 2}));
  expect_near_all(vals(pq[1][3]), naive(p[1][0], q[0][3]), 1e-4);
}

TEST(Linalg, IntegerProducts) {
  const Tensor a = tensor({{1, 2, 3}, {4, 5, 6}});
  const Tensor b = tensor({{7, 8}, {9, 10}, {11, 12}});
  const Tensor c = matmul(a, b);
  EXPECT_EQ(c.dtype(), kInt64);
  EXPECT_TRUE(equal(c, tensor({{58, 64}, {139, 154}})));
  const Tensor c32 = matmul(a.to(kInt32), b.to(kInt32));
  EXPECT_EQ(c32.dtype(), kInt32);
  EXPECT_TRUE(equal(c32, tensor({{58, 64}, {139, 154}}, kInt32)));
  EXPECT_EQ(dot(tensor({1, 2, 3}), tensor({4, 5, 6})).item<int64_t>(), 32);
  EXPECT_TRUE(equal(addmm(tensor({1, 1}), a, b, 2, 3), tensor({{176, 194}, {419, 464}})));
  // Transposed integer operand (packed by the loop kernel).
  EXPECT_TRUE(equal(matmul(b.t(), a.t()), tensor({{58, 139}, {64, 154}})));
}

TEST(Linalg, BFloat16) {
  manual_seed(4);
  const Tensor a = randn({17, 33}), b = randn({33, 9});
  const Tensor ab = a.to(kBFloat16), bb = b.to(kBFloat16);
  const Tensor r = matmul(ab, bb);
  EXPECT_EQ(r.dtype(), kBFloat16);
  const std::vector<double> want = naive(ab.to(kFloat64), bb.to(kFloat64));
  const std::vector<double> got = vals(r);
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], 1e-2 * std::abs(want[i]) + 1e-2) << i;
  }
  const Tensor bias = randn({9}).to(kBFloat16);
  EXPECT_EQ(addmm(bias, ab, bb).dtype(), kBFloat16);
}

TEST(Linalg, AddmmScalesAndIgnoresSelfWhenBetaIsZero) {
  const Tensor self = full({2, 2}, std::numeric_limits<double>::quiet_NaN());
  const Tensor r = addmm(self, eye(2), tensor({{1.0, 2.0}, {3.0, 4.0}}), 0, 2);
  EXPECT_TRUE(equal(r, tensor({{2.0, 4.0}, {6.0, 8.0}})));
  const Tensor r2 = addmm(tensor({10.0, 20.0}), eye(2), tensor({{1.0, 2.0}, {3.0, 4.0}}), 0.5, -1);
  EXPECT_TRUE(equal(r2, tensor({{4.0, 8.0}, {2.0, 6.0}})));
  // Large enough for the float64 kernel's register tiles (and their edges), beta and alpha.
  manual_seed(8);
  const Tensor s = randn({70}, kFloat64), m1 = randn({9, 20}, kFloat64);
  const Tensor m2 = randn({70, 20}, kFloat64).t();
  std::vector<double> want = naive(m1, m2);
  const std::vector<double> sv = vals(s);
  for (size_t i = 0; i < want.size(); ++i) want[i] = 0.5 * sv[i % 70] - 2 * want[i];
  expect_near_all(vals(addmm(s, m1, m2, 0.5, -2)), want, 1e-12);
}

TEST(Linalg, EmptyProducts) {
  EXPECT_TRUE(equal(matmul(ones({3, 0}), ones({0, 2})), zeros({3, 2})));
  EXPECT_EQ(matmul(ones({0, 3}), ones({3, 2})).sizes().vec(), (std::vector<int64_t>{0, 2}));
  EXPECT_EQ(dot(ones({0}), ones({0})).item<double>(), 0.0);
  EXPECT_TRUE(equal(addmm(ones({2}), ones({3, 0}), ones({0, 2})), ones({3, 2})));
}

TEST(Linalg, TensorMethods) {
  const Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}});
  const Tensor v = tensor({1.0, -1.0});
  EXPECT_TRUE(equal(a.matmul(v), tensor({-1.0, -1.0})));
  EXPECT_TRUE(equal(a.mm(a), tensor({{7.0, 10.0}, {15.0, 22.0}})));
  EXPECT_TRUE(equal(a.unsqueeze(0).bmm(a.unsqueeze(0))[0], a.mm(a)));
  EXPECT_EQ(v.dot(v).item<double>(), 2.0);
  EXPECT_TRUE(equal(v.outer(tensor({2.0, 3.0})), tensor({{2.0, 3.0}, {-2.0, -3.0}})));
}

// ---- gradients

TEST(LinalgGrad, BroadcastBatchGradientIsSummed) {
  manual_seed(5);
  const Tensor a = randn({3, 4}, kFloat64).requires_grad_();
  const Tensor b = randn({2, 4, 5}, kFloat64).requires_grad_();
  matmul(a, b).sum().backward();
  ASSERT_EQ(a.grad().sizes().vec(), (std::vector<int64_t>{3, 4}));
  // d/da sum(a @ b_i) = sum_i ones @ b_i^T.
  const Tensor want_a = matmul(ones({3, 5}, kFloat64), b.detach().sum({0}).t());
  EXPECT_TRUE(allclose(a.grad(), want_a, 1e-12, 1e-12));
  const Tensor want_b = matmul(a.detach().t(), ones({3, 5}, kFloat64)).expand({2, 4, 5});
  EXPECT_TRUE(allclose(b.grad(), want_b, 1e-12, 1e-12));
}

TEST(LinalgGrad, LinearWeightAndBias) {
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}});
  const Tensor w = tensor({{1.0, 0.0}, {0.0, 1.0}, {1.0, 1.0}}).requires_grad_();
  const Tensor b = zeros({3}).requires_grad_();
  linear(x, w, b).sum().backward();
  // dL/dw = ones^T @ x (each output row sums the inputs), dL/db = number of rows.
  EXPECT_TRUE(equal(w.grad(), tensor({{9.0, 12.0}, {9.0, 12.0}, {9.0, 12.0}})));
  EXPECT_TRUE(equal(b.grad(), full({3}, 3.0)));
}

TEST(LinalgGrad, BceGradientAtZeroLogits) {
  // d/dx at x = 0 is sigmoid(0) - t, which the relu/abs subgradients alone would get wrong.
  const Tensor x = zeros({3}, kFloat64).requires_grad_();
  const Tensor t = tensor({0.0, 1.0, 0.25}, kFloat64);
  binary_cross_entropy_with_logits(x, t, Tensor(), Tensor(), "sum").backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({0.5, -0.5, 0.25}, kFloat64), 1e-12, 1e-12));
}

TEST(LinalgGrad, BceIsStableForLargeLogits) {
  const Tensor x = tensor({100.0, -100.0, 0.0});
  const Tensor t = tensor({0.0, 1.0, 1.0});
  const std::vector<double> l =
      vals(binary_cross_entropy_with_logits(x, t, Tensor(), Tensor(), "none"));
  EXPECT_NEAR(l[0], 100.0, 1e-4);
  EXPECT_NEAR(l[1], 100.0, 1e-4);
  EXPECT_NEAR(l[2], std::log(2.0), 1e-6);
  const Tensor pw = tensor({3.0});
  const Tensor lw = binary_cross_entropy_with_logits(x, t, Tensor(), pw, "mean");
  EXPECT_NEAR(lw.item<double>(), (100.0 + 300.0 + 3 * std::log(2.0)) / 3, 1e-3);
}

// ---- threads

TEST(LinalgThreads, ResultsDoNotDependOnTheThreadCount) {
  ThreadGuard guard;
  manual_seed(6);
  const Tensor a = randn({160, 130}, kFloat64), b = randn({130, 170}, kFloat64);
  const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32);
  const Tensor ba = randn({40, 6, 7}), bb = randn({40, 7, 5});
  set_num_threads(1);
  EXPECT_EQ(get_num_threads(), 1);
  const Tensor r1 = matmul(a, b), s1 = matmul(a32, b32), t1 = bmm(ba, bb);
  set_num_threads(2);
  EXPECT_EQ(get_num_threads(), 2);
  const Tensor r2 = matmul(a, b), s2 = matmul(a32, b32), t2 = bmm(ba, bb);
  // The float64 kernel gives every element to one thread in a fixed order: bit-identical.
  EXPECT_TRUE(equal(r1, r2));
  // oneDNN may split sums differently; the results agree to float32 rounding.
  EXPECT_TRUE(allclose(s1, s2, 1e-5, 1e-5));
  EXPECT_TRUE(allclose(t1, t2, 1e-5, 1e-5));
  EXPECT_THAT(error_of([] { set_num_threads(0); }), HasSubstr("set_num_threads: expected a "
                                                              "positive number of threads"));
}

}  // namespace
}  // namespace ignis
