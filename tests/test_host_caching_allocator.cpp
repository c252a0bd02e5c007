// The pinned host cache's bookkeeping (core/host_caching_allocator.h) over a fake runtime: pinned
// memory from the heap, streams that complete their events in order when the test says so. Runs
// on any machine.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <atomic>
#include <cstdint>
#include <cstdlib>
#include <cstring>
#include <map>
#include <mutex>
#include <random>
#include <set>
#include <thread>
#include <utility>
#include <vector>

#include "core/host_caching_allocator.h"
#include "test_util.h"

using ignis::error_of;
using ignis::detail::HostCacheStats;
using ignis::detail::HostCachingAllocatorCore;
using ::testing::HasSubstr;

namespace {

using StreamKey = std::pair<void*, int>;  // (stream, device)

// Pinned memory from malloc; each (stream, device) is an in-order queue of events: event k of a
// stream is done once the test has completed the stream up to k. Thread-safe (the cache calls
// alloc_pinned and free_pinned outside its lock).
struct FakePinned : ignis::detail::PinnedMemoryApi {
  struct Event {
    StreamKey stream;
    uint64_t seq;
  };
  struct Queue {
    uint64_t recorded = 0, completed = 0;
  };
  mutable std::mutex mu;
  size_t capacity = size_t{1} << 30;
  size_t used = 0;
  std::map<void*, size_t> live;  // pinned allocations
  std::vector<size_t> alloc_sizes;
  int allocs = 0, frees = 0;
  std::map<StreamKey, Queue> queues;
  std::map<intptr_t, Event> events;  // live (not destroyed) events
  intptr_t next_event = 1;
  int destroyed = 0;
  static inline thread_local Event last_recorded{};  // this thread's last record_event

  void* alloc_pinned(size_t n) override {
    std::lock_guard<std::mutex> g(mu);
    if (used + n > capacity) return nullptr;
    void* p = std::malloc(n);
    used += n;
    live[p] = n;
    alloc_sizes.push_back(n);
    ++allocs;
    return p;
  }
  void free_pinned(void* p) override {
    std::lock_guard<std::mutex> g(mu);
    auto it = live.find(p);
    if (it == live.end()) {
      ADD_FAILURE() << "free_pinned of memory not allocated";
      return;
    }
    used -= it->second;
    live.erase(it);
    std::free(p);
    ++frees;
  }
  void* record_event(void* stream, int device) override {
    std::lock_guard<std::mutex> g(mu);
    const StreamKey k{stream, device};
    const Event e{k, ++queues[k].recorded};
    const intptr_t id = next_event++;
    events[id] = e;
    last_recorded = e;
    return reinterpret_cast<void*>(id);
  }
  int queries = 0;
  bool event_done(void* e) override {
    std::lock_guard<std::mutex> g(mu);
    ++queries;
    auto it = events.find(reinterpret_cast<intptr_t>(e));
    if (it == events.end()) {
      ADD_FAILURE() << "event_done on a destroyed event";
      return true;
    }
    return it->second.seq <= queues[it->second.stream].completed;
  }
  void destroy_event(void* e) override {
    std::lock_guard<std::mutex> g(mu);
    if (events.erase(reinterpret_cast<intptr_t>(e)) != 1) ADD_FAILURE() << "double destroy";
    ++destroyed;
  }

  // The test's side.
  bool done(const Event& e) const {
    std::lock_guard<std::mutex> g(mu);
    auto it = queues.find(e.stream);
    return it != queues.end() && e.seq <= it->second.completed;
  }
  void complete(void* stream, int device = 0, uint64_t upto = UINT64_MAX) {
    std::lock_guard<std::mutex> g(mu);
    Queue& q = queues[{stream, device}];
    q.completed = std::min(upto, q.recorded);
  }
  void complete_all() {
    std::lock_guard<std::mutex> g(mu);
    for (auto& [k, q] : queues) q.completed = q.recorded;
  }
  size_t live_events() const {
    std::lock_guard<std::mutex> g(mu);
    return events.size();
  }
  ~FakePinned() override {
    for (auto& [p, n] : live) std::free(p);
  }
};

void* const kStreamA = reinterpret_cast<void*>(0x10);
void* const kStreamB = reinterpret_cast<void*>(0x20);

}  // namespace

