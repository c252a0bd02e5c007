// The graph executor's plan for independent branches (see branch_plan.h).
#include "jit/branch_plan.h"

#include <algorithm>
#include <numeric>

#include "jit/passes.h"

namespace ignis::jit::detail {

namespace {

int64_t numel_of(const Value& v) {
  int64_t n = 1;
  for (int64_t s : v.sizes) n *= s;
  return n;
}

const Value* tensor_arg(const Graph& g, const Node& n, size_t k) {
  if (k >= n.args.size() || n.args[k].kind != Arg::Kind::Tensor || n.args[k].value < 0)
    return nullptr;
  return &g.values[static_cast<size_t>(n.args[k].value)];
}

/// Multiply-adds per output element of a product op (the reduced dimension), or 0 when `n` is
/// not a product.
int64_t macs_per_output(const Graph& g, const Node& n) {
  const std::string name = n.name();
  auto last_dim = [&](size_t k) -> int64_t {
    const Value* v = tensor_arg(g, n, k);
    return v == nullptr || v->sizes.empty() ? 0 : v->sizes.back();
  };
  if (name == "linear" || name == "linear_relu" || name == "linear_pointwise" || name == "matmul" ||
      name == "mm" || name == "bmm")
    return last_dim(0);
  if (name == "addmm" || name == "baddbmm") return last_dim(1);
  if (name.rfind("conv", 0) == 0) {  // conv1d/2d/3d and the fused convolutions: w [O, C/g, k...]
    const Value* w = tensor_arg(g, n, 1);
    if (w == nullptr || w->sizes.empty() || w->sizes[0] == 0) return 0;
    return numel_of(*w) / w->sizes[0];
  }
  return 0;
}

}  // namespace

NodeCost node_cost(const Graph& g, const Node& n, const BranchCostModel& m) {
  int64_t out = 0;
  for (int o : n.outputs) out += numel_of(g.values[static_cast<size_t>(o)]);
  NodeCost c;
  if (const int64_t k = macs_per_output(g, n); k > 0 && !n.outputs.empty()) {
    c.ns = static_cast<double>(numel_of(g.values[static_cast<size_t>(n.outputs[0])])) *
           static_cast<double>(k) * m.ns_per_mac;
    c.threaded = c.ns > 2 * m.ns_per_fork;
  } else {
    c.ns = static_cast<double>(out) * m.ns_per_element;
    c.threaded = out > m.elementwise_grain;
  }
  return c;
}

std::vector<std::vector<int>> dependency_levels(const Graph& g) {
  std::vector<int> level_of_value(g.values.size(), -1);
  std::vector<int> level(g.nodes.size(), 0);
  int floor = 0, top = -1;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    int l = floor;
    for (int v : n.inputs()) l = std::max(l, level_of_value[static_cast<size_t>(v)] + 1);
    if (!is_pure(n)) {
      l = top + 1;
      floor = l + 1;
    }
    level[i] = l;
    top = std::max(top, l);
    for (int o : n.outputs) level_of_value[static_cast<size_t>(o)] = l;
  }
  std::vector<std::vector<int>> levels(static_cast<size_t>(top + 1));
  for (size_t i = 0; i < g.nodes.size(); ++i)
    levels[static_cast<size_t>(level[i])].push_back(static_cast<int>(i));
  return levels;
}

std::vector<std::vector<int>> plan_levels(const Graph& g,
                                          const std::vector<std::vector<int>>& levels, int threads,
                                          const BranchCostModel& m) {
  const double t = std::max(threads, 1);
  std::vector<std::vector<int>> plan;
  for (const std::vector<int>& level : levels) {
    if (level.size() == 1 || threads <= 1) {
      for (int i : level) plan.push_back({i});
      continue;
    }
    std::vector<NodeCost> cost;
    for (int i : level) cost.push_back(node_cost(g, g.nodes[static_cast<size_t>(i)], m));
    // Largest first: the candidates to keep their own threads are a prefix of this order.
    std::vector<size_t> order(level.size());
    std::iota(order.begin(), order.end(), 0);
    std::stable_sort(order.begin(), order.end(),
                     [&](size_t a, size_t b) { return cost[a].ns > cost[b].ns; });
    auto alone = [&](const NodeCost& c) { return c.threaded ? c.ns / t + m.ns_per_fork : c.ns; };
    // together[k]: the estimated time of order[k..] run together.
    const size_t n = order.size();
    std::vector<double> together(n + 1, 0.0);
    double sum = 0;
    for (size_t k = n; k-- > 0;) {
      const NodeCost& c = cost[order[k]];
      sum += c.ns;
      // order is by decreasing time: order[k] is the largest of order[k..].
      together[k] = k + 1 == n ? alone(c) : std::max(c.ns, sum / t) + m.ns_per_fork;
    }
    size_t best_k = n;  // order[0, best_k) alone, the rest together
    double best = 0, prefix = 0;
    for (size_t k = 0; k < n; ++k) best += alone(cost[order[k]]);
    for (size_t k = 0; k < n; ++k) {
      if (prefix + together[k] < best) {
        best = prefix + together[k];
        best_k = k;
      }
      prefix += alone(cost[order[k]]);
    }
    std::vector<int> solo, group;
    for (size_t k = 0; k < n; ++k) (k < best_k ? solo : group).push_back(level[order[k]]);
    std::sort(solo.begin(), solo.end());
    std::sort(group.begin(), group.end());
    for (int i : solo) plan.push_back({i});
    if (!group.empty()) plan.push_back(std::move(group));
  }
  return plan;
}

}  // namespace ignis::jit::detail
