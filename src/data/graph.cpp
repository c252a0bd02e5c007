// Graph data: validation, batching into a disjoint graph and back, the graph loader, the
// built-in karate club and MNIST digits as graphs.
#include "ignis/data/graph.h"

#include <algorithm>
#include <cstring>

#include "data/prefetch.h"
#include "ignis/data/mnist.h"
#include "ignis/ops.h"

namespace ignis::data {

namespace {
int64_t max_index(const Tensor& t) {
  Tensor c = t.to(kInt64).contiguous();
  const int64_t* p = c.data_ptr<int64_t>();
  int64_t m = -1;
  for (int64_t i = 0; i < c.numel(); ++i) m = std::max(m, p[i]);
  return m;
}
}  // namespace

void Graph::validate(const std::string& what) const {
  IGNIS_CHECK(x.defined(), what, ": node features x are missing");
  IGNIS_CHECK(x.dim() == 2 && x.is_floating_point(), what,
              ": expected floating node features x of shape [num_nodes, num_features], but got ",
              x.dtype(), x.sizes());
  const int64_t n = x.size(0);
  IGNIS_CHECK(edge_index.defined(), what, ": edge_index is missing");
  IGNIS_CHECK(edge_index.dim() == 2 && edge_index.size(0) == 2 && edge_index.dtype() == kInt64,
              what, ": expected an int64 edge_index of shape [2, num_edges], but got ",
              edge_index.dtype(), edge_index.sizes());
  if (edge_index.numel() > 0) {
    Tensor c = edge_index.contiguous();
    const int64_t* p = c.data_ptr<int64_t>();
    const int64_t e = c.size(1);
    for (int64_t k = 0; k < 2 * e; ++k) {
      IGNIS_CHECK(p[k] >= 0 && p[k] < n, what, ": edge ", k % e, " (", p[k % e], " -> ",
                  p[e + k % e], ") refers to node ", p[k], ", but the graph has ", n,
                  " nodes (valid ids are [0, ", n, "))");
    }
  }
  if (edge_attr.defined()) {
    IGNIS_CHECK(edge_attr.dim() >= 1 && edge_attr.size(0) == edge_index.size(1), what,
                ": expected edge_attr with one row per edge (", edge_index.size(1),
                "), but got shape ", edge_attr.sizes());
  }
  if (y.defined()) {
    IGNIS_CHECK(y.dim() == 0 || y.size(0) == n || y.size(0) == 1, what,
                ": expected labels y per node ([", n, "]) or per graph ([1]), but got shape ",
                y.sizes());
  }
  const std::pair<const Tensor*, const char*> masks[] = {
      {&train_mask, "train_mask"}, {&val_mask, "val_mask"}, {&test_mask, "test_mask"}};
  for (const auto& [m, name] : masks) {
    if (!m->defined()) continue;
    IGNIS_CHECK(m->dtype() == kBool && m->dim() == 1 && m->size(0) == n, what, ": expected ", name,
                " of dtype bool and shape [", n, "], but got ", m->dtype(), m->sizes());
  }
}

// ---- batching

GraphBatch collate(const std::vector<Graph>& graphs) {
  IGNIS_CHECK(!graphs.empty(), "collate: no graphs to batch");
  GraphBatch b;
  b.num_graphs = static_cast<int64_t>(graphs.size());
  b.node_ptr = {0};
  b.edge_ptr = {0};
  b.y_ptr = {0};
  const Graph& g0 = graphs[0];
  std::vector<Tensor> xs, eis, eas, ys, tm, vm, sm, bs;
  for (size_t i = 0; i < graphs.size(); ++i) {
    const Graph& g = graphs[i];
    const std::string what = "collate: graph " + std::to_string(i);
    g.validate(what);
    auto same = [&](const Tensor& a, const Tensor& a0, const char* name) {
      IGNIS_CHECK(a.defined() == a0.defined(), what, ": ", name, " is ",
                  a.defined() ? "present" : "missing", " but graph 0's is ",
                  a0.defined() ? "present" : "missing");
    };
    same(g.edge_attr, g0.edge_attr, "edge_attr");
    same(g.y, g0.y, "y");
    same(g.train_mask, g0.train_mask, "train_mask");
    same(g.val_mask, g0.val_mask, "val_mask");
    same(g.test_mask, g0.test_mask, "test_mask");
    IGNIS_CHECK(g.num_features() == g0.num_features() && g.x.dtype() == g0.x.dtype(), what,
                ": node features ", g.x.dtype(), g.x.sizes(), " do not match graph 0's ",
                g0.x.dtype(), g0.x.sizes());
    const int64_t n = g.num_nodes(), off = b.node_ptr.back();
    xs.push_back(g.x);
    eis.push_back(g.edge_index + off);
    if (g.edge_attr.defined()) eas.push_back(g.edge_attr);
    if (g.y.defined()) ys.push_back(g.y.dim() == 0 ? g.y.reshape({1}) : g.y);
    if (g.train_mask.defined()) tm.push_back(g.train_mask);
    if (g.val_mask.defined()) vm.push_back(g.val_mask);
    if (g.test_mask.defined()) sm.push_back(g.test_mask);
    bs.push_back(full({n}, static_cast<int64_t>(i), kInt64));
    b.node_ptr.push_back(off + n);
    b.edge_ptr.push_back(b.edge_ptr.back() + g.num_edges());
    b.y_ptr.push_back(b.y_ptr.back() + (g.y.defined() ? ys.back().size(0) : 0));
  }
  b.graph.x = cat(xs, 0);
  b.graph.edge_index = cat(eis, 1);
  if (!eas.empty()) b.graph.edge_attr = cat(eas, 0);
  if (!ys.empty()) b.graph.y = cat(ys, 0);
  if (!tm.empty()) b.graph.train_mask = cat(tm, 0);
  if (!vm.empty()) b.graph.val_mask = cat(vm, 0);
  if (!sm.empty()) b.graph.test_mask = cat(sm, 0);
  b.batch = cat(bs, 0);
  return b;
}

std::vector<Graph> GraphBatch::unbatch() const {
  std::vector<Graph> out;
  for (int64_t i = 0; i < num_graphs; ++i) {
    const int64_t n0 = node_ptr[i], n = node_ptr[i + 1] - n0;
    const int64_t e0 = edge_ptr[i], e = edge_ptr[i + 1] - e0;
    Graph g;
    g.x = graph.x.narrow(0, n0, n);
    g.edge_index = graph.edge_index.narrow(1, e0, e) - n0;
    if (graph.edge_attr.defined()) g.edge_attr = graph.edge_attr.narrow(0, e0, e);
    if (graph.y.defined()) g.y = graph.y.narrow(0, y_ptr[i], y_ptr[i + 1] - y_ptr[i]);
    if (graph.train_mask.defined()) g.train_mask = graph.train_mask.narrow(0, n0, n);
    if (graph.val_mask.defined()) g.val_mask = graph.val_mask.narrow(0, n0, n);
    if (graph.test_mask.defined()) g.test_mask = graph.test_mask.narrow(0, n0, n);
    out.push_back(std::move(g));
  }
  return out;
}

// ---- datasets and the loader

Graph InMemoryGraphDataset::get(int64_t index) const {
  IGNIS_CHECK(index >= 0 && index < size(), "InMemoryGraphDataset: index ", index,
              " is out of range for a dataset of ", size(), " graphs");
  return graphs_[static_cast<size_t>(index)];
}

int64_t InMemoryGraphDataset::num_classes() const {
  int64_t m = -1;
  for (const Graph& g : graphs_) {
    if (g.y.defined() && g.y.numel() > 0) m = std::max(m, max_index(g.y));
  }
  return m + 1;
}

std::shared_ptr<InMemoryGraphDataset> InMemoryGraphDataset::subset(
    const std::vector<int64_t>& indices) const {
  std::vector<Graph> out;
  out.reserve(indices.size());
  for (int64_t i : indices) out.push_back(get(i));
  return std::make_shared<InMemoryGraphDataset>(std::move(out));
}

struct GraphDataLoader::Epoch {
  std::vector<std::vector<int64_t>> batches;
  std::unique_ptr<detail::Prefetcher<GraphBatch>> prefetch;  // destroyed first: joins workers
};

GraphDataLoader::GraphDataLoader(std::shared_ptr<GraphDataset> dataset, DataLoaderOptions options,
                                 std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), options_(options), sampler_(std::move(sampler)) {
  IGNIS_CHECK(dataset_ != nullptr, "GraphDataLoader: the dataset is null");
  IGNIS_CHECK(options_.batch_size > 0, "GraphDataLoader: batch_size must be positive, but got ",
              options_.batch_size);
  IGNIS_CHECK(options_.num_workers >= 0, "GraphDataLoader: num_workers must be >= 0, but got ",
              options_.num_workers);
  IGNIS_CHECK(options_.prefetch_factor > 0,
              "GraphDataLoader: prefetch_factor must be positive, but got ",
              options_.prefetch_factor);
  IGNIS_CHECK(!(sampler_ && options_.shuffle),
              "GraphDataLoader: a sampler and shuffle=true cannot be combined (the sampler "
              "chooses the order)");
  if (sampler_ == nullptr) {
    sampler_ = options_.shuffle ? std::shared_ptr<Sampler>(std::make_shared<RandomSampler>(
                                      dataset_->size(), options_.seed))
                                : std::make_shared<SequentialSampler>(dataset_->size());
  }
}

GraphDataLoader::~GraphDataLoader() = default;

int64_t GraphDataLoader::size() const {
  const int64_t n = sampler_->size(), b = options_.batch_size;
  return options_.drop_last ? n / b : (n + b - 1) / b;
}

std::vector<std::vector<int64_t>> GraphDataLoader::batches(int64_t epoch) const {
  return detail::split_batches(sampler_->indices(epoch), options_.batch_size, options_.drop_last);
}

GraphDataLoader::Iterator GraphDataLoader::begin() {
  current_.reset();  // joins the workers of an abandoned epoch
  auto ep = std::make_unique<Epoch>();
  ep->batches = batches(epoch_++);
  const int64_t n = static_cast<int64_t>(ep->batches.size());
  const Epoch* e = ep.get();
  ep->prefetch = std::make_unique<detail::Prefetcher<GraphBatch>>(
      n, options_.num_workers, options_.prefetch_factor, [this, e](int64_t i) {
        std::vector<Graph> graphs;
        for (int64_t k : e->batches[static_cast<size_t>(i)]) graphs.push_back(dataset_->get(k));
        return collate(graphs);
      });
  current_ = std::move(ep);
  return Iterator(this, n == 0 ? -1 : 0);
}

GraphDataLoader::Iterator GraphDataLoader::end() { return Iterator(this, -1); }

const GraphBatch& GraphDataLoader::Iterator::operator*() {
  IGNIS_CHECK(pos_ >= 0, "GraphDataLoader: dereferencing the end iterator");
  return loader_->current_->prefetch->take(pos_);
}

GraphDataLoader::Iterator& GraphDataLoader::Iterator::operator++() {
  if (pos_ < 0) return *this;
  auto& p = *loader_->current_->prefetch;
  if (p.taken() <= pos_) p.take(pos_);  // skipped without reading
  ++pos_;
  if (pos_ >= p.size()) {
    pos_ = -1;
    loader_->current_.reset();
  }
  return *this;
}

// ---- karate club

Graph karate_club() {
  // The 78 undirected friendships of Zachary (1977), 0-based, as networkx lists them.
  static const int kEdges[78][2] = {
      {0, 1},   {0, 2},   {0, 3},   {0, 4},   {0, 5},   {0, 6},   {0, 7},   {0, 8},   {0, 10},
      {0, 11},  {0, 12},  {0, 13},  {0, 17},  {0, 19},  {0, 21},  {0, 31},  {1, 2},   {1, 3},
      {1, 7},   {1, 13},  {1, 17},  {1, 19},  {1, 21},  {1, 30},  {2, 3},   {2, 7},   {2, 8},
      {2, 9},   {2, 13},  {2, 27},  {2, 28},  {2, 32},  {3, 7},   {3, 12},  {3, 13},  {4, 6},
      {4, 10},  {5, 6},   {5, 10},  {5, 16},  {6, 16},  {8, 30},  {8, 32},  {8, 33},  {9, 33},
      {13, 33}, {14, 32}, {14, 33}, {15, 32}, {15, 33}, {18, 32}, {18, 33}, {19, 33}, {20, 32},
      {20, 33}, {22, 32}, {22, 33}, {23, 25}, {23, 27}, {23, 29}, {23, 32}, {23, 33}, {24, 25},
      {24, 27}, {24, 31}, {25, 31}, {26, 29}, {26, 33}, {27, 33}, {28, 31}, {28, 33}, {29, 32},
      {29, 33}, {30, 32}, {30, 33}, {31, 32}, {31, 33}, {32, 33}};
  // The 4 modularity communities used by Kipf & Welling (and PyTorch Geometric).
  static const int64_t kCommunity[34] = {1, 1, 1, 1, 3, 3, 3, 1, 0, 1, 3, 1, 1, 1, 0, 0, 3,
                                         1, 0, 1, 0, 1, 0, 0, 2, 2, 0, 0, 2, 0, 0, 2, 0, 0};
  // Both tables are read through volatile pointers: GCC 12.2 with -march=native (tuned for
  // Rocket Lake) folds a copy of a constant int64 table into vector constants and gets some of
  // them wrong ({1, 1, 0, 0} stored as {1, 1, 1, 1}: labels 14, 15, 26 and 27 came out as
  // 1, 1, 2, 2). The build now adds -mtune=generic (CMakeLists.txt, tests/test_toolchain.cpp);
  // the volatile reads keep these tables right under any flags a user builds with.
  // tests/test_gnn_data.cpp checks every label and degree.
  const volatile int* edges = &kEdges[0][0];
  const volatile int64_t* community = kCommunity;
  std::vector<int64_t> src, dst, labels;
  for (int e = 0; e < 78; ++e) {
    src.push_back(edges[2 * e]);
    dst.push_back(edges[2 * e + 1]);
  }
  for (int e = 0; e < 78; ++e) {
    src.push_back(edges[2 * e + 1]);
    dst.push_back(edges[2 * e]);
  }
  for (int i = 0; i < 34; ++i) labels.push_back(int64_t{community[i]});
  Graph g;
  g.x = eye(34);
  g.edge_index = stack({tensor(src), tensor(dst)}, 0);
  g.y = tensor(labels);
  std::vector<bool> train(34, false);
  for (int64_t c = 0; c < 4; ++c) {
    for (int i = 0; i < 34; ++i) {
      if (labels[i] == c) {
        train[i] = true;
        break;
      }
    }
  }
  g.train_mask = tensor(train);
  return g;
}

// ---- MNIST as graphs

std::shared_ptr<InMemoryGraphDataset> mnist_graphs(const Tensor& images, const Tensor& labels,
                                                   double threshold, int64_t k) {
  constexpr const char* op = "mnist_graphs";
  IGNIS_CHECK(images.defined() && labels.defined(), op, ": images and labels must be defined");
  IGNIS_CHECK((images.dim() == 3 || (images.dim() == 4 && images.size(1) == 1)) &&
                  images.size(-1) == 28 && images.size(-2) == 28,
              op, ": expected images of shape [N, 28, 28] or [N, 1, 28, 28], but got ",
              images.sizes());
  const int64_t n = images.size(0);
  IGNIS_CHECK(labels.dim() == 1 && labels.size(0) == n, op, ": expected ", n,
              " labels, but got shape ", labels.sizes());
  IGNIS_CHECK(k >= 1 && k <= 24, op,
              ": k must be in [1, 24] (neighbours in a 5x5 window), but got ", k);
  Tensor img = images.reshape({n, 28 * 28});
  img = images.dtype() == kUInt8 ? img.to(kFloat32) / 255.0 : img.to(kFloat32);
  img = img.contiguous();
  const Tensor lab = labels.to(kInt64).contiguous();
  const float* px = img.data_ptr<float>();
  const int64_t* lp = lab.data_ptr<int64_t>();
  // Candidate neighbours: the 5x5 window around a pixel, nearest first (ties in scan order).
  std::vector<std::pair<int, int>> window;
  for (int dr = -2; dr <= 2; ++dr) {
    for (int dc = -2; dc <= 2; ++dc) {
      if (dr != 0 || dc != 0) window.emplace_back(dr, dc);
    }
  }
  std::stable_sort(window.begin(), window.end(), [](auto a, auto b) {
    return a.first * a.first + a.second * a.second < b.first * b.first + b.second * b.second;
  });
  std::vector<Graph> graphs;
  graphs.reserve(static_cast<size_t>(n));
  std::vector<int> node_of(28 * 28);
  for (int64_t i = 0; i < n; ++i) {
    const float* p = px + i * 784;
    std::vector<float> feat;
    std::vector<int64_t> src, dst;
    int nodes = 0;
    for (int q = 0; q < 784; ++q) {
      if (p[q] > threshold) {
        node_of[q] = nodes++;
        feat.insert(feat.end(),
                    {p[q], static_cast<float>(q / 28) / 27.0f, static_cast<float>(q % 28) / 27.0f});
      } else {
        node_of[q] = -1;
      }
    }
    for (int q = 0; q < 784; ++q) {
      if (node_of[q] < 0) continue;
      const int r = q / 28, c = q % 28;
      int64_t found = 0;
      for (auto [dr, dc] : window) {
        const int rr = r + dr, cc = c + dc;
        if (rr < 0 || rr >= 28 || cc < 0 || cc >= 28 || node_of[rr * 28 + cc] < 0) continue;
        src.push_back(node_of[rr * 28 + cc]);  // neighbour -> node
        dst.push_back(node_of[q]);
        if (++found == k) break;
      }
    }
    Graph g;
    if (nodes == 0) {  // a blank image: one node with zero intensity at the centre
      feat = {0.0f, 0.5f, 0.5f};
      nodes = 1;
    }
    g.x = tensor(feat).reshape({nodes, 3});
    g.edge_index = src.empty() ? zeros({2, 0}, kInt64) : stack({tensor(src), tensor(dst)}, 0);
    g.y = full({1}, lp[i], kInt64);
    graphs.push_back(std::move(g));
  }
  return std::make_shared<InMemoryGraphDataset>(std::move(graphs));
}

std::shared_ptr<InMemoryGraphDataset> mnist_graphs(const std::string& root, bool train,
                                                   int64_t limit, double threshold, int64_t k) {
  const std::string split = train ? "train" : "t10k";
  Tensor images = read_idx(MNIST::file_path(root, split + "-images-idx3-ubyte"));
  Tensor labels = read_idx(MNIST::file_path(root, split + "-labels-idx1-ubyte"));
  IGNIS_CHECK(images.dim() == 3 && labels.dim() == 1 && images.size(0) == labels.size(0),
              "mnist_graphs: ", root, ": the ", split, " images ", images.sizes(), " and labels ",
              labels.sizes(), " do not match");
  if (limit >= 0 && limit < images.size(0)) {
    images = images.narrow(0, 0, limit);
    labels = labels.narrow(0, 0, limit);
  }
  return mnist_graphs(images, labels, threshold, k);
}

}  // namespace ignis::data
