// The CUDA caching allocator's bookkeeping (core/caching_allocator.h) over a fake device: raw
// allocations from the host heap, events whose completion the test decides. Runs on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <map>
#include <iterator>
#include <set>

#include "core/caching_allocator.h"
#include "test_util.h"

using ::testing::HasSubstr;
using ignis::error_of;

using ignis::detail::CachingAllocatorCore;

namespace {

struct FakeDevice : ignis::detail::DeviceMemoryApi {
  size_t capacity = size_t{1} << 30;  // bytes the device has
  size_t used = 0;
  std::map<void*, size_t> live;  // raw allocations
  int raw_allocs = 0, raw_frees = 0;
  std::map<int, bool> events;  // id -> done
  std::map<int, void*> event_stream;
  int next_event = 1;
  bool complete_events = false;  // new events start done when true

  void* raw_alloc(size_t n) override {
    if (used + n > capacity) return nullptr;
    void* p = std::malloc(n);
    used += n;
    live[p] = n;
    ++raw_allocs;
    return p;
  }
  void raw_free(void* p) override {
    used -= live.at(p);
    live.erase(p);
    std::free(p);
    ++raw_frees;
  }
  void* record_event(void* stream) override {
    const int id = next_event++;
    events[id] = complete_events;
    event_stream[id] = stream;
    return reinterpret_cast<void*>(static_cast<intptr_t>(id));
  }
  bool event_done(void* e) override { return events.at(static_cast<int>(reinterpret_cast<intptr_t>(e))); }
  void destroy_event(void* e) override { events.erase(static_cast<int>(reinterpret_cast<intptr_t>(e))); }
  void finish_all() {
    for (auto& [id, done] : events) done = true;
  }
  ~FakeDevice() override {
    for (auto& [p, n] : live) std::free(p);
  }
};

void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);
constexpr size_t kMiB = size_t{1} << 20;

}  // namespace

TEST(CachingAllocator, RoundsSizesTo512Bytes) {
  EXPECT_EQ(CachingAllocatorCore::round_size(0), 512u);
  EXPECT_EQ(CachingAllocatorCore::round_size(1), 512u);
  EXPECT_EQ(CachingAllocatorCore::round_size(512), 512u);
  EXPECT_EQ(CachingAllocatorCore::round_size(513), 1024u);
  EXPECT_EQ(CachingAllocatorCore::round_size(3 * kMiB + 1), 3 * kMiB + 512);
}

TEST(CachingAllocator, SmallRequestsShareA2MiBSegment) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  char* p = static_cast<char*>(a.allocate(100, kStreamA));
  char* q = static_cast<char*>(a.allocate(1000, kStreamA));
  EXPECT_EQ(dev.raw_allocs, 1);
  EXPECT_EQ(dev.used, 2 * kMiB);
  EXPECT_EQ(q, p + 512);  // split from the same segment, right after p's 512 bytes
  auto s = a.stats();
  EXPECT_EQ(s.allocated, 512 + 1024);
  EXPECT_EQ(s.reserved, static_cast<int64_t>(2 * kMiB));
  EXPECT_EQ(s.num_allocs, 2);
  EXPECT_EQ(s.cache_hits, 1);  // the second came from the segment's free rest
  a.free(p);
  a.free(q);
  EXPECT_EQ(a.stats().allocated, 0);
  EXPECT_EQ(a.stats().peak_allocated, 512 + 1024);
}

TEST(CachingAllocator, FreedBlocksAreReusedAndMergedWithoutTheDevice) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(4096, kStreamA);
  a.free(p);
  void* q = a.allocate(4096, kStreamA);
  EXPECT_EQ(q, p);  // the same block, best fit
  void* r = a.allocate(4096, kStreamA);
  a.free(q);
  a.free(r);  // merges with q's block and the segment's rest into the whole segment again
  a.empty_cache();
  EXPECT_EQ(dev.raw_frees, 1);
  EXPECT_EQ(dev.used, 0u);
  EXPECT_EQ(a.stats().reserved, 0);
}

TEST(CachingAllocator, LargeRequestsGetTheirOwnSegments) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(3 * kMiB, kStreamA);  // under 10 MiB: a 20 MiB segment
  EXPECT_EQ(dev.used, 20 * kMiB);
  void* q = a.allocate(5 * kMiB, kStreamA);  // split from the same segment
  EXPECT_EQ(dev.raw_allocs, 1);
  void* r = a.allocate(12 * kMiB + 1, kStreamA);  // over 10 MiB: rounded up to 2 MiB
  EXPECT_EQ(dev.raw_allocs, 2);
  EXPECT_EQ(dev.used, 20 * kMiB + 14 * kMiB);
  a.free(p);
  a.free(q);
  a.free(r);
  // A small request never takes a large-pool block.
  void* s = a.allocate(1000, kStreamA);
  EXPECT_EQ(dev.raw_allocs, 3);
  a.free(s);
}

