// Losses used by the examples, written as composites of differentiable ops (their backward and
// double backward come from the ops they are built of).
#include "core/op_call.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis {

IGNIS_OP(binary_cross_entropy_with_logits,
         "binary_cross_entropy_with_logits(Tensor self, Tensor target, Tensor? weight=None, "
         "Tensor? pos_weight=None, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const std::string&),
         binary_cross_entropy_with_logits, {.differentiable = true, .kind = "composite"});

Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const Tensor& weight, const Tensor& pos_weight,
                                        const std::string& reduction) {
  IGNIS_DISPATCH(binary_cross_entropy_with_logits, binary_cross_entropy_with_logits, logits, target,
                 weight, pos_weight, reduction);
  constexpr const char* op = "binary_cross_entropy_with_logits";
  IGNIS_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum", op,
              ": invalid reduction '", reduction, "' (expected 'none', 'mean' or 'sum')");
  IGNIS_CHECK(logits.defined() && target.defined(), op, ": called with an undefined tensor");
  IGNIS_CHECK(logits.is_floating_point(), op, ": expected floating point logits, but got ",
              logits.dtype());
  IGNIS_CHECK(target.sizes().equals(logits.sizes()), op, ": target size ", target.sizes(),
              " must be the same as input size ", logits.sizes());
  const Tensor& x = logits;
  const Tensor t = target.is_floating_point() ? target : target.to(x.dtype());
  // softplus(-x) = max(-x, 0) + log1p(exp(-|x|)), stable for any x. The branch masks are
  // constants with x == 0 on the x >= 0 side, so the gradient there is the true
  // sigmoid(0) - 1 rather than the 0 of the relu/abs subgradients.
  Tensor neg_mask, sign;
  {
    NoGradGuard ng;
    neg_mask = x.lt(0).to(x.dtype());
    sign = 1.0 - neg_mask * 2.0;
  }
  // where, not x * neg_mask: an infinite logit on the other side must add 0, not inf * 0 = NaN.
  const Tensor softplus_neg = log1p(exp(-(x * sign))) - where(x.lt(0), x, 0.0);
  Tensor loss;
  if (pos_weight.defined()) {
    // The positive term -t * log(sigmoid(x)) = t * softplus(-x) is scaled by pos_weight.
    const Tensor log_weight = (pos_weight - 1.0) * t + 1.0;
    loss = (1.0 - t) * x + log_weight * softplus_neg;
  } else {
    loss = (1.0 - t) * x + softplus_neg;
  }
  if (weight.defined()) loss = loss * weight;
  if (reduction == "mean") return loss.mean();
  if (reduction == "sum") return loss.sum();
  return loss;
}

}  // namespace ignis
