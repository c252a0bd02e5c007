// ignis against PyTorch's own values at the edges. tests/pytorch/gen_unary_cases.py records
// torch's outputs and gradients of every floating unary op (ignis/float_unary_ops.def) at edge
// inputs (signed zeros, domain edges, overflow points, +-inf, NaN) in float32 and float64, into
// tests/data/pytorch_unary_cases.txt, with the exact values (mpmath); this test runs each op
// through the registry by name and compares: NaN where torch gives NaN, the same infinity, the
// sign of a zero, and finite values within a few units in the last place of the dtype of torch's
// value or of the exact one (torch's float erfinv is off by ~1e-5 near 1; ignis is not).
#include <gmock/gmock.h>

#include <cmath>
#include <sstream>

#include "ignis/warning.h"
#include "parity_util.h"
#include "test_util.h"

namespace ignis {
namespace {

using parity::fmt;
using parity::mismatch;
using parity::parse_values;

struct UnaryCase {
  std::string op;
  DType dtype = kFloat32;
  std::vector<double> x, y, grad, exact_y, exact_grad;  // exact: NaN where unknown
};

std::vector<UnaryCase> load_cases() {
  std::vector<UnaryCase> cases;
  for (const std::vector<std::string>& parts : parity::case_lines("pytorch_unary_cases.txt", 6)) {
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
        << parts[0];
    cases.push_back(std::move(c));
  }
  return cases;
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

// ---- numerics at the edges, against PyTorch's values (torch 1.13, Debian's python3-torch)

// log_softmax subtracts the max and the log-sum separately: with logits near 1000 and 3000 the
// float32 result keeps its low digits (x - (max + log(sum)) rounded to max's ulp lost them).
TEST(PyTorchParity, LogSoftmaxKeepsFloatPrecisionWithLargeLogits) {
  const Tensor a = log_softmax(tensor({1000.0, 999.0, 0.0}, kFloat32), 0);
  EXPECT_NEAR(a[0].item<double>(), -0.313261687518223, 1e-7);  // exact; torch -0.31326166
  EXPECT_NEAR(a[1].item<double>(), -1.313261687518223, 1e-7);
  // The same along a non-innermost dim (the column kernel).
  const Tensor col = log_softmax(tensor({1000.0, 999.0, 0.0}, kFloat32).reshape({3, 1}), 0);
  EXPECT_NEAR(col[0][0].item<double>(), -0.313261687518223, 1e-7);
  // Logits near 3000: cross_entropy and its gradient within float32 rounding of float64's.
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = tensor({3000.0, 2999.5, 2990.0, 0.0}, dt).reshape({1, 4}).requires_grad_(true);
    const Tensor l = nn::functional::cross_entropy(x, tensor(std::vector<int64_t>{1}));
    l.backward();
    EXPECT_NEAR(l.item<double>(), 0.974105243390728, 2e-7) << dt;
    const std::vector<double> want = {0.6224417412410513, -0.6224700000523848,
                                      2.8258811333582504e-05, 0.0};
    const std::vector<double> got = vals(x.grad());
    for (size_t k = 0; k < 4; ++k) EXPECT_NEAR(got[k], want[k], 2e-7) << dt << " " << k;
  }
}

// binary_cross_entropy's gradient is finite where an input is exactly 0 or 1.
TEST(PyTorchParity, BinaryCrossEntropyGradientAtZeroAndOne) {
  Tensor x = tensor({0.0, 1.0, 0.5}, kFloat32).requires_grad_(true);
  const Tensor t = tensor({1.0, 0.0, 1.0}, kFloat32);
  const Tensor l = nn::functional::binary_cross_entropy(x, t);
  l.backward();
  EXPECT_NEAR(l.item<double>(), 66.8977, 1e-3);  // torch: 66.8977
  const std::vector<double> g = vals(x.grad());
  EXPECT_NEAR(g[0], -3.3333e+11, 1e7);  // torch: (x - t) / max(x (1 - x), 1e-12) / 3
  EXPECT_NEAR(g[1], 3.3333e+11, 1e7);
  EXPECT_NEAR(g[2], -2.0 / 3.0, 1e-6);
  // The target's gradient: log(1 - x) - log(x), clamped at -100.
  Tensor t2 = tensor({0.25, 0.5}, kFloat64).requires_grad_(true);
  nn::functional::binary_cross_entropy(tensor({0.2, 0.9}, kFloat64), t2, {}, "sum").backward();
  EXPECT_NEAR(vals(t2.grad())[0], std::log(0.8) - std::log(0.2), 1e-12);
  EXPECT_NEAR(vals(t2.grad())[1], std::log(0.1) - std::log(0.9), 1e-12);
}

// Every target ignored: the mean loss is NaN (as torch's) and the gradients are zero, not NaN.
TEST(PyTorchParity, CrossEntropyWithEveryTargetIgnoredHasZeroGradients) {
  Tensor x = ones({3, 4}).requires_grad_(true);
  const Tensor t = tensor(std::vector<int64_t>{-100, -100, -100});
  const Tensor l = nn::functional::cross_entropy(x, t);
  EXPECT_TRUE(std::isnan(l.item<double>()));
  l.backward();
  EXPECT_EQ(vals(x.grad()), std::vector<double>(12, 0.0));
  // Some targets ignored: the mean over the others, as before.
  Tensor y = zeros({2, 2}).requires_grad_(true);
  const Tensor l2 = nn::functional::cross_entropy(y, tensor(std::vector<int64_t>{-100, 1}));
  EXPECT_NEAR(l2.item<double>(), std::log(2.0), 1e-6);
}

// max() and min() over all elements route the gradient to the NaN that made the result; amax
// and amin do the same per row (torch 1.13's amax gives NaN gradients to such a row instead).
TEST(PyTorchParity, MaxAndMinWithNaNRouteTheGradientToTheNaN) {
  const double nan = std::nan("");
  for (bool is_max : {true, false}) {
    Tensor x = tensor({1.0, nan, 3.0}).requires_grad_(true);
    (is_max ? x.max() : x.min()).backward();
    EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 1, 0})) << is_max;  // torch: [0, 1, 0]
  }
  Tensor y = tensor({{1.0, nan, 3.0}, {4.0, 4.0, 2.0}}).requires_grad_(true);
  y.amax({1}).sum().backward();
  EXPECT_EQ(vals(y.grad()), (std::vector<double>{0, 1, 0, 0.5, 0.5, 0}));
}

