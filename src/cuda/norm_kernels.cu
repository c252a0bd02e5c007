// CUDA kernels of batch norm (ops/norm.h): x is a contiguous [N, C, M] block (NCHW as
// [N, C, H W], channels-last as [N H W, C, 1]), per-channel vectors are contiguous [C] of the
// statistics dtype (float32 for bfloat16 x). The per-channel sums accumulate in float64 in a
// fixed order (deterministic, and as accurate as the CPU's float64 chunk sums), in two passes:
//   1. partial sums over a grid of groups, each block writing one pair per channel:
//      - channels-last (M == 1): blocks of 32 x 8 threads; a thread owns V consecutive channels
//        (V = 16 bytes of x: 8 bfloat16, 4 float32, 2 float64, when C is a multiple of V and the
//        tensors are 16-byte aligned; else 1) and reads them in one access per row, so that a
//        warp reads 512 contiguous bytes of a row; the rows are split among the groups;
//      - NCHW (M > 1): a block per (channel, group) reading the group's share of the channel's
//        N planes of M contiguous values, threads along the plane;
//   2. a warp per channel adds its groups' pairs (lane l the groups l, l + 32, ... in order, then
//      a fixed shuffle tree) and finishes: the mean, the variance and the affine's scale and
//      shift, or the backward's gradients and coefficients.
// The grids depend only on the sizes (and on whether the tensors are 16-byte aligned, as fresh
// ones are), so results are reproducible. The elementwise passes move V
// elements per thread step (16 bytes) where the layout allows, with 32-bit index arithmetic
// where the sizes allow (64-bit division is many instructions on a GPU and would bound them).
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <type_traits>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/norm.h"

namespace ignis::cuda {
namespace {

constexpr int kColX = 32, kColY = 8;  // channels-last blocks: channel vectors x rows
constexpr int kPlaneThreads = 256;    // NCHW blocks: threads along a plane
constexpr int64_t kTargetBlocks = 1024;
constexpr int kWarp = 32;
constexpr int kFinishWarps = 8;  // pass 2: channels (one per warp) per block

bool aligned16(const void* p) { return reinterpret_cast<uintptr_t>(p) % 16 == 0; }

// Calls f(std::integral_constant<int, V>) with V = vec_width<T>() (16 bytes of T, loops.cuh)
// when `vectorize`, else 1.
template <class T, class F>
void with_width(bool vectorize, const F& f) {
  if (vectorize && vec_width<T>() > 1) {
    f(std::integral_constant<int, vec_width<T>()>{});
  } else {
    f(std::integral_constant<int, 1>{});
  }
}

// The partial-sum grid of [N, C, M]: `groups` shares of the rows (channels-last) or planes.
struct SumGrid {
  int64_t N, C, M;
  unsigned x, groups;  // blocks along the channels, and groups
  SumGrid(int64_t n, int64_t c, int64_t m, int vec) : N(n), C(c), M(m) {
    const int64_t per_block = int64_t{kColX} * vec;
    x = static_cast<unsigned>(M == 1 ? (C + per_block - 1) / per_block : C);
    const int64_t share = M == 1 ? (N + kColY - 1) / kColY : N;
    groups = static_cast<unsigned>(std::clamp<int64_t>(
        std::min<int64_t>(share, kTargetBlocks / std::max<int64_t>(x, 1)), 1, kTargetBlocks));
  }
};

// Pass 1, channels-last: thread (tx, ty) of block (bx, by) owns channels c0 .. c0 + V - 1, c0 =
// (bx 32 + tx) V, and rows by 8 + ty stepping by groups * 8; then the block's 8 rows are added in
// order. f.context(c) is read once per channel; f.add<V>(e0, ctx, acc) adds V elements' pairs.
template <int V, class F>
__global__ void __launch_bounds__(kColX* kColY)
    column_partials(F f, double2* part, int64_t R, int64_t C) {
  __shared__ double2 s[kColY][kColX * V];
  const int64_t c0 = (static_cast<int64_t>(blockIdx.x) * kColX + threadIdx.x) * V;
  double2 acc[V];
  double ctx[V];
#pragma unroll
  for (int i = 0; i < V; ++i) {
    acc[i] = make_double2(0, 0);
    ctx[i] = 0;
  }
  if (c0 < C && R > 0) {
#pragma unroll
    for (int i = 0; i < V; ++i) ctx[i] = f.context(c0 + i);
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kColY + threadIdx.y; r < R;
         r += static_cast<int64_t>(gridDim.y) * kColY) {
      f.template add<V>(r * C + c0, ctx, acc);
    }
  }
#pragma unroll
  for (int i = 0; i < V; ++i) s[threadIdx.y][threadIdx.x * V + i] = acc[i];
  __syncthreads();
  if (threadIdx.y == 0 && c0 < C) {
#pragma unroll
    for (int i = 0; i < V; ++i) {
      double2 t = s[0][threadIdx.x * V + i];
      for (int k = 1; k < kColY; ++k) {
        t.x += s[k][threadIdx.x * V + i].x;
        t.y += s[k][threadIdx.x * V + i].y;
      }
      part[static_cast<int64_t>(blockIdx.y) * C + c0 + i] = t;
    }
  }
}

// Pass 1, NCHW: channel c = blockIdx.x, planes n = blockIdx.y, stepping by groups; elements
// e = (n C + c) M + m, threads along m; then a fixed tree over the block's threads.
template <class F>
__global__ void plane_partials(F f, double2* part, int64_t N, int64_t C, int64_t M) {
  __shared__ double2 s[kPlaneThreads];
  const int64_t c = blockIdx.x;
  double2 acc[1] = {make_double2(0, 0)};
  if (N > 0) {
    const double ctx[1] = {f.context(c)};
    for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
      const int64_t base = (n * C + c) * M;
      for (int64_t m = threadIdx.x; m < M; m += kPlaneThreads)
        f.template add<1>(base + m, ctx, acc);
    }
  }
  s[threadIdx.x] = acc[0];
  __syncthreads();
  for (int w = kPlaneThreads / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) {
      s[threadIdx.x].x += s[threadIdx.x + w].x;
      s[threadIdx.x].y += s[threadIdx.x + w].y;
    }
    __syncthreads();
  }
  if (threadIdx.x == 0) part[static_cast<int64_t>(blockIdx.y) * C + c] = s[0];
}

