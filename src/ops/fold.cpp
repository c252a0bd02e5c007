// im2col / col2im (F.unfold / F.fold) as gathers and scatters over the flattened, zero-padded
// planes: one table of plane offsets, in the columns' order (kernel row, kernel column, block
// row, block column), serves both. im2col is index_select along the flattened plane; col2im is
// index_add of the columns into a zero plane, then a crop of the padding. Each is the other's
// transpose, and index_select / index_add carry the gradients of every order.
#include <array>
#include <vector>

#include "core/op_call.h"
#include "ignis/nn_ops.h"
#include "ignis/ops.h"

namespace ignis {

namespace {

struct Geom {
  std::array<int64_t, 2> k, d, p, s, blocks;
  int64_t hp = 0, wp = 0;  // the padded plane
};

std::array<int64_t, 2> pair(IntArrayRef v, const char* op, const char* what) {
  IGNIS_CHECK(v.size() == 1 || v.size() == 2, op, ": ", what, " must have 1 or 2 values, but got ",
              v.size(), " values ", v);
  return {v[0], v.size() == 1 ? v[0] : v[1]};
}

Geom geometry(const char* op, int64_t h, int64_t w, IntArrayRef kernel, IntArrayRef dilation,
              IntArrayRef padding, IntArrayRef stride) {
  Geom g{pair(kernel, op, "kernel_size"),
         pair(dilation, op, "dilation"),
         pair(padding, op, "padding"),
         pair(stride, op, "stride"),
         {}};
  const std::array<int64_t, 2> in{h, w};
  for (int i = 0; i < 2; ++i) {
    IGNIS_CHECK(g.k[i] > 0 && g.d[i] > 0 && g.s[i] > 0, op,
                ": kernel_size, dilation and stride must be positive, but got kernel_size ", kernel,
                ", dilation ", dilation, ", stride ", stride);
    IGNIS_CHECK(g.p[i] >= 0, op, ": padding must be non-negative, but got ", padding);
    const int64_t span = g.d[i] * (g.k[i] - 1) + 1, padded = in[i] + 2 * g.p[i];
    IGNIS_CHECK(padded >= span, op, ": the (dilated) kernel size ", span,
                " is larger than the padded spatial size ", padded, " (spatial size [", h, ", ", w,
                "], padding ", padding, ")");
    g.blocks[i] = (padded - span) / g.s[i] + 1;
  }
  g.hp = h + 2 * g.p[0];
  g.wp = w + 2 * g.p[1];
  return g;
}

// Plane offsets (in the padded plane) of every column entry, kernel position major.
Tensor offsets(const Geom& g, Device device) {
  std::vector<int64_t> idx;
  idx.reserve(static_cast<size_t>(g.k[0] * g.k[1] * g.blocks[0] * g.blocks[1]));
  for (int64_t i = 0; i < g.k[0]; ++i)
    for (int64_t j = 0; j < g.k[1]; ++j)
      for (int64_t bh = 0; bh < g.blocks[0]; ++bh)
        for (int64_t bw = 0; bw < g.blocks[1]; ++bw)
          idx.push_back((bh * g.s[0] + i * g.d[0]) * g.wp + bw * g.s[1] + j * g.d[1]);
  return tensor(idx).to(device);
}

}  // namespace

IGNIS_OP(im2col,
         "im2col(Tensor self, int[] kernel_size, int[] dilation, int[] padding, int[] stride) "
         "-> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef), im2col,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(col2im,
         "col2im(Tensor self, int[] output_size, int[] kernel_size, int[] dilation, "
         "int[] padding, int[] stride) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef),
         col2im, {.differentiable = true, .kind = "composite"});

Tensor im2col(const Tensor& x, IntArrayRef kernel_size, IntArrayRef dilation, IntArrayRef padding,
              IntArrayRef stride) {
  IGNIS_DISPATCH(im2col, im2col, x, kernel_size, dilation, padding, stride);
  const char* op = "unfold";
  IGNIS_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), op,
              ": expected a 3-d (unbatched) or 4-d (batched) input [N, C, H, W], but got input of "
              "shape ",
              x.defined() ? x.sizes() : Shape{});
  const bool unbatched = x.dim() == 3;
  const Tensor x4 = unbatched ? x.unsqueeze(0) : x;
  const int64_t N = x4.size(0), C = x4.size(1);
  IGNIS_CHECK(C > 0 && x4.size(2) > 0 && x4.size(3) > 0, op,
              ": expected non-empty channel and spatial dims, but got input of shape ", x.sizes());
  const Geom g = geometry(op, x4.size(2), x4.size(3), kernel_size, dilation, padding, stride);
  const Tensor xp = g.p[0] || g.p[1] ? pad(x4, {g.p[1], g.p[1], g.p[0], g.p[0]}) : x4;
  const int64_t L = g.blocks[0] * g.blocks[1];
  const Tensor cols = xp.reshape({N, C, g.hp * g.wp}).index_select(2, offsets(g, x.device()));
  const Tensor y = cols.view({N, C * g.k[0] * g.k[1], L});
  return unbatched ? y.squeeze(0) : y;
}

Tensor col2im(const Tensor& x, IntArrayRef output_size, IntArrayRef kernel_size,
              IntArrayRef dilation, IntArrayRef padding, IntArrayRef stride) {
  IGNIS_DISPATCH(col2im, col2im, x, output_size, kernel_size, dilation, padding, stride);
  const char* op = "fold";
  IGNIS_CHECK(x.defined() && (x.dim() == 2 || x.dim() == 3), op,
              ": expected a 2-d (unbatched) or 3-d (batched) input [N, C kh kw, L], but got input "
              "of shape ",
              x.defined() ? x.sizes() : Shape{});
  const auto out = pair(output_size, op, "output_size");
  IGNIS_CHECK(out[0] > 0 && out[1] > 0, op, ": output_size must be positive, but got ",
              output_size);
  const bool unbatched = x.dim() == 2;
  const Tensor x3 = unbatched ? x.unsqueeze(0) : x;
  const Geom g = geometry(op, out[0], out[1], kernel_size, dilation, padding, stride);
  const int64_t N = x3.size(0), kk = g.k[0] * g.k[1], L = g.blocks[0] * g.blocks[1];
  IGNIS_CHECK(x3.size(1) > 0 && x3.size(1) % kk == 0, op, ": expected size(", x.dim() - 2,
              ") of the input of shape ", x.sizes(),
              " to be a non-zero multiple of kernel_size[0] * "
              "kernel_size[1] = ",
              kk);
  IGNIS_CHECK(x3.size(2) == L, op, ": expected size(", x.dim() - 1, ") of the input of shape ",
              x.sizes(), " to match the ", L, " sliding blocks (", g.blocks[0], " x ", g.blocks[1],
              ") of output_size ", output_size, ", kernel_size ", kernel_size, ", dilation ",
              dilation, ", padding ", padding, ", stride ", stride);
  const int64_t C = x3.size(1) / kk;
  const Tensor planes = zeros({N, C, g.hp * g.wp}, x.options())
                            .index_add(2, offsets(g, x.device()), x3.reshape({N, C, kk * L}));
  Tensor y = planes.view({N, C, g.hp, g.wp});
  if (g.p[0] || g.p[1]) y = y.narrow(2, g.p[0], out[0]).narrow(3, g.p[1], out[1]).contiguous();
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace ignis
