// Autograd: the lecture notes' worked examples, the engine's behaviour (accumulation,
// retain_graph, hooks, retain_grad, un-broadcast, in-place rules), error messages, higher-order
// gradients, anomaly mode and gradcheck.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/node.h"
#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using autograd::variable_list;
using ::testing::HasSubstr;

// The message of the ignis::Error that f throws ("" and a test failure if none).

Tensor scalar64(double v) { return tensor(v, TensorOptions(kFloat64).requires_grad(true)); }
double val(const Tensor& t) { return t.item<double>(); }

// ---- the lecture notes' worked examples

TEST(LectureExamples, SumTimesSum) {
  // f = (x + y)(x + z) at x = -2, y = 5, z = -4.
  Tensor x = scalar64(-2), y = scalar64(5), z = scalar64(-4);
  Tensor q = x + y, p = x + z;
  Tensor f = q * p;
  EXPECT_DOUBLE_EQ(val(q), 3);
  EXPECT_DOUBLE_EQ(val(p), -6);
  EXPECT_DOUBLE_EQ(val(f), -18);
  f.backward();
  EXPECT_DOUBLE_EQ(val(x.grad()), -3);  // p + q
  EXPECT_DOUBLE_EQ(val(y.grad()), -6);  // p
  EXPECT_DOUBLE_EQ(val(z.grad()), 3);   // q
}

TEST(LectureExamples, TanhLogSin) {
  // f = tanh(ln(1 + z * 2x / sin y)), built from a = 2x, b = sin y, c = a / b, d = c z,
  // e = ln(1 + d), f = tanh(e).
  const double xv = 1.0, yv = 2.0, zv = 3.0;
  Tensor x = scalar64(xv), y = scalar64(yv), z = scalar64(zv);
  Tensor a = x * 2, b = sin(y), c = a / b, d = c * z, e = log(d + 1), f = tanh(e);
  f.backward();
  const double av = 2 * xv, bv = std::sin(yv), cv = av / bv, dv = cv * zv, ev = std::log(1 + dv);
  EXPECT_NEAR(val(f), std::tanh(ev), 1e-12);
  const double dfde = 1 - std::tanh(ev) * std::tanh(ev), dedd = 1 / (dv + 1);
  EXPECT_NEAR(val(x.grad()), dfde * dedd * zv * (1 / bv) * 2, 1e-12);
  EXPECT_NEAR(val(y.grad()), dfde * dedd * zv * av * (-std::cos(yv) / (bv * bv)), 1e-12);
  EXPECT_NEAR(val(z.grad()), dfde * dedd * cv, 1e-12);
}

TEST(LectureExamples, BceWithLogitsOfLinear) {
  // loss = bce_with_logits(x @ w + b, y), x = ones(5), y = zeros(3).
  manual_seed(0);
  Tensor x = ones({5}, kFloat64), y = zeros({3}, kFloat64);
  Tensor w = randn({5, 3}, kFloat64).requires_grad_(true);
  Tensor b = randn({3}, kFloat64).requires_grad_(true);
  Tensor z = matmul(x, w) + b;
  Tensor loss = binary_cross_entropy_with_logits(z, y);
  loss.backward();
  ASSERT_TRUE(w.grad().defined() && b.grad().defined());
  EXPECT_TRUE(w.grad().sizes().equals({5, 3}));
  EXPECT_TRUE(b.grad().sizes().equals({3}));
  // With y = 0 the loss is mean(softplus(z)): dloss/dz_j = sigmoid(z_j) / 3.
  for (int j = 0; j < 3; ++j) {
    double zj = val(z.detach()[j]);
    double s = 1 / (1 + std::exp(-zj)) / 3;
    EXPECT_NEAR(val(b.grad()[j]), s, 1e-12);
    for (int i = 0; i < 5; ++i) EXPECT_NEAR(val(w.grad()[i][j]), s, 1e-12);
  }
  // Against finite differences.
  auto fn = [&](const variable_list& in) {
    return variable_list{binary_cross_entropy_with_logits(matmul(x, in[0]) + in[1], y)};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {w, b}));
}

