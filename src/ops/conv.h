// Convolution kernel stubs and the resolved parameters every conv kernel gets
// (private). All kernels work in 2-D NCHW: conv1d runs as conv2d with a unit
// height.
#pragma once

#include <array>
#include <cstdint>

#include "core/dispatch.h"
#include "ignis/tensor.h"

namespace ignis {

/// A convolution's geometry, resolved: per spatial dim (0 = height, 1 = width)
/// the stride, the padding before and after (asymmetric for "same" with even
/// kernels) and the dilation.
struct ConvParams {
  int64_t stride[2] = {1, 1};
  int64_t pad_l[2] = {0, 0};
  int64_t pad_r[2] = {0, 0};
  int64_t dilation[2] = {1, 1};
  int64_t groups = 1;
};

/// out [N, O, Ho, Wo] = conv(x [N, C, H, W], w [O, C/g, kh, kw]) (+ b [O])
/// (then relu when `relu`). All contiguous and of one floating dtype; b may be
/// undefined.
using ConvFwdFn = void (*)(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                           const ConvParams& p, bool relu);
/// grad_x [N, C, H, W] = the input gradient of conv given grad_y [N, O, Ho, Wo]
/// and w.
using ConvBwdDataFn = void (*)(const Tensor& grad_x, const Tensor& grad_y, const Tensor& w,
                               const ConvParams& p);
/// grad_w [O, C/g, kh, kw] = the weight gradient of conv given x and grad_y.
using ConvBwdWeightFn = void (*)(const Tensor& grad_w, const Tensor& x, const Tensor& grad_y,
                                 const ConvParams& p);

IGNIS_DECLARE_STUB(conv2d_stub, ConvFwdFn);
IGNIS_DECLARE_STUB(conv2d_input_grad_stub, ConvBwdDataFn);
IGNIS_DECLARE_STUB(conv2d_weight_grad_stub, ConvBwdWeightFn);

/// Counters of the CPU backend's cache of oneDNN primitives (created once per
/// shape).
struct ConvCacheStats {
  int64_t hits = 0, misses = 0, size = 0;
};
ConvCacheStats conv_primitive_cache_stats();
void conv_primitive_cache_clear();

}  // namespace ignis

namespace ignis {

// ---- the differentiable ops behind conv2d / conv1d / conv_transpose2d (4-d
// NCHW operands)

/// conv2d on 4-d x and w with resolved params; relu fuses a relu (only without
/// autograd).
Tensor conv2d_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p,
                 bool relu = false);
/// The gradient of conv2d_op(x, w) w.r.t. x of shape input_size, given the
/// output gradient gy.
Tensor conv2d_input_grad(const Tensor& gy, const Tensor& w, IntArrayRef input_size,
                         const ConvParams& p);
/// The gradient of conv2d_op(x, w) w.r.t. w of shape weight_size, given gy.
Tensor conv2d_weight_grad(const Tensor& x, const Tensor& gy, IntArrayRef weight_size,
                          const ConvParams& p);
/// Output size along spatial dim d (0 = height) for input size `in` and kernel
/// size k.
int64_t conv_out_size(int64_t in, int64_t k, const ConvParams& p, int d);
/// A per-dim argument (stride, padding, ...) of 1 or nd values as {height, width}; when
/// nd == 1 the height is `unit` (the value that leaves a unit height alone: 1, or 0 for padding).
/// Throws naming the op and `what` otherwise.
std::array<int64_t, 2> conv_pair(IntArrayRef v, int64_t nd, const char* op, const char* what,
                                 int64_t unit = 1);

}  // namespace ignis
