// The caching CPU allocator: 64-byte aligned blocks, kept in size-class free lists on free and
// handed out again, so steady-state training loops do not call malloc. Small blocks (<= 4 KiB,
// the per-op temporaries of small tensors) go through a per-thread cache first, whose fast path
// takes no lock and executes no atomic read-modify-write (a locked instruction costs as much as
// the rest of a tiny op's allocation).
#include "ignis/allocator.h"

#include <algorithm>
#include <atomic>
#include <cstdlib>
#include <mutex>
#include <vector>

#include "core/cpu_suballoc.h"
#include "ignis/error.h"

namespace ignis {
namespace {

constexpr size_t kAlign = 64;
constexpr size_t kSmall = 4096;
constexpr int kNumSmall = kSmall / kAlign + 1;  // classes 64, 128, ..., 4096 (index size/64)
constexpr size_t kLocalMax = 32;                // blocks kept per class per thread

// Sizes: 64-byte granularity up to 4 KiB, then powers of two split in quarters (<= 25% waste).
size_t round_size(size_t n) {
  if (n <= kSmall) return n == 0 ? kAlign : (n + kAlign - 1) / kAlign * kAlign;
  int lg = 63 - __builtin_clzll(n - 1);  // 2^lg < n <= 2^(lg+1)
  size_t quarter = size_t{1} << (lg - 1);
  return (size_t{1} << lg) + ((n - (size_t{1} << lg) + quarter - 1) / quarter) * quarter;
}

struct Block {
  void* ptr;
  size_t size;
};

class CpuCachingAllocator;
CpuCachingAllocator& cpu_allocator();

// A thread's cache of small free blocks; returned to the shared cache when the thread exits.
// Its counters are written only by its thread (a relaxed load and store: no locked instruction)
// and summed over the threads by stats().
struct LocalCache {
  std::vector<void*> lists[kNumSmall];
  std::atomic<int64_t> num_allocs{0}, cache_hits{0};
  std::atomic<int64_t> cached_bytes{0};  // bytes of the blocks in `lists`
  LocalCache();
  ~LocalCache();
  static void add(std::atomic<int64_t>& c, int64_t v) {
    c.store(c.load(std::memory_order_relaxed) + v, std::memory_order_relaxed);
  }
};

// Accounting: `out_` counts the bytes of blocks outside the shared cache -- held by tensors or
// parked in a thread's cache -- and changes only on the slow paths (under the lock or with one
// atomic). allocated = out_ minus the bytes parked in the threads' caches.
class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device, void*) override {
    const size_t size = round_size(nbytes);
    // A thread's cache (and its counters) is gone once the thread started exiting.
    LocalCache* lc = in_teardown ? nullptr : &local();
    if (lc != nullptr) {
      LocalCache::add(lc->num_allocs, 1);
      if (size <= kSmall) {
        auto& list = lc->lists[size / kAlign];
        if (!list.empty()) {
          void* p = list.back();
          list.pop_back();
          LocalCache::add(lc->cache_hits, 1);
          LocalCache::add(lc->cached_bytes, -static_cast<int64_t>(size));
          return p;
        }
      }
    } else {
      num_allocs_.fetch_add(1, std::memory_order_relaxed);
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      auto& list = free_[slot(size)];
      for (size_t i = list.size(); i-- > 0;) {
        if (list[i].size == size) {
          void* p = list[i].ptr;
          list[i] = list.back();
          list.pop_back();
          if (lc != nullptr) {
            LocalCache::add(lc->cache_hits, 1);
          } else {
            cache_hits_.fetch_add(1, std::memory_order_relaxed);
          }
          take_out(static_cast<int64_t>(size));
          return p;
        }
      }
    }
    void* p = from_system(size, nbytes);
    take_out(static_cast<int64_t>(size));
    return p;
  }

