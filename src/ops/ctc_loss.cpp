// ctc_loss: the kernel op _ctc_loss (forward alpha recursion, backward beta recursion, as
// PyTorch's native CPU implementation) and the composite front ends of nn::functional, which add
// zero_infinity and the reduction ("mean" divides each loss by its target length, at least 1).
#include "ops/ctc_loss.h"

#include <limits>
#include <numeric>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/nn/loss_extra.h"
#include "ignis/ops.h"

namespace ignis {

IGNIS_DEFINE_STUB(ctc_loss_stub, CtcLossFn);
IGNIS_DEFINE_STUB(ctc_loss_backward_stub, CtcLossBackwardFn);

namespace {
constexpr const char* kOp = "ctc_loss";

/// Checks the batch against log_probs [T, N, C] and returns its geometry.
CtcArgs ctc_args(const Tensor& lp, const Tensor& targets, IntArrayRef il, IntArrayRef tl,
                 int64_t blank) {
  IGNIS_CHECK(lp.defined() && targets.defined(), kOp, ": called with an undefined tensor");
  IGNIS_CHECK(lp.dtype() == kFloat32 || lp.dtype() == kFloat64, kOp,
              ": expected log_probs of dtype float32 or float64, but got ", lp.dtype());
  IGNIS_CHECK(lp.dim() == 3, kOp, ": expected log_probs [T, N, C] (or [T, C]), but got shape ",
              lp.sizes());
  const int64_t t_max = lp.size(0), n = lp.size(1), c = lp.size(2);
  IGNIS_CHECK(blank >= 0 && blank < c, kOp, ": blank ", blank, " is out of range for ", c,
              " classes (log_probs of shape ", lp.sizes(), ")");
  IGNIS_CHECK(static_cast<int64_t>(il.size()) == n && static_cast<int64_t>(tl.size()) == n, kOp,
              ": expected one input and one target length per batch element (N = ", n,
              ", log_probs of shape ", lp.sizes(), "), but got ", il.size(), " input lengths and ",
              tl.size(), " target lengths");
  IGNIS_CHECK(targets.dtype() == kInt64 || targets.dtype() == kInt32, kOp,
              ": expected targets of dtype int64 or int32, but got ", targets.dtype());
  CtcArgs a;
  a.blank = blank;
  a.targets = targets.to(kCPU).to(kInt64).contiguous();  // read on the host by the checks
  int64_t total = 0;
  for (int64_t b = 0; b < n; ++b) {
    IGNIS_CHECK(il[b] >= 0 && il[b] <= t_max, kOp, ": input_lengths[", b, "] = ", il[b],
                " is outside [0, T = ", t_max, "] (log_probs of shape ", lp.sizes(), ")");
    IGNIS_CHECK(tl[b] >= 0, kOp, ": target_lengths[", b, "] = ", tl[b], " is negative");
    a.max_target_length = std::max(a.max_target_length, tl[b]);
    total += tl[b];
  }
  if (targets.dim() == 2) {
    IGNIS_CHECK(targets.size(0) == n, kOp, ": padded targets of shape ", targets.sizes(),
                " do not have one row per batch element (N = ", n, ")");
    for (int64_t b = 0; b < n; ++b) {
      IGNIS_CHECK(tl[b] <= targets.size(1), kOp, ": target_lengths[", b, "] = ", tl[b],
                  " exceeds the padded targets' length ", targets.size(1), " (targets of shape ",
                  targets.sizes(), ")");
      a.offsets.push_back(b * targets.size(1));
    }
  } else {
    IGNIS_CHECK(targets.dim() == 1, kOp, ": expected targets [N, S] (padded) or 1-d ",
                "(concatenated), but got shape ", targets.sizes());
    IGNIS_CHECK(targets.size(0) == total, kOp, ": concatenated targets of shape ", targets.sizes(),
                " hold ", targets.size(0), " labels, but target_lengths sum to ", total);
    int64_t off = 0;
    for (int64_t b = 0; b < n; ++b) {
      a.offsets.push_back(off);
      off += tl[b];
    }
  }
  const int64_t* tp = a.targets.data_ptr<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    for (int64_t i = 0; i < tl[b]; ++i) {
      const int64_t k = tp[a.offsets[b] + i];
      IGNIS_CHECK(k >= 0 && k < c && k != blank, kOp, ": target label ", k, " of sequence ", b,
                  " (position ", i, ") is ", k == blank ? "the blank label" : "out of range for ",
                  k == blank ? "" : std::to_string(c) + " classes", " (log_probs of shape ",
                  lp.sizes(), ", blank ", blank, ")");
    }
  }
  a.input_lengths.assign(il.begin(), il.end());
  a.target_lengths.assign(tl.begin(), tl.end());
  return a;
}

std::vector<int64_t> host_lengths(const Tensor& t, const char* name) {
  IGNIS_CHECK(t.defined(), kOp, ": ", name, " is undefined");
  IGNIS_CHECK(t.dtype() == kInt64 || t.dtype() == kInt32, kOp, ": expected ", name,
              " of an integer dtype, but got ", t.dtype());
  IGNIS_CHECK(t.dim() <= 1, kOp, ": expected ", name, " of shape [N] (or 0-d), but got shape ",
              t.sizes());
  const Tensor c = t.to(kCPU).to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  return std::vector<int64_t>(p, p + c.numel());
}
}  // namespace

