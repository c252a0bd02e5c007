// The workloads of `ignis bench`. bench/compare_pytorch.py runs the same ones in PyTorch: keep
// the two in step when changing what is measured.
#include <oneapi/dnnl/dnnl.h>
#include <sys/resource.h>

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <string>

#include "cli/bench.h"
#include "cpu/onednn_util.h"
#include "cuda/backend.h"
#include "ignis/autograd.h"
#include "ignis/cuda.h"
#include "ignis/data.h"
#include "ignis/data/mnist.h"
#include "ignis/jit.h"
#include "ignis/models.h"
#include "ignis/nn.h"
#include "ignis/ops.h"
#include "ignis/optim.h"
#include "ignis/train.h"

namespace ignis::cli {

// add of two small float32 tensors: the fixed cost of one op (argument checks, type promotion,
// output allocation, dispatch, and with requires_grad the graph node). The result is dropped
// every iteration, so the graph never grows.
void bench_op_overhead(const BenchOptions& opts) {
  for (int64_t n : {int64_t{1}, int64_t{64}}) {
    for (bool rg : {false, true}) {
      const TensorOptions o = TensorOptions(kFloat32).requires_grad(rg);
      const Tensor a = full({n}, 1.5, o);
      const Tensor b = full({n}, 2.5, o);
      auto body = [&](int64_t iters) {
        for (int64_t i = 0; i < iters; ++i) {
          Tensor c = add(a, b);
        }
      };
      const double ns = seconds_per_iter(body, opts.repeat, 0.05) * 1e9;
      std::printf("workload=op_overhead case=add_%lld requires_grad=%d threads=%d ns_per_op=%.1f\n",
                  static_cast<long long>(n), rg ? 1 : 0, get_num_threads(), ns);
      std::fflush(stdout);
    }
  }
}

// C = A @ B for square float32 matrices, through ignis::matmul (which allocates C) and through
// raw dnnl_sgemm on the same A and B (writing a preallocated C). Batches of the two alternate, so
// that clock or thermal drift does not favour either.
void bench_sgemm(const BenchOptions& opts) {
  for (int64_t n : {int64_t{256}, int64_t{512}, int64_t{1024}, int64_t{2048}}) {
    const Tensor a = uniform_tensor({n, n}, 1.0f, 1);
    const Tensor b = uniform_tensor({n, n}, 1.0f, 2);
    Tensor c_ref = zeros({n, n});
    const float* pa = a.data_ptr<float>();
    const float* pb = b.data_ptr<float>();
    float* pc = c_ref.data_ptr<float>();
    auto run_onednn = [&](int64_t iters) {
      for (int64_t i = 0; i < iters; ++i) {
        const dnnl_status_t st = dnnl_sgemm('N', 'N', n, n, n, 1.0f, pa, n, pb, n, 0.0f, pc, n);
        IGNIS_CHECK(st == dnnl_success, "bench sgemm: dnnl_sgemm failed with status ",
                    static_cast<int>(st));
      }
    };
    auto run_ignis = [&](int64_t iters) {
      for (int64_t i = 0; i < iters; ++i) {
        Tensor c = matmul(a, b);
      }
    };
    // Check that both compute the same product before timing them.
    run_onednn(1);
    const Tensor c = matmul(a, b).contiguous();
    const float* pi = c.data_ptr<float>();
    double err = 0, scale = 0;
    for (int64_t i = 0; i < n * n; ++i) {
      err = std::max(err, static_cast<double>(std::fabs(pi[i] - pc[i])));
      scale = std::max(scale, static_cast<double>(std::fabs(pc[i])));
    }
    IGNIS_CHECK(err <= 1e-4 * scale, "bench sgemm: ignis::matmul differs from dnnl_sgemm at n=", n,
                " (max abs difference ", err, ", max abs value ", scale, ")");

    const double target = 0.2;
    const int64_t it_ignis = calibrate(run_ignis, target);
    const int64_t it_onednn = calibrate(run_onednn, target);
    std::vector<double> t_ignis, t_onednn;
    for (int r = 0; r < opts.repeat; ++r) {
      t_ignis.push_back(time_once(run_ignis, it_ignis) / static_cast<double>(it_ignis));
      t_onednn.push_back(time_once(run_onednn, it_onednn) / static_cast<double>(it_onednn));
    }
    const double flop =
        2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    const double g_ignis = flop / median(t_ignis) * 1e-9;
    const double g_onednn = flop / median(t_onednn) * 1e-9;
    std::printf(
        "workload=sgemm n=%lld threads=%d ms=%.3f gflops=%.1f onednn_gflops=%.1f ratio=%.3f\n",
        static_cast<long long>(n), get_num_threads(), median(t_ignis) * 1e3, g_ignis, g_onednn,
        g_ignis / g_onednn);
    std::fflush(stdout);
  }
}

// C = A @ B for square bfloat16 matrices through ignis::matmul: natively (oneDNN's bfloat16
// matmul, where the CPU has AVX512-BF16 or AMX), on float32 copies (the path elsewhere), and the
// float32 product of the same values, batches of the three alternating.
void bench_bf16_gemm(const BenchOptions& opts) {
  const bool native = cpu::onednn::native_bf16();
  for (int64_t n : {int64_t{256}, int64_t{512}, int64_t{1024}, int64_t{2048}}) {
    const Tensor a = uniform_tensor({n, n}, 1.0f, 1).to(kBFloat16);
    const Tensor b = uniform_tensor({n, n}, 1.0f, 2).to(kBFloat16);
    const Tensor a32 = a.to(kFloat32), b32 = b.to(kFloat32);
    auto run = [](const Tensor& x, const Tensor& y) {
      return [&x, &y](int64_t iters) {
        for (int64_t i = 0; i < iters; ++i) Tensor c = matmul(x, y);
      };
    };
    auto copies = [&](int64_t iters) {
      const bool before = cpu::onednn::set_native_bf16_enabled(false);
      run(a, b)(iters);
      cpu::onednn::set_native_bf16_enabled(before);
    };
    // Both bfloat16 paths round the float32 product once: check them against it before timing.
    const Tensor want = matmul(a32, b32);
    for (bool on : {true, false}) {
      const bool before = cpu::onednn::set_native_bf16_enabled(on);
      const double err = (matmul(a, b).to(kFloat32) - want).abs().max().item<double>();
      cpu::onednn::set_native_bf16_enabled(before);
      const double scale = want.abs().max().item<double>();
      IGNIS_CHECK(err <= 1e-2 * scale,
                  "bench bf16_gemm: the bfloat16 product differs from the "
                  "float32 one at n=",
                  n, " (max abs difference ", err, ", max abs value ", scale, ")");
    }
    const double target = 0.2;
    const auto bf16 = run(a, b), f32 = run(a32, b32);
    const int64_t it_bf16 = calibrate(bf16, target), it_f32 = calibrate(f32, target);
    const int64_t it_copies = calibrate(copies, target);
    std::vector<double> t_bf16, t_copies, t_f32;
    for (int r = 0; r < opts.repeat; ++r) {
      t_bf16.push_back(time_once(bf16, it_bf16) / static_cast<double>(it_bf16));
      t_copies.push_back(time_once(copies, it_copies) / static_cast<double>(it_copies));
      t_f32.push_back(time_once(f32, it_f32) / static_cast<double>(it_f32));
    }
    const double flop =
        2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
    const double g = flop / median(t_bf16) * 1e-9, g_copies = flop / median(t_copies) * 1e-9;
    const double g_f32 = flop / median(t_f32) * 1e-9;
    std::printf(
        "workload=bf16_gemm n=%lld threads=%d native=%d ms=%.3f gflops=%.1f copies_gflops=%.1f "
        "f32_gflops=%.1f ratio_to_f32=%.3f\n",
        static_cast<long long>(n), get_num_threads(), native ? 1 : 0, median(t_bf16) * 1e3, g,
        g_copies, g_f32, g / g_f32);
    std::fflush(stdout);
  }
}

// Linear(512,256)-ReLU-Linear(256,128)-ReLU-Linear(128,2) on a 1x512 input, inference under
// NoGradGuard: the eager per-op path at small sizes (nine ops a forward). Weights and biases are
// drawn like torch.nn.Linear's defaults, U(-1/sqrt(fan_in), 1/sqrt(fan_in)).
void bench_seed_jit_mlp(const BenchOptions& opts) {
  constexpr int64_t kSizes[] = {512, 256, 128, 2};
  constexpr int64_t kForwards = 1000;
  std::vector<Tensor> weights, biases;
  for (int l = 0; l < 3; ++l) {
    const float bound = 1.0f / std::sqrt(static_cast<float>(kSizes[l]));
    weights.push_back(uniform_tensor({kSizes[l + 1], kSizes[l]}, bound, 10 + 2 * l));
    biases.push_back(uniform_tensor({kSizes[l + 1]}, bound, 11 + 2 * l));
  }
  const Tensor x = uniform_tensor({1, kSizes[0]}, 1.0f, 3);
  NoGradGuard no_grad;
  auto forward = [&]() {
    Tensor h = relu(linear(x, weights[0], biases[0]));
    h = relu(linear(h, weights[1], biases[1]));
    return linear(h, weights[2], biases[2]);
  };
  auto body = [&](int64_t iters) {
    for (int64_t i = 0; i < iters; ++i) {
      Tensor y = forward();
    }
  };
  IGNIS_CHECK(forward().sizes().equals({1, 2}), "bench seed_jit_mlp: unexpected output shape ",
              forward().sizes());
  body(100);  // warm-up
  std::vector<double> us;
  for (int r = 0; r < opts.repeat; ++r) {
    us.push_back(time_once(body, kForwards) / kForwards * 1e6);
  }
  std::printf("workload=seed_jit_mlp batch=1 forwards=%lld threads=%d us_per_forward=%.2f\n",
              static_cast<long long>(kForwards), get_num_threads(), median(us));
  std::fflush(stdout);

  // Graph mode: the same forward traced (weights as named parameters), frozen (linear + relu
  // fused, so three nodes instead of five ops) and run by the graph executor.
  std::vector<std::pair<std::string, Tensor>> params;
  for (int l = 0; l < 3; ++l) {
    params.emplace_back("fc" + std::to_string(l) + ".weight", weights[l]);
    params.emplace_back("fc" + std::to_string(l) + ".bias", biases[l]);
  }
  auto graph = std::make_shared<jit::Graph>(
      jit::trace([&](const std::vector<Tensor>&) { return std::vector<Tensor>{forward()}; }, {x},
                 params));
  jit::freeze(*graph);
  jit::Executor exec(graph);
  IGNIS_CHECK(allclose(exec.run({x})[0], forward(), 1e-5, 1e-6),
              "bench seed_jit_mlp: the graph's output differs from eager");
  auto graph_body = [&](int64_t iters) {
    for (int64_t i = 0; i < iters; ++i) {
      Tensor y = exec.run({x})[0];
    }
  };
  graph_body(100);
  std::vector<double> us_graph;
  for (int r = 0; r < opts.repeat; ++r) {
    us_graph.push_back(time_once(graph_body, kForwards) / kForwards * 1e6);
  }
  std::printf("workload=seed_jit_mlp_graph batch=1 forwards=%lld threads=%d nodes=%zu "
              "us_per_forward=%.2f\n",
              static_cast<long long>(kForwards), get_num_threads(), graph->nodes.size(),
              median(us_graph));
  std::fflush(stdout);
}

namespace {

// The process's peak resident set in MiB: VmHWM from /proc/self/status, else getrusage.
double peak_rss_mb() {
  std::ifstream f("/proc/self/status");
  std::string line;
  while (std::getline(f, line)) {
    if (line.rfind("VmHWM:", 0) == 0) return std::stod(line.substr(6)) / 1024.0;
  }
  rusage ru{};
  getrusage(RUSAGE_SELF, &ru);
  return static_cast<double>(ru.ru_maxrss) / 1024.0;  // KiB on Linux
}

// MNIST as a TensorDataset whose data is already normalised, (x / 255 - 0.1307) / 0.3081,
// computed once in place: every batch is then one gather of contiguous rows.
std::shared_ptr<data::TensorDataset> normalized_mnist(const std::string& root, bool train) {
  data::MNIST raw(root, train);  // data: float32 x / 255
  NoGradGuard ng;
  Tensor x = raw.data();
  x.sub_(0.1307).div_(0.3081);
  return std::make_shared<data::TensorDataset>(x, raw.targets());
}

}  // namespace

// The training demo: models::mlp (784-512-256-10, ReLU), SGD lr 0.05 momentum 0.9, batch 128,
// cross-entropy, one epoch over MNIST shuffled with a fixed seed; then the accuracy on the test
// set. s_per_epoch times the training loop only (zero_grad, forward, loss, backward, step);
// loading and normalising the data and the evaluation are outside it. With --device cuda the
// model trains on the GPU: batches come pinned and are copied without blocking, the epoch ends
// with a synchronize (bench/gpu_compare.py times PyTorch's same loop).
void bench_mnist_mlp(const BenchOptions& opts) {
  auto train_set = normalized_mnist(opts.data, true);
  auto test_set = normalized_mnist(opts.data, false);
  const Device dev = opts.device;
  const bool gpu = dev.is_cuda();
  manual_seed(0);
  auto model = models::mlp();
  model->to(dev);
  optim::SGD sgd(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  data::DataLoader train_loader(train_set,
                                {.batch_size = 128, .shuffle = true, .seed = 0, .pin_memory = gpu});
  data::DataLoader test_loader(test_set, {.batch_size = 1000, .pin_memory = gpu});

  auto epoch = [&] {
    model->train();
    for (auto& batch : train_loader) {
      sgd.zero_grad();
      const Tensor x = batch.data.to(dev, /*non_blocking=*/true);
      const Tensor y = batch.target.to(dev, /*non_blocking=*/true);
      Tensor loss = nn::functional::cross_entropy(model->forward(x), y);
      loss.backward();
      sgd.step();
    }
    if (gpu) cuda::synchronize(dev.index);
  };
  // On a GPU the first epoch is a warm-up (cuBLAS's and cuDNN's handles, the allocator's pools):
  // the second is timed, as in PyTorch's side.
  if (gpu) epoch();
  const double t0 = now_s();
  epoch();
  const double epoch_s = now_s() - t0;

  model->eval();
  NoGradGuard ng;
  int64_t correct = 0, total = 0;
  for (auto& batch : test_loader) {
    const Tensor pred = argmax(model->forward(batch.data.to(dev)), 1);
    correct += (pred == batch.target.to(dev)).sum().item<int64_t>();
    total += batch.target.size(0);
  }
  const double acc = total > 0 ? static_cast<double>(correct) / static_cast<double>(total) : 0;
  std::printf("workload=mnist_mlp device=%s threads=%d s_per_epoch=%.4f test_acc=%.4f "
              "peak_rss_mb=%.1f\n",
              dev.str().c_str(), get_num_threads(), epoch_s, acc, peak_rss_mb());
  std::fflush(stdout);
}

// One epoch of LeNet-5 (models::lenet) on MNIST: SGD lr 0.02 momentum 0.9, batch 64, shuffled
// with seed 0, inputs normalised with (0.1307, 0.3081) and laid out in opts.memory_format (for
// MNIST's one channel channels-last is a restride, no copy); then the test accuracy, in the same
// layout. Timed: the epoch's loop (loading batches, forward, backward, step), not reading files.
void bench_mnist_lenet(const BenchOptions& opts) {
  auto train_set = normalized_mnist(opts.data, true);
  auto test_set = normalized_mnist(opts.data, false);
  manual_seed(0);
  auto model = models::lenet({1, 28, 10});
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.02).momentum(0.9));
  data::DataLoader train_loader(train_set, {.batch_size = 64, .shuffle = true, .seed = 0});
  data::DataLoader test_loader(test_set, {.batch_size = 1000});
  auto loss_fn = [](const Tensor& out, const Tensor& t) {
    return nn::functional::cross_entropy(out, t);
  };
  model->train();
  const double t0 = now_s();
  for (auto& batch : train_loader) {
    opt.zero_grad();
    const Tensor x = batch.data.contiguous(opts.memory_format);
    Tensor loss = loss_fn(model->forward(x), batch.target);
    loss.backward();
    opt.step();
  }
  const double epoch_s = now_s() - t0;
  model->eval();
  const train::Metrics m = train::evaluate(*model, loss_fn, test_loader, opts.memory_format);
  std::printf(
      "workload=mnist_lenet threads=%d memory_format=%s s_per_epoch=%.2f test_acc=%.4f "
      "peak_rss_mb=%.0f\n",
      get_num_threads(), memory_format_name(opts.memory_format), epoch_s, m.accuracy,
      peak_rss_mb());
  std::fflush(stdout);
}