TEST(HostCachingAllocator, RoundsSizesToPowersOfTwoOfAtLeast512) {
  EXPECT_EQ(HostCachingAllocatorCore::round_size(0), 512u);
  EXPECT_EQ(HostCachingAllocatorCore::round_size(1), 512u);
  EXPECT_EQ(HostCachingAllocatorCore::round_size(512), 512u);
  EXPECT_EQ(HostCachingAllocatorCore::round_size(513), 1024u);
  EXPECT_EQ(HostCachingAllocatorCore::round_size(1000), 1024u);
  EXPECT_EQ(HostCachingAllocatorCore::round_size(1 << 20), size_t{1} << 20);
  EXPECT_EQ(HostCachingAllocatorCore::round_size((1 << 20) + 1), size_t{2} << 20);
  EXPECT_EQ(HostCachingAllocatorCore::round_size((SIZE_MAX >> 1) + 1), (SIZE_MAX >> 1) + 1);
  EXPECT_THAT(error_of([] { (void)HostCachingAllocatorCore::round_size(SIZE_MAX); }),
              HasSubstr("pinned host memory: a request of"));
}

TEST(HostCachingAllocator, ReleasedBlocksAreReusedWithinTheirSizeClass) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* p = c.allocate(1000);  // class 1024
  std::memset(p, 1, 1024);     // the whole block is usable
  c.release(p);
  EXPECT_EQ(c.allocate(600), p);  // the same class: the cached block, no new allocation
  void* q = c.allocate(2000);     // class 2048: a new block
  void* r = c.allocate(100);      // class 512: a new block
  void* s = c.allocate(900);      // class 1024, but p is in use: a new block
  EXPECT_NE(q, p);
  EXPECT_NE(r, p);
  EXPECT_NE(s, p);
  EXPECT_EQ(rt.alloc_sizes, (std::vector<size_t>{1024, 2048, 512, 1024}));
  HostCacheStats st = c.stats();
  EXPECT_EQ(st.allocated, 1024 + 2048 + 512 + 1024);
  EXPECT_EQ(st.cached, 0);
  EXPECT_EQ(st.num_allocs, 5);
  EXPECT_EQ(st.cache_hits, 1);
  for (void* x : {p, q, r, s}) c.release(x);
  st = c.stats();
  EXPECT_EQ(st.allocated, 0);
  EXPECT_EQ(st.cached, 1024 + 2048 + 512 + 1024);
  EXPECT_EQ(st.peak_allocated, 1024 + 2048 + 512 + 1024);
  // Each class gives back its own blocks, the most recently released first.
  EXPECT_EQ(c.allocate(1500), q);
  EXPECT_EQ(c.allocate(1024), s);
  EXPECT_EQ(c.allocate(1), r);
  EXPECT_EQ(rt.allocs, 4);
  EXPECT_EQ(rt.frees, 0);
}

TEST(HostCachingAllocator, ZeroBytesGiveDistinctUsableBlocks) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* a = c.allocate(0);
  void* b = c.allocate(0);
  ASSERT_NE(a, nullptr);
  EXPECT_NE(a, b);
  EXPECT_EQ(rt.alloc_sizes, (std::vector<size_t>{512, 512}));
  c.release(a);
  c.release(b);
}

TEST(HostCachingAllocator, ABlockIsReusedOnlyAfterItsEventHasCompleted) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* p = c.allocate(4096);
  EXPECT_TRUE(c.owns(p));
  EXPECT_TRUE(c.record_event(p, kStreamA, 0));  // an async copy reads p on stream A
  c.release(p);
  EXPECT_FALSE(c.owns(p));
  EXPECT_EQ(c.stats().pending, 1);
  EXPECT_EQ(c.stats().cached, 4096);
  void* q = c.allocate(4096);  // p's copy may still be running: a new block
  EXPECT_NE(q, p);
  EXPECT_EQ(rt.allocs, 2);
  c.release(q);                    // no event: free at once
  EXPECT_EQ(c.allocate(4096), q);  // q is reused before p
  EXPECT_EQ(c.stats().pending, 1);
  rt.complete(kStreamA);
  EXPECT_EQ(c.allocate(4096), p);  // asked (never waited for): done, so p is reused
  EXPECT_EQ(c.stats().pending, 0);
  EXPECT_EQ(rt.live_events(), 0u);  // the completed event was destroyed
  EXPECT_EQ(rt.allocs, 2);
  c.release(p);
  c.release(q);
}

