// The pinned host cache on a GPU (core/host_caching_allocator.h behind Tensor::pin_memory) and the
// uploads that go through it without a host wait: cuda::detail::upload, non-blocking copies from
// pageable memory, and the host tables of the pooling, interpolation and CTC kernels. Without a
// GPU the GPU tests are skipped, and say why; the CPU is the oracle for the values.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <functional>
#include <sstream>
#include <string>
#include <thread>
#include <vector>

#include "cuda/backend.h"
#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "ignis/nn/loss_extra.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;
namespace F = ignis::nn::functional;

namespace {




MemoryStats pinned() { return cuda::detail::pinned_memory_stats(); }

// A clean start: no copy pending, no free pinned block cached (blocks of live tensors stay).
void settle() {
  cuda::synchronize();
  cuda::empty_cache();
}

// Keeps the current stream busy for tens of milliseconds (matrix products of 4096 x 4096), so
// that work queued after it is still pending when the host looks.
Tensor busy_gpu() {
  Tensor a = randn({4096, 4096}, TensorOptions().device(kGpu));
  for (int i = 0; i < 12; ++i) a = a.matmul(a) * (1.0 / 64);
  return a;
}

// cuda_samples, and a larger strided one.
std::vector<Tensor> samples(DType dt) {
  std::vector<Tensor> s = cuda_samples(dt);
  s.push_back(arange(3000, kInt64).reshape({60, 50}).to(dt).t());
  return s;
}

}  // namespace

// ---- everywhere

TEST(CudaUploadRuntime, WithoutAGpuUploadSaysWhy) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available";
  const std::vector<int64_t> v{1, 2, 3};
  EXPECT_THAT(error_of([&] {
                (void)cuda::detail::upload(v.data(), sizeof(int64_t) * v.size(), kInt64, 3, kGpu);
              }),
              AnyOf(HasSubstr("upload: ignis was built without"),
                    HasSubstr("upload: no GPU is available")));
}

// ---- on the GPU

TEST(CudaUpload, PinnedTensorsRoundTripThroughTheCache) {
  REQUIRE_GPU();
  for (DType dt : {kBool, kUInt8, kInt32, kInt64, kBFloat16, kFloat32, kFloat64}) {
    for (const Tensor& x : samples(dt)) {
      std::ostringstream os;
      os << dtype_name(dt) << " of shape " << x.sizes() << " and strides " << x.strides();
      const std::string what = os.str();
      const Tensor p = x.pin_memory();
      ASSERT_TRUE(p.is_pinned()) << what;  // a cudaHostAlloc'd block of the cache
      EXPECT_FALSE(x.is_pinned()) << what;
      EXPECT_TRUE(p.is_contiguous()) << what;
      EXPECT_TRUE(equal(p, x)) << what;
      EXPECT_TRUE(p.pin_memory().is_same(p)) << what;
      const Tensor g = p.to(kGpu, /*non_blocking=*/true);
      Tensor back = empty(x.sizes(), TensorOptions(dt)).pin_memory();
      back.copy_(g, /*non_blocking=*/true);
      cuda::synchronize();
      EXPECT_TRUE(equal(back, x)) << what;
      expect_matches(g, x.contiguous(), 0, 0, what);
    }
  }
}

