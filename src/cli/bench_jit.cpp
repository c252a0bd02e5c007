// `ignis bench jit_inference`: a zoo model's inference (no autograd, eval mode) eager and as a
// frozen graph (jit::freeze: batch norm folded, conv/linear + relu and residual ends fused,
// convolution weights pre-packed by the executor, allocations from the planned arena), same
// input, ms per forward; then the memory each needs besides the weights.
#include <cmath>
#include <cstdio>
#include <functional>
#include <string>

#include "cli/bench.h"
#include "ignis/allocator.h"
#include "ignis/autograd.h"
#include "ignis/cuda.h"
#include "ignis/jit.h"
#include "ignis/models.h"
#include "ignis/nn/functional.h"
#include "ignis/ops.h"

namespace ignis::cli {

void bench_jit_inference(const BenchOptions& opts) {
  const std::string name = opts.model.empty() ? "resnet50" : opts.model;
  const models::ModelConfig cfg = zoo_config(name, opts, "jit_inference");
  const int64_t batch = opts.batch > 0 ? opts.batch : 1;
  manual_seed(0);
  auto model = models::create(name, cfg);
  model->eval();
  if (opts.dtype != kFloat32) model->to(opts.dtype);
  const Tensor x = synthetic_images(cfg, batch).to(opts.dtype).contiguous(opts.memory_format);
  NoGradGuard no_grad;
  auto graph = std::make_shared<jit::Graph>(jit::trace(model, {x}));
  const size_t traced_nodes = graph->nodes.size();
  jit::freeze(*graph);
  jit::Executor exec(graph);
  const Tensor eager_out = model->forward(x);
  // bfloat16: the folded batch norms and the fused residuals round differently from eager's ops,
  // by a few of its roundings (2^-8 each) of the largest output.
  const Tensor graph_out = exec.run({x})[0].to(kFloat32), eager32 = eager_out.to(kFloat32);
  const double diff = (graph_out - eager32).abs().max().item<double>();
  const double tol = opts.dtype == kBFloat16 ? 0.05 * eager32.abs().max().item<double>() : 1e-3;
  IGNIS_CHECK(opts.dtype == kBFloat16 ? diff <= tol : allclose(graph_out, eager32, 1e-3, 1e-3),
              "bench jit_inference: the frozen graph's output differs from eager (max abs "
              "difference ",
              diff, ")");
  auto time = [&](const auto& forward) { return median_ms(forward, opts.repeat); };
  const double eager = time([&] { return model->forward(x); });
  const double frozen = time([&] { return exec.run({x}); });
  for (const char* mode : {"eager", "graph"}) {
    const bool g = mode[0] == 'g';
    std::printf(
        "workload=jit_inference model=%s batch=%lld image_size=%lld memory_format=%s dtype=%s "
        "threads=%d mode=%s nodes=%zu ms_per_forward=%.2f\n",
        name.c_str(), static_cast<long long>(batch), static_cast<long long>(cfg.image_size),
        memory_format_name(opts.memory_format), std::string(dtype_name(opts.dtype)).c_str(),
        get_num_threads(), mode, g ? graph->nodes.size() : traced_nodes, g ? frozen : eager);
  }
  std::printf("workload=jit_inference model=%s speedup=%.2f\n", name.c_str(), eager / frozen);
  // The memory a forward needs besides the weights: the blocks the caching allocator reserves
  // for one forward from an empty cache, plus the planned arena's block (held between runs).
  jit::Executor unplanned(graph, {.memory_arena = false});
  for (int i = 0; i < 2; ++i) unplanned.run({x});  // pre-packs its weights
  auto activation_mib = [](const auto& forward, int64_t held) {
    empty_cache();
    const int64_t before = memory_stats().reserved;
    forward();
    return static_cast<double>(memory_stats().reserved - before + held) / (1 << 20);
  };
  std::printf(
      "workload=jit_inference model=%s batch=%lld memory_format=%s activation_mib_eager=%.1f "
      "activation_mib_graph=%.1f activation_mib_graph_unplanned=%.1f\n",
      name.c_str(), static_cast<long long>(batch), memory_format_name(opts.memory_format),
      activation_mib([&] { model->forward(x); }, 0),
      activation_mib([&] { exec.run({x}); }, exec.arena_stats().arena_bytes),
      activation_mib([&] { unplanned.run({x}); }, 0));
  std::fflush(stdout);
}

}  // namespace ignis::cli

