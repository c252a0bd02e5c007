#include <numeric>

#include "ignis/data/distributed.h"
#include "ignis/distributed.h"

namespace ignis::data {

DistributedSampler::DistributedSampler(int64_t dataset_size, int64_t num_replicas, int64_t rank,
                                       bool shuffle, uint64_t seed, bool drop_last)
    : n_(dataset_size), shuffle_(shuffle), drop_last_(drop_last), seed_(seed) {
  namespace dist = ignis::distributed;
  if (num_replicas < 0 || rank < 0) {
    IGNIS_CHECK(dist::is_initialized(),
                "DistributedSampler: num_replicas and rank were not "
                "given and no process group is initialized (call init_process_group first)");
  }
  replicas_ = num_replicas < 0 ? dist::get_world_size() : num_replicas;
  rank_ = rank < 0 ? dist::get_rank() : rank;
  IGNIS_CHECK(n_ >= 0, "DistributedSampler: dataset size must be >= 0, got ", n_);
  IGNIS_CHECK(replicas_ >= 1, "DistributedSampler: num_replicas must be >= 1, got ", replicas_);
  IGNIS_CHECK(rank_ < replicas_, "DistributedSampler: invalid rank ", rank_,
              ", rank should be in the interval [0, ", replicas_ - 1, "]");
  num_samples_ = drop_last_ ? n_ / replicas_ : (n_ + replicas_ - 1) / replicas_;
}

std::vector<int64_t> DistributedSampler::indices(int64_t epoch) const {
  const int64_t e = epoch_.value_or(epoch);
  std::vector<int64_t> order;
  if (shuffle_) {
    order = RandomSampler(n_, seed_).indices(e);
  } else {
    order.resize(static_cast<size_t>(n_));
    std::iota(order.begin(), order.end(), 0);
  }
  const int64_t total = num_samples_ * replicas_;
  if (static_cast<int64_t>(order.size()) > total) order.resize(static_cast<size_t>(total));
  for (size_t k = 0; static_cast<int64_t>(order.size()) < total && n_ > 0; ++k) {
    order.push_back(order[k]);  // pad with the epoch's first samples (repeatedly if needed)
  }
  std::vector<int64_t> mine;
  for (int64_t i = rank_; i < total; i += replicas_) mine.push_back(order[static_cast<size_t>(i)]);
  return mine;
}

}  // namespace ignis::data
