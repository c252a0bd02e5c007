// What the device-generic core calls in the CUDA backend. Defined by the backend's sources
// (src/cuda/*.cpp, *.cu) in a build with CUDA, else by src/cuda/no_cuda.cpp, whose versions
// throw an ignis::Error saying that ignis was built without the backend.
#pragma once

#include "ignis/cuda.h"
#include "ignis/tensor.h"

#include <string>
#include <vector>

namespace ignis::cuda::detail {

/// How many times ignis has made the host wait for a GPU since the process started: a copy to
/// pageable host memory, item(), an index check, a bad-divisor check, cuda::synchronize,
/// Stream/Event::synchronize. The async tests count these to prove that queued work does not
/// wait (as PyTorch's torch.cuda.set_sync_debug_mode finds stray synchronisations).
int64_t host_sync_count();

/// Convolutions through cuDNN's graph API (cuda/cudnn_graph.cpp, on while
/// cuda::cudnn_graph_api()): how many ran there, how many problems fell back to the legacy API,
/// and why the last one did (the tests check that the common problems do not fall back).
struct CudnnGraphStats {
  int64_t executions = 0, fallbacks = 0;
  int64_t fused_executions = 0;  // of those executions, forwards with the bias/ReLU fused
  std::string last_fallback;
};
CudnnGraphStats cudnn_graph_stats();

/// The cubin of CUDA C++ `source` for architecture sm_`sm` (90 for an H100), compiled by NVRTC
/// with the standard headers the shared functors include (cuda/nvrtc_std.h); throws NVRTC's log
/// when it does not compile. Needs libnvrtc, not a GPU (graph mode's fused kernels).
std::string nvrtc_compile(const std::string& source, int sm);

/// dst = src between two devices, at least one a GPU (dst and src have the same shape; dtypes
/// and strides may differ). Waits for the copy unless `non_blocking` (or both sides are GPUs): a
/// copy to the CPU then needs a pinned, contiguous destination; a copy from the CPU does not
/// wait from pinned memory, nor from a pageable or converted source of at most 16 MiB (staged
/// through the pinned cache); a larger pageable one waits, rather than pin its size again.
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);
/// Tensor::pin_memory, is_pinned and record_stream.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);
void record_stream(const Tensor& t, const Stream& stream);

/// The cache of pinned host memory (core/host_caching_allocator.h over cudaHostAlloc) behind
/// pin_memory, the DataLoader's pinned batches, upload and non-blocking copies from pageable
/// memory. pinned_alloc gives a block of at least `nbytes`; pinned_release gives it back, to be
/// reused once the copies recorded on it have completed; pinned_record_use records that work
/// queued now on `stream` reads or writes the block at `ptr` (false, and nothing recorded, for
/// memory the cache did not give or a block not in use).
void* pinned_alloc(size_t nbytes);
void pinned_release(void* ptr);
bool pinned_record_use(void* ptr, const Stream& stream);
/// The pinned cache's counts: allocated (bytes of blocks in use), reserved (those and the cached
/// blocks, free or waiting for their copies), peak_allocated, num_allocs, cache_hits. Block
/// sizes are powers of two, at least 512 bytes.
MemoryStats pinned_memory_stats();
/// A new 1-d tensor of `numel` elements of `dtype` on `device` holding the `bytes` bytes at `host`,
/// without a host wait: the bytes are copied at once into a block of the pinned cache, the
/// transfer is queued on the device's current stream, and the block is reused only once the
/// transfer has completed (PyTorch's CachingHostAllocator_recordEvent). For the small host-made
/// tables of the kernels (pooling windows, interpolation tables, CTC's geometry).
Tensor upload(const void* host, size_t bytes, DType dtype, int64_t numel, Device device);

/// The optimizers' fused multi-tensor steps (cuda/optim_kernels.cu): contiguous float32, float64
/// or bfloat16 CUDA tensors (each parameter's state of its dtype and device; the lists may mix
/// devices and dtypes), updated in place with the CPU fused kernels' arithmetic (bfloat16 in
/// float32, rounded once).
struct SgdHyper {
  double lr, momentum, dampening, weight_decay;
  bool nesterov, maximize;
};
/// bufs[i] undefined without momentum; first[i]: the buffer is set from the gradient.
void sgd_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& bufs, const std::vector<bool>& first,
                      const SgdHyper& h);
struct AdamHyperCuda {
  double lr, beta1, beta2, eps, weight_decay;
  bool amsgrad, maximize, decoupled;
};
/// step_size[i] = lr / (1 - beta1^step_i) and bc2_sqrt[i] = sqrt(1 - beta2^step_i) per tensor.
void adam_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                       const std::vector<Tensor>& max_exp_avg_sq,
                       const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                       const AdamHyperCuda& h);
struct RMSpropHyper {
  double lr, alpha, eps, weight_decay, momentum;
  bool centered, maximize;
};
/// grad_avg[i] undefined unless centered, momentum_buffer[i] unless momentum > 0.
void rmsprop_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& square_avg,
                          const std::vector<Tensor>& grad_avg,
                          const std::vector<Tensor>& momentum_buffer, const RMSpropHyper& h);
struct AdagradHyper {
  double weight_decay, eps;
  bool maximize;
};
/// clr[i] = lr / (1 + (step_i - 1) * lr_decay) per tensor.
void adagrad_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& sums, const std::vector<double>& clr,
                          const AdagradHyper& h);

}  // namespace ignis::cuda::detail