models::ModelConfig zoo_config(const std::string& name, const BenchOptions& opts,
                               const char* workload) {
  models::ModelConfig cfg{3, 224, 1000};
  bool found = false;
  for (const auto& info : models::list()) {
    if (info.name == name) {
      cfg = info.natural;
      found = true;
    }
  }
  IGNIS_CHECK(found, "bench ", workload, ": unknown model '", name, "' (see `ignis models`)");
  if (opts.image_size > 0) cfg.image_size = opts.image_size;
  if (opts.classes > 0) cfg.num_classes = opts.classes;
  return cfg;
}

// SGD steps (lr 0.01, momentum 0.9) of a zoo model on one fixed synthetic batch: inputs
// U(-1, 1), label of sample i = 7919 i mod classes. Two warm-up steps, then `repeat` timed steps
// (each zero_grad, forward, cross-entropy, backward, step); the median step time is reported.
void bench_train_step(const BenchOptions& opts) {
  const std::string name = opts.model.empty() ? "resnet18" : opts.model;
  const models::ModelConfig cfg = zoo_config(name, opts, "train_step");
  const int64_t batch = opts.batch > 0 ? opts.batch : 32;
  IGNIS_CHECK(!opts.device.is_cuda() || cuda::is_available(),
              "bench train_step: --device ", opts.device.str(), ": no GPU is available (",
              cuda::unavailable_reason(), ")");
  manual_seed(0);
  auto model = models::create(name, cfg);
  model->train();
  model->to(opts.device);
  if (opts.dtype != kFloat32) model->to(opts.dtype);
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x =
      synthetic_images(cfg, batch).to(opts.device, opts.dtype).contiguous(opts.memory_format);
  const Tensor y = synthetic_labels(cfg, batch).to(opts.device);
  // --compile: the same parameters through graph mode (the optimizer keeps the model's own).
  std::shared_ptr<nn::Module> net = model;
  if (opts.compile) net = jit::compile(model);
  auto step = [&] {
    opt.zero_grad();
    Tensor loss = nn::functional::cross_entropy(net->forward(x), y);
    loss.backward();
    opt.step();
    if (opts.device.is_cuda()) cuda::synchronize(opts.device.index);  // the step, done
  };
  // Compiled, the first step traces, the third records the memory plan, the fourth runs it.
  for (int i = 0; i < (opts.compile ? 4 : 2); ++i) step();
  std::vector<double> times;
  for (int r = 0; r < opts.repeat; ++r) {
    const double t0 = now_s();
    step();
    times.push_back(now_s() - t0);
  }
  const double s = median(times);
  std::printf(
      "workload=train_step model=%s batch=%lld image_size=%lld classes=%lld threads=%d "
      "memory_format=%s device=%s dtype=%s mode=%s%s%s s_per_step=%.4f img_per_s=%.1f "
      "peak_rss_mb=%.0f\n",
      name.c_str(), static_cast<long long>(batch), static_cast<long long>(cfg.image_size),
      static_cast<long long>(cfg.num_classes), get_num_threads(),
      memory_format_name(opts.memory_format), opts.device.str().c_str(),
      std::string(dtype_name(opts.dtype)).c_str(), opts.compile ? "graph" : "eager",
      opts.cudnn_benchmark ? " cudnn_benchmark=on" : "",
      opts.cudnn_legacy ? " cudnn_api=legacy" : "", s, static_cast<double>(batch) / s,
      peak_rss_mb());
  if (opts.device.is_cuda()) {  // which cuDNN API the convolutions went through
    const cuda::detail::CudnnGraphStats g = cuda::detail::cudnn_graph_stats();
    std::printf("cudnn_graph_api executions=%lld fused=%lld fallbacks=%lld%s%s\n",
                static_cast<long long>(g.executions), static_cast<long long>(g.fused_executions),
                static_cast<long long>(g.fallbacks),
                g.last_fallback.empty() ? "" : " last_fallback: ", g.last_fallback.c_str());
  }
  std::fflush(stdout);
}

