// ProcessGroupMPI: each operation stages its tensors into contiguous buffers (in the caller's
// thread), then posts an Op to the engine thread that makes the nonblocking MPI call; results
// are copied back into non-contiguous tensors when it completes.
#include <climits>
#include <cstdlib>

#include "distributed/backend.h"
#include "distributed/mpi_engine.h"
#include "distributed/reduce.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "ops/copy.h"

namespace ignis::distributed {
namespace detail {
bool mpi_available() { return true; }
}  // namespace detail

namespace mpi {
namespace {

// bfloat16 has no MPI type: a 2-byte type with user-defined reduction operators.
MPI_Datatype g_bf16 = MPI_DATATYPE_NULL;
MPI_Op g_bf16_ops[4] = {MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL, MPI_OP_NULL};
MPI_Comm g_admin = MPI_COMM_NULL;  // new_group's splits

template <ReduceOp R>
void bf16_reduce(void* in, void* inout, int* len, MPI_Datatype*) {
  detail::reduce_into(inout, in, *len, DType::BFloat16, R);
}

void create_types() {
  check(MPI_Type_contiguous(2, MPI_BYTE, &g_bf16), "init_process_group");
  check(MPI_Type_commit(&g_bf16), "init_process_group");
  MPI_Op_create(&bf16_reduce<ReduceOp::SUM>, 1, &g_bf16_ops[0]);
  MPI_Op_create(&bf16_reduce<ReduceOp::PRODUCT>, 1, &g_bf16_ops[1]);
  MPI_Op_create(&bf16_reduce<ReduceOp::MIN>, 1, &g_bf16_ops[2]);
  MPI_Op_create(&bf16_reduce<ReduceOp::MAX>, 1, &g_bf16_ops[3]);
}

MPI_Datatype mpi_type(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return MPI_UINT8_T;
    case DType::Int32: return MPI_INT32_T;
    case DType::Int64: return MPI_INT64_T;
    case DType::BFloat16: return g_bf16;
    case DType::Float32: return MPI_FLOAT;
    case DType::Float64: return MPI_DOUBLE;
  }
  return MPI_BYTE;
}

MPI_Op mpi_op(DType t, ReduceOp op) {
  if (t == DType::Bool) {  // 0/1 bytes: or is max, and is min
    return op == ReduceOp::PRODUCT || op == ReduceOp::MIN ? MPI_MIN : MPI_MAX;
  }
  const int i = op == ReduceOp::PRODUCT ? 1 : op == ReduceOp::MIN ? 2 : op == ReduceOp::MAX ? 3 : 0;
  if (t == DType::BFloat16) return g_bf16_ops[i];
  static const MPI_Op ops[4] = {MPI_SUM, MPI_PROD, MPI_MIN, MPI_MAX};
  return ops[i];
}

int count_of(const char* op, size_t n) {
  IGNIS_CHECK(n <= static_cast<size_t>(INT_MAX), op,
              ": messages over 2 GiB are not supported "
              "(got ",
              n, " bytes)");
  return static_cast<int>(n);
}

// A contiguous buffer standing in for a caller's tensor (the tensor itself when contiguous).
struct Staged {
  Tensor user, buf;
  void* data() const { return buf.numel() ? buf.data_ptr() : nullptr; }
  int bytes(const char* op) const { return count_of(op, buf.nbytes()); }
  void write_back() const {
    if (buf.impl() != user.impl()) copy_into(user, buf);
  }
};

// The MPI backend moves host memory: GPU tensors go through the nccl backend.
void check_cpu(const Tensor& t, const char* op) {
  IGNIS_CHECK(t.device().is_cpu(), op, " (mpi): the mpi backend works on CPU tensors, got a tensor ",
              "on ", t.device().str(), " (GPU tensors: init_process_group(\"nccl\"))");
}

Staged stage_in(const Tensor& t, const char* op) {
  check_cpu(t, op);
  NoGradGuard ng;
  Tensor d = t.detach();
  return {d, d.is_contiguous() ? d : d.contiguous()};
}

Staged stage_out(const Tensor& t, const char* op) {
  check_cpu(t, op);
  Tensor d = t.detach();
  return {d, d.is_contiguous() ? d : empty(d.sizes(), d.dtype())};
}

// `n` copies of `like`'s shape, packed contiguously, filled from `parts`.
Tensor pack(const std::vector<Tensor>& parts, const char* op) {
  for (const Tensor& p : parts) check_cpu(p, op);
  NoGradGuard ng;
  int64_t total = 0;
  for (const Tensor& p : parts) total += p.numel();
  Tensor out = empty({total}, parts.empty() ? kFloat32 : parts[0].dtype());
  int64_t at = 0;
  for (const Tensor& p : parts) {
    if (p.numel()) copy_into(out.narrow(0, at, p.numel()).view(p.sizes()), p.detach());
    at += p.numel();
  }
  return out;
}

void unpack(const Tensor& packed, std::vector<Tensor>& parts) {
  int64_t at = 0;
  for (Tensor& p : parts) {
    if (p.numel()) copy_into(p, packed.narrow(0, at, p.numel()).view(p.sizes()));
    at += p.numel();
  }
}

// An op of one nonblocking MPI call.
class RequestOp final : public Op {
 public:
  using Poster = std::function<int(MPI_Request*)>;
  RequestOp(const char* name, std::shared_ptr<GroupState> g, Poster p)
      : Op(name, std::move(g)), poster_(std::move(p)) {}
  void start() override { check(poster_(&req_), name_); }
  bool progress() override {
    int flag = 0;
    check(MPI_Test(&req_, &flag, &status_), name_);
    return flag != 0;
  }
  MPI_Status status_{};

