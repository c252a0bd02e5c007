// The per-row math of fused_reduction's normalisations on the CPU, forward (y of a row of x)
// and backward (the row's gradient of x given y's), shared by the interpreter's forward
// (fused_reduction.cpp) and the training backward (fused_reduction_backward.cpp). The sums run
// in 32 lanes folded as a fixed tree (row_reduce.h), so the compiler vectorises them: a plain
// `dot += a[c] * b[c]` loop is one dependent add per element.
#pragma once

#include <cmath>
#include <cstdint>
#include <limits>
#include <string>

#include "jit/row_reduce.h"
#include "ops/functors.h"

namespace ignis::jit::detail {

IGNIS_JIT_ROW_REDUCE_CODE

enum class RowKind { layer_norm, rms_norm, softmax, log_softmax };

inline RowKind row_kind(const std::string& reduction) {
  return reduction == "layer_norm" ? RowKind::layer_norm
         : reduction == "rms_norm" ? RowKind::rms_norm
         : reduction == "softmax"  ? RowKind::softmax
                                   : RowKind::log_softmax;
}

/// The sum of a[c] b[c] over a row, in 32 lanes.
template <class T>
T row_dot(const T* __restrict a, const T* __restrict b, int64_t n) {
  T acc[32] = {};
  int64_t i = 0;
  for (; i + 32 <= n; i += 32)
    for (int j = 0; j < 32; ++j) acc[j] += a[i + j] * b[i + j];
  for (; i < n; ++i) acc[0] += a[i] * b[i];
  return ignis_fold_lanes<32>(acc, [](auto u, auto v) { return u + v; });
}

/// Adds a block's `len` values v (whole rows of `cols` for 'r' and 'c') to their sums at `part`:
/// 'r' over the rows (a row of cols), 'c' along each row (a value per row), 's' all of them (one
/// value). Blocks fixed by the row length, their partial sums added in block order, give the
/// same sums on any number of threads.
template <class T>
void add_block_sums(char how, const T* __restrict v, int64_t len, int64_t cols,
                    T* __restrict part) {
  if (how == 'r') {
    for (int64_t k = 0; k < len; k += cols) {
      const T* __restrict row = v + k;
      for (int64_t c = 0; c < cols; ++c) part[c] += row[c];
    }
  } else if (how == 'c') {
    for (int64_t k = 0; k < len; k += cols) part[k / cols] += ignis_row_sum(v + k, cols);
  } else {
    part[0] += ignis_row_sum(v, len);
  }
}

/// y = the row x of C elements normalised (layer_norm, rms_norm without the affine part) or
/// soft-maxed; y may not alias x.
template <class T>
void normalize_row(RowKind kind, const T* __restrict x, T* __restrict y, int64_t C, T eps) {
  if (kind == RowKind::layer_norm) {
    T mean, rstd;
    ignis_layer_norm_stats(x, C, eps, mean, rstd);
    for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - mean) * rstd;
  } else if (kind == RowKind::rms_norm) {
    const T rstd = fn::Rsqrt{}(ignis_row_sq_dev(x, C, T(0)) / static_cast<T>(C) + eps);
    for (int64_t c = 0; c < C; ++c) y[c] = x[c] * rstd;
  } else {
    const T m = ignis_row_max(x, C);
    const T sum = ignis_row_exp_sum(x, y, C, m);
    if (kind == RowKind::softmax) {
      const T inv = T(1) / sum;
      for (int64_t c = 0; c < C; ++c) y[c] = y[c] * inv;
    } else {
      const T ls = std::log(sum);
      for (int64_t c = 0; c < C; ++c) y[c] = (x[c] - m) - ls;
    }
  }
}

/// gx = the gradient of the row x given y = normalize_row(x) and its gradient gy: softmax
/// y (gy - sum(gy y)); log_softmax gy - exp(y) sum(gy); layer_norm rstd (gy - mean(gy) -
/// y mean(gy y)); rms_norm rstd (gy - y mean(gy y)). gx may alias gy.
template <class T>
void reduce_backward_row(RowKind kind, const T* x, const T* y, const T* gy, T* gx, int64_t C,
                         T eps) {
  if (kind == RowKind::log_softmax) {
    const T sum = ignis_row_sum(gy, C);
    for (int64_t c = 0; c < C; ++c) gx[c] = gy[c] - fn::Exp{}(y[c]) * sum;
    return;
  }
  const T dot = row_dot(gy, y, C);
  if (kind == RowKind::softmax) {
    for (int64_t c = 0; c < C; ++c) gx[c] = y[c] * (gy[c] - dot);
    return;
  }
  T rstd, mean_gy = 0;
  if (kind == RowKind::layer_norm) {
    T mean;
    ignis_layer_norm_stats(x, C, eps, mean, rstd);
    mean_gy = ignis_row_sum(gy, C) / static_cast<T>(C);
  } else {
    rstd = fn::Rsqrt{}(ignis_row_sq_dev(x, C, T(0)) / static_cast<T>(C) + eps);
  }
  const T mean_gyy = dot / static_cast<T>(C);
  for (int64_t c = 0; c < C; ++c) gx[c] = rstd * (gy[c] - mean_gy - y[c] * mean_gyy);
}

}  // namespace ignis::jit::detail
