// The "nccl" process-group backend: ignis::distributed's collectives on GPU tensors through NCCL
// (opened at first use, cuda/lazy_library.h), behind the same ProcessGroup interface as MPI's.
//
// - Bootstrap: under a launcher (mpirun, srun) the MPI world group gives the ranks and carries
//   NCCL's unique id from rank 0 to the others; a process started alone is a world of one, with
//   no MPI. Each process drives one GPU: its node-local rank modulo the GPUs it sees.
// - Stream order, as in PyTorch: each collective runs on the group's own NCCL stream, after the
//   work already queued on the caller's current stream (an event), and the current stream waits
//   for it before its later work (another event). So `all_reduce(t); t * 2` is correct without a
//   host wait, and the host is free while the GPU communicates. The tensors are recorded as used
//   by the NCCL stream, so the caching allocator does not hand their memory out early.
// - Work::wait() blocks the host until the collective has finished on the GPU, polling NCCL's
//   asynchronous error; after the group's timeout it aborts the communicator (once: the state is
//   shared by the group and its Works) and throws, and the group is unusable afterwards (as with
//   MPI). The NCCL stream comes from the device's pool and is never destroyed, since tensors
//   recorded as used by it may outlive the group.
// - Non-contiguous tensors are staged through contiguous copies, copied back in stream order.
// - Differences from MPI's backend: no metadata check across ranks (a mismatch is NCCL's own
//   error or hang, ended by the timeout); send/recv tags are ignored (NCCL matches messages in
//   order); new_group is not supported yet.
#include <nccl.h>

#include <chrono>
#include <cstdlib>
#include <cstring>
#include <memory>
#include <mutex>
#include <thread>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "cuda/lazy_library.h"
#include "distributed/backend.h"
#include "ignis/ops.h"
#include "ops/copy.h"

namespace ignis::distributed::detail {
namespace {

using cuda::DeviceGuard;

#define IGNIS_NCCL_FUNCS(X)                                                                     \
  X(ncclGetUniqueId) X(ncclCommInitRank) X(ncclCommDestroy) X(ncclCommAbort)                  \
  X(ncclCommGetAsyncError) X(ncclGetErrorString) X(ncclAllReduce) X(ncclBroadcast) X(ncclReduce) \
  X(ncclAllGather) X(ncclReduceScatter) X(ncclSend) X(ncclRecv) X(ncclGroupStart) X(ncclGroupEnd)

struct Nccl {
  cuda::detail::LazyLibrary lib{"libnccl.so." + std::to_string(NCCL_MAJOR), "NCCL"};
#define IGNIS_NCCL_MEMBER(f) decltype(&::f) f = lib.get<decltype(&::f)>(#f);
  IGNIS_NCCL_FUNCS(IGNIS_NCCL_MEMBER)
#undef IGNIS_NCCL_MEMBER
};

const Nccl& nccl() { return cuda::detail::lazy_api<Nccl>(); }

void check(ncclResult_t r, const char* op, const char* call) {
  if (r == ncclSuccess) return;
  IGNIS_FAIL(op, ": NCCL error in ", call, ": ", nccl().ncclGetErrorString(r));
}

ncclDataType_t nccl_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return ncclUint8;
    case DType::Int32: return ncclInt32;
    case DType::Int64: return ncclInt64;
    case DType::BFloat16: return ncclBfloat16;
    case DType::Float32: return ncclFloat32;
    case DType::Float64: return ncclFloat64;
  }
  return ncclFloat32;
}

// On bool (bytes 0 and 1), SUM is a logical or and PRODUCT a logical and, as with MPI here and
// NCCL in PyTorch.
ncclRedOp_t nccl_op(ReduceOp op, DType dtype) {
  if (dtype == kBool && op == ReduceOp::SUM) return ncclMax;
  if (dtype == kBool && op == ReduceOp::PRODUCT) return ncclMin;
  switch (op) {
    case ReduceOp::SUM: return ncclSum;
    case ReduceOp::AVG: return ncclAvg;
    case ReduceOp::PRODUCT: return ncclProd;
    case ReduceOp::MIN: return ncclMin;
    case ReduceOp::MAX: return ncclMax;
  }
  return ncclSum;
}

