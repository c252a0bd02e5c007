// Graph data (docs/gnn.md): the Graph type, batching several graphs into one disjoint graph
// with a batch vector (PyTorch Geometric's Batch), a loader that does it per batch, and graph
// datasets: Zachary's karate club (built in), the Planetoid citation graphs (Cora, CiteSeer,
// PubMed) and the TU graph-classification sets (MUTAG, PROTEINS, ...) from the user's copy of
// their standard files, and MNIST digits turned into graphs. Every reader validates its input
// and names the file, the line and the fault.
#pragma once

#include <cstdint>
#include <memory>
#include <string>
#include <vector>

#include "ignis/data.h"
#include "ignis/tensor.h"

namespace ignis::data {

/// One graph. x: node features [N, F] (float); edge_index: int64 [2, E], row 0 the source and
/// row 1 the target of each edge; edge_attr: optional [E, ...]; y: labels, per node ([N]) or
/// for the whole graph ([1] or 0-d); masks: optional bool [N] (node-level splits).
struct Graph {
  Tensor x, edge_index, edge_attr, y;
  Tensor train_mask, val_mask, test_mask;
  int64_t num_nodes() const { return x.defined() ? x.size(0) : 0; }
  int64_t num_edges() const { return edge_index.defined() ? edge_index.size(1) : 0; }
  int64_t num_features() const { return x.defined() && x.dim() == 2 ? x.size(1) : 0; }
  /// Throws an ignis::Error naming `what` and the fault unless the graph is well formed: x 2-D
  /// and floating, edge_index int64 [2, E] with every index in [0, N), edge_attr, y and the
  /// masks of matching sizes.
  void validate(const std::string& what = "graph") const;
};

/// Several graphs as one disjoint graph: the node features and labels concatenated, the edges
/// renumbered by each graph's node offset, and batch[i] = the graph of node i.
struct GraphBatch {
  Graph graph;
  Tensor batch;  // int64 [N]
  int64_t num_graphs = 0;
  /// Offsets of each graph's nodes, edges and label rows (num_graphs + 1 entries each).
  std::vector<int64_t> node_ptr, edge_ptr, y_ptr;
  /// The graphs again (the inverse of collate).
  std::vector<Graph> unbatch() const;
};

/// Collates graphs into one disjoint graph (validating each; an error names the graph's
/// position). Fields must be present in all graphs or in none.
GraphBatch collate(const std::vector<Graph>& graphs);

/// A map-style dataset of graphs.
class GraphDataset {
 public:
  virtual ~GraphDataset() = default;
  virtual int64_t size() const = 0;
  virtual Graph get(int64_t index) const = 0;
};

/// Graphs held in memory.
class InMemoryGraphDataset : public GraphDataset {
 public:
  InMemoryGraphDataset() = default;
  explicit InMemoryGraphDataset(std::vector<Graph> graphs) : graphs_(std::move(graphs)) {}
  int64_t size() const override { return static_cast<int64_t>(graphs_.size()); }
  Graph get(int64_t index) const override;
  /// Number of classes: max label + 1 over all graphs.
  int64_t num_classes() const;
  int64_t num_features() const { return graphs_.empty() ? 0 : graphs_[0].num_features(); }
  std::vector<Graph>& graphs() { return graphs_; }
  const std::vector<Graph>& graphs() const { return graphs_; }
  /// The graphs at `indices` (a train/test split).
  std::shared_ptr<InMemoryGraphDataset> subset(const std::vector<int64_t>& indices) const;

 private:
  std::vector<Graph> graphs_;
};

/// Iterates a graph dataset in GraphBatches: `for (const GraphBatch& b : loader)` is one epoch.
/// The tensor DataLoader's options and machinery: batch_size, shuffle (a permutation per epoch,
/// a pure function of (seed, epoch)) or a sampler (e.g. DistributedSampler), drop_last, and
/// num_workers threads that read and collate batches ahead of the consumer (prefetch_factor
/// each), handed out in order: the batches are the same whatever num_workers is. An error while
/// making a batch (an invalid graph) is rethrown when the loop reaches that batch.
class GraphDataLoader {
 public:
  GraphDataLoader(std::shared_ptr<GraphDataset> dataset, DataLoaderOptions options,
                  std::shared_ptr<Sampler> sampler = nullptr);
  ~GraphDataLoader();
  GraphDataLoader(const GraphDataLoader&) = delete;
  GraphDataLoader& operator=(const GraphDataLoader&) = delete;

