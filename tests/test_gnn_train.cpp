// Convergence of the graph models: node classification on the karate club from one labelled
// member per community (Kipf & Welling's semi-supervised setting), every model kind; and graph
// classification of MNIST digits turned into graphs (GIN with global pooling) on a small
// subset, when MNIST is found ($IGNIS_MNIST_DIR, else <repo>/data/mnist; skipped otherwise).
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>

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

// Trains on the 4 labelled members (Adam, 200 full-graph steps, no dropout); returns the
// accuracy over the 4 training members and over all 34, averaged over 5 seeds.
std::pair<double, double> karate_accuracy(const std::string& kind) {
  const data::Graph g = data::karate_club();
  const Tensor train_idx = nonzero(g.train_mask).reshape({-1});
  double train_acc = 0, all_acc = 0;
  const int seeds = 5;
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
    train_acc += accuracy(out.index_select(0, train_idx), g.y.index_select(0, train_idx)) / seeds;
    all_acc += accuracy(out, g.y) / seeds;
  }
  return {train_acc, all_acc};
}

TEST(GnnTraining, KarateClubFromFourLabels) {
  // The largest community has 13 of the 34 members (38%): a model that ignored the graph could
  // not beat that from 4 labels. The means move with the floating-point path (rounding changes
  // the training trajectory): gcn 0.74 / 0.80, sage 0.45 / 0.56, gin 0.68 / 0.76, gat 0.81 /
  // 0.88 measured in the Release (-march=native) and the sanitizer builds; the thresholds sit
  // below both, above the 0.38 baseline.
  const std::pair<const char*, double> cases[] = {
      {"gcn", 0.65}, {"sage", 0.4}, {"gin", 0.6}, {"gat", 0.7}};
  for (const auto& [kind, min_acc] : cases) {
    const auto [train_acc, all_acc] = karate_accuracy(kind);
    std::cout << "karate " << kind << ": accuracy on the 4 labelled members " << train_acc
              << ", on all 34 " << all_acc << " (mean of 5 seeds)\n";
    EXPECT_EQ(train_acc, 1.0) << kind;
    EXPECT_GE(all_acc, min_acc) << kind;
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
  nn::GNN model({.kind = "gcn", .in_channels = 1433, .hidden = 16, .out_channels = 7,
                 .layers = 2, .dropout = 0.5, .heads = 1, .pool = ""});
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
