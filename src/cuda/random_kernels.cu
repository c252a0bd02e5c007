// CUDA kernels of the random fills: the same draws as the CPU's (ops/random_functors.h), so a
// seed gives the same numbers on either device.
#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/random_functors.h"

namespace ignis::cuda {
namespace {

template <class T, class F>
__global__ void fill_kernel(T* out, int64_t n, F f) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = f(static_cast<uint64_t>(i));
  }
}

struct Fill {
  const Tensor& out;
  template <class T, class F>
  void operator()(const F& f) const {
    const int64_t n = out.numel();
    if (n == 0) return;
    DeviceGuard guard(out.device().index);
    const cudaStream_t stream = current_stream(out.device());
    fill_kernel<<<blocks_for(n), kThreads, 0, stream>>>(
        static_cast<T*>(out.data_ptr()), n, f);
    IGNIS_CUDA_CHECK(cudaGetLastError());
  }
};

void uniform_kernel(const Tensor& out, const RandomArgs& r) {
  fn::uniform_fill(out.dtype(), r, Fill{out});
}
void normal_kernel(const Tensor& out, const RandomArgs& r) {
  fn::normal_fill(out.dtype(), r, Fill{out});
}
void randint_kernel(const Tensor& out, const RandomArgs& r) {
  fn::randint_fill(out.dtype(), r, Fill{out});
}

}  // namespace

IGNIS_REGISTER_KERNEL(uniform_stub, CUDA, &uniform_kernel);
IGNIS_REGISTER_KERNEL(normal_stub, CUDA, &normal_kernel);
IGNIS_REGISTER_KERNEL(randint_stub, CUDA, &randint_kernel);

}  // namespace ignis::cuda
