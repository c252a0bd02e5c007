// What the graph-mode fusion tests share: uniform inputs, closeness with a useful message, and a
// guard choosing the fusion backend.
#pragma once

#include <gtest/gtest.h>

#include <string>

#include "ignis/ignis.h"

namespace ignis::testing {

inline Tensor uniform(IntArrayRef shape, double lo, double hi, DType dt = kFloat32) {
  return (rand(shape, kFloat64) * (hi - lo) + lo).to(dt);
}

/// a and b of one shape and dtype, equal within `tol` (absolute and relative; NaNs equal).
inline void expect_close(const Tensor& a, const Tensor& b, double tol, const std::string& what) {
  ASSERT_TRUE(a.sizes().equals(b.sizes())) << what << ": " << a.sizes() << " vs " << b.sizes();
  ASSERT_EQ(a.dtype(), b.dtype()) << what;
  EXPECT_TRUE(allclose(a, b, tol, tol, /*equal_nan=*/true))
      << what << ": max |diff| " << (a.to(kFloat64) - b.to(kFloat64)).abs().max().item<double>();
}

/// The fusion backends a test runs both ways.
inline constexpr const char* kBackends[] = {"interpreter", "compiler"};

/// Chooses a fusion backend ("compiler", "interpreter") and restores "auto" after.
struct Backend {
  explicit Backend(const std::string& b) { jit::set_fusion_backend(b); }
  ~Backend() { jit::set_fusion_backend("auto"); }
};

}  // namespace ignis::testing
