// Linear algebra with PyTorch semantics: mm, bmm, addmm, dot, outer, matmul (every rank
// combination, broadcast batch dims), linear and the fused linear_relu. Backward formulas are
// written with these same ops, so they can be differentiated again; the engine sums broadcast
// batch dims back.
#include "ops/linalg.h"

#include <cstring>

#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/unary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::save_if;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(mm_stub, GemmFn);
IGNIS_DEFINE_STUB(bmm_stub, GemmFn);
IGNIS_DEFINE_STUB(mm_epilogue_stub, GemmEpilogueFn);

IGNIS_OP(mm, "mm(Tensor self, Tensor mat2) -> Tensor", Tensor(const Tensor&, const Tensor&), mm,
         {.differentiable = true, .stubs = {&mm_stub}});
IGNIS_OP(bmm, "bmm(Tensor self, Tensor mat2) -> Tensor", Tensor(const Tensor&, const Tensor&), bmm,
         {.differentiable = true, .stubs = {&bmm_stub}});
IGNIS_OP(addmm,
         "addmm(Tensor self, Tensor mat1, Tensor mat2, *, Scalar beta=1, Scalar alpha=1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, Scalar, Scalar), addmm,
         {.differentiable = true, .stubs = {&mm_stub, &copy_stub}});
IGNIS_OP(dot, "dot(Tensor self, Tensor tensor) -> Tensor", Tensor(const Tensor&, const Tensor&),
         dot, {.differentiable = true, .stubs = {&mm_stub}});
IGNIS_OP(outer, "outer(Tensor self, Tensor vec2) -> Tensor", Tensor(const Tensor&, const Tensor&),
         outer, {.kind = "composite"});
// Mostly a composite of dot and mm; batched products run bmm_stub and record their own node.
IGNIS_OP(matmul, "matmul(Tensor self, Tensor other) -> Tensor",
         Tensor(const Tensor&, const Tensor&), matmul,
         {.differentiable = true, .stubs = {&mm_stub, &bmm_stub, &copy_stub}});
IGNIS_OP(linear, "linear(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&), linear,
         {.differentiable = true, .stubs = {&mm_stub, &copy_stub}});
IGNIS_OP(linear_relu, "linear_relu(Tensor input, Tensor weight, Tensor? bias=None) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&), linear_relu,
         {.differentiable = true, .stubs = {&mm_stub, &relu_stub, &copy_stub}});