namespace ignis::cli {

// An elementwise block, y = gelu(x * scale + shift) * gate + residual on [4096, 1024] float32
// (a transformer's bias-activation-residual tail): eager runs five ops, five passes over memory;
// the fused graph one pass, with the generated kernel and with the interpreter.
namespace {
// An inference workload of graph mode's fusion: `block` eager, then traced, fused
// (fuse_elementwise, then fuse_reductions) and run by the executor with the generated kernels and
// with the interpreter, each checked first against eager, reported as `name` with the memory
// rate for `bytes` moved per forward.
/// Another way to run a block, reported as `mode` (with the generated kernels).
struct Variant {
  const char* mode;
  size_t nodes;
  std::function<Tensor()> run;
};

void bench_fused_inference(
    const char* name, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& block,
    const std::vector<Tensor>& inputs, double bytes, const BenchOptions& opts,
    const std::vector<Variant>& variants = {}) {
  NoGradGuard no_grad;
  auto graph = std::make_shared<jit::Graph>(jit::trace(block, inputs));
  const size_t traced_nodes = graph->nodes.size();
  jit::fuse_elementwise(*graph);
  jit::fuse_reductions(*graph);
  jit::Executor exec(graph);
  const Tensor eager_out = block(inputs)[0];
  auto time = [&](const auto& forward) { return median_ms(forward, opts.repeat); };
  const double eager = time([&] { return block(inputs); });
  const Tensor& x = inputs[0];
  std::string shape;  // "4096x1024"
  for (int64_t d : x.sizes()) {
    if (!shape.empty()) shape += 'x';
    shape += std::to_string(d);
  }
  auto report = [&](const char* mode, size_t nodes, double ms) {
    std::printf(
        "workload=%s shape=%s threads=%d mode=%s nodes=%zu ms_per_forward=%.3f "
        "GBps=%.2f speedup=%.2f\n",
        name, shape.c_str(), get_num_threads(), mode, nodes, ms, bytes / (ms * 1e6), eager / ms);
  };
  report("eager", traced_nodes, eager);
  for (const char* backend : {"compiler", "interpreter"}) {
    jit::set_fusion_backend(backend);
    IGNIS_CHECK(allclose(exec.run(inputs)[0], eager_out, 1e-5, 1e-5), "bench ", name,
                ": the fused graph's output differs from eager (", backend, ")");
    report(backend, graph->nodes.size(), time([&] { return exec.run(inputs); }));
  }
  jit::set_fusion_backend("compiler");
  for (const Variant& v : variants) {
    IGNIS_CHECK(allclose(v.run(), eager_out, 1e-5, 1e-5), "bench ", name, ": ", v.mode,
                " differs from eager");
    report(v.mode, v.nodes, time(v.run));
  }
  jit::set_fusion_backend("auto");
  std::fflush(stdout);
}
}  // namespace

void bench_jit_fusion(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}), residual = randn({rows, cols});
  const Tensor scale = randn({cols}), shift = randn({cols}), gate = randn({cols});
  auto block = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(in[0] * in[2] + in[3]) * in[4] + in[1]};
  };
  const double bytes = 3.0 * static_cast<double>(rows * cols) * 4;  // x, residual in; y out
  bench_fused_inference("jit_fusion", block, {x, residual, scale, shift, gate}, bytes, opts);
}

// A causal self-attention's softmax, softmax((q kᵀ * scale).masked_fill(causal, -inf), -1), on
// [96, 128, 128] float32 scores (GPT-2 small's 12 heads, batch 8, 128 tokens) and a bool [128,
// 128] mask: eager runs mul, masked_fill and softmax (three passes, two temporaries); the graph
// one fused_reduction whose prologue scales and fills (the mask a bool input).
void bench_jit_attention(const BenchOptions& opts) {
  const int64_t heads = opts.batch > 0 ? opts.batch : 96, tokens = 128;
  manual_seed(0);
  const Tensor scores = randn({heads, tokens, tokens});
  const Tensor causal = arange(tokens).unsqueeze(1) < arange(tokens).unsqueeze(0);
  auto block = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax((in[0] * 0.125).masked_fill(in[1], -INFINITY), -1)};
  };
  const double bytes = 2.0 * static_cast<double>(scores.numel()) * 4;  // scores in, probs out
  // The same node with the mask expanded to the scores' shape on each call: how the fused
  // kernels read a [T, T] mask before they read blocks of rows in place (row_layout.h).
  const Shape full = scores.sizes().shape();
  const Variant materialised{"materialised", 1, [&] {
                               return jit::fused_reduction(
                                   {scores, causal.expand(full).contiguous()}, "softmax", 1,
                                   "mul(i0,0.125);where(i1,-inf,v0)", "");
                             }};
  bench_fused_inference("jit_attention", block, {scores, causal}, bytes, opts, {materialised});
}

