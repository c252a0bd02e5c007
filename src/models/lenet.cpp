// LeNet-5, the CNN of the benchmarks (mnist_lenet).
#include "ignis/ignis.h"

namespace ignis::models {

std::shared_ptr<nn::Sequential> lenet(const ModelConfig& cfg) {
  detail::check_config("lenet", cfg);
  // 5x5 convolutions with padding 2 keep the size; each 2x2 max-pool halves it (rounding down).
  int64_t s = detail::conv_out("lenet", "the first max-pool", cfg.image_size, 2, 2, 0, cfg);
  s = detail::conv_out("lenet", "the second max-pool", s, 2, 2, 0, cfg);
  return std::make_shared<nn::Sequential>(
      nn::Conv2d(cfg.in_channels, 32, 5, 1, 2), nn::ReLU(true), nn::MaxPool2d(2),
      nn::Conv2d(32, 64, 5, 1, 2), nn::ReLU(true), nn::MaxPool2d(2), nn::Flatten(),
      nn::Linear(64 * s * s, 512), nn::ReLU(true), nn::Linear(512, cfg.num_classes));
}

}  // namespace ignis::models
