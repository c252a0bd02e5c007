// The margin, hinge, triplet, cosine-embedding, Poisson and Gaussian NLL losses: composites of
// differentiable ops (their backward and double backward come from the ops), each with PyTorch's
// formula, reduction and argument checks. ctc_loss has its own kernel (src/ops/ctc_loss.cpp).
#include "ignis/nn/loss_extra.h"

#include <cmath>
#include <sstream>
#include <vector>

#include "core/op_call.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::nn {

namespace F = functional;

namespace {
void check_reduction(const std::string& r, const char* op) {
  IGNIS_CHECK(r == "none" || r == "mean" || r == "sum", op,
              ": reduction must be 'none', 'mean' or 'sum', got '", r, "'");
}
Tensor reduce(const Tensor& l, const std::string& r) {
  if (r == "none") return l;
  return r == "sum" ? l.sum() : l.mean();
}
void check_defined(const char* op, std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) IGNIS_CHECK(t->defined(), op, ": called with an undefined tensor");
}
void check_floating(const char* op, const char* what, const Tensor& t) {
  IGNIS_CHECK(t.is_floating_point(), op, ": expected a floating point ", what, ", but got ",
              t.dtype());
}
/// The shape the tensors broadcast to; an error naming the op and every shape otherwise.
Shape broadcast_all(const char* op,
                    std::initializer_list<std::pair<const char*, const Tensor*>> ts) {
  Shape s;
  bool first = true;
  for (const auto& [name, t] : ts) {
    try {
      s = first ? t->sizes().shape() : broadcast_shapes(s, t->sizes());
      first = false;
    } catch (const Error&) {
      std::ostringstream m;
      m << op << ": the shapes of ";
      const char* sep = "";
      for (const auto& [n, u] : ts) {
        m << sep << n << " " << u->sizes();
        sep = ", ";
      }
      m << " do not broadcast together";
      IGNIS_FAIL(m.str());
    }
  }
  return s;
}
/// softplus(z) = log(1 + exp(z)) without overflow: max(z, 0) + log1p(exp(-|z|)). The branch
/// mask is a constant (z == 0 on the z >= 0 side), so the gradient is sigmoid(z) everywhere.
Tensor stable_softplus(const Tensor& z) {
  Tensor neg, sign;
  {
    NoGradGuard ng;
    neg = z.lt(0).to(z.dtype());
    sign = 1.0 - neg * 2.0;
  }
  return log1p(exp(-(z * sign))) + z * (1.0 - neg);
}
/// Class indices as int64 (int32 accepted), after checking the dtype.
Tensor class_indices(const char* op, const Tensor& target) {
  IGNIS_CHECK(target.dtype() == kInt64 || target.dtype() == kInt32, op,
              ": expected a target of class indices (int64), but got ", target.dtype());
  return target.to(kInt64).contiguous();
}
}  // namespace

