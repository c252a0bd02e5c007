// nn::functional: the stateless forms of the layers (torch.nn.functional).
#pragma once

#include <optional>
#include <string>

#include "ignis/nn/activation.h"  // relu with ReLUFuncOptions, and the other activations
#include "ignis/ops.h"

namespace ignis::nn::functional {

inline Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor()) {
  return ignis::linear(x, w, b);
}
inline Tensor leaky_relu(const Tensor& x, double slope = 0.01) {
  return ignis::leaky_relu(x, slope);
}
inline Tensor gelu(const Tensor& x, const std::string& approximate = "none") {
  return ignis::gelu(x, approximate);
}
inline Tensor silu(const Tensor& x) { return ignis::silu(x); }
inline Tensor sigmoid(const Tensor& x) { return ignis::sigmoid(x); }
inline Tensor tanh(const Tensor& x) { return ignis::tanh(x); }
inline Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20) {
  return ignis::softplus(x, beta, threshold);
}
inline Tensor softmax(const Tensor& x, int64_t dim) { return ignis::softmax(x, dim); }
inline Tensor log_softmax(const Tensor& x, int64_t dim) { return ignis::log_softmax(x, dim); }
/// Zeroes elements with probability p and scales the rest by 1/(1-p) when training.
Tensor dropout(const Tensor& x, double p = 0.5, bool training = true);
/// Rows of `weight` picked by integer `indices`; output shape indices.shape + [dim].
/// Rows equal to padding_idx give zeros and receive no gradient.
Tensor embedding(const Tensor& indices, const Tensor& weight,
                 std::optional<int64_t> padding_idx = std::nullopt);
/// Normalises over the trailing `normalized_shape` dims, then scales and shifts.
Tensor layer_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = Tensor(),
                  const Tensor& bias = Tensor(), double eps = 1e-5);
/// Root-mean-square normalisation over the trailing `normalized_shape` dims (torch.nn.functional.
/// rms_norm): x / sqrt(mean(x^2) + eps), then times weight. eps defaults to the dtype's machine
/// epsilon; bfloat16 input is normalised in float32.
Tensor rms_norm(const Tensor& x, IntArrayRef normalized_shape, const Tensor& weight = Tensor(),
                std::optional<double> eps = std::nullopt);

}  // namespace ignis::nn::functional
