// Convolutions: conv2d (conv1d and unbatched inputs are views onto it), conv_transpose2d and the
// fused conv2d_relu. Three differentiable ops carry everything, each one record whose backward is
// written with the other two, so gradients of any order exist:
//   y  = conv2d(x, w)               dx = conv2d_input_grad(dy, w), dw = conv2d_weight_grad(x, dy)
//   gx = conv2d_input_grad(gy, w)   the transposed convolution, linear in gy and in w
//   gw = conv2d_weight_grad(x, gy)  bilinear in x and gy
// The bias gradient is a sum. Kernels get dense NCHW tensors and resolved ConvParams.
#include "ops/conv.h"

#include <array>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/conv.h"
#include "ignis/ops.h"
#include "ops/copy.h"
#include "ops/unary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::save_if;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(conv2d_stub, ConvFwdFn);
IGNIS_DEFINE_STUB(conv2d_input_grad_stub, ConvBwdDataFn);
IGNIS_DEFINE_STUB(conv2d_weight_grad_stub, ConvBwdWeightFn);

namespace {

// t itself when dense (contiguous, or for activations channels-last float32, which the oneDNN
// kernels read as NHWC), else a contiguous copy (no autograd: kernels only read it).
Tensor dense(const Tensor& t, bool activation = false) {
  if (!t.defined() || t.is_contiguous() || (activation && is_channels_last(t))) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_into(c, t);
  return c;
}

// The bias gradient, gy summed over n, h, w as reductions of contiguous blocks: NCHW over each
// (n, c) plane, then over n (one reduction over {0, 2, 3} is not one block: a transposing copy);
// channels-last as the rows of an [N*H*W, C] matrix. The planes' sums are kept in the
// accumulation type (float32 for bfloat16), so that the result is rounded once, as one
// reduction's would be.
Tensor bias_grad(const Tensor& gy) {
  if (gy.suggest_memory_format() == MemoryFormat::ChannelsLast) {
    return gy.permute({0, 2, 3, 1}).reshape({-1, gy.size(1)}).sum({0});
  }
  const DType acc = gy.dtype() == kBFloat16 ? kFloat32 : gy.dtype();
  return gy.sum({2, 3}, false, acc).sum({0}).to(gy.dtype());
}

// Runs the forward kernel: out [N, O, Ho, Wo] (sizes already checked).
Tensor run_forward(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p,
                   IntArrayRef out_size, bool relu) {
  Tensor out = make_tensor(out_size, x.dtype(), x.device(), x.suggest_memory_format());
  if (out.numel() == 0) return out;
  if (x.numel() == 0 || w.numel() == 0) {  // no input channels: the output is the bias
    NoGradGuard ng;
    out.zero_();
    if (b.defined()) out.add_(b.view({1, -1, 1, 1}));
    if (relu) out.relu_();
    return out;
  }
  conv2d_stub[x.device()](out, dense(x, true), dense(w), dense(b), p, relu);
  return out;
}

}  // namespace

int64_t conv_out_size(int64_t in, int64_t k, const ConvParams& p, int d) {
  return (in + p.pad_l[d] + p.pad_r[d] - p.dilation[d] * (k - 1) - 1) / p.stride[d] + 1;
}

// ---- the three recorded ops

Tensor conv2d_op(const Tensor& x, const Tensor& w, const Tensor& b, const ConvParams& p,
                 bool relu) {
  const Shape out_size{x.size(0), w.size(0), conv_out_size(x.size(2), w.size(2), p, 0),
                       conv_out_size(x.size(3), w.size(3), p, 1)};
  Tensor out = run_forward(x, w, b, p, out_size, relu);
  if (autograd::any_needs_grad({&x, &w, &b})) {
    // With relu fused (oneDNN's post-op) the node saves its output and masks the incoming
    // gradient with it first (threshold_backward, itself differentiable): one node and one
    // pass over the activation fewer than conv2d then relu.
    autograd::record(relu ? "conv2d_relu" : "conv2d", {&x, &w, &b}, {&out},
                     [sx = save_if(x, needs_grad(w)), sw = save_if(w, needs_grad(x)),
                      so = relu ? save_output(out) : SavedVariable(), xs = x.sizes().shape(),
                      ws = w.sizes().shape(), p, relu](BackwardCtx& c, TensorList& g) mutable {
                       const Tensor gy = relu ? fused_relu_grad(c, g, so) : g[0];
                       TensorList r(3);
                       if (c.needs_input_grad(0)) r[0] = conv2d_input_grad(gy, c.unpack(sw), xs, p);
                       if (c.needs_input_grad(1))
                         r[1] = conv2d_weight_grad(c.unpack(sx), gy, ws, p);
                       if (c.needs_input_grad(2)) r[2] = bias_grad(gy);
                       return r;
                     });
  }
  return out;
}

