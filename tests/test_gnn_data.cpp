// Graph data: validation of untrusted graphs, batching then unbatching, the graph loader, the
// karate club, the TU and Planetoid readers on generated and corrupted files, the pickle reader,
// and MNIST digits as graphs.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <filesystem>
#include <fstream>
#include <set>
#include <sstream>

#include "data/graph_pickle.h"
#include "ignis/data/distributed.h"
#include "ignis/ignis.h"
#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::vector<int64_t> ints(const Tensor& t) {
  std::vector<int64_t> r;
  for (double v : vals(t)) r.push_back(static_cast<int64_t>(v));
  return r;
}

data::Graph path_graph(int64_t n, int64_t f, double base) {
  data::Graph g;
  g.x = arange(n * f, kFloat32).reshape({n, f}) + base;
  std::vector<int64_t> s, d;
  for (int64_t i = 0; i + 1 < n; ++i) {
    s.push_back(i);
    d.push_back(i + 1);
  }
  g.edge_index = s.empty() ? zeros({2, 0}, kInt64) : stack({tensor(s), tensor(d)});
  g.edge_attr = arange(static_cast<int64_t>(s.size()), kFloat32).unsqueeze(1);
  g.y = full({1}, static_cast<int64_t>(base), kInt64);
  return g;
}

void write(const std::string& path, const std::string& text) {
  std::ofstream(path, std::ios::binary) << text;
}
std::string read(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  return std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
}

TEST(GraphData, KarateClub) {
  const data::Graph g = data::karate_club();
  g.validate();
  EXPECT_EQ(g.num_nodes(), 34);
  EXPECT_EQ(g.num_edges(), 156);
  EXPECT_TRUE(equal(g.x, eye(34)));
  // Symmetric, no self-loop, no duplicate; the two leaders (0 and 33) have degrees 16 and 17.
  std::set<std::pair<int64_t, int64_t>> e;
  const auto s = ints(g.edge_index[0]), d = ints(g.edge_index[1]);
  for (size_t k = 0; k < s.size(); ++k) {
    EXPECT_NE(s[k], d[k]);
    e.insert({s[k], d[k]});
  }
  EXPECT_EQ(e.size(), 156u);
  for (auto [a, b] : e) EXPECT_TRUE(e.count({b, a}));
  // The whole degree sequence and every community, compared as text: a table of int64
  // constants in the test could be miscompiled the way karate_club's own labels once were
  // (GCC 12.2, -march=native: see src/data/graph.cpp).
  auto joined = [](const std::vector<int64_t>& v) {
    std::string r;
    for (int64_t x : v) {
      if (!r.empty()) r += ' ';
      r += std::to_string(x);
    }
    return r;
  };
  EXPECT_EQ(joined(ints(degree(g.edge_index[1], 34))),
            "16 9 10 6 3 4 4 4 5 2 3 1 2 5 2 2 2 2 2 3 2 2 2 5 3 3 2 4 3 4 4 6 12 17");
  // PyTorch Geometric's KarateClub labels (the 4 modularity communities).
  const char* members[4] = {"8 14 15 18 20 22 23 26 27 29 30 32 33",
                            "0 1 2 3 7 9 11 12 13 17 19 21", "24 25 28 31", "4 5 6 10 16"};
  for (int64_t c = 0; c < 4; ++c) {
    EXPECT_EQ(joined(ints(nonzero(g.y.eq(c)).reshape({-1}))), members[c]) << "community " << c;
  }
  // One labelled member each (the first of each: 8, 0, 24, 4).
  EXPECT_EQ(ints(nonzero(g.train_mask).reshape({-1})), (std::vector<int64_t>{0, 4, 8, 24}));
}

