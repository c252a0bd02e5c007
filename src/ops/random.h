// Random fill kernel stubs (defined in ops/random.cpp, kernels per device). Element i of a fill
// is a pure function of (seed, offset + i), so fills may split over any number of threads.
#pragma once

#include "core/dispatch.h"
#include "ignis/ops.h"

namespace ignis {

/// What a fill draws: the generator's seed and first counter, and the distribution's parameters.
struct RandomArgs {
  uint64_t seed = 0;
  uint64_t offset = 0;
  double a = 0, b = 1;   // uniform: [a, b); normal: mean a, std b
  int64_t low = 0;       // randint: low + [0, range)
  uint64_t range = 1;
};

/// Fills a contiguous floating (uniform, normal) or any-dtype (randint) tensor.
using RandomFn = void (*)(const Tensor& out, const RandomArgs& args);
IGNIS_DECLARE_STUB(uniform_stub, RandomFn);
IGNIS_DECLARE_STUB(normal_stub, RandomFn);
IGNIS_DECLARE_STUB(randint_stub, RandomFn);

}  // namespace ignis
