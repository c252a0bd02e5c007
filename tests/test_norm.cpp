// Normalisation layers, dropout2d and interpolate: running statistics checked against hand computed
// values, train/eval switching, the fused batch-norm backward against the composite one and
// float64, batch_norm_relu against the three ops, dropout2d's channel pattern, interpolate against
// hand values, and every error path with its message. (Forward values and gradchecks:
// tests/ops_norm.cpp.)
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {
void expect_values(const Tensor& t, const std::vector<double>& want, double tol = 1e-6) {
  const std::vector<double> got = vals(t);
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) EXPECT_NEAR(got[i], want[i], tol) << "element " << i;
}

Tensor t64(const std::vector<double>& v, IntArrayRef shape) {
  return tensor(v, kFloat64).reshape(shape);
}

}  // namespace

// ---- batch norm: running statistics

TEST(BatchNorm, RunningStatsFollowMomentumAndUnbiasedVariance) {
  nn::BatchNorm2d bn(2, 1e-5, 0.1);
  // Channel 0 holds {1, 2, 3, 6}: mean 3, biased var 3.5, unbiased var 14/3. Channel 1 holds {0, 0,
  // 4, 4}: mean 2, biased var 4, unbiased var 16/3.
  Tensor x = tensor({1.0, 2.0, 0.0, 0.0, 3.0, 6.0, 4.0, 4.0}).reshape({2, 2, 1, 2});
  Tensor y = bn(x);
  expect_values(bn.running_mean, {0.1 * 3, 0.1 * 2});
  expect_values(bn.running_var, {0.9 + 0.1 * 14.0 / 3, 0.9 + 0.1 * 16.0 / 3});
  EXPECT_EQ(bn.num_batches_tracked.dtype(), kInt64);
  EXPECT_EQ(bn.num_batches_tracked.dim(), 0);
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  // The output uses the biased batch variance.
  const double s0 = std::sqrt(3.5 + 1e-5), s1 = std::sqrt(4 + 1e-5);
  expect_values(y, {-2 / s0, -1 / s0, -2 / s1, -2 / s1, 0, 3 / s0, 2 / s1, 2 / s1}, 1e-5);
  // A second batch: every value 5 in channel 0, {1, 3, 1, 3} in channel 1.
  Tensor x2 = tensor({5.0, 5.0, 1.0, 3.0, 5.0, 5.0, 1.0, 3.0}).reshape({2, 2, 1, 2});
  bn(x2);
  expect_values(bn.running_mean, {0.9 * 0.3 + 0.1 * 5, 0.9 * 0.2 + 0.1 * 2});
  expect_values(bn.running_var, {0.9 * (0.9 + 0.1 * 14.0 / 3) + 0.1 * 0,
                                 0.9 * (0.9 + 0.1 * 16.0 / 3) + 0.1 * 4.0 / 3});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 2);
}

TEST(BatchNorm, EvalUsesRunningStatsAndLeavesThemAlone) {
  nn::BatchNorm2d bn(2);
  {
    NoGradGuard ng;
    bn.running_mean.copy_(tensor({1.0, -2.0}));
    bn.running_var.copy_(tensor({4.0, 0.25}));
    bn.weight.copy_(tensor({2.0, 1.0}));
    bn.bias.copy_(tensor({0.5, 0.0}));
  }
  bn.eval();
  Tensor x = tensor({3.0, 1.0, -2.0, -1.5}).reshape({1, 2, 1, 2});
  Tensor y = bn(x);
  const double s0 = std::sqrt(4 + 1e-5), s1 = std::sqrt(0.25 + 1e-5);
  expect_values(y, {2 * 2 / s0 + 0.5, 0 + 0.5, 0, 0.5 / s1}, 1e-5);
  expect_values(bn.running_mean, {1, -2});
  expect_values(bn.running_var, {4, 0.25});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

TEST(BatchNorm, BatchNorm1dOn2dAnd3dInput) {
  nn::BatchNorm1d bn(2, 0.0, 0.5);
  // [N=2, C=2]: channel 0 {1, 3}, channel 1 {2, 4}: unbiased variances 2.
  Tensor y = bn(tensor({{1.0, 2.0}, {3.0, 4.0}}));
  expect_values(y, {-1, -1, 1, 1}, 1e-6);
  expect_values(bn.running_mean, {1.0, 1.5});
  expect_values(bn.running_var, {0.5 + 0.5 * 2, 0.5 + 0.5 * 2});
  // [N=1, C=2, L=3]: channel 0 {0, 1, 2}, channel 1 {4, 4, 7}.
  nn::BatchNorm1d bn3(2, 0.0, 1.0);
  Tensor y3 = bn3(tensor({0.0, 1.0, 2.0, 4.0, 4.0, 7.0}).reshape({1, 2, 3}));
  const double s0 = std::sqrt(2.0 / 3), s1 = std::sqrt(2.0);
  expect_values(y3, {-1 / s0, 0, 1 / s0, -1 / s1, -1 / s1, 2 / s1}, 1e-5);
  expect_values(bn3.running_mean, {1, 5});
  expect_values(bn3.running_var, {1, 3});
}

TEST(BatchNorm, TrainEvalSwitchThroughModule) {
  auto model = std::make_shared<nn::Sequential>(nn::BatchNorm1d(1, 0.0, 1.0));
  Tensor x = tensor({2.0, 4.0}).reshape({2, 1});
  Tensor y_train = model->forward(x);  // batch stats: mean 3, var 1
  expect_values(y_train, {-1, 1});
  model->eval();  // running stats: mean 3, unbiased var 2
  EXPECT_FALSE(model->at<nn::BatchNorm1d>(0)->is_training());
  expect_values(model->forward(x), {-1 / std::sqrt(2.0), 1 / std::sqrt(2.0)});
  expect_values(model->forward(tensor({3.0}).reshape({1, 1})),
                {0});  // a single value is fine in eval
  model->train();
  expect_values(model->forward(x), {-1, 1});
  EXPECT_EQ(model->get("0.num_batches_tracked").item<int64_t>(), 2);
}

TEST(BatchNorm, ParameterAndBufferNamesMatchPyTorch) {
  nn::Sequential model;
  model.push_back("bn", std::make_shared<nn::BatchNorm2d>(3));
  std::vector<std::string> keys;
  for (auto& [k, v] : model.state_dict()) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("bn.weight", "bn.bias", "bn.running_mean",
                                           "bn.running_var", "bn.num_batches_tracked"));
  auto bn = model.at<nn::BatchNorm2d>(0);
  expect_values(bn->weight, {1, 1, 1});
  expect_values(bn->bias, {0, 0, 0});
  expect_values(bn->running_var, {1, 1, 1});
  EXPECT_EQ(model.num_parameters(), 6);
  EXPECT_EQ(bn->type_name(), "BatchNorm2d");
  EXPECT_EQ(bn->extra_repr(), "3, eps=1e-05, momentum=0.1, affine=true, track_running_stats=true");
}

