// The per-element draws of the random fills, shared by the CPU and CUDA kernels: element i of a
// fill is f(i), a pure function of (seed, offset + i) (ignis/generator.h), so both devices draw
// the same numbers for the same seed, whatever the number of threads.
#pragma once

#include <cmath>
#include <cstdint>
#include <type_traits>

#include "cpu/vec_math.h"
#include "ignis/dtype.h"
#include "ignis/generator.h"
#include "ops/random.h"

namespace ignis::fn {

/// A second, independent 64-bit draw for counter i (the normal's angle in float64).
constexpr uint64_t kSecondStream = 0x5851F42D4C957F2Dull;

using ignis::unit_float;  // a float in [0, 1) from a draw's top 24 bits (ignis/counter_rng.h)

/// uniform [from, to) in float64; rounding up to `to` gives `top`, the value below it.
struct UniformF64 {
  uint64_t seed, off;
  double from, span, to, top;
  bool clamp;
  IGNIS_HD double operator()(uint64_t i) const {
    const double v = from + span * Generator::uniform(seed, off + i);
    return clamp && v >= to ? top : v;
  }
};

/// uniform [from, to) computed in float and stored as T (float or bfloat16); `top` is the
/// largest T below `to`.
template <class T>
struct UniformF32 {
  uint64_t seed, off;
  float from, span, to;
  T top;
  bool clamp;
  IGNIS_HD T operator()(uint64_t i) const {
    const T v(from + span * unit_float(Generator::bits(seed, off + i)));
    return clamp && static_cast<float>(v) >= to ? top : v;
  }
};

/// Box-Muller in float64, one normal per counter: the cosine branch with radius
/// sqrt(-2 log(1 - u1)) (1 - u1 is exact and in (0, 1]).
struct NormalF64 {
  uint64_t seed, off;
  double mean, sd;
  IGNIS_HD double operator()(uint64_t i) const {
    const double u1 = Generator::uniform(seed, off + i);
    const double u2 = Generator::uniform(seed ^ kSecondStream, off + i);
    return mean + sd * (std::sqrt(-2.0 * std::log(1.0 - u1)) * std::cos(6.283185307179586 * u2));
  }
};

/// float32 and bfloat16: two 24-bit uniforms from one 64-bit draw, vectorisable math.
template <class T>
struct NormalF32 {
  uint64_t seed, off;
  float mean, sd;
  IGNIS_HD T operator()(uint64_t i) const {
    const uint64_t z = Generator::bits(seed, off + i);
    const float u1 = unit_float(z);
    const float u2 = static_cast<float>(z & 0xFFFFFFu) * 0x1.0p-24f;
    const float radius = std::sqrt(-2.0f * vmath::log(1.0f - u1));
    return T(mean + sd * (radius * vmath::cos(6.28318530717958648f * u2)));
  }
};

/// low + floor(bits * range / 2^64): unbiased to within range / 2^64.
template <class T>
struct RandInt {
  uint64_t seed, off, range;
  int64_t low;
  IGNIS_HD T operator()(uint64_t i) const {
    const uint64_t z = Generator::bits(seed, off + i);
#if defined(__CUDA_ARCH__)
    const uint64_t k = __umul64hi(z, range);
#else
    const uint64_t k = static_cast<uint64_t>((static_cast<unsigned __int128>(z) * range) >> 64);
#endif
    const int64_t v = static_cast<int64_t>(static_cast<uint64_t>(low) + k);
    if constexpr (std::is_same_v<T, BFloat16>) {
      return BFloat16(static_cast<float>(v));
    } else {
      return static_cast<T>(v);
    }
  }
};

/// The largest bfloat16 strictly below x (x finite).
inline BFloat16 bf16_below(float x) {
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

// The fills, given a device's loop: `fill.template operator()<T>(f)` writes f(i) to element i of
// the (contiguous) output for every i.

template <class Fill>
void uniform_fill(DType dtype, const RandomArgs& r, Fill&& fill) {
  // Rounding may give exactly `to`: clamp to the value below it (the range is half-open).
  const bool clamp = r.b > r.a;
  switch (dtype) {
    case DType::Float64:
      return fill.template operator()<double>(
          UniformF64{r.seed, r.offset, r.a, r.b - r.a, r.b, std::nextafter(r.b, r.a), clamp});
    case DType::Float32: {
      const float from = static_cast<float>(r.a), to = static_cast<float>(r.b);
      return fill.template operator()<float>(UniformF32<float>{
          r.seed, r.offset, from, to - from, to, std::nextafter(to, from), clamp});
    }
    case DType::BFloat16: {
      const float from = static_cast<float>(r.a), to = static_cast<float>(r.b);
      return fill.template operator()<BFloat16>(
          UniformF32<BFloat16>{r.seed, r.offset, from, to - from, to, bf16_below(to), clamp});
    }
    default: IGNIS_FAIL("uniform_: expected a floating point tensor, but got ", dtype);
  }
}

template <class Fill>
void normal_fill(DType dtype, const RandomArgs& r, Fill&& fill) {
  const float mean = static_cast<float>(r.a), sd = static_cast<float>(r.b);
  switch (dtype) {
    case DType::Float64:
      return fill.template operator()<double>(NormalF64{r.seed, r.offset, r.a, r.b});
    case DType::Float32:
      return fill.template operator()<float>(NormalF32<float>{r.seed, r.offset, mean, sd});
    case DType::BFloat16:
      return fill.template operator()<BFloat16>(NormalF32<BFloat16>{r.seed, r.offset, mean, sd});
    default: IGNIS_FAIL("normal_: expected a floating point tensor, but got ", dtype);
  }
}

template <class Fill>
void randint_fill(DType dtype, const RandomArgs& r, Fill&& fill) {
  dispatch_dtype(dtype, "randint", [&]<class T>() {
    fill.template operator()<T>(RandInt<T>{r.seed, r.offset, r.range, r.low});
  });
}

}  // namespace ignis::fn