TEST(GraphData, ValidateNamesTheFault) {
  data::Graph g = path_graph(3, 2, 0);
  g.validate();
  data::Graph bad = g;
  bad.edge_index = tensor({0, 1, 1, 3}).reshape({2, 2});
  EXPECT_THAT(error_of([&] { bad.validate("my graph"); }),
              HasSubstr("my graph: edge 1 (1 -> 3) refers to node 3, but the graph has 3 nodes "
                        "(valid ids are [0, 3))"));
  bad = g;
  bad.edge_index = tensor({0, -1, 1, 2}).reshape({2, 2});
  EXPECT_THAT(error_of([&] { bad.validate(); }), HasSubstr("refers to node -1"));
  bad = g;
  bad.edge_index = bad.edge_index.to(kInt32);
  EXPECT_THAT(error_of([&] { bad.validate(); }),
              HasSubstr("graph: expected an int64 edge_index of shape [2, num_edges], but got "
                        "int32[2, 2]"));
  bad = g;
  bad.edge_attr = zeros({3, 1});
  EXPECT_THAT(
      error_of([&] { bad.validate(); }),
      HasSubstr("graph: expected edge_attr with one row per edge (2), but got shape [3, 1]"));
  bad = g;
  bad.train_mask = tensor(std::vector<bool>{true, false});
  EXPECT_THAT(error_of([&] { bad.validate(); }),
              HasSubstr("graph: expected train_mask of dtype bool and shape [3], but got bool[2]"));
  bad = g;
  bad.x = Tensor();
  EXPECT_THAT(error_of([&] { bad.validate(); }), HasSubstr("graph: node features x are missing"));
  bad = g;
  bad.y = zeros({2}, kInt64);
  EXPECT_THAT(error_of([&] { bad.validate(); }),
              HasSubstr("graph: expected labels y per node ([3]) or per graph ([1]), but got "
                        "shape [2]"));
}

TEST(GraphData, BatchingThenUnbatching) {
  std::vector<data::Graph> gs = {path_graph(3, 2, 0), path_graph(1, 2, 1), path_graph(4, 2, 2)};
  const data::GraphBatch b = data::collate(gs);
  EXPECT_EQ(b.num_graphs, 3);
  EXPECT_EQ(b.graph.num_nodes(), 8);
  EXPECT_EQ(ints(b.batch), (std::vector<int64_t>{0, 0, 0, 1, 2, 2, 2, 2}));
  EXPECT_EQ(ints(b.graph.edge_index),
            (std::vector<int64_t>{0, 1, 4, 5, 6, 1, 2, 5, 6, 7}));  // offsets 0, 3, 4
  EXPECT_EQ(ints(b.graph.y), (std::vector<int64_t>{0, 1, 2}));
  data::Graph no_labels = b.graph;  // graph-level labels: one row per graph, not per node
  no_labels.y = Tensor();
  no_labels.validate();
  const auto back = b.unbatch();
  ASSERT_EQ(back.size(), 3u);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(equal(back[i].x, gs[i].x));
    EXPECT_TRUE(equal(back[i].edge_index, gs[i].edge_index));
    EXPECT_TRUE(equal(back[i].edge_attr, gs[i].edge_attr));
    EXPECT_TRUE(equal(back[i].y, gs[i].y));
  }
  // Message passing on the batch equals message passing on each graph.
  manual_seed(0);
  nn::GCNConv conv(2, 3);
  Tensor whole = conv.forward(b.graph.x, b.graph.edge_index);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(whole.narrow(0, b.node_ptr[i], gs[i].num_nodes()),
                         conv.forward(gs[i].x, gs[i].edge_index), 1e-5, 1e-6));
  }
  // Errors name the graph at fault.
  std::vector<data::Graph> mixed = gs;
  mixed[1].edge_attr = Tensor();
  EXPECT_THAT(error_of([&] { data::collate(mixed); }),
              HasSubstr("collate: graph 1: edge_attr is missing but graph 0's is present"));
  mixed = gs;
  mixed[2].x = zeros({4, 5});
  EXPECT_THAT(error_of([&] { data::collate(mixed); }),
              HasSubstr("collate: graph 2: node features float32[4, 5] do not match graph 0's "
                        "float32[3, 2]"));
  mixed = gs;
  mixed[2].edge_index = tensor({0, 9}).reshape({2, 1});
  EXPECT_THAT(error_of([&] { data::collate(mixed); }),
              HasSubstr("collate: graph 2: edge 0 (0 -> 9) refers to node 9"));
  EXPECT_THAT(error_of([&] { data::collate({}); }), HasSubstr("collate: no graphs to batch"));
}

