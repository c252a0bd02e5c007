// AlexNet in torchvision's layout (features / avgpool / classifier), with a CIFAR stem.
#include "ignis/ignis.h"

namespace ignis::models {

AlexNet::AlexNet(const ModelConfig& cfg, Stem stem) {
  detail::check_config("alexnet", cfg);
  const bool cifar = stem == Stem::kCifar || (stem == Stem::kAuto && cfg.image_size <= 32);
  const char* m = "alexnet";
  // Follow the map size through the stride-changing layers, to fail early with a clear message.
  int64_t s = cfg.image_size;
  features = std::make_shared<nn::Sequential>();
  if (cifar) {
    features->push_back(std::make_shared<nn::Conv2d>(cfg.in_channels, 64, 3, 1, 1));
  } else {
    s = detail::conv_out(m, "features.0", s, 11, 4, 2, cfg);
    features->push_back(std::make_shared<nn::Conv2d>(cfg.in_channels, 64, 11, 4, 2));
  }
  features->push_back(std::make_shared<nn::ReLU>(true));
  s = detail::conv_out(m, "features.2", s, 3, 2, 0, cfg);
  features->push_back(std::make_shared<nn::MaxPool2d>(3, 2));
  features->push_back(std::make_shared<nn::Conv2d>(64, 192, 5, 1, 2));
  features->push_back(std::make_shared<nn::ReLU>(true));
  s = detail::conv_out(m, "features.5", s, 3, 2, 0, cfg);
  features->push_back(std::make_shared<nn::MaxPool2d>(3, 2));
  features->push_back(std::make_shared<nn::Conv2d>(192, 384, 3, 1, 1));
  features->push_back(std::make_shared<nn::ReLU>(true));
  features->push_back(std::make_shared<nn::Conv2d>(384, 256, 3, 1, 1));
  features->push_back(std::make_shared<nn::ReLU>(true));
  features->push_back(std::make_shared<nn::Conv2d>(256, 256, 3, 1, 1));
  features->push_back(std::make_shared<nn::ReLU>(true));
  detail::conv_out(m, "features.12", s, 3, 2, 0, cfg);
  features->push_back(std::make_shared<nn::MaxPool2d>(3, 2));
  register_module("features", features);
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(6, 6));
  classifier = std::make_shared<nn::Sequential>(
      nn::Dropout(0.5), nn::Linear(256 * 6 * 6, 4096), nn::ReLU(true), nn::Dropout(0.5),
      nn::Linear(4096, 4096), nn::ReLU(true), nn::Linear(4096, cfg.num_classes));
  register_module("classifier", classifier);
}

Tensor AlexNet::forward(const Tensor& x) {
  return classifier->forward(avgpool->forward(features->forward(x)).flatten(1));
}

std::shared_ptr<AlexNet> alexnet(const ModelConfig& cfg, Stem stem) {
  return std::make_shared<AlexNet>(cfg, stem);
}

}  // namespace ignis::models
