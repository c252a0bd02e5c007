// linear_pointwise: activation(linear(x, w, b)) + other, or activation(linear(x, w, b) + other)
// with add_first, as one op: what graph mode's fuse_linear_pointwise makes of a linear followed by
// gelu / silu / relu and a residual add (a transformer block's MLP and output projection). For
// float32 CPU inference (and bfloat16 on CPUs with native bfloat16) it is one oneDNN matmul whose
// post-ops apply the activation (eltwise gelu_erf, gelu_tanh, swish, relu) and add `other` (a
// binary add) to each tile of the product while it is in cache, so neither costs a pass over memory
// of its own. Otherwise (autograd, other dtypes, the meta device, broadcasting `other`, fewer than
// 8 rows, no oneDNN implementation other than the reference one) it is the composite
// (jit/pointwise.h), whose ops carry the checks and the backward.
#include "jit/fused_linear.h"

#include <oneapi/dnnl/dnnl.hpp>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/onednn_util.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/pointwise.h"

namespace ignis {
namespace jit {

namespace {

namespace onednn = cpu::onednn;
using dnnl::memory;
using Tag = memory::format_tag;

struct MatmulPrim {
  bool ok = false;
  dnnl::matmul prim;
  memory::desc x, w, wi, b, y, other;  // wi: the weight's layout inside the primitive
  int other_slot = -1;                 // the binary add's index in the post-op chain
};

onednn::LruCache<MatmulPrim>& cache() {
  static onednn::LruCache<MatmulPrim> c(128);
  return c;
}

using detail::Activation;

std::shared_ptr<const MatmulPrim> get_prim(const std::string& key, int64_t M, int64_t K, int64_t N,
                                           bool bias, Activation act, bool sum, bool add_first,
                                           bool any_weight, DType dtype) {
  return cache().get(key, [&] {
    MatmulPrim r;
    try {
      const auto dt = onednn::data_type(dtype);
      r.x = memory::desc({M, K}, dt, Tag::ab);
      r.w = memory::desc({K, N}, dt, Tag::ba);  // the [N, K] row-major weight, transposed
      r.b = memory::desc({1, N}, dt, Tag::ab);
      r.y = memory::desc({M, N}, dt, Tag::ab);
      r.other = r.y;
      // With a pre-packed weight the primitive picks the weight's layout.
      const memory::desc wa = any_weight ? memory::desc({K, N}, dt, Tag::any) : r.w;
      auto d = bias ? dnnl::matmul::desc(r.x, wa, r.b, r.y) : dnnl::matmul::desc(r.x, wa, r.y);
      dnnl::post_ops ops;
      r.other_slot = detail::append_post_ops(ops, act, sum, add_first, [&](dnnl::post_ops& o) {
        o.append_binary(dnnl::algorithm::binary_add, r.other);
      });
      dnnl::primitive_attr attr;
      attr.set_post_ops(ops);
      dnnl::matmul::primitive_desc pd(d, attr, onednn::engine());
      // The reference implementation is far slower than the ops run one by one.
      if (onednn::is_reference_impl(pd.impl_info_str())) return r;
      r.prim = dnnl::matmul(pd);
      r.wi = pd.weights_desc();
      r.ok = true;
    } catch (const dnnl::error&) {
      r = MatmulPrim();  // no oneDNN implementation: the composite runs
    }
    return r;
  });
}

/// The fused product, or an undefined tensor when the case is not one oneDNN runs here. A released
/// weight (w undefined: jit/packed_weight.h) is its packed bytes, usable only by the primitive
/// they were packed for.
Tensor linear_onednn(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                     Activation act, bool add_first, detail::PackedLinearWeight* packed) {
  if (autograd::any_needs_grad({&x, &w, &b, &other})) return Tensor();
  const bool released = packed != nullptr && packed->released;
  const DType dt = x.dtype();
  if (!onednn::runs_dtype(dt)) return Tensor();
  if (released ? packed->dtype != dt : !w.defined() || !w.is_contiguous()) return Tensor();
  for (const Tensor* t : {&x, &w, &b, &other}) {
    if (t->defined() && (t->dtype() != dt || !t->device().is_cpu())) return Tensor();
  }
  const IntArrayRef ws = released ? IntArrayRef(packed->sizes) : w.sizes();
  if (x.dim() < 1 || ws.size() != 2 || x.size(-1) != ws[1]) return Tensor();
  if (b.defined() && (b.dim() != 1 || b.size(0) != ws[0] || !b.is_contiguous())) return Tensor();
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(ws[0]);
  if (other.defined() && !other.sizes().equals(out_shape)) return Tensor();
  const int64_t K = ws[1], N = ws[0], M = x.numel() / std::max<int64_t>(K, 1);
  // A few rows (inference on a few samples) are a stream over the weight, which ignis's own
  // small-M kernel (cpu/matmul_kernels.cpp) does with no call overhead; measured at 512 x 512,
  // oneDNN's matmul took 50 us where linear + gelu took 18 us for one row (40 vs 58 us for 4 rows,
  // 113 vs 158 us for 16): the composite runs below 8 rows.
  if (M < 8 || K == 0 || N == 0) return Tensor();
  const bool pack = packed != nullptr;
  const bool sum = other.defined();
  add_first = add_first && sum;  // without a residual the order means nothing
  const std::string key = onednn::make_key({M, K, N, b.defined(), static_cast<int64_t>(act), sum,
                                            add_first, pack, int64_t{dt == kBFloat16}});
  if (released && packed->key != key) return Tensor();  // another primitive: the plain weight
  auto prim = get_prim(key, M, K, N, b.defined(), act, sum, add_first, pack, dt);
  if (!prim->ok) return Tensor();
  // (Not through the dispatcher when already contiguous: a profiler sees the one fused op.)
  const Tensor xc = x.is_contiguous() ? x : x.contiguous();
  const Tensor oc = !other.defined() || other.is_contiguous() ? other : other.contiguous();
  Tensor out = make_tensor(out_shape, dt, kCPU);
  auto& eng = onednn::engine();
  auto& s = onednn::stream();
  std::unordered_map<int, memory> args;
  args.emplace(DNNL_ARG_SRC, memory(prim->x, eng, const_cast<void*>(xc.data_ptr())));
  if (pack && (released || prim->wi != prim->w)) {
    if (!released && (packed->key != key || !packed->packs_plain(w)))
      packed->pack(key, w, prim->w, prim->wi);
    args.emplace(DNNL_ARG_WEIGHTS, memory(prim->wi, eng, packed->weight.data_ptr()));
  } else if (prim->wi == prim->w) {
    args.emplace(DNNL_ARG_WEIGHTS, memory(prim->w, eng, const_cast<void*>(w.data_ptr())));
  } else {
    return Tensor();  // a primitive made for packed weights, called without: not cached so
  }
  if (b.defined())
    args.emplace(DNNL_ARG_BIAS, memory(prim->b, eng, const_cast<void*>(b.data_ptr())));
  args.emplace(DNNL_ARG_DST, memory(prim->y, eng, out.data_ptr()));
  if (oc.defined()) {
    args.emplace(DNNL_ARG_ATTR_MULTIPLE_POST_OP(prim->other_slot) | DNNL_ARG_SRC_1,
                 memory(prim->other, eng, const_cast<void*>(oc.data_ptr())));
  }
  prim->prim.execute(s, args);
  s.wait();
  return out;
}

}  // namespace

IGNIS_OP(linear_pointwise,
         "linear_pointwise(Tensor input, Tensor weight, Tensor? bias=None, Tensor? other=None, "
         "str activation='none', bool add_first=False) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const std::string&,
                bool),
         linear_pointwise, {.differentiable = true, .kind = "composite"});

Tensor linear_pointwise(const Tensor& x, const Tensor& w, const Tensor& b, const Tensor& other,
                        const std::string& activation, bool add_first) {
  IGNIS_DISPATCH(linear_pointwise, linear_pointwise, x, w, b, other, activation, add_first);
  const Activation act = detail::activation_named("linear_pointwise", activation);
  if (Tensor fused = linear_onednn(x, w, b, other, act, add_first, nullptr); fused.defined())
    return fused;
  return detail::apply_pointwise(linear(x, w, b), other, act, add_first);
}

namespace detail {

Tensor linear_pointwise_onednn(const Tensor& x, const Tensor& w, const Tensor& b,
                               const Tensor& other, const std::string& activation, bool add_first,
                               PackedLinearWeight* packed) {
  return linear_onednn(x, w, b, other, activation_named("linear_pointwise", activation), add_first,
                       packed);
}

}  // namespace detail

}  // namespace jit
}  // namespace ignis
