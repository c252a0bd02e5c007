// Views: ops that return a tensor sharing storage with their input (no copy), with their
// backward formulas. reshape copies only when the strides do not allow a view.
#include <algorithm>
#include <numeric>

#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/copy.h"

namespace ignis {

using autograd::BackwardCtx;

namespace {

// Marks a view of a tensor requiring grad, so in-place writes to it are refused.
void mark_view(const Tensor& base, Tensor& v) {
  if (base.requires_grad()) v.impl()->ensure_autograd().is_view = true;
}

template <class F>
Tensor finish_view(const Tensor& x, Tensor v, const char* op, F backward) {
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&v}, std::move(backward));
    mark_view(x, v);
  }
  return v;
}

// The strides of a view of x with `shape`, or nullopt when the memory layout forbids it.
std::optional<Shape> view_strides(IntArrayRef old_sizes, IntArrayRef old_strides,
                                  IntArrayRef shape) {
  Shape st(shape.size());
  if (old_sizes.empty() || shape_numel(old_sizes) == 0) return contiguous_strides(shape);
  // Walk chunks of old dims that are contiguous among themselves and match them to new dims.
  int64_t view_d = static_cast<int64_t>(shape.size()) - 1;
  int64_t chunk_base_stride = old_strides.empty() ? 1 : old_strides.back();
  int64_t tensor_numel = 1, view_numel = 1;
  for (int64_t d = static_cast<int64_t>(old_sizes.size()) - 1; d >= 0; --d) {
    tensor_numel *= old_sizes[d];
    if (d == 0 ||
        (old_sizes[d - 1] != 1 && old_strides[d - 1] != tensor_numel * chunk_base_stride)) {
      while (view_d >= 0 && (view_numel < tensor_numel || shape[view_d] == 1)) {
        st[view_d] = view_numel * chunk_base_stride;
        view_numel *= shape[view_d];
        --view_d;
      }
      if (view_numel != tensor_numel) return std::nullopt;
      if (d > 0) {
        chunk_base_stride = old_strides[d - 1];
        tensor_numel = 1;
        view_numel = 1;
      }
    }
  }
  if (view_d != -1) return std::nullopt;
  return st;
}

// Resolves a -1 in `shape` against numel; checks the element count.
Shape infer_shape(IntArrayRef shape, int64_t numel, const char* op, IntArrayRef from) {
  Shape s = shape.shape();
  int64_t infer = -1, prod = 1;
  for (size_t i = 0; i < s.size(); ++i) {
    if (s[i] == -1) {
      IGNIS_CHECK(infer < 0, op, ": only one dimension can be inferred in shape ", shape);
      infer = static_cast<int64_t>(i);
    } else {
      IGNIS_CHECK(s[i] >= 0, op, ": invalid shape dimension ", s[i], " in ", shape);
      IGNIS_CHECK(!__builtin_mul_overflow(prod, s[i], &prod), op, ": shape ", shape,
                  " has too many elements (int64 overflow)");
    }
  }
  if (infer >= 0) {
    IGNIS_CHECK(prod != 0 && numel % prod == 0, op, ": shape ", shape, " is invalid for input of ",
                "shape ", from, " (", numel, " elements)");
    s[infer] = numel / prod;
  } else {
    IGNIS_CHECK(prod == numel, op, ": shape ", shape, " is invalid for input of shape ", from, " (",
                numel, " elements)");
  }
  return s;
}

auto reshape_back(const Tensor& x) {
  return [shape = x.sizes().shape()](BackwardCtx&, const TensorList& g) {
    return TensorList{g[0].reshape(shape)};
  };
}

}  // namespace

#define VIEW_OP \
  { .differentiable = true, .kind = "view" }
#define COMPOSITE_OP \
  { .differentiable = true, .kind = "composite" }
IGNIS_OP_METHOD(view, "view(Tensor(a) self, int[] size) -> Tensor(a)", Tensor(IntArrayRef) const,
                view, VIEW_OP);
IGNIS_OP_METHOD(reshape, "reshape(Tensor(a) self, int[] shape) -> Tensor(a)",
                Tensor(IntArrayRef) const, reshape, VIEW_OP);
IGNIS_OP_METHOD(as_strided,
                "as_strided(Tensor(a) self, int[] size, int[] stride, int? storage_offset=None) "
                "-> Tensor(a)",
                Tensor(IntArrayRef, IntArrayRef, std::optional<int64_t>) const, as_strided,
                {.kind = "view"});