TEST(BatchNorm, WithoutRunningStatsOrAffine) {
  nn::BatchNorm2d bn(1, 0.0, 0.1, /*affine=*/false,
                     /*track_running_stats=*/false);
  EXPECT_TRUE(bn.parameters().empty());
  EXPECT_TRUE(bn.buffers().empty());
  bn.eval();  // still batch statistics: there are no running ones
  expect_values(bn(tensor({1.0, 3.0}).reshape({1, 1, 1, 2})), {-1, 1});
}

TEST(BatchNorm, ResetRunningStats) {
  nn::BatchNorm2d bn(1);
  bn(tensor({1.0, 5.0}).reshape({2, 1, 1, 1}));
  bn.reset_running_stats();
  expect_values(bn.running_mean, {0});
  expect_values(bn.running_var, {1});
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 0);
}

// ---- batch norm: the fused backward

namespace {
/// Gradients of sum(batch_norm(x) * r) with respect to x, weight and bias.
std::vector<Tensor> bn_grads(const Tensor& x0, const Tensor& w0, const Tensor& b0, const Tensor& r,
                             bool training, bool create_graph) {
  Tensor x = x0.detach().requires_grad_(true), w = w0.detach().requires_grad_(true),
         b = b0.detach().requires_grad_(true);
  const TensorOptions o(x0.dtype());
  Tensor rm = zeros({x0.size(1)}, o).add(0.25), rv = ones({x0.size(1)}, o).mul(1.5);
  Tensor y = batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5);
  return autograd::grad({(y * r.to(x0.dtype())).sum()}, {x, w, b}, {}, true, create_graph);
}

void expect_grads_close(const std::vector<Tensor>& got, const std::vector<Tensor>& want,
                        double tol) {
  ASSERT_EQ(got.size(), want.size());
  for (size_t i = 0; i < got.size(); ++i) {
    SCOPED_TRACE("gradient " + std::to_string(i));
    const std::vector<double> g = vals(got[i]), w = vals(want[i]);
    ASSERT_EQ(g.size(), w.size());
    double worst = 0;
    for (size_t k = 0; k < g.size(); ++k) worst = std::max(worst, std::abs(g[k] - w[k]));
    EXPECT_LE(worst, tol);
  }
}

}  // namespace

TEST(BatchNorm, FusedBackwardMatchesCompositeAndFloat64) {
  manual_seed(3);
  // Long rows (M = 20), short rows (M = 1, across channels), and rows over several blocks.
  for (Shape s : {Shape{4, 3, 4, 5}, Shape{16, 5}, Shape{2, 2, 80, 80}}) {
    for (bool training : {true, false}) {
      SCOPED_TRACE(std::string(training ? "training " : "eval ") + std::to_string(s[0]) + "x" +
                   std::to_string(s[1]) + "...");
      Tensor x = randn(s, kFloat64).mul(2).add(1), r = randn(s, kFloat64);
      Tensor w = randn({s[1]}, kFloat64), b = randn({s[1]}, kFloat64);
      // float64: the fused kernel (no graph) against the composite (create_graph).
      auto fused = bn_grads(x, w, b, r, training, false);
      auto composite = bn_grads(x, w, b, r, training, true);
      expect_grads_close(fused, composite, 1e-9);
      // float32 fused against float64.
      auto f32 = bn_grads(x.to(kFloat32), w.to(kFloat32), b.to(kFloat32), r, training, false);
      const double scale = static_cast<double>(x.numel()) / s[1];  // terms per channel sum
      expect_grads_close(f32, fused, 2e-5 * std::max(1.0, std::sqrt(scale)));
    }
  }
}

