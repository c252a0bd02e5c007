// Pooling: max_pool2d (with indices), avg_pool2d, adaptive_avg_pool2d, adaptive_max_pool2d.
// Each is a PoolGeom (the windows along each dim, ops/pool.h) and one of two op pairs:
//   max: y = max over the window   dx = max_pool2d_backward(dy, indices), a scatter whose own
//                                  backward is a gather at the indices
//   avg: y = avg_pool(x), linear   dx = avg_pool_transpose(dy), whose backward is avg_pool again
// so every pooling op is differentiable twice.
#include "ops/pool.h"

#include <memory>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/conv.h"
#include "ignis/ops.h"
#include "ops/conv.h"
#include "ops/copy.h"

namespace ignis {

using autograd::BackwardCtx;

IGNIS_DEFINE_STUB(max_pool2d_stub, MaxPoolFn);
IGNIS_DEFINE_STUB(max_pool2d_backward_stub, MaxPoolBwdFn);
IGNIS_DEFINE_STUB(avg_pool2d_stub, AvgPoolFn);
IGNIS_DEFINE_STUB(avg_pool2d_backward_stub, AvgPoolBwdFn);

namespace {

using GeomPtr = std::shared_ptr<const PoolGeom>;

Tensor dense(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_into(c, t);
  return c;
}

// Max pooling runs channels-last inputs in NHWC, its output and indices channels-last too (the
// CPU kernels have an NHWC path for every floating dtype; a GPU's kernel reads through strides);
// everything else in NCHW. (A bfloat16 model that lost its channels-last layout here ran every
// later layer in NCHW: ResNet-50 on an H200 at a tenth of its speed, and on the CPU the stem's
// pooling alone took a fifth of a bfloat16 ResNet-18 step.)
MemoryFormat max_pool_format(const Tensor& x) {
  return is_channels_last(x) ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
}

Shape out_shape(const Tensor& x4, const PoolGeom& g) {
  return {x4.size(0), x4.size(1), g.h.out(), g.w.out()};
}

// ---- the differentiable ops (4-d x)

Tensor max_pool_backward(const Tensor& gy, const Tensor& indices, IntArrayRef in_size,
                         const GeomPtr& g);

std::tuple<Tensor, Tensor> max_pool_apply(const char* op, const Tensor& x, const GeomPtr& g) {
  const Shape os = out_shape(x, *g);
  const MemoryFormat f = max_pool_format(x);
  Tensor out = make_tensor(os, x.dtype(), x.device(), f);
  Tensor idx = make_tensor(os, kInt64, x.device(), f);
  if (out.numel() > 0) {
    max_pool2d_stub[x.device()](out, idx, f == MemoryFormat::ChannelsLast ? x : dense(x), *g);
  }
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out},
                     [si = autograd::SavedVariable(idx, false), g, xs = x.sizes().shape()](
                         BackwardCtx& c, const TensorList& gr) {
                       return TensorList{max_pool_backward(gr[0], c.unpack(si), xs, g)};
                     });
  }
  return {out, idx};
}

Tensor max_pool_backward(const Tensor& gy, const Tensor& indices, IntArrayRef in_size,
                         const GeomPtr& g) {
  // Laid out like the indices (channels-last when the forward was).
  const MemoryFormat f =
      indices.is_contiguous() ? MemoryFormat::Contiguous : MemoryFormat::ChannelsLast;
  Tensor gx = make_tensor(in_size, gy.dtype(), gy.device(), f);
  if (gx.numel() > 0) max_pool2d_backward_stub[gy.device()](gx, gy.contiguous(f), indices, *g);
  if (autograd::any_needs_grad({&gy})) {
    autograd::record(
        "max_pool2d_backward", {&gy}, {&gx},
        [si = autograd::SavedVariable(indices, false)](BackwardCtx& c, const TensorList& gr) {
          const Tensor& gg = gr[0];
          const Tensor indices = c.unpack(si);
          Tensor picked = gg.flatten(2).gather(2, indices.flatten(2));
          return TensorList{picked.view(indices.sizes())};
        });
  }
  return gx;
}

