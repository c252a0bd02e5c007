// The model registry, the MLP, and the shared checks of the zoo's builders.
#include <map>
#include <mutex>
#include <sstream>

#include "ignis/models.h"

namespace ignis::models {

namespace {
struct Entry {
  std::string description;
  Factory factory;
  ModelConfig natural;
};
std::map<std::string, Entry>& registry() {
  static std::map<std::string, Entry> r;
  return r;
}
std::mutex& registry_mutex() {
  static std::mutex m;
  return m;
}

struct RegisterBuiltins {
  RegisterBuiltins() {
    const ModelConfig mnist{1, 28, 10};
    const ModelConfig imagenet{3, 224, 1000};
    register_model(
        "mlp", "Flatten-Linear(in,512)-ReLU-Linear(512,256)-ReLU-Linear(256,classes)",
        [](const ModelConfig& c) { return mlp(c); }, mnist);
    register_model(
        "lenet",
        "LeNet-5: 2x (Conv5x5-ReLU-MaxPool2) - Linear(64(s/4)^2,512)-ReLU-"
        "Linear(512,classes)",
        [](const ModelConfig& c) { return lenet(c); }, mnist);
    register_model(
        "alexnet", "AlexNet (torchvision layout; CIFAR stem when image_size <= 32)",
        [](const ModelConfig& c) { return alexnet(c); }, imagenet);
    register_model(
        "vgg11", "VGG-11 (configuration A)", [](const ModelConfig& c) { return vgg11(c, false); },
        imagenet);
    register_model(
        "vgg11_bn", "VGG-11 with batch norm", [](const ModelConfig& c) { return vgg11(c, true); },
        imagenet);
    register_model(
        "vgg16", "VGG-16 (configuration D)", [](const ModelConfig& c) { return vgg16(c, false); },
        imagenet);
    register_model(
        "vgg16_bn", "VGG-16 with batch norm", [](const ModelConfig& c) { return vgg16(c, true); },
        imagenet);
    register_model(
        "resnet18", "ResNet-18 (BasicBlock [2,2,2,2]; CIFAR stem when image_size <= 32)",
        [](const ModelConfig& c) { return resnet18(c); }, imagenet);
    register_model(
        "resnet34", "ResNet-34 (BasicBlock [3,4,6,3]; CIFAR stem when image_size <= 32)",
        [](const ModelConfig& c) { return resnet34(c); }, imagenet);
    register_model(
        "resnet50", "ResNet-50 (Bottleneck [3,4,6,3]; CIFAR stem when image_size <= 32)",
        [](const ModelConfig& c) { return resnet50(c); }, imagenet);
  }
} register_builtins;
}  // namespace

void detail::check_config(const char* model, const ModelConfig& cfg) {
  IGNIS_CHECK(
      cfg.in_channels > 0 && cfg.image_size > 0 && cfg.num_classes > 0, "models::", model,
      ": channels, image size and classes must be positive (got in_channels=", cfg.in_channels,
      ", image_size=", cfg.image_size, ", num_classes=", cfg.num_classes, ")");
}

int64_t detail::conv_out(const char* model, const std::string& layer, int64_t size, int64_t kernel,
                         int64_t stride, int64_t padding, const ModelConfig& cfg) {
  const int64_t out = (size + 2 * padding - kernel) / stride + 1;
  IGNIS_CHECK(size + 2 * padding >= kernel && out >= 1, "models::", model, ": image_size ",
              cfg.image_size, " is too small: the feature map is ", size, "x", size, " before ",
              layer, " (kernel ", kernel, ", stride ", stride, ", padding ", padding, ")");
  return out;
}

std::shared_ptr<nn::Sequential> mlp(const ModelConfig& cfg, std::vector<int64_t> hidden) {
  detail::check_config("mlp", cfg);
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  int64_t in = cfg.in_channels * cfg.image_size * cfg.image_size;
  for (int64_t h : hidden) {
    m->push_back(std::make_shared<nn::Linear>(in, h));
    m->push_back(std::make_shared<nn::ReLU>(true));
    in = h;
  }
  m->push_back(std::make_shared<nn::Linear>(in, cfg.num_classes));
  return m;
}

void register_model(const std::string& name, const std::string& description, Factory f,
                    ModelConfig natural) {
  std::lock_guard<std::mutex> g(registry_mutex());
  registry()[name] = {description, std::move(f), natural};
}

std::shared_ptr<nn::Module> create(const std::string& name, const ModelConfig& cfg) {
  Factory f;
  {
    std::lock_guard<std::mutex> g(registry_mutex());
    auto it = registry().find(name);
    if (it == registry().end()) {
      std::ostringstream names;
      for (const auto& [n, e] : registry()) names << " " << n;
      IGNIS_FAIL("models: unknown model '", name, "' (registered:", names.str(), ")");
    }
    f = it->second.factory;
  }
  return f(cfg);
}

std::vector<ModelInfo> list() {
  std::lock_guard<std::mutex> g(registry_mutex());
  std::vector<ModelInfo> out;
  for (const auto& [n, e] : registry()) out.push_back({n, e.description, e.natural});
  return out;
}

}  // namespace ignis::models
