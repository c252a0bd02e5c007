// CUDA elementwise loops over a TensorIter: out[i] = f(in0[i], in1[i], ...), with the op's scalar
// functor from ops/functors.h, the same code the CPU loops (cpu/loops.h) and graph mode's
// generated kernels call. Grid-stride loops: a dense iteration space whose operands are aligned
// moves 16 bytes of each operand per thread step (vector_kernel), another dense one indexes the
// operands one element per thread, any other computes each operand's byte offset from the merged
// shape and strides (innermost dim first, as TensorIter keeps them).
#pragma once

#include <cuda_runtime.h>

#include <algorithm>
#include <cstdint>
#include <cuda/std/tuple>
#include <concepts>
#include <tuple>
#include <utility>

#include "core/dispatch.h"
#include "core/tensor_iter.h"
#include "cuda/cuda_check.h"
#include "ignis/cuda.h"

namespace ignis::cuda {

constexpr int kMaxDims = 16;
constexpr int kThreads = 256;

/// Blocks of kThreads for a grid-stride loop over n elements (at most 65536: the loop strides).
inline unsigned blocks_for(int64_t n) {
  return static_cast<unsigned>(std::min<int64_t>((n + kThreads - 1) / kThreads, 65536));
}
using detail::current_stream;
using detail::wait_for_stream;

template <int N>
struct Operands {
  char* data[N];
};
template <int N>
struct Geometry {
  int ndim;
  int64_t shape[kMaxDims];
  int64_t strides[N][kMaxDims];  // bytes
};

/// The iterator's operands, merged shape and byte strides (innermost dim first), for kernels
/// that walk a TensorIter themselves; `op` names the caller when there are too many dims.
template <int N>
Operands<N> operands_of(const TensorIter& it) {
  Operands<N> o;
  for (int k = 0; k < N; ++k) o.data[k] = it.data[k];
  return o;
}
template <int N>
Geometry<N> geometry_of(const TensorIter& it, const char* op) {
  IGNIS_CHECK(it.ndim <= kMaxDims, op, ": more than ", kMaxDims,
              " dims that cannot be merged on CUDA");
  Geometry<N> g{};
  g.ndim = it.ndim;
  for (int d = 0; d < it.ndim; ++d) {
    g.shape[d] = it.shape[d];
    for (int k = 0; k < N; ++k) g.strides[k][d] = it.strides[k][d];
  }
  return g;
}
/// p[k] = operand k's address at element e of the iteration space (innermost dim first).
template <int N>
__device__ __forceinline__ void operand_ptrs(const Geometry<N>& g, const Operands<N>& ops,
                                             int64_t e, char** p) {
#pragma unroll
  for (int k = 0; k < N; ++k) p[k] = ops.data[k];
  for (int d = 0; d < g.ndim; ++d) {
    const int64_t idx = e % g.shape[d];
    e /= g.shape[d];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] += idx * g.strides[k][d];
  }
}

/// The functor's exact path for rare inputs (see cpu/loops.h's has_exact_path).
template <class F, class T>
concept has_exact_path = requires(const F& f, T x) {
  { f.needs_exact(x) } -> std::convertible_to<bool>;
  f.exact(x);
};

template <class T, class... Rest>
__device__ __forceinline__ const T& first_of(const T& a, const Rest&...) {
  return a;
}

/// out = f(in...) for one element's input values, in the functor's accumulation types.
template <class Out, class... In, class F>
__device__ __forceinline__ Out compute(const F& f, const In&... v) {
  using In0 = std::tuple_element_t<0, std::tuple<In...>>;
  if constexpr (sizeof...(In) == 1 && has_exact_path<F, acc_t<In0>>) {
    const acc_t<In0> x = static_cast<acc_t<In0>>(first_of(v...));
    return static_cast<Out>(f.needs_exact(x) ? f.exact(x) : f(x));
  } else {
    return static_cast<Out>(f(static_cast<acc_t<In>>(v)...));
  }
}

template <class Out, class... In, class F, size_t... I>
__device__ __forceinline__ void apply(char* const* p, const F& f, std::index_sequence<I...>) {
  *reinterpret_cast<Out*>(p[0]) = compute<Out, In...>(f, *reinterpret_cast<const In*>(p[I + 1])...);
}

/// The vectorized kernel's elements per step: 16 bytes of the widest operand (4 float32, 8
/// bfloat16, 2 float64), so that each operand moves in one 16-byte access or less.
template <class Out, class... In>
constexpr int vec_width() {
  size_t widest = sizeof(Out);
  ((widest = sizeof(In) > widest ? sizeof(In) : widest), ...);
  return widest >= 16 ? 1 : static_cast<int>(16 / widest);
}

/// V consecutive elements of T, aligned to their size: one vector load or store.
template <class T, int V>
struct alignas(sizeof(T) * V) Vec {
  T v[V];
};

