// Per-device allocators. The CPU allocator is caching and 64-byte aligned.
#pragma once

#include <cstddef>
#include <cstdint>

#include "ignis/device.h"

namespace ignis {

/// Byte counts of one device's allocator.
struct MemoryStats {
  int64_t allocated = 0;       // bytes in live tensors' storage (rounded to the block size)
  int64_t reserved = 0;        // bytes held from the system, live or cached
  int64_t peak_allocated = 0;  // high-water mark of `allocated` since the last reset
  int64_t num_allocs = 0;      // allocate calls
  int64_t cache_hits = 0;      // allocate calls served from the cache
};

/// Allocates raw device memory. One instance per device type, looked up by allocator_for();
/// it is told the device (its index, for a backend with several) and an opaque stream handle
/// (null: the device's current stream), so that a caching device allocator can keep blocks per
/// stream. Statistics are kept per device.
class Allocator {
 public:
  virtual ~Allocator() = default;
  virtual void* allocate(size_t nbytes, Device device, void* stream = nullptr) = 0;
  virtual void deallocate(void* ptr, size_t nbytes, Device device) = 0;
  virtual MemoryStats stats(Device device) const = 0;
  virtual void reset_peak_stats(Device device) = 0;
  /// Returns cached, unused blocks to the system.
  virtual void empty_cache(Device device) = 0;
};

Allocator& allocator_for(Device device);
/// Registers the allocator of a device type (the CUDA backend calls this when it loads).
void register_allocator(DeviceType type, Allocator* allocator);

MemoryStats memory_stats(Device device = kCPU);
void reset_peak_memory_stats(Device device = kCPU);
/// Returns cached, unused blocks to the system.
void empty_cache(Device device = kCPU);

}  // namespace ignis
