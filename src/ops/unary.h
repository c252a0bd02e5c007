// Stubs of the unary, activation and comparison ops (front ends in ops/unary.cpp,
// ops/activation.cpp, ops/compare.cpp; CPU kernels in cpu/unary_*.cpp, cpu/compare_kernels.cpp),
// and the fused activation backward ops, which are differentiable ops themselves.
#pragma once

#include "autograd/node.h"
#include "ops/elementwise.h"

/// Defines the stub `name##_stub` whose errors name the op as `name`.
#define IGNIS_DEFINE_OP_STUB(name) constinit ::ignis::DispatchStub<::ignis::ElementwiseFn> name##_stub(#name)

namespace ignis {

// ---- unary math (compute dtype: the input's, or to_floating of it)
// The floating unary ops of ignis/float_unary_ops.def (front ends in ops/float_unary.cpp).
#define IGNIS_FLOAT_UNARY_OP(name, ...) IGNIS_DECLARE_STUB(name##_stub, ElementwiseFn);
#include "ignis/float_unary_ops.def"
IGNIS_DECLARE_STUB(neg_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(abs_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(sign_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(floor_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(ceil_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(round_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(trunc_stub, ElementwiseFn);
/// x ^ e with both tensors.
IGNIS_DECLARE_STUB(pow_stub, ElementwiseFn);
/// x ^ args.a (the kernel picks x*x, sqrt, 1/x, ... for common exponents).
IGNIS_DECLARE_STUB(pow_scalar_stub, ElementwiseFn);
/// clamp to [args.a, args.b]; clamp_min / clamp_max to args.a.
IGNIS_DECLARE_STUB(clamp_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(clamp_min_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(clamp_max_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(maximum_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(minimum_stub, ElementwiseFn);

// ---- activations and their fused backward kernels (g, saved) -> input grad
IGNIS_DECLARE_STUB(relu_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(leaky_relu_stub, ElementwiseFn);  // args.a: slope
IGNIS_DECLARE_STUB(gelu_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(gelu_tanh_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(silu_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(softplus_stub, ElementwiseFn);  // args.a: beta, args.b: threshold
IGNIS_DECLARE_STUB(threshold_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(tanh_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(sigmoid_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(leaky_relu_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(gelu_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(gelu_tanh_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(silu_backward_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(softplus_backward_stub, ElementwiseFn);

// ---- comparisons and logic: bool output, compute dtype the promoted input dtype
IGNIS_DECLARE_STUB(eq_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(ne_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(lt_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(le_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(gt_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(ge_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(logical_and_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(logical_or_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(logical_not_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(isnan_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(isinf_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(isfinite_stub, ElementwiseFn);
/// out = cond ? a : b over (bool cond, a, b), compute dtype that of a and b.
IGNIS_DECLARE_STUB(where_stub, ElementwiseFn);

// ---- backward ops of the activations (PyTorch's *_backward): grad of the input from the output
// grad `g` and the saved output `y` or input `x`. Differentiable, for double backward.
Tensor threshold_backward(const Tensor& g, const Tensor& y, double threshold);
Tensor tanh_backward(const Tensor& g, const Tensor& y);
Tensor sigmoid_backward(const Tensor& g, const Tensor& y);
Tensor leaky_relu_backward(const Tensor& g, const Tensor& x, double negative_slope);
Tensor gelu_backward(const Tensor& g, const Tensor& x, bool tanh_approx);
Tensor silu_backward(const Tensor& g, const Tensor& x);
Tensor softplus_backward(const Tensor& g, const Tensor& x, double beta, double threshold);
/// clamp's gradient: g where min <= x <= max (bounds included; None: no bound), else 0, in ops
/// (differentiable again). Eager clamp and graph mode's fused clamp_backward both use it.
Tensor clamp_backward(const Tensor& g, const Tensor& x, std::optional<Scalar> min,
                      std::optional<Scalar> max);

/// Saves an op's output for its backward before record() attaches the output's history (so that
/// unpack() gives it back with that history, and double backward flows through it). Call only
/// when the op records.
inline autograd::SavedVariable save_output(Tensor& out) {
  out.impl()->ensure_autograd().requires_grad = true;
  return autograd::SavedVariable(out, true);
}

/// The backward of a relu fused into the op before it (conv2d_relu, linear_relu): the incoming
/// gradient g[0] masked by the saved relu output `out`. Frees g[0] (the node owns its gradients)
/// and, unless the graph is retained, the saved output: what a separate relu node would have
/// freed before the op's own backward runs.
inline Tensor fused_relu_grad(const autograd::BackwardCtx& c, TensorList& g,
                              autograd::SavedVariable& out) {
  Tensor gy = threshold_backward(g[0], c.unpack(out), 0);
  g[0] = Tensor();
  c.release(out);
  return gy;
}

/// The floating op `stub` on x: integer and bool inputs promote to float32.
inline Tensor floating_unary(const DispatchStub<ElementwiseFn>& stub, const Tensor& x,
                             OpArgs args = {}) {
  const DType t = to_floating(x.dtype());
  return unary_op(stub, x, t, t, args);
}

/// An in-place unary op: the kernel writes into self when no autograd is involved; otherwise
/// self takes the values and history of the out-of-place op `f`, run on a clone of self when the
/// op saves its input (the in-place write would invalidate it).
template <class F>
Tensor& inplace_unary(Tensor& self, const DispatchStub<ElementwiseFn>& stub, DType compute,
                      OpArgs args, const char* op, bool saves_input, F f) {
  if (autograd::any_needs_grad({&self})) {
    check_inplace(self, op);
    return inplace_from(self, f(saves_input ? self.clone() : self), op);
  }
  inplace_op(stub, self, Tensor(), compute, args);
  return self;
}

}  // namespace ignis
