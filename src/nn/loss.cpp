// Losses as compositions of differentiable ops; binary_cross_entropy has its own backward (the
// composite's gradient is NaN where an input is exactly 0 or 1).
#include "ignis/nn/loss.h"

#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/warn_once.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::nn {

namespace F = functional;

namespace {
void check_reduction(const std::string& r, const char* op, bool batchmean = false) {
  IGNIS_CHECK(r == "none" || r == "mean" || r == "sum" || (batchmean && r == "batchmean"), op,
              ": reduction must be 'none', 'mean' or 'sum'", batchmean ? " or 'batchmean'" : "",
              ", got '", r, "'");
}
Tensor reduce(const Tensor& l, const std::string& r) {
  if (r == "none") return l;
  return r == "sum" ? l.sum() : l.mean();
}
void check_same_shape(const Tensor& input, const Tensor& target, const char* op) {
  IGNIS_CHECK(input.sizes().equals(target.sizes()), op, ": target of shape ", target.sizes(),
              " does not match input of shape ", input.sizes());
}
/// The pointwise regression losses broadcast a target of another shape, with a warning, as
/// PyTorch does (a [N] target against an [N, 1] input makes an [N, N] loss: rarely meant).
std::pair<Tensor, Tensor> broadcast_target(const Tensor& input, const Tensor& target,
                                           const char* op) {
  if (input.sizes().equals(target.sizes())) return {input, target};
  Shape s;
  try {
    s = broadcast_shapes(input.sizes(), target.sizes());
  } catch (const Error&) {
    IGNIS_FAIL(op, ": target of shape ", target.sizes(), " does not broadcast with input of shape ",
               input.sizes());
  }
  std::ostringstream msg;
  msg << op << ": using a target of shape " << target.sizes() << " that differs from the input's "
      << "shape " << input.sizes() << "; both broadcast to " << IntArrayRef(s)
      << ", which is likely not what was meant. Give the target the input's shape.";
  detail::warn_once_per_key(op, msg.str());  // once per loss, as PyTorch's per call site
  return {input.expand(s), target.expand(s)};
}
}  // namespace

// The losses are composites of differentiable ops (nll_loss reads its targets on the host).
#define LOSS_OPTS \
  { .differentiable = true, .kind = "composite" }
#define LOSS_SIG Tensor(const Tensor&, const Tensor&, const std::string&)
IGNIS_OP(mse_loss, "mse_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor", LOSS_SIG,
         F::mse_loss, LOSS_OPTS);
IGNIS_OP(l1_loss, "l1_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor", LOSS_SIG,
         F::l1_loss, LOSS_OPTS);
IGNIS_OP(
    smooth_l1_loss,
    "smooth_l1_loss(Tensor self, Tensor target, str reduction='mean', float beta=1.0) -> Tensor",
    Tensor(const Tensor&, const Tensor&, const std::string&, double), F::smooth_l1_loss, LOSS_OPTS);
IGNIS_OP(huber_loss,
         "huber_loss(Tensor self, Tensor target, str reduction='mean', float delta=1.0) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const std::string&, double), F::huber_loss,
         LOSS_OPTS);
IGNIS_OP(nll_loss,
         "nll_loss(Tensor self, Tensor target, Tensor? weight=None, int ignore_index=-100, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, int64_t, const std::string&),
         F::nll_loss, LOSS_OPTS);
IGNIS_OP(cross_entropy_loss,
         "cross_entropy_loss(Tensor self, Tensor target, Tensor? weight=None, "
         "int ignore_index=-100, str reduction='mean', float label_smoothing=0.0) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, int64_t, const std::string&, double),
         F::cross_entropy, LOSS_OPTS);
IGNIS_OP(binary_cross_entropy,
         "binary_cross_entropy(Tensor self, Tensor target, Tensor? weight=None, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const std::string&),
         F::binary_cross_entropy, LOSS_OPTS);
IGNIS_OP(kl_div,
         "kl_div(Tensor self, Tensor target, str reduction='mean', *, bool log_target=False) -> "
         "Tensor",
         Tensor(const Tensor&, const Tensor&, const std::string&, bool), F::kl_div, LOSS_OPTS);
#undef LOSS_SIG
#undef LOSS_OPTS

