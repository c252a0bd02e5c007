// Reductions: dim handling shared by every reduction op, and the kernel stubs.
#pragma once

#include "core/dispatch.h"
#include "ignis/ops.h"

namespace ignis {

/// The reduced dims of x as a mask, and the output shape (with or without keepdim). An empty
/// dims list means every dim.
struct ReducePlan {
  std::vector<bool> reduced;  // per dim of x
  Shape out_shape;            // with keepdim applied
  Shape keep_shape;           // out shape with reduced dims kept as 1 (for broadcasting back)
  int64_t reduced_numel = 1;
};
ReducePlan make_reduce_plan(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op);

/// A reduction kernel: out (contiguous, shape plan.out_shape) = reduce(x) over plan.reduced.
using ReduceFn = void (*)(const Tensor& out, const Tensor& x, const ReducePlan& plan);
IGNIS_DECLARE_STUB(sum_stub, ReduceFn);

}  // namespace ignis
