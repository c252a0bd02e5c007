// The losses as ATen's functions (torch::mse_loss, torch::nll_loss, ...), with ATen's argument
// order and its integer reduction (Reduction::None / Mean / Sum), so that LibTorch code calling
// them positionally means the same. The nn::functional forms (F::mse_loss(x, y, "sum"), F::
// options structs) are the ones to prefer in new code.
#pragma once

#include <cstdint>
#include <string>

#include "ignis/error.h"
#include "ignis/nn/loss.h"
#include "ignis/ops.h"
#include "ignis/tensor.h"

namespace ignis {

/// at::Reduction: 0 none, 1 mean, 2 sum.
namespace Reduction {
enum Reduction : int64_t { None = 0, Mean = 1, Sum = 2 };
/// "none", "mean" or "sum"; an error naming `op` for any other value.
inline std::string name(int64_t reduction, const char* op) {
  IGNIS_CHECK(reduction >= 0 && reduction <= 2, op, ": reduction must be 0 (None), 1 (Mean) or 2 ",
              "(Sum), got ", reduction);
  static const char* const names[] = {"none", "mean", "sum"};
  return names[reduction];
}
}  // namespace Reduction

inline Tensor mse_loss(const Tensor& self, const Tensor& target,
                       int64_t reduction = Reduction::Mean) {
  return nn::functional::mse_loss(self, target, Reduction::name(reduction, "mse_loss"));
}
inline Tensor l1_loss(const Tensor& self, const Tensor& target,
                      int64_t reduction = Reduction::Mean) {
  return nn::functional::l1_loss(self, target, Reduction::name(reduction, "l1_loss"));
}
inline Tensor smooth_l1_loss(const Tensor& self, const Tensor& target,
                             int64_t reduction = Reduction::Mean, double beta = 1.0) {
  return nn::functional::smooth_l1_loss(self, target, Reduction::name(reduction, "smooth_l1_loss"),
                                        beta);
}
inline Tensor huber_loss(const Tensor& self, const Tensor& target,
                         int64_t reduction = Reduction::Mean, double delta = 1.0) {
  return nn::functional::huber_loss(self, target, Reduction::name(reduction, "huber_loss"), delta);
}
/// ATen's order: weight, reduction, ignore_index (F::nll_loss: weight, ignore_index, reduction).
inline Tensor nll_loss(const Tensor& self, const Tensor& target, const Tensor& weight = {},
                       int64_t reduction = Reduction::Mean, int64_t ignore_index = -100) {
  return nn::functional::nll_loss(self, target, weight, ignore_index,
                                  Reduction::name(reduction, "nll_loss"));
}
inline Tensor cross_entropy_loss(const Tensor& self, const Tensor& target,
                                 const Tensor& weight = {}, int64_t reduction = Reduction::Mean,
                                 int64_t ignore_index = -100, double label_smoothing = 0.0) {
  return nn::functional::cross_entropy(self, target, weight, ignore_index,
                                       Reduction::name(reduction, "cross_entropy_loss"),
                                       label_smoothing);
}
inline Tensor binary_cross_entropy(const Tensor& self, const Tensor& target,
                                   const Tensor& weight = {}, int64_t reduction = Reduction::Mean) {
  return nn::functional::binary_cross_entropy(self, target, weight,
                                              Reduction::name(reduction, "binary_cross_entropy"));
}
/// ignis::binary_cross_entropy_with_logits(self, target, weight, pos_weight, "mean") is in
/// ops.h; this overload takes ATen's integer reduction.
inline Tensor binary_cross_entropy_with_logits(const Tensor& self, const Tensor& target,
                                               const Tensor& weight, const Tensor& pos_weight,
                                               int64_t reduction) {
  return binary_cross_entropy_with_logits(
      self, target, weight, pos_weight,
      Reduction::name(reduction, "binary_cross_entropy_with_logits"));
}
inline Tensor kl_div(const Tensor& self, const Tensor& target, int64_t reduction = Reduction::Mean,
                     bool log_target = false) {
  return nn::functional::kl_div(self, target, Reduction::name(reduction, "kl_div"), log_target);
}

}  // namespace ignis
