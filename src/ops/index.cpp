// Indexing by index tensors along one dim: index_select, gather, scatter, scatter_add,
// index_add, and by masks: masked_fill, masked_select; plus nonzero and one_hot. Each op is one
// record: shape/dtype checks, the kernel call, and its backward in ignis ops.
#include "ops/index.h"

#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(index_gather_stub, IndexGatherFn);
IGNIS_DEFINE_STUB(index_put_stub, IndexPutFn);
IGNIS_DEFINE_STUB(scatter_stub, ScatterFn);
IGNIS_DEFINE_STUB(index_add_stub, IndexAddFn);
IGNIS_DEFINE_STUB(masked_fill_stub, MaskedFillFn);
IGNIS_DEFINE_STUB(masked_select_stub, MaskedSelectFn);
IGNIS_DEFINE_STUB(nonzero_stub, NonzeroFn);
IGNIS_DEFINE_STUB(one_hot_stub, OneHotFn);
IGNIS_DEFINE_STUB(int_minmax_stub, MinMaxFn);
IGNIS_DEFINE_STUB(linear_index_stub, LinearIndexFn);
IGNIS_DEFINE_STUB(iota_stub, IotaFn);

// ---- shared helpers

void check_index_dtype(const Tensor& index, const char* op) {
  IGNIS_CHECK(index.defined(), op, ": the index tensor is undefined");
  IGNIS_CHECK(index.dtype() == kInt64 || index.dtype() == kInt32, op,
              ": expected an index tensor of dtype int64 or int32, but got ", index.dtype());
}

void throw_if_bad(const BadIndex& b, const char* op, int64_t dim, int64_t size) {
  if (b.found) {
    IGNIS_FAIL(op, ": index ", b.value, " is out of bounds for dimension ", dim, " with size ",
               size);
  }
}

Tensor restride(const Tensor& t, IntArrayRef sizes, IntArrayRef strides) {
  return make_view(t, sizes.shape(), strides.shape(), t.storage_offset());
}

namespace {
// The stride of dims [b, e) of t merged into one, or nullopt when they do not merge.
std::optional<int64_t> group_stride(IntArrayRef sz, IntArrayRef st, int64_t b, int64_t e) {
  int64_t stride = 1, expect = 0;
  bool have = false;
  for (int64_t d = e - 1; d >= b; --d) {
    if (sz[d] == 0) return 0;  // no elements: any stride works
    if (sz[d] == 1) continue;
    if (have && st[d] != expect) return std::nullopt;
    if (!have) stride = st[d];
    have = true;
    expect = st[d] * sz[d];
  }
  return stride;
}

Shape shape_with(IntArrayRef s, int64_t dim, int64_t v) {
  Shape r = s.shape();
  if (!r.empty()) r[dim] = v;
  return r;
}
}  // namespace

std::optional<std::array<int64_t, 3>> collapse3(const Tensor& t, int64_t dim) {
  const int64_t nd = t.dim();
  if (nd == 0) return std::array<int64_t, 3>{0, 0, 1};
  auto o = group_stride(t.sizes(), t.strides(), 0, dim);
  auto i = group_stride(t.sizes(), t.strides(), dim + 1, nd);
  if (!o || !i) return std::nullopt;
  return std::array<int64_t, 3>{*o, t.strides()[dim], *i};
}

// ---- index_select / gather: reads through the gather kernel

namespace {
// out[p] = x[p with coordinate `dim` replaced by index(p)], where `index` is already laid out
// over out's shape (strides `index_strides`).
Tensor gather_along(const Tensor& x, int64_t dim, const Tensor& index, IntArrayRef out_shape,
                    IntArrayRef index_strides, const char* op) {
  Tensor out = make_tensor(out_shape, x.dtype(), x.device());
  const int64_t n = x.dim() == 0 ? 1 : x.sizes()[dim];
  if (out.numel() == 0) return out;
  Tensor src = restride(x, out_shape, shape_with(x.strides(), dim, 0));
  Tensor idx = restride(index, out_shape, index_strides);
  TensorIter it = TensorIter::build(out, {&src, &idx});
  const int64_t stride = x.dim() == 0 ? 0 : x.strides()[dim] * int64_t(x.element_size());
  throw_if_bad(index_gather_stub[x.device()](it, x.dtype(), index.dtype(), stride, {n}), op, dim,
               n);
  return out;
}

void check_same_device(const Tensor& a, const Tensor& b, const char* op) {
  IGNIS_CHECK(a.device() == b.device(), op, ": expected all tensors on the same device, but got ",
              a.device().str(), " and ", b.device().str());
}
}  // namespace