 private:
  Poster poster_;
  MPI_Request req_ = MPI_REQUEST_NULL;
};

class ProcessGroupMPI final : public ProcessGroup {
 public:
  ProcessGroupMPI(std::shared_ptr<GroupState> s, const ProcessGroupOptions& o)
      : ProcessGroup(s->rank, s->size, o), s_(std::move(s)) {}
  std::string backend_name() const override { return "mpi"; }
  std::vector<int> world_ranks() const override { return s_->world_ranks; }
  const std::shared_ptr<GroupState>& state() const { return s_; }
  bool destroyed = false;

  WorkPtr broadcast(Tensor& tensor, int root) override {
    check_root("broadcast", root);
    Staged st = rank_ == root ? stage_in(tensor, "broadcast") : stage_out(tensor, "broadcast");
    auto s = s_;
    auto op = request("broadcast", [st, root, s](MPI_Request* r) {
      return MPI_Ibcast(st.data(), st.bytes("broadcast"), MPI_BYTE, root, s->coll, r);
    });
    if (rank_ != root) op->on_finish_ = [st] { st.write_back(); };
    return submit(std::move(op), kBroadcast, &tensor, root, -1);
  }

  WorkPtr all_reduce(Tensor& tensor, ReduceOp red, AllreduceAlgorithm algo) override {
    detail::check_reduce_op("all_reduce", tensor.dtype(), red);
    Staged st = stage_in(tensor, "all_reduce");
    std::unique_ptr<Op> op;
    if (algo == AllreduceAlgorithm::Ring) {
      op = make_ring_allreduce(s_, st.buf, red);
    } else {
      auto s = s_;
      const MPI_Datatype type = mpi_type(tensor.dtype());
      const MPI_Op mop = mpi_op(tensor.dtype(), red);
      const int n = count_of("all_reduce", static_cast<size_t>(tensor.numel()));
      op = request("all_reduce", [st, s, type, mop, n](MPI_Request* r) {
        return MPI_Iallreduce(MPI_IN_PLACE, st.data(), n, type, mop, s->coll, r);
      });
    }
    const int size = size_;
    // (The ring divides for AVG itself, as it reduces.)
    const bool divide = red == ReduceOp::AVG && algo != AllreduceAlgorithm::Ring;
    op->on_finish_ = [st, divide, size] {
      if (divide) detail::divide_inplace(st.data(), st.buf.numel(), st.buf.dtype(), size);
      st.write_back();
    };
    return submit(std::move(op), kAllReduce, &tensor, -1, static_cast<int>(red));
  }

