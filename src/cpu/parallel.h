// Intra-op parallelism: one OpenMP pool (the runtime oneDNN uses too). Small ranges run inline
// with no threading cost.
#pragma once

#include <omp.h>

#include <algorithm>
#include <cstdint>

namespace ignis {

/// Elements below which an elementwise op runs on the calling thread.
constexpr int64_t kGrainSize = 32768;

/// Calls f(begin, end) over chunks of [begin, end) on the pool, or inline when the range is
/// smaller than `grain` or we are already inside a parallel region.
template <class F>
void parallel_for(int64_t begin, int64_t end, int64_t grain, const F& f) {
  const int64_t n = end - begin;
  if (n <= 0) return;
  if (n <= grain || omp_in_parallel() || omp_get_max_threads() == 1) {
    f(begin, end);
    return;
  }
  int nthreads = static_cast<int>(std::min<int64_t>(omp_get_max_threads(), (n + grain - 1) / grain));
#pragma omp parallel num_threads(nthreads)
  {
    int tid = omp_get_thread_num();
    int nt = omp_get_num_threads();
    int64_t chunk = (n + nt - 1) / nt;
    int64_t b = begin + tid * chunk;
    int64_t e = std::min(end, b + chunk);
    if (b < e) f(b, e);
  }
}

}  // namespace ignis