IGNIS_OP(index_select, "index_select(Tensor self, int dim, Tensor index) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&), index_select,
         {.differentiable = true, .stubs = {&index_gather_stub}});
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index) {
  IGNIS_DISPATCH(index_select, index_select, x, dim, index);
  check_index_dtype(index, "index_select");
  check_same_device(x, index, "index_select");
  IGNIS_CHECK(index.dim() <= 1,
              "index_select: index must be a 1-D (or 0-d) tensor, but got "
              "shape ",
              index.sizes());
  dim = wrap_dim(dim, x.dim(), "index_select");
  IGNIS_CHECK(x.dim() > 0 || index.numel() == 1,
              "index_select: a 0-d input takes exactly one "
              "index, but got ",
              index.numel());
  Shape out_shape = shape_with(x.sizes(), dim, index.numel());
  Shape ist(out_shape.size(), 0);
  if (x.dim() > 0 && index.dim() == 1) ist[dim] = index.strides()[0];
  Tensor out = gather_along(x, dim, index, out_shape, ist, "index_select");
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "index_select", {&x}, {&out},
        [si = SavedVariable(index, false), dim, shape = x.sizes().shape()](BackwardCtx& c,
                                                                           const TensorList& g) {
          return TensorList{zeros(shape, g[0].options()).index_add(dim, c.unpack(si), g[0])};
        });
  }
  return out;
}

namespace {
// The shape rules shared by gather and scatter: same rank, index no larger than self (except
// along dim, for scatter; everywhere for gather's output it is the index shape) and than src.
void check_scatter_shapes(const Tensor& self, int64_t dim, const Tensor& index, const Tensor* src,
                          const char* op) {
  IGNIS_CHECK(index.dim() == self.dim(), op,
              ": index tensor must have the same number of "
              "dimensions as the input tensor, but got index of shape ",
              index.sizes(), " and input of shape ", self.sizes());
  if (src) {
    IGNIS_CHECK(src->dim() == self.dim(), op,
                ": src tensor must have the same number of "
                "dimensions as the input tensor, but got src of shape ",
                src->sizes(), " and input of shape ", self.sizes());
  }
  for (int64_t d = 0; d < index.dim(); ++d) {
    IGNIS_CHECK(d == dim || index.sizes()[d] <= self.sizes()[d], op, ": index of shape ",
                index.sizes(), " is larger than the input of shape ", self.sizes(),
                " at dimension ", d, " (only dimension ", dim, " may differ)");
    if (src) {
      IGNIS_CHECK(index.sizes()[d] <= src->sizes()[d], op, ": index of shape ", index.sizes(),
                  " is larger than src of shape ", src->sizes(), " at dimension ", d);
    }
  }
}

// A gradient of index's shape, zero-padded at the end of each dim up to `shape` (for src tensors
// larger than the index).
Tensor pad_to(const Tensor& g, IntArrayRef shape) {
  if (g.sizes().equals(shape)) return g;
  Shape p;
  for (int64_t d = g.dim() - 1; d >= 0; --d) {
    p.push_back(0);
    p.push_back(shape[d] - g.sizes()[d]);
  }
  return pad(g, p);
}

void scatter_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                  bool accumulate, const char* op, bool check = true);
}  // namespace