Tensor conv2d_input_grad(const Tensor& gy, const Tensor& w, IntArrayRef input_size,
                         const ConvParams& p) {
  Tensor out = make_tensor(input_size, gy.dtype(), gy.device(), gy.suggest_memory_format());
  if (out.numel() > 0) {
    if (gy.numel() == 0 || w.numel() == 0) {
      out.zero_();
    } else {
      conv2d_input_grad_stub[gy.device()](out, dense(gy, true), dense(w), p);
    }
  }
  if (autograd::any_needs_grad({&gy, &w})) {
    autograd::record("conv2d_input_grad", {&gy, &w}, {&out},
                     [sgy = save_if(gy, needs_grad(w)), sw = save_if(w, needs_grad(gy)),
                      ws = w.sizes().shape(), p](BackwardCtx& c, const TensorList& g) {
                       TensorList r(2);
                       if (c.needs_input_grad(0)) r[0] = conv2d_op(g[0], c.unpack(sw), {}, p);
                       if (c.needs_input_grad(1)) {
                         r[1] = conv2d_weight_grad(g[0], c.unpack(sgy), ws, p);
                       }
                       return r;
                     });
  }
  return out;
}

Tensor conv2d_weight_grad(const Tensor& x, const Tensor& gy, IntArrayRef weight_size,
                          const ConvParams& p) {
  Tensor out = make_tensor(weight_size, x.dtype(), x.device());
  if (out.numel() > 0) {
    if (x.numel() == 0 || gy.numel() == 0) {
      out.zero_();
    } else {
      conv2d_weight_grad_stub[x.device()](out, dense(x, true), dense(gy, true), p);
    }
  }
  if (autograd::any_needs_grad({&x, &gy})) {
    autograd::record("conv2d_weight_grad", {&x, &gy}, {&out},
                     [sx = save_if(x, needs_grad(gy)), sgy = save_if(gy, needs_grad(x)),
                      xs = x.sizes().shape(), p](BackwardCtx& c, const TensorList& g) {
                       TensorList r(2);
                       if (c.needs_input_grad(0)) {
                         r[0] = conv2d_input_grad(c.unpack(sgy), g[0], xs, p);
                       }
                       if (c.needs_input_grad(1)) r[1] = conv2d_op(c.unpack(sx), g[0], {}, p);
                       return r;
                     });
  }
  return out;
}

// ---- argument checking

std::array<int64_t, 2> conv_pair(IntArrayRef v, int64_t nd, const char* op, const char* what,
                                 int64_t unit) {
  IGNIS_CHECK(v.size() == 1 || static_cast<int64_t>(v.size()) == nd, op, ": ", what,
              " must have 1 or ", nd, " values, but got ", v.size(), " values ", v);
  if (nd == 1) return {unit, v[0]};
  return {v[0], v.size() == 1 ? v[0] : v[1]};
}