  /// A new block of `size` bytes (`nbytes` rounded) from the system, counted as reserved.
  void* from_system(size_t size, size_t nbytes) {
    void* p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) {
      empty_cache();  // give the cache back to the system and retry once
      p = std::aligned_alloc(kAlign, size);
    }
    IGNIS_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes (",
                reserved_.load(), " bytes reserved)");
    reserved_.fetch_add(static_cast<int64_t>(size), std::memory_order_relaxed);
    return p;
  }

  void deallocate(void* ptr, size_t nbytes, Device) override {
    if (ptr == nullptr) return;
    const size_t size = round_size(nbytes);
    if (size <= kSmall && !in_teardown) {
      LocalCache& lc = local();
      auto& list = lc.lists[size / kAlign];
      if (list.size() < kLocalMax) {
        list.push_back(ptr);
        LocalCache::add(lc.cached_bytes, static_cast<int64_t>(size));
        return;
      }
    }
    give_back(ptr, size);
  }

  /// Returns a block to the shared cache.
  void give_back(void* ptr, size_t size) {
    out_.fetch_sub(static_cast<int64_t>(size), std::memory_order_relaxed);
    std::lock_guard<std::mutex> g(mu_);
    free_[slot(size)].push_back({ptr, size});
  }

  MemoryStats stats(Device) const override { return stats(); }
  void reset_peak_stats(Device) override { reset_peak(); }
  void empty_cache(Device) override { empty_cache(); }
  MemoryStats stats() const {
    MemoryStats s;
    std::lock_guard<std::mutex> g(threads_mu_);
    s.allocated = out_.load();
    s.num_allocs = num_allocs_.load();
    s.cache_hits = cache_hits_.load();
    for (const LocalCache* lc : threads_) {
      s.allocated -= lc->cached_bytes.load(std::memory_order_relaxed);
      s.num_allocs += lc->num_allocs.load(std::memory_order_relaxed);
      s.cache_hits += lc->cache_hits.load(std::memory_order_relaxed);
    }
    s.reserved = reserved_.load();
    s.peak_allocated = std::max(peak_.load(), s.allocated);
    return s;
  }
  void reset_peak() { peak_.store(stats().allocated); }

  void add_thread(LocalCache* lc) {
    std::lock_guard<std::mutex> g(threads_mu_);
    threads_.push_back(lc);
  }
  /// At thread exit, after its blocks went back: folds the thread's counts into the totals.
  void remove_thread(LocalCache* lc) {
    std::lock_guard<std::mutex> g(threads_mu_);
    num_allocs_.fetch_add(lc->num_allocs.load(std::memory_order_relaxed));
    cache_hits_.fetch_add(lc->cache_hits.load(std::memory_order_relaxed));
    std::erase(threads_, lc);
  }

  /// Gives the blocks of a thread's cache back to the shared cache.
  void drain(LocalCache& lc) {
    for (int c = 0; c < kNumSmall; ++c) {
      for (void* p : lc.lists[c]) give_back(p, static_cast<size_t>(c) * kAlign);
      lc.lists[c].clear();
    }
    lc.cached_bytes.store(0, std::memory_order_relaxed);
  }

  /// Frees the shared cache and this thread's cache (other threads keep theirs until they exit).
  void empty_cache() {
    if (!in_teardown) drain(local());
    std::lock_guard<std::mutex> g(mu_);
    for (auto& list : free_) {
      for (auto& b : list) {
        std::free(b.ptr);
        reserved_.fetch_sub(static_cast<int64_t>(b.size), std::memory_order_relaxed);
      }
      list.clear();
    }
  }

  static thread_local bool in_teardown __attribute__((tls_model("initial-exec")));

  // A sub-allocator's block (reserved) and the storages it hands out (allocated): see
  // core/cpu_suballoc.h.
  void* reserve_block(size_t nbytes) { return from_system(round_size(nbytes), nbytes); }
  void release_block(void* p, size_t nbytes) {
    std::free(p);
    reserved_.fetch_sub(static_cast<int64_t>(round_size(nbytes)), std::memory_order_relaxed);
  }
  void count_suballocation(size_t nbytes, bool handed_back) {
    const auto size = static_cast<int64_t>((nbytes + kAlign - 1) / kAlign * kAlign);
    if (handed_back) {
      out_.fetch_sub(size, std::memory_order_relaxed);
    } else {
      take_out(size);
    }
  }

 private:
  static LocalCache& local() {
    // initial-exec: a direct TLS access, not a __tls_get_addr call, on the per-op path.
    static thread_local LocalCache cache __attribute__((tls_model("initial-exec")));
    return cache;
  }
  static int slot(size_t size) { return 63 - __builtin_clzll(size); }
  // A block leaves the shared cache (or the system) for a tensor: the peak is tracked here, so
  // it counts the small blocks parked in threads' caches as in use (at most kLocalMax per class
  // per thread; exact for larger blocks).
  void take_out(int64_t size) {
    int64_t now = out_.fetch_add(size, std::memory_order_relaxed) + size;
    int64_t peak = peak_.load(std::memory_order_relaxed);
    while (now > peak && !peak_.compare_exchange_weak(peak, now, std::memory_order_relaxed)) {
    }
  }
  std::mutex mu_;
  std::vector<Block> free_[64];
  mutable std::mutex threads_mu_;
  std::vector<LocalCache*> threads_;  // live threads' caches, for their counters
  std::atomic<int64_t> out_{0}, reserved_{0}, peak_{0}, num_allocs_{0}, cache_hits_{0};
};

