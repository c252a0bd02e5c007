// Every loss of ignis/nn/loss.h with reductions none/mean/sum against float64 hand computations
// of the formulas PyTorch documents, float64 gradchecks, error messages, and gradient clipping.
#include <cmath>
#include <limits>
#include <optional>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::expect_values;
using ignis::testing_util::to_vec;
using ::testing::HasSubstr;
namespace F = ignis::nn::functional;

namespace {

constexpr double kTol = 1e-12;  // float64 losses against float64 references

double sum_of(const std::vector<double>& v) {
  double s = 0;
  for (double x : v) s += x;
  return s;
}
double mean_of(const std::vector<double>& v) { return sum_of(v) / static_cast<double>(v.size()); }

// Checks loss(reduction) for none, mean and sum against per-element values `none`.
void check_reductions(const std::function<Tensor(const std::string&)>& loss,
                      const std::vector<double>& none, const std::string& what, double tol = kTol) {
  expect_values(loss("none"), none, tol, tol, what + " none");
  EXPECT_EQ(loss("mean").dim(), 0) << what;
  EXPECT_NEAR(loss("mean").item<double>(), mean_of(none), tol) << what << " mean";
  EXPECT_NEAR(loss("sum").item<double>(), sum_of(none), tol) << what << " sum";
}

// Element-wise inputs/targets used by the regression losses (float64, [2, 3]).
Tensor reg_input() { return tensor({{0.5, -1.25, 3.0}, {2.0, 0.1, -0.4}}, kFloat64); }
Tensor reg_target() { return tensor({{1.0, -1.0, 0.0}, {2.3, 2.1, -0.4}}, kFloat64); }
std::vector<double> diffs() {
  std::vector<double> a = to_vec(reg_input()), b = to_vec(reg_target()), d;
  for (size_t i = 0; i < a.size(); ++i) d.push_back(a[i] - b[i]);
  return d;
}

// Classification fixture: logits [3, 4].
const std::vector<std::vector<double>> kLogits = {
    {0.2, -1.0, 2.0, 0.5}, {1.5, 0.3, -0.7, 0.0}, {-2.0, 1.0, 0.1, 3.0}};
Tensor logits() {
  return tensor({{0.2, -1.0, 2.0, 0.5}, {1.5, 0.3, -0.7, 0.0}, {-2.0, 1.0, 0.1, 3.0}}, kFloat64);
}
std::vector<std::vector<double>> log_probs(const std::vector<std::vector<double>>& x) {
  std::vector<std::vector<double>> out;
  for (const auto& row : x) {
    double z = 0;
    for (double v : row) z += std::exp(v);
    std::vector<double> r;
    for (double v : row) r.push_back(v - std::log(z));
    out.push_back(r);
  }
  return out;
}

struct Reduced {
  std::vector<double> none;
  double sum = 0;
  double mean = 0;
};

// PyTorch's documented cross entropy for class indices, with class weights, ignore_index and
// label smoothing eps: l_n = (1 - eps) * (-w_{y_n} logp_{n,y_n}) + eps / C * sum_c (-w_c
// logp_{n,c}) for non-ignored n (0 otherwise); 'mean' divides the sum by sum_n w_{y_n} over
// non-ignored n.
Reduced ce_indices_ref(const std::vector<std::vector<double>>& logp, const std::vector<int>& y,
                       const std::vector<double>& w, int ignore, double eps) {
  Reduced r;
  double denom = 0;
  const double c = static_cast<double>(logp[0].size());
  for (size_t n = 0; n < y.size(); ++n) {
    if (y[n] == ignore) {
      r.none.push_back(0);
      continue;
    }
    const double wy = w.empty() ? 1.0 : w[static_cast<size_t>(y[n])];
    double smooth = 0;
    for (size_t k = 0; k < logp[n].size(); ++k) smooth -= (w.empty() ? 1.0 : w[k]) * logp[n][k];
    r.none.push_back((1 - eps) * -wy * logp[n][static_cast<size_t>(y[n])] + eps / c * smooth);
    denom += wy;
  }
  r.sum = sum_of(r.none);
  r.mean = r.sum / denom;
  return r;
}

void expect_reduced(const std::function<Tensor(const std::string&)>& loss, const Reduced& want,
                    const std::string& what) {
  expect_values(loss("none"), want.none, kTol, kTol, what + " none");
  EXPECT_NEAR(loss("sum").item<double>(), want.sum, kTol) << what << " sum";
  EXPECT_NEAR(loss("mean").item<double>(), want.mean, kTol) << what << " mean";
}

bool grad_ok(const std::function<Tensor(const Tensor&)>& f, const Tensor& x) {
  return autograd::gradcheck(
      [&](const autograd::variable_list& in) { return autograd::variable_list{f(in[0])}; },
      {x.detach().clone().requires_grad_()});
}

}  // namespace

