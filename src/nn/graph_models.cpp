// nn::GNN: stacks of the graph convolutions for node and graph classification.
#include <sstream>

#include "ignis/nn/functional.h"
#include "ignis/nn/graph.h"
#include "ignis/nn/layers.h"
#include "ignis/nn/norm.h"
#include "ignis/ops.h"

namespace ignis::nn {

namespace {
std::shared_ptr<Module> gin_mlp(int64_t in, int64_t out) {
  return std::make_shared<Sequential>(Linear(in, out), BatchNorm1d(out), ReLU(), Linear(out, out));
}
}  // namespace

GNN::GNN(GNNOptions o) : opts_(std::move(o)) {
  const std::string& k = opts_.kind;
  IGNIS_CHECK(k == "gcn" || k == "sage" || k == "gin" || k == "gat", "GNN: unknown kind '", k,
              "' (expected gcn, sage, gin or gat)");
  IGNIS_CHECK(
      opts_.pool.empty() || opts_.pool == "add" || opts_.pool == "mean" || opts_.pool == "max",
      "GNN: unknown pool '", opts_.pool, "' (expected add, mean or max, or none)");
  IGNIS_CHECK(opts_.layers >= 1 && opts_.in_channels > 0 && opts_.out_channels > 0 &&
                  opts_.hidden > 0 && opts_.heads > 0,
              "GNN: layers, channels and heads must be positive");
  const bool graph_level = !opts_.pool.empty();
  int64_t in = opts_.in_channels;
  for (int64_t l = 0; l < opts_.layers; ++l) {
    const bool last = !graph_level && l + 1 == opts_.layers;
    const int64_t out = last ? opts_.out_channels : opts_.hidden;
    std::shared_ptr<Module> conv;
    int64_t produced = out;
    if (k == "gcn") {
      conv = std::make_shared<GCNConv>(in, out);
    } else if (k == "sage") {
      conv = std::make_shared<SAGEConv>(in, out, "mean");
    } else if (k == "gin") {
      conv = std::make_shared<GINConv>(last ? std::make_shared<Linear>(in, out) : gin_mlp(in, out),
                                       0.0, true);
    } else {
      // Hidden layers: heads x (hidden / heads) concatenated; the last node-level layer: one
      // output per class, heads averaged.
      if (last) {
        conv = std::make_shared<GATConv>(in, out, opts_.heads, false, 0.2, opts_.dropout);
      } else {
        const int64_t per_head = std::max<int64_t>(1, out / opts_.heads);
        conv = std::make_shared<GATConv>(in, per_head, opts_.heads, true, 0.2, opts_.dropout);
        produced = per_head * opts_.heads;
      }
    }
    convs_.push_back(register_module("conv" + std::to_string(l + 1), conv));
    in = produced;
  }
  if (graph_level) {
    head_ = register_module("head", std::make_shared<Sequential>(
                                        Linear(in, opts_.hidden), ReLU(), Dropout(opts_.dropout),
                                        Linear(opts_.hidden, opts_.out_channels)));
  }
}

std::string GNN::extra_repr() const {
  std::ostringstream os;
  os << "kind=" << opts_.kind << ", layers=" << opts_.layers << ", hidden=" << opts_.hidden;
  if (!opts_.pool.empty()) os << ", pool=" << opts_.pool;
  return os.str();
}

Tensor GNN::forward(const Tensor& x, const Tensor& edge_index, const Tensor& batch,
                    int64_t num_graphs) {
  Tensor h = x;
  const bool graph_level = !opts_.pool.empty();
  for (size_t l = 0; l < convs_.size(); ++l) {
    const bool last = l + 1 == convs_.size();
    // Dropout on the input of each layer (Kipf & Welling's setting), not on the first one's
    // for graph-level models.
    if (!graph_level || l > 0) h = functional::dropout(h, opts_.dropout, is_training());
    Module* c = convs_[l].get();
    if (auto* gcn = dynamic_cast<GCNConv*>(c))
      h = gcn->forward(h, edge_index);
    else if (auto* sage = dynamic_cast<SAGEConv*>(c))
      h = sage->forward(h, edge_index);
    else if (auto* gin = dynamic_cast<GINConv*>(c))
      h = gin->forward(h, edge_index);
    else
      h = static_cast<GATConv*>(c)->forward(h, edge_index);
    if (!last || graph_level) h = relu(h);
  }
  if (!graph_level) return h;
  if (opts_.pool == "add")
    h = global_add_pool(h, batch, num_graphs);
  else if (opts_.pool == "mean")
    h = global_mean_pool(h, batch, num_graphs);
  else
    h = global_max_pool(h, batch, num_graphs);
  return head_->forward(h);
}

}  // namespace ignis::nn
