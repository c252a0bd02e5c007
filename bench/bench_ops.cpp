// Microbenchmarks of the hot paths: the per-op overhead of a small add (with and without
// autograd recording), a large add (memory bandwidth), matmul, the MLP forward of
// `ignis bench seed_jit_mlp`, and row reductions over short rows (sum, amax, softmax, layer
// norm), where folding each row's lanes is a large part of the work (cpu/lane_fold.h). Items/s of
// BM_add are elements; BM_matmul reports FLOP/s. Times are wall-clock (UseRealTime): the large
// cases run on several threads.
#include <benchmark/benchmark.h>

#include <cmath>
#include <vector>

#include "ignis/ignis.h"

namespace {

using namespace ignis;

// Args: {numel, requires_grad}.
void BM_add(benchmark::State& state) {
  const int64_t n = state.range(0);
  const TensorOptions o = TensorOptions(kFloat32).requires_grad(state.range(1) != 0);
  const Tensor a = full({n}, 1.5, o);
  const Tensor b = full({n}, 2.5, o);
  for (auto _ : state) {
    Tensor c = add(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  state.SetItemsProcessed(state.iterations() * n);
  state.SetBytesProcessed(state.iterations() * n * 3 * static_cast<int64_t>(sizeof(float)));
}
BENCHMARK(BM_add)
    ->ArgNames({"numel", "grad"})
    ->ArgsProduct({{1, 64, 1 << 20}, {0, 1}})
    ->UseRealTime();

// Square float32 matmul, n x n @ n x n.
void BM_matmul(benchmark::State& state) {
  const int64_t n = state.range(0);
  manual_seed(0);
  const Tensor a = rand({n, n});
  const Tensor b = rand({n, n});
  for (auto _ : state) {
    Tensor c = matmul(a, b);
    benchmark::DoNotOptimize(c.impl());
  }
  const double flop =
      2.0 * static_cast<double>(n) * static_cast<double>(n) * static_cast<double>(n);
  state.counters["FLOP/s"] = benchmark::Counter(flop * static_cast<double>(state.iterations()),
                                                benchmark::Counter::kIsRate);
}
BENCHMARK(BM_matmul)
    ->ArgName("n")
    ->RangeMultiplier(2)
    ->Range(256, 2048)
    ->Unit(benchmark::kMillisecond)
    ->UseRealTime();

// Linear(512,256)-ReLU-Linear(256,128)-ReLU-Linear(128,2), inference, batch 1 and 64.
void BM_mlp_forward(benchmark::State& state) {
  const int64_t batch = state.range(0);
  const int64_t sizes[] = {512, 256, 128, 2};
  manual_seed(0);
  std::vector<Tensor> w, b;
  for (int l = 0; l < 3; ++l) {
    const double bound = 1.0 / std::sqrt(static_cast<double>(sizes[l]));
    w.push_back(empty({sizes[l + 1], sizes[l]}).uniform_(-bound, bound));
    b.push_back(empty({sizes[l + 1]}).uniform_(-bound, bound));
  }
  const Tensor x = randn({batch, sizes[0]});
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor h = relu(linear(x, w[0], b[0]));
    h = relu(linear(h, w[1], b[1]));
    Tensor y = linear(h, w[2], b[2]);
    benchmark::DoNotOptimize(y.impl());
  }
}
BENCHMARK(BM_mlp_forward)
    ->ArgName("batch")
    ->Arg(1)
    ->Arg(64)
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

// Row reductions over rows of `cols` (12288 rows: the attention scores of jit_attention at
// cols 128), one thread: {op, cols}, op 0 sum(-1), 1 amax(-1), 2 softmax(-1), 3 layer_norm.
void BM_row_reduce(benchmark::State& state) {
  const int64_t op = state.range(0), cols = state.range(1), rows = 12288;
  manual_seed(0);
  const Tensor x = randn({rows, cols});
  const int threads = get_num_threads();
  set_num_threads(1);
  NoGradGuard no_grad;
  for (auto _ : state) {
    Tensor y = op == 0   ? x.sum(-1)
               : op == 1 ? x.amax(-1)
               : op == 2 ? softmax(x, -1)
                         : nn::functional::layer_norm(x, {cols});
    benchmark::DoNotOptimize(y.impl());
  }
  set_num_threads(threads);
  state.SetItemsProcessed(state.iterations() * rows);  // rows per second
}
BENCHMARK(BM_row_reduce)
    ->ArgNames({"op", "cols"})
    ->ArgsProduct({{0, 1, 2, 3}, {32, 128, 1024}})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