IGNIS_OP(gather, "gather(Tensor self, int dim, Tensor index) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&), gather,
         {.differentiable = true, .stubs = {&index_gather_stub}});
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index) {
  IGNIS_DISPATCH(gather, gather, x, dim, index);
  check_index_dtype(index, "gather");
  check_same_device(x, index, "gather");
  dim = wrap_dim(dim, x.dim(), "gather");
  check_scatter_shapes(x, dim, index, nullptr, "gather");
  Tensor out = gather_along(x, dim, index, index.sizes(), index.strides(), "gather");
  if (autograd::any_needs_grad({&x})) {
    autograd::record("gather", {&x}, {&out},
                     [si = SavedVariable(index, false), dim, shape = x.sizes().shape()](
                         BackwardCtx& c, const TensorList& g) {
                       const Tensor index = c.unpack(si);
                       Tensor gx = zeros(shape, g[0].options());
                       // create_graph: the recorded scatter_add, differentiable again.
                       if (is_grad_enabled()) return TensorList{gx.scatter_add(dim, index, g[0])};
                       // The forward checked these indices, and the saved variable that they have
                       // not changed since: no check (on a GPU, no wait for its result).
                       scatter_into(gx, dim, index, g[0], true, "gather backward", /*check=*/false);
                       return TensorList{gx};
                     });
  }
  return out;
}

// ---- scatter / scatter_add / index_add: writes into self in place (no autograd here)

namespace {
void index_add_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    Scalar alpha, const char* op);

// When index is a vector expanded over the other dims (the message-passing idiom
// index.unsqueeze(-1).expand_as(src)) and matches self there, scatter_add is index_add.
bool scatter_add_as_index_add(const Tensor& self, int64_t dim, const Tensor& index,
                              const Tensor& src) {
  if (self.dim() == 0) return false;
  for (int64_t d = 0; d < self.dim(); ++d) {
    if (d == dim) continue;
    if (index.sizes()[d] != self.sizes()[d]) return false;
    if (index.sizes()[d] != 1 && index.strides()[d] != 0) return false;
  }
  Tensor vec = restride(index, {index.sizes()[dim]}, {index.strides()[dim]}).contiguous();
  Tensor s = restride(src, index.sizes(), src.strides());
  if (!collapse3(self, dim) || !collapse3(s, dim)) return false;
  index_add_into(self, dim, vec, s, 1, "scatter_add");
  return true;
}

// check false: the indices are known to be in range (gather's backward).
void scatter_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                  bool accumulate, const char* op, bool check) {
  if (index.numel() == 0) return;
  if (accumulate && scatter_add_as_index_add(self, dim, index, src)) return;
  const int64_t nd = self.dim();
  const Shape sizes = shape_with(index.sizes(), dim, 1);
  Tensor s = restride(self, sizes, self.strides());
  Tensor i = restride(index, sizes, index.strides());
  Tensor r = restride(src, sizes, src.strides());
  TensorIter it = TensorIter::build(s, {&i, &r});
  const int64_t es = static_cast<int64_t>(self.element_size());
  const int64_t size = nd ? self.sizes()[dim] : 1;
  ScatterArgs a;
  a.line = nd ? index.sizes()[dim] : 1;
  a.self_stride = nd ? self.strides()[dim] * es : 0;
  a.index_stride = nd ? index.strides()[dim] * int64_t(index.element_size()) : 0;
  a.src_stride = nd ? src.strides()[dim] * es : 0;
  a.bounds = {size, false, check};
  a.accumulate = accumulate;
  throw_if_bad(scatter_stub[self.device()](it, self.dtype(), index.dtype(), a), op, dim, size);
}

void check_scatter(const Tensor& self, int64_t& dim, const Tensor& index, const Tensor& src,
                   const char* op) {
  check_index_dtype(index, op);
  check_same_device(self, index, op);
  check_same_device(self, src, op);
  dim = wrap_dim(dim, self.dim(), op);
  IGNIS_CHECK(self.dtype() == src.dtype(), op,
              ": expected self and src to have the same dtype, "
              "but got ",
              self.dtype(), " and ", src.dtype());
  check_scatter_shapes(self, dim, index, &src, op);
}

