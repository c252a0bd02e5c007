// The scatter reductions and sparse products of graph neural networks: scatter_reduce,
// segment_softmax, sparse_mm (COO and CSR), sddmm, and the graph utilities degree,
// add_self_loops and gcn_norm. Each op is one record with its checks, the kernel call and its
// backward written in ignis ops (so second derivatives come from the same formulas).
#include "ignis/scatter.h"

#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/elementwise.h"
#include "ops/scatter.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;
using TensorPair = std::tuple<Tensor, Tensor>;  // one macro argument

IGNIS_DEFINE_STUB(coo_to_csr_stub, CooToCsrFn);
IGNIS_DEFINE_STUB(csr_check_stub, CsrCheckFn);
IGNIS_DEFINE_STUB(csr_rows_stub, CsrRowsFn);
IGNIS_DEFINE_STUB(segment_reduce_stub, SegmentReduceFn);
IGNIS_DEFINE_STUB(scatter_reduce_stub, ScatterReduceFn);
IGNIS_DEFINE_STUB(spmm_stub, SpmmFn);
IGNIS_DEFINE_STUB(sddmm_stub, SddmmFn);

namespace {

void same_device(const Tensor& a, const Tensor& b, const char* op, const char* what) {
  IGNIS_CHECK(a.device() == b.device(), op, ": expected all tensors on the same device, but ", what,
              " is on ", b.device().str(), " and the input on ", a.device().str());
}

ReduceOp parse_reduce(const std::string& reduce) {
  if (reduce == "sum") return ReduceOp::Sum;
  if (reduce == "prod") return ReduceOp::Prod;
  if (reduce == "mean") return ReduceOp::Mean;
  if (reduce == "amax") return ReduceOp::Amax;
  if (reduce == "amin") return ReduceOp::Amin;
  IGNIS_FAIL(
      "scatter_reduce: reduce must be one of 'sum', 'prod', 'mean', 'amax', 'amin', but got '",
      reduce, "'");
}

// max(index) + 1 (0 for an empty index): a host read of the index values.
int64_t infer_size(const Tensor& index, const char* op) {
  if (index.numel() == 0) return 0;
  Tensor c = index.contiguous();
  auto [lo, hi] = int_minmax_stub[c.device()](c);
  IGNIS_CHECK(lo >= 0, op, ": indices must be non-negative, but got ", lo);
  return hi + 1;
}

Shape shape_with(IntArrayRef s, int64_t dim, int64_t v) {
  Shape r = s.shape();
  if (!r.empty()) r[dim] = v;
  return r;
}

// A gradient of the index's shape, zero-padded at the end of each dim up to `shape`.
Tensor pad_to(const Tensor& g, IntArrayRef shape) {
  if (g.sizes().equals(shape)) return g;
  Shape p;
  for (int64_t d = g.dim() - 1; d >= 0; --d) {
    p.push_back(0);
    p.push_back(shape[d] - g.sizes()[d]);
  }
  return pad(g, p);
}

// The leading part of t of the given shape (differentiable).
Tensor narrow_to(Tensor t, IntArrayRef shape) {
  for (int64_t d = 0; d < t.dim(); ++d) {
    if (t.size(d) != shape[d]) t = t.narrow(d, 0, shape[d]);
  }
  return t;
}

// scatter_reduce's argument checks; wraps dim.
void check_scatter_reduce(const Tensor& self, int64_t& dim, const Tensor& index,
                          const Tensor& src) {
  constexpr const char* op = "scatter_reduce";
  IGNIS_CHECK(self.defined() && src.defined(), op, ": called with an undefined tensor");
  check_index_dtype(index, op);
  same_device(self, index, op, "index");
  same_device(self, src, op, "src");
  IGNIS_CHECK(self.dtype() == src.dtype(), op,
              ": expected self and src to have the same dtype, but got ", self.dtype(), " and ",
              src.dtype());
  IGNIS_CHECK(self.dtype() != kBool, op, ": bool tensors are not supported");
  dim = wrap_dim(dim, self.dim(), op);
  IGNIS_CHECK(index.dim() == self.dim() && src.dim() == self.dim(), op,
              ": index and src must have as many dims as self, but got self of shape ",
              self.sizes(), ", index of shape ", index.sizes(), " and src of shape ", src.sizes());
  for (int64_t d = 0; d < index.dim(); ++d) {
    IGNIS_CHECK(d == dim || index.sizes()[d] <= self.sizes()[d], op, ": index of shape ",
                index.sizes(), " is larger than self of shape ", self.sizes(), " at dim ", d,
                " (only dim ", dim, " may be larger)");
    IGNIS_CHECK(index.sizes()[d] <= src.sizes()[d], op, ": index of shape ", index.sizes(),
                " is larger than src of shape ", src.sizes(), " at dim ", d);
  }
}

// When the index is one vector along dim broadcast over the other dims (the message-passing
// idiom index.unsqueeze(-1).expand_as(src)) and covers self there, the reduction goes through
// the CSR of that vector: each thread owns destination rows.
bool segment_path(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                  ReduceOp r, bool include_self) {
  if (out.dim() == 0) return false;
  for (int64_t d = 0; d < out.dim(); ++d) {
    if (d == dim) continue;
    if (index.sizes()[d] != out.sizes()[d]) return false;
    if (index.sizes()[d] != 1 && index.strides()[d] != 0) return false;
  }
  if (!collapse3(out, dim)) return false;
  const int64_t E = index.sizes()[dim];
  Tensor vec = restride(index, {E}, {index.strides()[dim]}).contiguous();
  Tensor s = restride(src, index.sizes(), src.strides());
  if (!collapse3(s, dim)) s = s.contiguous();
  const int64_t N = out.sizes()[dim];
  Tensor rowptr = make_tensor({N + 1}, kInt64, out.device());
  Tensor perm = make_tensor({E}, kInt64, out.device());
  throw_if_bad(coo_to_csr_stub[out.device()](vec, N, rowptr, perm), "scatter_reduce", dim, N);
  segment_reduce_stub[out.device()](out, s, dim, rowptr, perm, r, include_self);
  return true;
}

void scatter_reduce_into(const Tensor& out, int64_t dim, const Tensor& index, const Tensor& src,
                         ReduceOp r, bool include_self) {
  if (index.numel() == 0) return;
  if (segment_path(out, dim, index, src, r, include_self)) return;
  const int64_t nd = out.dim();
  const Shape sizes = shape_with(index.sizes(), dim, 1);
  Tensor o = restride(out, sizes, out.strides());
  Tensor i = restride(index, sizes, index.strides());
  Tensor s = restride(src, sizes, src.strides());
  TensorIter it = TensorIter::build(o, {&i, &s});
  const int64_t es = static_cast<int64_t>(out.element_size());
  ScatterReduceArgs a;
  a.line = nd ? index.sizes()[dim] : 1;
  a.self_stride = nd ? out.strides()[dim] * es : 0;
  a.index_stride = nd ? index.strides()[dim] * int64_t(index.element_size()) : 0;
  a.src_stride = nd ? src.strides()[dim] * es : 0;
  a.size = nd ? out.sizes()[dim] : 1;
  a.op = r;
  a.include_self = include_self;
  throw_if_bad(scatter_reduce_stub[out.device()](it, out.dtype(), index.dtype(), a),
               "scatter_reduce", dim, a.size);
}

// The positions of self that receive a value (bool, self's shape).
Tensor scattered_mask(const Tensor& like, int64_t dim, const Tensor& idx) {
  return zeros_like(like).scatter(dim, idx, ones(idx.sizes(), like.options())).ne(0);
}

Tensor check_edge_index(const Tensor& edge_index, const char* op) {
  IGNIS_CHECK(edge_index.defined(), op, ": edge_index is undefined");
  IGNIS_CHECK(edge_index.dtype() == kInt64 || edge_index.dtype() == kInt32, op,
              ": expected edge_index of dtype int64 or int32, but got ", edge_index.dtype());
  IGNIS_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2, op,
              ": expected edge_index of shape [2, num_edges], but got ", edge_index.sizes());
  return edge_index;
}
}  // namespace

