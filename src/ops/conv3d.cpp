// conv3d and conv_transpose1d, composed from the oneDNN-backed 2-d convolutions (ops/conv.cpp), so
// their gradients of every order come from conv2d's records:
//   conv3d: for each depth tap kd of the kernel, the input depths it reads for every output depth
//     (a strided slice) become extra input channels, the output depths are folded into the batch,
//     and one oneDNN 2-d convolution over N * Do images with KD * C input channels does the rest.
//   conv_transpose1d: conv_transpose2d with a unit height.
#include <array>
#include <vector>

#include "core/op_call.h"
#include "ignis/conv.h"
#include "ignis/nn_ops.h"
#include "ignis/ops.h"

namespace ignis {

namespace {

// A per-dim argument of 1 or 3 values as {depth, height, width}.
std::array<int64_t, 3> triple(IntArrayRef v, const char* op, const char* what) {
  IGNIS_CHECK(v.size() == 1 || v.size() == 3, op, ": ", what, " must have 1 or 3 values, but got ",
              v.size(), " values ", v);
  if (v.size() == 1) return {v[0], v[0], v[0]};
  return {v[0], v[1], v[2]};
}

int64_t one(IntArrayRef v, const char* op, const char* what) {
  IGNIS_CHECK(v.size() == 1, op, ": ", what, " must have 1 value, but got ", v.size(), " values ",
              v);
  return v[0];
}

// The checks conv2d makes, with this op's name and its ranks.
void check_conv(const char* op, int64_t nd, const Tensor& x, const Tensor& w, const Tensor& b,
                int64_t groups, bool transposed) {
  IGNIS_CHECK(x.defined() && w.defined(), op, ": called with an undefined input or weight");
  IGNIS_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, op, ": expected a ", nd + 1,
              "-d (unbatched) or ", nd + 2, "-d (batched) input, but got input of shape ",
              x.sizes());
  IGNIS_CHECK(w.dim() == nd + 2, op, ": expected a ", nd + 2, "-d weight, but got weight of shape ",
              w.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  IGNIS_CHECK(x.dtype() == w.dtype(), op, ": input (", x.dtype(), ") and weight (", w.dtype(),
              ") must have the same dtype");
  IGNIS_CHECK(groups >= 1, op, ": groups must be positive, but got ", groups);
  const int64_t c = x.size(x.dim() - nd - 1);
  const int64_t want = transposed ? w.size(0) : w.size(1) * groups;
  IGNIS_CHECK(c == want, op, ": expected input of shape ", x.sizes(), " to have ", want,
              " channels (weight of shape ", w.sizes(), ", groups = ", groups, "), but got ", c,
              " channels");
  const int64_t split = w.size(0);  // in_channels when transposed, else out_channels
  IGNIS_CHECK(split % groups == 0, op, ": ", transposed ? "in_channels" : "out_channels",
              " (weight.size(0) = ", split, ") must be divisible by groups = ", groups);
  const int64_t o = transposed ? w.size(1) * groups : w.size(0);
  if (b.defined()) {
    IGNIS_CHECK(b.dim() == 1 && b.size(0) == o, op, ": expected a bias of shape [", o,
                "], but got bias of shape ", b.sizes());
    IGNIS_CHECK(b.dtype() == x.dtype(), op, ": bias (", b.dtype(), ") and input (", x.dtype(),
                ") must have the same dtype");
  }
}

}  // namespace

#define COMPOSITE \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP(conv3d,
         "conv3d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] dilation=[1], int groups=1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                int64_t),
         conv3d, COMPOSITE);
IGNIS_OP(conv_transpose1d,
         "conv_transpose1d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] output_padding=[0], int groups=1, int[] dilation=[1]) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                int64_t, IntArrayRef),
         conv_transpose1d, COMPOSITE);
#undef COMPOSITE

