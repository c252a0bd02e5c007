// The oneDNN matmul behind linear_pointwise and the graph executor's pre-packed linear weights
// (src/jit/fused_linear.cpp).
#pragma once

#include <cstdint>
#include <string>

#include "ignis/tensor.h"
#include "jit/packed_weight.h"

namespace ignis::jit::detail {

/// A linear weight reordered into the blocked layout oneDNN's matmul primitive picks
/// (jit/packed_weight.h).
using PackedLinearWeight = PackedWeight;

/// activation(x w^T + b) + other (activation(x w^T + b + other) with `add_first`) as one oneDNN
/// matmul with post-ops, float32 (bfloat16 where the CPU has it natively) on the CPU without
/// autograd, 8 rows or more; an undefined tensor when the case is not one it handles (the caller
/// then runs the ops). With `packed` (may be null) the primitive picks its weight layout and the
/// reordered weight is kept between calls.
Tensor linear_pointwise_onednn(const Tensor& x, const Tensor& w, const Tensor& b,
                               const Tensor& other, const std::string& activation, bool add_first,
                               PackedLinearWeight* packed);

}  // namespace ignis::jit::detail
