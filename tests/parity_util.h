// Reading the PyTorch parity data (tests/data/pytorch_*_cases.txt, written offline by the
// generators under tests/pytorch/ with Debian's python3-torch) and comparing at the edges.
#pragma once

#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/dtype.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis::parity {

/// Numbers separated by spaces: "nan", "inf", "-inf"; "none" (no exact value known) as NaN.
inline std::vector<double> parse_values(const std::string& s) {
  std::vector<double> v;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) v.push_back(tok == "none" ? std::nan("") : std::strtod(tok.c_str(), nullptr));
  return v;
}

/// The case lines of tests/data/<file> (blank lines and '#' comments skipped), each split at
/// " | " into its fields; a line with another number of fields than `fields` is a test failure
/// and left out.
inline std::vector<std::vector<std::string>> case_lines(const std::string& file, size_t fields) {
  const std::string path = std::string(IGNIS_SOURCE_DIR) + "/tests/data/" + file;
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<std::vector<std::string>> lines;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::vector<std::string> parts;
    for (size_t start = 0;;) {
      const size_t bar = line.find(" | ", start);
      parts.push_back(line.substr(start, bar == std::string::npos ? bar : bar - start));
      if (bar == std::string::npos) break;
      start = bar + 3;
    }
    EXPECT_EQ(parts.size(), fields) << line;
    if (parts.size() == fields) lines.push_back(std::move(parts));
  }
  return lines;
}

/// "" when `got` matches `want`: both NaN, the same infinity, zeros of the same sign, or finite
/// values within `ulps` units in the last place of the dtype (relative), or within the dtype's
/// smallest normal magnitude (results that torch and ignis both flush toward 0).
inline std::string mismatch(double got, double want, DType dt, double ulps) {
  if (std::isnan(want)) return std::isnan(got) ? "" : "expected NaN";
  if (std::isinf(want)) return got == want ? "" : "expected " + std::to_string(want);
  if (want == 0 && got == 0) {
    return std::signbit(got) == std::signbit(want) ? "" : "zero of the other sign";
  }
  const double eps = dt == kFloat64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
  const double tiny = dt == kFloat64 ? 2.2250738585072014e-308 : 1.1754943508222875e-38;
  const double err = std::fabs(got - want);
  return std::isfinite(got) && err <= tiny + ulps * eps * std::fabs(want) ? "" : "too far";
}

/// A value with all 17 significant digits, for messages.
inline std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

}  // namespace ignis::parity