IGNIS_OP_METHOD(transpose_int, "transpose.int(Tensor(a) self, int dim0, int dim1) -> Tensor(a)",
                Tensor(int64_t, int64_t) const, transpose, VIEW_OP);
IGNIS_OP_METHOD(permute, "permute(Tensor(a) self, int[] dims) -> Tensor(a)",
                Tensor(IntArrayRef) const, permute, VIEW_OP);
IGNIS_OP_METHOD(t, "t(Tensor(a) self) -> Tensor(a)", Tensor() const, t, COMPOSITE_OP);
IGNIS_OP_METHOD(mT, "mT(Tensor(a) self) -> Tensor(a)", Tensor() const, mT, COMPOSITE_OP);
IGNIS_OP_METHOD(slice_Tensor,
                "slice.Tensor(Tensor(a) self, int dim, int? start=None, int? end=None, int step=1) "
                "-> Tensor(a)",
                Tensor(int64_t, std::optional<int64_t>, std::optional<int64_t>, int64_t) const,
                slice, VIEW_OP);
IGNIS_OP_METHOD(narrow, "narrow(Tensor(a) self, int dim, int start, int length) -> Tensor(a)",
                Tensor(int64_t, int64_t, int64_t) const, narrow, COMPOSITE_OP);
IGNIS_OP_METHOD(select_int, "select.int(Tensor(a) self, int dim, int index) -> Tensor(a)",
                Tensor(int64_t, int64_t) const, select, VIEW_OP);
IGNIS_OP_METHOD(expand, "expand(Tensor(a) self, int[] size) -> Tensor(a)",
                Tensor(IntArrayRef) const, expand, VIEW_OP);
IGNIS_OP(broadcast_to, "broadcast_to(Tensor(a) self, int[] size) -> Tensor(a)",
         Tensor(const Tensor&, IntArrayRef), broadcast_to, COMPOSITE_OP);
IGNIS_OP_METHOD(squeeze, "squeeze(Tensor(a) self) -> Tensor(a)", Tensor() const, squeeze,
                COMPOSITE_OP);
IGNIS_OP_METHOD(squeeze_dim, "squeeze.dim(Tensor(a) self, int dim) -> Tensor(a)",
                Tensor(int64_t) const, squeeze, COMPOSITE_OP);
IGNIS_OP_METHOD(unsqueeze, "unsqueeze(Tensor(a) self, int dim) -> Tensor(a)", Tensor(int64_t) const,
                unsqueeze, VIEW_OP);
IGNIS_OP_METHOD(flatten_using_ints,
                "flatten.using_ints(Tensor(a) self, int start_dim=0, int end_dim=-1) -> Tensor(a)",
                Tensor(int64_t, int64_t) const, flatten, COMPOSITE_OP);
IGNIS_OP_METHOD(unflatten_int, "unflatten.int(Tensor(a) self, int dim, int[] sizes) -> Tensor(a)",
                Tensor(int64_t, IntArrayRef) const, unflatten, COMPOSITE_OP);
#undef VIEW_OP
#undef COMPOSITE_OP

Tensor Tensor::view(IntArrayRef shape) const {
  IGNIS_DISPATCH_METHOD(view, view, shape);
  Shape s = infer_shape(shape, numel(), "view", sizes());
  auto st = view_strides(sizes(), strides(), s);
  IGNIS_CHECK(st.has_value(), "view: size ", shape, " is not compatible with the input's shape ",
              sizes(), " and strides ", strides(),
              " (at least one dimension spans two contiguous subspaces); use reshape instead");
  return finish_view(*this, make_view(*this, s, *st, storage_offset()), "view",
                     reshape_back(*this));
}

Tensor restride_channels_last(const Tensor& x) {
  return finish_view(
      x, make_view(x, x.sizes().shape(), channels_last_strides(x.sizes()), x.storage_offset()),
      "contiguous", [](BackwardCtx&, const TensorList& g) { return TensorList{g[0]}; });
}

Tensor Tensor::reshape(IntArrayRef shape) const {
  IGNIS_DISPATCH_METHOD(reshape, reshape, shape);
  Shape s = infer_shape(shape, numel(), "reshape", sizes());
  if (auto st = view_strides(sizes(), strides(), s)) {
    return finish_view(*this, make_view(*this, s, *st, storage_offset()), "reshape",
                       reshape_back(*this));
  }
  return contiguous().view(s);
}