// ---- the engine

TEST(Engine, GradientsAccumulateAcrossBackwardCalls) {
  Tensor x = tensor({1.0, 2.0, 3.0}, TensorOptions().requires_grad(true));
  (x * 2).sum().backward();
  (x * 2).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({3}, 4.0)));
  x.mutable_grad().zero_();
  (x * x).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({2.0, 4.0, 6.0})));
}

TEST(Engine, RetainGraphAllowsASecondBackward) {
  Tensor x = tensor({1.0, -2.0}, TensorOptions().requires_grad(true));
  Tensor y = (x * x).sum();
  y.backward(Tensor(), /*retain_graph=*/true);
  y.backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({4.0, -8.0})));
}

TEST(Engine, SecondBackwardThroughFreedGraphFails) {
  Tensor x = tensor({1.0, -2.0}, TensorOptions().requires_grad(true));
  Tensor y = (x * x).sum();
  y.backward();
  std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("backward through the graph a second time"));
  EXPECT_THAT(msg, HasSubstr("retain_graph=true"));
}

TEST(Engine, SavedTensorModifiedInPlaceFails) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor y = x * 1;  // a non-leaf: in-place ops on it are allowed
  Tensor z = y * y;  // saves y
  y.add_(1);
  std::string msg = error_of([&] { z.sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("modified by an in-place operation"));
  EXPECT_THAT(msg, HasSubstr("MulBackward0"));
  EXPECT_THAT(msg, HasSubstr("version 1"));
}

TEST(Engine, BackwardFromNonScalarNeedsAGradient) {
  Tensor x = ones({2, 3}, TensorOptions().requires_grad(true));
  Tensor y = x * 2;
  std::string msg = error_of([&] { y.backward(); });
  EXPECT_THAT(msg, HasSubstr("implicitly created only for outputs with one element"));
  EXPECT_THAT(msg, HasSubstr("[2, 3]"));
  y.backward(full({2, 3}, 0.5));
  EXPECT_TRUE(allclose(x.grad(), ones({2, 3})));
}

TEST(Engine, GradientShapeAndDtypeMismatch) {
  Tensor x = ones({2, 3}, TensorOptions().requires_grad(true));
  Tensor y = x * 2;
  EXPECT_THAT(error_of([&] { y.backward(ones({3})); }), HasSubstr("has shape [3]"));
  EXPECT_THAT(error_of([&] {
                y.backward(ones({2, 3}, kFloat64));
              }),
              HasSubstr("has dtype float64 but the output has dtype float32"));
  EXPECT_THAT(error_of([&] {
                autograd::backward({y, y}, {ones({2, 3})});
              }),
              HasSubstr("2 outputs but 1 gradients"));
}

TEST(Engine, BackwardOnTensorWithoutGradFails) {
  Tensor x = ones({2});
  EXPECT_THAT(error_of([&] { x.sum().backward(); }),
              HasSubstr("does not require grad and does not have a grad_fn"));
}

TEST(Engine, RetainGradOnNonLeaf) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor y = x * 3;
  Tensor w = x * 4;  // no retain_grad: its gradient is not kept
  y.retain_grad();
  EXPECT_TRUE(y.retains_grad());
  EXPECT_FALSE(y.is_leaf());
  ((y * y).sum() + w.sum()).backward();
  ASSERT_TRUE(y.grad().defined());
  EXPECT_TRUE(allclose(y.grad(), tensor({6.0, 12.0})));  // 2y
  EXPECT_FALSE(w.grad().defined());
  EXPECT_TRUE(allclose(x.grad(), tensor({22.0, 40.0})));  // 18x + 4
}

