// Activation checkpointing, both forms (reentrant and not): gradients equal the plain ones (with
// dropout: the masks of the re-run match), activations are not kept, the non-reentrant form
// supports autograd::grad and double backward, and errors name what is wrong.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/checkpoint.h"
#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

std::shared_ptr<nn::Sequential> dropout_mlp(int64_t width, int layers) {
  auto m = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    m->push_back(std::make_shared<nn::Linear>(width, width));
    m->push_back(std::make_shared<nn::ReLU>());
    m->push_back(std::make_shared<nn::Dropout>(0.3));
  }
  m->push_back(std::make_shared<nn::Linear>(width, 3));
  return m;
}

std::vector<Tensor> grads_of(const nn::Module& m) {
  std::vector<Tensor> g;
  for (const Tensor& p : m.parameters()) g.push_back(p.grad().clone());
  return g;
}

void expect_same_grads(const std::vector<Tensor>& a, const std::vector<Tensor>& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    ASSERT_TRUE(a[i].defined() && b[i].defined()) << i;
    EXPECT_TRUE(allclose(a[i], b[i], 1e-6, 1e-7)) << "parameter " << i;
  }
}

// The tests that hold for both forms take use_reentrant as their parameter.
class BothForms : public ::testing::TestWithParam<bool> {};

}  // namespace

INSTANTIATE_TEST_SUITE_P(ActivationCheckpoint, BothForms, ::testing::Bool(), [](const auto& info) {
  return std::string(info.param ? "Reentrant" : "NonReentrant");
});

TEST_P(BothForms, GradientsEqualPlainWithDropout) {
  manual_seed(0);
  auto m = dropout_mlp(16, 4);
  Tensor x = randn({8, 16}).requires_grad_(true);
  manual_seed(1);
  m->zero_grad();
  m->forward(x).pow(2).sum().backward();
  auto plain = grads_of(*m);
  Tensor plain_x = x.grad().clone();
  x.set_grad(Tensor());
  manual_seed(1);
  m->zero_grad();
  TensorList y = autograd::checkpoint(
      [&](const TensorList& in) { return TensorList{m->forward(in[0])}; }, {x}, true, GetParam());
  ASSERT_TRUE(y[0].requires_grad());
  // Draws after the checkpoint are not disturbed by the re-run in backward.
  const uint64_t offset = default_generator().offset();
  y[0].pow(2).sum().backward();
  EXPECT_EQ(default_generator().offset(), offset);
  expect_same_grads(grads_of(*m), plain);
  EXPECT_TRUE(allclose(x.grad(), plain_x, 1e-6, 1e-7));
}

TEST_P(BothForms, WithoutRngRestoreTheMasksDiffer) {
  manual_seed(0);
  auto m = dropout_mlp(16, 2);
  Tensor x = randn({8, 16});
  manual_seed(1);
  m->zero_grad();
  m->forward(x).pow(2).sum().backward();
  auto plain = grads_of(*m);
  manual_seed(1);
  m->zero_grad();
  autograd::checkpoint([&](const TensorList& in) { return TensorList{m->forward(in[0])}; }, {x},
                       /*preserve_rng_state=*/false, GetParam())[0]
      .pow(2)
      .sum()
      .backward();
  auto g = grads_of(*m);
  EXPECT_FALSE(allclose(g[0], plain[0], 1e-6, 1e-7)) << "the re-run drew new masks";
}

TEST_P(BothForms, SequentialSegmentsEqualPlainAndKeepFewerActivations) {
  manual_seed(2);
  auto m = dropout_mlp(512, 6);
  Tensor x = randn({256, 512});  // no input requires grad: parameters still get gradients
  manual_seed(3);
  m->zero_grad();
  const int64_t base = memory_stats().allocated;
  Tensor y = m->forward(x);
  const int64_t held_plain = memory_stats().allocated - base;
  y.pow(2).sum().backward();
  y = Tensor();
  auto plain = grads_of(*m);
  for (int64_t segments : {1, 2, 4, 19}) {
    SCOPED_TRACE(segments);
    manual_seed(3);
    m->zero_grad();
    const int64_t base2 = memory_stats().allocated;
    Tensor yc = autograd::checkpoint_sequential(m, segments, x, GetParam());
    const int64_t held = memory_stats().allocated - base2;
    if (segments == 4) {
      // 19 modules in 4 segments: the plain forward keeps ~3 activations of 512 KiB per layer
      // (linear out, relu mask/out, dropout mask/out); the checkpointed one keeps each segment's
      // output and the last segment's activations.
      EXPECT_LT(held * 2, held_plain) << "plain " << held_plain << " B, checkpointed " << held;
    }
    yc.pow(2).sum().backward();
    expect_same_grads(grads_of(*m), plain);
  }
}

