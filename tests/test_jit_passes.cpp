// Graph passes, each before and after: the nodes it removes or rewrites, and the graph's
// results unchanged (bit for bit, or within float tolerance where arithmetic is reassociated).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/ignis.h"
#include "call_log.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

std::vector<std::string> op_names(const jit::Graph& g) {
  std::vector<std::string> names;
  for (const jit::Node& n : g.nodes) names.push_back(n.name());
  return names;
}

using Names = std::vector<std::string>;

}  // namespace

TEST(JitPasses, DeadCodeEliminationKeepsEffects) {
  Tensor w = full({4}, 3.0);
  Tensor unused_const = full({4}, 5.0);
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor a = in[0] * 2;
        Tensor dead = (in[0] + unused_const).exp();  // never used
        (void)dead;
        Tensor d =
            nn::functional::dropout(in[0], 0.5, true);  // random: drawing numbers is an effect
        (void)d;
        Tensor b = in[0].clone();
        b.add_(w);  // in place: kept even though b is not returned
        return TensorList{a};
      },
      {ones({4})});
  EXPECT_EQ(op_names(g),
            (Names{"mul.Scalar", "add.Tensor", "exp", "dropout", "clone", "add_.Tensor"}));
  Tensor before = g.run({full({4}, 2.0)})[0];
  EXPECT_EQ(jit::eliminate_dead_code(g), 2);
  // clone stays: add_ writes into its result.
  EXPECT_EQ(op_names(g), (Names{"mul.Scalar", "dropout", "clone", "add_.Tensor"}));
  EXPECT_THAT(g.str(), Not(HasSubstr("float32[4]; %c1")));  // the unused constant is gone
  int consts = 0;
  for (const jit::Value& v : g.values) consts += v.kind == jit::ValueKind::Constant;
  EXPECT_EQ(consts, 1);
  EXPECT_TRUE(equal(g.run({full({4}, 2.0)})[0], before));
  EXPECT_EQ(jit::eliminate_dead_code(g), 0);
}

TEST(JitPasses, CommonSubexpressionElimination) {
  jit::Graph g = jit::trace(
      [](const TensorList& in) {
        Tensor a = in[0].relu() + in[0].relu();               // merged
        Tensor s = in[0].sum({0}) + in[0].sum({1});           // different attributes: kept
        Tensor m = in[0].mul(0.1) + in[0].mul(0.1000000001);  // floats compared bit for bit
        Tensor r = nn::functional::dropout(in[0], 0.5, true) +
                   nn::functional::dropout(in[0], 0.5, true);  // random: kept
        return TensorList{a, s, m, r};
      },
      {randn({3, 3})});
  EXPECT_EQ(g.count("relu"), 2);
  Tensor x = randn({3, 3});
  manual_seed(1);
  TensorList before = g.run({x});
  EXPECT_EQ(jit::eliminate_common_subexpressions(g), 1);
  EXPECT_EQ(g.count("relu"), 1);
  EXPECT_EQ(g.count("sum.dim_IntList") + g.count("sum"), 2) << g.str();
  EXPECT_EQ(g.count("mul.Scalar"), 2);
  EXPECT_EQ(g.count("dropout"), 2);
  manual_seed(1);
  TensorList after = g.run({x});
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(before[i], after[i])) << i;
}

TEST(JitPasses, CseDoesNotMergeAcrossAnInPlaceWrite) {
  jit::Graph g = jit::trace(
      [](const TensorList& in) {
        Tensor x = in[0];
        Tensor v = x.view({4});
        Tensor a = v.exp();
        x.mul_(2);  // v's data changes
        Tensor b = v.exp();
        return TensorList{a, b};
      },
      {ones({2, 2})});
  EXPECT_EQ(jit::eliminate_common_subexpressions(g), 0);
  TensorList r = g.run({ones({2, 2})});
  EXPECT_FALSE(equal(r[0], r[1]));
}

TEST(JitPasses, ConstantFolding) {
  Tensor w = full({2, 3}, 2.0);
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor k = w.t().mul(3).exp();  // constants only: folded
        Tensor z = zeros({3, 2});       // a factory: folded
        return TensorList{in[0].matmul(k) + z.sum()};
      },
      {ones({4, 3})});
  EXPECT_EQ(op_names(g), (Names{"t", "mul.Scalar", "exp", "zeros", "sum", "matmul", "add.Tensor"}));
  Tensor x = randn({4, 3});
  Tensor before = g.run({x})[0];
  EXPECT_EQ(jit::fold_constants(g), 5);
  EXPECT_EQ(op_names(g), (Names{"matmul", "add.Tensor"}));
  EXPECT_TRUE(equal(g.run({x})[0], before));
  // Parameters are not constants until frozen.
  auto lin = std::make_shared<nn::Linear>(3, 2);
  jit::Graph p =
      jit::trace([&](const TensorList& in) { return TensorList{in[0].matmul(lin->weight.t())}; },
                 {ones({4, 3})}, lin->named_parameters());
  EXPECT_EQ(jit::fold_constants(p), 0);
  EXPECT_EQ(jit::freeze_parameters(p), 1);  // the bias is not used
  EXPECT_EQ(jit::fold_constants(p), 1);
  EXPECT_EQ(op_names(p), (Names{"matmul"}));
  NoGradGuard ng;
  EXPECT_TRUE(equal(p.run({x})[0], x.matmul(lin->weight.t())));
}

