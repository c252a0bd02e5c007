// Tensor::index and Tensor::index_put_: NumPy/PyTorch indexing. Integers, slices, None and
// Ellipsis make a view (basic indexing, differentiable through the view ops); integer and mask
// tensors then gather a copy (advanced indexing). Several index tensors broadcast together; their
// result dims replace the indexed dims in place when those are adjacent, else they go first.
#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/elementwise.h"
#include "ops/index.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

namespace {

// ---- basic indexing

struct Parsed {
  Tensor view;                                  // self after basic indexing
  std::vector<std::pair<int64_t, Tensor>> adv;  // (dim of view, integer index tensor)
};

Tensor bool_index(bool b, Device device) {
  // x[True] adds a dim of size 1 indexed by [0]; x[False] one indexed by [] (size 0).
  Tensor t = make_tensor({b ? 1 : 0}, kInt64, device);
  if (b) t.zero_();
  return t;
}

Parsed apply_basic(const Tensor& self, const std::vector<TensorIndex>& indices, const char* op) {
  using K = TensorIndex::Kind;
  int64_t consumed = 0, ellipses = 0;
  for (const TensorIndex& ix : indices) {
    switch (ix.kind()) {
      case K::Integer:
      case K::Slice: ++consumed; break;
      case K::Ellipsis: ++ellipses; break;
      case K::Tensor: {
        const Tensor& t = ix.tensor();
        IGNIS_CHECK(t.defined(), op, ": an index tensor is undefined");
        const DType dt = t.dtype();
        IGNIS_CHECK(dt == kInt64 || dt == kInt32 || dt == kBool || dt == kUInt8, op,
                    ": tensors used as indices must be int64, int32, bool or uint8, but got ", dt);
        consumed += (dt == kBool || dt == kUInt8) ? t.dim() : 1;
        break;
      }
      default: break;
    }
  }
  IGNIS_CHECK(ellipses <= 1, op, ": an index can only have a single ellipsis (...)");
  IGNIS_CHECK(consumed <= self.dim(), op, ": too many indices for a tensor of dimension ",
              self.dim(), " (got ", consumed, ")");
  Parsed p;
  Tensor v = self;
  int64_t dim = 0;
  for (size_t pos = 0; pos < indices.size(); ++pos) {
    const TensorIndex& ix = indices[pos];
    switch (ix.kind()) {
      case K::Integer: {
        const int64_t n = v.sizes()[dim], i = ix.integer();
        IGNIS_CHECK(i >= -n && i < n, op, ": index ", i, " is out of bounds for dimension ", dim,
                    " with size ", n);
        v = v.select(dim, i);
        break;
      }
      case K::Slice: {
        const Slice& s = ix.slice();
        IGNIS_CHECK(s.step > 0, op, ": slice step must be positive, but got ", s.step);
        v = v.slice(dim, s.start, s.stop, s.step);
        ++dim;
        break;
      }
      case K::None: v = v.unsqueeze(dim++); break;
      case K::Ellipsis: dim += self.dim() - consumed; break;
      case K::Bool:
        v = v.unsqueeze(dim);
        p.adv.emplace_back(dim++, bool_index(ix.integer() != 0, self.device()));
        break;
      case K::Tensor: {
        const Tensor& t = ix.tensor();
        IGNIS_CHECK(t.device() == self.device(), op, ": index tensor on ", t.device().str(),
                    " for a tensor on ", self.device().str());
        if (t.dtype() == kInt64 || t.dtype() == kInt32) {
          p.adv.emplace_back(dim++, t);
          break;
        }
        const Tensor m = t.dtype() == kBool ? t : t.to(kBool);
        if (m.dim() == 0) {  // a 0-d mask acts like a bool scalar
          v = v.unsqueeze(dim);
          p.adv.emplace_back(dim++, bool_index(m.item<bool>(), self.device()));
          break;
        }
        for (int64_t k = 0; k < m.dim(); ++k) {
          IGNIS_CHECK(m.sizes()[k] == v.sizes()[dim + k], op, ": the shape of the mask ", m.sizes(),
                      " at index ", pos,
                      " does not match the shape of the indexed "
                      "tensor ",
                      v.sizes(), " at dimension ", dim + k, " (", m.sizes()[k], " vs ",
                      v.sizes()[dim + k], ")");
        }
        Tensor nz = nonzero(m);  // [n, m.dim()]: one index tensor per masked dim
        for (int64_t k = 0; k < m.dim(); ++k) p.adv.emplace_back(dim + k, nz.select(1, k));
        dim += m.dim();
        break;
      }
    }
  }
  p.view = v;
  return p;
}

AdvancedIndex make_advanced(const std::vector<std::pair<int64_t, Tensor>>& adv, const char* op) {
  AdvancedIndex a;
  for (const auto& [d, t] : adv) {
    if (!a.dims.empty() && d != a.dims.back() + 1) a.adjacent = false;
    a.dims.push_back(d);
    a.indices.push_back(t);
  }
  a.shape = a.indices[0].sizes().shape();
  for (size_t k = 1; k < a.indices.size(); ++k) {
    try {
      a.shape = broadcast_shapes(a.shape, a.indices[k].sizes());
    } catch (const Error&) {
      std::string shapes;
      for (const Tensor& t : a.indices)
        shapes += (shapes.empty() ? "" : ", ") + shape_str(t.sizes());
      IGNIS_FAIL(op,
                 ": shape mismatch: indexing tensors could not be broadcast together with "
                 "shapes ",
                 shapes);
    }
  }
  return a;
}

// ---- the geometry of an advanced-indexing result

struct Layout {
  Shape shape;          // result shape
  Shape self_strides;   // self's strides at the result's non-indexed dims, 0 at the index dims
  int64_t b_start = 0;  // first result dim of the broadcast index shape
};

Layout make_layout(const Tensor& self, const AdvancedIndex& adv) {
  Layout L;
  const int64_t nd = self.dim();
  const auto nb = static_cast<int64_t>(adv.shape.size());
  std::vector<bool> indexed(static_cast<size_t>(nd), false);
  for (int64_t d : adv.dims) indexed[d] = true;
  L.b_start = adv.adjacent ? adv.dims.front() : 0;
  auto push_b = [&] {
    for (int64_t j = 0; j < nb; ++j) {
      L.shape.push_back(adv.shape[j]);
      L.self_strides.push_back(0);
    }
  };
  if (!adv.adjacent) push_b();
  for (int64_t d = 0; d < nd; ++d) {
    if (indexed[d]) {
      if (adv.adjacent && d == adv.dims.front()) push_b();
      continue;
    }
    L.shape.push_back(self.sizes()[d]);
    L.self_strides.push_back(self.strides()[d]);
  }
  return L;
}

// The index operand of the gather/put kernels, laid out over the result shape: the one index
// tensor itself, or for several the precomputed linear element offsets.
struct PreparedIndex {
  Tensor idx;
  int64_t stride = 0;  // bytes per index unit
  IndexBounds bounds;
};

PreparedIndex prepare_index(const Tensor& self, const AdvancedIndex& adv, const Layout& L,
                            const char* op) {
  const int64_t es = static_cast<int64_t>(self.element_size());
  const auto nb = static_cast<int64_t>(adv.shape.size());
  Shape ist(L.shape.size(), 0);
  if (adv.indices.size() == 1) {
    const Tensor& t = adv.indices[0];
    const Tensor e = t.expand(adv.shape);
    for (int64_t j = 0; j < nb; ++j) ist[L.b_start + j] = e.strides()[j];
    const int64_t d = adv.dims[0];
    return {restride(t, L.shape, ist), self.strides()[d] * es, {self.sizes()[d], true, true}};
  }
  std::vector<Tensor> cols;
  std::vector<int64_t> strides, sizes;
  for (size_t k = 0; k < adv.indices.size(); ++k) {
    cols.push_back(adv.indices[k].to(kInt64).expand(adv.shape).contiguous());
    strides.push_back(self.strides()[adv.dims[k]]);
    sizes.push_back(self.sizes()[adv.dims[k]]);
  }
  Tensor off = make_tensor(adv.shape, kInt64, self.device());
  int64_t bad_k = 0;
  const BadIndex b = linear_index_stub[self.device()](off, cols, strides, sizes, bad_k);
  if (b.found) throw_if_bad(b, op, adv.dims[bad_k], sizes[bad_k]);
  const Shape cst = contiguous_strides(adv.shape);
  for (int64_t j = 0; j < nb; ++j) ist[L.b_start + j] = cst[j];
  return {restride(off, L.shape, ist), es, {0, false, false}};
}

void throw_index_error(const BadIndex& b, const Tensor& self, const AdvancedIndex& adv,
                       const char* op) {
  const int64_t d = adv.dims[0];
  throw_if_bad(b, op, d, self.sizes()[d]);
}

// Index tensors saved for backward (version-checked like any saved tensor).
struct SavedAdvanced {
  std::vector<int64_t> dims;
  std::vector<SavedVariable> indices;
  Shape shape;
  bool adjacent = true;
  explicit SavedAdvanced(const AdvancedIndex& a)
      : dims(a.dims), shape(a.shape), adjacent(a.adjacent) {
    for (const Tensor& t : a.indices) indices.emplace_back(t, false);
  }
  AdvancedIndex unpack(const BackwardCtx& c) const {
    AdvancedIndex a;
    a.dims = dims;
    a.shape = shape;
    a.adjacent = adjacent;
    for (const SavedVariable& v : indices) a.indices.push_back(c.unpack(v));
    return a;
  }
};

}  // namespace

