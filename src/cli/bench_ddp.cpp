// `ignis bench ddp_mnist_mlp` (under mpirun -np N; N = 1 without it): one epoch of the demo MLP
// on MNIST with nn::DistributedDataParallel at global batch 128 (128 / N per rank, each rank on
// its DistributedSampler shard), as bench_mnist_mlp times one process: with overlap on and off,
// for several bucket_cap_mb, and with gradient_as_bucket_view. Prints the slowest rank's seconds
// per epoch and rank 0's per-iteration breakdown (fit's phases, backward split into its
// computation and the communication not hidden behind it) and CPU time (the training thread's,
// and the rest: the MPI progress thread).
#include <sys/resource.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <string>

#include "cli/bench.h"
#include "ignis/autograd.h"
#include "ignis/data.h"
#include "ignis/data/distributed.h"
#include "ignis/data/mnist.h"
#include "ignis/distributed.h"
#include "ignis/models.h"
#include "ignis/nn.h"
#include "ignis/nn/parallel.h"
#include "ignis/ops.h"
#include "ignis/optim.h"

namespace ignis::cli {

namespace {

std::shared_ptr<data::TensorDataset> mnist_train(const std::string& root) {
  data::MNIST raw(root, true);
  NoGradGuard ng;
  Tensor x = raw.data();
  x.sub_(0.1307).div_(0.3081);
  return std::make_shared<data::TensorDataset>(x, raw.targets());
}

struct Run {
  double seconds;
  double comm_wait;  // mean per iteration, rank 0
  double loss;
  int64_t buckets;
  // Rank 0's per-iteration means (ms): the phases of fit's breakdown, backward split into its
  // compute and the communication not hidden behind it.
  double data_ms, forward_ms, backward_ms, optimizer_ms;
  // Rank 0's CPU seconds over the epoch: the training thread's, and the rest of the process's
  // (the MPI progress thread, OpenMP workers).
  double cpu_main, cpu_other;
};

double cpu_s(int who) {
  rusage u{};
  getrusage(who, &u);
  return static_cast<double>(u.ru_utime.tv_sec + u.ru_stime.tv_sec) +
         1e-6 * static_cast<double>(u.ru_utime.tv_usec + u.ru_stime.tv_usec);
}

Run epoch(const std::shared_ptr<data::TensorDataset>& train_set, bool overlap, double cap_mb,
          bool as_view) {
  namespace dist = ignis::distributed;
  const int world = dist::get_world_size();
  manual_seed(0);
  nn::DistributedDataParallelOptions o;
  o.overlap = overlap;
  o.bucket_cap_mb = cap_mb;
  o.first_bucket_cap_mb = std::min(1.0, cap_mb);
  o.gradient_as_bucket_view = as_view;
  auto ddp = std::make_shared<nn::DistributedDataParallel>(models::mlp(), o);
  optim::SGD sgd(ddp->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto sampler = std::make_shared<data::DistributedSampler>(train_set->size(), world,
                                                            dist::get_rank(), true, 0);
  data::DataLoader loader(train_set, {.batch_size = 128 / world}, sampler);
  ddp->train();
  dist::barrier();
  const double cpu_all0 = cpu_s(RUSAGE_SELF), cpu_main0 = cpu_s(RUSAGE_THREAD);
  const double t0 = now_s();
  double comm = 0, last = 0, data = 0, fwd = 0, bwd = 0, opt = 0;
  int64_t n = 0;
  double ta = now_s();
  auto it = loader.begin();
  double tb = now_s();
  data += tb - ta;
  while (it != loader.end()) {
    auto& batch = *it;
    sgd.zero_grad();
    Tensor loss = nn::functional::cross_entropy(ddp->forward(batch.data), batch.target);
    ta = now_s();
    fwd += ta - tb;
    loss.backward();
    tb = now_s();
    bwd += tb - ta;
    sgd.step();
    ta = now_s();
    opt += ta - tb;
    comm += ddp->last_iteration_stats().comm_wait;
    last = loss.item<double>();
    ++n;
    ++it;
    tb = now_s();
    data += tb - ta;
  }
  const double seconds = now_s() - t0;
  const double cpu_main = cpu_s(RUSAGE_THREAD) - cpu_main0;
  const double cpu_other = cpu_s(RUSAGE_SELF) - cpu_all0 - cpu_main;
  Tensor t = full({1}, seconds, kFloat64);
  dist::all_reduce(t, dist::ReduceOp::MAX);
  const double k = n ? 1e3 / static_cast<double>(n) : 0;
  return {t.item<double>(), n ? comm / static_cast<double>(n) : 0, last,
          ddp->last_iteration_stats().buckets, data * k, fwd * k, bwd * k, opt * k, cpu_main,
          cpu_other};
}

}  // namespace

void bench_ddp_mnist_mlp(const BenchOptions& opts) {
  namespace dist = ignis::distributed;
  if (opts.ranks > 0 && std::getenv("OMPI_COMM_WORLD_SIZE") == nullptr) {
    // --ranks N outside mpirun: run this workload again under `mpirun -np N`.
    char self[4096];
    const ssize_t n = readlink("/proc/self/exe", self, sizeof(self) - 1);
    IGNIS_CHECK(n > 0, "ddp_mnist_mlp: cannot find this program's path");
    self[n] = '\0';
    std::string cmd = "mpirun -np " + std::to_string(opts.ranks) + " --oversubscribe " +
                      (geteuid() == 0 ? "--allow-run-as-root " : "") + "'" + self +
                      "' bench ddp_mnist_mlp --threads " + std::to_string(get_num_threads()) +
                      " --data '" + opts.data + "'";
    std::fflush(stdout);
    const int rc = std::system(cmd.c_str());
    IGNIS_CHECK(rc == 0, "ddp_mnist_mlp: `", cmd, "` failed (status ", rc, ")");
    return;
  }
  const bool owner = !dist::is_initialized();
  if (owner) dist::init_process_group("mpi");
  auto train_set = mnist_train(opts.data);
  struct Config {
    bool overlap;
    double cap;
    bool as_view;
  };
  const Config configs[] = {{true, 25, false},  {false, 25, false}, {true, 1, false},
                            {true, 0.25, false}, {true, 0.05, false}, {true, 0.25, true}};
  for (const Config& c : configs) {
    const Run r = epoch(train_set, c.overlap, c.cap, c.as_view);
    if (dist::get_rank() == 0) {
      std::printf(
          "workload=ddp_mnist_mlp ranks=%d threads=%d overlap=%d bucket_cap_mb=%g as_view=%d "
          "buckets=%lld s_per_epoch=%.4f comm_wait_ms=%.3f last_loss=%.4f data_ms=%.3f "
          "forward_ms=%.3f backward_compute_ms=%.3f optimizer_ms=%.3f cpu_train_s=%.3f "
          "cpu_other_s=%.3f\n",
          dist::get_world_size(), get_num_threads(), c.overlap ? 1 : 0, c.cap, c.as_view ? 1 : 0,
          static_cast<long long>(r.buckets), r.seconds, r.comm_wait * 1e3, r.loss, r.data_ms,
          r.forward_ms, r.backward_ms - r.comm_wait * 1e3, r.optimizer_ms, r.cpu_main,
          r.cpu_other);
      std::fflush(stdout);
    }
  }
  if (owner) dist::destroy_process_group();
}

}  // namespace ignis::cli
