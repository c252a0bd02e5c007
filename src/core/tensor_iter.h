// TensorIter: the iteration space of an elementwise op. Operands (output first) are broadcast to
// the output's shape, their strides become byte strides (0 along broadcast dims), and adjacent
// dims that are contiguous in every operand are merged, so most ops run as one flat loop.
// Device-independent: CPU loops (cpu/loops.h) and later CUDA kernels consume it.
#pragma once

#include <array>

#include "core/tensor_impl.h"

namespace ignis {

struct TensorIter {
  static constexpr int kMaxOperands = 4;
  int ntensors = 0;
  int ndim = 0;                                // after merging; dim 0 is the innermost
  Shape shape;                                 // innermost first
  std::array<Shape, kMaxOperands> strides;     // bytes, innermost first
  std::array<char*, kMaxOperands> data{};
  int64_t numel = 0;
  Device device;  // where every operand lives (a kernel launches on it)

  /// Iterates out (already allocated with the broadcast shape) and inputs.
  static TensorIter build(const Tensor& out, std::initializer_list<const Tensor*> inputs);
  /// The iteration space of contiguous same-shape out, a, b: one flat row (the caller checked).
  static TensorIter flat(const TensorImpl& out, const TensorImpl& a, const TensorImpl& b) {
    TensorIter it;
    it.ntensors = 3;
    it.ndim = 1;
    it.numel = out.numel();
    it.device = out.device();
    it.shape.assign(size_t{1}, it.numel);
    it.strides[0].assign(size_t{1}, static_cast<int64_t>(element_size(out.dtype())));
    it.strides[1].assign(size_t{1}, static_cast<int64_t>(element_size(a.dtype())));
    it.strides[2].assign(size_t{1}, static_cast<int64_t>(element_size(b.dtype())));
    it.data[0] = out.data();
    it.data[1] = a.data();
    it.data[2] = b.data();
    return it;
  }
  /// True when every operand is dense in memory with its element size (a flat loop).
  bool is_contiguous(std::initializer_list<size_t> elem_sizes) const;
};

}  // namespace ignis
