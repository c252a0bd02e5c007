// The graph file reader on a safetensors file already in memory (the CLI, the fuzzer).
#pragma once

#include <string>

#include "ignis/jit.h"
#include "ignis/serialize.h"

namespace ignis::jit::detail {

/// Validates and reads the graph stored in `f` (a file written by Graph::save); `path` names
/// the file in errors.
Graph graph_from_file(const SafetensorsFile& f, const std::string& path);

}  // namespace ignis::jit::detail
