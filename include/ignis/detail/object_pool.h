// Internal (used by ignis/autograd_node.h): not part of the API.
// A per-thread free-list allocator for the small objects that every op creates and drops: the
// TensorImpl and StorageImpl of its output (each with its shared_ptr control block), and with
// autograd its AutogradMeta and graph node. Handing a block back to a thread-local list and
// taking it again costs a few instructions, no lock and no atomic, where malloc/free cost tens
// of nanoseconds; at the size of a tiny tensor op that is a large part of its fixed cost.
#pragma once

#include <cstddef>
#include <new>

namespace ignis::pool {

constexpr size_t kGranule = 16;
constexpr size_t kMaxSize = 512;  // larger requests go to operator new
constexpr int kNumClasses = kMaxSize / kGranule + 1;
constexpr unsigned kMaxCached = 256;  // blocks kept per size class per thread

struct FreeBlock {
  FreeBlock* next;
};

/// A thread's free lists. Trivially constructible, so that accessing it needs no TLS guard.
struct ThreadLists {
  FreeBlock* head[kNumClasses];
  unsigned count[kNumClasses];
  bool registered;  // a cleaner that frees the lists at thread exit is set up (and not run yet)
  bool dead;        // the thread is exiting: blocks go straight back to operator delete
};

// constinit: statically initialised, so accesses need no TLS wrapper call.
extern thread_local constinit ThreadLists lists __attribute__((tls_model("initial-exec")));

void* allocate_slow(size_t n);
void deallocate_slow(void* p, size_t n);

inline size_t size_class(size_t n) { return (n + kGranule - 1) / kGranule; }

/// A block of at least n bytes (aligned like operator new's).
inline void* allocate(size_t n) {
  if (n <= kMaxSize) {
    const size_t c = size_class(n);
    if (FreeBlock* b = lists.head[c]) {
      lists.head[c] = b->next;
      --lists.count[c];
      return b;
    }
  }
  return allocate_slow(n);
}

/// Returns a block of n bytes obtained from allocate(n), on any thread.
inline void deallocate(void* p, size_t n) {
  if (n <= kMaxSize) {
    const size_t c = size_class(n);
    if (lists.count[c] < kMaxCached && lists.registered) {
      auto* b = static_cast<FreeBlock*>(p);
      b->next = lists.head[c];
      lists.head[c] = b;
      ++lists.count[c];
      return;
    }
  }
  deallocate_slow(p, n);
}

/// A standard allocator over the pool, for std::allocate_shared and containers.
template <class T>
struct Allocator {
  using value_type = T;
  Allocator() = default;
  template <class U>
  Allocator(const Allocator<U>&) {}  // NOLINT: implicit, as allocators rebind
  T* allocate(size_t n) { return static_cast<T*>(pool::allocate(n * sizeof(T))); }
  void deallocate(T* p, size_t n) { pool::deallocate(p, n * sizeof(T)); }
  template <class U>
  bool operator==(const Allocator<U>&) const {
    return true;
  }
};

/// Base class giving a type class-level operator new/delete from the pool.
struct Pooled {
  static void* operator new(size_t n) { return pool::allocate(n); }
  static void operator delete(void* p, size_t n) { pool::deallocate(p, n); }
};

}  // namespace ignis::pool