thread_local bool CpuCachingAllocator::in_teardown __attribute__((tls_model("initial-exec"))) =
    false;

LocalCache::LocalCache() { cpu_allocator().add_thread(this); }

LocalCache::~LocalCache() {
  CpuCachingAllocator::in_teardown = true;
  cpu_allocator().drain(*this);
  cpu_allocator().remove_thread(this);
}

CpuCachingAllocator& cpu_allocator() {
  static auto* a = new CpuCachingAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

/// The meta device holds no data: every storage gets the same non-null address (never read or
/// written: meta kernels do nothing, and host reads of meta tensors are refused), and the bytes
/// a meta tensor would take are counted, so that a meta run reports what a real one would hold.
class MetaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device, void*) override {
    const int64_t now =
        allocated_.fetch_add(static_cast<int64_t>(nbytes)) + static_cast<int64_t>(nbytes);
    int64_t peak = peak_.load();
    while (now > peak && !peak_.compare_exchange_weak(peak, now)) {
    }
    num_allocs_.fetch_add(1);
    return sentinel_;
  }
  void deallocate(void*, size_t nbytes, Device) override {
    allocated_.fetch_sub(static_cast<int64_t>(nbytes));
  }
  MemoryStats stats(Device) const override {
    MemoryStats s;
    s.allocated = allocated_.load();
    s.peak_allocated = peak_.load();
    s.num_allocs = num_allocs_.load();
    return s;
  }
  void reset_peak_stats(Device) override { peak_.store(allocated_.load()); }
  void empty_cache(Device) override {}

 private:
  alignas(64) char sentinel_[64] = {};
  std::atomic<int64_t> allocated_{0}, peak_{0}, num_allocs_{0};
};

MetaAllocator& meta_allocator() {
  static auto* a = new MetaAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

Allocator* registered[kNumDeviceTypes] = {};

Allocator* find_allocator(Device device) {
  if (device.is_cpu()) return &cpu_allocator();
  if (device.is_meta()) return &meta_allocator();
  return registered[static_cast<int>(device.type)];
}

}  // namespace

namespace detail {
void* cpu_reserve_block(size_t nbytes) { return cpu_allocator().reserve_block(nbytes); }
void cpu_release_block(void* ptr, size_t nbytes) { cpu_allocator().release_block(ptr, nbytes); }
void cpu_count_suballocation(size_t nbytes, bool handed_back) {
  cpu_allocator().count_suballocation(nbytes, handed_back);
}
}  // namespace detail

Allocator& allocator_for(Device device) {
  Allocator* a = find_allocator(device);
  IGNIS_CHECK(a != nullptr, "to(", device.str(),
              "): ignis was built without a CUDA backend, so no tensor can live on ", device.str());
  return *a;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  registered[static_cast<int>(type)] = allocator;
}

MemoryStats memory_stats(Device device) {
  Allocator* a = find_allocator(device);
  IGNIS_CHECK(a != nullptr, "memory_stats: no allocator statistics for ", device.str());
  return a->stats(device);
}
void reset_peak_memory_stats(Device device) {
  Allocator* a = find_allocator(device);
  IGNIS_CHECK(a != nullptr, "reset_peak_memory_stats: no allocator for ", device.str());
  a->reset_peak_stats(device);
}
void empty_cache(Device device) {
  Allocator* a = find_allocator(device);
  IGNIS_CHECK(a != nullptr, "empty_cache: no allocator for ", device.str());
  a->empty_cache(device);
}

}  // namespace ignis
