// data::DistributedSampler: per-rank shards that cover the dataset once per epoch.
#include <gtest/gtest.h>

#include <algorithm>

#include "ignis/data/distributed.h"
#include "ignis/ignis.h"

using namespace ignis;
using data::DistributedSampler;

namespace {
std::vector<int64_t> all_ranks(int64_t n, int64_t replicas, bool shuffle, bool drop_last,
                               int64_t epoch) {
  std::vector<int64_t> v;
  for (int64_t r = 0; r < replicas; ++r) {
    DistributedSampler s(n, replicas, r, shuffle, /*seed=*/3, drop_last);
    auto idx = s.indices(epoch);
    EXPECT_EQ(static_cast<int64_t>(idx.size()), s.size());
    v.insert(v.end(), idx.begin(), idx.end());
  }
  return v;
}
}  // namespace

TEST(DistributedSampler, CoversTheDatasetExactlyOncePerEpochAcrossRanks) {
  for (bool shuffle : {false, true}) {
    for (int64_t epoch : {0, 1}) {
      auto v = all_ranks(60, 4, shuffle, false, epoch);
      std::sort(v.begin(), v.end());
      std::vector<int64_t> want(60);
      for (int64_t i = 0; i < 60; ++i) want[i] = i;
      EXPECT_EQ(v, want);
    }
  }
}

TEST(DistributedSampler, InterleavesRanksWithoutShuffle) {
  DistributedSampler s(10, 2, 1, /*shuffle=*/false);
  EXPECT_EQ(s.indices(0), (std::vector<int64_t>{1, 3, 5, 7, 9}));
}

TEST(DistributedSampler, PadsOrDropsToEqualShards) {
  // 10 samples on 3 ranks: 4 each, the first two samples repeated.
  auto v = all_ranks(10, 3, false, false, 0);
  EXPECT_EQ(v.size(), 12u);
  std::sort(v.begin(), v.end());
  EXPECT_EQ(v, (std::vector<int64_t>{0, 0, 1, 1, 2, 3, 4, 5, 6, 7, 8, 9}));
  // drop_last: 3 each, sample 9 left out.
  auto d = all_ranks(10, 3, false, true, 0);
  std::sort(d.begin(), d.end());
  EXPECT_EQ(d, (std::vector<int64_t>{0, 1, 2, 3, 4, 5, 6, 7, 8}));
}

TEST(DistributedSampler, ShuffleIsAFunctionOfSeedAndEpoch) {
  DistributedSampler a(100, 2, 0), b(100, 2, 0);
  EXPECT_EQ(a.indices(0), b.indices(0));
  EXPECT_NE(a.indices(0), a.indices(1));
  b.set_epoch(1);
  EXPECT_EQ(b.indices(0), a.indices(1));  // set_epoch overrides the loader's epoch
}

TEST(DistributedSampler, DataLoaderBatchesOnlyThisRanksShard) {
  auto ds = std::make_shared<data::TensorDataset>(arange(20, kFloat32).reshape({20, 1}),
                                                  arange(20, kInt64));
  auto sampler = std::make_shared<DistributedSampler>(20, 2, 1, /*shuffle=*/false);
  data::DataLoader loader(ds, data::DataLoaderOptions().batch(4), sampler);
  EXPECT_EQ(loader.size(), 3);
  std::vector<int64_t> seen;
  for (auto& batch : loader) {
    for (int64_t i = 0; i < batch.target.numel(); ++i)
      seen.push_back(batch.target[i].item<int64_t>());
  }
  EXPECT_EQ(seen, (std::vector<int64_t>{1, 3, 5, 7, 9, 11, 13, 15, 17, 19}));
}

TEST(DistributedSampler, Errors) {
  try {
    DistributedSampler s(10, 2, 2);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "DistributedSampler: invalid rank 2, rank should be in the interval [0, 1]");
  }
  try {
    DistributedSampler s(10);
    ADD_FAILURE();
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "DistributedSampler: num_replicas and rank were not given and no "
                 "process group is initialized (call init_process_group first)");
  }
}
