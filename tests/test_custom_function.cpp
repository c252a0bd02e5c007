// Custom autograd functions (autograd::Function<Derived>): the lecture notes' MultiplyGate, saved
// tensors and their version check, non-tensor arguments, non-differentiable outputs, wrong
// backward results, double backward, gradcheck.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "autograd/node.h"
#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using autograd::AutogradContext;
using autograd::Function;
using autograd::variable_list;
using ::testing::HasSubstr;

// The lecture notes' multiply gate: z = x * y; dz/dx = y, dz/dy = x.
struct MultiplyGate : Function<MultiplyGate> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y) {
    ctx->save_for_backward({x, y});
    return x * y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list s = ctx->get_saved_variables();
    const Tensor& dz = grad_outputs[0];
    return {s[1] * dz, s[0] * dz};
  }
};

TEST(CustomFunction, MultiplyGate) {
  Tensor x = tensor({2.0, -3.0}, TensorOptions().requires_grad(true));
  Tensor y = tensor({5.0, 4.0}, TensorOptions().requires_grad(true));
  Tensor z = MultiplyGate::apply(x, y);
  EXPECT_TRUE(allclose(z.detach(), tensor({10.0, -12.0})));
  ASSERT_NE(z.grad_fn(), nullptr);
  EXPECT_EQ(z.grad_fn()->name(), "MultiplyGateBackward");
  z.backward(tensor({1.0, 2.0}));
  EXPECT_TRUE(allclose(x.grad(), tensor({5.0, 8.0})));
  EXPECT_TRUE(allclose(y.grad(), tensor({2.0, -6.0})));
}

TEST(CustomFunction, Gradcheck) {
  Tensor x = tensor({{0.5, -1.0, 2.0}, {1.5, 0.25, -2.0}}, kFloat64).requires_grad_(true);
  Tensor y = tensor({3.0, -0.5, 1.0}, TensorOptions(kFloat64).requires_grad(true));
  // y broadcasts over x's rows: the engine sums y's gradient back to [3].
  auto fn = [](const variable_list& in) {
    return variable_list{MultiplyGate::apply(in[0], in[1])};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {x, y}));
  // backward is written with ignis ops, so it is differentiable again.
  EXPECT_TRUE(autograd::gradgradcheck(fn, {x, y}));
}

TEST(CustomFunction, SavedTensorModifiedInPlace) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor y = tensor({3.0, 4.0}, TensorOptions().requires_grad(true));
  Tensor z = MultiplyGate::apply(x, y);
  {
    NoGradGuard ng;
    y.mul_(2);  // bumps y's version after it was saved
  }
  std::string msg = error_of([&] { z.sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("modified by an in-place operation"));
  EXPECT_THAT(msg, HasSubstr("MultiplyGateBackward"));
}

TEST(CustomFunction, SecondBackwardNeedsRetainGraph) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor z = MultiplyGate::apply(x, x);
  z.sum().backward(Tensor(), /*retain_graph=*/true);
  EXPECT_TRUE(allclose(x.grad(), tensor({2.0, 4.0})));  // both uses of x accumulate
  z.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), tensor({4.0, 8.0})));
  EXPECT_THAT(error_of([&] { z.sum().backward(); }), HasSubstr("second time"));
}

TEST(CustomFunction, RecordsOnlyWhenNeeded) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor c = tensor({3.0, 4.0});
  {
    NoGradGuard ng;
    Tensor z = MultiplyGate::apply(x, c);
    EXPECT_FALSE(z.requires_grad());
    EXPECT_EQ(z.grad_fn(), nullptr);
  }
  Tensor z = MultiplyGate::apply(c, c);
  EXPECT_FALSE(z.requires_grad());
  EXPECT_TRUE(allclose(z, tensor({9.0, 16.0})));
  // Only x needs a gradient: the node reports it, and c gets none.
  Tensor w = MultiplyGate::apply(x, c);
  ASSERT_NE(w.grad_fn(), nullptr);
  EXPECT_TRUE(w.grad_fn()->needs_input_grad(0));
  EXPECT_FALSE(w.grad_fn()->needs_input_grad(1));
  w.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), c));
  EXPECT_FALSE(c.grad().defined());
}

// Non-tensor arguments, values saved by key, and needs_input_grad.
struct ScaleShift : Function<ScaleShift> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, double scale, const Tensor& shift) {
    ctx->save("scale", scale);
    ctx->save("needs_x", ctx->needs_input_grad(0));
    ctx->save("needs_shift", ctx->needs_input_grad(1));
    return x * scale + shift;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    const double s = ctx->saved("scale").to_double();
    return {ctx->needs_input_grad(0) ? g[0] * s : Tensor(),
            ctx->needs_input_grad(1) ? g[0] : Tensor()};
  }
};

