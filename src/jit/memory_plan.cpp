// Liveness-based memory planning of a graph's intermediate buffers (an analysis: the executor
// frees each value after its last use through the caching allocator; ops cannot yet write into
// an arena the plan assigns).
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
  // Bytes per buffer; the unplanned total and the peak of the live ones.
  std::vector<int> buffers;
  std::vector<int64_t> bytes(nv, 0);
  for (size_t v = 0; v < nv; ++v) {
    if (plan.buffer_of[v] != static_cast<int>(v)) continue;
    const Value& val = g.values[v];
    int64_t numel = 1;
    for (int64_t d : val.sizes) numel *= d;
    bytes[v] = numel * static_cast<int64_t>(element_size(val.dtype));
    plan.unplanned_bytes += bytes[v];
    buffers.push_back(static_cast<int>(v));
  }
  for (int t = 0; t <= end; ++t) {
    int64_t live = 0;
    for (int b : buffers) {
      const auto& lt = plan.lifetime[static_cast<size_t>(b)];
      if (lt.first <= t && t <= lt.second) live += bytes[static_cast<size_t>(b)];
    }
    plan.peak_live_bytes = std::max(plan.peak_live_bytes, live);
  }
  // Greedy by size: each buffer at the lowest offset free of every placed buffer it overlaps in
  // time.
  std::stable_sort(buffers.begin(), buffers.end(), [&](int a, int b) {
    return bytes[static_cast<size_t>(a)] > bytes[static_cast<size_t>(b)];
  });
  std::vector<int> placed;
  for (int b : buffers) {
    const auto& lb = plan.lifetime[static_cast<size_t>(b)];
    std::vector<std::pair<int64_t, int64_t>> taken;  // [begin, end) of overlapping buffers
    for (int p : placed) {
      const auto& lp = plan.lifetime[static_cast<size_t>(p)];
      if (lp.first <= lb.second && lb.first <= lp.second) {
        const int64_t at = plan.offsets[static_cast<size_t>(p)];
        taken.emplace_back(at, at + bytes[static_cast<size_t>(p)]);
      }
    }
    std::sort(taken.begin(), taken.end());
    int64_t offset = 0;
    for (const auto& [lo, hi] : taken) {
      if (offset + bytes[static_cast<size_t>(b)] <= lo) break;
      offset = std::max(offset, hi);
    }
    plan.offsets[static_cast<size_t>(b)] = offset;
    plan.arena_bytes = std::max(plan.arena_bytes, offset + bytes[static_cast<size_t>(b)]);
    placed.push_back(b);
  }
  return plan;
}

}  // namespace ignis::jit
