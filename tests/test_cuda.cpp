// The CUDA backend (docs/cuda.md). Without a GPU (or without the backend in this build) the GPU
// tests are skipped, and say why; what a machine without one must do (report it, refuse GPU
// tensors with a message) is tested everywhere. On a GPU the CPU is the oracle: each op's CUDA
// result is compared with the same op on the CPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <array>
#include <cmath>
#include <cstdlib>
#include <functional>
#include <iostream>
#include <sstream>
#include <string>
#include <tuple>
#include <vector>

#include "cuda/backend.h"
#include "cuda_test_util.h"
#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace {




double rtol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-5 : 1e-12; }
double atol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-6 : 1e-12; }


}  // namespace

// ---- everywhere

TEST(CudaRuntime, ReportsWhetherAGpuIsThere) {
  if (cuda::is_available()) {
    EXPECT_GT(cuda::device_count(), 0);
    EXPECT_EQ(cuda::unavailable_reason(), "");
    EXPECT_TRUE(cuda_is_available());
    return;
  }
  EXPECT_EQ(cuda::device_count(), 0);
  EXPECT_FALSE(cuda_is_available());
  EXPECT_THAT(cuda::unavailable_reason(),
              AnyOf(HasSubstr("built without a CUDA backend"), HasSubstr("CUDA driver"),
                    HasSubstr("no CUDA device")));
}

TEST(CudaRuntime, WithoutAGpuTensorsCannotGoThereAndSayWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available";
  const Tensor x = ones({2, 3});
  const std::string e = error_of([&] { (void)x.to(kGpu); });
  EXPECT_THAT(e, AnyOf(HasSubstr("ignis was built without a CUDA backend"),
                       HasSubstr("no GPU is available (")));
  EXPECT_THAT(error_of([&] { (void)x.cuda(); }), HasSubstr("cuda"));
  EXPECT_THAT(error_of([&] { (void)empty({4}, TensorOptions().device(kGpu)); }),
              AnyOf(HasSubstr("ignis was built without a CUDA backend"),
                    HasSubstr("no GPU is available (")));
  EXPECT_THAT(error_of([&] { cuda::synchronize(); }),
              AnyOf(HasSubstr("cuda::synchronize: ignis was built without"),
                    HasSubstr("no GPU is available")));
  EXPECT_THAT(error_of([&] { (void)cuda::getCurrentCUDAStream(); }),
              AnyOf(HasSubstr("built without"), HasSubstr("no GPU is available")));
  EXPECT_THAT(error_of([&] { cuda::Event e(true); e.record(); }),
              AnyOf(HasSubstr("built without"), HasSubstr("no GPU is available")));
  EXPECT_THAT(error_of([&] { (void)x.pin_memory(); }),
              AnyOf(HasSubstr("pin_memory: ignis was built without"),
                    HasSubstr("pin_memory: no GPU is available")));
  EXPECT_FALSE(x.is_pinned());
  cuda::Event never;
  EXPECT_TRUE(never.query());  // never recorded: nothing to wait for
  cuda::empty_cache();         // nothing cached: a no-op everywhere
}

TEST(CudaRuntime, DataLoaderPinsBatchesOnlyWithAGpu) {
  auto ds = std::make_shared<data::TensorDataset>(randn({10, 3}), arange(10, kInt64));
  data::DataLoaderOptions opts{.batch_size = 4, .num_workers = 1, .pin_memory = true};
  if (!cuda::is_available()) {
    EXPECT_THAT(error_of([&] { data::DataLoader loader(ds, opts); }),
                HasSubstr("DataLoader: pin_memory needs a GPU: "));
    return;
  }
  data::DataLoader loader(ds, opts);
  int batches = 0;
  for (auto& b : loader) {
    EXPECT_TRUE(b.data.is_pinned());
    EXPECT_TRUE(b.target.is_pinned());
    const Tensor g = b.data.to(kGpu, /*non_blocking=*/true);
    cuda::synchronize();
    EXPECT_TRUE(equal(g.cpu(), b.data));
    ++batches;
  }
  EXPECT_EQ(batches, 3);
}

TEST(CudaRuntime, SavingAMetaTensorSaysItHasNoData) {
  TempDir dir;
  const NamedTensorList t = {{"w", empty({2}, TensorOptions().device(kMeta))}};
  EXPECT_THAT(error_of([&] { save_safetensors(dir.file("m.safetensors"), t, {}); }),
              HasSubstr("save_safetensors: tensor 'w' is on meta and has no data to save"));
}

TEST(CudaRuntime, TheNcclBackendNeedsAGpu) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available: Cuda.NcclWorldOfOne covers it";
  EXPECT_FALSE(distributed::is_backend_available("nccl"));
  EXPECT_THAT(error_of([] { distributed::init_process_group("nccl"); }),
              AnyOf(HasSubstr("init_process_group: the nccl backend needs a GPU: "),
                    HasSubstr("init_process_group: the nccl backend needs ignis's CUDA backend")));
  EXPECT_FALSE(distributed::is_initialized());
}

TEST(CudaRuntime, DeviceStringsAndTensorPredicates) {
  EXPECT_EQ(Device("cuda:1"), Device(DeviceType::CUDA, 1));
  EXPECT_EQ(Device("cuda").str(), "cuda:0");
  const Tensor x = ones({2});
  EXPECT_TRUE(x.is_cpu());
  EXPECT_FALSE(x.is_cuda());
  EXPECT_FALSE(x.is_meta());
  EXPECT_TRUE(empty({2}, TensorOptions().device(kMeta)).is_meta());
  EXPECT_THAT(error_of([&] { (void)empty({2}, TensorOptions().device(kMeta)).pin_memory(); }),
              HasSubstr("pin_memory: only CPU tensors can be pinned, got a tensor on meta"));
}

// ---- on a GPU

TEST(Cuda, CopiesRoundTripEveryDtypeAndLayout) {
  REQUIRE_GPU();
  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kBFloat16, kFloat32, kFloat64}) {
    for (const Tensor& x : cuda_samples(dt)) {
      const Tensor g = x.to(kGpu);
      EXPECT_TRUE(g.is_cuda());
      expect_matches(g, x.contiguous(), 0, 0, "round trip " + std::string(dtype_name(dt)));
      // Cast on the way, and a strided destination on either side.
      for (DType to : {kInt64, kFloat32, kFloat64}) {
        expect_matches(x.to(kGpu, to), x.to(to), 0, 0, "to(cuda, dtype)");
      }
      if (x.dim() == 2 && x.numel() > 0) {
        // Strided destinations of x's shape.
        Tensor dst = zeros({x.size(1), x.size(0)}, TensorOptions(dt).device(kGpu)).t();
        dst.copy_(x);
        expect_matches(dst, x, 0, 0, "copy_ into a strided GPU tensor");
        Tensor host = zeros({x.size(1), x.size(0)}, TensorOptions(dt)).t();
        host.copy_(g);
        EXPECT_TRUE(equal(host, x));
      }
    }
  }
}

TEST(Cuda, PinnedCopiesDoNotBlockAndArriveAfterSynchronize) {
  REQUIRE_GPU();
  const Tensor x = arange(1 << 20, kFloat32);
  const Tensor pinned = x.pin_memory();
  EXPECT_TRUE(pinned.is_pinned());
  EXPECT_FALSE(x.is_pinned());
  EXPECT_TRUE(pinned.pin_memory().is_same(pinned));  // already pinned: itself
  const Tensor g = pinned.to(kGpu, /*non_blocking=*/true);
  Tensor back = empty({1 << 20}).pin_memory();
  back.copy_(g, /*non_blocking=*/true);
  cuda::synchronize();
  EXPECT_TRUE(equal(back, x));
}

// Ops queue their kernels and return: a scalar operand travels as a kernel argument, a fill is
// a kernel, autograd and the fused SGD step read nothing back. Only reading a value waits.
TEST(Cuda, QueuedWorkDoesNotWaitForTheGpu) {
  REQUIRE_GPU();
  manual_seed(3);
  nn::Sequential net(nn::Linear(64, 128), nn::ReLU(), nn::Linear(128, 10));
  net.to(kGpu);
  optim::SGD opt(net.parameters(), optim::SGDOptions(0.05).momentum(0.9));
  const Tensor x = randn({32, 64}).to(kGpu), y = randn({32, 10}).to(kGpu);
  auto step = [&] {
    opt.zero_grad();
    const Tensor h = net.forward(x * 0.5 + 1);
    const Tensor loss = ((h - y) * (h - y)).mean() + h.softmax(1).sum() * 0;
    loss.backward();
    opt.step();
    Tensor z = zeros({1000}, TensorOptions().device(kGpu));
    z.fill_(2.5);
    Tensor w = full({3, 4}, 7, TensorOptions(kInt64).device(kGpu)).t();
    w.fill_(-1);  // strided: a fill kernel and a copy
    return loss;
  };
  step();  // the first step allocates and opens cuBLAS
  const int64_t before = cuda::detail::host_sync_count();
  Tensor loss;
  for (int k = 0; k < 3; ++k) loss = step();
  EXPECT_EQ(cuda::detail::host_sync_count(), before)
      << "a training step on the GPU made the host wait";
  const double v = loss.item<double>();  // reading the value waits, once
  EXPECT_EQ(cuda::detail::host_sync_count(), before + 1);
  EXPECT_TRUE(std::isfinite(v));
  // The fills and scalars arrived.
  EXPECT_TRUE(equal(full({2}, 2.5, TensorOptions().device(kGpu)).cpu(), full({2}, 2.5)));
  Tensor w = zeros({3, 4}, TensorOptions(kInt64).device(kGpu)).t();
  w.fill_(-1);
  EXPECT_TRUE(equal(w.cpu(), full({4, 3}, -1, kInt64)));
  Tensor b = zeros({5}, TensorOptions(kBFloat16).device(kGpu));
  b.fill_(0.1);
  EXPECT_TRUE(equal(b.cpu(), full({5}, 0.1, kBFloat16)));
  EXPECT_TRUE(equal((arange(6, kInt64).to(kGpu) * 3 + 1).cpu(), arange(6, kInt64) * 3 + 1));
}

