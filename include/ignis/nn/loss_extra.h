// The margin, hinge, triplet, cosine-embedding, Poisson and Gaussian NLL and CTC losses, as
// LibTorch spells them: functions in nn::functional taking an options object
// (`F::triplet_margin_loss(a, p, n, F::TripletMarginLossFuncOptions().margin(0.5).swap(true))`),
// positional forms with every argument (the registry records'), and modules
// (`nn::TripletMarginLoss loss(nn::TripletMarginLossOptions().p(1))`). reduction is "none",
// "mean" or "sum"; the per-element (or per-sample) losses and what "mean" divides by are
// PyTorch's (see docs/training.md).
#pragma once

#include <string>
#include <vector>

#include "ignis/nn/loss.h"

namespace ignis::nn {

/// A chainable option like LibTorch's TORCH_ARG: `opts.margin(0.5)` sets and returns *this,
/// `opts.margin()` reads.
#define IGNIS_LOSS_ARG(T, name)                      \
 public:                                             \
  auto& name(const T& v) {                           \
    name##_ = v;                                     \
    return *this;                                    \
  }                                                  \
  const T& name() const noexcept { return name##_; } \
                                                     \
 private:                                            \
  T name##_

struct MarginRankingLossOptions {
  IGNIS_LOSS_ARG(double, margin) = 0;
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct MultiMarginLossOptions {
  IGNIS_LOSS_ARG(int64_t, p) = 1;  // 1 or 2
  IGNIS_LOSS_ARG(double, margin) = 1;
  IGNIS_LOSS_ARG(Tensor, weight);  // [C], or undefined
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct MultiLabelMarginLossOptions {
  MultiLabelMarginLossOptions() = default;
  /* implicit */ MultiLabelMarginLossOptions(std::string r) : reduction_(std::move(r)) {}
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct SoftMarginLossOptions {
  SoftMarginLossOptions() = default;
  /* implicit */ SoftMarginLossOptions(std::string r) : reduction_(std::move(r)) {}
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct MultiLabelSoftMarginLossOptions {
  IGNIS_LOSS_ARG(Tensor, weight);  // [C], or undefined
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct HingeEmbeddingLossOptions {
  IGNIS_LOSS_ARG(double, margin) = 1;
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct TripletMarginLossOptions {
  IGNIS_LOSS_ARG(double, margin) = 1;
  IGNIS_LOSS_ARG(double, p) = 2;
  IGNIS_LOSS_ARG(double, eps) = 1e-6;
  IGNIS_LOSS_ARG(bool, swap) = false;
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct CosineEmbeddingLossOptions {
  IGNIS_LOSS_ARG(double, margin) = 0;
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct PoissonNLLLossOptions {
  IGNIS_LOSS_ARG(bool, log_input) = true;
  IGNIS_LOSS_ARG(bool, full) = false;  // adds Stirling's term where target > 1
  IGNIS_LOSS_ARG(double, eps) = 1e-8;  // log(input + eps) when !log_input
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct GaussianNLLLossOptions {
  IGNIS_LOSS_ARG(bool, full) = false;  // adds 0.5 log(2 pi)
  IGNIS_LOSS_ARG(double, eps) = 1e-6;  // var is clamped to at least eps
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";
};
struct CTCLossOptions {
  IGNIS_LOSS_ARG(int64_t, blank) = 0;
  IGNIS_LOSS_ARG(std::string, reduction) = "mean";  // "mean": each loss / its target length
  IGNIS_LOSS_ARG(bool, zero_infinity) = false;
};
#undef IGNIS_LOSS_ARG

namespace functional {
using MarginRankingLossFuncOptions = MarginRankingLossOptions;
using MultiMarginLossFuncOptions = MultiMarginLossOptions;
using MultilabelMarginLossFuncOptions = MultiLabelMarginLossOptions;
using SoftMarginLossFuncOptions = SoftMarginLossOptions;
using MultilabelSoftMarginLossFuncOptions = MultiLabelSoftMarginLossOptions;
using HingeEmbeddingLossFuncOptions = HingeEmbeddingLossOptions;
using TripletMarginLossFuncOptions = TripletMarginLossOptions;
using CosineEmbeddingLossFuncOptions = CosineEmbeddingLossOptions;
using PoissonNLLLossFuncOptions = PoissonNLLLossOptions;
using GaussianNLLLossFuncOptions = GaussianNLLLossOptions;
using CTCLossFuncOptions = CTCLossOptions;

/// max(0, -target (input1 - input2) + margin); the three of one rank, broadcast together.
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           const MarginRankingLossFuncOptions& options = {});
Tensor margin_ranking_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                           double margin, const std::string& reduction);

/// input [N, C] or [C], target class indices [N] (or 0-d): per sample
/// sum_{i != y} w[y] max(0, margin - x[y] + x[i])^p / C.
Tensor multi_margin_loss(const Tensor& input, const Tensor& target,
                         const MultiMarginLossFuncOptions& options = {});
Tensor multi_margin_loss(const Tensor& input, const Tensor& target, int64_t p, double margin,
                         const Tensor& weight, const std::string& reduction);

/// input [N, C] or [C], target int64 of input's shape: each row's class indices, ended by the
/// first -1. Per sample sum_{j target, i not target} max(0, 1 - (x[j] - x[i])) / C.
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              const MultilabelMarginLossFuncOptions& options = {});
Tensor multilabel_margin_loss(const Tensor& input, const Tensor& target,
                              const std::string& reduction);

/// log(1 + exp(-target input)), computed without overflow for large |input|.
Tensor soft_margin_loss(const Tensor& input, const Tensor& target,
                        const SoftMarginLossFuncOptions& options = {});
Tensor soft_margin_loss(const Tensor& input, const Tensor& target, const std::string& reduction);

/// input and target [N, C] (or [C]): per sample the mean over classes of
/// -w (t log sigmoid(x) + (1 - t) log sigmoid(-x)).
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target,
                                   const MultilabelSoftMarginLossFuncOptions& options = {});
Tensor multilabel_soft_margin_loss(const Tensor& input, const Tensor& target, const Tensor& weight,
                                   const std::string& reduction);

/// x where target == 1, max(0, margin - x) where target == -1 (PyTorch's sum of both terms for
/// other target values).
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target,
                            const HingeEmbeddingLossFuncOptions& options = {});
Tensor hinge_embedding_loss(const Tensor& input, const Tensor& target, double margin,
                            const std::string& reduction);

/// max(0, margin + d(a, p) - d(a, n)) with d(x, y) = ||x - y + eps||_p over the last dim; swap:
/// d(a, n) is min(d(a, n), d(p, n)).
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           const TripletMarginLossFuncOptions& options = {});
Tensor triplet_margin_loss(const Tensor& anchor, const Tensor& positive, const Tensor& negative,
                           double margin, double p, double eps, bool swap,
                           const std::string& reduction);

/// input1, input2 [N, D] with target [N] (or [D] with a 0-d target) of 1 or -1: 1 - cos where
/// target == 1, max(0, cos - margin) where target == -1.
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             const CosineEmbeddingLossFuncOptions& options = {});
Tensor cosine_embedding_loss(const Tensor& input1, const Tensor& input2, const Tensor& target,
                             double margin, const std::string& reduction);

/// exp(input) - target input (log_input), or input - target log(input + eps); full adds
/// Stirling's t log t - t + 0.5 log(2 pi t) where target > 1.
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target,
                        const PoissonNLLLossFuncOptions& options = {});
Tensor poisson_nll_loss(const Tensor& input, const Tensor& target, bool log_input, bool full,
                        double eps, const std::string& reduction);

/// 0.5 (log(max(var, eps)) + (input - target)^2 / max(var, eps)) (+ 0.5 log(2 pi) when full).
/// var has input's shape, or input's shape without (or with 1 as) the last dim; negative
/// entries are an error. The clamp passes var's gradient straight through, as PyTorch's does.
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var,
                         const GaussianNLLLossFuncOptions& options = {});
Tensor gaussian_nll_loss(const Tensor& input, const Tensor& target, const Tensor& var, bool full,
                         double eps, const std::string& reduction);

/// Connectionist temporal classification. log_probs [T, N, C] (or [T, C]); targets [N, S]
/// padded, or 1-d, the N sequences concatenated; input_lengths and target_lengths [N] (int
/// tensors or lists). The gradient of log_probs is PyTorch's: exact where log_probs is a
/// log_softmax over C (the usual input).
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, const CTCLossFuncOptions& options = {});
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                const Tensor& target_lengths, int64_t blank, const std::string& reduction,
                bool zero_infinity);
Tensor ctc_loss(const Tensor& log_probs, const Tensor& targets, IntArrayRef input_lengths,
                IntArrayRef target_lengths, int64_t blank, const std::string& reduction,
                bool zero_infinity);
}  // namespace functional

