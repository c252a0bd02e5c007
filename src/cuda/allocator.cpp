// The CUDA device allocator: one caching allocator (core/caching_allocator.h) per GPU over
// cudaMalloc, cudaFree and CUDA events, registered as the allocator of DeviceType::CUDA; and the
// cache of pinned host memory (core/host_caching_allocator.h over cudaHostAlloc) behind
// Tensor::pin_memory and the backend's asynchronous uploads.
#include <cstdio>
#include <exception>
#include <memory>
#include <mutex>
#include <vector>

#include "core/caching_allocator.h"
#include "core/host_caching_allocator.h"
#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "ignis/ops.h"
#include "ops/copy.h"

namespace ignis::cuda {
namespace {

// The allocators' stream-ordered events (both caches ask them, never wait for them).
void* record_on(void* stream, int device) {
  DeviceGuard g(device);
  cudaEvent_t e = nullptr;
  IGNIS_CUDA_CHECK(cudaEventCreateWithFlags(&e, cudaEventDisableTiming));
  const cudaError_t r = cudaEventRecord(e, static_cast<cudaStream_t>(stream));
  if (r != cudaSuccess) (void)cudaEventDestroy(e);
  IGNIS_CUDA_CHECK(r);
  return e;
}
bool event_completed(void* event) {
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event));
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  IGNIS_CUDA_CHECK(e);
  return true;
}
void destroy(void* event) { IGNIS_CUDA_CHECK(cudaEventDestroy(static_cast<cudaEvent_t>(event))); }

class CudaMemory final : public ignis::detail::DeviceMemoryApi {
 public:
  explicit CudaMemory(int device) : device_(device) {}
  void* raw_alloc(size_t nbytes) override {
    DeviceGuard g(device_);
    void* p = nullptr;
    const cudaError_t e = cudaMalloc(&p, nbytes);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    IGNIS_CUDA_CHECK(e);
    return p;
  }
  void raw_free(void* ptr) override {
    DeviceGuard g(device_);
    detail::count_host_sync();  // cudaFree waits for the device (empty_cache, an OOM retry)
    IGNIS_CUDA_CHECK(cudaFree(ptr));
  }
  void* record_event(void* stream) override { return record_on(stream, device_); }
  bool event_done(void* event) override { return event_completed(event); }
  void destroy_event(void* event) override { destroy(event); }

 private:
  int device_;
};

struct PerDevice {
  std::unique_ptr<CudaMemory> api;
  std::unique_ptr<ignis::detail::CachingAllocatorCore> core;
};

class CudaAllocator final : public Allocator {
 public:
  void* allocate(size_t nbytes, Device device, void* stream) override {
    ignis::detail::CachingAllocatorCore& c = core(device.index, "to");
    if (stream == nullptr) stream = getCurrentCUDAStream(device.index).handle();
    return c.allocate(nbytes, stream);
  }
  // Called from a tensor's destructor: an error (a failed event record after a sticky CUDA
  // error) is reported, not thrown.
  void deallocate(void* ptr, size_t, Device device) override {
    try {
      core(device.index, "free").free(ptr);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ignis: freeing CUDA memory failed: %s\n", e.what());
    }
  }
  MemoryStats stats(Device device) const override {
    return core(device.index, "memory_stats").stats();
  }
  void reset_peak_stats(Device device) override {
    core(device.index, "reset_peak_memory_stats").reset_peak();
  }
  void empty_cache(Device device) override { core(device.index, "empty_cache").empty_cache(); }
  void record_stream(void* ptr, Device device, void* stream) {
    core(device.index, "record_stream").record_stream(ptr, stream);
  }

 private:
  ignis::detail::CachingAllocatorCore& core(int device, const char* what) const {
    detail::check_device(device, what);
    // Every device's core at once (their construction makes no CUDA call), so that the
    // per-op path takes no lock here: only the core's own.
    std::call_once(once_, [&] {
      devices_.resize(static_cast<size_t>(device_count()));
      for (size_t i = 0; i < devices_.size(); ++i) {
        devices_[i].api = std::make_unique<CudaMemory>(static_cast<int>(i));
        devices_[i].core = std::make_unique<ignis::detail::CachingAllocatorCore>(
            *devices_[i].api, "cuda:" + std::to_string(i));
      }
    });
    return *devices_[static_cast<size_t>(device)].core;
  }
  mutable std::once_flag once_;
  mutable std::vector<PerDevice> devices_;
};