TEST(Cuda, ElementwiseOpsMatchTheCpu) {
  REQUIRE_GPU();
  using Unary = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<const char*, Unary>> unary = {
      {"neg", [](const Tensor& a) { return -a; }},
      {"abs", [](const Tensor& a) { return a.abs(); }},
      {"exp", [](const Tensor& a) { return a.exp(); }},
      {"log", [](const Tensor& a) { return a.log(); }},
      {"sin", [](const Tensor& a) { return a.sin(); }},
      {"tanh", [](const Tensor& a) { return a.tanh(); }},
      {"sigmoid", [](const Tensor& a) { return a.sigmoid(); }},
      {"sqrt", [](const Tensor& a) { return a.sqrt(); }},
      {"relu", [](const Tensor& a) { return relu(a); }},
      {"gelu", [](const Tensor& a) { return gelu(a); }},
      {"silu", [](const Tensor& a) { return silu(a); }},
      {"floor", [](const Tensor& a) { return a.floor(); }},
      {"pow 2", [](const Tensor& a) { return a.pow(2); }},
      {"pow 0.5", [](const Tensor& a) { return a.pow(0.5); }},
      {"clamp", [](const Tensor& a) { return a.clamp(-1, 2); }},
      {"isnan", [](const Tensor& a) { return isnan(a); }},
      {"x * 3 + 1", [](const Tensor& a) { return a * 3 + 1; }},
  };
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (const Tensor& x : cuda_samples(dt)) {
      for (const auto& [name, f] : unary) {
        expect_matches(f(x.to(kGpu)), f(x), rtol_of(dt), atol_of(dt),
                       std::string(name) + " " + std::string(dtype_name(dt)) + " dims " + std::to_string(x.dim()));
      }
    }
  }
  using Binary = std::function<Tensor(const Tensor&, const Tensor&)>;
  const std::vector<std::pair<const char*, Binary>> binary = {
      {"add", [](const Tensor& a, const Tensor& b) { return a + b; }},
      {"sub", [](const Tensor& a, const Tensor& b) { return a - b; }},
      {"mul", [](const Tensor& a, const Tensor& b) { return a * b; }},
      {"maximum", [](const Tensor& a, const Tensor& b) { return maximum(a, b); }},
      {"lt", [](const Tensor& a, const Tensor& b) { return a < b; }},
      {"eq", [](const Tensor& a, const Tensor& b) { return a == b; }},
      {"where", [](const Tensor& a, const Tensor& b) { return where(a > b, a, b); }},
  };
  for (DType dt : {kInt32, kInt64, kFloat32, kFloat64, kBFloat16}) {
    const std::vector<Tensor> s = cuda_samples(dt);
    const Tensor a = s[0], row = s[0][1], scalar = s[2];
    for (const auto& [name, f] : binary) {
      // Same shape, broadcast of a row, a 0-d operand, a strided operand.
      const std::vector<std::pair<Tensor, Tensor>> pairs = {
          {a, a.flip({1})}, {a, row}, {a, scalar}, {s[1], s[1].contiguous()}};
      for (const auto& [x, y] : pairs) {
        expect_matches(f(x.to(kGpu), y.to(kGpu)), f(x, y), rtol_of(dt), atol_of(dt),
                       std::string(name) + " " + std::string(dtype_name(dt)));
      }
    }
  }
  // True division promotes integers; integer remainder checks for zeros as on the CPU.
  const Tensor i = cuda_samples(kInt64)[0];
  expect_matches(i.to(kGpu) / 2, i / 2, 1e-6, 1e-6, "int / 2");
  EXPECT_THAT(error_of([&] { (void)i.to(kGpu).remainder(i.to(kGpu)); }),
              HasSubstr("remainder: integer division by zero"));
}

TEST(Cuda, RandomFillsDrawTheCpusNumbers) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    manual_seed(7);
    const Tensor c = rand({1000}, dt), cn = randn({1000}, dt);
    manual_seed(7);
    const Tensor g = rand({1000}, TensorOptions(dt).device(kGpu));
    const Tensor gn = randn({1000}, TensorOptions(dt).device(kGpu));
    EXPECT_TRUE(equal(g.cpu(), c)) << std::string(dtype_name(dt));
    // normal: the same draws; the transcendental functions (and FMA contraction) may differ in
    // the last bit, which can move a bfloat16 rounding.
    expect_matches(gn, cn, rtol_of(dt), atol_of(dt), "randn");
  }
  manual_seed(3);
  const Tensor c = randint(-5, 5, {1000});
  manual_seed(3);
  EXPECT_TRUE(equal(randint(-5, 5, {1000}, TensorOptions(kInt64).device(kGpu)).cpu(), c));
}

TEST(Cuda, ItemWaitsForTheValue) {
  REQUIRE_GPU();
  const Tensor g = full({}, 2.5, TensorOptions().device(kGpu)) * 2;
  EXPECT_EQ(g.item().toDouble(), 5.0);
}

TEST(Cuda, CachingAllocatorStatistics) {
  REQUIRE_GPU();
  cuda::synchronize();
  cuda::empty_cache();
  cuda::reset_peak_memory_stats();
  const MemoryStats before = cuda::memory_stats();
  {
    const Tensor a = empty({1 << 18}, TensorOptions().device(kGpu));  // 1 MiB
    const MemoryStats s = cuda::memory_stats();
    EXPECT_EQ(s.allocated - before.allocated, 1 << 20);
    EXPECT_GE(s.reserved, s.allocated);
    EXPECT_EQ(memory_stats(kGpu).allocated, s.allocated);
  }
  const MemoryStats after = cuda::memory_stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_EQ(after.peak_allocated - before.allocated, 1 << 20);
  EXPECT_GT(after.reserved, 0);  // kept in the cache
  const Tensor again = empty({1 << 18}, TensorOptions().device(kGpu));
  EXPECT_EQ(cuda::memory_stats().cache_hits, after.cache_hits + 1);
  cuda::empty_cache();
  EXPECT_LE(cuda::memory_stats().reserved, after.reserved);
}

TEST(Cuda, StreamsEventsAndRecordStream) {
  REQUIRE_GPU();
  const cuda::Stream def = cuda::getDefaultCUDAStream();
  EXPECT_EQ(cuda::getCurrentCUDAStream(), def);
  const cuda::Stream side = cuda::getStreamFromPool();
  EXPECT_NE(side, def);
  cuda::Event start(true), stop(true);
  Tensor x = ones({1 << 20}, TensorOptions().device(kGpu));  // filled on the default stream
  cuda::Event filled;
  filled.record(def);
  filled.block(side);  // the pool's streams do not wait for the default stream by themselves
  {
    cuda::StreamGuard g(side);
    EXPECT_EQ(cuda::getCurrentCUDAStream(), side);
    start.record();
    for (int i = 0; i < 20; ++i) x = x * 1.5 - 0.25;  // queued on `side`
    x.record_stream(side);
    stop.record();
  }
  EXPECT_EQ(cuda::getCurrentCUDAStream(), def);  // restored
  stop.synchronize();
  EXPECT_TRUE(stop.query());
  EXPECT_GE(start.elapsed_time(stop), 0.f);
  EXPECT_TRUE(side.query());
  // The default stream waits for `side` before reading x.
  stop.block(def);
  double expect = 1;
  for (int i = 0; i < 20; ++i) expect = expect * 1.5 - 0.25;
  EXPECT_NEAR(x.cpu()[0].item().toDouble(), expect, 1e-3 * expect);
  EXPECT_THAT(error_of([&] { cuda::Event e; e.record(); (void)e.elapsed_time(e); }),
              HasSubstr("cuda::Event::elapsed_time: both events need enable_timing = true"));
  EXPECT_THAT(error_of([&] { cuda::set_device(cuda::device_count()); }),
              HasSubstr("does not exist"));
}

TEST(Cuda, ReductionsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(11);
  const Tensor f = randn({4, 300, 5}, kFloat64);
  for (DType dt : {kFloat32, kFloat64, kBFloat16, kInt64, kInt32, kBool}) {
    Tensor x = dt == kBool ? (f > 0) : is_floating_point(dt) ? f.to(dt) : (f * 10).to(dt);
    for (const Tensor& v : {x, x.transpose(0, 2), x.narrow(1, 0, 0)}) {
      const Tensor g = v.to(kGpu);
      const std::string tag = std::string(dtype_name(dt)) + " dims " + std::to_string(v.dim());
      const double rt = dt == kBFloat16 ? 2e-2 : dt == kFloat32 ? 1e-4 : 1e-10;
      for (const std::vector<int64_t>& dims :
           std::vector<std::vector<int64_t>>{{}, {0}, {1}, {2}, {0, 2}}) {
        expect_matches(g.sum(dims), v.sum(dims), rt, rt, "sum " + tag);
        if (v.numel() > 0) {
          expect_matches(g.amax(dims, true), v.amax(dims, true), 0, 0, "amax " + tag);
        }
        expect_matches(g.all(), v.all(), 0, 0, "all " + tag);
        if (is_floating_point(dt)) {
          expect_matches(g.mean(dims), v.mean(dims), rt, rt, "mean " + tag);
        }
      }
      if (v.numel() > 0) {
        const auto [gv, gi] = g.max(1);
        const auto [cv, ci] = v.max(1);
        expect_matches(gv, cv, 0, 0, "max(1) values " + tag);
        expect_matches(gi, ci, 0, 0, "max(1) indices " + tag);
        expect_matches(g.argmin(2), v.argmin(2), 0, 0, "argmin " + tag);
      }
    }
  }
  // NaN wins max; the first of equal values is the index.
  const Tensor n = tensor(std::vector<double>{1, NAN, 3, 3}, kFloat32).reshape({1, 4});
  expect_matches(std::get<1>(n.to(kGpu).max(1)), std::get<1>(n.max(1)), 0, 0, "max NaN");
  const Tensor e = tensor(std::vector<double>{2, 5, 5, 1}, kFloat32).reshape({1, 4});
  EXPECT_EQ(std::get<1>(e.to(kGpu).max(1)).item().toLong(), 1);
}

// A few long rows or columns, and full reductions, are split into partial folds over many
// blocks and merged in a fixed order: the CPU's values, and the same bits on every run.
TEST(Cuda, LongReductionsSplitAcrossBlocksMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(31);
  for (DType dt : {kFloat32, kFloat64}) {
    // float32 sums of 300,000 values in another order: absolute errors up to about 1e-3
    const double tol = dt == kFloat32 ? 1e-4 : 1e-10, atol = dt == kFloat32 ? 3e-3 : 1e-10;
    const Tensor x = randn({1 << 20}, dt) + 0.5;
    const Tensor rows = randn({3, 300000}, dt), cols = randn({300000, 3}, dt);
    const std::vector<std::pair<std::string, std::function<Tensor(const Tensor&)>>> ops = {
        {"full sum", [&](const Tensor& t) { return t.sum(); }},
        {"full mean", [&](const Tensor& t) { return t.mean(); }},
        {"full var", [&](const Tensor& t) { return t.var(); }},
        {"full amax", [&](const Tensor& t) { return t.amax(); }},
        {"full norm", [&](const Tensor& t) { return t.norm(); }},
        {"full logsumexp", [&](const Tensor& t) { return t.logsumexp(0); }}};
    for (const auto& [name, op] : ops) {
      const Tensor g = op(x.to(kGpu));
      expect_matches(g, op(x), tol, atol, name);
      EXPECT_TRUE(equal(g.cpu(), op(x.to(kGpu)).cpu())) << name << ": not deterministic";
    }
    for (int64_t d : {0, 1}) {
      for (const Tensor& t : {rows, cols}) {
        const std::string what = "dim " + std::to_string(d) + " of " +
                                 std::to_string(t.size(0)) + "x" + std::to_string(t.size(1));
        expect_matches(t.to(kGpu).sum(d), t.sum(d), tol, atol, "sum " + what);
        expect_matches(t.to(kGpu).mean(d), t.mean(d), tol, atol, "mean " + what);
        expect_matches(t.to(kGpu).std(d), t.std(d), tol, atol, "std " + what);
        expect_matches(t.to(kGpu).amin(d), t.amin(d), 0, 0, "amin " + what);
        EXPECT_TRUE(equal(t.to(kGpu).sum(d).cpu(), t.to(kGpu).sum(d).cpu())) << what;
        expect_matches(t.to(kGpu).logsumexp(d), t.logsumexp(d), tol, atol, "logsumexp " + what);
      }
    }
  }
  // Integers fold in int64, exactly.
  const Tensor ints = randint(-1000, 1000, {3, 1 << 19});
  expect_matches(ints.to(kGpu).sum(), ints.sum(), 0, 0, "int64 full sum");
  expect_matches(ints.to(kGpu).sum(1), ints.sum(1), 0, 0, "int64 row sums");
  expect_matches(ints.t().contiguous().to(kGpu).sum(0), ints.sum(1), 0, 0, "int64 column sums");
}

