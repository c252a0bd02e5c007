// LibTorch-style options (torch::nn::MaxPool3dOptions, F::NormalizeFuncOptions, ...) and the
// nn::functional forms that take them, for the ops of ignis/nn_ops.h and for pad, interpolate and
// embedding. Options have chained setters and same-named getters:
//   F::normalize(x, F::NormalizeFuncOptions().p(1).dim(-1));
//   nn::MaxPool3d(nn::MaxPool3dOptions(3).stride(2).padding(1));
// Per-dim values given as one number apply to every spatial dim. Modes are strings ("reflect"),
// where LibTorch has enum tags (torch::kReflect).
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <vector>

#include "ignis/nn_ops.h"
#include "ignis/norm.h"
#include "ignis/ops.h"

/// A chained option `name` of type T: `opts.name(v)` sets it and returns the options, `opts.name()`
/// reads it. Follow the macro with its default: IGNIS_ARG(double, eps) = 1e-5;
#define IGNIS_ARG(T, name)                                 \
 public:                                                   \
  auto name(const T& new_##name)->decltype(*this) {        \
    this->name##_ = new_##name;                            \
    return *this;                                          \
  }                                                        \
  const T& name() const noexcept { return this->name##_; } \
                                                           \
 private:                                                  \
  T name##_
/// A per-dim option (kernel, stride, ...): set from one number or a list, read as a vector.
#define IGNIS_DIMS_ARG(name)                                                  \
 public:                                                                      \
  auto name(IntArrayRef new_##name)->decltype(*this) {                        \
    this->name##_ = new_##name.vec();                                         \
    return *this;                                                             \
  }                                                                           \
  const std::vector<int64_t>& name() const noexcept { return this->name##_; } \
                                                                              \
 private:                                                                     \
  std::vector<int64_t> name##_

namespace ignis::nn {

// ---- module options (each also the functional form's options, as in LibTorch)

/// MaxPool1d/2d/3d: kernel_size, stride (empty: = kernel_size), padding, dilation, ceil_mode.
struct MaxPoolOptions {
  MaxPoolOptions(IntArrayRef kernel_size) : kernel_size_(kernel_size.vec()) {}  // NOLINT
  IGNIS_DIMS_ARG(kernel_size);
  IGNIS_DIMS_ARG(stride) = {};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_DIMS_ARG(dilation) = {1};
  IGNIS_ARG(bool, ceil_mode) = false;
};
using MaxPool1dOptions = MaxPoolOptions;
using MaxPool3dOptions = MaxPoolOptions;

/// AvgPool1d/3d: kernel_size, stride (empty: = kernel_size), padding, ceil_mode,
/// count_include_pad, divisor_override (not for 1-d, as in PyTorch).
struct AvgPoolOptions {
  AvgPoolOptions(IntArrayRef kernel_size) : kernel_size_(kernel_size.vec()) {}  // NOLINT
  IGNIS_DIMS_ARG(kernel_size);
  IGNIS_DIMS_ARG(stride) = {};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_ARG(bool, ceil_mode) = false;
  IGNIS_ARG(bool, count_include_pad) = true;
  IGNIS_ARG(std::optional<int64_t>, divisor_override) = std::nullopt;
};
using AvgPool1dOptions = AvgPoolOptions;
using AvgPool2dOptions = AvgPoolOptions;
using AvgPool3dOptions = AvgPoolOptions;

/// InstanceNorm1d/2d/3d: no affine parameters and no running statistics by default (PyTorch).
struct InstanceNormOptions {
  InstanceNormOptions(int64_t num_features) : num_features_(num_features) {}  // NOLINT
  IGNIS_ARG(int64_t, num_features);
  IGNIS_ARG(double, eps) = 1e-5;
  IGNIS_ARG(double, momentum) = 0.1;
  IGNIS_ARG(bool, affine) = false;
  IGNIS_ARG(bool, track_running_stats) = false;
};
using InstanceNorm1dOptions = InstanceNormOptions;
using InstanceNorm2dOptions = InstanceNormOptions;
using InstanceNorm3dOptions = InstanceNormOptions;

struct CosineSimilarityOptions {
  IGNIS_ARG(int64_t, dim) = 1;
  IGNIS_ARG(double, eps) = 1e-8;
};

struct PairwiseDistanceOptions {
  IGNIS_ARG(double, p) = 2;
  IGNIS_ARG(double, eps) = 1e-6;
  IGNIS_ARG(bool, keepdim) = false;
};

struct PixelShuffleOptions {
  PixelShuffleOptions(int64_t upscale_factor) : upscale_factor_(upscale_factor) {}  // NOLINT
  IGNIS_ARG(int64_t, upscale_factor);
};

struct PixelUnshuffleOptions {
  PixelUnshuffleOptions(int64_t downscale_factor)
      : downscale_factor_(downscale_factor) {}  // NOLINT
  IGNIS_ARG(int64_t, downscale_factor);
};

/// Unfold (F::unfold): the sliding blocks of [N, C, H, W] as columns.
struct UnfoldOptions {
  UnfoldOptions(IntArrayRef kernel_size) : kernel_size_(kernel_size.vec()) {}  // NOLINT
  IGNIS_DIMS_ARG(kernel_size);
  IGNIS_DIMS_ARG(dilation) = {1};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_DIMS_ARG(stride) = {1};
};

/// Fold (F::fold): columns summed back into [N, C, output_size].
struct FoldOptions {
  FoldOptions(IntArrayRef output_size, IntArrayRef kernel_size)
      : output_size_(output_size.vec()), kernel_size_(kernel_size.vec()) {}
  IGNIS_DIMS_ARG(output_size);
  IGNIS_DIMS_ARG(kernel_size);
  IGNIS_DIMS_ARG(dilation) = {1};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_DIMS_ARG(stride) = {1};
};

/// Embedding(num_embeddings, embedding_dim): padding_idx, max_norm (renormalise looked-up rows
/// whose norm_type-norm exceeds it, in place), norm_type.
struct EmbeddingOptions {
  EmbeddingOptions(int64_t num_embeddings, int64_t embedding_dim)
      : num_embeddings_(num_embeddings), embedding_dim_(embedding_dim) {}
  IGNIS_ARG(int64_t, num_embeddings);
  IGNIS_ARG(int64_t, embedding_dim);
  IGNIS_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  IGNIS_ARG(std::optional<double>, max_norm) = std::nullopt;
  IGNIS_ARG(double, norm_type) = 2.;
};

namespace functional {

// ---- functional options

using MaxPool1dFuncOptions = MaxPoolOptions;
using MaxPool3dFuncOptions = MaxPoolOptions;
using AvgPool1dFuncOptions = AvgPoolOptions;
using AvgPool3dFuncOptions = AvgPoolOptions;
using CosineSimilarityFuncOptions = CosineSimilarityOptions;
using PairwiseDistanceFuncOptions = PairwiseDistanceOptions;
using PixelShuffleFuncOptions = PixelShuffleOptions;
using PixelUnshuffleFuncOptions = PixelUnshuffleOptions;
using UnfoldFuncOptions = UnfoldOptions;
using FoldFuncOptions = FoldOptions;

/// conv1d/2d/3d's options (the weight is an argument).
template <int D>
struct ConvFuncOptions {
  IGNIS_ARG(Tensor, bias) = Tensor();
  IGNIS_DIMS_ARG(stride) = {1};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_DIMS_ARG(dilation) = {1};
  IGNIS_ARG(int64_t, groups) = 1;
};
using Conv3dFuncOptions = ConvFuncOptions<3>;

template <int D>
struct ConvTransposeFuncOptions {
  IGNIS_ARG(Tensor, bias) = Tensor();
  IGNIS_DIMS_ARG(stride) = {1};
  IGNIS_DIMS_ARG(padding) = {0};
  IGNIS_DIMS_ARG(output_padding) = {0};
  IGNIS_ARG(int64_t, groups) = 1;
  IGNIS_DIMS_ARG(dilation) = {1};
};
using ConvTranspose1dFuncOptions = ConvTransposeFuncOptions<1>;

struct InstanceNormFuncOptions {
  IGNIS_ARG(Tensor, running_mean) = Tensor();
  IGNIS_ARG(Tensor, running_var) = Tensor();
  IGNIS_ARG(Tensor, weight) = Tensor();
  IGNIS_ARG(Tensor, bias) = Tensor();
  IGNIS_ARG(bool, use_input_stats) = true;
  IGNIS_ARG(double, momentum) = 0.1;
  IGNIS_ARG(double, eps) = 1e-5;
};

struct NormalizeFuncOptions {
  IGNIS_ARG(double, p) = 2.0;
  IGNIS_ARG(int64_t, dim) = 1;
  IGNIS_ARG(double, eps) = 1e-12;
};

/// mode "constant" (with value), "reflect", "replicate" or "circular".
struct PadFuncOptions {
  PadFuncOptions(IntArrayRef pad) : pad_(pad.vec()) {}  // NOLINT
  IGNIS_DIMS_ARG(pad);
  IGNIS_ARG(std::string, mode) = "constant";
  IGNIS_ARG(double, value) = 0;
};

/// Exactly one of size and scale_factor; mode "nearest", "nearest-exact", "area", "bilinear" or
/// "bicubic" (see ignis::interpolate).
struct InterpolateFuncOptions {
  IGNIS_ARG(std::optional<std::vector<int64_t>>, size) = std::nullopt;
  IGNIS_ARG(std::optional<std::vector<double>>, scale_factor) = std::nullopt;
  IGNIS_ARG(std::string, mode) = "nearest";
  IGNIS_ARG(std::optional<bool>, align_corners) = std::nullopt;
};

struct EmbeddingFuncOptions {
  IGNIS_ARG(std::optional<int64_t>, padding_idx) = std::nullopt;
  IGNIS_ARG(std::optional<double>, max_norm) = std::nullopt;
  IGNIS_ARG(double, norm_type) = 2.;
};

// ---- the functional forms

inline Tensor conv3d(const Tensor& x, const Tensor& weight, const Conv3dFuncOptions& o = {}) {
  return ignis::conv3d(x, weight, o.bias(), o.stride(), o.padding(), o.dilation(), o.groups());
}
inline Tensor conv_transpose1d(const Tensor& x, const Tensor& weight,
                               const ConvTranspose1dFuncOptions& o = {}) {
  return ignis::conv_transpose1d(x, weight, o.bias(), o.stride(), o.padding(), o.output_padding(),
                                 o.groups(), o.dilation());
}
inline Tensor max_pool1d(const Tensor& x, const MaxPool1dFuncOptions& o) {
  return ignis::max_pool1d(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                           o.ceil_mode());
}
inline std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x,
                                                          const MaxPool1dFuncOptions& o) {
  return ignis::max_pool1d_with_indices(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                        o.ceil_mode());
}
inline Tensor max_pool3d(const Tensor& x, const MaxPool3dFuncOptions& o) {
  return ignis::max_pool3d(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                           o.ceil_mode());
}
inline std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x,
                                                          const MaxPool3dFuncOptions& o) {
  return ignis::max_pool3d_with_indices(x, o.kernel_size(), o.stride(), o.padding(), o.dilation(),
                                        o.ceil_mode());
}
inline Tensor avg_pool1d(const Tensor& x, const AvgPool1dFuncOptions& o) {
  return ignis::avg_pool1d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                           o.count_include_pad());
}
inline Tensor avg_pool3d(const Tensor& x, const AvgPool3dFuncOptions& o) {
  return ignis::avg_pool3d(x, o.kernel_size(), o.stride(), o.padding(), o.ceil_mode(),
                           o.count_include_pad(), o.divisor_override());
}
inline Tensor instance_norm(const Tensor& x, const InstanceNormFuncOptions& o = {}) {
  return ignis::instance_norm(x, o.running_mean(), o.running_var(), o.weight(), o.bias(),
                              o.use_input_stats(), o.momentum(), o.eps());
}
inline Tensor normalize(const Tensor& x, const NormalizeFuncOptions& o = {}) {
  return ignis::normalize(x, o.p(), o.dim(), o.eps());
}
inline Tensor cosine_similarity(const Tensor& x1, const Tensor& x2,
                                const CosineSimilarityFuncOptions& o = {}) {
  return ignis::cosine_similarity(x1, x2, o.dim(), o.eps());
}
inline Tensor pairwise_distance(const Tensor& x1, const Tensor& x2,
                                const PairwiseDistanceFuncOptions& o = {}) {
  return ignis::pairwise_distance(x1, x2, o.p(), o.eps(), o.keepdim());
}
inline Tensor pixel_shuffle(const Tensor& x, const PixelShuffleFuncOptions& o) {
  return ignis::pixel_shuffle(x, o.upscale_factor());
}
inline Tensor pixel_unshuffle(const Tensor& x, const PixelUnshuffleFuncOptions& o) {
  return ignis::pixel_unshuffle(x, o.downscale_factor());
}
inline Tensor unfold(const Tensor& x, const UnfoldFuncOptions& o) {
  return ignis::im2col(x, o.kernel_size(), o.dilation(), o.padding(), o.stride());
}
inline Tensor fold(const Tensor& x, const FoldFuncOptions& o) {
  return ignis::col2im(x, o.output_size(), o.kernel_size(), o.dilation(), o.padding(), o.stride());
}
inline Tensor pad(const Tensor& x, const PadFuncOptions& o) {
  return ignis::pad(x, o.pad(), o.mode(), o.value());
}
/// F::interpolate with options: exactly one of size and scale_factor must be set.
Tensor interpolate(const Tensor& x, const InterpolateFuncOptions& o);
/// F::embedding with options: with max_norm, first renormalises the looked-up rows of `weight`
/// in place (embedding_renorm_), as PyTorch does.
Tensor embedding(const Tensor& indices, const Tensor& weight, const EmbeddingFuncOptions& o);

}  // namespace functional
}  // namespace ignis::nn