#define EXTRA_LOSS_OPTS \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP(margin_ranking_loss,
         "margin_ranking_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, double, const std::string&),
         F::margin_ranking_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(multi_margin_loss,
         "multi_margin_loss(Tensor self, Tensor target, int p=1, float margin=1.0, "
         "Tensor? weight=None, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, int64_t, double, const Tensor&, const std::string&),
         F::multi_margin_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(multilabel_margin_loss,
         "multilabel_margin_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const std::string&), F::multilabel_margin_loss,
         EXTRA_LOSS_OPTS);
IGNIS_OP(soft_margin_loss,
         "soft_margin_loss(Tensor self, Tensor target, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const std::string&), F::soft_margin_loss,
         EXTRA_LOSS_OPTS);
IGNIS_OP(multilabel_soft_margin_loss,
         "multilabel_soft_margin_loss(Tensor self, Tensor target, Tensor? weight=None, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const std::string&),
         F::multilabel_soft_margin_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(hinge_embedding_loss,
         "hinge_embedding_loss(Tensor self, Tensor target, float margin=1.0, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, double, const std::string&), F::hinge_embedding_loss,
         EXTRA_LOSS_OPTS);
IGNIS_OP(triplet_margin_loss,
         "triplet_margin_loss(Tensor anchor, Tensor positive, Tensor negative, float margin=1.0, "
         "float p=2, float eps=1e-06, bool swap=False, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, double, double, double, bool,
                const std::string&),
         F::triplet_margin_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(cosine_embedding_loss,
         "cosine_embedding_loss(Tensor input1, Tensor input2, Tensor target, float margin=0.0, "
         "str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, double, const std::string&),
         F::cosine_embedding_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(poisson_nll_loss,
         "poisson_nll_loss(Tensor input, Tensor target, bool log_input=True, bool full=False, "
         "float eps=1e-08, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, bool, bool, double, const std::string&),
         F::poisson_nll_loss, EXTRA_LOSS_OPTS);
IGNIS_OP(gaussian_nll_loss,
         "gaussian_nll_loss(Tensor input, Tensor target, Tensor var, bool full=False, "
         "float eps=1e-06, str reduction='mean') -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, bool, double, const std::string&),
         F::gaussian_nll_loss, EXTRA_LOSS_OPTS);
#undef EXTRA_LOSS_OPTS

// ---- margin_ranking_loss

Tensor F::margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                              double margin, const std::string& reduction) {
  IGNIS_DISPATCH(margin_ranking_loss, F::margin_ranking_loss, input1, input2, target, margin,
                 reduction);
  constexpr const char* op = "margin_ranking_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input1, &input2, &target});
  IGNIS_CHECK(input1.dim() == input2.dim() && input1.dim() == target.dim(), op, ": input1 ",
              input1.sizes(), ", input2 ", input2.sizes(), " and target ", target.sizes(),
              " must have the same number of dimensions");
  broadcast_all(op, {{"input1", &input1}, {"input2", &input2}, {"target", &target}});
  return reduce((-target * (input1 - input2) + margin).clamp_min(0), reduction);
}

Tensor F::margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                              const MarginRankingLossFuncOptions& o) {
  return F::margin_ranking_loss(input1, input2, target, o.margin(), o.reduction());
}

// ---- multi_margin_loss

Tensor F::multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin,
                            const Tensor& weight, const std::string& reduction) {
  IGNIS_DISPATCH(multi_margin_loss, F::multi_margin_loss, input, target, p, margin, weight,
                 reduction);
  constexpr const char* op = "multi_margin_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  IGNIS_CHECK(p == 1 || p == 2, op, ": p must be 1 or 2, got ", p);
  IGNIS_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) > 0, op,
              ": expected a non-empty input [C] or [N, C], but got input of shape ", input.sizes());
  const int64_t n = input.dim() == 2 ? input.size(0) : 1, c = input.size(-1);
  IGNIS_CHECK(target.dim() <= 1 && target.numel() == n, op, ": target of shape ", target.sizes(),
              " does not match input of shape ", input.sizes(), " (expected ", n,
              " class indices)");
  if (weight.defined()) {
    IGNIS_CHECK(weight.dim() == 1 && weight.size(0) == c, op, ": weight of shape ", weight.sizes(),
                " must have one entry per class (", c, ")");
  }
  const Tensor t = class_indices(op, target).reshape({n, 1});
  {
    const Tensor th = t.to(kCPU);  // the range check reads the targets on the host
    const int64_t* tp = th.data_ptr<int64_t>();
    for (int64_t i = 0; i < n; ++i) {
      IGNIS_CHECK(tp[i] >= 0 && tp[i] < c, op, ": target ", tp[i], " is out of range for ", c,
                  " classes (input of shape ", input.sizes(), ")");
    }
  }
  const Tensor x = input.reshape({n, c});
  Tensor z = (margin - gather(x, 1, t) + x).clamp_min(0);
  if (p == 2) z = z * z;
  if (weight.defined()) z = z * index_select(weight.to(x.dtype()), 0, t.reshape({n})).unsqueeze(1);
  Tensor is_target;
  {
    NoGradGuard ng;
    is_target = arange(c, TensorOptions(kInt64).device(t.device())).unsqueeze(0) == t;
  }
  Tensor l = where(is_target, 0.0, z).sum({1}) / static_cast<double>(c);
  // One loss per target element: [N], or 0-d for a 0-d target (PyTorch's shapes).
  return reduce(l.reshape(target.sizes()), reduction);
}

Tensor F::multi_margin_loss(const Tensor& input, const Tensor& target,
                            const MultiMarginLossFuncOptions& o) {
  return F::multi_margin_loss(input, target, o.p(), o.margin(), o.weight(), o.reduction());
}

// ---- multilabel_margin_loss