// The zoo's in-place ReLUs (as torchvision's) at a segment's start write into the segment's
// input, from which the backward re-runs it: the gradients are still the plain run's, with every
// module a segment of its own and with two (PyTorch 1.13 raises "a leaf Variable that requires
// grad is being used in an in-place operation" for the first).
TEST_P(BothForms, InPlaceReluAtASegmentsStartGivesThePlainGradients) {
  manual_seed(4);
  auto m = models::lenet({1, 28, 10});
  ASSERT_EQ(m->size(), 10u);
  const Tensor x = randn({3, 1, 28, 28});
  m->zero_grad();
  m->forward(x).pow(2).sum().backward();
  const auto plain = grads_of(*m);
  for (int64_t segments : {10, 2}) {
    SCOPED_TRACE(segments);
    m->zero_grad();
    autograd::checkpoint_sequential(m, segments, x.clone().requires_grad_(true), GetParam())
        .pow(2)
        .sum()
        .backward();
    expect_same_grads(grads_of(*m), plain);
  }
  // Any in-place change of an input, not only an idempotent one: sin(3 x), x written by fn.
  Tensor x2 = randn({5}, kFloat64).requires_grad_(true);
  auto triple_then_sin = [](const std::vector<Tensor>& in) {
    Tensor a = in[0];
    a.mul_(3);
    return std::vector<Tensor>{a.sin()};
  };
  Tensor y = autograd::checkpoint(triple_then_sin, {x2 * 1.0}, true, GetParam())[0];
  y.sum().backward();
  const Tensor expected = (x2.detach() * 3).cos() * 3;
  EXPECT_TRUE(allclose(x2.grad(), expected, 1e-12, 1e-12));
  EXPECT_TRUE(allclose(y.detach(), (x2.detach() * 3).sin(), 1e-12, 1e-12));
}

TEST(ActivationCheckpoint, ErrorsNameTheFault) {
  auto m = dropout_mlp(4, 1);
  EXPECT_THAT(error_of([&] {
                autograd::checkpoint_sequential(m, 0, ones({1, 4}));
              }),
              HasSubstr("checkpoint_sequential: 0 segments for a Sequential of 4 modules"));
  EXPECT_THAT(error_of([&] {
                autograd::checkpoint_sequential(m, 5, ones({1, 4}));
              }),
              HasSubstr("checkpoint_sequential: 5 segments for a Sequential of 4 modules"));
  EXPECT_THAT(error_of([&] { autograd::checkpoint(nullptr, {ones({1})}); }),
              HasSubstr("checkpoint: the function is empty"));
  // An input changed in place before backward.
  Tensor x = ones({2, 4}).requires_grad_(true);
  Tensor h = x * 1;
  Tensor y = autograd::checkpoint(
      [&](const TensorList& in) { return TensorList{m->forward(in[0])}; }, {h})[0];
  h.add_(1);
  EXPECT_THAT(error_of([&] { y.sum().backward(); }),
              HasSubstr("has been modified by an in-place operation"));
  // Double backward and autograd::grad through a reentrant checkpoint.
  Tensor x2 = ones({2, 4}).requires_grad_(true);
  Tensor y2 =
      autograd::checkpoint([](const TensorList& in) { return TensorList{in[0] * in[0]}; }, {x2})[0];
  EXPECT_THAT(error_of([&] { autograd::grad({y2.sum()}, {x2}, {}, true, true); }),
              HasSubstr("checkpoint: double backward (create_graph) through a reentrant "
                        "checkpoint is not supported; use use_reentrant=false"));
  EXPECT_THAT(error_of([&] { autograd::grad({y2.sum()}, {x2}); }),
              HasSubstr("checkpoint: autograd::grad (or backward with `inputs`) cannot go "
                        "through a reentrant checkpoint, whose backward accumulates into .grad(); "
                        "use use_reentrant=false"));
  // Under no_grad the function just runs.
  NoGradGuard ng;
  EXPECT_FALSE(
      autograd::checkpoint([](const TensorList& in) { return TensorList{in[0] * 2}; }, {x2})[0]
          .requires_grad());
}

