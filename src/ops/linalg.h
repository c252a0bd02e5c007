// Matrix-multiply kernel stubs (defined in ops/linalg.cpp, kernels per device).
#pragma once

#include "core/dispatch.h"
#include "ignis/ops.h"

namespace ignis {

/// out = alpha * (a @ b) + beta * out, per batch. out is contiguous; a and b may have any strides
/// (transposed views, a batch stride of 0 for a broadcast operand). All three share one dtype.
/// With beta == 0 out's previous values are ignored (they may be uninitialised, even NaN).
///   mm_stub:  out [M, N], a [M, K], b [K, N]
///   bmm_stub: out [B, M, N], a [B, M, K], b [B, K, N]
using GemmFn = void (*)(const Tensor& out, const Tensor& a, const Tensor& b, double alpha,
                        double beta);
IGNIS_DECLARE_STUB(mm_stub, GemmFn);
IGNIS_DECLARE_STUB(bmm_stub, GemmFn);

}  // namespace ignis
