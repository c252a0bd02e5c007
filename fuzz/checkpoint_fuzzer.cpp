// libFuzzer target: the training-checkpoint loader on a file held in memory, into a small model
// (Linear(3, 2)), an SGD optimizer with momentum and a StepLR scheduler. Checks the loader's
// promise: a load that fails leaves the model's parameters and the generator as they were.
// Seeds: checkpoints that save_checkpoint wrote for this setup. Build and run: make fuzz
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "ignis/ignis.h"
#include "io/safetensors.h"
#include "train/checkpoint.h"

using namespace ignis;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  SafetensorsFile f;
  try {
    f = safetensors::load_buffer(data, size, "in.ckpt");
  } catch (const Error&) {
    return 0;
  }
  default_generator().manual_seed(0);
  auto model = std::make_shared<nn::Sequential>(nn::Linear(3, 2));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::StepLR sched(opt, 2);
  std::vector<Tensor> before;
  for (const Tensor& p : model->parameters()) before.push_back(p.detach().clone());
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  try {
    train::load_checkpoint_file(f, "in.ckpt", *model, opt, &sched);
  } catch (const Error&) {
    const auto params = model->parameters();
    for (size_t i = 0; i < params.size(); ++i) FUZZ_ASSERT(equal(params[i], before[i]));
    FUZZ_ASSERT(default_generator().seed() == seed && default_generator().offset() == offset);
  }
  return 0;
}
