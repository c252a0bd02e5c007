// The machinery that keeps a small op cheap, checked for behaviour: the caching allocator's
// statistics with per-thread caches, the object pool across threads, the flat fast path of
// binary ops, leaf-owned AccumulateGrad nodes, and per-thread sequence numbers.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <mutex>
#include <set>
#include <thread>
#include <vector>

#include "autograd/accumulate_grad.h"
#include "ignis/detail/object_pool.h"
#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::AnyOf;
using ::testing::HasSubstr;

// ---- allocator statistics

TEST(AllocatorStats, SmallBlocksCountedWhileLive) {
  const MemoryStats s0 = memory_stats();
  {
    Tensor t = empty({3}, kFloat32);  // 12 bytes -> one 64-byte block
    const MemoryStats s1 = memory_stats();
    EXPECT_EQ(s1.allocated - s0.allocated, 64);
    EXPECT_EQ(s1.num_allocs - s0.num_allocs, 1);
    EXPECT_GE(s1.peak_allocated, s1.allocated);
  }
  EXPECT_EQ(memory_stats().allocated, s0.allocated);
  {
    // The block just freed sits in this thread's cache: the next one of its size is a hit.
    const MemoryStats s2 = memory_stats();
    Tensor t = empty({5}, kFloat32);
    const MemoryStats s3 = memory_stats();
    EXPECT_EQ(s3.cache_hits - s2.cache_hits, 1);
    EXPECT_EQ(s3.allocated - s2.allocated, 64);
  }
}

TEST(AllocatorStats, LargeBlocksAndPeak) {
  reset_peak_memory_stats();
  const MemoryStats s0 = memory_stats();
  EXPECT_EQ(s0.peak_allocated, s0.allocated);
  {
    Tensor big = empty({1 << 20}, kFloat32);  // 4 MiB, a size class of its own
    EXPECT_EQ(memory_stats().allocated - s0.allocated, int64_t{4} << 20);
    EXPECT_GE(memory_stats().reserved, int64_t{4} << 20);
  }
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.allocated, s0.allocated);
  EXPECT_GE(s1.peak_allocated - s0.allocated, int64_t{4} << 20);
  reset_peak_memory_stats();
  EXPECT_EQ(memory_stats().peak_allocated, memory_stats().allocated);
}

TEST(AllocatorStats, OtherThreadsAreCounted) {
  const MemoryStats s0 = memory_stats();
  std::vector<Tensor> made(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&made, i] {
      for (int k = 0; k < 100; ++k) Tensor tmp = empty({8});  // each thread: cache hits
      made[i] = empty({16}, kFloat64);                         // 128 bytes, kept
    });
  }
  for (auto& t : threads) t.join();
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.num_allocs - s0.num_allocs, 4 * 101);  // counts of exited threads are kept
  EXPECT_GE(s1.cache_hits - s0.cache_hits, 4 * 99);
  EXPECT_EQ(s1.allocated - s0.allocated, 4 * 128);
  for (int i = 0; i < 4; ++i) {
    made[i].fill_(i);
    EXPECT_DOUBLE_EQ(made[i].sum().item<double>(), 16.0 * i);
  }
  made.clear();  // freed on this thread, allocated on others
  EXPECT_EQ(memory_stats().allocated, s0.allocated);
}

TEST(AllocatorStats, EmptyCacheKeepsLiveBytes) {
  Tensor keep = full({1000}, 2.0);
  { Tensor tmp = empty({2000}); }
  const MemoryStats s0 = memory_stats();
  empty_cache();
  const MemoryStats s1 = memory_stats();
  EXPECT_EQ(s1.allocated, s0.allocated);
  EXPECT_LE(s1.reserved, s0.reserved);
  EXPECT_DOUBLE_EQ(keep.sum().item<double>(), 2000.0);
}

