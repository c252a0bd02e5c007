#include "core/caching_allocator.h"

#include <algorithm>
#include <sstream>

#include "ignis/error.h"

namespace ignis::detail {

std::string format_mib(int64_t b) {
  std::ostringstream os;
  os.precision(2);
  os << std::fixed << static_cast<double>(b) / (1 << 20) << " MiB";
  return os.str();
}

bool CachingAllocatorCore::Order::operator()(const Block* a, const Block* b) const {
  if (a->stream != b->stream) return std::less<void*>()(a->stream, b->stream);
  if (a->size != b->size) return a->size < b->size;
  return std::less<char*>()(a->ptr, b->ptr);
}

CachingAllocatorCore::CachingAllocatorCore(DeviceMemoryApi& api, std::string device_name)
    : api_(api), device_(std::move(device_name)) {}

CachingAllocatorCore::~CachingAllocatorCore() {
  // At exit: the device may already be gone, so nothing is given back; the blocks' bookkeeping
  // is freed.
  std::set<Block*> all;
  for (Block* b : small_) all.insert(b);
  for (Block* b : large_) all.insert(b);
  for (auto& [p, b] : active_) all.insert(b);
  for (auto& [e, b] : events_) all.insert(b);
  for (Block* b : all) delete b;
}

size_t CachingAllocatorCore::round_size(size_t nbytes) {
  if (nbytes < kRound) return kRound;
  IGNIS_CHECK(nbytes <= SIZE_MAX - kRound, "CUDA allocator: a request of ", nbytes,
              " bytes overflows");
  return (nbytes + kRound - 1) / kRound * kRound;
}

CachingAllocatorCore::Block* CachingAllocatorCore::find_free(Pool& pool, void* stream,
                                                             size_t size) {
  Block key;
  key.stream = stream;
  key.size = size;
  auto it = pool.lower_bound(&key);
  if (it == pool.end() || (*it)->stream != stream) return nullptr;
  Block* b = *it;
  pool.erase(it);
  return b;
}

CachingAllocatorCore::Block* CachingAllocatorCore::new_segment(size_t size, void* stream,
                                                               bool small, size_t request) {
  size_t seg = small ? kSmallSegment
               : size < kMinLargeRequest
                   ? kLargeSegment
                   : (size + kSmallSegment - 1) / kSmallSegment * kSmallSegment;
  void* p = api_.raw_alloc(seg);
  if (p == nullptr) {
    release_cached();  // give the cache back and try once more
    p = api_.raw_alloc(seg);
  }
  IGNIS_CHECK(p != nullptr, device_, ": out of memory: tried to allocate ", format_mib(request),
              " (a segment of ", format_mib(seg), "); ", format_mib(stats_.allocated),
              " allocated and ", format_mib(stats_.reserved), " reserved by ignis");
  auto* b = new Block;
  b->ptr = static_cast<char*>(p);
  b->size = seg;
  b->stream = stream;
  b->small = small;
  stats_.reserved += static_cast<int64_t>(seg);
  return b;
}

void* CachingAllocatorCore::allocate(size_t nbytes, void* stream) {
  std::lock_guard<std::mutex> g(mu_);
  process_events();
  const size_t size = round_size(nbytes);
  const bool small = size <= kSmallSize;
  Block* b = find_free(small ? small_ : large_, stream, size);
  ++stats_.num_allocs;
  if (b != nullptr) {
    ++stats_.cache_hits;
  } else {
    b = new_segment(size, stream, small, nbytes);
  }
  const size_t rest = b->size - size;
  if (small ? rest >= kRound : rest > kSmallSize) {
    auto* r = new Block;
    r->ptr = b->ptr + size;
    r->size = rest;
    r->stream = stream;
    r->small = small;
    r->prev = b;
    r->next = b->next;
    if (b->next != nullptr) b->next->prev = r;
    b->next = r;
    b->size = size;
    pool_of(r).insert(r);
  }
  b->allocated = true;
  active_.emplace(b->ptr, b);
  stats_.allocated += static_cast<int64_t>(b->size);
  stats_.peak_allocated = std::max(stats_.peak_allocated, stats_.allocated);
  return b->ptr;
}

void CachingAllocatorCore::free(void* ptr) {
  if (ptr == nullptr) return;
  std::lock_guard<std::mutex> g(mu_);
  auto it = active_.find(ptr);
  IGNIS_CHECK(it != active_.end(), device_, ": free of a pointer the allocator did not give");
  Block* b = it->second;
  active_.erase(it);
  stats_.allocated -= static_cast<int64_t>(b->size);
  b->allocated = false;
  if (b->stream_uses.empty()) {
    free_block(b);
    return;
  }
  for (void* s : b->stream_uses) {
    events_.emplace_back(api_.record_event(s), b);
    ++b->pending_events;
  }
  b->stream_uses.clear();
}

void CachingAllocatorCore::record_stream(void* ptr, void* stream) {
  std::lock_guard<std::mutex> g(mu_);
  auto it = active_.find(ptr);
  IGNIS_CHECK(it != active_.end(), device_,
              ": record_stream on memory the caching allocator did not give");
  Block* b = it->second;
  if (stream == b->stream) return;  // its own stream orders its uses already
  if (std::find(b->stream_uses.begin(), b->stream_uses.end(), stream) == b->stream_uses.end()) {
    b->stream_uses.push_back(stream);
  }
}

void CachingAllocatorCore::free_block(Block* b) {
  // Merges with free neighbours (not allocated, no events pending: those are in the pool).
  Pool& pool = pool_of(b);
  for (Block* n : {b->prev, b->next}) {
    if (n == nullptr || n->allocated || n->pending_events > 0) continue;
    pool.erase(n);
    if (n == b->prev) {
      b->ptr = n->ptr;
      b->prev = n->prev;
      if (n->prev != nullptr) n->prev->next = b;
    } else {
      b->next = n->next;
      if (n->next != nullptr) n->next->prev = b;
    }
    b->size += n->size;
    delete n;
  }
  pool.insert(b);
}

void CachingAllocatorCore::process_events() {
  // Events of one stream complete in order: stop at a stream's first pending one is not needed
  // for correctness, so every event is asked.
  auto keep = events_.begin();
  for (auto& [ev, b] : events_) {
    if (api_.event_done(ev)) {
      api_.destroy_event(ev);
      if (--b->pending_events == 0) free_block(b);
    } else {
      *keep++ = {ev, b};
    }
  }
  events_.erase(keep, events_.end());
}

void CachingAllocatorCore::release_cached() {
  process_events();
  for (Pool* pool : {&small_, &large_}) {
    for (auto it = pool->begin(); it != pool->end();) {
      Block* b = *it;
      if (b->prev == nullptr && b->next == nullptr) {  // a whole segment, free
        api_.raw_free(b->ptr);
        stats_.reserved -= static_cast<int64_t>(b->size);
        delete b;
        it = pool->erase(it);
      } else {
        ++it;
      }
    }
  }
}

MemoryStats CachingAllocatorCore::stats() const {
  std::lock_guard<std::mutex> g(mu_);
  return stats_;
}

void CachingAllocatorCore::reset_peak() {
  std::lock_guard<std::mutex> g(mu_);
  stats_.peak_allocated = stats_.allocated;
}

void CachingAllocatorCore::empty_cache() {
  std::lock_guard<std::mutex> g(mu_);
  release_cached();
}

size_t CachingAllocatorCore::pending_frees() const {
  std::lock_guard<std::mutex> g(mu_);
  std::set<Block*> blocks;
  for (auto& [e, b] : events_) blocks.insert(b);
  return blocks.size();
}

}  // namespace ignis::detail
