// The counter-based random draws: number i of the stream seeded `seed` is a pure function of
// (seed, i), so any number of threads, a GPU, or a generated kernel draws the same numbers. Shared
// by the generator (ignis/generator.h), the random fills' kernels (ops/random_functors.h) and
// graph mode's generated kernels (this header is part of their prelude, see CMakeLists.txt), so
// that a dropout fused into a generated kernel draws eager dropout's mask.
#pragma once

#include <cstdint>

#include "ignis/dtype.h"  // IGNIS_HD

namespace ignis {

/// 64 random bits for counter i (a SplitMix64-style mix of seed and counter).
IGNIS_HD inline uint64_t counter_bits(uint64_t seed, uint64_t i) {
  uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xD1B54A32D192ED03ull;
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}

/// A double in [0, 1) with 53 random bits.
IGNIS_HD inline double counter_uniform(uint64_t seed, uint64_t i) {
  return static_cast<double>(counter_bits(seed, i) >> 11) * 0x1.0p-53;
}

/// A float in [0, 1) from the top 24 bits of a draw.
IGNIS_HD inline float unit_float(uint64_t z) { return static_cast<float>(z >> 40) * 0x1.0p-24f; }

/// rand()'s value for counter i in T: float from 24 bits, double from 53.
template <class T>
IGNIS_HD inline T counter_rand(uint64_t seed, uint64_t i) {
  if constexpr (sizeof(T) == sizeof(double)) {
    return counter_uniform(seed, i);
  } else {
    return unit_float(counter_bits(seed, i));
  }
}

/// Training dropout's factor for counter i, as eager dropout computes it (rand >= p, as T, times
/// 1 / (1 - p)): `scale` where rand's value is at least p, else 0; the kept value is v * factor.
template <class T>
IGNIS_HD inline T dropout_factor(uint64_t seed, uint64_t i, T p, T scale) {
  return counter_rand<T>(seed, i) >= p ? scale : T(0);
}

}  // namespace ignis
