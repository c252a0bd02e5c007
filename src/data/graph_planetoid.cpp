// The Planetoid citation graphs (Cora, CiteSeer, PubMed) from their standard files: pickled
// SciPy/NumPy objects read by the inert pickle reader (graph_pickle.cpp), assembled with the
// split of Kipf & Welling as PyTorch Geometric does.
#include <algorithm>
#include <cctype>
#include <filesystem>
#include <fstream>
#include <set>

#include "data/graph_pickle.h"
#include "ignis/data/graph.h"
#include "ignis/ops.h"

namespace ignis::data {

namespace {
constexpr const char* kOp = "load_planetoid";

// One-hot label rows -> class ids (argmax; an all-zero row is class 0).
std::vector<int64_t> argmax_rows(const Tensor& y, const std::string& what) {
  IGNIS_CHECK(y.dim() == 2, what, ": expected one-hot labels [nodes, classes], but got shape ",
              y.sizes());
  const Tensor c = y.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  std::vector<int64_t> out(static_cast<size_t>(c.size(0)), 0);
  for (int64_t r = 0; r < c.size(0); ++r) {
    for (int64_t k = 1; k < c.size(1); ++k) {
      if (p[r * c.size(1) + k] > p[r * c.size(1) + out[r]]) out[r] = k;
    }
  }
  return out;
}
}  // namespace

Graph load_planetoid(const std::string& root, const std::string& name_in) {
  namespace fs = std::filesystem;
  std::string name = name_in;
  std::transform(name.begin(), name.end(), name.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  IGNIS_CHECK(name == "cora" || name == "citeseer" || name == "pubmed", kOp, ": unknown dataset '",
              name_in, "' (expected Cora, CiteSeer or PubMed)");
  auto path = [&](const std::string& part) {
    return (fs::path(root) / ("ind." + name + "." + part)).string();
  };
  auto dense = [&](const std::string& part) {
    return pickle::csr_to_dense(pickle::load_file(path(part)), path(part));
  };
  auto array = [&](const std::string& part) {
    return pickle::to_array(pickle::load_file(path(part)), path(part));
  };
  const Tensor x = dense("x"), tx = dense("tx"), allx = dense("allx");
  const Tensor y = array("y"), ty = array("ty"), ally = array("ally");
  const auto adjacency = pickle::adjacency_dict(pickle::load_file(path("graph")), path("graph"));
  // test.index: one node id per line.
  std::vector<int64_t> test_index;
  {
    std::ifstream f(path("test.index"));
    IGNIS_CHECK(f.good(), kOp, ": cannot open ", path("test.index"));
    std::string line;
    int64_t ln = 0;
    while (std::getline(f, line)) {
      ++ln;
      if (line.find_first_not_of(" \t\r") == std::string::npos) continue;
      size_t used = 0;
      int64_t v = -1;
      try {
        v = std::stoll(line, &used);
      } catch (const std::exception&) {
        used = 0;
      }
      IGNIS_CHECK(used > 0 && line.find_first_not_of(" \t\r", used) == std::string::npos && v >= 0 &&
                      v < (int64_t(1) << 40),
                  kOp, ": ", path("test.index"), ":", ln, ": expected a node id, but got '", line,
                  "'");
      test_index.push_back(v);
    }
  }
  IGNIS_CHECK(!test_index.empty(), kOp, ": ", path("test.index"), " lists no test node");
  const int64_t f = allx.size(1);
  IGNIS_CHECK(x.size(1) == f && tx.size(1) == f, kOp, ": feature widths differ: x ", x.sizes(),
              ", tx ", tx.sizes(), ", allx ", allx.sizes());
  IGNIS_CHECK(y.size(0) == x.size(0) && ally.size(0) == allx.size(0) && ty.size(0) == tx.size(0),
              kOp, ": labels do not match features: y ", y.sizes(), " for x ", x.sizes(), ", ally ",
              ally.sizes(), " for allx ", allx.sizes(), ", ty ", ty.sizes(), " for tx ",
              tx.sizes());
  IGNIS_CHECK(y.dim() == 2 && ty.dim() == 2 && ally.dim() == 2 && y.size(1) == ally.size(1) &&
                  ty.size(1) == ally.size(1),
              kOp, ": label widths differ: y ", y.sizes(), ", ty ", ty.sizes(), ", ally ",
              ally.sizes());
  std::vector<int64_t> sorted = test_index;
  std::sort(sorted.begin(), sorted.end());
  const int64_t lo = sorted.front(), hi = sorted.back();
  IGNIS_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(), kOp, ": ",
              path("test.index"), " lists a node twice");
  // tx rows belong to the sorted test nodes; CiteSeer has isolated test nodes missing from tx:
  // the range lo..hi is filled with zero rows for them.
  const int64_t span = hi - lo + 1;
  IGNIS_CHECK(span < (int64_t(1) << 24) && span * std::max<int64_t>(f, 1) <= (int64_t(1) << 28),
              kOp, ": test node ids ", lo, "..", hi, " are too far apart");
  IGNIS_CHECK(static_cast<int64_t>(sorted.size()) == tx.size(0), kOp, ": ", path("test.index"),
              " lists ", sorted.size(), " nodes but tx has ", tx.size(0), " rows");
  Tensor tx_ext = tx, ty_ext = ty;
  if (span != tx.size(0)) {
    const Tensor pos = tensor(sorted) - lo;
    tx_ext = zeros({span, f});
    tx_ext.index_put_({pos}, tx);
    ty_ext = zeros({span, ty.size(1)}, ty.dtype());
    ty_ext.index_put_({pos}, ty);
  }
  IGNIS_CHECK(lo == allx.size(0), kOp, ": the first test node is ", lo, ", but allx has ",
              allx.size(0), " rows (test nodes must follow them)");
  const int64_t n = allx.size(0) + span;
  Tensor feats = cat({allx, tx_ext}, 0);
  std::vector<int64_t> labels = argmax_rows(ally, path("ally"));
  {
    const auto t = argmax_rows(ty_ext.to(kFloat64), path("ty"));
    labels.insert(labels.end(), t.begin(), t.end());
  }
  // x[test_index] = x[sorted_test_index] (and the labels): rows of tx follow sorted order.
  {
    const Tensor ti = tensor(test_index), si = tensor(sorted);
    const Tensor rows = feats.index_select(0, si);
    feats.index_put_({ti}, rows);
    std::vector<int64_t> relabel = labels;
    for (size_t k = 0; k < test_index.size(); ++k) relabel[test_index[k]] = labels[sorted[k]];
    labels = relabel;
  }
  // Edges: symmetric, deduplicated, without self-loops (Cora: 10556, CiteSeer: 9104).
  std::set<std::pair<int64_t, int64_t>> edges;
  for (const auto& [a, b] : adjacency) {
    IGNIS_CHECK(a >= 0 && a < n && b >= 0 && b < n, kOp, ": ", path("graph"), ": edge (", a, ", ",
                b, ") refers to a node outside the ", n, " nodes");
    if (a == b) continue;  // CiteSeer lists 124 self-loops; PyG drops them too (9104 edges)
    edges.insert({a, b});
    edges.insert({b, a});
  }
  std::vector<int64_t> src, dst;
  for (const auto& [a, b] : edges) {
    src.push_back(a);
    dst.push_back(b);
  }
  Graph g;
  g.x = feats;
  g.edge_index = src.empty() ? zeros({2, 0}, kInt64) : stack({tensor(src), tensor(dst)}, 0);
  g.y = tensor(labels);
  const int64_t n_train = y.size(0);
  std::vector<bool> train(n, false), val(n, false), test(n, false);
  for (int64_t i = 0; i < n_train && i < n; ++i) train[i] = true;
  for (int64_t i = n_train; i < std::min(n_train + 500, n); ++i) val[i] = true;
  for (int64_t i : test_index) test[i] = true;
  g.train_mask = tensor(train);
  g.val_mask = tensor(val);
  g.test_mask = tensor(test);
  g.validate(std::string(kOp) + ": " + name);
  return g;
}

}  // namespace ignis::data