// Pass 2's channel: one per warp.
__device__ int64_t finish_channel() {
  return static_cast<int64_t>(blockIdx.x) * kFinishWarps + threadIdx.x / kWarp;
}
unsigned finish_blocks(int64_t C) {
  return static_cast<unsigned>((C + kFinishWarps - 1) / kFinishWarps);
}

// Pass 2's sum of channel c's pairs over the groups, by the calling warp (all its lanes): lane l
// adds groups l, l + 32, ... in order, then a fixed tree; lane 0 holds the total.
__device__ double2 channel_total(const double2* part, unsigned groups, int64_t c, int64_t C) {
  double2 t = make_double2(0, 0);
  for (unsigned k = threadIdx.x % kWarp; k < groups; k += kWarp) {
    const double2 v = part[static_cast<int64_t>(k) * C + c];
    t.x += v.x;
    t.y += v.y;
  }
#pragma unroll
  for (int o = kWarp / 2; o > 0; o /= 2) {
    t.x += __shfl_down_sync(0xffffffffu, t.x, o);
    t.y += __shfl_down_sync(0xffffffffu, t.y, o);
  }
  return t;
}

// Launches pass 1 over g's layout, V channels per thread (channels-last), and returns the
// partials (groups x C pairs) for pass 2.
template <int V, class F>
Tensor channel_sums(const F& f, const SumGrid& g, Device device) {
  Tensor part = make_tensor({static_cast<int64_t>(g.groups) * g.C * 2}, kFloat64, device);
  auto* p = reinterpret_cast<double2*>(part.data_ptr<double>());
  if (g.M == 1) {
    column_partials<V>
        <<<dim3(g.x, g.groups), dim3(kColX, kColY), 0, current_stream(device)>>>(f, p, g.N, g.C);
  } else {
    plane_partials<<<dim3(g.x, g.groups), kPlaneThreads, 0, current_stream(device)>>>(f, p, g.N,
                                                                                      g.C, g.M);
  }
  IGNIS_CUDA_CHECK(cudaGetLastError());
  return part;
}