// Released blocks are reclaimed in release order, up to the first one still in use (as
// PyTorch's host allocator): a host far ahead of the GPU pays one event query per allocation,
// not one per pending block.
TEST(HostCachingAllocator, PendingBlocksAreReclaimedInReleaseOrderWithBoundedQueries) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  std::vector<void*> blocks;
  for (int i = 0; i < 50; ++i) {
    void* p = c.allocate(4096);  // each pending one before: a new block every time
    EXPECT_TRUE(c.record_event(p, kStreamA, 0));
    c.release(p);
    blocks.push_back(p);
  }
  EXPECT_EQ(rt.allocs, 50);
  EXPECT_EQ(c.stats().pending, 50);
  // The first block's copy is still queued: the scan stops there, after one query.
  rt.queries = 0;
  void* q = c.allocate(4096);
  EXPECT_EQ(rt.queries, 1);
  EXPECT_EQ(rt.allocs, 51);
  c.release(q);  // no event: free at once
  // The first half of the copies complete: those blocks come back, in release order, and the
  // scan stops at the first block still in use.
  rt.complete(kStreamA, 0, 25);
  rt.queries = 0;
  EXPECT_EQ(c.allocate(4096), q);  // a free block first: no query
  EXPECT_EQ(rt.queries, 0);
  void* r = c.allocate(4096);
  EXPECT_EQ(rt.queries, 26);  // 25 done, then the 26th still queued
  EXPECT_EQ(c.stats().pending, 25);
  EXPECT_TRUE(r == blocks[0] || r == blocks[24]) << "a reclaimed block";
  c.release(q);
  c.release(r);
  rt.complete_all();
  c.empty_cache();
  EXPECT_EQ(c.stats().pending, 0);
  EXPECT_EQ(rt.live_events(), 0u);
}

TEST(HostCachingAllocator, EveryStreamsEventMustComplete) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* p = c.allocate(512);
  c.record_event(p, kStreamA, 0);
  c.record_event(p, kStreamB, 0);
  c.record_event(p, kStreamA, 1);  // the same handle on another GPU is another stream
  EXPECT_EQ(rt.live_events(), 3u);
  c.release(p);
  rt.complete(kStreamA, 0);
  rt.complete(kStreamB, 0);
  void* q = c.allocate(512);
  EXPECT_NE(q, p);  // stream A of GPU 1 has not finished
  rt.complete(kStreamA, 1);
  void* r = c.allocate(512);
  EXPECT_EQ(r, p);
  EXPECT_EQ(rt.live_events(), 0u);
  c.release(q);
  c.release(r);
}

TEST(HostCachingAllocator, ALaterUseOnTheSameStreamReplacesItsEvent) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* p = c.allocate(512);
  c.record_event(p, kStreamA, 0);  // event 1 of stream A
  c.record_event(p, kStreamA, 0);  // event 2 replaces it
  EXPECT_EQ(rt.live_events(), 1u);
  EXPECT_EQ(rt.destroyed, 1);
  c.release(p);
  rt.complete(kStreamA, 0, 1);  // only the first use has completed
  void* q = c.allocate(512);
  EXPECT_NE(q, p);
  rt.complete(kStreamA, 0, 2);
  EXPECT_EQ(c.allocate(512), p);
  c.release(p);
  c.release(q);
}

TEST(HostCachingAllocator, ForeignOrReleasedPointersAreRefused) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  int x = 0;
  EXPECT_FALSE(c.record_event(&x, kStreamA, 0));  // not from the cache: nothing recorded
  EXPECT_FALSE(c.owns(&x));
  void* p = c.allocate(10);
  c.release(p);
  EXPECT_FALSE(c.record_event(p, kStreamA, 0));  // released: nothing recorded
  EXPECT_EQ(rt.live_events(), 0u);
  EXPECT_THAT(error_of([&] { c.release(p); }),
              HasSubstr("pinned host memory: release of a pointer the cache did not give, or "
                        "gave back already"));
  EXPECT_THAT(error_of([&] { c.release(&x); }), HasSubstr("the cache did not give"));
  EXPECT_EQ(c.stats().allocated, 0);
  EXPECT_EQ(c.stats().cached, 512);
}