namespace {

[[noreturn]] void fail_shapes(const char* op, const Tensor& a, const Tensor& b, int64_t ka,
                              int64_t kb) {
  IGNIS_FAIL(op, ": shapes ", a.sizes(), " and ", b.sizes(), " cannot be multiplied (", ka,
             " != ", kb, ")");
}

// Both defined, on one device, of one dtype (matrix products do not promote, as in PyTorch).
void check_pair(const char* op, const Tensor& a, const Tensor& b) {
  IGNIS_CHECK(a.defined() && b.defined(), op, ": called with an undefined tensor");
  const TensorImpl& ai = *a.impl();
  const TensorImpl& bi = *b.impl();
  IGNIS_CHECK(ai.device() == bi.device(), op,
              ": expected both tensors on the same device, but "
              "got ",
              a.device().str(), " and ", b.device().str());
  IGNIS_CHECK(ai.dtype() == bi.dtype(), op,
              ": expected both tensors to have the same dtype, but "
              "got ",
              a.dtype(), " and ", b.dtype());
  IGNIS_CHECK(ai.dtype() != kBool, op, ": not implemented for bool tensors");
}

// Whether dims [0, upto) of t can be merged into one dim (a view, no copy).
bool mergeable(const Tensor& t, int64_t upto) {
  int64_t last = -1;  // the previous dim of size > 1
  for (int64_t d = 0; d < upto; ++d) {
    if (t.size(d) == 1) continue;
    if (last >= 0 && t.stride(last) != t.stride(d) * t.size(d)) return false;
    last = d;
  }
  return true;
}

// t ([batch..., r, c]) viewed as 3-D [B, r, c] with one batch stride, or a contiguous copy when
// its batch dims cannot be merged (an operand broadcast along some batch dims only).
Tensor as_3d(const Tensor& t, int64_t nbatch) {
  const int64_t nd = t.dim();
  const int64_t r = t.size(nd - 2), c = t.size(nd - 1);
  if (mergeable(t, nd - 2)) {
    int64_t bs = 0;
    for (int64_t d = nd - 3; d >= 0; --d) {
      if (t.size(d) != 1) {
        bs = t.stride(d);
        break;
      }
    }
    return make_view(t, {nbatch, r, c}, {bs, t.stride(nd - 2), t.stride(nd - 1)},
                     t.storage_offset());
  }
  Tensor dense = make_tensor(t.sizes(), t.dtype(), t.device());
  copy_into(dense, t);
  return make_view(dense, {nbatch, r, c}, {r * c, c, 1}, 0);
}

// out = self broadcast to out's shape. A contiguous bias row (linear's) is copied row by row;
// anything else goes through the general copy.
void fill_rows(const Tensor& out, const Tensor& self) {
  const int64_t rows = out.size(0), cols = out.size(1);
  if (out.device().is_cpu() && self.is_contiguous() && self.numel() == cols && cols > 1 &&
      (self.dim() == 1 || self.size(0) == 1)) {
    const size_t row_bytes = static_cast<size_t>(cols) * out.element_size();
    const char* src = static_cast<const char*>(self.data_ptr());
    char* dst = static_cast<char*>(out.data_ptr());
    for (int64_t i = 0; i < rows; ++i) std::memcpy(dst + i * row_bytes, src, row_bytes);
    return;
  }
  copy_into(out, self);
}

// Batched product of a [..., M, K] and b [..., K, N] (both >= 2-D, batch dims broadcast).
Tensor batched_matmul(const Tensor& a, const Tensor& b, const Tensor& oa, const Tensor& ob) {
  const int64_t da = a.dim(), db = b.dim();
  const int64_t M = a.size(-2), K = a.size(-1), N = b.size(-1);
  if (K != b.size(-2)) fail_shapes("matmul", oa, ob, K, b.size(-2));
  const IntArrayRef sa = a.sizes(), sb = b.sizes();
  Shape batch;
  try {
    batch = broadcast_shapes(IntArrayRef(sa.data(), da - 2), IntArrayRef(sb.data(), db - 2));
  } catch (const Error&) {
    IGNIS_FAIL("matmul: batch dimensions of shapes ", oa.sizes(), " and ", ob.sizes(),
               " cannot be broadcast");
  }
  const int64_t nbatch = shape_numel(batch, "matmul");
  Shape ea = batch, eb = batch, eo = batch;
  ea.push_back(M);
  ea.push_back(K);
  eb.push_back(K);
  eb.push_back(N);
  eo.push_back(M);
  eo.push_back(N);
  Tensor out = make_tensor(eo, a.dtype(), a.device());
  if (out.numel() > 0) {
    NoGradGuard ng;
    Tensor a3 = as_3d(a.expand(ea), nbatch);
    Tensor b3 = as_3d(b.expand(eb), nbatch);
    Tensor o3 = make_view(out, {nbatch, M, N}, {M * N, N, 1}, 0);
    bmm_stub[a.device()](o3, a3, b3, 1, 0);
  }
  if (autograd::any_needs_grad({&a, &b})) {
    // Gradients come out with the broadcast batch shape; the engine sums them down.
    autograd::record("matmul", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = save_if(b, needs_grad(a))](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{
                           c.needs_input_grad(0) ? matmul(g[0], c.unpack(sb).mT()) : Tensor(),
                           c.needs_input_grad(1) ? matmul(c.unpack(sa).mT(), g[0]) : Tensor()};
                     });
  }
  return out;
}

