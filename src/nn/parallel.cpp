// nn::DistributedDataParallel and its Reducer (after PyTorch's c10d Reducer, Li et al. VLDB
// 2020): gradient buckets, readiness hooks, asynchronous bucket all-reduces, a final callback.
#include "ignis/nn/parallel.h"

#include <chrono>
#include <cstdio>
#include <cstdlib>
#include <sstream>
#include <unordered_set>

#include "autograd/accumulate_grad.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "ignis/profiler.h"
#include "ops/copy.h"

namespace ignis::nn {

namespace dist = ignis::distributed;

namespace {
double now_s() {
  using clock = std::chrono::steady_clock;
  return std::chrono::duration<double>(clock::now().time_since_epoch()).count();
}
}  // namespace

class Reducer {
 public:
  struct Param {
    std::string name;
    Tensor t;
    size_t bucket = 0;
    int64_t offset = 0;
    bool ready = false;
  };
  struct Bucket {
    std::vector<size_t> params;
    Tensor flat;
    size_t pending = 0;
    dist::WorkPtr work;
  };

  Reducer(NamedTensors params, const DistributedDataParallelOptions& o, dist::ProcessGroupPtr g,
          bool owns_group)
      : opts_(o), group_(std::move(g)), owns_group_(owns_group) {
    for (auto& [name, t] : params) params_.push_back({name, t});
    // Reverse registration order: roughly the order backward produces the gradients.
    std::vector<size_t> order;
    for (size_t i = params_.size(); i-- > 0;) order.push_back(i);
    build(order);
  }

  void register_hooks(const std::shared_ptr<Reducer>& self) {
    std::weak_ptr<Reducer> weak = self;
    for (size_t i = 0; i < params_.size(); ++i) {
      handles_.push_back(params_[i].t.register_post_accumulate_grad_hook([weak, i](const Tensor&) {
        if (auto r = weak.lock()) r->mark_ready(i, /*in_backward=*/true);
      }));
    }
  }

  ~Reducer() {
    try {
      wait_all();
      if (owns_group_ && dist::is_initialized()) dist::destroy_process_group(group_);
    } catch (...) {  // a failed collective was reported where it failed
    }
  }

  void remove_hooks() {
    for (size_t i = 0; i < handles_.size(); ++i) params_[i].t.remove_hook(handles_[i]);
    handles_.clear();
  }

  // Assigns parameters to buckets in `order` (one dtype per bucket).
  void build(const std::vector<size_t>& order) {
    NoGradGuard ng;
    buckets_.clear();
    const double mib = 1024.0 * 1024.0;
    double cap = opts_.first_bucket_cap_mb * mib;
    int64_t bytes = 0;
    std::vector<int64_t> numels;
    for (size_t i : order) {
      const Tensor& t = params_[i].t;
      if (buckets_.empty() || bytes >= cap ||
          t.dtype() != params_[buckets_.back().params[0]].t.dtype()) {
        if (!buckets_.empty()) cap = opts_.bucket_cap_mb * mib;
        buckets_.emplace_back();
        numels.push_back(0);
        bytes = 0;
      }
      Param& p = params_[i];
      p.bucket = buckets_.size() - 1;
      p.offset = numels.back();
      buckets_.back().params.push_back(i);
      numels.back() += t.numel();
      bytes += static_cast<int64_t>(t.nbytes());
    }
    for (size_t b = 0; b < buckets_.size(); ++b) {
      buckets_[b].flat = zeros({numels[b]}, params_[buckets_[b].params[0]].t.options());
    }
    // Gradients already there move into the new buckets (views of them with as-view).
    for (Param& p : params_) {
      if (!p.t.grad().defined()) continue;
      Tensor s = slot(p);
      copy_into(s, p.t.grad());
      if (opts_.gradient_as_bucket_view) p.t.set_grad(s);
    }
    if (opts_.print_buckets && group_->rank() == 0) std::printf("%s", summary().c_str());
  }

  Tensor slot(const Param& p) const {
    return buckets_[p.bucket].flat.narrow(0, p.offset, p.t.numel()).view(p.t.sizes());
  }

  // A new iteration: every parameter pending; unused ones (find_unused_parameters) ready now.
  void prepare(const std::vector<Tensor>& outputs) {
    wait_all();  // an iteration whose backward never ran leaves nothing in flight
    for (Param& p : params_) p.ready = false;
    for (Bucket& b : buckets_) {
      b.pending = b.params.size();
      b.work = nullptr;
    }
    next_bucket_ = 0;
    if (!rebuilt_) arrival_.clear();
    expect_ = true;
    callback_queued_ = false;
    t_prepared_ = now_s();
    if (!opts_.find_unused_parameters) return;
    // Walk the graph from the outputs to the leaves' accumulators.
    std::unordered_set<const TensorImpl*> used;
    std::vector<autograd::Node*> stack;
    std::unordered_set<autograd::Node*> seen;
    for (const Tensor& o : outputs) {
      if (!o.defined() || !o.requires_grad()) continue;
      autograd::Edge e = autograd::gradient_edge(o);
      if (e.fn && seen.insert(e.fn.get()).second) stack.push_back(e.fn.get());
    }
    while (!stack.empty()) {
      autograd::Node* n = stack.back();
      stack.pop_back();
      if (auto* acc = dynamic_cast<autograd::AccumulateGrad*>(n)) {
        used.insert(acc->leaf().impl());
      }
      for (const autograd::InputMeta& in : n->inputs()) {
        autograd::Node* next = in.edge.fn.get();
        if (next != nullptr && seen.insert(next).second) stack.push_back(next);
      }
    }
    for (size_t i = 0; i < params_.size(); ++i) {
      if (!used.count(params_[i].t.impl())) mark_ready(i, /*in_backward=*/false);
    }
  }