Tensor F::multilabel_margin_loss(const Tensor& input, const Tensor& target,
                                 const std::string& reduction) {
  IGNIS_DISPATCH(multilabel_margin_loss, F::multilabel_margin_loss, input, target, reduction);
  constexpr const char* op = "multilabel_margin_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  IGNIS_CHECK((input.dim() == 1 || input.dim() == 2) && input.size(-1) > 0, op,
              ": expected a non-empty input [C] or [N, C], but got input of shape ", input.sizes());
  IGNIS_CHECK(target.sizes().equals(input.sizes()), op, ": target of shape ", target.sizes(),
              " does not match input of shape ", input.sizes());
  const int64_t n = input.dim() == 2 ? input.size(0) : 1, c = input.size(-1);
  const Tensor t = class_indices(op, target).reshape({n, c}).to(kCPU);
  // Each row's targets are its entries before the first -1: read them on the host (a sync point,
  // as nll_loss's range check) into the masks of the composite below.
  const int64_t* tp = t.data_ptr<int64_t>();
  std::vector<int64_t> count(static_cast<size_t>(n), 0);
  int64_t s = 0;  // the most targets of a row
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < c; ++j) {
      const int64_t k = tp[i * c + j];
      IGNIS_CHECK(k >= -1 && k < c, op, ": target ", k, " is out of range for ", c,
                  " classes (expected -1 to end a row, or 0 to ", c - 1, ")");
      if (k == -1) break;
      ++count[i];
    }
    s = std::max(s, count[i]);
  }
  std::vector<bool> valid(static_cast<size_t>(n * s), false),
      other(static_cast<size_t>(n * c), true);
  std::vector<int64_t> idx(static_cast<size_t>(n * s), 0);
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t j = 0; j < count[i]; ++j) {
      const int64_t k = tp[i * c + j];
      valid[i * s + j] = true;
      idx[i * s + j] = k;
      other[i * c + k] = false;
    }
  }
  const Tensor x = input.reshape({n, c});
  // z[i, j, k] = max(0, 1 - x[target j] + x[k]) over the row's targets j and non-targets k. The
  // other pairs are selected out (where), not multiplied by 0: a pair of infinities there gives
  // NaN, and a row whose classes are all targets has a loss of 0.
  const Tensor pair =
      logical_and(tensor(valid).reshape({n, s, 1}), tensor(other).reshape({n, 1, c}))
          .to(x.device());
  const Tensor idx_t = tensor(idx).reshape({n, s}).to(x.device());
  const Tensor xt = gather(x, 1, idx_t).unsqueeze(2);
  const Tensor z = where(pair, (1.0 - xt + x.unsqueeze(1)).clamp_min(0), 0.0);
  Tensor l = z.sum({1, 2}) / static_cast<double>(c);
  if (input.dim() == 1) l = l.reshape({});
  return reduce(l, reduction);
}

Tensor F::multilabel_margin_loss(const Tensor& input, const Tensor& target,
                                 const MultilabelMarginLossFuncOptions& o) {
  return F::multilabel_margin_loss(input, target, o.reduction());
}

// ---- soft_margin_loss, multilabel_soft_margin_loss

Tensor F::soft_margin_loss(const Tensor& input, const Tensor& target,
                           const std::string& reduction) {
  IGNIS_DISPATCH(soft_margin_loss, F::soft_margin_loss, input, target, reduction);
  constexpr const char* op = "soft_margin_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  broadcast_all(op, {{"input", &input}, {"target", &target}});
  // PyTorch's log1p(exp(-t x)) overflows to inf for -t x beyond ~88 in float32; this does not.
  return reduce(stable_softplus(-target * input), reduction);
}

Tensor F::soft_margin_loss(const Tensor& input, const Tensor& target,
                           const SoftMarginLossFuncOptions& o) {
  return F::soft_margin_loss(input, target, o.reduction());
}

