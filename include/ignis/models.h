// ignis::models: the model zoo, created by name from a registry (`ignis train --model NAME`).
//
// AlexNet, VGG and ResNet follow torchvision's module structure and names, so their
// state_dict keys are torchvision's (features.0.weight, layer1.0.downsample.1.running_mean,
// fc.bias, ...) and, at 1000 classes and 224x224, so are their parameter counts.
//
// Small images. Each model also runs on CIFAR (3x32x32) and MNIST (1x28x28):
// - ResNet: with image_size <= 32 (Stem::kAuto) the CIFAR stem replaces conv1 by a 3x3
//   stride-1 convolution (padding 1, no bias) and maxpool by Identity, so layer1 sees the full
//   32x32 map (as in the ResNet paper's CIFAR experiments); layer2-4 halve it to 4x4 before
//   the global average pool. Keys are unchanged; conv1.weight is [64, C, 3, 3].
// - AlexNet: the CIFAR stem (image_size <= 32) replaces features.0 (11x11 stride 4) by a 3x3
//   stride-1 convolution with padding 1; the three 3x3 stride-2 max-pools then take 32 -> 15 ->
//   7 -> 3 (28 -> 13 -> 6 -> 2), and avgpool (adaptive, 6x6) spreads the map over the
//   classifier's 6x6 input, which is unchanged.
// - VGG needs no stem change: at 32x32 the five max-pools leave 1x1, which the adaptive 7x7
//   avgpool replicates. A max-pool whose input has an odd size s pads by 1 (giving ceil(s/2)),
//   so 28x28 becomes 14, 7, 4, 2, 1; even sizes (224, 32) pool exactly as torchvision.
// - LeNet-5 takes any size: its first linear layer has 64 * (s/4)^2 inputs.
#pragma once

#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ignis/nn.h"

namespace ignis::models {

/// What a model is built for: input channels and size, and the number of classes.
struct ModelConfig {
  int64_t in_channels = 1;
  int64_t image_size = 28;
  int64_t num_classes = 10;
};

/// The first layers of AlexNet and ResNet: chosen from the image size (kAuto: ImageNet when
/// image_size > 32, else CIFAR) or forced.
enum class Stem { kAuto, kImageNet, kCifar };

/// The MLP of the training demo: Flatten - Linear(in, 512) - ReLU - Linear(512, 256) - ReLU -
/// Linear(256, classes), with in = channels * size * size.
std::shared_ptr<nn::Sequential> mlp(const ModelConfig& cfg = {},
                                    std::vector<int64_t> hidden = {512, 256});

/// LeNet-5 as the CNN benchmark model: Conv2d(C, 32, 5, padding 2) - ReLU - MaxPool2d(2) -
/// Conv2d(32, 64, 5, padding 2) - ReLU - MaxPool2d(2) - Flatten - Linear(64 (s/4)^2, 512) -
/// ReLU - Linear(512, classes). 1,663,370 parameters for MNIST.
std::shared_ptr<nn::Sequential> lenet(const ModelConfig& cfg = {});

/// torchvision's AlexNet: features (5 convolutions, 3 max-pools), avgpool (adaptive 6x6),
/// classifier (Dropout - Linear(9216, 4096) - ReLU - Dropout - Linear - ReLU - Linear).
/// PyTorch's default initialisation, as torchvision. 61,100,840 parameters at 1000 classes.
class AlexNet : public nn::Module {
 public:
  explicit AlexNet(const ModelConfig& cfg, Stem stem = Stem::kAuto);
  std::string type_name() const override { return "AlexNet"; }
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Sequential> features, classifier;
  std::shared_ptr<nn::Module> avgpool;
};

/// torchvision's VGG: features from a layer list (`cfg`: channel counts, 0 for a max-pool),
/// avgpool (adaptive 7x7), classifier (Linear(25088, 4096) - ReLU - Dropout - Linear - ReLU -
/// Dropout - Linear). Convolutions kaiming-normal (fan_out, relu) with zero bias, batch norm
/// weight 1 and bias 0, linear layers N(0, 0.01) with zero bias, as torchvision.
class VGG : public nn::Module {
 public:
  VGG(const ModelConfig& cfg, const std::vector<int64_t>& layers, bool batch_norm);
  std::string type_name() const override { return "VGG"; }
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Sequential> features, classifier;
  std::shared_ptr<nn::Module> avgpool;
};

/// torchvision's ResNet (v1.5: a Bottleneck strides in its 3x3 convolution): conv1, bn1,
/// relu, maxpool, layer1..layer4 of BasicBlock or Bottleneck blocks, avgpool, fc. Convolutions
/// kaiming-normal (fan_out, relu), batch norm weight 1 and bias 0, as torchvision.
class ResNet : public nn::Module {
 public:
  /// blocks: the number of blocks of each of the four stages; bottleneck: Bottleneck blocks
  /// (expansion 4) instead of BasicBlock.
  ResNet(const ModelConfig& cfg, const std::vector<int64_t>& blocks, bool bottleneck,
         Stem stem = Stem::kAuto);
  std::string type_name() const override { return "ResNet"; }
  Tensor forward(const Tensor& x) override;
  std::shared_ptr<nn::Module> conv1, bn1, relu, maxpool, avgpool;
  std::shared_ptr<nn::Sequential> layer1, layer2, layer3, layer4;
  std::shared_ptr<nn::Linear> fc;
};

std::shared_ptr<AlexNet> alexnet(const ModelConfig& cfg, Stem stem = Stem::kAuto);
/// VGG-11 and VGG-16 (configurations A and D), with or without batch norm.
std::shared_ptr<VGG> vgg11(const ModelConfig& cfg, bool batch_norm = false);
std::shared_ptr<VGG> vgg16(const ModelConfig& cfg, bool batch_norm = false);
/// ResNet-18 and -34 (BasicBlock, [2,2,2,2] and [3,4,6,3]), ResNet-50 (Bottleneck, [3,4,6,3]).
std::shared_ptr<ResNet> resnet18(const ModelConfig& cfg, Stem stem = Stem::kAuto);
std::shared_ptr<ResNet> resnet34(const ModelConfig& cfg, Stem stem = Stem::kAuto);
std::shared_ptr<ResNet> resnet50(const ModelConfig& cfg, Stem stem = Stem::kAuto);

using Factory = std::function<std::shared_ptr<nn::Module>(const ModelConfig&)>;
/// Adds a model to the registry (models register themselves at start-up). `natural` is the
/// configuration the model is usually built for (what `ignis models` prints counts for).
void register_model(const std::string& name, const std::string& description, Factory f,
                    ModelConfig natural = {});
/// Builds a registered model; throws listing the registered names when `name` is unknown.
std::shared_ptr<nn::Module> create(const std::string& name, const ModelConfig& cfg = {});
struct ModelInfo {
  std::string name;
  std::string description;
  ModelConfig natural;  // e.g. {3, 224, 1000} for the ImageNet models, {1, 28, 10} for lenet
};
std::vector<ModelInfo> list();

namespace detail {
/// Checks a configuration (positive channels, size and classes) naming the model.
void check_config(const char* model, const ModelConfig& cfg);
/// The output size of a convolution or pool along one dim; throws naming the model and layer
/// when the map would vanish.
int64_t conv_out(const char* model, const std::string& layer, int64_t size, int64_t kernel,
                 int64_t stride, int64_t padding, const ModelConfig& cfg);
}  // namespace detail

}  // namespace ignis::models