  WorkPtr reduce(Tensor& tensor, int root, ReduceOp red) override {
    check_root("reduce", root);
    detail::check_reduce_op("reduce", tensor.dtype(), red);
    Staged st = stage_in(tensor, "reduce");
    auto s = s_;
    const MPI_Datatype type = mpi_type(tensor.dtype());
    const MPI_Op mop = mpi_op(tensor.dtype(), red);
    const int n = count_of("reduce", static_cast<size_t>(tensor.numel()));
    const bool is_root = rank_ == root;
    auto op = request("reduce", [st, s, type, mop, n, root, is_root](MPI_Request* r) {
      return MPI_Ireduce(is_root ? MPI_IN_PLACE : st.data(), is_root ? st.data() : nullptr, n, type,
                         mop, root, s->coll, r);
    });
    const int size = size_;
    if (is_root) {
      op->on_finish_ = [st, red, size] {
        if (red == ReduceOp::AVG)
          detail::divide_inplace(st.data(), st.buf.numel(), st.buf.dtype(), size);
        st.write_back();
      };
    }
    return submit(std::move(op), kReduce, &tensor, root, static_cast<int>(red));
  }

  WorkPtr all_gather(std::vector<Tensor>& outputs, const Tensor& input) override {
    check_list("all_gather", "output", outputs, input);
    Staged in = stage_in(input, "all_gather");
    Tensor all = empty({input.numel() * size_}, input.dtype());
    auto s = s_;
    auto op = request("all_gather", [in, all, s](MPI_Request* r) {
      const int nb = in.bytes("all_gather");
      return MPI_Iallgather(in.data(), nb, MPI_BYTE, all.numel() ? all.data_ptr() : nullptr, nb,
                            MPI_BYTE, s->coll, r);
    });
    op->on_finish_ = [all, outs = outputs]() mutable { unpack(all, outs); };
    return submit(std::move(op), kAllGather, &input, -1, -1);
  }

  WorkPtr gather(std::vector<Tensor>& outputs, const Tensor& input, int root) override {
    check_root("gather", root);
    const bool is_root = rank_ == root;
    if (is_root) check_list("gather", "gather_list", outputs, input);
    Staged in = stage_in(input, "gather");
    Tensor all = is_root ? empty({input.numel() * size_}, input.dtype()) : Tensor();
    auto s = s_;
    auto op = request("gather", [in, all, s, root, is_root](MPI_Request* r) {
      const int nb = in.bytes("gather");
      void* dst = is_root && all.numel() ? all.data_ptr() : nullptr;
      return MPI_Igather(in.data(), nb, MPI_BYTE, dst, nb, MPI_BYTE, root, s->coll, r);
    });
    if (is_root) op->on_finish_ = [all, outs = outputs]() mutable { unpack(all, outs); };
    return submit(std::move(op), kGather, &input, root, -1);
  }

  WorkPtr scatter(Tensor& output, const std::vector<Tensor>& inputs, int root) override {
    check_root("scatter", root);
    const bool is_root = rank_ == root;
    if (is_root) check_list("scatter", "scatter_list", inputs, output);
    Staged out = stage_out(output, "scatter");
    Tensor all = is_root ? pack(inputs, "scatter") : Tensor();
    auto s = s_;
    auto op = request("scatter", [out, all, s, root, is_root](MPI_Request* r) {
      const int nb = out.bytes("scatter");
      void* src = is_root && all.numel() ? all.data_ptr() : nullptr;
      return MPI_Iscatter(src, nb, MPI_BYTE, out.data(), nb, MPI_BYTE, root, s->coll, r);
    });
    op->on_finish_ = [out] { out.write_back(); };
    return submit(std::move(op), kScatter, &output, root, -1);
  }

