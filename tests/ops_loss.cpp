// Op-table entries of the losses (nn::functional's and binary_cross_entropy_with_logits), one per
// loss and reduction. Class-index targets are int64 inputs (kept as they are by the driver, never
// differentiated). The references are plain float64 loops over row-major values.
#include <algorithm>
#include <cmath>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;
namespace F = nn::functional;

const std::vector<DType> kFloats = {kFloat32, kFloat64};

Tensor in(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2) {
  return make_input(shape, seed, lo, hi);
}
Tensor ints(std::vector<int64_t> v, IntArrayRef shape) { return tensor(v).reshape(shape); }

/// Per-element losses reduced as `reduction` says ("batchmean": the sum over the batch size).
Tensor reduce_ref(const Tensor& l, const std::string& reduction, int64_t batch = 1) {
  if (reduction == "none") return l;
  const Values v = values(l);
  double s = 0;
  for (double e : v) s += e;
  if (reduction == "mean") s /= static_cast<double>(v.size());
  if (reduction == "batchmean") s /= static_cast<double>(batch);
  return from_values({s}, {});
}

/// An entry for a loss of (input, target[, weight...]) at one reduction; the first one ("mean",
/// the default) is named after the op, the others after the op and the reduction.
OpInfo loss_entry(const std::string& op, const std::string& reduction,
                  std::function<Tensor(const TL&, const std::string&)> fn,
                  std::function<Tensor(const TL&, const std::string&)> ref,
                  std::function<std::vector<OpSample>()> samples) {
  OpInfo o;
  o.name = reduction == "mean" ? op : op + "(" + reduction + ")";
  o.fn = [fn, reduction](const TL& x) { return fn(x, reduction); };
  o.ref = [ref, reduction](const TL& x) { return ref(x, reduction); };
  o.samples = std::move(samples);
  o.dtypes = kFloats;
  o.atol32 = 1e-4;
  o.rtol32 = 1e-4;
  o.grad_inputs = {0, 1};
  o.ops = {op};
  if (op == "binary_cross_entropy") {
    o.meta_skip =
        "reads the input on the host to check it lies in [0, 1] (a documented sync point)";
  }
  return o;
}

using LossFn = std::function<Tensor(const TL&, const std::string&)>;

// ---- pointwise regression losses (input and target of one shape)

std::vector<OpSample> pair_samples() {
  return {
      {"[3, 4]", {in({3, 4}, 1), in({3, 4}, 2)}},
      {"0-d", {in({}, 3), in({}, 4)}},
      {"[2, 3, 2]", {in({2, 3, 2}, 5), in({2, 3, 2}, 6)}},
      {"noncontiguous", {make_noncontiguous({3, 4}, 7), make_noncontiguous({3, 4}, 8)}},
      {"empty", {in({0, 3}, 9), in({0, 3}, 10)}},
  };
}

/// Per-element f(input - target) as a tensor of input's shape, reduced.
Tensor ref_pointwise(const TL& x, const std::string& reduction, double (*f)(double, double),
                     double param) {
  return reduce_ref(
      ref_elementwise({x[0], x[1]}, [&](const Values& v) { return f(v[0] - v[1], param); }),
      reduction);
}

double squared(double d, double) { return d * d; }
double absolute(double d, double) { return std::abs(d); }
double smooth_l1(double d, double beta) {
  const double a = std::abs(d);
  return a < beta ? 0.5 * a * a / beta : a - 0.5 * beta;
}
double huber(double d, double delta) {
  const double a = std::abs(d);
  return a <= delta ? 0.5 * a * a : delta * (a - 0.5 * delta);
}

