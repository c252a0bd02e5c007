// Ring all-reduce over point-to-point messages (the lecture notes' figure). The buffer is cut
// into p chunks. Reduce-scatter: at step s each rank sends chunk (r - s) to its right neighbour
// and adds the chunk (r - s - 1) it receives from its left one into its own; after p - 1 steps
// rank r holds the full reduction of chunk (r + 1). All-gather: p - 1 more steps pass the
// reduced chunks around the ring. Each rank sends 2 (p - 1) / p of the buffer in all, which is
// why busbw = algbw * 2 (p - 1) / p.
//
// Each step's chunk travels as segments of at most kSegmentBytes, all posted at once (MPI keeps
// their order), and in the reduce-scatter each received segment is folded in as soon as it has
// arrived, while later ones are still on their way: the fold reads data that was just written
// (still in cache) instead of a whole chunk later, and overlaps the transfer.
#include <algorithm>
#include <vector>

#include "distributed/mpi_engine.h"
#include "distributed/reduce.h"
#include "ignis/ops.h"

namespace ignis::distributed::mpi {
namespace {

constexpr int64_t kSegmentBytes = 256 * 1024;

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
    seg_ = std::max<int64_t>(1, kSegmentBytes / static_cast<int64_t>(buf_.element_size()));
  }

  void start() override {
    tag_ = static_cast<int>(group_->ring_seq++ % 32000);
    if (group_->size > 1) post();
  }

  bool progress() override {
    const int p = group_->size;
    if (p == 1) return true;
    const bool reducing = step_ < p - 1;
    // Fold the segments that arrived, in order (reduce-scatter); in the all-gather they land in
    // place.
    while (next_recv_ < recvs_.size()) {
      int flag = 0;
      check(MPI_Test(&recvs_[next_recv_], &flag, MPI_STATUS_IGNORE), name_);
      if (!flag) break;
      if (reducing) {
        const int64_t begin = static_cast<int64_t>(next_recv_) * seg_;
        const int64_t n = std::min(seg_, recv_len_ - begin);
        char* acc = at(recv_c_) + begin * static_cast<int64_t>(buf_.element_size());
        const char* in =
            static_cast<const char*>(tmp_.data_ptr()) + begin * static_cast<int64_t>(buf_.element_size());
        detail::reduce_into(acc, in, n, buf_.dtype(), op_);
        // AVG: the rank that completes a chunk's sum divides it before passing it on, so that
        // each rank divides 1/p of the buffer instead of all of it afterwards.
        if (op_ == ReduceOp::AVG && step_ == p - 2) detail::divide_inplace(acc, n, buf_.dtype(), p);
      }
      ++next_recv_;
    }
    if (next_recv_ < recvs_.size()) return false;
    int flag = 0;
    check(MPI_Testall(static_cast<int>(sends_.size()), sends_.data(), &flag, MPI_STATUSES_IGNORE),
          name_);
    if (!flag) return false;
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

  // Posts step_'s receives and sends, one per segment.
  void post() {
    const int p = group_->size, r = group_->rank;
    const int right = (r + 1) % p, left = (r - 1 + p) % p;
    int send_c;
    char* recv_to;
    if (step_ < p - 1) {
      send_c = chunk(r - step_);
      recv_c_ = chunk(r - step_ - 1);
      recv_to = static_cast<char*>(tmp_.data_ptr());
    } else {
      const int s = step_ - (p - 1);
      send_c = chunk(r + 1 - s);
      recv_c_ = chunk(r - s);
      recv_to = at(recv_c_);
    }
    recv_len_ = bounds_[recv_c_ + 1] - bounds_[recv_c_];
    const int64_t send_len = bounds_[send_c + 1] - bounds_[send_c];
    const int64_t es = static_cast<int64_t>(buf_.element_size());
    recvs_.assign(static_cast<size_t>(std::max<int64_t>(1, (recv_len_ + seg_ - 1) / seg_)),
                  MPI_REQUEST_NULL);
    sends_.assign(static_cast<size_t>(std::max<int64_t>(1, (send_len + seg_ - 1) / seg_)),
                  MPI_REQUEST_NULL);
    next_recv_ = 0;
    for (size_t k = 0; k < recvs_.size(); ++k) {
      const int64_t begin = static_cast<int64_t>(k) * seg_;
      const int64_t n = std::max<int64_t>(0, std::min(seg_, recv_len_ - begin));
      check(MPI_Irecv(recv_to + begin * es, static_cast<int>(n * es), MPI_BYTE, left, tag_,
                      group_->ring, &recvs_[k]),
            name_);
    }
    char* send_from = at(send_c);
    for (size_t k = 0; k < sends_.size(); ++k) {
      const int64_t begin = static_cast<int64_t>(k) * seg_;
      const int64_t n = std::max<int64_t>(0, std::min(seg_, send_len - begin));
      check(MPI_Isend(send_from + begin * es, static_cast<int>(n * es), MPI_BYTE, right, tag_,
                      group_->ring, &sends_[k]),
            name_);
    }
  }

  Tensor buf_, tmp_;
  ReduceOp op_;
  std::vector<int64_t> bounds_;
  int64_t seg_ = 1;  // elements per segment
  int step_ = 0;
  int tag_ = 0;
  int recv_c_ = 0;
  int64_t recv_len_ = 0;
  size_t next_recv_ = 0;
  std::vector<MPI_Request> recvs_, sends_;
};

}  // namespace

std::unique_ptr<Op> make_ring_allreduce(std::shared_ptr<GroupState> group, Tensor buf,
                                        ReduceOp op) {
  return std::make_unique<RingAllreduce>(std::move(group), std::move(buf), op);
}

}  // namespace ignis::distributed::mpi