namespace {

struct ConvArgs {
  const char* op;
  int64_t nd;  // spatial dims: 1 or 2
  std::array<int64_t, 2> stride, padding, dilation;
  bool same = false;
};

void check_tensors(const char* op, int64_t nd, const Tensor& x, const Tensor& w, const Tensor& b,
                   int64_t groups, bool transposed) {
  IGNIS_CHECK(x.defined() && w.defined(), op, ": called with an undefined input or weight");
  const char* dims = nd == 1 ? "[N, C, L]" : "[N, C, H, W]";
  IGNIS_CHECK(x.dim() == nd + 1 || x.dim() == nd + 2, op, ": expected a ", nd + 1,
              "-d (unbatched) or ", nd + 2, "-d (batched) input ", dims,
              ", but got input of shape ", x.sizes());
  IGNIS_CHECK(w.dim() == nd + 2, op, ": expected a ", nd + 2, "-d weight, but got weight of shape ",
              w.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  IGNIS_CHECK(x.dtype() == w.dtype(), op, ": input (", x.dtype(), ") and weight (", w.dtype(),
              ") must have the same dtype");
  IGNIS_CHECK(x.device() == w.device(), op, ": input and weight must be on the same device");
  IGNIS_CHECK(groups >= 1, op, ": groups must be positive, but got ", groups);
  const int64_t c = x.size(x.dim() - nd - 1);
  const int64_t o = transposed ? w.size(1) * groups : w.size(0);
  if (transposed) {
    IGNIS_CHECK(w.size(0) % groups == 0, op, ": in_channels (weight.size(0) = ", w.size(0),
                ") must be divisible by groups = ", groups, " (weight of shape ", w.sizes(), ")");
    IGNIS_CHECK(c == w.size(0), op, ": expected input of shape ", x.sizes(), " to have ", w.size(0),
                " channels (weight of shape ", w.sizes(), "), but got ", c, " channels");
  } else {
    IGNIS_CHECK(o % groups == 0, op, ": out_channels (weight.size(0) = ", o,
                ") must be divisible by groups = ", groups, " (weight of shape ", w.sizes(), ")");
    IGNIS_CHECK(c == w.size(1) * groups, op, ": expected input of shape ", x.sizes(), " to have ",
                w.size(1) * groups, " channels (weight of shape ", w.sizes(), ", groups = ", groups,
                "), but got ", c, " channels");
  }
  if (b.defined()) {
    IGNIS_CHECK(b.dim() == 1 && b.size(0) == o, op, ": expected a bias of shape [", o,
                "], but got bias of shape ", b.sizes());
    IGNIS_CHECK(b.dtype() == x.dtype(), op, ": bias (", b.dtype(), ") and input (", x.dtype(),
                ") must have the same dtype");
  }
}

ConvParams resolve(const ConvArgs& a, const Tensor& x4, const Tensor& w4, int64_t groups) {
  ConvParams p;
  p.groups = groups;
  for (int d = 0; d < 2; ++d) {
    IGNIS_CHECK(a.stride[d] >= 1, a.op, ": stride must be positive, but got ", a.stride[d]);
    IGNIS_CHECK(a.dilation[d] >= 1, a.op, ": dilation must be positive, but got ", a.dilation[d]);
    IGNIS_CHECK(a.padding[d] >= 0, a.op, ": padding must be non-negative, but got ", a.padding[d]);
    p.stride[d] = a.stride[d];
    p.dilation[d] = a.dilation[d];
    if (a.same) {
      const int64_t total = a.dilation[d] * (w4.size(2 + d) - 1);
      p.pad_l[d] = total / 2;
      p.pad_r[d] = total - total / 2;
    } else {
      p.pad_l[d] = p.pad_r[d] = a.padding[d];
    }
  }
  const int64_t ph = x4.size(2) + p.pad_l[0] + p.pad_r[0],
                pw = x4.size(3) + p.pad_l[1] + p.pad_r[1];
  const int64_t kh = p.dilation[0] * (w4.size(2) - 1) + 1,
                kw = p.dilation[1] * (w4.size(3) - 1) + 1;
  if (a.nd == 1) {
    IGNIS_CHECK(kw <= pw, a.op, ": the (dilated) kernel size ", kw,
                " is larger than the padded input size ", pw, " (input of shape ",
                x4.squeeze(2).sizes(), ")");
  } else {
    IGNIS_CHECK(kh <= ph && kw <= pw, a.op, ": the (dilated) kernel size (", kh, " x ", kw,
                ") is larger than the padded input size (", ph, " x ", pw, ") (input of shape ",
                x4.sizes(), ")");
  }
  return p;
}

// Runs a conv over x and w viewed as 4-d NCHW (conv1d: unit height; unbatched: unit batch).
Tensor conv_nd(const ConvArgs& a, const Tensor& x, const Tensor& w, const Tensor& b, int64_t groups,
               bool relu) {
  check_tensors(a.op, a.nd, x, w, b, groups, false);
  if (a.same) {
    for (int d = 0; d < 2; ++d) {
      IGNIS_CHECK(a.stride[d] == 1, a.op,
                  ": padding='same' is not supported for strided "
                  "convolutions (stride ",
                  a.stride[d], ")");
    }
  }
  const bool unbatched = x.dim() == a.nd + 1;
  Tensor x4 = unbatched ? x.unsqueeze(0) : x;
  Tensor w4 = w;
  if (a.nd == 1) {
    // A transposed [N, L, C] input would look channels-last once unsqueezed and give a strided
    // 3-d result: conv1d takes and returns contiguous [N, C, L] tensors.
    x4 = x4.unsqueeze(2).contiguous();
    w4 = w4.unsqueeze(2);
  }
  const ConvParams p = resolve(a, x4, w4, groups);
  Tensor y = conv2d_op(x4, w4, b, p, relu);
  if (a.nd == 1) y = y.squeeze(2);
  return unbatched ? y.squeeze(0) : y;
}

ConvArgs int_args(const char* op, int64_t nd, IntArrayRef stride, IntArrayRef padding,
                  IntArrayRef dilation) {
  return {op, nd, conv_pair(stride, nd, op, "stride"), conv_pair(padding, nd, op, "padding", 0),
          conv_pair(dilation, nd, op, "dilation")};
}

ConvArgs str_args(const char* op, int64_t nd, IntArrayRef stride, const std::string& padding,
                  IntArrayRef dilation) {
  IGNIS_CHECK(padding == "same" || padding == "valid", op,
              ": padding must be 'same' or 'valid' "
              "(or integers), but got '",
              padding, "'");
  ConvArgs a = int_args(op, nd, stride, {0}, dilation);
  a.same = padding == "same";
  return a;
}

}  // namespace

// ---- public API

#define CONV_OPTS                      \
  {                                    \
    .differentiable = true, .stubs = { \
      &conv2d_stub,                    \
      &conv2d_input_grad_stub,         \
      &conv2d_weight_grad_stub         \
    }                                  \
  }
#define CONV_SIG                                                                             \
  Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef, \
         int64_t)
