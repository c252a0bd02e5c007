// The graph layers against dense references on small graphs (GCN as D^-1/2 (A+I) D^-1/2 X W
// computed densely, GraphSAGE, GIN and GAT from their papers' formulas written as loops),
// equivariance of every layer under a relabelling of the nodes, invariance of global pooling
// under a shuffle of the nodes, a custom MessagePassing subclass, and gradchecks.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <numeric>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;
using Vec = std::vector<double>;

constexpr int64_t kN = 7;

// A small directed graph with a duplicate edge, a self-loop and a node (6) with no in-edge.
Tensor small_graph() {
  return tensor({0, 1, 2, 3, 4, 5, 1, 2, 3, 0, 0, 2, 6, 2,  //
                 1, 0, 1, 2, 3, 4, 2, 3, 0, 5, 5, 2, 0, 4})
      .reshape({2, 14});
}

Tensor features(int64_t f, uint64_t seed) {
  manual_seed(seed);
  return randn({kN, f}, kFloat64);
}

// Dense adjacency: a[i][j] = number of edges j -> i.
std::vector<Vec> dense_adj(const Tensor& ei, int64_t n) {
  std::vector<Vec> a(n, Vec(n, 0.0));
  const auto v = vals(ei);
  const size_t e = v.size() / 2;
  for (size_t k = 0; k < e; ++k) a[static_cast<int64_t>(v[e + k])][static_cast<int64_t>(v[k])] += 1;
  return a;
}

Tensor to_tensor(const std::vector<Vec>& m) {
  Vec flat;
  for (const auto& r : m) flat.insert(flat.end(), r.begin(), r.end());
  return tensor(flat, kFloat64).reshape({static_cast<int64_t>(m.size()), -1});
}

void expect_near(const Tensor& got, const Tensor& want, double tol = 1e-9) {
  ASSERT_TRUE(got.sizes().equals(want.sizes())) << got.sizes() << " vs " << want.sizes();
  const auto g = vals(got), w = vals(want);
  for (size_t i = 0; i < g.size(); ++i) EXPECT_NEAR(g[i], w[i], tol) << "element " << i;
}

// Relabels nodes: new node k is old node perm[k].
struct Relabel {
  std::vector<int64_t> perm, inv;
  explicit Relabel(std::vector<int64_t> p) : perm(std::move(p)), inv(perm.size()) {
    for (size_t k = 0; k < perm.size(); ++k) inv[perm[k]] = static_cast<int64_t>(k);
  }
  Tensor nodes(const Tensor& x) const { return x.index_select(0, tensor(perm)); }
  Tensor edges(const Tensor& ei) const {
    return tensor(inv).index_select(0, ei.reshape({-1})).reshape(ei.sizes());
  }
};

TEST(GCNConv, MatchesTheDenseNormalisedProduct) {
  nn::GCNConv conv(3, 4);
  conv.to(kFloat64);
  {
    NoGradGuard ng;
    conv.bias.copy_(tensor({0.1, -0.2, 0.3, 0.4}, kFloat64));
  }
  const Tensor x = features(3, 1), ei = small_graph();
  // A + I with the graph's own self-loop (2 -> 2) kept and one more added, as PyG's gcn_norm.
  auto a = dense_adj(ei, kN);
  for (int64_t i = 0; i < kN; ++i) a[i][i] += 1;
  Vec d(kN, 0.0);
  for (int64_t i = 0; i < kN; ++i)
    d[i] = 1 / std::sqrt(std::accumulate(a[i].begin(), a[i].end(), 0.0));
  for (int64_t i = 0; i < kN; ++i) {
    for (int64_t j = 0; j < kN; ++j) a[i][j] *= d[i] * d[j];
  }
  const Tensor want = matmul(matmul(to_tensor(a), x), conv.weight.t()) + conv.bias;
  expect_near(conv.forward(x, ei), want);
  // Cached: the second call reuses the normalised graph (and gives the same result).
  nn::GCNConv cached(3, 4, true, true, true, true);
  cached.to(kFloat64);
  cached.load_state_dict(conv.state_dict());
  expect_near(cached.forward(x, ei), want);
  expect_near(cached.forward(x, ei), want);
}

