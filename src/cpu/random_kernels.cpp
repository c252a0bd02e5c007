// CPU kernels of the random fills. Element i draws the 64 bits of counter offset + i (see
// ignis/generator.h), so a fill gives the same values on any number of threads.
#include <cmath>
#include <limits>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "cpu/vec_math.h"
#include "ignis/generator.h"
#include "ops/random.h"

namespace ignis::cpu {
namespace {

constexpr int64_t kRandomGrain = 16384;

template <class T, class F>
void fill(const Tensor& out, const F& f) {
  T* p = static_cast<T*>(out.data_ptr());
  parallel_for(0, out.numel(), kRandomGrain, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) p[i] = f(static_cast<uint64_t>(i));
  });
}

/// A second, independent 64-bit draw for counter i (the normal's angle in float64).
constexpr uint64_t kSecondStream = 0x5851F42D4C957F2Dull;

// The largest bfloat16 strictly below x (x finite).
BFloat16 bf16_below(float x) {
  BFloat16 b(x);
  if (static_cast<float>(b) < x) return b;
  if (static_cast<float>(b) == 0.f) {
    b.bits = 0x8001;  // the negative subnormal nearest to zero
  } else if (b.bits & 0x8000) {
    ++b.bits;
  } else {
    --b.bits;
  }
  return b;
}

void uniform_kernel(const Tensor& out, const RandomArgs& r) {
  const uint64_t seed = r.seed, off = r.offset;
  // Rounding may give exactly `to`: clamp to the value below it (the range is half-open).
  const bool clamp = r.b > r.a;
  switch (out.dtype()) {
    case DType::Float64: {
      const double from = r.a, span = r.b - r.a, to = r.b;
      const double top = std::nextafter(to, from);
      fill<double>(out, [&](uint64_t i) {
        const double v = from + span * Generator::uniform(seed, off + i);
        return clamp && v >= to ? top : v;
      });
      return;
    }
    case DType::Float32: {
      const float from = static_cast<float>(r.a), to = static_cast<float>(r.b);
      const float span = to - from, top = std::nextafter(to, from);
      fill<float>(out, [&](uint64_t i) {
        const float u = static_cast<float>(Generator::bits(seed, off + i) >> 40) * 0x1.0p-24f;
        const float v = from + span * u;
        return clamp && v >= to ? top : v;
      });
      return;
    }
    case DType::BFloat16: {
      const float from = static_cast<float>(r.a), to = static_cast<float>(r.b);
      const float span = to - from;
      const BFloat16 top = bf16_below(to);
      fill<BFloat16>(out, [&](uint64_t i) {
        const float u = static_cast<float>(Generator::bits(seed, off + i) >> 40) * 0x1.0p-24f;
        const BFloat16 v(from + span * u);
        return clamp && static_cast<float>(v) >= to ? top : v;
      });
      return;
    }
    default: IGNIS_FAIL("uniform_: expected a floating point tensor, but got ", out.dtype());
  }
}

// Box-Muller, one normal per counter: the cosine branch with radius sqrt(-2 log(1 - u1)).
void normal_kernel(const Tensor& out, const RandomArgs& r) {
  const uint64_t seed = r.seed, off = r.offset;
  if (out.dtype() == kFloat64) {
    const double mean = r.a, sd = r.b;
    constexpr double kTwoPi = 6.283185307179586;
    fill<double>(out, [&](uint64_t i) {
      const double u1 = Generator::uniform(seed, off + i);
      const double u2 = Generator::uniform(seed ^ kSecondStream, off + i);
      // 1 - u1 is exact and in (0, 1].
      return mean + sd * (std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(kTwoPi * u2));
    });
    return;
  }
  // float32 and bfloat16: two 24-bit uniforms from the one 64-bit draw, vectorisable math.
  const float mean = static_cast<float>(r.a), sd = static_cast<float>(r.b);
  auto draw = [seed, off, mean, sd](uint64_t i) {
    const uint64_t z = Generator::bits(seed, off + i);
    const float u1 = static_cast<float>(z >> 40) * 0x1.0p-24f;
    const float u2 = static_cast<float>(z & 0xFFFFFFu) * 0x1.0p-24f;
    const float radius = std::sqrt(-2.0f * vmath::log(1.0f - u1));
    return mean + sd * (radius * vmath::cos(6.28318530717958648f * u2));
  };
  switch (out.dtype()) {
    case DType::Float32: fill<float>(out, draw); return;
    case DType::BFloat16:
      fill<BFloat16>(out, [&](uint64_t i) { return BFloat16(draw(i)); });
      return;
    default: IGNIS_FAIL("normal_: expected a floating point tensor, but got ", out.dtype());
  }
}

// low + floor(bits * range / 2^64): unbiased to within range / 2^64.
void randint_kernel(const Tensor& out, const RandomArgs& r) {
  const uint64_t seed = r.seed, off = r.offset, range = r.range;
  const int64_t low = r.low;
  dispatch_dtype(out.dtype(), "randint", [&]<class T>() {
    fill<T>(out, [&](uint64_t i) {
      const uint64_t z = Generator::bits(seed, off + i);
      const uint64_t k = static_cast<uint64_t>((static_cast<unsigned __int128>(z) * range) >> 64);
      const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + k);
      if constexpr (std::is_same_v<T, BFloat16>) {
        return BFloat16(static_cast<float>(v));
      } else {
        return static_cast<T>(v);
      }
    });
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(uniform_stub, CPU, &uniform_kernel);
IGNIS_REGISTER_KERNEL(normal_stub, CPU, &normal_kernel);
IGNIS_REGISTER_KERNEL(randint_stub, CPU, &randint_kernel);

}  // namespace ignis::cpu
