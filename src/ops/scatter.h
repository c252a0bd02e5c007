// Kernel stubs of the scatter reductions and sparse products (ops/scatter.cpp; CPU kernels in
// cpu/scatter_kernels.cpp). Determinism without atomics: a reduction into rows first sorts its
// entries by destination row (a stable counting sort, coo_to_csr), then each thread owns whole
// destination rows and combines their entries in their original order.
#pragma once

#include "ops/functors.h"  // IGNIS_HD, IGNIS_FN_INLINE
#include "ops/index.h"

namespace ignis {

enum class ReduceOp : uint8_t { Sum, Prod, Mean, Amax, Amin };

/// a combined with b by `op` (the scatter reductions' step, shared by the CPU and CUDA kernels);
/// amax and amin propagate NaN.
template <class A>
IGNIS_HD IGNIS_FN_INLINE A combine(ReduceOp op, A a, A b) {
  switch (op) {
    case ReduceOp::Sum:
    case ReduceOp::Mean: return static_cast<A>(a + b);
    case ReduceOp::Prod: return static_cast<A>(a * b);
    case ReduceOp::Amax: return (b > a || b != b) ? b : a;
    case ReduceOp::Amin: return (b < a || b != b) ? b : a;
  }
  return a;
}

/// acc / count; integers divide with floor, as PyTorch's scatter_reduce mean, the count in the
/// integer dtype (a uint8 count wraps at 256) and a wrapped count of 0 taken as 1 (PyTorch's
/// masked_fill): never a division by zero.
template <class A>
IGNIS_HD IGNIS_FN_INLINE A divide(A a, int64_t count) {
  if constexpr (std::is_floating_point_v<A>) {
    return a / static_cast<A>(count);
  } else {
    A c = static_cast<A>(count);
    if (c == 0) c = 1;
    A q = static_cast<A>(a / c);
    if constexpr (std::is_signed_v<A>) {
      if (a % c != 0 && a < 0) --q;
    }
    return q;
  }
}

/// rowptr (int64 [rows + 1]) and perm (int64 [E]) of the CSR of a row-index vector `index`
/// (int64/int32, contiguous [E]): the entries of row r are perm[rowptr[r] .. rowptr[r + 1]), in
/// their order in index. A value outside [0, rows) is returned as a BadIndex.
using CooToCsrFn = BadIndex (*)(const Tensor& index, int64_t rows, const Tensor& rowptr,
                                const Tensor& perm);
IGNIS_DECLARE_STUB(coo_to_csr_stub, CooToCsrFn);

/// Checks a CSR row pointer: rowptr[0] == 0, non-decreasing, rowptr[rows] == nnz. A BadIndex
/// gives the position of the first bad entry.
using CsrCheckFn = BadIndex (*)(const Tensor& rowptr, int64_t nnz);
IGNIS_DECLARE_STUB(csr_check_stub, CsrCheckFn);

/// rows (int64 [nnz]) = the row of each entry of a valid CSR row pointer.
using CsrRowsFn = void (*)(const Tensor& rowptr, const Tensor& rows);
IGNIS_DECLARE_STUB(csr_rows_stub, CsrRowsFn);

/// scatter_reduce when the index is one vector along `dim` (broadcast over the other dims):
/// out (already self's values; viewable as [outer, N, inner], see collapse3) reduced with src
/// (viewable as [outer, E, inner]) through the CSR (rowptr, perm) of the index vector.
using SegmentReduceFn = void (*)(const Tensor& out, const Tensor& src, int64_t dim,
                                 const Tensor& rowptr, const Tensor& perm, ReduceOp op,
                                 bool include_self);
IGNIS_DECLARE_STUB(segment_reduce_stub, SegmentReduceFn);

/// scatter_reduce in general: `it` = (out, index, src) restrided so that the scatter dim has
/// size 1; each element is a whole line along dim (of `line` index positions), reduced
/// serially; lines run in parallel (they never share an output position).
struct ScatterReduceArgs {
  int64_t line = 0;
  int64_t self_stride = 0;   // bytes, out along dim
  int64_t index_stride = 0;  // bytes, index along dim
  int64_t src_stride = 0;    // bytes, src along dim
  int64_t size = 0;          // out.size(dim): the index bound
  ReduceOp op = ReduceOp::Sum;
  bool include_self = true;
};
using ScatterReduceFn = BadIndex (*)(const TensorIter& it, DType dt, DType index_dt,
                                     const ScatterReduceArgs& a);
IGNIS_DECLARE_STUB(scatter_reduce_stub, ScatterReduceFn);

/// out (contiguous [rows, F]) = A @ dense for A in CSR form: row r's entries are k in
/// [rowptr[r], rowptr[r + 1]), each at column col[p] with value values[p] (ones when values is
/// undefined), p = perm[k] (or k when perm is undefined). dense contiguous [K, F], values
/// contiguous with dense's dtype. A column outside [0, K) is returned as a BadIndex.
using SpmmFn = BadIndex (*)(const Tensor& out, const Tensor& rowptr, const Tensor& col,
                            const Tensor& values, const Tensor& perm, const Tensor& dense);
IGNIS_DECLARE_STUB(spmm_stub, SpmmFn);

/// out [E] = dot(a[row[e]], b[col[e]]); a [R, F], b [C, F] contiguous, row/col int64
/// contiguous. A bad index is returned, with bad_which = 0 (row) or 1 (column).
using SddmmFn = BadIndex (*)(const Tensor& out, const Tensor& row, const Tensor& col,
                             const Tensor& a, const Tensor& b, int& bad_which);
IGNIS_DECLARE_STUB(sddmm_stub, SddmmFn);

}  // namespace ignis
