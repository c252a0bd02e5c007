// CPU convolution kernels.
//  * float32: oneDNN convolution primitives (forward with the bias and an optional relu fused,
//    backward-data, backward-weights). Each is created once per shape and parameters and kept in
//    an LRU cache; its operands are given as they lie in memory (NCHW or channels-last NHWC
//    activations, (g)oihw weights) and reordered only when the primitive asks for another layout
//    (nhwc or blocked ones on AVX-512). Channels-last activations are passed as NHWC to every
//    pass, so a channels-last network runs without activation reorders.
//  * float64 (gradcheck) and any shape oneDNN refuses: direct loops, one output, input or
//    filter plane per task, so no two threads write the same element.
//  * bfloat16: on CPUs with native bfloat16 (AVX512-BF16, AMX), the same oneDNN primitives in
//    bfloat16 (float32 accumulation, rounded once), unless oneDNN has only its reference code for
//    the case; otherwise converted to float32, computed, converted back.
#include <optional>

#include "core/tensor_impl.h"
#include "cpu/onednn_util.h"
#include "cpu/parallel.h"
#include "ops/conv.h"
#include "ops/copy.h"

namespace ignis::cpu {
namespace {

using dnnl::memory;
using Tag = memory::format_tag;

/// The sizes of a conv: x [N, C, H, W], w [O, C/g, KH, KW], y [N, O, OH, OW].
struct Geom {
  int64_t N, C, H, W, O, KH, KW, OH, OW, G, Cg, Og;
};

Geom geom(const Tensor& x, const Tensor& w, const Tensor& y, int64_t groups) {
  Geom g{x.size(0), x.size(1), x.size(2), x.size(3), w.size(0), w.size(2),
         w.size(3), y.size(2), y.size(3), groups,    0,         0};
  g.Cg = g.C / groups;
  g.Og = g.O / groups;
  return g;
}

// ---- reference loops

template <class T>
void ref_forward(T* y, const T* x, const T* w, const T* b, const Geom& s, const ConvParams& p,
                 bool relu) {
  parallel_for(0, s.N * s.O, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t n = i / s.O, o = i % s.O, g = o / s.Og;
      T* yp = y + i * s.OH * s.OW;
      for (int64_t oh = 0; oh < s.OH; ++oh) {
        for (int64_t ow = 0; ow < s.OW; ++ow) {
          T acc = b ? b[o] : T(0);
          for (int64_t c = 0; c < s.Cg; ++c) {
            const T* xp = x + (n * s.C + g * s.Cg + c) * s.H * s.W;
            const T* wp = w + (o * s.Cg + c) * s.KH * s.KW;
            for (int64_t kh = 0; kh < s.KH; ++kh) {
              const int64_t ih = oh * p.stride[0] - p.pad_l[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= s.H) continue;
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.pad_l[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= s.W) continue;
                acc += xp[ih * s.W + iw] * wp[kh * s.KW + kw];
              }
            }
          }
          yp[oh * s.OW + ow] = relu && acc < T(0) ? T(0) : acc;
        }
      }
    }
  });
}

template <class T>
void ref_input_grad(T* gx, const T* gy, const T* w, const Geom& s, const ConvParams& p) {
  parallel_for(0, s.N * s.C, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t n = i / s.C, ic = i % s.C, g = ic / s.Cg, c = ic % s.Cg;
      T* gp = gx + i * s.H * s.W;
      std::fill(gp, gp + s.H * s.W, T(0));
      for (int64_t o = g * s.Og; o < (g + 1) * s.Og; ++o) {
        const T* yp = gy + (n * s.O + o) * s.OH * s.OW;
        const T* wp = w + (o * s.Cg + c) * s.KH * s.KW;
        for (int64_t oh = 0; oh < s.OH; ++oh) {
          for (int64_t kh = 0; kh < s.KH; ++kh) {
            const int64_t ih = oh * p.stride[0] - p.pad_l[0] + kh * p.dilation[0];
            if (ih < 0 || ih >= s.H) continue;
            for (int64_t ow = 0; ow < s.OW; ++ow) {
              const T v = yp[oh * s.OW + ow];
              for (int64_t kw = 0; kw < s.KW; ++kw) {
                const int64_t iw = ow * p.stride[1] - p.pad_l[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= s.W) continue;
                gp[ih * s.W + iw] += v * wp[kh * s.KW + kw];
              }
            }
          }
        }
      }
    }
  });
}