TEST(JitPasses, BatchNormFoldsIntoTheConvolution) {
  manual_seed(2);
  auto m = std::make_shared<nn::Sequential>(nn::Conv2d(3, 6, 3, 1, 1, 1, 1, /*bias=*/false),
                                            nn::BatchNorm2d(6), nn::ReLU(), nn::Conv2d(6, 4, 3),
                                            nn::BatchNorm2d(4));
  {
    NoGradGuard ng;  // statistics and affine parameters that are not the identity
    for (const char* bn : {"1", "4"}) {
      const std::string p(bn);
      auto& rm = m->get(p + ".running_mean");
      rm.copy_(randn(rm.sizes()));
      m->get(p + ".running_var").copy_(rand(rm.sizes()) + 0.5);
      m->get(p + ".weight").copy_(randn(rm.sizes()));
      m->get(p + ".bias").copy_(randn(rm.sizes()));
    }
  }
  m->eval();
  Tensor x = randn({2, 3, 9, 9});
  jit::Graph g = jit::trace(m, {x});
  EXPECT_EQ(op_names(g), (Names{"conv2d", "batch_norm", "relu", "conv2d", "batch_norm"}));
  NoGradGuard ng;
  Tensor before = g.run({x})[0];
  // Folding needs constants: nothing happens to a graph that still trains its parameters.
  EXPECT_EQ(jit::fold_batch_norm(g), 0);
  jit::freeze_parameters(g);
  EXPECT_EQ(jit::fold_batch_norm(g), 2);
  EXPECT_EQ(op_names(g), (Names{"conv2d", "relu", "conv2d"}));
  // The first convolution had no bias: it has one now.
  EXPECT_THAT(g.str(), HasSubstr("conv2d(%x0, %c0, %c1,"));
  EXPECT_TRUE(allclose(g.run({x})[0], before, 1e-5, 1e-5));
  EXPECT_EQ(jit::fuse_ops(g), 1);
  EXPECT_EQ(op_names(g), (Names{"conv2d_relu", "conv2d"}));
  EXPECT_TRUE(allclose(g.run({x})[0], before, 1e-5, 1e-5));
  // The module's own parameters are untouched.
  EXPECT_TRUE(equal(m->forward(x), before));
}

TEST(JitPasses, FuseConvLinearBiasRelu) {
  manual_seed(3);
  Tensor w = randn({5, 4}), b = randn({5}), cw = randn({3, 2, 3, 3}), cb = randn({3});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor h = relu(linear(in[0], w, b));        // -> linear_relu
        Tensor h2 = relu(linear(in[0], w) + b);      // -> linear with bias, then linear_relu
        Tensor c = conv2d(in[1], cw, cb, {1}, {1});  // used twice: not fused
        Tensor c2 = conv2d(in[1], cw, cb, {1}, {1}).relu_();  // relu_ -> conv2d_relu
        return TensorList{h + h2, c.relu() + c, c2};
      },
      {randn({2, 4}), randn({1, 2, 5, 5})});
  EXPECT_EQ(op_names(g),
            (Names{"linear", "relu", "linear", "add.Tensor", "relu", "conv2d.int_padding",
                   "conv2d.int_padding", "relu_", "add.Tensor", "relu", "add.Tensor"}));
  TensorList in{randn({2, 4}), randn({1, 2, 5, 5})};
  TensorList before = g.run(in);
  EXPECT_EQ(jit::fuse_ops(g), 4);
  // conv2d.int_padding (padding=1) becomes conv2d_relu with padding=[1, 1].
  EXPECT_EQ(op_names(g), (Names{"linear_relu", "linear_relu", "conv2d.int_padding", "conv2d_relu",
                                "add.Tensor", "relu", "add.Tensor"}));
  EXPECT_THAT(g.str(), HasSubstr("conv2d_relu(%x1, %c2, %c3, stride=[1], padding=[1, 1],"));
  TensorList after = g.run(in);
  for (size_t i = 0; i < before.size(); ++i)
    EXPECT_TRUE(allclose(after[i], before[i], 1e-5, 1e-6)) << i;
  EXPECT_EQ(jit::fuse_ops(g), 0);
}

TEST(JitPasses, FreezeResNetFoldsEveryBatchNormAndFusesRelus) {
  manual_seed(4);
  auto m = models::resnet18({3, 32, 10});
  m->eval();
  Tensor x = randn({1, 3, 32, 32});
  jit::Graph g = jit::trace(m, {x});
  const int bns = g.count("batch_norm");
  EXPECT_EQ(bns, 20);
  NoGradGuard ng;
  Tensor before = g.run({x})[0];
  jit::freeze(g);
  EXPECT_EQ(g.count("batch_norm"), 0);
  EXPECT_EQ(g.count("conv2d_relu"), 9) << g.str();      // stem + first conv of each of 8 blocks
  EXPECT_EQ(g.count("conv2d_add_relu"), 8) << g.str();  // the end of each block
  EXPECT_EQ(g.count("add.Tensor"), 0);
  EXPECT_TRUE(allclose(g.run({x})[0], before, 1e-4, 1e-4));
  EXPECT_TRUE(g.named_parameters().empty());
}

