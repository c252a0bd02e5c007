// Graph neural network layers (docs/gnn.md): the MessagePassing base (message, aggregate,
// update, after PyTorch Geometric), GCNConv, SAGEConv, GINConv, GATConv, and global pooling over
// a batch vector. Node features are [N, F]; edge_index is int64 [2, E] with row 0 the sources
// and row 1 the targets (messages flow source -> target).
#pragma once

#include <memory>
#include <string>

#include "ignis/nn/module.h"

namespace ignis::nn {

class Linear;

/// The base of message-passing layers. propagate() computes, for every edge e = (j -> i),
/// a message m_e = message(x_i, x_j, w_e), combines the messages reaching each node with
/// aggregate() ("sum", "mean" or "max"; nodes with no incoming edge get 0) and returns
/// update(aggregated, x). A layer whose messages are x_j times an edge weight overrides
/// message_and_aggregate() with one fused sparse product (DGL's SpMM; no [E, F] tensor).
class MessagePassing : public Module {
 public:
  /// aggr: "sum", "mean" or "max".
  explicit MessagePassing(std::string aggr = "sum");
  std::string type_name() const override { return "MessagePassing"; }

  /// Message passing over edge_index for node features x [N, ...]; edge_weight ([E] or [E, ...],
  /// optional) reaches message(). num_nodes: the number of target nodes (default x.size(0)).
  Tensor propagate(const Tensor& edge_index, const Tensor& x, const Tensor& edge_weight = Tensor(),
                   int64_t num_nodes = -1);
  const std::string& aggr() const { return aggr_; }

 protected:
  /// The message along each edge: x_i = x[target] (undefined unless gather_target is set),
  /// x_j = x[source], w = edge_weight. Default: x_j, times w (broadcast over x_j's trailing dims)
  /// when given.
  virtual Tensor message(const Tensor& x_i, const Tensor& x_j, const Tensor& edge_weight);
  /// Combines messages [E, ...] at their targets into [num_nodes, ...].
  virtual Tensor aggregate(const Tensor& messages, const Tensor& target, int64_t num_nodes);
  /// The layer's output from the aggregated messages. Default: aggregated.
  virtual Tensor update(const Tensor& aggregated, const Tensor& x);
  /// message + aggregate in one step; undefined (the default) when the layer has none.
  virtual Tensor message_and_aggregate(const Tensor& edge_index, const Tensor& x,
                                       const Tensor& edge_weight, int64_t num_nodes);
  /// Whether propagate gathers the target features x_i for message() (costs E x F).
  bool gather_target = false;

 private:
  std::string aggr_;
};

/// Kipf & Welling's graph convolution: X' = D^-1/2 (A + I) D^-1/2 X W^T + b, with the
/// normalisation of gcn_norm (edge weights optional). cached: the normalised adjacency of the
/// first call is reused (transductive training on one graph).
class GCNConv : public MessagePassing {
 public:
  GCNConv(int64_t in_channels, int64_t out_channels, bool add_self_loops = true,
          bool normalize = true, bool bias = true, bool cached = false);
  std::string type_name() const override { return "GCNConv"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x, const Tensor& edge_index, const Tensor& edge_weight = Tensor());
  using Module::forward;
  void reset_parameters();
  Tensor weight, bias;  // [out, in], [out]

 protected:
  Tensor message_and_aggregate(const Tensor& edge_index, const Tensor& x, const Tensor& edge_weight,
                               int64_t num_nodes) override;

 private:
  int64_t in_, out_;
  bool self_loops_, normalize_, cached_;
  Tensor cache_index_, cache_weight_, cache_target_major_;
};

/// GraphSAGE (Hamilton et al.): x'_i = W_l aggr_{j -> i} x_j + b + W_r x_i, aggr "mean", "max"
/// or "sum". normalize: L2-normalise each output row.
class SAGEConv : public MessagePassing {
 public:
  SAGEConv(int64_t in_channels, int64_t out_channels, std::string aggr = "mean",
           bool root_weight = true, bool bias = true, bool normalize = false);
  std::string type_name() const override { return "SAGEConv"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x, const Tensor& edge_index);
  using Module::forward;
  std::shared_ptr<Linear> lin_l, lin_r;  // lin_r is null without root_weight

 protected:
  Tensor message_and_aggregate(const Tensor& edge_index, const Tensor& x, const Tensor& edge_weight,
                               int64_t num_nodes) override;

