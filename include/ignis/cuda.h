// The CUDA backend's runtime: devices, streams, events and the caching allocator's statistics
// (torch.cuda's API, with LibTorch's names where it has them: torch::cuda::is_available,
// device_count, synchronize; c10::cuda's stream and device guards; at::cuda::CUDAEvent).
//
// Work on a GPU is asynchronous: an op queues its kernel on the device's current stream and
// returns. Reading a value (item(), a copy to the CPU) waits for the work it depends on;
// synchronize() waits for everything queued on a device.
//
// Every function here exists in every build. Without the backend (built with IGNIS_CUDA=OFF or
// without nvcc) or without a GPU and driver, is_available() is false, device_count() is 0, and
// the others throw an ignis::Error that says which of the two is missing.
#pragma once

#include <cstdint>
#include <string>

#include "ignis/allocator.h"
#include "ignis/device.h"

namespace ignis::cuda {

/// True when ignis was built with its CUDA backend and a GPU with a working driver is visible.
bool is_available();
/// The number of visible GPUs (0 without the backend, a driver or a GPU).
int device_count();
/// Why is_available() is false ("" when it is true): no backend in this build, or the driver's
/// answer (no driver, no device, a driver older than the runtime).
std::string unavailable_reason();
/// This thread's current device (cudaGetDevice).
int current_device();
void set_device(int device);
/// Waits until everything queued on every stream of `device` (-1: the current one) is done.
void synchronize(int device = -1);

/// Makes `device` this thread's current device for the guard's lifetime (c10::cuda::CUDAGuard).
class DeviceGuard {
 public:
  explicit DeviceGuard(int device);
  explicit DeviceGuard(Device device);
  ~DeviceGuard();
  DeviceGuard(const DeviceGuard&) = delete;
  DeviceGuard& operator=(const DeviceGuard&) = delete;
  int original_device() const { return prev_; }

 private:
  int prev_ = 0;
};

/// A CUDA stream of one device: a handle that may be copied. Streams are never destroyed (the
/// default stream, and a pool of 32 per device handed out in turn, as in PyTorch).
class Stream {
 public:
  /// The default stream of device 0.
  Stream() = default;
  Device device() const { return Device(DeviceType::CUDA, device_); }
  int device_index() const { return device_; }
  /// The cudaStream_t (nullptr for the default, legacy stream).
  void* handle() const { return handle_; }
  /// True when all work queued on the stream has finished.
  bool query() const;
  /// Waits until all work queued on the stream has finished.
  void synchronize() const;
  bool operator==(const Stream& o) const { return handle_ == o.handle_ && device_ == o.device_; }
  bool operator!=(const Stream& o) const { return !(*this == o); }

  /// Internal: wraps a handle of `device`.
  static Stream wrap(void* handle, int device) {
    Stream s;
    s.handle_ = handle;
    s.device_ = device;
    return s;
  }

 private:
  void* handle_ = nullptr;
  int device_ = 0;
};

/// The stream ops on `device` (-1: the current one) queue their work on, for this thread.
Stream getCurrentCUDAStream(int device = -1);
/// The device's default (null) stream.
Stream getDefaultCUDAStream(int device = -1);
/// A stream from the device's pool of 32 (handed out round robin): work on it may overlap with
/// the default stream's.
Stream getStreamFromPool(bool high_priority = false, int device = -1);
/// Makes `stream` the current stream of its device, for this thread.
void setCurrentCUDAStream(const Stream& stream);

/// Makes `stream` current (and its device current) for the guard's lifetime.
class StreamGuard {
 public:
  explicit StreamGuard(const Stream& stream);
  ~StreamGuard();
  StreamGuard(const StreamGuard&) = delete;
  StreamGuard& operator=(const StreamGuard&) = delete;

 private:
  Stream prev_stream_;
  int prev_device_ = 0;
};

/// A CUDA event: recorded on a stream, it completes when the work queued before it has; another
/// stream can wait for it without blocking the host; two timing events give the time between.
class Event {
 public:
  explicit Event(bool enable_timing = false);
  ~Event();
  Event(Event&& o) noexcept;
  Event& operator=(Event&& o) noexcept;
  Event(const Event&) = delete;
  Event& operator=(const Event&) = delete;

  /// Records the event on `stream` (the current stream of the current device by default).
  void record();
  void record(const Stream& stream);
  /// Makes future work on `stream` wait for this event (the host does not wait).
  void block(const Stream& stream) const;
  /// True when the work before the last record() has finished (true when never recorded).
  bool query() const;
  /// Waits on the host until the event has completed.
  void synchronize() const;
  /// Milliseconds between this event and `end` (both recorded, both with timing enabled).
  float elapsed_time(const Event& end) const;
  bool is_created() const { return event_ != nullptr; }

 private:
  void* event_ = nullptr;  // cudaEvent_t, created at the first record
  int device_ = -1;
  bool timing_ = false;
};

/// The caching allocator's byte counts for `device` (-1: the current one); the same as
/// ignis::memory_stats(Device(kCUDA, i)).
MemoryStats memory_stats(int device = -1);
void reset_peak_memory_stats(int device = -1);
/// Gives the cached, unused blocks of every device back to the driver.
void empty_cache();

/// How convolutions choose their cuDNN algorithm, like torch.backends.cudnn.benchmark: off (the
/// default), cuDNN's heuristic choice; on, cuDNN times the algorithms the first time it sees a
/// problem (sizes, dtype, layout, parameters) and the fastest is kept for it. Either choice is
/// made once per problem and cached. Benchmarking costs time at the first step and may choose
/// differently from run to run (results can then differ in the last bits).
void set_cudnn_benchmark(bool on);
bool cudnn_benchmark();

/// Which cuDNN API convolutions go through: on (the default), the graph API, whose heuristics
/// reach cuDNN 9's newer engines (as PyTorch's convolutions do, through the cuDNN frontend),
/// falling back to the legacy API for a problem the graph API has no plan for; off, the legacy
/// API (cudnnConvolutionForward and its gradients) only. The environment variable
/// IGNIS_CUDNN_GRAPH_API=0 turns it off at start. Either way float32 runs in full precision.
void set_cudnn_graph_api(bool on);
bool cudnn_graph_api();

}  // namespace ignis::cuda
