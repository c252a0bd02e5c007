// Node classification with a graph convolutional network (Kipf & Welling), the lecture notes'
// GNN slide in code: node features through a neural network, message passing over the graph.
//
//   ./gnn_node                      Zachary's karate club: 4 labelled members, 34 to classify
//   ./gnn_node PLANETOID_DIR [cora|citeseer|pubmed]
//                                   a Planetoid citation graph from its standard files
//                                   (ind.cora.x, ...): the paper's split and hyperparameters
#include <ignis/ignis.h>

#include <iostream>
#include <string>

using namespace ignis;

double accuracy(const Tensor& logits, const Tensor& y, const Tensor& mask) {
  const Tensor idx = nonzero(mask).reshape({-1});
  return logits.index_select(0, idx)
      .argmax(1)
      .eq(y.index_select(0, idx))
      .to(kFloat64)
      .mean()
      .item<double>();
}

int main(int argc, char** argv) {
  manual_seed(0);
  const bool planetoid = argc > 1;
  data::Graph g =
      planetoid ? data::load_planetoid(argv[1], argc > 2 ? argv[2] : "cora") : data::karate_club();
  const int64_t classes = g.y.max().item<int64_t>() + 1;
  std::cout << (planetoid ? (argc > 2 ? argv[2] : "cora") : "karate club") << ": " << g.num_nodes()
            << " nodes, " << g.num_edges() << " edges, " << g.num_features() << " features, "
            << classes << " classes, " << g.train_mask.sum().item<int64_t>() << " labelled\n";
  if (planetoid) {  // row-normalised bag-of-words features, as in the paper
    g.x = g.x / g.x.sum({1}, true).clamp(1, std::nullopt);
  }
  // Two GCN layers, 16 hidden units, dropout 0.5 (Kipf & Welling's setting).
  nn::GNN model({.kind = "gcn",
                 .in_channels = g.num_features(),
                 .hidden = 16,
                 .out_channels = classes,
                 .layers = 2,
                 .dropout = planetoid ? 0.5 : 0.0,
                 .heads = 8,
                 .pool = ""});
  std::cout << model << "\n";
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.01).weight_decay(5e-4));
  const Tensor train_idx = nonzero(g.train_mask).reshape({-1});
  const Tensor train_y = g.y.index_select(0, train_idx);
  for (int epoch = 1; epoch <= 200; ++epoch) {
    model.train();
    opt.zero_grad();
    const Tensor out = model.forward(g.x, g.edge_index);
    const Tensor loss = nn::functional::cross_entropy(out.index_select(0, train_idx), train_y);
    loss.backward();
    opt.step();
    if (epoch % 50 == 0) {
      model.eval();
      NoGradGuard ng;
      const Tensor logits = model.forward(g.x, g.edge_index);
      std::cout << "epoch " << epoch << " loss " << loss.item<double>() << " train_acc "
                << accuracy(logits, g.y, g.train_mask);
      if (planetoid) {
        std::cout << " val_acc " << accuracy(logits, g.y, g.val_mask);
      } else {
        std::cout << " acc_all_nodes " << accuracy(logits, g.y, ones({g.num_nodes()}, kBool));
      }
      std::cout << "\n";
    }
  }
  model.eval();
  NoGradGuard ng;
  const Tensor logits = model.forward(g.x, g.edge_index);
  if (planetoid) {
    std::cout << "test accuracy " << accuracy(logits, g.y, g.test_mask) << "\n";
  } else {
    std::cout << "accuracy over all 34 members " << accuracy(logits, g.y, ones({34}, kBool))
              << "\npredicted communities:";
    const Tensor pred = logits.argmax(1).contiguous();
    const Tensor y = g.y.contiguous();
    for (int64_t i = 0; i < 34; ++i) std::cout << " " << pred.data_ptr<int64_t>()[i];
    std::cout << "\nmisclassified members:";
    for (int64_t i = 0; i < 34; ++i) {
      if (pred.data_ptr<int64_t>()[i] != y.data_ptr<int64_t>()[i]) std::cout << " " << i;
    }
    // The communities are modularity clusters: a few members are closer, in the graph, to
    // another community's labelled member (member 9's two friends are 2 and the hub 33), and
    // the same GCN in PyTorch misses the same ones (docs/gnn.md, Results).
    std::cout << "\n";
  }
  return 0;
}