using TensorPair = std::tuple<Tensor, Tensor>;  // (a macro argument cannot hold its comma)
IGNIS_OP(
    _ctc_loss,
    "_ctc_loss(Tensor log_probs, Tensor targets, int[] input_lengths, int[] target_lengths, "
    "int blank=0, bool zero_infinity=False) -> (Tensor, Tensor)",
    TensorPair(const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, int64_t, bool), _ctc_loss,
    {.differentiable = true, .kind = "kernel", .stubs = {&ctc_loss_stub, &ctc_loss_backward_stub}});

std::tuple<Tensor, Tensor> _ctc_loss(const Tensor& log_probs, const Tensor& targets,
                                     IntArrayRef input_lengths, IntArrayRef target_lengths,
                                     int64_t blank, bool zero_infinity) {
  IGNIS_DISPATCH(_ctc_loss, _ctc_loss, log_probs, targets, input_lengths, target_lengths, blank,
                 zero_infinity);
  auto args =
      std::make_shared<CtcArgs>(ctc_args(log_probs, targets, input_lengths, target_lengths, blank));
  const int64_t t_max = log_probs.size(0), n = log_probs.size(1);
  Tensor nll = make_tensor({n}, log_probs.dtype(), log_probs.device());
  Tensor log_alpha = make_tensor({n, t_max, 2 * args->max_target_length + 1}, log_probs.dtype(),
                                 log_probs.device());
  if (n > 0) ctc_loss_stub[log_probs.device()](nll, log_alpha, log_probs, *args);
  if (autograd::any_needs_grad({&log_probs})) {
    autograd::record(
        "_ctc_loss", {&log_probs}, {&nll},
        [lp = autograd::SavedVariable(log_probs, false), nll_s = autograd::SavedVariable(nll, true),
         la = autograd::SavedVariable(log_alpha, false), args,
         zero_infinity](autograd::BackwardCtx& c, const TensorList& g) {
          const Tensor x = c.unpack(lp);
          Tensor grad = make_tensor(x.sizes(), x.dtype(), x.device());
          if (grad.numel() > 0) {
            ctc_loss_backward_stub[x.device()](grad, g[0].contiguous(), x, c.unpack(nll_s),
                                               c.unpack(la), *args, zero_infinity);
          }
          return TensorList{grad};
        });
  }
  return {nll, log_alpha};
}

