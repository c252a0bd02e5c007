// Distributed communication (torch.distributed): process groups, collectives on tensors, and the
// asynchronous Work handles they return.
//
//   namespace dist = ignis::distributed;
//   dist::init_process_group("mpi");        // rank and world size from mpirun / srun
//   Tensor t = ignis::full({4}, dist::get_rank());
//   dist::all_reduce(t);                    // every rank now holds the sum
//   auto work = dist::all_reduce(t, dist::ReduceOp::AVG, nullptr, /*async_op=*/true);
//   ...                                     // overlap other work with the communication
//   work->wait();                           // rethrows the collective's error, if any
//   dist::destroy_process_group();
//
// Every operation is asynchronous underneath: it returns a Work at once, and the backend runs
// it in the order it was posted. A synchronous call is the asynchronous one followed by wait().
// Backends: "mpi" (CPU tensors, OpenMPI) and "nccl" (GPU tensors, docs/cuda.md): NCCL's
// collectives are stream-ordered (the caller's current stream waits for them, so later GPU work
// sees the result without a host wait), and its Work::wait() blocks the host until they are done.
#pragma once

#include <chrono>
#include <condition_variable>
#include <exception>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::distributed {

/// The reduction of all_reduce, reduce and reduce_scatter. AVG is for floating dtypes; on bool
/// tensors SUM and MAX are a logical or, PRODUCT and MIN a logical and (as NCCL in PyTorch).
enum class ReduceOp { SUM, AVG, PRODUCT, MIN, MAX };
const char* reduce_op_name(ReduceOp op);

/// How all_reduce runs: the backend's own (MPI_Allreduce) or ignis's ring over point-to-point
/// messages (a reduce-scatter, then an all-gather, over world-size chunks).
enum class AllreduceAlgorithm { Native, Ring };

/// The handle of a posted operation. Thread-safe.
class Work {
 public:
  explicit Work(std::string op) : op_(std::move(op)) {}
  virtual ~Work() = default;
  Work(const Work&) = delete;
  Work& operator=(const Work&) = delete;

  /// Whether the operation finished, successfully or not. Never blocks.
  virtual bool is_completed() const;
  /// Finished without an error.
  bool is_success() const;
  /// The error it finished with (null while running or on success).
  std::exception_ptr exception() const;
  /// Blocks until the operation finished and rethrows its error. With a timeout (> 0), returns
  /// false if it has not finished by then (the operation goes on).
  virtual bool wait(std::chrono::milliseconds timeout = std::chrono::milliseconds(0));
  /// The operation's name ("all_reduce", "send", ...).
  const std::string& op() const { return op_; }

  /// For backends: marks the work finished (with `error` null on success) and wakes waiters.
  void finish(std::exception_ptr error = nullptr);

 private:
  std::string op_;
  mutable std::mutex mu_;
  std::condition_variable cv_;
  bool done_ = false;
  std::exception_ptr error_;
};
using WorkPtr = std::shared_ptr<Work>;

/// Settings of a process group.
struct ProcessGroupOptions {
  /// How long an operation may take before it fails with an error (a peer died, or does not call
  /// the same collective). After a timeout the group is unusable: every later call fails.
  std::chrono::milliseconds timeout = std::chrono::minutes(30);
  /// Before each collective, the ranks exchange (op, dtype, shape, root, reduce op) and fail
  /// with an error naming them on any mismatch, instead of hanging or corrupting memory. Costs
  /// one small all-gather per collective; IGNIS_DISTRIBUTED_DEBUG=OFF turns it off by default.
  bool check_metadata = true;
  /// all_reduce's default algorithm (IGNIS_ALLREDUCE=ring selects the ring by default).
  AllreduceAlgorithm allreduce_algorithm = AllreduceAlgorithm::Native;
};

/// A group of processes that communicate. Ranks given to its methods are ranks in the group.
/// A process that is not a member gets a group with rank() == -1, on which every call fails.
class ProcessGroup {
 public:
  ProcessGroup(int rank, int size, ProcessGroupOptions options)
      : rank_(rank), size_(size), options_(options) {}
  virtual ~ProcessGroup() = default;
  ProcessGroup(const ProcessGroup&) = delete;
  ProcessGroup& operator=(const ProcessGroup&) = delete;

  int rank() const { return rank_; }
  int size() const { return size_; }
  virtual std::string backend_name() const = 0;
  /// The world ranks of the members, by group rank.
  virtual std::vector<int> world_ranks() const = 0;

  const ProcessGroupOptions& options() const { return options_; }
  void set_timeout(std::chrono::milliseconds timeout) { options_.timeout = timeout; }
  void set_check_metadata(bool on) { options_.check_metadata = on; }
  void set_allreduce_algorithm(AllreduceAlgorithm a) { options_.allreduce_algorithm = a; }