void index_add_into(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& source,
                    Scalar alpha, const char* op) {
  Tensor src = collapse3(source, dim) ? source : source.contiguous();
  if (!collapse3(self, dim)) {  // an odd layout: work on a dense copy
    Tensor tmp = self.contiguous();
    index_add_into(tmp, dim, index, src, alpha, op);
    copy_into(self, tmp);
    return;
  }
  const int64_t size = self.dim() ? self.sizes()[dim] : 1;
  throw_if_bad(index_add_stub[self.device()](self, dim, index, src, alpha), op, dim, size);
}

// Checks index_add's arguments; returns the index as a contiguous 1-D tensor.
Tensor check_index_add(const Tensor& self, int64_t& dim, const Tensor& index, const Tensor& source,
                       const char* op) {
  check_index_dtype(index, op);
  check_same_device(self, index, op);
  check_same_device(self, source, op);
  IGNIS_CHECK(index.dim() <= 1, op, ": index must be a 1-D (or 0-d) tensor, but got shape ",
              index.sizes());
  dim = wrap_dim(dim, self.dim(), op);
  IGNIS_CHECK(self.dtype() == source.dtype(), op,
              ": expected self and source to have the same "
              "dtype, but got ",
              self.dtype(), " and ", source.dtype());
  const int64_t n = index.numel();
  if (self.dim() == 0) {
    IGNIS_CHECK(source.numel() == 1 && n == 1 && source.dim() <= 1, op,
                ": a 0-d input takes one index and one source element, but got index of shape ",
                index.sizes(), " and source of shape ", source.sizes());
  } else {
    const int64_t sdim = source.dim() == 0 ? 1 : source.dim();
    bool ok = sdim == self.dim();
    for (int64_t d = 0; ok && d < self.dim(); ++d) {
      const int64_t s = source.dim() == 0 ? 1 : source.sizes()[d];
      ok = d == dim ? s == n : s == self.sizes()[d];
    }
    IGNIS_CHECK(ok, op, ": source of shape ", source.sizes(), " does not match self of shape ",
                self.sizes(), " with ", n, " indices along dimension ", dim,
                " (expected source shape ", shape_with(self.sizes(), dim, n), ")");
  }
  return index.reshape({n}).contiguous();
}
}  // namespace

#define SCATTER_OP                                     \
  {                                                    \
    .differentiable = true, .stubs = { &scatter_stub } \
  }
#define SCATTER_ADD_OP                                                              \
  {                                                                                 \
    .differentiable = true, .stubs = { &scatter_stub, &index_add_stub, &copy_stub } \
  }
#define INDEX_ADD_OP                                                 \
  {                                                                  \
    .differentiable = true, .stubs = { &index_add_stub, &copy_stub } \
  }