#define CONV_INT_SIG \
  Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, int64_t, IntArrayRef, int64_t)
IGNIS_OP(conv2d,
         "conv2d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] dilation=[1], int groups=1) -> Tensor",
         CONV_SIG, conv2d, CONV_OPTS);
IGNIS_OP(conv2d_int_padding,
         "conv2d.int_padding(Tensor input, Tensor weight, Tensor? bias, int[] stride, int padding, "
         "int[] dilation=[1], int groups=1) -> Tensor",
         CONV_INT_SIG, conv2d, CONV_OPTS);
IGNIS_OP(conv1d,
         "conv1d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] dilation=[1], int groups=1) -> Tensor",
         CONV_SIG, conv1d, CONV_OPTS);
IGNIS_OP(conv1d_int_padding,
         "conv1d.int_padding(Tensor input, Tensor weight, Tensor? bias, int[] stride, int padding, "
         "int[] dilation=[1], int groups=1) -> Tensor",
         CONV_INT_SIG, conv1d, CONV_OPTS);
IGNIS_OP(conv2d_relu,
         "conv2d_relu(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] dilation=[1], int groups=1) -> Tensor",
         CONV_SIG, conv2d_relu, CONV_OPTS);
IGNIS_OP(conv_transpose2d,
         "conv_transpose2d(Tensor input, Tensor weight, Tensor? bias=None, int[] stride=[1], "
         "int[] padding=[0], int[] output_padding=[0], int groups=1, int[] dilation=[1]) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, IntArrayRef, IntArrayRef,
                int64_t, IntArrayRef),
         conv_transpose2d, CONV_OPTS);
#define CONV_STR_SIG                                                                   \
  Tensor(const Tensor&, const Tensor&, const Tensor&, IntArrayRef, const PaddingMode&, \
         IntArrayRef, int64_t)
IGNIS_OP(conv2d_padding,
         "conv2d.padding(Tensor input, Tensor weight, Tensor? bias, int[] stride, str padding, "
         "int[] dilation=[1], int groups=1) -> Tensor",
         CONV_STR_SIG, conv2d, CONV_OPTS);
IGNIS_OP(conv1d_padding,
         "conv1d.padding(Tensor input, Tensor weight, Tensor? bias, int[] stride, str padding, "
         "int[] dilation=[1], int groups=1) -> Tensor",
         CONV_STR_SIG, conv1d, CONV_OPTS);
