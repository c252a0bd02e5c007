// One element of the optimizers' fused steps, shared by the CPU kernels (optim/sgd.cpp,
// optim/adam.cpp, optim/rmsprop.cpp, optim/adagrad.cpp) and the CUDA multi-tensor kernels
// (cuda/optim_kernels.cu): the same arithmetic in the same order as the generic tensor-op path
// (PyTorch's), in the parameter's dtype.
#pragma once

#include <cmath>

#include "ops/functors.h"  // IGNIS_HD, IGNIS_FN_INLINE

namespace ignis::optim {

/// IEEE maximum that propagates NaN, like torch.maximum.
template <class T>
IGNIS_HD IGNIS_FN_INLINE T nan_max(T a, T b) {
  return (a != a || a > b) ? a : b;
}

/// SGD: g = sign * g (+ wd * p); with momentum b = g on the first step, else
/// b = mom * b + (1 - dampening) * g, and g = b (or g + mom * b with Nesterov); p += -lr * g.
template <class T, bool WD, bool MOM, bool NESTEROV, bool FIRST>
IGNIS_HD IGNIS_FN_INLINE void sgd_element(T& p, T g, T& b, T sign, T wd, T mom, T one_minus_damp,
                                          T neg_lr) {
  T gi = g * sign;  // -g == g * -1 exactly
  if constexpr (WD) gi = gi + wd * p;
  if constexpr (MOM) {
    T bi;
    if constexpr (FIRST) bi = gi;
    else bi = b * mom + one_minus_damp * gi;
    b = bi;
    if constexpr (NESTEROV) gi = gi + mom * bi;
    else gi = bi;
  }
  p = p + neg_lr * gi;
}

/// Scalars of one fused Adam step, in the parameter's dtype.
template <class T>
struct AdamScalars {
  T sign, wd, decay, w1, beta2, one_minus_beta2, neg_step_size, bc2, eps;
};

/// Adam / AdamW: m = lerp(m, g, 1 - beta1) (from the nearer end, as PyTorch), v = beta2 * v +
/// (1 - beta2) * g * g, p += -step_size * m / (sqrt(v or max v) / bc2 + eps).
template <class T, bool L2, bool DECOUPLED, bool AMSGRAD, bool SMALL_W1>
IGNIS_HD IGNIS_FN_INLINE void adam_element(T& p, T g, T& m, T& v, T* vmax,
                                           const AdamScalars<T>& c) {
  T gi = g * c.sign;
  T pi = p;
  if constexpr (L2) gi = gi + c.wd * pi;
  if constexpr (DECOUPLED) pi = pi * c.decay;
  T mi;
  if constexpr (SMALL_W1) mi = m + c.w1 * (gi - m);
  else mi = gi - (gi - m) * (T(1) - c.w1);
  T vi = v * c.beta2 + c.one_minus_beta2 * gi * gi;
  m = mi;
  v = vi;
  if constexpr (AMSGRAD) {
    vi = nan_max(*vmax, vi);
    *vmax = vi;
  }
  const T denom = std::sqrt(vi) / c.bc2 + c.eps;
  p = pi + c.neg_step_size * mi / denom;
}

/// Scalars of one fused RMSprop step, in the parameter's dtype.
template <class T>
struct RMSpropScalars {
  T sign, wd, alpha, one_minus_alpha, eps, mom, neg_lr;
};

/// RMSprop: s = alpha * s + (1 - alpha) * g * g; centered: ga = lerp(ga, g, 1 - alpha) (from
/// the nearer end, as PyTorch) and avg = sqrt(s - ga * ga) + eps, else avg = sqrt(s) + eps;
/// with momentum b = mom * b + g / avg and p += -lr * b, else p += -lr * g / avg. `ga` and `buf`
/// are only used with CENTERED / MOM (they may be null otherwise).
template <class T, bool WD, bool CENTERED, bool MOM, bool SMALL_W>
IGNIS_HD IGNIS_FN_INLINE void rmsprop_element(T& p, T g, T& sq, T* ga, T* buf,
                                              const RMSpropScalars<T>& c) {
  T gi = g * c.sign;
  if constexpr (WD) gi = gi + c.wd * p;
  const T si = sq * c.alpha + c.one_minus_alpha * gi * gi;
  sq = si;
  T avg;
  if constexpr (CENTERED) {
    T gai;
    if constexpr (SMALL_W) gai = *ga + c.one_minus_alpha * (gi - *ga);
    else gai = gi - (gi - *ga) * (T(1) - c.one_minus_alpha);
    *ga = gai;
    avg = std::sqrt(si + T(-1) * gai * gai);
  } else {
    avg = std::sqrt(si);
  }
  avg = avg + c.eps;
  if constexpr (MOM) {
    const T bi = *buf * c.mom + gi / avg;
    *buf = bi;
    p = p + c.neg_lr * bi;
  } else {
    p = p + c.neg_lr * gi / avg;
  }
}

/// Adagrad: sum += g * g, p += -clr * g / (sqrt(sum) + eps), clr = lr / (1 + (step - 1) *
/// lr_decay) being the tensor's decayed learning rate.
template <class T, bool WD>
IGNIS_HD IGNIS_FN_INLINE void adagrad_element(T& p, T g, T& sum, T sign, T wd, T eps,
                                              T neg_clr) {
  T gi = g * sign;
  if constexpr (WD) gi = gi + wd * p;
  const T si = sum + T(1) * gi * gi;  // addcmul_(g, g, value=1)
  sum = si;
  p = p + neg_clr * gi / (std::sqrt(si) + eps);
}

}  // namespace ignis::optim
