// Every layer of ignis/nn/layers.h and its nn::functional form against float64 hand
// computations: Linear, Identity, Flatten, Unflatten, activations, Softmax, LogSoftmax, Dropout,
// Embedding, LayerNorm, RMSNorm; float64 gradchecks; error messages.
#include <cmath>
#include <sstream>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::expect_values;
using ignis::testing_util::to_vec;
using ::testing::HasSubstr;

TEST(Linear, ComputesXWTransposePlusBAgainstFloat64) {
  nn::Linear lin(3, 2);
  EXPECT_EQ(lin.weight.sizes().shape(), Shape({2, 3}));
  EXPECT_EQ(lin.bias.sizes().shape(), Shape({2}));
  {
    NoGradGuard ng;
    lin.weight.copy_(tensor({{1.0, -2.0, 0.5}, {0.0, 3.0, -1.0}}));
    lin.bias.copy_(tensor({0.25, -0.5}));
  }
  // A batch of 2 x 2 rows (the leading dims are kept).
  Tensor x =
      tensor({1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 0.0, 0.0, 0.0, 2.0, -2.0, 1.0}).reshape({2, 2, 3});
  Tensor y = lin(x);
  EXPECT_EQ(y.sizes().shape(), Shape({2, 2, 2}));
  const double w[2][3] = {{1, -2, 0.5}, {0, 3, -1}};
  const double b[2] = {0.25, -0.5};
  const std::vector<double> xv = to_vec(x);
  std::vector<double> want;
  for (int r = 0; r < 4; ++r) {
    for (int o = 0; o < 2; ++o) {
      double acc = b[o];
      for (int i = 0; i < 3; ++i) acc += xv[r * 3 + i] * w[o][i];
      want.push_back(acc);
    }
  }
  expect_values(y, want, 1e-5);
  expect_values(nn::functional::linear(x, lin.weight, lin.bias), want, 1e-5);
  // Without bias.
  nn::Linear nb(3, 2, false);
  EXPECT_FALSE(nb.bias.defined());
  EXPECT_EQ(nb.named_parameters().size(), 1u);
  {
    NoGradGuard ng;
    nb.weight.copy_(lin.weight);
  }
  std::vector<double> want_nb = want;
  for (size_t i = 0; i < want_nb.size(); ++i) want_nb[i] -= b[i % 2];
  expect_values(nb(x), want_nb, 1e-5);

  EXPECT_THAT(error_of([&] {
                lin(ones({2, 4}));
              }),
              HasSubstr("Linear: input of shape [2, 4] does not end in in_features=3"));
  EXPECT_THAT(error_of([&] { nn::Linear(0, 3); }),
              HasSubstr("Linear: in_features and out_features must be positive, got 0 and 3"));
}

