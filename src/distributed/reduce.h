// Elementwise reductions on raw buffers, for the ring all-reduce and MPI operators on dtypes MPI
// lacks (bfloat16).
#pragma once

#include <cstdint>

#include "ignis/distributed.h"

namespace ignis::distributed::detail {

/// acc[i] = op(acc[i], in[i]) for n elements of `dtype`; AVG reduces as SUM (scale afterwards).
/// On bool, SUM and MAX are a logical or, PRODUCT and MIN a logical and.
void reduce_into(void* acc, const void* in, int64_t n, DType dtype, ReduceOp op);
/// x[i] /= divisor on a floating buffer (AVG's last step).
void divide_inplace(void* x, int64_t n, DType dtype, int64_t divisor);
/// Fails with "<op>: ReduceOp.AVG needs a floating dtype, got <dtype>" where AVG can't apply.
void check_reduce_op(const char* op, DType dtype, ReduceOp reduce_op);

}  // namespace ignis::distributed::detail