Tensor F::multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                      const Tensor& weight, const std::string& reduction) {
  IGNIS_DISPATCH(multilabel_soft_margin_loss, F::multilabel_soft_margin_loss, input, target, weight,
                 reduction);
  constexpr const char* op = "multilabel_soft_margin_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  IGNIS_CHECK(input.dim() >= 1, op, ": expected an input [C] or [N, C], but got a 0-d input");
  IGNIS_CHECK(target.sizes().equals(input.sizes()), op, ": target of shape ", target.sizes(),
              " does not match input of shape ", input.sizes());
  const int64_t c = input.size(-1);
  if (weight.defined()) {
    Shape s = broadcast_all(op, {{"input", &input}, {"weight", &weight}});
    IGNIS_CHECK(input.sizes().equals(s), op, ": weight of shape ", weight.sizes(),
                " does not broadcast to the input shape ", input.sizes());
  }
  // -(t log sigmoid(x) + (1 - t) log sigmoid(-x)) = softplus(-x) + (1 - t) x.
  Tensor l = stable_softplus(-input) + (1.0 - target) * input;
  if (weight.defined()) l = l * weight;
  return reduce(l.sum({-1}) / static_cast<double>(c), reduction);
}

Tensor F::multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                      const MultilabelSoftMarginLossFuncOptions& o) {
  return F::multilabel_soft_margin_loss(input, target, o.weight(), o.reduction());
}

// ---- hinge_embedding_loss

Tensor F::hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                               const std::string& reduction) {
  IGNIS_DISPATCH(hinge_embedding_loss, F::hinge_embedding_loss, input, target, margin, reduction);
  constexpr const char* op = "hinge_embedding_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  broadcast_all(op, {{"input", &input}, {"target", &target}});
  // PyTorch's two terms: the margin term where target != 1, the input where target != -1.
  const Tensor margin_term = where(target != 1, (margin - input).clamp_min(0), 0.0);
  const Tensor self_term = where(target != -1, input, 0.0);
  return reduce(margin_term + self_term, reduction);
}

Tensor F::hinge_embedding_loss(const Tensor& input, const Tensor& target,
                               const HingeEmbeddingLossFuncOptions& o) {
  return F::hinge_embedding_loss(input, target, o.margin(), o.reduction());
}

// ---- triplet_margin_loss, cosine_embedding_loss

Tensor F::triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                              double margin, double p, double eps, bool swap,
                              const std::string& reduction) {
  IGNIS_DISPATCH(triplet_margin_loss, F::triplet_margin_loss, anchor, positive, negative, margin, p,
                 eps, swap, reduction);
  constexpr const char* op = "triplet_margin_loss";
  check_reduction(reduction, op);
  check_defined(op, {&anchor, &positive, &negative});
  check_floating(op, "anchor", anchor);
  IGNIS_CHECK(anchor.dim() == positive.dim() && anchor.dim() == negative.dim(), op, ": anchor ",
              anchor.sizes(), ", positive ", positive.sizes(), " and negative ", negative.sizes(),
              " must have the same number of dimensions");
  IGNIS_CHECK(anchor.dim() >= 1, op, ": expected inputs [D] or [N, D], but got 0-d inputs");
  IGNIS_CHECK(p > 0, op, ": p must be positive, got ", p);
  broadcast_all(op, {{"anchor", &anchor}, {"positive", &positive}, {"negative", &negative}});
  // PyTorch's pairwise_distance: ||x - y + eps||_p over the last dim.
  auto dist = [&](const Tensor& a, const Tensor& b) { return norm(a - b + eps, p, {-1}); };
  const Tensor d_pos = dist(anchor, positive);
  Tensor d_neg = dist(anchor, negative);
  if (swap) d_neg = minimum(d_neg, dist(positive, negative));
  return reduce((margin + d_pos - d_neg).clamp_min(0), reduction);
}

Tensor F::triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                              const TripletMarginLossFuncOptions& o) {
  return F::triplet_margin_loss(anchor, positive, negative, o.margin(), o.p(), o.eps(), o.swap(),
                                o.reduction());
}