Shape advanced_result_shape(IntArrayRef self_sizes, const AdvancedIndex& adv) {
  Shape s;
  const auto nd = static_cast<int64_t>(self_sizes.size());
  std::vector<bool> indexed(static_cast<size_t>(nd), false);
  for (int64_t d : adv.dims) indexed[d] = true;
  if (!adv.adjacent) s = adv.shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (indexed[d]) {
      if (adv.adjacent && d == adv.dims.front()) {
        for (int64_t v : adv.shape) s.push_back(v);
      }
      continue;
    }
    s.push_back(self_sizes[d]);
  }
  return s;
}

Tensor advanced_gather(const Tensor& self, const AdvancedIndex& adv) {
  const Layout L = make_layout(self, adv);
  Tensor out = make_tensor(L.shape, self.dtype(), self.device());
  if (out.numel() > 0) {
    const PreparedIndex P = prepare_index(self, adv, L, "index");
    Tensor src = restride(self, L.shape, L.self_strides);
    TensorIter it = TensorIter::build(out, {&src, &P.idx});
    const BadIndex b =
        index_gather_stub[self.device()](it, self.dtype(), P.idx.dtype(), P.stride, P.bounds);
    throw_index_error(b, self, adv, "index");
  }
  if (autograd::any_needs_grad({&self})) {
    autograd::record("index", {&self}, {&out},
                     [sa = SavedAdvanced(adv), shape = self.sizes().shape()](BackwardCtx& c,
                                                                             const TensorList& g) {
                       return TensorList{advanced_put_zeros(shape, sa.unpack(c), g[0])};
                     });
  }
  return out;
}