template <class T>
void ref_weight_grad(T* gw, const T* x, const T* gy, const Geom& s, const ConvParams& p) {
  parallel_for(0, s.O * s.Cg, 1, [&](int64_t b0, int64_t b1) {
    for (int64_t i = b0; i < b1; ++i) {
      const int64_t o = i / s.Cg, c = i % s.Cg, ic = (o / s.Og) * s.Cg + c;
      T* gp = gw + i * s.KH * s.KW;
      for (int64_t kh = 0; kh < s.KH; ++kh) {
        for (int64_t kw = 0; kw < s.KW; ++kw) {
          T acc = 0;
          for (int64_t n = 0; n < s.N; ++n) {
            const T* xp = x + (n * s.C + ic) * s.H * s.W;
            const T* yp = gy + (n * s.O + o) * s.OH * s.OW;
            for (int64_t oh = 0; oh < s.OH; ++oh) {
              const int64_t ih = oh * p.stride[0] - p.pad_l[0] + kh * p.dilation[0];
              if (ih < 0 || ih >= s.H) continue;
              for (int64_t ow = 0; ow < s.OW; ++ow) {
                const int64_t iw = ow * p.stride[1] - p.pad_l[1] + kw * p.dilation[1];
                if (iw < 0 || iw >= s.W) continue;
                acc += yp[oh * s.OW + ow] * xp[ih * s.W + iw];
              }
            }
          }
          gp[kh * s.KW + kw] = acc;
        }
      }
    }
  });
}

// ---- oneDNN

/// A cached primitive and, per operand, its user (plain) layout, the layout the primitive wants,
/// and the reorder between them when they differ. ok is false when oneDNN has no implementation
/// (the reference loops run instead; the failure is cached too).
struct Prim {
  struct Arg {
    int id;
    memory::desc user, inner;
    std::optional<dnnl::reorder> reorder;  // user -> inner for inputs, inner -> user for outputs
    bool output;
  };
  bool ok = false;
  dnnl::primitive prim;
  std::vector<Arg> args;
};

onednn::LruCache<Prim>& cache() {
  static onednn::LruCache<Prim> c(128);
  return c;
}

enum Kind : int64_t { kForward, kBackwardData, kBackwardWeights };

memory::dims dims4(const Tensor& t) { return {t.size(0), t.size(1), t.size(2), t.size(3)}; }

/// An activation as it lies in memory: NCHW, or NHWC for a channels-last tensor.
bool channels_last(const Tensor& t) {
  return t.suggest_memory_format() == MemoryFormat::ChannelsLast;
}
memory::desc plain_act(const Tensor& t) {
  return memory::desc(dims4(t), onednn::data_type(t.dtype()),
                      channels_last(t) ? Tag::nhwc : Tag::nchw);
}
memory::desc any_like(const memory::desc& d) {
  return memory::desc(d.dims(), d.data_type(), Tag::any);
}
memory::desc plain_weights(const Tensor& w, int64_t groups) {
  if (groups == 1) return memory::desc(dims4(w), onednn::data_type(w.dtype()), Tag::oihw);
  return memory::desc({groups, w.size(0) / groups, w.size(1), w.size(2), w.size(3)},
                      onednn::data_type(w.dtype()), Tag::goihw);
}

Prim::Arg make_arg(int id, const memory::desc& user, const memory::desc& inner, bool output) {
  Prim::Arg a{id, user, inner, std::nullopt, output};
  if (user != inner) {
    auto& e = onednn::engine();
    a.reorder = output ? dnnl::reorder(dnnl::reorder::primitive_desc(e, inner, e, user))
                       : dnnl::reorder(dnnl::reorder::primitive_desc(e, user, e, inner));
  }
  return a;
}

