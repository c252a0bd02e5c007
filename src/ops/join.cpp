// Joining and rearranging: cat, stack, split, chunk, repeat, tril/triu, flip. split and chunk
// return views (narrow); stack and repeat are compositions of views and cat / a copy.
#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/copy.h"
#include "ops/elementwise.h"
#include "ops/index.h"

namespace ignis {

using autograd::BackwardCtx;

IGNIS_DEFINE_STUB(cat_stub, CatFn);
IGNIS_DEFINE_STUB(flip_stub, FlipFn);
IGNIS_DEFINE_STUB(tri_stub, TriFn);

namespace {
// PyTorch keeps accepting 1-D empty tensors in cat whatever the other shapes are.
bool legacy_empty(const Tensor& t) { return t.dim() == 1 && t.numel() == 0; }
}  // namespace

IGNIS_OP(cat, "cat(Tensor[] tensors, int dim=0) -> Tensor",
         Tensor(const std::vector<Tensor>&, int64_t), cat,
         {.differentiable = true, .stubs = {&cat_stub, &copy_stub}});
IGNIS_OP(stack, "stack(Tensor[] tensors, int dim=0) -> Tensor",
         Tensor(const std::vector<Tensor>&, int64_t), stack,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(split_Tensor, "split.Tensor(Tensor(a) self, int split_size, int dim=0) -> Tensor[]",
         std::vector<Tensor>(const Tensor&, int64_t, int64_t), split,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(split_sizes, "split.sizes(Tensor(a) self, int[] split_size, int dim=0) -> Tensor[]",
         std::vector<Tensor>(const Tensor&, const std::vector<int64_t>&, int64_t), split,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(chunk, "chunk(Tensor(a) self, int chunks, int dim=0) -> Tensor[]",
         std::vector<Tensor>(const Tensor&, int64_t, int64_t), chunk,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(repeat, "repeat(Tensor self, int[] repeats) -> Tensor", Tensor(const Tensor&, IntArrayRef),
         repeat, {.differentiable = true, .kind = "composite"});
IGNIS_OP(tril, "tril(Tensor self, int diagonal=0) -> Tensor", Tensor(const Tensor&, int64_t), tril,
         {.differentiable = true, .stubs = {&tri_stub}});
IGNIS_OP(triu, "triu(Tensor self, int diagonal=0) -> Tensor", Tensor(const Tensor&, int64_t), triu,
         {.differentiable = true, .stubs = {&tri_stub}});
IGNIS_OP(flip, "flip(Tensor self, int[] dims) -> Tensor", Tensor(const Tensor&, IntArrayRef), flip,
         {.differentiable = true, .stubs = {&flip_stub}});

Tensor cat(const std::vector<Tensor>& tensors, int64_t dim) {
  IGNIS_DISPATCH(cat, cat, tensors, dim);
  IGNIS_CHECK(!tensors.empty(), "cat: expected a non-empty list of tensors");
  const Tensor* ref = nullptr;
  size_t ref_i = 0;
  DType dt = tensors[0].defined() ? tensors[0].dtype() : kFloat32;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    IGNIS_CHECK(t.defined(), "cat: tensor ", i, " is undefined");
    IGNIS_CHECK(t.device() == tensors[0].device(),
                "cat: expected all tensors on the same device, "
                "but got ",
                tensors[0].device().str(), " and ", t.device().str(), " (tensor ", i, ")");
    dt = promote_types(dt, t.dtype());
    if (!ref && !legacy_empty(t)) {
      ref = &t;
      ref_i = i;
    }
  }
  if (ref == nullptr) ref = &tensors[0];  // only 1-D empty tensors: the result is one too
  IGNIS_CHECK(ref->dim() > 0, "cat: zero-dimensional tensor (at position ", ref_i,
              ") cannot be concatenated");
  const int64_t nd = ref->dim();
  dim = wrap_dim(dim, nd, "cat");
  auto skipped = [nd](const Tensor& t) { return nd != 1 && legacy_empty(t); };
  Shape shape = ref->sizes().shape();
  shape[dim] = 0;
  std::vector<int64_t> offsets(tensors.size(), 0);
  bool all_fast = true, grad = false;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const Tensor& t = tensors[i];
    grad = grad || needs_grad(t);
    offsets[i] = shape[dim];
    if (skipped(t)) continue;
    IGNIS_CHECK(t.dim() > 0, "cat: zero-dimensional tensor (at position ", i,
                ") cannot be concatenated");
    IGNIS_CHECK(t.dim() == nd, "cat: tensors must have the same number of dimensions: got ", nd,
                " and ", t.dim(), " (tensor ", ref_i, " of shape ", ref->sizes(), " and tensor ", i,
                " of shape ", t.sizes(), ")");
    for (int64_t d = 0; d < nd; ++d) {
      IGNIS_CHECK(d == dim || t.sizes()[d] == shape[d],
                  "cat: sizes of tensors must match except "
                  "in dimension ",
                  dim, ": expected size ", shape[d], " but got size ", t.sizes()[d],
                  " in dimension ", d, " for tensor ", i, " (shapes ", ref->sizes(), " and ",
                  t.sizes(), ")");
    }
    shape[dim] += t.sizes()[dim];
    all_fast = all_fast && t.is_contiguous() && t.dtype() == dt;
  }
  Tensor out = make_tensor(shape, dt, ref->device());
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) {
    if (!skipped(t) && t.numel() > 0) parts.push_back(t);
  }
  if (out.numel() > 0) {
    if (all_fast) {
      cat_stub[out.device()](out, parts, dim);
    } else {
      int64_t off = 0;
      for (const Tensor& t : parts) {
        copy_into(out.narrow(dim, off, t.sizes()[dim]), t);
        off += t.sizes()[dim];
      }
    }
  }
  if (grad) {
    std::vector<int64_t> lens(tensors.size(), 0);
    std::vector<bool> use(tensors.size());
    for (size_t i = 0; i < tensors.size(); ++i) {
      use[i] = !skipped(tensors[i]);
      lens[i] = use[i] ? tensors[i].sizes()[dim] : 0;
    }
    auto fn = [dim, offsets, lens, use](BackwardCtx& c, const TensorList& g) {
      TensorList r(offsets.size());
      for (size_t i = 0; i < r.size(); ++i) {
        if (c.needs_input_grad(i) && use[i]) r[i] = g[0].narrow(dim, offsets[i], lens[i]);
      }
      return r;
    };
    auto node = std::make_shared<autograd::LambdaNode<decltype(fn)>>("cat", std::move(fn));
    TensorList outs{out};
    autograd::connect(node, tensors, outs);
  }
  return out;
}

Tensor stack(const std::vector<Tensor>& tensors, int64_t dim) {
  IGNIS_DISPATCH(stack, stack, tensors, dim);
  IGNIS_CHECK(!tensors.empty(), "stack: expected a non-empty list of tensors");
  for (size_t i = 0; i < tensors.size(); ++i) {
    IGNIS_CHECK(tensors[i].defined(), "stack: tensor ", i, " is undefined");
    IGNIS_CHECK(tensors[i].sizes().equals(tensors[0].sizes()),
                "stack: expects each tensor to be "
                "of equal size, but got ",
                tensors[0].sizes(), " at entry 0 and ", tensors[i].sizes(), " at entry ", i);
  }
  dim = wrap_dim(dim, tensors[0].dim() + 1, "stack");
  std::vector<Tensor> parts;
  parts.reserve(tensors.size());
  for (const Tensor& t : tensors) parts.push_back(t.unsqueeze(dim));
  return cat(parts, dim);
}

std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim) {
  IGNIS_DISPATCH(split_Tensor, split, x, split_size, dim);
  IGNIS_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[dim];
  IGNIS_CHECK(split_size > 0 || (split_size == 0 && n == 0),
              "split: split_size must be "
              "positive, but got ",
              split_size, " (dimension ", dim, " has size ", n, ")");
  if (n == 0) return {x.narrow(dim, 0, 0)};
  std::vector<Tensor> out;
  for (int64_t s = 0; s < n; s += split_size)
    out.push_back(x.narrow(dim, s, std::min(split_size, n - s)));
  return out;
}

std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim) {
  IGNIS_DISPATCH(split_sizes, split, x, sizes, dim);
  IGNIS_CHECK(x.dim() > 0, "split: cannot split a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "split");
  const int64_t n = x.sizes()[dim];
  int64_t total = 0;
  for (int64_t s : sizes) {
    IGNIS_CHECK(s >= 0, "split: split sizes must be non-negative, but got ", IntArrayRef(sizes));
    total += s;
  }
  IGNIS_CHECK(total == n, "split: split sizes ", IntArrayRef(sizes), " do not sum to ", n,
              ", the size of dimension ", dim, " of the input of shape ", x.sizes());
  std::vector<Tensor> out;
  int64_t off = 0;
  for (int64_t s : sizes) {
    out.push_back(x.narrow(dim, off, s));
    off += s;
  }
  return out;
}

std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim) {
  IGNIS_DISPATCH(chunk, chunk, x, chunks, dim);
  IGNIS_CHECK(chunks > 0, "chunk: number of chunks must be positive, but got ", chunks);
  IGNIS_CHECK(x.dim() > 0, "chunk: cannot chunk a 0-d tensor");
  dim = wrap_dim(dim, x.dim(), "chunk");
  const int64_t n = x.sizes()[dim];
  return split(x, (n + chunks - 1) / chunks, dim);
}

