// Normalisation layers (BatchNorm1d/2d, GroupNorm, LocalResponseNorm),
// Dropout2d and Upsample, with the nn::functional forms of their ops. Parameter
// and buffer names are PyTorch's, so torchvision state_dict keys load as they
// are.
#pragma once

#include <initializer_list>
#include <optional>
#include <string>
#include <vector>

#include "ignis/nn/module.h"
#include "ignis/norm.h"

namespace ignis::nn {

namespace functional {
inline Tensor batch_norm(const Tensor &x, const Tensor &running_mean,
                         const Tensor &running_var, const Tensor &weight = {},
                         const Tensor &bias = {}, bool training = false,
                         double momentum = 0.1, double eps = 1e-5) {
  return ignis::batch_norm(x, running_mean, running_var, weight, bias, training,
                           momentum, eps);
}
inline Tensor group_norm(const Tensor &x, int64_t num_groups,
                         const Tensor &weight = {}, const Tensor &bias = {},
                         double eps = 1e-5) {
  return ignis::group_norm(x, num_groups, weight, bias, eps);
}
inline Tensor local_response_norm(const Tensor &x, int64_t size,
                                  double alpha = 1e-4, double beta = 0.75,
                                  double k = 1.0) {
  return ignis::local_response_norm(x, size, alpha, beta, k);
}
inline Tensor dropout2d(const Tensor &x, double p = 0.5, bool training = true) {
  return ignis::dropout2d(x, p, training);
}
using ignis::interpolate;
} // namespace functional

/// The shared part of BatchNorm1d and BatchNorm2d (PyTorch's _BatchNorm):
/// parameters "weight" (ones) and "bias" (zeros) when affine; buffers
/// "running_mean" (zeros), "running_var" (ones) and "num_batches_tracked"
/// (int64, 0-d) when track_running_stats. Training uses batch statistics and
/// updates the running ones; eval() switches to the running statistics.
class BatchNormBase : public Module {
public:
  BatchNormBase(int64_t num_features, double eps, double momentum, bool affine,
                bool track_running_stats);
  std::string extra_repr() const override;
  Tensor forward(const Tensor &x) override;
  /// running_mean = 0, running_var = 1, num_batches_tracked = 0.
  void reset_running_stats();
  /// Running statistics reset, weight = 1, bias = 0.
  void reset_parameters();

  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  int64_t num_features;
  double eps, momentum;
  bool affine, track_running_stats;

protected:
  /// Throws naming the module when x's rank or channel count is wrong.
  virtual void check_input(const Tensor &x) const = 0;
};

/// Batch norm over (N, C) or (N, C, L) inputs.
class BatchNorm1d : public BatchNormBase {
public:
  explicit BatchNorm1d(int64_t num_features, double eps = 1e-5,
                       double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine,
                      track_running_stats) {}
  std::string type_name() const override { return "BatchNorm1d"; }

protected:
  void check_input(const Tensor &x) const override;
};

/// Batch norm over (N, C, H, W) inputs.
class BatchNorm2d : public BatchNormBase {
public:
  explicit BatchNorm2d(int64_t num_features, double eps = 1e-5,
                       double momentum = 0.1, bool affine = true,
                       bool track_running_stats = true)
      : BatchNormBase(num_features, eps, momentum, affine,
                      track_running_stats) {}
  std::string type_name() const override { return "BatchNorm2d"; }

protected:
  void check_input(const Tensor &x) const override;
};

/// Normalises groups of num_channels / num_groups channels; per-channel
/// "weight" (ones) and "bias" (zeros) when affine.
class GroupNorm : public Module {
public:
  GroupNorm(int64_t num_groups, int64_t num_channels, double eps = 1e-5,
            bool affine = true);
  std::string type_name() const override { return "GroupNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor &x) override;
  Tensor weight, bias;
  int64_t num_groups, num_channels;
  double eps;
};

/// AlexNet's local response normalisation across channels (see
/// ignis::local_response_norm).
class LocalResponseNorm : public Module {
public:
  explicit LocalResponseNorm(int64_t size, double alpha = 1e-4,
                             double beta = 0.75, double k = 1.0);
  std::string type_name() const override { return "LocalResponseNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor &x) override {
    return ignis::local_response_norm(x, size, alpha, beta, k);
  }
  int64_t size;
  double alpha, beta, k;
};

/// Zeroes whole channels with probability p while training (scaling the rest by
/// 1/(1-p)).
class Dropout2d : public Module {
public:
  explicit Dropout2d(double p = 0.5);
  std::string type_name() const override { return "Dropout2d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor &x) override {
    return ignis::dropout2d(x, p_, is_training());
  }

private:
  double p_;
};

/// Resizes the spatial dims by scale factors or to a fixed size (see
/// ignis::interpolate). Brace lists pick the form by element type:
/// Upsample({2.0, 2.0}) scales, Upsample({32, 32}) resizes.
class Upsample : public Module {
public:
  explicit Upsample(std::vector<double> scale_factor,
                    std::string mode = "nearest",
                    std::optional<bool> align_corners = {});
  explicit Upsample(std::vector<int64_t> size, std::string mode = "nearest",
                    std::optional<bool> align_corners = {});
  explicit Upsample(std::initializer_list<double> scale_factor,
                    std::string mode = "nearest",
                    std::optional<bool> align_corners = {})
      : Upsample(std::vector<double>(scale_factor), std::move(mode),
                 align_corners) {}
  explicit Upsample(std::initializer_list<int> size,
                    std::string mode = "nearest",
                    std::optional<bool> align_corners = {})
      : Upsample(std::vector<int64_t>(size.begin(), size.end()),
                 std::move(mode), align_corners) {}
  std::string type_name() const override { return "Upsample"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor &x) override;

private:
  std::vector<int64_t> size_;
  std::vector<double> scale_factor_;
  std::string mode_;
  std::optional<bool> align_corners_;
};

} // namespace ignis::nn
