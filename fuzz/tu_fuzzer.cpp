// libFuzzer target: the TU graph-classification reader (src/data/graph_tu.cpp). The input is
// split at NUL bytes into the files of a dataset "F": F_A.txt, F_graph_indicator.txt,
// F_graph_labels.txt and, when present, F_node_labels.txt and F_edge_attributes.txt, written
// to a scratch directory. Any input must give valid graphs or an ignis::Error. Build and run:
// make fuzz
#include <unistd.h>

#include <cstdint>
#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "fuzz_util.h"
#include "ignis/data/graph.h"
#include "ignis/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  namespace fs = std::filesystem;
  static const fs::path dir =
      fs::temp_directory_path() / ("ignis-tu-fuzz-" + std::to_string(::getpid()));
  static const char* kFiles[] = {"F_A.txt", "F_graph_indicator.txt", "F_graph_labels.txt",
                                 "F_node_labels.txt", "F_edge_attributes.txt"};
  fs::create_directories(dir);
  std::vector<std::string> parts(1);
  for (size_t i = 0; i < size; ++i) {
    if (data[i] == 0) {
      parts.emplace_back();
    } else {
      parts.back().push_back(static_cast<char>(data[i]));
    }
  }
  for (size_t k = 0; k < 5; ++k) {
    const fs::path p = dir / kFiles[k];
    if (k < parts.size()) {
      std::ofstream(p, std::ios::binary) << parts[k];
    } else {
      std::error_code ec;
      fs::remove(p, ec);
    }
  }
  try {
    auto ds = ignis::data::load_tu_dataset(dir.string(), "F");
    for (int64_t g = 0; g < ds->size(); ++g) ds->get(g).validate();
  } catch (const ignis::Error&) {
  }
  return 0;
}