TEST(CudaUpload, PinnedBlocksAreReusedOnceTheirCopiesHaveCompleted) {
  REQUIRE_GPU();
  settle();
  const int64_t n = 1 << 18;  // 1 MiB of float32: exactly one size class
  const Tensor a = arange(n, kFloat32), b = full({n}, -1.0, kFloat32);
  const MemoryStats s0 = pinned();
  Tensor p = a.pin_memory();
  void* first = p.data_ptr();
  MemoryStats s = pinned();
  EXPECT_EQ(s.allocated - s0.allocated, 1 << 20);
  EXPECT_EQ(s.reserved - s0.reserved, 1 << 20);
  EXPECT_GE(s.peak_allocated, s.allocated);

  // Released with its copy done: the next pin of the class takes the same block.
  Tensor g = p.to(kGpu, /*non_blocking=*/true);
  p = Tensor();
  cuda::synchronize();
  s = pinned();
  EXPECT_EQ(s.allocated, s0.allocated);
  EXPECT_EQ(s.reserved - s0.reserved, 1 << 20);  // cached, not freed
  p = b.pin_memory();
  EXPECT_EQ(p.data_ptr(), first);
  EXPECT_EQ(pinned().cache_hits, s.cache_hits + 1);
  EXPECT_EQ(pinned().reserved, s.reserved);
  EXPECT_TRUE(equal(g.cpu(), a));
  p = Tensor();

  // Released while its copy is queued behind long work: the block is not handed out again
  // (writing b into it would change what the copy reads).
  cuda::synchronize();
  const Tensor busy = busy_gpu();
  p = a.pin_memory();
  void* pending = p.data_ptr();
  g = p.to(kGpu, /*non_blocking=*/true);
  p = Tensor();
  const Tensor other = b.pin_memory();
  ASSERT_FALSE(cuda::getCurrentCUDAStream().query()) << "busy_gpu() ended too soon to test";
  EXPECT_NE(other.data_ptr(), pending) << "a pinned block was reused while its copy was queued";
  cuda::synchronize();
  EXPECT_TRUE(equal(g.cpu(), a));
  EXPECT_TRUE(equal(other, b));

  // empty_cache gives the free blocks back; blocks in use stay.
  cuda::empty_cache();
  s = pinned();
  EXPECT_EQ(s.reserved, s.allocated);
  EXPECT_EQ(s.allocated - s0.allocated, 1 << 20);  // `other`
}