// ---- scatter_reduce

IGNIS_OP(scatter_reduce_two,
         "scatter_reduce.two(Tensor self, int dim, Tensor index, Tensor src, str reduce, *, "
         "bool include_self=True) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, const std::string&, bool),
         scatter_reduce,
         {.differentiable = true,
          .stubs = {&coo_to_csr_stub, &segment_reduce_stub, &scatter_reduce_stub}});

IGNIS_OP_METHOD(
    scatter_reduce__two,
    "scatter_reduce_.two(Tensor(a!) self, int dim, Tensor index, Tensor src, str reduce, "
    "*, bool include_self=True) -> Tensor(a!)",
    Tensor&(int64_t, const Tensor&, const Tensor&, const std::string&, bool) const, scatter_reduce_,
    {.differentiable = true, .kind = "composite"});

Tensor Tensor::scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src,
                              const std::string& reduce, bool include_self) const {
  return ignis::scatter_reduce(*this, dim, index, src, reduce, include_self);
}

// In place: self takes the out-of-place result's values (and, under autograd, its history; the
// backward saves self, so the op then runs on a clone that the write does not touch).
Tensor& Tensor::scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                                const std::string& reduce, bool include_self) const {
  IGNIS_DISPATCH_METHOD(scatter_reduce__two, scatter_reduce_, dim, index, src, reduce,
                        include_self);
  if (autograd::any_needs_grad({this, &src})) {
    check_inplace(mut(), "scatter_reduce_");
    return inplace_from(mut(),
                        ignis::scatter_reduce(clone(), dim, index, src, reduce, include_self),
                        "scatter_reduce_");
  }
  copy_(ignis::scatter_reduce(mut(), dim, index, src, reduce, include_self));
  return mut();
}

