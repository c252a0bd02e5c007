// Work, and the functional API over the default group (torch.distributed's module functions).
#include <algorithm>
#include <cstdlib>
#include <cstring>

#include "distributed/backend.h"

namespace ignis::distributed {

const char* reduce_op_name(ReduceOp op) {
  switch (op) {
    case ReduceOp::SUM: return "SUM";
    case ReduceOp::AVG: return "AVG";
    case ReduceOp::PRODUCT: return "PRODUCT";
    case ReduceOp::MIN: return "MIN";
    case ReduceOp::MAX: return "MAX";
  }
  return "?";
}

// ---- Work

bool Work::is_completed() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_;
}

bool Work::is_success() const {
  std::lock_guard<std::mutex> lock(mu_);
  return done_ && !error_;
}

std::exception_ptr Work::exception() const {
  std::lock_guard<std::mutex> lock(mu_);
  return error_;
}

std::atomic<int>& detail::blocked_waiters() {
  static std::atomic<int> n{0};
  return n;
}

bool Work::wait(std::chrono::milliseconds timeout) {
  std::unique_lock<std::mutex> lock(mu_);
  if (!done_) {
    // Tell the progress thread that someone waits (it then polls without sleeping).
    std::atomic<int>& waiters = detail::blocked_waiters();
    waiters.fetch_add(1, std::memory_order_relaxed);
    struct Leave {
      std::atomic<int>& n;
      ~Leave() { n.fetch_sub(1, std::memory_order_relaxed); }
    } leave{waiters};
    if (timeout.count() > 0) {
      if (!cv_.wait_for(lock, timeout, [&] { return done_; })) return false;
    } else {
      cv_.wait(lock, [&] { return done_; });
    }
  }
  if (error_) std::rethrow_exception(error_);
  return true;
}

void Work::finish(std::exception_ptr error) {
  {
    std::lock_guard<std::mutex> lock(mu_);
    if (done_) return;
    done_ = true;
    error_ = std::move(error);
  }
  cv_.notify_all();
}

// ---- the default group

namespace {

ProcessGroupPtr g_world;
std::vector<std::weak_ptr<ProcessGroup>> g_groups;  // made by new_group

const ProcessGroupPtr& resolve(const ProcessGroupPtr& group, const char* fn) {
  if (group) return group;
  IGNIS_CHECK(g_world != nullptr, fn,
              ": the default process group is not initialized; call "
              "ignis::distributed::init_process_group() first");
  return g_world;
}

// A world rank (root, src, dst) as a rank of `group`.
int group_rank(const ProcessGroupPtr& group, int world_rank, const char* fn) {
  const std::vector<int> ranks = group->world_ranks();
  auto it = std::find(ranks.begin(), ranks.end(), world_rank);
  IGNIS_CHECK(it != ranks.end(), fn, ": rank ", world_rank, " is not in the group (of ",
              ranks.size(), " ranks)");
  return static_cast<int>(it - ranks.begin());
}

WorkPtr done(WorkPtr w, bool async_op) {
  if (!async_op) w->wait();
  return w;
}

ProcessGroupOptions with_env(ProcessGroupOptions o) {
  if (const char* d = std::getenv("IGNIS_DISTRIBUTED_DEBUG")) {
    if (std::strcmp(d, "OFF") == 0 || std::strcmp(d, "off") == 0 || std::strcmp(d, "0") == 0) {
      o.check_metadata = false;
    }
  }
  if (const char* a = std::getenv("IGNIS_ALLREDUCE")) {
    if (std::strcmp(a, "ring") == 0) o.allreduce_algorithm = AllreduceAlgorithm::Ring;
  }
  return o;
}

}  // namespace

bool is_backend_available(const std::string& backend) {
  if (backend == "nccl") return detail::nccl_available();
  return backend == "mpi" && detail::mpi_available();
}

void init_process_group(const std::string& backend, const ProcessGroupOptions& options) {
  IGNIS_CHECK(g_world == nullptr,
              "init_process_group: the default process group is already "
              "initialized (call destroy_process_group() first)");
  IGNIS_CHECK(backend == "mpi" || backend == "nccl", "init_process_group: unknown backend '",
              backend, "' (available: mpi, nccl)");
  if (backend == "nccl") {
    g_world = detail::nccl_init_world(with_env(options));
    return;
  }
  IGNIS_CHECK(detail::mpi_available(),
              "init_process_group: ignis was built without MPI; "
              "install OpenMPI (Debian: openmpi-bin libopenmpi-dev) and rebuild");
  g_world = detail::mpi_init_world(with_env(options));
}

bool is_initialized() { return g_world != nullptr; }

ProcessGroupPtr default_group() { return resolve(nullptr, "default_group"); }