namespace {

using ignis::testing::CallLog;

}  // namespace

TEST(JitPasses, FuseResidualAddIntoTheConvolution) {
  manual_seed(5);
  Tensor w1 = randn({4, 4, 3, 3}) * 0.2, w2 = randn({4, 4, 3, 3}) * 0.2, b2 = randn({4});
  Tensor wd = randn({4, 4, 1, 1});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor h = conv2d(in[0], w1, Tensor(), {1}, {1, 1}).relu();
        Tensor out = conv2d(h, w2, b2, {1}, {1, 1});
        // The residual computed after the convolution (as a downsample branch is).
        Tensor down = conv2d(in[0], wd);
        return TensorList{relu(out + down)};
      },
      {randn({2, 4, 6, 6})});
  EXPECT_EQ(op_names(g), (Names{"conv2d", "relu", "conv2d", "conv2d", "add.Tensor", "relu"}));
  Tensor x = randn({2, 4, 6, 6});
  NoGradGuard ng;
  Tensor before = g.run({x})[0];
  EXPECT_EQ(jit::fuse_ops(g), 2);
  EXPECT_EQ(op_names(g), (Names{"conv2d_relu", "conv2d", "conv2d_add_relu"}));
  EXPECT_THAT(g.str(),
              HasSubstr("%2 : float32[2, 4, 6, 6] = conv2d_add_relu(%0, %c1, %c2, %1, stride=[1], "
                        "padding=[1, 1]"));
  EXPECT_TRUE(allclose(g.run({x})[0], before, 1e-5, 1e-5));
  // Float32 inference runs one oneDNN convolution (sum and relu post-ops): no nested ops.
  CallLog log;
  {
    op::InterposerGuard guard(&log);
    g.run({x});
  }
  EXPECT_EQ(log.names, (Names{"conv2d_relu", "conv2d", "conv2d_add_relu"}));
  // Channels-last runs fused too, and agrees with the composite in float64.
  Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor h = conv2d(xcl, w1, Tensor(), {1}, {1, 1}).relu();
  Tensor other = randn({2, 4, 6, 6}).contiguous(MemoryFormat::ChannelsLast);
  Tensor fused = conv2d_add_relu(h, w2, b2, other, {1}, {1, 1});
  EXPECT_EQ(fused.suggest_memory_format(), MemoryFormat::ChannelsLast);
  Tensor ref = relu(conv2d(h.to(kFloat64), w2.to(kFloat64), b2.to(kFloat64), {1}, {1, 1}) +
                    other.to(kFloat64));
  EXPECT_TRUE(allclose(fused.to(kFloat64), ref, 1e-5, 1e-5));
  EXPECT_THAT(error_of([&] { conv2d_add_relu(h, w2, b2, Tensor()); }),
              HasSubstr("conv2d_add_relu: other is undefined"));
}

// A training graph: each batch norm and its ReLU, and at a block's end the residual add, become
// one batch_norm_relu; the downsample branches' batch norms stay. Same bits before and after,
// forward, gradients and running statistics.
TEST(JitPasses, FuseBatchNormReluInATrainingResNet) {
  manual_seed(12);
  auto m = models::resnet18({3, 32, 10});
  m->train();
  Tensor x = randn({2, 3, 32, 32}).contiguous(MemoryFormat::ChannelsLast);
  jit::Graph g = jit::trace(m, {x});
  EXPECT_EQ(g.count("batch_norm"), 20);
  jit::Graph fused = g;
  // The stem and the first batch norm of each block with their ReLU (9), each block's end (8).
  EXPECT_EQ(jit::fuse_ops(fused), 17);
  EXPECT_EQ(fused.count("batch_norm_relu"), 17) << fused.str();
  EXPECT_EQ(fused.count("batch_norm"), 3) << fused.str();  // the downsample branches'
  EXPECT_EQ(fused.count("add.Tensor"), 0);
  EXPECT_THAT(fused.str(), HasSubstr("batch_norm_relu(%"));
  auto run = [&](jit::Graph& graph) {
    auto sd = m->state_dict();
    std::vector<Tensor> saved;
    for (auto& [k, v] : sd) saved.push_back(v.clone());
    m->zero_grad();
    Tensor y = graph.run({x})[0];
    y.pow(2).sum().backward();
    std::vector<Tensor> out{y.detach()};
    for (const Tensor& p : m->parameters()) out.push_back(p.grad().clone());
    NoGradGuard ng;
    for (size_t i = 0; i < sd.size(); ++i) {
      out.push_back(sd[i].second.clone());  // the updated running statistics
      sd[i].second.copy_(saved[i]);
    }
    return out;
  };
  auto before = run(g), after = run(fused);
  ASSERT_EQ(before.size(), after.size());
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(after[i], before[i])) << i;
}