// A position table added to token embeddings, then an activation and a gate: gelu(x + pos) * g,
// x [B, 128, 1024] float32 (B = 32), pos [128, 1024] (a block of 128 rows repeated over the
// batch), g [1024]. Eager runs three ops; the graph one fused_elementwise reading pos in place
// a chunk of rows at a time; the variant materialises pos at x's shape on each call (how the
// fused kernels read such a block before).
void bench_jit_posemb(const BenchOptions& opts) {
  const int64_t batch = opts.batch > 0 ? opts.batch : 32, tokens = 128, dim = 1024;
  manual_seed(0);
  const Tensor x = randn({batch, tokens, dim}), pos = randn({tokens, dim}), g = randn({dim});
  auto block = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(in[0] + in[1]) * in[2]};
  };
  const double bytes = 2.0 * static_cast<double>(x.numel()) * 4;  // x in, y out
  const Shape full = x.sizes().shape();
  const Variant materialised{"materialised", 1, [&] {
                               return jit::fused_elementwise({x, pos.expand(full).contiguous(), g},
                                                             "add(i0,i1,1);gelu(v0);mul(v1,i2)");
                             }};
  bench_fused_inference("jit_posemb", block, {x, pos, g}, bytes, opts, {materialised});
}

namespace {
// LLaMA's RMSNorm as PyTorch code writes it: x * rsqrt(mean(x ** 2, -1, keepdim) + eps) * w.
std::vector<Tensor> rms_norm_block(const std::vector<Tensor>& in) {
  const Tensor& x = in[0];
  return {x * rsqrt(x.pow(2).mean({-1}, true) + 1e-6) * in[1]};
}
}  // namespace

// The hand-written RMS norm on [4096, 1024] float32: eager (pow, mean, add, rsqrt, mul, mul: four
// passes over the full tensor and two temporaries) against the graph, one fused_reduction node (a
// mean with x ** 2 as its prologue and the scaling as its epilogue: x read from memory once per
// row, the output written once).
void bench_jit_rmsnorm(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}), w = randn({cols});
  const double bytes = 2.0 * static_cast<double>(rows * cols) * 4;  // x in, y out
  bench_fused_inference("jit_rmsnorm", rms_norm_block, {x, w}, bytes, opts);
}

namespace {
// A layer norm as PyTorch code often writes it (ConvNeXt's, for one): the mean, the centred
// values, their mean square, the normalisation and the affine part.
std::vector<Tensor> layer_norm_block(const std::vector<Tensor>& in) {
  const Tensor d = in[0] - in[0].mean({-1}, true);
  return {d / sqrt(d.pow(2).mean({-1}, true) + 1e-5) * in[1] + in[2]};
}
// The block as two fused_reduction nodes, as fuse_reductions made it before chaining statistics.
Tensor layer_norm_two_nodes(const Tensor& x, const Tensor& w, const Tensor& b) {
  const Tensor d = jit::fused_reduction({x}, "mean", 1, "", "sub(i0,i1,1)");
  return jit::fused_reduction({d, w, b}, "mean", 1, "pow(i0,2)",
                              "add(i3,1e-05,1);sqrt(v0);div(i0,v1);mul(v2,i1);add(v3,i2,1)");
}
}  // namespace

