// interpolate's "bicubic" mode, as PyTorch's upsample_bicubic2d: separable cubic convolution
// (Keys, A = -0.75) over 4 taps per output position, the taps' indices clamped to the input, the
// source coordinate scale (dst + 0.5) - 0.5 (not clamped at 0) or, with align_corners,
// dst (in - 1) / (out - 1). Written as 4 weighted index_selects per dim, so the gradients of every
// order are index_select's.
#include <cmath>
#include <vector>

#include "ignis/ops.h"
#include "ops/interpolate.h"

namespace ignis {

namespace {

constexpr double kA = -0.75;

double cubic1(double x) { return ((kA + 2) * x - (kA + 3)) * x * x + 1; }          // |x| <= 1
double cubic2(double x) { return ((kA * x - 5 * kA) * x + 8 * kA) * x - 4 * kA; }  // 1 < |x| < 2

// Resamples dim d of x (of size `in`) to `out` positions.
Tensor cubic_dim(const Tensor& x, int64_t d, int64_t out, double scale, bool align_corners) {
  const int64_t in = x.size(d);
  std::vector<std::vector<int64_t>> idx(4, std::vector<int64_t>(static_cast<size_t>(out)));
  std::vector<std::vector<double>> wt(4, std::vector<double>(static_cast<size_t>(out)));
  const double ac_scale = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) : 0;
  for (int64_t o = 0; o < out; ++o) {
    const double src = align_corners ? ac_scale * o : scale * (o + 0.5) - 0.5;
    const double fl = std::floor(src);
    const double t = src - fl;
    const auto i0 = static_cast<int64_t>(fl);
    const double w[4] = {cubic2(t + 1), cubic1(t), cubic1(1 - t), cubic2(2 - t)};
    for (int k = 0; k < 4; ++k) {
      idx[k][o] = std::min(std::max<int64_t>(i0 - 1 + k, 0), in - 1);
      wt[k][o] = w[k];
    }
  }
  Shape ws(static_cast<size_t>(x.dim()), 1);
  ws[d] = out;
  Tensor y;
  for (int k = 0; k < 4; ++k) {
    const Tensor term =
        x.index_select(d, tensor(idx[k]).to(x.device())) * tensor(wt[k], x.options()).view(ws);
    y = k == 0 ? term : y + term;
  }
  return y;
}

}  // namespace

Tensor interpolate_bicubic(const Tensor& x, const std::vector<int64_t>& out,
                           const std::vector<double>& scale, bool align_corners) {
  const Tensor y = cubic_dim(x, 3, out[1], scale[1], align_corners);
  return cubic_dim(y, 2, out[0], scale[0], align_corners);
}

}  // namespace ignis