TEST(CachingAllocator, BlocksAreReusedOnlyByTheirStream) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(4096, kStreamA);
  a.free(p);
  void* q = a.allocate(4096, kStreamB);
  EXPECT_NE(q, p);
  EXPECT_EQ(dev.raw_allocs, 2);  // stream B got its own segment
  void* r = a.allocate(4096, kStreamA);
  EXPECT_EQ(r, p);
  a.free(q);
  a.free(r);
}

TEST(CachingAllocator, RecordStreamDefersTheFreeUntilTheOtherStreamIsDone) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(4096, kStreamA);
  a.record_stream(p, kStreamB);
  a.record_stream(p, kStreamB);  // once per stream
  a.record_stream(p, kStreamA);  // its own stream: nothing to do
  a.free(p);
  EXPECT_EQ(dev.events.size(), 1u);
  EXPECT_EQ(dev.event_stream.begin()->second, kStreamB);
  EXPECT_EQ(a.pending_frees(), 1u);
  // Stream B has not finished: the block is not handed out again.
  void* q = a.allocate(4096, kStreamA);
  EXPECT_NE(q, p);
  dev.finish_all();
  void* r = a.allocate(4096, kStreamA);  // processes the event first
  EXPECT_EQ(r, p);
  EXPECT_EQ(a.pending_frees(), 0u);
  EXPECT_TRUE(dev.events.empty());  // destroyed
  a.free(q);
  a.free(r);
}

TEST(CachingAllocator, OutOfMemoryReleasesTheCacheThenReportsTheCounts) {
  FakeDevice dev;
  dev.capacity = 24 * kMiB;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(4 * kMiB, kStreamA);  // a 20 MiB segment
  a.free(p);                                 // cached
  void* q = a.allocate(22 * kMiB, kStreamA);  // needs its own 22 MiB: the cache goes first
  EXPECT_EQ(dev.raw_frees, 1);
  EXPECT_EQ(dev.used, 22 * kMiB);
  EXPECT_THAT(error_of([&] { a.allocate(4 * kMiB, kStreamA); }),
              HasSubstr("cuda:0: out of memory: tried to allocate 4.00 MiB (a segment of "
                        "20.00 MiB); 22.00 MiB allocated and 22.00 MiB reserved by ignis"));
  a.free(q);
}

TEST(CachingAllocator, ErrorsNameTheDevice) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:1");
  int x = 0;
  EXPECT_THAT(error_of([&] { a.free(&x); }),
              HasSubstr("cuda:1: free of a pointer the allocator did not give"));
  EXPECT_THAT(error_of([&] { a.record_stream(&x, kStreamA); }),
              HasSubstr("cuda:1: record_stream on memory the caching allocator did not give"));
  a.free(nullptr);  // a no-op, like free(NULL)
}

TEST(CachingAllocator, ResetPeakStartsFromWhatIsAllocated) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  void* p = a.allocate(8192, kStreamA);
  void* q = a.allocate(8192, kStreamA);
  a.free(q);
  EXPECT_EQ(a.stats().peak_allocated, 16384);
  a.reset_peak();
  EXPECT_EQ(a.stats().peak_allocated, 8192);
  a.free(p);
}

TEST(CachingAllocator, ManyAllocationsInAnyOrderLeaveNothingBehind) {
  FakeDevice dev;
  CachingAllocatorCore a(dev, "cuda:0");
  std::vector<void*> live;
  uint64_t rng = 12345;
  auto next = [&] {
    rng = rng * 6364136223846793005ull + 1442695040888963407ull;
    return rng >> 33;
  };
  std::map<char*, char*> ranges;  // live blocks [begin, end): never overlapping
  for (int i = 0; i < 2000; ++i) {
    if (!live.empty() && next() % 2 == 0) {
      const size_t k = next() % live.size();
      a.free(live[k]);
      ranges.erase(static_cast<char*>(live[k]));
      live.erase(live.begin() + static_cast<std::ptrdiff_t>(k));
      continue;
    }
    const size_t n = (next() % 8 == 0) ? next() % (12 * kMiB) : next() % 70000;
    char* p = static_cast<char*>(a.allocate(n, next() % 2 ? kStreamA : kStreamB));
    auto after = ranges.lower_bound(p);
    if (after != ranges.end()) {
      ASSERT_LE(p + n, after->first);
    }
    if (after != ranges.begin()) {
      ASSERT_LE(std::prev(after)->second, p);
    }
    ranges[p] = p + n;
    live.push_back(p);
  }
  EXPECT_GT(a.stats().allocated, 0);
  for (void* p : live) a.free(p);
  EXPECT_EQ(a.stats().allocated, 0);
  a.empty_cache();  // every segment merged back whole, so all of it is released
  EXPECT_EQ(dev.used, 0u);
  EXPECT_EQ(a.stats().reserved, 0);
}