TEST(HostCachingAllocator, EmptyCacheFreesOnlyBlocksNothingUses) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  void* in_use = c.allocate(3000);  // 4096
  void* pending = c.allocate(100);  // 512
  void* free1 = c.allocate(70000);  // 131072
  void* free2 = c.allocate(600);    // 1024
  c.record_event(pending, kStreamB, 0);
  c.release(pending);
  c.release(free1);
  c.release(free2);
  HostCacheStats st = c.stats();
  EXPECT_EQ(st.allocated, 4096);
  EXPECT_EQ(st.cached, 512 + 131072 + 1024);
  EXPECT_EQ(st.pending, 1);
  c.empty_cache();
  EXPECT_EQ(rt.frees, 2);
  EXPECT_EQ(rt.live.count(free1), 0u);
  EXPECT_EQ(rt.live.count(free2), 0u);
  EXPECT_EQ(rt.live.count(in_use), 1u);
  EXPECT_EQ(rt.live.count(pending), 1u);  // its copy may be running
  st = c.stats();
  EXPECT_EQ(st.allocated, 4096);
  EXPECT_EQ(st.cached, 512);
  rt.complete(kStreamB);
  c.empty_cache();  // the event is asked: done, so the block goes too
  EXPECT_EQ(rt.frees, 3);
  EXPECT_EQ(c.stats().cached, 0);
  EXPECT_EQ(c.stats().pending, 0);
  c.release(in_use);
  c.empty_cache();
  EXPECT_TRUE(rt.live.empty());
  EXPECT_EQ(rt.used, 0u);
  st = c.stats();
  EXPECT_EQ(st.allocated, 0);
  EXPECT_EQ(st.cached, 0);
  EXPECT_EQ(st.peak_allocated, 4096 + 512 + 131072 + 1024);
  c.reset_peak();
  EXPECT_EQ(c.stats().peak_allocated, 0);
}

TEST(HostCachingAllocator, OutOfMemoryGivesTheCacheBackThenReportsTheCounts) {
  FakePinned rt;
  rt.capacity = 8192;
  HostCachingAllocatorCore c(rt);
  void* a = c.allocate(4096);
  void* b = c.allocate(2048);
  c.release(b);  // cached, free
  // 4096 more do not fit beside a and b: b is given back, and then they do.
  void* d = c.allocate(4000);
  EXPECT_EQ(rt.frees, 1);
  EXPECT_EQ(c.stats().cached, 0);
  EXPECT_THAT(error_of([&] { (void)c.allocate(1); }),
              HasSubstr("pinned host memory: out of memory: tried to allocate 0.00 MiB (a block "
                        "of 0.00 MiB); 0.01 MiB in use and 0.00 MiB cached by ignis"));
  c.release(a);
  c.release(d);
  EXPECT_EQ(c.stats().allocated, 0);
  EXPECT_EQ(c.stats().num_allocs, 4);
}

// Random allocations, uses on three streams of two GPUs, releases and stream progress: a block
// handed out never has a pending event, never overlaps another live block, and holds the
// request; at the end everything can be given back.
TEST(HostCachingAllocator, RandomUseNeverReusesABlockWithAPendingEvent) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  std::mt19937 rng(20240611);
  const StreamKey streams[] = {{kStreamA, 0}, {kStreamB, 0}, {kStreamA, 1}};
  struct Live {
    size_t n;
    unsigned char tag;
  };
  std::map<char*, Live> live;
  std::map<void*, std::vector<FakePinned::Event>> uses;  // every event recorded, per block
  int hits_checked = 0;
  for (int step = 0; step < 5000; ++step) {
    const int op = static_cast<int>(rng() % 10);
    if (op < 4 || live.empty()) {
      const size_t n = std::uniform_int_distribution<size_t>(0, 20000)(rng);
      char* p = static_cast<char*>(c.allocate(n));
      ASSERT_NE(p, nullptr);
      ASSERT_GE(rt.live.at(p), std::max<size_t>(n, 1));
      for (const FakePinned::Event& e : uses[p]) {
        ASSERT_TRUE(rt.done(e)) << "a block was reused before its copy on stream " << e.stream.first
                                << " of GPU " << e.stream.second << " had completed (event "
                                << e.seq << ")";
        ++hits_checked;
      }
      uses[p].clear();
      ASSERT_EQ(live.count(p), 0u) << "a live block was handed out again";
      // No overlap with a live block.
      auto next = live.lower_bound(p);
      if (next != live.end()) {
        ASSERT_LE(p + n, next->first);
      }
      if (next != live.begin()) {
        auto prev = std::prev(next);
        ASSERT_LE(prev->first + prev->second.n, p);
      }
      const auto tag = static_cast<unsigned char>(rng());
      std::memset(p, tag, n);
      live[p] = {n, tag};
    } else if (op < 7) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      const StreamKey s = streams[rng() % 3];
      ASSERT_TRUE(c.record_event(it->first, s.first, s.second));
      uses[it->first].push_back(FakePinned::last_recorded);
    } else if (op < 9) {
      auto it = std::next(live.begin(), static_cast<long>(rng() % live.size()));
      for (size_t i = 0; i < it->second.n; ++i) {
        ASSERT_EQ(static_cast<unsigned char>(it->first[i]), it->second.tag) << "overwritten";
      }
      c.release(it->first);
      live.erase(it);
    } else {
      const StreamKey s = streams[rng() % 3];
      const uint64_t recorded = rt.queues[s].recorded;
      rt.complete(s.first, s.second, rt.queues[s].completed + rng() % (recorded + 1));
      if (rng() % 50 == 0) c.empty_cache();
    }
    const HostCacheStats st = c.stats();
    int64_t in_use = 0;
    for (auto& [p, l] : live) {
      in_use += static_cast<int64_t>(HostCachingAllocatorCore::round_size(l.n));
    }
    ASSERT_EQ(st.allocated, in_use);
    size_t held = 0;
    for (auto& [p, n] : rt.live) held += n;
    ASSERT_EQ(static_cast<size_t>(st.allocated + st.cached), held);
  }
  EXPECT_GT(hits_checked, 100);  // reuse after completed events did happen
  EXPECT_GT(c.stats().cache_hits, 500);
  for (auto& [p, l] : live) c.release(p);
  rt.complete_all();
  c.empty_cache();
  EXPECT_TRUE(rt.live.empty());
  EXPECT_EQ(rt.live_events(), 0u);
  EXPECT_EQ(c.stats().allocated, 0);
  EXPECT_EQ(c.stats().cached, 0);
  EXPECT_EQ(c.stats().pending, 0);
}

