// The TU graph-classification format (the text files of the TU Dortmund collection): every
// file is read as untrusted input; a fault names the file, the line and what is wrong.
#include "data/graph_tu.h"

#include <algorithm>
#include <cerrno>
#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <fstream>
#include <iterator>
#include <map>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/data/graph.h"
#include "ignis/ops.h"

namespace ignis::data {

namespace {

constexpr const char* kOp = "load_tu_dataset";

// The rows of a comma-separated numeric text file (blank lines skipped; each row's values).
struct Table {
  std::string path;
  std::vector<std::vector<double>> rows;
  std::vector<int64_t> line;  // the file line of each row
};

Table read_table(const std::string& path, const std::string& text, bool integers, size_t width_min,
                 size_t width_max) {
  std::istringstream f(text);
  Table t;
  t.path = path;
  std::string s;
  int64_t ln = 0;
  while (std::getline(f, s)) {
    ++ln;
    if (!s.empty() && s.back() == '\r') s.pop_back();
    if (s.find_first_not_of(" \t") == std::string::npos) continue;
    std::vector<double> row;
    const char* p = s.c_str();
    while (true) {
      while (*p == ' ' || *p == '\t') ++p;
      char* end = nullptr;
      errno = 0;
      const double v =
          integers ? static_cast<double>(std::strtoll(p, &end, 10)) : std::strtod(p, &end);
      IGNIS_CHECK(end != p && errno == 0, kOp, ": ", path, ":", ln, ": expected ",
                  integers ? "an integer" : "a number", " but got '", s, "'");
      // Integers are kept as doubles: only those a double holds exactly (found by fuzzing:
      // 2^63 - 1 rounded to 2^63, which no int64 holds).
      IGNIS_CHECK(!integers || std::abs(v) <= 9007199254740992.0, kOp, ": ", path, ":", ln,
                  ": integer out of range (|value| > 2^53) in '", s, "'");
      IGNIS_CHECK(std::isfinite(v), kOp, ": ", path, ":", ln,
                  ": expected a finite number but got '", s, "'");
      row.push_back(v);
      p = end;
      while (*p == ' ' || *p == '\t') ++p;
      if (*p == '\0') break;
      IGNIS_CHECK(*p == ',', kOp, ": ", path, ":", ln, ": expected ',' between values in '", s,
                  "'");
      ++p;
    }
    IGNIS_CHECK(
        row.size() >= width_min && row.size() <= width_max, kOp, ": ", path, ":", ln, ": expected ",
        width_min == width_max ? std::to_string(width_min) : std::to_string(width_min) + " or more",
        " values, but got ", row.size(), " in '", s, "'");
    if (!t.rows.empty()) {
      IGNIS_CHECK(row.size() == t.rows[0].size(), kOp, ": ", path, ":", ln, ": expected ",
                  t.rows[0].size(), " values like line ", t.line[0], ", but got ", row.size());
    }
    t.rows.push_back(std::move(row));
    t.line.push_back(ln);
  }
  return t;
}

std::string file(const std::string& root, const std::string& name, const std::string& suffix) {
  return (std::filesystem::path(root) / (name + "_" + suffix + ".txt")).string();
}

const char* kParts[] = {"A",           "graph_indicator", "graph_labels",
                        "node_labels", "node_attributes", "edge_attributes"};

}  // namespace

std::shared_ptr<InMemoryGraphDataset> load_tu_dataset(const std::string& root,
                                                      const std::string& name) {
  std::map<std::string, std::string> texts;
  for (const char* part : kParts) {
    const std::string path = file(root, name, part);
    std::ifstream f(path, std::ios::binary);
    if (!f.good()) continue;  // the required ones are reported missing below
    texts[part] =
        std::string((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  }
  return tu_dataset_from_texts(texts, root, name);
}

std::shared_ptr<InMemoryGraphDataset> tu_dataset_from_texts(
    const std::map<std::string, std::string>& texts, const std::string& root,
    const std::string& name) {
  auto has = [&](const char* part) { return texts.count(part) > 0; };
  auto table = [&](const char* part, bool integers, size_t lo, size_t hi) {
    const std::string path = file(root, name, part);
    IGNIS_CHECK(has(part), kOp, ": cannot open ", path);
    return read_table(path, texts.at(part), integers, lo, hi);
  };
  const Table ind = table("graph_indicator", true, 1, 1);
  const Table glab = table("graph_labels", true, 1, 1);
  const Table adj = table("A", true, 2, 2);
  const int64_t n = static_cast<int64_t>(ind.rows.size());
  const int64_t num_graphs = static_cast<int64_t>(glab.rows.size());
  IGNIS_CHECK(num_graphs > 0, kOp, ": ", glab.path, " lists no graph");
  // Graph of each node (1-based in the file), non-decreasing so that each graph's nodes are
  // one range.
  std::vector<int64_t> graph_of(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    const auto g = static_cast<int64_t>(ind.rows[i][0]);
    IGNIS_CHECK(g >= 1 && g <= num_graphs, kOp, ": ", ind.path, ":", ind.line[i], ": graph id ", g,
                " is out of range: ", glab.path, " lists ", num_graphs, " graphs (ids 1..",
                num_graphs, ")");
    IGNIS_CHECK(i == 0 || g >= graph_of[i - 1] + 1, kOp, ": ", ind.path, ":", ind.line[i],
                ": graph ids must not decrease (node ", i + 1, " is in graph ", g,
                " after a node of graph ", graph_of[i - 1] + 1, ")");
    graph_of[i] = g - 1;
  }
  std::vector<int64_t> first(num_graphs + 1, n);
  for (int64_t i = n - 1; i >= 0; --i) first[graph_of[i]] = i;
  for (int64_t g = num_graphs - 1; g >= 0; --g) first[g] = std::min(first[g], first[g + 1]);
  // Optional node labels (one-hot) and attributes.
  std::vector<std::vector<double>> feat(static_cast<size_t>(n));
  if (has("node_attributes")) {
    const Table na = table("node_attributes", false, 1, 1 << 20);
    IGNIS_CHECK(static_cast<int64_t>(na.rows.size()) == n, kOp, ": ", na.path, " has ",
                na.rows.size(), " rows, but ", ind.path, " lists ", n, " nodes");
    for (int64_t i = 0; i < n; ++i) feat[i] = na.rows[i];
  }
  if (has("node_labels")) {
    const Table nl = table("node_labels", true, 1, 1);
    IGNIS_CHECK(static_cast<int64_t>(nl.rows.size()) == n, kOp, ": ", nl.path, " has ",
                nl.rows.size(), " rows, but ", ind.path, " lists ", n, " nodes");
    int64_t lo = 0, hi = 0;
    for (size_t i = 0; i < nl.rows.size(); ++i) {
      const auto v = static_cast<int64_t>(nl.rows[i][0]);
      IGNIS_CHECK(v >= 0 && v < (1 << 16), kOp, ": ", nl.path, ":", nl.line[i], ": node label ", v,
                  " is out of range [0, 65536)");
      lo = i == 0 ? v : std::min(lo, v);
      hi = i == 0 ? v : std::max(hi, v);
    }
    const int64_t width = static_cast<int64_t>(feat.empty() ? 0 : feat[0].size()) + hi - lo + 1;
    IGNIS_CHECK(n * width <= (int64_t(1) << 28), kOp, ": ", nl.path, ": ", n, " nodes with ", width,
                " features each is too large (at most 2^28 values)");
    for (int64_t i = 0; i < n; ++i) {
      std::vector<double> oh(static_cast<size_t>(hi - lo + 1), 0.0);
      oh[static_cast<int64_t>(nl.rows[i][0]) - lo] = 1.0;
      feat[i].insert(feat[i].end(), oh.begin(), oh.end());
    }
  }
  const size_t f = n > 0 && !feat[0].empty() ? feat[0].size() : 1;
  if (n > 0 && feat[0].empty()) {
    for (auto& r : feat) r = {1.0};
  }
  // Edges: 1-based node ids, both ends in the same graph.
  std::vector<std::vector<int64_t>> src(num_graphs), dst(num_graphs), eidx(num_graphs);
  for (size_t k = 0; k < adj.rows.size(); ++k) {
    const auto a = static_cast<int64_t>(adj.rows[k][0]), b = static_cast<int64_t>(adj.rows[k][1]);
    IGNIS_CHECK(a >= 1 && a <= n && b >= 1 && b <= n, kOp, ": ", adj.path, ":", adj.line[k],
                ": edge (", a, ", ", b, ") refers to a node outside 1..", n);
    const int64_t g = graph_of[a - 1];
    IGNIS_CHECK(graph_of[b - 1] == g, kOp, ": ", adj.path, ":", adj.line[k], ": edge (", a, ", ", b,
                ") joins graph ", g + 1, " and graph ", graph_of[b - 1] + 1);
    src[g].push_back(a - 1 - first[g]);
    dst[g].push_back(b - 1 - first[g]);
    eidx[g].push_back(static_cast<int64_t>(k));
  }
  Table ea;
  if (has("edge_attributes")) {
    ea = table("edge_attributes", false, 1, 1 << 20);
    IGNIS_CHECK(ea.rows.size() == adj.rows.size(), kOp, ": ", ea.path, " has ", ea.rows.size(),
                " rows, but ", adj.path, " lists ", adj.rows.size(), " edges");
  }
  // Graph labels renumbered 0..C-1.
  std::map<int64_t, int64_t> classes;
  for (const auto& r : glab.rows) classes[static_cast<int64_t>(r[0])] = 0;
  int64_t c = 0;
  for (auto& [label, id] : classes) id = c++;
  std::vector<Graph> graphs;
  for (int64_t g = 0; g < num_graphs; ++g) {
    const int64_t lo = first[g], cnt = (g + 1 < num_graphs ? first[g + 1] : n) - lo;
    IGNIS_CHECK(cnt > 0, kOp, ": ", ind.path, ": graph ", g + 1, " has no node");
    std::vector<float> x;
    for (int64_t i = lo; i < lo + cnt; ++i) {
      IGNIS_CHECK(feat[i].size() == f, kOp, ": node ", i + 1, " has ", feat[i].size(),
                  " features, node 1 has ", f);
      x.insert(x.end(), feat[i].begin(), feat[i].end());
    }
    Graph gr;
    gr.x = tensor(x).reshape({cnt, static_cast<int64_t>(f)});
    gr.edge_index =
        src[g].empty() ? zeros({2, 0}, kInt64) : stack({tensor(src[g]), tensor(dst[g])}, 0);
    if (!ea.rows.empty()) {
      std::vector<float> a;
      for (int64_t k : eidx[g]) a.insert(a.end(), ea.rows[k].begin(), ea.rows[k].end());
      gr.edge_attr = tensor(a).reshape(
          {static_cast<int64_t>(eidx[g].size()), static_cast<int64_t>(ea.rows[0].size())});
    }
    gr.y = full({1}, classes[static_cast<int64_t>(glab.rows[g][0])], kInt64);
    gr.validate(std::string(kOp) + ": graph " + std::to_string(g + 1));
    graphs.push_back(std::move(gr));
  }
  return std::make_shared<InMemoryGraphDataset>(std::move(graphs));
}

}  // namespace ignis::data
