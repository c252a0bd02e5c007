// Independent branches of a graph run concurrently (the lecture notes: the graph's data
// dependencies let independent work run in parallel). A model with `branches` independent
// chains of small matrix products is traced once and run by the graph executor three ways: node
// by node (each op using the OpenMP pool by itself, which small ops cannot), every level at once
// (the independent nodes of a level on the pool's threads, each op single-threaded), and as the
// cost model plans it (per level, which nodes keep their threads and which run together).
//
//   build/parallel_branches [branches] [runs]
#include <chrono>
#include <cstdio>
#include <cstdlib>

#include "ignis/ignis.h"

using namespace ignis;

int main(int argc, char** argv) {
  const int branches = argc > 1 ? std::atoi(argv[1]) : 8;
  const int runs = argc > 2 ? std::atoi(argv[2]) : 200;
  if (branches <= 0 || runs <= 0) {
    std::fprintf(stderr, "usage: parallel_branches [branches > 0] [runs > 0]\n");
    return 2;
  }
  manual_seed(0);
  std::vector<std::pair<std::string, Tensor>> weights;
  for (int b = 0; b < branches; ++b) {
    std::string name(1, 'w');  // (not "w" + ...: GCC 12's -Wrestrict)
    name += std::to_string(b);
    weights.emplace_back(std::move(name), randn({128, 128}) * 0.1);
  }
  auto model = [&](const TensorList& in) {
    Tensor sum;
    for (const auto& [name, w] : weights) {
      Tensor h = in[0];
      for (int layer = 0; layer < 4; ++layer) h = h.matmul(w).tanh();
      sum = sum.defined() ? sum + h : h;
    }
    return TensorList{sum};
  };
  Tensor x = randn({64, 128});
  NoGradGuard no_grad;
  auto graph = std::make_shared<jit::Graph>(jit::trace(model, {x}, weights));
  jit::Executor sequential(graph);
  jit::Executor every(graph, {.parallel_branches = true, .branch_cost_model = false});
  jit::Executor planned(graph, {.parallel_branches = true});
  size_t widest = 0, together = 0;
  for (const auto& level : every.levels()) widest = std::max(widest, level.size());
  for (const auto& group : planned.schedule()) together += group.size() > 1 ? group.size() : 0;
  std::printf("%zu nodes in %zu levels, the widest with %zu nodes; %d threads\n",
              graph->nodes.size(), every.levels().size(), widest, get_num_threads());
  std::printf("cost model: %zu groups, %zu nodes run concurrently\n", planned.schedule().size(),
              together);
  auto time = [&](jit::Executor& ex) {
    ex.run({x});  // warm-up
    const auto t0 = std::chrono::steady_clock::now();
    for (int r = 0; r < runs; ++r) ex.run({x});
    return std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count() / runs;
  };
  const double ts = time(sequential), te = time(every), tp = time(planned);
  const Tensor ref = sequential.run({x})[0];
  const bool same = allclose(ref, every.run({x})[0], 1e-5, 1e-6) &&
                    allclose(ref, planned.run({x})[0], 1e-5, 1e-6);
  std::printf("node by node:        %.1f us per run\n", ts * 1e6);
  std::printf("every level at once: %.1f us per run (%.2fx)\n", te * 1e6, ts / te);
  std::printf("cost model's plan:   %.1f us per run (%.2fx), outputs equal: %s\n", tp * 1e6,
              ts / tp, same ? "yes" : "NO");
  return same ? 0 : 1;
}