// A communicator and whether it was aborted (after an error or a timeout), shared by the group
// and its Works: the abort happens once, and nothing uses the communicator afterwards.
struct CommState {
  ncclComm_t comm = nullptr;
  std::mutex mu;
  bool aborted = false;  // guarded by mu
  bool is_aborted() {
    std::lock_guard<std::mutex> g(mu);
    return aborted;
  }
  void abort() {
    std::lock_guard<std::mutex> g(mu);
    if (aborted || comm == nullptr) return;
    aborted = true;
    (void)nccl().ncclCommAbort(comm);
  }
  // NCCL's asynchronous error, or ncclSuccess (ncclInProgress counts as none).
  ncclResult_t async_error() {
    std::lock_guard<std::mutex> g(mu);
    if (aborted || comm == nullptr) return ncclSuccess;
    ncclResult_t r = ncclSuccess;
    if (nccl().ncclCommGetAsyncError(comm, &r) != ncclSuccess) return ncclSuccess;
    return r == ncclInProgress ? ncclSuccess : r;
  }
};

// A posted collective: done when its event (recorded on the NCCL stream after it) has completed.
class NcclWork final : public Work {
 public:
  NcclWork(std::string op, cudaEvent_t done, int device, std::shared_ptr<CommState> comm,
           std::chrono::milliseconds timeout)
      : Work(std::move(op)), done_(done), device_(device), comm_(std::move(comm)),
        timeout_(timeout), start_(std::chrono::steady_clock::now()) {}
  ~NcclWork() override {
    int prev = 0;
    (void)cudaGetDevice(&prev);
    (void)cudaSetDevice(device_);
    (void)cudaEventDestroy(done_);
    (void)cudaSetDevice(prev);
  }
  bool is_completed() const override {
    if (Work::is_completed()) return true;
    const_cast<NcclWork*>(this)->poll();
    return Work::is_completed();
  }
  bool wait(std::chrono::milliseconds timeout) override {
    const auto begin = std::chrono::steady_clock::now();
    while (!poll()) {
      if (timeout.count() > 0 && std::chrono::steady_clock::now() - begin >= timeout) return false;
      std::this_thread::sleep_for(std::chrono::microseconds(50));
    }
    return Work::wait(timeout);  // finished: rethrows its error, if any
  }

 private:
  // True once finished (successfully or not).
  bool poll() {
    if (Work::is_completed()) return true;
    const cudaError_t e = cudaEventQuery(done_);
    if (e == cudaSuccess) {
      finish();
      return true;
    }
    if (e != cudaErrorNotReady) {
      (void)cudaGetLastError();
      fail(std::string("CUDA error ") + cudaGetErrorName(e));
      return true;
    }
    if (comm_->is_aborted()) {
      fail("the communicator was aborted (an earlier error or timeout)");
      return true;
    }
    if (const ncclResult_t async = comm_->async_error(); async != ncclSuccess) {
      fail(std::string("NCCL error ") + nccl().ncclGetErrorString(async));
      return true;
    }
    if (std::chrono::steady_clock::now() - start_ >= timeout_) {
      fail("timed out after " + std::to_string(timeout_.count()) + " ms");
      return true;
    }
    return false;
  }
  // Ends the work with an error; the communicator is aborted, so the group is unusable.
  void fail(const std::string& why) {
    comm_->abort();
    finish(std::make_exception_ptr(Error(op() + " (nccl): " + why)));
  }

  cudaEvent_t done_;
  int device_;
  std::shared_ptr<CommState> comm_;
  std::chrono::milliseconds timeout_;
  std::chrono::steady_clock::time_point start_;
};

