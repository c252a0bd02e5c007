// The caching allocator of one GPU, written against a small interface to the device (raw memory
// and stream-ordered events) so that its bookkeeping is tested on any machine with a fake
// device (tests/test_caching_allocator.cpp). PyTorch's CUDACachingAllocator is the model:
//
// - Sizes are rounded up to 512 bytes. Requests of at most 1 MB come from the small pool, cut
//   out of 2 MB segments; larger ones from the large pool (segments of 20 MB for requests under
//   10 MB, else the request rounded up to 2 MB).
// - A free block is reused best fit, and only by the stream it was allocated on: work queued
//   on that stream runs in order, so the next user cannot touch the memory before the last one
//   is done, with no synchronisation.
// - A block bigger than the request is split; the rest (at least 512 bytes in the small pool,
//   more than 1 MB in the large one) stays free in the pool. A freed block merges with free
//   neighbours of its segment.
// - record_stream: a block used by other streams too is freed only when events recorded on
//   each of them at free time have completed (checked at the next allocation).
// - When the device has no memory left, the cached segments are released and the allocation
//   tried again; then it fails with an ignis::Error giving the request and the counts.
#pragma once

#include <cstddef>
#include <cstdint>
#include <mutex>
#include <set>
#include <string>
#include <unordered_map>
#include <vector>

#include "ignis/allocator.h"

namespace ignis::detail {

/// What the caching allocator needs from one device.
/// `bytes` as "12.00 MiB", for the allocators' error messages.
std::string format_mib(int64_t bytes);

struct DeviceMemoryApi {
  virtual ~DeviceMemoryApi() = default;
  /// Device memory of `nbytes`, or nullptr when the device has none left.
  virtual void* raw_alloc(size_t nbytes) = 0;
  virtual void raw_free(void* ptr) = 0;
  /// An event recorded on `stream` now.
  virtual void* record_event(void* stream) = 0;
  /// True when the work before the event has completed.
  virtual bool event_done(void* event) = 0;
  virtual void destroy_event(void* event) = 0;
};

class CachingAllocatorCore {
 public:
  static constexpr size_t kRound = 512;                 // every size is a multiple of this
  static constexpr size_t kSmallSize = 1 << 20;         // largest request of the small pool
  static constexpr size_t kSmallSegment = 2 << 20;      // the small pool's segments
  static constexpr size_t kLargeSegment = 20 << 20;     // segments for requests under 10 MB
  static constexpr size_t kMinLargeRequest = 10 << 20;  // above: one segment per request

  CachingAllocatorCore(DeviceMemoryApi& api, std::string device_name);
  ~CachingAllocatorCore();
  CachingAllocatorCore(const CachingAllocatorCore&) = delete;
  CachingAllocatorCore& operator=(const CachingAllocatorCore&) = delete;

  /// `nbytes` (0 gives a valid, unique block of 512) for use on `stream`.
  void* allocate(size_t nbytes, void* stream);
  /// Frees a pointer returned by allocate; an unknown pointer is an error.
  void free(void* ptr);
  /// Work on `stream` uses the block of `ptr` (see above).
  void record_stream(void* ptr, void* stream);
  MemoryStats stats() const;
  void reset_peak();
  /// Releases every whole free segment to the device.
  void empty_cache();
  /// The size a request is rounded to.
  static size_t round_size(size_t nbytes);
  /// Blocks freed but waiting for another stream's events.
  size_t pending_frees() const;

 private:
  struct Block {
    char* ptr = nullptr;
    size_t size = 0;
    void* stream = nullptr;
    bool small = false;
    bool allocated = false;
    int pending_events = 0;
    Block* prev = nullptr;  // neighbours in the same segment
    Block* next = nullptr;
    std::vector<void*> stream_uses;  // record_stream's other streams
  };
  struct Order {  // by stream, then size, then address: lower_bound finds the best fit
    bool operator()(const Block* a, const Block* b) const;
  };
  using Pool = std::set<Block*, Order>;

  Block* find_free(Pool& pool, void* stream, size_t size);
  Block* new_segment(size_t size, void* stream, bool small, size_t request);
  void free_block(Block* b);
  void process_events();
  void release_cached();
  Pool& pool_of(const Block* b) { return b->small ? small_ : large_; }

  DeviceMemoryApi& api_;
  std::string device_;
  mutable std::mutex mu_;
  Pool small_, large_;
  std::unordered_map<void*, Block*> active_;
  std::vector<std::pair<void*, Block*>> events_;  // (event, block) awaiting completion
  MemoryStats stats_;
};

}  // namespace ignis::detail
