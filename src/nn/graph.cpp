// Graph neural network layers: MessagePassing and the convolutions built on it, and global
// pooling. Every layer is written in ignis ops (scatter_reduce, sparse_mm, segment_softmax,
// gcn_norm), so autograd and the profiler see the ops it runs.
#include "ignis/nn/graph.h"

#include <cmath>
#include <sstream>

#include "ignis/autograd.h"
#include "ignis/nn/functional.h"
#include "ignis/nn/init.h"
#include "ignis/nn/layers.h"
#include "ignis/ops.h"
#include "ignis/scatter.h"

namespace ignis::nn {

namespace {

void check_graph_input(const Tensor& x, const Tensor& edge_index, const char* layer) {
  IGNIS_CHECK(x.defined() && edge_index.defined(), layer, ": x and edge_index must be defined");
  IGNIS_CHECK(x.dim() >= 2, layer,
              ": expected node features of shape [num_nodes, features], but got ", x.sizes());
  IGNIS_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2 &&
                  (edge_index.dtype() == kInt64 || edge_index.dtype() == kInt32),
              layer, ": expected an int64 edge_index of shape [2, num_edges], but got ",
              edge_index.dtype(), edge_index.sizes());
}

void check_features(const Tensor& x, int64_t in, const char* layer) {
  IGNIS_CHECK(x.size(-1) == in, layer, ": expected ", in, " input features, but x has shape ",
              x.sizes());
}

// The adjacency of edge_index as a sparse matrix with targets as rows: A @ x sums at targets.
Tensor target_major(const Tensor& edge_index) { return edge_index.flip({0}); }

Tensor glorot(int64_t out, int64_t in) {
  Tensor w = empty({out, in});
  init::xavier_uniform_(w);
  return w;
}

Tensor pool(const Tensor& x, const Tensor& batch, int64_t size, const char* reduce,
            const char* op) {
  IGNIS_CHECK(x.defined() && x.dim() >= 1, op, ": expected node features [N, ...], but got ",
              x.defined() ? x.sizes() : IntArrayRef());
  if (!batch.defined()) {
    Shape s = x.sizes().shape();
    s[0] = 1;
    Tensor zero = zeros({x.size(0)}, TensorOptions(kInt64).device(x.device()));
    return pool(x, zero, 1, reduce, op);
  }
  IGNIS_CHECK(batch.dim() == 1 && batch.size(0) == x.size(0) &&
                  (batch.dtype() == kInt64 || batch.dtype() == kInt32),
              op, ": expected an int64 batch vector of shape [", x.size(0),
              "] (one graph index per node), but got ", batch.dtype(), batch.sizes());
  if (size < 0) size = batch.numel() ? batch.max().item<int64_t>() + 1 : 0;
  Shape s = x.sizes().shape();
  s[0] = size;
  Shape view(x.dim(), 1);
  view[0] = x.size(0);
  try {
    return scatter_reduce(zeros(s, x.options()), 0, batch.reshape(view).expand(x.sizes()), x,
                          reduce, false);
  } catch (const Error& e) {
    IGNIS_FAIL(op, ": ", e.what(), " (", size, " graphs)");
  }
}

}  // namespace

// ---- MessagePassing

MessagePassing::MessagePassing(std::string aggr) : aggr_(std::move(aggr)) {
  IGNIS_CHECK(aggr_ == "sum" || aggr_ == "mean" || aggr_ == "max",
              "MessagePassing: aggr must be 'sum', 'mean' or 'max', but got '", aggr_, "'");
}