// The residual fusion moves the batch norm to the ReLU's place, past the nodes between: not when
// one of them reads its running statistics, nor past a node writing into a tensor.
TEST(JitPasses, BatchNormResidualFusionStopsAtReadersOfItsStatistics) {
  Tensor rm = zeros({3}), rv = ones({3}), w = ones({3}), b = zeros({3});
  auto traced = [&](bool read_stats, bool write_between) {
    return jit::trace(
        [&, read_stats, write_between](const TensorList& in) {
          Tensor y = batch_norm(in[0], rm, rv, w, b, true, 0.1, 1e-5);
          Tensor other = in[1] * 2;
          if (read_stats) other = other + rm.view({1, 3, 1, 1});
          if (write_between) other.relu_();
          return TensorList{relu(y + other)};
        },
        {randn({2, 3, 4, 4}), randn({2, 3, 4, 4})});
  };
  jit::Graph plain = traced(false, false), reads = traced(true, false),
             writes = traced(false, true);
  EXPECT_EQ(jit::fuse_ops(plain), 1);
  EXPECT_EQ(plain.count("batch_norm_relu"), 1) << plain.str();
  EXPECT_EQ(jit::fuse_ops(reads), 0) << reads.str();
  EXPECT_EQ(reads.count("batch_norm"), 1);
  EXPECT_EQ(jit::fuse_ops(writes), 0) << writes.str();
  EXPECT_EQ(writes.count("batch_norm"), 1);
}

TEST(JitRun, FrozenConvolutionsKeepTheirPackedWeightUntilItChanges) {
  manual_seed(6);
  Tensor w = randn({8, 4, 3, 3}), b = randn({8}), other = randn({2, 8, 6, 6});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor y = conv2d(in[0], w, b, {1}, {1, 1});
        return TensorList{conv2d_relu(in[0], w, b, {1}, {1, 1}) + y,
                          conv2d_add_relu(in[0], w, Tensor(), other, {1}, {1, 1})};
      },
      {randn({2, 4, 6, 6})});
  ASSERT_EQ(g.count("conv2d"), 1);
  auto shared = std::make_shared<jit::Graph>(g);
  jit::Executor ex(shared);
  NoGradGuard ng;
  auto eager = [&](const Tensor& x) {
    return TensorList{relu(conv2d(x, w, b, {1}, {1, 1})) + conv2d(x, w, b, {1}, {1, 1}),
                      relu(conv2d(x, w, Tensor(), {1}, {1, 1}) + other)};
  };
  for (MemoryFormat fmt : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Tensor x = randn({2, 4, 6, 6}).contiguous(fmt);
    jit::Executor run(std::make_shared<jit::Graph>(jit::trace(
        [&](const TensorList& in) {
          return TensorList{
              conv2d_relu(in[0], w, b, {1}, {1, 1}) + conv2d(in[0], w, b, {1}, {1, 1}),
              conv2d_add_relu(in[0], w, Tensor(), other, {1}, {1, 1})};
        },
        {x})));
    for (int rep = 0; rep < 2; ++rep) {  // the second run uses the packed weights
      TensorList r = run.run({x}), e = eager(x);
      for (size_t k = 0; k < r.size(); ++k) EXPECT_TRUE(allclose(r[k], e[k], 1e-5, 1e-5)) << k;
    }
  }
  Tensor x = randn({2, 4, 6, 6});
  TensorList first = ex.run({x});
  // A write into the weight (its version changes): the next run packs it again.
  w.mul_(2);
  TensorList again = ex.run({x}), e = eager(x);
  for (size_t k = 0; k < again.size(); ++k) {
    EXPECT_TRUE(allclose(again[k], e[k], 1e-5, 1e-5)) << k;
    EXPECT_FALSE(allclose(again[k], first[k], 1e-5, 1e-5)) << k;
  }
  // With an interposer installed the ops' front ends run, so the profiler and tracers see them.
  CallLog log;
  {
    op::InterposerGuard guard(&log);
    ex.run({x});
  }
  EXPECT_EQ(log.names[0], "conv2d");
}

TEST(JitMemoryPlan, BuffersByLivenessViewsShareTheirInputs) {
  jit::Graph g = jit::trace(
      [](const TensorList& in) {
        Tensor a = in[0].exp();       // 0: buffer, read by 1 and (through b) by 2
        Tensor b = a.view({16, 16});  // 1: a view of a
        Tensor c = b * 2;             // 2: buffer
        Tensor d = c.sigmoid();       // 3: buffer (a is dead by now)
        return TensorList{d + 1};     // 4: buffer, the output
      },
      {ones({256})});
  EXPECT_EQ(op_names(g), (Names{"exp", "view", "mul.Scalar", "sigmoid", "add.Scalar"}));
  jit::MemoryPlan p = jit::plan_memory(g);
  auto id = [&](const std::string& name) {
    for (size_t v = 0; v < g.values.size(); ++v)
      if (g.values[v].name == name) return static_cast<size_t>(v);
    ADD_FAILURE() << name;
    return size_t{0};
  };
  EXPECT_EQ(p.buffer_of[id("1")], static_cast<int>(id("0")));  // the view uses exp's buffer
  EXPECT_EQ(p.offsets[id("1")], -1);
  EXPECT_EQ(p.buffer_of[id("x0")], -1);
  EXPECT_EQ(p.lifetime[id("0")], (std::pair<int, int>{0, 2}));  // read through the view by mul
  EXPECT_EQ(p.lifetime[id("4")], (std::pair<int, int>{4, 5}));  // an output lives to the end
  EXPECT_EQ(p.unplanned_bytes, 4 * 1024);                       // four 1 KiB buffers
  EXPECT_EQ(p.peak_live_bytes, 2 * 1024);                       // never more than two at once
  EXPECT_EQ(p.arena_bytes, 2 * 1024);
}

