#include <map>
#include <mutex>
#include <sstream>

#include "ignis/models.h"

namespace ignis::models {

namespace {
struct Entry {
  std::string description;
  Factory factory;
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
    register_model("mlp", "Flatten-Linear(in,512)-ReLU-Linear(512,256)-ReLU-Linear(256,classes)",
                   [](const ModelConfig& c) { return mlp(c); });
  }
} register_builtins;
}  // namespace

std::shared_ptr<nn::Sequential> mlp(const ModelConfig& cfg, std::vector<int64_t> hidden) {
  IGNIS_CHECK(cfg.in_channels > 0 && cfg.image_size > 0 && cfg.num_classes > 0,
              "models::mlp: channels, image size and classes must be positive");
  auto m = std::make_shared<nn::Sequential>();
  m->push_back(std::make_shared<nn::Flatten>());
  int64_t in = cfg.in_channels * cfg.image_size * cfg.image_size;
  for (int64_t h : hidden) {
    m->push_back(std::make_shared<nn::Linear>(in, h));
    m->push_back(std::make_shared<nn::ReLU>());
    in = h;
  }
  m->push_back(std::make_shared<nn::Linear>(in, cfg.num_classes));
  return m;
}

void register_model(const std::string& name, const std::string& description, Factory f) {
  std::lock_guard<std::mutex> g(registry_mutex());
  registry()[name] = {description, std::move(f)};
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
  for (const auto& [n, e] : registry()) out.push_back({n, e.description});
  return out;
}

}  // namespace ignis::models
