// Random number generation: a counter-based generator, so that a stream is reproducible from
// (seed, offset) whatever the number of threads that fill a tensor.
#pragma once

#include <cstdint>
#include <mutex>

#include "ignis/dtype.h"  // IGNIS_HD

namespace ignis {

/// A seeded generator. Each draw of n numbers reserves the counters [offset, offset + n), and
/// number i is a pure function of (seed, i): fills may run on any number of threads.
class Generator {
 public:
  explicit Generator(uint64_t seed = 67280421310721ull) : seed_(seed) {}
  void manual_seed(uint64_t seed) {
    std::lock_guard<std::mutex> g(mu_);
    seed_ = seed;
    offset_ = 0;
  }
  uint64_t seed() const { return seed_; }
  /// The state (seed, offset) for checkpoints; set_state restores it.
  uint64_t offset() const { return offset_; }
  void set_state(uint64_t seed, uint64_t offset) {
    std::lock_guard<std::mutex> g(mu_);
    seed_ = seed;
    offset_ = offset;
  }
  /// Reserves n counters and returns the first.
  uint64_t reserve(uint64_t n) {
    std::lock_guard<std::mutex> g(mu_);
    uint64_t o = offset_;
    offset_ += n;
    return o;
  }
  /// 64 random bits for counter i (a SplitMix64-style mix of seed and counter). Host and device
  /// code (the CUDA fills draw the same numbers as the CPU's).
  IGNIS_HD static uint64_t bits(uint64_t seed, uint64_t i) {
    uint64_t z = seed * 0x9E3779B97F4A7C15ull + (i + 1) * 0xD1B54A32D192ED03ull;
    z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
    z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
    return z ^ (z >> 31);
  }
  /// A double in [0, 1) with 53 random bits.
  IGNIS_HD static double uniform(uint64_t seed, uint64_t i) {
    return static_cast<double>(bits(seed, i) >> 11) * 0x1.0p-53;
  }

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The generator every random op uses unless given another.
Generator& default_generator();

}  // namespace ignis