Tensor MessagePassing::propagate(const Tensor& edge_index, const Tensor& x,
                                 const Tensor& edge_weight, int64_t num_nodes) {
  check_graph_input(x, edge_index, type_name().c_str());
  if (num_nodes < 0) num_nodes = x.size(0);
  if (edge_weight.defined()) {
    IGNIS_CHECK(edge_weight.dim() >= 1 && edge_weight.size(0) == edge_index.size(1), type_name(),
                ": expected one edge weight per edge (", edge_index.size(1), "), but got shape ",
                edge_weight.sizes());
  }
  Tensor fused = message_and_aggregate(edge_index, x, edge_weight, num_nodes);
  if (fused.defined()) return update(fused, x);
  const Tensor src = edge_index[0], dst = edge_index[1];
  Tensor x_j, x_i;
  try {
    x_j = x.index_select(0, src);
    if (gather_target) x_i = x.index_select(0, dst);
  } catch (const Error& e) {
    IGNIS_FAIL(type_name(), ": edge_index refers to a node outside the ", x.size(0),
               " nodes of x: ", e.what());
  }
  const Tensor m = message(x_i, x_j, edge_weight);
  IGNIS_CHECK(m.defined() && m.dim() >= 1 && m.size(0) == edge_index.size(1), type_name(),
              ": message() must return one row per edge (", edge_index.size(1), "), but got ",
              m.defined() ? m.sizes() : IntArrayRef());
  return update(aggregate(m, dst, num_nodes), x);
}

Tensor MessagePassing::message(const Tensor&, const Tensor& x_j, const Tensor& w) {
  if (!w.defined()) return x_j;
  Tensor wb = w;
  while (wb.dim() < x_j.dim()) wb = wb.unsqueeze(-1);
  return x_j * wb;
}

Tensor MessagePassing::aggregate(const Tensor& m, const Tensor& target, int64_t num_nodes) {
  Shape s = m.sizes().shape();
  s[0] = num_nodes;
  Shape view(m.dim(), 1);
  view[0] = m.size(0);
  const char* reduce = aggr_ == "sum" ? "sum" : aggr_ == "mean" ? "mean" : "amax";
  try {
    return scatter_reduce(zeros(s, m.options()), 0, target.reshape(view).expand(m.sizes()), m,
                          reduce, false);
  } catch (const Error& e) {
    IGNIS_FAIL(type_name(), ": edge_index refers to a target outside the ", num_nodes,
               " nodes: ", e.what());
  }
}

Tensor MessagePassing::update(const Tensor& aggregated, const Tensor&) { return aggregated; }

Tensor MessagePassing::message_and_aggregate(const Tensor&, const Tensor&, const Tensor&, int64_t) {
  return Tensor();
}

// ---- GCNConv

GCNConv::GCNConv(int64_t in, int64_t out, bool add_self_loops, bool normalize, bool bias,
                 bool cached)
    : MessagePassing("sum"),
      in_(in),
      out_(out),
      self_loops_(add_self_loops),
      normalize_(normalize),
      cached_(cached) {
  IGNIS_CHECK(in > 0 && out > 0, "GCNConv: channels must be positive, but got ", in, " and ", out);
  weight = register_parameter("weight", glorot(out, in));
  if (bias) this->bias = register_parameter("bias", zeros({out}));
}

void GCNConv::reset_parameters() {
  {
    NoGradGuard ng;
    init::xavier_uniform_(weight);
    if (bias.defined()) init::zeros_(bias);
  }
  cache_index_ = cache_weight_ = cache_target_major_ = Tensor();
}

std::string GCNConv::extra_repr() const {
  std::ostringstream os;
  os << in_ << ", " << out_;
  if (!self_loops_) os << ", add_self_loops=False";
  if (!normalize_) os << ", normalize=False";
  if (cached_) os << ", cached=True";
  return os.str();
}