const LossFn mse_loss_fn = [](const TL& x, const std::string& r) {
  return F::mse_loss(x[0], x[1], r);
};
const LossFn mse_loss_ref = [](const TL& x, const std::string& r) {
  return ref_pointwise(x, r, squared, 0);
};
IGNIS_OP_INFO(loss_entry("mse_loss", "mean", mse_loss_fn, mse_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("mse_loss", "sum", mse_loss_fn, mse_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("mse_loss", "none", mse_loss_fn, mse_loss_ref, pair_samples));

const LossFn l1_loss_fn = [](const TL& x, const std::string& r) {
  return F::l1_loss(x[0], x[1], r);
};
const LossFn l1_loss_ref = [](const TL& x, const std::string& r) {
  return ref_pointwise(x, r, absolute, 0);
};
IGNIS_OP_INFO(loss_entry("l1_loss", "mean", l1_loss_fn, l1_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("l1_loss", "sum", l1_loss_fn, l1_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("l1_loss", "none", l1_loss_fn, l1_loss_ref, pair_samples));

const LossFn smooth_l1_loss_fn = [](const TL& x, const std::string& r) {
  return F::smooth_l1_loss(x[0], x[1], r, 0.7);
};
const LossFn smooth_l1_loss_ref = [](const TL& x, const std::string& r) {
  return ref_pointwise(x, r, smooth_l1, 0.7);
};
IGNIS_OP_INFO(loss_entry("smooth_l1_loss", "mean", smooth_l1_loss_fn, smooth_l1_loss_ref,
                         pair_samples));
IGNIS_OP_INFO(loss_entry("smooth_l1_loss", "sum", smooth_l1_loss_fn, smooth_l1_loss_ref,
                         pair_samples));
IGNIS_OP_INFO(loss_entry("smooth_l1_loss", "none", smooth_l1_loss_fn, smooth_l1_loss_ref,
                         pair_samples));

const LossFn huber_loss_fn = [](const TL& x, const std::string& r) {
  return F::huber_loss(x[0], x[1], r, 1.3);
};
const LossFn huber_loss_ref = [](const TL& x, const std::string& r) {
  return ref_pointwise(x, r, huber, 1.3);
};
IGNIS_OP_INFO(loss_entry("huber_loss", "mean", huber_loss_fn, huber_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("huber_loss", "sum", huber_loss_fn, huber_loss_ref, pair_samples));
IGNIS_OP_INFO(loss_entry("huber_loss", "none", huber_loss_fn, huber_loss_ref, pair_samples));

// ---- binary cross entropy (probabilities) and with logits

std::vector<OpSample> bce_samples() {
  auto p = [](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed, 0.05, 0.95); };
  return {
      {"[3, 4]", {p({3, 4}, 11), p({3, 4}, 12)}},
      {"0-d", {p({}, 13), p({}, 14)}},
      {"weight broadcast", {p({2, 3}, 15), p({2, 3}, 16), in({3}, 17, 0.5, 2)}},
      {"noncontiguous", {p({4, 3}, 18).t(), make_noncontiguous({3, 4}, 19, 0, 1)}},
      {"empty", {p({0, 3}, 20), p({0, 3}, 21)}},
  };
}

Tensor ref_bce(const TL& x, const std::string& r) {
  TL args = {x[0], x[1]};
  const bool w = x.size() > 2;
  if (w) args.push_back(x[2]);
  return reduce_ref(
      ref_elementwise(args,
                      [&](const Values& v) {
                        const double l = -(v[1] * std::log(v[0]) + (1 - v[1]) * std::log(1 - v[0]));
                        return w ? l * v[2] : l;
                      }),
      r);
}

const LossFn binary_cross_entropy_fn = [](const TL& x, const std::string& r) {
  return F::binary_cross_entropy(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), r);
};
const LossFn binary_cross_entropy_ref = ref_bce;
IGNIS_OP_INFO(loss_entry("binary_cross_entropy", "mean", binary_cross_entropy_fn,
                         binary_cross_entropy_ref, bce_samples));
IGNIS_OP_INFO(loss_entry("binary_cross_entropy", "sum", binary_cross_entropy_fn,
                         binary_cross_entropy_ref, bce_samples));
IGNIS_OP_INFO(loss_entry("binary_cross_entropy", "none", binary_cross_entropy_fn,
                         binary_cross_entropy_ref, bce_samples));

std::vector<OpSample> bce_logits_samples() {
  auto p = [](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed, 0, 1); };
  return {
      {"[3, 4]", {in({3, 4}, 31), p({3, 4}, 32)}},
      {"0-d", {in({}, 33), p({}, 34)}},
      {"large logits", {from_values({30, -30, 0.5, -1.5}, {4}), p({4}, 35)}},
      {"weight and pos_weight",
       {in({2, 3}, 36), p({2, 3}, 37), in({3}, 38, 0.5, 2), in({3}, 39, 0.5, 3)}},
      {"noncontiguous", {in({4, 3}, 40).t(), make_noncontiguous({3, 4}, 41, 0, 1)}},
      {"empty", {in({0, 3}, 42), p({0, 3}, 43)}},
  };
}

// -w (pw t log(sigmoid(x)) + (1 - t) log(1 - sigmoid(x))), with log sigmoid(x) = -softplus(-x).
Tensor ref_bce_logits(const TL& x, const std::string& r) {
  TL args = {x[0], x[1]};
  const bool w = x.size() > 2;
  if (w) args.insert(args.end(), {x[2], x[3]});
  auto softplus = [](double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); };
  return reduce_ref(ref_elementwise(args,
                                    [&](const Values& v) {
                                      const double pw = w ? v[3] : 1.0;
                                      const double l =
                                          pw * v[1] * softplus(-v[0]) + (1 - v[1]) * softplus(v[0]);
                                      return w ? l * v[2] : l;
                                    }),
                    r);
}

const LossFn binary_cross_entropy_with_logits_fn = [](const TL& x, const std::string& r) {
  return x.size() > 2 ? binary_cross_entropy_with_logits(x[0], x[1], x[2], x[3], r)
                      : binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Tensor(), r);
};
const LossFn binary_cross_entropy_with_logits_ref = ref_bce_logits;
IGNIS_OP_INFO(loss_entry("binary_cross_entropy_with_logits", "mean",
                         binary_cross_entropy_with_logits_fn, binary_cross_entropy_with_logits_ref,
                         bce_logits_samples));