TEST(Cuda, SoftmaxAndItsBackwardMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(5);
  Tensor x = (randn({8, 50, 3}, kFloat64) * 20);
  x.narrow(0, 0, 1).fill_(-INFINITY);  // a slice of all -inf rows: NaN, as in PyTorch
  for (DType dt : {kFloat32, kFloat64}) {
    const double rt = dt == kFloat32 ? 1e-5 : 1e-12;
    for (int64_t dim : {0, 1, 2}) {
      const Tensor c = x.to(dt).detach().requires_grad_(true);
      const Tensor g = x.to(dt).to(kGpu).detach().requires_grad_(true);
      const Tensor w = randn({8, 50, 3}, dt);
      for (bool log : {false, true}) {
        const Tensor yc = log ? log_softmax(c, dim) : softmax(c, dim);
        const Tensor yg = log ? log_softmax(g, dim) : softmax(g, dim);
        expect_matches(yg, yc, rt, rt, "softmax");
        // The all -inf slice is NaN: weigh it 0 so that the rest is compared.
        const Tensor mc = where(isnan(yc), zeros_like(yc), yc);
        const Tensor mg = where(isnan(yg), zeros_like(yg), yg);
        const Tensor gc = autograd::grad({(mc * w).sum()}, {c})[0];
        const Tensor gg = autograd::grad({(mg * w.to(kGpu)).sum()}, {g})[0];
        expect_matches(gg, gc, rt, rt, "softmax backward");
      }
    }
  }
}

// linear and linear_relu run one cuBLASLt GEMM with the bias and ReLU in its epilogue where an
// algorithm exists, else a fill, a GEMM and a ReLU: either way the CPU's values and gradients.
TEST(Cuda, LinearEpiloguesMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(4);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double tol = dt == kBFloat16 ? 2e-2 : dt == kFloat32 ? 1e-4 : 1e-12;
    const double atol = dt == kBFloat16 ? 1.5e-1 : tol;
    // rows x in -> out: single rows, columns and inner sizes (the plain path), odd sizes
    // (unaligned leading dimensions), and larger ones
    for (auto [rows, in, out] : std::vector<std::array<int64_t, 3>>{{1, 5, 3},
                                                                    {1, 1, 1},
                                                                    {6, 1, 4},
                                                                    {6, 4, 1},
                                                                    {7, 3, 9},
                                                                    {64, 128, 256},
                                                                    {33, 65, 17}}) {
      const Tensor x = randn({rows, in}, kFloat64), w = randn({out, in}, kFloat64);
      const Tensor b = randn({out + 1}, kFloat64);
      for (int bias_kind : {0, 1, 2}) {  // a bias, one at an odd offset (a view), none
        for (bool relu : {false, true}) {
          for (bool transposed : {false, true}) {  // x as a transposed view
            const std::string what =
                std::string(dtype_name(dt)) + " " + std::to_string(rows) + "x" +
                std::to_string(in) + "->" + std::to_string(out) +
                (bias_kind == 0 ? " bias" : bias_kind == 1 ? " offset bias" : " no bias") +
                (relu ? " relu" : "") + (transposed ? " x^T" : "");
            auto run = [&](Device dev) {
              Tensor xd = transposed ? x.t().contiguous().to(dev, dt).t() : x.to(dev, dt);
              const Tensor wd = w.to(dev, dt);
              const Tensor bb = b.to(dt).to(dev);
              const Tensor bd = bias_kind == 0   ? bb.narrow(0, 0, out)
                                : bias_kind == 1 ? bb.narrow(0, 1, out)
                                                 : Tensor();
              return relu ? linear_relu(xd, wd, bd) : nn::functional::linear(xd, wd, bd);
            };
            expect_matches(run(kGpu), run(kCPU), tol, atol, what);
          }
        }
      }
    }
  }
  // NaN propagates through the fused ReLU as through relu() (the CPU's fn::Relu).
  const Tensor xn = randn({8, 16});
  xn.narrow(0, 3, 1).fill_(NAN);
  const Tensor wn = randn({32, 16}), bn = randn({32});
  expect_matches(linear_relu(xn.to(kGpu), wn.to(kGpu), bn.to(kGpu)), linear_relu(xn, wn, bn), 1e-4,
                 1e-4, "linear_relu with a NaN row");
  // Gradients through the fused forward, in float64.
  const Tensor xc = randn({12, 20}, kFloat64).requires_grad_(true);
  const Tensor wc = randn({10, 20}, kFloat64).requires_grad_(true);
  const Tensor bc = randn({10}, kFloat64).requires_grad_(true);
  const Tensor xg = xc.detach().to(kGpu).requires_grad_(true);
  const Tensor wg = wc.detach().to(kGpu).requires_grad_(true);
  const Tensor bg = bc.detach().to(kGpu).requires_grad_(true);
  const Tensor gc = randn({12, 10}, kFloat64);
  linear_relu(xc, wc, bc).backward(gc);
  linear_relu(xg, wg, bg).backward(gc.to(kGpu));
  expect_matches(xg.grad(), xc.grad(), 1e-12, 1e-12, "linear_relu grad x");
  expect_matches(wg.grad(), wc.grad(), 1e-12, 1e-12, "linear_relu grad w");
  expect_matches(bg.grad(), bc.grad(), 1e-12, 1e-12, "linear_relu grad b");
}

TEST(Cuda, AutogradThroughGpuOpsMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(2);
  const Tensor x = randn({16, 32}, kFloat64).requires_grad_(true);  // a CPU leaf
  const Tensor w = randn({32}, kFloat64);
  const Tensor b = randn({1}, kFloat64);
  const Tensor wg = w.to(kGpu).requires_grad_(true), bg = b.to(kGpu).requires_grad_(true);
  const Tensor wc = w.clone().requires_grad_(true), bc = b.clone().requires_grad_(true);
  const Tensor loss_g = gelu(x.to(kGpu) * wg + bg).relu().mean();
  const Tensor loss_c = gelu(x * wc + bc).relu().mean();
  expect_matches(loss_g, loss_c.detach(), 1e-12, 1e-12, "loss");
  loss_g.backward();
  const Tensor gx = x.grad().clone();
  x.mutable_grad() = Tensor();
  loss_c.backward();
  EXPECT_TRUE(gx.device().is_cpu());  // the gradient came back through to()
  EXPECT_TRUE(allclose(gx, x.grad(), 1e-12, 1e-12));
  expect_matches(wg.grad(), wc.grad(), 1e-12, 1e-12, "grad w (broadcast: a sum on the GPU)");
  expect_matches(bg.grad(), bc.grad(), 1e-12, 1e-12, "grad b");
}

TEST(Cuda, MatmulMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(4);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double tol = dt == kBFloat16 ? 3e-2 : dt == kFloat32 ? 1e-4 : 1e-12;
    const Tensor a = randn({5, 7}, dt), b = randn({7, 3}, dt), at = randn({7, 5}, dt).t();
    const Tensor bt = randn({3, 7}, dt).t(), c = randn({5, 3}, dt);
    const Tensor x = randn({2, 4, 5, 7}, dt), w = randn({3, 7}, dt), bias = randn({3}, dt);
    const Tensor ba = randn({4, 5, 7}, dt), bb = randn({4, 3, 7}, dt).transpose(1, 2);
    auto G = [](const Tensor& t) { return t.to(kGpu); };
    const std::string tag = std::string(dtype_name(dt));
    expect_matches(mm(G(a), G(b)), mm(a, b), tol, tol, "mm " + tag);
    expect_matches(mm(G(at), G(bt)), mm(at, bt), tol, tol, "mm of transposed views " + tag);
    expect_matches(matmul(G(x), G(b)), matmul(x, b), tol, tol, "matmul broadcast " + tag);
    expect_matches(bmm(G(ba), G(bb)), bmm(ba, bb), tol, tol, "bmm " + tag);
    expect_matches(linear(G(x), G(w), G(bias)), linear(x, w, bias), tol, tol, "linear " + tag);
    expect_matches(addmm(G(c), G(a), G(b), 0.5, 2), addmm(c, a, b, 0.5, 2), tol, tol, "addmm");
    expect_matches(mm(G(a.narrow(1, 0, 0)), G(b.narrow(0, 0, 0))),
                   mm(a.narrow(1, 0, 0), b.narrow(0, 0, 0)), 0, 0, "K = 0: zeros");
  }
  const Tensor i = ones({2, 2}, kInt64);
  EXPECT_THAT(error_of([&] { (void)mm(i.to(kGpu), i.to(kGpu)); }),
              HasSubstr("mm: on CUDA, float32, float64 and bfloat16 are supported, not int64"));
}