  WorkPtr reduce_scatter(Tensor& output, const std::vector<Tensor>& inputs, ReduceOp red) override {
    check_list("reduce_scatter", "input_list", inputs, output);
    detail::check_reduce_op("reduce_scatter", output.dtype(), red);
    Staged out = stage_out(output, "reduce_scatter");
    Tensor all = pack(inputs, "reduce_scatter");
    auto s = s_;
    const MPI_Datatype type = mpi_type(output.dtype());
    const MPI_Op mop = mpi_op(output.dtype(), red);
    const int n = count_of("reduce_scatter", static_cast<size_t>(output.numel()));
    auto op = request("reduce_scatter", [out, all, s, type, mop, n](MPI_Request* r) {
      return MPI_Ireduce_scatter_block(all.numel() ? all.data_ptr() : nullptr, out.data(), n, type,
                                       mop, s->coll, r);
    });
    const int size = size_;
    op->on_finish_ = [out, red, size] {
      if (red == ReduceOp::AVG)
        detail::divide_inplace(out.data(), out.buf.numel(), out.buf.dtype(), size);
      out.write_back();
    };
    return submit(std::move(op), kReduceScatter, &output, -1, static_cast<int>(red));
  }

  WorkPtr all_to_all(std::vector<Tensor>& outputs, const std::vector<Tensor>& inputs) override {
    IGNIS_CHECK(
        static_cast<int>(inputs.size()) == size_ && static_cast<int>(outputs.size()) == size_,
        "all_to_all: expected ", size_, " input and output tensors (the group size), got ",
        inputs.size(), " and ", outputs.size());
    const DType dt = inputs[0].dtype();
    const std::vector<Tensor>* lists[] = {&inputs, &outputs};
    for (const std::vector<Tensor>* list : lists) {
      for (const Tensor& t : *list) {
        IGNIS_CHECK(t.dtype() == dt, "all_to_all: every tensor must have dtype ", dt, ", got ",
                    t.dtype());
      }
    }
    struct Layout {
      std::vector<int> scount, sdispl, rcount, rdispl;
    };
    auto lay = std::make_shared<Layout>();
    int sat = 0, rat = 0;
    for (int j = 0; j < size_; ++j) {
      lay->scount.push_back(count_of("all_to_all", inputs[j].nbytes()));
      lay->sdispl.push_back(sat);
      sat += lay->scount.back();
      lay->rcount.push_back(count_of("all_to_all", outputs[j].nbytes()));
      lay->rdispl.push_back(rat);
      rat += lay->rcount.back();
    }
    Tensor sall = pack(inputs, "all_to_all");
    int64_t rtotal = 0;
    for (const Tensor& t : outputs) rtotal += t.numel();
    Tensor rall = empty({rtotal}, dt);
    auto s = s_;
    auto op = request("all_to_all", [lay, sall, rall, s](MPI_Request* r) {
      return MPI_Ialltoallv(sall.numel() ? sall.data_ptr() : nullptr, lay->scount.data(),
                            lay->sdispl.data(), MPI_BYTE, rall.numel() ? rall.data_ptr() : nullptr,
                            lay->rcount.data(), lay->rdispl.data(), MPI_BYTE, s->coll, r);
    });
    op->on_finish_ = [rall, outs = outputs]() mutable { unpack(rall, outs); };
    Tensor like = empty({0}, dt);
    return submit(std::move(op), kAllToAll, &like, -1, -1);
  }