Tensor scatter_reduce(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                      const std::string& reduce, bool include_self) {
  IGNIS_DISPATCH(scatter_reduce_two, scatter_reduce, self, dim, index, src, reduce, include_self);
  const ReduceOp r = parse_reduce(reduce);
  check_scatter_reduce(self, dim, index, src);
  Tensor out;
  {
    NoGradGuard ng;
    out = self.clone();
  }
  // Only the part of src the index covers takes part.
  const Tensor src_used =
      src.sizes().equals(index.sizes()) ? src : restride(src, index.sizes(), src.strides());
  scatter_reduce_into(out, dim, index, src_used, r, include_self);
  if (autograd::any_needs_grad({&self, &src})) {
    IGNIS_CHECK(self.is_floating_point(),
                "scatter_reduce: only floating tensors are differentiable");
    autograd::record(
        "scatter_reduce", {&self, &src}, {&out},
        [si = SavedVariable(index, false), sx = SavedVariable(self, false),
         ss = SavedVariable(src, false), so = SavedVariable(out, true), dim, r, include_self,
         src_shape = src.sizes().shape()](BackwardCtx& c, const TensorList& g) {
          const Tensor idx = c.unpack(si);
          const Tensor& grad = g[0];
          auto used_src = [&] { return narrow_to(c.unpack(ss), idx.sizes()); };
          Tensor gself, gsrc;
          switch (r) {
            case ReduceOp::Sum:
              gself = grad;
              gsrc = grad.gather(dim, idx);
              break;
            case ReduceOp::Mean: {
              Tensor n;
              {
                NoGradGuard ng;
                n = include_self ? ones_like(grad) : zeros_like(grad);
                n = n.scatter_add(dim, idx, ones(idx.sizes(), grad.options()));
                n = n.masked_fill(n.eq(0), 1);
              }
              gself = grad / n;
              gsrc = gself.gather(dim, idx);
              break;
            }
            case ReduceOp::Amax:
            case ReduceOp::Amin: {
              // The gradient is shared evenly among the values equal to the result.
              const Tensor x = c.unpack(sx), s = used_src(), res = c.unpack(so);
              Tensor self_is, src_is, count;
              {
                NoGradGuard ng;
                Tensor rd = res.detach();
                Tensor self_hit = x.detach().eq(rd);
                if (!include_self) {
                  self_hit = logical_and(self_hit, logical_not(scattered_mask(rd, dim, idx)));
                }
                self_is = self_hit.to(grad.dtype());
                src_is = s.detach().eq(rd.gather(dim, idx)).to(grad.dtype());
                count = self_is.scatter_add(dim, idx, src_is);
              }
              Tensor share = grad / count;
              gself = share * self_is;
              gsrc = share.gather(dim, idx) * src_is;
              break;
            }
            case ReduceOp::Prod: {
              // Products of the other values, without dividing by a zero (PyTorch's formula).
              const Tensor x = c.unpack(sx), s = used_src(), res = c.unpack(so);
              Tensor self_zero, src_zero, src_single_zero;
              {
                NoGradGuard ng;
                self_zero = x.eq(0);
                src_zero = s.eq(0);
                Tensor zeros_per =
                    zeros_like(x).scatter_add(dim, idx, src_zero.to(x.dtype())).gather(dim, idx);
                src_single_zero = logical_and(src_zero, zeros_per.eq(1));
              }
              const Tensor masked_self = x.masked_fill(self_zero, 1);
              gself = grad * scatter_reduce(masked_self, dim, idx, s, "prod", include_self) /
                      masked_self;
              const Tensor masked_src_result = scatter_reduce(
                  x, dim, idx, s.masked_fill(src_single_zero, 1), "prod", include_self);
              gsrc = where(src_single_zero, (grad * masked_src_result).gather(dim, idx),
                           (grad * res).gather(dim, idx) / s.masked_fill(src_zero, 1));
              if (autograd::any_needs_grad({&gsrc})) {
                // With two zeros reaching one position the formula above is right (0) but its
                // own derivative is not: refuse a double backward there, as PyTorch does.
                bool several_zeros;
                {
                  NoGradGuard ng;
                  several_zeros =
                      logical_and(src_zero, logical_not(src_single_zero)).any().item<bool>();
                }
                if (several_zeros) {
                  Tensor guarded;
                  {
                    NoGradGuard ng;
                    guarded = gsrc.clone();
                  }
                  autograd::record("scatter_reduce_prod_backward", {&gsrc}, {&guarded},
                                   [](BackwardCtx&, const TensorList&) -> TensorList {
                                     IGNIS_FAIL(
                                         "scatter_reduce: double backward of reduce='prod' is not "
                                         "supported when two or more zeros of src reach the "
                                         "same position");
                                   });
                  gsrc = guarded;
                }
              }
              break;
            }
          }
          if (!include_self && c.needs_input_grad(0)) {
            Tensor m;
            {
              NoGradGuard ng;
              m = scattered_mask(grad, dim, idx);
            }
            gself = gself.masked_fill(m, 0);
          }
          return TensorList{c.needs_input_grad(0) ? gself : Tensor(),
                            c.needs_input_grad(1) ? pad_to(gsrc, src_shape) : Tensor()};
        });
  }
  return out;
}

