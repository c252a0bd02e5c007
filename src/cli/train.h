// `ignis train`, `ignis eval`, `ignis fetch`, `ignis models`.
#pragma once

#include "cli/cli.h"

namespace ignis::cli {
int train_main(const Args& args);
/// `ignis train` with a graph model or dataset (cli/train_gnn.cpp).
bool is_graph_training(const Args& args);
int train_gnn_main(const Args& args);
int eval_main(const Args& args);
int fetch_main(const Args& args);
int models_main(const Args& args);
int ops_main(const Args& args);
}  // namespace ignis::cli