TEST(SAGEConv, MeanSumAndMaxMatchLoops) {
  const Tensor x = features(3, 2), ei = small_graph();
  const auto a = dense_adj(ei, kN);
  const auto xv = vals(x);
  for (const char* aggr : {"mean", "sum", "max"}) {
    SCOPED_TRACE(aggr);
    nn::SAGEConv conv(3, 2, aggr);
    conv.to(kFloat64);
    std::vector<Vec> agg(kN, Vec(3, 0.0));
    for (int64_t i = 0; i < kN; ++i) {
      double cnt = 0;
      std::vector<bool> any(3, false);
      for (int64_t j = 0; j < kN; ++j) {
        for (int m = 0; m < a[i][j]; ++m) {
          cnt += 1;
          for (int f = 0; f < 3; ++f) {
            const double v = xv[j * 3 + f];
            if (std::string(aggr) == "max") {
              agg[i][f] = any[f] ? std::max(agg[i][f], v) : v;
              any[f] = true;
            } else {
              agg[i][f] += v;
            }
          }
        }
      }
      if (std::string(aggr) == "mean" && cnt > 0) {
        for (int f = 0; f < 3; ++f) agg[i][f] /= cnt;
      }
    }
    const Tensor want = matmul(to_tensor(agg), conv.lin_l->weight.t()) + conv.lin_l->bias +
                        matmul(x, conv.lin_r->weight.t());
    expect_near(conv.forward(x, ei), want);
  }
}

TEST(GINConv, MatchesTheDenseFormula) {
  auto mlp = std::make_shared<nn::Sequential>(nn::Linear(3, 5), nn::ReLU(), nn::Linear(5, 2));
  nn::GINConv conv(mlp, 0.25, true);
  conv.to(kFloat64);
  const Tensor x = features(3, 3), ei = small_graph();
  const Tensor h = matmul(to_tensor(dense_adj(ei, kN)), x) + x * 1.25;
  expect_near(conv.forward(x, ei), mlp->forward(h));
  EXPECT_EQ(conv.parameters().size(), 5u);  // eps is trained
}

TEST(GATConv, MultiHeadAttentionMatchesLoops) {
  for (bool concat : {true, false}) {
    SCOPED_TRACE(concat ? "concat" : "mean of heads");
    const int64_t heads = 3, c = 2;
    nn::GATConv conv(4, c, heads, concat);
    conv.to(kFloat64);
    {
      NoGradGuard ng;
      conv.bias.copy_(randn(conv.bias.sizes(), kFloat64));
    }
    const Tensor x = features(4, 4), ei = small_graph();
    const auto h = vals(matmul(x, conv.weight.t()));  // [N, heads * c]
    const auto as = vals(conv.att_src), ad = vals(conv.att_dst);
    const auto ev = vals(ei);
    // Edges without self-loops, then one self-loop per node.
    std::vector<std::pair<int64_t, int64_t>> edges;
    for (size_t k = 0; k < ev.size() / 2; ++k) {
      const auto s = static_cast<int64_t>(ev[k]), t = static_cast<int64_t>(ev[ev.size() / 2 + k]);
      if (s != t) edges.emplace_back(s, t);
    }
    for (int64_t i = 0; i < kN; ++i) edges.emplace_back(i, i);
    std::vector<Vec> out(kN, Vec(concat ? heads * c : c, 0.0));
    for (int64_t hd = 0; hd < heads; ++hd) {
      auto score = [&](int64_t s, int64_t t) {
        double v = 0;
        for (int64_t k = 0; k < c; ++k) {
          v += as[hd * c + k] * h[s * heads * c + hd * c + k] +
               ad[hd * c + k] * h[t * heads * c + hd * c + k];
        }
        return v > 0 ? v : 0.2 * v;
      };
      for (int64_t i = 0; i < kN; ++i) {
        double mx = -1e300, den = 0;
        for (auto [s, t] : edges) {
          if (t == i) mx = std::max(mx, score(s, t));
        }
        for (auto [s, t] : edges) {
          if (t == i) den += std::exp(score(s, t) - mx);
        }
        for (auto [s, t] : edges) {
          if (t != i) continue;
          const double alpha = std::exp(score(s, t) - mx) / den;
          for (int64_t k = 0; k < c; ++k) {
            const double v = alpha * h[s * heads * c + hd * c + k];
            if (concat)
              out[i][hd * c + k] += v;
            else
              out[i][k] += v / heads;
          }
        }
      }
    }
    expect_near(conv.forward(x, ei), to_tensor(out) + conv.bias);
    EXPECT_EQ(conv.last_attention.size(0), static_cast<int64_t>(edges.size()));
  }
}