TEST(Engine, HooksOnLeafAndNonLeaf) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  size_t h = x.register_hook([](const Tensor& g) { return g * 2; });
  (x * 3).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 6.0)));  // the hook doubled 3
  x.remove_hook(h);
  x.mutable_grad().zero_();
  (x * 3).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 3.0)));

  Tensor a = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor b = a * a;
  Tensor seen;
  b.register_hook([&](const Tensor& g) { seen = g; });
  size_t h2 = b.register_hook(GradHook([](const Tensor& g) { return g * 10; }));
  (b * 1).sum().backward();
  ASSERT_TRUE(seen.defined());
  EXPECT_TRUE(allclose(seen, ones({2})));                 // the observer ran before the x10 hook
  EXPECT_TRUE(allclose(a.grad(), tensor({20.0, 40.0})));  // 10 * 2a
  b.remove_hook(h2);
  a.mutable_grad().zero_();
  Tensor c = a * a;
  c.register_hook(GradHook([](const Tensor& g) { return g * -1; }));
  c.sum().backward();
  EXPECT_TRUE(allclose(a.grad(), tensor({-2.0, -4.0})));

  Tensor n = ones({2});
  EXPECT_THAT(error_of([&] { n.register_hook(GradHook([](const Tensor& g) { return g; })); }),
              HasSubstr("doesn't require gradient"));
}

TEST(Engine, NoGradGuardAndGradMode) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  EXPECT_TRUE(is_grad_enabled());
  {
    NoGradGuard ng;
    EXPECT_FALSE(is_grad_enabled());
    Tensor y = x * 2;
    EXPECT_FALSE(y.requires_grad());
    EXPECT_EQ(y.grad_fn(), nullptr);
    {
      AutoGradMode on(true);
      EXPECT_TRUE((x * 2).requires_grad());
    }
    EXPECT_FALSE(is_grad_enabled());
  }
  EXPECT_TRUE(is_grad_enabled());
  Tensor y = x * 2;
  EXPECT_TRUE(y.requires_grad());
  ASSERT_NE(y.grad_fn(), nullptr);
  EXPECT_EQ(y.grad_fn()->name(), "MulBackward0");
}

TEST(Engine, DetachAndRequiresGrad) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor y = x * 2;
  Tensor d = y.detach();
  EXPECT_FALSE(d.requires_grad());
  EXPECT_TRUE(d.is_leaf());
  EXPECT_EQ(d.data_ptr(), y.data_ptr());  // shares storage
  EXPECT_THAT(error_of([&] {
                tensor({1, 2}).requires_grad_();
              }),
              HasSubstr("only tensors of floating point dtype can require gradients"));
  EXPECT_THAT(error_of([&] { y.requires_grad_(false); }), HasSubstr("leaf tensors"));
  Tensor z = ones({2});
  z.requires_grad_();
  EXPECT_TRUE(z.requires_grad());
  EXPECT_TRUE(z.is_leaf());
  z.requires_grad_(false);
  EXPECT_FALSE(z.requires_grad());
}

