// The lanes' fold of the row reductions (cpu/lane_fold.h): in vector registers, bit for bit the
// tree the loops over the array compute (acc[j] = f(acc[j], acc[j + w]), w = N / 2, ..., 1), for
// sums, maxima with NaN and infinities, and the reducers' merges (ops/reducers.h), which take
// vectors too.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <cstring>
#include <limits>
#include <random>
#include <string>
#include <vector>

#include "cpu/lane_fold.h"
#include "ops/reducers.h"

namespace {

using ignis::cpu::ignis_fold_lanes;

template <int N, class T, class F>
T fold_by_loops(std::vector<T> acc, const F& f) {
  for (int w = N / 2; w > 0; w /= 2)
    for (int j = 0; j < w; ++j) acc[static_cast<size_t>(j)] = f(acc[j], acc[j + w]);
  return acc[0];
}

template <class T>
bool same_bits(T a, T b) {
  return std::memcmp(&a, &b, sizeof(T)) == 0;
}

template <int N, class T>
void expect_folds_as_loops(std::mt19937& gen, const std::string& what) {
  std::uniform_real_distribution<T> u(-1e3, 1e3);
  const T inf = std::numeric_limits<T>::infinity(), nan = std::numeric_limits<T>::quiet_NaN();
  auto add = [](auto a, auto b) { return a + b; };
  auto max = [](auto a, auto b) { return b > a ? b : a; };
  const ignis::MinMaxReducer<T, true> amax;
  const ignis::MinMaxReducer<T, false> amin;
  const ignis::SumReducer<T> sum;
  const ignis::ProdReducer<T> prod;
  for (int trial = 0; trial < 200; ++trial) {
    std::vector<T> acc(N);
    for (T& a : acc) a = u(gen);
    // Some trials with non-finite lanes at random places.
    if (trial % 4 == 1) acc[gen() % N] = nan;
    if (trial % 4 == 2) acc[gen() % N] = -inf;
    if (trial % 4 == 3) acc[gen() % N] = inf;
    const std::string at = what + " trial " + std::to_string(trial);
    EXPECT_TRUE(same_bits(ignis_fold_lanes<N>(acc.data(), add), fold_by_loops<N>(acc, add))) << at;
    EXPECT_TRUE(same_bits(ignis_fold_lanes<N>(acc.data(), max), fold_by_loops<N>(acc, max))) << at;
    auto check_min_max = [&](const auto& r, const char* name) {
      auto merge = [&](auto a, auto b) { return r.merge(a, b); };
      auto step = [&](T a, T b) { return r.step(a, b); };
      EXPECT_TRUE(same_bits(ignis_fold_lanes<N>(acc.data(), merge), fold_by_loops<N>(acc, step)))
          << at << " " << name;
    };
    check_min_max(amax, "amax");
    check_min_max(amin, "amin");
    auto sum_merge = [&](auto a, auto b) { return sum.merge(a, b); };
    EXPECT_TRUE(same_bits(ignis_fold_lanes<N>(acc.data(), sum_merge), fold_by_loops<N>(acc, add)))
        << at << " sum";
    for (T& a : acc) a = std::isfinite(a) ? T(1) + a / T(4096) : a;  // products of ~1
    auto prod_merge = [&](auto a, auto b) { return prod.merge(a, b); };
    auto mul = [](T a, T b) { return a * b; };
    EXPECT_TRUE(same_bits(ignis_fold_lanes<N>(acc.data(), prod_merge), fold_by_loops<N>(acc, mul)))
        << at << " prod";
  }
}

TEST(LaneFold, EqualsTheLoopsTreeBitForBit) {
  std::mt19937 gen(3);
  expect_folds_as_loops<32, float>(gen, "32 float");
  expect_folds_as_loops<16, float>(gen, "16 float");
  expect_folds_as_loops<8, float>(gen, "8 float");
  expect_folds_as_loops<4, float>(gen, "4 float");
  expect_folds_as_loops<32, double>(gen, "32 double");
  expect_folds_as_loops<16, double>(gen, "16 double");
}

TEST(LaneFold, IntegerLanesAndTheirReducers) {
  // int64 sums and maxima (the integer reductions' accumulators) fold the same way.
  std::vector<int64_t> acc(32);
  for (int j = 0; j < 32; ++j) acc[static_cast<size_t>(j)] = (j * 7919) % 1000 - 500;
  const ignis::MinMaxReducer<int64_t, true> amax;
  EXPECT_EQ(ignis_fold_lanes<32>(acc.data(), [](auto a, auto b) { return a + b; }),
            fold_by_loops<32>(acc, [](int64_t a, int64_t b) { return a + b; }));
  EXPECT_EQ(ignis_fold_lanes<32>(acc.data(), [&](auto a, auto b) { return amax.merge(a, b); }),
            *std::max_element(acc.begin(), acc.end()));
}

}  // namespace