TEST(GraphLayers, AreEquivariantUnderNodeRelabelling) {
  const Relabel r({3, 6, 0, 5, 1, 4, 2});
  const Tensor x = features(4, 5), ei = small_graph();
  std::vector<std::pair<std::string, std::function<Tensor(const Tensor&, const Tensor&)>>> layers;
  auto gcn = std::make_shared<nn::GCNConv>(4, 3);
  auto sage = std::make_shared<nn::SAGEConv>(4, 3, "max");
  auto gin = std::make_shared<nn::GINConv>(std::make_shared<nn::Linear>(4, 3), 0.5);
  auto gat = std::make_shared<nn::GATConv>(4, 3, 2);
  for (nn::Module* m : std::vector<nn::Module*>{gcn.get(), sage.get(), gin.get(), gat.get()}) {
    m->to(kFloat64);
  }
  layers.emplace_back("GCNConv", [&](auto& a, auto& b) { return gcn->forward(a, b); });
  layers.emplace_back("SAGEConv", [&](auto& a, auto& b) { return sage->forward(a, b); });
  layers.emplace_back("GINConv", [&](auto& a, auto& b) { return gin->forward(a, b); });
  layers.emplace_back("GATConv", [&](auto& a, auto& b) { return gat->forward(a, b); });
  for (auto& [name, f] : layers) {
    SCOPED_TRACE(name);
    expect_near(f(r.nodes(x), r.edges(ei)), r.nodes(f(x, ei)), 1e-12);
  }
}

TEST(GlobalPool, MatchesLoopsAndIsInvariantUnderShuffles) {
  const Tensor x = features(3, 6);
  const Tensor batch = tensor({0, 0, 2, 2, 2, 0, 3});  // graph 1 has no node
  const auto xv = vals(x);
  const auto bv = vals(batch);
  std::vector<Vec> sum(4, Vec(3, 0.0)), mx(4, Vec(3, 0.0));
  Vec cnt(4, 0.0);
  for (int64_t i = 0; i < kN; ++i) {
    const auto g = static_cast<int64_t>(bv[i]);
    for (int f = 0; f < 3; ++f) {
      sum[g][f] += xv[i * 3 + f];
      mx[g][f] = cnt[g] ? std::max(mx[g][f], xv[i * 3 + f]) : xv[i * 3 + f];
    }
    cnt[g] += 1;
  }
  std::vector<Vec> mean = sum;
  for (int g = 0; g < 4; ++g) {
    for (int f = 0; f < 3; ++f) mean[g][f] /= std::max(cnt[g], 1.0);
  }
  expect_near(nn::global_add_pool(x, batch), to_tensor(sum));
  expect_near(nn::global_mean_pool(x, batch), to_tensor(mean));
  expect_near(nn::global_max_pool(x, batch), to_tensor(mx));
  const Relabel r({6, 2, 4, 0, 5, 1, 3});
  expect_near(nn::global_add_pool(r.nodes(x), r.nodes(batch), 4), to_tensor(sum), 1e-12);
  expect_near(nn::global_mean_pool(r.nodes(x), r.nodes(batch), 4), to_tensor(mean), 1e-12);
  expect_near(nn::global_max_pool(r.nodes(x), r.nodes(batch), 4), to_tensor(mx), 1e-12);
  // No batch vector: the whole input is one graph.
  expect_near(nn::global_add_pool(x), x.sum({0}, true));
  EXPECT_THAT(error_of([&] {
                nn::global_add_pool(x, tensor({0, 1}));
              }),
              HasSubstr("global_add_pool: expected an int64 batch vector of shape [7] (one graph "
                        "index per node), but got int64[2]"));
  EXPECT_THAT(error_of([&] { nn::global_mean_pool(x, batch, 2); }),
              HasSubstr("global_mean_pool: scatter_reduce: index 2 is out of bounds for "
                        "dimension 0 with size 2 (2 graphs)"));
}

// A layer written by subclassing MessagePassing: messages x_i - x_j (target minus source),
// max-aggregated, as EdgeConv without its MLP.
class DiffConv : public nn::MessagePassing {
 public:
  DiffConv() : MessagePassing("max") { gather_target = true; }
  Tensor forward(const Tensor& x, const Tensor& ei) { return propagate(ei, x); }

 protected:
  Tensor message(const Tensor& x_i, const Tensor& x_j, const Tensor&) override { return x_i - x_j; }
};