TEST(GraphData, LoaderBatchesEveryGraphOncePerEpoch) {
  std::vector<data::Graph> gs;
  for (int i = 0; i < 10; ++i) gs.push_back(path_graph(1 + i % 3, 2, i));
  auto ds = std::make_shared<data::InMemoryGraphDataset>(gs);
  EXPECT_EQ(ds->num_classes(), 10);
  data::DataLoaderOptions opts;
  opts.batch_size = 4;
  opts.shuffle = true;
  opts.seed = 3;
  data::GraphDataLoader loader(ds, opts);
  EXPECT_EQ(loader.num_batches(), 3);
  std::vector<std::vector<int64_t>> epochs;
  for (int e = 0; e < 2; ++e) {
    std::vector<int64_t> seen;
    for (const data::GraphBatch& b : loader) {
      EXPECT_LE(b.num_graphs, 4);
      for (int64_t y : ints(b.graph.y)) seen.push_back(y);
    }
    epochs.push_back(seen);
    std::vector<int64_t> sorted = seen;
    std::sort(sorted.begin(), sorted.end());
    EXPECT_EQ(sorted, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  }
  EXPECT_NE(epochs[0], epochs[1]);  // reshuffled
  data::GraphDataLoader again(ds, opts);
  std::vector<int64_t> first;
  for (const data::GraphBatch& b : again) {
    for (int64_t y : ints(b.graph.y)) first.push_back(y);
  }
  EXPECT_EQ(first, epochs[0]);  // a pure function of (seed, epoch)
}

// Everything a loaded epoch holds, as text: the batches compared across worker counts.
std::vector<std::string> epoch_of(data::GraphDataLoader& loader) {
  std::vector<std::string> out;
  for (const data::GraphBatch& b : loader) {
    std::ostringstream os;
    os << b.num_graphs << " x " << b.graph.x << " ei " << b.graph.edge_index << " ea "
       << b.graph.edge_attr << " y " << b.graph.y << " batch " << b.batch;
    out.push_back(os.str());
  }
  return out;
}

TEST(GraphData, LoaderWorkersGiveTheSameBatches) {
  std::vector<data::Graph> gs;
  for (int i = 0; i < 23; ++i) gs.push_back(path_graph(1 + i % 4, 2, i));
  auto ds = std::make_shared<data::InMemoryGraphDataset>(gs);
  for (bool drop_last : {false, true}) {
    std::vector<std::vector<std::string>> reference;  // epochs 0 and 1 without workers
    for (int workers : {0, 1, 3}) {
      data::GraphDataLoader loader(ds, {.batch_size = 4,
                                        .shuffle = true,
                                        .drop_last = drop_last,
                                        .num_workers = workers,
                                        .prefetch_factor = 1,
                                        .seed = 5});
      EXPECT_EQ(loader.size(), drop_last ? 5 : 6);
      const auto e0 = epoch_of(loader), e1 = epoch_of(loader);
      ASSERT_EQ(static_cast<int64_t>(e0.size()), loader.size()) << workers;
      EXPECT_NE(e0, e1);  // reshuffled
      EXPECT_EQ(loader.epoch(), 2);
      if (workers == 0) {
        reference = {e0, e1};
        // The last batch holds the 23 - 20 = 3 remaining graphs unless dropped.
        EXPECT_EQ(e0.back().substr(0, 2), drop_last ? "4 " : "3 ");
      } else {
        EXPECT_EQ(e0, reference[0]) << workers << " workers";
        EXPECT_EQ(e1, reference[1]) << workers << " workers";
      }
      // An epoch abandoned after one batch joins its workers; set_epoch replays an epoch.
      for (const data::GraphBatch& b : loader) {
        EXPECT_GT(b.num_graphs, 0);
        break;
      }
      loader.set_epoch(1);
      EXPECT_EQ(epoch_of(loader), reference[1]) << workers << " workers";
      // The batches it loads are the sampler's indices, split.
      EXPECT_EQ(loader.batches(0).size(), static_cast<size_t>(loader.size()));
    }
  }
}

TEST(GraphData, LoaderWithASamplerAndItsErrors) {
  std::vector<data::Graph> gs;
  for (int i = 0; i < 6; ++i) gs.push_back(path_graph(2, 1, i));
  gs[4].edge_index = tensor(std::vector<int64_t>{0, 7}).reshape({2, 1});  // node 7 of 2
  auto ds = std::make_shared<data::InMemoryGraphDataset>(gs);
  // A sampler picks the graphs (here 5, 1, 3 in that order; 4 is never read).
  auto sampler = std::make_shared<data::SubsetRandomSampler>(std::vector<int64_t>{5, 1, 3});
  data::GraphDataLoader picked(ds, {.batch_size = 2, .num_workers = 2}, sampler);
  std::vector<int64_t> seen;
  for (const data::GraphBatch& b : picked) {
    for (int64_t y : ints(b.graph.y)) seen.push_back(y);
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{5, 1, 3}));
  // Two ranks' DistributedSamplers split the graphs between them, each graph once.
  std::vector<int64_t> both;
  for (int64_t rank = 0; rank < 2; ++rank) {
    auto shard = std::make_shared<data::DistributedSampler>(6, 2, rank, true, 9);
    data::GraphDataLoader loader(ds, {.batch_size = 2}, shard);
    EXPECT_EQ(loader.size(), 2);
    for (const std::vector<int64_t>& batch : loader.batches(0)) {
      both.insert(both.end(), batch.begin(), batch.end());
    }
  }
  std::sort(both.begin(), both.end());
  EXPECT_EQ(both, (std::vector<int64_t>{0, 1, 2, 3, 4, 5}));
  // The invalid graph fails its batch, on the consumer's thread, with collate's message.
  for (int workers : {0, 2}) {
    data::GraphDataLoader loader(ds, {.batch_size = 2, .num_workers = workers});
    int64_t good = 0;
    const std::string err = error_of([&] {
      for (const data::GraphBatch& b : loader) good += b.num_graphs;
    });
    EXPECT_EQ(good, 4) << workers;  // batches 0 and 1 arrive before batch 2 fails
    EXPECT_THAT(err, HasSubstr("collate: graph 0: edge 0 (0 -> 7) refers to node 7, but the "
                               "graph has 2 nodes (valid ids are [0, 2))"))
        << workers;
  }
  EXPECT_THAT(error_of([&] { data::GraphDataLoader(ds, {.batch_size = 0}); }),
              HasSubstr("GraphDataLoader: batch_size must be positive, but got 0"));
  EXPECT_THAT(error_of([&] { data::GraphDataLoader(ds, {.batch_size = 1, .num_workers = -1}); }),
              HasSubstr("GraphDataLoader: num_workers must be >= 0, but got -1"));
  EXPECT_THAT(error_of([&] { data::GraphDataLoader(ds, {.batch_size = 1, .prefetch_factor = 0}); }),
              HasSubstr("GraphDataLoader: prefetch_factor must be positive, but got 0"));
  EXPECT_THAT(
      error_of([&] { data::GraphDataLoader(ds, {.batch_size = 1, .shuffle = true}, sampler); }),
      HasSubstr("GraphDataLoader: a sampler and shuffle=true cannot be combined"));
  EXPECT_THAT(error_of([&] { data::GraphDataLoader(nullptr, {.batch_size = 1}); }),
              HasSubstr("GraphDataLoader: the dataset is null"));
}

