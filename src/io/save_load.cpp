// torch::save / torch::load spellings over safetensors files.
#include "ignis/save_load.h"

#include <string>

#include "ignis/serialize.h"
#include "ignis/train.h"

namespace ignis {

namespace {
constexpr const char* kTensorFormat = "ignis-tensor-1";
constexpr const char* kListFormat = "ignis-tensor-list-1";
constexpr const char* kOptimizerFormat = "ignis-optimizer-1";

SafetensorsFile read(const std::string& path, const char* format, const char* what) {
  SafetensorsFile f = load_safetensors(path);
  auto it = f.metadata.find("format");
  IGNIS_CHECK(it != f.metadata.end() && it->second == format, "load: '", path, "' does not hold ",
              what, " (format '", it == f.metadata.end() ? std::string("none") : it->second,
              "', expected '", format, "')");
  return f;
}
}  // namespace

void save(const Tensor& t, const std::string& path) {
  IGNIS_CHECK(t.defined(), "save: the tensor is undefined");
  save_safetensors(path, {{"tensor", t.detach()}}, {{"format", kTensorFormat}});
}

void load(Tensor& t, const std::string& path) {
  const SafetensorsFile f = read(path, kTensorFormat, "a tensor");
  IGNIS_CHECK(f.tensors.size() == 1, "load: '", path, "' holds ", f.tensors.size(),
              " tensors, expected 1");
  t = f.at("tensor");
}

void save(const std::vector<Tensor>& ts, const std::string& path) {
  NamedTensorList named;
  for (size_t i = 0; i < ts.size(); ++i) {
    IGNIS_CHECK(ts[i].defined(), "save: tensor ", i, " of the list is undefined");
    named.emplace_back(std::to_string(i), ts[i].detach());
  }
  save_safetensors(path, named, {{"format", kListFormat}, {"size", std::to_string(ts.size())}});
}

void load(std::vector<Tensor>& ts, const std::string& path) {
  const SafetensorsFile f = read(path, kListFormat, "a tensor list");
  std::vector<Tensor> out;
  for (size_t i = 0; i < f.tensors.size(); ++i) out.push_back(f.at(std::to_string(i)));
  ts = std::move(out);
}

void save(const nn::Module& m, const std::string& path) { train::save_module(path, m); }

void load(nn::Module& m, const std::string& path) { train::load_module(path, m, true); }

void save(const optim::Optimizer& o, const std::string& path) {
  save_safetensors(path, o.state_dict(), {{"format", kOptimizerFormat}});
}

void load(optim::Optimizer& o, const std::string& path) {
  const SafetensorsFile f = read(path, kOptimizerFormat, "an optimizer's state");
  o.load_state_dict(f.tensors);
}

}  // namespace ignis
