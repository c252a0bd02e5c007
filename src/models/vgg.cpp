// VGG-11 and VGG-16, with and without batch norm, in torchvision's layout.
#include "ignis/ignis.h"

namespace ignis::models {

namespace {
constexpr int64_t M = 0;  // a max-pool in a layer list
const std::vector<int64_t> kVgg11 = {64, M, 128, M, 256, 256, M, 512, 512, M, 512, 512, M};
const std::vector<int64_t> kVgg16 = {64, 64,  M,   128, 128, M,   256, 256, 256,
                                     M,  512, 512, 512, M,   512, 512, 512, M};
}  // namespace

VGG::VGG(const ModelConfig& cfg, const std::vector<int64_t>& layers, bool batch_norm) {
  detail::check_config("vgg", cfg);
  features = std::make_shared<nn::Sequential>();
  int64_t in = cfg.in_channels, s = cfg.image_size;
  for (int64_t v : layers) {
    if (v == M) {
      // Odd sizes pad by 1 (output ceil(s / 2)), so that 28x28 inputs reach 1x1 after five pools;
      // even sizes pool exactly as torchvision's MaxPool2d(2, 2).
      const int64_t pad = s % 2;
      s = detail::conv_out("vgg", "features." + std::to_string(features->size()), s, 2, 2, pad,
                           cfg);
      features->push_back(std::make_shared<nn::MaxPool2d>(2, 2, pad));
      continue;
    }
    auto conv = std::make_shared<nn::Conv2d>(in, v, 3, 1, 1);
    nn::init::kaiming_normal_(conv->weight, 0, "fan_out", "relu");
    nn::init::zeros_(conv->bias);
    features->push_back(conv);
    if (batch_norm) features->push_back(std::make_shared<nn::BatchNorm2d>(v));
    features->push_back(std::make_shared<nn::ReLU>(true));
    in = v;
  }
  register_module("features", features);
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(7, 7));
  classifier = std::make_shared<nn::Sequential>(
      nn::Linear(512 * 7 * 7, 4096), nn::ReLU(true), nn::Dropout(0.5), nn::Linear(4096, 4096),
      nn::ReLU(true), nn::Dropout(0.5), nn::Linear(4096, cfg.num_classes));
  for (size_t i : {0, 3, 6}) {
    auto fc = classifier->at<nn::Linear>(i);
    nn::init::normal_(fc->weight, 0, 0.01);
    nn::init::zeros_(fc->bias);
  }
  register_module("classifier", classifier);
}

Tensor VGG::forward(const Tensor& x) {
  return classifier->forward(avgpool->forward(features->forward(x)).flatten(1));
}

std::shared_ptr<VGG> vgg11(const ModelConfig& cfg, bool batch_norm) {
  return std::make_shared<VGG>(cfg, kVgg11, batch_norm);
}

std::shared_ptr<VGG> vgg16(const ModelConfig& cfg, bool batch_norm) {
  return std::make_shared<VGG>(cfg, kVgg16, batch_norm);
}

}  // namespace ignis::models
