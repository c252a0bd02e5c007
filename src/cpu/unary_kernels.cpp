// CPU kernels of the unary math ops, pow, clamp, maximum and minimum: the functors of
// ops/functors.h over cpu_kernel, from the list shared with the CUDA backend
// (ops/unary_kernels.inc).
#include "cpu/loops.h"
#include "ops/unary.h"

namespace ignis::cpu {
#define IGNIS_ELEMENTWISE_LOOP cpu_kernel
#define IGNIS_KERNEL_DEVICE CPU
#include "ops/unary_kernels.inc"
#undef IGNIS_ELEMENTWISE_LOOP
#undef IGNIS_KERNEL_DEVICE
}  // namespace ignis::cpu
