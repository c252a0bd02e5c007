// Folding a row reduction's independent lanes: the eager kernels (cpu/reduce.h, softmax, norms)
// and graph mode's generated kernels (jit/row_reduce.h embeds this text) accumulate a row in N
// lanes (N a power of two, 4 to 32), then fold them as a fixed tree, acc[j] = f(acc[j],
// acc[j + w]) for w = N / 2, ..., 1, and take acc[0]. Written as loops over the array, GCC 12
// stores the lanes to the stack and folds them through memory with scalar loads: on a Zen 5
// that made the fold of 32 float lanes cost about six times a 128-element row's max and sum
// (measured with a harness, 2026-12-02). Here the same tree runs on the lanes as vectors (GCC's
// vector extension; the halves taken by __builtin_shufflevector), in registers: the same
// operations in the same order, so the same bits. f takes two values or two vectors of them
// (a + b, or a ternary select: both work on GCC's vectors).
#pragma once

#define IGNIS_LANE_FOLD_CODE                                                                       \
  template <class T, int N>                                                                        \
  struct ignis_lane_vec {                                                                          \
    typedef T type __attribute__((vector_size(N * sizeof(T))));                                    \
  };                                                                                               \
  /* v's N lanes (2 to 16): the lower half f-ed with the upper, down to one value */               \
  template <int N, class V, class F>                                                               \
  inline auto ignis_fold_vec(V v, const F& f) {                                                    \
    if constexpr (N == 16)                                                                         \
      return ignis_fold_vec<8>(f(__builtin_shufflevector(v, v, 0, 1, 2, 3, 4, 5, 6, 7),            \
                                 __builtin_shufflevector(v, v, 8, 9, 10, 11, 12, 13, 14, 15)),     \
                               f);                                                                 \
    else if constexpr (N == 8)                                                                     \
      return ignis_fold_vec<4>(                                                                    \
          f(__builtin_shufflevector(v, v, 0, 1, 2, 3), __builtin_shufflevector(v, v, 4, 5, 6, 7)), \
          f);                                                                                      \
    else if constexpr (N == 4)                                                                     \
      return ignis_fold_vec<2>(                                                                    \
          f(__builtin_shufflevector(v, v, 0, 1), __builtin_shufflevector(v, v, 2, 3)), f);         \
    else                                                                                           \
      return f(v[0], v[1]);                                                                        \
  }                                                                                                \
  /* acc[0] after acc[j] = f(acc[j], acc[j + w]) for w = N / 2, ..., 1 (acc is left as it is) */   \
  template <int N, class T, class F>                                                               \
  inline T ignis_fold_lanes(const T* acc, const F& f) {                                            \
    static_assert(N == 4 || N == 8 || N == 16 || N == 32, "lanes: 4, 8, 16 or 32");                \
    typename ignis_lane_vec<T, N / 2>::type lo, hi;                                                \
    __builtin_memcpy(&lo, acc, sizeof lo);                                                         \
    __builtin_memcpy(&hi, acc + N / 2, sizeof hi);                                                 \
    return ignis_fold_vec<N / 2>(f(lo, hi), f);                                                    \
  }

namespace ignis::cpu {
IGNIS_LANE_FOLD_CODE
}  // namespace ignis::cpu
