// The row reductions of fused_reduction (layer_norm's statistics, softmax's max and sum of
// exponentials), written once: the interpreter (fused_reduction.cpp) compiles this code into the
// library, and the generated kernels (codegen.cpp) embed the same text, so that both sum in the
// same order and give the same results. Sums use 32 independent partial sums (the compiler turns
// them into vector lanes; 16 vectorised poorly: a softmax row took 1.4x as long), the tail
// added to the first, folded as a fixed tree in vector registers (cpu/lane_fold.h) — the order
// of eager's row reductions (cpu/reduce.h).
#pragma once

#include <cstdint>

#include "cpu/lane_fold.h"

#define IGNIS_JIT_ROW_REDUCE_CODE                                                                 \
  template <class T>                                                                              \
  inline T ignis_row_sum(const T* __restrict x, long long n) {                                    \
    T acc[32] = {};                                                                               \
    long long i = 0;                                                                              \
    for (; i + 32 <= n; i += 32)                                                                  \
      for (int j = 0; j < 32; ++j) acc[j] += x[i + j];                                            \
    for (; i < n; ++i) acc[0] += x[i];                                                            \
    return ignis_fold_lanes<32>(acc, [](auto a, auto b) { return a + b; });                       \
  }                                                                                               \
  template <class T>                                                                              \
  inline T ignis_row_sq_dev(const T* __restrict x, long long n, T mean) {                         \
    T acc[32] = {};                                                                               \
    long long i = 0;                                                                              \
    for (; i + 32 <= n; i += 32)                                                                  \
      for (int j = 0; j < 32; ++j) {                                                              \
        const T d = x[i + j] - mean;                                                              \
        acc[j] += d * d;                                                                          \
      }                                                                                           \
    for (; i < n; ++i) {                                                                          \
      const T d = x[i] - mean;                                                                    \
      acc[0] += d * d;                                                                            \
    }                                                                                             \
    return ignis_fold_lanes<32>(acc, [](auto a, auto b) { return a + b; });                       \
  }                                                                                               \
  /* layer_norm's mean and 1 / sqrt(var + eps) (biased variance, two passes, as the composite) */ \
  template <class T>                                                                              \
  inline void ignis_layer_norm_stats(const T* __restrict x, long long n, T eps, T& mean,          \
                                     T& rstd) {                                                   \
    mean = ignis_row_sum(x, n) / static_cast<T>(n);                                               \
    const T var = ignis_row_sq_dev(x, n, mean) / static_cast<T>(n);                               \
    rstd = ignis::fn::Rsqrt{}(var + eps);                                                         \
  }                                                                                               \
  template <class T>                                                                              \
  inline T ignis_row_max(const T* __restrict x, long long n) {                                    \
    T acc[32];                                                                                    \
    for (int j = 0; j < 32; ++j) acc[j] = -std::numeric_limits<T>::infinity();                    \
    long long i = 0;                                                                              \
    for (; i + 32 <= n; i += 32)                                                                  \
      for (int j = 0; j < 32; ++j) acc[j] = x[i + j] > acc[j] ? x[i + j] : acc[j];                \
    for (; i < n; ++i) acc[0] = x[i] > acc[0] ? x[i] : acc[0];                                    \
    return ignis_fold_lanes<32>(acc, [](auto a, auto b) { return b > a ? b : a; });               \
  }                                                                                               \
  /* e[i] = exp(x[i] - m), and their sum */                                                       \
  template <class T>                                                                              \
  inline T ignis_row_exp_sum(const T* __restrict x, T* __restrict e, long long n, T m) {          \
    T acc[32] = {};                                                                               \
    long long i = 0;                                                                              \
    for (; i + 32 <= n; i += 32)                                                                  \
      for (int j = 0; j < 32; ++j) {                                                              \
        const T v = ignis::fn::Exp{}(x[i + j] - m);                                               \
        e[i + j] = v;                                                                             \
        acc[j] += v;                                                                              \
      }                                                                                           \
    for (; i < n; ++i) {                                                                          \
      const T v = ignis::fn::Exp{}(x[i] - m);                                                     \
      e[i] = v;                                                                                   \
      acc[0] += v;                                                                                \
    }                                                                                             \
    return ignis_fold_lanes<32>(acc, [](auto a, auto b) { return a + b; });                       \
  }

