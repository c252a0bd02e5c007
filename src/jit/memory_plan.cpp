// Liveness-based memory planning: the analysis of a graph's intermediate buffers (plan_memory)
// and the placement by liveness it shares with the executor's planned arena.
#include "jit/memory_plan.h"

#include <algorithm>

#include "ignis/jit.h"

namespace ignis::jit {

namespace {

// The output `k` of node n aliases its first tensor input (a view, or an in-place op's self):
// its schema return is annotated "Tensor(a)" or "Tensor(a!)".
bool aliases_input(const Node& n, size_t k) {
  const auto& rets = n.op->schema.returns;
  const std::string& r = k < rets.size() ? rets[k] : rets.back();
  return r.find("(a") != std::string::npos;
}

int first_tensor_input(const Node& n) {
  for (const Arg& a : n.args)
    if (a.kind == Arg::Kind::Tensor && a.value >= 0) return a.value;
  return -1;
}

}  // namespace

namespace detail {

Placement place_by_liveness(const std::vector<int64_t>& bytes,
                            const std::vector<std::pair<int64_t, int64_t>>& life, int64_t align) {
  const size_t n = bytes.size();
  Placement p;
  p.offsets.assign(n, 0);
  auto overlap = [&](size_t a, size_t b) {
    return life[a].first <= life[b].second && life[b].first <= life[a].second;
  };
  // The peak: the live bytes just after each buffer's start (the sum only grows at starts).
  for (size_t a = 0; a < n; ++a) {
    int64_t live = 0;
    for (size_t b = 0; b < n; ++b)
      if (life[b].first <= life[a].first && life[a].first <= life[b].second) live += bytes[b];
    p.peak_live = std::max(p.peak_live, live);
  }
  std::vector<size_t> order(n);
  for (size_t i = 0; i < n; ++i) order[i] = i;
  std::stable_sort(order.begin(), order.end(),
                   [&](size_t a, size_t b) { return bytes[a] > bytes[b]; });
  std::vector<size_t> placed;
  std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of overlapping buffers
  for (size_t b : order) {
    taken.clear();
    for (size_t q : placed)
      if (overlap(b, q)) taken.emplace_back(p.offsets[q], p.offsets[q] + bytes[q]);
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + bytes[b] <= lo) break;
      offset = std::max(offset, (hi + align - 1) / align * align);
    }
    p.offsets[b] = offset;
    p.bytes = std::max(p.bytes, offset + bytes[b]);
    placed.push_back(b);
  }
  return p;
}

}  // namespace detail

MemoryPlan plan_memory(const Graph& g) {
  g.lint();
  const size_t nv = g.values.size();
  const int end = static_cast<int>(g.nodes.size());
  MemoryPlan plan;
  plan.offsets.assign(nv, -1);
  plan.buffer_of.assign(nv, -1);
  plan.lifetime.assign(nv, {-1, -1});
  // Buffers: results that do not alias an input; aliases point at their root's buffer.
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const size_t o = static_cast<size_t>(n.outputs[k]);
      const int src = aliases_input(n, k) ? first_tensor_input(n) : -1;
      if (src >= 0) {
        plan.buffer_of[o] = plan.buffer_of[static_cast<size_t>(src)];  // -1 for inputs, held
      } else {
        plan.buffer_of[o] = static_cast<int>(o);
        plan.lifetime[o] = {static_cast<int>(i), static_cast<int>(i)};
      }
    }
  }
  auto extend = [&](int v, int at) {
    const int b = plan.buffer_of[static_cast<size_t>(v)];
    if (b >= 0) {
      auto& lt = plan.lifetime[static_cast<size_t>(b)];
      lt.second = std::max(lt.second, at);
    }
  };
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs()) extend(v, static_cast<int>(i));
  for (int o : g.outputs) extend(o, end);
  // Bytes per buffer; the unplanned total, the peak of the live ones and their places.
  std::vector<int> buffers;
  std::vector<int64_t> bytes;
  std::vector<std::pair<int64_t, int64_t>> life;
  for (size_t v = 0; v < nv; ++v) {
    if (plan.buffer_of[v] != static_cast<int>(v)) continue;
    const Value& val = g.values[v];
    int64_t numel = 1;
    for (int64_t d : val.sizes) numel *= d;
    bytes.push_back(numel * static_cast<int64_t>(element_size(val.dtype)));
    life.push_back(plan.lifetime[v]);
    plan.unplanned_bytes += bytes.back();
    buffers.push_back(static_cast<int>(v));
  }
  const detail::Placement placed = detail::place_by_liveness(bytes, life, 1);
  for (size_t b = 0; b < buffers.size(); ++b)
    plan.offsets[static_cast<size_t>(buffers[b])] = placed.offsets[b];
  plan.peak_live_bytes = placed.peak_live;
  plan.arena_bytes = placed.bytes;
  return plan;
}

}  // namespace ignis::jit