Tensor avg_pool_transpose(const Tensor& gy, const GeomPtr& g, IntArrayRef in_size);

Tensor avg_pool_apply(const char* op, const Tensor& x, const GeomPtr& g) {
  Tensor out = make_tensor(out_shape(x, *g), x.dtype(), x.device());
  if (out.numel() > 0) avg_pool2d_stub[x.device()](out, dense(x), *g);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out},
                     [g, xs = x.sizes().shape()](BackwardCtx&, const TensorList& gr) {
                       return TensorList{avg_pool_transpose(gr[0], g, xs)};
                     });
  }
  return out;
}

Tensor avg_pool_transpose(const Tensor& gy, const GeomPtr& g, IntArrayRef in_size) {
  Tensor gx = make_tensor(in_size, gy.dtype(), gy.device());
  if (gx.numel() > 0) avg_pool2d_backward_stub[gy.device()](gx, dense(gy), *g);
  if (autograd::any_needs_grad({&gy})) {
    autograd::record("avg_pool2d_backward", {&gy}, {&gx}, [g](BackwardCtx&, const TensorList& gr) {
      return TensorList{avg_pool_apply("avg_pool2d", gr[0], g)};
    });
  }
  return gx;
}

// ---- geometry and checks

// x as 4-d (an unbatched [C, H, W] input gets a unit batch), after checking it.
Tensor as_4d(const char* op, const Tensor& x) {
  IGNIS_CHECK(x.defined(), op, ": called with an undefined input");
  IGNIS_CHECK(x.dim() == 3 || x.dim() == 4, op,
              ": expected a 3-d (unbatched) or 4-d (batched) "
              "input [N, C, H, W], but got input of shape ",
              x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  for (int64_t d = x.dim() - 3; d < x.dim(); ++d) {
    IGNIS_CHECK(x.size(d) > 0, op,
                ": expected the non-batch dims of the input to be non-zero, "
                "but got input of shape ",
                x.sizes());
  }
  return x.dim() == 3 ? x.unsqueeze(0) : x;
}

Tensor from_4d(const Tensor& x, const Tensor& y) { return x.dim() == 3 ? y.squeeze(0) : y; }

struct WindowArgs {
  std::array<int64_t, 2> kernel, stride, padding, dilation;
  bool ceil_mode = false;
};

WindowArgs window_args(const char* op, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                       IntArrayRef dilation, bool ceil_mode) {
  WindowArgs a;
  a.kernel = conv_pair(kernel, 2, op, "kernel_size");
  a.stride = stride.size() == 0 ? a.kernel : conv_pair(stride, 2, op, "stride");
  a.padding = conv_pair(padding, 2, op, "padding");
  a.dilation = conv_pair(dilation, 2, op, "dilation");
  a.ceil_mode = ceil_mode;
  for (int d = 0; d < 2; ++d) {
    IGNIS_CHECK(a.kernel[d] >= 1, op, ": kernel_size must be positive, but got ", a.kernel[d]);
    IGNIS_CHECK(a.stride[d] >= 1, op, ": stride must be positive, but got ", a.stride[d]);
    IGNIS_CHECK(a.dilation[d] >= 1, op, ": dilation must be positive, but got ", a.dilation[d]);
    IGNIS_CHECK(a.padding[d] >= 0 && a.padding[d] <= a.kernel[d] / 2, op,
                ": padding must be non-negative and at most half of the kernel "
                "size, but got "
                "padding ",
                a.padding[d], " with kernel size ", a.kernel[d]);
  }
  return a;
}

// One dim of a max or avg pooling window grid (PyTorch's output size, ceil_mode included).
PoolDim window_dim(const char* op, const Tensor& x4, int d, const WindowArgs& a,
                   bool count_include_pad) {
  const int64_t in = x4.size(2 + d), k = a.kernel[d], s = a.stride[d], p = a.padding[d];
  const int64_t dil = a.dilation[d];
  const int64_t span = dil * (k - 1) + 1;
  IGNIS_CHECK(in + 2 * p >= span, op, ": the (dilated) kernel size ", span,
              " is larger than the padded input size ", in + 2 * p, " (input of shape ", x4.sizes(),
              ")");
  int64_t out = (in + 2 * p - span + (a.ceil_mode ? s - 1 : 0)) / s + 1;
  // With ceil_mode, the last window must start inside the input or the left padding.
  if (a.ceil_mode && (out - 1) * s >= in + p) --out;
  PoolDim r;
  r.in = in;
  r.step = dil;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t st = o * s - p;
    r.start.push_back(st);
    r.count.push_back(k);
    // Some window position must be inside the input (kernels rely on it; only a dilation larger
    // than the input can break this).
    bool any = false;
    for (int64_t i = 0; i < k && !any; ++i) any = st + i * dil >= 0 && st + i * dil < in;
    IGNIS_CHECK(any, op, ": output position ", o,
                " has no input element in its window (input of "
                "shape ",
                x4.sizes(), ", kernel ", k, ", dilation ", dil, ", padding ", p, ")");
    const int64_t lo = std::max<int64_t>(st, 0), hi = std::min(st + k, in);
    r.div.push_back(count_include_pad ? std::min(st + k, in + p) - st : hi - lo);
  }
  return r;
}

