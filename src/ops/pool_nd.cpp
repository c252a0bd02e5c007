// max/avg pooling in 1-d and 3-d, composed from the 2-d pooling ops (ops/pool.cpp), whose records
// carry the gradients (of every order):
//   1-d: the 2-d op with a unit height.
//   3-d: max and average pooling are separable: pool each depth slice over (H, W), then pool the
//     result over D with a (kd x 1) window on [N C, 1, D, Ho Wo]. The window grids and the divisors
//     are per dim in PyTorch too (the divisor of a 3-d window is the product of the per-dim
//     counts), and the first maximum in (d, h, w) order wins ties as in PyTorch's scan.
#include <algorithm>
#include <array>
#include <vector>

#include "core/op_call.h"
#include "ignis/conv.h"
#include "ignis/nn_ops.h"
#include "ignis/ops.h"

namespace ignis {

namespace {

struct Window {
  std::vector<int64_t> k, s, p, d;
};

// The kernel, stride (empty: the kernel), padding and dilation as nd values each, checked with
// this op's name: positive sizes, padding at most half the kernel, the dilated kernel inside the
// padded input.
Window window(const char* op, int64_t nd, const Tensor& x, IntArrayRef kernel, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation) {
  IGNIS_CHECK(x.defined(), op, ": called with an undefined input");
  IGNIS_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, op, ": expected a ", nd + 1,
              "-d (unbatched) or ", nd + 2, "-d (batched) input, but got input of shape ",
              x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  for (int64_t k = x.dim() - nd - 1; k < x.dim(); ++k) {
    IGNIS_CHECK(x.size(k) > 0, op,
                ": expected the non-batch dims of the input to be non-zero, but got input of "
                "shape ",
                x.sizes());
  }
  auto expand = [&](IntArrayRef v, const char* what) {
    IGNIS_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == nd, op, ": ", what,
                " must have 1 or ", nd, " values, but got ", v.size(), " values ", v);
    std::vector<int64_t> r(static_cast<size_t>(nd));
    for (int64_t i = 0; i < nd; ++i) r[i] = v.size() == 1 ? v[0] : v[i];
    return r;
  };
  Window w{
      expand(kernel, "kernel_size"), {}, expand(padding, "padding"), expand(dilation, "dilation")};
  w.s = stride.size() == 0 ? w.k : expand(stride, "stride");
  for (int64_t i = 0; i < nd; ++i) {
    IGNIS_CHECK(w.k[i] >= 1, op, ": kernel_size must be positive, but got ", kernel);
    IGNIS_CHECK(w.s[i] >= 1, op, ": stride must be positive, but got ", stride);
    IGNIS_CHECK(w.d[i] >= 1, op, ": dilation must be positive, but got ", dilation);
    IGNIS_CHECK(w.p[i] >= 0 && w.p[i] <= w.k[i] / 2, op,
                ": padding must be non-negative and at most half of the kernel size, but got "
                "padding ",
                w.p[i], " with kernel size ", w.k[i]);
    const int64_t in = x.size(x.dim() - nd + i) + 2 * w.p[i], span = w.d[i] * (w.k[i] - 1) + 1;
    IGNIS_CHECK(span <= in, op, ": the (dilated) kernel size ", span,
                " is larger than the padded input size ", in, " (input of shape ", x.sizes(), ")");
  }
  return w;
}

using TensorPair = std::tuple<Tensor, Tensor>;

TensorPair max_pool1d_impl(const Tensor& x, IntArrayRef kernel, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const Window w = window("max_pool1d", 1, x, kernel, stride, padding, dilation);
  auto [y, i] = max_pool2d_with_indices(x.unsqueeze(-2), {1, w.k[0]}, {1, w.s[0]}, {0, w.p[0]},
                                        {1, w.d[0]}, ceil_mode);
  return {y.squeeze(-2), i.squeeze(-2)};  // a unit height: the plane index is the position
}

// The maxima of x [N, C, D, H, W] (or [C, D, H, W]) and their flat indices in each volume.
TensorPair max_pool3d_impl(const Tensor& x, IntArrayRef kernel, IntArrayRef stride,
                           IntArrayRef padding, IntArrayRef dilation, bool ceil_mode) {
  const Window w = window("max_pool3d", 3, x, kernel, stride, padding, dilation);
  const bool unbatched = x.dim() == 4;
  const Tensor x5 = unbatched ? x.unsqueeze(0) : x;
  const int64_t N = x5.size(0), C = x5.size(1), D = x5.size(2), H = x5.size(3), W = x5.size(4);
  auto [y1, i1] =
      max_pool2d_with_indices(x5.reshape({N, C * D, H, W}), {w.k[1], w.k[2]}, {w.s[1], w.s[2]},
                              {w.p[1], w.p[2]}, {w.d[1], w.d[2]}, ceil_mode);
  const int64_t Ho = y1.size(2), Wo = y1.size(3);
  auto [y2, i2] = max_pool2d_with_indices(y1.reshape({N * C, 1, D, Ho * Wo}), {w.k[0], 1},
                                          {w.s[0], 1}, {w.p[0], 0}, {w.d[0], 1}, ceil_mode);
  const int64_t Do = y2.size(2), plane = Ho * Wo;
  Tensor y = y2.view({N, C, Do, Ho, Wo});
  // The volume index of each maximum, from tensor ops so that it runs on every device: the second
  // pass's index is depth * plane + (h, w) position; at that depth, the first pass's index is the
  // (h, w) of the maximum in the input plane.
  const Tensor flat = i2.reshape({N * C, Do * plane});
  const Tensor hw = gather(i1.reshape({N * C, D * plane}), 1, flat);
  // floor(flat / plane) in float64: exact for indices below 2^53
  const Tensor depth = floor(div(flat.to(kFloat64), static_cast<double>(plane))).to(kInt64);
  const Tensor idx = (depth * (H * W) + hw).view({N, C, Do, Ho, Wo});
  if (unbatched) return {y.squeeze(0), idx.squeeze(0)};
  return {y, idx};
}

}  // namespace