// ---- segment_softmax

IGNIS_OP(segment_softmax,
         "segment_softmax(Tensor src, Tensor index, int num_segments=-1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, int64_t), segment_softmax,
         {.differentiable = true, .kind = "composite"});

Tensor segment_softmax(const Tensor& src, const Tensor& index, int64_t num_segments) {
  IGNIS_DISPATCH(segment_softmax, segment_softmax, src, index, num_segments);
  constexpr const char* op = "segment_softmax";
  IGNIS_CHECK(src.defined(), op, ": src is undefined");
  check_index_dtype(index, op);
  same_device(src, index, op, "index");
  IGNIS_CHECK(src.is_floating_point(), op, ": expected a floating src, but got ", src.dtype());
  IGNIS_CHECK(src.dim() >= 1 && index.dim() == 1 && index.size(0) == src.size(0), op,
              ": expected index of shape [E] and src of shape [E, ...], but got index of shape ",
              index.sizes(), " and src of shape ", src.sizes());
  IGNIS_CHECK(num_segments >= -1, op, ": num_segments must be -1 or non-negative, but got ",
              num_segments);
  const int64_t n = num_segments >= 0 ? num_segments : infer_size(index, op);
  const Shape seg_shape = shape_with(src.sizes(), 0, n);
  Shape view(src.dim(), 1);
  view[0] = src.size(0);
  const Tensor idx = index.reshape(view).expand(src.sizes());
  Tensor mx;
  {
    // The per-group max only shifts the exponents (softmax does not depend on it).
    NoGradGuard ng;
    mx = scatter_reduce(zeros(seg_shape, src.options()), 0, idx, src.detach(), "amax", false);
  }
  const Tensor ex = exp(src - mx.index_select(0, index));
  const Tensor den = zeros(seg_shape, src.options()).index_add(0, index, ex);
  return ex / den.index_select(0, index);
}

