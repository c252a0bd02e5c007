// The nn ops beyond conv.h and norm.h, with PyTorch's semantics and argument order
// (torch.nn.functional's conv3d, conv_transpose1d, max/avg_pool1d and 3d, instance_norm, normalize,
// cosine_similarity, pairwise_distance, pixel_shuffle, unfold / fold, embedding's max_norm).
// A one-element IntArrayRef (kernel, stride, padding, dilation) applies to every spatial dim; an
// empty pooling stride means stride = kernel. Inputs may be unbatched (no leading N).
#pragma once

#include <cstdint>
#include <optional>
#include <tuple>

#include "ignis/tensor.h"

namespace ignis {

// ---- convolution

/// x [N, C, D, H, W], w [O, C / groups, kd, kh, kw], b [O] or undefined. Runs as one oneDNN 2-d
/// convolution: the kd depth taps become input channels, the output depths fold into the batch.
Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntArrayRef stride = {1},
              IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1);
/// The transposed 1-d convolution: x [N, Cin, L], w [Cin, Cout / groups, k], output length
/// (L - 1) * stride - 2 * padding + dilation * (k - 1) + output_padding + 1 (conv_transpose2d
/// with a unit height).
Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b = {},
                        IntArrayRef stride = {1}, IntArrayRef padding = {0},
                        IntArrayRef output_padding = {0}, int64_t groups = 1,
                        IntArrayRef dilation = {1});

// ---- pooling ([N, C, L] / [N, C, D, H, W], or unbatched)

Tensor max_pool1d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, IntArrayRef dilation = {1}, bool ceil_mode = false);
/// Values and int64 indices of the maxima along L.
std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride = {},
                                                   IntArrayRef padding = {0},
                                                   IntArrayRef dilation = {1},
                                                   bool ceil_mode = false);
Tensor max_pool3d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, IntArrayRef dilation = {1}, bool ceil_mode = false);
/// Values and int64 indices of the maxima, flat within each D x H x W volume ((d H + h) W + w).
std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride = {},
                                                   IntArrayRef padding = {0},
                                                   IntArrayRef dilation = {1},
                                                   bool ceil_mode = false);
Tensor avg_pool1d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, bool ceil_mode = false, bool count_include_pad = true);
/// divisor_override: divide every window's sum by this number instead of the window size.
Tensor avg_pool3d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);

// ---- normalisation and distances

/// Normalises each (n, c) instance of x [N, C, *] over its spatial dims, then applies the
/// per-channel weight and bias ([C], optional). use_input_stats: the instance statistics (and,
/// when running_mean / running_var [C] are defined, updates them in place with the batch average
/// of the instance means and unbiased variances); otherwise normalises with the running ones.
Tensor instance_norm(const Tensor& x, const Tensor& running_mean = {},
                     const Tensor& running_var = {}, const Tensor& weight = {},
                     const Tensor& bias = {}, bool use_input_stats = true, double momentum = 0.1,
                     double eps = 1e-5);
/// x / max(||x||_p along dim, eps) (a zero vector stays zero).
Tensor normalize(const Tensor& x, double p = 2, int64_t dim = 1, double eps = 1e-12);
/// sum(x1 * x2, dim) / (max(||x1||, eps) * max(||x2||, eps)), x1 and x2 broadcast together
/// (PyTorch 1.13's formula: each operand divided by its clamped norm).
Tensor cosine_similarity(const Tensor& x1, const Tensor& x2, int64_t dim = 1, double eps = 1e-8);
/// ||x1 - x2 + eps||_p along the last dim (x1, x2 broadcast together).
Tensor pairwise_distance(const Tensor& x1, const Tensor& x2, double p = 2, double eps = 1e-6,
                         bool keepdim = false);

// ---- rearrangement

/// [*, C r^2, H, W] -> [*, C, H r, W r].
Tensor pixel_shuffle(const Tensor& x, int64_t upscale_factor);
/// [*, C, H r, W r] -> [*, C r^2, H, W].
Tensor pixel_unshuffle(const Tensor& x, int64_t downscale_factor);
/// F.unfold: the sliding kernel_size blocks of x [N, C, H, W] (or [C, H, W]) as columns,
/// [N, C kh kw, L] with L the number of block positions (rows of C, then kh, then kw).
Tensor im2col(const Tensor& x, IntArrayRef kernel_size, IntArrayRef dilation = {1},
              IntArrayRef padding = {0}, IntArrayRef stride = {1});
/// F.fold, the transpose of im2col: sums the columns of x [N, C kh kw, L] (or [C kh kw, L]) into
/// [N, C, output_size] (overlapping blocks add up).
Tensor col2im(const Tensor& x, IntArrayRef output_size, IntArrayRef kernel_size,
              IntArrayRef dilation = {1}, IntArrayRef padding = {0}, IntArrayRef stride = {1});

// ---- embedding

/// In place and without autograd, as PyTorch: scales each row of weight [num, dim] picked by
/// `indices` (each row once) whose norm_type-norm exceeds max_norm by max_norm / (norm + 1e-7).
/// Returns weight.
Tensor embedding_renorm_(const Tensor& weight, const Tensor& indices, double max_norm,
                         double norm_type = 2);

}  // namespace ignis
