// CTC loss kernel stubs (defined in ops/ctc_loss.cpp, CPU kernels in cpu/ctc_kernels.cpp).
#pragma once

#include <cstdint>
#include <tuple>
#include <vector>

#include "core/dispatch.h"
#include "ignis/tensor.h"

namespace ignis {

/// The checked geometry of a CTC batch: labels of sequence b are targets[offset[b] + i] for
/// i < target_lengths[b] (targets contiguous int64, padded rows or concatenated sequences).
struct CtcArgs {
  Tensor targets;
  std::vector<int64_t> offsets, input_lengths, target_lengths;
  int64_t blank = 0;
  int64_t max_target_length = 0;  // log_alpha holds 2 * max_target_length + 1 states per step
};

/// nll [N] = -log p(target_b | log_probs[:, b]), log_alpha [N, T, 2S + 1] the forward variables
/// (log space, -inf where unreachable). log_probs [T, N, C] of any strides.
using CtcLossFn = void (*)(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                           const CtcArgs& a);
/// grad [T, N, C] (contiguous) of sum_b grad_out[b] nll[b] with respect to log_probs, by the
/// backward (beta) recursion, in PyTorch's form: exp(lp) - exp(log(sum alpha beta) + nll - lp)
/// (exact through a log_softmax), zero for t >= input_lengths[b], and zero for infinite losses
/// when zero_infinity.
using CtcLossBackwardFn = void (*)(const Tensor& grad, const Tensor& grad_out,
                                   const Tensor& log_probs, const Tensor& nll,
                                   const Tensor& log_alpha, const CtcArgs& a, bool zero_infinity);

IGNIS_DECLARE_STUB(ctc_loss_stub, CtcLossFn);
IGNIS_DECLARE_STUB(ctc_loss_backward_stub, CtcLossBackwardFn);

/// PyTorch's _ctc_loss: (nll [N], log_alpha) of log_probs [T, N, C]; differentiable in
/// log_probs. nn::functional::ctc_loss adds zero_infinity's masking and the reduction.
std::tuple<Tensor, Tensor> _ctc_loss(const Tensor& log_probs, const Tensor& targets,
                                     IntArrayRef input_lengths, IntArrayRef target_lengths,
                                     int64_t blank, bool zero_infinity);

}  // namespace ignis