TEST(Engine, SecondDerivativeWithCreateGraph) {
  // d/dx x^3 = 3x^2, d2/dx2 = 6x.
  Tensor x = tensor({2.0, -1.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor y = (x * x * x).sum();
  Tensor dy = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  EXPECT_TRUE(dy.requires_grad());
  EXPECT_TRUE(allclose(dy, tensor({12.0, 3.0}, kFloat64)));
  Tensor d2 = autograd::grad({dy.sum()}, {x})[0];
  EXPECT_TRUE(allclose(d2, tensor({12.0, -6.0}, kFloat64)));
  EXPECT_FALSE(x.grad().defined());  // grad() never touches .grad()
  // The same through pow.
  Tensor p = pow(x, 3).sum();
  Tensor dp = autograd::grad({p}, {x}, {}, std::nullopt, true)[0];
  Tensor d2p = autograd::grad({dp.sum()}, {x})[0];
  EXPECT_TRUE(allclose(d2p, tensor({12.0, -6.0}, kFloat64)));
  // And backward(create_graph) leaves a differentiable .grad().
  Tensor q = (x * x * x).sum();
  q.backward(Tensor(), std::nullopt, /*create_graph=*/true);
  EXPECT_TRUE(x.grad().requires_grad());
  // x.grad()'s graph saved x: a reference cycle (as in PyTorch) that resetting the grad breaks.
  x.mutable_grad() = Tensor();
}

TEST(Engine, GradAllowUnused) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  Tensor unused = ones({2}, TensorOptions().requires_grad(true));
  Tensor y = (x * 2).sum();
  std::string msg = error_of([&] { autograd::grad({y}, {x, unused}, {}, true); });
  EXPECT_THAT(msg, HasSubstr("input 1 was not used in the graph"));
  EXPECT_THAT(msg, HasSubstr("allow_unused"));
  variable_list g = autograd::grad({y}, {x, unused}, {}, true, false, /*allow_unused=*/true);
  EXPECT_TRUE(allclose(g[0], full({2}, 2.0)));
  EXPECT_FALSE(g[1].defined());
  EXPECT_THAT(error_of([&] { autograd::grad({y}, {ones({2})}); }),
              HasSubstr("does not require grad"));
}

TEST(Engine, GradThroughPathsThatShareNodes) {
  // s is reached directly and through a longer chain: autograd::grad must run the chain too.
  Tensor x = tensor({1.0, 2.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor s = x * 2;
  Tensor loss = (neg(neg(s)) + s).sum();  // 4x
  variable_list g = autograd::grad({loss}, {x}, {}, true);
  EXPECT_TRUE(allclose(g[0], full({2}, 4.0, kFloat64)));
  variable_list gs = autograd::grad({loss}, {s});  // a non-leaf input
  EXPECT_TRUE(allclose(gs[0], full({2}, 2.0, kFloat64)));
}

TEST(Engine, UnbroadcastsGradients) {
  Tensor a = tensor({1.0, 2.0, 3.0}, TensorOptions().requires_grad(true));
  Tensor b = ones({2, 3}, TensorOptions().requires_grad(true));
  Tensor c = full({2, 1}, 2.0).requires_grad_(true);
  ((a + b) * c).sum().backward();
  EXPECT_TRUE(a.grad().sizes().equals({3}));
  EXPECT_TRUE(allclose(a.grad(), full({3}, 4.0)));  // summed over the broadcast rows
  EXPECT_TRUE(allclose(b.grad(), full({2, 3}, 2.0)));
  EXPECT_TRUE(c.grad().sizes().equals({2, 1}));
  EXPECT_TRUE(allclose(c.grad(), full({2, 1}, 9.0)));  // sum over (a + b) in each row
}

TEST(Engine, InPlaceOnLeafRequiringGradFails) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  EXPECT_THAT(error_of([&] { x.add_(1); }),
              HasSubstr("a leaf tensor that requires grad is being used in an in-place"));
  EXPECT_THAT(error_of([&] { x.mul_(2); }), HasSubstr("mul_"));
  {
    NoGradGuard ng;  // allowed without recording (an optimizer step)
    x.add_(1);
  }
  EXPECT_TRUE(allclose(x.detach(), full({2}, 2.0)));
}

TEST(Engine, InPlaceOnNonLeafKeepsGradients) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor y = x * 2;
  y.add_(1);
  y.mul_(3);  // y = 3(2x + 1)
  EXPECT_TRUE(allclose(y.detach(), tensor({9.0, 15.0}, kFloat64)));
  y.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 6.0, kFloat64)));

  Tensor a = tensor({1.0, 3.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor b = a * a;
  b.mul_(a);  // a^3
  b.sum().backward();
  EXPECT_TRUE(allclose(a.grad(), tensor({3.0, 27.0}, kFloat64)));
}

// ---- anomaly mode

TEST(Anomaly, NamesTheForwardOpThatProducedInf) {
  Tensor x = tensor({0.0, 1.0}, TensorOptions().requires_grad(true));
  {
    autograd::DetectAnomalyGuard guard;
    EXPECT_TRUE(autograd::is_anomaly_enabled());
    Tensor y = sqrt(x).sum();
    std::string msg = error_of([&] { y.backward(); });
    EXPECT_THAT(msg, HasSubstr("function 'SqrtBackward0'"));
    EXPECT_THAT(msg, HasSubstr("nan or inf"));
  }
  EXPECT_FALSE(autograd::is_anomaly_enabled());
  // Without anomaly mode the inf just flows into .grad().
  sqrt(x).sum().backward();
  EXPECT_TRUE(std::isinf(val(x.grad()[0])));
  EXPECT_DOUBLE_EQ(val(x.grad()[1]), 0.5);

  Tensor z = tensor({0.0}, TensorOptions().requires_grad(true));
  autograd::DetectAnomalyGuard guard;
  EXPECT_THAT(error_of([&] { log(z).sum().backward(); }), HasSubstr("'LogBackward0'"));
}

// ---- gradcheck itself

TEST(Gradcheck, PassesOnCorrectGradients) {
  Tensor a = tensor({0.5, -1.5, 2.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor b = tensor({{1.0, 2.0, 3.0}, {-1.0, 0.5, 4.0}}, kFloat64).requires_grad_(true);
  auto fn = [](const variable_list& in) {
    return variable_list{in[0] * in[1] / (in[1] * in[1] + 1), in[0] - 2, in[1].sum()};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {a, b}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {a, b}));
}

TEST(Gradcheck, NonContiguousInputsAndUnusedOutputs) {
  Tensor base = tensor({{1.0, 2.0, 3.0}, {4.0, 5.0, 6.0}}, kFloat64);
  Tensor t = base.t().detach().requires_grad_(true);  // [3, 2], non-contiguous
  ASSERT_FALSE(t.is_contiguous());
  Tensor other = tensor({0.5, 2.0}, TensorOptions(kFloat64).requires_grad(true));
  // Output 1 does not depend on `t`; output 2 depends on no input at all.
  auto fn = [](const variable_list& in) {
    return variable_list{in[0] * in[0] * in[1], in[1] * 3, ones({2}, kFloat64)};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {t, other}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {t, other}));
  EXPECT_TRUE(allclose(t.detach(), base.t()));  // restored after the perturbations
}

TEST(Gradcheck, RequiresFloat64Inputs) {
  Tensor a = ones({2}, TensorOptions().requires_grad(true));
  Tensor b = ones({2}, TensorOptions(kFloat64).requires_grad(true));
  auto fn = [](const variable_list& in) { return variable_list{in[1] * in[0].to(kFloat64)}; };
  std::string msg = error_of([&] { autograd::gradcheck(fn, {b, a}); });
  EXPECT_THAT(msg, HasSubstr("input 1"));
  EXPECT_THAT(msg, HasSubstr("float32"));
  EXPECT_THAT(error_of([&] {
                autograd::gradcheck(fn, {ones({2}, kFloat64), ones({2})});
              }),
              HasSubstr("at least one input tensor that requires grad"));
}

// x^2 with a wrong backward (returns x dz instead of 2x dz).
struct BadSquare : autograd::Function<BadSquare> {
  static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
    ctx->save_for_backward({x});
    return x * x;
  }
  static variable_list backward(autograd::AutogradContext* ctx, variable_list g) {
    return {g[0] * ctx->get_saved_variables()[0]};
  }
};

TEST(Gradcheck, ReportsTheMismatch) {
  Tensor x = tensor({1.0, 3.0}, TensorOptions(kFloat64).requires_grad(true));
  auto fn = [](const variable_list& in) {
    return variable_list{in[0] * 2, BadSquare::apply(in[0])};
  };
  std::string msg = error_of([&] { autograd::gradcheck(fn, {x}); });
  EXPECT_THAT(msg, HasSubstr("output 1"));
  EXPECT_THAT(msg, HasSubstr("input 0"));
  EXPECT_THAT(msg, HasSubstr("numerical 2"));  // d(x^2)/dx at x = 1
  EXPECT_THAT(msg, HasSubstr("analytical 1"));
  autograd::GradcheckOptions quiet;
  quiet.raise_exception = false;
  EXPECT_FALSE(autograd::gradcheck(fn, {x}, quiet));
}

}  // namespace
}  // namespace ignis
