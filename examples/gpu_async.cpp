// The lecture notes' GPU examples, timed:
//  1. Asynchronous execution: 10 products of two 1000x1000 matrices on the CPU, then queued on
//     the GPU (the calls return at once) and queued then synchronised.
//  2. Two GPUs in parallel: 50 products of 4000x4000 matrices on one GPU, then on each of two
//     GPUs at once (about the time of one, when there are two).
//  3. Copies overlapping compute: run the products and copy each result back to the CPU,
//     blocking (copy after copy, the GPU waiting) and non-blocking into pinned memory on a second
//     stream (the copies run while the next products are computed).
// Without a GPU it says why and exits with 77 (ctest's "skipped").
//
//   build/gpu_async [size of part 2's matrices, default 4000]
#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <vector>

#include "ignis/ignis.h"

using namespace ignis;

namespace {
double seconds_since(std::chrono::steady_clock::time_point t0) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
}
}  // namespace

int main(int argc, char** argv) {
  const int64_t big = argc > 1 ? std::atoll(argv[1]) : 4000;
  if (big <= 0) {
    std::fprintf(stderr, "usage: gpu_async [matrix size > 0]\n");
    return 2;
  }
  if (!cuda::is_available()) {
    std::printf("no GPU: %s\n", cuda::unavailable_reason().c_str());
    return 77;
  }
  using clock = std::chrono::steady_clock;
  const Device gpu(kCUDA, 0);
  manual_seed(0);

  // 1. Queued versus waited for.
  {
    const Tensor a = randn({1000, 1000}), b = randn({1000, 1000});
    auto t0 = clock::now();
    for (int i = 0; i < 10; ++i) (void)mm(a, b);
    const double cpu = seconds_since(t0);
    const Tensor ga = a.to(gpu), gb = b.to(gpu);
    (void)mm(ga, gb);  // warm-up: cuBLAS's handle and the kernels' first load
    cuda::synchronize();
    t0 = clock::now();
    for (int i = 0; i < 10; ++i) (void)mm(ga, gb);
    const double queued = seconds_since(t0);
    cuda::synchronize();
    const double done = seconds_since(t0);
    std::printf("1. 10 products of 1000x1000: CPU %.4f s; GPU: queued in %.4f s, done after "
                "%.4f s\n",
                cpu, queued, done);
  }

  // 2. One GPU, then two at once.
  {
    auto run_on = [&](int dev) {
      const Tensor a = randn({big, big}, TensorOptions().device(Device(kCUDA, dev)));
      std::vector<Tensor> outs;
      for (int i = 0; i < 50; ++i) outs.push_back(mm(a, a));
      return outs;
    };
    (void)run_on(0);
    cuda::synchronize(0);
    auto t0 = clock::now();
    (void)run_on(0);
    cuda::synchronize(0);
    const double one = seconds_since(t0);
    if (cuda::device_count() >= 2) {
      (void)run_on(1);
      cuda::synchronize(1);
      t0 = clock::now();
      auto r0 = run_on(0);  // queued on GPU 0, returns at once
      auto r1 = run_on(1);  // so GPU 1 starts while GPU 0 works
      cuda::synchronize(0);
      cuda::synchronize(1);
      const double two = seconds_since(t0);
      std::printf("2. 50 products of %lldx%lld: one GPU %.3f s; two GPUs, each doing the same, "
                  "%.3f s\n",
                  static_cast<long long>(big), static_cast<long long>(big), one, two);
    } else {
      std::printf("2. 50 products of %lldx%lld on one GPU: %.3f s (a second GPU would run its "
                  "own 50 in about the same time; this machine has one)\n",
                  static_cast<long long>(big), static_cast<long long>(big), one);
    }
  }

  // 3. Copies back: blocking, then non-blocking into pinned memory on a second stream.
  {
    const int64_t n = 2000;
    const int steps = 20;
    const Tensor a = randn({n, n}, TensorOptions().device(gpu));
    std::vector<Tensor> host;
    for (int i = 0; i < steps; ++i) host.push_back(empty({n, n}).pin_memory());
    auto t0 = clock::now();
    for (int i = 0; i < steps; ++i) (void)mm(a, a);
    cuda::synchronize();
    const double run = seconds_since(t0);
    t0 = clock::now();
    for (int i = 0; i < steps; ++i) host[static_cast<size_t>(i)].copy_(mm(a, a));  // waits
    const double blocking = seconds_since(t0);
    const cuda::Stream copier = cuda::getStreamFromPool();
    t0 = clock::now();
    for (int i = 0; i < steps; ++i) {
      const Tensor r = mm(a, a);
      cuda::Event ready;
      ready.record();  // on the compute stream, after the product
      ready.block(copier);
      cuda::StreamGuard g(copier);
      r.record_stream(copier);  // r's memory is not reused before the copy has read it
      host[static_cast<size_t>(i)].copy_(r, /*non_blocking=*/true);
    }
    cuda::synchronize();
    const double overlapped = seconds_since(t0);
    std::printf("3. %d products of %lldx%lld: run only %.3f s; run + blocking copy back %.3f s; "
                "run + non-blocking copy back on a second stream %.3f s\n",
                steps, static_cast<long long>(n), static_cast<long long>(n), run, blocking,
                overlapped);
  }
  return 0;
}
