// interpolate (torch.nn.functional.interpolate), modes "nearest" and
// "bilinear". Both are separable: one resampling pass per spatial dim, each an
// index_select of source rows/columns (and, for bilinear, a weighted sum of two
// of them). So the backward needs no kernel of its own: index_select's backward
// scatter-adds the gradient (index_add), which is the transposed interpolation,
// and it is differentiable again.
#include <cmath>
#include <vector>

#include "ignis/norm.h"
#include "ignis/ops.h"

namespace ignis {

namespace {

constexpr const char *kOp = "interpolate";

/// Source index of output index `dst` in PyTorch's "nearest" mode (float
/// arithmetic, like PyTorch's CPU kernel, so that the floor lands on the same
/// side).
int64_t nearest_index(int64_t dst, int64_t in, int64_t out, float scale) {
  if (out == in)
    return dst;
  if (out == 2 * in)
    return dst >> 1;
  const auto s =
      static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale));
  return std::min(s, in - 1);
}

/// Resamples dim `d` of x from x.size(d) to `out` elements. `scale` is the
/// ratio of source to output coordinates (in / out, or 1 / scale_factor when
/// one was given).
Tensor resample_dim(const Tensor &x, int64_t d, int64_t out, double scale,
                    bool bilinear, bool align_corners) {
  const int64_t in = x.size(d);
  std::vector<int64_t> i0(static_cast<size_t>(out)), i1(i0.size());
  std::vector<double> lam(i0.size());
  for (int64_t o = 0; o < out; ++o) {
    if (!bilinear) {
      i0[o] = nearest_index(o, in, out, static_cast<float>(scale));
      continue;
    }
    double src;
    if (align_corners) {
      src = out > 1
                ? static_cast<double>(in - 1) / static_cast<double>(out - 1) * o
                : 0.0;
    } else {
      src = std::max(scale * (o + 0.5) - 0.5, 0.0);
    }
    const int64_t lo = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    i0[o] = lo;
    i1[o] = lo < in - 1 ? lo + 1 : lo;
    lam[o] = std::min(std::max(src - static_cast<double>(lo), 0.0), 1.0);
  }
  const Tensor idx0 = tensor(i0).to(x.device());
  if (!bilinear)
    return index_select(x, d, idx0);
  Shape ws(static_cast<size_t>(x.dim()), 1);
  ws[d] = out;
  const TensorOptions wopts = TensorOptions(x.dtype()).device(x.device());
  std::vector<double> rest(lam.size());
  for (size_t k = 0; k < lam.size(); ++k)
    rest[k] = 1.0 - lam[k];
  const Tensor w0 = tensor(rest, wopts).view(ws),
               w1 = tensor(lam, wopts).view(ws);
  return index_select(x, d, idx0) * w0 +
         index_select(x, d, tensor(i1).to(x.device())) * w1;
}

/// Checks the mode, rank and align_corners; returns whether the mode is
/// bilinear.
bool check_mode(const Tensor &x, const std::string &mode,
                std::optional<bool> align_corners) {
  IGNIS_CHECK(mode == "nearest" || mode == "bilinear", kOp,
              ": unsupported mode '", mode,
              "' (supported: 'nearest', 'bilinear')");
  const bool bilinear = mode == "bilinear";
  if (bilinear) {
    IGNIS_CHECK(
        x.dim() == 4, kOp,
        ": mode 'bilinear' expects a 4-D input [N, C, H, W], but got shape ",
        x.sizes());
    IGNIS_CHECK(x.is_floating_point(), kOp,
                ": mode 'bilinear' expects a floating point input, but got ",
                x.dtype());
  } else {
    IGNIS_CHECK(x.dim() == 3 || x.dim() == 4, kOp,
                ": mode 'nearest' expects a 3-D [N, C, L] or 4-D [N, C, H, W] "
                "input, but got "
                "shape ",
                x.sizes());
    IGNIS_CHECK(!align_corners.has_value(), kOp,
                ": align_corners can only be set with mode 'bilinear', not '",
                mode, "'");
  }
  return bilinear;
}

Tensor resample(const Tensor &x, const std::vector<int64_t> &out,
                const std::vector<double> &scale, bool bilinear,
                bool align_corners) {
  Tensor y = x;
  for (size_t k = 0; k < out.size(); ++k) {
    const int64_t d = static_cast<int64_t>(k) + 2;
    const bool identity =
        out[k] == x.size(d) && (!bilinear || align_corners || scale[k] == 1.0);
    if (!identity)
      y = resample_dim(y, d, out[k], scale[k], bilinear, align_corners);
  }
  return y.is_same(x) ? x.clone() : y; // always a new tensor, as in PyTorch
}

} // namespace

Tensor interpolate(const Tensor &x, IntArrayRef size, const std::string &mode,
                   std::optional<bool> align_corners) {
  const bool bilinear = check_mode(x, mode, align_corners);
  const auto spatial = static_cast<size_t>(x.dim() - 2);
  IGNIS_CHECK(!size.empty(), kOp,
              ": either size or scale_factor should be defined");
  IGNIS_CHECK(size.size() == 1 || size.size() == spatial, kOp, ": size ", size,
              " has ", size.size(), " values but the input of shape ",
              x.sizes(), " has ", spatial, " spatial dims");
  std::vector<int64_t> out(spatial);
  std::vector<double> scale(spatial);
  for (size_t k = 0; k < spatial; ++k) {
    const int64_t in = x.size(static_cast<int64_t>(k) + 2);
    out[k] = size.size() == 1 ? size[0] : size[k];
    IGNIS_CHECK(in > 0 && out[k] > 0, kOp,
                ": input and output sizes should be greater than 0, but got "
                "input of shape ",
                x.sizes(), " and size ", size);
    scale[k] = static_cast<double>(in) / static_cast<double>(out[k]);
  }
  return resample(x, out, scale, bilinear, align_corners.value_or(false));
}

Tensor interpolate(const Tensor &x, std::vector<double> scale_factor,
                   const std::string &mode, std::optional<bool> align_corners) {
  const bool bilinear = check_mode(x, mode, align_corners);
  const auto spatial = static_cast<size_t>(x.dim() - 2);
  IGNIS_CHECK(!scale_factor.empty(), kOp,
              ": either size or scale_factor should be defined");
  IGNIS_CHECK(scale_factor.size() == 1 || scale_factor.size() == spatial, kOp,
              ": scale_factor has ", scale_factor.size(),
              " values but the input of shape ", x.sizes(), " has ", spatial,
              " spatial dims");
  std::vector<int64_t> out(spatial);
  std::vector<double> scale(spatial);
  for (size_t k = 0; k < spatial; ++k) {
    const int64_t in = x.size(static_cast<int64_t>(k) + 2);
    const double f =
        scale_factor.size() == 1 ? scale_factor[0] : scale_factor[k];
    IGNIS_CHECK(std::isfinite(f) && f > 0, kOp,
                ": scale_factor must be positive, but got ", f);
    out[k] = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
    IGNIS_CHECK(in > 0 && out[k] > 0, kOp,
                ": input and output sizes should be greater than 0, but got "
                "input of shape ",
                x.sizes(), " and output size ", out[k], " (scale_factor ", f,
                ")");
    scale[k] = 1.0 / f;
  }
  return resample(x, out, scale, bilinear, align_corners.value_or(false));
}

} // namespace ignis
