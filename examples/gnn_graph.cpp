// Graph classification with a graph isomorphism network (Xu et al.) and global pooling: each
// graph's node embeddings are summed into one vector (global_add_pool over the batch vector of
// the disjoint batch) and classified.
//
//   ./gnn_graph MNIST_DIR [TRAIN_GRAPHS] [EPOCHS]
//                 MNIST digits as graphs (pixels above 0.5 as nodes with intensity and
//                 position, edges from their 8 nearest neighbours); default 10000 and 3
//   ./gnn_graph   (no directory) a synthetic task: is the graph a cycle or a path?
#include <ignis/ignis.h>

#include <filesystem>
#include <iostream>
#include <string>

using namespace ignis;

// Cycles (label 1) and paths (label 0) of 4 to 12 nodes, undirected, constant node features.
std::shared_ptr<data::InMemoryGraphDataset> cycles_and_paths(int64_t n) {
  std::vector<data::Graph> gs;
  for (int64_t i = 0; i < n; ++i) {
    const int64_t nodes = 4 + randint(0, 9, {1}).item<int64_t>();
    const bool cycle = i % 2 == 0;
    std::vector<int64_t> s, d;
    for (int64_t k = 0; k < nodes - (cycle ? 0 : 1); ++k) {
      s.insert(s.end(), {k, (k + 1) % nodes});
      d.insert(d.end(), {(k + 1) % nodes, k});
    }
    data::Graph g;
    g.x = ones({nodes, 1});
    g.edge_index = stack({tensor(s), tensor(d)});
    g.y = full({1}, cycle ? 1 : 0, kInt64);
    gs.push_back(g);
  }
  return std::make_shared<data::InMemoryGraphDataset>(gs);
}

double evaluate(nn::GNN& model, const std::shared_ptr<data::InMemoryGraphDataset>& ds) {
  model.eval();
  NoGradGuard ng;
  int64_t correct = 0;
  data::GraphDataLoader loader(ds, {.batch_size = 1000});
  for (const data::GraphBatch& b : loader) {
    const Tensor logits = model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs);
    correct += logits.argmax(1).eq(b.graph.y).sum().item<int64_t>();
  }
  return static_cast<double>(correct) / static_cast<double>(ds->size());
}

int main(int argc, char** argv) {
  manual_seed(0);
  std::shared_ptr<data::InMemoryGraphDataset> train, test;
  int64_t classes = 2;
  int epochs = 3;
  const bool mnist = argc > 1 && std::filesystem::exists(argv[1]);
  if (mnist) {
    const int64_t limit = argc > 2 ? std::stoll(argv[2]) : 10000;
    epochs = argc > 3 ? std::stoi(argv[3]) : 3;
    train = data::mnist_graphs(argv[1], true, limit);
    test = data::mnist_graphs(argv[1], false);
    classes = 10;
    int64_t nodes = 0, edges = 0;
    for (const auto& g : train->graphs()) {
      nodes += g.num_nodes();
      edges += g.num_edges();
    }
    std::cout << "MNIST graphs: " << train->size() << " train, " << test->size()
              << " test; on average " << nodes / train->size() << " nodes and "
              << edges / train->size() << " edges\n";
  } else {
    train = cycles_and_paths(400);
    test = cycles_and_paths(200);
    epochs = 10;
    std::cout << "synthetic: cycles vs paths, " << train->size() << " train, " << test->size()
              << " test\n";
  }
  nn::GNN model({.kind = "gin",
                 .in_channels = train->num_features(),
                 .hidden = 32,
                 .out_channels = classes,
                 .layers = 3,
                 .dropout = 0.0,
                 .pool = "add"});
  std::cout << model << "\n";
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.005));
  data::GraphDataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});
  for (int epoch = 1; epoch <= epochs; ++epoch) {
    model.train();
    double total = 0;
    int64_t batches = 0;
    for (const data::GraphBatch& b : loader) {
      opt.zero_grad();
      const Tensor loss = nn::functional::cross_entropy(
          model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs), b.graph.y);
      loss.backward();
      opt.step();
      total += loss.item<double>();
      ++batches;
    }
    std::cout << "epoch " << epoch << " loss " << total / static_cast<double>(batches)
              << " train_acc " << evaluate(model, train) << "\n";
  }
  std::cout << "test accuracy " << evaluate(model, test) << "\n";
  return 0;
}
