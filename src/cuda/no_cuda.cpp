// The CUDA runtime API in a build without the CUDA backend (IGNIS_CUDA=OFF, or no nvcc): no
// device is available, and what needs one says why.
#include <atomic>
#include <cstdlib>
#include <string>

#include "cuda/backend.h"
#include "distributed/backend.h"
#include "ignis/error.h"

namespace ignis {

namespace {
[[noreturn]] void no_backend(const char* what) {
  IGNIS_FAIL(what, ": ignis was built without a CUDA backend (configure with -DIGNIS_CUDA=ON "
             "on a machine with nvcc)");
}
}  // namespace

bool cuda_is_available() { return false; }

namespace cuda {

bool is_available() { return false; }
int device_count() { return 0; }
std::string unavailable_reason() { return "ignis was built without a CUDA backend"; }
int current_device() { no_backend("cuda::current_device"); }
void set_device(int) { no_backend("cuda::set_device"); }
void synchronize(int) { no_backend("cuda::synchronize"); }

DeviceGuard::DeviceGuard(int) { no_backend("cuda::DeviceGuard"); }
DeviceGuard::DeviceGuard(Device) { no_backend("cuda::DeviceGuard"); }
DeviceGuard::~DeviceGuard() = default;

bool Stream::query() const { no_backend("cuda::Stream::query"); }
void Stream::synchronize() const { no_backend("cuda::Stream::synchronize"); }
Stream getCurrentCUDAStream(int) { no_backend("cuda::getCurrentCUDAStream"); }
Stream getDefaultCUDAStream(int) { no_backend("cuda::getDefaultCUDAStream"); }
Stream getStreamFromPool(bool, int) { no_backend("cuda::getStreamFromPool"); }
void setCurrentCUDAStream(const Stream&) { no_backend("cuda::setCurrentCUDAStream"); }
StreamGuard::StreamGuard(const Stream&) { no_backend("cuda::StreamGuard"); }
StreamGuard::~StreamGuard() = default;

Event::Event(bool enable_timing) : timing_(enable_timing) {}
Event::~Event() = default;
Event::Event(Event&& o) noexcept : event_(o.event_), device_(o.device_), timing_(o.timing_) {}
Event& Event::operator=(Event&& o) noexcept {
  event_ = o.event_;
  device_ = o.device_;
  timing_ = o.timing_;
  return *this;
}
void Event::record() { no_backend("cuda::Event::record"); }
void Event::record(const Stream&) { no_backend("cuda::Event::record"); }
void Event::block(const Stream&) const { no_backend("cuda::Event::block"); }
bool Event::query() const { return true; }  // never recorded
void Event::synchronize() const {}
float Event::elapsed_time(const Event&) const { no_backend("cuda::Event::elapsed_time"); }

MemoryStats memory_stats(int) { no_backend("cuda::memory_stats"); }
void reset_peak_memory_stats(int) { no_backend("cuda::reset_peak_memory_stats"); }
void empty_cache() {}  // nothing cached
namespace {
std::atomic<bool> benchmark_flag{false};
}  // namespace
void set_cudnn_benchmark(bool on) { benchmark_flag = on; }  // kept, though nothing uses it
bool cudnn_benchmark() { return benchmark_flag; }
namespace {
std::atomic<bool> graph_api_flag{[] {  // as the backend's (cuda/conv.cu)
  const char* v = std::getenv("IGNIS_CUDNN_GRAPH_API");
  return v == nullptr || std::string(v) != "0";
}()};
}  // namespace
void set_cudnn_graph_api(bool on) { graph_api_flag = on; }  // kept, though nothing uses it
bool cudnn_graph_api() { return graph_api_flag; }

namespace detail {
int64_t host_sync_count() { return 0; }
CudnnGraphStats cudnn_graph_stats() { return {}; }
std::string nvrtc_compile(const std::string&, int) { no_backend("nvrtc_compile"); }
void copy_across_devices(const Tensor& dst, const Tensor& src, bool) {
  IGNIS_FAIL("copy_: copying from ", src.device().str(), " to ", dst.device().str(),
             ": ignis was built without a CUDA backend");
}
Tensor pin_memory(const Tensor&) { no_backend("pin_memory"); }
bool is_pinned(const Tensor&) { return false; }
void record_stream(const Tensor&, const Stream&) { no_backend("record_stream"); }
void* pinned_alloc(size_t) { no_backend("pinned memory"); }
void pinned_release(void*) { no_backend("pinned memory"); }
bool pinned_record_use(void*, const Stream&) { return false; }  // nothing is pinned
MemoryStats pinned_memory_stats() { no_backend("pinned_memory_stats"); }
Tensor upload(const void*, size_t, DType, int64_t, Device) { no_backend("upload"); }
void sgd_multi_tensor(const std::vector<Tensor>&, const std::vector<Tensor>&,
                      const std::vector<Tensor>&, const std::vector<bool>&, const SgdHyper&) {
  no_backend("SGD");
}
void adam_multi_tensor(const std::vector<Tensor>&, const std::vector<Tensor>&,
                       const std::vector<Tensor>&, const std::vector<Tensor>&,
                       const std::vector<Tensor>&, const std::vector<double>&,
                       const std::vector<double>&, const AdamHyperCuda&) {
  no_backend("Adam");
}
void rmsprop_multi_tensor(const std::vector<Tensor>&, const std::vector<Tensor>&,
                          const std::vector<Tensor>&, const std::vector<Tensor>&,
                          const std::vector<Tensor>&, const RMSpropHyper&) {
  no_backend("RMSprop");
}
void adagrad_multi_tensor(const std::vector<Tensor>&, const std::vector<Tensor>&,
                          const std::vector<Tensor>&, const std::vector<double>&,
                          const AdagradHyper&) {
  no_backend("Adagrad");
}
}  // namespace detail

}  // namespace cuda
}  // namespace ignis

namespace ignis::distributed::detail {
bool nccl_available() { return false; }
ProcessGroupPtr nccl_init_world(const ProcessGroupOptions&) {
  IGNIS_FAIL("init_process_group: the nccl backend needs ignis's CUDA backend, which this build "
             "does not have");
}
void nccl_destroy(const ProcessGroupPtr&) {}
}  // namespace ignis::distributed::detail
