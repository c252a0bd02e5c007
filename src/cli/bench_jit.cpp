// `ignis bench jit_inference`: a zoo model's inference (no autograd, eval mode) eager and as a
// frozen graph (jit::freeze: batch norm folded, conv/linear + relu and residual ends fused,
// convolution weights pre-packed by the executor), same input, ms per forward.
#include <cstdio>

#include "cli/bench.h"
#include "ignis/autograd.h"
#include "ignis/jit.h"
#include "ignis/models.h"
#include "ignis/ops.h"

namespace ignis::cli {

void bench_jit_inference(const BenchOptions& opts) {
  const std::string name = opts.model.empty() ? "resnet50" : opts.model;
  const models::ModelConfig cfg = zoo_config(name, opts, "jit_inference");
  const int64_t batch = opts.batch > 0 ? opts.batch : 1;
  manual_seed(0);
  auto model = models::create(name, cfg);
  model->eval();
  const Tensor x = uniform_tensor({batch, cfg.in_channels, cfg.image_size, cfg.image_size}, 1.0f, 7)
                       .contiguous(opts.memory_format);
  NoGradGuard no_grad;
  auto graph = std::make_shared<jit::Graph>(jit::trace(model, {x}));
  const size_t traced_nodes = graph->nodes.size();
  jit::freeze(*graph);
  jit::Executor exec(graph);
  const Tensor eager_out = model->forward(x);
  IGNIS_CHECK(allclose(exec.run({x})[0], eager_out, 1e-3, 1e-3),
              "bench jit_inference: the frozen graph's output differs from eager");
  auto time = [&](const auto& forward) {
    for (int i = 0; i < 2; ++i) forward();  // warm-up (primitives, packed weights)
    std::vector<double> ms;
    for (int r = 0; r < opts.repeat; ++r) {
      const double t0 = now_s();
      forward();
      ms.push_back((now_s() - t0) * 1e3);
    }
    return median(ms);
  };
  const double eager = time([&] { return model->forward(x); });
  const double frozen = time([&] { return exec.run({x}); });
  for (const char* mode : {"eager", "graph"}) {
    const bool g = mode[0] == 'g';
    std::printf(
        "workload=jit_inference model=%s batch=%lld image_size=%lld memory_format=%s "
        "threads=%d mode=%s nodes=%zu ms_per_forward=%.2f\n",
        name.c_str(), static_cast<long long>(batch), static_cast<long long>(cfg.image_size),
        memory_format_name(opts.memory_format), get_num_threads(), mode,
        g ? graph->nodes.size() : traced_nodes, g ? frozen : eager);
  }
  std::printf("workload=jit_inference model=%s speedup=%.2f\n", name.c_str(), eager / frozen);
  std::fflush(stdout);
}

}  // namespace ignis::cli
