// Which independent nodes the graph executor runs concurrently
// (ExecutorOptions::parallel_branches): the levels of the dependency DAG, and a cost model that
// splits each level into the nodes that keep their own intra-op threads (run alone) and those that
// run together, one thread each.
#pragma once

#include <vector>

#include "ignis/jit.h"

namespace ignis::jit::detail {

/// The cost model's constants (nanoseconds on one core of a current x86 server; only their
/// ratios decide a plan).
struct BranchCostModel {
  double ns_per_mac = 0.03;           // a product's multiply-add (about 33 GMAC/s on one core)
  double ns_per_element = 1.0;        // an output element of any other op
  double ns_per_fork = 5000.0;        // an OpenMP parallel region: wake the pool, join
  int64_t elementwise_grain = 32768;  // ignis's parallel_for grain: smaller loops run on one core
};

/// A node's estimated time on one core, and whether its op spreads over the cores by itself
/// (a product whose time is worth a fork, a loop over more than one grain of elements).
struct NodeCost {
  double ns = 0;
  bool threaded = false;
};
NodeCost node_cost(const Graph& g, const Node& n, const BranchCostModel& m = {});

/// The levels of the dependency DAG in execution order: a node sits one level after the latest
/// producer of its inputs; a node that writes into a tensor or draws random numbers is a barrier,
/// alone in its level, after every earlier node and before every later one.
std::vector<std::vector<int>> dependency_levels(const Graph& g);

/// Splits each level into groups run in order: first the nodes that keep their intra-op threads,
/// each alone, then the rest together (concurrently, one thread each, when the group has several
/// nodes). Per level it picks the split with the least estimated time on `threads` threads:
/// alone, a node takes ns / threads + a fork when threaded (ns otherwise); together, a group takes
/// max(its largest node, its sum / threads) + one fork. With one thread every node runs alone.
std::vector<std::vector<int>> plan_levels(const Graph& g,
                                          const std::vector<std::vector<int>>& levels, int threads,
                                          const BranchCostModel& m = {});

}  // namespace ignis::jit::detail