TEST(BatchNorm, BFloat16BackwardFollowsFloat64) {
  manual_seed(8);
  for (bool training : {true, false}) {
    Tensor x = randn({4, 3, 4, 5}, kFloat64), r = randn({4, 3, 4, 5}, kFloat64);
    Tensor w = randn({3}, kFloat64), b = randn({3}, kFloat64);
    // The reference sees the bfloat16-rounded inputs.
    auto round = [](const Tensor& t) { return t.to(kBFloat16).to(kFloat64); };
    auto want = bn_grads(round(x), round(w), round(b), round(r), training, false);
    auto got = bn_grads(x.to(kBFloat16), w.to(kBFloat16), b.to(kBFloat16), r, training, false);
    EXPECT_EQ(got[0].dtype(), kBFloat16);
    // bfloat16 keeps 8 bits: grad_input to ~1e-2, the 80-term channel sums to ~1e-1.
    expect_grads_close({got[0]}, {want[0]}, 5e-2);
    expect_grads_close({got[1], got[2]}, {want[1], want[2]}, 0.5);
  }
}

TEST(BatchNorm, Float32StatisticsOfLargeChannels) {
  manual_seed(4);
  // Channels of 2 * 6400 values with a large mean: the two-pass variance keeps its digits.
  Tensor x = randn({2, 2, 80, 80}, kFloat64).add(100);
  Tensor y32 = batch_norm(x.to(kFloat32), {}, {}, {}, {}, true, 0.1, 1e-5);
  Tensor y64 = batch_norm(x, {}, {}, {}, {}, true, 0.1, 1e-5);
  EXPECT_LE((y32.to(kFloat64) - y64).abs().max().item<double>(), 2e-4);
  // And float64 against the definition.
  Tensor mu = x.mean({0, 2, 3}, true), var = x.var({0, 2, 3}, 0, true);
  EXPECT_TRUE(allclose(y64, (x - mu) / (var + 1e-5).sqrt(), 1e-10, 1e-10));
}

namespace {
// Training batch norm's output and its gradients for x and w, computed with `threads` threads.
std::vector<Tensor> bn_with_threads(int threads, const Tensor& x, const Tensor& w,
                                    const Tensor& g) {
  const int before = get_num_threads();
  set_num_threads(threads);
  Tensor y = batch_norm(x, {}, {}, w, {}, true, 0.1, 1e-5);
  auto grads = autograd::grad({y}, {x, w}, {g});
  set_num_threads(before);
  return {y.detach(), grads[0], grads[1]};
}
}  // namespace

TEST(BatchNorm, SameBitsForAnyThreadCount) {
  manual_seed(9);
  Tensor x = randn({8, 16, 32, 32}).requires_grad_(true), g = randn({8, 16, 32, 32});
  Tensor w = randn({16}).requires_grad_(true);
  auto one = bn_with_threads(1, x, w, g), two = bn_with_threads(2, x, w, g);
  for (size_t i = 0; i < one.size(); ++i) EXPECT_TRUE(equal(one[i], two[i])) << "output " << i;
}

TEST(BatchNorm, RowsOfManyChannelsSplitOverThreadsWithTheSameBits) {
  // [R, C] rows (BatchNorm1d, and channels-last as [N*H*W, C]): 300 rows are two chunks of rows,
  // 600 channels three blocks, so the sums are split both ways; any thread count, same bits,
  // and the values of the float64 definition.
  manual_seed(10);
  for (const Shape& shape : {Shape{300, 600}, Shape{3, 600, 10, 10}}) {
    Tensor x = randn(shape), g = randn(shape);
    if (shape.size() == 4) {
      x = x.contiguous(MemoryFormat::ChannelsLast);
      g = g.contiguous(MemoryFormat::ChannelsLast);
    }
    x.requires_grad_(true);
    Tensor w = randn({600}).requires_grad_(true);
    auto one = bn_with_threads(1, x, w, g), two = bn_with_threads(2, x, w, g);
    auto three = bn_with_threads(3, x, w, g);
    for (size_t i = 0; i < one.size(); ++i) {
      EXPECT_TRUE(equal(one[i], two[i])) << "output " << i;
      EXPECT_TRUE(equal(one[i], three[i])) << "output " << i;
    }
    const Tensor x64 = x.detach().to(kFloat64).contiguous();
    std::vector<int64_t> dims{0};
    if (shape.size() == 4) dims = {0, 2, 3};
    const Shape keep = shape.size() == 4 ? Shape{1, 600, 1, 1} : Shape{1, 600};
    const Tensor mu = x64.mean(dims, true), var = x64.var(dims, 0, true);
    const Tensor want = (x64 - mu) / (var + 1e-5).sqrt() * w.detach().to(kFloat64).reshape(keep);
    EXPECT_LE((one[0].to(kFloat64) - want).abs().max().item<double>(), 1e-4);
  }
}

