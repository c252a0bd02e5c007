// Copies between the CPU and a GPU and between GPUs (cudaMemcpyAsync on the GPU side's current
// stream). The bytes cross as a dense block in the destination's dtype: the source is made dense
// and cast on its own device first, and a strided destination gets a dense staging tensor that
// is then copied into it on its device.
//
// Waiting: a copy to the CPU waits for its data unless it is non_blocking into pinned memory; a
// copy from the CPU waits unless it is non_blocking from pinned memory (a pageable source is
// staged by the driver, and a temporary made here must outlive the transfer, so those wait).
// Copies between GPUs never block the host: the destination's stream waits for the source's
// work, and the source's stream for the copy, through events.
#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "ops/copy.h"

namespace ignis::cuda::detail {
namespace {

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
  cudaStream_t stream = current_stream(dst.device());
  IGNIS_CUDA_CHECK(cudaMemcpyAsync(d.data_ptr(), s.data_ptr(), s.nbytes(),
                                   cudaMemcpyHostToDevice, stream));
  if (!direct) copy_into(dst, d);  // on the same stream, after the transfer
  // A source this function made, or one the driver must stage, is waited for.
  if (!(non_blocking && s.is_same(src) && is_pinned(src))) {
    wait_for_stream(stream);
  }
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
  // a host staging tensor d may not, so only a direct copy into pinned memory is left running.
  if (!(direct && non_blocking && is_pinned(dst))) {
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
