// Masks in graph mode's fused kernels: comparisons, logical ops and where as program ops, bool
// inputs read as 1 or 0 in every layout, masked_fill and where fused into elementwise chains and
// into a softmax's prologue (an attention softmax) or a statistic's, training through them.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>
#include <vector>

#include "fusion_test_util.h"
#include "ignis/ignis.h"
#include "jit/fused_program.h"
#include "jit/passes.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

using ignis::testing::Backend;
using ignis::testing::kBackends;
using ignis::testing::expect_close;
using ignis::testing::uniform;

namespace {

Tensor random_mask(IntArrayRef shape, double p = 0.3) { return rand(shape, kFloat64) < p; }

TEST(FusedMasks, ProgramsParsePrintAndRefuseNamingTheFault) {
  const std::string text =
      "gt(i0,i1);where(v0,i0,-inf);logical_not(i2);logical_or(v2,i2);where(v3,v1,0.5);"
      "eq(1,v4);ne(v5,i0);le(v6,2);ge(i1,v7);lt(v8,i0);logical_and(v9,v9)";
  EXPECT_EQ(jit::detail::parse_fused_program(text, 3).str(), text);
  auto fails = [](const std::string& t, int n, const std::string& what) {
    EXPECT_THAT(error_of([&] { (void)jit::detail::parse_fused_program(t, n); }), HasSubstr(what))
        << t;
  };
  fails("where(i0,i1)", 2, "expected ','");
  fails("where(i0,i1,i0,2)", 2, "expected ')'");
  fails("where(i0,i1,i2)", 2, "input i2 of a node with 2 input(s)");
  fails("logical_not(2)", 1, "expected an input (i<k>) or a value (v<j>)");
  const Tensor x = uniform({2, 3}, -1, 1), m = random_mask({2, 3});
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_elementwise({m, m}, "where(i0,1,i1)");
              }),
              HasSubstr("fused_elementwise: every input is bool; a program needs a float32 or "
                        "float64 one"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_elementwise({m, x, x.to(kFloat64)}, "where(i0,i1,i2)");
              }),
              HasSubstr("fused_elementwise: inputs must all be float32 or all float64 (or bool "
                        "masks); input 1 is float32, input 2 is float64"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_reduction({m, x}, "softmax", 1, "", "");
              }),
              HasSubstr("fused_reduction: softmax without a prologue reduces input 0, which is "
                        "bool (a mask); it must be float32"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_reduction({m, x}, "mean,sum", 1, "|", "");
              }),
              HasSubstr("without a prologue reduces input 0, which is bool"));
}

TEST(FusedMasks, BoolInputsInEveryLayoutEqualEagerWithBothBackends) {
  // masked_fill's form, where(m, -inf, x), and a mask as a factor (x * m promotes it), with the
  // mask full, a row repeated, one value per row, one value, and a general broadcast; float32
  // and float64, the generated kernel and the interpreter.
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = uniform({4, 6}, -2, 2, dt);
    const std::vector<Tensor> masks = {random_mask({4, 6}),    random_mask({6}),
                                       random_mask({4, 1}),    ones({}, kBool),
                                       random_mask({3, 1, 6}), random_mask({6, 4}).t()};
    for (const Tensor& m : masks) {
      std::ostringstream shape;
      shape << m.sizes();
      const std::string what = std::string(dtype_name(dt)) + " mask " + shape.str();
      for (const char* backend : kBackends) {
        Backend guard(backend);
        expect_close(jit::fused_elementwise({x, m}, "where(i1,-inf,i0)"),
                     x.masked_fill(m, -INFINITY), 0, what + " " + backend);
        expect_close(jit::fused_elementwise({m, x}, "mul(i1,i0);add(v0,i0,1)"), x * m + m, 0,
                     what + " " + backend + " as a factor");
      }
    }
  }
}