// ---- sparse products

namespace {
void check_values(const Tensor& values, const Tensor& dense, int64_t nnz, const char* op) {
  if (!values.defined()) return;
  same_device(dense, values, op, "values");
  IGNIS_CHECK(values.dim() == 1 && values.size(0) == nnz, op, ": expected values of shape [", nnz,
              "] (one per entry), but got ", values.sizes());
  IGNIS_CHECK(values.dtype() == dense.dtype(), op,
              ": expected values and dense to have the same dtype, but got ", values.dtype(),
              " and ", dense.dtype());
}

void check_dense(const Tensor& dense, const char* op, const char* name) {
  IGNIS_CHECK(dense.defined(), op, ": ", name, " is undefined");
  IGNIS_CHECK(dense.dim() == 2, op, ": expected a 2-D ", name, " matrix, but got shape ",
              dense.sizes());
  IGNIS_CHECK(dense.is_floating_point(), op, ": expected a floating ", name, ", but got ",
              dense.dtype());
}

// out = A @ dense for A in CSR form (rowptr, col, values, perm); throws naming a bad column.
Tensor spmm(const Tensor& rowptr, const Tensor& col, const Tensor& values, const Tensor& perm,
            const Tensor& dense, int64_t rows, const char* op) {
  Tensor out = make_tensor({rows, dense.size(1)}, dense.dtype(), dense.device());
  const Tensor d = dense.contiguous();
  const Tensor v = values.defined() ? values.contiguous() : values;
  BadIndex b = spmm_stub[dense.device()](out, rowptr, col, v, perm, d);
  if (b.found) {
    IGNIS_FAIL(op, ": column index ", b.value, " is out of bounds for dense of shape ",
               dense.sizes(), " (valid columns are [0, ", dense.size(0), "))");
  }
  return out;
}
}  // namespace

IGNIS_OP(sparse_mm,
         "sparse_mm(Tensor indices, Tensor? values, Tensor dense, int rows=-1) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, int64_t), sparse_mm,
         {.differentiable = true, .stubs = {&coo_to_csr_stub, &spmm_stub, &sddmm_stub}});

namespace {
/// The backward of out = A dense, A the sparse matrix of COO `indices` [2, nnz] and `values`:
/// d values = sddmm(indices, g, dense) (g's rows dotted with dense's at each entry), d dense =
/// A^T g (the flipped indices).
void record_sparse_mm_backward(const char* op, const Tensor& indices, const Tensor& values,
                               const Tensor& dense, Tensor& out) {
  autograd::record(
      op, {&values, &dense}, {&out},
      [si = SavedVariable(indices, false), sv = SavedVariable(values, false),
       sd = SavedVariable(dense, false), k = dense.size(0)](BackwardCtx& c, const TensorList& g) {
        const Tensor idx = c.unpack(si);
        Tensor gv, gd;
        if (c.needs_input_grad(0)) gv = sddmm(idx, g[0], c.unpack(sd));
        if (c.needs_input_grad(1)) gd = sparse_mm(idx.flip({0}), c.unpack(sv), g[0], k);
        return TensorList{gv, gd};
      });
}
}  // namespace