  WorkPtr barrier() override {
    auto s = s_;
    auto op = request("barrier", [s](MPI_Request* r) { return MPI_Ibarrier(s->coll, r); });
    return submit(std::move(op), kBarrier, nullptr, -1, -1);
  }

  WorkPtr send(const Tensor& tensor, int dst, int tag) override {
    check_peer("send", dst, tag);
    Staged st = stage_in(tensor, "send");
    auto s = s_;
    auto op = request("send", [st, s, dst, tag](MPI_Request* r) {
      return MPI_Isend(st.data(), st.bytes("send"), MPI_BYTE, dst, tag, s->coll, r);
    });
    return submit_p2p(std::move(op));
  }

  WorkPtr recv(Tensor& tensor, int src, int tag) override {
    check_peer("recv", src, tag);
    Staged st = stage_out(tensor, "recv");
    auto s = s_;
    auto op = request("recv", [st, s, src, tag](MPI_Request* r) {
      return MPI_Irecv(st.data(), st.bytes("recv"), MPI_BYTE, src, tag, s->coll, r);
    });
    RequestOp* raw = op.get();
    op->on_finish_ = [st, raw, src] {
      int got = 0;
      MPI_Get_count(&raw->status_, MPI_BYTE, &got);
      IGNIS_CHECK(static_cast<size_t>(got) == st.buf.nbytes(), "recv: expected ", st.buf.nbytes(),
                  " bytes (", st.buf.dtype(), " ", st.buf.sizes(), ") from rank ", src, " but got ",
                  got);
      st.write_back();
    };
    return submit_p2p(std::move(op));
  }

 private:
  std::unique_ptr<RequestOp> request(const char* name, RequestOp::Poster p) {
    check_member(name);
    return std::make_unique<RequestOp>(name, s_, std::move(p));
  }

  void check_member(const char* name) const {
    IGNIS_CHECK(!destroyed, name, ": the process group was destroyed");
    IGNIS_CHECK(rank_ >= 0, name, ": this process is not a member of the group");
  }

  void check_root(const char* name, int root) const {
    check_member(name);
    IGNIS_CHECK(root >= 0 && root < size_, name, ": root ", root,
                " is out of range for a group of ", size_);
  }

  void check_peer(const char* name, int peer, int tag) const {
    check_member(name);
    IGNIS_CHECK(peer >= 0 && peer < size_ && peer != rank_, name, ": peer ", peer,
                " is not another rank of the group (this is rank ", rank_, " of ", size_, ")");
    IGNIS_CHECK(tag >= 0 && tag <= 32767, name, ": tag ", tag, " is out of range [0, 32767]");
  }

  void check_list(const char* name, const char* what, const std::vector<Tensor>& list,
                  const Tensor& like) const {
    check_member(name);
    IGNIS_CHECK(static_cast<int>(list.size()) == size_, name, ": ", what, " has ", list.size(),
                " tensors but the group has ", size_, " ranks");
    for (size_t j = 0; j < list.size(); ++j) {
      IGNIS_CHECK(list[j].dtype() == like.dtype() && list[j].sizes().equals(like.sizes()), name,
                  ": ", what, "[", j, "] is ", list[j].dtype(), " ", list[j].sizes(),
                  " but the tensor is ", like.dtype(), " ", like.sizes());
    }
  }

  WorkPtr submit(std::unique_ptr<Op> op, OpCode code, const Tensor* t, int root, int red) {
    op->timeout_ = options_.timeout;
    op->check_ = options_.check_metadata && size_ > 1;
    Meta& m = op->meta_;
    m.op = code;
    m.root = root;
    m.reduce_op = red;
    if (t != nullptr) {
      m.dtype = static_cast<int64_t>(t->dtype());
      m.ndim = t->dim();
      m.numel = t->numel();
      for (int64_t d = 0; d < m.ndim && d < Meta::kDims; ++d) m.sizes[d] = t->sizes()[d];
    }
    return Engine::get().post(std::move(op));
  }

