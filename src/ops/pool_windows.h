// Pooling windows with the positions outside the input removed, shared by the CPU and CUDA
// pooling kernels.
#pragma once

#include <cstdint>
#include <vector>

#include "ops/pool.h"

namespace ignis {

/// A window dim with the positions outside the input removed, so the inner loops need no bounds
/// checks: window o covers n[o] positions first[o], first[o] + step, ...
struct Clipped {
  std::vector<int64_t> first, n;
  std::vector<double> div;
  int64_t step;
  explicit Clipped(const PoolDim& d) : step(d.step) {
    for (int64_t o = 0; o < d.out(); ++o) {
      int64_t i0 = 0;
      while (i0 < d.count[o] && d.start[o] + i0 * d.step < 0) ++i0;
      int64_t i1 = d.count[o];
      while (i1 > i0 && d.start[o] + (i1 - 1) * d.step >= d.in) --i1;
      first.push_back(d.start[o] + i0 * d.step);
      n.push_back(i1 - i0);
      div.push_back(static_cast<double>(d.div[o]));
    }
  }
};

/// The inverse of a clipped dim: for each input position i, the range [lo[i], hi[i]] of the
/// outputs whose window holds it (lo > hi: none). Windows move forward with the output, so the
/// outputs holding a position are contiguous; with dilation the range may also hold windows that
/// step over i, which a gathering backward tells apart by the argmax index.
struct ClippedInverse {
  std::vector<int64_t> lo, hi;
  ClippedInverse(const Clipped& c, int64_t in) : lo(static_cast<size_t>(in), 1), hi(static_cast<size_t>(in), 0) {
    for (int64_t o = 0; o < static_cast<int64_t>(c.first.size()); ++o) {
      if (c.n[o] == 0) continue;
      const int64_t last = c.first[o] + (c.n[o] - 1) * c.step;
      for (int64_t i = c.first[o]; i <= last && i < in; ++i) {
        if (i < 0) continue;
        if (lo[i] > hi[i]) lo[i] = o;
        hi[i] = o;
      }
    }
  }
};

}  // namespace ignis