IGNIS_OP(scatter_src, "scatter.src(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&), scatter, SCATTER_OP);
IGNIS_OP(scatter_add, "scatter_add(Tensor self, int dim, Tensor index, Tensor src) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&), scatter_add, SCATTER_ADD_OP);
IGNIS_OP(
    index_add,
    "index_add(Tensor self, int dim, Tensor index, Tensor source, *, Scalar alpha=1) -> Tensor",
    Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, Scalar), index_add, INDEX_ADD_OP);
IGNIS_OP_METHOD(scatter__src,
                "scatter_.src(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)",
                Tensor&(int64_t, const Tensor&, const Tensor&) const, scatter_, SCATTER_OP);
IGNIS_OP_METHOD(scatter_add_,
                "scatter_add_(Tensor(a!) self, int dim, Tensor index, Tensor src) -> Tensor(a!)",
                Tensor&(int64_t, const Tensor&, const Tensor&) const, scatter_add_, SCATTER_ADD_OP);
IGNIS_OP_METHOD(index_add_,
                "index_add_(Tensor(a!) self, int dim, Tensor index, Tensor source, *, "
                "Scalar alpha=1) -> Tensor(a!)",
                Tensor&(int64_t, const Tensor&, const Tensor&, Scalar) const, index_add_,
                INDEX_ADD_OP);
#undef SCATTER_OP
#undef SCATTER_ADD_OP
#undef INDEX_ADD_OP

Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  IGNIS_DISPATCH(scatter_src, scatter, x, dim, index, src);
  check_scatter(x, dim, index, src, "scatter");
  Tensor out;
  {
    NoGradGuard ng;
    out = x.clone();
  }
  scatter_into(out, dim, index, src, false, "scatter");
  if (autograd::any_needs_grad({&x, &src})) {
    autograd::record("scatter", {&x, &src}, {&out},
                     [si = SavedVariable(index, false), dim, src_shape = src.sizes().shape()](
                         BackwardCtx& c, const TensorList& g) {
                       Tensor idx = c.unpack(si);
                       Tensor gx, gs;
                       if (c.needs_input_grad(0)) {
                         gx = g[0].scatter(dim, idx, zeros(idx.sizes(), g[0].options()));
                       }
                       if (c.needs_input_grad(1)) gs = pad_to(g[0].gather(dim, idx), src_shape);
                       return TensorList{gx, gs};
                     });
  }
  return out;
}

Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src) {
  IGNIS_DISPATCH(scatter_add, scatter_add, x, dim, index, src);
  check_scatter(x, dim, index, src, "scatter_add");
  Tensor out;
  {
    NoGradGuard ng;
    out = x.clone();
  }
  scatter_into(out, dim, index, src, true, "scatter_add");
  if (autograd::any_needs_grad({&x, &src})) {
    autograd::record("scatter_add", {&x, &src}, {&out},
                     [si = SavedVariable(index, false), dim, src_shape = src.sizes().shape()](
                         BackwardCtx& c, const TensorList& g) {
                       Tensor gs;
                       if (c.needs_input_grad(1)) {
                         gs = pad_to(g[0].gather(dim, c.unpack(si)), src_shape);
                       }
                       return TensorList{g[0], gs};
                     });
  }
  return out;
}

Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha) {
  IGNIS_DISPATCH(index_add, index_add, x, dim, index, source, alpha);
  Tensor idx = check_index_add(x, dim, index, source, "index_add");
  Tensor out;
  {
    NoGradGuard ng;
    out = x.clone();
  }
  index_add_into(out, dim, idx, source, alpha, "index_add");
  if (autograd::any_needs_grad({&x, &source})) {
    autograd::record("index_add", {&x, &source}, {&out},
                     [si = SavedVariable(idx, false), dim, alpha, sshape = source.sizes().shape()](
                         BackwardCtx& c, const TensorList& g) {
                       Tensor gs;
                       if (c.needs_input_grad(1)) {
                         gs = g[0].index_select(dim, c.unpack(si));
                         if (alpha.to_double() != 1) gs = gs * alpha;
                         gs = gs.reshape(sshape);
                       }
                       return TensorList{g[0], gs};
                     });
  }
  return out;
}

Tensor& Tensor::scatter_(int64_t dim, const Tensor& index, const Tensor& src) const {
  IGNIS_DISPATCH_METHOD(scatter__src, scatter_, dim, index, src);
  if (autograd::any_needs_grad({this, &src})) {
    check_inplace(mut(), "scatter_");
    return inplace_from(mut(), ignis::scatter(mut(), dim, index, src), "scatter_");
  }
  check_scatter(mut(), dim, index, src, "scatter_");
  scatter_into(mut(), dim, index, src, false, "scatter_");
  impl()->bump_version();
  return mut();
}

Tensor& Tensor::scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const {
  IGNIS_DISPATCH_METHOD(scatter_add_, scatter_add_, dim, index, src);
  if (autograd::any_needs_grad({this, &src})) {
    check_inplace(mut(), "scatter_add_");
    return inplace_from(mut(), ignis::scatter_add(mut(), dim, index, src), "scatter_add_");
  }
  check_scatter(mut(), dim, index, src, "scatter_add_");
  scatter_into(mut(), dim, index, src, true, "scatter_add_");
  impl()->bump_version();
  return mut();
}

