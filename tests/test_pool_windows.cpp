// The pooling windows shared by the CPU and CUDA kernels (ops/pool_windows.h): the clipped
// windows, and their inverse, the outputs holding each input position, which the CUDA max-pool
// backward gathers over (every position of every window must be found in its output range).
#include <gtest/gtest.h>

#include <string>

#include "ops/pool_windows.h"

using namespace ignis;

namespace {

// A window dim as the pooling ops build it: output o starts at o * stride - pad and holds
// `kernel` positions `dilation` apart (ceil_mode: outputs whose window starts inside the input
// or the left padding are kept).
PoolDim strided(int64_t in, int64_t kernel, int64_t stride, int64_t pad, int64_t dilation,
                bool ceil_mode) {
  PoolDim d;
  d.in = in;
  d.step = dilation;
  const int64_t span = dilation * (kernel - 1) + 1, room = in + 2 * pad - span;
  int64_t out = (ceil_mode ? room + stride - 1 : room) / stride + 1;
  if (ceil_mode && (out - 1) * stride >= in + pad) --out;
  for (int64_t o = 0; o < out; ++o) {
    d.start.push_back(o * stride - pad);
    d.count.push_back(kernel);
    d.div.push_back(kernel);
  }
  return d;
}

// Adaptive pooling's windows: [floor(o in / out), ceil((o + 1) in / out)), overlapping.
PoolDim adaptive(int64_t in, int64_t out) {
  PoolDim d;
  d.in = in;
  for (int64_t o = 0; o < out; ++o) {
    const int64_t a = o * in / out, b = ((o + 1) * in + out - 1) / out;
    d.start.push_back(a);
    d.count.push_back(b - a);
    d.div.push_back(b - a);
  }
  return d;
}

void expect_inverse_holds_every_window(const PoolDim& d, const std::string& what) {
  const Clipped c(d);
  const ClippedInverse inv(c, d.in);
  ASSERT_EQ(inv.lo.size(), static_cast<size_t>(d.in)) << what;
  std::vector<int> seen(static_cast<size_t>(d.in), 0);
  for (int64_t o = 0; o < d.out(); ++o) {
    for (int64_t j = 0; j < c.n[o]; ++j) {
      const int64_t i = c.first[o] + j * c.step;
      ASSERT_GE(i, 0) << what;
      ASSERT_LT(i, d.in) << what;
      EXPECT_LE(inv.lo[i], o) << what << ": input " << i << ", output " << o;
      EXPECT_GE(inv.hi[i], o) << what << ": input " << i << ", output " << o;
      seen[static_cast<size_t>(i)] = 1;
    }
  }
  // The ranges are tight at their ends: lo and hi themselves span the position.
  for (int64_t i = 0; i < d.in; ++i) {
    if (inv.lo[i] > inv.hi[i]) continue;
    for (const int64_t o : {inv.lo[i], inv.hi[i]}) {
      EXPECT_LE(c.first[o], i) << what << ": input " << i;
      EXPECT_GE(c.first[o] + (c.n[o] - 1) * c.step, i) << what << ": input " << i;
    }
  }
  // Without dilation every position some window holds has a range, and others none.
  if (d.step == 1) {
    for (int64_t i = 0; i < d.in; ++i)
      EXPECT_EQ(inv.lo[i] <= inv.hi[i], seen[static_cast<size_t>(i)] == 1) << what << ": " << i;
  }
}

}  // namespace

TEST(PoolWindows, TheInverseFindsEveryWindowHoldingAPosition) {
  for (int64_t in : {1, 5, 7, 12, 56, 112}) {
    for (int64_t kernel : {1, 2, 3, 5}) {
      for (int64_t stride : {1, 2, 3}) {
        for (int64_t dilation : {1, 2}) {
          for (bool ceil_mode : {false, true}) {
            for (int64_t pad = 0; pad <= kernel / 2; ++pad) {
              if (dilation * (kernel - 1) + 1 > in + 2 * pad) continue;
              expect_inverse_holds_every_window(
                  strided(in, kernel, stride, pad, dilation, ceil_mode),
                  "in " + std::to_string(in) + " k " + std::to_string(kernel) + " s " +
                      std::to_string(stride) + " p " + std::to_string(pad) + " d " +
                      std::to_string(dilation) + (ceil_mode ? " ceil" : ""));
            }
          }
        }
      }
    }
  }
  for (int64_t in : {1, 5, 7, 10, 13})
    for (int64_t out : {1, 2, 3, 4, 7})
      expect_inverse_holds_every_window(adaptive(in, out), "adaptive " + std::to_string(in) +
                                                               " -> " + std::to_string(out));
}

TEST(PoolWindows, APositionNoWindowHoldsHasAnEmptyRange) {
  // Stride 3 with a kernel of 1: positions 1, 2, 4, 5 are skipped.
  const PoolDim d = strided(6, 1, 3, 0, 1, false);
  const ClippedInverse inv(Clipped(d), d.in);
  const int64_t lo[] = {0, 1, 1, 1, 1, 1}, hi[] = {0, 0, 0, 1, 0, 0};
  for (int64_t i = 0; i < 6; ++i) {
    EXPECT_EQ(inv.lo[i], lo[i]) << i;
    EXPECT_EQ(inv.hi[i], hi[i]) << i;
  }
}