TEST(AllocatorStats, CudaStatisticsNeedAGpu) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available: tests/test_cuda.cpp covers it";
  // Without the backend no allocator is registered; with it but without a GPU, it says why.
  EXPECT_THAT(error_of([] { memory_stats(Device(DeviceType::CUDA, 0)); }),
              AnyOf(HasSubstr("memory_stats: no allocator statistics for cuda:0"),
                    HasSubstr("memory_stats: no GPU is available (")));
  EXPECT_THAT(error_of([] { reset_peak_memory_stats(Device(DeviceType::CUDA, 0)); }),
              AnyOf(HasSubstr("reset_peak_memory_stats: no allocator for cuda:0"),
                    HasSubstr("reset_peak_memory_stats: no GPU is available (")));
  EXPECT_THAT(error_of([] { empty_cache(Device(DeviceType::CUDA, 0)); }),
              AnyOf(HasSubstr("empty_cache: no allocator for cuda:0"),
                    HasSubstr("empty_cache: no GPU is available (")));
}

// ---- the object pool

TEST(ObjectPool, BlocksAreReusedAndSized) {
  void* a = pool::allocate(40);
  pool::deallocate(a, 40);
  void* b = pool::allocate(48);  // the same 48-byte class: the block just freed
  EXPECT_EQ(a, b);
  pool::deallocate(b, 48);
  void* big = pool::allocate(pool::kMaxSize + 1);  // beyond the classes: operator new
  static_cast<char*>(big)[pool::kMaxSize] = 1;
  pool::deallocate(big, pool::kMaxSize + 1);
}

TEST(ObjectPool, TensorsCrossThreads) {
  // Tensors (pooled impls) made on worker threads, used and dropped on this one, and the
  // reverse; the worker threads exit while their blocks are still in use elsewhere.
  std::vector<Tensor> from_workers;
  std::mutex mu;
  std::vector<std::thread> threads;
  for (int i = 0; i < 3; ++i) {
    threads.emplace_back([&, i] {
      std::vector<Tensor> local;
      for (int k = 0; k < 300; ++k) local.push_back(full({2}, i * 1000 + k) + 1);
      std::lock_guard<std::mutex> g(mu);
      for (auto& t : local) from_workers.push_back(t);
    });
  }
  for (auto& t : threads) t.join();
  ASSERT_EQ(from_workers.size(), 900u);
  double total = 0;
  for (const Tensor& t : from_workers) total += t.sum().item<double>();
  double expect = 0;
  for (int i = 0; i < 3; ++i) {
    for (int k = 0; k < 300; ++k) expect += 2.0 * (i * 1000 + k + 1);
  }
  EXPECT_DOUBLE_EQ(total, expect);
  std::vector<Tensor> mine;
  for (int k = 0; k < 500; ++k) mine.push_back(full({3}, k));
  std::thread dropper([&] { mine.clear(); });
  dropper.join();
  from_workers.clear();
  Tensor after = full({4}, 1.5) * 2;
  EXPECT_DOUBLE_EQ(after.sum().item<double>(), 12.0);
}

// ---- the flat fast path of binary ops keeps every other case right

TEST(BinaryFastPath, ValuesAndFallbacks) {
  const Tensor a = tensor(std::vector<float>{1, 2, 3, 4, 5, 6}).reshape({2, 3});
  const Tensor b = tensor(std::vector<float>{10, 20, 30, 40, 50, 60}).reshape({2, 3});
  const Tensor sum = add(a, b, 2);  // contiguous, same shape: the fast path
  const std::vector<float> want{21, 42, 63, 84, 105, 126};
  for (int i = 0; i < 6; ++i) EXPECT_FLOAT_EQ(sum.flatten()[i].item<float>(), want[i]);
  // A transposed operand of the same shape: not contiguous, the general path.
  const Tensor bt = tensor(std::vector<float>{10, 40, 20, 50, 30, 60}).reshape({3, 2}).t();
  EXPECT_TRUE(allclose(add(a, bt), add(a, b)));
  // Another dtype: promoted, then the general path.
  const Tensor ai = tensor(std::vector<int64_t>{1, 2, 3, 4, 5, 6}).to(kInt32).reshape({2, 3});
  const Tensor mixed = ai + b;
  EXPECT_EQ(mixed.dtype(), kFloat32);
  EXPECT_TRUE(allclose(mixed, add(a, b)));
  // 0-d operands of the same shape and a broadcast.
  EXPECT_DOUBLE_EQ((tensor(2.5) * tensor(4.0)).item<double>(), 10.0);
  EXPECT_TRUE(allclose(a - tensor(std::vector<float>{1, 2, 3}),
                       tensor(std::vector<float>{0, 0, 0, 3, 3, 3}).reshape({2, 3})));
  // Empty tensors.
  EXPECT_EQ(add(empty({0, 3}), empty({0, 3})).numel(), 0);
}