TEST(Cuda, IndexingAndJoiningMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(6);
  const Tensor x = randn({6, 4, 5}, kFloat64);
  const Tensor idx = tensor(std::vector<int64_t>{3, 0, 5, 3});
  auto G = [](const Tensor& t) { return t.to(kGpu); };
  expect_matches(index_select(G(x), 0, G(idx)), index_select(x, 0, idx), 0, 0, "index_select");
  const Tensor idx2 = tensor(std::vector<int64_t>{3, 0, 4, 3});  // dim 2 has 5 entries
  expect_matches(index_select(G(x), 2, G(idx2)), index_select(x, 2, idx2), 0, 0,
                 "index_select 2");
  const Tensor gi = randint(0, 4, {6, 3, 5});
  expect_matches(gather(G(x), 1, G(gi)), gather(x, 1, gi), 0, 0, "gather");
  expect_matches(scatter_add(G(x), 1, G(gi), G(ones({6, 3, 5}, kFloat64))),
                 scatter_add(x, 1, gi, ones({6, 3, 5}, kFloat64)), 1e-12, 1e-12, "scatter_add");
  // Repeated indices accumulate (index_put_ with accumulate, as in the backward of x[idx]).
  const Tensor gx = G(x).detach().requires_grad_(true);
  const Tensor cx = x.detach().requires_grad_(true);
  (gx.index_select(0, G(idx)) * 2).sum().backward();
  (cx.index_select(0, idx) * 2).sum().backward();
  expect_matches(gx.grad(), cx.grad(), 1e-12, 1e-12, "grad of index_select (repeats add up)");
  const Tensor src = randn({6, 4, 4}, kFloat64);
  expect_matches(G(x).index_add(2, G(idx2), G(src)), x.index_add(2, idx2, src), 1e-12, 1e-12,
                 "index_add (a repeated index)");
  // Advanced indexing with two index tensors, and its backward (index_put_ with accumulate,
  // repeated positions adding up).
  const Tensor i0 = tensor(std::vector<int64_t>{1, 4, 1, -1}), i1 = tensor(std::vector<int64_t>{0, 3, 0, 2});
  const Tensor ax = x.detach().requires_grad_(true), agx = G(x).detach().requires_grad_(true);
  const Tensor ac = ax.index({i0, i1}), ag = agx.index({G(i0), G(i1)});
  expect_matches(ag, ac.detach(), 0, 0, "x[i0, i1]");
  (ac * 3).sum().backward();
  (ag * 3).sum().backward();
  expect_matches(agx.grad(), ax.grad(), 1e-12, 1e-12, "grad of x[i0, i1] (repeats add up)");
  Tensor pc = x.clone(), pg = G(x);
  pc.index_put_({i0, i1}, ones({4, 5}, kFloat64), /*accumulate=*/true);
  pg.index_put_({G(i0), G(i1)}, G(ones({4, 5}, kFloat64)), /*accumulate=*/true);
  expect_matches(pg, pc, 1e-12, 1e-12, "index_put_ accumulate");
  const Tensor mask = x > 0.5;
  expect_matches(masked_fill(G(x), G(mask), -7.0), masked_fill(x, mask, -7.0), 0, 0,
                 "masked_fill");
  expect_matches(cat({G(x), G(x.narrow(1, 0, 2)), G(x.narrow(1, 0, 0))}, 1),
                 cat({x, x.narrow(1, 0, 2), x.narrow(1, 0, 0)}, 1), 0, 0, "cat");
  expect_matches(stack({G(x), G(x)}, 2), stack({x, x}, 2), 0, 0, "stack");
  // A bad index gives the CPU's message.
  const Tensor bad = tensor(std::vector<int64_t>{1, 9});
  const std::string cpu_msg = error_of([&] { (void)index_select(x, 0, bad); });
  EXPECT_EQ(error_of([&] { (void)index_select(G(x), 0, G(bad)); }), cpu_msg);
}

TEST(Cuda, MlpTrainingStepsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(8);
  auto make = [] {
    return std::make_shared<nn::Sequential>(nn::Linear(20, 32), nn::ReLU(), nn::Linear(32, 5));
  };
  auto cpu_net = make();
  auto gpu_net = make();
  gpu_net->load_state_dict(cpu_net->state_dict());
  gpu_net->to(kGpu);
  optim::SGD cpu_opt(cpu_net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD gpu_opt(gpu_net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 3; ++step) {
    const Tensor xb = randn({16, 20}), yb = randint(0, 5, {16});
    cpu_opt.zero_grad();
    gpu_opt.zero_grad();
    const Tensor lc = nn::functional::cross_entropy(cpu_net->forward(xb), yb);
    const Tensor lg = nn::functional::cross_entropy(gpu_net->forward(xb.to(kGpu)), yb.to(kGpu));
    expect_matches(lg, lc.detach(), 1e-5, 1e-5, "loss at step " + std::to_string(step));
    lc.backward();
    lg.backward();
    cpu_opt.step();
    gpu_opt.step();
  }
  const auto pc = cpu_net->parameters(), pg = gpu_net->parameters();
  ASSERT_EQ(pc.size(), pg.size());
  for (size_t k = 0; k < pc.size(); ++k) {
    expect_matches(pg[k].detach(), pc[k].detach(), 1e-4, 1e-5, "parameter " + std::to_string(k));
  }
}

TEST(Cuda, FitAndCheckpointsWithAGpuModel) {
  REQUIRE_GPU();
  manual_seed(9);
  // Two separable classes: the class is the sign of the first feature.
  const Tensor x = randn({256, 8});
  const Tensor y = (x.select(1, 0) > 0).to(kInt64);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  data::DataLoader train(ds, {.batch_size = 32, .shuffle = true, .pin_memory = true});
  data::DataLoader val(ds, {.batch_size = 64});
  auto net = std::make_shared<nn::Sequential>(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 2));
  net->to(kGpu);
  optim::SGD opt(net->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  const train::LossFn loss = [](const Tensor& o, const Tensor& t) {
    return nn::functional::cross_entropy(o, t);
  };
  const train::History h = train::fit(*net, loss, opt, train, &val, {.epochs = 5});
  ASSERT_EQ(h.val.size(), 5u);
  EXPECT_GT(h.val.back().accuracy, 0.9);
  EXPECT_LT(h.val.back().loss, h.val.front().loss);
  for (const Tensor& p : net->parameters()) EXPECT_TRUE(p.is_cuda());
  // A checkpoint of the GPU model loads into a CPU model with the same values.
  TempDir dir;
  train::save_module(dir.file("net.safetensors"), *net);
  auto cpu_net = std::make_shared<nn::Sequential>(nn::Linear(8, 16), nn::ReLU(), nn::Linear(16, 2));
  train::load_module(dir.file("net.safetensors"), *cpu_net);
  const auto pg = net->parameters(), pc = cpu_net->parameters();
  for (size_t k = 0; k < pg.size(); ++k) EXPECT_TRUE(equal(pg[k].cpu(), pc[k]));
}

// Forward and input/weight/bias gradients of f on the GPU against the CPU (float64, so that
// only the algorithms' summation orders differ).
void expect_grads_match(const std::function<Tensor(const std::vector<Tensor>&)>& f,
                        const std::vector<Tensor>& inputs, const std::string& what) {
  std::vector<Tensor> c, g;
  for (const Tensor& t : inputs) {
    c.push_back(t.detach().clone().requires_grad_(t.is_floating_point()));
    g.push_back(t.detach().to(kGpu).requires_grad_(t.is_floating_point()));
  }
  const Tensor yc = f(c), yg = f(g);
  expect_matches(yg, yc.detach(), 1e-10, 1e-10, what);
  const Tensor w = randn(yc.sizes(), yc.dtype());
  (yc * w).sum().backward();
  (yg * w.to(kGpu)).sum().backward();
  for (size_t k = 0; k < c.size(); ++k) {
    if (!c[k].is_floating_point()) continue;
    expect_matches(g[k].grad(), c[k].grad(), 1e-9, 1e-9, what + ": grad of input " +
                                                            std::to_string(k));
  }
}

TEST(Cuda, ConvolutionsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(12);
  const Tensor x = randn({2, 4, 9, 8}, kFloat64), w = randn({6, 4, 3, 3}, kFloat64);
  const Tensor b = randn({6}, kFloat64), wg = randn({6, 2, 3, 2}, kFloat64);
  expect_grads_match([](const auto& t) { return conv2d(t[0], t[1], t[2]); }, {x, w, b}, "conv2d");
  expect_grads_match(
      [](const auto& t) { return conv2d(t[0], t[1], t[2], {2, 1}, {1, 2}, {1, 2}); }, {x, w, b},
      "conv2d stride, padding, dilation");
  expect_grads_match([](const auto& t) { return conv2d(t[0], t[1], {}, {1}, {1}, {1}, 2); },
                     {x, wg}, "conv2d groups 2");
  expect_grads_match(
      [](const auto& t) { return conv2d(t[0], t[1], t[2], {1}, PaddingMode("same")); },
      {x, randn({6, 4, 2, 4}, kFloat64), b}, "conv2d same padding, even kernel (asymmetric)");
  expect_grads_match([](const auto& t) { return conv2d_relu(t[0], t[1], t[2]); }, {x, w, b},
                     "conv2d_relu");
  expect_grads_match(
      [](const auto& t) { return conv2d(t[0].contiguous(MemoryFormat::ChannelsLast), t[1], t[2]); },
      {x, w, b}, "conv2d channels-last");
  // conv_transpose2d with output_padding beyond the padding: a negative right padding for the
  // convolutions underneath (cropped by hand on the GPU).
  expect_grads_match(
      [](const auto& t) { return conv_transpose2d(t[0], t[1], t[2], {2}, {0}, {1}); },
      {randn({1, 2, 3, 3}, kFloat64), randn({2, 3, 3, 3}, kFloat64), randn({3}, kFloat64)},
      "conv_transpose2d output_padding 1");
  // A channels-last input with one channel (size-1 dims with odd strides).
  expect_grads_match(
      [](const auto& t) { return conv2d(t[0].contiguous(MemoryFormat::ChannelsLast), t[1]); },
      {randn({2, 1, 6, 6}, kFloat64), randn({3, 1, 3, 3}, kFloat64)}, "conv2d C = 1");
  // bfloat16 (on the tensor cores): the CPU's values to bfloat16 rounding.
  const Tensor xb = x.to(kBFloat16), wb = w.to(kBFloat16);
  expect_matches(conv2d(xb.to(kGpu), wb.to(kGpu)).to(kFloat32), conv2d(xb, wb).to(kFloat32), 3e-2,
                 3e-2, "conv2d bfloat16");
  // float32: full precision (no TF32), so the CPU's values to float32 rounding.
  const Tensor xf = x.to(kFloat32), wf = w.to(kFloat32);
  expect_matches(conv2d(xf.to(kGpu), wf.to(kGpu)), conv2d(xf, wf), 1e-4, 1e-4, "conv2d float32");
}

// The switch between cuDNN's graph and legacy APIs: on unless IGNIS_CUDNN_GRAPH_API=0 (ctest
// runs this test once more with it set, as cuda_graph_api_env), and settable (with or without a
// GPU).
TEST(Cuda, CudnnGraphApiSwitch) {
  const char* env = std::getenv("IGNIS_CUDNN_GRAPH_API");
  const bool want = env == nullptr || std::string(env) != "0";
  EXPECT_EQ(cuda::cudnn_graph_api(), want) << "IGNIS_CUDNN_GRAPH_API=" << (env ? env : "(unset)");
  cuda::set_cudnn_graph_api(!want);
  EXPECT_EQ(cuda::cudnn_graph_api(), !want);
  cuda::set_cudnn_graph_api(want);
  EXPECT_EQ(cuda::cudnn_graph_api(), want);
}

// Convolutions run through cuDNN's graph API (cuda::cudnn_graph_api(), on by default): forward,
// input gradient and weight gradient of float32 (NCHW and NHWC, groups, stride, dilation) and
// bfloat16 NHWC problems each get a plan there (none falls back to the legacy API), with the
// CPU's values and gradients; the legacy API alone gives the same values.
TEST(Cuda, ConvolutionsRunThroughCudnnsGraphApi) {
  REQUIRE_GPU();
  manual_seed(31);
  ASSERT_TRUE(cuda::cudnn_graph_api()) << "the graph API is the default";
  const auto cl = MemoryFormat::ChannelsLast;
  struct Case {
    const char* name;
    Tensor x, w;
    std::vector<int64_t> stride, padding, dilation;
    int64_t groups;
    double tol;
  };
  const std::vector<Case> cases = {
      {"float32 NCHW", randn({2, 8, 10, 10}), randn({12, 8, 3, 3}), {1}, {1}, {1}, 1, 1e-4},
      {"float32 NHWC, stride 2, 2 groups",
       randn({4, 16, 12, 12}).contiguous(cl),
       randn({24, 8, 3, 3}),
       {2},
       {1},
       {1},
       2,
       1e-4},
      {"float32 NCHW, padding 2, dilation 2",
       randn({2, 6, 11, 9}),
       randn({4, 6, 3, 3}),
       {1},
       {2},
       {2},
       1,
       1e-4},
      {"bfloat16 NHWC",
       randn({4, 32, 14, 14}).to(kBFloat16).contiguous(cl),
       randn({64, 32, 3, 3}).to(kBFloat16),
       {1},
       {1},
       {1},
       1,
       5e-2},
  };
  // y, and the gradients of x and w under the loss sum(y * r).
  auto run = [](const Case& c, Device d) {
    const Tensor x = c.x.to(d).detach().requires_grad_(true),
                 w = c.w.to(d).detach().requires_grad_(true);
    const Tensor y = conv2d(x, w, {}, c.stride, c.padding, c.dilation, c.groups);
    manual_seed(7);
    const Tensor r = randn(y.sizes()).to(y.dtype()).to(d);
    (y * r).sum().backward();
    return std::vector<Tensor>{y.detach(), x.grad(), w.grad()};
  };
  auto reference = [&](const Case& c) {  // the CPU in float32 on the same (rounded) values
    Case f = c;
    f.x = c.x.to(kFloat32);
    f.w = c.w.to(kFloat32);
    return run(f, kCPU);
  };
  const char* names[] = {"output", "input gradient", "weight gradient"};
  const cuda::detail::CudnnGraphStats before = cuda::detail::cudnn_graph_stats();
  std::vector<std::vector<Tensor>> graph_results;
  for (const Case& c : cases) {
    const std::vector<Tensor> g = run(c, kGpu), want = reference(c);
    for (int k = 0; k < 3; ++k) {
      expect_matches(g[k].to(kFloat32), want[k], c.tol, c.tol,
                     std::string("graph API, ") + c.name + ": " + names[k]);
    }
    graph_results.push_back(g);
  }
  const cuda::detail::CudnnGraphStats after = cuda::detail::cudnn_graph_stats();
  EXPECT_EQ(after.fallbacks, before.fallbacks) << "fell back: " << after.last_fallback;
  EXPECT_GE(after.executions - before.executions, static_cast<int64_t>(3 * cases.size()));
  // A forward's bias and ReLU, fused into the graph where an engine takes them (bfloat16 NHWC:
  // the sum and the ReLU in float32, rounded once), else run after it: the CPU's values.
  for (const bool with_relu : {false, true}) {
    const Tensor xb = randn({4, 32, 14, 14}).to(kBFloat16).contiguous(cl);
    const Tensor wb = randn({64, 32, 3, 3}).to(kBFloat16), bb = randn({64}).to(kBFloat16);
    auto f = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi) {
      return with_relu ? conv2d_relu(xi, wi, bi, {1}, {1}) : conv2d(xi, wi, bi, {1}, {1});
    };
    const Tensor want = f(xb.to(kFloat32), wb.to(kFloat32), bb.to(kFloat32));
    expect_matches(
        f(xb.to(kGpu), wb.to(kGpu), bb.to(kGpu)).to(kFloat32), want, 5e-2, 5e-2,
        with_relu ? "conv2d_relu bfloat16 NHWC with bias" : "conv2d bfloat16 NHWC with bias");
  }
  std::cout << "cuDNN graph API: " << cuda::detail::cudnn_graph_stats().fused_executions
            << " forwards with the bias/ReLU fused so far\n";

  cuda::set_cudnn_graph_api(false);
  for (size_t i = 0; i < cases.size(); ++i) {
    const std::vector<Tensor> l = run(cases[i], kGpu);
    for (int k = 0; k < 3; ++k) {
      expect_matches(l[k].to(kFloat32), graph_results[i][k].to(kFloat32).cpu(), cases[i].tol,
                     cases[i].tol, std::string("legacy API, ") + cases[i].name + ": " + names[k]);
    }
  }
  EXPECT_EQ(cuda::detail::cudnn_graph_stats().executions, after.executions)
      << "with the graph API off, nothing runs there";
  cuda::set_cudnn_graph_api(true);
}

