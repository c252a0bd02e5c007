// Convolution and pooling (torch.nn.functional.conv2d, max_pool2d, ...), NCHW, PyTorch semantics. A
// one-element IntArrayRef (stride, padding, dilation, kernel) applies to both spatial dims. Inputs
// may also be unbatched ([C, H, W] / [C, L]).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <tuple>
#include <utility>

#include "ignis/tensor.h"

namespace ignis {

// ---- convolution

/// A padding given by name ("same" or "valid"). Its own type rather than std::string, so that
/// a braced padding such as conv2d(x, w, b, {1, 1}, {2, 2}) means integers (a std::string
/// overload would make that call ambiguous: std::string has an initializer_list<char> ctor).
struct PaddingMode {
  PaddingMode(const char* v) : value(v ? v : "") {}  // NOLINT: implicit, like a string
  PaddingMode(std::string v) : value(std::move(v)) {}  // NOLINT
  std::string value;
};

/// y[n, o] = b[o] + sum over the group's input channels c of (w[o, c] cross-correlated with x[n,
/// c]). x [N, C, H, W], w [O, C / groups, kh, kw], b [O] or undefined.
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntArrayRef stride = {1},
              IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1);
/// (An integer padding: so that a literal 0 means no padding, not a null padding string.)
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              int64_t padding, IntArrayRef dilation = {1}, int64_t groups = 1);
/// padding "valid" (none) or "same" (output size = input size; stride 1 only; an even dilated
/// kernel pads one more element after than before, like PyTorch).
Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              const PaddingMode& padding, IntArrayRef dilation = {1}, int64_t groups = 1);
/// x [N, C, L], w [O, C / groups, k].
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntArrayRef stride = {1},
              IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              int64_t padding, IntArrayRef dilation = {1}, int64_t groups = 1);
Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              const PaddingMode& padding, IntArrayRef dilation = {1}, int64_t groups = 1);
/// The transposed convolution (the input gradient of conv2d): x [N, Cin, H, W], w [Cin, Cout /
/// groups, kh, kw], output [N, Cout, Ho, Wo] with Ho = (H - 1) * stride - 2 * padding + dilation *
/// (kh - 1) + output_padding + 1.
Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b = {},
                        IntArrayRef stride = {1}, IntArrayRef padding = {0},
                        IntArrayRef output_padding = {0}, int64_t groups = 1,
                        IntArrayRef dilation = {1});
/// relu(conv2d(...)) as one op: one convolution with the bias and the relu fused in (a oneDNN
/// post-op), and with autograd one node (Conv2dReluBackward0) that masks the incoming gradient
/// with its saved output before the convolution's backward.
Tensor conv2d_relu(const Tensor& x, const Tensor& w, const Tensor& b = {}, IntArrayRef stride = {1},
                   IntArrayRef padding = {0}, IntArrayRef dilation = {1}, int64_t groups = 1);
/// relu(conv2d(x, w, b, ...) + other), the end of a residual block (what graph mode's fuse_ops
/// makes of conv2d -> add -> relu). Without autograd, float32 with `other` of the output's shape
/// runs as one oneDNN convolution with a sum and a relu post-op; otherwise it is the composite.
Tensor conv2d_add_relu(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                       IntArrayRef stride = {1}, IntArrayRef padding = {0},
                       IntArrayRef dilation = {1}, int64_t groups = 1);

// ---- pooling (x [N, C, H, W] or [C, H, W]; an empty stride means stride =
// kernel)

/// Output size per dim: floor-or-ceil((H + 2p - d (k - 1) - 1) / s) + 1, where with ceil_mode a
/// last window that would start inside the right padding is dropped (as PyTorch).
Tensor max_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, IntArrayRef dilation = {1}, bool ceil_mode = false);
/// Values and the int64 indices of the maxima, flat within each H x W plane (h
/// * W + w).
std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride = {},
                                                   IntArrayRef padding = {0},
                                                   IntArrayRef dilation = {1},
                                                   bool ceil_mode = false);
/// count_include_pad: divide by the window size including zero padding (else only the elements
/// inside the input); divisor_override: divide every window's sum by this number instead.
Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride = {},
                  IntArrayRef padding = {0}, bool ceil_mode = false, bool count_include_pad = true,
                  std::optional<int64_t> divisor_override = std::nullopt);
/// Windows [floor(i H / Ho), ceil((i + 1) H / Ho)) per output position.
Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size);
Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size);
std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x,
                                                            IntArrayRef output_size);

}  // namespace ignis