  // Collectives: every member calls them, in the same order. Tensors may be of any dtype and
  // layout (non-contiguous ones are staged through a contiguous copy); the caller must not touch
  // them until the Work completed.
  virtual WorkPtr broadcast(Tensor& tensor, int root) = 0;
  virtual WorkPtr all_reduce(Tensor& tensor, ReduceOp op, AllreduceAlgorithm algorithm) = 0;
  WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM) {
    return all_reduce(tensor, op, options_.allreduce_algorithm);
  }
  virtual WorkPtr reduce(Tensor& tensor, int root, ReduceOp op) = 0;
  /// outputs: size() tensors shaped as input.
  virtual WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) = 0;
  /// outputs: size() tensors on the root, ignored elsewhere.
  virtual WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) = 0;
  /// inputs: size() tensors shaped as output on the root, ignored elsewhere.
  virtual WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) = 0;
  /// inputs: size() tensors shaped as output; output gets the reduction of every rank's
  /// inputs[rank].
  virtual WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs,
                                 ReduceOp op) = 0;
  /// inputs[j] goes to rank j, outputs[j] comes from rank j (sizes may differ per pair).
  virtual WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) = 0;
  virtual WorkPtr barrier() = 0;
  // Point to point.
  virtual WorkPtr send(const Tensor& tensor, int dst, int tag) = 0;
  virtual WorkPtr recv(Tensor& tensor, int src, int tag) = 0;

 protected:
  int rank_;
  int size_;
  ProcessGroupOptions options_;
};
using ProcessGroupPtr = std::shared_ptr<ProcessGroup>;

// ---- the default group and the functional API (torch.distributed)
//
// `group` null means the default (world) group. Ranks (root, src, dst) are world ranks, as in
// torch.distributed. With async_op the call returns as soon as the operation is posted; otherwise
// it returns once it completed (the returned Work is then completed).

/// Initializes the default group. backend "mpi": rank and world size come from the launcher
/// (mpirun -np N, srun --mpi=pmix). Options as in ProcessGroupOptions.
void init_process_group(const std::string& backend = "mpi",
                        const ProcessGroupOptions& options = {});
bool is_initialized();
/// Whether ignis was built with the backend ("mpi").
bool is_backend_available(const std::string& backend);
/// Rank of this process in `group` (-1 if not a member), and the group's size.
int get_rank(const ProcessGroupPtr& group = nullptr);
int get_world_size(const ProcessGroupPtr& group = nullptr);
/// The default group (fails when init_process_group was not called).
ProcessGroupPtr default_group();
/// A group of the given world ranks (sorted, distinct); every process of the world calls it.
ProcessGroupPtr new_group(const std::vector<int>& ranks);
/// Shuts down `group`, or with null the default group and every group made from it.
void destroy_process_group(const ProcessGroupPtr& group = nullptr);

WorkPtr barrier(const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr broadcast(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr,
                  bool async_op = false);
WorkPtr all_reduce(Tensor& tensor, ReduceOp op = ReduceOp::SUM,
                   const ProcessGroupPtr& group = nullptr, bool async_op = false);
/// all_reduce with an explicit algorithm (the group's default otherwise).
WorkPtr all_reduce(Tensor& tensor, ReduceOp op, AllreduceAlgorithm algorithm,
                   const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr reduce(Tensor& tensor, int dst, ReduceOp op = ReduceOp::SUM,
               const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr all_gather(std::vector<Tensor>& tensor_list, const Tensor& tensor,
                   const ProcessGroupPtr& group = nullptr, bool async_op = false);
/// gather_list: world-size tensors on dst (may be empty elsewhere).
WorkPtr gather(const Tensor& tensor, std::vector<Tensor>& gather_list, int dst,
               const ProcessGroupPtr& group = nullptr, bool async_op = false);
/// scatter_list: world-size tensors on src (may be empty elsewhere).
WorkPtr scatter(Tensor& tensor, const std::vector<Tensor>& scatter_list, int src,
                const ProcessGroupPtr& group = nullptr, bool async_op = false);
WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& input_list,
                       ReduceOp op = ReduceOp::SUM, const ProcessGroupPtr& group = nullptr,
                       bool async_op = false);
WorkPtr all_to_all(std::vector<Tensor>& output_list, const std::vector<Tensor>& input_list,
                   const ProcessGroupPtr& group = nullptr, bool async_op = false);
void send(const Tensor& tensor, int dst, const ProcessGroupPtr& group = nullptr, int tag = 0);
void recv(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr, int tag = 0);
WorkPtr isend(const Tensor& tensor, int dst, const ProcessGroupPtr& group = nullptr, int tag = 0);
WorkPtr irecv(Tensor& tensor, int src, const ProcessGroupPtr& group = nullptr, int tag = 0);

}  // namespace ignis::distributed