/// The primitive for a conv of kind `kind` on these float32 or bfloat16 operands (x/gx, w/gw,
/// y/gy; one dtype). A bfloat16 case that only oneDNN's reference code implements is refused.
std::shared_ptr<const Prim> get_prim(Kind kind, const Tensor& x, const Tensor& w, const Tensor& y,
                                     bool bias, const ConvParams& p, bool relu) {
  const int64_t dt = static_cast<int64_t>(x.dtype());
  const std::string key =
      onednn::make_key({kind,       x.size(0),   x.size(1),        x.size(2),        x.size(3),
                        w.size(0),  w.size(1),   w.size(2),        w.size(3),        y.size(2),
                        y.size(3),  p.stride[0], p.stride[1],      p.pad_l[0],       p.pad_l[1],
                        p.pad_r[0], p.pad_r[1],  p.dilation[0],    p.dilation[1],    p.groups,
                        bias,       relu,        channels_last(x), channels_last(y), dt});
  return cache().get(key, [&] {
    Prim r;
    try {
      auto& eng = onednn::engine();
      const memory::desc xu = plain_act(x), yu = plain_act(y), wu = plain_weights(w, p.groups);
      // Channels-last activations stay NHWC (oneDNN has NHWC kernels for every pass, so no
      // reorders); NCHW ones let the primitive pick its layout.
      const bool cl = channels_last(x) && channels_last(y);
      const memory::desc xa = cl ? xu : any_like(xu), ya = cl ? yu : any_like(yu);
      const memory::desc wa = any_like(wu);
      const memory::dims strides{p.stride[0], p.stride[1]};
      const memory::dims dil{p.dilation[0] - 1, p.dilation[1] - 1};
      const memory::dims pl{p.pad_l[0], p.pad_l[1]}, pr{p.pad_r[0], p.pad_r[1]};
      const auto alg = dnnl::algorithm::convolution_direct;
      const memory::desc bu({w.size(0)}, onednn::data_type(x.dtype()), Tag::x);
      // Only the bfloat16 paths have another way (the float32 copies) to take.
      auto accept = [&](const auto& pd) {
        if (x.dtype() == kBFloat16 && onednn::is_reference_impl(pd.impl_info_str()))
          throw dnnl::error(dnnl_unimplemented, "reference bfloat16 convolution");
      };
      if (kind == kForward) {
        auto d = bias ? dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, xa,
                                                        wa, bu, ya, strides, dil, pl, pr)
                      : dnnl::convolution_forward::desc(dnnl::prop_kind::forward_inference, alg, xa,
                                                        wa, ya, strides, dil, pl, pr);
        dnnl::primitive_attr attr;
        if (relu) {
          dnnl::post_ops ops;
          ops.append_eltwise(1.f, dnnl::algorithm::eltwise_relu, 0.f, 0.f);
          attr.set_post_ops(ops);
        }
        dnnl::convolution_forward::primitive_desc pd(d, attr, eng);
        accept(pd);
        r.prim = dnnl::convolution_forward(pd);
        r.args.push_back(make_arg(DNNL_ARG_SRC, xu, pd.src_desc(), false));
        r.args.push_back(make_arg(DNNL_ARG_WEIGHTS, wu, pd.weights_desc(), false));
        if (bias) r.args.push_back(make_arg(DNNL_ARG_BIAS, bu, pd.bias_desc(), false));
        r.args.push_back(make_arg(DNNL_ARG_DST, yu, pd.dst_desc(), true));
      } else {
        dnnl::convolution_forward::desc fd(dnnl::prop_kind::forward_training, alg, xa, wa, ya,
                                           strides, dil, pl, pr);
        dnnl::convolution_forward::primitive_desc hint(fd, eng);
        if (kind == kBackwardData) {
          dnnl::convolution_backward_data::desc d(alg, xa, wa, ya, strides, dil, pl, pr);
          dnnl::convolution_backward_data::primitive_desc pd(d, eng, hint);
          accept(pd);
          r.prim = dnnl::convolution_backward_data(pd);
          r.args.push_back(make_arg(DNNL_ARG_DIFF_DST, yu, pd.diff_dst_desc(), false));
          r.args.push_back(make_arg(DNNL_ARG_WEIGHTS, wu, pd.weights_desc(), false));
          r.args.push_back(make_arg(DNNL_ARG_DIFF_SRC, xu, pd.diff_src_desc(), true));
        } else {
          dnnl::convolution_backward_weights::desc d(alg, xa, wa, ya, strides, dil, pl, pr);
          dnnl::convolution_backward_weights::primitive_desc pd(d, eng, hint);
          accept(pd);
          r.prim = dnnl::convolution_backward_weights(pd);
          r.args.push_back(make_arg(DNNL_ARG_SRC, xu, pd.src_desc(), false));
          r.args.push_back(make_arg(DNNL_ARG_DIFF_DST, yu, pd.diff_dst_desc(), false));
          r.args.push_back(make_arg(DNNL_ARG_DIFF_WEIGHTS, wu, pd.diff_weights_desc(), true));
        }
      }
      r.ok = true;
    } catch (const dnnl::error&) {
      r = Prim();  // no oneDNN implementation for this shape: the loops run
                   // instead
    }
    return r;
  });
}