  WorkPtr submit_p2p(std::unique_ptr<Op> op) {
    op->timeout_ = options_.timeout;
    op->ordered_ = false;
    return Engine::get().post(std::move(op));
  }

  std::shared_ptr<GroupState> s_;
};

void dup_comms(MPI_Comm base, GroupState& s) {
  check(MPI_Comm_dup(base, &s.coll), "new_group");
  check(MPI_Comm_dup(base, &s.meta), "new_group");
  check(MPI_Comm_dup(base, &s.ring), "new_group");
  for (MPI_Comm c : {s.coll, s.meta, s.ring}) MPI_Comm_set_errhandler(c, MPI_ERRORS_RETURN);
  MPI_Comm_rank(s.coll, &s.rank);
  MPI_Comm_size(s.coll, &s.size);
}

void free_comms(GroupState& s) {
  for (MPI_Comm* c : {&s.coll, &s.meta, &s.ring}) {
    if (*c != MPI_COMM_NULL) MPI_Comm_free(c);
  }
}

}  // namespace
}  // namespace mpi

namespace detail {

ProcessGroupPtr mpi_init_world(const ProcessGroupOptions& options) {
  mpi::Engine& engine = mpi::Engine::get();
  engine.start();
  auto s = std::make_shared<mpi::GroupState>();
  engine.run([&] {
    mpi::dup_comms(MPI_COMM_WORLD, *s);
    mpi::check(MPI_Comm_dup(MPI_COMM_WORLD, &mpi::g_admin), "init_process_group");
    MPI_Comm_set_errhandler(mpi::g_admin, MPI_ERRORS_RETURN);
    mpi::create_types();
  });
  for (int r = 0; r < s->size; ++r) s->world_ranks.push_back(r);
  static bool registered = false;
  if (!registered) {
    registered = true;
    // A program that never calls destroy_process_group still finalizes MPI at exit.
    std::atexit([] { mpi::Engine::get().stop(); });
  }
  return std::make_shared<mpi::ProcessGroupMPI>(s, options);
}

ProcessGroupPtr mpi_new_group(const std::vector<int>& world_ranks,
                              const ProcessGroupOptions& options) {
  auto s = std::make_shared<mpi::GroupState>();
  s->world_ranks = world_ranks;
  mpi::Engine::get().run([&] {
    int me = 0;
    MPI_Comm_rank(MPI_COMM_WORLD, &me);
    int index = -1;
    for (size_t i = 0; i < world_ranks.size(); ++i) {
      if (world_ranks[i] == me) index = static_cast<int>(i);
    }
    MPI_Comm c = MPI_COMM_NULL;
    mpi::check(MPI_Comm_split(mpi::g_admin, index >= 0 ? 0 : MPI_UNDEFINED, index, &c),
               "new_group");
    if (c != MPI_COMM_NULL) {
      mpi::dup_comms(c, *s);
      MPI_Comm_free(&c);
    } else {
      s->size = static_cast<int>(world_ranks.size());
    }
  });
  return std::make_shared<mpi::ProcessGroupMPI>(s, options);
}

void mpi_destroy(const ProcessGroupPtr& group, bool is_world) {
  auto* pg = dynamic_cast<mpi::ProcessGroupMPI*>(group.get());
  if (pg == nullptr || pg->destroyed) return;
  pg->destroyed = true;
  mpi::Engine& engine = mpi::Engine::get();
  if (!engine.running()) return;
  auto s = pg->state();
  engine.run([&] {
    if (s->broken) return;
    mpi::free_comms(*s);
    if (is_world) {
      MPI_Comm_free(&mpi::g_admin);
      for (MPI_Op& o : mpi::g_bf16_ops) MPI_Op_free(&o);
      MPI_Type_free(&mpi::g_bf16);
    }
  });
  if (is_world) engine.stop();
}

}  // namespace detail
}  // namespace ignis::distributed
