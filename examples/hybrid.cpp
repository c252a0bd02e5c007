// The lecture's hybrid-execution benchmark: a model written imperatively (a Sequential MLP),
// then compiled into a graph (jit::compile, frozen for inference), 1000 forwards of a 1x512
// input each way. The lecture shows PyTorch at 0.147 s eager and 0.084 s scripted.
//
//   build/hybrid [forwards]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ignis/ignis.h"

using namespace ignis;

namespace {

template <class F>
double seconds(int forwards, F&& forward) {
  const auto t0 = std::chrono::steady_clock::now();
  for (int i = 0; i < forwards; ++i) forward();
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}

}  // namespace

int main(int argc, char** argv) {
  const int forwards = argc > 1 ? std::atoi(argv[1]) : 1000;
  if (forwards <= 0) {
    std::fprintf(stderr, "usage: hybrid [forwards > 0]\n");
    return 2;
  }
  manual_seed(0);
  auto net = std::make_shared<nn::Sequential>(nn::Linear(512, 256), nn::ReLU(),
                                              nn::Linear(256, 128), nn::ReLU(), nn::Linear(128, 2));
  net->eval();
  Tensor x = randn({1, 512});
  NoGradGuard no_grad;

  // Imperative: each forward runs the module code, op by op.
  net->forward(x);  // warm-up
  const double eager = seconds(forwards, [&] { net->forward(x); });

  // Hybrid: traced once into a graph of registry ops, frozen (constants folded, linear + relu
  // fused), then run by the graph executor.
  auto compiled = jit::compile(net, {.freeze = true});
  Tensor y = compiled->forward(x);  // traces
  const double graph = seconds(forwards, [&] { compiled->forward(x); });

  std::printf("%s", compiled->graph().str().c_str());
  std::printf("outputs equal: %s\n", allclose(y, net->forward(x), 1e-5, 1e-6) ? "yes" : "NO");
  std::printf("eager:    %d forwards in %.4f s (%.2f us each)\n", forwards, eager,
              eager / forwards * 1e6);
  std::printf("compiled: %d forwards in %.4f s (%.2f us each)\n", forwards, graph,
              graph / forwards * 1e6);
  return 0;
}
