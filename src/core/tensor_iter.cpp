#include "core/tensor_iter.h"

#include <algorithm>

namespace ignis {

TensorIter TensorIter::build(const Tensor& out, std::initializer_list<const Tensor*> inputs) {
  TensorIter it;
  it.ntensors = static_cast<int>(inputs.size()) + 1;
  IGNIS_CHECK(it.ntensors <= kMaxOperands, "TensorIter: too many operands");
  const int64_t nd = out.dim();
  it.numel = out.numel();
  it.device = out.device();  // the front ends check that every operand is on it
  // Fast path: every operand contiguous with the output's shape -- one flat dim.
  bool flat = out.is_contiguous();
  for (const Tensor* t : inputs) {
    flat = flat && t->is_contiguous() && t->sizes().equals(out.sizes());
  }
  if (flat) {
    it.ndim = 1;
    it.shape.assign(size_t{1}, it.numel);
    it.strides[0].assign(size_t{1}, static_cast<int64_t>(out.element_size()));
    it.data[0] = out.impl()->data();
    int k = 1;
    for (const Tensor* t : inputs) {
      it.strides[k].assign(size_t{1}, static_cast<int64_t>(t->element_size()));
      it.data[k++] = t->impl()->data();
    }
    return it;
  }
  // Reverse order: innermost dim first.
  Shape shape(nd);
  for (int64_t d = 0; d < nd; ++d) shape[d] = out.sizes()[nd - 1 - d];
  const Tensor* ops[kMaxOperands];
  ops[0] = &out;
  int k = 1;
  for (const Tensor* t : inputs) ops[k++] = t;
  for (int i = 0; i < it.ntensors; ++i) {
    const Tensor& t = *ops[i];
    const int64_t es = static_cast<int64_t>(t.element_size());
    const int64_t tnd = t.dim();
    Shape st(nd, 0);
    for (int64_t d = 0; d < tnd; ++d) {
      int64_t size = t.sizes()[tnd - 1 - d];
      // Broadcast dims (size 1 against a larger output) get stride 0.
      st[d] = (size == 1 && shape[d] != 1) ? 0 : t.strides()[tnd - 1 - d] * es;
    }
    it.strides[i] = std::move(st);
    it.data[i] = t.impl()->data();
  }
  // A non-contiguous output (a channels-last result, a transposed destination): iterate its dims
  // in its memory order, innermost (smallest stride) first, so that its writes are sequential
  // and operands sharing its layout merge into one flat dim. Elementwise results do not depend
  // on the order.
  if (!out.is_contiguous()) {
    Shape perm(nd);
    for (int64_t d = 0; d < nd; ++d) perm[d] = d;
    const Shape& os = it.strides[0];
    std::stable_sort(perm.begin(), perm.end(), [&](int64_t a, int64_t b) {
      return os[a] < os[b];
    });
    Shape sh(nd);
    for (int64_t d = 0; d < nd; ++d) sh[d] = shape[perm[d]];
    shape = std::move(sh);
    for (int i = 0; i < it.ntensors; ++i) {
      Shape st(nd);
      for (int64_t d = 0; d < nd; ++d) st[d] = it.strides[i][perm[d]];
      it.strides[i] = std::move(st);
    }
  }
  // Drop size-1 dims, then merge dim d+1 into d when every operand is contiguous across them.
  int64_t w = 0;
  for (int64_t d = 0; d < nd; ++d) {
    if (shape[d] == 1) continue;
    if (w > 0) {
      bool mergeable = true;
      for (int i = 0; i < it.ntensors; ++i) {
        if (it.strides[i][w - 1] * shape[w - 1] != it.strides[i][d]) {
          mergeable = false;
          break;
        }
      }
      if (mergeable) {
        shape[w - 1] *= shape[d];
        continue;
      }
    }
    shape[w] = shape[d];
    for (int i = 0; i < it.ntensors; ++i) it.strides[i][w] = it.strides[i][d];
    ++w;
  }
  if (w == 0) {  // all dims of size 1 (or a 0-d tensor): one element
    shape.resize(1);
    shape[0] = it.numel;
    for (int i = 0; i < it.ntensors; ++i) it.strides[i].assign(size_t{1}, int64_t{0});
    w = 1;
  }
  shape.resize(w);
  for (int i = 0; i < it.ntensors; ++i) it.strides[i].resize(w);
  it.shape = std::move(shape);
  it.ndim = static_cast<int>(w);
  return it;
}

bool TensorIter::is_contiguous(std::initializer_list<size_t> elem_sizes) const {
  if (ndim != 1) return ndim == 0;
  int i = 0;
  for (size_t es : elem_sizes) {
    if (strides[i][0] != static_cast<int64_t>(es) && shape[0] > 1) return false;
    ++i;
  }
  return true;
}

}  // namespace ignis
