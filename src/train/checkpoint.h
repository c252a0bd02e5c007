// The checkpoint loader's entry point on a file already read into memory (the fuzzer's).
// Private to src/.
#pragma once

#include <string>

#include "ignis/serialize.h"
#include "ignis/train.h"

namespace ignis::train {

/// load_checkpoint on the contents `f` of the file `path` (used in errors): all checks, then
/// model, optimizer, scheduler and generator change together, or none of them does.
TrainingState load_checkpoint_file(const SafetensorsFile& f, const std::string& path,
                                   nn::Module& model, optim::Optimizer& optimizer,
                                   optim::LRScheduler* scheduler);

}  // namespace ignis::train