Tensor Tensor::as_strided(IntArrayRef sizes_, IntArrayRef strides_,
                          std::optional<int64_t> offset) const {
  IGNIS_DISPATCH_METHOD(as_strided, as_strided, sizes_, strides_, offset);
  IGNIS_CHECK(sizes_.size() == strides_.size(), "as_strided: got ", sizes_.size(), " sizes but ",
              strides_.size(), " strides");
  IGNIS_CHECK(!autograd::any_needs_grad({this}),
              "as_strided: differentiating through "
              "as_strided is not supported; detach() the input first");
  const int64_t off = offset.value_or(storage_offset());
  int64_t max_index = off;
  for (size_t i = 0; i < sizes_.size(); ++i) {
    IGNIS_CHECK(sizes_[i] >= 0 && strides_[i] >= 0, "as_strided: negative size or stride in ",
                sizes_, " / ", strides_);
    if (sizes_[i] == 0) max_index = -1;
    if (max_index >= 0) max_index += (sizes_[i] - 1) * strides_[i];
  }
  IGNIS_CHECK(off >= 0 && (max_index < 0 || static_cast<size_t>(max_index + 1) * element_size() <=
                                                impl()->storage()->nbytes),
              "as_strided: sizes ", sizes_, " and strides ", strides_, " at offset ", off,
              " go out of bounds of the storage (", impl()->storage()->nbytes, " bytes)");
  return make_view(*this, sizes_.shape(), strides_.shape(), off);
}

Tensor Tensor::transpose(int64_t d0, int64_t d1) const {
  IGNIS_DISPATCH_METHOD(transpose_int, transpose, d0, d1);
  const int64_t n = dim();
  d0 = wrap_dim(d0, n, "transpose");
  d1 = wrap_dim(d1, n, "transpose");
  if (n == 0)
    return finish_view(*this, make_view(*this, {}, {}, storage_offset()), "transpose",
                       [](BackwardCtx&, const TensorList& g) { return g; });
  Shape s = sizes().shape(), st = strides().shape();
  std::swap(s[d0], s[d1]);
  std::swap(st[d0], st[d1]);
  return finish_view(
      *this, make_view(*this, s, st, storage_offset()), "transpose",
      [d0, d1](BackwardCtx&, const TensorList& g) { return TensorList{g[0].transpose(d0, d1)}; });
}

Tensor Tensor::permute(IntArrayRef dims) const {
  IGNIS_DISPATCH_METHOD(permute, permute, dims);
  const int64_t n = dim();
  IGNIS_CHECK(static_cast<int64_t>(dims.size()) == n, "permute: got ", dims.size(), " dims for a ",
              n, "-d tensor of shape ", sizes());
  Shape s(n), st(n), inverse(n);
  std::vector<bool> seen(n, false);
  for (int64_t i = 0; i < n; ++i) {
    int64_t d = wrap_dim(dims[i], n, "permute");
    IGNIS_CHECK(!seen[d], "permute: dim ", d, " appears twice in ", dims);
    seen[d] = true;
    s[i] = sizes()[d];
    st[i] = strides()[d];
    inverse[d] = i;
  }
  return finish_view(
      *this, make_view(*this, s, st, storage_offset()), "permute",
      [inverse](BackwardCtx&, const TensorList& g) { return TensorList{g[0].permute(inverse)}; });
}

Tensor Tensor::t() const {
  IGNIS_DISPATCH_METHOD(t, t);
  IGNIS_CHECK(dim() <= 2, "t: expects a tensor with <= 2 dimensions, but got shape ", sizes());
  return dim() < 2 ? transpose(0, 0) : transpose(0, 1);
}

Tensor Tensor::mT() const {
  IGNIS_DISPATCH_METHOD(mT, mT);
  IGNIS_CHECK(dim() >= 2, "mT: expects a tensor with >= 2 dimensions, but got shape ", sizes());
  return transpose(-2, -1);
}

/// The gradient of a slice: zeros of the input's shape with g written into the slice.
/// Differentiable (its backward slices again), so double backward works.
static Tensor slice_backward(const Tensor& g, const Shape& in_shape, int64_t dim, int64_t start,
                             int64_t end, int64_t step) {
  Tensor out = zeros(in_shape, g.options());
  {
    NoGradGuard ng;
    out.slice(dim, start, end, step).copy_(g);
  }
  if (autograd::any_needs_grad({&g})) {
    autograd::record("slice_backward", {&g}, {&out}, [=](BackwardCtx&, const TensorList& gg) {
      return TensorList{gg[0].slice(dim, start, end, step)};
    });
  }
  return out;
}

