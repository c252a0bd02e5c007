// The op tracer: a forward of the zoo's MLP, LeNet and ResNet-18 recorded op by op, printed, and
// replayed through the registry bit for bit.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

jit::OpTrace trace_module(const std::shared_ptr<nn::Module>& m, const Tensor& x) {
  return jit::trace_ops([&](const TensorList& in) { return TensorList{m->forward(in[0])}; }, {x});
}

/// Every traced op's name, in order.
std::vector<std::string> op_names(const jit::OpTrace& t) {
  std::vector<std::string> names;
  for (const jit::TracedCall& c : t.calls) names.push_back(c.op);
  return names;
}

void expect_replay_bitwise(const jit::OpTrace& t, const Tensor& x, const Tensor& expected) {
  TensorList again = t.replay({x});
  ASSERT_EQ(again.size(), 1u);
  EXPECT_TRUE(again[0].sizes().equals(expected.sizes()));
  EXPECT_TRUE(equal(again[0], expected)) << "replay differs from the traced forward";
}

}  // namespace

TEST(Trace, MlpForwardIsItsOpsWithAttributesAndShapes) {
  manual_seed(0);
  auto m = models::mlp();
  m->eval();
  Tensor x = randn({4, 1, 28, 28});
  Tensor y;
  jit::OpTrace t = trace_module(m, x);
  {
    NoGradGuard g;
    y = m->forward(x);
  }
  // Sequential runs each module; the zoo's ReLUs are in place.
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"flatten.using_ints", "linear", "relu_",
                                                   "linear", "relu_", "linear"}));
  const std::string s = t.str();
  EXPECT_THAT(s, HasSubstr("trace(%x0 : float32[4, 1, 28, 28]):"));
  EXPECT_THAT(s,
              HasSubstr("%0 : float32[4, 784] = flatten.using_ints(%x0, start_dim=1, end_dim=-1)"));
  EXPECT_THAT(s, HasSubstr("%1 : float32[4, 512] = linear(%0, %c0, %c1)"));
  EXPECT_THAT(s, HasSubstr("%2 : float32[4, 512] = relu_(%1)"));
  EXPECT_THAT(s, HasSubstr("return (%5)"));
  EXPECT_THAT(s, HasSubstr("%c0 : float32[512, 784]"));
  // The traced call returned the model's output; replay gives it again, bit for bit.
  TensorList traced_out = t.replay({x});
  EXPECT_TRUE(equal(traced_out[0], y));
  // On new inputs the replay is the model's forward on them.
  Tensor x2 = randn({4, 1, 28, 28});
  Tensor y2 = m->forward(x2);
  expect_replay_bitwise(t, x2, y2);
}

TEST(Trace, LeNetReplaysBitForBit) {
  manual_seed(1);
  auto m = models::lenet();
  m->eval();
  Tensor x = randn({2, 1, 28, 28});
  jit::OpTrace t = trace_module(m, x);
  Tensor y = m->forward(x);
  expect_replay_bitwise(t, x, y);
  const std::string s = t.str();
  EXPECT_THAT(s, HasSubstr("= conv2d(%x0"));
  EXPECT_THAT(s, HasSubstr("relu_("));
  EXPECT_THAT(s, HasSubstr("max_pool2d"));
  EXPECT_THAT(s, HasSubstr("stride=[1, 1], padding=[2, 2]"));
}

TEST(Trace, ResNet18ReplaysBitForBit) {
  manual_seed(2);
  auto m = models::resnet18({3, 32, 10});
  m->eval();
  Tensor x = randn({2, 3, 32, 32});
  jit::OpTrace t = trace_module(m, x);
  Tensor y = m->forward(x);
  expect_replay_bitwise(t, x, y);
  // Every op of the forward is a registry record, and batch norm's attributes are kept.
  for (const jit::TracedCall& c : t.calls) EXPECT_NE(op::find(c.op), nullptr) << c.op;
  EXPECT_THAT(t.str(), HasSubstr("batch_norm"));
  EXPECT_THAT(t.str(), HasSubstr("eps=1e-05"));
}

TEST(Trace, InPlaceOpsAreNewValues) {
  Tensor x = ones({3});
  jit::OpTrace t = jit::trace_ops(
      [](const TensorList& in) {
        Tensor y = in[0] * 2;
        y.add_(1);
        return TensorList{y};
      },
      {x});
  EXPECT_EQ(op_names(t), (std::vector<std::string>{"mul.Scalar", "add_.Scalar"}));
  EXPECT_THAT(t.str(), HasSubstr("%1 : float32[3] = add_.Scalar(%0, other=1, alpha=1)"));
  TensorList r = t.replay({full({3}, 5.0)});
  EXPECT_EQ(r[0].sum().item<double>(), 33.0);
}

TEST(Trace, ReplayErrorsNameTheOp) {
  Tensor x = ones({2});
  jit::OpTrace t =
      jit::trace_ops([](const TensorList& in) { return TensorList{in[0].mul(3)}; }, {x});
  ASSERT_EQ(t.calls.size(), 1u);
  jit::OpTrace unknown = t;
  unknown.calls[0].op = "no_such_op";
  EXPECT_THAT(error_of([&] { unknown.replay({x}); }),
              HasSubstr("replay: unknown op 'no_such_op' (not in the registry"));
  jit::OpTrace wrong = t;
  wrong.calls[0].args[1] = op::IValue(std::string("three"));
  EXPECT_THAT(error_of([&] { wrong.replay({x}); }),
              HasSubstr("mul.Scalar: argument 'other' expects Scalar but got str 'three'"));
  EXPECT_THAT(error_of([&] { t.replay({}); }),
              HasSubstr("replay: the trace takes 1 inputs but got 0"));
}
