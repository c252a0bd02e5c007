// The caching CPU allocator: 64-byte aligned blocks, kept in size-class free lists on free and
// handed out again, so steady-state training loops do not call malloc.
#include "ignis/allocator.h"

#include <cstdlib>
#include <mutex>
#include <vector>

#include "ignis/error.h"

namespace ignis {
namespace {

constexpr size_t kAlign = 64;
constexpr int kNumClasses = 64;

// Size classes: 64-byte granularity up to 4 KiB, then powers of two split in 4 (at most 25%
// waste), so a freed block serves any later request of its class.
size_t round_size(size_t n, int* cls) {
  if (n <= 4096) {
    size_t r = (n + kAlign - 1) / kAlign * kAlign;
    if (r == 0) r = kAlign;
    *cls = -1;
    return r;
  }
  int lg = 63 - __builtin_clzll(n - 1);  // 2^lg < n <= 2^(lg+1)
  size_t quarter = size_t{1} << (lg - 1);
  size_t r = (size_t{1} << lg) + ((n - (size_t{1} << lg) + quarter - 1) / quarter) * quarter;
  *cls = 0;
  return r;
}

class CpuCachingAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes) override {
    int cls;
    size_t size = round_size(nbytes, &cls);
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.num_allocs;
    auto& list = free_[slot(size)];
    for (size_t i = list.size(); i-- > 0;) {
      if (list[i].size == size) {
        void* p = list[i].ptr;
        list[i] = list.back();
        list.pop_back();
        ++stats_.cache_hits;
        cached_ -= static_cast<int64_t>(size);
        account(size);
        return p;
      }
    }
    void* p = std::aligned_alloc(kAlign, size);
    if (p == nullptr) {
      // Give the cache back to the system and retry once before failing.
      release_cache_locked();
      p = std::aligned_alloc(kAlign, size);
    }
    IGNIS_CHECK(p != nullptr, "CPU allocator: out of memory allocating ", nbytes, " bytes (",
                stats_.reserved, " bytes reserved)");
    stats_.reserved += static_cast<int64_t>(size);
    account(size);
    return p;
  }
  void deallocate(void* ptr, size_t nbytes) override {
    if (ptr == nullptr) return;
    int cls;
    size_t size = round_size(nbytes, &cls);
    std::lock_guard<std::mutex> g(mu_);
    stats_.allocated -= static_cast<int64_t>(size);
    free_[slot(size)].push_back({ptr, size});
    cached_ += static_cast<int64_t>(size);
  }
  MemoryStats stats() {
    std::lock_guard<std::mutex> g(mu_);
    return stats_;
  }
  void reset_peak() {
    std::lock_guard<std::mutex> g(mu_);
    stats_.peak_allocated = stats_.allocated;
  }
  void empty_cache() {
    std::lock_guard<std::mutex> g(mu_);
    release_cache_locked();
  }
  ~CpuCachingAllocator() override { release_cache_locked(); }

 private:
  struct Block {
    void* ptr;
    size_t size;
  };
  static int slot(size_t size) {
    return static_cast<int>((63 - __builtin_clzll(size)) % kNumClasses);
  }
  void account(size_t size) {
    stats_.allocated += static_cast<int64_t>(size);
    if (stats_.allocated > stats_.peak_allocated) stats_.peak_allocated = stats_.allocated;
  }
  void release_cache_locked() {
    for (auto& list : free_) {
      for (auto& b : list) {
        std::free(b.ptr);
        stats_.reserved -= static_cast<int64_t>(b.size);
      }
      list.clear();
    }
    cached_ = 0;
  }
  std::mutex mu_;
  std::vector<Block> free_[kNumClasses];
  MemoryStats stats_;
  int64_t cached_ = 0;
};

CpuCachingAllocator& cpu_allocator() {
  static auto* a = new CpuCachingAllocator();  // never destroyed: tensors may outlive main
  return *a;
}

Allocator* registered[kNumDeviceTypes] = {nullptr, nullptr};

}  // namespace

Allocator& allocator_for(Device device) {
  if (device.is_cpu()) return cpu_allocator();
  Allocator* a = registered[static_cast<int>(device.type)];
  IGNIS_CHECK(a != nullptr, "to(", device.str(),
              "): ignis was built without a CUDA backend, so no tensor can live on ", device.str());
  return *a;
}

void register_allocator(DeviceType type, Allocator* allocator) {
  registered[static_cast<int>(type)] = allocator;
}

MemoryStats memory_stats(Device device) {
  IGNIS_CHECK(device.is_cpu(), "memory_stats: no allocator statistics for ", device.str());
  return cpu_allocator().stats();
}
void reset_peak_memory_stats(Device device) {
  IGNIS_CHECK(device.is_cpu(), "reset_peak_memory_stats: no allocator for ", device.str());
  cpu_allocator().reset_peak();
}
void empty_cache(Device device) {
  IGNIS_CHECK(device.is_cpu(), "empty_cache: no allocator for ", device.str());
  cpu_allocator().empty_cache();
}

}  // namespace ignis