namespace nn {
namespace F = functional;

IGNIS_OP(ctc_loss_IntList,
         "ctc_loss.IntList(Tensor log_probs, Tensor targets, int[] input_lengths, "
         "int[] target_lengths, int blank=0, str reduction='mean', bool zero_infinity=False) -> "
         "Tensor",
         Tensor(const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, int64_t, const std::string&,
                bool),
         F::ctc_loss, {.differentiable = true, .kind = "composite"});
IGNIS_OP(ctc_loss_Tensor,
         "ctc_loss.Tensor(Tensor log_probs, Tensor targets, Tensor input_lengths, "
         "Tensor target_lengths, int blank=0, str reduction='mean', bool zero_infinity=False) -> "
         "Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, int64_t,
                const std::string&, bool),
         F::ctc_loss, {.differentiable = true, .kind = "composite"});

Tensor F::ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                   IntArrayRef target_lengths, int64_t blank, const std::string& reduction,
                   bool zero_infinity) {
  IGNIS_DISPATCH(ctc_loss_IntList, F::ctc_loss, log_probs, targets, input_lengths, target_lengths,
                 blank, reduction, zero_infinity);
  IGNIS_CHECK(reduction == "none" || reduction == "mean" || reduction == "sum", kOp,
              ": reduction must be 'none', 'mean' or 'sum', got '", reduction, "'");
  IGNIS_CHECK(log_probs.defined(), kOp, ": called with an undefined tensor");
  const bool unbatched = log_probs.dim() == 2;
  const Tensor lp = unbatched ? log_probs.unsqueeze(1) : log_probs;
  Tensor nll = std::get<0>(
      ignis::_ctc_loss(lp, targets, input_lengths, target_lengths, blank, zero_infinity));
  if (zero_infinity) {
    // The kernel's backward zeroes these losses' gradients; where() gives them value 0.
    nll = where(nll == std::numeric_limits<double>::infinity(), 0.0, nll);
  }
  if (reduction == "sum") return nll.sum();
  if (reduction == "mean") {
    std::vector<double> len(target_lengths.begin(), target_lengths.end());
    for (double& l : len) l = std::max(l, 1.0);
    const Tensor div = tensor(len).to(TensorOptions().dtype(nll.dtype()).device(nll.device()),
                                      /*non_blocking=*/true);
    return (nll / div).mean();
  }
  return unbatched ? nll.squeeze(0) : nll;
}

Tensor F::ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                   const Tensor& target_lengths, int64_t blank, const std::string& reduction,
                   bool zero_infinity) {
  IGNIS_DISPATCH(ctc_loss_Tensor, F::ctc_loss, log_probs, targets, input_lengths, target_lengths,
                 blank, reduction, zero_infinity);
  const std::vector<int64_t> il = host_lengths(input_lengths, "input_lengths");
  const std::vector<int64_t> tl = host_lengths(target_lengths, "target_lengths");
  return F::ctc_loss(log_probs, targets, IntArrayRef(il), IntArrayRef(tl), blank, reduction,
                     zero_infinity);
}

Tensor F::ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                   const Tensor& target_lengths, const CTCLossFuncOptions& o) {
  return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, o.blank(), o.reduction(),
                     o.zero_infinity());
}

CTCLoss::CTCLoss(CTCLossOptions o) : options(std::move(o)) {
  const std::string& r = options.reduction();
  IGNIS_CHECK(r == "none" || r == "mean" || r == "sum",
              "CTCLoss: reduction must be 'none', 'mean' or 'sum', got '", r, "'");
}
std::string CTCLoss::extra_repr() const {
  return "blank=" + std::to_string(options.blank()) + ", reduction='" + options.reduction() +
         "', zero_infinity=" + (options.zero_infinity() ? "true" : "false");
}
Tensor CTCLoss::forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                        const Tensor& target_lengths) {
  return F::ctc_loss(log_probs, targets, input_lengths, target_lengths, options);
}

}  // namespace nn
}  // namespace ignis
