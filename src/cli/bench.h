// `ignis bench`: workloads and the timing helpers they share. Every measurement is printed as one
// line of `key=value` pairs starting with `workload=NAME` (bench/compare_pytorch.py parses them).
#pragma once

#include <algorithm>
#include <chrono>
#include <cstdint>
#include <string>
#include <vector>

#include "ignis/models.h"
#include "ignis/tensor.h"

namespace ignis::cli {

struct BenchOptions {
  int repeat = 7;                   // timed batches per measurement; the median is reported
  std::string data = "data/mnist";  // the MNIST IDX files (mnist_mlp)
  // train_step; 0 / empty: the workload's default.
  std::string model;     // --model
  int64_t batch = 0;     // --batch
  int64_t image_size = 0;
  int64_t classes = 0;
  // mnist_lenet, train_step: the layout of the input batches (--memory-format); convolutions,
  // pooling and batch norm keep a channels-last input channels-last.
  MemoryFormat memory_format = MemoryFormat::ChannelsLast;
  int64_t max_bytes = 0;  // allreduce: the largest buffer (--max-bytes; default 256 MB)
  int ranks = 0;          // ddp_mnist_mlp: launch itself under `mpirun -np ranks` (--ranks)
  // train_step: where the model trains (--device) and its parameters' dtype (--dtype).
  Device device = kCPU;
  DType dtype = kFloat32;
  // --cudnn-benchmark: convolutions on a GPU time cuDNN's algorithms (cuda::set_cudnn_benchmark)
  bool cudnn_benchmark = false;
  // --cudnn-api legacy: convolutions on a GPU use cuDNN's legacy API only
  // (cuda::set_cudnn_graph_api(false)).
  bool cudnn_legacy = false;
  // --compile: train_step trains through graph mode (jit::compile).
  bool compile = false;
};

/// "contiguous" or "channels_last", as --memory-format spells it.
const char* memory_format_name(MemoryFormat f);

/// One workload of `ignis bench NAME`.
struct Workload {
  const char* name;
  const char* summary;
  void (*run)(const BenchOptions& opts);
};

void bench_op_overhead(const BenchOptions& opts);
void bench_gpu_matmul(const BenchOptions& opts);
void bench_sgemm(const BenchOptions& opts);
void bench_bf16_gemm(const BenchOptions& opts);
void bench_seed_jit_mlp(const BenchOptions& opts);
void bench_mnist_mlp(const BenchOptions& opts);
void bench_batch_norm(const BenchOptions& opts);
void bench_mnist_lenet(const BenchOptions& opts);
void bench_train_step(const BenchOptions& opts);
void bench_checkpoint(const BenchOptions& opts);  // bench_checkpoint.cpp
/// The zoo model `name`'s natural config with --image-size / --classes applied; an unknown name
/// is an error naming the workload.
models::ModelConfig zoo_config(const std::string& name, const BenchOptions& opts,
                               const char* workload);
void bench_allreduce(const BenchOptions& opts);
void bench_ddp_mnist_mlp(const BenchOptions& opts);
void bench_jit_inference(const BenchOptions& opts);  // bench_jit.cpp
void bench_jit_fusion(const BenchOptions& opts);
void bench_jit_fusion_train(const BenchOptions& opts);
void bench_jit_attention(const BenchOptions& opts);
void bench_jit_posemb(const BenchOptions& opts);
void bench_jit_rmsnorm(const BenchOptions& opts);
void bench_jit_rmsnorm_train(const BenchOptions& opts);
void bench_jit_layernorm(const BenchOptions& opts);
void bench_jit_layernorm_train(const BenchOptions& opts);
void bench_jit_dropout_train(const BenchOptions& opts);
void bench_jit_norm_train(const BenchOptions& opts);
void bench_jit_block(const BenchOptions& opts);
void bench_gcn(const BenchOptions& opts);  // bench_gnn.cpp
void bench_gin(const BenchOptions& opts);

// ---- timing

inline double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}

inline double median(std::vector<double> v) {
  if (v.empty()) return 0;
  std::sort(v.begin(), v.end());
  const size_t n = v.size();
  return n % 2 ? v[n / 2] : 0.5 * (v[n / 2 - 1] + v[n / 2]);
}

/// Seconds taken by body(iters), which runs `iters` iterations of the measured code.
template <class F>
double time_once(const F& body, int64_t iters) {
  const double t0 = now_s();
  body(iters);
  return now_s() - t0;
}

/// The number of iterations for which body(iters) takes at least `target_s` seconds. Running it
/// is also the warm-up (caches, the allocator's free lists, the OpenMP pool).
template <class F>
int64_t calibrate(const F& body, double target_s) {
  int64_t iters = 1;
  for (;;) {
    const double t = time_once(body, iters);
    if (t >= target_s || iters >= (int64_t{1} << 40)) return iters;
    // Grow towards the target, at most 100x per step (the first runs include warm-up).
    const double scale = t > 0 ? std::min(100.0, 1.2 * target_s / t) : 100.0;
    iters = std::max(iters + 1, static_cast<int64_t>(static_cast<double>(iters) * scale));
  }
}

/// Median over `repeat` batches of the seconds per iteration of body, each batch >= target_s.
template <class F>
double seconds_per_iter(const F& body, int repeat, double target_s) {
  const int64_t iters = calibrate(body, target_s);
  std::vector<double> per_iter;
  for (int r = 0; r < repeat; ++r) {
    per_iter.push_back(time_once(body, iters) / static_cast<double>(iters));
  }
  return median(per_iter);
}

/// Median over `repeat` calls of forward(), in milliseconds, after two warm-up calls (oneDNN's
/// primitives, packed weights, a fused kernel's compile, the allocator).
template <class F>
double median_ms(const F& forward, int repeat) {
  for (int i = 0; i < 2; ++i) forward();
  std::vector<double> ms;
  for (int r = 0; r < repeat; ++r) {
    const double t0 = now_s();
    forward();
    ms.push_back((now_s() - t0) * 1e3);
  }
  return median(ms);
}

/// A float32 tensor of `shape` with values drawn from U(-bound, bound) by a fixed-seed engine
/// (the benchmarks' inputs and weights; kept independent of ignis's own generator).
Tensor uniform_tensor(IntArrayRef shape, float bound, uint32_t seed);
/// The zoo workloads' synthetic batch of `batch` images for `cfg`: inputs U(-1, 1) (seed 7),
/// on the CPU in float32; labels 7919 i mod the classes.
Tensor synthetic_images(const models::ModelConfig& cfg, int64_t batch);
Tensor synthetic_labels(const models::ModelConfig& cfg, int64_t batch);

}  // namespace ignis::cli