 private:
  int64_t in_, out_;
  bool root_weight_, normalize_;
};

/// The graph isomorphism network layer (Xu et al.): x'_i = nn((1 + eps) x_i + sum_{j -> i} x_j).
/// train_eps: eps is a trained parameter.
class GINConv : public MessagePassing {
 public:
  explicit GINConv(std::shared_ptr<Module> nn, double eps = 0, bool train_eps = false);
  std::string type_name() const override { return "GINConv"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x, const Tensor& edge_index);
  using Module::forward;
  std::shared_ptr<Module> nn;
  Tensor eps;  // 0-d

 protected:
  Tensor message_and_aggregate(const Tensor& edge_index, const Tensor& x, const Tensor& edge_weight,
                               int64_t num_nodes) override;
};

/// Graph attention (Velickovic et al.), multi-head: per head h, alpha_ij = softmax over the
/// edges into i of leaky_relu(a_src . W x_j + a_dst . W x_i), x'_i = sum_j alpha_ij W x_j; heads
/// concatenated ([N, heads * out]) or averaged ([N, out]). Existing self-loops are replaced by
/// one per node when add_self_loops. dropout applies to the attention weights while training.
class GATConv : public MessagePassing {
 public:
  GATConv(int64_t in_channels, int64_t out_channels, int64_t heads = 1, bool concat = true,
          double negative_slope = 0.2, double dropout = 0, bool add_self_loops = true,
          bool bias = true);
  std::string type_name() const override { return "GATConv"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x, const Tensor& edge_index);
  using Module::forward;
  /// The attention weights [E', heads] of the last forward and the edges they belong to.
  Tensor last_attention, last_edge_index;
  Tensor weight, att_src, att_dst,
      bias;  // [heads * out, in], [1, heads, out] x2, [out or heads*out]

 private:
  int64_t in_, out_, heads_;
  bool concat_;
  double slope_, dropout_;
  bool self_loops_;
};

/// edge_index without its self-loops (i -> i).
Tensor remove_self_loops(const Tensor& edge_index);

/// Sums (means, maxima) of the node features x [N, F] per graph: batch [N] gives each node's
/// graph in [0, size) (size = -1: max(batch) + 1; an undefined batch: one graph). [size, F].
/// Graphs with no node give 0.
Tensor global_add_pool(const Tensor& x, const Tensor& batch = Tensor(), int64_t size = -1);
Tensor global_mean_pool(const Tensor& x, const Tensor& batch = Tensor(), int64_t size = -1);
Tensor global_max_pool(const Tensor& x, const Tensor& batch = Tensor(), int64_t size = -1);

}  // namespace ignis::nn

namespace ignis::nn {

/// A stack of graph convolutions, PyTorch Geometric's basic GNN models: `kind` "gcn", "sage",
/// "gin" or "gat"; `layers` convolutions (ReLU and dropout between them). Node level (pool
/// empty): the last convolution outputs the classes. Graph level (pool "add", "mean" or "max"):
/// every convolution outputs `hidden` features, then global pooling over the batch vector and an
/// MLP head (Linear, ReLU, dropout, Linear). GIN layers use a 2-layer MLP (Linear, BatchNorm1d,
/// ReLU, Linear) with trained eps; GAT layers `heads` attention heads, concatenated (the last
/// node-level layer averages them).
struct GNNOptions {
  std::string kind = "gcn";
  int64_t in_channels = 0, hidden = 16, out_channels = 0;
  int64_t layers = 2;
  double dropout = 0.5;
  int64_t heads = 8;
  std::string pool;  // "" node level; "add", "mean", "max": graph level
};

class GNN : public Module {
 public:
  explicit GNN(GNNOptions options);
  std::string type_name() const override { return "GNN"; }
  std::string extra_repr() const override;
  /// Node level: logits [N, out]. Graph level: logits [num_graphs, out] (batch: the graph of
  /// each node; undefined for one graph; num_graphs = -1: max(batch) + 1).
  Tensor forward(const Tensor& x, const Tensor& edge_index, const Tensor& batch = Tensor(),
                 int64_t num_graphs = -1);
  using Module::forward;
  const GNNOptions& options() const { return opts_; }

 private:
  GNNOptions opts_;
  std::vector<std::shared_ptr<Module>> convs_;
  std::shared_ptr<Module> head_;
};

}  // namespace ignis::nn