Tensor conv3d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv3d, conv3d, x, w, b, stride, padding, dilation, groups);
  const char* op = "conv3d";
  check_conv(op, 3, x, w, b, groups, false);
  const auto s = triple(stride, op, "stride"), p = triple(padding, op, "padding");
  const auto d = triple(dilation, op, "dilation");
  const bool unbatched = x.dim() == 4;
  const Tensor x5 = unbatched ? x.unsqueeze(0) : x;
  std::array<int64_t, 3> out{};
  for (int k = 0; k < 3; ++k) {
    IGNIS_CHECK(s[k] >= 1, op, ": stride must be positive, but got ", stride);
    IGNIS_CHECK(d[k] >= 1, op, ": dilation must be positive, but got ", dilation);
    IGNIS_CHECK(p[k] >= 0, op, ": padding must be non-negative, but got ", padding);
    const int64_t span = d[k] * (w.size(2 + k) - 1) + 1, in = x5.size(2 + k) + 2 * p[k];
    IGNIS_CHECK(span <= in, op, ": the (dilated) kernel size ", span, " in spatial dim ", k,
                " is larger than the padded input size ", in, " (input of shape ", x.sizes(),
                ", weight of shape ", w.sizes(), ")");
    out[k] = (in - span) / s[k] + 1;
  }
  const int64_t N = x5.size(0), C = x5.size(1), H = x5.size(3), W = x5.size(4), Do = out[0];
  const int64_t O = w.size(0);
  // Zero-pad the depth here; conv2d pads height and width.
  const Tensor xp = p[0] > 0 ? pad(x5, {0, 0, 0, 0, p[0], p[0]}) : x5;
  // The depth taps become input channels of one 2-d convolution over N * Do images: tap kd reads
  // input depths kd d + od s for output depth od. Channels are ordered (group, tap, channel), so
  // conv2d's groups still split them by group; the weight's taps are ordered alike.
  const int64_t KD = w.size(2), Cg = C / groups;
  std::vector<Tensor> taps;
  for (int64_t kd = 0; kd < KD; ++kd) {
    const int64_t first = kd * d[0];
    const Tensor xs = xp.slice(2, first, first + (Do - 1) * s[0] + 1, s[0]);  // [N, C, Do, H, W]
    taps.push_back(xs.view({N, groups, Cg, Do, H, W}).permute({0, 3, 1, 2, 4, 5}));
  }
  // [N, Do, G, KD, Cg, H, W], contiguous: a view as [N Do, G KD Cg, H, W].
  const Tensor x4 = stack(taps, 3).view({N * Do, groups * KD * Cg, H, W});
  const Tensor w4 = w.permute({0, 2, 1, 3, 4}).reshape({O, KD * Cg, w.size(3), w.size(4)});
  Tensor y = conv2d(x4, w4, b, {s[1], s[2]}, {p[1], p[2]}, {d[1], d[2]}, groups);
  y = y.view({N, Do, O, out[1], out[2]}).transpose(1, 2).contiguous();
  return unbatched ? y.squeeze(0) : y;
}

Tensor conv_transpose1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                        IntArrayRef dilation) {
  IGNIS_DISPATCH(conv_transpose1d, conv_transpose1d, x, w, b, stride, padding, output_padding,
                 groups, dilation);
  const char* op = "conv_transpose1d";
  check_conv(op, 1, x, w, b, groups, true);
  const int64_t s = one(stride, op, "stride"), p = one(padding, op, "padding");
  const int64_t opad = one(output_padding, op, "output_padding"), d = one(dilation, op, "dilation");
  IGNIS_CHECK(s >= 1 && d >= 1 && p >= 0, op,
              ": stride and dilation must be positive and padding non-negative, but got stride ", s,
              ", dilation ", d, ", padding ", p);
  IGNIS_CHECK(opad >= 0 && (opad < s || opad < d), op, ": output_padding ", opad,
              " must be non-negative and smaller than either stride ", s, " or dilation ", d);
  const int64_t len = (x.size(-1) - 1) * s - 2 * p + d * (w.size(2) - 1) + opad + 1;
  IGNIS_CHECK(len >= 1, op, ": the output length ", len, " computed for input of shape ", x.sizes(),
              " and weight of shape ", w.sizes(), " is too small");
  const Tensor y = conv_transpose2d(x.unsqueeze(-2), w.unsqueeze(2), b, {1, s}, {0, p}, {0, opad},
                                    groups, {1, d});
  return y.squeeze(-2);
}

}  // namespace ignis
