// Activation checkpointing (the lecture notes: recompute forward values in backward to save
// memory), shown on a deep MLP with dropout: one training step plain, then with the model cut
// into segments whose activations are not kept but recomputed in backward, in both of
// torch.utils.checkpoint's forms. For each it prints the bytes held between forward and backward,
// the step's time and whether the gradients equal the plain step's (the dropout masks of the
// re-run are the forward's: the generator's state is restored). Then the same gradients through
// autograd::grad with a second derivative, which only the non-reentrant form supports.
//
//   build/checkpointing [layers] [segments]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ignis/ignis.h"

using namespace ignis;

namespace {

double now_s() {
  return std::chrono::duration<double>(std::chrono::steady_clock::now().time_since_epoch()).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int layers = argc > 1 ? std::atoi(argv[1]) : 16;
  const int segments = argc > 2 ? std::atoi(argv[2]) : 4;
  if (layers <= 0 || segments <= 0 || segments > 3 * layers) {
    std::fprintf(stderr, "usage: checkpointing [layers > 0] [segments in 1..3*layers]\n");
    return 2;
  }
  manual_seed(0);
  auto model = std::make_shared<nn::Sequential>();
  for (int i = 0; i < layers; ++i) {
    model->push_back(std::make_shared<nn::Linear>(512, 512));
    model->push_back(std::make_shared<nn::ReLU>());
    model->push_back(std::make_shared<nn::Dropout>(0.1));
  }
  const Tensor x = randn({256, 512});
  std::vector<Tensor> plain;
  for (const char* mode : {"plain", "reentrant", "non-reentrant"}) {
    const std::string m = mode;
    model->zero_grad();
    manual_seed(1);  // the same dropout masks in every mode
    const int64_t base = memory_stats().allocated;
    const double t0 = now_s();
    Tensor y = m == "plain" ? model->forward(x)
                            : autograd::checkpoint_sequential(model, segments, x, m == "reentrant");
    const int64_t held = memory_stats().allocated - base;
    y.pow(2).mean().backward();
    const double s = now_s() - t0;
    bool same = true;
    size_t k = 0;
    for (const Tensor& p : model->parameters()) {
      if (m == "plain") {
        plain.push_back(p.grad().clone());
      } else {
        same = same && allclose(p.grad(), plain[k++], 1e-5, 1e-7);
      }
    }
    std::printf("%-13s held after forward %7.1f MiB  step %.3f s  gradients %s\n", mode,
                static_cast<double>(held) / (1 << 20), s,
                m == "plain" ? "(the reference)"
                : same       ? "equal the plain step's"
                             : "DIFFER");
  }
  // Non-reentrant only: autograd::grad and a second derivative through the checkpoints.
  Tensor xr = x.narrow(0, 0, 8).clone().requires_grad_(true);
  auto second_derivative = [&](bool checkpointed) {
    manual_seed(2);
    Tensor y = checkpointed ? autograd::checkpoint_sequential(model, segments, xr, false)
                            : model->forward(xr);
    Tensor g = autograd::grad({y.tanh().sum()}, {xr}, {}, true, /*create_graph=*/true)[0];
    return autograd::grad({g.pow(2).sum()}, {xr})[0];
  };
  const Tensor a = second_derivative(false), b = second_derivative(true);
  std::printf("second derivative through %d checkpointed segments: %s (max |difference| %.3g)\n",
              segments, allclose(a, b, 1e-4, 1e-6) ? "equals the plain one" : "DIFFERS",
              (a - b).abs().max().item<double>());
  return 0;
}
