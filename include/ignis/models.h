// ignis::models: the model zoo, created by name from a registry (`ignis train --model NAME`).
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

/// The MLP of the training demo: Flatten - Linear(in, 512) - ReLU - Linear(512, 256) - ReLU -
/// Linear(256, classes), with in = channels * size * size.
std::shared_ptr<nn::Sequential> mlp(const ModelConfig& cfg = {},
                                    std::vector<int64_t> hidden = {512, 256});

using Factory = std::function<std::shared_ptr<nn::Module>(const ModelConfig&)>;
/// Adds a model to the registry (models register themselves at start-up).
void register_model(const std::string& name, const std::string& description, Factory f);
/// Builds a registered model; throws listing the registered names when `name` is unknown.
std::shared_ptr<nn::Module> create(const std::string& name, const ModelConfig& cfg = {});
struct ModelInfo {
  std::string name;
  std::string description;
};
std::vector<ModelInfo> list();

}  // namespace ignis::models
