// CPU copy/cast kernel: every (dst, src) dtype pair.
#include "cpu/loops.h"
#include "ops/cast.h"
#include "ops/copy.h"

namespace ignis::cpu {
namespace {

void copy_kernel(const TensorIter& it, DType dst, DType src) {
  dispatch_dtype(dst, "copy_", [&]<class D>() {
    dispatch_dtype(src, "copy_", [&]<class S>() {
      cpu_kernel<D, S>(it, fn::Cast<D, S>{});
    });
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(copy_stub, CPU, &copy_kernel);
}  // namespace ignis::cpu
