// What the CUDA test programs (tests/test_cuda*.cpp) share: the GPU they run on, the skip that
// names why there is none, and the comparison of a GPU result with the CPU's (the oracle).
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ignis/cuda.h"
#include "ignis/ignis.h"

namespace ignis::testing {

inline const Device kGpu(DeviceType::CUDA, 0);

/// Skips the test, naming the reason, where no GPU is available.
#define REQUIRE_GPU()                                                                    \
  do {                                                                                   \
    if (!::ignis::cuda::is_available())                                                  \
      GTEST_SKIP() << "no GPU: " << ::ignis::cuda::unavailable_reason();                 \
  } while (0)

/// gpu (on the GPU) equals cpu: same shape and dtype; values within atol + rtol * |cpu| (NaN
/// where cpu has NaN, equal infinities), bitwise for integers and bool.
inline void expect_matches(const Tensor& gpu, const Tensor& cpu, double rtol, double atol,
                           const std::string& what) {
  ASSERT_TRUE(gpu.defined() && cpu.defined()) << what;
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const Tensor back = gpu.detach().cpu();
  const Tensor want = cpu.detach();
  ASSERT_EQ(back.sizes(), want.sizes()) << what;
  ASSERT_EQ(back.dtype(), want.dtype()) << what;
  if (!want.is_floating_point()) {
    EXPECT_TRUE(equal(back, want)) << what << "\ngpu: " << back << "\ncpu: " << want;
    return;
  }
  EXPECT_TRUE(allclose(back.to(kFloat64), want.to(kFloat64), rtol, atol, /*equal_nan=*/true))
      << what << "\ngpu: " << back << "\ncpu: " << want;
}

/// Sample inputs of one dtype: a dense 2-d tensor, its transpose (strided), a 0-d tensor and an
/// empty one; floats include signed zeros (and a large value), integers negative ones.
inline std::vector<Tensor> cuda_samples(DType dt) {
  Tensor base;
  if (dt == kBool) {
    base = tensor(std::vector<int64_t>{0, 1, 1, 0, 1, 0}).reshape({2, 3}).to(kBool);
  } else if (is_floating_point(dt)) {
    base = tensor(std::vector<double>{-2.5, -0.0, 0.0, 0.75, 3.0, 1e4}, kFloat64)
               .reshape({2, 3})
               .to(dt);
  } else {
    base = tensor(std::vector<int64_t>{-7, 0, 3, 5, 2, 9}).reshape({2, 3});
    base = (dt == kUInt8 ? base.abs() : base).to(dt);
  }
  return {base, base.t(), base.flatten()[1], base.narrow(1, 0, 0)};
}

}  // namespace ignis::testing
