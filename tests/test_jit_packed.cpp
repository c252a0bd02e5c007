// The graph executor's pre-packed weights: released once nothing else can reach the plain copy
// (the packed bytes are then the weight), rebuilt exactly where the plain weight is needed again.
#include <gtest/gtest.h>

#include <memory>

#include "call_log.h"
#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using testing::CallLog;

/// Conv - BatchNorm - ReLU - Conv - BatchNorm, in eval mode with batch statistics that are not
/// the identity: freezing folds each batch norm into a new convolution weight, which only the
/// graph holds.
std::shared_ptr<nn::Sequential> conv_net() {
  manual_seed(21);
  auto m = std::make_shared<nn::Sequential>(nn::Conv2d(3, 16, 3, 1, 1, 1, 1, /*bias=*/false),
                                            nn::BatchNorm2d(16), nn::ReLU(),
                                            nn::Conv2d(16, 32, 3, 2, 1), nn::BatchNorm2d(32));
  for (const auto& [name, b] : m->named_buffers()) {
    if (name.find("running_var") != std::string::npos) b.uniform_(0.5, 2.0);
    if (name.find("running_mean") != std::string::npos) b.uniform_(-0.5, 0.5);
  }
  m->eval();
  return m;
}

/// The module traced on x and frozen.
jit::Graph frozen(const std::shared_ptr<nn::Module>& m, const Tensor& x) {
  NoGradGuard ng;
  jit::Graph g = jit::trace(m, {x});
  jit::freeze(g);
  return g;
}

/// The folded weights' bytes (the constants of the graph's convolutions).
int64_t conv_weight_bytes(const jit::Graph& g) {
  int64_t bytes = 0;
  for (const jit::Node& n : g.nodes) {
    if (n.name().rfind("conv2d", 0) != 0) continue;
    const Tensor& w = g.tensors[static_cast<size_t>(n.args[1].value)];
    bytes += w.numel() * static_cast<int64_t>(w.element_size());
  }
  return bytes;
}

TEST(PackedWeights, ReleasedWhenOnlyTheExecutorHoldsThem) {
  auto m = conv_net();
  const Tensor x = randn({2, 3, 10, 10}).contiguous(MemoryFormat::ChannelsLast);
  jit::Graph g = frozen(m, x);
  ASSERT_EQ(g.count("batch_norm"), 0) << g.str();
  const int64_t bytes = conv_weight_bytes(g);
  ASSERT_GT(bytes, 0);
  NoGradGuard ng;
  const Tensor want = m->forward(x);
  jit::Executor ex(std::make_shared<jit::Graph>(std::move(g)));
  const Tensor first = ex.run({x})[0];  // packs, then releases the plain weights
  EXPECT_EQ(ex.released_weight_bytes(), bytes);
  EXPECT_TRUE(allclose(first, want, 1e-4, 1e-4));
  for (int run = 0; run < 3; ++run) {  // the packed bytes are the weights now: the same results
    EXPECT_TRUE(equal(ex.run({x})[0], first)) << run;
  }
  EXPECT_EQ(ex.released_weight_bytes(), bytes);
}

TEST(PackedWeights, KeptWhileTheGraphOrTheWeightIsHeldElsewhere) {
  auto m = conv_net();
  const Tensor x = randn({2, 3, 10, 10});
  NoGradGuard ng;
  // The caller keeps the graph: it may read or save it, so its weights stay.
  auto shared = std::make_shared<jit::Graph>(frozen(m, x));
  jit::Executor held(shared);
  held.run({x});
  held.run({x});
  EXPECT_EQ(held.released_weight_bytes(), 0);
  // Graph::run's executor does not own the graph.
  shared->run({x});
  // A weight the caller holds (it may write into it) stays, the others go.
  jit::Graph g = frozen(m, x);
  const Tensor w0 = g.tensors[static_cast<size_t>(g.nodes[0].args[1].value)];
  const int64_t bytes = conv_weight_bytes(g);
  jit::Executor ex(std::make_shared<jit::Graph>(std::move(g)));
  const Tensor before = ex.run({x})[0];
  EXPECT_EQ(ex.released_weight_bytes(), bytes - w0.numel() * 4);
  w0.mul_(2);  // seen: that weight was kept, and is packed again
  const Tensor after = ex.run({x})[0];
  EXPECT_FALSE(allclose(after, before, 1e-3, 1e-3));
}

