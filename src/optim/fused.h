// Helpers for the optimizers' fused single-pass CPU kernels (float32/float64, contiguous).
// Each optimizer has one kernel that reads the parameter, gradient and state once and writes
// them once, replacing the 4-8 tensor ops (and temporaries) of the generic path. The arithmetic
// follows the same order as the generic tensor-op path (PyTorch's), in the parameter's dtype.
#pragma once

#include <type_traits>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/tensor.h"
#include "optim/fused_math.h"

namespace ignis::optim {

/// The fused kernels apply: p and g are CPU float32/float64 tensors of one dtype and shape,
/// both contiguous. (State tensors are created contiguous by the optimizers.)
inline bool fused_ok(const Tensor& p, const Tensor& g) {
  return p.device().is_cpu() && (p.dtype() == kFloat32 || p.dtype() == kFloat64) &&
         g.device().is_cpu() && g.dtype() == p.dtype() && p.is_contiguous() &&
         g.is_contiguous() && g.sizes().equals(p.sizes());
}

/// The CUDA multi-tensor kernels apply: p and g contiguous float32, float64 or bfloat16 tensors
/// (bfloat16 computed in float32, rounded once per step) of one dtype, shape and GPU.
inline bool fused_cuda_ok(const Tensor& p, const Tensor& g) {
  return p.device().is_cuda() &&
         (p.dtype() == kFloat32 || p.dtype() == kFloat64 || p.dtype() == kBFloat16) &&
         g.device() == p.device() && g.dtype() == p.dtype() && p.is_contiguous() &&
         g.is_contiguous() && g.sizes().equals(p.sizes());
}
/// A state tensor is usable by the CUDA kernels (contiguous, p's dtype and device).
inline bool fused_cuda_state_ok(const Tensor& p, const Tensor& s) {
  return !s.defined() || (s.is_contiguous() && s.dtype() == p.dtype() && s.device() == p.device());
}

/// A state tensor is usable by the fused kernel (contiguous, same dtype as p).
inline bool fused_state_ok(const Tensor& p, const Tensor& s) {
  return !s.defined() || (s.is_contiguous() && s.dtype() == p.dtype() && s.device().is_cpu());
}

/// Calls f(std::true_type{}) or f(std::false_type{}): turns a runtime flag into a compile-time
/// one, so each kernel variant's inner loop has no branches and vectorises.
template <class F>
inline void with_flag(bool b, F&& f) {
  if (b) f(std::true_type{});
  else f(std::false_type{});
}

/// Runs body(begin, end) over [0, n) on the thread pool for large tensors.
template <class F>
inline void fused_for(int64_t n, const F& body) {
  parallel_for(0, n, kGrainSize, body);
}

/// Marks tensors written through raw pointers as modified (autograd's version check).
inline void bump(const Tensor& t) {
  if (t.defined()) t.impl()->bump_version();
}


/// self = lerp(self, end, w) with tensor ops (the generic path), from the nearer end as
/// PyTorch computes it, so weights 0 and 1 give an end exactly.
inline void lerp_(Tensor& self, const Tensor& end, double w) {
  if (w < 0.5 && w > -0.5) {
    self.add_(end.sub(self), w);
  } else {
    self.copy_(end.sub(end.sub(self).mul_(1 - w)));
  }
}

}  // namespace ignis::optim