void advanced_put_(const Tensor& self, const AdvancedIndex& adv, const Tensor& values,
                   bool accumulate) {
  const Layout L = make_layout(self, adv);
  bool ok = values.dim() <= static_cast<int64_t>(L.shape.size());
  for (int64_t k = 1; ok && k <= values.dim(); ++k) {
    const int64_t v = values.sizes()[values.dim() - k];
    ok = v == 1 || v == L.shape[L.shape.size() - k];
  }
  IGNIS_CHECK(ok, "index_put_: shape mismatch: value tensor of shape ", values.sizes(),
              " cannot be broadcast to indexing result of shape ", L.shape);
  if (shape_numel(L.shape) == 0) return;
  const Tensor vb = cast(values, self.dtype()).expand(L.shape);
  if (accumulate && adv.indices.size() == 1) {
    // One index tensor: accumulation is index_add over the flattened index (parallel, no races).
    const int64_t d = adv.dims[0];
    const int64_t n = self.sizes()[d];
    std::vector<Tensor> cols{adv.indices[0].to(kInt64).reshape({-1}).contiguous()};
    Tensor flat = make_tensor({cols[0].numel()}, kInt64, self.device());
    int64_t bad_k = 0;
    throw_if_bad(linear_index_stub[self.device()](flat, cols, {1}, {n}, bad_k), "index_put_", d, n);
    Shape src_shape = self.sizes().shape();
    src_shape[d] = flat.numel();
    NoGradGuard ng;
    Tensor s = self;
    s.index_add_(d, flat, vb.reshape(src_shape));
    return;
  }
  const PreparedIndex P = prepare_index(self, adv, L, "index_put_");
  Tensor dst = restride(self, L.shape, L.self_strides);
  TensorIter it = TensorIter::build(dst, {&vb, &P.idx});
  const BadIndex b = index_put_stub[self.device()](it, self.dtype(), P.idx.dtype(), P.stride,
                                                   P.bounds, accumulate);
  throw_index_error(b, self, adv, "index_put_");
}