// linear on x [..., in] whose leading dims merge into rows: one product out = x2 @ w^T + b with
// the bias written into out first and added by the gemm (beta = 1); with relu, the relu applied
// to out in place. One graph node whose backward writes each gradient in its final layout:
// grad_x = g @ w, grad_w = g^T @ x2 (contiguous [out, in], as the optimizers' fused kernels want
// it), grad_b = the column sums of g; with relu it first masks g with the saved output
// (threshold_backward). The node is named after the product it runs (AddmmBackward, MmBackward),
// as PyTorch's linear's is, or linear_relu.
Tensor linear_2d(const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  const char* op = relu ? "linear_relu" : "linear";
  check_pair(op, x, w);
  if (b.defined()) {
    IGNIS_CHECK(b.dtype() == x.dtype() && b.device() == x.device(), op,
                ": expected the bias to have the dtype and device of the input (", x.dtype(), ", ",
                x.device().str(), "), but got ", b.dtype(), ", ", b.device().str());
  }
  const int64_t nd = x.dim(), in = w.size(1), nout = w.size(0);
  Tensor x2 = x;
  if (nd != 2) {
    NoGradGuard ng;  // a view for the kernel only: the graph node below is recorded on x
    x2 = x.reshape({-1, in});
  }
  const int64_t rows = x2.size(0);
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(nout);
  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  if (out.numel() > 0) {
    const Tensor o2 = nd == 2 ? out : make_view(out, {rows, nout}, {nout, 1}, 0);
    const Tensor wt = make_view(w, {in, nout}, {w.stride(1), w.stride(0)}, w.storage_offset());
    // One GEMM with the bias and ReLU in its epilogue where the device has one (cuBLASLt).
    const bool fused = (!b.defined() || (b.numel() == nout && b.is_contiguous())) &&
                       mm_epilogue_stub.has_kernel(x.device().type) &&
                       mm_epilogue_stub[x.device()](o2, x2, wt, b, relu);
    if (!fused) {
      if (b.defined()) fill_rows(o2, b);
      mm_stub[x.device()](o2, x2, wt, 1, b.defined() ? 1 : 0);
      if (relu) {
        NoGradGuard ng;
        Tensor(o2).relu_();
      }
    }
  }
  if (autograd::any_needs_grad({&x, &w, &b})) {
    autograd::record(relu          ? "linear_relu"
                     : b.defined() ? "addmm"
                                   : "mm",
                     {&x, &w, &b}, {&out},
                     [sx = save_if(x, needs_grad(w)), sw = save_if(w, needs_grad(x)),
                      so = relu ? save_output(out) : SavedVariable(), nout, in,
                      relu](BackwardCtx& c, TensorList& g) mutable {
                       const Tensor g0 = relu ? fused_relu_grad(c, g, so) : g[0];
                       const Tensor g2 = g0.dim() == 2 ? g0 : g0.reshape({-1, nout});
                       Tensor gx, gw, gb;
                       if (c.needs_input_grad(0)) {
                         const Tensor wv = c.unpack(sw);
                         gx = mm(g2, wv);
                         if (g0.dim() != 2) {
                           Shape xs(g0.sizes().begin(), g0.sizes().end() - 1);
                           xs.push_back(in);
                           gx = gx.view(xs);
                         }
                       }
                       if (c.needs_input_grad(1)) {
                         const Tensor xv = c.unpack(sx);
                         gw = mm(g2.t(), xv.dim() == 2 ? xv : xv.reshape({-1, in}));
                       }
                       // The bias was broadcast over the rows (and, with one element, over the
                       // columns): the engine sums the gradient down to its shape.
                       if (c.needs_input_grad(2)) gb = g2.sum({0});
                       return TensorList{gx, gw, gb};
                     });
  }
  return out;
}

/// linear and linear_relu: the argument checks, then the one-node 2-D path when x's leading dims
/// merge into rows, else the composite of matmul, the bias and relu.
Tensor linear_impl(const Tensor& x, const Tensor& w, const Tensor& b, bool relu) {
  const char* op = relu ? "linear_relu" : "linear";
  IGNIS_CHECK(x.defined() && w.defined(), op, ": called with an undefined tensor");
  IGNIS_CHECK(w.dim() == 2, op,
              ": expected a 2-D weight [out_features, in_features], but got "
              "shape ",
              w.sizes());
  IGNIS_CHECK(x.dim() >= 1, op,
              ": expected an input of at least 1 dimension, but got a 0-D "
              "tensor");
  if (x.size(-1) != w.size(1)) {
    IGNIS_FAIL(op, ": input of shape ", x.sizes(), " and weight of shape ", w.sizes(),
               " cannot be multiplied (", x.size(-1), " != ", w.size(1), ")");
  }
  if (b.defined()) {
    IGNIS_CHECK(b.numel() == w.size(0) || b.numel() == 1, op, ": bias of shape ", b.sizes(),
                " does not match out_features = ", w.size(0));
  }
  const int64_t nd = x.dim();
  if (nd >= 2 && mergeable(x, nd - 1) && (!b.defined() || b.dim() <= 1)) {
    return linear_2d(x, w, b, relu);
  }
  Tensor r = matmul(x, w.t());
  if (b.defined()) r = r + b;
  return relu ? ignis::relu(r) : r;
}

}  // namespace