// The statistics' pair: d = x - x[0, c, 0] and d^2 (shifted by a value of the channel, so that
// the variance from them does not cancel when |mean| >> std).
template <class T, class A>
struct StatsPair {
  const T* x;
  int64_t M;
  __device__ double context(int64_t c) const {
    return static_cast<double>(static_cast<A>(x[c * M]));
  }
  template <int V>
  __device__ void add(int64_t e0, const double (&ctx)[V], double2 (&acc)[V]) const {
    const Vec<T, V> v = *reinterpret_cast<const Vec<T, V>*>(x + e0);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const double d = static_cast<double>(static_cast<A>(v.v[i])) - ctx[i];
      acc[i].x += d;
      acc[i].y += d * d;
    }
  }
};

// Pass 2 of the statistics: channel c's mean and biased variance over its `count` values,
// invstd = 1 / sqrt(var + eps), and the affine's scale = w invstd and shift = b - mean scale
// (in A, as the CPU).
template <class T, class A>
__global__ void stats_finish(const double2* part, const T* x, A* mean, A* var, A* invstd, A* scale,
                             A* shift, const A* w, const A* b, A eps, unsigned groups,
                             int64_t count, int64_t C, int64_t M) {
  const int64_t c = finish_channel();
  if (c >= C) return;  // (the whole warp)
  const double2 t = channel_total(part, groups, c, C);
  if (threadIdx.x % kWarp != 0) return;
  const double n = static_cast<double>(count);
  const double s = static_cast<double>(static_cast<A>(x[c * M]));
  const A m = static_cast<A>(s + t.x / n);
  const A v = static_cast<A>(fmax(t.y - t.x * t.x / n, 0.0) / n);
  mean[c] = m;
  var[c] = v;
  const A inv = A(1) / sqrt(v + eps);
  invstd[c] = inv;
  const A sc = w ? w[c] * inv : inv;
  scale[c] = sc;
  shift[c] = (b ? b[c] : A(0)) - m * sc;
}

// Calls launch(index) with a uint32_t zero when a grid-stride loop over `total` items cannot
// overflow 32 bits, else with an int64_t zero.
template <class F>
void launch_indexed(int64_t total, const F& launch) {
  const int64_t reach = total + static_cast<int64_t>(blocks_for(total)) * kThreads;
  if (reach <= static_cast<int64_t>(UINT32_MAX)) {
    launch(uint32_t{0});
  } else {
    launch(int64_t{0});
  }
}

// Whether the elementwise passes over x (and the other dense tensors at `ptrs`) can move V
// elements at once: the V elements of a step share a row (channels-last: C a multiple of V) or
// a plane (NCHW: M a multiple of V), and every tensor is 16-byte aligned.
template <class T>
bool vectorizable(int64_t C, int64_t M, std::initializer_list<const void*> ptrs) {
  constexpr int64_t V = vec_width<T>();
  if (V == 1 || (M == 1 ? C % V : M % V) != 0) return false;
  return std::all_of(ptrs.begin(), ptrs.end(), [](const void* p) { return aligned16(p); });
}

// y = x * scale[c] + shift[c], V elements per thread step (I: the index type).
template <class T, class A, int V, class I>
__global__ void affine_cuda(T* y, const T* x, const A* scale, const A* shift, I steps, I C, I M) {
  const I stride = static_cast<I>(blockDim.x) * gridDim.x;
  for (I q = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; q < steps; q += stride) {
    const I e0 = q * static_cast<I>(V);
    const I c = (M == 1 ? e0 : e0 / M) % C;
    const Vec<T, V> in = reinterpret_cast<const Vec<T, V>*>(x)[q];
    Vec<T, V> out;
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const I ci = M == 1 ? c + static_cast<I>(i) : c;
      out.v[i] = static_cast<T>(static_cast<A>(in.v[i]) * scale[ci] + shift[ci]);
    }
    reinterpret_cast<Vec<T, V>*>(y)[q] = out;
  }
}