// Channels-last float32 and bfloat16 run NHWC end to end (cuDNN's NHWC kernels with the filter
// copied to OHWI; batch norm's column sums): values, gradients and the kept layout against the
// CPU. The batch norm has enough rows (9,216) for many row groups in its column sums.
TEST(Cuda, ChannelsLastConvolutionsAndBatchNormMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(21);
  const auto cl = MemoryFormat::ChannelsLast;
  const Tensor x = randn({4, 16, 12, 12}).contiguous(cl), w = randn({24, 8, 3, 3});
  const Tensor b = randn({24});
  auto run = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi, std::vector<Tensor>& grads) {
    const Tensor xr = xi.detach().requires_grad_(true), wr = wi.detach().requires_grad_(true),
                 br = bi.detach().requires_grad_(true);
    const Tensor y = conv2d(xr, wr, br, {2}, {1}, {1}, 2);  // stride 2, padding 1, 2 groups
    (y * y).sum().backward();
    grads = {xr.grad(), wr.grad(), br.grad()};
    return y;
  };
  std::vector<Tensor> gc, gg;
  const Tensor yc = run(x, w, b, gc), yg = run(x.to(kGpu), w.to(kGpu), b.to(kGpu), gg);
  EXPECT_TRUE(yg.is_contiguous(cl)) << "conv2d: the output stays channels-last";
  expect_matches(yg, yc.detach(), 1e-4, 1e-4, "conv2d channels-last float32");
  const char* names[] = {"input", "weight", "bias"};
  for (int k = 0; k < 3; ++k) {
    expect_matches(gg[k], gc[k], 1e-3, 1e-3, std::string("conv2d channels-last grad of ") + names[k]);
  }
  EXPECT_TRUE(gg[0].is_contiguous(cl)) << "conv2d: the input gradient stays channels-last";
  // cuDNN's timed choice (cuda::set_cudnn_benchmark) gives the same values.
  cuda::set_cudnn_benchmark(true);
  std::vector<Tensor> gb;
  const Tensor ybench = run(x.to(kGpu), w.to(kGpu), b.to(kGpu), gb);
  cuda::set_cudnn_benchmark(false);
  EXPECT_FALSE(cuda::cudnn_benchmark());
  expect_matches(ybench, yc.detach(), 1e-4, 1e-4, "conv2d channels-last, cudnn benchmark");
  for (int k = 0; k < 3; ++k) {
    expect_matches(gb[k], gc[k], 1e-3, 1e-3,
                   std::string("conv2d channels-last, cudnn benchmark: grad of ") + names[k]);
  }
  // bfloat16: the float32 convolution of the same (bfloat16-rounded) values, to bfloat16's
  // rounding of the output (2^-8 relative).
  const Tensor xb = x.to(kBFloat16), wb = w.to(kBFloat16);
  const Tensor yb = conv2d(xb.to(kGpu), wb.to(kGpu), {}, {1}, {1}, {1}, 2);
  EXPECT_TRUE(yb.is_contiguous(cl));
  expect_matches(yb.to(kFloat32), conv2d(xb.to(kFloat32), wb.to(kFloat32), {}, {1}, {1}, {1}, 2),
                 1e-2, 5e-2, "conv2d channels-last bfloat16");

  // Max pooling keeps a bfloat16 channels-last input channels-last (the layers after it then run
  // NHWC too), with the CPU's values and indices.
  const Tensor xp = randn({2, 8, 9, 9}).to(kBFloat16);
  const auto [pg, ig] = max_pool2d_with_indices(xp.to(kGpu).contiguous(cl), {3, 3}, {2, 2}, {1, 1});
  const auto [pc, ic] = max_pool2d_with_indices(xp, {3, 3}, {2, 2}, {1, 1});
  EXPECT_TRUE(pg.is_contiguous(cl)) << "max_pool2d bfloat16: the output stays channels-last";
  expect_matches(pg.to(kFloat32), pc.to(kFloat32), 0, 0, "max_pool2d channels-last bfloat16");
  expect_matches(ig, ic, 0, 0, "max_pool2d channels-last bfloat16 indices");
  // Its backward gathers each input's gradient over the windows holding it (overlapping 3x3
  // windows of stride 2, padding 1): the CPU's sums, channels-last.
  const Tensor xq = randn({2, 8, 9, 9}).contiguous(cl);
  const Tensor gq = randn({2, 8, 5, 5});
  Tensor xcg = xq.detach().requires_grad_(true), xgg = xq.to(kGpu).requires_grad_(true);
  (max_pool2d(xcg, {3, 3}, {2, 2}, {1, 1}) * gq).sum().backward();
  (max_pool2d(xgg, {3, 3}, {2, 2}, {1, 1}) * gq.to(kGpu)).sum().backward();
  EXPECT_TRUE(xgg.grad().is_contiguous(cl)) << "max_pool2d backward: channels-last";
  expect_matches(xgg.grad(), xcg.grad(), 1e-6, 1e-6, "max_pool2d channels-last backward");

  const Tensor xn = (randn({64, 40, 12, 12}) * 3 + 100).contiguous(cl);  // |mean| >> std
  const Tensor wn = randn({40}), bn = randn({40}), gy = randn({64, 40, 12, 12}).contiguous(cl);
  auto norm = [&](const Tensor& xi, const Tensor& wi, const Tensor& bi, const Tensor& g,
                  Tensor& rm, Tensor& rv, std::vector<Tensor>& grads) {
    const Tensor xr = xi.detach().requires_grad_(true), wr = wi.detach().requires_grad_(true),
                 br = bi.detach().requires_grad_(true);
    const Tensor y = batch_norm(xr, rm, rv, wr, br, true, 0.1, 1e-5);
    (y * g).sum().backward();
    grads = {xr.grad(), wr.grad(), br.grad()};
    return y;
  };
  Tensor rmc = zeros({40}), rvc = ones({40}), rmg = rmc.to(kGpu), rvg = rvc.to(kGpu);
  const Tensor nc = norm(xn, wn, bn, gy, rmc, rvc, gc);
  const Tensor ng = norm(xn.to(kGpu), wn.to(kGpu), bn.to(kGpu), gy.to(kGpu), rmg, rvg, gg);
  EXPECT_TRUE(ng.is_contiguous(cl)) << "batch_norm: the output stays channels-last";
  expect_matches(ng, nc.detach(), 1e-4, 1e-4, "batch_norm channels-last");
  expect_matches(rmg, rmc, 1e-5, 1e-5, "batch_norm channels-last running_mean");
  expect_matches(rvg, rvc, 1e-4, 1e-4, "batch_norm channels-last running_var");
  for (int k = 0; k < 3; ++k) {
    expect_matches(gg[k], gc[k], 1e-3, 1e-3,
                   std::string("batch_norm channels-last grad of ") + names[k]);
  }
  // bfloat16 input (float32 statistics), against the CPU's bfloat16 batch norm.
  const Tensor xb16 = xn.to(kBFloat16);
  Tensor none;
  expect_matches(batch_norm(xb16.to(kGpu), none, none, wn.to(kGpu), bn.to(kGpu), true, 0.1, 1e-5)
                     .to(kFloat32),
                 batch_norm(xb16, none, none, wn, bn, true, 0.1, 1e-5).to(kFloat32), 2e-2, 2e-2,
                 "batch_norm channels-last bfloat16");
}

