// ResNet-18/34/50 in torchvision's layout (v1.5), with a CIFAR stem for small images.
#include "ignis/ignis.h"

namespace ignis::models {

namespace {

std::shared_ptr<nn::Conv2d> conv(int64_t in, int64_t out, int64_t k, int64_t stride) {
  auto c = std::make_shared<nn::Conv2d>(in, out, k, stride, k / 2, 1, 1, /*bias=*/false);
  nn::init::kaiming_normal_(c->weight, 0, "fan_out", "relu");
  return c;
}

// The projection shortcut of a block that changes the size or the channel count.
std::shared_ptr<nn::Sequential> downsample(int64_t in, int64_t out, int64_t stride) {
  return std::make_shared<nn::Sequential>(conv(in, out, 1, stride),
                                          std::make_shared<nn::BatchNorm2d>(out));
}

// Two 3x3 convolutions; out = relu(bn2(conv2(relu(bn1(conv1(x))))) + shortcut(x)).
class BasicBlock : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 1;
  BasicBlock(int64_t in, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 3, stride));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, 1));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
    if (stride != 1 || in != planes) {
      down = register_module("downsample", downsample(in, planes, stride));
    }
  }
  std::string type_name() const override { return "BasicBlock"; }
  Tensor forward(const Tensor& x) override {
    Tensor out = relu(bn1->forward(conv1->forward(x)));
    out = bn2->forward(conv2->forward(out));
    return relu(out + (down ? down->forward(x) : x));
  }

 private:
  std::shared_ptr<nn::Module> conv1, bn1, conv2, bn2;
  std::shared_ptr<nn::Sequential> down;
};

// 1x1 (reduce) - 3x3 (with the stride, as torchvision's v1.5) - 1x1 (expand by 4).
class Bottleneck : public nn::Module {
 public:
  static constexpr int64_t kExpansion = 4;
  Bottleneck(int64_t in, int64_t planes, int64_t stride) {
    conv1 = register_module("conv1", conv(in, planes, 1, 1));
    bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(planes));
    conv2 = register_module("conv2", conv(planes, planes, 3, stride));
    bn2 = register_module("bn2", std::make_shared<nn::BatchNorm2d>(planes));
    conv3 = register_module("conv3", conv(planes, planes * kExpansion, 1, 1));
    bn3 = register_module("bn3", std::make_shared<nn::BatchNorm2d>(planes * kExpansion));
    if (stride != 1 || in != planes * kExpansion) {
      down = register_module("downsample", downsample(in, planes * kExpansion, stride));
    }
  }
  std::string type_name() const override { return "Bottleneck"; }
  Tensor forward(const Tensor& x) override {
    Tensor out = relu(bn1->forward(conv1->forward(x)));
    out = relu(bn2->forward(conv2->forward(out)));
    out = bn3->forward(conv3->forward(out));
    return relu(out + (down ? down->forward(x) : x));
  }

 private:
  std::shared_ptr<nn::Module> conv1, bn1, conv2, bn2, conv3, bn3;
  std::shared_ptr<nn::Sequential> down;
};

template <class Block>
std::shared_ptr<nn::Sequential> make_layer(int64_t& in, int64_t planes, int64_t blocks,
                                           int64_t stride) {
  auto layer = std::make_shared<nn::Sequential>();
  for (int64_t b = 0; b < blocks; ++b) {
    layer->push_back(std::make_shared<Block>(in, planes, b == 0 ? stride : 1));
    in = planes * Block::kExpansion;
  }
  return layer;
}

}  // namespace

ResNet::ResNet(const ModelConfig& cfg, const std::vector<int64_t>& blocks, bool bottleneck,
               Stem stem) {
  detail::check_config("resnet", cfg);
  IGNIS_CHECK(blocks.size() == 4, "models::ResNet: expected 4 stages of blocks, got ",
              blocks.size());
  const bool cifar = stem == Stem::kCifar || (stem == Stem::kAuto && cfg.image_size <= 32);
  if (cifar) {
    conv1 = register_module("conv1", conv(cfg.in_channels, 64, 3, 1));
  } else {
    auto c = std::make_shared<nn::Conv2d>(cfg.in_channels, 64, 7, 2, 3, 1, 1, false);
    nn::init::kaiming_normal_(c->weight, 0, "fan_out", "relu");
    conv1 = register_module("conv1", c);
  }
  bn1 = register_module("bn1", std::make_shared<nn::BatchNorm2d>(64));
  relu = register_module("relu", std::make_shared<nn::ReLU>());
  if (cifar) {
    maxpool = register_module("maxpool", std::make_shared<nn::Identity>());
  } else {
    maxpool = register_module("maxpool", std::make_shared<nn::MaxPool2d>(3, 2, 1));
  }
  int64_t in = 64;
  auto make = [&](int64_t planes, int64_t n, int64_t stride) {
    return bottleneck ? make_layer<Bottleneck>(in, planes, n, stride)
                      : make_layer<BasicBlock>(in, planes, n, stride);
  };
  layer1 = register_module("layer1", make(64, blocks[0], 1));
  layer2 = register_module("layer2", make(128, blocks[1], 2));
  layer3 = register_module("layer3", make(256, blocks[2], 2));
  layer4 = register_module("layer4", make(512, blocks[3], 2));
  avgpool = register_module("avgpool", std::make_shared<nn::AdaptiveAvgPool2d>(1, 1));
  fc = register_module("fc", std::make_shared<nn::Linear>(in, cfg.num_classes));
}

Tensor ResNet::forward(const Tensor& x) {
  Tensor h = maxpool->forward(relu->forward(bn1->forward(conv1->forward(x))));
  h = layer4->forward(layer3->forward(layer2->forward(layer1->forward(h))));
  return fc->forward(avgpool->forward(h).flatten(1));
}

std::shared_ptr<ResNet> resnet18(const ModelConfig& cfg, Stem stem) {
  return std::make_shared<ResNet>(cfg, std::vector<int64_t>{2, 2, 2, 2}, false, stem);
}
std::shared_ptr<ResNet> resnet34(const ModelConfig& cfg, Stem stem) {
  return std::make_shared<ResNet>(cfg, std::vector<int64_t>{3, 4, 6, 3}, false, stem);
}
std::shared_ptr<ResNet> resnet50(const ModelConfig& cfg, Stem stem) {
  return std::make_shared<ResNet>(cfg, std::vector<int64_t>{3, 4, 6, 3}, true, stem);
}

}  // namespace ignis::models
