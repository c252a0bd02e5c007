// Autograd mechanisms with GPU tensors: saved-tensor hooks that offload to the host, and
// non-reentrant activation checkpointing, against the plain GPU run. Skipped without a GPU.
#include <gtest/gtest.h>

#include <limits>

#include "cuda/backend.h"
#include "cuda_test_util.h"
#include "ignis/cuda.h"
#include "ignis/ignis.h"

using namespace ignis;
using autograd::graph::SaveOnCpu;

// On a GPU, SaveOnCpu holds the saved activations in host memory between forward and backward
// (the GPU keeps less), and the gradients equal the plain ones; pinned or not.
TEST(CudaAutograd, SaveOnCpuMovesGpuActivationsToTheHost) {
  REQUIRE_GPU();
  const Device gpu = ignis::testing::kGpu;
  manual_seed(3);
  const Tensor x0 = randn({256, 512}), w0 = randn({512, 512}) * 0.05;
  for (bool pin : {false, true}) {
    SCOPED_TRACE(pin ? "pinned" : "pageable");
    Tensor x = x0.to(gpu).requires_grad_(true), w = w0.to(gpu).requires_grad_(true);
    auto forward = [&] { return linear(linear(x, w).relu(), w).tanh().sum(); };
    cuda::synchronize(0);
    const int64_t base = cuda::memory_stats(0).allocated;
    Tensor plain = forward();
    const int64_t held_plain = cuda::memory_stats(0).allocated - base;
    plain.backward();
    const Tensor gx = x.grad().cpu(), gw = w.grad().cpu();
    x.set_grad(Tensor());
    w.set_grad(Tensor());
    plain = Tensor();
    const int64_t base2 = cuda::memory_stats(0).allocated;
    Tensor y;
    {
      SaveOnCpu offload(pin);
      y = forward();
    }
    const int64_t held = cuda::memory_stats(0).allocated - base2;
    EXPECT_LT(held * 2, held_plain)
        << "plain " << held_plain << " B on the GPU, offloaded " << held;
    y.backward();
    ignis::testing::expect_matches(x.grad(), gx, 1e-6, 1e-6, "x.grad");
    ignis::testing::expect_matches(w.grad(), gw, 1e-6, 1e-6, "w.grad");
  }
}

TEST(CudaAutograd, NonReentrantCheckpointEqualsThePlainRun) {
  REQUIRE_GPU();
  const Device gpu = ignis::testing::kGpu;
  manual_seed(4);
  auto m = std::make_shared<nn::Sequential>(
      std::make_shared<nn::Linear>(64, 64), std::make_shared<nn::ReLU>(),
      std::make_shared<nn::Dropout>(0.2), std::make_shared<nn::Linear>(64, 8));
  m->to(gpu);
  const Tensor x = randn({32, 64}).to(gpu).requires_grad_(true);
  manual_seed(5);
  m->forward(x).pow(2).sum().backward();
  std::vector<Tensor> plain;
  for (const Tensor& p : m->parameters()) plain.push_back(p.grad().cpu());
  const Tensor plain_x = x.grad().cpu();
  m->zero_grad();
  x.set_grad(Tensor());
  manual_seed(5);
  autograd::checkpoint_sequential(m, 4, x, /*use_reentrant=*/false).pow(2).sum().backward();
  size_t k = 0;
  for (const Tensor& p : m->parameters()) {
    ignis::testing::expect_matches(p.grad(), plain[k], 1e-6, 1e-6,
                                   "parameter " + std::to_string(k));
    ++k;
  }
  ignis::testing::expect_matches(x.grad(), plain_x, 1e-6, 1e-6, "x.grad");
}

// Batch norm with running statistics: the input does not enter its input gradient (k1 * g), so
// an infinite input gives the CPU's finite gradient there, not 0 * inf = NaN; float32 and
// bfloat16 (the vectorized pass), NCHW and channels-last.
TEST(CudaAutograd, EvalBatchNormGradientIgnoresTheInput) {
  REQUIRE_GPU();
  const Device gpu = ignis::testing::kGpu;
  manual_seed(6);
  for (DType dt : {kFloat32, kBFloat16}) {
    for (MemoryFormat f : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
      Tensor x = randn({2, 16, 4, 4}).to(dt);
      x.index_put_({0, 3, 1, 2}, std::numeric_limits<double>::infinity());
      x = x.contiguous(f);
      const Tensor rm = randn({16}), rv = rand({16}) + 0.5, w = randn({16}), b = randn({16});
      auto grad_of = [&](const Device& d) {
        Tensor xi = x.to(d).requires_grad_(true);
        Tensor y = batch_norm(xi, rm.to(d).to(dt), rv.to(d).to(dt), w.to(d).to(dt), b.to(d).to(dt),
                              /*training=*/false, 0.1, 1e-5);
        y.to(kFloat32).mul(1.5).sum().backward();
        return xi.grad();
      };
      const Tensor cpu = grad_of(kCPU), cuda = grad_of(gpu);
      EXPECT_TRUE(isfinite(cpu).all().item<bool>());
      ignis::testing::expect_matches(cuda, cpu, 1e-2, 1e-5, "eval batch_norm input gradient");
    }
  }
}

// A cross-entropy step on the GPU waits once, for the forward's checked gather of the targets:
// the gather's backward scatters the same indices unchecked (the forward checked them, and the
// saved variable that they have not changed), so it does not wait for a bounds result.
TEST(CudaAutograd, CrossEntropyStepWaitsOnceForItsTargets) {
  REQUIRE_GPU();
  const Device gpu = ignis::testing::kGpu;
  manual_seed(7);
  const Tensor logits = randn({64, 10}).to(gpu).requires_grad_(true);
  const Tensor target = randint(0, 10, {64}).to(gpu);
  nn::functional::cross_entropy(logits, target).backward();  // warm-up
  cuda::synchronize(0);
  const int64_t before = cuda::detail::host_sync_count();
  nn::functional::cross_entropy(logits, target).backward();
  EXPECT_EQ(cuda::detail::host_sync_count(), before + 1);
  // And the gradient is the CPU's.
  Tensor lc = logits.detach().cpu().requires_grad_(true);
  nn::functional::cross_entropy(lc, target.cpu()).backward();
  ignis::testing::expect_matches(logits.grad(), lc.grad() * 2, 1e-5, 1e-6, "logits.grad");
}
