// nn::DistributedDataParallel: data-parallel training over an ignis::distributed process group,
// as PyTorch's DDP. Each rank holds a replica of the module and trains on its own part of the
// batch; gradients are averaged across ranks during backward, so every replica takes the same
// optimizer step.
//
//   dist::init_process_group("mpi");
//   auto model = std::make_shared<nn::DistributedDataParallel>(net);  // broadcasts rank 0's state
//   Tensor loss = loss_fn(model->forward(x), y);
//   loss.backward();        // buckets of gradients are all-reduced while backward goes on
//   optimizer.step();       // .grad() holds the average over ranks
//
// Gradients are grouped into buckets (about bucket_cap_mb each; the first one smaller so that
// communication starts early) in reverse registration order, the order in which backward
// roughly produces them; after the first iteration the buckets are rebuilt in the order the
// gradients actually arrived. A post-accumulate-grad hook on each parameter marks it ready;
// when a bucket's last gradient is ready, its asynchronous all-reduce starts, overlapping the
// rest of backward; a callback at the end of backward waits for every bucket and writes the
// averaged gradients back.
#pragma once

#include <memory>
#include <string>
#include <vector>

#include "ignis/distributed.h"
#include "ignis/nn/module.h"

namespace ignis::nn {

struct DistributedDataParallelOptions {
  /// The group to average over (null: the default group).
  distributed::ProcessGroupPtr process_group = nullptr;
  /// Bucket size in MiB; the first bucket (the last parameters) is capped at first_bucket_cap_mb.
  double bucket_cap_mb = 25;
  double first_bucket_cap_mb = 1;
  /// Parameters that take no part in a forward are marked ready at once (the graph is walked
  /// after forward). Without it, a parameter that gets no gradient is an error at the end of
  /// backward, naming it.
  bool find_unused_parameters = false;
  /// Broadcast rank 0's buffers (batch-norm running statistics) before each forward.
  bool broadcast_buffers = true;
  /// .grad() of each parameter is a view into its bucket: no copy in or out of the buckets.
  bool gradient_as_bucket_view = false;
  /// Start a bucket's all-reduce as soon as it is full (false: all of them at the end of
  /// backward; for measuring what overlap gains).
  bool overlap = true;
  /// Print the bucket layout (parameters and bytes per bucket) on rank 0 when (re)built.
  bool print_buckets = false;
};

/// How the last synchronised iteration's time divided (seconds; from the wrapper's view).
struct DDPIterationStats {
  double forward = 0;    // module forward
  double backward = 0;   // loss.backward(), including the wait in the final callback
  double comm_wait = 0;  // of which: waiting for all-reduces not hidden behind backward
  int64_t buckets = 0;
  int64_t bytes = 0;  // all-reduced per iteration
};

class Reducer;

class DistributedDataParallel : public Module {
 public:
  explicit DistributedDataParallel(std::shared_ptr<Module> module,
                                   DistributedDataParallelOptions options = {});
  ~DistributedDataParallel() override;
  std::string type_name() const override { return "DistributedDataParallel"; }

  /// The wrapped module's forward; prepares the reducer for the backward that follows.
  Tensor forward(const Tensor& x) override;
  /// For modules with other signatures: call after their forward with its outputs.
  void prepare_for_backward(const std::vector<Tensor>& outputs);
  std::shared_ptr<Module> module() const { return module_; }
  const DistributedDataParallelOptions& options() const { return options_; }

  /// Within its lifetime, backward accumulates gradients locally without communicating; the
  /// next backward outside it all-reduces the accumulated sum.
  class NoSync {
   public:
    explicit NoSync(DistributedDataParallel& ddp) : ddp_(&ddp), prev_(ddp.require_sync_) {
      ddp.require_sync_ = false;
    }
    ~NoSync() { ddp_->require_sync_ = prev_; }
    NoSync(const NoSync&) = delete;
    NoSync& operator=(const NoSync&) = delete;

   private:
    DistributedDataParallel* ddp_;
    bool prev_;
  };
  [[nodiscard]] NoSync no_sync() { return NoSync(*this); }

  /// The buckets: parameter names (dotted, in the wrapped module) and bytes of each.
  std::vector<std::pair<std::vector<std::string>, int64_t>> bucket_layout() const;
  std::string bucket_summary() const;
  const DDPIterationStats& last_iteration_stats() const;

 private:
  std::shared_ptr<Module> module_;
  DistributedDataParallelOptions options_;
  std::shared_ptr<Reducer> reducer_;
  bool require_sync_ = true;
};

}  // namespace ignis::nn