TEST(JitMemoryPlan, ResNetArenaHasNoOverlapAndReportsThePeaks) {
  manual_seed(7);
  auto m = models::resnet18({3, 32, 10});
  m->eval();
  jit::Graph g = jit::trace(m, {randn({2, 3, 32, 32})});
  jit::freeze(g);
  jit::MemoryPlan p = jit::plan_memory(g);
  std::vector<size_t> buffers;
  for (size_t v = 0; v < g.values.size(); ++v)
    if (p.buffer_of[v] == static_cast<int>(v)) buffers.push_back(v);
  auto bytes = [&](size_t v) {
    int64_t n = 1;
    for (int64_t d : g.values[v].sizes) n *= d;
    return n * static_cast<int64_t>(element_size(g.values[v].dtype));
  };
  for (size_t a : buffers) {
    EXPECT_GE(p.offsets[a], 0);
    EXPECT_LE(p.offsets[a] + bytes(a), p.arena_bytes);
    for (size_t b : buffers) {
      if (a >= b) continue;
      const auto &la = p.lifetime[a], &lb = p.lifetime[b];
      if (la.second < lb.first || lb.second < la.first) continue;  // never alive together
      const bool apart =
          p.offsets[a] + bytes(a) <= p.offsets[b] || p.offsets[b] + bytes(b) <= p.offsets[a];
      EXPECT_TRUE(apart) << g.values[a].name << " and " << g.values[b].name << " overlap";
    }
  }
  EXPECT_LE(p.peak_live_bytes, p.arena_bytes);
  EXPECT_LT(p.arena_bytes * 3, p.unplanned_bytes);
}

TEST(JitPasses, ResultsWrittenLaterAreNeitherMergedNorFolded) {
  Tensor c = full({4}, 2.0);
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor a = in[0].exp();
        Tensor b = in[0].exp();  // equal to a, but a is written below
        a.view({2, 2}).add_(1);  // through a view
        Tensor k = c.mul(3);     // constants only, but written below
        k.add_(in[0]);
        return TensorList{a, b, k};
      },
      {ones({4})});
  Tensor x = full({4}, 0.5);
  TensorList before = g.run({x});
  EXPECT_EQ(jit::eliminate_common_subexpressions(g), 0);
  EXPECT_EQ(jit::fold_constants(g), 0);
  EXPECT_EQ(g.count("exp"), 2);
  EXPECT_EQ(g.count("mul.Scalar"), 1);
  for (int run = 0; run < 2; ++run) {  // each run computes k afresh
    TensorList after = g.run({x});
    for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(after[i], before[i])) << i;
  }
}

// ---- fuse_linear_pointwise

