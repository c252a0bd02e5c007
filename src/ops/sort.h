// Sorting and selection along one dim (sort, topk, mode) and the scans cumprod and
// logcumsumexp: the kernel stubs. The front ends are in ops/sort.cpp and ops/scan.cpp.
#pragma once

#include "core/dispatch.h"
#include "ignis/tensor.h"

namespace ignis {

/// values and indices (contiguous, x's shape) = x sorted along dim, stably (equal elements keep
/// their order), NaN above +inf (last ascending, first descending). `values` may be undefined.
using SortFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                        bool descending);
IGNIS_DECLARE_STUB(sort_stub, SortFn);

/// values and indices (contiguous, x's shape with k along dim) = the k largest (smallest) of x
/// along dim in sorted order, NaN above +inf; equal values in index order.
using TopkFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                        int64_t k, bool largest);
IGNIS_DECLARE_STUB(topk_stub, TopkFn);

/// indices (contiguous, x's shape without dim) = for each line along dim, the last position of
/// its most frequent value (ties: the smallest value; every NaN counts as a value of its own).
using ModeFn = void (*)(const Tensor& indices, const Tensor& x, int64_t dim);
IGNIS_DECLARE_STUB(mode_stub, ModeFn);

/// out (contiguous, x's shape) = the cumulative product (kind 0) or log-sum-exp (kind 1) of x
/// along dim.
using ScanFn = void (*)(const Tensor& out, const Tensor& x, int64_t dim, int kind);
IGNIS_DECLARE_STUB(scan_stub, ScanFn);

}  // namespace ignis