Tensor F::mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  IGNIS_DISPATCH(mse_loss, F::mse_loss, input, target, reduction);
  check_reduction(reduction, "mse_loss");
  const auto [x, t] = broadcast_target(input, target, "mse_loss");
  Tensor d = x - t;
  return reduce(d * d, reduction);
}

Tensor F::l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction) {
  IGNIS_DISPATCH(l1_loss, F::l1_loss, input, target, reduction);
  check_reduction(reduction, "l1_loss");
  const auto [x, t] = broadcast_target(input, target, "l1_loss");
  return reduce(abs(x - t), reduction);
}

Tensor F::smooth_l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                         double beta) {
  IGNIS_DISPATCH(smooth_l1_loss, F::smooth_l1_loss, input, target, reduction, beta);
  check_reduction(reduction, "smooth_l1_loss");
  IGNIS_CHECK(beta >= 0, "smooth_l1_loss: beta must be non-negative, got ", beta);
  const auto [x, t] = broadcast_target(input, target, "smooth_l1_loss");
  Tensor d = abs(x - t);
  if (beta == 0) return reduce(d, reduction);
  // huber_loss / beta, as one expression (see huber_loss): finite gradients at |d| = inf.
  const Tensor q = d.clamp_max(beta);
  return reduce(q * q * (0.5 / beta) + (d - q), reduction);
}

Tensor F::huber_loss(const Tensor& input, const Tensor& target, const std::string& reduction,
                     double delta) {
  IGNIS_DISPATCH(huber_loss, F::huber_loss, input, target, reduction, delta);
  check_reduction(reduction, "huber_loss");
  IGNIS_CHECK(delta > 0, "huber_loss: delta must be positive, got ", delta);
  const auto [x, t] = broadcast_target(input, target, "huber_loss");
  Tensor d = abs(x - t);
  // 0.5 q^2 + delta (d - q) with q = min(d, delta): 0.5 d^2 inside, delta (d - delta / 2)
  // outside. Not where(d <= delta, 0.5 d^2, ...): where's untaken branch still gets a zero
  // gradient, and 0 * d = NaN at |d| = inf, where PyTorch's gradient is +-delta.
  const Tensor q = d.clamp_max(delta);
  return reduce(q * q * 0.5 + (d - q) * delta, reduction);
}

namespace {
// Per-element nll (before reduction) and the weight of each target; input [N, C, d...] of
// log-probabilities, target [N, d...]. Ignored targets get weight 0. The weights are undefined
// when every one is 1 (no class weights, no ignored target).
std::pair<Tensor, Tensor> nll_terms(const Tensor& logp, const Tensor& target, const Tensor& weight,
                                    int64_t ignore_index, const char* op) {
  IGNIS_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op,
              ": expected class indices of dtype int64 for the target, got ", target.dtype(),
              " (for class probabilities pass a floating target of the input's shape)");
  IGNIS_CHECK(logp.dim() >= 1, op, ": input must have at least 1 dimension");
  const bool unbatched = logp.dim() == 1;
  Tensor lp = unbatched ? logp.unsqueeze(0) : logp;
  Tensor t = unbatched ? target.reshape({1}) : target;
  const int64_t c = lp.size(1);
  Shape expect = lp.sizes().shape();
  expect.erase(expect.begin() + 1);
  IGNIS_CHECK(t.sizes().equals(expect), op, ": target of shape ", target.sizes(),
              " does not match input of shape ", logp.sizes(), " (expected ", expect, ")");
  if (weight.defined()) {
    IGNIS_CHECK(weight.dim() == 1 && weight.size(0) == c, op, ": weight of shape ", weight.sizes(),
                " must have one entry per class (", c, ")");
  }
  t = t.to(kInt64);
  if (t.device().is_cpu() && !weight.defined()) {
    // The common case in one pass over the targets: no tensor ops for the checks, and with no
    // ignored target every weight is 1 (the training loop's loss is then log_softmax, gather
    // and a mean).
    const Tensor tc = t.contiguous();
    const int64_t* tp = tc.data_ptr<int64_t>();
    bool any_ignored = false;
    for (int64_t i = 0, n = tc.numel(); i < n; ++i) {
      if (tp[i] == ignore_index) {
        any_ignored = true;
        continue;
      }
      IGNIS_CHECK(tp[i] >= 0 && tp[i] < c, op, ": target ", tp[i], " is out of bounds for ", c,
                  " classes");
    }
    if (!any_ignored) {
      Tensor picked = -gather(lp, 1, tc.unsqueeze(1)).squeeze(1);
      if (unbatched) picked = picked.squeeze(0);
      return {picked, Tensor()};
    }
  }
  Tensor valid = t != ignore_index;
  Tensor safe = where(valid, t, 0);
  // gather checks the targets (on a GPU, on the device, with one wait); only when one is out of
  // range is it found again, to name it.
  Tensor picked;
  try {
    picked = -gather(lp, 1, safe.unsqueeze(1)).squeeze(1);
  } catch (const Error&) {
    const Tensor bad = logical_and(valid, logical_or(safe < 0, safe >= c));
    if (!bad.any().item<bool>()) throw;
    IGNIS_FAIL(op, ": target ", masked_select(t, bad)[0].item<int64_t>(), " is out of bounds for ",
               c, " classes");
  }
  Tensor w = valid.to(lp.dtype());
  if (weight.defined()) {
    w = w * index_select(weight.to(lp.dtype()), 0, safe.reshape({-1})).reshape(safe.sizes());
  }
  // An ignored target's loss is 0 whatever its input holds (PyTorch's too): where, not
  // picked * 0, which is NaN for an infinite or NaN log-probability.
  const Tensor l = where(valid, picked * w, 0.0);
  if (unbatched) return {l.squeeze(0), w.squeeze(0)};
  return {l, w};
}