// The kernels that move 16 bytes per thread step where the layout allows, and one element
// otherwise: elementwise ops on dense aligned operands (every length around the vector width, so
// the tail runs too; a view one element in, whose operands are not aligned; mixed widths: a bool
// result of float64 inputs), and batch norm with channel counts and plane sizes that do and do
// not divide into vectors (channels-last and NCHW, float32 and bfloat16, forward and backward).
TEST(Cuda, VectorizedKernelsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(41);
  for (const DType dt : {kFloat32, kBFloat16, kFloat64}) {
    for (int64_t n = 0; n <= 19; ++n) {
      const Tensor a = randn({n}).to(dt), b = randn({n}).to(dt);
      const std::string what = std::string(dtype_name(dt)) + " n=" + std::to_string(n);
      expect_matches(a.to(kGpu) * b.to(kGpu), a * b, 0, 0, "mul " + what);
      expect_matches(relu(a.to(kGpu)), relu(a), 0, 0, "relu " + what);
      expect_matches(a.to(kGpu) > b.to(kGpu), a > b, 0, 0, "gt " + what);
    }
    const Tensor a = randn({1031}).to(dt), b = randn({1031}).to(dt);
    expect_matches(a.to(kGpu).narrow(0, 1, 1030) + b.to(kGpu).narrow(0, 0, 1030),
                   a.narrow(0, 1, 1030) + b.narrow(0, 0, 1030), 0, 0,
                   std::string("add of misaligned views, ") + std::string(dtype_name(dt)));
  }
  const auto cl = MemoryFormat::ChannelsLast;
  struct Case {
    Shape shape;
    bool channels_last;
    DType dtype;
  };
  const Case cases[] = {{{8, 6, 5, 7}, true, kFloat32},     // C = 6: one channel per thread
                        {{8, 12, 5, 7}, true, kBFloat16},   // C = 12: not 8 | C
                        {{4, 16, 6, 6}, true, kBFloat16},   // 16 channels in 2 vectors
                        {{4, 5, 3, 5}, false, kFloat32},    // M = 15: one element per step
                        {{4, 5, 4, 4}, false, kBFloat16}};  // M = 16: vectors of 8
  for (const Case& c : cases) {
    const Tensor x0 = (randn(c.shape) * 2 + 3).to(c.dtype);
    const Tensor x = c.channels_last ? x0.contiguous(cl) : x0;
    const Tensor g = randn(c.shape).to(c.dtype);
    const Tensor w = randn({c.shape[1]}), b = randn({c.shape[1]});
    auto run = [&](Device d, std::vector<Tensor>& grads) {
      const Tensor xr = x.to(d).detach().requires_grad_(true),
                   wr = w.to(d).detach().requires_grad_(true),
                   br = b.to(d).detach().requires_grad_(true);
      const Tensor y = batch_norm(xr, {}, {}, wr, br, true, 0.1, 1e-5);
      (y * g.to(d)).sum().backward();
      grads = {xr.grad(), wr.grad(), br.grad()};
      return y.detach();
    };
    std::vector<Tensor> gc, gg;
    const Tensor yc = run(kCPU, gc), yg = run(kGpu, gg);
    std::ostringstream what;
    what << "batch_norm " << c.shape << (c.channels_last ? " channels-last " : " ") << c.dtype;
    const double tol = c.dtype == kBFloat16 ? 3e-2 : 1e-4;
    expect_matches(yg.to(kFloat32), yc.to(kFloat32), tol, tol, what.str());
    const char* names[] = {"input", "weight", "bias"};
    for (int k = 0; k < 3; ++k) {
      expect_matches(gg[k].to(kFloat32), gc[k].to(kFloat32), tol, tol,
                     what.str() + ": grad of " + names[k]);
    }
  }
}

// A graph saved on the CPU loads onto the GPU (jit::load(path, device)) and runs there with the
// CPU's values; a GPU graph saves as its CPU copy, which loads back on the CPU.
TEST(Cuda, SavedGraphsLoadOntoTheGpu) {
  REQUIRE_GPU();
  manual_seed(17);
  auto m = models::lenet({1, 28, 10});
  m->eval();
  const Tensor x = randn({3, 1, 28, 28});
  jit::Graph g = jit::trace(m, {x});
  jit::freeze(g);
  TempDir dir("ignis-cuda-jit");
  g.save(dir.file("lenet.ignis"));
  jit::Graph on_gpu = jit::load(dir.file("lenet.ignis"), kGpu);
  for (const jit::Value& v : on_gpu.values) EXPECT_TRUE(v.device.is_cuda()) << v.name;
  NoGradGuard ng;
  const Tensor want = g.run({x})[0];
  expect_matches(on_gpu.run({x.to(kGpu)})[0], want, 1e-4, 1e-5, "lenet graph loaded onto the GPU");
  on_gpu.save(dir.file("back.ignis"));
  EXPECT_TRUE(allclose(jit::load(dir.file("back.ignis")).run({x})[0], want, 1e-6, 1e-7))
      << "a GPU graph saves as its CPU copy";
}

// Softmax and log_softmax over the last dim run a block per row (threads striding along it,
// combined by a fixed tree): rows shorter and longer than a block, a NaN row, an all -inf row,
// large logits, forward and backward, float32, bfloat16 and float64, against the CPU.
TEST(Cuda, SoftmaxRowsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(43);
  for (const int64_t n : {1, 7, 32, 33, 255, 256, 1000, 4099}) {
    for (const DType dt : {kFloat32, kBFloat16, kFloat64}) {
      Tensor x = (randn({5, n}) * 4).to(dt);
      x.select(0, 1).fill_(-INFINITY);
      x.select(0, 2).narrow(0, n / 2, 1).fill_(NAN);
      x.select(0, 3).mul_(1000);
      const Tensor g = randn({5, n}).to(dt);
      const double tol = dt == kBFloat16 ? 2e-2 : dt == kFloat32 ? 1e-5 : 1e-12;
      for (const bool log : {false, true}) {
        const std::string what = std::string(log ? "log_softmax" : "softmax") +
                                 " n=" + std::to_string(n) + " " + std::string(dtype_name(dt));
        auto f = [&](const Tensor& t) { return log ? log_softmax(t, -1) : softmax(t, -1); };
        const Tensor xc = x.detach().requires_grad_(true), xg = x.to(kGpu).requires_grad_(true);
        const Tensor yc = f(xc), yg = f(xg);
        expect_matches(yg.to(kFloat32), yc.to(kFloat32), tol, tol, what);
        (yc * g).sum().backward();
        (yg * g.to(kGpu)).sum().backward();
        expect_matches(xg.grad().to(kFloat32), xc.grad().to(kFloat32), tol, tol,
                       what + " backward");
      }
    }
  }
}

// index_put_ with accumulate runs in parallel (elements sorted by destination, a thread per
// destination adding in the CPU's order): the CPU's sums bit for bit, with many repeats, a
// broadcast value, rows of a 2-d tensor, float32 and bfloat16; a bad index is the CPU's error.
TEST(Cuda, AccumulatingIndexPutMatchesTheCpuBitForBit) {
  REQUIRE_GPU();
  manual_seed(47);
  for (const DType dt : {kFloat32, kBFloat16}) {
    const Tensor idx = randint(0, 97, {20000}, TensorOptions(kInt64));
    const Tensor vals = randn({20000}).to(dt);
    Tensor xc = randn({97}).to(dt), xg = xc.to(kGpu);
    xc.index_put_({idx}, vals, true);
    xg.index_put_({idx.to(kGpu)}, vals.to(kGpu), true);
    expect_matches(xg.to(kFloat32), xc.to(kFloat32), 0, 0,
                   "index_put_ accumulate " + std::string(dtype_name(dt)));
    // Rows of a 2-d tensor, a broadcast (scalar) value.
    Tensor mc = zeros({13, 5}).to(dt), mg = mc.to(kGpu);
    const Tensor rows = randint(0, 13, {300}, TensorOptions(kInt64));
    const Tensor one = full({}, 0.1).to(dt);
    mc.index_put_({rows}, one, true);
    mg.index_put_({rows.to(kGpu)}, one.to(kGpu), true);
    expect_matches(mg.to(kFloat32), mc.to(kFloat32), 0, 0,
                   "index_put_ accumulate rows " + std::string(dtype_name(dt)));
  }
  Tensor xg = zeros({4}).to(kGpu);
  const Tensor bad = tensor(std::vector<int64_t>{1, 7, 2});
  const std::string want = error_of([&] { zeros({4}).index_put_({bad}, ones({3}), true); });
  EXPECT_EQ(error_of([&] { xg.index_put_({bad.to(kGpu)}, ones({3}).to(kGpu), true); }), want);
}

TEST(Cuda, PoolingAndBatchNormMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(13);
  Tensor x = randn({2, 3, 9, 10}, kFloat64);
  x.narrow(3, 2, 1).fill_(NAN);  // NaN wins a max window
  expect_grads_match([](const auto& t) { return max_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}); }, {x},
                     "max_pool2d");
  const Tensor xr = randn({2, 3, 9, 10}, kFloat64);
  expect_grads_match(
      [](const auto& t) { return max_pool2d(t[0], {2, 3}, {1, 2}, {0, 1}, {2, 1}, true); }, {xr},
      "max_pool2d dilation, ceil_mode");
  const auto [gv, gi] = max_pool2d_with_indices(x.to(kGpu), {2, 2});
  const auto [cv, ci] = max_pool2d_with_indices(x, {2, 2});
  expect_matches(gi, ci, 0, 0, "max_pool2d indices");
  expect_grads_match([](const auto& t) { return avg_pool2d(t[0], {3, 3}, {2, 2}, {1, 1}); },
                     {xr}, "avg_pool2d");
  expect_grads_match(
      [](const auto& t) { return avg_pool2d(t[0], {3, 2}, {2, 2}, {1, 1}, true, false); }, {xr},
      "avg_pool2d ceil_mode, count_include_pad false");
  expect_grads_match([](const auto& t) { return adaptive_avg_pool2d(t[0], {4, 3}); }, {xr},
                     "adaptive_avg_pool2d");
  const Tensor w = randn({3}, kFloat64), b = randn({3}, kFloat64);
  expect_grads_match(
      [](const auto& t) { return batch_norm(t[0], {}, {}, t[1], t[2], true, 0.1, 1e-5); },
      {xr, w, b}, "batch_norm training");
  const Tensor rm = randn({3}, kFloat64), rv = rand({3}, kFloat64) + 0.5;
  expect_grads_match(
      [&](const auto& t) {
        return batch_norm(t[0], rm.to(t[0].device()), rv.to(t[0].device()), t[1], t[2], false,
                          0.1, 1e-5);
      },
      {xr, w, b}, "batch_norm eval");
  // Running statistics are updated on the GPU as on the CPU.
  Tensor rmc = zeros({3}, kFloat64), rvc = ones({3}, kFloat64);
  Tensor rmg = rmc.to(kGpu), rvg = rvc.to(kGpu);
  (void)batch_norm(xr, rmc, rvc, {}, {}, true, 0.1, 1e-5);
  (void)batch_norm(xr.to(kGpu), rmg, rvg, {}, {}, true, 0.1, 1e-5);
  expect_matches(rmg, rmc, 1e-12, 1e-12, "running_mean");
  expect_matches(rvg, rvc, 1e-12, 1e-12, "running_var");
}