namespace {
// relu(batch_norm(x) + other) as one op or as three, with `threads` threads: the output, the
// running statistics and the gradients of x, weight, bias (and other).
std::vector<Tensor> bn_relu_run(bool fused, int threads, const Tensor& x, const Tensor& other,
                                const Tensor& w, const Tensor& b, bool training, const Tensor& g) {
  const int before = get_num_threads();
  set_num_threads(threads);
  Tensor rm = linspace(-1, 1, x.size(1)), rv = linspace(0.5, 2, x.size(1));
  Tensor y = fused ? batch_norm_relu(x, other, rm, rv, w, b, training, 0.1, 1e-5)
                   : relu(other.defined() ? batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5) + other
                                          : batch_norm(x, rm, rv, w, b, training, 0.1, 1e-5));
  std::vector<Tensor> inputs{x, w, b};
  if (other.defined()) inputs.push_back(other);
  std::vector<Tensor> out{y.detach(), rm, rv};
  for (const Tensor& t : autograd::grad({y}, inputs, {g})) out.push_back(t);
  set_num_threads(before);
  return out;
}
}  // namespace

// The fused op computes what the three ops do, in the same order: the same bits, forward and
// backward, in both layouts and on [R, C] rows of several channel blocks, training and eval,
// with and without the residual, for any thread count.
TEST(BatchNormRelu, SameBitsAsTheThreeOps) {
  manual_seed(11);
  // NCHW long rows; channels-last in tiles of 21 rows of 48 channels over two chunks of rows;
  // BatchNorm1d rows of 600 channels (three blocks); short NCHW rows.
  for (const Shape& s :
       {Shape{4, 6, 10, 10}, Shape{4, 48, 10, 10}, Shape{300, 600}, Shape{5, 3, 2, 3}}) {
    const bool cl = s[1] == 48;
    auto make = [&] {
      Tensor t = randn(s);
      return (cl ? t.contiguous(MemoryFormat::ChannelsLast) : t).requires_grad_(true);
    };
    Tensor x = make(), other = make(), g = make().detach();
    Tensor w = randn({s[1]}).requires_grad_(true), b = randn({s[1]}).requires_grad_(true);
    for (bool training : {true, false}) {
      for (bool residual : {true, false}) {
        SCOPED_TRACE(testing::PrintToString(s) + (training ? " training" : " eval") +
                     (residual ? " residual" : ""));
        const Tensor o = residual ? other : Tensor();
        auto want = bn_relu_run(false, 2, x, o, w, b, training, g);
        auto got = bn_relu_run(true, 2, x, o, w, b, training, g);
        auto one = bn_relu_run(true, 1, x, o, w, b, training, g);
        ASSERT_EQ(got.size(), want.size());
        EXPECT_EQ(got[0].suggest_memory_format(), want[0].suggest_memory_format());
        for (size_t i = 0; i < want.size(); ++i) {
          EXPECT_TRUE(equal(got[i], want[i])) << "result " << i;
          EXPECT_TRUE(equal(one[i], got[i])) << "result " << i << " on one thread";
        }
      }
    }
  }
}