/// sum(l) / sum(w), the weighted mean of the per-element losses l (already multiplied by their
/// weights w). When every target is ignored (sum(w) == 0) the value is NaN, as in PyTorch, and
/// the gradients are zero rather than 0 * inf = NaN: one unlabelled batch must not poison the
/// parameters.
Tensor weighted_mean(const Tensor& l, const Tensor& w) {
  const Tensor total = w.sum();
  const Tensor safe = where(total == 0, 1.0, total);
  const Tensor nan_if_empty =
      where(total == 0, std::numeric_limits<double>::quiet_NaN(), zeros_like(total));
  return l.sum() / safe + nan_if_empty;
}
}  // namespace

Tensor F::nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                   int64_t ignore_index, const std::string& reduction) {
  IGNIS_DISPATCH(nll_loss, F::nll_loss, input, target, weight, ignore_index, reduction);
  check_reduction(reduction, "nll_loss");
  auto [l, w] = nll_terms(input, target, weight, ignore_index, "nll_loss");
  if (reduction == "none") return l;
  if (reduction == "sum") return l.sum();
  return w.defined() ? weighted_mean(l, w) : l.mean();
}

Tensor F::cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                        int64_t ignore_index, const std::string& reduction,
                        double label_smoothing) {
  IGNIS_DISPATCH(cross_entropy_loss, F::cross_entropy, input, target, weight, ignore_index,
                 reduction, label_smoothing);
  check_reduction(reduction, "cross_entropy");
  IGNIS_CHECK(label_smoothing >= 0 && label_smoothing <= 1, "cross_entropy: label_smoothing ",
              "must be between 0.0 and 1.0, got ", label_smoothing);
  IGNIS_CHECK(input.is_floating_point(), "cross_entropy: input must be floating point, got ",
              input.dtype());
  const int64_t cdim = input.dim() == 1 ? 0 : 1;
  Tensor logp = log_softmax(input, cdim);
  const int64_t c = input.size(cdim);
  // Shape of the weight broadcast along the class dim.
  Shape wshape(static_cast<size_t>(input.dim()), 1);
  wshape[cdim] = c;
  if (target.is_floating_point()) {
    check_same_shape(input, target, "cross_entropy");
    Tensor t = label_smoothing > 0 ? target * (1 - label_smoothing) + label_smoothing / c : target;
    Tensor prod = logp * t;
    if (weight.defined()) prod = prod * weight.reshape(wshape);
    Tensor l = -prod.sum({cdim});
    if (reduction == "none") return l;
    if (reduction == "sum") return l.sum();
    return l.mean();
  }
  auto [l, w] = nll_terms(logp, target, weight, ignore_index, "cross_entropy");
  Tensor nll = reduction == "none"  ? l
               : reduction == "sum" ? l.sum()
               : w.defined()        ? weighted_mean(l, w)
                                    : l.mean();
  if (label_smoothing == 0) return nll;
  Tensor lp = weight.defined() ? logp * weight.reshape(wshape) : logp;
  Tensor valid_mask = target.to(kInt64) != ignore_index;
  Tensor valid = valid_mask.to(logp.dtype());
  Tensor smooth = where(valid_mask, -lp.sum({cdim}), 0.0);  // 0 for ignored targets, even NaN rows
  Tensor s;
  if (reduction == "none") {
    s = smooth;
  } else if (reduction == "sum") {
    s = smooth.sum();
  } else {
    s = smooth.sum() / (weight.defined() ? w.sum() : valid.sum());
  }
  return nll * (1 - label_smoothing) + s * (label_smoothing / c);
}

