// The resampling kernel of interpolate (defined in ops/interpolate.cpp, kernels per device in
// cpu/interpolate_kernels.cpp).
#pragma once

#include <vector>

#include "core/dispatch.h"
#include "ignis/tensor.h"

namespace ignis {

/// Where output index o of one spatial dim reads: source indices i0[o], i1[o] and the weight
/// lam[o] of i1 (bilinear: (1 - lam) * x[i0] + lam * x[i1]; nearest: x[i0]).
struct ResampleTable {
  std::vector<int64_t> i0, i1;
  std::vector<double> lam;
};

/// out [P, OH, OW] from x [P, H, W], both contiguous, with one table per spatial dim.
using ResampleFn = void (*)(const Tensor& out, const Tensor& x, const ResampleTable& h,
                            const ResampleTable& w, bool bilinear);
IGNIS_DECLARE_STUB(resample2d_stub, ResampleFn);
/// The transpose: grad_x [P, H, W] (overwritten) from grad [P, OH, OW], both contiguous.
using ResampleBackwardFn = void (*)(const Tensor& grad_x, const Tensor& grad,
                                    const ResampleTable& h, const ResampleTable& w, bool bilinear);
IGNIS_DECLARE_STUB(resample2d_backward_stub, ResampleBackwardFn);

/// interpolate's mode "bicubic" on x [N, C, H, W] (checked) to out = {OH, OW}; scale: the source
/// to output coordinate ratio per dim (in / out, or 1 / scale_factor).
Tensor interpolate_bicubic(const Tensor& x, const std::vector<int64_t>& out,
                          const std::vector<double>& scale, bool align_corners);

}  // namespace ignis
