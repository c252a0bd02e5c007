// Helpers shared by the tests: the message of the ignis::Error a call throws, and a tensor's
// values as float64.
#pragma once

#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "ignis/ignis.h"

namespace ignis {

/// The message of the ignis::Error that f() throws; a test failure (and "") if it throws none.
template <class F>
std::string error_of(F&& f) {
  try {
    f();
  } catch (const Error& e) {
    return e.what();
  }
  ADD_FAILURE() << "expected an ignis::Error";
  return "";
}

/// t's elements in row-major order, as float64.
inline std::vector<double> vals(const Tensor& t) {
  Tensor c = t.detach().to(kFloat64).contiguous();
  return std::vector<double>(c.data_ptr<double>(), c.data_ptr<double>() + c.numel());
}

}  // namespace ignis