/// A loss of (input, target) configured by an options object.
#define IGNIS_OPTIONS_LOSS(Name)                                        \
  class Name : public Loss {                                            \
   public:                                                              \
    explicit Name(Name##Options options = {});                          \
    std::string type_name() const override { return #Name; }            \
    Tensor forward(const Tensor& input, const Tensor& target) override; \
    Name##Options options;                                              \
  }

IGNIS_OPTIONS_LOSS(MultiMarginLoss);
IGNIS_OPTIONS_LOSS(MultiLabelMarginLoss);
IGNIS_OPTIONS_LOSS(SoftMarginLoss);
IGNIS_OPTIONS_LOSS(MultiLabelSoftMarginLoss);
IGNIS_OPTIONS_LOSS(HingeEmbeddingLoss);
IGNIS_OPTIONS_LOSS(PoissonNLLLoss);
#undef IGNIS_OPTIONS_LOSS

/// A loss of three tensors: forward(a, b, c).
#define IGNIS_OPTIONS_LOSS3(Name, A, B, C)                                 \
  class Name : public Module {                                             \
   public:                                                                 \
    explicit Name(Name##Options options = {});                             \
    std::string type_name() const override { return #Name; }               \
    std::string extra_repr() const override;                               \
    Tensor forward(const Tensor& A, const Tensor& B, const Tensor& C);     \
    Tensor operator()(const Tensor& A, const Tensor& B, const Tensor& C) { \
      return forward(A, B, C);                                             \
    }                                                                      \
    using Module::forward;                                                 \
    Name##Options options;                                                 \
  }

IGNIS_OPTIONS_LOSS3(MarginRankingLoss, input1, input2, target);
IGNIS_OPTIONS_LOSS3(TripletMarginLoss, anchor, positive, negative);
IGNIS_OPTIONS_LOSS3(CosineEmbeddingLoss, input1, input2, target);
IGNIS_OPTIONS_LOSS3(GaussianNLLLoss, input, target, var);
#undef IGNIS_OPTIONS_LOSS3

/// forward(log_probs, targets, input_lengths, target_lengths).
class CTCLoss : public Module {
 public:
  explicit CTCLoss(CTCLossOptions options = {});
  std::string type_name() const override { return "CTCLoss"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                 const Tensor& target_lengths);
  Tensor operator()(const Tensor& log_probs, const Tensor& targets, const Tensor& input_lengths,
                    const Tensor& target_lengths) {
    return forward(log_probs, targets, input_lengths, target_lengths);
  }
  using Module::forward;
  CTCLossOptions options;
};

}  // namespace ignis::nn