// The hand-written layer norm on [4096, 1024] float32: eager (nine ops), the graph — one
// fused_reduction node chaining two statistics (the mean, then the variance of the centred
// values: x read from memory once per row, the output written once) — and the same as two
// fused_reduction nodes (the centring mean, then the variance with the normalisation: the
// centred values written and read back), as fuse_reductions made it before chaining statistics.
void bench_jit_layernorm(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}), w = randn({cols}), b = randn({cols});
  const double bytes = 2.0 * static_cast<double>(rows * cols) * 4;  // x in, y out
  bench_fused_inference("jit_layernorm", layer_norm_block, {x, w, b}, bytes, opts,
                        {{"two_nodes", 2, [&] { return layer_norm_two_nodes(x, w, b); }}});
}

// A training workload of graph mode's fusion: forward and backward of `block` (gradients of
// `params`, the output's gradient gy given) eager, then traced, fused (fuse_elementwise, then
// fuse_reductions) and run by the executor with the generated kernels and with the
// interpreter, each checked first against eager's gradients (under the same seed, so that
// random ops draw the same numbers) and reported against eager as `name`.
namespace {
void bench_fused_training(
    const char* name, const std::function<std::vector<Tensor>(const std::vector<Tensor>&)>& block,
    const std::vector<Tensor>& inputs, const std::vector<Tensor>& params, const Tensor& gy,
    const BenchOptions& opts, const std::vector<Variant>& variants = {}) {
  auto graph = std::make_shared<jit::Graph>(jit::trace(block, inputs));
  jit::fuse_elementwise(*graph);
  jit::fuse_reductions(*graph);
  jit::Executor exec(graph);
  auto step = [&](const auto& forward) { return autograd::grad({forward()[0]}, params, {gy}); };
  manual_seed(1);
  const std::vector<Tensor> eager_grads = step([&] { return block(inputs); });
  auto time = [&](const auto& forward) {
    return median_ms([&] { return step(forward); }, opts.repeat);
  };
  const double eager = time([&] { return block(inputs); });
  auto report = [&](const char* mode, double ms) {
    std::printf("workload=%s shape=%lldx%lld threads=%d mode=%s ms_per_step=%.3f speedup=%.2f\n",
                name, static_cast<long long>(gy.size(0)), static_cast<long long>(gy.size(1)),
                get_num_threads(), mode, ms, eager / ms);
  };
  report("eager", eager);
  for (const char* backend : {"compiler", "interpreter"}) {
    jit::set_fusion_backend(backend);
    manual_seed(1);
    const std::vector<Tensor> grads = step([&] { return exec.run(inputs); });
    for (size_t k = 0; k < grads.size(); ++k) {
      IGNIS_CHECK(allclose(grads[k], eager_grads[k], 1e-4, 1e-4), "bench ", name,
                  ": the fused graph's gradient ", k, " differs from eager (", backend, ")");
    }
    report(backend, time([&] { return exec.run(inputs); }));
  }
  jit::set_fusion_backend("compiler");
  for (const Variant& v : variants) {
    auto forward = [&] { return std::vector<Tensor>{v.run()}; };
    const std::vector<Tensor> grads = step(forward);
    for (size_t k = 0; k < grads.size(); ++k)
      IGNIS_CHECK(allclose(grads[k], eager_grads[k], 1e-4, 1e-4), "bench ", name, ": ", v.mode,
                  "'s gradient ", k, " differs from eager");
    report(v.mode, time(forward));
  }
  jit::set_fusion_backend("auto");
  std::fflush(stdout);
}
}  // namespace

// The same block trained: forward and backward of gelu(x * a + b) * g + r with x, a, b and g
// requiring grad (an activation's gradient and three parameters'), the output's gradient given.
// Eager records each op's backward and saves its intermediates; the fused node runs one kernel
// forward and one multi-output kernel backward (recomputing the chain from the inputs).
void bench_jit_fusion_train(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}).requires_grad_(true), residual = randn({rows, cols});
  const Tensor scale = randn({cols}).requires_grad_(true),
               shift = randn({cols}).requires_grad_(true),
               gate = randn({cols}).requires_grad_(true);
  const Tensor gy = randn({rows, cols});
  auto block = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{gelu(in[0] * in[2] + in[3]) * in[4] + in[1]};
  };
  bench_fused_training("jit_fusion_train", block, {x, residual, scale, shift, gate},
                       {x, scale, shift, gate}, gy, opts);
}