namespace {

void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_TRUE(a.sizes().equals(b.sizes())) << what;
  EXPECT_TRUE(allclose(a, b, tol, tol))
      << what << ": max |diff| " << (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

/// A frozen node's packed weight `w`: the executor's runs equal fn's (the second one with the
/// packed weight), and after an in-place write into `w` (its version changes) it packs it again.
void expect_repacks_after_a_write(jit::Executor& ex,
                                  const std::function<TensorList(const TensorList&)>& fn,
                                  const Tensor& x, const Tensor& w) {
  Tensor first;
  for (int rep = 0; rep < 2; ++rep) {
    first = ex.run({x})[0];
    expect_close(first, fn({x})[0], 1e-5, "run " + std::to_string(rep));
  }
  w.mul_(2);
  const Tensor again = ex.run({x})[0];
  expect_close(again, fn({x})[0], 1e-5, "after a write into the weight");
  EXPECT_FALSE(allclose(again, first, 1e-3, 1e-3));
}

/// fn(x, r) traced with `params` and rewritten by `pass` (`fused` rewrites, leaving the one node
/// `node`): with grad (or in float64) the fused op is its ops one by one, so its output and the
/// gradients of x and of the parameters equal eager's bit for bit.
void expect_trains_as_eager(const std::function<TensorList(const TensorList&)>& fn,
                            const Tensor& x, const Tensor& r,
                            const std::vector<std::pair<std::string, Tensor>>& params,
                            int (*pass)(jit::Graph&), int fused, const std::string& node) {
  const std::string dt(dtype_name(x.dtype()));
  jit::Graph g = jit::trace(fn, {x, r}, params);
  std::vector<Tensor> leaves{x};
  for (const auto& [name, t] : params) leaves.push_back(t);
  fn({x, r})[0].sum().backward();
  std::vector<Tensor> grads;
  for (Tensor& t : leaves) {
    grads.push_back(t.grad().clone());
    t.grad().zero_();
  }
  EXPECT_EQ(pass(g), fused) << dt;
  EXPECT_EQ(op_names(g), (Names{node})) << dt;
  Tensor out = g.run({x, r})[0];
  EXPECT_TRUE(equal(out, fn({x, r})[0])) << dt;
  out.sum().backward();
  for (size_t k = 0; k < leaves.size(); ++k)
    EXPECT_TRUE(equal(leaves[k].grad(), grads[k])) << dt << ", leaf " << k;
  if (x.dtype() == kFloat64) {
    NoGradGuard ng;
    EXPECT_TRUE(equal(g.run({x, r})[0], fn({x, r})[0]));
  }
}

}  // namespace

TEST(JitPasses, FuseLinearActivationAndResidualIntoLinearPointwise) {
  manual_seed(11);
  Tensor w1 = randn({16, 8}) * 0.3, b1 = randn({16}) * 0.1;
  Tensor w2 = randn({8, 16}) * 0.3, b2 = randn({8}) * 0.1;
  Tensor w3 = randn({8, 8}) * 0.3;
  // A transformer MLP: x + linear2(gelu(linear1(x))); then silu(linear3(.)) and relu(linear(.)).
  auto fn = [&](const TensorList& in) {
    Tensor h = gelu(linear(in[0], w1, b1));
    Tensor y = in[0] + linear(h, w2, b2);  // the residual on the left: add(x, linear)
    Tensor s = silu(linear(y, w3));
    Tensor t = gelu(linear(s, w3), "tanh") + y;  // activation, then the residual
    return TensorList{t};
  };
  Tensor x = randn({24, 8});  // 8 rows or more: oneDNN's matmul with post-ops
  jit::Graph g = jit::trace(fn, {x}, {{"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}, {"w3", w3}});
  EXPECT_EQ(op_names(g), (Names{"linear", "gelu", "linear", "add.Tensor", "linear", "silu",
                                "linear", "gelu", "add.Tensor"}));
  NoGradGuard ng;
  const Tensor before = g.run({x})[0];
  EXPECT_EQ(jit::fuse_linear_pointwise(g), 5);
  EXPECT_EQ(op_names(g), (Names{"linear_pointwise", "linear_pointwise", "linear_pointwise",
                                "linear_pointwise"}));
  const std::string printed = g.str();
  EXPECT_THAT(printed, HasSubstr("linear_pointwise(%x0, %w1, %b1, None, activation='gelu', "
                                 "add_first=False)"));
  EXPECT_THAT(printed, HasSubstr("linear_pointwise(%0, %w2, %b2, %x0, activation='none', "
                                 "add_first=False)"));
  EXPECT_THAT(printed, HasSubstr("activation='silu'"));
  EXPECT_THAT(printed, HasSubstr("activation='gelu_tanh'"));
  // oneDNN's GELU and SiLU post-ops approximate erf and exp their own way.
  expect_close(g.run({x})[0], before, 1e-5, "fused");
  EXPECT_EQ(jit::fuse_linear_pointwise(g), 0);
}

TEST(JitPasses, FuseLinearPointwiseStopsAtOtherUsesAndBroadcastResiduals) {
  manual_seed(12);
  Tensor w = randn({6, 4}), b = randn({6});
  auto fn = [&](const TensorList& in) {
    Tensor a = linear(in[0], w, b);
    Tensor g1 = gelu(a);                 // a is also returned: not fused
    Tensor c = linear(in[0], w, b) + b;  // other [6] broadcast against [3, 6]: not fused
    Tensor d = linear(in[0], w) * 2.0;   // not an activation nor an add
    return TensorList{a, g1, c, d};
  };
  Tensor x = randn({3, 4});
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}, {"b", b}});
  const size_t nodes = g.nodes.size();
  EXPECT_EQ(jit::fuse_linear_pointwise(g), 0);
  EXPECT_EQ(g.nodes.size(), nodes);
}

TEST(JitPasses, LinearPointwiseTrainsAndRunsFloat64AsTheComposite) {
  // With grad (or in float64) the fused op is its ops one by one: the same results and
  // gradients as eager, bit for bit.
  manual_seed(13);
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor w = randn({5, 4}, dt).requires_grad_(true), b = randn({5}, dt).requires_grad_(true);
    Tensor x = randn({3, 4}, dt).requires_grad_(true), r = randn({3, 5}, dt);
    auto fn = [&](const TensorList& in) { return TensorList{silu(linear(in[0], w, b)) + in[1]}; };
    expect_trains_as_eager(fn, x, r, {{"w", w}, {"b", b}}, &jit::fuse_linear_pointwise, 2,
                           "linear_pointwise");
  }
  EXPECT_THAT(
      error_of([] {
        (void)jit::linear_pointwise(ones({2, 2}), ones({2, 2}), Tensor(), Tensor(), "swish");
      }),
      HasSubstr("linear_pointwise: unknown activation 'swish' (expected none, relu, gelu, "
                "gelu_tanh or silu)"));
}

