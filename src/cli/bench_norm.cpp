// `ignis bench batch_norm`: float32 batch norm in training mode, the hot normalisation of the
// ResNets and VGG-BN, forward alone and forward + backward (grad_input, grad_weight, grad_bias).
#include <cstdio>

#include "cli/bench.h"
#include "ignis/autograd.h"
#include "ignis/norm.h"
#include "ignis/ops.h"

namespace ignis::cli {

void bench_batch_norm(const BenchOptions& opts) {
  const int64_t n = 64, c = 64, h = 32, w = 32;
  Tensor x = uniform_tensor({n, c, h, w}, 1.0f, 1).requires_grad_(true);
  Tensor weight = uniform_tensor({c}, 1.0f, 2).requires_grad_(true);
  Tensor bias = uniform_tensor({c}, 1.0f, 3).requires_grad_(true);
  const Tensor grad = uniform_tensor({n, c, h, w}, 1.0f, 4);
  Tensor running_mean = zeros({c}), running_var = ones({c});
  auto forward = [&](int64_t iters) {
    NoGradGuard ng;
    for (int64_t i = 0; i < iters; ++i) {
      Tensor y = batch_norm(x, running_mean, running_var, weight, bias, true, 0.1, 1e-5);
    }
  };
  auto forward_backward = [&](int64_t iters) {
    for (int64_t i = 0; i < iters; ++i) {
      Tensor y = batch_norm(x, running_mean, running_var, weight, bias, true, 0.1, 1e-5);
      autograd::grad({y}, {x, weight, bias}, {grad});
    }
  };
  const char* shape = "64x64x32x32";
  const double fwd = seconds_per_iter(forward, opts.repeat, 0.2) * 1e3;
  std::printf("workload=batch_norm case=forward shape=%s threads=%d ms=%.3f\n", shape,
              get_num_threads(), fwd);
  std::fflush(stdout);
  const double fb = seconds_per_iter(forward_backward, opts.repeat, 0.2) * 1e3;
  std::printf("workload=batch_norm case=forward_backward shape=%s threads=%d ms=%.3f\n", shape,
              get_num_threads(), fb);
  std::fflush(stdout);
}

}  // namespace ignis::cli