// ---- regression losses

TEST(Losses, MSEAndL1) {
  std::vector<double> sq, ab;
  for (double d : diffs()) {
    sq.push_back(d * d);
    ab.push_back(std::abs(d));
  }
  check_reductions([](const std::string& r) { return F::mse_loss(reg_input(), reg_target(), r); },
                   sq, "mse");
  check_reductions([](const std::string& r) { return F::l1_loss(reg_input(), reg_target(), r); },
                   ab, "l1");
  check_reductions([](const std::string& r) { return nn::MSELoss(r)(reg_input(), reg_target()); },
                   sq, "MSELoss");
  check_reductions([](const std::string& r) { return nn::L1Loss(r)(reg_input(), reg_target()); },
                   ab, "L1Loss");
  // Default reduction is mean; float32 inputs give float32 losses.
  EXPECT_NEAR(nn::MSELoss()(reg_input().to(kFloat32), reg_target().to(kFloat32)).item<double>(),
              mean_of(sq), 1e-6);
  EXPECT_EQ(F::mse_loss(reg_input().to(kFloat32), reg_target().to(kFloat32)).dtype(), kFloat32);
}

TEST(Losses, SmoothL1WithBetaAndHuberWithDelta) {
  for (double beta : {1.0, 0.5, 2.5}) {
    std::vector<double> want;
    for (double d : diffs()) {
      const double a = std::abs(d);
      want.push_back(a < beta ? 0.5 * a * a / beta : a - 0.5 * beta);
    }
    check_reductions(
        [&](const std::string& r) { return F::smooth_l1_loss(reg_input(), reg_target(), r, beta); },
        want, "smooth_l1 beta " + std::to_string(beta));
    check_reductions(
        [&](const std::string& r) { return nn::SmoothL1Loss(r, beta)(reg_input(), reg_target()); },
        want, "SmoothL1Loss");
  }
  // beta = 0 is the L1 loss.
  std::vector<double> ab;
  for (double d : diffs()) ab.push_back(std::abs(d));
  check_reductions(
      [&](const std::string& r) { return F::smooth_l1_loss(reg_input(), reg_target(), r, 0.0); },
      ab, "smooth_l1 beta 0");
  for (double delta : {1.0, 0.3, 2.5}) {
    std::vector<double> want;
    for (double d : diffs()) {
      const double a = std::abs(d);
      want.push_back(a <= delta ? 0.5 * a * a : delta * (a - 0.5 * delta));
    }
    check_reductions(
        [&](const std::string& r) { return F::huber_loss(reg_input(), reg_target(), r, delta); },
        want, "huber delta " + std::to_string(delta));
    check_reductions(
        [&](const std::string& r) { return nn::HuberLoss(r, delta)(reg_input(), reg_target()); },
        want, "HuberLoss");
  }
  // Huber(delta) = delta * SmoothL1(beta = delta).
  EXPECT_NEAR(F::huber_loss(reg_input(), reg_target(), "sum", 0.7).item<double>(),
              0.7 * F::smooth_l1_loss(reg_input(), reg_target(), "sum", 0.7).item<double>(), kTol);
  EXPECT_THAT(error_of([] { F::smooth_l1_loss(reg_input(), reg_target(), "mean", -1); }),
              HasSubstr("smooth_l1_loss: beta must be non-negative, got -1"));
  EXPECT_THAT(error_of([] { F::huber_loss(reg_input(), reg_target(), "mean", 0); }),
              HasSubstr("huber_loss: delta must be positive, got 0"));
}

// ---- classification losses