// Square matmuls on the GPU, timed with CUDA events over `repeat` products queued back to back
// (the host's launch cost hidden, as cuBLAS's own benchmarks run).
void bench_gpu_matmul(const BenchOptions& opts) {
  IGNIS_CHECK(cuda::is_available(), "bench gpu_matmul: no GPU is available (",
              cuda::unavailable_reason(), ")");
  const Device gpu(kCUDA, opts.device.is_cuda() ? opts.device.index : 0);
  for (DType dt : {kFloat32, kBFloat16}) {
    for (int64_t n : {1024, 2048, 4096, 8192}) {
      manual_seed(0);
      const Tensor a = randn({n, n}, TensorOptions(dt).device(gpu));
      const Tensor b = randn({n, n}, TensorOptions(dt).device(gpu));
      (void)matmul(a, b);  // warm-up: cuBLAS's load, its handle, the kernels' first launch
      cuda::synchronize(gpu.index);
      cuda::Event start(true), stop(true);
      start.record();
      for (int r = 0; r < opts.repeat; ++r) (void)matmul(a, b);
      stop.record();
      stop.synchronize();
      const double s = start.elapsed_time(stop) / 1000.0 / opts.repeat;
      std::printf("workload=gpu_matmul device=%s dtype=%s n=%lld ms=%.3f tflops=%.1f\n",
                  gpu.str().c_str(), std::string(dtype_name(dt)).c_str(),
                  static_cast<long long>(n), s * 1000, 2.0 * n * n * n / s / 1e12);
      std::fflush(stdout);
    }
  }
}

}  // namespace ignis::cli