Tensor advanced_put_zeros(IntArrayRef shape, const AdvancedIndex& adv, const Tensor& values) {
  Tensor out = zeros(shape, values.options());
  {
    NoGradGuard ng;
    advanced_put_(out, adv, values, true);
  }
  if (autograd::any_needs_grad({&values})) {
    autograd::record("index_put_zeros", {&values}, {&out},
                     [sa = SavedAdvanced(adv)](BackwardCtx& c, const TensorList& g) {
                       return TensorList{advanced_gather(g[0], sa.unpack(c))};
                     });
  }
  return out;
}

// ---- the registry ops under indexing: PyTorch's index.Tensor and index_put(_), which take the
// advanced part as Tensor?[] (indices[d] indexes dim d; an undefined entry leaves it whole; a
// bool or uint8 mask covers as many dims as it has). Tensor::index and Tensor::index_put_ apply
// the basic part (select, slice, unsqueeze: registry ops too) and then call these.

namespace {
/// (dim, integer index tensor) pairs of a Tensor?[] list over `self`.
std::vector<std::pair<int64_t, Tensor>> list_to_advanced(const Tensor& self,
                                                         const std::vector<Tensor>& indices,
                                                         const char* op) {
  std::vector<std::pair<int64_t, Tensor>> adv;
  int64_t dim = 0;
  for (size_t pos = 0; pos < indices.size(); ++pos) {
    const Tensor& t = indices[pos];
    const int64_t span = !t.defined()                                  ? 1
                         : (t.dtype() == kBool || t.dtype() == kUInt8) ? t.dim()
                                                                       : 1;
    IGNIS_CHECK(dim + span <= self.dim(), op, ": too many indices for a tensor of dimension ",
                self.dim(), " (index ", pos, " reaches dimension ", dim + span - 1, ")");
    if (!t.defined()) {
      ++dim;
      continue;
    }
    const DType dt = t.dtype();
    IGNIS_CHECK(dt == kInt64 || dt == kInt32 || dt == kBool || dt == kUInt8, op,
                ": tensors used as indices must be int64, int32, bool or uint8, but got ", dt);
    IGNIS_CHECK(t.device() == self.device(), op, ": index tensor on ", t.device().str(),
                " for a tensor on ", self.device().str());
    if (dt == kInt64 || dt == kInt32) {
      adv.emplace_back(dim++, t);
      continue;
    }
    IGNIS_CHECK(t.dim() > 0, op, ": a 0-d mask at index ", pos,
                " adds a dimension; use Tensor::index (x[mask]) for it");
    const Tensor m = dt == kBool ? t : t.to(kBool);
    for (int64_t k = 0; k < m.dim(); ++k) {
      IGNIS_CHECK(m.sizes()[k] == self.sizes()[dim + k], op, ": the shape of the mask ", m.sizes(),
                  " at index ", pos, " does not match the shape of the indexed tensor ",
                  self.sizes(), " at dimension ", dim + k, " (", m.sizes()[k], " vs ",
                  self.sizes()[dim + k], ")");
    }
    const Tensor nz = nonzero(m);  // [n, m.dim()]: one index tensor per masked dim
    for (int64_t k = 0; k < m.dim(); ++k) adv.emplace_back(dim + k, nz.select(1, k));
    dim += m.dim();
  }
  return adv;
}

/// 0, 1, 2, ... in self's shape: indexing it gives the flat positions an index reads.
Tensor flat_positions(const Tensor& self) {
  Tensor pos = make_tensor(self.sizes(), kInt64, self.device());
  iota_stub[self.device()](pos);
  return pos;
}

/// index_put_ under autograd, out of place over the flattened tensor: a scatter (or, when
/// accumulating, an index_add) of the values at the positions `at` the index reads, which is
/// differentiable in self and the values; self then takes the result (inplace_from).
Tensor& put_at_positions(Tensor& self, const Tensor& at, const Tensor& values, bool accumulate) {
  check_inplace(self, "index_put_");
  IGNIS_CHECK(self.is_floating_point(), "index_put_: autograd needs a floating point tensor, got ",
              self.dtype());
  const Tensor v = cast(values, self.dtype());
  Shape b;
  try {
    b = broadcast_shapes(v.sizes(), at.sizes());
  } catch (const Error&) {
    b = Shape();
  }
  IGNIS_CHECK(IntArrayRef(b).equals(at.sizes()),
              "index_put_: shape mismatch: value tensor of "
              "shape ",
              values.sizes(), " cannot be broadcast to indexing result of shape ", at.sizes());
  const Tensor flat = self.reshape({-1}), pos = at.reshape({-1});
  const Tensor vf = v.expand(at.sizes()).reshape({-1});
  const Tensor out =
      accumulate ? ignis::index_add(flat, 0, pos, vf) : ignis::scatter(flat, 0, pos, vf);
  return inplace_from(self, out.view(self.sizes()), "index_put_");
}

/// The Tensor?[] list of parsed advanced indices (an entry per dim up to the last indexed one).
std::vector<Tensor> advanced_to_list(const std::vector<std::pair<int64_t, Tensor>>& adv) {
  std::vector<Tensor> list(static_cast<size_t>(adv.back().first + 1));
  for (const auto& [d, t] : adv) list[static_cast<size_t>(d)] = t;
  return list;
}
}  // namespace