Tensor F::cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                                double margin, const std::string& reduction) {
  IGNIS_DISPATCH(cosine_embedding_loss, F::cosine_embedding_loss, input1, input2, target, margin,
                 reduction);
  constexpr const char* op = "cosine_embedding_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input1, &input2, &target});
  check_floating(op, "input1", input1);
  IGNIS_CHECK(target.dim() <= 1, op, ": expected a 0-d or 1-d target, but got target of shape ",
              target.sizes());
  const int64_t want = target.dim() + 1;
  IGNIS_CHECK(input1.dim() == want && input2.dim() == want, op, ": a ", target.dim(),
              "-d target expects ", want, "-d inputs, but got input1 ", input1.sizes(),
              " and input2 ", input2.sizes());
  const Shape s = broadcast_all(op, {{"input1", &input1}, {"input2", &input2}});
  if (target.dim() == 1) {
    IGNIS_CHECK(target.size(0) == s[0] || target.size(0) == 1, op, ": target of shape ",
                target.sizes(), " does not match inputs input1 ", input1.sizes(), " and input2 ",
                input2.sizes(), " (expected one target per row)");
  }
  const int64_t d = target.dim();  // the feature dim
  constexpr double kEps = 1e-12;   // PyTorch's EPSILON
  const Tensor prod = (input1 * input2).sum({d});
  const Tensor mag1 = (input1 * input1).sum({d}) + kEps;
  const Tensor mag2 = (input2 * input2).sum({d}) + kEps;
  const Tensor cos = prod / sqrt(mag1 * mag2);
  const Tensor pos = where(target == 1, 1.0 - cos, 0.0);
  const Tensor neg = where(target == -1, (cos - margin).clamp_min(0), 0.0);
  return reduce(pos + neg, reduction);
}

Tensor F::cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                                const CosineEmbeddingLossFuncOptions& o) {
  return F::cosine_embedding_loss(input1, input2, target, o.margin(), o.reduction());
}

// ---- poisson_nll_loss, gaussian_nll_loss

Tensor F::poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                           double eps, const std::string& reduction) {
  IGNIS_DISPATCH(poisson_nll_loss, F::poisson_nll_loss, input, target, log_input, full, eps,
                 reduction);
  constexpr const char* op = "poisson_nll_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target});
  check_floating(op, "input", input);
  broadcast_all(op, {{"input", &input}, {"target", &target}});
  Tensor l = log_input ? exp(input) - target * input : input - target * log(input + eps);
  if (full) {
    // Stirling's approximation of log(t!), added where t > 1. Computed on a target that is 1
    // elsewhere, so that the masked elements give neither NaN values nor NaN gradients.
    Tensor big;
    {
      NoGradGuard ng;
      big = target > 1;
    }
    const Tensor t = where(big, target, 1.0);
    const Tensor stirling = t * log(t) - t + 0.5 * log(2 * M_PI * t);
    l = l + where(big, stirling, 0.0);
  }
  return reduce(l, reduction);
}

Tensor F::poisson_nll_loss(const Tensor& input, const Tensor& target,
                           const PoissonNLLLossFuncOptions& o) {
  return F::poisson_nll_loss(input, target, o.log_input(), o.full(), o.eps(), o.reduction());
}

Tensor F::gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full,
                            double eps, const std::string& reduction) {
  IGNIS_DISPATCH(gaussian_nll_loss, F::gaussian_nll_loss, input, target, var, full, eps, reduction);
  constexpr const char* op = "gaussian_nll_loss";
  check_reduction(reduction, op);
  check_defined(op, {&input, &target, &var});
  check_floating(op, "input", input);
  check_floating(op, "var", var);
  // PyTorch's rules: var of input's shape (heteroscedastic), or of input's shape without its
  // last dim or with 1 there (homoscedastic along it).
  Tensor v = var;
  if (!var.sizes().equals(input.sizes())) {
    Shape lead = input.sizes().shape();
    if (!lead.empty()) lead.pop_back();
    if (input.dim() >= 1 && var.sizes().equals(lead)) {
      v = var.unsqueeze(-1);
    } else {
      Shape var_lead = var.sizes().shape();
      if (!var_lead.empty()) var_lead.pop_back();
      IGNIS_CHECK(input.dim() >= 1 && var.dim() == input.dim() && var.size(-1) == 1 &&
                      IntArrayRef(var_lead).equals(lead),
                  op, ": var of shape ", var.sizes(), " does not match input of shape ",
                  input.sizes(),
                  " (expected the input's shape, or it without the last dim or "
                  "with 1 there)");
    }
  }
  broadcast_all(op, {{"input", &input}, {"target", &target}});
  if (v.numel() > 0) {
    NoGradGuard ng;
    IGNIS_CHECK(!(v < 0).any().item<bool>(), op, ": var of shape ", var.sizes(),
                " has negative entries");
  }
  // Clamped for stability; the clamp is PyTorch's in-place one under no_grad, so var's gradient
  // passes straight through it (evaluated at the clamped value).
  Tensor delta;
  {
    NoGradGuard ng;
    delta = v.clamp_min(eps) - v;
  }
  v = v + delta;
  const Tensor d = input - target;
  Tensor l = 0.5 * (log(v) + d * d / v);
  if (full) l = l + 0.5 * std::log(2 * M_PI);
  return reduce(l, reduction);
}