TEST(Cuda, ZooModelsForwardAndBackwardMatchTheCpu) {
  REQUIRE_GPU();
  // Every model of the zoo (AlexNet's ImageNet stem needs a larger image), in float64.
  for (const models::ModelInfo& info : models::list()) {
    const std::string& name = info.name;
    SCOPED_TRACE(name);
    const int64_t size = name == "alexnet" ? 64 : 32;
    manual_seed(14);
    auto cpu_model = models::create(name, {3, size, 10});
    auto gpu_model = models::create(name, {3, size, 10});
    gpu_model->load_state_dict(cpu_model->state_dict());
    gpu_model->to(kGpu);
    cpu_model->to(kFloat64);
    gpu_model->to(kFloat64);
    const Tensor x = randn({2, 3, size, size}, kFloat64), y = tensor({3, 7});
    manual_seed(15);  // dropout draws the same masks on both devices
    const Tensor lc = nn::functional::cross_entropy(cpu_model->forward(x), y);
    manual_seed(15);
    const Tensor lg = nn::functional::cross_entropy(gpu_model->forward(x.to(kGpu)), y.to(kGpu));
    expect_matches(lg, lc.detach(), 1e-9, 1e-9, "loss");
    lc.backward();
    lg.backward();
    const auto pc = cpu_model->named_parameters(), pg = gpu_model->named_parameters();
    for (size_t k = 0; k < pc.size(); ++k) {
      expect_matches(pg[k].second.grad(), pc[k].second.grad(), 1e-7, 1e-9,
                     "grad of " + pc[k].first);
    }
  }
}

// Graph mode on the GPU: a compiled module traces on the GPU inputs' device (a new trace when
// the device changes), its nodes run the ops' CUDA kernels (fused nodes as kernels generated by
// NVRTC), and values, gradients and frozen (batch-norm-folded) graphs match eager on the GPU.
// Training dropout in a fused program: the generated CUDA kernel draws the CPU's mask from the
// same counters (the stream in its argument), forward and backward.
TEST(Cuda, FusedDropoutDrawsTheCpusMask) {
  REQUIRE_GPU();
  // The generated kernel itself: under "auto" a kernel that fails would fall back to the ops,
  // which draw the same mask.
  jit::set_fusion_backend("compiler");
  struct Restore {
    ~Restore() { jit::set_fusion_backend("auto"); }
  } restore;
  const std::string prog = "mul(i0,i1);dropout(v0,0,0.3);relu(v1)";
  const Tensor x = randn({64, 33}), w = randn({33}), gy = randn({64, 33});
  auto run = [&](Device dev, std::vector<Tensor>& grads) {
    Tensor xr = x.to(dev).requires_grad_(true), wr = w.to(dev).requires_grad_(true);
    manual_seed(77);
    Tensor y = jit::fused_elementwise({xr, wr}, prog);
    y.backward(gy.to(dev));
    grads = {xr.grad(), wr.grad()};
    return y;
  };
  std::vector<Tensor> gc, gg;
  const Tensor yc = run(kCPU, gc), yg = run(kGpu, gg);
  expect_matches(yg.detach(), yc.detach(), 1e-6, 1e-6, "fused dropout forward");
  EXPECT_EQ((yg.cpu() == 0).sum().item<int64_t>(), (yc == 0).sum().item<int64_t>());
  expect_matches(gg[0], gc[0], 1e-5, 1e-5, "fused dropout: grad of x");
  expect_matches(gg[1], gc[1], 1e-4, 1e-4, "fused dropout: grad of w");
}

TEST(Cuda, CompiledGraphsRunOnTheGpu) {
  REQUIRE_GPU();
  manual_seed(21);
  auto lenet = models::lenet({1, 28, 10});
  auto compiled = jit::compile(lenet);
  const Tensor x = randn({4, 1, 28, 28});
  (void)compiled->forward(x);  // a CPU trace first
  lenet->to(kGpu);
  const Tensor xg = x.to(kGpu);
  const Tensor yc = compiled->forward(xg);
  EXPECT_EQ(compiled->traces(), 2);  // the device is part of the guard
  EXPECT_TRUE(yc.is_cuda());
  const Tensor ye = lenet->forward(xg);
  expect_matches(yc, ye.detach().cpu(), 1e-5, 1e-5, "compiled lenet on the GPU");
  // Gradients through the graph equal eager's.
  const Tensor y = tensor({1, 2, 3, 4}).to(kGpu);
  lenet->zero_grad();
  nn::functional::cross_entropy(compiled->forward(xg), y).backward();
  std::vector<Tensor> graph_grads;
  for (const Tensor& p : lenet->parameters()) graph_grads.push_back(p.grad().clone());
  lenet->zero_grad();
  nn::functional::cross_entropy(lenet->forward(xg), y).backward();
  const auto params = lenet->parameters();
  for (size_t k = 0; k < params.size(); ++k) {
    expect_matches(graph_grads[k], params[k].grad().cpu(), 1e-5, 1e-6,
                   "grad " + std::to_string(k));
  }
  // A frozen ResNet-18 in eval mode: batch norm folded into the convolutions, on the GPU.
  auto resnet = models::resnet18({3, 32, 10});
  resnet->to(kGpu);
  resnet->eval();
  auto frozen = jit::compile(resnet, {.freeze = true});
  NoGradGuard ng;
  const Tensor xr = randn({2, 3, 32, 32}).to(kGpu);
  const Tensor yf = frozen->forward(xr);
  EXPECT_EQ(frozen->graph().count("batch_norm"), 0);
  expect_matches(yf, resnet->forward(xr).cpu(), 1e-4, 1e-4, "frozen resnet18 on the GPU");
  // An elementwise chain fused into one node runs as one generated kernel on the GPU (NVRTC;
  // the "compiler" backend makes a failure to compile or load it an error), without waiting,
  // with full, repeated-row and scalar inputs, in both dtypes.
  jit::set_fusion_backend("compiler");
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor a = randn({64, 33}, dt).to(kGpu), b = randn({64, 33}, dt).to(kGpu);
    const Tensor row = randn({33}, dt).to(kGpu), s = full({}, 1.5, dt).to(kGpu);
    auto chain = [](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{
          (gelu(in[0] * 0.5 + in[1]).sigmoid() * in[1] + in[2]).tanh() * in[3] -
          in[0].exp().clamp_max(std::numeric_limits<double>::infinity())};
    };
    jit::Graph g = jit::trace(chain, {a, b, row, s}, {});
    jit::optimize(g);
    EXPECT_EQ(g.count("fused_elementwise"), 1) << g.str();
    jit::Executor exec(std::make_shared<jit::Graph>(g));
    (void)exec.run({a, b, row, s});  // compiles
    const int64_t before = cuda::detail::host_sync_count();
    const Tensor fused = exec.run({a, b, row, s})[0];
    EXPECT_EQ(cuda::detail::host_sync_count(), before) << "the fused kernel made the host wait";
    expect_matches(fused, chain({a, b, row, s})[0].cpu(), dt == kFloat32 ? 1e-5 : 1e-12,
                   dt == kFloat32 ? 1e-6 : 1e-12, "fused chain on the GPU");
  }
  // Fused row reductions (layer_norm with a prologue and an affine epilogue, softmax with a
  // prologue) as generated kernels, a block per row, long rows and short ones.
  for (DType dt : {kFloat32, kFloat64}) {
    for (int64_t cols : {96, 3000}) {
      const Tensor a = randn({40, cols}, dt).to(kGpu), b = randn({40, cols}, dt).to(kGpu);
      const Tensor w = randn({cols}, dt).to(kGpu), bias = randn({cols}, dt).to(kGpu);
      auto fn = [cols](const std::vector<Tensor>& in) {
        const Tensor ln =
            nn::functional::layer_norm(in[0] + in[1], {cols}, in[2], in[3], 1e-5).relu();
        return std::vector<Tensor>{ln + softmax(in[0] * 2, -1) * in[1]};
      };
      jit::Graph g = jit::trace(fn, {a, b, w, bias}, {});
      jit::optimize(g);
      EXPECT_EQ(g.count("fused_reduction"), 2) << g.str();
      jit::Executor exec(std::make_shared<jit::Graph>(g));
      (void)exec.run({a, b, w, bias});  // compiles
      const int64_t before = cuda::detail::host_sync_count();
      const Tensor fused = exec.run({a, b, w, bias})[0];
      EXPECT_EQ(cuda::detail::host_sync_count(), before) << "a fused reduction made the host wait";
      expect_matches(fused, fn({a, b, w, bias})[0].cpu(), dt == kFloat32 ? 1e-4 : 1e-11,
                     dt == kFloat32 ? 1e-5 : 1e-11,
                     "fused reductions on the GPU, " + std::to_string(cols) + " columns");
    }
  }
  // Dropout in a fused reduction's prologue and epilogue: the CUDA kernel draws the CPU's masks
  // (the same counters of the default generator), forward, and in training backward.
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = randn({24, 200}, dt), w = randn({200}, dt);
    const std::string pro = "mul(i0,i1);dropout(v0,0,0.2)", epi = "dropout(i2,0,0.3);mul(v0,i1)";
    manual_seed(17);
    const Tensor cpu = jit::fused_reduction({x, w}, "layer_norm", 1, pro, epi);
    manual_seed(17);
    const Tensor gpu = jit::fused_reduction({x.to(kGpu), w.to(kGpu)}, "layer_norm", 1, pro, epi);
    expect_matches(gpu, cpu, dt == kFloat32 ? 1e-4 : 1e-11, dt == kFloat32 ? 1e-5 : 1e-11,
                   "fused reduction with dropout on the GPU");
    const Tensor xg = x.to(kGpu).requires_grad_(true), xc = x.clone().requires_grad_(true);
    manual_seed(18);
    jit::fused_reduction({xc, w}, "softmax", 1, pro, epi).sum().backward();
    manual_seed(18);
    jit::fused_reduction({xg, w.to(kGpu)}, "softmax", 1, pro, epi).sum().backward();
    expect_matches(xg.grad(), xc.grad(), dt == kFloat32 ? 1e-4 : 1e-11,
                   dt == kFloat32 ? 1e-5 : 1e-11, "its gradient on the GPU");
  }
  jit::set_fusion_backend("auto");
}

