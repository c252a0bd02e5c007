// The CUDA runtime API of ignis/cuda.h: devices, the current device and stream, stream pools,
// events. Streams are PyTorch's: the default (legacy) stream, plus a pool of 32 non-blocking
// streams per device created at first use and never destroyed; the current stream is per thread
// and per device.
#include <array>
#include <atomic>
#include <mutex>
#include <utility>
#include <vector>

#include "cuda/backend.h"
#include "cuda/cuda_check.h"

namespace ignis {

namespace cuda {
namespace {

struct DeviceInfo {
  int count = 0;
  std::string reason;  // why count is 0
};

const DeviceInfo& info() {
  static const DeviceInfo d = [] {
    DeviceInfo r;
    const cudaError_t e = cudaGetDeviceCount(&r.count);
    if (e != cudaSuccess) {
      (void)cudaGetLastError();
      r.count = 0;
      r.reason = std::string("the CUDA driver reports ") + cudaGetErrorName(e) + " (" +
                 cudaGetErrorString(e) + ")";
    } else if (r.count == 0) {
      r.reason = "no CUDA device is visible";
    }
    return r;
  }();
  return d;
}

constexpr int kPoolSize = 32;

struct StreamPool {
  std::once_flag once;
  std::array<cudaStream_t, kPoolSize> low{}, high{};
  std::atomic<unsigned> next_low{0}, next_high{0};
};

StreamPool& pool(int device) {
  static std::vector<StreamPool>* pools = new std::vector<StreamPool>(info().count);
  return (*pools)[device];
}

// This thread's current stream per device (nullptr: the default stream).
std::vector<cudaStream_t>& current_streams() {
  thread_local std::vector<cudaStream_t> s(static_cast<size_t>(info().count), nullptr);
  return s;
}

}  // namespace

namespace detail {
void check_device(int device, const char* what) {
  const DeviceInfo& d = info();
  IGNIS_CHECK(d.count > 0, what, ": no GPU is available (", d.reason, ")");
  IGNIS_CHECK(device >= 0 && device < d.count, what, ": device cuda:", device,
              " does not exist (", d.count, " CUDA device", d.count == 1 ? "" : "s",
              " visible)");
}
int resolve(int device) {
  if (device >= 0) return device;
  check_device(0, "cuda");
  return current_device();
}

namespace {
std::atomic<int64_t> host_syncs{0};
}  // namespace
void count_host_sync() { host_syncs.fetch_add(1, std::memory_order_relaxed); }
int64_t host_sync_count() { return host_syncs.load(std::memory_order_relaxed); }
void wait_for_stream(cudaStream_t stream) {
  count_host_sync();
  IGNIS_CUDA_CHECK(cudaStreamSynchronize(stream));
}
}  // namespace detail

bool is_available() { return info().count > 0; }
int device_count() { return info().count; }
std::string unavailable_reason() { return info().reason; }

int current_device() {
  detail::check_device(0, "cuda::current_device");
  int d = 0;
  IGNIS_CUDA_CHECK(cudaGetDevice(&d));
  return d;
}

void set_device(int device) {
  detail::check_device(device, "cuda::set_device");
  IGNIS_CUDA_CHECK(cudaSetDevice(device));
}

void synchronize(int device) {
  const int d = detail::resolve(device);
  detail::check_device(d, "cuda::synchronize");
  DeviceGuard g(d);
  detail::count_host_sync();
  IGNIS_CUDA_CHECK(cudaDeviceSynchronize());
}

DeviceGuard::DeviceGuard(int device) {
  detail::check_device(device, "cuda::DeviceGuard");
  IGNIS_CUDA_CHECK(cudaGetDevice(&prev_));
  if (prev_ != device) IGNIS_CUDA_CHECK(cudaSetDevice(device));
}
DeviceGuard::DeviceGuard(Device device) : DeviceGuard(device.index) {
  IGNIS_CHECK(device.is_cuda(), "cuda::DeviceGuard: ", device.str(), " is not a CUDA device");
}
DeviceGuard::~DeviceGuard() {
  int cur = prev_;  // restored only when the guard changed it (every launch has a guard)
  if (cudaGetDevice(&cur) != cudaSuccess || cur != prev_) (void)cudaSetDevice(prev_);
}

bool Stream::query() const {
  DeviceGuard g(device_);
  const cudaError_t e = cudaStreamQuery(static_cast<cudaStream_t>(handle_));
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  IGNIS_CUDA_CHECK(e);
  return true;
}

void Stream::synchronize() const {
  DeviceGuard g(device_);
  detail::wait_for_stream(static_cast<cudaStream_t>(handle_));
}

Stream getCurrentCUDAStream(int device) {
  const int d = detail::resolve(device);
  detail::check_device(d, "cuda::getCurrentCUDAStream");
  return Stream::wrap(current_streams()[d], d);
}

Stream getDefaultCUDAStream(int device) {
  const int d = detail::resolve(device);
  detail::check_device(d, "cuda::getDefaultCUDAStream");
  return Stream::wrap(nullptr, d);
}

Stream getStreamFromPool(bool high_priority, int device) {
  const int d = detail::resolve(device);
  detail::check_device(d, "cuda::getStreamFromPool");
  StreamPool& p = pool(d);
  std::call_once(p.once, [&] {
    DeviceGuard g(d);
    int least = 0, greatest = 0;  // numerically: greatest is the highest priority
    IGNIS_CUDA_CHECK(cudaDeviceGetStreamPriorityRange(&least, &greatest));
    for (int i = 0; i < kPoolSize; ++i) {
      IGNIS_CUDA_CHECK(cudaStreamCreateWithPriority(&p.low[i], cudaStreamNonBlocking, least));
      IGNIS_CUDA_CHECK(cudaStreamCreateWithPriority(&p.high[i], cudaStreamNonBlocking, greatest));
    }
  });
  const unsigned i = (high_priority ? p.next_high : p.next_low).fetch_add(1) % kPoolSize;
  return Stream::wrap(high_priority ? p.high[i] : p.low[i], d);
}

void setCurrentCUDAStream(const Stream& stream) {
  detail::check_device(stream.device_index(), "cuda::setCurrentCUDAStream");
  current_streams()[stream.device_index()] = static_cast<cudaStream_t>(stream.handle());
}

StreamGuard::StreamGuard(const Stream& stream) {
  detail::check_device(stream.device_index(), "cuda::StreamGuard");
  IGNIS_CUDA_CHECK(cudaGetDevice(&prev_device_));
  prev_stream_ = getCurrentCUDAStream(stream.device_index());
  IGNIS_CUDA_CHECK(cudaSetDevice(stream.device_index()));
  setCurrentCUDAStream(stream);
}
StreamGuard::~StreamGuard() {
  current_streams()[prev_stream_.device_index()] =
      static_cast<cudaStream_t>(prev_stream_.handle());
  (void)cudaSetDevice(prev_device_);
}

// ---- events

Event::Event(bool enable_timing) : timing_(enable_timing) {}
Event::~Event() {
  if (event_ != nullptr) {
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(device_);
    (void)cudaEventDestroy(static_cast<cudaEvent_t>(event_));
    (void)cudaSetDevice(prev);
  }
}
Event::Event(Event&& o) noexcept : event_(o.event_), device_(o.device_), timing_(o.timing_) {
  o.event_ = nullptr;
}
Event& Event::operator=(Event&& o) noexcept {
  std::swap(event_, o.event_);  // o's destructor destroys this event's old handle
  std::swap(device_, o.device_);
  std::swap(timing_, o.timing_);
  return *this;
}

void Event::record() { record(getCurrentCUDAStream()); }

void Event::record(const Stream& stream) {
  DeviceGuard g(stream.device_index());
  if (event_ == nullptr) {
    cudaEvent_t e = nullptr;
    IGNIS_CUDA_CHECK(cudaEventCreateWithFlags(&e, timing_ ? cudaEventDefault
                                                         : cudaEventDisableTiming));
    event_ = e;
    device_ = stream.device_index();
  }
  IGNIS_CHECK(device_ == stream.device_index(), "cuda::Event::record: the event belongs to cuda:",
              device_, " but the stream to cuda:", stream.device_index());
  IGNIS_CUDA_CHECK(cudaEventRecord(static_cast<cudaEvent_t>(event_),
                                   static_cast<cudaStream_t>(stream.handle())));
}

void Event::block(const Stream& stream) const {
  if (event_ == nullptr) return;  // never recorded: nothing to wait for
  DeviceGuard g(stream.device_index());
  IGNIS_CUDA_CHECK(cudaStreamWaitEvent(static_cast<cudaStream_t>(stream.handle()),
                                       static_cast<cudaEvent_t>(event_), 0));
}

bool Event::query() const {
  if (event_ == nullptr) return true;
  const cudaError_t e = cudaEventQuery(static_cast<cudaEvent_t>(event_));
  if (e == cudaErrorNotReady) {
    (void)cudaGetLastError();
    return false;
  }
  IGNIS_CUDA_CHECK(e);
  return true;
}

void Event::synchronize() const {
  if (event_ == nullptr) return;
  detail::count_host_sync();
  IGNIS_CUDA_CHECK(cudaEventSynchronize(static_cast<cudaEvent_t>(event_)));
}

float Event::elapsed_time(const Event& end) const {
  IGNIS_CHECK(timing_ && end.timing_,
              "cuda::Event::elapsed_time: both events need enable_timing = true");
  IGNIS_CHECK(event_ != nullptr && end.event_ != nullptr,
              "cuda::Event::elapsed_time: both events must have been recorded");
  float ms = 0;
  IGNIS_CUDA_CHECK(cudaEventElapsedTime(&ms, static_cast<cudaEvent_t>(event_),
                                        static_cast<cudaEvent_t>(end.event_)));
  return ms;
}

}  // namespace cuda

bool cuda_is_available() { return cuda::is_available(); }

}  // namespace ignis