/// Runs a cached primitive on user buffers (one per Prim::Arg, in order), reordering through
/// temporaries (from ignis's caching allocator) where the primitive wants another layout.
void execute(const Prim& pr, const std::vector<void*>& ptrs) {
  auto& eng = onednn::engine();
  auto& s = onednn::stream();
  std::unordered_map<int, memory> args;
  std::vector<Tensor> temps;
  std::vector<std::pair<memory, memory>> outs;  // inner -> user after the primitive
  for (size_t i = 0; i < pr.args.size(); ++i) {
    const Prim::Arg& a = pr.args[i];
    memory user(a.user, eng, ptrs[i]);
    if (!a.reorder) {
      args.emplace(a.id, user);
      continue;
    }
    const auto nbytes = static_cast<int64_t>(a.inner.get_size());
    temps.push_back(make_tensor({(nbytes + 3) / 4}, kFloat32));
    memory inner(a.inner, eng, temps.back().data_ptr());
    if (a.output) {
      outs.emplace_back(inner, user);
    } else {
      a.reorder->execute(s, user, inner);
    }
    args.emplace(a.id, inner);
  }
  pr.prim.execute(s, args);
  size_t k = 0;
  for (const Prim::Arg& a : pr.args) {
    if (a.output && a.reorder) {
      a.reorder->execute(s, outs[k].first, outs[k].second);
      ++k;
    }
  }
  s.wait();
}

/// Calls f with contiguous `dt` copies of the operands (bfloat16 is computed in float32; the
/// reference loops read NCHW) and copies the result back into `out`.
template <class F>
void via_copies(DType dt, const Tensor& out, std::vector<Tensor> in, F&& f) {
  for (Tensor& t : in) {
    if (!t.defined()) continue;
    Tensor c = make_tensor(t.sizes(), dt, t.device());
    copy_into(c, t);
    t = c;
  }
  Tensor o = make_tensor(out.sizes(), dt, out.device());
  f(o, in);
  copy_into(out, o);
}

/// True when an operand is channels-last (ops/conv.cpp gives dense operands: contiguous or
/// channels-last), which the reference loops cannot read.
bool any_channels_last(std::initializer_list<const Tensor*> ts) {
  for (const Tensor* t : ts) {
    if (t->defined() && !t->is_contiguous()) return true;
  }
  return false;
}

template <class T>
const T* ptr(const Tensor& t) {
  return t.defined() ? static_cast<const T*>(t.data_ptr()) : nullptr;
}