Tensor Tensor::slice(int64_t d, std::optional<int64_t> start, std::optional<int64_t> end,
                     int64_t step) const {
  IGNIS_DISPATCH_METHOD(slice_Tensor, slice, d, start, end, step);
  IGNIS_CHECK(dim() > 0, "slice: cannot slice a 0-d tensor");
  d = wrap_dim(d, dim(), "slice");
  IGNIS_CHECK(step > 0, "slice: step must be positive, got ", step);
  const int64_t n = sizes()[d];
  auto clampi = [n](int64_t v) { return std::clamp<int64_t>(v < 0 ? v + n : v, 0, n); };
  int64_t b = clampi(start.value_or(0));
  int64_t e = clampi(end.value_or(n));
  if (e < b) e = b;
  Shape s = sizes().shape(), st = strides().shape();
  s[d] = (e - b + step - 1) / step;
  st[d] *= step;
  Shape in_shape = sizes().shape();
  return finish_view(*this, make_view(*this, s, st, storage_offset() + b * strides()[d]), "slice",
                     [=](BackwardCtx&, const TensorList& g) {
                       return TensorList{slice_backward(g[0], in_shape, d, b, e, step)};
                     });
}

Tensor Tensor::narrow(int64_t d, int64_t start, int64_t length) const {
  IGNIS_DISPATCH_METHOD(narrow, narrow, d, start, length);
  IGNIS_CHECK(dim() > 0, "narrow: cannot narrow a 0-d tensor");
  d = wrap_dim(d, dim(), "narrow");
  const int64_t n = sizes()[d];
  if (start < 0) start += n;
  IGNIS_CHECK(start >= 0 && length >= 0 && start + length <= n, "narrow: start ", start,
              " + length ", length, " exceeds dimension ", d, " of size ", n);
  return slice(d, start, start + length);
}

Tensor Tensor::select(int64_t d, int64_t index) const {
  IGNIS_DISPATCH_METHOD(select_int, select, d, index);
  IGNIS_CHECK(dim() > 0, "select: cannot select from a 0-d tensor");
  d = wrap_dim(d, dim(), "select");
  const int64_t n = sizes()[d];
  IGNIS_CHECK(index >= -n && index < n, "select: index ", index, " is out of bounds for dimension ",
              d, " with size ", n);
  if (index < 0) index += n;
  Shape s = sizes().shape(), st = strides().shape();
  const int64_t off = storage_offset() + index * st[d];
  s.erase(s.begin() + d);
  st.erase(st.begin() + d);
  Shape in_shape = sizes().shape();
  return finish_view(
      *this, make_view(*this, s, st, off), "select", [=](BackwardCtx&, const TensorList& g) {
        return TensorList{slice_backward(g[0].unsqueeze(d), in_shape, d, index, index + 1, 1)};
      });
}

Tensor Tensor::expand(IntArrayRef shape) const {
  IGNIS_DISPATCH_METHOD(expand, expand, shape);
  const int64_t n = dim();
  const int64_t m = static_cast<int64_t>(shape.size());
  IGNIS_CHECK(m >= n, "expand: the number of sizes provided (", m,
              ") must be greater or equal "
              "to the number of dimensions in the tensor (",
              n, ")");
  Shape s(m), st(m);
  for (int64_t i = m - 1; i >= 0; --i) {
    const int64_t j = i - (m - n);
    const int64_t want = shape[i];
    if (j < 0) {
      IGNIS_CHECK(want >= 0, "expand: -1 is not allowed in a leading, new dimension (shape ", shape,
                  ")");
      s[i] = want;
      st[i] = 0;
      continue;
    }
    const int64_t have = sizes()[j];
    if (want == -1 || want == have) {
      s[i] = have;
      st[i] = strides()[j];
    } else {
      IGNIS_CHECK(have == 1, "expand: the expanded size of the tensor (", want,
                  ") must match "
                  "the existing size (",
                  have, ") at non-singleton dimension ", i, ". Target sizes: ", shape,
                  ". Tensor sizes: ", sizes());
      s[i] = want;
      st[i] = 0;
    }
  }
  // The engine sums the gradient back to the input's shape.
  return finish_view(*this, make_view(*this, s, st, storage_offset()), "expand",
                     [](BackwardCtx&, const TensorList& g) { return g; });
}

Tensor broadcast_to(const Tensor& x, IntArrayRef shape) {
  IGNIS_DISPATCH(broadcast_to, broadcast_to, x, shape);
  return x.expand(shape);
}