TEST(Linear, DefaultInitIsUniformWithinOneOverSqrtFanIn) {
  manual_seed(11);
  nn::Linear lin(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  const std::vector<double> w = to_vec(lin.weight);
  double lo = 1, hi = -1, mean = 0, sq = 0;
  for (double v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    mean += v;
    sq += v * v;
  }
  mean /= static_cast<double>(w.size());
  const double var = sq / static_cast<double>(w.size()) - mean * mean;
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  // 120000 samples of U(-b, b): the extremes come close to the bound, the variance is b^2/3.
  EXPECT_LT(lo, -0.999 * bound);
  EXPECT_GT(hi, 0.999 * bound);
  EXPECT_NEAR(mean, 0.0, 5 * bound / std::sqrt(3.0 * 120000));
  EXPECT_NEAR(var, bound * bound / 3, 0.02 * bound * bound / 3);
  for (double v : to_vec(lin.bias)) {
    EXPECT_GE(v, -bound);
    EXPECT_LE(v, bound);
  }
}

TEST(Layers, IdentityFlattenUnflatten) {
  Tensor x = arange(24).to(kFloat32).reshape({2, 3, 4});
  nn::Identity id;
  EXPECT_TRUE(id(x).is_same(x));
  EXPECT_EQ(nn::Flatten()(x).sizes().shape(), Shape({2, 12}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).sizes().shape(), Shape({6, 4}));
  EXPECT_EQ(nn::Flatten(0)(x).sizes().shape(), Shape({24}));
  expect_values(nn::Flatten()(x), to_vec(x));  // row-major order is kept
  Tensor u = nn::Unflatten(1, {2, 6})(x.flatten(1));
  EXPECT_EQ(u.sizes().shape(), Shape({2, 2, 6}));
  expect_values(u, to_vec(x));
  EXPECT_EQ(nn::Unflatten(-1, {2, 2})(x).sizes().shape(), Shape({2, 3, 2, 2}));
  EXPECT_THAT(error_of([&] { nn::Unflatten(1, {5, 2})(x); }), HasSubstr("unflatten"));
  std::ostringstream os;
  os << nn::Unflatten(1, {2, 2});
  EXPECT_EQ(os.str(), "Unflatten(dim=1, unflattened_size=[2, 2])");
}

namespace {
// Applies `m` and its functional form to float64 inputs and compares with `ref` per element.
void check_activation(nn::Module& m, const std::function<Tensor(const Tensor&)>& functional,
                      const std::function<double(double)>& ref, double tol,
                      const std::string& what) {
  const std::vector<double> xs = {-20.0, -3.5, -1.0, -0.25, 0.0, 1e-3, 0.5, 1.0, 2.75, 20.0};
  for (DType dt : {kFloat64, kFloat32}) {
    Tensor x = tensor(xs, dt);
    std::vector<double> want;
    // The reference at the input as stored (0.001 is not a float32 number).
    for (double v : to_vec(x)) want.push_back(ref(v));
    const double t = dt == kFloat64 ? 1e-12 : tol;
    expect_values(m(x), want, t, t, what + " module");
    expect_values(functional(x), want, t, t, what + " functional");
    EXPECT_EQ(m(x).dtype(), dt);
  }
}
}  // namespace

TEST(Layers, ActivationsMatchTheirFormulas) {
  namespace F = nn::functional;
  nn::ReLU relu;
  check_activation(
      relu, [](const Tensor& x) { return F::relu(x); }, [](double v) { return v > 0 ? v : 0.0; }, 0,
      "relu");
  nn::LeakyReLU leaky(0.2);
  check_activation(
      leaky, [](const Tensor& x) { return F::leaky_relu(x, 0.2); },
      [](double v) { return v > 0 ? v : 0.2 * v; }, 1e-7, "leaky_relu");
  nn::LeakyReLU leaky_default;
  check_activation(
      leaky_default, [](const Tensor& x) { return F::leaky_relu(x); },
      [](double v) { return v > 0 ? v : 0.01 * v; }, 1e-7, "leaky_relu default");
  nn::GELU gelu;
  check_activation(
      gelu, [](const Tensor& x) { return F::gelu(x); },
      [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, 1e-6, "gelu");
  nn::GELU gelu_tanh("tanh");
  check_activation(
      gelu_tanh, [](const Tensor& x) { return F::gelu(x, "tanh"); },
      [](double v) {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
      },
      1e-6, "gelu tanh");
  nn::SiLU silu;
  check_activation(
      silu, F::silu, [](double v) { return v / (1 + std::exp(-v)); }, 1e-6, "silu");
  nn::Sigmoid sigmoid;
  check_activation(
      sigmoid, F::sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-6, "sigmoid");
  nn::Tanh tanh_m;
  check_activation(
      tanh_m, F::tanh, [](double v) { return std::tanh(v); }, 1e-6, "tanh");
  check_activation(
      relu, [](const Tensor& x) { return F::relu(x); }, [](double v) { return std::max(v, 0.0); },
      0, "relu functional");
  expect_values(F::softplus(tensor({-2.0, 0.0, 3.0, 30.0}, kFloat64)),
                {std::log1p(std::exp(-2.0)), std::log(2.0), std::log1p(std::exp(3.0)), 30.0},
                1e-12);
  std::ostringstream os;
  os << leaky << " " << gelu_tanh;
  EXPECT_EQ(os.str(), "LeakyReLU(negative_slope=0.2) GELU(approximate='tanh')");
}

TEST(Layers, SoftmaxAndLogSoftmaxAgainstFloat64) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {-1.0, 0.0, 1000.0}}, kFloat64);
  std::vector<double> sm, lsm, sm0;
  const std::vector<double> xv = to_vec(x);
  for (int r = 0; r < 2; ++r) {
    double mx = -1e300, z = 0;
    for (int c = 0; c < 3; ++c) mx = std::max(mx, xv[r * 3 + c]);
    for (int c = 0; c < 3; ++c) z += std::exp(xv[r * 3 + c] - mx);
    for (int c = 0; c < 3; ++c) {
      sm.push_back(std::exp(xv[r * 3 + c] - mx) / z);
      lsm.push_back(xv[r * 3 + c] - mx - std::log(z));
    }
  }
  nn::Softmax softmax(1);
  nn::LogSoftmax log_softmax(-1);
  expect_values(softmax(x), sm, 1e-12);
  expect_values(log_softmax(x), lsm, 1e-12);
  expect_values(nn::functional::softmax(x, 1), sm, 1e-12);
  expect_values(nn::functional::log_softmax(x, 1), lsm, 1e-12);
  // dim 0 of a [2, 2] input: each column sums to 1.
  Tensor c = nn::Softmax(0)(tensor({{0.0, 1.0}, {std::log(3.0), 1.0}}, kFloat64));
  expect_values(c, {0.25, 0.5, 0.75, 0.5}, 1e-12);
  // float32 with a large logit stays finite.
  expect_values(nn::LogSoftmax(1)(x.to(kFloat32)), lsm, 1e-4);
}