template <class Out, class... In, class F, size_t... I>
__device__ __forceinline__ void apply_vec(char* const* data, int64_t q, const F& f,
                                          std::index_sequence<I...>) {
  constexpr int V = vec_width<Out, In...>();
  const ::cuda::std::tuple<Vec<In, V>...> in{reinterpret_cast<const Vec<In, V>*>(data[I + 1])[q]...};
  Vec<Out, V> out;
#pragma unroll
  for (int j = 0; j < V; ++j) out.v[j] = compute<Out, In...>(f, ::cuda::std::get<I>(in).v[j]...);
  reinterpret_cast<Vec<Out, V>*>(data[0])[q] = out;
}

// (A __global__ template takes its parameter pack last.)
template <class F, class Out, class... In>
__global__ void dense_kernel(int64_t n, Operands<1 + sizeof...(In)> ops, F f) {
  constexpr int N = 1 + sizeof...(In);
  constexpr size_t sizes[N] = {sizeof(Out), sizeof(In)...};
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    char* p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = ops.data[k] + i * static_cast<int64_t>(sizes[k]);
    apply<Out, In...>(p, f, std::index_sequence_for<In...>{});
  }
}

// Dense operands aligned to their vectors: each thread step reads V elements of every input in
// one access and writes V outputs (as PyTorch's vectorized elementwise kernel: a warp's access
// is then 512 bytes, where one element per thread moves 64 bytes of bfloat16, so more bytes are
// in flight per thread); the n % V elements left run one per thread.
template <class F, class Out, class... In>
__global__ void vector_kernel(int64_t n, Operands<1 + sizeof...(In)> ops, F f) {
  constexpr int N = 1 + sizeof...(In);
  constexpr int V = vec_width<Out, In...>();
  constexpr size_t sizes[N] = {sizeof(Out), sizeof(In)...};
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  const int64_t first = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  const int64_t nv = n / V;
  for (int64_t q = first; q < nv; q += step) {
    apply_vec<Out, In...>(ops.data, q, f, std::index_sequence_for<In...>{});
  }
  for (int64_t i = nv * V + first; i < n; i += step) {
    char* p[N];
#pragma unroll
    for (int k = 0; k < N; ++k) p[k] = ops.data[k] + i * static_cast<int64_t>(sizes[k]);
    apply<Out, In...>(p, f, std::index_sequence_for<In...>{});
  }
}

/// Whether every operand's address is a multiple of its vector's size (V elements).
template <class Out, class... In>
bool vector_aligned(const char* const* data) {
  constexpr int N = 1 + sizeof...(In);
  constexpr int V = vec_width<Out, In...>();
  constexpr size_t sizes[N] = {sizeof(Out), sizeof(In)...};
  for (int k = 0; k < N; ++k) {
    if (reinterpret_cast<uintptr_t>(data[k]) % (sizes[k] * V) != 0) return false;
  }
  return true;
}

template <class F, class Out, class... In>
__global__ void strided_kernel(int64_t n, Operands<1 + sizeof...(In)> ops,
                               Geometry<1 + sizeof...(In)> g, F f) {
  constexpr int N = 1 + sizeof...(In);
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    char* p[N];
    operand_ptrs(g, ops, i, p);
    apply<Out, In...>(p, f, std::index_sequence_for<In...>{});
  }
}

/// Launches f over `it` on the current stream of the operands' device.
template <class Out, class... In, class F>
void gpu_kernel(const TensorIter& it, const F& f) {
  constexpr int N = 1 + sizeof...(In);
  if (it.numel == 0) return;
  IGNIS_CHECK(it.ntensors == N, "CUDA elementwise: ", it.ntensors, " operands, kernel takes ", N);
  DeviceGuard guard(it.device.index);
  const cudaStream_t stream = current_stream(it.device);
  const Operands<N> ops = operands_of<N>(it);
  const unsigned blocks = blocks_for(it.numel);
  constexpr int V = vec_width<Out, In...>();
  if (it.is_contiguous({sizeof(Out), sizeof(In)...}) && V > 1 &&
      vector_aligned<Out, In...>(ops.data)) {
    vector_kernel<F, Out, In...>
        <<<blocks_for((it.numel + V - 1) / V), kThreads, 0, stream>>>(it.numel, ops, f);
  } else if (it.is_contiguous({sizeof(Out), sizeof(In)...})) {
    dense_kernel<F, Out, In...><<<blocks, kThreads, 0, stream>>>(it.numel, ops, f);
  } else {
    strided_kernel<F, Out, In...>
        <<<blocks, kThreads, 0, stream>>>(it.numel, ops, geometry_of<N>(it, "CUDA elementwise"), f);
  }
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace ignis::cuda
