// Copies between the CPU and a GPU and between GPUs (cudaMemcpyAsync on the GPU side's current
// stream). The bytes cross as a dense block in the destination's dtype: the source is made dense
// and cast on its own device first, and a strided destination gets a dense staging tensor that
// is then copied into it on its device.
//
// Waiting: a copy with non_blocking = false waits for its data (PyTorch's semantics). A
// non_blocking copy to the CPU waits unless its destination is pinned and contiguous; a
// non_blocking copy from the CPU never waits: a pinned source is read by the transfer directly,
// and any other (pageable, or a dense or cast temporary made here) is first copied into a block
// of the pinned cache, which then goes back to the cache. Either way an event recorded on the
// stream keeps a pinned-cache block from reuse until the transfer has completed (PyTorch's
// CachingHostAllocator_recordEvent). upload() is that staged path for the kernels' host tables.
// Copies between GPUs never block the host: the destination's stream waits for the source's
// work, and the source's stream for the copy, through events.
#include <cstring>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "ops/copy.h"

namespace ignis::cuda::detail {
namespace {

// The largest pageable source a non-blocking copy stages through the pinned cache.
constexpr size_t kMaxStagedBytes = size_t{16} << 20;

// Queues a copy of `bytes` host bytes to device memory `dst` on `stream` through a block of the
// pinned cache, without a host wait: the bytes are copied into the block now, and the block is
// reused only once the transfer has completed.
void stage_to_device(void* dst, const void* host, size_t bytes, const Stream& stream) {
  if (bytes == 0) return;
  void* block = pinned_alloc(bytes);
  std::memcpy(block, host, bytes);
  const cudaError_t e = cudaMemcpyAsync(dst, block, bytes, cudaMemcpyHostToDevice,
                                        static_cast<cudaStream_t>(stream.handle()));
  if (e != cudaSuccess) {
    pinned_release(block);  // nothing was queued
    IGNIS_CUDA_CHECK(e);
  }
  // Should the event fail, the block stays in use for good: the transfer may still read it.
  pinned_record_use(block, stream);
  pinned_release(block);
}

// The storage a (CPU) tensor's data lies in: a pinned-cache block starts there.
void* storage_of(const Tensor& t) { return t.impl()->storage()->data; }

// x as a dense tensor of `dtype` on its own device (x itself when it already is one).
Tensor dense_as(const Tensor& x, DType dtype) {
  if (x.dtype() == dtype && x.is_contiguous()) return x;
  Tensor out = make_tensor(x.sizes(), dtype, x.device());
  copy_into(out, x);
  return out;
}


void host_to_device(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Tensor s = dense_as(src, dst.dtype());
  const bool direct = dst.is_contiguous();
  const Tensor d = direct ? dst : make_tensor(dst.sizes(), dst.dtype(), dst.device());
  DeviceGuard g(dst.device());
  const Stream str = getCurrentCUDAStream(dst.device().index);
  cudaStream_t stream = static_cast<cudaStream_t>(str.handle());
  // A pinned source is read by the DMA directly; a pageable (or converted) one is staged through
  // the pinned cache, unless it is large (pinning its size again would cost more than the wait).
  const bool pinned_src = non_blocking && s.is_same(src) && is_pinned(src);  // (a driver call)
  const bool stage = non_blocking && !pinned_src && s.nbytes() <= kMaxStagedBytes;
  if (stage) {
    stage_to_device(d.data_ptr(), s.data_ptr(), s.nbytes(), str);
  } else {
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(d.data_ptr(), s.data_ptr(), s.nbytes(),
                                     cudaMemcpyHostToDevice, stream));
    // A pinned-cache block (pin_memory) is not reused before the transfer has read it.
    if (non_blocking && pinned_src) pinned_record_use(storage_of(src), str);
  }
  if (!direct) copy_into(dst, d);  // on the same stream, after the transfer
  if (!non_blocking || (!pinned_src && !stage)) wait_for_stream(stream);
}

void device_to_host(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const Tensor s = dense_as(src, dst.dtype());  // on the GPU, queued on its stream
  const bool direct = dst.is_contiguous();
  const Tensor d = direct ? dst : make_tensor(dst.sizes(), dst.dtype(), kCPU);
  DeviceGuard g(src.device());
  cudaStream_t stream = current_stream(src.device());
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(d.data_ptr(), s.data_ptr(), s.nbytes(),
                                   cudaMemcpyDeviceToHost, stream));
  // A GPU temporary s may die at once (its block is reused only by later work on this stream);
  // a host staging tensor d may not, so only a direct copy into pinned memory is left running,
  // and a pinned-cache block (pin_memory) is not reused before the transfer has written it.
  if (direct && non_blocking && is_pinned(dst)) {
    pinned_record_use(storage_of(dst), getCurrentCUDAStream(src.device().index));
  } else {
    wait_for_stream(stream);
  }
  if (!direct) copy_into(dst, d);
}

void device_to_device(const Tensor& dst, const Tensor& src) {
  const Tensor s = dense_as(src, dst.dtype());
  const bool direct = dst.is_contiguous();
  const Tensor d = direct ? dst : make_tensor(dst.sizes(), dst.dtype(), dst.device());
  const int from = src.device().index, to = dst.device().index;
  // The destination's stream waits for the source's pending work.
  Event ready;
  ready.record(getCurrentCUDAStream(from));
  ready.block(getCurrentCUDAStream(to));
  DeviceGuard g(to);
  cudaStream_t stream = current_stream(dst.device());
  IGNIS_CUDA_CHECK(cudaMemcpyPeerAsync(d.data_ptr(), to, s.data_ptr(), from, s.nbytes(), stream));
  // The source's stream waits for the copy before it reuses the source's memory.
  Event done;
  done.record(getCurrentCUDAStream(to));
  done.block(getCurrentCUDAStream(from));
  if (!direct) copy_into(dst, d);
}

}  // namespace

Tensor upload(const void* host, size_t bytes, DType dtype, int64_t numel, Device device) {
  IGNIS_CHECK(device.is_cuda(), "upload: ", device.str(), " is not a CUDA device");
  check_device(device.index, "upload");
  IGNIS_CHECK(numel >= 0 && bytes == static_cast<size_t>(numel) * element_size(dtype),
              "upload: ", bytes, " bytes do not hold ", numel, " elements of ", dtype_name(dtype));
  Tensor out = make_tensor({numel}, dtype, device);
  DeviceGuard g(device);
  stage_to_device(out.data_ptr(), host, bytes, getCurrentCUDAStream(device.index));
  return out;
}

void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking) {
  const bool to_gpu = dst.device().is_cuda(), from_gpu = src.device().is_cuda();
  IGNIS_CHECK(to_gpu || from_gpu, "copy_: no kernel copies from ", src.device().str(), " to ",
              dst.device().str());
  if (to_gpu) check_device(dst.device().index, "copy_");
  if (from_gpu) check_device(src.device().index, "copy_");
  if (to_gpu && from_gpu) return device_to_device(dst, src);
  if (to_gpu) return host_to_device(dst, src, non_blocking);
  device_to_host(dst, src, non_blocking);
}

}  // namespace ignis::cuda::detail