TEST(Dropout, ZeroesAndScalesInTrainingIsIdentityInEval) {
  nn::Dropout d(0.3);
  Tensor x = ones({20000}).requires_grad_();
  manual_seed(123);
  Tensor y = d(x);
  const std::vector<double> yv = to_vec(y);
  int64_t kept = 0;
  for (double v : yv) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(static_cast<float>(v), static_cast<float>(1.0 / 0.7));
    }
  }
  // Binomial(20000, 0.7): sd 65, so 5 sd is 0.016 of the rate.
  EXPECT_NEAR(kept / 20000.0, 0.7, 0.016);
  // The gradient is the same mask and scale.
  y.sum().backward();
  EXPECT_EQ(to_vec(x.grad()), yv);
  // Seeded: the same seed gives the same mask; the next draw a different one.
  manual_seed(123);
  Tensor y2 = d(x.detach());
  EXPECT_TRUE(equal(y2, y.detach()));
  EXPECT_FALSE(equal(d(x.detach()), y2));
  // Eval and p = 0 return the input itself; p = 1 zeroes everything.
  d.eval();
  EXPECT_TRUE(equal(d(x), x));
  EXPECT_TRUE(nn::Dropout(0.0)(x).is_same(x));
  for (double v : to_vec(nn::Dropout(1.0)(x))) EXPECT_EQ(v, 0.0);
  EXPECT_TRUE(nn::functional::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_THAT(error_of([] { nn::Dropout(1.5); }),
              HasSubstr("Dropout: probability has to be between 0 and 1, but got 1.5"));
  EXPECT_THAT(error_of([&] { nn::functional::dropout(x, -0.1); }),
              HasSubstr("dropout: probability has to be between 0 and 1, but got -0.1"));
}

