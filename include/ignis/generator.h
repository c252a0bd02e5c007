// Random number generation: a counter-based generator, so that a stream is reproducible from
// (seed, offset) whatever the number of threads that fill a tensor.
#pragma once

#include <cstdint>
#include <mutex>

#include "ignis/counter_rng.h"
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
  /// 64 random bits for counter i (ignis/counter_rng.h). Host and device code (the CUDA fills
  /// draw the same numbers as the CPU's).
  IGNIS_HD static uint64_t bits(uint64_t seed, uint64_t i) { return counter_bits(seed, i); }
  /// A double in [0, 1) with 53 random bits.
  IGNIS_HD static double uniform(uint64_t seed, uint64_t i) { return counter_uniform(seed, i); }

 private:
  std::mutex mu_;
  uint64_t seed_;
  uint64_t offset_ = 0;
};

/// The generator every random op uses unless given another.
Generator& default_generator();

}  // namespace ignis