IGNIS_OP(index_Tensor, "index.Tensor(Tensor self, Tensor?[] indices) -> Tensor",
         Tensor(const Tensor&, const std::vector<Tensor>&), index,
         {.differentiable = true, .stubs = {&index_gather_stub}});
IGNIS_OP_METHOD(index_put_,
                "index_put_(Tensor(a!) self, Tensor?[] indices, Tensor values, "
                "bool accumulate=False) -> Tensor(a!)",
                Tensor&(const std::vector<Tensor>&, const Tensor&, bool) const, index_put_,
                {.differentiable = true, .stubs = {&index_put_stub}});
IGNIS_OP_METHOD(index_put,
                "index_put(Tensor self, Tensor?[] indices, Tensor values, "
                "bool accumulate=False) -> Tensor",
                Tensor(const std::vector<Tensor>&, const Tensor&, bool) const, index_put,
                {.differentiable = true, .kind = "composite"});

Tensor index(const Tensor& self, const std::vector<Tensor>& indices) {
  IGNIS_DISPATCH(index_Tensor, index, self, indices);
  IGNIS_CHECK(self.defined(), "index: called on an undefined tensor");
  const auto adv = list_to_advanced(self, indices, "index");
  if (adv.empty()) return self;
  return advanced_gather(self, make_advanced(adv, "index"));
}