// fused_reduction's statistics on the GPU (a block per row: fused_cuda_stat_source) against the
// CPU, in every form, with NaN in a row for amax and amin, in training, and a whole-tensor mean
// (few long rows: the ops instead of the kernel).
TEST(Cuda, FusedStatisticsMatchTheCpu) {
  REQUIRE_GPU();
  struct Restore {
    ~Restore() { jit::set_fusion_backend("auto"); }
  } restore;
  jit::set_fusion_backend("compiler");
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat32 ? 1e-4 : 1e-11;
    Tensor x = randn({37, 300}, dt), s = randn({300}, dt), col = randn({37, 1}, dt);
    x.index_put_({3, 7}, NAN);
    const Tensor half = full({}, 0.5, dt);
    const std::string pro = "mul(i0,i1);tanh(v0)";
    for (const char* kind : {"sum", "mean", "amax", "amin"}) {
      for (const auto& [epi, keepdim] : {std::pair<std::string, bool>{"mul(i4,i2)", true},
                                         {"sub(i0,i4,1);mul(v0,i1)", true},
                                         {"mul(i4,i3)", false},
                                         {"", false}}) {
        const Tensor cpu =
            jit::fused_reduction({x, s, col, half}, kind, 1, pro, epi, 1e-5, keepdim);
        const Tensor gpu =
            jit::fused_reduction({x.to(kGpu), s.to(kGpu), col.to(kGpu), half.to(kGpu)}, kind, 1,
                                 pro, epi, 1e-5, keepdim);
        expect_matches(gpu, cpu, tol, tol, std::string(kind) + " with epilogue '" + epi + "'");
      }
    }
    // Training: one node, the CPU's gradients.
    const Tensor xc = randn({9, 50}, dt).requires_grad_(true);
    const Tensor xg = xc.detach().to(kGpu).requires_grad_(true);
    jit::fused_reduction({xc, s.narrow(0, 0, 50)}, "mean", 1, pro, "sub(i0,i2,1)").sum().backward();
    jit::fused_reduction({xg, s.narrow(0, 0, 50).to(kGpu)}, "mean", 1, pro, "sub(i0,i2,1)")
        .sum()
        .backward();
    expect_matches(xg.grad(), xc.grad(), tol, tol, "a statistic's gradient on the GPU");
    // A mean squared error over 300,000 elements: one long row, run by the ops.
    const Tensor a = randn({300000}, dt), b = randn({300000}, dt);
    const Tensor mse_cpu =
        jit::fused_reduction({a, b}, "mean", 1, "sub(i0,i1,1);pow(v0,2)", "", 1e-5, false);
    const Tensor mse_gpu = jit::fused_reduction({a.to(kGpu), b.to(kGpu)}, "mean", 1,
                                                "sub(i0,i1,1);pow(v0,2)", "", 1e-5, false);
    expect_matches(mse_gpu, mse_cpu, tol, tol, "a whole-tensor mean on the GPU");
    // A value per row broadcast over a leading dim ([37, 1] against rows of [2, 37, 300]).
    const Tensor x3 = randn({2, 37, 300}, dt);
    expect_matches(
        jit::fused_reduction({x3.to(kGpu), col.to(kGpu)}, "amax", 1, "exp(i0)", "mul(i2,i1)"),
        jit::fused_reduction({x3, col}, "amax", 1, "exp(i0)", "mul(i2,i1)"), tol, tol,
        "a per-row input broadcast over a leading dim on the GPU");
    // Chains of statistics: a hand-written softmax (the max, then the sum of exponentials) and
    // layer norm (the mean, then the variance), one kernel each.
    const Tensor xs = randn({37, 300}, dt) * 5;
    for (const auto& [red, pro, epi] :
         {std::tuple<std::string, std::string, std::string>{"amax,sum", "|sub(i0,i1,1);exp(v0)",
                                                            "sub(i0,i1,1);exp(v0);div(v1,i2)"},
          {"mean,mean", "|sub(i0,i1,1);mul(v0,v0)",
           "sub(i0,i1,1);add(i2,1e-05,1);rsqrt(v1);mul(v0,v2)"}}) {
      expect_matches(jit::fused_reduction({xs.to(kGpu)}, red, 1, pro, epi),
                     jit::fused_reduction({xs}, red, 1, pro, epi), tol, tol,
                     "the chain " + red + " on the GPU");
    }
  }
}

// NCCL in a process started alone: a world of one on GPU 0 (no MPI). The collectives are then
// identities (or copies), which checks the plumbing: streams, events, staging, the Work.
TEST(Cuda, NcclWorldOfOne) {
  REQUIRE_GPU();
  ASSERT_TRUE(distributed::is_backend_available("nccl"));
  distributed::init_process_group("nccl");
  EXPECT_EQ(distributed::get_world_size(), 1);
  EXPECT_EQ(distributed::get_rank(), 0);
  EXPECT_EQ(distributed::default_group()->backend_name(), "nccl");
  const Tensor x = arange(12, kFloat32).reshape({3, 4});
  Tensor g = x.to(kGpu);
  distributed::all_reduce(g);
  expect_matches(g, x, 0, 0, "all_reduce");
  Tensor strided = x.to(kGpu).t();  // staged through a contiguous copy and back
  auto w = distributed::all_reduce(strided, distributed::ReduceOp::AVG, nullptr, true);
  w->wait();
  EXPECT_TRUE(w->is_completed());
  expect_matches(strided, x.t().contiguous(), 0, 0, "all_reduce AVG of a strided tensor");
  distributed::broadcast(g, 0);
  expect_matches(g, x, 0, 0, "broadcast");
  std::vector<Tensor> outs = {zeros({3, 4}, TensorOptions().device(kGpu))};
  distributed::all_gather(outs, g);
  expect_matches(outs[0], x, 0, 0, "all_gather");
  Tensor rs = zeros({3, 4}, TensorOptions().device(kGpu));
  std::vector<Tensor> ins = {g};
  distributed::reduce_scatter(rs, ins);
  expect_matches(rs, x, 0, 0, "reduce_scatter");
  distributed::barrier();
  Tensor cpu = x.clone();
  EXPECT_THAT(error_of([&] { distributed::all_reduce(cpu); }),
              HasSubstr("all_reduce (nccl): this process's group works on cuda:0, got a tensor on "
                        "cpu"));
  Tensor iv = ones({2}, TensorOptions(kInt64).device(kGpu));
  EXPECT_THAT(error_of([&] { distributed::all_reduce(iv, distributed::ReduceOp::AVG); }),
              HasSubstr("all_reduce: ReduceOp.AVG needs a floating dtype, got int64"));
  distributed::destroy_process_group();
  EXPECT_FALSE(distributed::is_initialized());
}

TEST(Cuda, StatisticsScansAndShapeOpsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(16);
  Tensor x = randn({5, 70, 3}, kFloat64);
  x.select(0, 1).select(1, 2).fill_(INFINITY);  // an infinite column for logsumexp
  for (const std::vector<int64_t>& dims : std::vector<std::vector<int64_t>>{{}, {1}, {0, 2}}) {
    expect_grads_match([&](const auto& t) { return t[0].var(dims); }, {x.clamp(-5, 5)}, "var");
    expect_grads_match([&](const auto& t) { return t[0].std(dims, 0, true); }, {x.clamp(-5, 5)},
                       "std correction 0");
    expect_matches(x.to(kGpu).logsumexp(dims.empty() ? std::vector<int64_t>{0} : dims),
                   x.logsumexp(dims.empty() ? std::vector<int64_t>{0} : dims), 1e-12, 1e-12,
                   "logsumexp");
    for (double p : {2.0, 1.0, 0.0, double(INFINITY), -double(INFINITY), 3.0}) {
      expect_matches(x.clamp(-5, 5).to(kGpu).norm(p, dims), x.clamp(-5, 5).norm(p, dims), 1e-12,
                     1e-12, "norm p = " + std::to_string(p));
    }
  }
  const Tensor f = x.to(kFloat32).clamp(-5, 5);
  expect_matches(f.to(kGpu).var({1}), f.var({1}), 1e-5, 1e-6, "var float32 (in float64)");
  for (int64_t d : {0, 1, 2}) {
    expect_grads_match([&](const auto& t) { return t[0].cumsum(d); }, {x.clamp(-5, 5)}, "cumsum");
  }
  const Tensor i = randint(-9, 9, {4, 6});
  expect_matches(i.to(kGpu).cumsum(1), i.cumsum(1), 0, 0, "cumsum int64");
  expect_matches(x.to(kGpu).flip({0, 2}), x.flip({0, 2}), 0, 0, "flip");
  expect_matches(x.to(kGpu).transpose(0, 2).flip({1}), x.transpose(0, 2).flip({1}), 0, 0,
                 "flip of a strided tensor");
  const Tensor m = randn({2, 4, 5}, kFloat64);
  for (int64_t k : {-1, 0, 2}) {
    expect_matches(m.to(kGpu).tril(k), m.tril(k), 0, 0, "tril");
    expect_matches(m.to(kGpu).triu(k), m.triu(k), 0, 0, "triu");
  }
  const Tensor labels = tensor(std::vector<int64_t>{2, 0, 4, 4});
  expect_matches(one_hot(labels.to(kGpu)), one_hot(labels), 0, 0, "one_hot (classes inferred)");
  expect_matches(one_hot(labels.to(kGpu), 6), one_hot(labels, 6), 0, 0, "one_hot 6");
  EXPECT_EQ(error_of([&] { (void)one_hot(labels.to(kGpu), 3); }),
            error_of([&] { (void)one_hot(labels, 3); }));
}

// The fused multi-tensor optimizer steps on the GPU (cuda/optim_kernels.cu) against the CPU's
// fused kernels: the same arithmetic, so float64 parameters agree to rounding.
TEST(Cuda, FusedOptimizerStepsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(17);
  std::vector<Tensor> init;
  for (int64_t n : {7, 300, 1, 4096}) init.push_back(randn({n}, kFloat64));
  // More tensors than one launch takes (16), of several sizes.
  for (int k = 0; k < 20; ++k) init.push_back(randn({3, 5}, kFloat64));
  auto run = [&](Device dev, const std::function<std::unique_ptr<optim::Optimizer>(
                                  std::vector<Tensor>)>& make) {
    std::vector<Tensor> params;
    // clone(): on the CPU, to() would alias init, and the first run would step init itself
    for (const Tensor& t : init) params.push_back(t.clone().to(dev).requires_grad_(true));
    auto opt = make(params);
    for (int step = 1; step <= 3; ++step) {
      opt->zero_grad();
      Tensor loss = zeros({}, TensorOptions(kFloat64).device(dev));
      for (const Tensor& p : params) loss = loss + (p * p * step).sum() + p.sin().sum();
      loss.backward();
      opt->step();
    }
    return params;
  };
  using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;
  const std::vector<std::pair<std::string, Make>> optimizers = {
      {"SGD momentum nesterov weight_decay",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.05).momentum(0.9).nesterov(true).weight_decay(0.01));
       }},
      {"SGD plain maximize",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(p, optim::SGDOptions(0.05).maximize(true));
       }},
      {"Adam amsgrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01).amsgrad(true));
       }},
      {"AdamW",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::AdamW>(p, optim::AdamWOptions(0.01).weight_decay(0.1));
       }},
  };
  for (const auto& [name, make] : optimizers) {
    const std::vector<Tensor> c = run(kCPU, make), g = run(kGpu, make);
    for (size_t k = 0; k < c.size(); ++k) {
      expect_matches(g[k].detach(), c[k].detach(), 1e-12, 1e-12,
                     name + ": parameter " + std::to_string(k));
    }
  }
}
