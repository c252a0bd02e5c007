// The losses of ignis/nn/loss_extra.h: modules and their options, closed-form values, training
// through the modules, and every error message (the op table checks the values and gradients,
// test_loss_torch the agreement with PyTorch).
#include <cmath>
#include <limits>

#include "ignis/nn/loss_extra.h"
#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::expect_values;
using ignis::testing_util::to_vec;
using ::testing::HasSubstr;
namespace F = ignis::nn::functional;

namespace {

Tensor f64(std::initializer_list<double> v) { return tensor(v, kFloat64); }
Tensor rows(std::initializer_list<std::initializer_list<double>> v) { return tensor(v, kFloat64); }
Tensor i64(std::vector<int64_t> v) { return tensor(v); }
/// Seeded float64 normal values.
Tensor make_input_like_seed(IntArrayRef shape) {
  manual_seed(7);
  return randn(shape, kFloat64);
}

// ---- closed forms

TEST(LossExtra, CtcUniformCountsAlignments) {
  // With uniform probabilities 1/C every path has probability C^-T, so the loss is
  // T log C - log(#alignments). Target "a" in 2 frames: "a_", "_a", "aa" -> 3 alignments;
  // "aa" in 3 frames: only "a_a" -> 1; "ab" in 3 frames: "ab_", "a_b", "_ab", "aab", "abb" -> 5.
  const double c = 4;
  auto uniform = [&](int64_t t) { return full({t, 1, 4}, -std::log(c), kFloat64); };
  auto loss = [&](int64_t t, std::vector<int64_t> target) {
    const int64_t n = static_cast<int64_t>(target.size());
    return F::ctc_loss(uniform(t), i64(target).reshape({1, n}), i64({t}), i64({n}),
                       F::CTCLossFuncOptions().reduction("sum"))
        .item<double>();
  };
  EXPECT_NEAR(loss(2, {1}), 2 * std::log(c) - std::log(3.0), 1e-12);
  EXPECT_NEAR(loss(3, {1, 1}), 3 * std::log(c), 1e-12);
  EXPECT_NEAR(loss(3, {1, 2}), 3 * std::log(c) - std::log(5.0), 1e-12);
  // "aa" in 2 frames is impossible (it needs a blank between): inf, or 0 with zero_infinity.
  EXPECT_EQ(loss(2, {1, 1}), std::numeric_limits<double>::infinity());
  // An empty target: the all-blank path alone.
  EXPECT_NEAR(F::ctc_loss(uniform(3), i64({}), std::vector<int64_t>{3}, std::vector<int64_t>{0}, 0,
                          "sum", false)
                  .item<double>(),
              3 * std::log(c), 1e-12);
}

TEST(LossExtra, CtcReductionsAndForms) {
  Tensor lp = log_softmax(make_input_like_seed({5, 2, 3}), 2);
  Tensor targets = i64({1, 2, 2, 2, 0, 0}).reshape({2, 3});
  const std::vector<int64_t> il = {5, 4}, tl = {3, 1};
  Tensor none = F::ctc_loss(lp, targets, il, tl, 0, "none", false);
  ASSERT_EQ(none.sizes().vec(), (std::vector<int64_t>{2}));
  const std::vector<double> l = to_vec(none);
  // "mean" divides each loss by its target length, then averages over the batch.
  EXPECT_NEAR(F::ctc_loss(lp, targets, il, tl, 0, "mean", false).item<double>(),
              (l[0] / 3 + l[1] / 1) / 2, 1e-12);
  EXPECT_NEAR(F::ctc_loss(lp, targets, il, tl, 0, "sum", false).item<double>(), l[0] + l[1], 1e-12);
  // Concatenated targets, tensor lengths and the module give the same losses.
  Tensor concat = i64({1, 2, 2, 2});
  expect_values(
      F::ctc_loss(lp, concat, i64({5, 4}), i64({3, 1}), F::CTCLossFuncOptions().reduction("none")),
      l, 1e-12, 1e-12, "concatenated");
  nn::CTCLoss module(nn::CTCLossOptions().reduction("none"));
  expect_values(module(lp, targets, i64({5, 4}), i64({3, 1})), l, 1e-12, 1e-12, "module");
  EXPECT_EQ(module.extra_repr(), "blank=0, reduction='none', zero_infinity=false");
  // Unbatched: log_probs [T, C], 1-d target, 0-d lengths -> a 0-d loss.
  Tensor one = F::ctc_loss(lp.select(1, 0), i64({1, 2, 2}), scalar_tensor(5, kInt64),
                           scalar_tensor(3, kInt64), F::CTCLossFuncOptions().reduction("none"));
  EXPECT_EQ(one.dim(), 0);
  EXPECT_NEAR(one.item<double>(), l[0], 1e-12);
}

TEST(LossExtra, CtcTrainsThroughLogSoftmax) {
  // A few SGD steps on logits lower the loss (the gradient flows through log_softmax).
  Tensor logits = make_input_like_seed({6, 2, 4}).requires_grad_();
  Tensor targets = i64({1, 3, 2, 2, 0, 0}).reshape({2, 3});
  nn::CTCLoss ctc;
  double first = 0, last = 0;
  for (int step = 0; step < 20; ++step) {
    Tensor loss = ctc(log_softmax(logits, 2), targets, i64({6, 5}), i64({3, 1}));
    if (step == 0) first = loss.item<double>();
    last = loss.item<double>();
    loss.backward();
    {
      NoGradGuard ng;
      logits.sub_(logits.grad() * 0.5);
      Tensor g = logits.grad();
      g.zero_();
    }
  }
  EXPECT_LT(last, first * 0.7);
}

TEST(LossExtra, ModulesMatchFunctions) {
  Tensor x1 = f64({0.3, -1.2, 2.0}), x2 = f64({0.5, 0.4, -1.0}), y = f64({1, -1, 1});
  EXPECT_NEAR(
      nn::MarginRankingLoss(nn::MarginRankingLossOptions().margin(0.5))(x1, x2, y).item<double>(),
      (0.7 + 0.0 + 0.0) / 3, 1e-12);  // max(0, -(x1-x2) y + 0.5): 0.7, -1.1, -2.5
  EXPECT_NEAR(nn::HingeEmbeddingLoss(nn::HingeEmbeddingLossOptions().reduction("sum"))(x1, y)
                  .item<double>(),
              0.3 + 2.2 + 2.0, 1e-12);  // x where y = 1; max(0, 1 - x) where y = -1
  EXPECT_NEAR(nn::SoftMarginLoss(std::string("sum"))(x1, y).item<double>(),
              std::log1p(std::exp(-0.3)) + std::log1p(std::exp(-1.2)) + std::log1p(std::exp(-2.0)),
              1e-12);
  Tensor input = rows({{0.1, 0.2, 0.4, 0.8}});
  // PyTorch's documented example: target [3, 0, -1, 1] -> 0.85.
  EXPECT_NEAR(nn::MultiLabelMarginLoss()(input, i64({3, 0, -1, 1}).reshape({1, 4})).item<double>(),
              0.85, 1e-12);
  // multi_margin: x = [0.1, 0.2, 0.4, 0.8], y = 3: (max(0, 1 - 0.8 + 0.1) + ... ) / 4.
  EXPECT_NEAR(nn::MultiMarginLoss()(input, i64({3})).item<double>(),
              ((1 - 0.8 + 0.1) + (1 - 0.8 + 0.2) + (1 - 0.8 + 0.4)) / 4, 1e-12);
  nn::MultiMarginLoss weighted(nn::MultiMarginLossOptions().p(2).weight(f64({1, 1, 1, 2})));
  EXPECT_EQ(weighted.named_buffers().size(), 1u);
  EXPECT_NEAR(weighted(input, i64({3})).item<double>(), 2 * (0.09 + 0.16 + 0.36) / 4, 1e-12);
  Tensor t = rows({{1, 0, 1, 0}});
  EXPECT_NEAR(nn::MultiLabelSoftMarginLoss()(input, t).item<double>(),
              F::multilabel_soft_margin_loss(input, t, Tensor(), "mean").item<double>(), 1e-15);
  // Triplet: d(a, p) = |0 - 1 + eps|, d(a, n) = |0 - 3 + eps|; margin 1 -> max(0, 1 + 1 - 3).
  nn::TripletMarginLoss triplet(nn::TripletMarginLossOptions().margin(3).eps(0));
  EXPECT_NEAR(triplet(rows({{0.0}}), rows({{1.0}}), rows({{3.0}})).item<double>(), 1.0, 1e-12);
  EXPECT_EQ(triplet.extra_repr(), "margin=3, p=2, eps=0, swap=false, reduction='mean'");
  nn::CosineEmbeddingLoss cosine(nn::CosineEmbeddingLossOptions().margin(0.5));
  // Parallel vectors: cos = 1; target 1 -> 0, target -1 -> 1 - 0.5.
  expect_values(nn::CosineEmbeddingLoss(nn::CosineEmbeddingLossOptions().margin(0.5).reduction(
                    "none"))(rows({{1, 2}, {1, 2}}), rows({{2, 4}, {2, 4}}), f64({1, -1})),
                {0.0, 0.5}, 1e-9, 1e-9, "cosine");
  nn::PoissonNLLLoss poisson(nn::PoissonNLLLossOptions().log_input(false).reduction("sum"));
  EXPECT_NEAR(poisson(f64({2.0}), f64({3.0})).item<double>(), 2.0 - 3.0 * std::log(2.0 + 1e-8),
              1e-12);
  nn::GaussianNLLLoss gauss(nn::GaussianNLLLossOptions().full(true));
  EXPECT_NEAR(gauss(f64({1.0}), f64({3.0}), f64({2.0})).item<double>(),
              0.5 * (std::log(2.0) + 4.0 / 2.0) + 0.5 * std::log(2 * M_PI), 1e-12);
  EXPECT_EQ(gauss.type_name(), "GaussianNLLLoss");
}

// ---- error messages: each names the loss and the shapes at fault

TEST(LossExtra, ShapeErrors) {
  EXPECT_THAT(error_of([] {
                F::margin_ranking_loss(rows({{1, 2}}), f64({1, 2}), f64({1, 1}));
              }),
              HasSubstr("margin_ranking_loss: input1 [1, 2], input2 [2] and target [2] must have "
                        "the same number of dimensions"));
  EXPECT_THAT(error_of([] {
                F::margin_ranking_loss(f64({1, 2}), f64({1, 2, 3}), f64({1, 1}));
              }),
              HasSubstr("margin_ranking_loss: the shapes of input1 [2], input2 [3], target [2] "
                        "do not broadcast together"));
  EXPECT_THAT(error_of([] {
                F::hinge_embedding_loss(rows({{1, 2, 3}}), f64({1, -1}));
              }),
              HasSubstr("hinge_embedding_loss: the shapes of input [1, 3], target [2] do not "
                        "broadcast together"));
  EXPECT_THAT(error_of([] {
                F::soft_margin_loss(f64({1, 2, 3}), f64({1, -1}));
              }),
              HasSubstr("soft_margin_loss: the shapes of input [3], target [2]"));
  EXPECT_THAT(error_of([] {
                F::poisson_nll_loss(rows({{1, 2, 3}}), f64({1, 2}));
              }),
              HasSubstr("poisson_nll_loss: the shapes of input [1, 3], target [2]"));
  EXPECT_THAT(
      error_of([] {
        F::multilabel_soft_margin_loss(rows({{1, 2, 3}}), rows({{1, 0}}));
      }),
      HasSubstr("multilabel_soft_margin_loss: target of shape [1, 2] does not match input of "
                "shape [1, 3]"));
  EXPECT_THAT(error_of([] {
                F::triplet_margin_loss(rows({{1, 2}}), f64({1, 2}), rows({{1, 2}}));
              }),
              HasSubstr("triplet_margin_loss: anchor [1, 2], positive [2] and negative [1, 2] "
                        "must have the same number of dimensions"));
  EXPECT_THAT(error_of([] {
                F::triplet_margin_loss(rows({{1, 2}}), rows({{1, 2, 3}}), rows({{1, 2}}));
              }),
              HasSubstr("triplet_margin_loss: the shapes of anchor [1, 2], positive [1, 3], "
                        "negative [1, 2] do not broadcast together"));
  EXPECT_THAT(error_of([] {
                F::cosine_embedding_loss(rows({{1, 2}}), rows({{1, 2, 3}}), f64({1}));
              }),
              HasSubstr("cosine_embedding_loss: the shapes of input1 [1, 2], input2 [1, 3] do "
                        "not broadcast together"));
  EXPECT_THAT(error_of([] {
                F::cosine_embedding_loss(f64({1, 2}), f64({1, 2}), f64({1}));
              }),
              HasSubstr("cosine_embedding_loss: a 1-d target expects 2-d inputs, but got input1 "
                        "[2] and input2 [2]"));
  EXPECT_THAT(
      error_of([] {
        F::cosine_embedding_loss(rows({{1, 2}, {3, 4}}), rows({{1, 2}, {3, 4}}), f64({1, -1, 1}));
      }),
      HasSubstr("cosine_embedding_loss: target of shape [3] does not match inputs input1 "
                "[2, 2] and input2 [2, 2]"));
  EXPECT_THAT(error_of([] {
                F::gaussian_nll_loss(rows({{1, 2, 3}, {4, 5, 6}}), rows({{1, 2, 3}, {4, 5, 6}}),
                                     rows({{1, 2}, {3, 4}, {5, 6}}));
              }),
              HasSubstr("gaussian_nll_loss: var of shape [3, 2] does not match input of shape "
                        "[2, 3]"));
  EXPECT_THAT(error_of([] {
                F::multi_margin_loss(rows({{1, 2, 3}}), i64({0, 1}));
              }),
              HasSubstr("multi_margin_loss: target of shape [2] does not match input of shape "
                        "[1, 3] (expected 1 class indices)"));
  EXPECT_THAT(error_of([] {
                F::multilabel_margin_loss(rows({{1, 2, 3}}), i64({0, 1, -1}));
              }),
              HasSubstr("multilabel_margin_loss: target of shape [3] does not match input of "
                        "shape [1, 3]"));
}

TEST(LossExtra, ValueErrors) {
  EXPECT_THAT(error_of([] {
                F::gaussian_nll_loss(f64({1, 2}), f64({1, 2}), f64({0.5, -0.1}));
              }),
              HasSubstr("gaussian_nll_loss: var of shape [2] has negative entries"));
  EXPECT_THAT(error_of([] {
                F::multi_margin_loss(rows({{1, 2, 3}}), i64({3}));
              }),
              HasSubstr("multi_margin_loss: target 3 is out of range for 3 classes (input of "
                        "shape [1, 3])"));
  EXPECT_THAT(error_of([] {
                F::multi_margin_loss(rows({{1, 2, 3}}), i64({0}), 3, 1, Tensor(), "mean");
              }),
              HasSubstr("multi_margin_loss: p must be 1 or 2, got 3"));
  EXPECT_THAT(error_of([] { nn::MultiMarginLoss(nn::MultiMarginLossOptions().p(0)); }),
              HasSubstr("MultiMarginLoss: p must be 1 or 2, got 0"));
  EXPECT_THAT(error_of([] {
                F::multi_margin_loss(rows({{1, 2, 3}}), i64({0}),
                                     F::MultiMarginLossFuncOptions().weight(f64({1, 2})));
              }),
              HasSubstr("multi_margin_loss: weight of shape [2] must have one entry per class "
                        "(3)"));
  EXPECT_THAT(error_of([] {
                F::multilabel_margin_loss(rows({{1, 2, 3}}), i64({0, 3, -1}).reshape({1, 3}));
              }),
              HasSubstr("multilabel_margin_loss: target 3 is out of range for 3 classes"));
  EXPECT_THAT(error_of([] {
                F::multi_margin_loss(rows({{1, 2, 3}}), f64({0}));
              }),
              HasSubstr("multi_margin_loss: expected a target of class indices (int64), but got "
                        "float64"));
  EXPECT_THAT(error_of([] { F::soft_margin_loss(f64({1}), f64({1}), "avg"); }),
              HasSubstr("soft_margin_loss: reduction must be 'none', 'mean' or 'sum', got 'avg'"));
  EXPECT_THAT(error_of([] { nn::GaussianNLLLoss(nn::GaussianNLLLossOptions().reduction("x")); }),
              HasSubstr("GaussianNLLLoss: reduction must be 'none', 'mean' or 'sum', got 'x'"));
  EXPECT_THAT(error_of([] { nn::PoissonNLLLoss(nn::PoissonNLLLossOptions().reduction("x")); }),
              HasSubstr("PoissonNLLLoss: reduction must be 'none', 'mean' or 'sum', got 'x'"));
}

TEST(LossExtra, CtcErrors) {
  const Tensor lp = log_softmax(make_input_like_seed({3, 2, 4}), 2);
  const Tensor targets = i64({1, 2, 3, 1, 0, 0}).reshape({2, 3});
  auto ctc = [&](const Tensor& t, std::vector<int64_t> il, std::vector<int64_t> tl,
                 int64_t blank = 0) {
    return error_of([&] { F::ctc_loss(lp, t, il, tl, blank, "mean", false); });
  };
  EXPECT_THAT(ctc(targets, {4, 3}, {3, 1}),
              HasSubstr("ctc_loss: input_lengths[0] = 4 is outside [0, T = 3] (log_probs of "
                        "shape [3, 2, 4])"));
  EXPECT_THAT(ctc(targets, {3, 3}, {4, 1}),
              HasSubstr("ctc_loss: target_lengths[0] = 4 exceeds the padded targets' length 3 "
                        "(targets of shape [2, 3])"));
  EXPECT_THAT(ctc(targets, {3, 3}, {-1, 1}),
              HasSubstr("ctc_loss: target_lengths[0] = -1 is negative"));
  EXPECT_THAT(ctc(i64({1, 5, 3, 1, 0, 0}).reshape({2, 3}), {3, 3}, {3, 1}),
              HasSubstr("ctc_loss: target label 5 of sequence 0 (position 1) is out of range for "
                        "4 classes (log_probs of shape [3, 2, 4], blank 0)"));
  EXPECT_THAT(ctc(i64({1, 0, 3, 1, 0, 0}).reshape({2, 3}), {3, 3}, {3, 1}),
              HasSubstr("ctc_loss: target label 0 of sequence 0 (position 1) is the blank label"));
  EXPECT_THAT(ctc(targets, {3, 3}, {3, 1}, 4),
              HasSubstr("ctc_loss: blank 4 is out of range for 4 classes"));
  EXPECT_THAT(ctc(targets, {3}, {3}),
              HasSubstr("ctc_loss: expected one input and one target length per batch element "
                        "(N = 2, log_probs of shape [3, 2, 4]), but got 1 input lengths and 1 "
                        "target lengths"));
  EXPECT_THAT(ctc(i64({1, 2, 3}), {3, 3}, {3, 1}),
              HasSubstr("ctc_loss: concatenated targets of shape [3] hold 3 labels, but "
                        "target_lengths sum to 4"));
  EXPECT_THAT(ctc(i64({1, 2, 3, 1}).reshape({1, 4}), {3, 3}, {3, 1}),
              HasSubstr("ctc_loss: padded targets of shape [1, 4] do not have one row per batch "
                        "element (N = 2)"));
  EXPECT_THAT(error_of([&] {
                F::ctc_loss(lp.to(kInt64), targets, i64({3, 3}), i64({3, 1}));
              }),
              HasSubstr("ctc_loss: expected log_probs of dtype float32 or float64, but got int64"));
  EXPECT_THAT(error_of([&] {
                F::ctc_loss(lp, targets, f64({3, 3}), i64({3, 1}));
              }),
              HasSubstr("ctc_loss: expected input_lengths of an integer dtype, but got float64"));
  // A target longer than its input is not an error: its loss is inf (PyTorch's), or 0 with
  // zero_infinity.
  Tensor l =
      F::ctc_loss(lp, targets, i64({2, 3}), i64({3, 1}), F::CTCLossFuncOptions().reduction("none"));
  EXPECT_EQ(to_vec(l)[0], std::numeric_limits<double>::infinity());
  l = F::ctc_loss(lp, targets, i64({2, 3}), i64({3, 1}),
                  F::CTCLossFuncOptions().reduction("none").zero_infinity(true));
  EXPECT_EQ(to_vec(l)[0], 0.0);
}

}  // namespace