#define COMPOSITE \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP(max_pool1d_with_indices,
         "max_pool1d_with_indices(Tensor self, int[] kernel_size, int[] stride=[], "
         "int[] padding=[0], int[] dilation=[1], bool ceil_mode=False) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool1d_with_indices, COMPOSITE);
IGNIS_OP(max_pool1d,
         "max_pool1d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "int[] dilation=[1], bool ceil_mode=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool1d, COMPOSITE);
IGNIS_OP(max_pool3d_with_indices,
         "max_pool3d_with_indices(Tensor self, int[] kernel_size, int[] stride=[], "
         "int[] padding=[0], int[] dilation=[1], bool ceil_mode=False) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool3d_with_indices, COMPOSITE);
IGNIS_OP(max_pool3d,
         "max_pool3d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "int[] dilation=[1], bool ceil_mode=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool3d, COMPOSITE);
IGNIS_OP(avg_pool1d,
         "avg_pool1d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "bool ceil_mode=False, bool count_include_pad=True) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool), avg_pool1d,
         COMPOSITE);
IGNIS_OP(avg_pool3d,
         "avg_pool3d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool,
                std::optional<int64_t>),
         avg_pool3d, COMPOSITE);
#undef COMPOSITE

std::tuple<Tensor, Tensor> max_pool1d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool1d_with_indices, max_pool1d_with_indices, x, kernel, stride, padding,
                 dilation, ceil_mode);
  return max_pool1d_impl(x, kernel, stride, padding, dilation, ceil_mode);
}

Tensor max_pool1d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool1d, max_pool1d, x, kernel, stride, padding, dilation, ceil_mode);
  return std::get<0>(max_pool1d_impl(x, kernel, stride, padding, dilation, ceil_mode));
}

std::tuple<Tensor, Tensor> max_pool3d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool3d_with_indices, max_pool3d_with_indices, x, kernel, stride, padding,
                 dilation, ceil_mode);
  return max_pool3d_impl(x, kernel, stride, padding, dilation, ceil_mode);
}

Tensor max_pool3d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool3d, max_pool3d, x, kernel, stride, padding, dilation, ceil_mode);
  return std::get<0>(max_pool3d_impl(x, kernel, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool1d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad) {
  IGNIS_DISPATCH(avg_pool1d, avg_pool1d, x, kernel, stride, padding, ceil_mode, count_include_pad);
  const Window w = window("avg_pool1d", 1, x, kernel, stride, padding, {1});
  return avg_pool2d(x.unsqueeze(-2), {1, w.k[0]}, {1, w.s[0]}, {0, w.p[0]}, ceil_mode,
                    count_include_pad)
      .squeeze(-2);
}

Tensor avg_pool3d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  IGNIS_DISPATCH(avg_pool3d, avg_pool3d, x, kernel, stride, padding, ceil_mode, count_include_pad,
                 divisor_override);
  const char* op = "avg_pool3d";
  const Window w = window(op, 3, x, kernel, stride, padding, {1});
  IGNIS_CHECK(!divisor_override || *divisor_override != 0, op,
              ": divisor_override must be non-zero, but got 0");
  const bool unbatched = x.dim() == 4;
  const Tensor x5 = unbatched ? x.unsqueeze(0) : x;
  const int64_t N = x5.size(0), C = x5.size(1), D = x5.size(2), H = x5.size(3), W = x5.size(4);
  // With a divisor override the first pass sums (divisor 1) and the second divides.
  const std::optional<int64_t> first = divisor_override ? std::optional<int64_t>(1) : std::nullopt;
  const Tensor y1 = avg_pool2d(x5.reshape({N, C * D, H, W}), {w.k[1], w.k[2]}, {w.s[1], w.s[2]},
                               {w.p[1], w.p[2]}, ceil_mode, count_include_pad, first);
  const int64_t Ho = y1.size(2), Wo = y1.size(3);
  const Tensor y2 = avg_pool2d(y1.reshape({N * C, 1, D, Ho * Wo}), {w.k[0], 1}, {w.s[0], 1},
                               {w.p[0], 0}, ceil_mode, count_include_pad, divisor_override);
  const Tensor y = y2.view({N, C, y2.size(2), Ho, Wo});
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace ignis
