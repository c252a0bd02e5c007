// The fused convolutions graph mode makes, each one op:
// - conv2d_add_relu: relu(conv2d(x, w, b) + other), the end of a ResNet block (fuse_ops rewrites
//   conv2d -> add -> relu into it);
// - conv2d_pointwise: a convolution with the other activations (GELU, SiLU) and an optional
//   residual, added before or after the activation (fuse_conv_pointwise).
// For float32 CPU inference (no input requiring grad), and bfloat16 on CPUs with native bfloat16,
// each is one oneDNN convolution with post-ops: a sum (the output buffer holds `other` and the
// convolution accumulates into it) and an eltwise activation, so the residual is read and the
// result written in the convolution's own pass. Otherwise (other dtypes, autograd, the meta device,
// broadcasting, groups) it is the composite, whose ops carry the checks and the backward.
#include "jit/fused_conv.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/onednn_util.h"
#include "ignis/conv.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/pointwise.h"
#include "ops/conv.h"
#include "ops/copy.h"

namespace ignis {

namespace {

namespace onednn = cpu::onednn;
using dnnl::memory;
using jit::detail::Activation;
using Tag = memory::format_tag;

struct FusedPrim {
  bool ok = false;
  dnnl::convolution_forward prim;
  memory::desc xu, xi, wu, wi, bu, yu, yi;
};

onednn::LruCache<FusedPrim>& cache() {
  static onednn::LruCache<FusedPrim> c(256);
  return c;
}

bool is_cl(const Tensor& t) { return t.suggest_memory_format() == MemoryFormat::ChannelsLast; }

memory::dims dims4(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }

std::string prim_key(const Tensor& x, IntArrayRef w, bool bias, const Tensor& y,
                     const ConvParams& p, Activation act, bool sum, bool add_first) {
  return onednn::make_key({x.size(0),     x.size(1),     x.size(2),
                           x.size(3),     w[0],          w[2],
                           w[3],          y.size(2),     y.size(3),
                           p.stride[0],   p.stride[1],   p.pad_l[0],
                           p.pad_l[1],    p.pad_r[0],    p.pad_r[1],
                           p.dilation[0], p.dilation[1], bias,
                           is_cl(x),      is_cl(y),      static_cast<int64_t>(act),
                           sum,           add_first,     static_cast<int64_t>(x.dtype())});
}

std::shared_ptr<const FusedPrim> get_prim(const std::string& key, const Tensor& x, IntArrayRef ws,
                                          bool bias, const Tensor& y, const ConvParams& p,
                                          Activation act, bool sum, bool add_first) {
  return cache().get(key, [&] {
    FusedPrim r;
    try {
      auto& eng = onednn::engine();
      const auto dt = onednn::data_type(x.dtype());
      r.xu = memory::desc(dims4(x), dt, is_cl(x) ? Tag::nhwc : Tag::nchw);
      r.yu = memory::desc(dims4(y), dt, is_cl(y) ? Tag::nhwc : Tag::nchw);
      r.wu = memory::desc({ws[0], ws[1], ws[2], ws[3]}, dt, Tag::oihw);
      r.bu = memory::desc({ws[0]}, dt, Tag::x);
      // Channels-last activations stay NHWC; NCHW ones let the primitive pick its layout.
      const bool cl = is_cl(x) && is_cl(y);
      auto any = [dt](const memory::desc& d) { return memory::desc(d.dims(), dt, Tag::any); };
      const memory::desc xa = cl ? r.xu : any(r.xu), ya = cl ? r.yu : any(r.yu);
      const memory::dims strides{p.stride[0], p.stride[1]};
      const memory::dims dil{p.dilation[0] - 1, p.dilation[1] - 1};
      const memory::dims pl{p.pad_l[0], p.pad_l[1]}, pr{p.pad_r[0], p.pad_r[1]};
      const auto alg = dnnl::algorithm::convolution_direct;
      const auto prop = dnnl::prop_kind::forward_inference;
      auto d = bias ? dnnl::convolution_forward::desc(prop, alg, xa, any(r.wu), r.bu, ya, strides,
                                                      dil, pl, pr)
                    : dnnl::convolution_forward::desc(prop, alg, xa, any(r.wu), ya, strides, dil,
                                                      pl, pr);
      dnnl::post_ops ops;
      jit::detail::append_post_ops(ops, act, sum, add_first,
                                   [](dnnl::post_ops& o) { o.append_sum(1.f); });
      dnnl::primitive_attr attr;
      attr.set_post_ops(ops);
      dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
      // bfloat16 on oneDNN's reference code would be slower than the composite's primitives.
      if (dt == memory::data_type::bf16 && onednn::is_reference_impl(pd.impl_info_str()))
        return FusedPrim();
      r.prim = dnnl::convolution_forward(pd);
      r.xi = pd.src_desc();
      r.wi = pd.weights_desc();
      r.yi = pd.dst_desc();
      r.ok = true;
    } catch (const dnnl::error&) {
      r = FusedPrim();  // no oneDNN implementation: the composite runs
    }
    return r;
  });
}

// A memory object on `user`'s buffer, or on a temporary in the primitive's layout (`inner`),
// filled by a reorder when `fill`.
memory in_layout(const memory::desc& user, const memory::desc& inner, void* ptr, bool fill,
                 std::vector<Tensor>& temps) {
  auto& eng = onednn::engine();
  memory u(user, eng, ptr);
  if (user == inner) return u;
  temps.push_back(make_tensor({static_cast<int64_t>((inner.get_size() + 3) / 4)}, kFloat32));
  memory m(inner, eng, temps.back().data_ptr());
  if (fill) dnnl::reorder(u, m).execute(onednn::stream(), u, m);
  return m;
}

// Resolves int[] stride / padding / dilation of one or two elements; false when they are not
// plain (the composite then checks and reports them).
bool params_of(IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation, ConvParams& p) {
  auto pick = [](IntArrayRef a, int d, int64_t& out, int64_t lo) {
    if (a.size() != 1 && a.size() != 2) return false;
    out = a[a.size() == 1 ? 0 : static_cast<size_t>(d)];
    return out >= lo;
  };
  for (int d = 0; d < 2; ++d) {
    if (!pick(stride, d, p.stride[d], 1) || !pick(padding, d, p.pad_l[d], 0) ||
        !pick(dilation, d, p.dilation[d], 1))
      return false;
    p.pad_r[d] = p.pad_l[d];
  }
  return true;
}

}  // namespace

namespace jit::detail {

// The convolution (+ bias) with its tail (an activation, and `other` accumulated by a sum post-op
// before or after it) as one oneDNN primitive, or an undefined tensor when the case is not one it
// handles (autograd, dtypes other than float32, groups, broadcasting, ...). With `packed`, the
// weight is reordered into the primitive's layout once and reused while the weight's data and
// version stay the same; a released weight (w undefined) is its packed bytes, usable only by the
// primitive they were packed for.
Tensor conv_forward_onednn(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                           IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                           int64_t groups, Activation act, bool add_first,
                           PackedConvWeight* packed) {
  const bool sum = other.defined();
  const bool released = packed != nullptr && packed->released;
  add_first = add_first && sum;  // without a residual the order means nothing
  if (autograd::any_needs_grad({&x, &w, &b, &other}) || groups != 1) return Tensor();
  const DType dt = x.dtype();
  if (!onednn::runs_dtype(dt)) return Tensor();
  if (released ? packed->dtype != dt : !w.defined() || !w.is_contiguous()) return Tensor();
  for (const Tensor* t : {&x, &w, &b, &other}) {
    if (t->defined() && (t->dtype() != dt || !t->device().is_cpu())) return Tensor();
  }
  const IntArrayRef ws = released ? IntArrayRef(packed->sizes) : w.sizes();
  if (x.dim() != 4 || ws.size() != 4 || ws[1] != x.size(1)) return Tensor();
  if (sum && other.dim() != 4) return Tensor();
  if (b.defined() && (b.dim() != 1 || b.size(0) != ws[0] || !b.is_contiguous())) return Tensor();
  if (!(x.is_contiguous() || is_cl(x))) return Tensor();
  ConvParams p;
  if (!params_of(stride, padding, dilation, p)) return Tensor();
  const Shape out_size{x.size(0), ws[0], conv_out_size(x.size(2), ws[2], p, 0),
                       conv_out_size(x.size(3), ws[3], p, 1)};
  if (out_size[2] <= 0 || out_size[3] <= 0 || x.numel() == 0) return Tensor();
  if (sum && !other.sizes().equals(out_size)) return Tensor();
  // The layout of the unfused ops' result: channels-last when an operand is.
  const MemoryFormat fmt =
      is_cl(x) || (sum && is_cl(other)) ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  Tensor out = make_tensor(out_size, dt, kCPU, fmt);
  const std::string key = prim_key(x, ws, b.defined(), out, p, act, sum, add_first);
  if (released && packed->key != key) return Tensor();  // another primitive: the plain weight
  auto prim = get_prim(key, x, ws, b.defined(), out, p, act, sum, add_first);
  if (!prim->ok) return Tensor();
  if (sum) copy_into(out, other);  // the sum post-op accumulates the convolution into it
  std::vector<Tensor> temps;
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, in_layout(prim->xu, prim->xi, x.data_ptr(), true, temps));
  if (packed != nullptr && (released || prim->wu != prim->wi)) {
    if (!released && (packed->key != key || !packed->packs_plain(w)))
      packed->pack(key, w, prim->wu, prim->wi);
    args.emplace(DNNL_ARG_WEIGHTS, memory(prim->wi, onednn::engine(), packed->weight.data_ptr()));
  } else {
    args.emplace(DNNL_ARG_WEIGHTS, in_layout(prim->wu, prim->wi, w.data_ptr(), true, temps));
  }
  if (b.defined()) args.emplace(DNNL_ARG_BIAS, memory(prim->bu, onednn::engine(), b.data_ptr()));
  memory dst = in_layout(prim->yu, prim->yi, out.data_ptr(), sum, temps);
  args.emplace(DNNL_ARG_DST, dst);
  auto& s = onednn::stream();
  prim->prim.execute(s, args);
  if (prim->yu != prim->yi) {
    memory user(prim->yu, onednn::engine(), out.data_ptr());
    dnnl::reorder(dst, user).execute(s, dst, user);
  }
  s.wait();
  return out;
}

}  // namespace jit::detail

