// `ignis bench batch_norm`: float32 batch norm in training mode, the hot normalisation of the
// ResNets and VGG-BN, in both layouts (NCHW and channels-last): forward alone, forward +
// backward (grad_input, grad_weight, grad_bias), and the end of a ResNet block,
// relu(batch_norm(x) + r), forward + backward as three ops and as one batch_norm_relu (what
// graph mode's fuse_ops makes of it).
#include <cstdio>

#include "cli/bench.h"
#include "ignis/autograd.h"
#include "ignis/norm.h"
#include "ignis/ops.h"

namespace ignis::cli {

void bench_batch_norm(const BenchOptions& opts) {
  const int64_t n = 64, c = 64, h = 32, w = 32;
  const char* shape = "64x64x32x32";
  for (MemoryFormat fmt : {MemoryFormat::Contiguous, MemoryFormat::ChannelsLast}) {
    Tensor x = uniform_tensor({n, c, h, w}, 1.0f, 1).contiguous(fmt).requires_grad_(true);
    Tensor weight = uniform_tensor({c}, 1.0f, 2).requires_grad_(true);
    Tensor bias = uniform_tensor({c}, 1.0f, 3).requires_grad_(true);
    Tensor res = uniform_tensor({n, c, h, w}, 1.0f, 5).contiguous(fmt).requires_grad_(true);
    const Tensor grad = uniform_tensor({n, c, h, w}, 1.0f, 4).contiguous(fmt);
    Tensor running_mean = zeros({c}), running_var = ones({c});
    auto bn = [&] {
      return batch_norm(x, running_mean, running_var, weight, bias, true, 0.1, 1e-5);
    };
    auto report = [&](const char* what, double ms) {
      std::printf("workload=batch_norm case=%s shape=%s memory_format=%s threads=%d ms=%.3f\n",
                  what, shape, memory_format_name(fmt), get_num_threads(), ms);
      std::fflush(stdout);
    };
    report("forward", seconds_per_iter(
                          [&](int64_t iters) {
                            NoGradGuard ng;
                            for (int64_t i = 0; i < iters; ++i) Tensor y = bn();
                          },
                          opts.repeat, 0.2) *
                          1e3);
    report("forward_backward", seconds_per_iter(
                                   [&](int64_t iters) {
                                     for (int64_t i = 0; i < iters; ++i)
                                       autograd::grad({bn()}, {x, weight, bias}, {grad});
                                   },
                                   opts.repeat, 0.2) *
                                   1e3);
    // The end of a ResNet block: gradients of x, weight, bias and the residual.
    report("add_relu_forward_backward",
           seconds_per_iter(
               [&](int64_t iters) {
                 for (int64_t i = 0; i < iters; ++i)
                   autograd::grad({relu(bn() + res)}, {x, weight, bias, res}, {grad});
               },
               opts.repeat, 0.2) *
               1e3);
    report("fused_add_relu_forward_backward",
           seconds_per_iter(
               [&](int64_t iters) {
                 for (int64_t i = 0; i < iters; ++i) {
                   Tensor y = batch_norm_relu(x, res, running_mean, running_var, weight, bias, true,
                                              0.1, 1e-5);
                   autograd::grad({y}, {x, weight, bias, res}, {grad});
                 }
               },
               opts.repeat, 0.2) *
               1e3);
  }
}

}  // namespace ignis::cli
