// Ring all-reduce over point-to-point messages (the lecture notes' figure). The buffer is cut
// into p chunks. Reduce-scatter: at step s each rank sends chunk (r - s) to its right neighbour
// and adds the chunk (r - s - 1) it receives from its left one into its own; after p - 1 steps
// rank r holds the full reduction of chunk (r + 1). All-gather: p - 1 more steps pass the
// reduced chunks around the ring. Each rank sends 2 (p - 1) / p of the buffer in all, which is
// why busbw = algbw * 2 (p - 1) / p.
#include <vector>

#include "distributed/mpi_engine.h"
#include "distributed/reduce.h"
#include "ignis/ops.h"

namespace ignis::distributed::mpi {
namespace {

class RingAllreduce final : public Op {
 public:
  RingAllreduce(std::shared_ptr<GroupState> g, Tensor buf, ReduceOp op)
      : Op("all_reduce", std::move(g)), buf_(std::move(buf)), op_(op) {
    const int64_t n = buf_.numel();
    const int p = group_->size;
    for (int i = 0; i <= p; ++i) bounds_.push_back(n * i / p);
    int64_t largest = 0;
    for (int i = 0; i < p; ++i) largest = std::max(largest, bounds_[i + 1] - bounds_[i]);
    if (p > 1) tmp_ = empty({largest}, buf_.dtype());
  }

  void start() override {
    tag_ = static_cast<int>(group_->ring_seq++ % 32000);
    if (group_->size > 1) post();
  }

  bool progress() override {
    const int p = group_->size;
    if (p == 1) return true;
    int flag = 0;
    check(MPI_Testall(2, reqs_, &flag, MPI_STATUSES_IGNORE), name_);
    if (!flag) return false;
    if (step_ < p - 1) {  // reduce-scatter: fold the received chunk into ours
      const int c = chunk(group_->rank - step_ - 1);
      const int64_t n = bounds_[c + 1] - bounds_[c];
      detail::reduce_into(at(c), tmp_.data_ptr(), n, buf_.dtype(), op_);
      // AVG: the rank that completes a chunk's sum divides it before passing it on, so that
      // each rank divides 1/p of the buffer instead of all of it afterwards.
      if (op_ == ReduceOp::AVG && step_ == p - 2) detail::divide_inplace(at(c), n, buf_.dtype(), p);
    }
    if (++step_ == 2 * (p - 1)) return true;
    post();
    return false;
  }

 private:
  int chunk(int i) const {
    const int p = group_->size;
    return ((i % p) + p) % p;
  }
  char* at(int c) const {
    return static_cast<char*>(buf_.data_ptr()) +
           bounds_[c] * static_cast<int64_t>(buf_.element_size());
  }
  int bytes(int c) const {
    return static_cast<int>((bounds_[c + 1] - bounds_[c]) *
                            static_cast<int64_t>(buf_.element_size()));
  }

  void post() {
    const int p = group_->size, r = group_->rank;
    const int right = (r + 1) % p, left = (r - 1 + p) % p;
    int send_c, recv_c;
    void* recv_to;
    if (step_ < p - 1) {
      send_c = chunk(r - step_);
      recv_c = chunk(r - step_ - 1);
      recv_to = tmp_.data_ptr();
    } else {
      const int s = step_ - (p - 1);
      send_c = chunk(r + 1 - s);
      recv_c = chunk(r - s);
      recv_to = at(recv_c);
    }
    check(MPI_Irecv(recv_to, bytes(recv_c), MPI_BYTE, left, tag_, group_->ring, &reqs_[0]), name_);
    check(MPI_Isend(at(send_c), bytes(send_c), MPI_BYTE, right, tag_, group_->ring, &reqs_[1]),
          name_);
  }

  Tensor buf_, tmp_;
  ReduceOp op_;
  std::vector<int64_t> bounds_;
  int step_ = 0;
  int tag_ = 0;
  MPI_Request reqs_[2] = {MPI_REQUEST_NULL, MPI_REQUEST_NULL};
};

}  // namespace

std::unique_ptr<Op> make_ring_allreduce(std::shared_ptr<GroupState> group, Tensor buf,
                                        ReduceOp op) {
  return std::make_unique<RingAllreduce>(std::move(group), std::move(buf), op);
}

}  // namespace ignis::distributed::mpi
