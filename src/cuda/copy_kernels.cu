// CUDA copy/cast kernel: every (dst, src) dtype pair, with the CPU kernel's cast (ops/cast.h);
// and fill, whose value travels as a kernel argument.
#include "cuda/loops.cuh"
#include "ops/cast.h"
#include "ops/copy.h"

namespace ignis::cuda {
namespace {

void copy_kernel(const TensorIter& it, DType dst, DType src) {
  dispatch_dtype(dst, "copy_", [&]<class D>() {
    dispatch_dtype(src, "copy_", [&]<class S>() { gpu_kernel<D, S>(it, fn::Cast<D, S>{}); });
  });
}

template <class T>
__global__ void fill_cuda(T* dst, int64_t n, T value) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    dst[i] = value;
  }
}

void fill_kernel(const Tensor& dst, Scalar value) {
  const int64_t n = dst.numel();
  if (n == 0) return;
  DeviceGuard guard(dst.device().index);
  dispatch_dtype(dst.dtype(), "fill_", [&]<class T>() {
    // The CPU's conversion (ops/elementwise.cpp's wrap_scalar), done on the host.
    const T v = static_cast<T>(value.to<acc_t<T>>());
    fill_cuda<T><<<blocks_for(n), kThreads, 0, current_stream(dst.device())>>>(dst.data_ptr<T>(),
                                                                               n, v);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace
IGNIS_REGISTER_KERNEL(copy_stub, CUDA, &copy_kernel);
IGNIS_REGISTER_KERNEL(fill_stub, CUDA, &fill_kernel);
}  // namespace ignis::cuda
