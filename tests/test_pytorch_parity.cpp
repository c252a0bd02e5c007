// ignis against PyTorch's own values at the edges. tests/pytorch/gen_unary_cases.py records
// torch's outputs and gradients of every floating unary op (ignis/float_unary_ops.def) at edge
// inputs (signed zeros, domain edges, overflow points, +-inf, NaN) in float32 and float64, into
// tests/data/pytorch_unary_cases.txt, with the exact values (mpmath); this test runs each op
// through the registry by name and compares: NaN where torch gives NaN, the same infinity, the
// sign of a zero, and finite values within a few units in the last place of the dtype of torch's
// value or of the exact one (torch's float erfinv is off by ~1e-5 near 1; ignis is not).
#include <cmath>
#include <fstream>
#include <sstream>

#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

struct UnaryCase {
  std::string op;
  DType dtype = kFloat32;
  std::vector<double> x, y, grad, exact_y, exact_grad;  // exact: NaN where unknown
};

std::vector<double> parse_values(const std::string& s) {
  std::vector<double> v;
  std::istringstream in(s);
  std::string tok;
  while (in >> tok) {  // "nan", "inf", "-inf"; "none" (no exact value) as NaN
    v.push_back(tok == "none" ? std::nan("") : std::strtod(tok.c_str(), nullptr));
  }
  return v;
}

std::vector<UnaryCase> load_cases() {
  const std::string path = std::string(IGNIS_SOURCE_DIR) + "/tests/data/pytorch_unary_cases.txt";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<UnaryCase> cases;
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
    EXPECT_EQ(parts.size(), 6u) << line;
    if (parts.size() != 6) continue;
    UnaryCase c;
    std::istringstream head(parts[0]);
    std::string dtype;
    head >> c.op >> dtype;
    c.dtype = dtype == "float64" ? kFloat64 : kFloat32;
    c.x = parse_values(parts[1]);
    c.y = parse_values(parts[2]);
    c.grad = parse_values(parts[3]);
    c.exact_y = parse_values(parts[4]);  // "none" parses as 0 with no digits: NaN below
    c.exact_grad = parse_values(parts[5]);
    EXPECT_TRUE(c.x.size() == c.y.size() && c.x.size() == c.grad.size() &&
                c.x.size() == c.exact_y.size() && c.x.size() == c.exact_grad.size())
        << line;
    cases.push_back(std::move(c));
  }
  return cases;
}

/// "" when `got` matches torch's `want`: both NaN, the same infinity, zeros of the same sign,
/// or finite values within `ulps` units in the last place of the dtype (relative), or within
/// the dtype's smallest normal magnitude (results that torch and ignis both flush toward 0).
std::string mismatch(double got, double want, DType dt, double ulps) {
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

std::string fmt(double v) {
  std::ostringstream s;
  s.precision(17);
  s << v;
  return s.str();
}

TEST(PyTorchParity, FloatUnaryOpsMatchTorchAtTheEdges) {
  const std::vector<UnaryCase> cases = load_cases();
  ASSERT_EQ(cases.size(), 52u);  // 26 ops x (float32, float64)
  for (const UnaryCase& c : cases) {
    SCOPED_TRACE(c.op + " " + std::string(dtype_name(c.dtype)));
    ASSERT_NE(op::find(c.op), nullptr) << "no record named " << c.op;
    const int64_t n = static_cast<int64_t>(c.x.size());
    Tensor x = tensor(c.x, c.dtype).requires_grad_(true);
    const std::vector<op::IValue> out = op::call_boxed(c.op, {x});
    ASSERT_EQ(out.size(), 1u);
    const Tensor y = out[0].get<Tensor>();
    const Tensor g = autograd::grad({y.sum()}, {x})[0];
    const std::vector<double> yv = vals(y), gv = vals(g);
    for (int64_t i = 0; i < n; ++i) {
      // Finite values may match the exact value instead of torch's.
      const auto check = [&](double got, double torch_v, double exact_v, double ulps) {
        const std::string e = mismatch(got, torch_v, c.dtype, ulps);
        if (e.empty() || !std::isfinite(torch_v) || std::isnan(exact_v)) return e;
        return mismatch(got, exact_v, c.dtype, ulps).empty() ? std::string() : e;
      };
      const std::string e = check(yv[i], c.y[i], c.exact_y[i], 8);
      EXPECT_EQ(e, "") << c.op << "(" << fmt(c.x[i]) << ") = " << fmt(yv[i]) << ", torch "
                       << fmt(c.y[i]);
      const std::string eg = check(gv[i], c.grad[i], c.exact_grad[i], 16);
      EXPECT_EQ(eg, "") << c.op << "'(" << fmt(c.x[i]) << ") = " << fmt(gv[i]) << ", torch "
                        << fmt(c.grad[i]);
    }
  }
}

}  // namespace
}  // namespace ignis