// Several threads allocate, fill, record uses on shared streams and release at once, while
// another completes the streams: no block is handed to two users, none before its events have
// completed, and the counts add up.
TEST(HostCachingAllocator, ThreadsShareTheCacheSafely) {
  FakePinned rt;
  HostCachingAllocatorCore c(rt);
  constexpr int kThreads = 6, kIters = 3000;
  std::mutex log_mu;
  std::map<void*, std::vector<FakePinned::Event>> uses;
  std::atomic<bool> stop{false};
  std::atomic<int> early{0}, overwritten{0};
  std::thread completer([&] {
    while (!stop.load()) {
      for (void* s : {kStreamA, kStreamB}) {
        std::lock_guard<std::mutex> g(rt.mu);
        auto& q = rt.queues[{s, 0}];
        if (q.completed < q.recorded) ++q.completed;
      }
      std::this_thread::yield();
    }
  });
  std::vector<std::thread> workers;
  for (int t = 0; t < kThreads; ++t) {
    workers.emplace_back([&, t] {
      std::mt19937 rng(static_cast<unsigned>(t) * 7919u + 1);
      for (int i = 0; i < kIters; ++i) {
        const size_t n = 1 + rng() % 5000;
        auto* p = static_cast<unsigned char*>(c.allocate(n));
        {
          std::lock_guard<std::mutex> g(log_mu);
          for (const FakePinned::Event& e : uses[p]) {
            if (!rt.done(e)) ++early;
          }
          uses[p].clear();
        }
        const auto tag = static_cast<unsigned char>(t + 1);
        std::memset(p, tag, n);
        if (rng() % 2 == 0) {
          void* s = rng() % 2 == 0 ? kStreamA : kStreamB;
          c.record_event(p, s, 0);
          std::lock_guard<std::mutex> g(log_mu);
          uses[p].push_back(FakePinned::last_recorded);
        }
        std::this_thread::yield();
        for (size_t k = 0; k < n; ++k) {
          if (p[k] != tag) {
            ++overwritten;
            break;
          }
        }
        c.release(p);
      }
    });
  }
  for (std::thread& w : workers) w.join();
  stop = true;
  completer.join();
  EXPECT_EQ(early.load(), 0) << "a block was reused before its event had completed";
  EXPECT_EQ(overwritten.load(), 0) << "a block was handed to two users at once";
  HostCacheStats st = c.stats();
  EXPECT_EQ(st.allocated, 0);
  EXPECT_EQ(st.num_allocs, kThreads * kIters);
  EXPECT_GT(st.cache_hits, kThreads * kIters / 2);
  rt.complete_all();
  c.empty_cache();
  EXPECT_TRUE(rt.live.empty());
  EXPECT_EQ(rt.live_events(), 0u);
  EXPECT_EQ(c.stats().cached, 0);
}