void forward_kernel(const Tensor& y, const Tensor& x, const Tensor& w, const Tensor& b,
                    const ConvParams& p, bool relu) {
  const DType dt = x.dtype();
  if (onednn::runs_dtype(dt)) {
    auto pr = get_prim(kForward, x, w, y, b.defined(), p, relu);
    if (pr->ok) {
      std::vector<void*> ptrs{x.data_ptr(), w.data_ptr()};
      if (b.defined()) ptrs.push_back(b.data_ptr());
      ptrs.push_back(y.data_ptr());
      return execute(*pr, ptrs);
    }
  }
  if (dt == kBFloat16 || any_channels_last({&y, &x})) {
    return via_copies(dt == kBFloat16 ? kFloat32 : dt, y, {x, w, b},
                      [&](const Tensor& o, const std::vector<Tensor>& in) {
                        forward_kernel(o, in[0], in[1], in[2], p, relu);
                      });
  }
  dispatch_floating(dt, "conv2d", [&]<class T>() {
    if constexpr (!std::is_same_v<T, BFloat16>) {
      ref_forward<T>(static_cast<T*>(y.data_ptr()), ptr<T>(x), ptr<T>(w), ptr<T>(b),
                     geom(x, w, y, p.groups), p, relu);
    }
  });
}

void input_grad_kernel(const Tensor& gx, const Tensor& gy, const Tensor& w, const ConvParams& p) {
  const DType dt = gx.dtype();
  if (onednn::runs_dtype(dt)) {
    auto pr = get_prim(kBackwardData, gx, w, gy, false, p, false);
    if (pr->ok) return execute(*pr, {gy.data_ptr(), w.data_ptr(), gx.data_ptr()});
  }
  if (dt == kBFloat16 || any_channels_last({&gx, &gy})) {
    return via_copies(dt == kBFloat16 ? kFloat32 : dt, gx, {gy, w},
                      [&](const Tensor& o, const std::vector<Tensor>& in) {
                        input_grad_kernel(o, in[0], in[1], p);
                      });
  }
  dispatch_floating(dt, "conv2d_input_grad", [&]<class T>() {
    if constexpr (!std::is_same_v<T, BFloat16>) {
      ref_input_grad<T>(static_cast<T*>(gx.data_ptr()), ptr<T>(gy), ptr<T>(w),
                        geom(gx, w, gy, p.groups), p);
    }
  });
}

void weight_grad_kernel(const Tensor& gw, const Tensor& x, const Tensor& gy, const ConvParams& p) {
  const DType dt = gw.dtype();
  if (onednn::runs_dtype(dt)) {
    auto pr = get_prim(kBackwardWeights, x, gw, gy, false, p, false);
    if (pr->ok) return execute(*pr, {x.data_ptr(), gy.data_ptr(), gw.data_ptr()});
  }
  if (dt == kBFloat16 || any_channels_last({&x, &gy})) {
    return via_copies(dt == kBFloat16 ? kFloat32 : dt, gw, {x, gy},
                      [&](const Tensor& o, const std::vector<Tensor>& in) {
                        weight_grad_kernel(o, in[0], in[1], p);
                      });
  }
  dispatch_floating(dt, "conv2d_weight_grad", [&]<class T>() {
    if constexpr (!std::is_same_v<T, BFloat16>) {
      ref_weight_grad<T>(static_cast<T*>(gw.data_ptr()), ptr<T>(x), ptr<T>(gy),
                         geom(x, gw, gy, p.groups), p);
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(conv2d_stub, CPU, &forward_kernel);
IGNIS_REGISTER_KERNEL(conv2d_input_grad_stub, CPU, &input_grad_kernel);
IGNIS_REGISTER_KERNEL(conv2d_weight_grad_stub, CPU, &weight_grad_kernel);

}  // namespace ignis::cpu

namespace ignis {

ConvCacheStats conv_primitive_cache_stats() {
  auto& c = cpu::cache();
  return {c.hits(), c.misses(), c.size()};
}

void conv_primitive_cache_clear() { cpu::cache().clear(); }

}  // namespace ignis