IGNIS_OP_INFO(loss_entry("binary_cross_entropy_with_logits", "sum",
                         binary_cross_entropy_with_logits_fn, binary_cross_entropy_with_logits_ref,
                         bce_logits_samples));
IGNIS_OP_INFO(loss_entry("binary_cross_entropy_with_logits", "none",
                         binary_cross_entropy_with_logits_fn, binary_cross_entropy_with_logits_ref,
                         bce_logits_samples));

// ---- kl_div (input log-probabilities; target probabilities, or log-probabilities)

std::vector<OpSample> kl_samples() {
  return {
      {"[3, 4]", {in({3, 4}, 51), in({3, 4}, 52, 0.1, 1)}},
      {"target zeros", {in({2, 3}, 53), from_values({0, 0.5, 0.2, 0, 1, 0.3}, {2, 3})}},
      {"0-d", {in({}, 54), in({}, 55, 0.1, 1)}},
      {"noncontiguous", {make_noncontiguous({3, 4}, 56), make_noncontiguous({3, 4}, 57, 0.1, 1)}},
      {"empty", {in({0, 3}, 58), in({0, 3}, 59, 0.1, 1)}},
  };
}

Tensor ref_kl(const TL& x, const std::string& r, bool log_target) {
  Tensor l = ref_elementwise({x[0], x[1]}, [&](const Values& v) {
    if (log_target) return std::exp(v[1]) * (v[1] - v[0]);
    return v[1] > 0 ? v[1] * (std::log(v[1]) - v[0]) : 0.0;
  });
  return reduce_ref(l, r, x[0].dim() == 0 ? 1 : x[0].size(0));
}

OpInfo kl_entry(const std::string& reduction, bool log_target) {
  OpInfo o = loss_entry(
      "kl_div", reduction,
      [log_target](const TL& x, const std::string& r) {
        return F::kl_div(x[0], x[1], r, log_target);
      },
      [log_target](const TL& x, const std::string& r) { return ref_kl(x, r, log_target); },
      kl_samples);
  if (log_target) o.name = "kl_div(" + reduction + ", log_target)";
  // The target is differentiated only where it is positive (xlogy has no derivative at 0).
  o.grad_inputs = log_target ? std::vector<size_t>{0, 1} : std::vector<size_t>{0};
  return o;
}

