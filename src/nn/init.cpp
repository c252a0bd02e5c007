#include "ignis/nn/init.h"

#include <cmath>
#include <vector>

#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::nn::init {

std::pair<int64_t, int64_t> calculate_fan_in_and_fan_out(const Tensor& w) {
  IGNIS_CHECK(w.dim() >= 2,
              "init: fan in and fan out can not be computed for a tensor with "
              "fewer than 2 dimensions (shape ",
              w.sizes(), ")");
  int64_t field = 1;
  for (int64_t d = 2; d < w.dim(); ++d) field *= w.size(d);
  return {w.size(1) * field, w.size(0) * field};
}

double calculate_gain(const std::string& nl, double param) {
  if (nl == "linear" || nl == "sigmoid" || nl.rfind("conv", 0) == 0) return 1;
  if (nl == "tanh") return 5.0 / 3;
  if (nl == "relu") return std::sqrt(2.0);
  if (nl == "leaky_relu") return std::sqrt(2.0 / (1 + param * param));
  if (nl == "selu") return 3.0 / 4;
  IGNIS_FAIL("calculate_gain: unsupported nonlinearity '", nl, "'");
}

Tensor uniform_(Tensor t, double a, double b) {
  NoGradGuard ng;
  t.uniform_(a, b);
  return t;
}
Tensor normal_(Tensor t, double mean, double std) {
  NoGradGuard ng;
  t.normal_(mean, std);
  return t;
}
Tensor constant_(Tensor t, double value) {
  NoGradGuard ng;
  t.fill_(value);
  return t;
}
Tensor zeros_(Tensor t) { return constant_(t, 0); }
Tensor ones_(Tensor t) { return constant_(t, 1); }

Tensor xavier_uniform_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const double a = gain * std::sqrt(6.0 / static_cast<double>(in + out));
  return uniform_(t, -a, a);
}
Tensor xavier_normal_(Tensor t, double gain) {
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  return normal_(t, 0, gain * std::sqrt(2.0 / static_cast<double>(in + out)));
}

namespace {
double kaiming_std(const Tensor& t, double a, const std::string& mode, const std::string& nl) {
  IGNIS_CHECK(mode == "fan_in" || mode == "fan_out",
              "kaiming init: mode must be fan_in or "
              "fan_out, got '",
              mode, "'");
  auto [in, out] = calculate_fan_in_and_fan_out(t);
  const int64_t fan = mode == "fan_in" ? in : out;
  IGNIS_CHECK(fan > 0, "kaiming init: initializing a zero-element tensor (shape ", t.sizes(), ")");
  return calculate_gain(nl, a) / std::sqrt(static_cast<double>(fan));
}
}  // namespace

Tensor kaiming_uniform_(Tensor t, double a, const std::string& mode, const std::string& nl) {
  const double bound = std::sqrt(3.0) * kaiming_std(t, a, mode, nl);
  return uniform_(t, -bound, bound);
}
Tensor kaiming_normal_(Tensor t, double a, const std::string& mode, const std::string& nl) {
  return normal_(t, 0, kaiming_std(t, a, mode, nl));
}

Tensor orthogonal_(Tensor t, double gain) {
  IGNIS_CHECK(t.dim() >= 2,
              "orthogonal_: only tensors with 2 or more dimensions are supported, "
              "got shape ",
              t.sizes());
  const int64_t rows = t.size(0);
  const int64_t cols = t.numel() / rows;
  // Modified Gram-Schmidt on the rows (or columns) of a normal matrix, in float64; sign-fixed
  // like the QR-based construction so the result is uniformly distributed.
  const bool transpose = rows < cols;
  const int64_t n = transpose ? rows : cols;  // vectors to orthonormalise
  const int64_t m = transpose ? cols : rows;  // their length
  Tensor g = randn({n, m}, kFloat64).contiguous();
  double* a = g.data_ptr<double>();
  for (int64_t i = 0; i < n; ++i) {
    double* vi = a + i * m;
    for (int64_t j = 0; j < i; ++j) {
      const double* vj = a + j * m;
      double dot = 0;
      for (int64_t k = 0; k < m; ++k) dot += vi[k] * vj[k];
      for (int64_t k = 0; k < m; ++k) vi[k] -= dot * vj[k];
    }
    double norm = 0;
    for (int64_t k = 0; k < m; ++k) norm += vi[k] * vi[k];
    norm = std::sqrt(norm);
    IGNIS_CHECK(norm > 1e-12, "orthogonal_: degenerate random matrix");
    for (int64_t k = 0; k < m; ++k) vi[k] /= norm;
  }
  Tensor q = transpose ? g : g.t();  // [rows, cols]
  NoGradGuard ng;
  t.copy_((q * gain).reshape(t.sizes()).to(t.dtype()));
  return t;
}

}  // namespace ignis::nn::init