TEST(CudaUpload, UploadQueuesWithoutWaiting) {
  REQUIRE_GPU();
  settle();
  std::vector<int64_t> ints(1000);
  for (size_t i = 0; i < ints.size(); ++i) ints[i] = static_cast<int64_t>(i * i) - 5000;
  std::vector<double> doubles{-0.0, 1.5, -1e300, 3.25};
  std::vector<float> floats(3 << 20);  // 12 MiB: a large block
  for (size_t i = 0; i < floats.size(); ++i) floats[i] = static_cast<float>(i % 977) * 0.5f;
  const Tensor ints_ref = tensor(ints), doubles_ref = tensor(doubles, kFloat64);
  const Tensor floats_ref = tensor(floats, kFloat32);
  const MemoryStats s0 = pinned();

  const int64_t before = cuda::detail::host_sync_count();
  const Tensor gi = cuda::detail::upload(ints.data(), ints.size() * sizeof(int64_t), kInt64,
                                         static_cast<int64_t>(ints.size()), kGpu);
  const Tensor gd = cuda::detail::upload(doubles.data(), doubles.size() * sizeof(double), kFloat64,
                                         static_cast<int64_t>(doubles.size()), kGpu);
  const Tensor gf = cuda::detail::upload(floats.data(), floats.size() * sizeof(float), kFloat32,
                                         static_cast<int64_t>(floats.size()), kGpu);
  const Tensor ge = cuda::detail::upload(nullptr, 0, kInt32, 0, kGpu);
  EXPECT_EQ(cuda::detail::host_sync_count(), before) << "upload made the host wait";
  // The host data was copied at once: changing it now changes nothing on the GPU.
  std::fill(ints.begin(), ints.end(), -1);
  std::fill(doubles.begin(), doubles.end(), 7.0);
  std::fill(floats.begin(), floats.end(), 9.0f);
  // The blocks went back to the cache (none is in use).
  EXPECT_EQ(pinned().allocated, s0.allocated);
  EXPECT_EQ(pinned().num_allocs - s0.num_allocs, 3);
  cuda::synchronize();
  EXPECT_TRUE(gi.is_cuda());
  EXPECT_EQ(gi.dim(), 1);
  EXPECT_EQ(gi.numel(), 1000);
  EXPECT_EQ(ge.dim(), 1);
  EXPECT_EQ(ge.numel(), 0);
  EXPECT_EQ(ge.dtype(), kInt32);
  expect_matches(gi, ints_ref, 0, 0, "int64");
  expect_matches(gd, doubles_ref, 0, 0, "float64");
  EXPECT_TRUE(std::signbit(gd.cpu().data_ptr<double>()[0]));
  expect_matches(gf, floats_ref, 0, 0, "float32, 12 MiB");

  // Pending: while the first upload's transfer waits behind long work, a second one of the same
  // size class gets another block; once it is done, a third reuses one.
  settle();
  const std::vector<int64_t> va(4096, 11), vb(4096, 22), vc(4096, 33);
  const Tensor busy = busy_gpu();
  const MemoryStats s1 = pinned();
  const Tensor ga = cuda::detail::upload(va.data(), 4096 * 8, kInt64, 4096, kGpu);
  const Tensor gb = cuda::detail::upload(vb.data(), 4096 * 8, kInt64, 4096, kGpu);
  const MemoryStats s2 = pinned();
  ASSERT_FALSE(cuda::getCurrentCUDAStream().query()) << "busy_gpu() ended too soon to test";
  EXPECT_EQ(s2.reserved - s1.reserved, 2 * 32768) << "a block was reused while its copy was queued";
  EXPECT_EQ(s2.cache_hits, s1.cache_hits);
  cuda::synchronize();
  const Tensor gc = cuda::detail::upload(vc.data(), 4096 * 8, kInt64, 4096, kGpu);
  EXPECT_EQ(pinned().cache_hits, s2.cache_hits + 1);
  EXPECT_EQ(pinned().reserved, s2.reserved);
  expect_matches(ga, full({4096}, 11, kInt64), 0, 0, "a");
  expect_matches(gb, full({4096}, 22, kInt64), 0, 0, "b");
  expect_matches(gc, full({4096}, 33, kInt64), 0, 0, "c");

  // Bad arguments.
  EXPECT_THAT(error_of([&] { (void)cuda::detail::upload(va.data(), 12, kInt64, 2, kGpu); }),
              HasSubstr("upload: 12 bytes do not hold 2 elements of int64"));
  EXPECT_THAT(error_of([&] { (void)cuda::detail::upload(va.data(), 8, kInt64, 1, kCPU); }),
              HasSubstr("upload: cpu is not a CUDA device"));
}

// A pageable source larger than 16 MiB is not pinned again for a non-blocking copy: the copy
// waits instead (as a blocking one), and arrives.
TEST(CudaUpload, LargePageableCopiesWaitRatherThanPinTheirSize) {
  REQUIRE_GPU();
  const Tensor x = arange(int64_t{5} << 20, kFloat32);  // 20 MiB
  cuda::synchronize();
  const MemoryStats p0 = pinned();
  const int64_t before = cuda::detail::host_sync_count();
  const Tensor g = x.to(kGpu, /*non_blocking=*/true);
  EXPECT_EQ(cuda::detail::host_sync_count(), before + 1);
  EXPECT_EQ(pinned().reserved, p0.reserved);
  expect_matches(g, x, 0, 0, "20 MiB");
}