TEST(Losses, CrossEntropyWithClassIndices) {
  const auto lp = log_probs(kLogits);
  const Tensor y = tensor({2, 0, 3});
  expect_reduced([&](const std::string& r) { return F::cross_entropy(logits(), y, {}, -100, r); },
                 ce_indices_ref(lp, {2, 0, 3}, {}, -100, 0), "ce");
  const std::vector<double> w = {1.0, 2.0, 0.5, 1.5};
  const Tensor wt = tensor(w, kFloat64);
  expect_reduced([&](const std::string& r) { return F::cross_entropy(logits(), y, wt, -100, r); },
                 ce_indices_ref(lp, {2, 0, 3}, w, -100, 0), "ce weight");
  // ignore_index: the ignored sample gives 0 and leaves the mean's denominator.
  const Tensor yi = tensor({2, 1, 3});
  expect_reduced([&](const std::string& r) { return F::cross_entropy(logits(), yi, wt, 1, r); },
                 ce_indices_ref(lp, {2, 1, 3}, w, 1, 0), "ce ignore_index");
  const Tensor yd = tensor({2, -100, 3});
  expect_reduced([&](const std::string& r) { return F::cross_entropy(logits(), yd, {}, -100, r); },
                 ce_indices_ref(lp, {2, -100, 3}, {}, -100, 0), "ce default ignore_index");
  // Label smoothing, alone and with weights and ignore_index.
  for (double eps : {0.1, 0.35}) {
    expect_reduced(
        [&](const std::string& r) { return F::cross_entropy(logits(), y, {}, -100, r, eps); },
        ce_indices_ref(lp, {2, 0, 3}, {}, -100, eps), "ce smoothing");
    expect_reduced(
        [&](const std::string& r) { return F::cross_entropy(logits(), yi, wt, 1, r, eps); },
        ce_indices_ref(lp, {2, 1, 3}, w, 1, eps), "ce smoothing weight ignore");
  }
  // The module form.
  nn::CrossEntropyLoss ce(
      {.weight = wt, .ignore_index = 1, .reduction = "sum", .label_smoothing = 0.2});
  EXPECT_NEAR(ce(logits(), yi).item<double>(), ce_indices_ref(lp, {2, 1, 3}, w, 1, 0.2).sum, kTol);
  EXPECT_NEAR(nn::CrossEntropyLoss()(logits(), y).item<double>(),
              ce_indices_ref(lp, {2, 0, 3}, {}, -100, 0).mean, kTol);
  // int32 targets are accepted.
  EXPECT_NEAR(F::cross_entropy(logits(), y.to(kInt32)).item<double>(),
              ce_indices_ref(lp, {2, 0, 3}, {}, -100, 0).mean, kTol);
  // An unbatched input [C] with a 0-d target.
  EXPECT_NEAR(F::cross_entropy(logits()[1], scalar_tensor(2, kInt64)).item<double>(), -lp[1][2],
              kTol);
}

TEST(Losses, CrossEntropyOverExtraDims) {
  // input [N=2, C=3, d=2]; target [2, 2]: each (n, d) position is one sample.
  manual_seed(21);
  Tensor x = randn({2, 3, 2}, kFloat64);
  Tensor y = tensor({{0, 2}, {1, 1}});
  const std::vector<double> xv = to_vec(x);
  std::vector<double> want;
  const int yv[2][2] = {{0, 2}, {1, 1}};
  for (int n = 0; n < 2; ++n) {
    for (int d = 0; d < 2; ++d) {
      double z = 0;
      for (int c = 0; c < 3; ++c) z += std::exp(xv[n * 6 + c * 2 + d]);
      want.push_back(std::log(z) - xv[n * 6 + yv[n][d] * 2 + d]);
    }
  }
  check_reductions([&](const std::string& r) { return F::cross_entropy(x, y, {}, -100, r); }, want,
                   "ce k-dim");
}

TEST(Losses, CrossEntropyWithClassProbabilities) {
  const auto lp = log_probs(kLogits);
  const std::vector<std::vector<double>> p = {
      {0.1, 0.2, 0.3, 0.4}, {1.0, 0.0, 0.0, 0.0}, {0.25, 0.25, 0.25, 0.25}};
  const Tensor pt =
      tensor({{0.1, 0.2, 0.3, 0.4}, {1.0, 0.0, 0.0, 0.0}, {0.25, 0.25, 0.25, 0.25}}, kFloat64);
  const std::vector<double> w = {1.0, 2.0, 0.5, 1.5};
  const Tensor wt = tensor(w, kFloat64);
  for (bool weighted : {false, true}) {
    for (double eps : {0.0, 0.2}) {
      // l_n = -sum_c w_c ((1 - eps) p_nc + eps / C) logp_nc; 'mean' divides by N.
      std::vector<double> want;
      for (size_t n = 0; n < 3; ++n) {
        double l = 0;
        for (size_t c = 0; c < 4; ++c) {
          l -= (weighted ? w[c] : 1.0) * ((1 - eps) * p[n][c] + eps / 4) * lp[n][c];
        }
        want.push_back(l);
      }
      check_reductions(
          [&](const std::string& r) {
            return F::cross_entropy(logits(), pt, weighted ? wt : Tensor(), -100, r, eps);
          },
          want,
          "ce probabilities weighted=" + std::to_string(weighted) + " eps=" + std::to_string(eps));
    }
  }
}

