// `ignis bench gcn` and `ignis bench gin`: graph neural network training (docs/gnn.md), the
// same models as bench/compare_pytorch.py writes in plain PyTorch with index_add_.
//   gcn: a 2-layer GCN (128 -> 128 -> 16, ReLU, normalised adjacency computed once) trained
//        full-batch with Adam on a synthetic power-law graph, 100k nodes and 1M directed edges
//        (plus self-loops), 128 random features and 16 random classes: seconds per epoch
//        (forward, backward, step). The graph comes from splitmix64 streams that the Python
//        script reproduces bit for bit.
//   gin: GIN (3 layers, hidden 32, add pooling, MLP head) on MNIST digits as graphs (the first
//        10000 training digits, batch 64, Adam 0.005): seconds per epoch, batching included,
//        and test accuracy on the 10000 test digits after it.
#include <cstdio>

#include "cli/bench.h"
#include "ignis/ignis.h"

namespace ignis::cli {

namespace {

uint64_t splitmix64(uint64_t& s) {
  uint64_t z = (s += 0x9e3779b97f4a7c15ULL);
  z = (z ^ (z >> 30)) * 0xbf58476d1ce4e5b9ULL;
  z = (z ^ (z >> 27)) * 0x94d049bb133111ebULL;
  return z ^ (z >> 31);
}

/// The benchmark graph: source uniform, target ~ n * u1 * u2 * u3 (three uniform integers in
/// [0, n), multiplied and scaled back: in-degrees fall off as a power of the node id).
Tensor power_law_edges(int64_t n, int64_t e, uint64_t seed) {
  std::vector<int64_t> src(static_cast<size_t>(e)), dst(static_cast<size_t>(e));
  uint64_t s = seed;
  for (int64_t k = 0; k < e; ++k) {
    const auto u = [&] { return static_cast<int64_t>(splitmix64(s) % static_cast<uint64_t>(n)); };
    src[k] = u();
    const int64_t a = u(), b = u(), c = u();
    dst[k] = a * b / n * c / n;
  }
  return stack({tensor(src), tensor(dst)}, 0);
}

}  // namespace

void bench_gcn(const BenchOptions& opts) {
  const int64_t n = 100000, e = 1000000, f = 128, hidden = 128, classes = 16;
  const Tensor ei = power_law_edges(n, e, 1);
  manual_seed(0);
  const Tensor x = randn({n, f});
  const Tensor y = randint(0, classes, {n});
  nn::GCNConv conv1(f, hidden, true, true, true, /*cached=*/true);
  nn::GCNConv conv2(hidden, classes, true, true, true, /*cached=*/true);
  std::vector<Tensor> params = conv1.parameters();
  for (const Tensor& p : conv2.parameters()) params.push_back(p);
  optim::Adam opt(params, optim::AdamOptions(0.01));
  auto epoch = [&] {
    opt.zero_grad();
    const Tensor out = conv2.forward(relu(conv1.forward(x, ei)), ei);
    nn::functional::cross_entropy(out, y).backward();
    opt.step();
  };
  const double t_first = time_once([&](int64_t) { epoch(); }, 1);  // normalises the graph
  std::vector<double> times;
  for (int r = 0; r < opts.repeat; ++r) times.push_back(time_once([&](int64_t) { epoch(); }, 1));
  std::printf(
      "workload=gcn threads=%d nodes=%lld edges=%lld features=%lld s_per_epoch=%.4f "
      "first_epoch_s=%.4f\n",
      get_num_threads(), static_cast<long long>(n), static_cast<long long>(e),
      static_cast<long long>(f), median(times), t_first);
  std::fflush(stdout);
}

void bench_gin(const BenchOptions& opts) {
  const int64_t train_graphs = 10000;
  auto train = data::mnist_graphs(opts.data, true, train_graphs);
  auto test = data::mnist_graphs(opts.data, false);
  manual_seed(0);
  nn::GNN model({.kind = "gin",
                 .in_channels = 3,
                 .hidden = 32,
                 .out_channels = 10,
                 .layers = 3,
                 .dropout = 0.0,
                 .pool = "add"});
  optim::Adam opt(model.parameters(), optim::AdamOptions(0.005));
  data::GraphDataLoader loader(train, {.batch_size = 64, .shuffle = true, .seed = 0});
  std::vector<double> times;
  for (int r = 0; r < std::max(1, opts.repeat / 3); ++r) {
    model.train();
    const double t0 = now_s();
    for (const data::GraphBatch& b : loader) {
      opt.zero_grad();
      nn::functional::cross_entropy(
          model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs), b.graph.y)
          .backward();
      opt.step();
    }
    times.push_back(now_s() - t0);
  }
  model.eval();
  NoGradGuard ng;
  int64_t correct = 0;
  for (const data::GraphBatch& b : data::GraphDataLoader(test, {.batch_size = 1000})) {
    correct += model.forward(b.graph.x, b.graph.edge_index, b.batch, b.num_graphs)
                   .argmax(1)
                   .eq(b.graph.y)
                   .sum()
                   .item<int64_t>();
  }
  std::printf(
      "workload=gin threads=%d train_graphs=%lld batch=64 epochs=%zu s_per_epoch=%.4f "
      "test_acc=%.4f\n",
      get_num_threads(), static_cast<long long>(train->size()), times.size(), median(times),
      static_cast<double>(correct) / static_cast<double>(test->size()));
  std::fflush(stdout);
}

}  // namespace ignis::cli