// ---- TU format

// A MUTAG-like set of 3 graphs (2, 3 and 2 nodes) with node labels, edge attributes and graph
// labels -1 / 1.
void write_tu(const TempDir& d, const std::string& name) {
  write(d.file(name + "_A.txt"), "1, 2\n2, 1\n3, 4\n4, 5\n5, 3\n6, 7\n");
  write(d.file(name + "_graph_indicator.txt"), "1\n1\n2\n2\n2\n3\n3\n");
  write(d.file(name + "_graph_labels.txt"), "1\n-1\n1\n");
  write(d.file(name + "_node_labels.txt"), "0\n2\n1\n1\n0\n2\n2\n");
  write(d.file(name + "_edge_attributes.txt"), "0.5\n0.5\n1\n2\n3\n-1\n");
}

TEST(GraphData, TuReaderOnGeneratedFiles) {
  TempDir d("ignis-tu");
  write_tu(d, "TOY");
  auto ds = data::load_tu_dataset(d.str(), "TOY");
  ASSERT_EQ(ds->size(), 3);
  EXPECT_EQ(ds->num_classes(), 2);
  EXPECT_EQ(ds->num_features(), 3);  // one-hot of node labels 0..2
  const data::Graph g1 = ds->get(1);
  EXPECT_EQ(g1.num_nodes(), 3);
  EXPECT_EQ(ints(g1.edge_index), (std::vector<int64_t>{0, 1, 2, 1, 2, 0}));
  EXPECT_EQ(vals(g1.x), (std::vector<double>{0, 1, 0, 0, 1, 0, 1, 0, 0}));
  EXPECT_EQ(vals(g1.edge_attr), (std::vector<double>{1, 2, 3}));
  EXPECT_EQ(ints(g1.y), std::vector<int64_t>{0});  // -1 -> class 0
  EXPECT_EQ(ints(ds->get(0).y), std::vector<int64_t>{1});
  // Without node labels: constant features.
  fs::remove(d.file("TOY_node_labels.txt"));
  EXPECT_EQ(data::load_tu_dataset(d.str(), "TOY")->num_features(), 1);
}

