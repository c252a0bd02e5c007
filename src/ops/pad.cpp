// pad (torch.nn.functional.pad): constant padding is a copy into a filled tensor (its backward
// pads again with the negated widths, which crops); reflect, replicate and circular are
// index_select along each padded dim, so their backward accumulates through index_add.
#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/copy.h"
#include "ops/index.h"

namespace ignis {

using autograd::BackwardCtx;

namespace {

Tensor constant_pad(const Tensor& x, IntArrayRef p, double value) {
  const int64_t nd = x.dim();
  const auto np = static_cast<int64_t>(p.size() / 2);
  Shape shape = x.sizes().shape();
  for (int64_t j = 0; j < np; ++j) {
    const int64_t d = nd - 1 - j;
    const int64_t s = x.sizes()[d], l = p[2 * j], r = p[2 * j + 1];
    IGNIS_CHECK(s + l + r >= 0, "pad: the padded size of dimension ", d, " would be negative (", s,
                " with padding (", l, ", ", r, "))");
    shape[d] = s + l + r;
  }
  Tensor out = full(shape, value, TensorOptions(x.dtype()).device(x.device()));
  // The part of x that survives, and where it lands in out.
  Tensor dst = out, src;
  bool empty = false;
  {
    NoGradGuard ng;
    src = x;
    for (int64_t j = 0; j < np; ++j) {
      const int64_t d = nd - 1 - j;
      const int64_t s = x.sizes()[d], l = p[2 * j], r = p[2 * j + 1];
      const int64_t cut_l = std::max<int64_t>(-l, 0), cut_r = std::max<int64_t>(-r, 0);
      const int64_t len = s - cut_l - cut_r;
      if (len <= 0) {
        empty = true;
        break;
      }
      src = src.narrow(d, cut_l, len);
      dst = dst.narrow(d, std::max<int64_t>(l, 0), len);
    }
  }
  if (!empty && dst.numel() > 0) copy_into(dst, src);
  if (autograd::any_needs_grad({&x})) {
    Shape neg;
    for (int64_t v : p) neg.push_back(-v);
    autograd::record("pad", {&x}, {&out}, [neg](BackwardCtx&, const TensorList& g) {
      return TensorList{pad(g[0], neg)};
    });
  }
  return out;
}

// Source coordinates of each output position along one dim.
Tensor pad_index(int64_t s, int64_t l, int64_t r, const std::string& mode, Device device) {
  std::vector<int64_t> idx(static_cast<size_t>(s + l + r));
  for (int64_t o = 0; o < s + l + r; ++o) {
    int64_t i = o - l;
    if (mode == "reflect") {
      if (i < 0) i = -i;
      if (i >= s) i = 2 * (s - 1) - i;
    } else if (mode == "circular") {
      i = ((i % s) + s) % s;
    } else {
      i = std::clamp<int64_t>(i, 0, s - 1);
    }
    idx[o] = i;
  }
  return tensor(idx).to(device);
}

}  // namespace

IGNIS_OP(pad, "pad(Tensor self, int[] pad, str mode='constant', float value=0.) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, const std::string&, double), pad,
         {.differentiable = true, .stubs = {&copy_stub}});

Tensor pad(const Tensor& x, IntArrayRef p, const std::string& mode, double value) {
  IGNIS_DISPATCH(pad, pad, x, p, mode, value);
  IGNIS_CHECK(p.size() % 2 == 0, "pad: padding length must be divisible by 2, but got ", p.size(),
              " values ", p);
  const auto np = static_cast<int64_t>(p.size() / 2);
  const int64_t nd = x.dim();
  IGNIS_CHECK(np <= nd, "pad: padding ", p, " pads ", np, " dimensions, but the input of shape ",
              x.sizes(), " has only ", nd);
  if (mode == "constant") return constant_pad(x, p, value);
  const bool reflect = mode == "reflect";
  IGNIS_CHECK(reflect || mode == "replicate" || mode == "circular", "pad: unknown mode '", mode,
              "' (expected constant, reflect, replicate or circular)");
  Tensor out = x;
  for (int64_t j = 0; j < np; ++j) {
    const int64_t d = nd - 1 - j;
    const int64_t s = x.sizes()[d], l = p[2 * j], r = p[2 * j + 1];
    IGNIS_CHECK(l >= 0 && r >= 0, "pad: negative padding (", l, ", ", r,
                ") is only supported "
                "in constant mode, not ",
                mode);
    if (l == 0 && r == 0) continue;
    if (reflect) {
      IGNIS_CHECK(l < s && r < s, "pad: reflect padding (", l, ", ", r,
                  ") must be smaller than "
                  "the size ",
                  s, " of dimension ", d, " of the input of shape ", x.sizes());
    } else if (mode == "circular") {
      IGNIS_CHECK(l <= s && r <= s, "pad: circular padding (", l, ", ", r,
                  ") must be at most the size ", s, " of dimension ", d, " of the input of shape ",
                  x.sizes());
    } else {
      IGNIS_CHECK(s > 0, "pad: cannot replicate-pad dimension ", d, " of size 0 (input of shape ",
                  x.sizes(), ")");
    }
    out = out.index_select(d, pad_index(s, l, r, mode, x.device()));
  }
  return out.is_same(x) ? x.clone() : out;
}

}  // namespace ignis