TEST(BatchNormRelu, ErrorsNameTheOpAndTheResidual) {
  Tensor x = randn({2, 3, 4, 4}), w = ones({3}), b = zeros({3});
  EXPECT_THAT(error_of([&] {
                batch_norm_relu(x, randn({2, 3, 4}), {}, {}, w, b, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm_relu: other must have the input's shape and dtype "
                        "float32[2, 3, 4, 4], but got float32[2, 3, 4]"));
  EXPECT_THAT(error_of([&] {
                batch_norm_relu(x, randn({2, 3, 4, 4}, kFloat64), {}, {}, w, b, true, 0.1, 1e-5);
              }),
              HasSubstr("but got float64[2, 3, 4, 4]"));
  EXPECT_THAT(error_of([&] {
                batch_norm_relu(x, empty({2, 3, 4, 4}, TensorOptions().device(kMeta)), {}, {}, w, b,
                                true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm_relu: other is on meta but the input is on cpu"));
  EXPECT_THAT(error_of([&] { batch_norm_relu(Tensor(), {}, {}, {}, w, b, true, 0.1, 1e-5); }),
              HasSubstr("batch_norm_relu: the input is undefined"));
  // The checks batch_norm makes, named for this op.
  EXPECT_THAT(error_of([&] { batch_norm_relu(x, {}, {}, {}, ones({4}), b, true, 0.1, 1e-5); }),
              HasSubstr("batch_norm_relu: weight must have shape [3]"));
  EXPECT_THAT(error_of([&] { batch_norm_relu(x, {}, {}, {}, w, b, false, 0.1, 1e-5); }),
              HasSubstr("batch_norm_relu: running_mean and running_var are required"));
}

TEST(BatchNorm, RunningStatsFollowBFloat16Input) {
  nn::BatchNorm2d bn(1, 1e-5, 1.0);
  Tensor x = tensor({1.0, 3.0}).reshape({2, 1, 1, 1}).to(kBFloat16);
  Tensor y = bn(x);
  EXPECT_EQ(y.dtype(), kBFloat16);
  expect_values(y, {-1, 1}, 1e-2);
  expect_values(bn.running_mean, {2});
  expect_values(bn.running_var, {2});
}

// ---- group norm, LRN

TEST(GroupNorm, ModuleNormalisesGroups) {
  nn::GroupNorm gn(2, 4, 0.0);
  // One sample, 4 channels of 1 value: groups {1, 3} and {10, 14}.
  Tensor y = gn(tensor({1.0, 3.0, 10.0, 14.0}).reshape({1, 4, 1}));
  expect_values(y, {-1, 1, -1, 1}, 1e-6);
  std::vector<std::string> keys;
  for (auto& [k, v] : gn.state_dict()) keys.push_back(k);
  EXPECT_THAT(keys, ::testing::ElementsAre("weight", "bias"));
}

TEST(LocalResponseNorm, HandValues) {
  nn::LocalResponseNorm lrn(2, 1.0, 1.0, 1.0);
  // Channels 0..2 at one position, values 1, 2, 3. size 2: window {c - 1, c}. c0: 1 / (1 + (0 + 1)
  // / 2) ; c1: 2 / (1 + (1 + 4) / 2) ; c2: 3 / (1 + (4 + 9) / 2).
  Tensor y = lrn(tensor({1.0, 2.0, 3.0}).reshape({1, 3, 1}));
  expect_values(y, {1 / 1.5, 2 / 3.5, 3 / 7.5}, 1e-6);
}

// ---- dropout2d

TEST(Dropout2d, ZeroesWholeChannelsAndScales) {
  manual_seed(11);
  Tensor x = ones({4, 8, 3, 3}).requires_grad_(true);
  Tensor y = dropout2d(x, 0.5, true);
  int zeros_seen = 0, kept = 0;
  for (int64_t n = 0; n < 4; ++n) {
    for (int64_t c = 0; c < 8; ++c) {
      const std::vector<double> v = vals(y[n][c]);
      const double first = v[0];
      EXPECT_TRUE(first == 0.0 || first == 2.0) << first;
      for (double e : v) EXPECT_EQ(e, first) << "channel (" << n << ", " << c << ") is mixed";
      (first == 0 ? zeros_seen : kept)++;
    }
  }
  EXPECT_GT(zeros_seen, 4);
  EXPECT_GT(kept, 4);
  // The gradient is the same mask.
  y.sum().backward();
  EXPECT_TRUE(equal(x.grad(), y.detach()));
}

TEST(Dropout2d, ReproducibleUnderManualSeed) {
  Tensor x = randn({3, 6, 2, 2});
  manual_seed(5);
  Tensor a = dropout2d(x, 0.3);
  Tensor a2 = dropout2d(x, 0.3);
  manual_seed(5);
  Tensor b = dropout2d(x, 0.3);
  EXPECT_TRUE(equal(a, b));
  EXPECT_FALSE(equal(a, a2));  // the stream moves on
  // 3-D input: channels of (N, C, L).
  manual_seed(6);
  Tensor y = dropout2d(ones({2, 16, 5}), 0.5);
  for (int64_t n = 0; n < 2; ++n) {
    for (int64_t c = 0; c < 16; ++c) {
      const std::vector<double> v = vals(y[n][c]);
      for (double e : v) EXPECT_EQ(e, v[0]);
    }
  }
}

TEST(Dropout2d, EvalAndEdgeProbabilities) {
  Tensor x = randn({2, 3, 2, 2});
  nn::Dropout2d d(0.5);
  d.eval();
  EXPECT_TRUE(equal(d(x), x));
  EXPECT_TRUE(equal(dropout2d(x, 0.0), x));
  EXPECT_TRUE(equal(dropout2d(x, 1.0), zeros_like(x)));
  EXPECT_EQ(d.extra_repr(), "p=0.5");
}

// ---- interpolate

TEST(Interpolate, NearestHandValues) {
  Tensor x = t64({1, 2, 3, 4}, {1, 1, 2, 2});
  expect_values(interpolate(x, {4, 4}), {1, 1, 2, 2, 1, 1, 2, 2, 3, 3, 4, 4, 3, 3, 4, 4});
  expect_values(interpolate(x, {2.0, 1.5}), {1, 1, 2, 1, 1, 2, 3, 3, 4, 3, 3, 4});
  Tensor l = t64({1, 2, 3}, {1, 1, 3});
  expect_values(interpolate(l, {2.0}), {1, 1, 2, 2, 3, 3});
  expect_values(interpolate(l, int64_t{2}), {1, 2});  // floor(1 * 1.5) = 1
  expect_values(interpolate(l, int64_t{5}), {1, 1, 2, 2, 3});
}

TEST(Interpolate, BilinearHandValues) {
  Tensor x = t64({1, 2, 3, 4}, {1, 1, 2, 2});
  expect_values(interpolate(x, {3, 3}, "bilinear", true), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  // align_corners=false, 2 -> 4: source coords -0.25 (clamped to 0), 0.25, 0.75, 1.25.
  Tensor row = t64({1, 2}, {1, 1, 1, 2});
  expect_values(interpolate(row, {1, 4}, "bilinear"), {1, 1.25, 1.75, 2});
  expect_values(interpolate(row, {1.0, 2.0}, "bilinear", false), {1, 1.25, 1.75, 2});
  // Downsampling 4 -> 2 averages pairs.
  Tensor r4 = t64({1, 3, 5, 9}, {1, 1, 1, 4});
  expect_values(interpolate(r4, {1, 2}, "bilinear"), {2, 7});
  // One output with align_corners takes the first input.
  expect_values(interpolate(r4, {1, 1}, "bilinear", true), {1});
}

TEST(Interpolate, GradientsScatterBack) {
  Tensor x = t64({1, 2, 3, 4}, {1, 1, 2, 2}).requires_grad_(true);
  interpolate(x, {2.0, 2.0}).sum().backward();
  expect_values(x.grad(), {4, 4, 4, 4});
  Tensor r = t64({1, 2}, {1, 1, 1, 2}).requires_grad_(true);
  // Outputs weights: (1, 0), (0.75, 0.25), (0.25, 0.75), (0, 1); a ramp upstream gradient.
  Tensor g = t64({1, 2, 3, 4}, {1, 1, 1, 4});
  (interpolate(r, {1, 4}, "bilinear") * g).sum().backward();
  expect_values(r.grad(), {1 + 0.75 * 2 + 0.25 * 3, 0.25 * 2 + 0.75 * 3 + 4});
}

TEST(Interpolate, FusedBackwardMatchesComposite) {
  manual_seed(12);
  Tensor x = randn({2, 3, 5, 6}, kFloat64), l = randn({2, 3, 7}, kFloat64);
  struct Case {
    Tensor in;
    std::function<Tensor(const Tensor&)> f;
  };
  const std::vector<Case> cases = {
      {x,
       [](const Tensor& t) {
         return interpolate(t, {8, 4}, "bilinear");
       }},
      {x,
       [](const Tensor& t) {
         return interpolate(t, {3, 9}, "bilinear", true);
       }},
      {x,
       [](const Tensor& t) {
         return interpolate(t, {5, 13}, "bilinear");
       }},  // H identity
      {x,
       [](const Tensor& t) {
         return interpolate(t, {2.5, 0.5}, "nearest");
       }},
      {l, [](const Tensor& t) { return interpolate(t, {3.0}, "nearest"); }},
  };
  for (size_t i = 0; i < cases.size(); ++i) {
    SCOPED_TRACE("case " + std::to_string(i));
    Tensor a = cases[i].in.detach().requires_grad_(true);
    Tensor y = cases[i].f(a);
    Tensor g = randn(y.sizes(), kFloat64);
    Tensor fused = autograd::grad({y}, {a}, {g}, true, false)[0];
    Tensor composite = autograd::grad({y}, {a}, {g}, true, true)[0];
    EXPECT_TRUE(allclose(fused, composite, 1e-12, 1e-12));
    // float32 kernels against float64.
    Tensor a32 = cases[i].in.to(kFloat32).requires_grad_(true);
    Tensor g32 = autograd::grad({cases[i].f(a32)}, {a32}, {g.to(kFloat32)})[0];
    EXPECT_TRUE(allclose(g32.to(kFloat64), fused, 1e-5, 1e-5));
  }
}

TEST(Interpolate, UpsampleModule) {
  Tensor x = t64({1, 2, 3, 4}, {1, 1, 2, 2});
  nn::Upsample up({2.0, 2.0});
  EXPECT_EQ(up(x).sizes().shape(), (Shape{1, 1, 4, 4}));
  nn::Upsample to_size({3, 3}, "bilinear", true);
  expect_values(to_size(x), {1, 1.5, 2, 2, 2.5, 3, 3, 3.5, 4});
  EXPECT_EQ(to_size.extra_repr(), "size=[3, 3], mode='bilinear', align_corners=true");
  nn::Upsample up2(std::vector<double>{2}, "bilinear");
  EXPECT_EQ(up2(x).sizes().shape(), (Shape{1, 1, 4, 4}));
}

// ---- error paths

TEST(NormErrors, WrongRank) {
  EXPECT_THAT(error_of([] { batch_norm(ones({3}), {}, {}, {}, {}, true, 0.1, 1e-5); }),
              HasSubstr("batch_norm: expected an input of at least 2 dims [N, C, *], but got "
                        "shape [3]"));
  nn::BatchNorm2d bn2(3);
  EXPECT_THAT(error_of([&] {
                bn2(ones({2, 3, 4}));
              }),
              HasSubstr("BatchNorm2d: expected a 4-D [N, C, H, W] input, but "
                        "got shape [2, 3, 4]"));
  nn::BatchNorm1d bn1(3);
  EXPECT_THAT(error_of([&] {
                bn1(ones({2, 3, 4, 4}));
              }),
              HasSubstr("BatchNorm1d: expected a 2-D [N, C] or 3-D [N, C, L] input, but got "
                        "shape [2, 3, 4, 4]"));
  EXPECT_THAT(error_of([] {
                local_response_norm(ones({2, 3}), 2);
              }),
              HasSubstr("local_response_norm: expected an input of at least 3 dims"));
  EXPECT_THAT(error_of([] { group_norm(ones({4}), 2); }),
              HasSubstr("group_norm: expected an input of at least 2 dims [N, C, *], but got "
                        "shape [4]"));
  EXPECT_THAT(error_of([] {
                dropout2d(ones({2, 3}), 0.5);
              }),
              HasSubstr("dropout2d: expected a 3-D [N, C, L] or 4-D [N, C, H, "
                        "W] input, but got "
                        "shape [2, 3]"));
  EXPECT_THAT(error_of([] {
                interpolate(ones({1, 2, 3}), {4}, "bilinear");
              }),
              HasSubstr("interpolate: mode 'bilinear' expects a 4-D input [N, "
                        "C, H, W], but got "
                        "shape [1, 2, 3]"));
  EXPECT_THAT(error_of([] {
                interpolate(ones({2, 3}), {4});
              }),
              HasSubstr("interpolate: mode 'nearest' expects a 3-D [N, C, L] "
                        "or 4-D [N, C, H, W] "
                        "input, but got shape [2, 3]"));
}

TEST(NormErrors, ChannelMismatch) {
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 4, 3}), zeros({3}), ones({3}), {}, {}, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: running_mean must have shape [4] to match "
                        "the 4 channels of input "
                        "of shape [2, 4, 3], but got shape [3]"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 4}), zeros({4}), ones({5}), {}, {}, false, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: running_var must have shape [4]"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 4}), {}, {}, ones({2, 2}), {}, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: weight must have shape [4]"));
  nn::BatchNorm2d bn(3);
  EXPECT_THAT(error_of([&] {
                bn(ones({2, 4, 2, 2}));
              }),
              HasSubstr("BatchNorm2d: expected 3 channels (num_features) in "
                        "dim 1, but got input "
                        "of shape [2, 4, 2, 2]"));
  nn::GroupNorm gn(2, 4);
  EXPECT_THAT(error_of([&] {
                gn(ones({2, 6, 2}));
              }),
              HasSubstr("GroupNorm: expected an input [N, 4, *], but got shape [2, 6, 2]"));
}

TEST(NormErrors, BatchNormModesAndBatchSize) {
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 3}), {}, {}, {}, {}, false, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: running_mean and running_var are required in evaluation "
                        "mode"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 3}), zeros({3}), {}, {}, {}, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: running_mean and running_var must both be defined"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({1, 3, 1}), {}, {}, {}, {}, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: expected more than 1 value per channel "
                        "when training, but "
                        "got input of shape [1, 3, 1]"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 3}, kInt64), {}, {}, {}, {}, true, 0.1, 1e-5);
              }),
              HasSubstr("batch_norm: expected a floating point input, but got int64"));
  EXPECT_THAT(error_of([] {
                batch_norm(ones({2, 3}), {}, {}, {}, {}, true, 0.1, -1);
              }),
              HasSubstr("batch_norm: eps must be non-negative, but got -1"));
  EXPECT_THAT(error_of([] { nn::BatchNorm2d bn(0); }),
              HasSubstr("BatchNorm: num_features must be positive, but got 0"));
}

