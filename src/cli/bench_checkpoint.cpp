// `ignis bench checkpoint`: activation checkpointing on a zoo ResNet (each residual block
// checkpointed) or VGG (`features` in 6 segments) at 224x224: SGD steps plain, reentrant and
// non-reentrant, with the bytes held between forward and backward, the peak and the step time.
#include <cstdio>
#include <memory>

#include "cli/bench.h"
#include "ignis/allocator.h"
#include "ignis/autograd.h"
#include "ignis/checkpoint.h"
#include "ignis/models.h"
#include "ignis/nn.h"
#include "ignis/optim.h"

namespace ignis::cli {

namespace {

enum class Mode { kPlain, kReentrant, kNonReentrant };

const char* mode_name(Mode m) {
  return m == Mode::kPlain ? "plain" : m == Mode::kReentrant ? "reentrant" : "non_reentrant";
}

Tensor run_module(const std::shared_ptr<nn::Module>& m, const Tensor& x, Mode mode) {
  if (mode == Mode::kPlain) return m->forward(x);
  return autograd::checkpoint([m](const TensorList& in) { return TensorList{m->forward(in[0])}; },
                              {x}, true, mode == Mode::kReentrant)[0];
}

// The model's forward with its blocks checkpointed (ResNet: each residual block; VGG:
// `features` in 6 segments), as torchvision's forward would be rewritten.
Tensor checkpointed_forward(nn::Module& model, const Tensor& x, Mode mode) {
  if (auto* r = dynamic_cast<models::ResNet*>(&model)) {
    Tensor h = r->maxpool->forward(r->relu->forward(r->bn1->forward(r->conv1->forward(x))));
    for (const auto& layer : {r->layer1, r->layer2, r->layer3, r->layer4}) {
      for (size_t i = 0; i < layer->size(); ++i) h = run_module((*layer)[i], h, mode);
    }
    return r->fc->forward(r->avgpool->forward(h).flatten(1));
  }
  auto* v = dynamic_cast<models::VGG*>(&model);
  IGNIS_CHECK(v != nullptr, "bench checkpoint: --model expects a ResNet or a VGG of the zoo, got ",
              model.type_name());
  Tensor h = mode == Mode::kPlain
                 ? v->features->forward(x)
                 : autograd::checkpoint_sequential(v->features, 6, x, mode == Mode::kReentrant);
  return v->classifier->forward(v->avgpool->forward(h).flatten(1));
}

}  // namespace

void bench_checkpoint(const BenchOptions& opts) {
  const std::string name = opts.model.empty() ? "resnet50" : opts.model;
  const models::ModelConfig cfg = zoo_config(name, opts, "checkpoint");
  const int64_t batch = opts.batch > 0 ? opts.batch : 4;
  manual_seed(0);
  auto model = models::create(name, cfg);
  model->train();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.01).momentum(0.9));
  const Tensor x = synthetic_images(cfg, batch).contiguous(opts.memory_format);
  const Tensor y = synthetic_labels(cfg, batch);
  for (Mode mode : {Mode::kPlain, Mode::kReentrant, Mode::kNonReentrant}) {
    int64_t held = 0, peak = 0;
    auto step = [&] {
      opt.zero_grad();
      reset_peak_memory_stats();
      const int64_t base = memory_stats().allocated;
      Tensor loss = nn::functional::cross_entropy(checkpointed_forward(*model, x, mode), y);
      held = memory_stats().allocated - base;
      loss.backward();
      loss = Tensor();
      peak = memory_stats().peak_allocated - base;
      opt.step();
    };
    for (int i = 0; i < 2; ++i) step();  // the optimizer's state and the caches exist
    std::vector<double> times;
    for (int r = 0; r < opts.repeat; ++r) {
      const double t0 = now_s();
      step();
      times.push_back(now_s() - t0);
    }
    std::printf(
        "workload=checkpoint model=%s batch=%lld image_size=%lld threads=%d memory_format=%s "
        "mode=%s held_after_forward_mib=%.1f peak_above_start_mib=%.1f s_per_step=%.4f\n",
        name.c_str(), static_cast<long long>(batch), static_cast<long long>(cfg.image_size),
        get_num_threads(), memory_format_name(opts.memory_format), mode_name(mode),
        static_cast<double>(held) / (1 << 20), static_cast<double>(peak) / (1 << 20),
        median(times));
    std::fflush(stdout);
  }
}

}  // namespace ignis::cli
