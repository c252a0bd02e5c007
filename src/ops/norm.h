// Batch-norm kernel stubs (defined in ops/norm.cpp, kernels per device in cpu/norm_kernels.cpp).
// Every kernel sees x as a contiguous [N, C, M] block (M = the product of the spatial dims);
// per-channel vectors are contiguous [C] tensors of the statistics dtype (float32 for bfloat16 x,
// x's dtype otherwise).
#pragma once

#include "core/dispatch.h"
#include "ignis/norm.h"

namespace ignis {

/// The dtype batch-norm statistics are kept in for x of dtype t.
inline DType norm_stat_dtype(DType t) { return t == kBFloat16 ? kFloat32 : t; }

/// Training forward: mean[c] and the biased variance var[c] of each channel, invstd[c] =
/// 1 / sqrt(var[c] + eps) (computed in the statistics dtype, as rsqrt(var + eps) would), and
/// y = (x - mean[c]) * invstd[c] * weight[c] + bias[c] (weight, bias optional).
using BatchNormTrainFn = void (*)(const Tensor& y, const Tensor& mean, const Tensor& var,
                                  const Tensor& invstd, const Tensor& x, const Tensor& weight,
                                  const Tensor& bias, double eps);
IGNIS_DECLARE_STUB(batch_norm_train_stub, BatchNormTrainFn);

/// y = x * scale[c] + shift[c] (y contiguous, x's shape).
using ChannelAffineFn = void (*)(const Tensor& y, const Tensor& x, const Tensor& scale,
                                 const Tensor& shift);
IGNIS_DECLARE_STUB(channel_affine_stub, ChannelAffineFn);

/// The fused backward of batch norm, with xhat = (x - mean[c]) * invstd[c], w = weight (1 when
/// undefined): grad_weight[c] = sum(g * xhat), grad_bias[c] = sum(g), and
/// grad_input = w * invstd * (g - grad_bias / n - xhat * grad_weight / n) when the statistics
/// came from the batch (training), w * invstd * g otherwise. Undefined outputs are not computed.
using BatchNormBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_weight,
                                     const Tensor& grad_bias, const Tensor& g, const Tensor& x,
                                     const Tensor& mean, const Tensor& invstd, const Tensor& weight,
                                     bool batch_stats);
IGNIS_DECLARE_STUB(batch_norm_backward_stub, BatchNormBackwardFn);

// batch_norm_relu, relu(batch_norm(x) + other) with other optional (x's shape and layout, seen
// as [N, C, M] the same way): the same kernels with the residual and the ReLU in the pass that
// writes y. CPU only; on other devices the op runs its composite.
using BatchNormReluTrainFn = void (*)(const Tensor& y, const Tensor& mean, const Tensor& var,
                                      const Tensor& invstd, const Tensor& x, const Tensor& weight,
                                      const Tensor& bias, double eps, const Tensor& other);
IGNIS_DECLARE_STUB(batch_norm_relu_train_stub, BatchNormReluTrainFn);

using ChannelAffineReluFn = void (*)(const Tensor& y, const Tensor& x, const Tensor& scale,
                                     const Tensor& shift, const Tensor& other);
IGNIS_DECLARE_STUB(channel_affine_relu_stub, ChannelAffineReluFn);

/// The backward with the ReLU's mask from the output y: the gradient reaching the normalisation
/// is g where y > 0, written to grad_other (the residual's gradient) when that is defined.
using BatchNormReluBackwardFn = void (*)(const Tensor& grad_input, const Tensor& grad_weight,
                                         const Tensor& grad_bias, const Tensor& grad_other,
                                         const Tensor& g, const Tensor& y, const Tensor& x,
                                         const Tensor& mean, const Tensor& invstd,
                                         const Tensor& weight, bool batch_stats);
IGNIS_DECLARE_STUB(batch_norm_relu_backward_stub, BatchNormReluBackwardFn);

}  // namespace ignis