TEST(NormErrors, ARejectedBatchIsNotCounted) {
  // num_batches_tracked counts only batches that batch_norm accepted.
  nn::BatchNorm1d bn(3);
  bn(tensor({1.0, 2.0, 3.0, 5.0, 4.0, 0.0}).reshape({2, 3}));
  ASSERT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  const std::vector<double> mean = vals(bn.running_mean), var = vals(bn.running_var);
  EXPECT_THAT(error_of([&] {
                bn(ones({1, 3}));
              }),
              HasSubstr("batch_norm: expected more than 1 value per channel when training, but "
                        "got input of shape [1, 3]"));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  EXPECT_EQ(vals(bn.running_mean), mean);
  EXPECT_EQ(vals(bn.running_var), var);
  EXPECT_THAT(error_of([&] {
                bn(ones({2, 4}));
              }),
              HasSubstr("BatchNorm1d: expected 3 channels (num_features) in dim 1, but got input "
                        "of shape [2, 4]"));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
  nn::BatchNorm2d bn2(2);
  EXPECT_THAT(error_of([&] {
                bn2(ones({1, 2, 1, 1}, kInt64));
              }),
              HasSubstr("batch_norm: expected a floating point input, but got int64"));
  EXPECT_EQ(bn2.num_batches_tracked.item<int64_t>(), 0);
  // A one-sample batch is fine in eval mode, and not counted there either.
  bn.eval();
  bn(ones({1, 3}));
  EXPECT_EQ(bn.num_batches_tracked.item<int64_t>(), 1);
}