TEST(MessagePassing, CustomMessageAndErrors) {
  const Tensor x = features(2, 7), ei = small_graph();
  DiffConv conv;
  const auto xv = vals(x), ev = vals(ei);
  std::vector<Vec> want(kN, Vec(2, 0.0));
  std::vector<bool> seen(kN, false);
  for (size_t k = 0; k < ev.size() / 2; ++k) {
    const auto s = static_cast<int64_t>(ev[k]), t = static_cast<int64_t>(ev[ev.size() / 2 + k]);
    for (int f = 0; f < 2; ++f) {
      const double v = xv[t * 2 + f] - xv[s * 2 + f];
      want[t][f] = seen[t] ? std::max(want[t][f], v) : v;
    }
    seen[t] = true;
  }
  expect_near(conv.forward(x, ei), to_tensor(want));
  EXPECT_THAT(error_of([&] { nn::MessagePassing m("min"); }),
              HasSubstr("MessagePassing: aggr must be 'sum', 'mean' or 'max', but got 'min'"));
  EXPECT_THAT(error_of([&] {
                conv.forward(x, tensor({0, 9, 1, 0}).reshape({2, 2}));
              }),
              HasSubstr("edge_index refers to a node outside the 7 nodes of x: index_select: "
                        "index 9 is out of bounds"));
  nn::GCNConv gcn(2, 2);
  gcn.to(kFloat64);
  EXPECT_THAT(error_of([&] { gcn.forward(features(3, 1), ei); }),
              HasSubstr("GCNConv: expected 2 input features, but x has shape [7, 3]"));
  EXPECT_THAT(error_of([&] { gcn.forward(x, ei[0]); }),
              HasSubstr("GCNConv: expected an int64 edge_index of shape [2, num_edges], but got "
                        "int64[14]"));
}

TEST(GraphLayers, Gradcheck) {
  const Tensor ei = small_graph();
  auto gcn = std::make_shared<nn::GCNConv>(3, 2);
  auto gat = std::make_shared<nn::GATConv>(3, 2, 2);
  auto sage = std::make_shared<nn::SAGEConv>(3, 2, "mean");
  gcn->to(kFloat64);
  gat->to(kFloat64);
  sage->to(kFloat64);
  Tensor x = features(3, 8).requires_grad_(true);
  Tensor w = rand({14}, kFloat64).add(0.5).requires_grad_(true);
  EXPECT_TRUE(autograd::gradcheck(
      [&](const autograd::variable_list& in) {
        return autograd::variable_list{gcn->forward(in[0], ei, in[1])};
      },
      {x, w}));
  EXPECT_TRUE(autograd::gradcheck(
      [&](const autograd::variable_list& in) {
        return autograd::variable_list{gat->forward(in[0], ei)};
      },
      {x}));
  EXPECT_TRUE(autograd::gradcheck(
      [&](const autograd::variable_list& in) {
        return autograd::variable_list{sage->forward(in[0], ei)};
      },
      {x}));
  // The parameters get gradients.
  gat->forward(x, ei).sum().backward();
  EXPECT_TRUE(gat->att_src.grad().defined());
  EXPECT_TRUE(gat->weight.grad().defined());
}

// The graph ops are records: a traced GAT forward (segment_softmax, scatter_reduce, ...) and a
// GCN forward (gcn_norm, sparse_mm) replay through the registry bit for bit.
TEST(GraphLayers, TraceAndReplay) {
  manual_seed(3);
  nn::GCNConv gcn(3, 4);
  nn::GATConv gat(3, 2, 2);
  const Tensor ei = small_graph();
  const Tensor x = randn({kN, 3});
  NoGradGuard ng;
  jit::OpTrace t = jit::trace_ops(
      [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{gcn.forward(in[0], ei), gat.forward(in[0], ei)};
      },
      {x});
  const std::string text = t.str();
  EXPECT_THAT(text, HasSubstr("gcn_norm"));
  EXPECT_THAT(text, HasSubstr("sparse_mm"));
  EXPECT_THAT(text, HasSubstr("segment_softmax"));
  const Tensor x2 = randn({kN, 3});
  const auto replayed = t.replay({x2});
  EXPECT_TRUE(equal(replayed[0], gcn.forward(x2, ei)));
  EXPECT_TRUE(equal(replayed[1], gat.forward(x2, ei)));
}

}  // namespace
}  // namespace ignis
