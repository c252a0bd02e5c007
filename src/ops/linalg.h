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

/// out [M, N] (contiguous) = a [M, K] @ b [K, N] + bias, then ReLU when `relu`, in one GEMM whose
/// epilogue adds the bias (contiguous [N], or undefined) and applies the ReLU (cuBLASLt's
/// epilogues). Returns false, leaving out untouched, when the library has no algorithm for the
/// case; linear then runs the GEMM and the epilogue as separate kernels. Registered for CUDA.
using GemmEpilogueFn = bool (*)(const Tensor& out, const Tensor& a, const Tensor& b,
                                const Tensor& bias, bool relu);
IGNIS_DECLARE_STUB(mm_epilogue_stub, GemmEpilogueFn);

}  // namespace ignis
