// The cache of page-locked (pinned) host memory behind Tensor::pin_memory, the DataLoader's pinned
// batches and the CUDA backend's small asynchronous uploads, written against a small interface
// (pinned alloc and free, events on streams) so that its bookkeeping is tested on any machine
// with a fake (tests/test_host_caching_allocator.cpp). PyTorch's CachingHostAllocator is the
// model:
//
// - Sizes are rounded up to a power of two (at least 512 bytes): each size class keeps a free
//   list of released blocks, and a request takes a block of its class, or a new one.
// - A copy that reads or writes a block asynchronously records an event on its stream
//   (record_event). A released block whose events have not all completed waits in a pending
//   list; it is reused only once every one of them has (asked with a query, never waited for).
//   Events are asked when a request finds its free list empty, and by empty_cache.
// - empty_cache gives the free blocks back (cudaFreeHost); blocks in use or still pending stay.
// - When no pinned memory is left, the free blocks are given back and the allocation tried
//   again; then it fails with an ignis::Error.
// - All calls are thread-safe (one mutex); the memory itself is allocated and freed outside it.
#pragma once

#include <array>
#include <cstddef>
#include <cstdint>
#include <deque>
#include <mutex>
#include <unordered_map>
#include <utility>
#include <vector>

namespace ignis::detail {

/// What the host cache needs from the runtime.
struct PinnedMemoryApi {
  virtual ~PinnedMemoryApi() = default;
  /// Page-locked host memory of `nbytes`, or nullptr when none is left.
  virtual void* alloc_pinned(size_t nbytes) = 0;
  virtual void free_pinned(void* ptr) = 0;
  /// An event recorded now on `stream` of GPU `device`.
  virtual void* record_event(void* stream, int device) = 0;
  /// True when the work queued before the event has completed (asks, never waits).
  virtual bool event_done(void* event) = 0;
  virtual void destroy_event(void* event) = 0;
};

/// The host cache's counts (bytes are block sizes, rounded to the size class).
struct HostCacheStats {
  int64_t allocated = 0;       // bytes of blocks handed out and not released
  int64_t cached = 0;          // bytes of released blocks kept: free, or waiting for events
  int64_t peak_allocated = 0;  // high-water mark of `allocated`
  int64_t num_allocs = 0;      // allocate calls
  int64_t cache_hits = 0;      // allocate calls served by a cached block
  int64_t pending = 0;         // released blocks whose events have not all completed
};

class HostCachingAllocatorCore {
 public:
  static constexpr size_t kMinBlock = 512;  // the smallest size class

  explicit HostCachingAllocatorCore(PinnedMemoryApi& api);
  ~HostCachingAllocatorCore();
  HostCachingAllocatorCore(const HostCachingAllocatorCore&) = delete;
  HostCachingAllocatorCore& operator=(const HostCachingAllocatorCore&) = delete;

  /// A block of at least `nbytes` (round_size(nbytes) bytes; 0 gives a valid block of 512).
  void* allocate(size_t nbytes);
  /// Gives back a block from allocate (an unknown or already released pointer is an error).
  /// The block is reused once the events recorded on it have completed.
  void release(void* ptr);
  /// Work queued on `stream` of GPU `device` uses the block of `ptr` (the pointer allocate
  /// returned): the block is not reused before that work has completed. One event per stream
  /// and block: a later use on the same stream replaces the earlier event (a stream runs in
  /// order). False, and nothing recorded, when `ptr` is not a block in use from this cache.
  bool record_event(void* ptr, void* stream, int device);
  /// True when `ptr` is a block of this cache handed out and not released.
  bool owns(void* ptr) const;
  /// Frees the released blocks whose events have completed.
  void empty_cache();
  HostCacheStats stats() const;
  void reset_peak();
  /// The size of the block a request of `nbytes` gets: the next power of two, at least 512.
  static size_t round_size(size_t nbytes);

 private:
  struct Use {
    void* stream;
    int device;
    void* event;
  };
  struct Block {
    void* ptr = nullptr;
    size_t size = 0;
    int size_class = 0;
    bool allocated = false;
    std::vector<Use> uses;  // events not yet seen completed
  };
  static int class_of(size_t size);
  void process_events_locked();

  PinnedMemoryApi& api_;
  mutable std::mutex mu_;
  std::unordered_map<void*, Block*> blocks_;    // every block held, by address
  std::array<std::vector<Block*>, 64> free_{};  // per size class (log2 of the size)
  std::deque<Block*> pending_;  // released, events outstanding, in release order
  HostCacheStats stats_;
};

}  // namespace ignis::detail