Tensor F::gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                            const GaussianNLLLossFuncOptions& o) {
  return F::gaussian_nll_loss(input, target, var, o.full(), o.eps(), o.reduction());
}

// ---- modules

#define LOSS2_MODULE(Name, call)                                                     \
  Name::Name(Name##Options o) : Loss(o.reduction(), #Name), options(std::move(o)) {} \
  Tensor Name::forward(const Tensor& input, const Tensor& target) { return call; }

LOSS2_MODULE(MultiLabelMarginLoss, F::multilabel_margin_loss(input, target, options))
LOSS2_MODULE(SoftMarginLoss, F::soft_margin_loss(input, target, options))
LOSS2_MODULE(HingeEmbeddingLoss, F::hinge_embedding_loss(input, target, options))
LOSS2_MODULE(PoissonNLLLoss, F::poisson_nll_loss(input, target, options))
#undef LOSS2_MODULE

MultiMarginLoss::MultiMarginLoss(MultiMarginLossOptions o)
    : Loss(o.reduction(), "MultiMarginLoss"), options(std::move(o)) {
  IGNIS_CHECK(options.p() == 1 || options.p() == 2, "MultiMarginLoss: p must be 1 or 2, got ",
              options.p());
  if (options.weight().defined()) register_buffer("weight", options.weight());
}
Tensor MultiMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return F::multi_margin_loss(input, target, options);
}

MultiLabelSoftMarginLoss::MultiLabelSoftMarginLoss(MultiLabelSoftMarginLossOptions o)
    : Loss(o.reduction(), "MultiLabelSoftMarginLoss"), options(std::move(o)) {
  if (options.weight().defined()) register_buffer("weight", options.weight());
}
Tensor MultiLabelSoftMarginLoss::forward(const Tensor& input, const Tensor& target) {
  return F::multilabel_soft_margin_loss(input, target, options);
}

#define LOSS3_MODULE(Name, A, B, C, repr)                                   \
  Name::Name(Name##Options o) : options(std::move(o)) {                     \
    check_reduction(options.reduction(), #Name);                            \
  }                                                                         \
  std::string Name::extra_repr() const {                                    \
    std::ostringstream s;                                                   \
    s << repr << "reduction='" << options.reduction() << "'";               \
    return s.str();                                                         \
  }                                                                         \
  Tensor Name::forward(const Tensor& A, const Tensor& B, const Tensor& C) { \
    return call3(A, B, C, options);                                         \
  }

namespace {
// The three-tensor modules' calls, by options type.
Tensor call3(const Tensor& a, const Tensor& b, const Tensor& c, const MarginRankingLossOptions& o) {
  return F::margin_ranking_loss(a, b, c, o);
}
Tensor call3(const Tensor& a, const Tensor& b, const Tensor& c, const TripletMarginLossOptions& o) {
  return F::triplet_margin_loss(a, b, c, o);
}
Tensor call3(const Tensor& a, const Tensor& b, const Tensor& c,
             const CosineEmbeddingLossOptions& o) {
  return F::cosine_embedding_loss(a, b, c, o);
}
Tensor call3(const Tensor& a, const Tensor& b, const Tensor& c, const GaussianNLLLossOptions& o) {
  return F::gaussian_nll_loss(a, b, c, o);
}
}  // namespace

LOSS3_MODULE(MarginRankingLoss, input1, input2, target, "margin=" << options.margin() << ", ")
LOSS3_MODULE(TripletMarginLoss, anchor, positive, negative,
             "margin=" << options.margin() << ", p=" << options.p() << ", eps=" << options.eps()
                       << ", swap=" << (options.swap() ? "true" : "false") << ", ")
LOSS3_MODULE(CosineEmbeddingLoss, input1, input2, target, "margin=" << options.margin() << ", ")
LOSS3_MODULE(GaussianNLLLoss, input, target, var,
             "full=" << (options.full() ? "true" : "false") << ", eps=" << options.eps() << ", ")
#undef LOSS3_MODULE

}  // namespace ignis::nn
