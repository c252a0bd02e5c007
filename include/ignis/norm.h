// Normalisation, channel dropout and interpolation for NCHW tensors (torch.nn.functional's
// batch_norm, group_norm, local_response_norm, dropout2d, interpolate).
#pragma once

#include <cstdint>
#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis {

/// Normalises each channel (dim 1) of x [N, C, *] over the batch and spatial dims, then scales and
/// shifts by weight and bias ([C], either may be undefined).
/// training: batch statistics; when running_mean/running_var ([C]) are defined they are updated
/// in place, r = (1 - momentum) * r + momentum * batch_stat, with the unbiased variance.
/// Otherwise (eval) the running statistics are used, and must be defined.
Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps);

/// relu(batch_norm(x, ...) + other), other (x's shape) optional: the normalisation, the residual
/// and the ReLU in one pass over memory on the CPU (graph mode's fuse_ops makes it from
/// batch_norm -> relu and batch_norm -> add -> relu; other devices run the three ops).
Tensor batch_norm_relu(const Tensor& x, const Tensor& other, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       bool training, double momentum, double eps);

/// Normalises x [N, C, *] over groups of C / num_groups channels (and the spatial dims), then
/// applies the per-channel weight and bias ([C], optional).
Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight = {},
                  const Tensor& bias = {}, double eps = 1e-5);

/// AlexNet's normalisation across channels of x [N, C, *]:
///   b_c = a_c / (k + alpha / size * sum of a_j^2 over the `size` channels around c)^beta,
/// the window zero padded at the ends (channels c - size/2 .. c + (size-1)/2).
Tensor local_response_norm(const Tensor& x, int64_t size, double alpha = 1e-4, double beta = 0.75,
                           double k = 1.0);

/// Zeroes whole channels of x [N, C, H, W] (or [N, C, L]) with probability p while training and
/// scales the kept ones by 1 / (1 - p). Draws from the default generator (manual_seed).
Tensor dropout2d(const Tensor& x, double p = 0.5, bool training = true);

/// Resizes the spatial dims of x to `size` (one value: every spatial dim).
/// mode "nearest" (x [N, C, L] or [N, C, H, W]; source index floor(dst * in / out)),
/// "nearest-exact" (source index floor((dst + 0.5) * in / out), as PIL), "area" (adaptive average
/// pooling; [N, C, L] or [N, C, H, W]), "bilinear" or "bicubic" (x [N, C, H, W]; cubic
/// convolution with A = -0.75, borders clamped); align_corners only for bilinear and bicubic
/// (default false), with PyTorch's coordinate rules.
Tensor interpolate(const Tensor& x, IntArrayRef size, const std::string& mode = "nearest",
                   std::optional<bool> align_corners = {});
/// The same with the output size floor(in * scale_factor); the source coordinates use
/// 1 / scale_factor, as PyTorch does without recompute_scale_factor.
Tensor interpolate(const Tensor& x, std::vector<double> scale_factor,
                   const std::string& mode = "nearest", std::optional<bool> align_corners = {});
// Brace lists pick the form by their element type: interpolate(x, {8, 8}) is a size,
// interpolate(x, {2.0, 2.0}) a scale factor.
inline Tensor interpolate(const Tensor& x, std::initializer_list<int> size,
                          const std::string& mode = "nearest",
                          std::optional<bool> align_corners = {}) {
  const std::vector<int64_t> s(size.begin(), size.end());
  return interpolate(x, IntArrayRef(s), mode, align_corners);
}
inline Tensor interpolate(const Tensor& x, std::initializer_list<int64_t> size,
                          const std::string& mode = "nearest",
                          std::optional<bool> align_corners = {}) {
  return interpolate(x, IntArrayRef(size), mode, align_corners);
}
inline Tensor interpolate(const Tensor& x, std::initializer_list<double> scale_factor,
                          const std::string& mode = "nearest",
                          std::optional<bool> align_corners = {}) {
  return interpolate(x, std::vector<double>(scale_factor), mode, align_corners);
}

}  // namespace ignis