// embedding's padding row: the weight's row in the output (a pretrained padding vector stays),
// no gradient to it.
TEST(PyTorchParity, EmbeddingPaddingIdxKeepsTheRowAndBlocksItsGradient) {
  Tensor w = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}}).requires_grad_(true);
  const Tensor e = nn::functional::embedding(tensor(std::vector<int64_t>{0, 1, 0}), w, 0);
  EXPECT_EQ(vals(e), (std::vector<double>{1, 2, 3, 4, 1, 2}));
  e.sum().backward();
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{0, 0, 1, 1, 0, 0}));
}

// The pointwise regression losses broadcast a target of another shape, warning once (torch:
// "Using a target size ... that is different to the input size").
TEST(PyTorchParity, PointwiseLossesBroadcastTheTargetWithAWarning) {
  std::vector<std::string> warnings;
  const WarningHandler old = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  const Tensor x = tensor({{1.0, 2.0}, {3.0, 4.0}, {5.0, 6.0}});
  const Tensor t = tensor({1.0, 0.0});
  const Tensor want = nn::functional::mse_loss(x, t.expand({3, 2}).contiguous());
  EXPECT_DOUBLE_EQ(nn::functional::mse_loss(x, t).item<double>(), want.item<double>());
  (void)nn::functional::mse_loss(x, t);  // once per place: no second warning
  EXPECT_DOUBLE_EQ(nn::functional::l1_loss(x, t).item<double>(),
                   nn::functional::l1_loss(x, t.expand({3, 2}).contiguous()).item<double>());
  set_warning_handler(old);
  ASSERT_EQ(warnings.size(), 2u);  // mse_loss's and l1_loss's
  EXPECT_THAT(warnings[0], ::testing::HasSubstr(
                               "mse_loss: using a target of shape [2] that differs from the "
                               "input's shape [3, 2]; both broadcast to [3, 2]"));
  EXPECT_THAT(error_of([&] { nn::functional::huber_loss(x, ones({4})); }),
              ::testing::HasSubstr("huber_loss: target of shape [4] does not broadcast with "
                                   "input of shape [3, 2]"));
}

// Reading .grad() of a non-leaf that did not retain_grad() warns once, as PyTorch does.
TEST(PyTorchParity, GradOfANonLeafWarnsOnce) {
  std::vector<std::string> warnings;
  const WarningHandler old = set_warning_handler([&](const std::string& m) { warnings.push_back(m); });
  Tensor a = ones({2}).requires_grad_(true);
  Tensor b = a * 2;
  b.sum().backward();
  EXPECT_FALSE(b.grad().defined());
  EXPECT_FALSE(b.grad().defined());
  EXPECT_TRUE(a.grad().defined());  // a leaf: no warning
  Tensor c = a * 3;
  c.retain_grad();
  c.sum().backward();
  EXPECT_TRUE(c.grad().defined());  // retained: no warning
  set_warning_handler(old);
  ASSERT_EQ(warnings.size(), 1u);
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("grad: reading .grad() of a tensor that is not a "
                                                "leaf"));
  EXPECT_THAT(warnings[0], ::testing::HasSubstr("Call retain_grad()"));
}

}  // namespace
}  // namespace ignis