// A post-LN transformer block's tail trained: layer_norm(dropout(gelu(x * a + b), 0.1) + r) * g
// + c on [4096, 1024] float32 with x, a, b and the layer norm's weight g and bias c requiring
// grad. Eager records each op (and layer_norm's statistics, dropout's mask) and runs their
// backward passes one by one; the graph is one fused_reduction node: one kernel forward drawing
// the mask, saving only its inputs, and a backward that recomputes the prologue (the mask drawn
// again) and the normalisation and differentiates the epilogue and the prologue as multi-output
// kernels (fused_reduction.cpp).
void bench_jit_norm_train(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}).requires_grad_(true), residual = randn({rows, cols});
  const Tensor scale = randn({cols}).requires_grad_(true),
               shift = randn({cols}).requires_grad_(true),
               gamma = randn({cols}).requires_grad_(true),
               beta = randn({cols}).requires_grad_(true);
  const Tensor gy = randn({rows, cols});
  auto block = [cols](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{nn::functional::layer_norm(
        nn::functional::dropout(gelu(in[0] * in[2] + in[3]), 0.1, true) + in[1], {cols}, in[4],
        in[5])};
  };
  bench_fused_training("jit_norm_train", block, {x, residual, scale, shift, gamma, beta},
                       {x, scale, shift, gamma, beta}, gy, opts);
}

// The jit_layernorm block trained: forward and backward (gradients of x, w and b, the output's
// gradient given).
// The chain trains as a node per statistic, the last carrying the epilogue (two nodes here);
// two_nodes as the two fused_reductions of before chaining, each its own backward node.
void bench_jit_layernorm_train(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}).requires_grad_(true), w = randn({cols}).requires_grad_(true),
               b = randn({cols}).requires_grad_(true);
  const Tensor gy = randn({rows, cols});
  bench_fused_training("jit_layernorm_train", layer_norm_block, {x, w, b}, {x, w, b}, gy, opts,
                       {{"two_nodes", 2, [&] { return layer_norm_two_nodes(x, w, b); }}});
}

// The hand-written RMS norm trained: forward and backward, gradients of x and w, the output's
// gradient given; eager records six ops' backwards, the fused node recomputes x ** 2 and the mean
// and differentiates the epilogue and the prologue in two kernels.
void bench_jit_rmsnorm_train(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}).requires_grad_(true), w = randn({cols}).requires_grad_(true);
  const Tensor gy = randn({rows, cols});
  bench_fused_training("jit_rmsnorm_train", rms_norm_block, {x, w}, {x, w}, gy, opts);
}

// Training dropout after a bias and a ReLU, dropout(relu(x + b), 0.1) on [4096, 1024] float32,
// forward and backward (gradients of x and b): eager (a rand, a compare, two products, a ReLU and
// their backward passes) against one fused node whose generated kernel draws the mask from the
// counter generator forward and again backward (fused_program.h). Each timed step draws fresh
// masks.
void bench_jit_dropout_train(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  manual_seed(0);
  const Tensor x = randn({rows, cols}).requires_grad_(true), b = randn({cols}).requires_grad_(true);
  const Tensor gy = randn({rows, cols});
  auto block = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{nn::functional::dropout(relu(in[0] + in[1]), 0.1, true)};
  };
  bench_fused_training("jit_dropout_train", block, {x, b}, {x, b}, gy, opts);
}

}  // namespace ignis::cli