TEST(FuseElementwise, ComparisonsMasksAndWhereJoinTheChain) {
  // where(x > y, 1.5 x, y), masked_fill with a bool input, a mask from a comparison as a factor,
  // logical ops: one node, eager's values with both backends; float64 first and second
  // derivatives through the fused backward (nothing to the mask, as eager).
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& x = in[0];
    const Tensor& y = in[1];
    const Tensor& m = in[2];
    Tensor t = where(x > y, x * 1.5, y).masked_fill(m, 0.5);
    t = t * (x < 0.25) + where(logical_and(logical_not(m), y >= 0), t * t, -1.0);
    return std::vector<Tensor>{t.tanh()};
  };
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = uniform({5, 8}, -1, 1, dt), y = uniform({8}, -1, 1, dt);
    const Tensor m = random_mask({5, 1});
    NoGradGuard ng;
    jit::Graph g = jit::trace(fn, {x, y, m});
    const Tensor eager = fn({x, y, m})[0];
    EXPECT_EQ(jit::fuse_elementwise(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    for (const char* op : {"gt(i0,i1)", "where(i2,0.5,v", "lt(i0,0.25)", "logical_not(i2)",
                           "ge(i1,0)", "logical_and(", ",-1)"})
      EXPECT_THAT(g.str(), HasSubstr(op));
    for (const char* backend : kBackends) {
      Backend guard(backend);
      expect_close(g.run({x, y, m})[0], eager, dt == kFloat32 ? 1e-6 : 1e-15,
                   std::string(backend) + " " + std::string(dtype_name(dt)));
    }
  }
  Tensor x = uniform({5, 8}, -1, 1, kFloat64).requires_grad_(true);
  Tensor y = uniform({8}, -1, 1, kFloat64).requires_grad_(true);
  const Tensor m = random_mask({5, 1});
  jit::Graph g = jit::trace(fn, {x, y, m});
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  const Tensor gy = uniform({5, 8}, -1, 1, kFloat64);
  const Tensor eager = fn({x, y, m})[0];
  const std::vector<Tensor> ge = autograd::grad({eager}, {x, y}, {gy}, std::nullopt, true);
  const Tensor gge = autograd::grad({ge[0].sum()}, {x})[0];
  for (const char* backend : kBackends) {
    Backend guard(backend);
    const Tensor out = g.run({x, y, m})[0];
    EXPECT_EQ(out.grad_fn()->name(), "FusedElementwiseBackward0") << backend;
    const std::vector<Tensor> gf = autograd::grad({out}, {x, y}, {gy}, std::nullopt, true);
    expect_close(gf[0].detach(), ge[0].detach(), 1e-13, std::string(backend) + " d/dx");
    expect_close(gf[1].detach(), ge[1].detach(), 1e-13, std::string(backend) + " d/dy");
    expect_close(autograd::grad({gf[0].sum()}, {x})[0], gge, 1e-12,
                 std::string(backend) + " second derivative");
  }
}

TEST(FuseElementwise, AMaskFromAnotherDtypeStaysAnInput) {
  // A comparison of float64 values feeding a float32 chain is computed by its op and read as a
  // bool input; a chain reading masks alone (a mask times a number) is not fused.
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * 2.0).masked_fill(in[1] > 0, 0.0).exp(),
                               (in[1] < 0) * 3.0 + 1.0};
  };
  const Tensor x = uniform({3, 4}, -1, 1), d = uniform({3, 4}, -1, 1, kFloat64);
  NoGradGuard ng;
  jit::Graph g = jit::trace(fn, {x, d});
  const std::vector<Tensor> eager = fn({x, d});
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  EXPECT_EQ(g.count("gt.Scalar"), 1) << g.str();
  EXPECT_EQ(g.count("lt.Scalar"), 1) << g.str();
  EXPECT_EQ(g.count("add.Scalar"), 1) << g.str();
  EXPECT_THAT(g.str(), HasSubstr("mul(i0,2);where(i1,0,v0);exp(v1)"));
  const std::vector<Tensor> out = g.run({x, d});
  expect_close(out[0], eager[0], 0, "float32 chain, float64 mask");
  expect_close(out[1], eager[1], 0, "a mask's chain");
}