Tensor GCNConv::forward(const Tensor& x, const Tensor& edge_index, const Tensor& edge_weight) {
  check_graph_input(x, edge_index, "GCNConv");
  check_features(x, in_, "GCNConv");
  const int64_t n = x.size(0);
  Tensor ei = edge_index, w = edge_weight;
  if (cached_ && cache_index_.defined()) {
    ei = cache_index_;
    w = cache_weight_;
  } else {
    if (normalize_) {
      // Weights in x's dtype (gcn_norm's default ones are float32).
      const Tensor ew =
          edge_weight.defined() ? edge_weight : ones({edge_index.size(1)}, x.options());
      std::tie(ei, w) = gcn_norm(edge_index, ew, n, self_loops_);
    } else if (self_loops_) {
      std::tie(ei, w) = add_self_loops(edge_index, edge_weight, 1.0, n);
    }
    if (cached_) {
      cache_index_ = ei;
      cache_weight_ = w.defined() ? w.detach() : w;
    }
  }
  // Transform first (fewer columns to aggregate when out < in), then aggregate.
  Tensor h = linear(x, weight);
  Tensor out = propagate(ei, h, w, n);
  if (bias.defined()) out = out + bias;
  return out;
}

Tensor GCNConv::message_and_aggregate(const Tensor& edge_index, const Tensor& x,
                                      const Tensor& edge_weight, int64_t num_nodes) {
  Tensor w = edge_weight;
  if (w.defined() && w.dtype() != x.dtype()) w = w.to(x.dtype());
  if (cached_ && edge_index.is_same(cache_index_)) {
    if (!cache_target_major_.defined()) cache_target_major_ = target_major(edge_index);
    return sparse_mm(cache_target_major_, w, x, num_nodes);
  }
  return sparse_mm(target_major(edge_index), w, x, num_nodes);
}

// ---- SAGEConv

SAGEConv::SAGEConv(int64_t in, int64_t out, std::string aggr, bool root_weight, bool bias,
                   bool normalize)
    : MessagePassing(std::move(aggr)),
      in_(in),
      out_(out),
      root_weight_(root_weight),
      normalize_(normalize) {
  IGNIS_CHECK(in > 0 && out > 0, "SAGEConv: channels must be positive, but got ", in, " and ", out);
  // PyG's layout: lin_l (with the bias) on the aggregate, lin_r on the node itself.
  lin_l = register_module("lin_l", std::make_shared<Linear>(in, out, bias));
  if (root_weight) lin_r = register_module("lin_r", std::make_shared<Linear>(in, out, false));
}

std::string SAGEConv::extra_repr() const {
  std::ostringstream os;
  os << in_ << ", " << out_ << ", aggr='" << aggr() << "'";
  if (!root_weight_) os << ", root_weight=False";
  if (normalize_) os << ", normalize=True";
  return os.str();
}

Tensor SAGEConv::message_and_aggregate(const Tensor& edge_index, const Tensor& x, const Tensor&,
                                       int64_t num_nodes) {
  if (aggr() == "max") return Tensor();  // the general path: scatter_reduce amax
  const Tensor a = target_major(edge_index);
  if (aggr() == "sum") return sparse_mm(a, Tensor(), x, num_nodes);
  // Mean: each edge weighted by 1 / in-degree of its target.
  Tensor w;
  {
    NoGradGuard ng;
    const Tensor deg = degree(edge_index[1], num_nodes, x.dtype()).clamp(1, std::nullopt);
    w = div(1.0, deg).index_select(0, edge_index[1]);
  }
  return sparse_mm(a, w, x, num_nodes);
}

Tensor SAGEConv::forward(const Tensor& x, const Tensor& edge_index) {
  check_graph_input(x, edge_index, "SAGEConv");
  check_features(x, in_, "SAGEConv");
  Tensor out = lin_l->forward(propagate(edge_index, x));
  if (root_weight_) out = out + lin_r->forward(x);
  if (normalize_) out = out / out.norm(2, {-1}, true).clamp(1e-12, std::nullopt);
  return out;
}

// ---- GINConv

GINConv::GINConv(std::shared_ptr<Module> net, double e, bool train_eps) : MessagePassing("sum") {
  IGNIS_CHECK(net != nullptr, "GINConv: nn must not be null");
  nn = register_module("nn", std::move(net));
  if (train_eps) {
    eps = register_parameter("eps", full({}, e));
  } else {
    eps = register_buffer("eps", full({}, e));
  }
}

std::string GINConv::extra_repr() const {
  std::ostringstream os;
  os << "eps=" << eps.item<double>();
  return os.str();
}