template <class T, class A>
void launch_affine(const Tensor& y, const Tensor& x, const A* scale, const A* shift, int64_t C,
                   int64_t M) {
  with_width<T>(vectorizable<T>(C, M, {x.data_ptr(), y.data_ptr()}), [&](auto width) {
    constexpr int V = decltype(width)::value;
    const int64_t steps = x.numel() / V;
    // The index type must hold the element index q * V, not only q.
    launch_indexed(x.numel(), [&]<class I>(I) {
      affine_cuda<T, A, V, I><<<blocks_for(steps), kThreads, 0, current_stream(x.device())>>>(
          y.data_ptr<T>(), x.data_ptr<T>(), scale, shift, static_cast<I>(steps), static_cast<I>(C),
          static_cast<I>(M));
    });
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// The channels-last partial sums take V channels per thread where x (and g) allow.
template <class T>
bool columns_vectorizable(int64_t C, int64_t M, std::initializer_list<const void*> ptrs) {
  return M == 1 && vectorizable<T>(C, M, ptrs);
}

void train_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& invstd,
                  const Tensor& x, const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t N = x.size(0), C = x.size(1), M = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    if (x.numel() == 0) return;  // (training needs two values per channel: ops/norm.cpp)
    const Tensor ss = make_tensor({2 * C}, mean.dtype(), x.device());  // scale, then shift
    A* scale = ss.data_ptr<A>();
    with_width<T>(columns_vectorizable<T>(C, M, {x.data_ptr()}), [&](auto width) {
      constexpr int V = decltype(width)::value;
      const SumGrid g(N, C, M, V);
      const Tensor part = channel_sums<V>(StatsPair<T, A>{x.data_ptr<T>(), M}, g, x.device());
      stats_finish<T, A><<<finish_blocks(C), kFinishWarps * kWarp, 0, current_stream(x.device())>>>(
          reinterpret_cast<const double2*>(part.data_ptr<double>()), x.data_ptr<T>(),
          mean.data_ptr<A>(), var.data_ptr<A>(), invstd.data_ptr<A>(), scale, scale + C,
          weight.defined() ? weight.data_ptr<A>() : nullptr,
          bias.defined() ? bias.data_ptr<A>() : nullptr, static_cast<A>(eps), g.groups, N * M, C,
          M);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    });
    launch_affine<T, A>(y, x, scale, scale + C, C, M);
  });
}

void affine_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    launch_affine<T, A>(y, x, scale.data_ptr<A>(), shift.data_ptr<A>(), x.size(1), x.size(2));
  });
}

// The backward's pair: g and g * (x - mean[c]).
template <class T, class A>
struct GradPair {
  const T* g;
  const T* x;
  const A* mean;
  __device__ double context(int64_t c) const { return static_cast<double>(mean[c]); }
  template <int V>
  __device__ void add(int64_t e0, const double (&ctx)[V], double2 (&acc)[V]) const {
    const Vec<T, V> gv = *reinterpret_cast<const Vec<T, V>*>(g + e0);
    const Vec<T, V> xv = *reinterpret_cast<const Vec<T, V>*>(x + e0);
#pragma unroll
    for (int i = 0; i < V; ++i) {
      const double gi = static_cast<double>(static_cast<A>(gv.v[i]));
      acc[i].x += gi;
      acc[i].y += gi * (static_cast<double>(static_cast<A>(xv.v[i])) - ctx[i]);
    }
  }
};

// Pass 2 of the backward: from channel c's G = sum(g) and S = sum(g * (x - mean)) over its
// `count` values, grad_bias = G, grad_weight = S * invstd, and the coefficients of
// grad_input = k1 * g + k2 * x + k0 (see cpu/norm_kernels), stored in A.
template <class A>
__global__ void grad_finish(const double2* part, unsigned groups, const A* mean, const A* invstd,
                            const A* w, A* gw, A* gb, A* coef, int64_t count, int64_t C,
                            bool batch_stats) {
  const int64_t c = finish_channel();
  if (c >= C) return;  // (the whole warp)
  const double2 t = channel_total(part, groups, c, C);
  if (threadIdx.x % kWarp != 0) return;
  const double sg = t.x, sgx = t.y;
  const double inv = static_cast<double>(invstd[c]), mu = static_cast<double>(mean[c]);
  const double wv = w ? static_cast<double>(w[c]) : 1.0;
  if (gb) gb[c] = static_cast<A>(sg);
  if (gw) gw[c] = static_cast<A>(sgx * inv);
  const double k1 = wv * inv;
  double k2 = 0, k0 = 0;
  if (batch_stats && count > 0) {
    k2 = -wv * inv * inv * inv * sgx / static_cast<double>(count);
    k0 = -k1 * sg / static_cast<double>(count) - k2 * mu;
  }
  coef[3 * c] = static_cast<A>(k1);
  coef[3 * c + 1] = static_cast<A>(k2);
  coef[3 * c + 2] = static_cast<A>(k0);
}

