// Shape and indexing ops built from views and existing records: index_fill (a masked_fill
// along one dim), roll (two narrows and a cat per dim), tile (repeat), unbind (selects),
// repeat_interleave (expand + reshape, or index_select), meshgrid (views and expands).
#include <numeric>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"
#include "ops/elementwise.h"

namespace ignis {

IGNIS_OP(index_fill_int_Scalar,
         "index_fill.int_Scalar(Tensor self, int dim, Tensor index, Scalar value) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&, Scalar), index_fill,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP_METHOD(index_fill__int_Scalar,
                "index_fill_.int_Scalar(Tensor(a!) self, int dim, Tensor index, Scalar value) -> "
                "Tensor(a!)",
                Tensor&(int64_t, const Tensor&, Scalar) const, index_fill_,
                {.differentiable = true, .kind = "composite"});
IGNIS_OP(roll, "roll(Tensor self, int[] shifts, int[] dims=[]) -> Tensor",
         Tensor(const Tensor&, IntArrayRef, IntArrayRef), roll,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(tile, "tile(Tensor self, int[] dims) -> Tensor", Tensor(const Tensor&, IntArrayRef), tile,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(unbind_int, "unbind.int(Tensor(a) self, int dim=0) -> Tensor[]",
         std::vector<Tensor>(const Tensor&, int64_t), unbind,
         {.differentiable = true, .kind = "view"});
IGNIS_OP(repeat_interleave_self_int,
         "repeat_interleave.self_int(Tensor self, int repeats, int? dim=None, *, "
         "int? output_size=None) -> Tensor",
         Tensor(const Tensor&, int64_t, std::optional<int64_t>, std::optional<int64_t>),
         repeat_interleave, {.differentiable = true, .kind = "composite"});
IGNIS_OP(repeat_interleave_self_Tensor,
         "repeat_interleave.self_Tensor(Tensor self, Tensor repeats, int? dim=None, *, "
         "int? output_size=None) -> Tensor",
         Tensor(const Tensor&, const Tensor&, std::optional<int64_t>, std::optional<int64_t>),
         repeat_interleave, {.differentiable = true, .kind = "composite"});
IGNIS_OP(repeat_interleave_Tensor,
         "repeat_interleave.Tensor(Tensor repeats, *, int? output_size=None) -> Tensor",
         Tensor(const Tensor&, std::optional<int64_t>), repeat_interleave, {.kind = "composite"});
IGNIS_OP(meshgrid, "meshgrid(Tensor[] tensors) -> Tensor[]",
         std::vector<Tensor>(const std::vector<Tensor>&), meshgrid,
         {.differentiable = true, .kind = "view"});
IGNIS_OP(meshgrid_indexing, "meshgrid.indexing(Tensor[] tensors, *, str indexing) -> Tensor[]",
         std::vector<Tensor>(const std::vector<Tensor>&, const std::string&), meshgrid,
         {.differentiable = true, .kind = "view"});

namespace {

/// The mask (bool, x's rank, size 1 except along d) of the slices index_fill writes.
Tensor index_fill_mask(const Tensor& x, int64_t dim, const Tensor& index, const char* op) {
  const int64_t d = wrap_dim(dim, x.dim(), op);
  IGNIS_CHECK(index.dtype() == kInt64, op, ": index must be an int64 tensor, but got ",
              index.dtype());
  IGNIS_CHECK(index.dim() <= 1, op, ": index must be 0-d or 1-d, but got shape ", index.sizes());
  IGNIS_CHECK(index.device() == x.device(), op, ": index is on ", index.device().str(),
              " but self is on ", x.device().str());
  const int64_t n = x.dim() == 0 ? 1 : x.size(d);
  const Tensor idx = index.reshape({index.numel()});
  if (idx.numel() > 0) {
    const int64_t lo = amin(idx).item<int64_t>(), hi = amax(idx).item<int64_t>();
    IGNIS_CHECK(lo >= -n && hi < n, op, ": index ", lo < -n ? lo : hi,
                " is out of range for dimension ", d, " of size ", n, " (self shape ", x.sizes(),
                ")");
  }
  const Tensor wrapped = where(lt(idx, 0), idx + n, idx);
  const Tensor pos = arange(n, TensorOptions(kInt64).device(x.device()));
  Tensor mask = any(eq(pos.view({n, 1}), wrapped.view({1, idx.numel()})), 1);
  if (x.dim() == 0) return mask.reshape({});
  Shape at(static_cast<size_t>(x.dim()), 1);
  at[d] = n;
  return mask.view(at);
}

/// Rolls x by `shift` along dim d (a copy).
Tensor roll_dim(const Tensor& x, int64_t shift, int64_t d) {
  const int64_t n = x.size(d);
  if (n == 0) return x;
  const int64_t s = ((shift % n) + n) % n;
  if (s == 0) return x;
  return cat({x.narrow(d, n - s, s), x.narrow(d, 0, n - s)}, d);
}

}  // namespace

Tensor index_fill(const Tensor& x, int64_t dim, const Tensor& index, Scalar value) {
  IGNIS_DISPATCH(index_fill_int_Scalar, index_fill, x, dim, index, value);
  return masked_fill(x, index_fill_mask(x, dim, index, "index_fill"), value);
}

Tensor& Tensor::index_fill_(int64_t dim, const Tensor& index, Scalar value) const {
  IGNIS_DISPATCH_METHOD(index_fill__int_Scalar, index_fill_, dim, index, value);
  check_inplace(mut(), "index_fill_");
  return masked_fill_(index_fill_mask(mut(), dim, index, "index_fill_"), value);
}

Tensor roll(const Tensor& x, IntArrayRef shifts, IntArrayRef dims) {
  IGNIS_DISPATCH(roll, roll, x, shifts, dims);
  Tensor out;
  if (dims.empty()) {
    IGNIS_CHECK(shifts.size() == 1, "roll: with no dims, shifts must hold one value, but got ",
                shifts);
    out = roll_dim(x.reshape({x.numel()}), shifts[0], 0).reshape(x.sizes());
  } else {
    IGNIS_CHECK(shifts.size() == dims.size(), "roll: shifts ", shifts, " and dims ", dims,
                " must have the same length");
    out = x.dim() == 0 ? x.reshape({1}) : x;
    for (size_t i = 0; i < dims.size(); ++i) {
      out = roll_dim(out, shifts[i], wrap_dim(dims[i], x.dim(), "roll"));
    }
    out = out.reshape(x.sizes());
  }
  // A new tensor, as in PyTorch, also when nothing moved.
  return out.impl()->storage() == x.impl()->storage() ? out.clone() : out;
}

Tensor tile(const Tensor& x, IntArrayRef dims) {
  IGNIS_DISPATCH(tile, tile, x, dims);
  Shape reps(dims.begin(), dims.end());
  while (static_cast<int64_t>(reps.size()) < x.dim()) reps.insert(reps.begin(), 1);
  return repeat(x, reps);
}

std::vector<Tensor> unbind(const Tensor& x, int64_t dim) {
  IGNIS_DISPATCH(unbind_int, unbind, x, dim);
  IGNIS_CHECK(x.dim() > 0, "unbind: cannot unbind a 0-d tensor");
  const int64_t d = wrap_dim(dim, x.dim(), "unbind");
  std::vector<Tensor> out;
  out.reserve(static_cast<size_t>(x.size(d)));
  for (int64_t i = 0; i < x.size(d); ++i) out.push_back(x.select(d, i));
  return out;
}

Tensor repeat_interleave(const Tensor& x, int64_t repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  IGNIS_DISPATCH(repeat_interleave_self_int, repeat_interleave, x, repeats, dim, output_size);
  IGNIS_CHECK(repeats >= 0, "repeat_interleave: repeats must be non-negative, but got ", repeats);
  const Tensor xl = !dim ? x.reshape({x.numel()}) : x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  const int64_t total = xl.size(d) * repeats;
  IGNIS_CHECK(!output_size || *output_size == total, "repeat_interleave: output_size ",
              *output_size, " does not match the result's size ", total, " along dim ", d);
  Shape big = xl.sizes().shape();
  big.insert(big.begin() + d + 1, repeats);
  Shape shape = xl.sizes().shape();
  shape[d] = total;
  return xl.unsqueeze(d + 1).expand(big).reshape(shape);
}

Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size) {
  IGNIS_DISPATCH(repeat_interleave_Tensor, repeat_interleave, repeats, output_size);
  IGNIS_CHECK(repeats.dim() == 1, "repeat_interleave: repeats must be a 1-d tensor, but got shape ",
              repeats.sizes());
  IGNIS_CHECK(!is_floating_point(repeats.dtype()) && repeats.dtype() != kBool,
              "repeat_interleave: repeats must be an integer tensor, but got ", repeats.dtype());
  const Tensor r = repeats.to(kInt64).contiguous().cpu();
  const int64_t* p = r.data_ptr<int64_t>();
  std::vector<int64_t> idx;
  for (int64_t i = 0; i < r.numel(); ++i) {
    IGNIS_CHECK(p[i] >= 0, "repeat_interleave: repeats must be non-negative, but repeats[", i,
                "] is ", p[i]);
    idx.insert(idx.end(), static_cast<size_t>(p[i]), i);
  }
  IGNIS_CHECK(!output_size || *output_size == static_cast<int64_t>(idx.size()),
              "repeat_interleave: output_size ", *output_size,
              " does not match the sum of repeats ", idx.size());
  return tensor(idx).to(repeats.device());
}

Tensor repeat_interleave(const Tensor& x, const Tensor& repeats, std::optional<int64_t> dim,
                         std::optional<int64_t> output_size) {
  IGNIS_DISPATCH(repeat_interleave_self_Tensor, repeat_interleave, x, repeats, dim, output_size);
  IGNIS_CHECK(repeats.dim() <= 1, "repeat_interleave: repeats must be 0-d or 1-d, but got shape ",
              repeats.sizes());
  const Tensor xl = !dim ? x.reshape({x.numel()}) : x.dim() == 0 ? x.reshape({1}) : x;
  const int64_t d = dim ? wrap_dim(*dim, x.dim(), "repeat_interleave") : 0;
  if (repeats.numel() == 1) {
    IGNIS_CHECK(!is_floating_point(repeats.dtype()) && repeats.dtype() != kBool,
                "repeat_interleave: repeats must be an integer tensor, but got ", repeats.dtype());
    return ignis::repeat_interleave(x, repeats.item<int64_t>(), dim, output_size);
  }
  IGNIS_CHECK(repeats.numel() == xl.size(d), "repeat_interleave: repeats of shape ",
              repeats.sizes(), " must have one value per element along dim ", d, " (size ",
              xl.size(d), ", input shape ", x.sizes(), ")");
  const Tensor idx = ignis::repeat_interleave(repeats.reshape({repeats.numel()}), output_size);
  return index_select(xl, d, idx);
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing) {
  IGNIS_DISPATCH(meshgrid_indexing, meshgrid, tensors, indexing);
  IGNIS_CHECK(indexing == "ij" || indexing == "xy",
              "meshgrid: indexing must be \"ij\" or \"xy\", but got \"", indexing, "\"");
  IGNIS_CHECK(!tensors.empty(), "meshgrid: expected at least one tensor");
  const size_t n = tensors.size();
  Shape shape;
  for (size_t i = 0; i < n; ++i) {
    const Tensor& t = tensors[i];
    IGNIS_CHECK(t.defined(), "meshgrid: tensor ", i, " is undefined");
    IGNIS_CHECK(t.dim() <= 1, "meshgrid: expected 0-d or 1-d tensors, but tensor ", i,
                " has shape ", t.sizes());
    IGNIS_CHECK(t.dtype() == tensors[0].dtype() && t.device() == tensors[0].device(),
                "meshgrid: all tensors must have the same dtype and device, but tensor ", i, " is ",
                t.dtype(), " on ", t.device().str(), " and tensor 0 ", tensors[0].dtype(), " on ",
                tensors[0].device().str());
    shape.push_back(t.numel());
  }
  const bool swap = indexing == "xy" && n >= 2;
  if (swap) std::swap(shape[0], shape[1]);
  std::vector<Tensor> out;
  for (size_t i = 0; i < n; ++i) {
    const size_t at = swap && i < 2 ? 1 - i : i;
    Shape view(n, 1);
    view[at] = shape[at];
    out.push_back(tensors[i].reshape(view).expand(shape));
  }
  return out;
}

std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors) {
  IGNIS_DISPATCH(meshgrid, meshgrid, tensors);
  return ignis::meshgrid(tensors, "ij");
}

Tensor Tensor::index_fill(int64_t dim, const Tensor& index, Scalar value) const {
  return ignis::index_fill(*this, dim, index, value);
}
Tensor Tensor::roll(IntArrayRef shifts, IntArrayRef dims) const {
  return ignis::roll(*this, shifts, dims);
}
Tensor Tensor::tile(IntArrayRef dims) const { return ignis::tile(*this, dims); }
std::vector<Tensor> Tensor::unbind(int64_t dim) const { return ignis::unbind(*this, dim); }
Tensor Tensor::repeat_interleave(int64_t repeats, std::optional<int64_t> dim,
                                 std::optional<int64_t> output_size) const {
  return ignis::repeat_interleave(*this, repeats, dim, output_size);
}
Tensor Tensor::repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim,
                                 std::optional<int64_t> output_size) const {
  return ignis::repeat_interleave(*this, repeats, dim, output_size);
}

}  // namespace ignis
