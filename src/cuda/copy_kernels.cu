// CUDA copy/cast kernel: every (dst, src) dtype pair, with the CPU kernel's cast (ops/cast.h).
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

}  // namespace
IGNIS_REGISTER_KERNEL(copy_stub, CUDA, &copy_kernel);
}  // namespace ignis::cuda