// grad_input = k1 g + k2 x + k0 per channel, V elements per thread step; with running
// statistics (kBatchStats false) k2 = k0 = 0 and x is not read, so an infinite x gives a finite
// gradient, as on the CPU.
template <class T, class A, int V, class I, bool kBatchStats>
__global__ void grad_input_cuda(T* gx, const T* g, const T* x, const A* coef, I steps, I C, I M) {
  const I stride = static_cast<I>(blockDim.x) * gridDim.x;
  for (I q = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; q < steps; q += stride) {
    const I e0 = q * static_cast<I>(V);
    const I c = (M == 1 ? e0 : e0 / M) % C;
    const Vec<T, V> gv = reinterpret_cast<const Vec<T, V>*>(g)[q];
    Vec<T, V> out;
    if constexpr (kBatchStats) {
      const Vec<T, V> xv = reinterpret_cast<const Vec<T, V>*>(x)[q];
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const A* k = coef + 3 * (M == 1 ? c + static_cast<I>(i) : c);
        out.v[i] = static_cast<T>(k[0] * static_cast<A>(gv.v[i]) + k[1] * static_cast<A>(xv.v[i]) +
                                  k[2]);
      }
    } else {
#pragma unroll
      for (int i = 0; i < V; ++i) {
        const A* k = coef + 3 * (M == 1 ? c + static_cast<I>(i) : c);
        out.v[i] = static_cast<T>(k[0] * static_cast<A>(gv.v[i]));
      }
    }
    reinterpret_cast<Vec<T, V>*>(gx)[q] = out;
  }
}

void backward_kernel(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& g,
                     const Tensor& x, const Tensor& mean, const Tensor& invstd,
                     const Tensor& weight, bool batch_stats) {
  const int64_t N = x.size(0), C = x.size(1), M = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    using A = acc_t<T>;
    const Tensor coef = make_tensor({3 * C}, mean.dtype(), x.device());
    // (No values: pass 1 writes zeros, so the sums are 0, as on the CPU.)
    with_width<T>(columns_vectorizable<T>(C, M, {g.data_ptr(), x.data_ptr()}), [&](auto width) {
      constexpr int V = decltype(width)::value;
      const SumGrid grid(N, C, M, V);
      const Tensor part = channel_sums<V>(
          GradPair<T, A>{g.data_ptr<T>(), x.data_ptr<T>(), mean.data_ptr<A>()}, grid, x.device());
      grad_finish<A><<<finish_blocks(C), kFinishWarps * kWarp, 0, current_stream(x.device())>>>(
          reinterpret_cast<const double2*>(part.data_ptr<double>()), grid.groups,
          mean.data_ptr<A>(), invstd.data_ptr<A>(),
          weight.defined() ? weight.data_ptr<A>() : nullptr,
          gw.defined() ? gw.data_ptr<A>() : nullptr, gb.defined() ? gb.data_ptr<A>() : nullptr,
          coef.data_ptr<A>(), N * M, C, batch_stats);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    });
    if (!gx.defined() || x.numel() == 0) return;
    with_width<T>(
        vectorizable<T>(C, M, {gx.data_ptr(), g.data_ptr(), x.data_ptr()}), [&](auto width) {
          constexpr int V = decltype(width)::value;
          const int64_t steps = x.numel() / V;
          // The index type must hold the element index q * V, not only q.
          launch_indexed(x.numel(), [&]<class I>(I) {
            auto kernel = batch_stats ? grad_input_cuda<T, A, V, I, true>
                                      : grad_input_cuda<T, A, V, I, false>;
            kernel<<<blocks_for(steps), kThreads, 0, current_stream(x.device())>>>(
                gx.data_ptr<T>(), g.data_ptr<T>(), x.data_ptr<T>(), coef.data_ptr<A>(),
                static_cast<I>(steps), static_cast<I>(C), static_cast<I>(M));
          });
        });
    IGNIS_CUDA_CHECK(cudaGetLastError());
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(batch_norm_train_stub, CUDA, &train_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CUDA, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CUDA, &backward_kernel);

}  // namespace ignis::cuda