Tensor mm(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(mm, mm, a, b);
  check_pair("mm", a, b);
  const IntArrayRef sa = a.impl()->sizes(), sb = b.impl()->sizes();
  IGNIS_CHECK(sa.size() == 2 && sb.size() == 2, "mm: expected 2-D tensors, but got ", a.dim(),
              "-D and ", b.dim(), "-D tensors");
  if (sa[1] != sb[0]) fail_shapes("mm", a, b, sa[1], sb[0]);
  const Device dev = a.impl()->device();
  Tensor out = make_tensor({sa[0], sb[1]}, a.impl()->dtype(), dev);
  mm_stub[dev](out, a, b, 1, 0);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("mm", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = save_if(b, needs_grad(a))](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{
                           c.needs_input_grad(0) ? mm(g[0], c.unpack(sb).t()) : Tensor(),
                           c.needs_input_grad(1) ? mm(c.unpack(sa).t(), g[0]) : Tensor()};
                     });
  }
  return out;
}

Tensor bmm(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(bmm, bmm, a, b);
  check_pair("bmm", a, b);
  IGNIS_CHECK(a.dim() == 3 && b.dim() == 3, "bmm: expected 3-D tensors, but got ", a.dim(),
              "-D and ", b.dim(), "-D tensors");
  IGNIS_CHECK(a.size(0) == b.size(0), "bmm: expected equal batch sizes, but got shapes ", a.sizes(),
              " and ", b.sizes());
  if (a.size(2) != b.size(1)) fail_shapes("bmm", a, b, a.size(2), b.size(1));
  Tensor out = make_tensor({a.size(0), a.size(1), b.size(2)}, a.dtype(), a.device());
  bmm_stub[a.device()](out, a, b, 1, 0);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("bmm", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = save_if(b, needs_grad(a))](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{
                           c.needs_input_grad(0) ? bmm(g[0], c.unpack(sb).mT()) : Tensor(),
                           c.needs_input_grad(1) ? bmm(c.unpack(sa).mT(), g[0]) : Tensor()};
                     });
  }
  return out;
}

Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta, Scalar alpha) {
  IGNIS_DISPATCH(addmm, addmm, self, m1, m2, beta, alpha);
  check_pair("addmm", m1, m2);
  IGNIS_CHECK(self.defined(), "addmm: called with an undefined tensor");
  IGNIS_CHECK(self.dtype() == m1.dtype() && self.device() == m1.device(),
              "addmm: expected self "
              "to have the dtype and device of the matrices (",
              m1.dtype(), ", ", m1.device().str(), "), but got ", self.dtype(), ", ",
              self.device().str());
  IGNIS_CHECK(m1.dim() == 2 && m2.dim() == 2, "addmm: expected 2-D matrices, but got ", m1.dim(),
              "-D and ", m2.dim(), "-D tensors");
  if (m1.size(1) != m2.size(0)) fail_shapes("addmm", m1, m2, m1.size(1), m2.size(0));
  const Shape shape{m1.size(0), m2.size(1)};
  bool ok = self.dim() <= 2;
  for (int64_t i = 0; ok && i < self.dim(); ++i) {
    const int64_t s = self.size(self.dim() - 1 - i);
    ok = s == 1 || s == shape[1 - i];
  }
  IGNIS_CHECK(ok, "addmm: self of shape ", self.sizes(),
              " cannot be broadcast to the product's "
              "shape ",
              shape);
  const double b = beta.to_double(), al = alpha.to_double();
  Tensor out = make_tensor(shape, m1.dtype(), m1.device());
  if (b != 0) fill_rows(out, self);
  mm_stub[m1.device()](out, m1, m2, al, b);
  if (autograd::any_needs_grad({&self, &m1, &m2})) {
    autograd::record(
        "addmm", {&self, &m1, &m2}, {&out},
        [s1 = save_if(m1, needs_grad(m2)), s2 = save_if(m2, needs_grad(m1)), b, al](
            BackwardCtx& c, const TensorList& g) {
          auto scale = [](const Tensor& t, double s) { return s == 1 ? t : t * s; };
          return TensorList{
              c.needs_input_grad(0) ? scale(g[0], b) : Tensor(),
              c.needs_input_grad(1) ? scale(mm(g[0], c.unpack(s2).t()), al) : Tensor(),
              c.needs_input_grad(2) ? scale(mm(c.unpack(s1).t(), g[0]), al) : Tensor()};
        });
  }
  return out;
}

