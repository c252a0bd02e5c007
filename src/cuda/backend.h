// What the device-generic core calls in the CUDA backend. Defined by the backend's sources
// (src/cuda/*.cpp, *.cu) in a build with CUDA, else by src/cuda/no_cuda.cpp, whose versions
// throw an ignis::Error saying that ignis was built without the backend.
#pragma once

#include "ignis/cuda.h"
#include "ignis/tensor.h"

namespace ignis::cuda::detail {

/// dst = src between two devices, at least one a GPU (dst and src have the same shape; dtypes
/// and strides may differ). Waits for the copy unless `non_blocking` and the host side is
/// pinned (or both sides are GPUs).
void copy_across_devices(const Tensor& dst, const Tensor& src, bool non_blocking);
/// Tensor::pin_memory, is_pinned and record_stream.
Tensor pin_memory(const Tensor& t);
bool is_pinned(const Tensor& t);
void record_stream(const Tensor& t, const Stream& stream);

}  // namespace ignis::cuda::detail