TEST(Losses, NLLLoss) {
  const auto lp = log_probs(kLogits);
  const Tensor logp = log_softmax(logits(), 1);
  const std::vector<double> w = {1.0, 2.0, 0.5, 1.5};
  const Tensor wt = tensor(w, kFloat64);
  const Tensor y = tensor({2, 1, 3});
  expect_reduced([&](const std::string& r) { return F::nll_loss(logp, y, {}, -100, r); },
                 ce_indices_ref(lp, {2, 1, 3}, {}, -100, 0), "nll");
  expect_reduced([&](const std::string& r) { return F::nll_loss(logp, y, wt, -100, r); },
                 ce_indices_ref(lp, {2, 1, 3}, w, -100, 0), "nll weight");
  expect_reduced([&](const std::string& r) { return F::nll_loss(logp, y, wt, 3, r); },
                 ce_indices_ref(lp, {2, 1, 3}, w, 3, 0), "nll weight ignore");
  EXPECT_NEAR(nn::NLLLoss(wt, 3, "mean")(logp, y).item<double>(),
              ce_indices_ref(lp, {2, 1, 3}, w, 3, 0).mean, kTol);
  // nll_loss takes the input as given (no softmax): -x[n, y_n].
  Tensor raw = tensor({{-1.0, 5.0}, {2.0, 0.5}}, kFloat64);
  expect_values(F::nll_loss(raw, tensor({1, 0}), {}, -100, "none"), {-5.0, -2.0}, kTol);
  // Every target ignored: mean is 0/0 = nan, as in PyTorch; sum is 0.
  EXPECT_TRUE(std::isnan(F::nll_loss(logp, tensor({-100, -100, -100})).item<double>()));
  EXPECT_EQ(F::nll_loss(logp, tensor({-100, -100, -100}), {}, -100, "sum").item<double>(), 0.0);
}

TEST(Losses, BinaryCrossEntropy) {
  const std::vector<double> x = {0.9, 0.2, 0.5, 0.999, 0.0, 1.0};
  const std::vector<double> t = {1.0, 0.0, 0.3, 0.0, 0.0, 1.0};
  const std::vector<double> w = {1.0, 2.0, 0.5, 1.0, 3.0, 1.0};
  const Tensor xt = tensor(x, kFloat64), tt = tensor(t, kFloat64), wt = tensor(w, kFloat64);
  // -w (t log x + (1 - t) log(1 - x)), with each log clamped at -100 (so 0 log 0 = 0).
  auto lg = [](double v) { return std::max(std::log(v), -100.0); };
  std::vector<double> want, want_w;
  for (size_t i = 0; i < x.size(); ++i) {
    want.push_back(-(t[i] * lg(x[i]) + (1 - t[i]) * lg(1 - x[i])));
    want_w.push_back(w[i] * want.back());
  }
  check_reductions([&](const std::string& r) { return F::binary_cross_entropy(xt, tt, {}, r); },
                   want, "bce");
  check_reductions([&](const std::string& r) { return F::binary_cross_entropy(xt, tt, wt, r); },
                   want_w, "bce weight");
  check_reductions([&](const std::string& r) { return nn::BCELoss(wt, r)(xt, tt); }, want_w,
                   "BCELoss");
  // A confident wrong prediction costs the clamp value, not inf.
  EXPECT_NEAR(
      F::binary_cross_entropy(tensor({0.0}, kFloat64), tensor({1.0}, kFloat64)).item<double>(),
      100.0, kTol);
  EXPECT_THAT(error_of([] {
                F::binary_cross_entropy(tensor({1.5, 0.5}), tensor({1.0, 0.0}));
              }),
              HasSubstr("binary_cross_entropy: all elements of input should be between 0 and 1"));
  // A per-column weight [3] broadcasts over [2, 3]; one that would enlarge the result does not.
  const Tensor x23 = full({2, 3}, 0.5, kFloat64), t23 = zeros({2, 3}, kFloat64);
  EXPECT_NEAR(F::binary_cross_entropy(x23, t23, tensor({1.0, 2.0, 3.0}, kFloat64), "sum")
                  .item<double>(),
              2 * 6 * std::log(2.0), kTol);
  EXPECT_THAT(error_of([&] { F::binary_cross_entropy(x23, t23, ones({4, 2, 3}, kFloat64)); }),
              HasSubstr("binary_cross_entropy: weight of shape [4, 2, 3] does not broadcast to "
                        "the input shape [2, 3]"));
  EXPECT_THAT(error_of([&] { F::binary_cross_entropy(x23, t23, ones({2}, kFloat64)); }),
              HasSubstr("binary_cross_entropy: weight of shape [2] does not broadcast to the "
                        "input shape [2, 3]"));
}

