// Per-device allocators. The CPU allocator is caching and 64-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ignis/device.h"

namespace ignis {

/// Allocates raw device memory. One instance per device type, looked up by allocator_for().
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes) = 0;
  virtual void deallocate(void* ptr, size_t nbytes) = 0;
};

/// Byte counts of one device's allocator.
struct MemoryStats {
  int64_t allocated = 0;       // bytes in live tensors' storage (rounded to the block size)
  int64_t reserved = 0;        // bytes held from the system, live or cached
  int64_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  int64_t num_allocs = 0;      // allocate calls
  int64_t cache_hits = 0;      // allocate calls served from the cache
};

Allocator& allocator_for(Device device);
/// Registers the allocator of a device type (the CUDA backend calls this when it loads).
void register_allocator(DeviceType type, Allocator* allocator);

MemoryStats memory_stats(Device device = kCPU);
void reset_peak_memory_stats(Device device = kCPU);
/// Returns cached, unused blocks to the system.
void empty_cache(Device device = kCPU);

}  // namespace ignis