class ProcessGroupNCCL final : public ProcessGroup {
 public:
  ProcessGroupNCCL(ProcessGroupPtr bootstrap, int rank, int size, int device, ncclComm_t comm,
                   ProcessGroupOptions options)
      : ProcessGroup(rank, size, options), bootstrap_(std::move(bootstrap)), device_(device),
        state_(std::make_shared<CommState>()),
        // A pool stream, never destroyed: tensors recorded as used by it may outlive the group.
        stream_(static_cast<cudaStream_t>(cuda::getStreamFromPool(false, device).handle())) {
    state_->comm = comm;
  }
  ~ProcessGroupNCCL() override { shutdown(); }

  std::string backend_name() const override { return "nccl"; }
  std::vector<int> world_ranks() const override {
    std::vector<int> r(static_cast<size_t>(size()));
    for (int i = 0; i < size(); ++i) r[static_cast<size_t>(i)] = i;
    return r;
  }
  const ProcessGroupPtr& bootstrap() const { return bootstrap_; }
  int device() const { return device_; }

  void shutdown() {
    std::lock_guard<std::mutex> g(state_->mu);
    if (state_->comm == nullptr) return;
    if (!state_->aborted) {
      DeviceGuard dg(device_);
      (void)cudaStreamSynchronize(stream_);
      (void)nccl().ncclCommDestroy(state_->comm);
    }
    state_->comm = nullptr;  // (an aborted communicator was freed by the abort)
  }

  WorkPtr broadcast(Tensor& t, int root) override {
    Staged s = stage(t, "broadcast");
    return run("broadcast", {s.buf}, [&](cudaStream_t st) {
      check(nccl().ncclBroadcast(s.buf.data_ptr(), s.buf.data_ptr(), count(s.buf),
                                 nccl_type(t.dtype()), root, state_->comm, st),
            "broadcast", "ncclBroadcast");
    }, [&] { s.copy_back(); });
  }

  WorkPtr all_reduce(Tensor& t, ReduceOp op, AllreduceAlgorithm) override {
    check_reducible(t, op, "all_reduce");
    Staged s = stage(t, "all_reduce");
    return run("all_reduce", {s.buf}, [&](cudaStream_t st) {
      check(nccl().ncclAllReduce(s.buf.data_ptr(), s.buf.data_ptr(), count(s.buf),
                                 nccl_type(t.dtype()), nccl_op(op, t.dtype()), state_->comm, st),
            "all_reduce", "ncclAllReduce");
    }, [&] { s.copy_back(); });
  }

