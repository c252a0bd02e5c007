// libFuzzer target: the TU graph-classification reader (src/data/graph_tu.cpp) through its
// in-memory entry point. The input is split at NUL bytes into the texts of the files A,
// graph_indicator, graph_labels and, when present, node_labels, edge_attributes and
// node_attributes. Any input must give graphs that pass Graph::validate, or an ignis::Error.
// Build and run: make fuzz
#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "data/graph_tu.h"
#include "fuzz_util.h"
#include "ignis/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  static const char* kParts[] = {"A",           "graph_indicator", "graph_labels",
                                 "node_labels", "edge_attributes", "node_attributes"};
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  std::map<std::string, std::string> texts;
  for (size_t k = 0; k < parts.size() && k < 6; ++k) texts[kParts[k]] = parts[k];
  std::shared_ptr<ignis::data::InMemoryGraphDataset> ds;
  try {
    ds = ignis::data::tu_dataset_from_texts(texts, "in", "F");
  } catch (const ignis::Error&) {
    return 0;
  }
  for (int64_t g = 0; g < ds->size(); ++g) {
    const ignis::data::Graph gr = ds->get(g);
    bool valid = true;
    try {
      gr.validate();
    } catch (const ignis::Error&) {
      valid = false;
    }
    FUZZ_ASSERT(valid && gr.num_nodes() > 0 && gr.y.numel() == 1);
  }
  return 0;
}