// Non-reentrant: the graph is the plain one with its saved tensors recomputed, so
// autograd::grad returns the gradients without touching .grad(), and second derivatives work.
TEST(ActivationCheckpoint, NonReentrantSupportsGradAndDoubleBackward) {
  manual_seed(5);
  auto lin = std::make_shared<nn::Linear>(6, 6);
  lin->to(kFloat64);
  Tensor x = randn({3, 6}, kFloat64).requires_grad_(true);
  auto block = [&](const TensorList& in) { return TensorList{lin->forward(in[0]).tanh() * in[0]}; };
  auto run = [&](bool checkpointed) {
    TensorList y = checkpointed ? autograd::checkpoint(block, {x}, true, false) : block({x});
    Tensor loss = y[0].pow(2).sum();
    TensorList g = autograd::grad({loss}, {x, lin->weight}, {}, true, /*create_graph=*/true);
    // A Hessian-vector product: the gradient of <g, v>.
    Tensor gv = (g[0] * x.detach().cos()).sum() + g[1].sum();
    TensorList hv = autograd::grad({gv}, {x, lin->weight});
    return TensorList{g[0].detach(), g[1].detach(), hv[0], hv[1]};
  };
  const TensorList plain = run(false), ck = run(true);
  for (size_t i = 0; i < plain.size(); ++i)
    EXPECT_TRUE(allclose(ck[i], plain[i], 1e-12, 1e-12)) << i;
  EXPECT_FALSE(lin->weight.grad().defined()) << "autograd::grad accumulated into .grad()";
  // gradgradcheck through a checkpoint with dropout inside (same masks each run).
  auto fn = [&](const TensorList& in) {
    manual_seed(7);
    return autograd::checkpoint(
        [](const TensorList& a) {
          return TensorList{nn::functional::dropout((a[0] * a[1]).sin(), 0.5, true) * a[1]};
        },
        in, true, false);
  };
  Tensor a = randn({4}, kFloat64).requires_grad_(true),
         b = randn({4}, kFloat64).requires_grad_(true);
  EXPECT_TRUE(autograd::gradcheck(fn, {a, b}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {a, b}));
}

TEST(ActivationCheckpoint, NonReentrantRecomputesForEachBackwardAndNests) {
  manual_seed(6);
  auto m = dropout_mlp(8, 3);
  Tensor x = randn({5, 8}).requires_grad_(true);
  manual_seed(8);
  m->zero_grad();
  m->forward(x).pow(2).sum().backward();
  auto plain = grads_of(*m);
  Tensor plain_x = x.grad().clone();
  // A checkpoint inside a checkpoint, and backward twice with retain_graph: each backward runs
  // the function again and the gradients double.
  int runs = 0;
  auto inner = [&](const TensorList& in) {
    ++runs;
    return TensorList{(*m)[0]->forward(in[0])};
  };
  auto outer = [&](const TensorList& in) {
    Tensor h = autograd::checkpoint(inner, {in[0]}, true, false)[0];
    for (size_t i = 1; i < m->size(); ++i) h = (*m)[i]->forward(h);
    return TensorList{h};
  };
  manual_seed(8);
  m->zero_grad();
  x.set_grad(Tensor());
  Tensor y = autograd::checkpoint(outer, {x}, true, false)[0];
  EXPECT_EQ(runs, 1);
  y.pow(2).sum().backward(Tensor(), /*retain_graph=*/true);
  auto once = grads_of(*m);
  expect_same_grads(once, plain);
  EXPECT_TRUE(allclose(x.grad(), plain_x, 1e-6, 1e-7));
  y.pow(2).sum().backward();
  for (size_t i = 0; i < once.size(); ++i)
    EXPECT_TRUE(allclose(grads_of(*m)[i], plain[i] * 2, 1e-5, 1e-6)) << i;
  EXPECT_GE(runs, 3) << "each backward re-runs the function";
}

TEST(ActivationCheckpoint, NonReentrantErrorsNameTheFault) {
  // An input changed in place before backward.
  Tensor x = ones({2, 4}).requires_grad_(true);
  Tensor h = x * 1;
  auto square = [](const TensorList& in) { return TensorList{in[0] * in[0]}; };
  Tensor y = autograd::checkpoint(square, {h}, true, false)[0];
  h.add_(1);
  EXPECT_THAT(error_of([&] { y.sum().backward(); }),
              HasSubstr("checkpoint: input 0 (a float32 tensor of shape [2, 4]) was modified by "
                        "an in-place operation after the checkpointed forward"));
  // A function that runs other ops the second time.
  int calls = 0;
  auto changing = [&](const TensorList& in) {
    return TensorList{++calls == 1 ? in[0].exp() : in[0].exp().exp()};
  };
  y = autograd::checkpoint(changing, {x}, true, false)[0];
  EXPECT_THAT(error_of([&] { y.sum().backward(); }),
              HasSubstr("checkpoint: the function saved 2 tensors for backward when run again in "
                        "backward but 1 in the forward"));
  calls = 0;
  auto reshaping = [&](const TensorList& in) {
    return TensorList{(++calls == 1 ? in[0] : in[0].t()).exp().sum()};
  };
  y = autograd::checkpoint(reshaping, {x}, true, false)[0];
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("checkpoint: saved tensor 0 of the function is a float32 tensor of shape "
                        "[4, 2] when run again in backward but was a float32 tensor of shape "
                        "[2, 4] in the forward"));
}
