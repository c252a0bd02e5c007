// The MPI progress engine: one thread makes every MPI call of the process. Operations are posted
// to it as Ops (state machines over nonblocking MPI requests) and run concurrently; it checks
// their metadata across ranks, starts the collectives of a group in the order they were posted
// (as MPI requires), polls them with MPI_Test, and fails those past their deadline -- so a dead
// or absent peer becomes an error instead of a hang.
#pragma once

#include <mpi.h>

#include <array>
#include <chrono>
#include <deque>
#include <functional>
#include <memory>
#include <string>
#include <thread>
#include <vector>

#include "ignis/distributed.h"

namespace ignis::distributed::mpi {

using Clock = std::chrono::steady_clock;

/// The communicators and state of one group (shared by the ProcessGroup and its in-flight ops).
struct GroupState {
  MPI_Comm coll = MPI_COMM_NULL;  // collectives and user point-to-point messages
  MPI_Comm meta = MPI_COMM_NULL;  // the metadata all-gathers
  MPI_Comm ring = MPI_COMM_NULL;  // the ring all-reduce's messages (tagged per op)
  int rank = -1;
  int size = 0;
  std::vector<int> world_ranks;
  // Engine thread only:
  bool broken = false;  // an operation timed out: the communicators' state is unknown
  std::string broken_reason;
  uint64_t ring_seq = 0;
};

/// Collectives, as Meta::op codes.
enum OpCode : int64_t {
  kBroadcast = 1,
  kAllReduce,
  kReduce,
  kAllGather,
  kGather,
  kScatter,
  kReduceScatter,
  kAllToAll,
  kBarrier,
};
const char* op_name(int code);

/// The fixed-size record the ranks exchange before a collective.
struct Meta {
  static constexpr int kDims = 16;
  int64_t op = 0, dtype = -1, ndim = 0, numel = 0, root = -1, reduce_op = -1;
  std::array<int64_t, kDims> sizes{};
  static constexpr int kWords = 6 + kDims;
};

/// One posted operation.
class Op {
 public:
  Op(const char* name, std::shared_ptr<GroupState> group) : name_(name), group_(std::move(group)) {}
  virtual ~Op() = default;
  /// Posts the MPI calls (engine thread).
  virtual void start() = 0;
  /// Tests them, advancing multi-step ops; true when finished. Throws on an MPI error.
  virtual bool progress() = 0;
  /// After success: copies results back into the caller's tensors (engine thread).
  virtual void finish() {
    if (on_finish_) on_finish_();
  }

  const char* name_;
  std::shared_ptr<GroupState> group_;
  std::function<void()> on_finish_;
  WorkPtr work_ = std::make_shared<Work>(name_);
  bool ordered_ = true;  // a collective: started in posting order within its group
  bool check_ = false;   // exchange and compare metadata first
  Meta meta_;
  Clock::time_point deadline_;
  Clock::time_point posted_;  // for the profiler's "communication" track
  std::chrono::milliseconds timeout_{0};
  // Engine state.
  bool meta_posted_ = false, meta_done_ = false, started_ = false;
  MPI_Request meta_req_ = MPI_REQUEST_NULL;
  std::vector<int64_t> meta_all_;
};

/// Throws "<op>: MPI error: <text>" unless rc is MPI_SUCCESS.
void check(int rc, const char* op);

class Engine {
 public:
  static Engine& get();
  /// Starts the thread and MPI (idempotent).
  void start();
  /// Posts an op; returns its Work.
  WorkPtr post(std::unique_ptr<Op> op);
  /// Runs `fn` on the engine thread and waits; rethrows its exception.
  void run(const std::function<void()>& fn);
  /// Shuts MPI down (MPI_Finalize, unless a group broke) and stops the thread.
  void stop();
  bool running() const { return thread_.joinable(); }

 private:
  void loop();
  bool step();
  void check_meta(Op& op);
  void fail(Op& op, std::exception_ptr e);

  std::thread thread_;
  std::mutex mu_;
  std::condition_variable cv_;
  std::deque<std::unique_ptr<Op>> queue_;
  std::deque<std::function<void()>> tasks_;
  bool stop_ = false;
  bool any_broken_ = false;
  std::vector<std::unique_ptr<Op>> inflight_;   // engine thread only
  std::vector<std::unique_ptr<Op>> graveyard_;  // timed out: MPI may still use their buffers
};

/// The ring all-reduce over `buf` (contiguous, n elements of dtype), as an Op posted by the group.
std::unique_ptr<Op> make_ring_allreduce(std::shared_ptr<GroupState> group, Tensor buf, ReduceOp op);

}  // namespace ignis::distributed::mpi