TEST(CudaUpload, NonBlockingCopiesFromPageableMemoryDoNotWait) {
  REQUIRE_GPU();
  manual_seed(5);
  Tensor x = randn({300, 70}, kFloat64);
  Tensor xi = randint(-50, 50, {33, 9});
  Tensor xb = xi > 0;
  const Tensor x_ref = x.clone(), xi_ref = xi.clone(), xb_ref = xb.clone();
  Tensor into_strided = empty({70, 300}, TensorOptions(kFloat64).device(kGpu)).t();
  Tensor into_float = empty({300, 70}, TensorOptions(kFloat32).device(kGpu));
  cuda::synchronize();

  // Long work queued first: had a copy waited for the stream (in ignis, or inside the driver,
  // which host_sync_count cannot see), the stream would be idle after the copies.
  const Tensor busy = busy_gpu();
  const MemoryStats staged0 = pinned();
  const int64_t before = cuda::detail::host_sync_count();
  const Tensor g = x.to(kGpu, /*non_blocking=*/true);       // contiguous
  const Tensor gt = x.t().to(kGpu, /*non_blocking=*/true);  // strided source
  into_strided.copy_(x, /*non_blocking=*/true);             // strided destination
  into_float.copy_(x, /*non_blocking=*/true);               // cast on the way
  const Tensor gi = xi.to(kGpu, /*non_blocking=*/true);
  const Tensor gb = xb.to(kGpu, /*non_blocking=*/true);
  const Tensor ge = empty({0, 4}).to(kGpu, /*non_blocking=*/true);
  const Tensor g0 = tensor(2.5).to(kGpu, /*non_blocking=*/true);  // 0-d
  Tensor pinned_back = empty({33, 9}, TensorOptions(kInt64)).pin_memory();
  pinned_back.copy_(gi, /*non_blocking=*/true);  // into pinned memory: no wait either
  EXPECT_EQ(cuda::detail::host_sync_count(), before)
      << "a non-blocking copy from pageable memory made the host wait";
  EXPECT_FALSE(cuda::getCurrentCUDAStream().query())
      << "the stream ran dry: a copy waited for the queued work";
  EXPECT_GT(pinned().num_allocs + pinned().cache_hits, staged0.num_allocs + staged0.cache_hits)
      << "the pageable sources were not staged through the pinned cache";
  // The sources were staged at once: changing them now changes nothing on the GPU.
  x.fill_(0);
  xi.fill_(0);
  xb.fill_(false);
  cuda::synchronize();
  expect_matches(g, x_ref, 0, 0, "contiguous");
  expect_matches(gt, x_ref.t().contiguous(), 0, 0, "strided source");
  expect_matches(into_strided, x_ref, 0, 0, "strided destination");
  expect_matches(into_float, x_ref.to(kFloat32), 0, 0, "cast");
  expect_matches(gi, xi_ref, 0, 0, "int64");
  expect_matches(gb, xb_ref, 0, 0, "bool");
  expect_matches(ge, empty({0, 4}), 0, 0, "empty");
  expect_matches(g0, tensor(2.5), 0, 0, "0-d");
  EXPECT_TRUE(equal(pinned_back, xi_ref));

  // non_blocking = false keeps PyTorch's meaning: the data has arrived when the call returns.
  const int64_t b2 = cuda::detail::host_sync_count();
  const Tensor h = x_ref.to(kGpu);
  EXPECT_EQ(cuda::detail::host_sync_count(), b2 + 1);
  const Tensor pinned_src = x_ref.pin_memory();
  const Tensor h2 = pinned_src.to(kGpu);
  EXPECT_EQ(cuda::detail::host_sync_count(), b2 + 2);
  // A non-blocking copy into pageable memory must wait too (nothing else would keep it alive).
  const Tensor back = h.to(kCPU, /*non_blocking=*/true);
  EXPECT_EQ(cuda::detail::host_sync_count(), b2 + 3);
  EXPECT_TRUE(equal(back, x_ref));
  expect_matches(h2, x_ref, 0, 0, "blocking from pinned");
}