IGNIS_OP(conv2d_add_relu,
         "conv2d_add_relu(Tensor input, Tensor weight, Tensor? bias, Tensor other, "
         "int[] stride=[1], int[] padding=[0], int[] dilation=[1], int groups=1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, IntArrayRef,
                IntArrayRef, IntArrayRef, int64_t),
         conv2d_add_relu, {.differentiable = true, .kind = "composite"});

Tensor conv2d_add_relu(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                       IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                       int64_t groups) {
  IGNIS_DISPATCH(conv2d_add_relu, conv2d_add_relu, x, w, b, other, stride, padding, dilation,
                 groups);
  IGNIS_CHECK(other.defined(), "conv2d_add_relu: other is undefined");
  Tensor fused = jit::detail::conv_forward_onednn(x, w, b, other, stride, padding, dilation, groups,
                                                  Activation::relu, /*add_first=*/true, nullptr);
  if (fused.defined()) return fused;
  return relu(add(conv2d(x, w, b, stride, padding, dilation, groups), other));
}

IGNIS_OP(conv2d_pointwise,
         "conv2d_pointwise(Tensor input, Tensor weight, Tensor? bias=None, Tensor? other=None, "
         "int[] stride=[1], int[] padding=[0], int[] dilation=[1], int groups=1, "
         "str activation='none', bool add_first=False) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, IntArrayRef,
                IntArrayRef, IntArrayRef, int64_t, const std::string&, bool),
         jit::conv2d_pointwise, {.differentiable = true, .kind = "composite"});

namespace jit {

Tensor conv2d_pointwise(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                        IntArrayRef stride, IntArrayRef padding, IntArrayRef dilation,
                        int64_t groups, const std::string& activation, bool add_first) {
  IGNIS_DISPATCH(conv2d_pointwise, conv2d_pointwise, x, w, b, other, stride, padding, dilation,
                 groups, activation, add_first);
  const Activation act = detail::activation_named("conv2d_pointwise", activation);
  Tensor fused = detail::conv_forward_onednn(x, w, b, other, stride, padding, dilation, groups, act,
                                             add_first, nullptr);
  if (fused.defined()) return fused;
  return detail::apply_pointwise(conv2d(x, w, b, stride, padding, dilation, groups), other, act,
                                 add_first);
}

}  // namespace jit

}  // namespace ignis