TEST(GraphData, TuReaderOnCorruptedFiles) {
  struct Case {
    const char* file;
    const char* text;
    const char* error;
  };
  const Case cases[] = {
      {"_A.txt", "1, 2\n2, x\n", "TOY_A.txt:2: expected an integer but got '2, x'"},
      {"_A.txt", "1, 2\n2 1\n", "TOY_A.txt:2: expected ',' between values in '2 1'"},
      {"_A.txt", "1, 2, 3\n", "TOY_A.txt:1: expected 2 values, but got 3 in '1, 2, 3'"},
      {"_A.txt", "1, 8\n", "TOY_A.txt:1: edge (1, 8) refers to a node outside 1..7"},
      {"_A.txt", "2, 3\n", "TOY_A.txt:1: edge (2, 3) joins graph 1 and graph 2"},
      {"_A.txt", "1, 99999999999999999999\n", "TOY_A.txt:1: expected an integer"},
      // Found by the tu fuzz target: 2^63 - 1 is no double; as one it would overflow int64.
      {"_graph_labels.txt", "1\n9223372036854775807\n1\n",
       "TOY_graph_labels.txt:2: integer out of range (|value| > 2^53) in '9223372036854775807'"},
      {"_node_attributes.txt", "1\n2\ninf\n1\n1\n1\n1\n",
       "TOY_node_attributes.txt:3: expected a finite number but got 'inf'"},
      {"_graph_indicator.txt", "1\n1\n2\n2\n2\n3\n4\n",
       "TOY_graph_indicator.txt:7: graph id 4 is out of range"},
      {"_graph_indicator.txt", "1\n2\n1\n2\n2\n3\n3\n",
       "TOY_graph_indicator.txt:3: graph ids must not decrease"},
      {"_graph_indicator.txt", "1\n1\n3\n3\n3\n3\n3\n", "graph 2 has no node"},
      {"_node_labels.txt", "0\n1\n", "TOY_node_labels.txt has 2 rows, but"},
      {"_node_labels.txt", "0\n1\n-4\n0\n0\n0\n0\n",
       "TOY_node_labels.txt:3: node label -4 is out of range"},
      {"_edge_attributes.txt", "1\n2\n", "TOY_edge_attributes.txt has 2 rows, but"},
      {"_edge_attributes.txt", "1\n2\n3, 4\n1\n1\n1\n",
       "TOY_edge_attributes.txt:3: expected 1 values like line 1, but got 2"},
      {"_graph_labels.txt", "", "TOY_graph_labels.txt lists no graph"},
  };
  for (const Case& c : cases) {
    SCOPED_TRACE(std::string(c.file) + ": " + c.text);
    TempDir d("ignis-tu-bad");
    write_tu(d, "TOY");
    write(d.file(std::string("TOY") + c.file), c.text);
    EXPECT_THAT(error_of([&] { data::load_tu_dataset(d.str(), "TOY"); }), HasSubstr(c.error));
  }
  TempDir d("ignis-tu-missing");
  write_tu(d, "TOY");
  fs::remove(d.file("TOY_A.txt"));
  EXPECT_THAT(error_of([&] { data::load_tu_dataset(d.str(), "TOY"); }),
              HasSubstr("load_tu_dataset: cannot open " + d.file("TOY_A.txt")));
}

// ---- Planetoid (fixtures written by tests/data/planetoid/make_planetoid.py)

const std::string kPlanetoidDir = std::string(IGNIS_SOURCE_DIR) + "/tests/data/planetoid";

// The features the generator gives node i (features(), F = 4).
std::vector<double> fixture_features(int64_t i) {
  std::vector<double> r;
  for (int64_t k = 0; k < 4; ++k) r.push_back(((i * 7 + k * 3) % 5 == 0) ? 1 + (i + k) % 3 : 0);
  return r;
}

