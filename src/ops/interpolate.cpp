// interpolate (torch.nn.functional.interpolate), modes "nearest", "nearest-exact" and "bilinear";
// "bicubic" (ops/interpolate_bicubic.cpp) and "area" (adaptive average pooling) are compositions.
// Both are separable: each spatial dim gets a table of source indices and weights, and one
// kernel reads the output from them. The backward is the transposed interpolation written in
// ignis ops: per dim, index_add of the (weighted) gradient at the source indices, so it is
// differentiable again (index_add's backward is index_select).
#include "ops/interpolate.h"

#include <algorithm>
#include <cmath>
#include <vector>

#include "autograd/node.h"
#include "core/op_call.h"
#include "ignis/conv.h"
#include "ignis/norm.h"
#include "ignis/ops.h"

namespace ignis {

IGNIS_DEFINE_STUB(resample2d_stub, ResampleFn);
IGNIS_DEFINE_STUB(resample2d_backward_stub, ResampleBackwardFn);

namespace {

constexpr const char* kOp = "interpolate";

/// Source index of output index `dst` in PyTorch's "nearest" mode (float arithmetic, like PyTorch's
/// CPU kernel, so that the floor lands on the same side).
int64_t nearest_index(int64_t dst, int64_t in, int64_t out, float scale, bool exact) {
  if (exact) {  // "nearest-exact": the source pixel whose centre is nearest
    const auto s = static_cast<int64_t>(std::floor((static_cast<float>(dst) + 0.5f) * scale));
    return std::min(s, in - 1);
  }
  if (out == in) return dst;
  if (out == 2 * in) return dst >> 1;
  const auto s = static_cast<int64_t>(std::floor(static_cast<float>(dst) * scale));
  return std::min(s, in - 1);
}

/// The table of one spatial dim resampled from `in` to `out` elements. `scale` is the ratio of
/// source to output coordinates (in / out, or 1 / scale_factor when one was given).
ResampleTable make_table(int64_t in, int64_t out, double scale, bool bilinear, bool align_corners,
                         bool exact) {
  ResampleTable t;
  t.i0.resize(static_cast<size_t>(out));
  t.i1.resize(t.i0.size());
  t.lam.assign(t.i0.size(), 0.0);
  for (int64_t o = 0; o < out; ++o) {
    if (!bilinear) {
      t.i0[o] = t.i1[o] = nearest_index(o, in, out, static_cast<float>(scale), exact);
      continue;
    }
    double src;
    if (align_corners) {
      src = out > 1 ? static_cast<double>(in - 1) / static_cast<double>(out - 1) * o : 0.0;
    } else {
      src = std::max(scale * (o + 0.5) - 0.5, 0.0);
    }
    const int64_t lo = std::min(static_cast<int64_t>(std::floor(src)), in - 1);
    t.i0[o] = lo;
    t.i1[o] = lo < in - 1 ? lo + 1 : lo;
    t.lam[o] = std::min(std::max(src - static_cast<double>(lo), 0.0), 1.0);
  }
  return t;
}

/// The gradient of resampling dim d of a tensor of `in` elements along d: the transposed
/// interpolation, scatter-adding g (times the weights) back to the source indices.
Tensor scatter_back(const Tensor& g, int64_t d, int64_t in, const ResampleTable& t, bool bilinear) {
  Shape s = g.sizes().shape();
  s[d] = in;
  const Tensor z = zeros(s, g.options());
  const Tensor i0 = tensor(t.i0).to(g.device(), /*non_blocking=*/true);
  if (!bilinear) return z.index_add(d, i0, g);
  Shape ws(static_cast<size_t>(g.dim()), 1);
  ws[d] = g.size(d);
  std::vector<double> rest(t.lam.size());
  for (size_t k = 0; k < rest.size(); ++k) rest[k] = 1.0 - t.lam[k];
  const Tensor w0 = tensor(rest, g.dtype()).to(g.device(), true).view(ws);
  const Tensor w1 = tensor(t.lam, g.dtype()).to(g.device(), true).view(ws);
  const Tensor i1 = tensor(t.i1).to(g.device(), /*non_blocking=*/true);
  return z.index_add(d, i0, g * w0).index_add(d, i1, g * w1);
}

/// Checks the mode, rank and align_corners; returns whether the mode is bilinear.
bool check_mode(const Tensor& x, const std::string& mode, std::optional<bool> align_corners) {
  IGNIS_CHECK(mode == "nearest" || mode == "nearest-exact" || mode == "bilinear" ||
                  mode == "bicubic" || mode == "area",
              kOp, ": unsupported mode '", mode,
              "' (supported: 'nearest', 'nearest-exact', 'area', 'bilinear', 'bicubic')");
  const bool bilinear = mode == "bilinear";
  if (bilinear || mode == "bicubic") {
    IGNIS_CHECK(x.dim() == 4, kOp, ": mode '", mode,
                "' expects a 4-D input [N, C, H, W], but got shape ", x.sizes());
    IGNIS_CHECK(x.is_floating_point(), kOp, ": mode '", mode,
                "' expects a floating point input, but got ", x.dtype());
  } else {
    IGNIS_CHECK(x.dim() == 3 || x.dim() == 4, kOp, ": mode '", mode,
                "' expects a 3-D [N, C, L] or 4-D [N, C, H, W] input, but got shape ", x.sizes());
    IGNIS_CHECK(!align_corners.has_value(), kOp,
                ": align_corners can only be set with modes 'bilinear' and 'bicubic', not '", mode,
                "'");
  }
  return bilinear;
}

/// The identity table of a dim of n elements (a 3-D input's missing H).
ResampleTable identity_table(int64_t n) {
  ResampleTable t;
  for (int64_t k = 0; k < n; ++k) t.i0.push_back(k);
  t.i1 = t.i0;
  t.lam.assign(t.i0.size(), 0.0);
  return t;
}

Tensor resample(const Tensor& x, const std::vector<int64_t>& out, const std::vector<double>& scale,
                bool bilinear, bool align_corners, bool exact) {
  const bool is_2d = x.dim() == 4;
  const int64_t planes = x.size(0) * x.size(1);
  const int64_t h = is_2d ? x.size(2) : 1, w = x.size(-1);
  const int64_t oh = is_2d ? out[0] : 1, ow = out.back();
  auto is_identity = [&](size_t k) {
    return out[k] == x.size(static_cast<int64_t>(k) + 2) &&
           (!bilinear || align_corners || scale[k] == 1.0);
  };
  const bool same_h = !is_2d || is_identity(0), same_w = is_identity(out.size() - 1);
  if (same_h && same_w) return x.clone();  // always a new tensor, as in PyTorch
  const ResampleTable th =
      same_h ? identity_table(h) : make_table(h, oh, scale[0], bilinear, align_corners, exact);
  const ResampleTable tw =
      same_w ? identity_table(w) : make_table(w, ow, scale.back(), bilinear, align_corners, exact);
  Shape out_shape = x.sizes().shape();
  if (is_2d) out_shape[2] = oh;
  out_shape.back() = ow;
  Tensor y = empty(out_shape, x.options());
  resample2d_stub[x.device()](y.view({planes, oh, ow}), x.contiguous().view({planes, h, w}), th, tw,
                              bilinear);
  if (autograd::any_needs_grad({&x})) {
    autograd::record("interpolate", {&x}, {&y},
                     [th, tw, xs = x.sizes().shape(), planes, h, w, same_h, same_w, is_2d,
                      bilinear](autograd::BackwardCtx&, const TensorList& g) -> TensorList {
                       if (!is_grad_enabled()) {  // the fused transpose
                         const Tensor gc = g[0].contiguous();
                         const int64_t goh = is_2d ? gc.size(2) : 1;
                         Tensor gx = empty(xs, gc.options());
                         resample2d_backward_stub[gc.device()](gx.view({planes, h, w}),
                                                               gc.view({planes, goh, gc.size(-1)}),
                                                               th, tw, bilinear);
                         return {gx};
                       }
                       // A graph of the backward: the same transpose in ops, differentiable again.
                       Tensor gx = g[0];
                       if (!same_w) gx = scatter_back(gx, gx.dim() - 1, w, tw, bilinear);
                       if (is_2d && !same_h) gx = scatter_back(gx, 2, h, th, bilinear);
                       return {gx};
                     });
  }
  return y;
}

// Resamples x to `out` in `mode` (checked): bicubic and area are compositions, the rest one
// table-driven kernel.
Tensor resample_mode(const Tensor& x, const std::vector<int64_t>& out,
                     const std::vector<double>& scale, const std::string& mode, bool bilinear,
                     bool align_corners) {
  if (mode == "bicubic") return interpolate_bicubic(x, out, scale, align_corners);
  if (mode == "area") {  // adaptive average pooling to the output size, as PyTorch
    if (x.dim() == 4) return adaptive_avg_pool2d(x, IntArrayRef(out));
    return adaptive_avg_pool2d(x.unsqueeze(2), {1, out[0]}).squeeze(2);
  }
  return resample(x, out, scale, bilinear, align_corners, mode == "nearest-exact");
}

}  // namespace

// F.interpolate's two forms (PyTorch records them as upsample_*.vec; ignis keeps one op per
// form, the mode an attribute).
IGNIS_OP(interpolate_size,
         "interpolate.size(Tensor input, int[] size, str mode='nearest', bool? align_corners=None) "
         "-> Tensor",
         Tensor(const Tensor&, IntArrayRef, const std::string&, std::optional<bool>), interpolate,
         {.differentiable = true, .stubs = {&resample2d_stub, &resample2d_backward_stub}});
IGNIS_OP(interpolate_scale,
         "interpolate.scale_factor(Tensor input, float[] scale_factor, str mode='nearest', "
         "bool? align_corners=None) -> Tensor",
         Tensor(const Tensor&, std::vector<double>, const std::string&, std::optional<bool>),
         interpolate,
         {.differentiable = true, .stubs = {&resample2d_stub, &resample2d_backward_stub}});

Tensor interpolate(const Tensor& x, IntArrayRef size, const std::string& mode,
                   std::optional<bool> align_corners) {
  IGNIS_DISPATCH(interpolate_size, interpolate, x, size, mode, align_corners);
  const bool bilinear = check_mode(x, mode, align_corners);
  const auto spatial = static_cast<size_t>(x.dim() - 2);
  IGNIS_CHECK(!size.empty(), kOp, ": either size or scale_factor should be defined");
  IGNIS_CHECK(size.size() == 1 || size.size() == spatial, kOp, ": size ", size, " has ",
              size.size(), " values but the input of shape ", x.sizes(), " has ", spatial,
              " spatial dims");
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
  return resample_mode(x, out, scale, mode, bilinear, align_corners.value_or(false));
}

Tensor interpolate(const Tensor& x, std::vector<double> scale_factor, const std::string& mode,
                   std::optional<bool> align_corners) {
  IGNIS_DISPATCH(interpolate_scale, interpolate, x, scale_factor, mode, align_corners);
  const bool bilinear = check_mode(x, mode, align_corners);
  const auto spatial = static_cast<size_t>(x.dim() - 2);
  IGNIS_CHECK(!scale_factor.empty(), kOp, ": either size or scale_factor should be defined");
  IGNIS_CHECK(scale_factor.size() == 1 || scale_factor.size() == spatial, kOp,
              ": scale_factor has ", scale_factor.size(), " values but the input of shape ",
              x.sizes(), " has ", spatial, " spatial dims");
  std::vector<int64_t> out(spatial);
  std::vector<double> scale(spatial);
  for (size_t k = 0; k < spatial; ++k) {
    const int64_t in = x.size(static_cast<int64_t>(k) + 2);
    const double f = scale_factor.size() == 1 ? scale_factor[0] : scale_factor[k];
    IGNIS_CHECK(std::isfinite(f) && f > 0, kOp, ": scale_factor must be positive, but got ", f);
    out[k] = static_cast<int64_t>(std::floor(static_cast<double>(in) * f));
    IGNIS_CHECK(in > 0 && out[k] > 0, kOp,
                ": input and output sizes should be greater than 0, but got "
                "input of shape ",
                x.sizes(), " and output size ", out[k], " (scale_factor ", f, ")");
    scale[k] = 1.0 / f;
  }
  return resample_mode(x, out, scale, mode, bilinear, align_corners.value_or(false));
}

}  // namespace ignis