  class Iterator {
   public:
    const GraphBatch& operator*();
    const GraphBatch* operator->() { return &**this; }
    Iterator& operator++();
    bool operator!=(const Iterator& o) const { return pos_ != o.pos_; }
    bool operator==(const Iterator& o) const { return pos_ == o.pos_; }

   private:
    friend class GraphDataLoader;
    Iterator(GraphDataLoader* l, int64_t pos) : loader_(l), pos_(pos) {}
    GraphDataLoader* loader_;
    int64_t pos_;
  };
  Iterator begin();
  Iterator end();
  /// Batches per epoch.
  int64_t size() const;
  int64_t num_batches() const { return size(); }
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t e) { epoch_ = e; }
  const DataLoaderOptions& options() const { return options_; }
  const GraphDataset& dataset() const { return *dataset_; }
  /// The graph indices of each batch of epoch `epoch` (what the iteration will load).
  std::vector<std::vector<int64_t>> batches(int64_t epoch) const;

 private:
  struct Epoch;  // one pass: its batches and the prefetching workers
  std::shared_ptr<GraphDataset> dataset_;
  DataLoaderOptions options_;
  std::shared_ptr<Sampler> sampler_;
  int64_t epoch_ = 0;
  std::unique_ptr<Epoch> current_;
};

/// Zachary's karate club: 34 members, 78 friendships (156 directed edges), identity features
/// [34, 34], the 4 communities of Kipf & Welling's experiment as labels y, and train_mask with
/// one member per community (the first of each).
Graph karate_club();

/// A Planetoid citation graph (Cora, CiteSeer, PubMed) from its standard files in `root`:
/// ind.<name>.{x,tx,allx,y,ty,ally,graph} (Python pickles of SciPy CSR matrices, NumPy arrays
/// and a dict of adjacency lists) and ind.<name>.test.index (text). Builds the split of Kipf &
/// Welling: train = the first |y| nodes, val = the next 500, test = the test.index nodes
/// (rows of tx reordered to them; CiteSeer's missing test nodes get zero features). Edges are
/// made symmetric and deduplicated, without self-loops, as PyTorch Geometric has them (Cora:
/// 2708 nodes, 10556 edges; CiteSeer: 3327 nodes, 9104 edges). name: "cora", "citeseer" or "pubmed"
/// (any case).
Graph load_planetoid(const std::string& root, const std::string& name);

/// A TU graph-classification dataset (MUTAG, PROTEINS, ...) from its text files in
/// `root`: <name>_A.txt, <name>_graph_indicator.txt, <name>_graph_labels.txt, and optionally
/// <name>_node_labels.txt (one-hot encoded into the features), <name>_node_attributes.txt,
/// <name>_edge_attributes.txt. Graph labels are renumbered 0..C-1 in sorted order. Nodes
/// without labels or attributes get the feature 1.
std::shared_ptr<InMemoryGraphDataset> load_tu_dataset(const std::string& root,
                                                      const std::string& name);

/// MNIST digits as graphs: each pixel above `threshold` (of 1) is a node with features
/// (intensity, row / 27, column / 27), joined by edges from its k nearest other nodes (by pixel
/// distance, within a 5x5 window; ties in scan order); y is the digit ([1]). images: [N, 28, 28]
/// or [N, 1, 28, 28], float in [0, 1] or uint8; labels int64 [N].
std::shared_ptr<InMemoryGraphDataset> mnist_graphs(const Tensor& images, const Tensor& labels,
                                                   double threshold = 0.5, int64_t k = 8);
/// The same from the MNIST files in root (train or test split), the first `limit` images (all
/// when limit < 0).
std::shared_ptr<InMemoryGraphDataset> mnist_graphs(const std::string& root, bool train,
                                                   int64_t limit = -1, double threshold = 0.5,
                                                   int64_t k = 8);

}  // namespace ignis::data
