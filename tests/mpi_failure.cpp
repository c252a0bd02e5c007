// Failure scenarios of ignis::distributed, run by ctest under mpirun -np 2 through
// expect_failure.cmake (which wants a non-zero exit and checks the output):
//   mpi_failure timeout   rank 0 all-reduces alone: its 1 s timeout turns the hang into an error
//   mpi_failure kill      both ranks train an MLP with DistributedDataParallel; rank 1 SIGKILLs
//   itself at step
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
      // DDP training of a small MLP on random data; rank 1 dies at step 20.
      manual_seed(0);
      auto net =
          std::make_shared<nn::Sequential>(nn::Linear(64, 256), nn::ReLU(), nn::Linear(256, 10));
      auto model = std::make_shared<nn::DistributedDataParallel>(net);
      optim::SGD opt(model->parameters(), optim::SGDOptions(0.01));
      Tensor x = randn({32, 64});
      Tensor y = randint(0, 10, {32});
      for (int step = 0; step < 1000000; ++step) {
        if (rank == 1 && step == 20) std::raise(SIGKILL);
        opt.zero_grad();
        nn::functional::cross_entropy(model->forward(x), y).backward();
        opt.step();
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
