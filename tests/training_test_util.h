// Helpers shared by the training-stack tests (nn modules, losses, init, MNIST, checkpoints).
#pragma once

#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <fstream>
#include <functional>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis::testing_util {

using ignis::error_of;  // test_util.h

/// The values of t, converted to double, in row-major order.
inline std::vector<double> to_vec(const Tensor& t) { return vals(t); }

/// Expects t (any floating dtype) to hold `want` elementwise within atol + rtol * |want|.
inline void expect_values(const Tensor& t, const std::vector<double>& want, double atol = 1e-6,
                          double rtol = 0, const std::string& what = "") {
  const std::vector<double> got = to_vec(t);
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], want[i], atol + rtol * std::abs(want[i])) << what << " element " << i;
  }
}

/// A path in /tmp unique to this process.
inline std::string tmp_path(const std::string& name) {
  return "/tmp/ignis_t3_" + std::to_string(::getpid()) + "_" + name;
}

inline void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary | std::ios::trunc);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

inline std::string read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  std::ostringstream os;
  os << f.rdbuf();
  return os.str();
}

}  // namespace ignis::testing_util
