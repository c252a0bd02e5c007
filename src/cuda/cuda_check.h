// Error checks for CUDA runtime calls: a failed call becomes an ignis::Error naming the call
// and the runtime's message.
#pragma once

#include <cuda_runtime_api.h>

#include "ignis/cuda.h"
#include "ignis/error.h"

#define IGNIS_CUDA_CHECK(expr)                                                          \
  do {                                                                                  \
    const cudaError_t ignis_cuda_err_ = (expr);                                         \
    if (ignis_cuda_err_ != cudaSuccess) {                                               \
      (void)cudaGetLastError(); /* clear a sticky-free error */                         \
      IGNIS_FAIL("CUDA error in ", #expr, ": ", cudaGetErrorName(ignis_cuda_err_), " (", \
                 cudaGetErrorString(ignis_cuda_err_), ")");                             \
    }                                                                                   \
  } while (0)

namespace ignis::cuda::detail {
/// Checks that `device` is a visible GPU; `what` names the caller in the error.
void check_device(int device, const char* what);
/// The device index an argument of -1 stands for (the current device).
int resolve(int device);
/// Makes the host wait for `stream`, counting the wait (host_sync_count in cuda/backend.h): every
/// place where ignis itself blocks on a GPU goes through here.
void wait_for_stream(cudaStream_t stream);
/// Counts a host wait that does not go through wait_for_stream (a device or event sync).
void count_host_sync();
/// The current stream of a GPU (getCurrentCUDAStream) as the runtime's handle.
inline cudaStream_t current_stream(Device device) {
  return static_cast<cudaStream_t>(getCurrentCUDAStream(device.index).handle());
}
}  // namespace ignis::cuda::detail
