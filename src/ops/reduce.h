// Reductions: dim handling shared by every reduction op, and the kernel stubs.
#pragma once

#include "autograd/node.h"
#include "core/dispatch.h"
#include "ignis/ops.h"

namespace ignis {

/// The reduced dims of x as a bit mask, and the output shape (with or without keepdim). An empty
/// dims list means every dim.
struct ReducePlan {
  uint64_t mask = 0;          // bit d set: dim d of x is reduced
  Shape out_shape;            // with keepdim applied
  Shape keep_shape;           // out shape with reduced dims kept as 1 (for broadcasting back)
  int64_t reduced_numel = 1;  // elements folded into each output
  bool is_reduced(int64_t d) const { return (mask >> d) & 1u; }
  /// The reduced dims, ascending (for the sums of backward formulas).
  Shape dims(int64_t ndim) const {
    Shape r;
    for (int64_t d = 0; d < ndim; ++d) {
      if (is_reduced(d)) r.push_back(d);
    }
    return r;
  }
};
ReducePlan make_reduce_plan(const Tensor& x, IntArrayRef dims, bool keepdim, const char* op);
/// The same for one optional dim (nullopt: every dim).
ReducePlan make_reduce_plan(const Tensor& x, std::optional<int64_t> dim, bool keepdim,
                            const char* op);
/// Throws "<op>: ... empty" when some output would fold zero elements (max, amax, argmax...).
void check_nonempty_reduction(const Tensor& x, const ReducePlan& plan, const char* op);

/// Saves a reduction's output for its backward before record() attaches its history, so that
/// unpack() returns it with that history and double backward flows through it. Call only when
/// the op records.
inline autograd::SavedVariable save_reduce_output(Tensor& out) {
  out.impl()->ensure_autograd().requires_grad = true;
  return autograd::SavedVariable(out, true);
}

/// The gradient of amax/amin/max()/min(): g split evenly among the elements of x equal to the
/// result `out` (a NaN result: among the NaN elements, which made it, as PyTorch's max() and
/// min()); `keep`: out's shape with the reduced `dims` of x kept as 1. Differentiable.
Tensor evenly_distribute(const Tensor& g, const Tensor& x, const Tensor& out, const Shape& keep,
                         const Shape& dims);

/// A reduction kernel: out (contiguous, shape plan.out_shape) = reduce(x) over plan's dims.
using ReduceFn = void (*)(const Tensor& out, const Tensor& x, const ReducePlan& plan);
IGNIS_DECLARE_STUB(sum_stub, ReduceFn);   // integer and bool x: out may be int64
IGNIS_DECLARE_STUB(mean_stub, ReduceFn);  // floating x
IGNIS_DECLARE_STUB(prod_stub, ReduceFn);
IGNIS_DECLARE_STUB(amax_stub, ReduceFn);
IGNIS_DECLARE_STUB(amin_stub, ReduceFn);
IGNIS_DECLARE_STUB(all_stub, ReduceFn);  // out is bool; x any dtype
IGNIS_DECLARE_STUB(any_stub, ReduceFn);
IGNIS_DECLARE_STUB(logsumexp_stub, ReduceFn);

/// out = sum(|x|^p)^(1/p) (p = 0: count of nonzeros; +-inf: max/min of |x|).
using NormFn = void (*)(const Tensor& out, const Tensor& x, const ReducePlan& plan, double p);
IGNIS_DECLARE_STUB(norm_stub, NormFn);

/// out = var(x) (two-pass), or its square root when take_sqrt; divides by n - correction.
using VarFn = void (*)(const Tensor& out, const Tensor& x, const ReducePlan& plan,
                       int64_t correction, bool take_sqrt);
IGNIS_DECLARE_STUB(var_stub, VarFn);

/// values/indices (contiguous, x's shape without `dim`) = max or min of x over `dim`: the first
/// occurrence wins, NaN beats every number. `values` may be undefined (argmax/argmin).
using MinMaxDimFn = void (*)(const Tensor& values, const Tensor& indices, const Tensor& x,
                             int64_t dim, bool is_max);
IGNIS_DECLARE_STUB(minmax_dim_stub, MinMaxDimFn);

/// out (contiguous, x's shape) = cumulative sum of x along dim, from the end when reverse.
using CumsumFn = void (*)(const Tensor& out, const Tensor& x, int64_t dim, bool reverse);
IGNIS_DECLARE_STUB(cumsum_stub, CumsumFn);

/// out (contiguous) = softmax(x) or log_softmax(x) along dim.
using SoftmaxFn = void (*)(const Tensor& out, const Tensor& x, int64_t dim, bool log);
IGNIS_DECLARE_STUB(softmax_stub, SoftmaxFn);
/// grad_in (contiguous) from the output y and its gradient g:
/// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
using SoftmaxBackwardFn = void (*)(const Tensor& grad_in, const Tensor& g, const Tensor& y,
                                   int64_t dim, bool log);
IGNIS_DECLARE_STUB(softmax_backward_stub, SoftmaxBackwardFn);

}  // namespace ignis