// The steps combining the statistics of fused_reduction's sum, mean, amax and amin (the generated
// CPU and CUDA kernels and the interpreter use them alike); max and min propagate NaN, as amax
// and amin do.
#define IGNIS_JIT_COMBINE_CODE          \
  struct IgnisAdd {                     \
    template <class T>                  \
    T operator()(T a, T b) const {      \
      return a + b;                     \
    }                                   \
  };                                    \
  struct IgnisMaxNan {                  \
    template <class T>                  \
    T operator()(T a, T b) const {      \
      return (b > a || b != b) ? b : a; \
    }                                   \
  };                                    \
  struct IgnisMinNan {                  \
    template <class T>                  \
    T operator()(T a, T b) const {      \
      return (b < a || b != b) ? b : a; \
    }                                   \
  };

// A statistic over part of a row on the CPU: element i of the part goes to lane i % 16 (the
// compiler turns the lanes into vector registers), the lanes folded as a fixed tree. The
// generated kernels feed a part tile by tile (tiles of kStatTile, a multiple of 16, so the lanes
// are the same as in one call), the interpreter likewise: both give the same bits.
#define IGNIS_JIT_LANES_CODE                                                                       \
  template <class T, class F>                                                                      \
  inline void ignis_lanes_add(T* __restrict acc, const T* __restrict x, long long n, const F& f) { \
    /* the 16 lanes as one vector (cpu/lane_fold.h): GCC 12 left the loop over them scalar */      \
    typename ignis_lane_vec<T, 16>::type a, v;                                                     \
    __builtin_memcpy(&a, acc, sizeof a);                                                           \
    long long i = 0;                                                                               \
    for (; i + 16 <= n; i += 16) {                                                                 \
      __builtin_memcpy(&v, x + i, sizeof v);                                                       \
      a = f(a, v);                                                                                 \
    }                                                                                              \
    __builtin_memcpy(acc, &a, sizeof a);                                                           \
    for (; i < n; ++i) acc[i & 15] = f(acc[i & 15], x[i]);                                         \
  }                                                                                                \
  template <class T, class F>                                                                      \
  inline T ignis_lanes_total(const T* __restrict acc, const F& f) {                                \
    return ignis_fold_lanes<16>(acc, f);                                                           \
  }

// A functor's result as a value of T: a mask (a comparison's bool) as 1 or 0 by a select, which
// vectorises (GCC 12 does not vectorise a bool converted to a float). The interpreter
// (fused_runtime.h) compiles this code and the generated CPU and CUDA kernels embed its text.
#define IGNIS_JIT_VALUE_CODE                  \
  template <class A, class B>                 \
  struct ignis_same {                         \
    static constexpr bool value = false;      \
  };                                          \
  template <class A>                          \
  struct ignis_same<A, A> {                   \
    static constexpr bool value = true;       \
  };                                          \
  template <class T, class R>                 \
  inline T ignis_value(R r) {                 \
    if constexpr (ignis_same<R, bool>::value) \
      return r ? T(1) : T(0);                 \
    else                                      \
      return r;                               \
  }

#define IGNIS_JIT_STRINGIFY_(...) #__VA_ARGS__
#define IGNIS_JIT_STRINGIFY(...) IGNIS_JIT_STRINGIFY_(__VA_ARGS__)

namespace ignis::jit::detail {
/// The lanes' vectors and fold (cpu/lane_fold.h) the macros above use; the generated kernels embed
/// its text (IGNIS_LANE_FOLD_CODE) before theirs.
using ignis::cpu::ignis_fold_lanes;
using ignis::cpu::ignis_lane_vec;
/// The stat reductions' parts: a row is split into chunks of kStatChunk elements (whatever the
/// number of threads, so that results do not depend on it), each fed to its lanes in tiles of
/// kStatTile.
constexpr int64_t kStatChunk = 16384, kStatTile = 256;
}  // namespace ignis::jit::detail