TEST(CustomFunction, NonTensorArgumentsAndSavedValues) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  Tensor shift = tensor({0.5, 0.5});
  Tensor y = ScaleShift::apply(x, 3.0, shift);
  EXPECT_TRUE(allclose(y.detach(), tensor({3.5, 6.5})));
  y.sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 3.0)));

  AutogradContext ctx;
  ctx.save("a", 1.5);
  EXPECT_DOUBLE_EQ(ctx.saved("a").to_double(), 1.5);
  std::string msg = error_of([&] { ctx.saved("b"); });
  EXPECT_THAT(msg, HasSubstr("'b'"));
  EXPECT_THAT(msg, HasSubstr("a"));
}

// Saves its own output (as exp does): saved outputs must not keep the graph alive.
struct Exp : Function<Exp> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x) {
    Tensor r = exp(x);
    ctx->save_for_backward({r});
    return r;
  }
  static variable_list backward(AutogradContext* ctx, variable_list g) {
    return {g[0] * ctx->get_saved_variables()[0]};
  }
};

TEST(CustomFunction, SavedOutput) {
  Tensor x = tensor({0.0, 1.0}, TensorOptions(kFloat64).requires_grad(true));
  std::weak_ptr<autograd::Node> node;
  {
    Tensor y = Exp::apply(x);
    node = y.grad_fn();
    y.sum().backward(Tensor(), true);
    EXPECT_TRUE(allclose(x.grad(), tensor({1.0, std::exp(1.0)}, kFloat64)));
    EXPECT_FALSE(node.expired());
  }
  EXPECT_TRUE(node.expired());  // no reference cycle through the saved output
  auto fn = [](const variable_list& in) { return variable_list{Exp::apply(in[0])}; };
  EXPECT_TRUE(autograd::gradcheck(fn, {x}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {x}));
}

// Returns its input unchanged, plus an integer and a non-differentiable output.
struct Passthrough : Function<Passthrough> {
  static variable_list forward(AutogradContext* ctx, const Tensor& x) {
    Tensor idx = tensor({0, 1});
    Tensor mask = x.detach() * 0;
    ctx->mark_non_differentiable({mask});
    return {x, idx, mask};
  }
  static variable_list backward(AutogradContext*, variable_list g) {
    EXPECT_TRUE(g[1].defined());  // materialised as zeros
    return {g[0] * 1};
  }
};

TEST(CustomFunction, OutputsThatAreInputsOrNotDifferentiable) {
  Tensor x = tensor({1.0, 2.0}, TensorOptions().requires_grad(true));
  variable_list out = Passthrough::apply(x);
  ASSERT_EQ(out.size(), 3u);
  EXPECT_TRUE(x.is_leaf());  // x itself did not get the node as its grad_fn
  EXPECT_FALSE(out[0].is_leaf());
  EXPECT_FALSE(out[1].requires_grad());
  EXPECT_FALSE(out[2].requires_grad());
  (out[0] * 2).sum().backward();
  EXPECT_TRUE(allclose(x.grad(), full({2}, 2.0)));
}

struct WrongCount : Function<WrongCount> {
  static Tensor forward(AutogradContext*, const Tensor& x, const Tensor& y) { return x + y; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};

struct WrongShape : Function<WrongShape> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 2; }
  static variable_list backward(AutogradContext*, variable_list g) { return {ones({5})}; }
};

TEST(CustomFunction, BadBackwardResults) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  Tensor y = ones({2}, TensorOptions().requires_grad(true));
  std::string msg = error_of([&] { WrongCount::apply(x, y).sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("WrongCountBackward"));
  EXPECT_THAT(msg, HasSubstr("incorrect number of gradients (expected 2"));
  EXPECT_THAT(msg, HasSubstr("got 1"));
  msg = error_of([&] { WrongShape::apply(x).sum().backward(); });
  EXPECT_THAT(msg, HasSubstr("WrongShapeBackward"));
  EXPECT_THAT(msg, HasSubstr("[5]"));
}

namespace inner {
template <class T>
struct Templated : Function<Templated<T>> {
  static Tensor forward(AutogradContext*, const Tensor& x) { return x * 1; }
  static variable_list backward(AutogradContext*, variable_list g) { return {g[0]}; }
};
}  // namespace inner

TEST(CustomFunction, ReadableNodeNames) {
  Tensor x = ones({2}, TensorOptions().requires_grad(true));
  EXPECT_EQ(inner::Templated<int>::apply(x).grad_fn()->name(), "Templated<int>Backward");
}

}  // namespace
}  // namespace ignis
