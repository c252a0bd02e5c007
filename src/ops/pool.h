// Pooling kernel stubs and the window geometry they share (private). Every pooling op is a window
// per output position along each spatial dim: `count` input positions from `start` on, `step` apart
// (dilation; 1 for adaptive pooling); positions outside the input are skipped.
#pragma once

#include <cstdint>
#include <vector>

#include "core/dispatch.h"
#include "ignis/tensor.h"

namespace ignis {

struct PoolDim {
  int64_t in = 0;  // the input size
  std::vector<int64_t> start, count,
      div;  // per output position; div: the averaging divisor
  int64_t step = 1;
  int64_t out() const { return static_cast<int64_t>(start.size()); }
};

/// The windows of a 2-d pooling: rows (height) and columns (width).
struct PoolGeom {
  PoolDim h, w;
};

/// out [N, C, Ho, Wo] = window maxima of x [N, C, H, W] (dense); indices (int64, h * W + w in each
/// plane) written when defined.
using MaxPoolFn = void (*)(const Tensor& out, const Tensor& indices, const Tensor& x,
                           const PoolGeom& g);
/// gx [N, C, H, W] = zeros with gy scattered (added) at the indices; g: the forward's windows
/// (a kernel may gather each input's gradient over the windows that contain it instead).
using MaxPoolBwdFn = void (*)(const Tensor& gx, const Tensor& gy, const Tensor& indices,
                              const PoolGeom& g);
/// out = window sums divided by div_h * div_w.
using AvgPoolFn = void (*)(const Tensor& out, const Tensor& x, const PoolGeom& g);
/// gx = the transpose of AvgPoolFn applied to gy.
using AvgPoolBwdFn = void (*)(const Tensor& gx, const Tensor& gy, const PoolGeom& g);

IGNIS_DECLARE_STUB(max_pool2d_stub, MaxPoolFn);
IGNIS_DECLARE_STUB(max_pool2d_backward_stub, MaxPoolBwdFn);
IGNIS_DECLARE_STUB(avg_pool2d_stub, AvgPoolFn);
IGNIS_DECLARE_STUB(avg_pool2d_backward_stub, AvgPoolBwdFn);

}  // namespace ignis
