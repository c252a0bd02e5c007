// `ignis train` for graph models: --model gcn|sage|gin|gat on --dataset karate (built in),
// cora|citeseer|pubmed (Planetoid files in --data) or mnist-graph (MNIST in --data, as graphs).
// Node classification trains full-graph on the labelled nodes; graph classification in batches
// of disjoint graphs. Prints one line per epoch and the test result.
#include <chrono>
#include <iostream>
#include <map>

#include "cli/train.h"
#include "ignis/ignis.h"

namespace ignis::cli {

namespace {

const char* kUsage =
    "usage: ignis train --model gcn|sage|gin|gat --dataset "
    "karate|cora|citeseer|pubmed|mnist-graph\n"
    "                   [--data DIR] [--epochs N] [--lr LR] [--hidden H] [--layers L]\n"
    "                   [--dropout P] [--heads K] [--batch-size B] [--train-graphs N]\n"
    "                   [--seed S] [--threads T] [--workers W]\n"
    "(karate is built in; cora, citeseer and pubmed read the Planetoid files ind.NAME.* from\n"
    " --data, default data/NAME; mnist-graph reads MNIST from --data, default data/mnist, and\n"
    " turns each digit into a graph; node-level defaults: 200 epochs, lr 0.01, weight decay 5e-4,\n"
    " hidden 16, dropout 0.5 (0 on karate); mnist-graph: 3 epochs of --train-graphs 10000,\n"
    " batch 64, lr 0.005, hidden 32, 3 layers, add pooling, --workers 1 thread collating\n"
    " batches ahead of training)\n";

std::map<std::string, std::string> parse(const Args& args) {
  static const char* known[] = {"model",  "dataset", "data",         "epochs", "lr",
                                "hidden", "layers",  "dropout",      "heads",  "batch-size",
                                "seed",   "threads", "train-graphs", "workers"};
  std::map<std::string, std::string> o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw HelpRequested(kUsage);
    bool ok = false;
    for (const char* k : known) ok = ok || a == std::string("--") + k;
    if (!ok) throw UsageError("unknown option '" + a + "' for a graph model", kUsage);
    if (i + 1 >= args.size()) throw UsageError(a + " needs a value", kUsage);
    o[a.substr(2)] = args[++i];
  }
  return o;
}

std::string get(const std::map<std::string, std::string>& o, const std::string& k,
                const std::string& def) {
  auto it = o.find(k);
  return it == o.end() ? def : it->second;
}

double number(const std::string& opt, const std::string& v) {
  try {
    size_t used = 0;
    const double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw UsageError("--" + opt + " expects a number, got '" + v + "'", kUsage);
}

double accuracy(const Tensor& logits, const Tensor& y) {
  return logits.argmax(1).eq(y).to(kFloat64).mean().item<double>();
}

double seconds_since(std::chrono::steady_clock::time_point t) {
  return std::chrono::duration<double>(std::chrono::steady_clock::now() - t).count();
}

}  // namespace

bool is_graph_training(const Args& args) {
  for (size_t i = 0; i + 1 < args.size(); ++i) {
    if (args[i] == "--model" && (args[i + 1] == "gcn" || args[i + 1] == "sage" ||
                                 args[i + 1] == "gin" || args[i + 1] == "gat")) {
      return true;
    }
    if (args[i] == "--dataset" &&
        (args[i + 1] == "karate" || args[i + 1] == "cora" || args[i + 1] == "citeseer" ||
         args[i + 1] == "pubmed" || args[i + 1] == "mnist-graph")) {
      return true;
    }
  }
  return false;
}

int train_gnn_main(const Args& args) {
  const auto o = parse(args);
  const std::string kind = get(o, "model", "gcn");
  const std::string dataset = get(o, "dataset", "karate");
  if (kind != "gcn" && kind != "sage" && kind != "gin" && kind != "gat") {
    throw UsageError("model '" + kind +
                         "' is not a graph model (gcn, sage, gin or gat) for dataset '" + dataset +
                         "'",
                     kUsage);
  }
  const bool node_level =
      dataset == "karate" || dataset == "cora" || dataset == "citeseer" || dataset == "pubmed";
  if (!node_level && dataset != "mnist-graph") {
    throw UsageError("dataset '" + dataset +
                         "' is not a graph dataset (karate, cora, citeseer, "
                         "pubmed or mnist-graph) for model '" +
                         kind + "'",
                     kUsage);
  }
  set_num_threads(
      static_cast<int>(parse_int("--threads", get(o, "threads", "1"), 1, 4096, kUsage)));
  const int64_t seed = parse_int("--seed", get(o, "seed", "0"), 0, INT64_MAX, kUsage);
  const int64_t epochs =
      parse_int("--epochs", get(o, "epochs", node_level ? "200" : "3"), 1, 100000, kUsage);
  const double lr = number("lr", get(o, "lr", node_level ? "0.01" : "0.005"));
  const int64_t hidden =
      parse_int("--hidden", get(o, "hidden", node_level ? "16" : "32"), 1, 1 << 20, kUsage);
  const int64_t layers =
      parse_int("--layers", get(o, "layers", node_level ? "2" : "3"), 1, 64, kUsage);
  const double dropout =
      number("dropout", get(o, "dropout", dataset == "karate" || !node_level ? "0" : "0.5"));
  const int64_t heads = parse_int("--heads", get(o, "heads", "8"), 1, 1024, kUsage);
  manual_seed(static_cast<uint64_t>(seed));
  const auto start = std::chrono::steady_clock::now();
  if (node_level) {
    data::Graph g = dataset == "karate"
                        ? data::karate_club()
                        : data::load_planetoid(get(o, "data", "data/" + dataset), dataset);
    if (dataset != "karate") g.x = g.x / g.x.sum({1}, true).clamp(1, std::nullopt);
    const int64_t classes = g.y.max().item<int64_t>() + 1;
    nn::GNN model({.kind = kind,
                   .in_channels = g.num_features(),
                   .hidden = hidden,
                   .out_channels = classes,
                   .layers = layers,
                   .dropout = dropout,
                   .heads = heads,
                   .pool = ""});
    std::cout << "model=" << kind << " dataset=" << dataset << " nodes=" << g.num_nodes()
              << " edges=" << g.num_edges() << " features=" << g.num_features()
              << " classes=" << classes << " labelled=" << g.train_mask.sum().item<int64_t>()
              << " params=" << model.num_parameters() << " lr=" << lr << " epochs=" << epochs
              << " seed=" << seed << std::endl;
    optim::Adam opt(model.parameters(), optim::AdamOptions(lr).weight_decay(5e-4));
    const Tensor train_idx = nonzero(g.train_mask).reshape({-1});
    const Tensor train_y = g.y.index_select(0, train_idx);
    // Karate has no validation or test split: its "test" is every member.
    const Tensor test_mask = g.test_mask.defined() ? g.test_mask : ones({g.num_nodes()}, kBool);
    const Tensor test_idx = nonzero(test_mask).reshape({-1});
    const Tensor val_idx = g.val_mask.defined() ? nonzero(g.val_mask).reshape({-1}) : test_idx;
    for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
      model.train();
      opt.zero_grad();
      const Tensor loss = nn::functional::cross_entropy(
          model.forward(g.x, g.edge_index).index_select(0, train_idx), train_y);
      loss.backward();
      opt.step();
      if (epoch % std::max<int64_t>(1, epochs / 10) == 0 || epoch == epochs) {
        model.eval();
        NoGradGuard ng;
        const Tensor logits = model.forward(g.x, g.edge_index);
        std::cout << "epoch " << epoch << " loss=" << loss.item<double>()
                  << " train_acc=" << accuracy(logits.index_select(0, train_idx), train_y)
                  << " val_acc="
                  << accuracy(logits.index_select(0, val_idx), g.y.index_select(0, val_idx))
                  << std::endl;
      }
    }
    model.eval();
    NoGradGuard ng;
    const Tensor logits = model.forward(g.x, g.edge_index);
    std::cout << "test_acc="
              << accuracy(logits.index_select(0, test_idx), g.y.index_select(0, test_idx))
              << " test_nodes=" << test_idx.numel() << " time_s=" << seconds_since(start) << "\n";
    if (dataset == "karate") {  // which of the 34 members the model gets wrong
      const Tensor miss = nonzero(logits.argmax(1).ne(g.y)).reshape({-1}).contiguous();
      std::cout << "misclassified members:";
      for (int64_t i = 0; i < miss.numel(); ++i) std::cout << " " << miss.data_ptr<int64_t>()[i];
      std::cout << " (" << 34 - miss.numel() << " of 34 right)\n";
    }
    return 0;
  }
  // mnist-graph: graph classification.
  const std::string dir = get(o, "data", "data/mnist");
  const int64_t limit =
      parse_int("--train-graphs", get(o, "train-graphs", "10000"), 1, 60000, kUsage);
  const int64_t batch = parse_int("--batch-size", get(o, "batch-size", "64"), 1, 1 << 20, kUsage);
  const int64_t workers = parse_int("--workers", get(o, "workers", "1"), 0, 64, kUsage);
  auto train = data::mnist_graphs(dir, true, limit);
  auto test = data::mnist_graphs(dir, false);
  nn::GNN model({.kind = kind,
                 .in_channels = 3,
                 .hidden = hidden,
                 .out_channels = 10,
                 .layers = layers,
                 .dropout = dropout,
                 .heads = heads,
                 .pool = "add"});
  std::cout << "model=" << kind << " dataset=mnist-graph train_graphs=" << train->size()
            << " test_graphs=" << test->size() << " params=" << model.num_parameters()
            << " lr=" << lr << " batch_size=" << batch << " workers=" << workers
            << " epochs=" << epochs << " seed=" << seed << std::endl;
  optim::Adam opt(model.parameters(), optim::AdamOptions(lr));
  data::GraphDataLoader loader(train, {.batch_size = batch,
                                       .shuffle = true,
                                       .num_workers = static_cast<int>(workers),
                                       .seed = static_cast<uint64_t>(seed)});
  for (int64_t epoch = 1; epoch <= epochs; ++epoch) {
    model.train();
    double total = 0, correct = 0;
    for (const data::GraphBatch& b : loader) {
      opt.zero_grad();
      const Tensor logits = model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs);
      const Tensor loss = nn::functional::cross_entropy(logits, b.graph.y);
      loss.backward();
      opt.step();
      total += loss.item<double>() * static_cast<double>(b.num_graphs);
      correct += logits.argmax(1).eq(b.graph.y).sum().item<double>();
    }
    std::cout << "epoch " << epoch << " loss=" << total / static_cast<double>(train->size())
              << " train_acc=" << correct / static_cast<double>(train->size())
              << " time_s=" << seconds_since(start) << std::endl;
  }
  model.eval();
  NoGradGuard ng;
  double correct = 0;
  data::GraphDataLoader test_loader(test, {.batch_size = 1000});
  for (const data::GraphBatch& b : test_loader) {
    correct += model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs)
                   .argmax(1)
                   .eq(b.graph.y)
                   .sum()
                   .item<double>();
  }
  std::cout << "test_acc=" << correct / static_cast<double>(test->size())
            << " samples=" << test->size() << " time_s=" << seconds_since(start) << "\n";
  return 0;
}

}  // namespace ignis::cli