Tensor sparse_mm(const Tensor& indices, const Tensor& values, const Tensor& dense, int64_t rows) {
  IGNIS_DISPATCH(sparse_mm, sparse_mm, indices, values, dense, rows);
  constexpr const char* op = "sparse_mm";
  IGNIS_CHECK(indices.defined(), op, ": indices is undefined");
  check_index_dtype(indices, op);
  IGNIS_CHECK(indices.dim() == 2 && indices.size(0) == 2, op,
              ": expected indices of shape [2, nnz], but got ", indices.sizes());
  check_dense(dense, op, "dense");
  same_device(dense, indices, op, "indices");
  const int64_t nnz = indices.size(1);
  check_values(values, dense, nnz, op);
  IGNIS_CHECK(rows >= -1, op, ": rows must be -1 or non-negative, but got ", rows);
  const Tensor row = indices.select(0, 0).contiguous();
  const Tensor col = indices.select(0, 1).contiguous();
  if (rows < 0) rows = infer_size(row, op);
  Tensor rowptr = make_tensor({rows + 1}, kInt64, dense.device());
  Tensor perm = make_tensor({nnz}, kInt64, dense.device());
  BadIndex b = coo_to_csr_stub[dense.device()](row, rows, rowptr, perm);
  if (b.found) {
    IGNIS_FAIL(op, ": row index ", b.value, " is out of bounds for a sparse matrix with ", rows,
               " rows");
  }
  Tensor out = spmm(rowptr, col, values, perm, dense, rows, op);
  if (autograd::any_needs_grad({&values, &dense})) {
    record_sparse_mm_backward("sparse_mm", indices, values, dense, out);
  }
  return out;
}

IGNIS_OP(sparse_csr_mm,
         "sparse_csr_mm(Tensor crow_indices, Tensor col_indices, Tensor? values, Tensor dense) -> "
         "Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&), sparse_csr_mm,
         {.differentiable = true, .stubs = {&csr_check_stub, &csr_rows_stub, &spmm_stub}});

Tensor sparse_csr_mm(const Tensor& crow_indices, const Tensor& col_indices, const Tensor& values,
                     const Tensor& dense) {
  IGNIS_DISPATCH(sparse_csr_mm, sparse_csr_mm, crow_indices, col_indices, values, dense);
  constexpr const char* op = "sparse_csr_mm";
  IGNIS_CHECK(crow_indices.defined() && col_indices.defined(), op,
              ": an index tensor is undefined");
  IGNIS_CHECK(crow_indices.dtype() == kInt64, op,
              ": expected crow_indices of dtype int64, but got ", crow_indices.dtype());
  check_index_dtype(col_indices, op);
  IGNIS_CHECK(
      crow_indices.dim() == 1 && crow_indices.size(0) >= 1 && col_indices.dim() == 1, op,
      ": expected crow_indices of shape [rows + 1] and col_indices of shape [nnz], but got ",
      crow_indices.sizes(), " and ", col_indices.sizes());
  check_dense(dense, op, "dense");
  same_device(dense, crow_indices, op, "crow_indices");
  same_device(dense, col_indices, op, "col_indices");
  const int64_t nnz = col_indices.size(0);
  check_values(values, dense, nnz, op);
  const Tensor rowptr = crow_indices.contiguous();
  const Tensor col = col_indices.contiguous();
  const int64_t rows = rowptr.size(0) - 1;
  BadIndex b = csr_check_stub[dense.device()](rowptr, nnz);
  if (b.found) {
    IGNIS_FAIL(op, ": crow_indices is not a valid row pointer for ", nnz, " entries at position ",
               b.value, " (it must start at 0, never decrease and end at nnz)");
  }
  Tensor out = spmm(rowptr, col, values, Tensor(), dense, rows, op);
  if (autograd::any_needs_grad({&values, &dense})) {
    Tensor row = make_tensor({nnz}, kInt64, dense.device());
    csr_rows_stub[dense.device()](rowptr, row);
    Tensor coo = stack({row, col.to(kInt64)}, 0);
    record_sparse_mm_backward("sparse_csr_mm", coo, values, dense, out);
  }
  return out;
}