TEST(GraphData, PlanetoidOnGeneratedFiles) {
  // cora: protocol-2 pickles; nodes 0..5 in allx, test nodes 8, 6, 7 (tx in that order).
  const data::Graph g = data::load_planetoid(kPlanetoidDir, "Cora");
  ASSERT_EQ(g.num_nodes(), 9);
  EXPECT_EQ(g.num_features(), 4);
  for (int64_t i = 0; i < 9; ++i) {
    SCOPED_TRACE(i);
    EXPECT_EQ(vals(g.x[i]), fixture_features(i));
    EXPECT_EQ(ints(g.y[i]), std::vector<int64_t>{i % 3});
  }
  EXPECT_EQ(ints(nonzero(g.train_mask).reshape({-1})), (std::vector<int64_t>{0, 1}));
  EXPECT_EQ(ints(nonzero(g.val_mask).reshape({-1})), (std::vector<int64_t>{2, 3, 4, 5, 6, 7, 8}));
  EXPECT_EQ(ints(nonzero(g.test_mask).reshape({-1})), (std::vector<int64_t>{6, 7, 8}));
  // The path 0-1-...-8 made symmetric, the duplicate 0->1 and the self-loop 0->0 removed.
  EXPECT_EQ(g.num_edges(), 2 * 8);
  // citeseer: protocol-0 pickles; test nodes 9, 6, 8 with 7 missing (zero features, label 0).
  const data::Graph c = data::load_planetoid(kPlanetoidDir, "citeseer");
  ASSERT_EQ(c.num_nodes(), 10);
  for (int64_t i : {0, 5, 6, 8, 9}) {
    SCOPED_TRACE(i);
    EXPECT_EQ(vals(c.x[i]), fixture_features(i));
    EXPECT_EQ(ints(c.y[i]), std::vector<int64_t>{i % 3});
  }
  EXPECT_EQ(vals(c.x[7]), std::vector<double>(4, 0.0));
  EXPECT_EQ(ints(c.test_mask.to(kInt64)), (std::vector<int64_t>{0, 0, 0, 0, 0, 0, 1, 0, 1, 1}));
  EXPECT_EQ(ints(nonzero(c.train_mask).reshape({-1})), (std::vector<int64_t>{0, 1, 2}));
}

TEST(GraphData, PlanetoidOnCorruptedFiles) {
  TempDir d("ignis-planetoid");
  auto copy = [&] {
    for (const auto& e : fs::directory_iterator(kPlanetoidDir)) {
      fs::copy_file(e.path(), d.path / e.path().filename(), fs::copy_options::overwrite_existing);
    }
  };
  const std::string x = d.file("ind.cora.x");
  copy();
  write(x, read(x).substr(0, 99));
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr(x + ": the pickle ends early"));
  copy();
  {
    std::string s = read(x);
    s[2] = 'Z';  // an opcode no pickle has
    write(x, s);
  }
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr(x + ": unsupported pickle opcode 0x5a at byte 2"));
  copy();
  write(d.file("ind.cora.test.index"), "8\nsix\n7\n");
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr("ind.cora.test.index:2: expected a node id, but got 'six'"));
  copy();
  write(d.file("ind.cora.test.index"), "8\n6\n");
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr("lists 2 nodes but tx has 3 rows"));
  copy();
  fs::copy_file(d.file("ind.citeseer.y"), d.file("ind.cora.y"),
                fs::copy_options::overwrite_existing);
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr("labels do not match features: y [3, 3] for x [2, 4]"));
  copy();
  fs::copy_file(d.file("ind.cora.y"), d.file("ind.cora.x"), fs::copy_options::overwrite_existing);
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "cora"); }),
              HasSubstr(x + ": expected a SciPy csr_matrix"));
  EXPECT_THAT(error_of([&] { data::load_planetoid(d.str(), "reddit"); }),
              HasSubstr("load_planetoid: unknown dataset 'reddit'"));
}

// A Python 2 pickle (protocol 2) of numpy.array([1, -2], dtype='<i4'): the data as a str
// (SHORT_BINSTRING), as the original Planetoid files hold it.
template <size_t N>
std::string bin(const char (&a)[N]) {
  return std::string(a, N - 1);
}

