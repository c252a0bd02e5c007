// More layers with LibTorch's Options: Conv3d, ConvTranspose1d, MaxPool1d/3d, AvgPool1d/3d,
// InstanceNorm1d/2d/3d, CosineSimilarity, PairwiseDistance, PixelShuffle, PixelUnshuffle, Unfold,
// Fold. Parameter and buffer names are PyTorch's, so state_dict keys load as they are.
#pragma once

#include <string>

#include "ignis/nn/conv.h"
#include "ignis/nn/functional_ops.h"
#include "ignis/nn/module.h"

namespace ignis::nn {

using Conv3dOptions = detail::ConvOptions<3>;
using ConvTranspose1dOptions = detail::ConvOptions<1>;

/// A 3-d convolution over [N, C, D, H, W]: weight [out, in / groups, kd, kh, kw], bias [out];
/// initialised like PyTorch. padding_mode "zeros", "reflect", "replicate" or "circular".
class Conv3d : public Module {
 public:
  explicit Conv3d(const Conv3dOptions& options);
  std::string type_name() const override { return "Conv3d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  Conv3dOptions options;
};

/// The transposed 1-d convolution: weight [in, out / groups, k], bias [out].
class ConvTranspose1d : public Module {
 public:
  explicit ConvTranspose1d(const ConvTranspose1dOptions& options);
  std::string type_name() const override { return "ConvTranspose1d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_parameters();
  Tensor weight, bias;
  ConvTranspose1dOptions options;
};

namespace detail {
/// MaxPool1d / MaxPool3d (D spatial dims).
template <int D>
class MaxPoolNd : public Module {
 public:
  explicit MaxPoolNd(const MaxPoolOptions& options) : options(options) {}
  std::string type_name() const override { return D == 1 ? "MaxPool1d" : "MaxPool3d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  MaxPoolOptions options;
};
/// AvgPool1d / AvgPool3d.
template <int D>
class AvgPoolNd : public Module {
 public:
  explicit AvgPoolNd(const AvgPoolOptions& options) : options(options) {}
  std::string type_name() const override { return D == 1 ? "AvgPool1d" : "AvgPool3d"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  AvgPoolOptions options;
};
}  // namespace detail

using MaxPool1d = detail::MaxPoolNd<1>;
using MaxPool3d = detail::MaxPoolNd<3>;
using AvgPool1d = detail::AvgPoolNd<1>;
using AvgPool3d = detail::AvgPoolNd<3>;

/// InstanceNorm1d/2d/3d (PyTorch's _InstanceNorm): "weight" (ones) and "bias" (zeros) when
/// affine; buffers "running_mean", "running_var", "num_batches_tracked" when track_running_stats.
/// Instance statistics in training or without running statistics, else the running ones.
class InstanceNormBase : public Module {
 public:
  InstanceNormBase(const InstanceNormOptions& options, int spatial_dims, const char* name);
  std::string type_name() const override { return name_; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  void reset_running_stats();
  void reset_parameters();
  Tensor weight, bias, running_mean, running_var, num_batches_tracked;
  InstanceNormOptions options;

 private:
  int spatial_;
  const char* name_;
};
class InstanceNorm1d : public InstanceNormBase {
 public:
  explicit InstanceNorm1d(const InstanceNormOptions& o)
      : InstanceNormBase(o, 1, "InstanceNorm1d") {}
};
class InstanceNorm2d : public InstanceNormBase {
 public:
  explicit InstanceNorm2d(const InstanceNormOptions& o)
      : InstanceNormBase(o, 2, "InstanceNorm2d") {}
};
class InstanceNorm3d : public InstanceNormBase {
 public:
  explicit InstanceNorm3d(const InstanceNormOptions& o)
      : InstanceNormBase(o, 3, "InstanceNorm3d") {}
};

class CosineSimilarity : public Module {
 public:
  explicit CosineSimilarity(const CosineSimilarityOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "CosineSimilarity"; }
  std::string extra_repr() const override;
  /// One input is not enough: call forward(x1, x2).
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  CosineSimilarityOptions options;
};

class PairwiseDistance : public Module {
 public:
  explicit PairwiseDistance(const PairwiseDistanceOptions& options = {}) : options(options) {}
  std::string type_name() const override { return "PairwiseDistance"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor forward(const Tensor& x1, const Tensor& x2);
  PairwiseDistanceOptions options;
};

class PixelShuffle : public Module {
 public:
  explicit PixelShuffle(const PixelShuffleOptions& options) : options(options) {}
  std::string type_name() const override { return "PixelShuffle"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  PixelShuffleOptions options;
};

class PixelUnshuffle : public Module {
 public:
  explicit PixelUnshuffle(const PixelUnshuffleOptions& options) : options(options) {}
  std::string type_name() const override { return "PixelUnshuffle"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  PixelUnshuffleOptions options;
};

class Unfold : public Module {
 public:
  explicit Unfold(const UnfoldOptions& options) : options(options) {}
  std::string type_name() const override { return "Unfold"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  UnfoldOptions options;
};

class Fold : public Module {
 public:
  explicit Fold(const FoldOptions& options) : options(options) {}
  std::string type_name() const override { return "Fold"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  FoldOptions options;
};

}  // namespace ignis::nn