  WorkPtr reduce(Tensor& t, int root, ReduceOp op) override {
    check_reducible(t, op, "reduce");
    Staged s = stage(t, "reduce");
    return run("reduce", {s.buf}, [&](cudaStream_t st) {
      check(nccl().ncclReduce(s.buf.data_ptr(), s.buf.data_ptr(), count(s.buf),
                              nccl_type(t.dtype()), nccl_op(op, t.dtype()), root, state_->comm, st),
            "reduce", "ncclReduce");
    }, [&] { s.copy_back(); });
  }

  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check_list(outputs, input, "all_gather", true);
    const Tensor in = dense(input, "all_gather");
    const int64_t n = input.numel();
    const Tensor flat = make_tensor({n * size()}, input.dtype(), input.device());
    return run("all_gather", {in, flat}, [&](cudaStream_t st) {
      check(nccl().ncclAllGather(in.data_ptr(), flat.data_ptr(), static_cast<size_t>(n),
                                 nccl_type(input.dtype()), state_->comm, st),
            "all_gather", "ncclAllGather");
    }, [&] {
      for (int r = 0; r < size(); ++r) copy_into(outputs[r], slice(flat, r * n, input.sizes()));
    });
  }

  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    if (rank() == root) check_list(outputs, input, "gather", true);
    const Tensor in = dense(input, "gather");
    const int64_t n = input.numel();
    const Tensor flat = rank() == root ? make_tensor({n * size()}, input.dtype(), input.device())
                                       : Tensor();
    std::vector<Tensor> used{in};
    if (flat.defined()) used.push_back(flat);
    return run("gather", used, [&](cudaStream_t st) {
      grouped("gather", [&] {
        if (rank() == root) {
          for (int r = 0; r < size(); ++r) {
            recv_raw(slice(flat, r * n, {n}), r, st, "gather");
          }
        }
        send_raw(in, root, st, "gather");
      });
    }, [&] {
      if (rank() != root) return;
      for (int r = 0; r < size(); ++r) copy_into(outputs[r], slice(flat, r * n, input.sizes()));
    });
  }

  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    if (rank() == root) check_list(inputs, output, "scatter", false);
    Staged s = stage(output, "scatter");
    std::vector<Tensor> ins;
    if (rank() == root) {
      for (const Tensor& t : inputs) ins.push_back(dense(t, "scatter"));
    }
    std::vector<Tensor> used = ins;
    used.push_back(s.buf);
    return run("scatter", used, [&](cudaStream_t st) {
      grouped("scatter", [&] {
        if (rank() == root) {
          for (int r = 0; r < size(); ++r) send_raw(ins[r], r, st, "scatter");
        }
        recv_raw(s.buf, root, st, "scatter");
      });
    }, [&] { s.copy_back(); });
  }

  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp op) override {
    check_list(inputs, output, "reduce_scatter", false);
    check_reducible(output, op, "reduce_scatter");
    Staged s = stage(output, "reduce_scatter");
    std::vector<Tensor> flat_inputs;
    for (const Tensor& t : inputs) flat_inputs.push_back(dense(t, "reduce_scatter").reshape({-1}));
    const Tensor flat = cat(flat_inputs);
    return run("reduce_scatter", {flat, s.buf}, [&](cudaStream_t st) {
      check(nccl().ncclReduceScatter(flat.data_ptr(), s.buf.data_ptr(), count(s.buf),
                                     nccl_type(output.dtype()), nccl_op(op, output.dtype()),
                                     state_->comm, st),
            "reduce_scatter", "ncclReduceScatter");
    }, [&] { s.copy_back(); });
  }

  WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override {
    IGNIS_CHECK(static_cast<int>(outputs.size()) == size() &&
                    static_cast<int>(inputs.size()) == size(),
                "all_to_all: expected ", size(), " inputs and outputs, got ", inputs.size(),
                " and ", outputs.size());
    std::vector<Tensor> ins, outs, used;
    for (size_t j = 0; j < inputs.size(); ++j) {
      IGNIS_CHECK(inputs[j].dtype() == inputs[0].dtype() && outputs[j].dtype() == inputs[0].dtype(),
                  "all_to_all: every input and output must have dtype ", inputs[0].dtype(),
                  ", got ", inputs[j].dtype(), " and ", outputs[j].dtype(), " for rank ", j);
    }
    for (const Tensor& t : inputs) ins.push_back(dense(t, "all_to_all"));
    for (const Tensor& t : outputs) {
      outs.push_back(t.is_contiguous() ? t : make_tensor(t.sizes(), t.dtype(), t.device()));
      check_device(t, "all_to_all");
    }
    used = ins;
    used.insert(used.end(), outs.begin(), outs.end());
    return run("all_to_all", used, [&](cudaStream_t st) {
      grouped("all_to_all", [&] {
        for (int r = 0; r < size(); ++r) {
          send_raw(ins[r], r, st, "all_to_all");
          recv_raw(outs[r], r, st, "all_to_all");
        }
      });
    }, [&] {
      for (int r = 0; r < size(); ++r) {
        if (!outs[r].is_same(outputs[r])) copy_into(outputs[r], outs[r]);
      }
    });
  }

  WorkPtr barrier() override {
    Tensor one = ones({1}, TensorOptions(kInt32).device(Device(kCUDA, device_)));
    WorkPtr w = all_reduce(one, ReduceOp::SUM, AllreduceAlgorithm::Native);
    w->wait();  // a barrier holds the host, as MPI's does
    return w;
  }

  WorkPtr send(const Tensor& t, int dst, int) override {
    const Tensor in = dense(t, "send");
    return run("send", {in}, [&](cudaStream_t st) { send_raw(in, dst, st, "send"); }, [] {});
  }

  WorkPtr recv(Tensor& t, int src, int) override {
    Staged s = stage(t, "recv");
    return run("recv", {s.buf}, [&](cudaStream_t st) { recv_raw(s.buf, src, st, "recv"); },
               [&] { s.copy_back(); });
  }

 private:
  // A tensor as a contiguous buffer for NCCL, copied back into the tensor after the collective.
  struct Staged {
    Tensor target, buf;
    void copy_back() const {
      if (!buf.is_same(target)) copy_into(target, buf);
    }
  };
  Staged stage(const Tensor& t, const char* op) const {
    check_device(t, op);
    return {t, t.is_contiguous() ? t : t.contiguous()};
  }
  Tensor dense(const Tensor& t, const char* op) const {
    check_device(t, op);
    return t.is_contiguous() ? t : t.contiguous();
  }
  void check_device(const Tensor& t, const char* op) const {
    IGNIS_CHECK(t.defined(), op, " (nccl): undefined tensor");
    IGNIS_CHECK(t.device() == Device(kCUDA, device_), op, " (nccl): this process's group works on ",
                Device(kCUDA, device_).str(), ", got a tensor on ", t.device().str());
  }
  static void check_reducible(const Tensor& t, ReduceOp op, const char* name) {
    IGNIS_CHECK(op != ReduceOp::AVG || t.is_floating_point(), name,
                ": ReduceOp.AVG needs a floating dtype, got ", t.dtype());
  }
  void check_list(const std::vector<Tensor>& list, const Tensor& like, const char* op,
                  bool outputs) const {
    IGNIS_CHECK(static_cast<int>(list.size()) == size(), op, ": expected ", size(),
                outputs ? " outputs" : " inputs", ", got ", list.size());
    for (const Tensor& t : list) {
      check_device(t, op);
      IGNIS_CHECK(t.sizes().equals(like.sizes()) && t.dtype() == like.dtype(), op, ": every tensor ",
                  "must have shape ", like.sizes(), " and dtype ", like.dtype(), ", got ",
                  t.sizes(), " ", t.dtype());
    }
  }
  static size_t count(const Tensor& t) { return static_cast<size_t>(t.numel()); }
  // Elements [offset, offset + numel(shape)) of a contiguous 1-d tensor, viewed as `shape`.
  static Tensor slice(const Tensor& flat, int64_t offset, IntArrayRef shape) {
    return make_view(flat, shape.shape(), contiguous_strides(shape), flat.storage_offset() + offset);
  }
  void send_raw(const Tensor& t, int peer, cudaStream_t st, const char* op) {
    check(nccl().ncclSend(t.data_ptr(), count(t), nccl_type(t.dtype()), peer, state_->comm, st), op,
          "ncclSend");
  }
  void recv_raw(const Tensor& t, int peer, cudaStream_t st, const char* op) {
    check(nccl().ncclRecv(t.data_ptr(), count(t), nccl_type(t.dtype()), peer, state_->comm, st), op,
          "ncclRecv");
  }
  template <class F>
  void grouped(const char* op, const F& f) {
    check(nccl().ncclGroupStart(), op, "ncclGroupStart");
    f();
    check(nccl().ncclGroupEnd(), op, "ncclGroupEnd");
  }

  // Queues launch(stream) on the NCCL stream between the current stream's earlier and later
  // work, then after(), on the host, which may queue copies on the current stream.
  template <class Launch, class After>
  WorkPtr run(const char* op, const std::vector<Tensor>& used, const Launch& launch,
              const After& after) {
    IGNIS_CHECK(state_->comm != nullptr && !state_->is_aborted(), op,
                " (nccl): the group is unusable after an earlier error or timeout, or destroyed");
    DeviceGuard g(device_);
    const cuda::Stream current = cuda::getCurrentCUDAStream(device_);
    const auto cur = static_cast<cudaStream_t>(current.handle());
    // Ordered after the current stream's work: an event (released once it has completed).
    cuda::Event ready;
    ready.record(current);
    ready.block(cuda::Stream::wrap(stream_, device_));
    launch(stream_);
    cudaEvent_t done = nullptr;
    IGNIS_CUDA_CHECK(cudaEventCreateWithFlags(&done, cudaEventDisableTiming));
    auto work = std::make_shared<NcclWork>(op, done, device_, state_, options().timeout);
    IGNIS_CUDA_CHECK(cudaEventRecord(done, stream_));
    IGNIS_CUDA_CHECK(cudaStreamWaitEvent(cur, done, 0));
    const cuda::Stream nccl_stream = cuda::Stream::wrap(stream_, device_);
    for (const Tensor& t : used) t.record_stream(nccl_stream);
    after();
    return work;
  }

  ProcessGroupPtr bootstrap_;  // the MPI world (null for a world of one)
  int device_;
  std::shared_ptr<CommState> state_;
  cudaStream_t stream_ = nullptr;
};