IGNIS_OP(sddmm, "sddmm(Tensor indices, Tensor a, Tensor b) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&), sddmm,
         {.differentiable = true, .stubs = {&sddmm_stub, &coo_to_csr_stub, &spmm_stub}});

Tensor sddmm(const Tensor& indices, const Tensor& a, const Tensor& b) {
  IGNIS_DISPATCH(sddmm, sddmm, indices, a, b);
  constexpr const char* op = "sddmm";
  IGNIS_CHECK(indices.defined(), op, ": indices is undefined");
  check_index_dtype(indices, op);
  IGNIS_CHECK(indices.dim() == 2 && indices.size(0) == 2, op,
              ": expected indices of shape [2, nnz], but got ", indices.sizes());
  check_dense(a, op, "a");
  check_dense(b, op, "b");
  same_device(a, b, op, "b");
  same_device(a, indices, op, "indices");
  IGNIS_CHECK(a.dtype() == b.dtype() && a.size(1) == b.size(1), op,
              ": a and b must have the same dtype and number of columns, but got ", a.dtype(),
              a.sizes(), " and ", b.dtype(), b.sizes());
  const int64_t nnz = indices.size(1);
  Tensor out = make_tensor({nnz}, a.dtype(), a.device());
  const Tensor row = indices.select(0, 0).contiguous();
  const Tensor col = indices.select(0, 1).contiguous();
  int which = 0;
  BadIndex bad = sddmm_stub[a.device()](out, row, col, a.contiguous(), b.contiguous(), which);
  if (bad.found) {
    IGNIS_FAIL(op, ": ", which == 0 ? "row" : "column", " index ", bad.value,
               " is out of bounds for ", which == 0 ? "a" : "b", " of shape ",
               which == 0 ? a.sizes() : b.sizes());
  }
  if (autograd::any_needs_grad({&a, &b})) {
    autograd::record("sddmm", {&a, &b}, {&out},
                     [si = SavedVariable(indices, false), sa = SavedVariable(a, false),
                      sb = SavedVariable(b, false), ra = a.size(0),
                      rb = b.size(0)](BackwardCtx& c, const TensorList& g) {
                       const Tensor idx = c.unpack(si);
                       Tensor ga, gb;
                       if (c.needs_input_grad(0)) ga = sparse_mm(idx, g[0], c.unpack(sb), ra);
                       if (c.needs_input_grad(1)) {
                         gb = sparse_mm(idx.flip({0}), g[0], c.unpack(sa), rb);
                       }
                       return TensorList{ga, gb};
                     });
  }
  return out;
}

// ---- graph utilities

IGNIS_OP(degree, "degree(Tensor index, int num_nodes=-1, *, ScalarType? dtype=None) -> Tensor",
         Tensor(const Tensor&, int64_t, std::optional<DType>), degree, {.kind = "composite"});

Tensor degree(const Tensor& index, int64_t num_nodes, std::optional<DType> dtype) {
  IGNIS_DISPATCH(degree, degree, index, num_nodes, dtype);
  constexpr const char* op = "degree";
  check_index_dtype(index, op);
  IGNIS_CHECK(index.dim() == 1, op, ": expected a 1-D index, but got shape ", index.sizes());
  IGNIS_CHECK(num_nodes >= -1, op, ": num_nodes must be -1 or non-negative, but got ", num_nodes);
  const int64_t n = num_nodes >= 0 ? num_nodes : infer_size(index, op);
  const TensorOptions o = TensorOptions(dtype.value_or(kFloat32)).device(index.device());
  NoGradGuard ng;
  try {
    return zeros({n}, o).index_add(0, index, ones({index.size(0)}, o));
  } catch (const Error& e) {
    IGNIS_FAIL(op, ": ", e.what(), " (num_nodes = ", n, ")");
  }
}

