// The oneDNN convolution behind conv2d_add_relu and the graph executor's pre-packed
// convolutions (src/jit/fused_conv.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "ignis/tensor.h"
#include "jit/packed_weight.h"
#include "jit/pointwise.h"

namespace ignis::jit::detail {

/// A convolution weight reordered into the layout oneDNN's primitive wants (jit/packed_weight.h).
using PackedConvWeight = PackedWeight;

/// act(conv2d(x, w, b, ...)) + other? (act(conv2d(...) + other) with `add_first`) as one oneDNN
/// primitive (sum and eltwise post-ops), float32 (bfloat16 where the CPU has it natively) on the
/// CPU without autograd; an undefined tensor when the case is not one it handles (the caller then
/// runs the ops). `packed` (may be null) keeps the reordered weight between calls.
Tensor conv_forward_onednn(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                           IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                           int64_t groups, Activation act, bool add_first,
                           PackedConvWeight* packed);

}  // namespace ignis::jit::detail
