// Autograd basics: the lecture notes' examples, step by step.
//   1. creating tensors            4. the quiz: yhat = b + w * x
//   2. f = (x + y)(x + z)          5. bce_with_logits(x @ w + b, y)
//   3. f = tanh(ln(1 + z 2x/sin y)) 6. a small MLP's loss     7. a custom Function
// Run with `make demo`.
#include <cmath>
#include <cstdio>
#include <iostream>

#include "ignis/ignis.h"

using namespace ignis;
using autograd::AutogradContext;
using autograd::variable_list;

namespace {

void section(const char* title) { std::printf("\n=== %s ===\n", title); }
double v(const Tensor& t) { return t.item<double>(); }
Tensor param(double x) { return tensor(x, TensorOptions().requires_grad(true)); }
// float64, so that the gradients by hand and by autograd agree to every printed digit.
Tensor param64(double x) { return tensor(x, TensorOptions(kFloat64).requires_grad(true)); }

void tensor_creation() {
  section("1. Creating tensors");
  Tensor z = zeros({2, 2}) + 1;
  Tensor o = ones({2, 2}) * 2;
  Tensor sevens = (ones({2, 2}) * 7 - 1) / 2;
  Tensor twos = full({2, 2}, 2.0);
  std::cout << "zeros(2, 2) + 1         =\n" << z << "\n";
  std::cout << "ones(2, 2) * 2          =\n" << o << "\n";
  std::cout << "(ones(2, 2) * 7 - 1) / 2 =\n" << sevens << "\n";
  std::cout << "twos ** 2               =\n" << pow(twos, 2) << "\n";
  std::cout << "twos ** 0.5             =\n" << pow(twos, 0.5) << "\n";
  manual_seed(0);
  Tensor r = rand({2, 4}) * (ones({1, 4}) * 2);
  std::cout << "rand(2, 4) * (ones(1, 4) * 2) (broadcast over rows, values in [0, 2)) =\n"
            << r << "\n";
}

void sum_times_sum() {
  section("2. f = (x + y)(x + z) at x = -2, y = 5, z = -4");
  Tensor x = param64(-2), y = param64(5), z = param64(-4);
  Tensor q = x + y;
  Tensor p = x + z;
  Tensor f = q * p;
  std::printf("q = x + y = %g,  p = x + z = %g,  f = q * p = %g\n", v(q), v(p), v(f));
  f.backward();
  std::printf("df/dx = p + q = %g   (autograd: %g)\n", v(p) + v(q), v(x.grad()));
  std::printf("df/dy = p     = %g   (autograd: %g)\n", v(p), v(y.grad()));
  std::printf("df/dz = q     = %g   (autograd: %g)\n", v(q), v(z.grad()));
}

void tanh_log_sin() {
  section("3. f = tanh(ln(1 + z * 2x / sin y)) at x = 0.5, y = 1, z = 0.3 (the lecture's point)");
  const double xv = 0.5, yv = 1, zv = 0.3;
  Tensor x = param64(xv), y = param64(yv), z = param64(zv);
  Tensor a = x * 2;       // a = 2x
  Tensor b = sin(y);      // b = sin y
  Tensor c = a / b;       // c = a / b
  Tensor d = c * z;       // d = c z
  Tensor e = log(d + 1);  // e = ln(1 + d)
  Tensor f = tanh(e);     // f = tanh e
  std::printf("a = %.6f  b = %.6f  c = %.6f  d = %.6f  e = %.6f  f = %.12f\n", v(a), v(b), v(c),
              v(d), v(e), v(f));
  f.backward();
  // The chain rule by hand: df/de = 1 - tanh^2(e), de/dd = 1 / (d + 1).
  const double dfde = 1 - std::tanh(v(e)) * std::tanh(v(e)), dedd = 1 / (v(d) + 1);
  const double dx = dfde * dedd * zv * (1 / v(b)) * 2;
  const double dy = dfde * dedd * zv * v(a) * (-std::cos(yv) / (v(b) * v(b)));
  const double dz = dfde * dedd * v(c);
  std::printf("df/dx: by hand %.8f  autograd %.8f\n", dx, v(x.grad()));
  std::printf("df/dy: by hand %.8f  autograd %.8f\n", dy, v(y.grad()));
  std::printf("df/dz: by hand %.8f  autograd %.8f\n", dz, v(z.grad()));
}

void quiz() {
  section("4. Quiz: yhat = b + w * x, loss = mean((yhat - y)^2)");
  Tensor x = tensor({1.0, 2.0, 3.0});
  Tensor y = tensor({2.0, 4.0, 6.0});
  Tensor w = param(0.5), b = param(0.1);
  Tensor yhat = b + w * x;
  Tensor loss = ((yhat - y) * (yhat - y)).mean();
  loss.backward();
  std::cout << "yhat = " << yhat << "\nloss = " << v(loss) << "\n";
  // dloss/dw = mean(2 (yhat - y) x), dloss/db = mean(2 (yhat - y)).
  Tensor r = (yhat - y).detach();
  std::printf("dloss/dw = %.4f (by hand mean(2 (yhat - y) x) = %.4f)\n", v(w.grad()),
              v((r * x * 2).mean()));
  std::printf("dloss/db = %.4f (by hand mean(2 (yhat - y))   = %.4f)\n", v(b.grad()),
              v((r * 2).mean()));
}

void bce_example() {
  section("5. loss = binary_cross_entropy_with_logits(matmul(x, w) + b, y)");
  manual_seed(42);
  Tensor x = ones({5});
  Tensor y = zeros({3});
  Tensor w = randn({5, 3}).requires_grad_(true);
  Tensor b = randn({3}).requires_grad_(true);
  Tensor z = matmul(x, w) + b;
  Tensor loss = binary_cross_entropy_with_logits(z, y);
  std::cout << "z = x @ w + b = " << z << "\nloss = " << v(loss) << "\n";
  loss.backward();
  std::cout << "w.grad =\n" << w.grad() << "\nb.grad = " << b.grad() << "\n";
  std::cout << "(with y = 0, dloss/db = sigmoid(z) / 3 = " << sigmoid(z.detach()) / 3 << ")\n";
}

void mlp_example() {
  section("6. A small MLP: Linear(4, 16) -> ReLU -> Linear(16, 1), MSE loss");
  manual_seed(1);
  Tensor x = randn({8, 4});
  Tensor y = randn({8, 1});
  Tensor w1 = (randn({4, 16}) * 0.5).requires_grad_(true);
  Tensor b1 = zeros({16}, TensorOptions().requires_grad(true));
  Tensor w2 = (randn({16, 1}) * 0.25).requires_grad_(true);
  Tensor b2 = zeros({1}, TensorOptions().requires_grad(true));
  Tensor h = relu(matmul(x, w1) + b1);
  Tensor out = matmul(h, w2) + b2;
  Tensor diff = out - y;
  Tensor loss = (diff * diff).mean();
  loss.backward();
  std::printf("loss = %.6f\n", v(loss));
  const std::pair<const char*, Tensor> params[] = {{"w1", w1}, {"b1", b1}, {"w2", w2}, {"b2", b2}};
  for (const auto& [name, p] : params) {
    std::cout << name << ".grad: shape " << p.grad().sizes() << ", norm " << v(p.grad().norm())
              << "\n";
  }
}

// The lecture notes' multiply gate as a custom autograd function.
struct MultiplyGate : autograd::Function<MultiplyGate> {
  static Tensor forward(AutogradContext* ctx, const Tensor& x, const Tensor& y) {
    ctx->save_for_backward({x, y});
    return x * y;
  }
  static variable_list backward(AutogradContext* ctx, variable_list grad_outputs) {
    variable_list s = ctx->get_saved_variables();
    const Tensor& dz = grad_outputs[0];
    return {s[1] * dz, s[0] * dz};  // dz/dx = y, dz/dy = x
  }
};

void custom_function() {
  section("7. A custom Function: MultiplyGate");
  Tensor x = param(3), y = param(-4);
  Tensor z = MultiplyGate::apply(x, y);
  std::printf("z = x * y = %g (z has a grad_fn: %s)\n", v(z), z.grad_fn() ? "yes" : "no");
  z.backward();
  std::printf("dz/dx = y = %g, dz/dy = x = %g\n", v(x.grad()), v(y.grad()));
  auto fn = [](const variable_list& in) {
    return variable_list{MultiplyGate::apply(in[0], in[1])};
  };
  Tensor a = randn({3}, TensorOptions(kFloat64).requires_grad(true));
  Tensor c = randn({3}, TensorOptions(kFloat64).requires_grad(true));
  std::printf("gradcheck(MultiplyGate) against finite differences: %s\n",
              autograd::gradcheck(fn, {a, c}) ? "passed" : "FAILED");
}

}  // namespace

int main() {
  try {
    tensor_creation();
    sum_times_sum();
    tanh_log_sin();
    quiz();
    bce_example();
    mlp_example();
    custom_function();
  } catch (const Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    return 1;
  }
  return 0;
}
