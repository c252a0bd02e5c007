// The soak workload (bench/soak.sh; not a test): trains an MLP on synthetic MNIST-shaped data
// through a DataLoader with worker threads for N steps (default 10,000), saving and reloading a
// checkpoint every 2,500 steps, and samples the resident set size and the allocator's
// statistics every 500 steps. After a warm-up of 3,000 steps, which includes the first
// checkpoint (its loaded state dict leaves ~3 MiB of blocks in the allocator's cache, reused by
// every later one), nothing may grow beyond the bound:
//   RSS by more than 16 MiB, the allocator's reserved or allocated bytes by more than 1 MiB.
// Exit status 1 when a bound is exceeded.
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <string>

#include "ignis/ignis.h"

using namespace ignis;

namespace {
constexpr int64_t kEvery = 500, kWarmup = 3000, kCheckpointEvery = 2500;
constexpr int64_t kRssBound = 16 << 20, kAllocatorBound = 1 << 20;

int64_t rss_bytes() {
  std::ifstream f("/proc/self/statm");
  int64_t size = 0, resident = 0;
  f >> size >> resident;
  return resident * ::sysconf(_SC_PAGESIZE);
}

struct Sample {
  int64_t step, rss, allocated, reserved, num_allocs, cache_hits;
};

Sample sample(int64_t step) {
  const MemoryStats m = memory_stats();
  return {step, rss_bytes(), m.allocated, m.reserved, m.num_allocs, m.cache_hits};
}

double mib(int64_t b) { return static_cast<double>(b) / (1 << 20); }
}  // namespace

int main(int argc, char** argv) {
  const int64_t steps = argc > 1 ? std::atoll(argv[1]) : 10000;
  std::setvbuf(stdout, nullptr, _IOLBF, 0);  // a line per sample, also through a pipe
  const std::string ckpt = "/tmp/ignis-soak-" + std::to_string(::getpid()) + ".safetensors";
  default_generator().manual_seed(0);
  // 8,192 synthetic 28x28 images; the label is a fixed linear function of the pixels.
  Tensor x = rand({8192, 1, 28, 28});
  Tensor y = argmax(x.view({8192, 784}).matmul(randn({784, 10})), 1);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  data::DataLoader loader(ds, {.batch_size = 64, .shuffle = true, .num_workers = 2});
  auto model = std::make_shared<nn::Sequential>(nn::Flatten(), nn::Linear(784, 256), nn::ReLU(),
                                                nn::Dropout(0.1), nn::Linear(256, 10));
  optim::Adam opt(model->parameters(), optim::AdamOptions(1e-3));
  nn::CrossEntropyLoss criterion;
  std::printf("%8s %10s %14s %14s %12s %10s %8s\n", "step", "RSS MiB", "allocated MiB",
              "reserved MiB", "allocs", "hit rate", "loss");
  Sample base{};
  bool ok = true;
  int64_t step = 0;
  while (step < steps) {
    for (auto& batch : loader) {
      opt.zero_grad();
      Tensor loss = criterion(model->forward(batch.data), batch.target);
      loss.backward();
      opt.step();
      ++step;
      if (step % kCheckpointEvery == 0) {
        train::save_checkpoint(ckpt, *model, opt, nullptr, {0, step});
        train::load_checkpoint(ckpt, *model, opt, nullptr);
      }
      if (step % kEvery == 0) {
        const float l = loss.item<float>();
        loss = Tensor();
        const Sample s = sample(step);
        std::printf("%8lld %10.1f %14.2f %14.2f %12lld %10.4f %8.4f\n",
                    static_cast<long long>(step), mib(s.rss), mib(s.allocated), mib(s.reserved),
                    static_cast<long long>(s.num_allocs),
                    static_cast<double>(s.cache_hits) / static_cast<double>(s.num_allocs), l);
        if (step == kWarmup) base = s;
        if (step > kWarmup &&
            (s.rss - base.rss > kRssBound || s.reserved - base.reserved > kAllocatorBound ||
             s.allocated - base.allocated > kAllocatorBound)) {
          std::printf(
              "soak: growth beyond the bound at step %lld: RSS %+.1f MiB (bound %.0f), "
              "reserved %+.2f MiB, allocated %+.2f MiB (bound %.0f) since step %lld\n",
              static_cast<long long>(step), mib(s.rss - base.rss), mib(kRssBound),
              mib(s.reserved - base.reserved), mib(s.allocated - base.allocated),
              mib(kAllocatorBound), static_cast<long long>(kWarmup));
          ok = false;
        }
      }
      if (step >= steps) break;
    }
  }
  std::remove(ckpt.c_str());
  const Sample end = sample(step);
  std::printf(
      "soak: %lld steps; from step %lld to the end: RSS %+.1f MiB, reserved %+.2f MiB, "
      "allocated %+.2f MiB (bounds: RSS 16 MiB, allocator 1 MiB): %s\n",
      static_cast<long long>(step), static_cast<long long>(kWarmup), mib(end.rss - base.rss),
      mib(end.reserved - base.reserved), mib(end.allocated - base.allocated), ok ? "ok" : "FAILED");
  return ok ? 0 : 1;
}