  // The next backward accumulates locally (an earlier prepared iteration is dropped).
  void cancel() {
    wait_all();
    expect_ = false;
  }

  void mark_ready(size_t i, bool in_backward) {
    if (!expect_) return;  // no_sync, eval, or a backward DDP's forward did not prepare
    Param& p = params_[i];
    IGNIS_CHECK(!p.ready, "DistributedDataParallel: parameter '", p.name,
                "' was marked ready twice in one iteration (a second backward through the same "
                "forward, or a parameter shared by two outputs backpropagated separately?)");
    p.ready = true;
    if (!rebuilt_) arrival_.push_back(i);
    if (in_backward && !callback_queued_) {
      callback_queued_ = true;
      t_first_grad_ = now_s();
      autograd::queue_callback([this] { finalize(); });
    }
    if (group_->size() > 1) {  // one rank: the gradients are the averages already
      NoGradGuard ng;
      Tensor s = slot(p);
      const Tensor& g = p.t.grad();
      if (!g.defined()) {
        s.zero_();
      } else if (g.data_ptr() != s.data_ptr()) {
        copy_into(s, g);
        if (opts_.gradient_as_bucket_view) p.t.set_grad(s);
      }
    }
    if (--buckets_[p.bucket].pending == 0 && opts_.overlap) launch_ready();
  }

  // Starts the all-reduces of the full buckets, in bucket order (the same on every rank).
  void launch_ready() {
    while (next_bucket_ < buckets_.size() && buckets_[next_bucket_].pending == 0) {
      Bucket& b = buckets_[next_bucket_++];
      if (group_->size() > 1) b.work = group_->all_reduce(b.flat, dist::ReduceOp::AVG);
    }
  }

  void wait_all() {
    for (Bucket& b : buckets_) {
      if (b.work) b.work->wait();
    }
  }

  // At the end of backward: every gradient ready, every bucket reduced, averages in .grad().
  void finalize() {
    if (!expect_) return;
    expect_ = false;
    std::vector<std::string> missing;
    for (const Param& p : params_) {
      if (!p.ready) missing.push_back(p.name);
    }
    if (!missing.empty()) {
      wait_all();
      std::ostringstream os;
      for (size_t k = 0; k < missing.size(); ++k) os << (k ? ", " : "") << missing[k];
      IGNIS_FAIL("DistributedDataParallel: ", missing.size(),
                 " parameter(s) received no gradient in this backward: ", os.str(),
                 ". Pass find_unused_parameters = true if some parameters take no part in a "
                 "forward, or make every output of forward take part in the loss");
    }
    const double t0 = now_s();
    {
      profiler::Range r("DistributedDataParallel: wait for all-reduces");
      launch_ready();
      wait_all();
    }
    const double t1 = now_s();
    NoGradGuard ng;
    if (!opts_.gradient_as_bucket_view && group_->size() > 1) {
      for (Param& p : params_) {
        Tensor s = slot(p);
        if (p.t.grad().defined()) {
          copy_into(p.t.mutable_grad(), s);
        } else {
          p.t.set_grad(s.clone());
        }
      }
    }
    stats_.comm_wait = t1 - t0;
    stats_.backward = now_s() - t_prepared_;
    stats_.buckets = static_cast<int64_t>(buckets_.size());
    stats_.bytes = 0;
    for (const Bucket& b : buckets_) stats_.bytes += static_cast<int64_t>(b.flat.nbytes());
    if (!rebuilt_) rebuild();
  }

  // After the first iteration: buckets in the order the gradients arrived (rank 0's order).
  void rebuild() {
    rebuilt_ = true;
    if (params_.empty() || arrival_.size() != params_.size()) return;
    std::vector<int64_t> order(arrival_.begin(), arrival_.end());
    // On the parameters' device: the nccl backend moves GPU tensors only.
    Tensor t = tensor(order, kInt64).to(params_.front().t.device());
    group_->broadcast(t, 0)->wait();
    t = t.cpu();
    std::vector<size_t> o;
    for (int64_t k = 0; k < t.numel(); ++k)
      o.push_back(static_cast<size_t>(t.data_ptr<int64_t>()[k]));
    std::vector<size_t> current;
    for (const Bucket& b : buckets_)
      current.insert(current.end(), b.params.begin(), b.params.end());
    if (o != current) build(o);  // the same order: the buckets stay (and are not printed again)
  }