Tensor GINConv::message_and_aggregate(const Tensor& edge_index, const Tensor& x, const Tensor&,
                                      int64_t num_nodes) {
  return sparse_mm(target_major(edge_index), Tensor(), x, num_nodes);
}

Tensor GINConv::forward(const Tensor& x, const Tensor& edge_index) {
  check_graph_input(x, edge_index, "GINConv");
  Tensor h = propagate(edge_index, x) + x * (eps.to(x.dtype()) + 1.0);
  return nn->forward(h);
}

// ---- GATConv

GATConv::GATConv(int64_t in, int64_t out, int64_t heads, bool concat, double negative_slope,
                 double dropout, bool add_self_loops, bool bias)
    : MessagePassing("sum"),
      in_(in),
      out_(out),
      heads_(heads),
      concat_(concat),
      slope_(negative_slope),
      dropout_(dropout),
      self_loops_(add_self_loops) {
  IGNIS_CHECK(in > 0 && out > 0 && heads > 0,
              "GATConv: channels and heads must be positive, but "
              "got in=",
              in, " out=", out, " heads=", heads);
  weight = register_parameter("weight", glorot(heads * out, in));
  // Glorot for the attention vectors, seen as [heads, out] matrices.
  Tensor as = glorot(heads, out).unsqueeze(0), ad = glorot(heads, out).unsqueeze(0);
  att_src = register_parameter("att_src", as);
  att_dst = register_parameter("att_dst", ad);
  if (bias) this->bias = register_parameter("bias", zeros({concat ? heads * out : out}));
}

std::string GATConv::extra_repr() const {
  std::ostringstream os;
  os << in_ << ", " << out_ << ", heads=" << heads_;
  if (!concat_) os << ", concat=False";
  if (dropout_ > 0) os << ", dropout=" << dropout_;
  return os.str();
}

Tensor GATConv::forward(const Tensor& x, const Tensor& edge_index) {
  check_graph_input(x, edge_index, "GATConv");
  check_features(x, in_, "GATConv");
  const int64_t n = x.size(0);
  Tensor ei = edge_index.to(kInt64);
  if (self_loops_) ei = std::get<0>(add_self_loops(remove_self_loops(ei), Tensor(), 1.0, n));
  const Tensor h = linear(x, weight).reshape({n, heads_, out_});
  const Tensor a_src = (h * att_src).sum({-1});  // [N, heads]
  const Tensor a_dst = (h * att_dst).sum({-1});
  Tensor alpha;
  try {
    alpha = leaky_relu(a_src.index_select(0, ei[0]) + a_dst.index_select(0, ei[1]), slope_);
  } catch (const Error& e) {
    IGNIS_FAIL("GATConv: edge_index refers to a node outside the ", n, " nodes of x: ", e.what());
  }
  alpha = segment_softmax(alpha, ei[1], n);
  last_attention = alpha.detach();
  last_edge_index = ei;
  alpha = functional::dropout(alpha, dropout_, is_training());
  Tensor out = propagate(ei, h, alpha, n);  // messages h_j * alpha_ij, summed per target
  out = concat_ ? out.reshape({n, heads_ * out_}) : out.mean({1});
  if (bias.defined()) out = out + bias;
  return out;
}

// ---- utilities and pooling

Tensor remove_self_loops(const Tensor& edge_index) {
  IGNIS_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2,
              "remove_self_loops: expected edge_index of shape [2, num_edges], but got ",
              edge_index.sizes());
  const Tensor keep = nonzero(edge_index[0].ne(edge_index[1])).reshape({-1});
  return edge_index.index_select(1, keep);
}

Tensor global_add_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return pool(x, batch, size, "sum", "global_add_pool");
}
Tensor global_mean_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return pool(x, batch, size, "mean", "global_mean_pool");
}
Tensor global_max_pool(const Tensor& x, const Tensor& batch, int64_t size) {
  return pool(x, batch, size, "amax", "global_max_pool");
}

}  // namespace ignis::nn
