// Losses, as modules and as functions. reduction: "none", "mean" or "sum" (KLDivLoss also
// "batchmean"), as in PyTorch.
#pragma once

#include <optional>
#include <string>

#include "ignis/nn/module.h"

namespace ignis::nn {

namespace functional {
Tensor mse_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor l1_loss(const Tensor& input, const Tensor& target, const std::string& reduction = "mean");
Tensor smooth_l1_loss(const Tensor& input, const Tensor& target,
                      const std::string& reduction = "mean", double beta = 1.0);
Tensor huber_loss(const Tensor& input, const Tensor& target,
                  const std::string& reduction = "mean", double delta = 1.0);
/// input [N, C] or [N, C, d...] logits (or [C]); target: class indices [N, d...] (int64), or
/// class probabilities of input's shape (floating).
Tensor cross_entropy(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                     int64_t ignore_index = -100, const std::string& reduction = "mean",
                     double label_smoothing = 0.0);
/// input: log-probabilities [N, C] or [N, C, d...]; target: class indices.
Tensor nll_loss(const Tensor& input, const Tensor& target, const Tensor& weight = Tensor(),
                int64_t ignore_index = -100, const std::string& reduction = "mean");
/// input: probabilities in [0, 1].
Tensor binary_cross_entropy(const Tensor& input, const Tensor& target,
                            const Tensor& weight = Tensor(), const std::string& reduction = "mean");
Tensor binary_cross_entropy_with_logits(const Tensor& input, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(),
                                        const std::string& reduction = "mean");
/// input: log-probabilities; target: probabilities (or log-probabilities with log_target).
Tensor kl_div(const Tensor& input, const Tensor& target, const std::string& reduction = "mean",
              bool log_target = false);
}  // namespace functional

/// A loss module: forward(input, target).
class Loss : public Module {
 public:
  /// Checks `reduction`; errors name the loss (`name`). Only KLDivLoss allows "batchmean".
  explicit Loss(std::string reduction, const char* name = "Loss", bool allow_batchmean = false);
  virtual Tensor forward(const Tensor& input, const Tensor& target) = 0;
  Tensor operator()(const Tensor& input, const Tensor& target) { return forward(input, target); }
  using Module::forward;
  std::string extra_repr() const override { return "reduction='" + reduction_ + "'"; }

 protected:
  std::string reduction_;
};

class MSELoss : public Loss {
 public:
  explicit MSELoss(std::string reduction = "mean") : Loss(std::move(reduction), "MSELoss") {}
  std::string type_name() const override { return "MSELoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class L1Loss : public Loss {
 public:
  explicit L1Loss(std::string reduction = "mean") : Loss(std::move(reduction), "L1Loss") {}
  std::string type_name() const override { return "L1Loss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;
};

class SmoothL1Loss : public Loss {
 public:
  explicit SmoothL1Loss(std::string reduction = "mean", double beta = 1.0)
      : Loss(std::move(reduction), "SmoothL1Loss"), beta_(beta) {}
  std::string type_name() const override { return "SmoothL1Loss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  double beta_;
};

class HuberLoss : public Loss {
 public:
  explicit HuberLoss(std::string reduction = "mean", double delta = 1.0)
      : Loss(std::move(reduction), "HuberLoss"), delta_(delta) {}
  std::string type_name() const override { return "HuberLoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  double delta_;
};

struct CrossEntropyOptions {
  Tensor weight;
  int64_t ignore_index = -100;
  std::string reduction = "mean";
  double label_smoothing = 0.0;
};

class CrossEntropyLoss : public Loss {
 public:
  explicit CrossEntropyLoss(CrossEntropyOptions o = {});
  std::string type_name() const override { return "CrossEntropyLoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  CrossEntropyOptions o_;
};

class NLLLoss : public Loss {
 public:
  explicit NLLLoss(Tensor weight = Tensor(), int64_t ignore_index = -100,
                   std::string reduction = "mean");
  std::string type_name() const override { return "NLLLoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_;
  int64_t ignore_index_;
};

class BCELoss : public Loss {
 public:
  explicit BCELoss(Tensor weight = Tensor(), std::string reduction = "mean");
  std::string type_name() const override { return "BCELoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_;
};

class BCEWithLogitsLoss : public Loss {
 public:
  explicit BCEWithLogitsLoss(Tensor weight = Tensor(), std::string reduction = "mean",
                             Tensor pos_weight = Tensor());
  std::string type_name() const override { return "BCEWithLogitsLoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  Tensor weight_, pos_weight_;
};

class KLDivLoss : public Loss {
 public:
  explicit KLDivLoss(std::string reduction = "mean", bool log_target = false)
      : Loss(std::move(reduction), "KLDivLoss", /*allow_batchmean=*/true),
        log_target_(log_target) {}
  std::string type_name() const override { return "KLDivLoss"; }
  Tensor forward(const Tensor& input, const Tensor& target) override;

 private:
  bool log_target_;
};

/// Scales all gradients so that their total p-norm is at most max_norm; returns the norm
/// before clipping.
double clip_grad_norm_(const std::vector<Tensor>& parameters, double max_norm,
                       double norm_type = 2.0, bool error_if_nonfinite = false);
/// Clamps every gradient element to [-clip_value, clip_value].
void clip_grad_value_(const std::vector<Tensor>& parameters, double clip_value);

}  // namespace ignis::nn
