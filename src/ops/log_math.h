// Sums in log space shared by the CPU and CUDA kernels (cpu/ and cuda/ ctc_kernels, the
// logcumsumexp scans of cpu/ and cuda/ sort_kernels): one definition, so both devices take the
// same branches for -inf and NaN.
#pragma once

#include <cmath>
#include <limits>

#include "ops/functors.h"  // IGNIS_HD, IGNIS_FN_INLINE

namespace ignis {

/// log(exp(a) + exp(b)), -inf when both are (std::max's NaN handling: (a < b) ? b : a).
template <class T>
IGNIS_HD IGNIS_FN_INLINE T log_add(T a, T b) {
  const T m = (a < b) ? b : a;
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return m + std::log(std::exp(a - m) + std::exp(b - m));
}

/// log(exp(a) + exp(b) + exp(c)), -inf when all three are.
template <class T>
IGNIS_HD IGNIS_FN_INLINE T log_add3(T a, T b, T c) {
  const T bc = (b < c) ? c : b;
  const T m = (a < bc) ? bc : a;
  if (m == -std::numeric_limits<T>::infinity()) return m;
  return m + std::log(std::exp(a - m) + std::exp(b - m) + std::exp(c - m));
}

/// log(exp(acc) + exp(v)) = max + log1p(exp(min - max)) (logcumsumexp's step); NaN propagates,
/// and when both are the same infinity (min - max would be NaN) the result is that infinity.
template <class A>
IGNIS_HD IGNIS_FN_INLINE A log_add_exp(A acc, A v) {
  if (std::isnan(v) || std::isnan(acc)) return std::numeric_limits<A>::quiet_NaN();
  const A lo = (v < acc) ? v : acc, hi = (acc < v) ? v : acc;  // std::min, std::max
  return (lo != hi || std::isfinite(lo)) ? hi + std::log1p(std::exp(lo - hi)) : acc;
}

}  // namespace ignis
