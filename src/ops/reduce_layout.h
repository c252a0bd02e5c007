// A reduction's input seen as a dense [outer, n, inner] block, shared by the CPU and CUDA
// reduction drivers.
#pragma once

#include "ops/reduce.h"

namespace ignis {

/// x as a dense [outer, n, inner] block: output o * inner + i folds x[o, 0..n, i]. No copy when
/// the reduced dims form one block in x's memory order and the kept dims stay in order; otherwise
/// `hold` is a copy of x with the reduced dims moved last (inner = 1).
struct ReduceLayout {
  Tensor hold;
  const void* data = nullptr;
  int64_t outer = 1, n = 1, inner = 1;
};
ReduceLayout reduce_layout(const Tensor& x, const ReducePlan& plan);
/// The same for the one dim `dim` of a contiguous copy of x (for ops whose output has x's shape:
/// the element order then matches a contiguous output).
ReduceLayout dim_layout(const Tensor& x, int64_t dim);

}  // namespace ignis