TEST(NormErrors, NumGroupsMustDivideChannels) {
  EXPECT_THAT(error_of([] {
                group_norm(ones({2, 6, 3}), 4);
              }),
              HasSubstr("group_norm: num_groups 4 must be positive and divide "
                        "the 6 channels of "
                        "input of shape [2, 6, 3]"));
  EXPECT_THAT(error_of([] {
                group_norm(ones({2, 6, 3}), 0);
              }),
              HasSubstr("group_norm: num_groups 0 must be positive"));
  EXPECT_THAT(error_of([] { nn::GroupNorm gn(4, 6); }),
              HasSubstr("GroupNorm: num_groups 4 must be positive and divide "
                        "num_channels 6"));
  EXPECT_THAT(error_of([] {
                group_norm(ones({2, 4, 3}), 2, ones({3}));
              }),
              HasSubstr("group_norm: weight must have shape [4]"));
}

TEST(NormErrors, LocalResponseNormSize) {
  EXPECT_THAT(error_of([] {
                local_response_norm(ones({1, 3, 2}), 0);
              }),
              HasSubstr("local_response_norm: size must be positive, but got 0"));
  EXPECT_THAT(error_of([] { nn::LocalResponseNorm lrn(-1); }),
              HasSubstr("LocalResponseNorm: size must be positive, but got -1"));
}