PoolDim adaptive_dim(int64_t in, int64_t out) {
  PoolDim r;
  r.in = in;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t st = o * in / out, en = ((o + 1) * in + out - 1) / out;
    r.start.push_back(st);
    r.count.push_back(en - st);
    r.div.push_back(en - st);
  }
  return r;
}

GeomPtr adaptive_geom(const char* op, const Tensor& x4, IntArrayRef output_size) {
  const auto o = conv_pair(output_size, 2, op, "output_size");
  IGNIS_CHECK(o[0] >= 1 && o[1] >= 1, op, ": output_size must be positive, but got ", output_size);
  auto g = std::make_shared<PoolGeom>();
  g->h = adaptive_dim(x4.size(2), o[0]);
  g->w = adaptive_dim(x4.size(3), o[1]);
  return g;
}

using TensorPair = std::tuple<Tensor, Tensor>;  // (a macro argument cannot hold its comma)

}  // namespace

#define POOL_OPTS(...)                                                 \
  {                                                                    \
    .differentiable = true, .kind = "kernel", .stubs = { __VA_ARGS__ } \
  }
IGNIS_OP(max_pool2d_with_indices,
         "max_pool2d_with_indices(Tensor self, int[] kernel_size, int[] stride=[], "
         "int[] padding=[0], int[] dilation=[1], bool ceil_mode=False) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool2d_with_indices, POOL_OPTS(&max_pool2d_stub, &max_pool2d_backward_stub));
IGNIS_OP(max_pool2d,
         "max_pool2d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "int[] dilation=[1], bool ceil_mode=False) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, IntArrayRef, bool),
         max_pool2d, {.differentiable = true, .kind = "composite"});
IGNIS_OP(avg_pool2d,
         "avg_pool2d(Tensor self, int[] kernel_size, int[] stride=[], int[] padding=[0], "
         "bool ceil_mode=False, bool count_include_pad=True, int? divisor_override=None) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, bool, bool,
                std::optional<int64_t>),
         avg_pool2d, POOL_OPTS(&avg_pool2d_stub, &avg_pool2d_backward_stub));
IGNIS_OP(adaptive_avg_pool2d, "adaptive_avg_pool2d(Tensor self, int[] output_size) -> Tensor",
         Tensor(const Tensor&, IntArrayRef), adaptive_avg_pool2d,
         POOL_OPTS(&avg_pool2d_stub, &avg_pool2d_backward_stub));
IGNIS_OP(adaptive_max_pool2d_with_indices,
         "adaptive_max_pool2d_with_indices(Tensor self, int[] output_size) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, IntArrayRef), adaptive_max_pool2d_with_indices,
         POOL_OPTS(&max_pool2d_stub, &max_pool2d_backward_stub));
