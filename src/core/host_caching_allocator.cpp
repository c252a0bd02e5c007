#include "core/host_caching_allocator.h"

#include <algorithm>
#include <bit>
#include <cstdint>
#include <exception>
#include <string>

#include "core/caching_allocator.h"
#include "ignis/error.h"

namespace ignis::detail {

HostCachingAllocatorCore::HostCachingAllocatorCore(PinnedMemoryApi& api) : api_(api) {}

HostCachingAllocatorCore::~HostCachingAllocatorCore() {
  // At exit the driver may be gone: nothing is given back, the bookkeeping is freed.
  for (auto& [p, b] : blocks_) delete b;
}

size_t HostCachingAllocatorCore::round_size(size_t nbytes) {
  if (nbytes <= kMinBlock) return kMinBlock;
  IGNIS_CHECK(nbytes <= (SIZE_MAX >> 1) + 1, "pinned host memory: a request of ", nbytes,
              " bytes overflows");
  return std::bit_ceil(nbytes);
}

int HostCachingAllocatorCore::class_of(size_t size) { return std::countr_zero(size); }

void* HostCachingAllocatorCore::allocate(size_t nbytes) {
  const size_t size = round_size(nbytes);
  const int c = class_of(size);
  {
    std::lock_guard<std::mutex> g(mu_);
    ++stats_.num_allocs;
    std::vector<Block*>& list = free_[static_cast<size_t>(c)];
    if (list.empty() && !pending_.empty()) process_events_locked();
    if (!list.empty()) {
      Block* b = list.back();  // the most recently released: likely still in the CPU's caches
      list.pop_back();
      b->allocated = true;
      ++stats_.cache_hits;
      stats_.cached -= static_cast<int64_t>(size);
      stats_.allocated += static_cast<int64_t>(size);
      stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
      return b->ptr;
    }
  }
  // A new block, allocated outside the lock (cudaHostAlloc is slow).
  void* p = api_.alloc_pinned(size);
  if (p == nullptr) {
    empty_cache();  // give the free blocks back and try once more
    p = api_.alloc_pinned(size);
  }
  std::lock_guard<std::mutex> g(mu_);
  IGNIS_CHECK(p != nullptr, "pinned host memory: out of memory: tried to allocate ",
              format_mib(static_cast<int64_t>(nbytes)), " (a block of ",
              format_mib(static_cast<int64_t>(size)), "); ", format_mib(stats_.allocated),
              " in use and ", format_mib(stats_.cached), " cached by ignis");
  auto* b = new Block;
  b->ptr = p;
  b->size = size;
  b->size_class = c;
  b->allocated = true;
  blocks_.emplace(p, b);
  stats_.allocated += static_cast<int64_t>(size);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return p;
}

void HostCachingAllocatorCore::release(void* ptr) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = blocks_.find(ptr);
  IGNIS_CHECK(it != blocks_.end() && it->second->allocated,
              "pinned host memory: release of a pointer the cache did not give, or gave back "
              "already");
  Block* b = it->second;
  b->allocated = false;
  stats_.allocated -= static_cast<int64_t>(b->size);
  stats_.cached += static_cast<int64_t>(b->size);
  if (b->uses.empty()) {
    free_[static_cast<size_t>(b->size_class)].push_back(b);
  } else {
    pending_.push_back(b);
    ++stats_.pending;
  }
}

bool HostCachingAllocatorCore::record_event(void* ptr, void* stream, int device) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = blocks_.find(ptr);
  if (it == blocks_.end() || !it->second->allocated) return false;
  Block* b = it->second;
  for (Use& u : b->uses) {
    if (u.stream == stream && u.device == device) {
      // The stream runs in order: the new event completes after the old one.
      void* old = u.event;
      u.event = api_.record_event(stream, device);
      api_.destroy_event(old);
      return true;
    }
  }
  void* e = api_.record_event(stream, device);
  b->uses.push_back({stream, device, e});
  return true;
}

bool HostCachingAllocatorCore::owns(void* ptr) const {
  std::lock_guard<std::mutex> g(mu_);
  auto it = blocks_.find(ptr);
  return it != blocks_.end() && it->second->allocated;
}

void HostCachingAllocatorCore::process_events_locked() {
  // In release order, up to the first block still in use by a copy (as PyTorch's host
  // allocator): each call costs what it frees plus one query, however far the host is ahead.
  // Each step leaves the lists consistent, so an error from the runtime (thrown by the API)
  // loses at most one event.
  while (!pending_.empty()) {
    Block* b = pending_.front();
    while (!b->uses.empty() && api_.event_done(b->uses.back().event)) {
      void* e = b->uses.back().event;
      b->uses.pop_back();
      api_.destroy_event(e);
    }
    if (!b->uses.empty()) break;
    pending_.pop_front();
    --stats_.pending;
    free_[static_cast<size_t>(b->size_class)].push_back(b);
  }
}

void HostCachingAllocatorCore::empty_cache() {
  std::vector<void*> ptrs;
  {
    std::lock_guard<std::mutex> g(mu_);
    process_events_locked();
    for (std::vector<Block*>& list : free_) {
      for (Block* b : list) {
        ptrs.push_back(b->ptr);
        stats_.cached -= static_cast<int64_t>(b->size);
        blocks_.erase(b->ptr);
        delete b;
      }
      list.clear();
    }
  }
  // Outside the lock: cudaFreeHost waits for the device. A failure does not stop the others.
  std::exception_ptr first;
  for (void* p : ptrs) {
    try {
      api_.free_pinned(p);
    } catch (...) {
      if (!first) first = std::current_exception();
    }
  }
  if (first) std::rethrow_exception(first);
}

HostCacheStats HostCachingAllocatorCore::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void HostCachingAllocatorCore::reset_peak() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.peak_allocated = stats_.allocated;
}

}  // namespace ignis::detail