TEST(Embedding, LooksUpRowsAndHonoursPaddingIdx) {
  nn::Embedding emb(5, 3, /*padding_idx=*/1);
  EXPECT_EQ(emb.weight.sizes().shape(), Shape({5, 3}));
  for (double v : to_vec(emb.weight.select(0, 1))) EXPECT_EQ(v, 0.0);  // padding row zeroed
  {
    NoGradGuard ng;
    emb.weight.copy_(arange(15).to(kFloat32).reshape({5, 3}));
  }
  Tensor idx = tensor({{4, 1}, {0, 4}});
  Tensor y = emb(idx);
  EXPECT_EQ(y.sizes().shape(), Shape({2, 2, 3}));
  // The padding row's output is the weight's padding row (as in PyTorch: a pretrained padding
  // vector is kept); it gets no gradient.
  expect_values(y, {12, 13, 14, 3, 4, 5, 0, 1, 2, 12, 13, 14});
  y.sum().backward();
  // Row 4 was used twice, row 0 once, the padding row gets no gradient.
  expect_values(emb.weight.grad(), {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2});
  // int32 indices work too; negative padding_idx counts from the end.
  nn::Embedding e2(4, 2, -1);
  EXPECT_THAT(e2.extra_repr(), HasSubstr("padding_idx=3"));
  EXPECT_EQ(e2(tensor({0, 3}).to(kInt32)).sizes().shape(), Shape({2, 2}));
  // functional form without padding.
  Tensor w = tensor({{1.0, 2.0}, {3.0, 4.0}});
  expect_values(nn::functional::embedding(tensor({1, 1, 0}), w), {3, 4, 3, 4, 1, 2});

  EXPECT_THAT(error_of([&] {
                emb(tensor({0, 5}));
              }),
              HasSubstr("embedding: index_select: index 5 is out of bounds for dimension 0 with "
                        "size 5 (num_embeddings = 5)"));
  EXPECT_THAT(error_of([&] { emb(tensor({2.0})); }),
              HasSubstr("embedding: indices must be int64 or int32, got float32"));
  EXPECT_THAT(error_of([&] { nn::functional::embedding(tensor({0}), ones({3})); }),
              HasSubstr("embedding: weight must be 2-d, got shape [3]"));
  EXPECT_THAT(error_of([] { nn::Embedding(3, 2, 3); }),
              HasSubstr("Embedding: padding_idx 3 must be within num_embeddings (3)"));
  EXPECT_THAT(error_of([] { nn::Embedding(0, 2); }),
              HasSubstr("Embedding: num_embeddings and embedding_dim must be positive"));
}

TEST(Embedding, NegativeIndexIsAnError) {
  nn::Embedding emb(5, 3);
  // torch.nn.functional.embedding refuses negative indices rather than wrapping around.
  EXPECT_THAT(error_of([&] {
                emb(tensor({0, -1}));
              }),
              HasSubstr("embedding: index_select: index -1 is out of bounds for dimension 0"));
}

namespace {
// LayerNorm over the trailing `k` elements of each row, in float64.
std::vector<double> layer_norm_ref(const std::vector<double>& x, size_t k, double eps,
                                   const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() / k; ++r) {
    double mu = 0, var = 0;
    for (size_t i = 0; i < k; ++i) mu += x[r * k + i];
    mu /= static_cast<double>(k);
    for (size_t i = 0; i < k; ++i) var += (x[r * k + i] - mu) * (x[r * k + i] - mu);
    var /= static_cast<double>(k);  // biased, as LayerNorm uses
    for (size_t i = 0; i < k; ++i) {
      const double n = (x[r * k + i] - mu) / std::sqrt(var + eps);
      out.push_back(w.empty() ? n : n * w[i] + b[i]);
    }
  }
  return out;
}
}  // namespace

