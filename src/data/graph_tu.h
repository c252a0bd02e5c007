// The TU reader's in-memory entry point (graph_tu.cpp), for the fuzz target: the files' texts
// by part ("A", "graph_indicator", "graph_labels", and optionally "node_labels",
// "node_attributes", "edge_attributes"); root and name only make the paths in messages. A
// missing required part is reported as the file that cannot be opened.
#pragma once

#include <map>
#include <memory>
#include <string>

#include "ignis/data/graph.h"

namespace ignis::data {

std::shared_ptr<InMemoryGraphDataset> tu_dataset_from_texts(
    const std::map<std::string, std::string>& texts, const std::string& root,
    const std::string& name);

}  // namespace ignis::data