  std::string summary() const {
    std::ostringstream os;
    os << "DistributedDataParallel: " << buckets_.size() << " bucket(s)\n";
    for (size_t b = 0; b < buckets_.size(); ++b) {
      os << "  bucket " << b << ": " << buckets_[b].flat.nbytes() << " bytes, "
         << buckets_[b].params.size() << " parameter(s):";
      for (size_t i : buckets_[b].params) os << " " << params_[i].name;
      os << "\n";
    }
    return os.str();
  }

  std::vector<std::pair<std::vector<std::string>, int64_t>> layout() const {
    std::vector<std::pair<std::vector<std::string>, int64_t>> out;
    for (const Bucket& b : buckets_) {
      std::vector<std::string> names;
      for (size_t i : b.params) names.push_back(params_[i].name);
      out.emplace_back(names, static_cast<int64_t>(b.flat.nbytes()));
    }
    return out;
  }

  DDPIterationStats stats_;

 private:
  DistributedDataParallelOptions opts_;
  dist::ProcessGroupPtr group_;
  bool owns_group_ = false;
  std::vector<Param> params_;
  std::vector<Bucket> buckets_;
  std::vector<size_t> handles_;
  size_t next_bucket_ = 0;
  bool expect_ = false;
  bool callback_queued_ = false;
  bool rebuilt_ = false;
  std::vector<size_t> arrival_;
  double t_prepared_ = 0, t_first_grad_ = 0;
};

DistributedDataParallel::DistributedDataParallel(std::shared_ptr<Module> module,
                                                 DistributedDataParallelOptions options)
    : module_(std::move(module)), options_(std::move(options)) {
  IGNIS_CHECK(module_ != nullptr, "DistributedDataParallel: module is null");
  IGNIS_CHECK(options_.bucket_cap_mb > 0 && options_.first_bucket_cap_mb > 0,
              "DistributedDataParallel: bucket_cap_mb must be positive, got ",
              options_.bucket_cap_mb);
  if (!options_.process_group) options_.process_group = dist::default_group();
  register_module("module", module_);
  // Every replica starts from rank 0's parameters and buffers.
  {
    NoGradGuard ng;
    for (const Tensor& t : module_->parameters()) {
      Tensor d = t.detach();
      options_.process_group->broadcast(d, 0)->wait();
    }
    for (const Tensor& t : module_->buffers()) {
      Tensor d = t.detach();
      options_.process_group->broadcast(d, 0)->wait();
    }
  }
  NamedTensors trainable;
  for (auto& [name, t] : module_->named_parameters()) {
    if (t.requires_grad()) trainable.emplace_back(name, t);
  }
  // The gradient all-reduces go over a communicator of their own (not interleaved with the
  // user's collectives) without the per-collective metadata check, which would double their
  // rounds: the broadcasts above checked every parameter's shape and dtype across the ranks, and
  // the buckets are built from them alike on every rank.
  dist::ProcessGroupPtr comm = options_.process_group;
  bool own = false;
  // (NCCL has no metadata check to skip, and runs its own algorithms: it keeps the group.)
  if (comm == dist::default_group() && comm->size() > 1 && comm->backend_name() == "mpi") {
    comm = dist::new_group({});
    comm->set_check_metadata(false);
    // ignis's ring unless IGNIS_ALLREDUCE names the algorithm: on shared memory it moves the
    // buckets faster than MPI's nonblocking all-reduce (docs/distributed.md, Measurements).
    if (std::getenv("IGNIS_ALLREDUCE") == nullptr) {
      comm->set_allreduce_algorithm(dist::AllreduceAlgorithm::Ring);
    }
    own = true;
  }
  reducer_ = std::make_shared<Reducer>(trainable, options_, comm, own);
  reducer_->register_hooks(reducer_);
}

DistributedDataParallel::~DistributedDataParallel() {
  if (reducer_) reducer_->remove_hooks();
}

Tensor DistributedDataParallel::forward(const Tensor& x) {
  if (options_.broadcast_buffers && is_training() && options_.process_group->size() > 1) {
    NoGradGuard ng;
    for (const Tensor& t : module_->buffers()) {
      Tensor d = t.detach();
      options_.process_group->broadcast(d, 0)->wait();
    }
  }
  const double t0 = now_s();
  Tensor out = module_->forward(x);
  reducer_->stats_.forward = now_s() - t0;
  prepare_for_backward({out});
  return out;
}

void DistributedDataParallel::prepare_for_backward(const std::vector<Tensor>& outputs) {
  if (!is_training() || !is_grad_enabled()) return;  // no backward follows: nothing changes
  if (require_sync_) {
    reducer_->prepare(outputs);
  } else {
    reducer_->cancel();  // under no_sync the backward of this forward accumulates locally
  }
}

std::vector<std::pair<std::vector<std::string>, int64_t>> DistributedDataParallel::bucket_layout()
    const {
  return reducer_->layout();
}

std::string DistributedDataParallel::bucket_summary() const { return reducer_->summary(); }

const DDPIterationStats& DistributedDataParallel::last_iteration_stats() const {
  return reducer_->stats_;
}

}  // namespace ignis::nn