Tensor dot(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(dot, dot, a, b);
  check_pair("dot", a, b);
  IGNIS_CHECK(a.dim() == 1 && b.dim() == 1, "dot: expected 1-D tensors, but got ", a.dim(),
              "-D and ", b.dim(), "-D tensors");
  if (a.size(0) != b.size(0)) fail_shapes("dot", a, b, a.size(0), b.size(0));
  const int64_t K = a.size(0);
  Tensor out = make_tensor({}, a.dtype(), a.device());
  // [1, K] @ [K, 1] into the 0-d output's one element.
  mm_stub[a.device()](make_view(out, {1, 1}, {1, 1}, 0),
                      make_view(a, {1, K}, {K * a.stride(0), a.stride(0)}, a.storage_offset()),
                      make_view(b, {K, 1}, {b.stride(0), 1}, b.storage_offset()), 1, 0);
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("dot", {&a, &b}, {&out},
                     [sa = save_if(a, needs_grad(b)), sb = save_if(b, needs_grad(a))](
                         BackwardCtx& c, const TensorList& g) {
                       return TensorList{c.needs_input_grad(0) ? g[0] * c.unpack(sb) : Tensor(),
                                         c.needs_input_grad(1) ? g[0] * c.unpack(sa) : Tensor()};
                     });
  }
  return out;
}

Tensor outer(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(outer, outer, a, b);
  IGNIS_CHECK(a.defined() && b.defined(), "outer: called with an undefined tensor");
  IGNIS_CHECK(a.dim() == 1 && b.dim() == 1, "outer: expected 1-D tensors, but got ", a.dim(),
              "-D and ", b.dim(), "-D tensors");
  return mul(a.unsqueeze(1), b);
}

Tensor matmul(const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(matmul, matmul, a, b);
  IGNIS_CHECK(a.defined() && b.defined(), "matmul: called with an undefined tensor");
  const int64_t da = a.dim(), db = b.dim();
  IGNIS_CHECK(da >= 1 && db >= 1, "matmul: both arguments need to be at least 1-D, but they are ",
              da, "-D and ", db, "-D");
  check_pair("matmul", a, b);
  const int64_t ka = a.size(-1), kb = b.size(db >= 2 ? -2 : -1);
  if (ka != kb) fail_shapes("matmul", a, b, ka, kb);
  if (da == 1 && db == 1) return dot(a, b);
  if (da == 2 && db == 2) return mm(a, b);
  if (da == 2 && db == 1) return mm(a, b.unsqueeze(1)).squeeze(1);
  if (da == 1 && db == 2) return mm(a.unsqueeze(0), b).squeeze(0);
  if (db <= 2 && mergeable(a, da - 1)) {
    // [..., M, K] @ [K, N]: fold the batch into M, one large product.
    Shape out_shape(a.sizes().begin(), a.sizes().end() - 1);
    if (db == 2) out_shape.push_back(b.size(1));
    Tensor r = mm(a.reshape({-1, ka}), db == 2 ? b : b.unsqueeze(1));
    return r.view(out_shape);
  }
  Tensor r = batched_matmul(da == 1 ? a.unsqueeze(0) : a, db == 1 ? b.unsqueeze(1) : b, a, b);
  if (da == 1) r = r.squeeze(-2);
  if (db == 1) r = r.squeeze(-1);
  return r;
}

Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b) {
  IGNIS_DISPATCH(linear, linear, x, w, b);
  return linear_impl(x, w, b, false);
}

Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b) {
  IGNIS_DISPATCH(linear_relu, linear_relu, x, w, b);
  return linear_impl(x, w, b, true);
}

Tensor Tensor::matmul(const Tensor& o) const { return ignis::matmul(*this, o); }
Tensor Tensor::mm(const Tensor& o) const { return ignis::mm(*this, o); }
Tensor Tensor::bmm(const Tensor& o) const { return ignis::bmm(*this, o); }
Tensor Tensor::dot(const Tensor& o) const { return ignis::dot(*this, o); }
Tensor Tensor::outer(const Tensor& o) const { return ignis::outer(*this, o); }

}  // namespace ignis