TEST(BinaryFastPath, ErrorsStillNamed) {
  EXPECT_THAT(error_of([] { add(Tensor(), ones({2})); }), HasSubstr("undefined tensor"));
  EXPECT_THAT(error_of([] { mul(ones({2, 3}), ones({4})); }),
              HasSubstr("mul: shapes [2, 3] and [4] cannot be broadcast"));
}

// ---- autograd recording

TEST(AccumulateGradOwnership, OneAccumulatorPerLeaf) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  Tensor y1 = x * 2, y2 = x + 1;
  const auto acc1 = y1.grad_fn()->next_edge(0).fn;
  const auto acc2 = y2.grad_fn()->next_edge(0).fn;
  ASSERT_NE(acc1, nullptr);
  EXPECT_EQ(acc1, acc2);
  EXPECT_EQ(acc1->name(), "AccumulateGrad");
  y1 = Tensor();
  y2 = Tensor();
  Tensor y3 = x * 3;  // the leaf keeps its accumulator between graphs
  EXPECT_EQ(y3.grad_fn()->next_edge(0).fn, acc1);
  y3.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 3.0)));
}

TEST(AccumulateGradOwnership, GraphOutlivingItsLeaf) {
  Tensor y;
  std::weak_ptr<autograd::Node> acc;
  {
    Tensor x = full({3}, 2.0, TensorOptions().requires_grad(true));
    y = (x + 1).sum();  // add saves no tensor: only the accumulator refers to x
    acc = y.grad_fn()->next_edge(0).fn->next_edge(0).fn;
  }
  ASSERT_FALSE(acc.expired());  // held by the graph
  EXPECT_EQ(static_cast<autograd::AccumulateGrad*>(acc.lock().get())->leaf().defined(), false);
  y.backward();  // the leaf is gone: its gradient is dropped, nothing fails
  y = Tensor();
  EXPECT_TRUE(acc.expired());  // no cycle keeps the graph alive
}

TEST(AccumulateGradOwnership, NoCycleThroughTheLeaf) {
  std::weak_ptr<autograd::Node> node, acc;
  {
    Tensor x = ones({2}, TensorOptions().requires_grad(true));
    Tensor y = x * x;
    node = y.grad_fn();
    acc = y.grad_fn()->next_edge(0).fn;
    y.sum().backward();
    EXPECT_TRUE(allclose(x.grad(), full({2}, 2.0)));
  }
  EXPECT_TRUE(node.expired());
  EXPECT_TRUE(acc.expired());
}

TEST(SequenceNumbers, IncreasingPerThreadUniqueAcrossThreads) {
  Tensor x = ones({1}, TensorOptions().requires_grad(true));
  Tensor a = x * 2;
  Tensor b = a * 2;
  EXPECT_LT(a.grad_fn()->sequence_nr(), b.grad_fn()->sequence_nr());
  std::vector<uint64_t> seqs(4);
  std::vector<Tensor> keep(4);
  std::vector<std::thread> threads;
  for (int i = 0; i < 4; ++i) {
    threads.emplace_back([&, i] {
      keep[i] = x * (i + 1.0);
      seqs[i] = keep[i].grad_fn()->sequence_nr();
    });
  }
  for (auto& t : threads) t.join();
  std::set<uint64_t> unique(seqs.begin(), seqs.end());
  unique.insert(a.grad_fn()->sequence_nr());
  unique.insert(b.grad_fn()->sequence_nr());
  EXPECT_EQ(unique.size(), 6u);
  // A graph built across threads still runs in dependency order.
  Tensor total = keep[0] + keep[1] + keep[2] + keep[3] + b;
  total.sum().backward();
  EXPECT_DOUBLE_EQ(x.grad().item<double>(), 1 + 2 + 3 + 4 + 4);
}

}  // namespace
}  // namespace ignis