// The pooling windows, interpolation tables and CTC geometry reach the GPU through upload: the
// ops queue without a host wait, forward and backward, and match the CPU.
TEST(CudaUpload, PoolingInterpolationAndCtcDoNotWait) {
  REQUIRE_GPU();
  manual_seed(11);
  const Tensor xc = randn({2, 3, 17, 19}, kFloat64);
  using Op = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Op>> ops = {
      {"max_pool2d",
       [](const Tensor& x) {
         return max_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"max_pool2d ceil dilated",
       [](const Tensor& x) {
         return max_pool2d(x, {2, 3}, {2, 1}, {1, 1}, {2, 1}, true);
       }},
      {"avg_pool2d",
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 3}, {2, 2}, {1, 1});
       }},
      {"avg_pool2d exclude pad",
       [](const Tensor& x) {
         return avg_pool2d(x, {3, 2}, {1, 2}, {1, 1}, true, false);
       }},
      {"adaptive_avg_pool2d",
       [](const Tensor& x) {
         return adaptive_avg_pool2d(x, {5, 7});
       }},
      {"adaptive_max_pool2d",
       [](const Tensor& x) {
         return adaptive_max_pool2d(x, {4, 6});
       }},
      {"nearest",
       [](const Tensor& x) {
         return interpolate(x, {31, 23}, "nearest");
       }},
      {"nearest-exact",
       [](const Tensor& x) {
         return interpolate(x, {9, 40}, "nearest-exact");
       }},
      {"bilinear",
       [](const Tensor& x) {
         return interpolate(x, {31, 23}, "bilinear", false);
       }},
      {"bilinear align_corners",
       [](const Tensor& x) {
         return interpolate(x, {8, 45}, "bilinear", true);
       }},
  };
  // Each op once first (kernels load, the caches fill), then counted.
  for (int round = 0; round < 2; ++round) {
    for (const auto& [name, op] : ops) {
      const Tensor xg = xc.to(kGpu).requires_grad_();
      cuda::synchronize();
      const int64_t before = cuda::detail::host_sync_count();
      const Tensor yg = op(xg);
      const Tensor wg = ones_like(yg) * 0.5 + 1;
      (yg * wg).sum().backward();
      if (round == 1) {
        EXPECT_EQ(cuda::detail::host_sync_count(), before) << name << " made the host wait";
      }
      const Tensor x = xc.clone().requires_grad_();
      const Tensor y = op(x);
      (y * (ones_like(y) * 0.5 + 1)).sum().backward();
      expect_matches(yg, y.detach(), 1e-12, 1e-12, name);
      ASSERT_TRUE(xg.grad().defined()) << name;
      expect_matches(xg.grad(), x.grad(), 1e-12, 1e-12, name + " gradient");
    }
  }
  // float32, channels-last input for one pool and one interpolation.
  const Tensor xf = randn({2, 4, 9, 11}).contiguous(MemoryFormat::ChannelsLast);
  const Tensor xfg = xf.to(kGpu);
  cuda::synchronize();
  int64_t before = cuda::detail::host_sync_count();
  const Tensor pf = max_pool2d(xfg, {2, 2});
  const Tensor inf = interpolate(xfg, {5, 22}, "bilinear", false);
  EXPECT_EQ(cuda::detail::host_sync_count(), before);
  expect_matches(pf, max_pool2d(xf, {2, 2}), 1e-6, 1e-6, "max_pool2d channels-last float32");
  expect_matches(inf, interpolate(xf, {5, 22}, "bilinear", false), 1e-5, 1e-6,
                 "bilinear channels-last float32");

  // CTC with targets on the CPU (its labels travel with the geometry) and reduction "sum".
  manual_seed(3);
  const Tensor lp = log_softmax(randn({12, 3, 6}, kFloat64) * 2.0, 2);
  const Tensor targets = tensor(std::vector<int64_t>{1, 2, 2, 3, 5, 4, 1});
  const std::vector<int64_t> il{12, 10, 7}, tl{3, 0, 4};
  for (int round = 0; round < 2; ++round) {
    const Tensor lg = lp.to(kGpu).requires_grad_();
    const Tensor l = lp.clone().requires_grad_();
    cuda::synchronize();
    before = cuda::detail::host_sync_count();
    const Tensor loss_g = F::ctc_loss(lg, targets, il, tl, 0, "sum", false);
    loss_g.backward();
    if (round == 1) {
      EXPECT_EQ(cuda::detail::host_sync_count(), before) << "ctc_loss made the host wait";
    }
    const Tensor loss = F::ctc_loss(l, targets, il, tl, 0, "sum", false);
    loss.backward();
    expect_matches(loss_g, loss.detach(), 1e-10, 1e-10, "ctc_loss");
    expect_matches(lg.grad(), l.grad(), 1e-10, 1e-10, "ctc_loss gradient");
  }
}