Tensor repeat(const Tensor& x, IntArrayRef repeats) {
  IGNIS_DISPATCH(repeat, repeat, x, repeats);
  const auto m = static_cast<int64_t>(repeats.size());
  IGNIS_CHECK(m >= x.dim(), "repeat: number of repeat dims (", m,
              ") can not be smaller than the "
              "number of dimensions of the tensor (",
              x.dim(), ", shape ", x.sizes(), ")");
  Shape view_shape, exp_shape, out_shape;
  for (int64_t i = 0; i < m; ++i) {
    IGNIS_CHECK(repeats[i] >= 0, "repeat: repeats must be non-negative, but got ", repeats);
    const int64_t s = i < m - x.dim() ? 1 : x.sizes()[i - (m - x.dim())];
    view_shape.push_back(1);
    view_shape.push_back(s);
    exp_shape.push_back(repeats[i]);
    exp_shape.push_back(s);
    out_shape.push_back(repeats[i] * s);
  }
  // The expanded view of x copied out: the engine sums the gradient over the repeat blocks.
  Tensor out = x.reshape(view_shape).expand(exp_shape).reshape(out_shape);
  if (out.impl()->storage() == x.impl()->storage()) out = out.clone();
  return out;
}

namespace {
Tensor tri(const Tensor& x, int64_t k, bool lower, const char* op) {
  IGNIS_CHECK(x.dim() >= 2, op, ": expected a tensor with at least 2 dimensions, but got shape ",
              x.sizes());
  Tensor xc;
  {
    NoGradGuard ng;
    xc = x.contiguous();
  }
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  if (out.numel()) tri_stub[x.device()](out, xc, k, lower);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out}, [k, lower](BackwardCtx&, const TensorList& g) {
      return TensorList{lower ? g[0].tril(k) : g[0].triu(k)};
    });
  }
  return out;
}
}  // namespace

