// `ignis bench allreduce` (under mpirun -np N): all-reduce of float32 buffers of 4 KB..256 MB,
// MPI's own algorithm against ignis's ring, reported with nccl-tests' definitions
// (doc/PERFORMANCE.md there): time is the slowest rank's mean per call; algbw = bytes / time;
// busbw = algbw * 2 (n - 1) / n, the bandwidth each link sustains in a ring all-reduce, which
// is comparable across rank counts and to the hardware's peak.
#include <algorithm>
#include <cstdio>

#include "cli/bench.h"
#include "ignis/distributed.h"
#include "ignis/ops.h"

namespace ignis::cli {

void bench_allreduce(const BenchOptions& opts) {
  namespace dist = ignis::distributed;
  const bool owner = !dist::is_initialized();
  if (owner) dist::init_process_group("mpi");
  const int rank = dist::get_rank(), n = dist::get_world_size();
  const int64_t max_bytes = opts.max_bytes > 0 ? opts.max_bytes : int64_t{256} << 20;
  for (int64_t bytes = 4096; bytes <= max_bytes; bytes *= 4) {
    Tensor buf = ones({bytes / 4});
    for (auto algo : {dist::AllreduceAlgorithm::Native, dist::AllreduceAlgorithm::Ring}) {
      // The same number of calls on every rank: about 256 MB of traffic per measurement.
      const int iters = static_cast<int>(std::clamp<int64_t>((int64_t{256} << 20) / bytes, 5, 200));
      std::vector<double> times;
      for (int w = 0; w < 2; ++w) dist::all_reduce(buf, dist::ReduceOp::SUM, algo);
      for (int rep = 0; rep < std::max(1, opts.repeat / 3); ++rep) {
        dist::barrier();
        const double t0 = now_s();
        for (int i = 0; i < iters; ++i) dist::all_reduce(buf, dist::ReduceOp::SUM, algo);
        Tensor t = full({1}, (now_s() - t0) / iters, kFloat64);
        dist::all_reduce(t, dist::ReduceOp::MAX);
        times.push_back(t.item<double>());
      }
      const double time = median(times);
      const double algbw = static_cast<double>(bytes) / time / 1e9;
      const double busbw = algbw * 2.0 * (n - 1) / n;
      if (rank == 0) {
        std::printf(
            "workload=allreduce algorithm=%s ranks=%d bytes=%lld time_us=%.1f "
            "algbw_GBps=%.3f busbw_GBps=%.3f\n",
            algo == dist::AllreduceAlgorithm::Ring ? "ring" : "mpi", n,
            static_cast<long long>(bytes), time * 1e6, algbw, busbw);
        std::fflush(stdout);
      }
    }
  }
  if (owner) dist::destroy_process_group();
}

}  // namespace ignis::cli