IGNIS_OP(add_self_loops,
         "add_self_loops(Tensor edge_index, Tensor? edge_weight=None, float fill_value=1., "
         "int num_nodes=-1) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, const Tensor&, double, int64_t), add_self_loops,
         {.differentiable = true, .kind = "composite"});

std::tuple<Tensor, Tensor> add_self_loops(const Tensor& edge_index, const Tensor& edge_weight,
                                          double fill_value, int64_t num_nodes) {
  IGNIS_DISPATCH(add_self_loops, add_self_loops, edge_index, edge_weight, fill_value, num_nodes);
  constexpr const char* op = "add_self_loops";
  check_edge_index(edge_index, op);
  IGNIS_CHECK(num_nodes >= -1, op, ": num_nodes must be -1 or non-negative, but got ", num_nodes);
  const int64_t n = num_nodes >= 0 ? num_nodes : infer_size(edge_index, op);
  const int64_t E = edge_index.size(1);
  if (edge_weight.defined()) {
    IGNIS_CHECK(edge_weight.dim() >= 1 && edge_weight.size(0) == E, op,
                ": expected edge_weight with one row per edge (", E, "), but got shape ",
                edge_weight.sizes());
  }
  const Tensor loop = arange(n, TensorOptions(edge_index.dtype()).device(edge_index.device()))
                          .unsqueeze(0)
                          .expand({2, n});
  Tensor ei = cat({edge_index, loop}, 1);
  Tensor w;
  if (edge_weight.defined()) {
    Shape s = edge_weight.sizes().shape();
    s[0] = n;
    w = cat({edge_weight, full(s, fill_value, edge_weight.options())}, 0);
  }
  return {ei, w};
}

IGNIS_OP(gcn_norm,
         "gcn_norm(Tensor edge_index, Tensor? edge_weight=None, int num_nodes=-1, bool "
         "add_self_loops=True) -> (Tensor, Tensor)",
         TensorPair(const Tensor&, const Tensor&, int64_t, bool), gcn_norm,
         {.differentiable = true, .kind = "composite"});

std::tuple<Tensor, Tensor> gcn_norm(const Tensor& edge_index, const Tensor& edge_weight,
                                    int64_t num_nodes, bool self_loops) {
  IGNIS_DISPATCH(gcn_norm, gcn_norm, edge_index, edge_weight, num_nodes, self_loops);
  constexpr const char* op = "gcn_norm";
  check_edge_index(edge_index, op);
  const int64_t n = num_nodes >= 0 ? num_nodes : infer_size(edge_index, op);
  const int64_t E = edge_index.size(1);
  Tensor w = edge_weight;
  if (w.defined()) {
    IGNIS_CHECK(w.dim() == 1 && w.size(0) == E && w.is_floating_point(), op,
                ": expected floating edge_weight of shape [", E, "], but got ", w.dtype(),
                w.sizes());
  } else {
    w = ones({E}, TensorOptions(kFloat32).device(edge_index.device()));
  }
  Tensor ei = edge_index;
  if (self_loops) std::tie(ei, w) = add_self_loops(ei, w, 1.0, n);
  const Tensor row = ei.select(0, 0), col = ei.select(0, 1);
  try {
    const Tensor deg = zeros({n}, w.options()).index_add(0, col, w);
    // deg^-1/2, with 0 for isolated nodes (the mask keeps the gradient finite there).
    Tensor pos;
    {
      NoGradGuard ng;
      pos = deg.gt(0);
    }
    const Tensor dis = where(pos, where(pos, deg, 1.0).pow(-0.5), 0.0);
    return {ei, dis.index_select(0, row) * w * dis.index_select(0, col)};
  } catch (const Error& e) {
    IGNIS_FAIL(op, ": edge_index does not fit num_nodes = ", n, ": ", e.what());
  }
}

}  // namespace ignis