Tensor& Tensor::index_add_(int64_t dim, const Tensor& index, const Tensor& source,
                           Scalar alpha) const {
  IGNIS_DISPATCH_METHOD(index_add_, index_add_, dim, index, source, alpha);
  if (autograd::any_needs_grad({this, &source})) {
    check_inplace(mut(), "index_add_");
    return inplace_from(mut(), ignis::index_add(mut(), dim, index, source, alpha), "index_add_");
  }
  Tensor idx = check_index_add(mut(), dim, index, source, "index_add_");
  index_add_into(mut(), dim, idx, source, alpha, "index_add_");
  impl()->bump_version();
  return mut();
}

// ---- masks

namespace {
Tensor check_mask(const Tensor& mask, const Tensor& x, const char* op) {
  IGNIS_CHECK(mask.defined(), op, ": the mask is undefined");
  IGNIS_CHECK(mask.dtype() == kBool || mask.dtype() == kUInt8, op,
              ": expected a mask of dtype bool (or uint8), but got ", mask.dtype());
  check_same_device(x, mask, op);
  return mask.dtype() == kBool ? mask : mask.to(kBool);
}

Shape mask_shape(const Tensor& x, const Tensor& mask, const char* op) {
  if (x.sizes().equals(mask.sizes())) return x.sizes().shape();
  try {
    return broadcast_shapes(x.sizes(), mask.sizes());
  } catch (const Error&) {
    IGNIS_FAIL(op, ": the mask of shape ", mask.sizes(),
               " cannot be broadcast with the input of "
               "shape ",
               x.sizes());
  }
}
}  // namespace

IGNIS_OP(masked_fill_Scalar, "masked_fill.Scalar(Tensor self, Tensor mask, Scalar value) -> Tensor",
         Tensor(const Tensor&, const Tensor&, Scalar), masked_fill,
         {.differentiable = true, .stubs = {&masked_fill_stub}});
IGNIS_OP_METHOD(masked_fill__Scalar,
                "masked_fill_.Scalar(Tensor(a!) self, Tensor mask, Scalar value) -> Tensor(a!)",
                Tensor&(const Tensor&, Scalar) const, masked_fill_,
                {.differentiable = true, .stubs = {&masked_fill_stub}});
IGNIS_OP(masked_select, "masked_select(Tensor self, Tensor mask) -> Tensor",
         Tensor(const Tensor&, const Tensor&), masked_select,
         {.differentiable = true, .stubs = {&masked_select_stub}});
IGNIS_OP(nonzero, "nonzero(Tensor self) -> Tensor", Tensor(const Tensor&), nonzero,
         {.stubs = {&nonzero_stub}});
IGNIS_OP(one_hot, "one_hot(Tensor self, int num_classes=-1) -> Tensor",
         Tensor(const Tensor&, int64_t), one_hot, {.stubs = {&int_minmax_stub, &one_hot_stub}});

Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value) {
  IGNIS_DISPATCH(masked_fill_Scalar, masked_fill, x, mask, value);
  Tensor m = check_mask(mask, x, "masked_fill");
  Tensor out = make_tensor(mask_shape(x, m, "masked_fill"), x.dtype(), x.device());
  TensorIter it = TensorIter::build(out, {&x, &m});
  if (out.numel()) masked_fill_stub[x.device()](it, x.dtype(), value);
  if (autograd::any_needs_grad({&x})) {
    autograd::record("masked_fill", {&x}, {&out},
                     [sm = SavedVariable(m, false)](BackwardCtx& c, const TensorList& g) {
                       return TensorList{g[0].masked_fill(c.unpack(sm), 0)};
                     });
  }
  return out;
}

Tensor& Tensor::masked_fill_(const Tensor& mask, Scalar value) const {
  IGNIS_DISPATCH_METHOD(masked_fill__Scalar, masked_fill_, mask, value);
  Tensor m = check_mask(mask, mut(), "masked_fill_");
  IGNIS_CHECK(IntArrayRef(mask_shape(mut(), m, "masked_fill_")).equals(sizes()),
              "masked_fill_: the mask of shape ", mask.sizes(),
              " cannot be broadcast to the "
              "input's shape ",
              sizes());
  if (autograd::any_needs_grad({this})) {
    check_inplace(mut(), "masked_fill_");
    return inplace_from(mut(), ignis::masked_fill(mut(), m, value), "masked_fill_");
  }
  check_inplace(mut(), "masked_fill_");
  TensorIter it = TensorIter::build(mut(), {this, &m});
  if (numel()) masked_fill_stub[device()](it, dtype(), value);
  impl()->bump_version();
  return mut();
}

