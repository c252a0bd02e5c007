// Convergence of the graph models: node classification on the karate club from one labelled
// member per community (Kipf & Welling's semi-supervised setting), every model kind; and graph
// classification of MNIST digits turned into graphs (GIN with global pooling) on a small
// subset, when MNIST is found ($IGNIS_MNIST_DIR, else <repo>/data/mnist; skipped otherwise).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <set>

#include "ignis/ignis.h"
#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

double accuracy(const Tensor& logits, const Tensor& y) {
  return logits.argmax(1).eq(y).to(kFloat64).mean().item<double>();
}

struct KarateResult {
  double train_acc = 0, all_acc = 0;  // means over the seeds
  std::set<int64_t> wrong;            // members misclassified in some seed
  Tensor first_logits;                // seed 0's
};

// Trains on the 4 labelled members (Adam 0.01, weight decay 5e-4, 200 full-graph steps, no
// dropout) for seeds 0..seeds-1; accuracy over the 4 training members and over all 34.
KarateResult karate_accuracy(const std::string& kind, int seeds = 5) {
  const data::Graph g = data::karate_club();
  const Tensor train_idx = nonzero(g.train_mask).reshape({-1});
  KarateResult r;
  for (int seed = 0; seed < seeds; ++seed) {
    manual_seed(static_cast<uint64_t>(seed));
    nn::GNN model({.kind = kind,
                   .in_channels = 34,
                   .hidden = 16,
                   .out_channels = 4,
                   .layers = 2,
                   .dropout = 0.0,
                   .heads = 4,
                   .pool = ""});
    optim::Adam opt(model.parameters(), optim::AdamOptions(0.01).weight_decay(5e-4));
    for (int epoch = 0; epoch < 200; ++epoch) {
      model.train();
      opt.zero_grad();
      Tensor out = model.forward(g.x, g.edge_index);
      nn::functional::cross_entropy(out.index_select(0, train_idx), g.y.index_select(0, train_idx))
          .backward();
      opt.step();
    }
    model.eval();
    NoGradGuard ng;
    const Tensor out = model.forward(g.x, g.edge_index);
    if (seed == 0) r.first_logits = out;
    r.train_acc += accuracy(out.index_select(0, train_idx), g.y.index_select(0, train_idx)) / seeds;
    r.all_acc += accuracy(out, g.y) / seeds;
    const Tensor miss = nonzero(out.argmax(1).ne(g.y)).reshape({-1}).contiguous();
    for (int64_t i = 0; i < miss.numel(); ++i) r.wrong.insert(miss.data_ptr<int64_t>()[i]);
  }
  return r;
}

std::string joined(const std::set<int64_t>& s) {
  std::string r;
  for (int64_t v : s) {
    if (!r.empty()) r += ' ';
    r += std::to_string(v);
  }
  return r;
}

// No model classifies all 34 members from these 4 labels: the communities are modularity
// clusters, and some members sit closer (in the graph) to another community's labelled member.
// Member 9 (community 1) has two friends, 2 (community 1) and the hub 33 (community 0): every
// model in PyTorch misses it in every seed. tests/pytorch/karate_reference.py trains the same
// models in PyTorch 1.13 (20 seeds): GCN 0.79 (0.76 to 0.82), SAGE 0.56 (0.50 to 0.76), GIN
// 0.74 (0.59 to 0.85), GAT 0.84 (0.74 to 0.91); over 720 GCN runs varying depth (1 to 3),
// width (4 to 64), weight decay, dropout and epochs the best single run reached 0.91. Nor does
// an unsupervised modularity loss help: the labels (modularity 0.4156) are not the maximum-
// modularity partition (0.4198, 3 members away), which GCN + DMoN's loss finds in every seed
// (31 of 34; karate_reference.py, docs/gnn.md). The
// thresholds below sit under PyTorch's means, since the mean of 5 seeds moves with the
// floating-point path (Release -march=native vs the sanitizer build); the majority community
// alone is 13 of 34 (0.38).
TEST(GnnTraining, KarateClubFromFourLabels) {
  const std::pair<const char*, double> cases[] = {
      {"gcn", 0.76}, {"sage", 0.47}, {"gin", 0.65}, {"gat", 0.8}};
  for (const auto& [kind, min_acc] : cases) {
    const KarateResult r = karate_accuracy(kind);
    std::cout << "karate " << kind << ": accuracy on the 4 labelled members " << r.train_acc
              << ", on all 34 " << r.all_acc
              << " (mean of 5 seeds); misclassified in some seed: " << joined(r.wrong) << "\n";
    EXPECT_NEAR(r.train_acc, 1.0, 1e-12) << kind;
    EXPECT_GE(r.all_acc, min_acc) << kind;
    if (std::string(kind) == "gcn") {
      // GCN misses only members that PyTorch's GCN misses too (in some of its 20 seeds):
      // 2, 9, 13, 19, 27 and 28 in all of them, 23 in 19, 7 in 3. Every other member, 26 of
      // the 34, is classified in every seed.
      for (int64_t m : r.wrong) {
        EXPECT_TRUE(m == 2 || m == 7 || m == 9 || m == 13 || m == 19 || m == 23 || m == 27 ||
                    m == 28)
            << "GCN misclassifies member " << m;
      }
    }
  }
}