TEST(JitPasses, ActivationOfLinearPlusResidualFusesWithAddFirst) {
  // gelu(linear(x) + r): the add makes a linear_pointwise with `other`, and the activation
  // then joins it after the residual (add_first): one oneDNN matmul, add then GELU post-ops.
  manual_seed(15);
  Tensor w = randn({12, 8}) * 0.3, b = randn({12}) * 0.1, r = randn({16, 12});
  auto fn = [&](const TensorList& in) {
    return TensorList{gelu(linear(in[0], w, b) + r), relu(in[1] + linear(in[0], w))};
  };
  Tensor x = randn({16, 8}), r2 = randn({16, 12});
  jit::Graph g = jit::trace(fn, {x, r2}, {{"w", w}, {"b", b}, {"r", r}});
  NoGradGuard ng;
  const TensorList before = g.run({x, r2});
  EXPECT_EQ(jit::fuse_linear_pointwise(g), 4);
  EXPECT_EQ(op_names(g), (Names{"linear_pointwise", "linear_pointwise"}));
  EXPECT_THAT(g.str(), HasSubstr("linear_pointwise(%x0, %w, %b, %r, activation='gelu', "
                                 "add_first=True)"));
  EXPECT_THAT(g.str(), HasSubstr("linear_pointwise(%x0, %w, None, %x1, activation='relu', "
                                 "add_first=True)"));
  CallLog log;  // each is one call: no nested linear, add or activation
  TensorList after;
  {
    op::InterposerGuard guard(&log);
    after = g.run({x, r2});
  }
  EXPECT_EQ(log.names, (Names{"linear_pointwise", "linear_pointwise"}));
  for (size_t k = 0; k < 2; ++k) expect_close(after[k], before[k], 1e-5, std::to_string(k));
  // add_first is the order: activation(y + r) against activation(y) + r.
  const Tensor y = linear(x, w, b);
  expect_close(jit::linear_pointwise(x, w, b, r, "silu", true), silu(y + r), 1e-5, "silu first");
  expect_close(jit::linear_pointwise(x, w, b, r, "silu"), silu(y) + r, 1e-5, "silu last");
}

// ---- fuse_conv_pointwise