// The node-local rank the launcher gives (mpirun, srun), else the world rank.
int local_rank(int rank) {
  for (const char* v : {"OMPI_COMM_WORLD_LOCAL_RANK", "MPI_LOCALRANKID", "SLURM_LOCALID"}) {
    if (const char* s = std::getenv(v)) return std::atoi(s);
  }
  return rank;
}

bool under_launcher() {
  for (const char* v : {"OMPI_COMM_WORLD_SIZE", "PMI_SIZE", "PMIX_RANK", "SLURM_NTASKS"}) {
    if (std::getenv(v) != nullptr) return true;
  }
  return false;
}

}  // namespace

bool nccl_available() { return cuda::is_available(); }

ProcessGroupPtr nccl_init_world(const ProcessGroupOptions& options) {
  IGNIS_CHECK(cuda::is_available(), "init_process_group: the nccl backend needs a GPU: ",
              cuda::unavailable_reason());
  ProcessGroupPtr boot;
  int rank = 0, size = 1;
  if (under_launcher()) {
    boot = mpi_init_world(options);
    rank = boot->rank();
    size = boot->size();
  }
  const int device = local_rank(rank) % cuda::device_count();
  ncclUniqueId id;
  std::memset(&id, 0, sizeof id);
  if (rank == 0) check(nccl().ncclGetUniqueId(&id), "init_process_group", "ncclGetUniqueId");
  if (boot) {  // rank 0's id to every rank, over MPI
    Tensor bytes = zeros({static_cast<int64_t>(sizeof id)}, kUInt8);
    std::memcpy(bytes.data_ptr(), &id, sizeof id);
    boot->broadcast(bytes, 0)->wait();
    std::memcpy(&id, bytes.data_ptr(), sizeof id);
  }
  cuda::set_device(device);
  ncclComm_t comm = nullptr;
  {
    DeviceGuard g(device);
    check(nccl().ncclCommInitRank(&comm, size, id, rank), "init_process_group",
          "ncclCommInitRank");
  }
  return std::make_shared<ProcessGroupNCCL>(boot, rank, size, device, comm, options);
}

void nccl_destroy(const ProcessGroupPtr& group) {
  auto* g = dynamic_cast<ProcessGroupNCCL*>(group.get());
  if (g == nullptr) return;
  g->shutdown();
  if (g->bootstrap()) mpi_destroy(g->bootstrap(), true);
}

}  // namespace ignis::distributed::detail
