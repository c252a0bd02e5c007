// Training checkpoints in one safetensors file: model, optimizer and scheduler state as
// prefixed tensors, counters and the RNG state as metadata.
#include "train/checkpoint.h"

#include <string>

#include "ignis/generator.h"
#include "ignis/serialize.h"
#include "ignis/train.h"
#include "io/json.h"

namespace ignis::train {

namespace {
constexpr const char* kFormat = "ignis-checkpoint-1";

uint64_t parse_u64(const std::map<std::string, std::string>& meta, const std::string& key,
                   const std::string& path) {
  auto it = meta.find(key);
  IGNIS_CHECK(it != meta.end(), "load_checkpoint: ", path, " has no '", key, "' metadata");
  IGNIS_CHECK(!it->second.empty() && it->second[0] >= '0' && it->second[0] <= '9',
              "load_checkpoint: ", path, ": metadata '", key, "' = '", json::printable(it->second),
              "' is not a number");
  try {
    size_t used = 0;
    unsigned long long v = std::stoull(it->second, &used);
    IGNIS_CHECK(used == it->second.size(), "bad number");
    return v;
  } catch (const std::exception&) {
    IGNIS_FAIL("load_checkpoint: ", path, ": metadata '", key, "' = '", json::printable(it->second),
               "' is not a number");
  }
}

// Module and optimizer keys are printable; a name from the file that is not (a terminal escape
// sequence, say) is refused here, escaped, before the state-dict checks could print it raw.
void check_names(const NamedTensorList& tensors, const char* op, const std::string& path) {
  for (const auto& [n, t] : tensors) {
    const std::string shown = json::printable(n);
    IGNIS_CHECK(shown == n, op, ": ", path, ": tensor name '", shown,
                "' has control characters or invalid UTF-8");
  }
}

std::vector<std::pair<std::string, Tensor>> with_prefix(
    const std::vector<std::pair<std::string, Tensor>>& file, const std::string& prefix) {
  std::vector<std::pair<std::string, Tensor>> out;
  for (const auto& [n, t] : file) {
    if (n.rfind(prefix, 0) == 0) out.emplace_back(n.substr(prefix.size()), t);
  }
  return out;
}
}  // namespace

void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const optim::LRScheduler* scheduler,
                     const TrainingState& state) {
  NamedTensorList all;
  for (auto& [n, t] : model.state_dict()) all.emplace_back("model." + n, t);
  for (auto& [n, t] : optimizer.state_dict()) all.emplace_back("optim." + n, t);
  if (scheduler) {
    for (auto& [n, t] : scheduler->state_dict()) all.emplace_back("sched." + n, t);
  }
  Generator& g = default_generator();
  std::map<std::string, std::string> meta = {{"format", kFormat},
                                             {"epoch", std::to_string(state.epoch)},
                                             {"step", std::to_string(state.step)},
                                             {"rng_seed", std::to_string(g.seed())},
                                             {"rng_offset", std::to_string(g.offset())},
                                             {"optimizer", optimizer.name()}};
  save_safetensors(path, all, meta);
}

TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, optim::LRScheduler* scheduler) {
  return load_checkpoint_file(load_safetensors(path), path, model, optimizer, scheduler);
}

TrainingState load_checkpoint_file(const SafetensorsFile& f, const std::string& path,
                                   nn::Module& model, optim::Optimizer& optimizer,
                                   optim::LRScheduler* scheduler) {
  check_names(f.tensors, "load_checkpoint", path);
  auto fmt = f.metadata.find("format");
  IGNIS_CHECK(fmt != f.metadata.end() && fmt->second == kFormat, "load_checkpoint: ", path,
              " is not an ignis training checkpoint (format metadata '",
              fmt == f.metadata.end() ? std::string("<none>") : json::printable(fmt->second), "')");
  auto opt = f.metadata.find("optimizer");
  IGNIS_CHECK(opt == f.metadata.end() || opt->second == optimizer.name(), "load_checkpoint: ", path,
              " holds the state of a ", json::printable(opt->second), " optimizer, not ",
              optimizer.name());
  // All or nothing: check everything, then change model, optimizer, scheduler and generator.
  TrainingState s;
  s.epoch = static_cast<int64_t>(parse_u64(f.metadata, "epoch", path));
  s.step = static_cast<int64_t>(parse_u64(f.metadata, "step", path));
  const uint64_t rng_seed = parse_u64(f.metadata, "rng_seed", path);
  const uint64_t rng_offset = parse_u64(f.metadata, "rng_offset", path);
  const auto model_sd = with_prefix(f.tensors, "model.");
  const auto optim_sd = with_prefix(f.tensors, "optim.");
  model.check_state_dict(model_sd, /*strict=*/true);
  optimizer.check_state_dict(optim_sd);
  if (scheduler) {
    // Schedulers have no separate check: a failed load is undone from a snapshot.
    const optim::OptimizerStateDict before = scheduler->state_dict();
    try {
      scheduler->load_state_dict(with_prefix(f.tensors, "sched."));
    } catch (...) {
      scheduler->load_state_dict(before);
      throw;
    }
  }
  optimizer.load_state_dict(optim_sd);
  model.load_state_dict(model_sd, /*strict=*/true);
  default_generator().set_state(rng_seed, rng_offset);
  return s;
}

void save_module(const std::string& path, const nn::Module& model) {
  save_safetensors(path, model.state_dict(), {{"format", "ignis-module-1"}});
}

void load_module(const std::string& path, nn::Module& model, bool strict) {
  const SafetensorsFile f = load_safetensors(path);
  check_names(f.tensors, "load_module", path);
  model.load_state_dict(f.tensors, strict);
}

}  // namespace ignis::train