TEST(PackedWeights, RebuiltExactlyWhereThePlainWeightIsNeeded) {
  auto m = conv_net();
  const Tensor x = randn({2, 3, 10, 10}).contiguous(MemoryFormat::ChannelsLast);
  jit::Graph g = frozen(m, x);
  // The folded weights as the graph holds them before any run.
  std::vector<Tensor> plain;
  for (const jit::Node& n : g.nodes)
    if (n.name().rfind("conv2d", 0) == 0)
      plain.push_back(g.tensors[static_cast<size_t>(n.args[1].value)].clone());
  // An executor of its own copy of g, whose tensors are copies too (else g would still hold them).
  auto make = [&] {
    auto c = std::make_shared<jit::Graph>(g);
    for (Tensor& t : c->tensors)
      if (t.defined()) t = t.clone();
    return jit::Executor(std::move(c));
  };
  NoGradGuard ng;
  const Tensor want = m->forward(x);

  {  // graph(): every released weight rebuilt, bit for bit, and kept.
    jit::Executor ex = make();
    ex.run({x});
    ASSERT_GT(ex.released_weight_bytes(), 0);
    const jit::Graph& back = ex.graph();
    EXPECT_EQ(ex.released_weight_bytes(), 0);
    size_t k = 0;
    for (const jit::Node& n : back.nodes)
      if (n.name().rfind("conv2d", 0) == 0)
        EXPECT_TRUE(equal(back.tensors[static_cast<size_t>(n.args[1].value)], plain[k++])) << k;
    EXPECT_TRUE(allclose(ex.run({x})[0], want, 1e-4, 1e-4));
    // The graph saves and loads as before.
    TempDir dir;
    back.save(dir.file("g.ignis"));
    EXPECT_TRUE(allclose(jit::load(dir.file("g.ignis")).run({x})[0], want, 1e-4, 1e-4));
  }
  {  // A profiled run calls the ops' front ends: the weights are rebuilt for it.
    jit::Executor ex = make();
    ex.run({x});
    CallLog log;
    Tensor y;
    {
      op::InterposerGuard guard(&log);
      y = ex.run({x})[0];
    }
    EXPECT_EQ(log.names[0].rfind("conv2d", 0), 0u) << log.names[0];
    EXPECT_TRUE(allclose(y, want, 1e-4, 1e-4));
    EXPECT_EQ(ex.released_weight_bytes(), 0);
  }
  {  // Another input layout wants another primitive: rebuilt, then packed for it.
    jit::Executor ex = make();
    ex.run({x});
    const Tensor nchw = x.contiguous();
    EXPECT_TRUE(allclose(ex.run({nchw})[0], want, 1e-4, 1e-4));
    EXPECT_TRUE(allclose(ex.run({x})[0], want, 1e-4, 1e-4));
  }
  {  // An input that requires grad runs the ops with autograd: the gradient of x is eager's.
    jit::Executor ex = make();
    ex.run({x});
    AutoGradMode grad(true);
    Tensor xg = x.detach().requires_grad_(true), xe = x.detach().requires_grad_(true);
    ex.run({xg})[0].sum().backward();
    m->forward(xe).sum().backward();
    EXPECT_TRUE(allclose(xg.grad(), xe.grad(), 1e-4, 1e-4));
  }
}

TEST(PackedWeights, LinearPointwiseWeightsAreReleasedToo) {
  Tensor x = randn({16, 64});
  jit::Graph g;
  Tensor want;
  {
    // The module goes at the end of the scope: then only the graph holds its weights.
    manual_seed(22);
    auto m = std::make_shared<nn::Sequential>(nn::Linear(64, 128), nn::GELU(), nn::Linear(128, 32));
    m->eval();
    g = frozen(m, x);
    NoGradGuard ng;
    want = m->forward(x);
  }
  ASSERT_EQ(g.count("linear_pointwise"), 1) << g.str();
  const int w = g.nodes[0].args[1].value;
  const Tensor plain = g.tensors[static_cast<size_t>(w)].clone();
  NoGradGuard ng;
  jit::Executor ex(std::make_shared<jit::Graph>(std::move(g)));
  const Tensor first = ex.run({x})[0];
  EXPECT_EQ(ex.released_weight_bytes(), 128 * 64 * 4);  // the fused product's weight
  EXPECT_TRUE(allclose(first, want, 1e-4, 1e-4));
  EXPECT_TRUE(equal(ex.run({x})[0], first));
  // Rebuilt from its packed bytes, it is the weight it was.
  EXPECT_TRUE(equal(ex.graph().tensors[static_cast<size_t>(w)], plain));
  EXPECT_EQ(ex.released_weight_bytes(), 0);
  EXPECT_TRUE(equal(ex.run({x})[0], first));
}

}  // namespace
}  // namespace ignis