Tensor F::binary_cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight,
                               const std::string& reduction) {
  IGNIS_DISPATCH(binary_cross_entropy, F::binary_cross_entropy, input, target, weight, reduction);
  check_reduction(reduction, "binary_cross_entropy");
  check_same_shape(input, target, "binary_cross_entropy");
  if (weight.defined()) {  // the weight broadcasts to the input's shape (not the other way)
    bool ok = weight.dim() <= input.dim();
    for (int64_t i = 1; ok && i <= weight.dim(); ++i) {
      const int64_t w = weight.size(-i);
      ok = w == 1 || w == input.size(-i);
    }
    IGNIS_CHECK(ok, "binary_cross_entropy: weight of shape ", weight.sizes(),
                " does not broadcast to the input shape ", input.sizes());
  }
  if (input.numel() > 0) {
    NoGradGuard ng;
    IGNIS_CHECK(logical_and(input >= 0, input <= 1).all().item<bool>(),
                "binary_cross_entropy: ", "all elements of input should be between 0 and 1");
  }
  // log clamped at -100 like PyTorch, so that 0 * log(0) stays finite. Its own backward, as
  // PyTorch's: d/dx = (x - t) / max(x (1 - x), 1e-12), finite where x is exactly 0 or 1 (the
  // composite's would be 0 * inf there); d/dt = log(1 - x) - log(x), clamped the same way.
  auto log_clamped = [](const Tensor& x) { return clamp(log(x), -100.0); };
  Tensor l;
  {
    NoGradGuard ng;
    l = -(target * log_clamped(input) + (1 - target) * log_clamped(1 - input));
  }
  if (autograd::any_needs_grad({&input, &target})) {
    autograd::record(
        "binary_cross_entropy", {&input, &target}, {&l},
        [sx = autograd::SavedVariable(input, false), st = autograd::SavedVariable(target, false),
         log_clamped](autograd::BackwardCtx& c, const TensorList& g) {
          const Tensor x = c.unpack(sx), t = c.unpack(st);
          Tensor gx, gt;
          if (c.needs_input_grad(0)) gx = g[0] * (x - t) / (x * (1 - x)).clamp_min(1e-12);
          if (c.needs_input_grad(1)) gt = g[0] * (log_clamped(1 - x) - log_clamped(x));
          return TensorList{gx, gt};
        });
  }
  if (weight.defined()) l = l * weight;
  return reduce(l, reduction);
}

Tensor F::binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                           const Tensor& weight, const Tensor& pos_weight,
                                           const std::string& reduction) {
  check_reduction(reduction, "binary_cross_entropy_with_logits");
  return ignis::binary_cross_entropy_with_logits(input, target, weight, pos_weight, reduction);
}

Tensor F::kl_div(const Tensor& input, const Tensor& target, const std::string& reduction,
                 bool log_target) {
  IGNIS_DISPATCH(kl_div, F::kl_div, input, target, reduction, log_target);
  check_reduction(reduction, "kl_div", true);
  check_same_shape(input, target, "kl_div");
  Tensor l;
  if (log_target) {
    l = exp(target) * (target - input);
  } else {
    // xlogy(target, target) - target * input, as PyTorch: 0 log 0 = 0, while a negative or NaN
    // target gives NaN (it is no probability) rather than a silent 0.
    const Tensor zero = target == 0;
    const Tensor safe = where(zero, ones_like(target), target);
    l = where(zero, 0.0, target * log(safe)) - target * input;
  }
  if (reduction == "batchmean") {
    return input.dim() == 0 ? l.sum() : l.sum() / static_cast<double>(input.size(0));
  }
  return reduce(l, reduction);
}

// ---- modules

