// libFuzzer target: the graph loader's parser and validator (jit::graph_from_json) on the JSON
// part of a graph file, with the file's tensors fixed: "w" float32[3, 4] and "b" float32[3].
// Checks the loader's promise: it throws ignis::Error or returns a graph that passes lint(),
// prints, and writes back to JSON that loads to the same graph. Seeds: fuzz/seeds/graph (graphs
// that jit::trace and Graph::save wrote for these tensors). Build and run: make fuzz
#include <cstdint>
#include <map>
#include <string>

#include "fuzz_util.h"
#include "ignis/ignis.h"

using namespace ignis;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const std::map<std::string, Tensor> tensors = {{"w", ones({3, 4})}, {"b", zeros({3})}};
  const std::string_view text(reinterpret_cast<const char*>(data), size);
  jit::Graph g;
  try {
    g = jit::graph_from_json(text, tensors);
  } catch (const Error&) {
    return 0;
  }
  g.lint();
  const std::string printed = g.str();
  jit::Graph again = jit::graph_from_json(jit::graph_to_json(g), tensors);
  FUZZ_ASSERT(again.str() == printed);
  return 0;
}