IGNIS_OP_INFO(kl_entry("mean", false));
IGNIS_OP_INFO(kl_entry("sum", false));
IGNIS_OP_INFO(kl_entry("none", false));
IGNIS_OP_INFO(kl_entry("batchmean", false));
IGNIS_OP_INFO(kl_entry("batchmean", true));

// ---- nll_loss and cross_entropy (class-index or probability targets)

/// The dims of input [N, C, d...] (or [C]) as N, C and the inner size.
struct ClassDims {
  int64_t n, c, inner;
};
ClassDims class_dims(const Tensor& x) {
  if (x.dim() == 1) return {1, x.size(0), 1};
  int64_t inner = 1;
  for (int64_t d = 2; d < x.dim(); ++d) inner *= x.size(d);
  return {x.size(0), x.size(1), inner};
}

/// Class scores per (n, i): s[n][c][i] row-major as values of x.
double at(const Values& v, const ClassDims& d, int64_t n, int64_t c, int64_t i) {
  return v[static_cast<size_t>((n * d.c + c) * d.inner + i)];
}

/// Per-target losses -(1 - eps) w[t] lp[t] - eps / C sum_c w[c] lp[c] (0 for ignore_index), of
/// target's shape, reduced ("mean" divides by the summed weights of the counted targets).
/// log_softmax: lp are the log-softmax of the scores (cross_entropy) or the scores (nll_loss).
Tensor ref_class_loss(const TL& x, const std::string& r, bool log_softmax, int64_t ignore,
                      double eps) {
  const ClassDims d = class_dims(x[0]);
  const Values v = values(x[0]);
  const Tensor t = x[1].contiguous();
  const Values w = x.size() > 2 ? values(x[2]) : Values(static_cast<size_t>(d.c), 1.0);
  Values out;
  double wsum = 0;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t i = 0; i < d.inner; ++i) {
      Values lp(static_cast<size_t>(d.c));
      double mx = -INFINITY, se = 0;
      for (int64_t c = 0; c < d.c; ++c) mx = std::max(mx, at(v, d, n, c, i));
      for (int64_t c = 0; c < d.c; ++c) se += std::exp(at(v, d, n, c, i) - mx);
      for (int64_t c = 0; c < d.c; ++c) {
        lp[c] = log_softmax ? at(v, d, n, c, i) - mx - std::log(se) : at(v, d, n, c, i);
      }
      const int64_t k = t.data_ptr<int64_t>()[n * d.inner + i];
      if (k == ignore) {
        out.push_back(0);
        continue;
      }
      double smooth = 0;
      for (int64_t c = 0; c < d.c; ++c) smooth -= w[c] * lp[c];
      out.push_back(-(1 - eps) * w[k] * lp[k] + eps / static_cast<double>(d.c) * smooth);
      wsum += w[k];
    }
  }
  const Tensor l = from_values(out, x[1].sizes());
  if (r != "mean") return reduce_ref(l, r);
  double s = 0;
  for (double e : out) s += e;
  return from_values({s / wsum}, {});
}

std::vector<OpSample> class_samples() {
  return {
      {"[4, 3]", {in({4, 3}, 61), ints({2, 0, 1, 2}, {4})}},
      {"unbatched [5]", {in({5}, 62), ints({3}, {})}},
      {"[2, 3, 2] spatial", {in({2, 3, 2}, 63), ints({0, 2, 1, 1}, {2, 2})}},
      {"ignore_index", {in({4, 3}, 64), ints({1, -100, 0, 2}, {4})}},
      {"class weights", {in({4, 3}, 65), ints({2, 0, 1, 1}, {4}), in({3}, 66, 0.5, 2)}},
      {"class weights, ignore_index",
       {in({3, 4}, 67), ints({3, -100, 0}, {3}), in({4}, 68, 0.5, 2)}},
      {"noncontiguous", {make_noncontiguous({4, 3}, 69), ints({0, 1, 2, 0}, {4})}},
  };
}

Tensor optional_weight(const TL& x) { return x.size() > 2 ? x[2] : Tensor(); }

