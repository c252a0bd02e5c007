// Parameter initialisers (torch.nn.init). Each fills its tensor in place, without recording
// autograd history, and returns it.
#pragma once

#include <string>

#include "ignis/tensor.h"

namespace ignis::nn::init {

/// fan_in and fan_out of a weight ([out, in, k...] as PyTorch counts them).
std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& w);
/// The recommended gain of a nonlinearity, as PyTorch: "linear", "conv1d" ... (any name starting
/// with "conv") and "sigmoid" 1, "tanh" 5/3, "relu" sqrt(2), "leaky_relu" sqrt(2 / (1 + param^2))
/// (param: the negative slope), "selu" 3/4.
double calculate_gain(const std::string& nonlinearity, double param = 0.01);

Tensor uniform_(Tensor t, double a = 0, double b = 1);
Tensor normal_(Tensor t, double mean = 0, double std = 1);
Tensor constant_(Tensor t, double value);
Tensor zeros_(Tensor t);
Tensor ones_(Tensor t);
Tensor xavier_uniform_(Tensor t, double gain = 1);
Tensor xavier_normal_(Tensor t, double gain = 1);
/// mode "fan_in" or "fan_out"; nonlinearity as calculate_gain.
Tensor kaiming_uniform_(Tensor t, double a = 0, const std::string& mode = "fan_in",
                        const std::string& nonlinearity = "leaky_relu");
Tensor kaiming_normal_(Tensor t, double a = 0, const std::string& mode = "fan_in",
                       const std::string& nonlinearity = "leaky_relu");
/// A (semi-)orthogonal matrix, times gain: modified Gram-Schmidt (in float64) on the rows of a
/// standard normal matrix when it has fewer rows than columns, else on its columns (not a QR
/// factorisation, but the same distribution). More than 2 dims: [size(0), numel / size(0)].
Tensor orthogonal_(Tensor t, double gain = 1);

}  // namespace ignis::nn::init
