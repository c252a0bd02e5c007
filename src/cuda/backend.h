// What the device-generic core calls in the CUDA backend. Defined by the backend's sources
// (src/cuda/*.cpp, *.cu) in a build with CUDA, else by src/cuda/no_cuda.cpp, whose versions
// throw an ignis::Error saying that ignis was built without the backend.
#pragma once

#include "ignis/cuda.h"
#include "ignis/tensor.h"

#include <vector>

namespace ignis::cuda::detail {

/// How many times ignis has made the host wait for a GPU since the process started: a copy to
/// pageable host memory, item(), an index check, a bad-divisor check, cuda::synchronize,
/// Stream/Event::synchronize. The async tests count these to prove that queued work does not
/// wait (as PyTorch's torch.cuda.set_sync_debug_mode finds stray synchronisations).
int64_t host_sync_count();

/// dst = src between two devices, at least one a GPU (dst and src have the same shape; dtypes
/// and strides may differ). Waits for the copy unless `non_blocking` and the host side is
/// pinned (or both sides are GPUs).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);
/// Tensor::pin_memory, is_pinned and record_stream.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);
void record_stream(const Tensor& t, const Stream& stream);

/// The optimizers' fused multi-tensor steps (cuda/optim_kernels.cu): contiguous float32/float64
/// CUDA tensors of one dtype and device, updated in place with the CPU fused kernels' arithmetic.
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

}  // namespace ignis::cuda::detail