Tensor tril(const Tensor& x, int64_t diagonal) {
  IGNIS_DISPATCH(tril, tril, x, diagonal);
  return tri(x, diagonal, true, "tril");
}
Tensor triu(const Tensor& x, int64_t diagonal) {
  IGNIS_DISPATCH(triu, triu, x, diagonal);
  return tri(x, diagonal, false, "triu");
}

Tensor flip(const Tensor& x, IntArrayRef dims) {
  IGNIS_DISPATCH(flip, flip, x, dims);
  const int64_t nd = x.dim();
  std::vector<bool> f(static_cast<size_t>(nd), false);
  for (int64_t d : dims) {
    const int64_t w = wrap_dim(d, nd, "flip");
    if (nd == 0) continue;
    IGNIS_CHECK(!f[w], "flip: dim ", w, " appears multiple times in the list of dims ", dims);
    f[w] = true;
  }
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device());
  flip_stub[x.device()](out, x, f);
  if (autograd::any_needs_grad({&x})) {
    autograd::record("flip", {&x}, {&out}, [d = dims.vec()](BackwardCtx&, const TensorList& g) {
      return TensorList{g[0].flip(d)};
    });
  }
  return out;
}

// ---- Tensor methods
Tensor Tensor::repeat(IntArrayRef repeats) const { return ignis::repeat(*this, repeats); }
Tensor Tensor::flip(IntArrayRef dims) const { return ignis::flip(*this, dims); }
Tensor Tensor::tril(int64_t diagonal) const { return ignis::tril(*this, diagonal); }
Tensor Tensor::triu(int64_t diagonal) const { return ignis::triu(*this, diagonal); }
std::vector<Tensor> Tensor::split(int64_t split_size, int64_t dim) const {
  return ignis::split(*this, split_size, dim);
}
std::vector<Tensor> Tensor::chunk(int64_t chunks, int64_t dim) const {
  return ignis::chunk(*this, chunks, dim);
}

}  // namespace ignis