Tensor& Tensor::index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                           bool accumulate) const {
  IGNIS_DISPATCH_METHOD(index_put_, index_put_, indices, values, accumulate);
  IGNIS_CHECK(defined() && values.defined(), "index_put_: undefined tensor");
  IGNIS_CHECK(values.device() == device(), "index_put_: values on ", values.device().str(),
              " for a tensor on ", device().str());
  if (autograd::any_needs_grad({this, &values})) {
    return put_at_positions(mut(), ignis::index(flat_positions(mut()), indices), values,
                            accumulate);
  }
  const auto adv = list_to_advanced(mut(), indices, "index_put_");
  if (adv.empty()) {
    if (accumulate) {
      add_(values);
    } else {
      copy_(values);
    }
    return mut();
  }
  check_inplace(mut(), "index_put_");
  advanced_put_(mut(), make_advanced(adv, "index_put_"), values, accumulate);
  impl()->bump_version();
  return mut();
}

Tensor Tensor::index_put(const std::vector<Tensor>& indices, const Tensor& values,
                         bool accumulate) const {
  IGNIS_DISPATCH_METHOD(index_put, index_put, indices, values, accumulate);
  return clone().index_put_(indices, values, accumulate);
}

// ---- Tensor::index and Tensor::index_put_ with TensorIndex (LibTorch's C++ indexing)

Tensor Tensor::index(const std::vector<TensorIndex>& indices) const {
  IGNIS_CHECK(defined(), "index: called on an undefined tensor");
  // x[mask] with a mask of x's full shape is masked_select (one compaction pass, no nonzero).
  if (indices.size() == 1 && indices[0].kind() == TensorIndex::Kind::Tensor) {
    const Tensor& m = indices[0].tensor();
    if (m.dtype() == kBool && m.dim() > 0 && m.sizes().equals(sizes())) {
      return ignis::masked_select(*this, m);
    }
  }
  Parsed p = apply_basic(*this, indices, "index");
  if (p.adv.empty()) return p.view;
  return ignis::index(p.view, advanced_to_list(p.adv));
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) const {
  IGNIS_CHECK(defined() && value.defined(), "index_put_: undefined tensor");
  IGNIS_CHECK(value.device() == device(), "index_put_: value on ", value.device().str(),
              " for a tensor on ", device().str());
  if (autograd::any_needs_grad({this, &value})) {
    return put_at_positions(mut(), flat_positions(mut()).index(indices), value, false);
  }
  // x[mask] = scalar: a masked fill.
  if (indices.size() == 1 && value.dim() == 0 && indices[0].kind() == TensorIndex::Kind::Tensor &&
      indices[0].tensor().dtype() == kBool && indices[0].tensor().sizes().equals(sizes())) {
    return masked_fill_(indices[0].tensor(), value.item());
  }
  Parsed p = apply_basic(mut(), indices, "index_put_");
  if (p.adv.empty()) {
    Shape s;
    try {
      s = broadcast_shapes(p.view.sizes(), value.sizes());
    } catch (const Error&) {
      s = Shape();
    }
    IGNIS_CHECK(IntArrayRef(s).equals(p.view.sizes()),
                "index_put_: shape mismatch: value tensor "
                "of shape ",
                value.sizes(), " cannot be broadcast to indexing result of shape ", p.view.sizes());
    p.view.copy_(value);  // a registry op (it bumps the shared version counter)
  } else {
    p.view.index_put_(advanced_to_list(p.adv), value, false);
  }
  return mut();
}

Tensor& Tensor::index_put_(const std::vector<TensorIndex>& indices, Scalar value) const {
  return index_put_(indices, wrap_scalar(value, dtype(), device()));
}

}  // namespace ignis