OpInfo class_entry(const std::string& op, const std::string& reduction, double eps) {
  const bool ce = op == "cross_entropy_loss";
  OpInfo o = loss_entry(
      op, reduction,
      [ce, eps](const TL& x, const std::string& r) {
        return ce ? F::cross_entropy(x[0], x[1], optional_weight(x), -100, r, eps)
                  : F::nll_loss(x[0], x[1], optional_weight(x), -100, r);
      },
      [ce, eps](const TL& x, const std::string& r) { return ref_class_loss(x, r, ce, -100, eps); },
      class_samples);
  if (eps > 0) o.name = op + "(" + reduction + ", label_smoothing)";
  o.grad_inputs = {0};
  o.meta_skip = "reads the targets on the host to check their range (a documented sync point)";
  return o;
}

IGNIS_OP_INFO(class_entry("nll_loss", "mean", 0));
IGNIS_OP_INFO(class_entry("nll_loss", "sum", 0));
IGNIS_OP_INFO(class_entry("nll_loss", "none", 0));
IGNIS_OP_INFO(class_entry("cross_entropy_loss", "mean", 0));
IGNIS_OP_INFO(class_entry("cross_entropy_loss", "sum", 0));
IGNIS_OP_INFO(class_entry("cross_entropy_loss", "none", 0));
IGNIS_OP_INFO(class_entry("cross_entropy_loss", "mean", 0.2));
IGNIS_OP_INFO(class_entry("cross_entropy_loss", "none", 0.2));

// Probability targets: -sum_c w[c] t'[c] lp[c], t' = (1 - eps) t + eps / C, mean over targets.
Tensor ref_prob_ce(const TL& x, const std::string& r, double eps) {
  const ClassDims d = class_dims(x[0]);
  const Values v = values(x[0]), t = values(x[1]);
  const Values w = x.size() > 2 ? values(x[2]) : Values(static_cast<size_t>(d.c), 1.0);
  Values out;
  for (int64_t n = 0; n < d.n; ++n) {
    for (int64_t i = 0; i < d.inner; ++i) {
      double mx = -INFINITY, se = 0, l = 0;
      for (int64_t c = 0; c < d.c; ++c) mx = std::max(mx, at(v, d, n, c, i));
      for (int64_t c = 0; c < d.c; ++c) se += std::exp(at(v, d, n, c, i) - mx);
      for (int64_t c = 0; c < d.c; ++c) {
        const double tc = (1 - eps) * at(t, d, n, c, i) + eps / static_cast<double>(d.c);
        l -= w[c] * tc * (at(v, d, n, c, i) - mx - std::log(se));
      }
      out.push_back(l);
    }
  }
  Shape shape = x[0].sizes().shape();
  shape.erase(shape.begin() + (x[0].dim() == 1 ? 0 : 1));
  return reduce_ref(from_values(out, shape), r);
}

OpInfo prob_entry(const std::string& reduction, double eps) {
  OpInfo o = loss_entry(
      "cross_entropy_loss", reduction,
      [eps](const TL& x, const std::string& r) {
        return F::cross_entropy(x[0], x[1], optional_weight(x), -100, r, eps);
      },
      [eps](const TL& x, const std::string& r) { return ref_prob_ce(x, r, eps); },
      [] {
        auto p = [](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed, 0, 1); };
        return std::vector<OpSample>{
            {"[4, 3]", {in({4, 3}, 71), p({4, 3}, 72)}},
            {"unbatched [5]", {in({5}, 73), p({5}, 74)}},
            {"[2, 3, 2] spatial", {in({2, 3, 2}, 75), p({2, 3, 2}, 76)}},
            {"class weights", {in({4, 3}, 77), p({4, 3}, 78), in({3}, 79, 0.5, 2)}},
            {"noncontiguous",
             {make_noncontiguous({4, 3}, 80), make_noncontiguous({4, 3}, 81, 0, 1)}},
        };
      });
  o.name = "cross_entropy_loss(" + reduction + ", probabilities" + (eps > 0 ? ", smoothed)" : ")");
  return o;
}

IGNIS_OP_INFO(prob_entry("mean", 0));
IGNIS_OP_INFO(prob_entry("none", 0));
IGNIS_OP_INFO(prob_entry("sum", 0.1));

}  // namespace
}  // namespace ignis::testing