TEST(JitPasses, FuseConvActivationAndResidualIntoConvPointwise) {
  manual_seed(16);
  Tensor w1 = randn({4, 4, 3, 3}) * 0.2, b1 = randn({4}) * 0.1;
  Tensor w2 = randn({4, 4, 3, 3}) * 0.2, b2 = randn({4}) * 0.1, w3 = randn({4, 4, 1, 1}) * 0.3;
  auto fn = [&](const TensorList& in) {
    Tensor h = silu(conv2d(in[0], w1, b1, {1}, {1, 1}));      // activation
    Tensor y = gelu(conv2d(h, w2, b2, {1}, {1, 1}) + in[0]);  // residual, then activation
    Tensor z = conv2d(y, w3) + h;                             // residual alone
    Tensor t = conv2d_relu(z, w3, Tensor()) + y;              // relu, then residual
    return TensorList{gelu(conv2d(t, w3, b1), "tanh")};
  };
  Tensor x = randn({2, 4, 6, 6});
  jit::Graph g = jit::trace(fn, {x}, {{"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}, {"w3", w3}});
  NoGradGuard ng;
  const Tensor before = g.run({x})[0];
  EXPECT_EQ(jit::fuse_conv_pointwise(g), 6);
  EXPECT_EQ(op_names(g), Names(5, "conv2d_pointwise"));
  const std::string printed = g.str();
  EXPECT_THAT(printed, HasSubstr("conv2d_pointwise(%x0, %w1, %b1, None, stride=[1], "
                                 "padding=[1, 1], dilation=[1], groups=1, activation='silu', "
                                 "add_first=False)"));
  EXPECT_THAT(printed, HasSubstr("groups=1, activation='gelu', add_first=True)"));
  EXPECT_THAT(printed, HasSubstr("groups=1, activation='none', add_first=False)"));
  EXPECT_THAT(printed, HasSubstr("groups=1, activation='relu', add_first=False)"));
  EXPECT_THAT(printed, HasSubstr("groups=1, activation='gelu_tanh', add_first=False)"));
  // Float32 inference runs each as one oneDNN convolution with post-ops: no nested ops.
  CallLog log;
  Tensor after;
  {
    op::InterposerGuard guard(&log);
    after = g.run({x})[0];
  }
  EXPECT_EQ(log.names, Names(5, "conv2d_pointwise"));
  expect_close(after, before, 1e-5, "fused");
  EXPECT_EQ(jit::fuse_conv_pointwise(g), 0);
  // Channels-last input: the fused convolution keeps the layout, and agrees with float64.
  Tensor xcl = x.contiguous(MemoryFormat::ChannelsLast);
  Tensor r = randn({2, 4, 6, 6}).contiguous(MemoryFormat::ChannelsLast);
  for (bool add_first : {false, true}) {
    Tensor fused = jit::conv2d_pointwise(xcl, w2, b2, r, {1}, {1, 1}, {1}, 1, "silu", add_first);
    EXPECT_EQ(fused.suggest_memory_format(), MemoryFormat::ChannelsLast);
    Tensor y = conv2d(xcl.to(kFloat64), w2.to(kFloat64), b2.to(kFloat64), {1}, {1, 1});
    Tensor ref = add_first ? silu(y + r.to(kFloat64)) : silu(y) + r.to(kFloat64);
    expect_close(fused.to(kFloat64), ref, 1e-5, add_first ? "add first" : "add last");
  }
  EXPECT_THAT(
      error_of([&] { (void)jit::conv2d_pointwise(x, w1, b1, Tensor(), {1}, {0}, {1}, 1, "tanh"); }),
      HasSubstr("conv2d_pointwise: unknown activation 'tanh' (expected none, relu, gelu, "
                "gelu_tanh or silu)"));
}

TEST(JitPasses, ConvPointwiseStopsAtOtherUsesAndTrainsAsTheComposite) {
  manual_seed(17);
  Tensor w = randn({3, 2, 3, 3}), b = randn({3});
  {
    auto fn = [&](const TensorList& in) {
      Tensor c = conv2d(in[0], w, b);
      Tensor s = silu(c);                                  // c is also returned: not fused
      Tensor d = conv2d(in[0], w, b) + b.view({3, 1, 1});  // a broadcast residual: not fused
      Tensor e = tanh(conv2d(in[0], w));                   // not an activation it takes
      return TensorList{c, s, d, e};
    };
    jit::Graph g = jit::trace(fn, {randn({1, 2, 5, 5})}, {{"w", w}, {"b", b}});
    const size_t nodes = g.nodes.size();
    EXPECT_EQ(jit::fuse_conv_pointwise(g), 0);
    EXPECT_EQ(g.nodes.size(), nodes);
  }
  // With grad (or in float64) the fused op is its ops one by one: the same results and
  // gradients as eager, bit for bit.
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor wg = randn({3, 2, 3, 3}, dt).requires_grad_(true);
    Tensor bg = randn({3}, dt).requires_grad_(true);
    Tensor x = randn({2, 2, 5, 5}, dt).requires_grad_(true), r = randn({2, 3, 3, 3}, dt);
    auto fn = [&](const TensorList& in) { return TensorList{gelu(conv2d(in[0], wg, bg) + in[1])}; };
    expect_trains_as_eager(fn, x, r, {{"w", wg}, {"b", bg}}, &jit::fuse_conv_pointwise, 2,
                           "conv2d_pointwise");
  }
}

TEST(JitRun, FrozenConvPointwiseKeepsItsPackedWeightUntilItChanges) {
  manual_seed(18);
  Tensor w = randn({8, 4, 3, 3}) * 0.2, b = randn({8}) * 0.1, r = randn({2, 8, 6, 6});
  auto fn = [&](const TensorList& in) {
    return TensorList{silu(conv2d(in[0], w, b, {1}, {1, 1}) + r)};
  };
  Tensor x = randn({2, 4, 6, 6});
  auto g = std::make_shared<jit::Graph>(jit::trace(fn, {x}));
  jit::freeze(*g);
  ASSERT_EQ(op_names(*g), (Names{"conv2d_pointwise"}));
  jit::Executor ex(g);
  NoGradGuard ng;
  expect_repacks_after_a_write(ex, fn, x, w);
}

// ---- eliminate_identities

TEST(JitPasses, IdentityDropoutIsRemovedSoThatBiasReluDropoutFuses) {
  // bias + relu + dropout in eval mode: the dropout returns its input itself; once it is gone
  // the chain is one fused node. Training-mode dropout draws numbers: kept.
  Tensor b = full({6}, 0.25);
  auto fn = [&](const TensorList& in) {
    Tensor y = nn::functional::dropout(relu(in[0] + b), 0.5, /*train=*/false) * 2.0;
    Tensor z = nn::functional::dropout(in[0], 0.0, /*train=*/true);  // p = 0: the identity too
    Tensor r = nn::functional::dropout(in[0], 0.5, /*train=*/true);  // random: kept
    return TensorList{y, z, r};
  };
  Tensor x = randn({4, 6});
  jit::Graph g = jit::trace(fn, {x}, {{"b", b}});
  EXPECT_EQ(g.count("dropout"), 3);
  manual_seed(5);
  const TensorList before = g.run({x});
  EXPECT_EQ(jit::eliminate_identities(g), 2);
  EXPECT_EQ(op_names(g), (Names{"add.Tensor", "relu", "mul.Scalar", "dropout"}));
  EXPECT_EQ(g.outputs[1], g.inputs[0]);  // z is x itself, as in eager
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  EXPECT_EQ(op_names(g), (Names{"fused_elementwise", "dropout"}));
  manual_seed(5);
  const TensorList after = g.run({x});
  for (size_t i = 0; i < before.size(); ++i) EXPECT_TRUE(equal(before[i], after[i])) << i;
  EXPECT_EQ(jit::eliminate_identities(g), 0);
}

TEST(JitRun, FrozenLinearPointwiseKeepsItsPackedWeightUntilItChanges) {
  // A constant weight (after freeze): the executor keeps it in the layout oneDNN's matmul picks
  // from the first run on, and packs it again after a write into it.
  manual_seed(14);
  Tensor w = randn({24, 16}) * 0.25, b = randn({24}) * 0.1, r = randn({32, 24});
  auto fn = [&](const TensorList& in) { return TensorList{gelu(linear(in[0], w, b)) + r}; };
  Tensor x = randn({32, 16});
  auto g = std::make_shared<jit::Graph>(jit::trace(fn, {x}));
  EXPECT_EQ(jit::fuse_linear_pointwise(*g), 2);
  ASSERT_EQ(op_names(*g), (Names{"linear_pointwise"}));
  jit::Executor ex(g);
  NoGradGuard ng;
  expect_repacks_after_a_write(ex, fn, x, w);
  CallLog log;  // with an interposer the op's front end runs, so profilers see it
  {
    op::InterposerGuard guard(&log);
    ex.run({x});
  }
  EXPECT_EQ(log.names[0], "linear_pointwise");
}