TEST(LayerNorm, MatchesAFloat64HandComputation) {
  manual_seed(5);
  Tensor x = randn({3, 2, 4}) * 3 + 1;
  const std::vector<double> xv = to_vec(x);
  // Affine over the last two dims, with non-trivial weight and bias.
  nn::LayerNorm ln({2, 4});
  EXPECT_EQ(ln.named_parameters().size(), 2u);
  expect_values(ln.weight, std::vector<double>(8, 1.0));
  expect_values(ln.bias, std::vector<double>(8, 0.0));
  std::vector<double> w, b;
  for (int i = 0; i < 8; ++i) {
    w.push_back(0.5 + 0.25 * i);
    b.push_back(-1.0 + 0.3 * i);
  }
  {
    NoGradGuard ng;
    ln.weight.copy_(tensor(w).reshape({2, 4}));
    ln.bias.copy_(tensor(b).reshape({2, 4}));
  }
  expect_values(ln(x), layer_norm_ref(xv, 8, 1e-5, w, b), 1e-5, 1e-5);
  // Without affine: no parameters; eps as given.
  nn::LayerNorm plain({4}, 0.1, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_FALSE(plain.weight.defined());
  expect_values(plain(x), layer_norm_ref(xv, 4, 0.1, {}, {}), 1e-5, 1e-5);
  expect_values(nn::functional::layer_norm(x.to(kFloat64), {4}, Tensor(), Tensor(), 0.1),
                layer_norm_ref(xv, 4, 0.1, {}, {}), 1e-12, 1e-12);
  EXPECT_EQ(plain.extra_repr(), "[4], eps=0.1, elementwise_affine=false");

  EXPECT_THAT(error_of([&] {
                ln(ones({2, 3}));
              }),
              HasSubstr("layer_norm: normalized_shape [2, 4] does not match the trailing dims of "
                        "input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { ln(ones({4})); }),
              HasSubstr("layer_norm: normalized_shape [2, 4] does not fit input of shape [4]"));
  EXPECT_THAT(error_of([] { nn::LayerNorm(std::vector<int64_t>{}); }),
              HasSubstr("LayerNorm: normalized_shape must not be empty"));
}

TEST(LayerNorm, GradcheckInFloat64) {
  manual_seed(6);
  Tensor x = randn({2, 5}, kFloat64).requires_grad_();
  Tensor w = (randn({5}, kFloat64) + 1).requires_grad_();
  Tensor b = randn({5}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{nn::functional::layer_norm(in[0], {5}, in[1], in[2], 1e-5)};
      },
      {x, w, b}));
}

namespace {
// RMSNorm over the trailing `k` elements of each row, in float64.
std::vector<double> rms_norm_ref(const std::vector<double>& x, size_t k, double eps,
                                 const std::vector<double>& w) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() / k; ++r) {
    double sq = 0;
    for (size_t i = 0; i < k; ++i) sq += x[r * k + i] * x[r * k + i];
    const double inv = 1 / std::sqrt(sq / static_cast<double>(k) + eps);
    for (size_t i = 0; i < k; ++i) out.push_back(x[r * k + i] * inv * (w.empty() ? 1.0 : w[i]));
  }
  return out;
}
}  // namespace

