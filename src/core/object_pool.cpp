// The slow paths of the object pool: operator new/delete, and freeing a thread's lists when it
// exits.
#include "ignis/detail/object_pool.h"

namespace ignis::pool {

thread_local constinit ThreadLists lists __attribute__((tls_model("initial-exec"))) = {};

namespace {
struct Cleaner {
  ~Cleaner() {
    lists.registered = false;
    lists.dead = true;
    for (int c = 0; c < kNumClasses; ++c) {
      while (FreeBlock* b = lists.head[c]) {
        lists.head[c] = b->next;
        ::operator delete(b);
      }
      lists.count[c] = 0;
    }
  }
};

// The first use of the pool on a thread sets up the cleaner that frees its lists at exit.
bool ensure_registered() {
  if (!lists.registered && !lists.dead) {
    static thread_local Cleaner cleaner;
    (void)cleaner;
    lists.registered = true;
  }
  return lists.registered;
}
}  // namespace

void* allocate_slow(size_t n) {
  if (n > kMaxSize) return ::operator new(n);
  ensure_registered();
  // Blocks of a class all have the class's full size, whichever request made them.
  return ::operator new(size_class(n) * kGranule);
}

void deallocate_slow(void* p, size_t n) {
  if (n <= kMaxSize && ensure_registered()) {
    const size_t c = size_class(n);
    if (lists.count[c] < kMaxCached) {
      auto* b = static_cast<FreeBlock*>(p);
      b->next = lists.head[c];
      lists.head[c] = b;
      ++lists.count[c];
      return;
    }
  }
  ::operator delete(p);
}

}  // namespace ignis::pool
