// ignis against PyTorch's own values at the edges, for the activations with parameters and the
// binary math ops. tests/pytorch/gen_activation_cases.py records torch's outputs and gradients of
// elu, selu, celu, hardtanh, relu6, hardswish, hardsigmoid, mish, log_sigmoid, square, trunc,
// atan2, fmod and remainder at edge inputs (signed zeros, kinks, overflow points, +-inf, NaN;
// every pair of edge values for the binary ops) in float32 and float64, with the exact values
// (mpmath), into tests/data/pytorch_activation_cases.txt. This test calls each op through the
// registry by name and compares: NaN where torch gives NaN, the same infinity, the sign of a
// zero, finite values within a few units in the last place of torch's value or the exact one.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>

#include "parity_util.h"
#include "test_util.h"

namespace ignis {
namespace {

using parity::fmt;
using parity::mismatch;
using parity::parse_values;

struct Case {
  std::string op;
  DType dtype = kFloat32;
  std::vector<double> args;  // the scalar arguments after the tensors
  std::vector<std::vector<double>> inputs, grads, exact_grads;
  std::vector<double> y, exact_y;
};

std::vector<Case> load_cases() {
  std::vector<Case> cases;
  for (const std::vector<std::string>& p : parity::case_lines("pytorch_activation_cases.txt", 10)) {
    Case c;
    std::istringstream head(p[0]);
    std::string dtype;
    head >> c.op >> dtype;
    c.dtype = dtype == "float64" ? kFloat64 : kFloat32;
    if (p[1] != "-") c.args = parse_values(p[1]);
    c.inputs.push_back(parse_values(p[2]));
    if (p[3] != "-") c.inputs.push_back(parse_values(p[3]));
    c.y = parse_values(p[4]);
    c.grads.push_back(parse_values(p[5]));
    if (p[6] != "-") c.grads.push_back(parse_values(p[6]));
    c.exact_y = parse_values(p[7]);
    c.exact_grads.push_back(parse_values(p[8]));
    if (p[9] != "-") c.exact_grads.push_back(parse_values(p[9]));
    cases.push_back(std::move(c));
  }
  return cases;
}

TEST(PyTorchParity, ActivationsAndBinaryMathMatchTorchAtTheEdges) {
  const std::vector<Case> cases = load_cases();
  ASSERT_EQ(cases.size(), 32u);  // 16 (op, args) x (float32, float64)
  for (const Case& c : cases) {
    std::ostringstream where;
    where << c.op << " " << dtype_name(c.dtype);
    for (double a : c.args) where << " " << fmt(a);
    SCOPED_TRACE(where.str());
    ASSERT_NE(op::find(c.op), nullptr) << "no record named " << c.op;
    std::vector<Tensor> xs;
    std::vector<op::IValue> args;
    for (const std::vector<double>& v : c.inputs) {
      xs.push_back(tensor(v, c.dtype).requires_grad_(true));
      args.emplace_back(xs.back());
    }
    for (double a : c.args) args.emplace_back(a);
    const std::vector<op::IValue> out = op::call_boxed(c.op, args);
    ASSERT_EQ(out.size(), 1u);
    const Tensor y = out[0].get<Tensor>();
    const std::vector<Tensor> g = autograd::grad({y.sum()}, xs, {}, false, false, true);
    const std::vector<double> yv = vals(y);
    // Finite values may match the exact value instead of torch's; so may a NaN of torch's
    // where the exact value is finite (torch's float fmod, a - trunc(a / b) b, is NaN where
    // a / b overflows).
    const auto check = [&](double got, double torch_v, double exact_v, double ulps) {
      const std::string e = mismatch(got, torch_v, c.dtype, ulps);
      if (e.empty() || std::isinf(torch_v) || std::isnan(exact_v)) return e;
      return mismatch(got, exact_v, c.dtype, ulps).empty() ? std::string() : e;
    };
    auto args_at = [&](size_t i) {
      std::ostringstream s;
      s << "(" << fmt(c.inputs[0][i]);
      if (c.inputs.size() > 1) s << ", " << fmt(c.inputs[1][i]);
      s << ")";
      return s.str();
    };
    for (size_t i = 0; i < yv.size(); ++i) {
      EXPECT_EQ(check(yv[i], c.y[i], c.exact_y[i], 8), "")
          << c.op << args_at(i) << " = " << fmt(yv[i]) << ", torch " << fmt(c.y[i]);
    }
    for (size_t k = 0; k < xs.size(); ++k) {
      const std::vector<double> gv =
          g[k].defined() ? vals(g[k]) : std::vector<double>(c.y.size(), 0.0);
      for (size_t i = 0; i < gv.size(); ++i) {
        EXPECT_EQ(check(gv[i], c.grads[k][i], c.exact_grads[k][i], 16), "")
            << "d" << c.op << "/d" << (k == 0 ? "x" : "other") << args_at(i) << " = " << fmt(gv[i])
            << ", torch " << fmt(c.grads[k][i]);
      }
    }
  }
}

}  // namespace
}  // namespace ignis