TEST(FuseReductions, AMaskedAttentionSoftmaxIsOneNode) {
  // softmax(masked_fill(s * scale, mask, -inf)) with a causal mask and a padding mask (rows
  // entirely masked give NaN, as eager's): the scaling and the fill are the softmax's prologue,
  // the masks bool inputs; eager's values with both backends, and its gradients in training.
  const int64_t T = 8;
  const Tensor causal = arange(T).unsqueeze(1) < arange(T).unsqueeze(0);  // [T, T]
  // batch 0: 5 tokens; batch 1: none (rows of -inf, NaN)
  const Tensor padding =
      cat({(arange(T) >= 5).reshape({1, 1, 1, T}), ones({1, 1, 1, T}, kBool)}, 0);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor s = in[0] * 0.35;
    return std::vector<Tensor>{
        softmax(s.masked_fill(in[1], -INFINITY).masked_fill(in[2], -INFINITY), -1)};
  };
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor s = uniform({2, 3, T, T}, -4, 4, dt);
    NoGradGuard ng;
    jit::Graph g = jit::trace(fn, {s, causal, padding});
    const Tensor eager = fn({s, causal, padding})[0];
    jit::fuse_elementwise(g);
    EXPECT_EQ(jit::fuse_reductions(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(),
                HasSubstr("reduction='softmax', dims=1, prologue='mul(i0,0.34999999999999998)"
                          ";where(i1,-inf,v0);where(i2,-inf,v1)'"));
    EXPECT_TRUE(isnan(eager.index({1})).all().item<bool>());
    for (const char* backend : kBackends) {
      Backend guard(backend);
      expect_close(g.run({s, causal, padding})[0], eager, dt == kFloat32 ? 1e-6 : 1e-15,
                   std::string(backend) + " " + std::string(dtype_name(dt)));
    }
  }
  // Training (batch 0 only: finite rows).
  Tensor s = uniform({1, 3, T, T}, -4, 4, kFloat64).requires_grad_(true);
  const Tensor pad0 = padding.narrow(0, 0, 1);
  jit::Graph g = jit::trace(fn, {s, causal, pad0});
  jit::fuse_elementwise(g);
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  const Tensor gy = uniform({1, 3, T, T}, -1, 1, kFloat64);
  const Tensor ge = autograd::grad({fn({s, causal, pad0})[0]}, {s}, {gy})[0];
  for (const char* backend : kBackends) {
    Backend guard(backend);
    const Tensor out = g.run({s, causal, pad0})[0];
    EXPECT_EQ(out.grad_fn()->name(), "FusedReductionBackward0") << backend;
    expect_close(autograd::grad({out}, {s}, {gy})[0], ge, 1e-14, std::string(backend) + " d/ds");
  }
}

TEST(FuseReductions, AMaskedSumIsAFusedStatistic) {
  // x.masked_fill(m, 0).sum(-1) and the max of the unmasked values: statistics with the fill as
  // their prologue (the kernel over parts of rows, the interpreter).
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].masked_fill(in[1], 0.0).sum({-1}),
                               amax(where(in[1], -INFINITY, in[0] * 2.0), {-1}, true)};
  };
  for (int64_t C : {16, 3000}) {
    const Tensor x = uniform({6, C}, -1, 1), m = random_mask({6, C}, 0.5);
    NoGradGuard ng;
    jit::Graph g = jit::trace(fn, {x, m});
    const std::vector<Tensor> eager = fn({x, m});
    jit::fuse_elementwise(g);
    EXPECT_EQ(jit::fuse_reductions(g), 2);
    EXPECT_EQ(g.count("fused_reduction"), 2) << g.str();
    EXPECT_THAT(g.str(), HasSubstr("prologue='where(i0,0,i1)'"));
    for (const char* backend : kBackends) {
      Backend guard(backend);
      const std::vector<Tensor> out = g.run({x, m});
      expect_close(out[0], eager[0], 2e-5, std::string(backend) + " masked sum");
      expect_close(out[1], eager[1], 0, std::string(backend) + " masked max");
    }
  }
}

}  // namespace