TEST(NormErrors, DropoutProbability) {
  EXPECT_THAT(error_of([] {
                dropout2d(ones({1, 2, 2, 2}), 1.5);
              }),
              HasSubstr("dropout2d: probability has to be between 0 and 1, but got 1.5"));
  EXPECT_THAT(error_of([] {
                dropout2d(ones({1, 2, 2, 2}), -0.1);
              }),
              HasSubstr("dropout2d: probability has to be between 0 and 1, but got -0.1"));
  EXPECT_THAT(error_of([] { nn::Dropout2d d(2); }),
              HasSubstr("Dropout2d: probability has to be between 0 and 1, but got 2"));
  EXPECT_THAT(error_of([] {
                dropout2d(ones({1, 2, 2}, kInt64), 0.5);
              }),
              HasSubstr("dropout2d: expected a floating point input, but got int64"));
}

TEST(NormErrors, InterpolateArguments) {
  Tensor x = ones({1, 1, 2, 2});
  EXPECT_THAT(error_of([&] {
                interpolate(x, {4, 4}, "trilinear");
              }),
              HasSubstr("interpolate: unsupported mode 'trilinear' (supported: 'nearest', "
                        "'nearest-exact', 'area', 'bilinear', 'bicubic')"));
  EXPECT_THAT(error_of([&] { interpolate(x, IntArrayRef()); }),
              HasSubstr("interpolate: either size or scale_factor should be defined"));
  EXPECT_THAT(error_of([&] { interpolate(x, std::vector<double>{}); }),
              HasSubstr("interpolate: either size or scale_factor should be defined"));
  EXPECT_THAT(error_of([&] {
                interpolate(x, {4, 4, 4});
              }),
              HasSubstr("interpolate: size [4, 4, 4] has 3 values but the input of shape "
                        "[1, 1, 2, 2] has 2 spatial dims"));
  EXPECT_THAT(error_of([&] {
                interpolate(x, {2.0, 2.0, 2.0});
              }),
              HasSubstr("interpolate: scale_factor has 3 values but the input of shape "
                        "[1, 1, 2, 2] has 2 spatial dims"));
  EXPECT_THAT(error_of([&] {
                interpolate(x, {4, 0});
              }),
              HasSubstr("interpolate: input and output sizes should be greater than 0"));
  EXPECT_THAT(error_of([&] {
                interpolate(x, {0.2, 1.0});
              }),
              HasSubstr("interpolate: input and output sizes should be greater than 0"));
  EXPECT_THAT(error_of([&] { interpolate(x, {-2.0}); }),
              HasSubstr("interpolate: scale_factor must be positive, but got -2"));
  EXPECT_THAT(error_of([&] {
                interpolate(x, {4, 4}, "nearest", true);
              }),
              HasSubstr("interpolate: align_corners can only be set with modes "
                        "'bilinear' and 'bicubic', not 'nearest'"));
  EXPECT_THAT(error_of([&] {
                interpolate(ones({1, 1, 2, 2}, kInt64), {4, 4}, "bilinear");
              }),
              HasSubstr("interpolate: mode 'bilinear' expects a floating point "
                        "input, but got "
                        "int64"));
  EXPECT_THAT(error_of([] { nn::Upsample up({2.0}, "area"); }),
              HasSubstr("Upsample: unsupported mode 'area'"));
  EXPECT_THAT(error_of([] { nn::Upsample up(std::vector<int64_t>{}); }),
              HasSubstr("Upsample: either size or scale_factor should be defined"));
}