TEST(Losses, BinaryCrossEntropyWithLogitsAndPosWeight) {
  const std::vector<double> x = {2.0, -1.0, 0.0, 50.0, -50.0, 0.3};
  const std::vector<double> t = {1.0, 0.0, 0.5, 0.0, 1.0, 1.0};
  const Tensor xt = tensor(x, kFloat64).reshape({2, 3}), tt = tensor(t, kFloat64).reshape({2, 3});
  const std::vector<double> pw = {3.0, 0.5, 1.0};  // one per class (the last dim)
  const std::vector<double> w = {1.0, 0.25, 2.0};
  // l = -w [pw t log sigmoid(x) + (1 - t) log(1 - sigmoid(x))], with the stable
  // log sigmoid(x) = -log1p(exp(-x)) (x >= 0) or x - log1p(exp(x)) (x < 0).
  auto log_sig = [](double v) {
    return v >= 0 ? -std::log1p(std::exp(-v)) : v - std::log1p(std::exp(v));
  };
  for (bool use_pw : {false, true}) {
    for (bool use_w : {false, true}) {
      std::vector<double> want;
      for (size_t i = 0; i < x.size(); ++i) {
        const double p = use_pw ? pw[i % 3] : 1.0;
        const double ww = use_w ? w[i % 3] : 1.0;
        want.push_back(-ww * (p * t[i] * log_sig(x[i]) + (1 - t[i]) * log_sig(-x[i])));
      }
      const Tensor pwt = use_pw ? tensor(pw, kFloat64) : Tensor();
      const Tensor wt = use_w ? tensor(w, kFloat64) : Tensor();
      const std::string what =
          "bce_with_logits pw=" + std::to_string(use_pw) + " w=" + std::to_string(use_w);
      check_reductions(
          [&](const std::string& r) {
            return F::binary_cross_entropy_with_logits(xt, tt, wt, pwt, r);
          },
          want, what);
      check_reductions(
          [&](const std::string& r) { return nn::BCEWithLogitsLoss(wt, r, pwt)(xt, tt); }, want,
          what + " module");
    }
  }
  // Equal to BCE on sigmoid(x) where that is finite.
  Tensor small = tensor({0.5, -2.0, 1.5}, kFloat64), st = tensor({1.0, 0.0, 0.25}, kFloat64);
  EXPECT_NEAR(F::binary_cross_entropy_with_logits(small, st).item<double>(),
              F::binary_cross_entropy(sigmoid(small), st).item<double>(), 1e-12);
}

TEST(Losses, KLDivergence) {
  // input: log-probabilities [2, 3]; target: probabilities with a zero (0 log 0 = 0).
  const std::vector<double> q = {0.2, 0.5, 0.3, 0.6, 0.3, 0.1};
  const std::vector<double> p = {0.1, 0.0, 0.9, 0.25, 0.25, 0.5};
  std::vector<double> logq, logp;
  for (double v : q) logq.push_back(std::log(v));
  for (double v : p) logp.push_back(v > 0 ? std::log(v) : -std::numeric_limits<double>::infinity());
  const Tensor in = tensor(logq, kFloat64).reshape({2, 3});
  const Tensor tg = tensor(p, kFloat64).reshape({2, 3});
  std::vector<double> want;
  for (size_t i = 0; i < p.size(); ++i) want.push_back(p[i] > 0 ? p[i] * (logp[i] - logq[i]) : 0.0);
  check_reductions([&](const std::string& r) { return F::kl_div(in, tg, r); }, want, "kl_div");
  check_reductions([&](const std::string& r) { return nn::KLDivLoss(r)(in, tg); }, want,
                   "KLDivLoss");
  // batchmean divides the sum by the batch size (the true KL divergence per sample).
  EXPECT_NEAR(F::kl_div(in, tg, "batchmean").item<double>(), sum_of(want) / 2, kTol);
  // log_target: the target is given as log-probabilities: exp(t) (t - x).
  const std::vector<double> pt = {0.1, 0.2, 0.7, 0.25, 0.25, 0.5};
  std::vector<double> logpt, want_log;
  for (double v : pt) logpt.push_back(std::log(v));
  for (size_t i = 0; i < pt.size(); ++i) want_log.push_back(pt[i] * (logpt[i] - logq[i]));
  const Tensor tl = tensor(logpt, kFloat64).reshape({2, 3});
  check_reductions([&](const std::string& r) { return F::kl_div(in, tl, r, true); }, want_log,
                   "kl_div log_target");
  EXPECT_NEAR(nn::KLDivLoss("batchmean", true)(in, tl).item<double>(), sum_of(want_log) / 2, kTol);
  // The same divergence either way.
  EXPECT_NEAR(F::kl_div(in, tl, "sum", true).item<double>(),
              F::kl_div(in, exp(tl), "sum").item<double>(), 1e-12);
}