IGNIS_OP(adaptive_max_pool2d, "adaptive_max_pool2d(Tensor self, int[] output_size) -> Tensor",
         Tensor(const Tensor&, IntArrayRef), adaptive_max_pool2d,
         {.differentiable = true, .kind = "composite"});
#undef POOL_OPTS

std::tuple<Tensor, Tensor> max_pool2d_with_indices(const Tensor& x, IntArrayRef kernel,
                                                   IntArrayRef stride, IntArrayRef padding,
                                                   IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool2d_with_indices, max_pool2d_with_indices, x, kernel, stride, padding,
                 dilation, ceil_mode);
  const char* op = "max_pool2d";
  Tensor x4 = as_4d(op, x);
  const WindowArgs a = window_args(op, kernel, stride, padding, dilation, ceil_mode);
  auto g = std::make_shared<PoolGeom>();
  g->h = window_dim(op, x4, 0, a, false);
  g->w = window_dim(op, x4, 1, a, false);
  auto [out, idx] = max_pool_apply(op, x4, g);
  return {from_4d(x, out), from_4d(x, idx)};
}

Tensor max_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation, bool ceil_mode) {
  IGNIS_DISPATCH(max_pool2d, max_pool2d, x, kernel, stride, padding, dilation, ceil_mode);
  return std::get<0>(max_pool2d_with_indices(x, kernel, stride, padding, dilation, ceil_mode));
}

Tensor avg_pool2d(const Tensor& x, IntArrayRef kernel, IntArrayRef stride, IntArrayRef padding,
                  bool ceil_mode, bool count_include_pad, std::optional<int64_t> divisor_override) {
  IGNIS_DISPATCH(avg_pool2d, avg_pool2d, x, kernel, stride, padding, ceil_mode, count_include_pad,
                 divisor_override);
  const char* op = "avg_pool2d";
  Tensor x4 = as_4d(op, x);
  const WindowArgs a = window_args(op, kernel, stride, padding, {1}, ceil_mode);
  auto g = std::make_shared<PoolGeom>();
  g->h = window_dim(op, x4, 0, a, count_include_pad);
  g->w = window_dim(op, x4, 1, a, count_include_pad);
  if (divisor_override) {  // the kernel divides by div_h * div_w
    IGNIS_CHECK(*divisor_override != 0, op, ": divisor_override must be non-zero, but got 0");
    g->h.div.assign(g->h.div.size(), *divisor_override);
    g->w.div.assign(g->w.div.size(), 1);
  }
  return from_4d(x, avg_pool_apply(op, x4, g));
}

Tensor adaptive_avg_pool2d(const Tensor& x, IntArrayRef output_size) {
  IGNIS_DISPATCH(adaptive_avg_pool2d, adaptive_avg_pool2d, x, output_size);
  const char* op = "adaptive_avg_pool2d";
  Tensor x4 = as_4d(op, x);
  return from_4d(x, avg_pool_apply(op, x4, adaptive_geom(op, x4, output_size)));
}

std::tuple<Tensor, Tensor> adaptive_max_pool2d_with_indices(const Tensor& x,
                                                            IntArrayRef output_size) {
  IGNIS_DISPATCH(adaptive_max_pool2d_with_indices, adaptive_max_pool2d_with_indices, x,
                 output_size);
  const char* op = "adaptive_max_pool2d";
  Tensor x4 = as_4d(op, x);
  auto [out, idx] = max_pool_apply(op, x4, adaptive_geom(op, x4, output_size));
  return {from_4d(x, out), from_4d(x, idx)};
}

Tensor adaptive_max_pool2d(const Tensor& x, IntArrayRef output_size) {
  IGNIS_DISPATCH(adaptive_max_pool2d, adaptive_max_pool2d, x, output_size);
  return std::get<0>(adaptive_max_pool2d_with_indices(x, output_size));
}

}  // namespace ignis
