// Placing buffers in one arena by liveness: shared by the graph analysis (plan_memory) and the
// executor's planned arena (planned_arena.h).
#pragma once

#include <cstdint>
#include <utility>
#include <vector>

namespace ignis::jit::detail {

struct Placement {
  std::vector<int64_t> offsets;  // per buffer
  int64_t bytes = 0;             // the arena's size
  int64_t peak_live = 0;         // the most bytes alive at once
};

/// Places buffer i (bytes[i], alive over the closed interval life[i]) at an offset, multiple of
/// `align`, such that buffers alive at the same time never share bytes: largest first, each at
/// the lowest offset clear of every placed buffer it overlaps in time (the greedy by size of
/// TFLite's and TVM's planners).
Placement place_by_liveness(const std::vector<int64_t>& bytes,
                            const std::vector<std::pair<int64_t, int64_t>>& life, int64_t align);

}  // namespace ignis::jit::detail