TEST(RMSNorm, MatchesAFloat64HandComputation) {
  manual_seed(7);
  Tensor x = randn({3, 2, 4}) * 3 + 1;
  const std::vector<double> xv = to_vec(x);
  nn::RMSNorm rn({2, 4}, 1e-3);
  EXPECT_EQ(rn.named_parameters().size(), 1u);
  expect_values(rn.weight, std::vector<double>(8, 1.0));
  std::vector<double> w;
  for (int i = 0; i < 8; ++i) w.push_back(0.5 + 0.25 * i);
  {
    NoGradGuard ng;
    rn.weight.copy_(tensor(w).reshape({2, 4}));
  }
  expect_values(rn(x), rms_norm_ref(xv, 8, 1e-3, w), 1e-5, 1e-5);
  EXPECT_EQ(rn.extra_repr(), "[2, 4], eps=0.001, elementwise_affine=true");
  // eps left out: the dtype's machine epsilon, as torch.nn.RMSNorm(eps=None).
  nn::RMSNorm plain({4}, std::nullopt, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_EQ(plain.extra_repr(), "[4], eps=None, elementwise_affine=false");
  expect_values(plain(x), rms_norm_ref(xv, 4, 1.1920928955078125e-07, {}), 1e-6, 1e-6);
  const Tensor tiny = full({2, 4}, 1e-9, kFloat64);  // eps dominates: float64's, not float32's
  expect_values(nn::functional::rms_norm(tiny, {4}),
                rms_norm_ref(to_vec(tiny), 4, 2.220446049250313e-16, {}), 1e-12, 1e-12);
  // bfloat16 is normalised in float32, then rounded.
  const Tensor xb = x.to(kBFloat16);
  expect_values(nn::functional::rms_norm(xb, {4}, Tensor(), 1e-3).to(kFloat32),
                rms_norm_ref(to_vec(xb.to(kFloat32)), 4, 1e-3, {}), 1e-2, 1e-2);
  // Errors name the op and what is wrong.
  EXPECT_THAT(error_of([&] { rn(ones({2, 3})); }),
              HasSubstr("rms_norm: normalized_shape [2, 4] does not match the trailing dims of "
                        "input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { nn::functional::rms_norm(x, {4}, ones({3})); }),
              HasSubstr("rms_norm: weight of shape [3] must be normalized_shape [4]"));
  EXPECT_THAT(error_of([&] { nn::functional::rms_norm(x, {4}, Tensor(), -1.0); }),
              HasSubstr("rms_norm: eps must be non-negative, but got -1"));
  EXPECT_THAT(error_of([&] { nn::functional::rms_norm(ones({2, 4}, kInt64), {4}); }),
              HasSubstr("rms_norm: expected a floating point input, but got int64"));
  EXPECT_THAT(error_of([] { nn::RMSNorm(std::vector<int64_t>{}); }),
              HasSubstr("RMSNorm: normalized_shape must not be empty"));
}

TEST(RMSNorm, GradcheckInFloat64) {
  manual_seed(9);
  Tensor x = randn({3, 5}, kFloat64).requires_grad_();
  Tensor w = (randn({5}, kFloat64) + 1).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{nn::functional::rms_norm(in[0], {5}, in[1], 1e-5)};
      },
      {x, w}));
}

TEST(Layers, GradcheckLinearEmbeddingAndActivationsInFloat64) {
  manual_seed(8);
  using autograd::variable_list;
  Tensor x = randn({3, 4}, kFloat64).requires_grad_();
  Tensor w = randn({2, 4}, kFloat64).requires_grad_();
  Tensor b = randn({2}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const variable_list& in) {
        return variable_list{nn::functional::linear(in[0], in[1], in[2])};
      },
      {x, w, b}));
  // Embedding: gradient into the rows used (twice for a repeated index). The padding row's
  // gradient is zero by definition (not its derivative): gradcheck sees it through a weight whose
  // padding row is masked to zero, so that both are zero.
  Tensor table = randn({5, 3}, kFloat64).requires_grad_();
  const Tensor idx = tensor({{4, 1}, {4, 0}});
  const Tensor keep = tensor({1.0, 0.0, 1.0, 1.0, 1.0}, kFloat64).unsqueeze(1);
  EXPECT_TRUE(autograd::gradcheck(
      [&](const variable_list& in) {
        return variable_list{nn::functional::embedding(idx, in[0] * keep, /*padding_idx=*/1)};
      },
      {table}));
  // Activations away from their kinks.
  Tensor a = (randn({6}, kFloat64) + tensor({-2.0, -1.0, -0.5, 0.5, 1.0, 2.0}, kFloat64))
                 .detach()
                 .requires_grad_();
  for (const auto& f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& t) { return nn::functional::gelu(t); },
           [](const Tensor& t) { return nn::functional::gelu(t, "tanh"); },
           [](const Tensor& t) { return nn::functional::silu(t); },
           [](const Tensor& t) { return nn::functional::leaky_relu(t, 0.1); },
           [](const Tensor& t) { return nn::functional::softmax(t, 0); },
           [](const Tensor& t) { return nn::functional::log_softmax(t, 0); }}) {
    EXPECT_TRUE(
        autograd::gradcheck([&](const variable_list& in) { return variable_list{f(in[0])}; }, {a}));
  }
}
