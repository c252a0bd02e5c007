// data::DistributedSampler (torch.utils.data.distributed.DistributedSampler): each of
// num_replicas processes visits its own 1/num_replicas of the dataset per epoch.
#pragma once

#include <optional>

#include "ignis/data.h"

namespace ignis::data {

/// The epoch's order (a permutation of [0, n) shared by every rank when shuffling: a pure
/// function of (seed, epoch)) is padded by repeating its start to a multiple of num_replicas
/// (or cut down to one with drop_last), and rank r takes positions r, r + num_replicas, ...
/// Every sample is then visited exactly once per epoch across the ranks (when num_replicas
/// divides n), and every rank gets the same number of samples, so the ranks run the same number
/// of steps. Give it to a DataLoader (with shuffle off: the sampler shuffles); the loader's
/// epoch counter reseeds it, or set_epoch fixes the epoch.
class DistributedSampler : public Sampler {
 public:
  /// num_replicas / rank: -1 for the default process group's world size / rank.
  explicit DistributedSampler(int64_t dataset_size, int64_t num_replicas = -1, int64_t rank = -1,
                              bool shuffle = true, uint64_t seed = 0, bool drop_last = false);
  std::vector<int64_t> indices(int64_t epoch) const override;
  /// Samples this rank visits per epoch.
  int64_t size() const override { return num_samples_; }
  /// Fixes the epoch that seeds the shuffle (otherwise: the DataLoader's epoch).
  void set_epoch(int64_t epoch) { epoch_ = epoch; }
  int64_t num_replicas() const { return replicas_; }
  int64_t rank() const { return rank_; }

 private:
  int64_t n_, replicas_, rank_;
  bool shuffle_, drop_last_;
  uint64_t seed_;
  int64_t num_samples_;
  std::optional<int64_t> epoch_;
};

}  // namespace ignis::data