// ---- gradients

TEST(Losses, GradcheckEveryLossInFloat64) {
  manual_seed(99);
  const Tensor x = randn({3, 4}, kFloat64);
  const Tensor t = randn({3, 4}, kFloat64);
  for (const std::string r : {"none", "mean", "sum"}) {
    SCOPED_TRACE(r);
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::mse_loss(a, t, r); }, x));
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::l1_loss(a, t, r); }, x));
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::smooth_l1_loss(a, t, r, 0.5); }, x));
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::huber_loss(a, t, r, 0.7); }, x));
    const Tensor y = tensor({3, 0, 2});
    const Tensor w = tensor({1.0, 2.0, 0.5, 1.5}, kFloat64);
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::cross_entropy(a, y, w, 0, r, 0.1); }, x));
    EXPECT_TRUE(grad_ok(
        [&](const Tensor& a) { return F::cross_entropy(a, softmax(t, 1), w, -100, r, 0.2); }, x));
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::nll_loss(a, y, w, -100, r); }, x));
    const Tensor prob = sigmoid(x) * 0.8 + 0.1;  // in (0.1, 0.9)
    const Tensor bt = rand({3, 4}, kFloat64);
    EXPECT_TRUE(
        grad_ok([&](const Tensor& a) { return F::binary_cross_entropy(a, bt, {}, r); }, prob));
    EXPECT_TRUE(grad_ok(
        [&](const Tensor& a) {
          return F::binary_cross_entropy_with_logits(a, bt, {},
                                                     tensor({2.0, 1.0, 0.5, 3.0}, kFloat64), r);
        },
        x));
    const Tensor logq = log_softmax(x, 1);
    EXPECT_TRUE(grad_ok([&](const Tensor& a) { return F::kl_div(a, softmax(t, 1), r); }, logq));
    EXPECT_TRUE(
        grad_ok([&](const Tensor& a) { return F::kl_div(a, log_softmax(t, 1), r, true); }, logq));
  }
  // The gradient with respect to the target too (mse, bce_with_logits, kl_div).
  EXPECT_TRUE(grad_ok([&](const Tensor& b) { return F::mse_loss(x, b); }, t));
  EXPECT_TRUE(grad_ok([&](const Tensor& b) { return F::binary_cross_entropy_with_logits(x, b); },
                      sigmoid(t)));
  EXPECT_TRUE(
      grad_ok([&](const Tensor& b) { return F::kl_div(log_softmax(x, 1), b); }, softmax(t, 1)));
}

TEST(Losses, CrossEntropyGradientIsSoftmaxMinusOneHot) {
  Tensor x = logits().requires_grad_();
  F::cross_entropy(x, tensor({2, 0, 3}), {}, -100, "sum").backward();
  const auto lp = log_probs(kLogits);
  const int y[3] = {2, 0, 3};
  std::vector<double> want;
  for (int n = 0; n < 3; ++n) {
    for (int c = 0; c < 4; ++c) want.push_back(std::exp(lp[n][c]) - (c == y[n] ? 1.0 : 0.0));
  }
  expect_values(x.grad(), want, 1e-12);
}

// ---- errors