TEST(CudaUpload, DataLoaderBatchesReusePinnedBlocks) {
  REQUIRE_GPU();
  settle();
  manual_seed(2);
  const Tensor data = randn({480, 256});
  const Tensor target = arange(480, kInt64);
  auto ds = std::make_shared<data::TensorDataset>(data, target);
  data::DataLoader loader(ds, {.batch_size = 16, .num_workers = 2, .pin_memory = true});
  const MemoryStats s0 = pinned();
  int64_t requested = 0;
  for (int epoch = 0; epoch < 2; ++epoch) {
    int64_t row = 0;
    for (auto& b : loader) {
      ASSERT_TRUE(b.data.is_pinned());
      ASSERT_TRUE(b.target.is_pinned());
      requested += static_cast<int64_t>(b.data.nbytes() + 512);  // the target: one 512-byte block
      const Tensor g = b.data.to(kGpu, /*non_blocking=*/true);
      const Tensor t = b.target.to(kGpu, /*non_blocking=*/true);
      cuda::synchronize();
      EXPECT_TRUE(equal(g.cpu(), data.narrow(0, row, 16)));
      EXPECT_TRUE(equal(t.cpu(), target.narrow(0, row, 16)));
      row += 16;
    }
    EXPECT_EQ(row, 480);
  }
  const MemoryStats s = pinned();
  EXPECT_EQ(s.num_allocs - s0.num_allocs, 2 * 2 * 30);
  EXPECT_GT(s.cache_hits - s0.cache_hits, 0) << "no pinned batch reused a block";
  EXPECT_LT(s.reserved - s0.reserved, requested / 2) << "the pinned batches were not cached";
  cuda::synchronize();
  cuda::empty_cache();
  EXPECT_EQ(pinned().reserved, pinned().allocated);
}

// Threads with their own streams pin, upload and copy at once: every value arrives.
TEST(CudaUpload, ThreadsUploadOnTheirOwnStreams) {
  REQUIRE_GPU();
  constexpr int kThreads = 4, kIters = 40;
  std::vector<int> failures(kThreads, 0);
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([t, &failures] {
      cuda::StreamGuard guard(cuda::getStreamFromPool());
      for (int i = 0; i < kIters; ++i) {
        const int64_t n = 100 + 37 * t + i;
        std::vector<int64_t> v(static_cast<size_t>(n));
        for (int64_t k = 0; k < n; ++k) v[static_cast<size_t>(k)] = t * 100000 + i * 1000 + k;
        const Tensor ref = tensor(v);
        const Tensor g =
            cuda::detail::upload(v.data(), v.size() * sizeof(int64_t), kInt64, n, kGpu);
        const Tensor p = ref.pin_memory();
        const Tensor g2 = p.to(kGpu, /*non_blocking=*/true);
        const Tensor g3 = ref.to(kGpu, /*non_blocking=*/true);
        v.assign(v.size(), -1);
        if (!equal(g.cpu(), ref) || !equal(g2.cpu(), ref) || !equal(g3.cpu(), ref)) {
          ++failures[static_cast<size_t>(t)];
        }
      }
    });
  }
  for (std::thread& w : workers) w.join();
  for (int t = 0; t < kThreads; ++t)
    EXPECT_EQ(failures[static_cast<size_t>(t)], 0) << "thread " << t;
}