// Never destroyed: tensors may outlive main, and the driver may be gone at exit.
CudaAllocator& the_allocator() {
  static auto* a = new CudaAllocator();
  return *a;
}

const bool registered = [] {
  register_allocator(DeviceType::CUDA, &the_allocator());
  return true;
}();

// Pinned host memory. cudaHostAlloc'd memory is mapped for every GPU (unified addressing), so
// one cache serves them all; events are recorded on the device of their stream.
class CudaPinnedMemory final : public ignis::detail::PinnedMemoryApi {
 public:
  void* alloc_pinned(size_t nbytes) override {
    void* p = nullptr;
    const cudaError_t e = cudaHostAlloc(&p, nbytes, cudaHostAllocDefault);
    if (e == cudaErrorMemoryAllocation) {
      (void)cudaGetLastError();
      return nullptr;
    }
    IGNIS_CUDA_CHECK(e);
    return p;
  }
  // cudaFreeHost waits for the device: counted as a host wait (only empty_cache and an
  // allocation that found no pinned memory left free blocks).
  void free_pinned(void* ptr) override {
    detail::count_host_sync();
    IGNIS_CUDA_CHECK(cudaFreeHost(ptr));
  }
  void* record_event(void* stream, int device) override { return record_on(stream, device); }
  bool event_done(void* event) override { return event_completed(event); }
  void destroy_event(void* event) override { destroy(event); }
};

// Never destroyed, like the device allocator: pinned tensors may outlive main.
ignis::detail::HostCachingAllocatorCore& host_cache() {
  static auto* api = new CudaPinnedMemory();
  static auto* c = new ignis::detail::HostCachingAllocatorCore(*api);
  return *c;
}

}  // namespace

MemoryStats memory_stats(int device) {
  return the_allocator().stats(Device(DeviceType::CUDA, detail::resolve(device)));
}
void reset_peak_memory_stats(int device) {
  the_allocator().reset_peak_stats(Device(DeviceType::CUDA, detail::resolve(device)));
}
void empty_cache() {
  for (int d = 0; d < device_count(); ++d) the_allocator().empty_cache(Device(DeviceType::CUDA, d));
  if (is_available()) host_cache().empty_cache();
}

namespace detail {

void record_stream(const Tensor& t, const Stream& stream) {
  the_allocator().record_stream(t.impl()->storage()->data, t.device(), stream.handle());
}

void* pinned_alloc(size_t nbytes) {
  check_device(0, "pinned memory");
  return host_cache().allocate(nbytes);
}
void pinned_release(void* ptr) { host_cache().release(ptr); }
bool pinned_record_use(void* ptr, const Stream& stream) {
  return host_cache().record_event(ptr, stream.handle(), stream.device_index());
}

MemoryStats pinned_memory_stats() {
  check_device(0, "pinned_memory_stats");
  const ignis::detail::HostCacheStats h = host_cache().stats();
  MemoryStats m;
  m.allocated = h.allocated;
  m.reserved = h.allocated + h.cached;
  m.peak_allocated = h.peak_allocated;
  m.num_allocs = h.num_allocs;
  m.cache_hits = h.cache_hits;
  return m;
}

// A block of the pinned cache; the tensor's deleter gives it back to the cache (no
// cudaFreeHost, which would wait for the device), to be reused once the non-blocking copies
// recorded on it have completed.
Tensor pin_memory(const Tensor& t) {
  check_device(0, "pin_memory");
  void* p = host_cache().allocate(t.nbytes());
  // (from_blob cannot fail here: the sizes are those of an existing tensor.)
  Tensor out = from_blob(p, t.sizes(), TensorOptions(t.dtype()), [](void* q) {
    try {
      host_cache().release(q);
    } catch (const std::exception& e) {
      std::fprintf(stderr, "ignis: freeing pinned memory failed: %s\n", e.what());
    }
  });
  copy_into(out, t);
  return out;
}

bool is_pinned(const Tensor& t) {
  if (!is_available() || t.impl()->storage() == nullptr) return false;
  cudaPointerAttributes a{};
  if (cudaPointerGetAttributes(&a, t.impl()->storage()->data) != cudaSuccess) {
    (void)cudaGetLastError();
    return false;
  }
  return a.type == cudaMemoryTypeHost;
}

}  // namespace detail
}  // namespace ignis::cuda