TEST(Losses, ShapeDtypeAndArgumentErrorsNameTheProblem) {
  const Tensor a = zeros({2, 3}), b = zeros({3, 2});
  EXPECT_THAT(error_of([&] { F::mse_loss(a, b); }),
              HasSubstr("mse_loss: target of shape [3, 2] does not broadcast with input of shape "
                        "[2, 3]"));
  EXPECT_THAT(error_of([&] {
                F::l1_loss(a, zeros({4}));
              }),
              HasSubstr("l1_loss: target of shape [4] does not broadcast with input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { F::smooth_l1_loss(a, b); }), HasSubstr("smooth_l1_loss: target"));
  EXPECT_THAT(error_of([&] { F::huber_loss(a, b); }), HasSubstr("huber_loss: target"));
  EXPECT_THAT(error_of([&] { F::binary_cross_entropy(a, b); }),
              HasSubstr("binary_cross_entropy: target of shape [3, 2]"));
  EXPECT_THAT(error_of([&] { F::binary_cross_entropy_with_logits(a, b); }),
              HasSubstr("binary_cross_entropy_with_logits: target size [3, 2] must be the same as "
                        "input size [2, 3]"));
  EXPECT_THAT(
      error_of([&] { F::binary_cross_entropy_with_logits(zeros({2}, kInt64), zeros({2})); }),
      HasSubstr("binary_cross_entropy_with_logits: expected floating point logits, but "
                "got int64"));
  EXPECT_THAT(error_of([&] { F::kl_div(a, b); }),
              HasSubstr("kl_div: target of shape [3, 2] does not match input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { F::mse_loss(a, a, "avg"); }),
              HasSubstr("mse_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'"));
  EXPECT_THAT(error_of([&] { F::kl_div(a, a, "max"); }),
              HasSubstr("kl_div: reduction must be 'none', 'mean' or 'sum' or 'batchmean', got "
                        "'max'"));
  EXPECT_THAT(error_of([] { nn::MSELoss("total"); }),
              HasSubstr("MSELoss: reduction must be 'none', 'mean' or 'sum', got 'total'"));
  // "batchmean" belongs to KLDivLoss alone; every other loss names itself and the reduction.
  const std::vector<std::pair<std::string, std::function<void()>>> batchmean = {
      {"MSELoss", [] { nn::MSELoss("batchmean"); }},
      {"L1Loss", [] { nn::L1Loss("batchmean"); }},
      {"SmoothL1Loss", [] { nn::SmoothL1Loss("batchmean"); }},
      {"HuberLoss", [] { nn::HuberLoss("batchmean"); }},
      {"CrossEntropyLoss",
       [] {
         nn::CrossEntropyOptions o;
         o.reduction = "batchmean";
         nn::CrossEntropyLoss{o};
       }},
      {"NLLLoss", [] { nn::NLLLoss(Tensor(), -100, "batchmean"); }},
      {"BCELoss", [] { nn::BCELoss(Tensor(), "batchmean"); }},
      {"BCEWithLogitsLoss", [] { nn::BCEWithLogitsLoss(Tensor(), "batchmean"); }}};
  for (const auto& [name, make] : batchmean) {
    EXPECT_EQ(error_of(make),
              name + ": reduction must be 'none', 'mean' or 'sum', got 'batchmean'");
  }
  EXPECT_THAT(error_of([] { nn::KLDivLoss("avg"); }),
              HasSubstr("KLDivLoss: reduction must be 'none', 'mean' or 'sum' or 'batchmean', "
                        "got 'avg'"));
  {
    // KLDivLoss's batchmean: the summed loss over the batch size.
    nn::KLDivLoss kl("batchmean");
    const Tensor in = log(tensor({{0.25, 0.75}, {0.5, 0.5}}, kFloat64));
    const Tensor tg = tensor({{0.5, 0.5}, {0.5, 0.5}}, kFloat64);
    const double want = (0.5 * std::log(0.5 / 0.25) + 0.5 * std::log(0.5 / 0.75)) / 2;
    EXPECT_NEAR(kl(in, tg).item<double>(), want, 1e-12);
  }

  // Classification.
  const Tensor x = logits();
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, 1}));
              }),
              HasSubstr("cross_entropy: target of shape [2] does not match input of shape [3, 4] "
                        "(expected [3])"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, 4, 1}));
              }),
              HasSubstr("cross_entropy: target 4 is out of bounds for 4 classes"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, -3, 1}));
              }),
              HasSubstr("cross_entropy: target -3 is out of bounds for 4 classes"));
  // The same through the general path (class weights; an ignored target beside a bad one), where
  // gather finds the bad target and the loss names it.
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, 4, 1}), ones({4}));
              }),
              HasSubstr("cross_entropy: target 4 is out of bounds for 4 classes"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({-100, 7, 1}));
              }),
              HasSubstr("cross_entropy: target 7 is out of bounds for 4 classes"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, zeros({3, 5}, kFloat64));
              }),
              HasSubstr("cross_entropy: target of shape [3, 5] does not match input of shape "
                        "[3, 4]"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(tensor({{1, 2}}), tensor({0}));
              }),
              HasSubstr("cross_entropy: input must be floating point, got int64"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, 1, 2}), ones({3}));
              }),
              HasSubstr("cross_entropy: weight of shape [3] must have one entry per class (4)"));
  EXPECT_THAT(error_of([&] {
                F::cross_entropy(x, tensor({0, 1, 2}), {}, -100, "mean", 1.5);
              }),
              HasSubstr("cross_entropy: label_smoothing must be between 0.0 and 1.0, got 1.5"));
  EXPECT_THAT(error_of([&] { F::nll_loss(x, zeros({3})); }),
              HasSubstr("nll_loss: expected class indices of dtype int64 for the target, got "
                        "float32"));
  EXPECT_THAT(error_of([&] {
                F::nll_loss(x, tensor({0, 1, 9}));
              }),
              HasSubstr("nll_loss: target 9 is out of bounds for 4 classes"));
  EXPECT_THAT(error_of([&] {
                nn::NLLLoss()(x, tensor({{0, 1, 2}}));
              }),
              HasSubstr("nll_loss: target of shape [1, 3] does not match input of shape [3, 4]"));
}