Loss::Loss(std::string reduction, const char* name, bool allow_batchmean)
    : reduction_(std::move(reduction)) {
  check_reduction(reduction_, name, allow_batchmean);
}

Tensor MSELoss::forward(const Tensor& i, const Tensor& t) { return F::mse_loss(i, t, reduction_); }
Tensor L1Loss::forward(const Tensor& i, const Tensor& t) { return F::l1_loss(i, t, reduction_); }
Tensor SmoothL1Loss::forward(const Tensor& i, const Tensor& t) {
  return F::smooth_l1_loss(i, t, reduction_, beta_);
}
Tensor HuberLoss::forward(const Tensor& i, const Tensor& t) {
  return F::huber_loss(i, t, reduction_, delta_);
}

CrossEntropyLoss::CrossEntropyLoss(CrossEntropyOptions o)
    : Loss(o.reduction, "CrossEntropyLoss"), o_(std::move(o)) {
  if (o_.weight.defined()) register_buffer("weight", o_.weight);
}
Tensor CrossEntropyLoss::forward(const Tensor& i, const Tensor& t) {
  return F::cross_entropy(i, t, o_.weight, o_.ignore_index, reduction_, o_.label_smoothing);
}

NLLLoss::NLLLoss(Tensor weight, int64_t ignore_index, std::string reduction)
    : Loss(std::move(reduction), "NLLLoss"),
      weight_(std::move(weight)),
      ignore_index_(ignore_index) {
  if (weight_.defined()) register_buffer("weight", weight_);
}
Tensor NLLLoss::forward(const Tensor& i, const Tensor& t) {
  return F::nll_loss(i, t, weight_, ignore_index_, reduction_);
}

BCELoss::BCELoss(Tensor weight, std::string reduction)
    : Loss(std::move(reduction), "BCELoss"), weight_(std::move(weight)) {
  if (weight_.defined()) register_buffer("weight", weight_);
}
Tensor BCELoss::forward(const Tensor& i, const Tensor& t) {
  return F::binary_cross_entropy(i, t, weight_, reduction_);
}

BCEWithLogitsLoss::BCEWithLogitsLoss(Tensor weight, std::string reduction, Tensor pos_weight)
    : Loss(std::move(reduction), "BCEWithLogitsLoss"),
      weight_(std::move(weight)),
      pos_weight_(std::move(pos_weight)) {
  if (weight_.defined()) register_buffer("weight", weight_);
  if (pos_weight_.defined()) register_buffer("pos_weight", pos_weight_);
}
Tensor BCEWithLogitsLoss::forward(const Tensor& i, const Tensor& t) {
  return F::binary_cross_entropy_with_logits(i, t, weight_, pos_weight_, reduction_);
}

Tensor KLDivLoss::forward(const Tensor& i, const Tensor& t) {
  return F::kl_div(i, t, reduction_, log_target_);
}

// ---- gradient clipping

double clip_grad_norm_(const std::vector<Tensor>& params, double max_norm, double norm_type,
                       bool error_if_nonfinite) {
  NoGradGuard ng;
  std::vector<Tensor> grads;
  for (const Tensor& p : params) {
    if (p.grad().defined()) grads.push_back(p.grad());
  }
  if (grads.empty()) return 0;
  double total = 0;
  if (std::isinf(norm_type)) {
    for (const Tensor& g : grads) {
      if (g.numel()) total = std::max(total, abs(g).max().item<double>());
    }
  } else {
    for (const Tensor& g : grads) {
      total += std::pow(norm(g.to(kFloat64), norm_type).item<double>(), norm_type);
    }
    total = std::pow(total, 1.0 / norm_type);
  }
  IGNIS_CHECK(!error_if_nonfinite || std::isfinite(total),
              "clip_grad_norm_: the total norm of "
              "order ",
              norm_type, " for gradients is non-finite, so it cannot be clipped");
  const double coef = max_norm / (total + 1e-6);
  if (coef < 1) {
    for (Tensor& g : grads) g.mul_(coef);
  }
  return total;
}

void clip_grad_value_(const std::vector<Tensor>& params, double clip_value) {
  NoGradGuard ng;
  for (const Tensor& p : params) {
    Tensor g = p.grad();  // the same tensor: clamped in place
    if (g.defined()) g.clamp_(-clip_value, clip_value);
  }
}

}  // namespace ignis::nn
