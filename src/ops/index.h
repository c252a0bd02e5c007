// Indexing and joining ops: kernel stubs and the helpers their front ends share.
// Kernels never throw from a parallel region: an out-of-range index is reported back as a
// BadIndex and the front end throws a message naming the op, the value, the dim and its size.
#pragma once

#include <array>
#include <optional>

#include "core/dispatch.h"
#include "core/tensor_iter.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"

namespace ignis {

/// The first out-of-range index a kernel met (found == false when all were in range).
struct BadIndex {
  bool found = false;
  int64_t value = 0;
};

/// How a kernel checks index values against the indexed dim's size.
struct IndexBounds {
  int64_t size = 0;   // valid range [0, size), or [-size, size) with wrap
  bool wrap = false;  // negative values count from the end (advanced indexing)
  bool check = true;  // false: values are already checked (precomputed offsets)
};

/// out = *(src + index * stride) over `it` = (out, src restrided, index restrided): the src
/// operand has stride 0 along the indexed dim; `stride` is that dim's stride in bytes.
/// Serves index_select, gather and advanced indexing. dt gives only the element size.
using IndexGatherFn = BadIndex (*)(const TensorIter& it, DType dt, DType index_dt, int64_t stride,
                                   IndexBounds b);
IGNIS_DECLARE_STUB(index_gather_stub, IndexGatherFn);

/// *(dst + index * stride) = src (or += with accumulate) over `it` = (dst restrided, src,
/// index). Accumulation runs serially (duplicate indices); assignment in parallel.
using IndexPutFn = BadIndex (*)(const TensorIter& it, DType dt, DType index_dt, int64_t stride,
                                IndexBounds b, bool accumulate);
IGNIS_DECLARE_STUB(index_put_stub, IndexPutFn);

/// scatter / scatter_add along one dim. `it` = (self, index, src) restrided so that the scatter
/// dim has size 1; each element of `it` is a whole line along the dim, of `line` elements, walked
/// with the byte strides below. Lines never overlap in self, so they run in parallel.
struct ScatterArgs {
  int64_t line = 0;
  int64_t self_stride = 0;   // bytes, self along dim
  int64_t index_stride = 0;  // bytes, index along dim
  int64_t src_stride = 0;    // bytes, src along dim
  IndexBounds bounds;
  bool accumulate = false;
};
using ScatterFn = BadIndex (*)(const TensorIter& it, DType dt, DType index_dt,
                               const ScatterArgs& a);
IGNIS_DECLARE_STUB(scatter_stub, ScatterFn);

/// self.index_add_(dim, index, source, alpha) in place; index is 1-D contiguous.
using IndexAddFn = BadIndex (*)(const Tensor& self, int64_t dim, const Tensor& index,
                                const Tensor& source, Scalar alpha);
IGNIS_DECLARE_STUB(index_add_stub, IndexAddFn);

/// out = mask ? value : x over `it` = (out, x, mask as bool).
using MaskedFillFn = void (*)(const TensorIter& it, DType dt, Scalar value);
IGNIS_DECLARE_STUB(masked_fill_stub, MaskedFillFn);

/// The elements of x (contiguous) where mask (contiguous bool, same shape) is true, as a new
/// 1-D tensor.
using MaskedSelectFn = Tensor (*)(const Tensor& x, const Tensor& mask);
IGNIS_DECLARE_STUB(masked_select_stub, MaskedSelectFn);

/// The multi-indices of the nonzero elements of x (contiguous), as a new int64 [n, dim] tensor.
using NonzeroFn = Tensor (*)(const Tensor& x);
IGNIS_DECLARE_STUB(nonzero_stub, NonzeroFn);

/// out (int64, zeroed) [..., classes]: out[..., index] = 1. index int64/int32, checked.
using OneHotFn = BadIndex (*)(const Tensor& out, const Tensor& index, int64_t classes);
IGNIS_DECLARE_STUB(one_hot_stub, OneHotFn);

/// Min and max of an integer tensor (one_hot's num_classes inference).
using MinMaxFn = std::pair<int64_t, int64_t> (*)(const Tensor& index);
IGNIS_DECLARE_STUB(int_minmax_stub, MinMaxFn);

/// out (int64, contiguous, the indices' shape) = sum_k wrap(idx[k]) * strides[k], every idx[k]
/// int64 contiguous of out's shape and checked against sizes[k]; bad_k names the failing one.
using LinearIndexFn = BadIndex (*)(const Tensor& out, const std::vector<Tensor>& idx,
                                   const std::vector<int64_t>& strides,
                                   const std::vector<int64_t>& sizes, int64_t& bad_k);
IGNIS_DECLARE_STUB(linear_index_stub, LinearIndexFn);

/// out (int64, contiguous) = 0, 1, 2, ...
using IotaFn = void (*)(const Tensor& out);
IGNIS_DECLARE_STUB(iota_stub, IotaFn);

// ---- joining (kernels in cpu/join_kernels.cpp)

/// out (contiguous) = cat(inputs, dim); every input contiguous with out's dtype.
using CatFn = void (*)(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim);
IGNIS_DECLARE_STUB(cat_stub, CatFn);

/// out (contiguous) = x with the dims in `flip` (a mask per dim) reversed.
using FlipFn = void (*)(const Tensor& out, const Tensor& x, const std::vector<bool>& flip);
IGNIS_DECLARE_STUB(flip_stub, FlipFn);

/// out (contiguous) = tril (lower) or triu of x (contiguous) over its last two dims.
using TriFn = void (*)(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower);
IGNIS_DECLARE_STUB(tri_stub, TriFn);

// ---- helpers shared by the front ends

/// Throws unless `index` has an integer index dtype (int64 or int32).
void check_index_dtype(const Tensor& index, const char* op);
/// Throws the standard out-of-range message when the kernel reported a bad index.
void throw_if_bad(const BadIndex& b, const char* op, int64_t dim, int64_t size);
/// A view of t with new sizes and strides (shares storage; no autograd).
Tensor restride(const Tensor& t, IntArrayRef sizes, IntArrayRef strides);
/// The strides (in elements) of t viewed as [outer, size(dim), inner], or nullopt when t's
/// layout does not allow that view. A 0-d tensor is [1, 1, 1].
std::optional<std::array<int64_t, 3>> collapse3(const Tensor& t, int64_t dim);

/// Advanced indexing of `self` (already basic-indexed) by integer tensors at some of its dims.
struct AdvancedIndex {
  std::vector<int64_t> dims;    // indexed dims of self, increasing
  std::vector<Tensor> indices;  // int64/int32, one per dim, broadcast to `shape`
  Shape shape;                  // the broadcast shape of the indices
  bool adjacent = true;         // indexed dims consecutive: the result keeps them in place
};
/// The shape of self.index(adv).
Shape advanced_result_shape(IntArrayRef self_sizes, const AdvancedIndex& adv);
/// self gathered by adv (differentiable in self).
Tensor advanced_gather(const Tensor& self, const AdvancedIndex& adv);
/// Writes (or accumulates) `values` (broadcast to the result shape) into `self` at adv, in
/// place, without autograd.
void advanced_put_(const Tensor& self, const AdvancedIndex& adv, const Tensor& values,
                   bool accumulate);
/// zeros(shape) with `values` accumulated at adv (differentiable in values): the backward of
/// advanced_gather.
Tensor advanced_put_zeros(IntArrayRef shape, const AdvancedIndex& adv, const Tensor& values);

}  // namespace ignis
