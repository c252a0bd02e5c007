// Microbenchmark of ctc_loss: forward and backward of a speech-like batch (T frames, N
// sequences, C classes, targets of S labels), through log_softmax as in training. Compare with
// PyTorch's CPU ctc_loss on the same shapes: bench/compare_ctc.py. Wall-clock (UseRealTime): the
// kernel runs one batch element per task.
#include <benchmark/benchmark.h>

#include "ignis/ignis.h"

namespace {

using namespace ignis;
namespace F = nn::functional;

// Args: {T, N, C, S, backward}.
void BM_ctc_loss(benchmark::State& state) {
  const int64_t t = state.range(0), n = state.range(1), c = state.range(2), s = state.range(3);
  const bool backward = state.range(4) != 0;
  manual_seed(0);
  Tensor logits = randn({t, n, c}).requires_grad_(backward);
  Tensor targets = randint(1, c, {n, s});
  Tensor input_lengths = full({n}, t, kInt64), target_lengths = full({n}, s, kInt64);
  for (auto _ : state) {
    Tensor loss = F::ctc_loss(log_softmax(logits, 2), targets, input_lengths, target_lengths);
    if (backward) {
      Tensor g = autograd::grad({loss}, {logits})[0];
      benchmark::DoNotOptimize(g.impl());
    }
    benchmark::DoNotOptimize(loss.impl());
  }
}
BENCHMARK(BM_ctc_loss)
    ->ArgNames({"T", "N", "C", "S", "bwd"})
    ->Args({50, 16, 20, 10, 0})
    ->Args({50, 16, 20, 10, 1})
    ->Args({200, 32, 40, 50, 0})
    ->Args({200, 32, 40, 50, 1})
    ->Unit(benchmark::kMicrosecond)
    ->UseRealTime();

}  // namespace