Tensor masked_select(const Tensor& x, const Tensor& mask) {
  IGNIS_DISPATCH(masked_select, masked_select, x, mask);
  Tensor m = check_mask(mask, x, "masked_select");
  const Shape shape = mask_shape(x, m, "masked_select");
  Tensor xb, mb;
  {
    NoGradGuard ng;
    xb = x.expand(shape).contiguous();
    mb = m.expand(shape).contiguous();
  }
  Tensor out = masked_select_stub[x.device()](xb, mb);
  if (autograd::any_needs_grad({&x})) {
    autograd::record(
        "masked_select", {&x}, {&out},
        [sm = SavedVariable(mb, false)](BackwardCtx& c, const TensorList& g) {
          // Scatter g back to the selected positions (index_add into zeros, so
          // that double backward is index_select again).
          Tensor mask = c.unpack(sm);
          Tensor pos = nonzero(mask.reshape({-1})).reshape({-1});
          return TensorList{
              zeros({mask.numel()}, g[0].options()).index_add(0, pos, g[0]).reshape(mask.sizes())};
        });
  }
  return out;
}

Tensor nonzero(const Tensor& x) {
  IGNIS_DISPATCH(nonzero, nonzero, x);
  Tensor xc = x.contiguous();
  return nonzero_stub[x.device()](xc);
}

Tensor one_hot(const Tensor& index, int64_t num_classes) {
  IGNIS_DISPATCH(one_hot, one_hot, index, num_classes);
  check_index_dtype(index, "one_hot");
  IGNIS_CHECK(num_classes >= -1,
              "one_hot: num_classes must be -1 (infer) or non-negative, but "
              "got ",
              num_classes);
  Tensor idx = index.contiguous();
  if (num_classes == -1) {
    IGNIS_CHECK(idx.numel() > 0,
                "one_hot: cannot infer the number of classes from an empty "
                "tensor; pass num_classes");
    auto [lo, hi] = int_minmax_stub[idx.device()](idx);
    IGNIS_CHECK(lo >= 0, "one_hot: class values must be non-negative, but got ", lo);
    num_classes = hi + 1;
  }
  Shape shape = index.sizes().shape();
  shape.push_back(num_classes);
  Tensor out = zeros(shape, TensorOptions(kInt64).device(index.device()));
  if (idx.numel() == 0) return out;
  BadIndex b = one_hot_stub[idx.device()](out, idx, num_classes);
  if (b.found) {
    IGNIS_CHECK(b.value >= 0, "one_hot: class values must be non-negative, but got ", b.value);
    IGNIS_FAIL("one_hot: class value ", b.value, " is out of range for num_classes ", num_classes,
               " (values must be in [0, ", num_classes, "))");
  }
  return out;
}

// ---- Tensor methods
Tensor Tensor::index_select(int64_t dim, const Tensor& index) const {
  return ignis::index_select(*this, dim, index);
}
Tensor Tensor::gather(int64_t dim, const Tensor& index) const {
  return ignis::gather(*this, dim, index);
}
Tensor Tensor::scatter(int64_t dim, const Tensor& index, const Tensor& src) const {
  return ignis::scatter(*this, dim, index, src);
}
Tensor Tensor::scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const {
  return ignis::scatter_add(*this, dim, index, src);
}
Tensor Tensor::index_add(int64_t dim, const Tensor& index, const Tensor& source,
                         Scalar alpha) const {
  return ignis::index_add(*this, dim, index, source, alpha);
}
Tensor Tensor::masked_fill(const Tensor& mask, Scalar value) const {
  return ignis::masked_fill(*this, mask, value);
}
Tensor Tensor::masked_select(const Tensor& mask) const { return ignis::masked_select(*this, mask); }

}  // namespace ignis