Shape broadcast_shapes(IntArrayRef a, IntArrayRef b) {
  const size_t n = std::max(a.size(), b.size());
  Shape s(n);
  for (size_t i = 0; i < n; ++i) {
    const int64_t da = i < a.size() ? a[a.size() - 1 - i] : 1;
    const int64_t db = i < b.size() ? b[b.size() - 1 - i] : 1;
    IGNIS_CHECK(da == db || da == 1 || db == 1, "broadcast_shapes: shapes ", a, " and ", b,
                " cannot be broadcast (", da, " vs ", db, " at dimension ", n - 1 - i, ")");
    s[n - 1 - i] = da == 1 ? db : da;
  }
  return s;
}

Tensor Tensor::squeeze() const {
  IGNIS_DISPATCH_METHOD(squeeze, squeeze);
  Shape s;
  for (int64_t v : sizes()) {
    if (v != 1) s.push_back(v);
  }
  return view(s);
}

Tensor Tensor::squeeze(int64_t d) const {
  IGNIS_DISPATCH_METHOD(squeeze_dim, squeeze, d);
  if (dim() == 0) return view({});
  d = wrap_dim(d, dim(), "squeeze");
  if (sizes()[d] != 1) return view(sizes());
  Shape s = sizes().shape();
  s.erase(s.begin() + d);
  return view(s);
}

Tensor Tensor::unsqueeze(int64_t d) const {
  IGNIS_DISPATCH_METHOD(unsqueeze, unsqueeze, d);
  d = wrap_dim(d, dim() + 1, "unsqueeze");
  Shape s = sizes().shape(), st = strides().shape();
  const int64_t new_stride = d < dim() ? st[d] * s[d] : 1;
  s.insert(s.begin() + d, 1);
  st.insert(st.begin() + d, new_stride);
  return finish_view(*this, make_view(*this, s, st, storage_offset()), "unsqueeze",
                     reshape_back(*this));
}

Tensor Tensor::flatten(int64_t start, int64_t end) const {
  IGNIS_DISPATCH_METHOD(flatten_using_ints, flatten, start, end);
  if (dim() == 0) return reshape({1});
  start = wrap_dim(start, dim(), "flatten");
  end = wrap_dim(end, dim(), "flatten");
  IGNIS_CHECK(start <= end, "flatten: start_dim (", start, ") cannot come after end_dim (", end,
              ")");
  Shape s;
  for (int64_t i = 0; i < start; ++i) s.push_back(sizes()[i]);
  int64_t p = 1;
  for (int64_t i = start; i <= end; ++i) p *= sizes()[i];
  s.push_back(p);
  for (int64_t i = end + 1; i < dim(); ++i) s.push_back(sizes()[i]);
  return reshape(s);
}

Tensor Tensor::unflatten(int64_t d, IntArrayRef parts) const {
  IGNIS_DISPATCH_METHOD(unflatten_int, unflatten, d, parts);
  d = wrap_dim(d, dim(), "unflatten");
  Shape inner = infer_shape(parts, sizes()[d], "unflatten", sizes());
  Shape s;
  for (int64_t i = 0; i < d; ++i) s.push_back(sizes()[i]);
  for (int64_t v : inner) s.push_back(v);
  for (int64_t i = d + 1; i < dim(); ++i) s.push_back(sizes()[i]);
  return view(s);
}

// ---- free-function forms
Tensor view(const Tensor& x, IntArrayRef s) { return x.view(s); }
Tensor reshape(const Tensor& x, IntArrayRef s) { return x.reshape(s); }
Tensor transpose(const Tensor& x, int64_t a, int64_t b) { return x.transpose(a, b); }
Tensor permute(const Tensor& x, IntArrayRef d) { return x.permute(d); }
Tensor narrow(const Tensor& x, int64_t d, int64_t s, int64_t l) { return x.narrow(d, s, l); }
Tensor slice(const Tensor& x, int64_t d, std::optional<int64_t> s, std::optional<int64_t> e,
             int64_t step) {
  return x.slice(d, s, e, step);
}
Tensor select(const Tensor& x, int64_t d, int64_t i) { return x.select(d, i); }
Tensor expand(const Tensor& x, IntArrayRef s) { return x.expand(s); }
Tensor squeeze(const Tensor& x, std::optional<int64_t> d) {
  return d ? x.squeeze(*d) : x.squeeze();
}
Tensor unsqueeze(const Tensor& x, int64_t d) { return x.unsqueeze(d); }
Tensor flatten(const Tensor& x, int64_t s, int64_t e) { return x.flatten(s, e); }
Tensor unflatten(const Tensor& x, int64_t d, IntArrayRef s) { return x.unflatten(d, s); }
Tensor as_strided(const Tensor& x, IntArrayRef s, IntArrayRef st, std::optional<int64_t> o) {
  return x.as_strided(s, st, o);
}

}  // namespace ignis