// The same seed gives the same model and the same logits, bit for bit.
TEST(GnnTraining, KarateClubIsDeterministic) {
  for (const char* kind : {"gcn", "gat"}) {
    const Tensor a = karate_accuracy(kind, 1).first_logits;
    const Tensor b = karate_accuracy(kind, 1).first_logits;
    EXPECT_TRUE(equal(a, b)) << kind;
  }
}

std::string mnist_dir() {
  const char* env = std::getenv("IGNIS_MNIST_DIR");
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(IGNIS_SOURCE_DIR) + "/data/mnist";
}

TEST(GnnTraining, GinOnMnistGraphsSubset) {
  const std::string dir = mnist_dir();
  namespace fs = std::filesystem;
  if (!fs::exists(dir + "/train-images-idx3-ubyte") &&
      !fs::exists(dir + "/train-images-idx3-ubyte.gz")) {
    GTEST_SKIP() << "MNIST not found in " << dir << " (set IGNIS_MNIST_DIR)";
  }
  manual_seed(0);
  auto train = data::mnist_graphs(dir, true, 3000);
  auto test = data::mnist_graphs(dir, false, 500);
  nn::GNN model({.kind = "gin",
                 .in_channels = 3,
                 .hidden = 32,
                 .out_channels = 10,
                 .layers = 3,
                 .dropout = 0.0,
                 .pool = "add"});
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.005));
  data::GraphDataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 1});
  for (int epoch = 0; epoch < 4; ++epoch) {
    model.train();
    for (const data::GraphBatch& b : loader) {
      opt.zero_grad();
      Tensor loss = nn::functional::cross_entropy(
          model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs), b.graph.y);
      loss.backward();
      opt.step();
    }
  }
  model.eval();
  NoGradGuard ng;
  data::GraphDataLoader test_loader(test, {.batch_size = 500});
  for (const data::GraphBatch& b : test_loader) {
    const double acc =
        accuracy(model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs), b.graph.y);
    std::cout << "GIN on MNIST graphs (3000 train, 4 epochs): test accuracy " << acc << "\n";
    EXPECT_GE(acc, 0.7);
  }
}

}  // namespace
}  // namespace ignis

namespace ignis {
namespace {

// Kipf & Welling's Cora experiment (GCN, 16 hidden, dropout 0.5, Adam 0.01, weight decay 5e-4,
// 200 epochs, row-normalised features; the paper reports 81.5%) on the user's copy of the
// Planetoid files in $IGNIS_PLANETOID_DIR (ind.cora.x, ...); skipped without it.
TEST(GnnTraining, GcnOnCoraWhenGiven) {
  const char* dir = std::getenv("IGNIS_PLANETOID_DIR");
  if (dir == nullptr || !std::filesystem::exists(std::string(dir) + "/ind.cora.x")) {
    GTEST_SKIP() << "set IGNIS_PLANETOID_DIR to a directory with the Planetoid files";
  }
  data::Graph g = data::load_planetoid(dir, "cora");
  EXPECT_EQ(g.num_nodes(), 2708);
  EXPECT_EQ(g.num_edges(), 10556);
  EXPECT_EQ(g.num_features(), 1433);
  EXPECT_EQ(g.train_mask.sum().item<int64_t>(), 140);
  EXPECT_EQ(g.val_mask.sum().item<int64_t>(), 500);
  EXPECT_EQ(g.test_mask.sum().item<int64_t>(), 1000);
  g.x = g.x / g.x.sum({1}, true).clamp(1, std::nullopt);
  manual_seed(0);
  nn::GNN model({.kind = "gcn",
                 .in_channels = 1433,
                 .hidden = 16,
                 .out_channels = 7,
                 .layers = 2,
                 .dropout = 0.5,
                 .heads = 1,
                 .pool = ""});
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.01).weight_decay(5e-4));
  const Tensor train_idx = nonzero(g.train_mask).reshape({-1});
  const Tensor test_idx = nonzero(g.test_mask).reshape({-1});
  for (int epoch = 0; epoch < 200; ++epoch) {
    model.train();
    opt.zero_grad();
    nn::functional::cross_entropy(model.forward(g.x, g.edge_index).index_select(0, train_idx),
                                  g.y.index_select(0, train_idx))
        .backward();
    opt.step();
  }
  model.eval();
  NoGradGuard ng;
  const double acc = accuracy(model.forward(g.x, g.edge_index).index_select(0, test_idx),
                              g.y.index_select(0, test_idx));
  std::cout << "GCN on Cora: test accuracy " << acc << "\n";
  EXPECT_GE(acc, 0.78);
}

}  // namespace
}  // namespace ignis