namespace ignis::cli {

// A transformer-style block, y = layer_norm(gelu(x W^T + b)) + x on [4096, 1024] float32
// (Linear(1024, 1024), LayerNorm(1024) with weight and bias), eager and as a frozen graph:
// fuse_linear_pointwise turns linear + gelu into one oneDNN matmul with a GELU post-op, and
// fuse_reductions the layer norm, its affine part and the residual add into one generated
// kernel (one pass over memory per row); with the generated kernel and with the interpreter.
// Then the block's tail alone (everything after the product), and the product alone.
void bench_jit_block(const BenchOptions& opts) {
  const int64_t rows = opts.batch > 0 ? opts.batch : 4096, cols = 1024;
  const Device dev = opts.device;  // --device: on a GPU, each timed forward ends synchronised
  const Tensor x = uniform_tensor({rows, cols}, 1.0f, 1).to(dev);
  const Tensor w = uniform_tensor({cols, cols}, 1.0f / 32, 2).to(dev),
               b = uniform_tensor({cols}, 0.1f, 3).to(dev);
  const Tensor gamma = (uniform_tensor({cols}, 0.1f, 4) + 1.0).to(dev),
               beta = uniform_tensor({cols}, 0.1f, 5).to(dev);
  auto block = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        nn::functional::layer_norm(gelu(linear(in[0], w, b)), {cols}, gamma, beta) + in[0]};
  };
  NoGradGuard no_grad;
  auto graph = std::make_shared<jit::Graph>(jit::trace(
      block, {x},
      {{"linear.weight", w}, {"linear.bias", b}, {"ln.weight", gamma}, {"ln.bias", beta}}));
  const size_t traced_nodes = graph->nodes.size();
  jit::freeze(*graph);
  std::string ops;
  for (const jit::Node& n : graph->nodes) {
    if (!ops.empty()) ops += ',';
    ops += n.name();
  }
  jit::Executor exec(graph);
  const Tensor eager_out = block({x})[0];
  auto time = [&](const auto& forward) {
    return median_ms(
        [&] {
          auto r = forward();
          if (dev.is_cuda()) cuda::synchronize(dev.index);
          return r;
        },
        opts.repeat);
  };
  const double eager = time([&] { return block({x}); });
  const std::string on = dev.is_cpu() ? "" : " device=" + dev.str();
  // part: "" for the whole block, " part=tail" for the tail; speedup against `base` (eager).
  auto report = [&](const char* part, const char* mode, size_t nodes, double ms, double base) {
    std::printf(
        "workload=jit_block%s shape=%lldx%lld%s threads=%d mode=%s nodes=%zu "
        "ms_per_forward=%.3f speedup=%.2f\n",
        part, static_cast<long long>(rows), static_cast<long long>(cols), on.c_str(),
        get_num_threads(), mode, nodes, ms, base / ms);
  };
  report("", "eager", traced_nodes, eager, eager);
  std::printf("workload=jit_block graph_ops=%s\n", ops.c_str());
  for (const char* backend : {"compiler", "interpreter"}) {
    jit::set_fusion_backend(backend);
    const Tensor out = exec.run({x})[0];
    IGNIS_CHECK(allclose(out, eager_out, 1e-4, 1e-4),
                "bench jit_block: the graph's output differs "
                "from eager (",
                backend, "): max |diff| ", (out - eager_out).abs().max().item<float>());
    report("", backend, graph->nodes.size(), time([&] { return exec.run({x}); }), eager);
  }
  // The block after its product, layer_norm(gelu(h)) + x with h = x W^T + b computed once: the
  // part fusion acts on (four ops eager; one fused_reduction node with gelu as its prologue).
  const Tensor h = linear(x, w, b);
  auto tail = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{nn::functional::layer_norm(gelu(in[0]), {cols}, gamma, beta) +
                               in[1]};
  };
  auto tail_graph = std::make_shared<jit::Graph>(
      jit::trace(tail, {h, x}, {{"ln.weight", gamma}, {"ln.bias", beta}}));
  const size_t tail_nodes = tail_graph->nodes.size();
  jit::freeze(*tail_graph);
  jit::Executor tail_exec(tail_graph);
  const Tensor tail_out = tail({h, x})[0];
  const double tail_eager = time([&] { return tail({h, x}); });
  report(" part=tail", "eager", tail_nodes, tail_eager, tail_eager);
  for (const char* backend : {"compiler", "interpreter"}) {
    jit::set_fusion_backend(backend);
    const Tensor out = tail_exec.run({h, x})[0];
    IGNIS_CHECK(allclose(out, tail_out, 1e-4, 1e-4),
                "bench jit_block: the fused tail differs "
                "from eager (",
                backend, ")");
    report(" part=tail", backend, tail_graph->nodes.size(), time([&] {
             return tail_exec.run({h, x});
           }),
           tail_eager);
  }
  // The product alone bounds what fusion can gain on the whole block.
  std::printf("workload=jit_block part=linear shape=%lldx%lld%s threads=%d ms_per_forward=%.3f\n",
              static_cast<long long>(rows), static_cast<long long>(cols), on.c_str(),
              get_num_threads(), time([&] { return linear(x, w, b); }));
  jit::set_fusion_backend("auto");
  std::fflush(stdout);
}

}  // namespace ignis::cli