int get_rank(const ProcessGroupPtr& group) { return resolve(group, "get_rank")->rank(); }

int get_world_size(const ProcessGroupPtr& group) {
  return resolve(group, "get_world_size")->size();
}

ProcessGroupPtr new_group(const std::vector<int>& ranks) {
  const ProcessGroupPtr& world = resolve(nullptr, "new_group");
  std::vector<int> sorted = ranks;
  std::sort(sorted.begin(), sorted.end());
  IGNIS_CHECK(std::adjacent_find(sorted.begin(), sorted.end()) == sorted.end(),
              "new_group: ranks must be distinct");
  for (int r : sorted) {
    IGNIS_CHECK(r >= 0 && r < world->size(), "new_group: rank ", r,
                " is out of range for a world of ", world->size());
  }
  if (sorted.empty()) {
    for (int r = 0; r < world->size(); ++r) sorted.push_back(r);
  }
  IGNIS_CHECK(world->backend_name() == "mpi", "new_group: not supported with the ",
              world->backend_name(), " backend yet");
  ProcessGroupPtr g = detail::mpi_new_group(sorted, world->options());
  g_groups.push_back(g);
  return g;
}

void destroy_process_group(const ProcessGroupPtr& group) {
  if (group && group != g_world) {
    detail::mpi_destroy(group, false);
    return;
  }
  IGNIS_CHECK(g_world != nullptr, "destroy_process_group: no default process group");
  for (auto& w : g_groups) {
    if (auto g = w.lock()) detail::mpi_destroy(g, false);
  }
  g_groups.clear();
  ProcessGroupPtr world = std::move(g_world);
  g_world = nullptr;
  if (world->backend_name() == "nccl") {
    detail::nccl_destroy(world);
  } else {
    detail::mpi_destroy(world, true);
  }
}

// ---- collectives

WorkPtr barrier(const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "barrier")->barrier(), async_op);
}

WorkPtr broadcast(Tensor& tensor, int src, const ProcessGroupPtr& group, bool async_op) {
  const auto& g = resolve(group, "broadcast");
  return done(g->broadcast(tensor, group_rank(g, src, "broadcast")), async_op);
}

WorkPtr all_reduce(Tensor& tensor, ReduceOp op, const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "all_reduce")->all_reduce(tensor, op), async_op);
}

WorkPtr all_reduce(Tensor& tensor, ReduceOp op, AllreduceAlgorithm algorithm,
                   const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "all_reduce")->all_reduce(tensor, op, algorithm), async_op);
}

WorkPtr reduce(Tensor& tensor, int dst, ReduceOp op, const ProcessGroupPtr& group, bool async_op) {
  const auto& g = resolve(group, "reduce");
  return done(g->reduce(tensor, group_rank(g, dst, "reduce"), op), async_op);
}

WorkPtr all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor,
                   const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "all_gather")->all_gather(tensor_list, tensor), async_op);
}

WorkPtr gather(const Tensor& tensor, std::vector<Tensor>& gather_list, int dst,
               const ProcessGroupPtr& group, bool async_op) {
  const auto& g = resolve(group, "gather");
  return done(g->gather(gather_list, tensor, group_rank(g, dst, "gather")), async_op);
}

WorkPtr scatter(Tensor& tensor, const std::vector<Tensor>& scatter_list, int src,
                const ProcessGroupPtr& group, bool async_op) {
  const auto& g = resolve(group, "scatter");
  return done(g->scatter(tensor, scatter_list, group_rank(g, src, "scatter")), async_op);
}

WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& input_list, ReduceOp op,
                       const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "reduce_scatter")->reduce_scatter(output, input_list, op), async_op);
}

WorkPtr all_to_all(std::vector<Tensor>& output_list, const std::vector<Tensor>& input_list,
                   const ProcessGroupPtr& group, bool async_op) {
  return done(resolve(group, "all_to_all")->all_to_all(output_list, input_list), async_op);
}

WorkPtr isend(const Tensor& tensor, int dst, const ProcessGroupPtr& group, int tag) {
  const auto& g = resolve(group, "send");
  return g->send(tensor, group_rank(g, dst, "send"), tag);
}

WorkPtr irecv(Tensor& tensor, int src, const ProcessGroupPtr& group, int tag) {
  const auto& g = resolve(group, "recv");
  return g->recv(tensor, group_rank(g, src, "recv"), tag);
}

void send(const Tensor& tensor, int dst, const ProcessGroupPtr& group, int tag) {
  isend(tensor, dst, group, tag)->wait();
}

void recv(Tensor& tensor, int src, const ProcessGroupPtr& group, int tag) {
  irecv(tensor, src, group, tag)->wait();
}

}  // namespace ignis::distributed