TEST(GraphData, PickleReaderPython2ArrayAndHostileInput) {
  const std::string p =
      bin("\x80\x02"
          "cnumpy.core.multiarray\n_reconstruct\nq\x00"
          "cnumpy\nndarray\nq\x01"
          "K\x00\x85q\x02U\x01"
          "b\x87q\x03Rq\x04(K\x01K\x02\x85q\x05"
          "cnumpy\ndtype\nq\x06"
          "U\x02i4K\x00K\x01\x87Rq\x07(K\x03U\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
          "\x89U\x08\x01\x00\x00\x00\xfe\xff\xff\xfftb.");
  auto v = data::pickle::load(reinterpret_cast<const uint8_t*>(p.data()), p.size(), "py2");
  EXPECT_EQ(ints(data::pickle::to_array(v, "py2")), (std::vector<int64_t>{1, -2}));
  auto err = [](const std::string& s) {
    return error_of(
        [&] { data::pickle::load(reinterpret_cast<const uint8_t*>(s.data()), s.size(), "in"); });
  };
  EXPECT_THAT(err(bin("\x80\x02]q\x00h\x00"
                      "a.")),
              HasSubstr("in: a value stored inside itself"));
  EXPECT_THAT(
      err(bin("\x80\x02]q\x00]q\x01"
              "ah\x01K\x05"
              "a.")),
      HasSubstr("in: the opcode at byte 13 modifies a value already stored inside another one"));
  EXPECT_THAT(err(bin("\x80\x02T\xff\xff\xff\x7f")),
              HasSubstr("in: a length of 2147483647 at byte 7 runs past the end"));
  EXPECT_THAT(err(bin("\x80\x02h\x05.")), HasSubstr("in: memo index 5 at byte 2 was never stored"));
  EXPECT_THAT(err(bin("\x80\x02"
                      "a.")),
              HasSubstr("in: stack underflow at byte 2"));
  EXPECT_THAT(err(bin("\x80\x02K\x01K\x02.")),
              HasSubstr("in: pickle ends (STOP at byte 6) with 2 values on the stack"));
  std::string deep = "\x80\x02";
  for (int i = 0; i < 300; ++i) deep += "]";
  for (int i = 0; i < 299; ++i) deep += "a";
  EXPECT_THAT(err(deep + "."), HasSubstr("values nested more than 200 deep"));
}

// ---- MNIST as graphs

TEST(GraphData, MnistGraphsFromImages) {
  Tensor img = zeros({2, 28, 28});
  img.index_put_({0, Slice(10, 13), Slice(5, 8)}, 0.9);  // a 3x3 block
  img.index_put_({0, 20, 20}, 0.3);                      // below the threshold
  img.index_put_({1, 0, 0}, 1.0);                        // a lone pixel in the corner
  auto ds = data::mnist_graphs(img, tensor({7, 1}), 0.5, 8);
  ASSERT_EQ(ds->size(), 2);
  const data::Graph g = ds->get(0);
  g.validate();
  EXPECT_EQ(g.num_nodes(), 9);
  EXPECT_EQ(g.num_features(), 3);
  EXPECT_NEAR(vals(g.x[0])[0], 0.9, 1e-6);
  EXPECT_NEAR(vals(g.x[0])[1], 10.0 / 27, 1e-6);
  EXPECT_NEAR(vals(g.x[0])[2], 5.0 / 27, 1e-6);
  // Each node gets an edge from each of the other 8 nodes (all within the 5x5 window).
  EXPECT_EQ(g.num_edges(), 72);
  EXPECT_EQ(vals(degree(g.edge_index[1], 9)), std::vector<double>(9, 8.0));
  EXPECT_EQ(ints(g.y), std::vector<int64_t>{7});
  // k = 4: the 4 nearest (distance 1) where present: the centre has 4, corners 2, edges 3 ...
  // plus diagonal ones to reach 4.
  const data::Graph g4 = data::mnist_graphs(img, tensor({7, 1}), 0.5, 4)->get(0);
  EXPECT_EQ(vals(degree(g4.edge_index[1], 9)), std::vector<double>(9, 4.0));
  const data::Graph lone = ds->get(1);
  EXPECT_EQ(lone.num_nodes(), 1);
  EXPECT_EQ(lone.num_edges(), 0);
  EXPECT_THAT(error_of([&] {
                data::mnist_graphs(zeros({2, 28, 27}), tensor({1, 2}));
              }),
              HasSubstr("mnist_graphs: expected images of shape [N, 28, 28] or [N, 1, 28, 28], but "
                        "got [2, 28, 27]"));
  EXPECT_THAT(error_of([&] { data::mnist_graphs(img, tensor({1})); }),
              HasSubstr("mnist_graphs: expected 2 labels, but got shape [1]"));
}

}  // namespace
}  // namespace ignis