#undef CONV_STR_SIG
#undef CONV_INT_SIG
#undef CONV_SIG
#undef CONV_OPTS

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv2d, conv2d, x, w, b, stride, padding, dilation, groups);
  return conv_nd(int_args("conv2d", 2, stride, padding, dilation), x, w, b, groups, false);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              const PaddingMode& padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv2d_padding, conv2d, x, w, b, stride, padding, dilation, groups);
  return conv_nd(str_args("conv2d", 2, stride, padding.value, dilation), x, w, b, groups, false);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv1d, conv1d, x, w, b, stride, padding, dilation, groups);
  return conv_nd(int_args("conv1d", 1, stride, padding, dilation), x, w, b, groups, false);
}

Tensor conv2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              int64_t padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv2d_int_padding, conv2d, x, w, b, stride, padding, dilation, groups);
  return conv2d(x, w, b, stride, IntArrayRef(padding), dilation, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              int64_t padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv1d_int_padding, conv1d, x, w, b, stride, padding, dilation, groups);
  return conv1d(x, w, b, stride, IntArrayRef(padding), dilation, groups);
}

Tensor conv1d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
              const PaddingMode& padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv1d_padding, conv1d, x, w, b, stride, padding, dilation, groups);
  return conv_nd(str_args("conv1d", 1, stride, padding.value, dilation), x, w, b, groups, false);
}

Tensor conv2d_relu(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
                   IntArrayRef padding, IntArrayRef dilation, int64_t groups) {
  IGNIS_DISPATCH(conv2d_relu, conv2d_relu, x, w, b, stride, padding, dilation, groups);
  return conv_nd(int_args("conv2d_relu", 2, stride, padding, dilation), x, w, b, groups, true);
}

Tensor conv_transpose2d(const Tensor& x, const Tensor& w, const Tensor& b, IntArrayRef stride,
                        IntArrayRef padding, IntArrayRef output_padding, int64_t groups,
                        IntArrayRef dilation) {
  IGNIS_DISPATCH(conv_transpose2d, conv_transpose2d, x, w, b, stride, padding, output_padding,
                 groups, dilation);
  const char* op = "conv_transpose2d";
  check_tensors(op, 2, x, w, b, groups, true);
  const auto s = conv_pair(stride, 2, op, "stride"), pd = conv_pair(padding, 2, op, "padding");
  const auto dl = conv_pair(dilation, 2, op, "dilation");
  const auto op_ = conv_pair(output_padding, 2, op, "output_padding");
  const bool unbatched = x.dim() == 3;
  Tensor x4 = unbatched ? x.unsqueeze(0) : x;
  ConvParams p;
  p.groups = groups;
  Shape out_size{x4.size(0), w.size(1) * groups, 0, 0};
  for (int d = 0; d < 2; ++d) {
    IGNIS_CHECK(s[d] >= 1, op, ": stride must be positive, but got ", s[d]);
    IGNIS_CHECK(dl[d] >= 1, op, ": dilation must be positive, but got ", dl[d]);
    IGNIS_CHECK(pd[d] >= 0, op, ": padding must be non-negative, but got ", pd[d]);
    IGNIS_CHECK(op_[d] >= 0 && (op_[d] < s[d] || op_[d] < dl[d]), op, ": output_padding ", op_[d],
                " must be non-negative and smaller than either stride ", s[d], " or dilation ",
                dl[d]);
    // The transposed conv is the input gradient of a conv from the output back to x; the output
    // padding extends that conv's input on the right, where the conv has less padding.
    p.stride[d] = s[d];
    p.dilation[d] = dl[d];
    p.pad_l[d] = pd[d];
    p.pad_r[d] = pd[d] - op_[d];
    const int64_t o =
        (x4.size(2 + d) - 1) * s[d] - 2 * pd[d] + dl[d] * (w.size(2 + d) - 1) + op_[d] + 1;
    IGNIS_CHECK(o >= 1, op, ": the output size ", o, " computed for input of shape ", x.sizes(),
                " and weight of shape ", w.sizes(), " is too small");
    out_size[2 + d] = o;
  }
  Tensor y = conv2d_input_grad(x4, w, out_size, p);
  if (b.defined()) y = y + b.view({1, -1, 1, 1});
  return unbatched ? y.squeeze(0) : y;
}

}  // namespace ignis