// ---- gradient clipping

TEST(ClipGrad, NormReturnsTheTotalNormAndScales) {
  Tensor a = zeros({2}).requires_grad_(), b = zeros({2, 2}).requires_grad_();
  Tensor unused = zeros({3}).requires_grad_();  // no gradient: skipped
  a.set_grad(tensor({3.0, 0.0}));
  b.set_grad(tensor({{0.0, 4.0}, {0.0, 12.0}}));
  // Total 2-norm: sqrt(9 + 16 + 144) = 13.
  double total = nn::clip_grad_norm_({a, b, unused}, 6.5);
  EXPECT_NEAR(total, 13.0, 1e-9);
  const double coef = 6.5 / (13.0 + 1e-6);
  expect_values(a.grad(), {3 * coef, 0}, 1e-6);
  expect_values(b.grad(), {0, 4 * coef, 0, 12 * coef}, 1e-6);
  // Below the limit nothing changes.
  a.set_grad(tensor({0.3, 0.4}));
  b.set_grad(zeros({2, 2}));
  EXPECT_NEAR(nn::clip_grad_norm_({a, b}, 1.0), 0.5, 1e-7);  // of float32 gradients
  expect_values(a.grad(), {0.3, 0.4}, 1e-7);
  // Other norms: the inf-norm is the largest |g|; the 1-norm the sum of |g|.
  a.set_grad(tensor({-5.0, 1.0}));
  b.set_grad(tensor({{2.0, 0.0}, {0.0, -1.0}}));
  EXPECT_NEAR(nn::clip_grad_norm_({a, b}, 100.0, 1.0), 9.0, 1e-9);
  EXPECT_NEAR(nn::clip_grad_norm_({a, b}, 1.0, std::numeric_limits<double>::infinity()), 5.0, 1e-9);
  expect_values(a.grad(), {-5.0 / (5 + 1e-6), 1.0 / (5 + 1e-6)}, 1e-6);
  // No gradients: total 0.
  EXPECT_EQ(nn::clip_grad_norm_({unused}, 1.0), 0.0);
  // Non-finite norms: returned (and nothing finite produced), or an error when asked.
  a.set_grad(tensor({std::nan(""), 1.0}));
  EXPECT_TRUE(std::isnan(nn::clip_grad_norm_({a}, 1.0)));
  a.set_grad(tensor({std::numeric_limits<double>::infinity(), 1.0}));
  EXPECT_THAT(error_of([&] { nn::clip_grad_norm_({a}, 1.0, 2.0, true); }),
              HasSubstr("clip_grad_norm_: the total norm of order 2 for gradients is non-finite"));
}

TEST(ClipGrad, ValueClampsEveryElementInPlace) {
  Tensor a = zeros({4}).requires_grad_();
  Tensor unused = zeros({1}).requires_grad_();
  a.set_grad(tensor({-3.0, -0.5, 0.25, 7.0}));
  Tensor g = a.grad();
  nn::clip_grad_value_({a, unused}, 1.0);
  expect_values(a.grad(), {-1.0, -0.5, 0.25, 1.0});
  EXPECT_TRUE(a.grad().is_same(g));  // in place
  EXPECT_FALSE(unused.grad().defined());
  // On a real backward: a parameter's gradient is clipped before the step.
  Tensor w = tensor({1.0, -2.0}).requires_grad_();
  (w * tensor({10.0, 0.1})).sum().backward();
  nn::clip_grad_value_({w}, 0.5);
  expect_values(w.grad(), {0.5, 0.1}, 1e-7);
}
