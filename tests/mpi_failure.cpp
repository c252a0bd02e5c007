// Failure scenarios of ignis::distributed, run by ctest under mpirun -np 2 through
// expect_failure.cmake (which wants a non-zero exit and checks the output):
//   mpi_failure timeout   rank 0 all-reduces alone: its 1 s timeout turns the hang into an error
//   mpi_failure kill      both ranks train (all-reduce gradients); rank 1 SIGKILLs itself at step
//                         20: rank 0 must exit non-zero with a clear message, not hang
#include <csignal>
#include <cstdio>
#include <cstring>
#include <thread>

#include "ignis/ignis.h"

namespace dist = ignis::distributed;
using namespace ignis;

int main(int argc, char** argv) {
  const std::string mode = argc > 1 ? argv[1] : "";
  try {
    dist::ProcessGroupOptions opts;
    opts.timeout = std::chrono::seconds(mode == "timeout" ? 1 : 20);
    dist::init_process_group("mpi", opts);
    const int rank = dist::get_rank();
    if (mode == "timeout") {
      if (rank == 0) {
        Tensor t = ones({16});
        dist::all_reduce(t);
        std::printf("rank 0: all_reduce returned without its peer\n");
        return 0;
      }
      std::this_thread::sleep_for(std::chrono::seconds(5));
    } else if (mode == "kill") {
      Tensor grad = ones({1 << 18});
      for (int step = 0; step < 1000000; ++step) {
        if (rank == 1 && step == 20) std::raise(SIGKILL);
        dist::all_reduce(grad, dist::ReduceOp::AVG);
      }
    } else {
      std::fprintf(stderr, "usage: mpi_failure timeout|kill\n");
      return 2;
    }
    dist::destroy_process_group();
  } catch (const ignis::Error& e) {
    std::fprintf(stderr, "error: %s\n", e.what());
    std::fflush(stderr);
    std::_Exit(1);  // without MPI_Finalize: mpirun reports the failed rank and stops the others
  }
  return 0;
}
