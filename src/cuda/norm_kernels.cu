// CUDA kernels of batch norm (ops/norm.h): x is a contiguous [N, C, M] block (NCHW as
// [N, C, H W], channels-last as [N H W, C, 1]), per-channel vectors are contiguous [C] of the
// statistics dtype (float32 for bfloat16 x). The per-channel sums accumulate in float64 in a
// fixed order (deterministic, and as accurate as the CPU's float64 chunk sums), in two passes:
//   1. partial sums over a grid of groups, each block writing one pair per channel:
//      - channels-last (M == 1): blocks of 32 channels x 8 rows, so that a warp reads 32
//        neighbouring channels of a row (coalesced), the rows split among the groups;
//      - NCHW (M > 1): a block per (channel, group) reading the group's share of the channel's
//        N planes of M contiguous values, threads along the plane;
//   2. one thread per channel adds its groups' pairs in order and finishes (the mean and
//      variance, or the backward's coefficients).
// The grids depend only on the sizes, so results are reproducible. The elementwise passes run a
// thread per element, with 32-bit index arithmetic where the sizes allow (64-bit division is
// many instructions on a GPU and would bound these passes).
#include <algorithm>
#include <cmath>
#include <cstdint>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/norm.h"

namespace ignis::cuda {
namespace {

constexpr int kColX = 32, kColY = 8;  // channels-last blocks: channels x rows
constexpr int kPlaneThreads = 256;    // NCHW blocks: threads along a plane
constexpr int64_t kTargetBlocks = 1024;

// The partial-sum grid of [N, C, M]: `groups` shares of the rows (channels-last) or planes.
struct SumGrid {
  int64_t N, C, M;
  unsigned x, groups;  // blocks along the channels, and groups
  SumGrid(int64_t n, int64_t c, int64_t m) : N(n), C(c), M(m) {
    x = static_cast<unsigned>(M == 1 ? (C + kColX - 1) / kColX : C);
    const int64_t share = M == 1 ? (N + kColY - 1) / kColY : N;
    groups = static_cast<unsigned>(
        std::clamp<int64_t>(std::min<int64_t>(share, kTargetBlocks / std::max<int64_t>(x, 1)), 1,
                            kTargetBlocks));
  }
};

// Pass 1, channels-last: f(e, c) at element e = r C + c, summed over rows blockIdx.y * 8 +
// threadIdx.y stepping by groups * 8, then over the block's 8 rows in order.
template <class F>
__global__ void column_partials(F f, double2* part, int64_t R, int64_t C) {
  __shared__ double2 s[kColY][kColX];
  const int64_t c = static_cast<int64_t>(blockIdx.x) * kColX + threadIdx.x;
  double2 acc = make_double2(0, 0);
  if (c < C) {
    for (int64_t r = static_cast<int64_t>(blockIdx.y) * kColY + threadIdx.y; r < R;
         r += static_cast<int64_t>(gridDim.y) * kColY) {
      const double2 v = f(r * C + c, c);
      acc.x += v.x;
      acc.y += v.y;
    }
  }
  s[threadIdx.y][threadIdx.x] = acc;
  __syncthreads();
  if (threadIdx.y == 0 && c < C) {
    for (int k = 1; k < kColY; ++k) {
      acc.x += s[k][threadIdx.x].x;
      acc.y += s[k][threadIdx.x].y;
    }
    part[static_cast<int64_t>(blockIdx.y) * C + c] = acc;
  }
}

// Pass 1, NCHW: channel c = blockIdx.x, planes n = blockIdx.y, stepping by groups; f(e, c) at
// e = (n C + c) M + m, threads along m; then a fixed tree over the block's threads.
template <class F>
__global__ void plane_partials(F f, double2* part, int64_t N, int64_t C, int64_t M) {
  __shared__ double2 s[kPlaneThreads];
  const int64_t c = blockIdx.x;
  double2 acc = make_double2(0, 0);
  for (int64_t n = blockIdx.y; n < N; n += gridDim.y) {
    const int64_t base = (n * C + c) * M;
    for (int64_t m = threadIdx.x; m < M; m += kPlaneThreads) {
      const double2 v = f(base + m, c);
      acc.x += v.x;
      acc.y += v.y;
    }
  }
  s[threadIdx.x] = acc;
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

// Pass 2's sum: channel c's pair over the groups, in order.
__device__ double2 channel_total(const double2* part, unsigned groups, int64_t c, int64_t C) {
  double2 t = make_double2(0, 0);
  for (unsigned k = 0; k < groups; ++k) {
    t.x += part[k * C + c].x;
    t.y += part[k * C + c].y;
  }
  return t;
}

// Launches pass 1 over g's layout and returns the partials (groups x C pairs) for pass 2.
template <class F>
Tensor channel_sums(const F& f, const SumGrid& g, Device device) {
  Tensor part = make_tensor({static_cast<int64_t>(g.groups) * g.C * 2}, kFloat64, device);
  auto* p = reinterpret_cast<double2*>(part.data_ptr<double>());
  if (g.M == 1) {
    column_partials<<<dim3(g.x, g.groups), dim3(kColX, kColY), 0, current_stream(device)>>>(
        f, p, g.N, g.C);
  } else {
    plane_partials<<<dim3(g.x, g.groups), kPlaneThreads, 0, current_stream(device)>>>(f, p, g.N,
                                                                                      g.C, g.M);
  }
  IGNIS_CUDA_CHECK(cudaGetLastError());
  return part;
}

unsigned channel_blocks(int64_t C) { return static_cast<unsigned>((C + kThreads - 1) / kThreads); }

// The statistics' pair: sums of d = x - x[0, c, 0] and of d^2 (shifted by a value of the channel,
// so that the variance from them does not cancel when |mean| >> std).
template <class T, class A>
struct StatsPair {
  const T* x;
  int64_t M;
  __device__ double2 operator()(int64_t e, int64_t c) const {
    const double d = static_cast<double>(static_cast<A>(x[e])) -
                     static_cast<double>(static_cast<A>(x[c * M]));
    return make_double2(d, d * d);
  }
};

// Pass 2 of the statistics: channel c's mean and biased variance over its `count` values.
template <class T, class A>
__global__ void stats_finish(const double2* part, const T* x, A* mean, A* var, unsigned groups,
                             int64_t count, int64_t C, int64_t M) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double2 t = channel_total(part, groups, c, C);
  const double n = static_cast<double>(count);
  const double shift = static_cast<double>(static_cast<A>(x[c * M]));
  mean[c] = static_cast<A>(shift + t.x / n);
  var[c] = static_cast<A>(fmax(t.y - t.x * t.x / n, 0.0) / n);
}

// y = x * scale[c] + shift[c]; scale and shift computed per element from the statistics when
// `from_stats` (training: scale = w / sqrt(var + eps), shift = b - mean * scale). I: the index
// type (32-bit where the sizes allow, see launch_indexed).
template <class T, class A, class I>
__global__ void affine_cuda(T* y, const T* x, const A* p0, const A* p1, const A* w, const A* b,
                            A eps, bool from_stats, I total, I C, I M) {
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const I c = (M == 1 ? e : e / M) % C;
    A scale = p0[c], shift = p1[c];
    if (from_stats) {  // p0 = mean, p1 = var
      const A inv = A(1) / sqrt(p1[c] + eps);
      scale = w ? w[c] * inv : inv;
      shift = (b ? b[c] : A(0)) - p0[c] * scale;
    }
    y[e] = static_cast<T>(static_cast<A>(x[e]) * scale + shift);
  }
}

// Calls launch(index) with a uint32_t zero when a grid-stride loop over `total` elements cannot
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

template <class T, class A>
void launch_affine(const Tensor& y, const Tensor& x, const A* p0, const A* p1, const A* w,
                   const A* b, A eps, bool from_stats, int64_t C, int64_t M) {
  launch_indexed(x.numel(), [&]<class I>(I) {
    affine_cuda<T, A, I><<<blocks_for(x.numel()), kThreads, 0, current_stream(x.device())>>>(
        y.data_ptr<T>(), x.data_ptr<T>(), p0, p1, w, b, eps, from_stats,
        static_cast<I>(x.numel()), static_cast<I>(C), static_cast<I>(M));
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

void train_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& x,
                  const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t N = x.size(0), C = x.size(1), M = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    if (x.numel() == 0) return;  // (training needs two values per channel: ops/norm.cpp)
    const SumGrid g(N, C, M);
    const Tensor part = channel_sums(StatsPair<T, A>{x.data_ptr<T>(), M}, g, x.device());
    stats_finish<T, A><<<channel_blocks(C), kThreads, 0, current_stream(x.device())>>>(
        reinterpret_cast<const double2*>(part.data_ptr<double>()), x.data_ptr<T>(),
        mean.data_ptr<A>(), var.data_ptr<A>(), g.groups, N * M, C, M);
    IGNIS_CUDA_CHECK(cudaGetLastError());
    launch_affine<T, A>(y, x, mean.data_ptr<A>(), var.data_ptr<A>(),
                        weight.defined() ? weight.data_ptr<A>() : nullptr,
                        bias.defined() ? bias.data_ptr<A>() : nullptr, static_cast<A>(eps), true,
                        C, M);
  });
}

void affine_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    launch_affine<T, A>(y, x, scale.data_ptr<A>(), shift.data_ptr<A>(), nullptr, nullptr, A(0),
                        false, x.size(1), x.size(2));
  });
}

// The backward's pair: g and g * (x - mean[c]).
template <class T, class A>
struct GradPair {
  const T* g;
  const T* x;
  const A* mean;
  __device__ double2 operator()(int64_t e, int64_t c) const {
    const double gv = static_cast<double>(static_cast<A>(g[e]));
    return make_double2(
        gv, gv * (static_cast<double>(static_cast<A>(x[e])) - static_cast<double>(mean[c])));
  }
};

// Pass 2 of the backward: from channel c's G = sum(g) and S = sum(g * (x - mean)) over its
// `count` values, grad_bias = G, grad_weight = S * invstd, and the coefficients of
// grad_input = k1 * g + k2 * x + k0 (see cpu/norm_kernels).
template <class A>
__global__ void grad_finish(const double2* part, unsigned groups, const A* mean, const A* invstd,
                            const A* w, A* gw, A* gb, double* coef, int64_t count, int64_t C,
                            bool batch_stats) {
  const int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x;
  if (c >= C) return;
  const double2 t = channel_total(part, groups, c, C);
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
  coef[3 * c] = k1;
  coef[3 * c + 1] = k2;
  coef[3 * c + 2] = k0;
}

template <class T, class A, class I>
__global__ void grad_input_cuda(T* gx, const T* g, const T* x, const double* coef, I total, I C,
                                I M) {
  const I step = static_cast<I>(blockDim.x) * gridDim.x;
  for (I e = static_cast<I>(blockIdx.x) * blockDim.x + threadIdx.x; e < total; e += step) {
    const double* k = coef + 3 * ((M == 1 ? e : e / M) % C);
    const A v = static_cast<A>(k[0]) * static_cast<A>(g[e]) +
                static_cast<A>(k[1]) * static_cast<A>(x[e]) + static_cast<A>(k[2]);
    gx[e] = static_cast<T>(v);
  }
}

void backward_kernel(const Tensor& gx, const Tensor& gw, const Tensor& gb, const Tensor& g,
                     const Tensor& x, const Tensor& mean, const Tensor& invstd,
                     const Tensor& weight, bool batch_stats) {
  const int64_t N = x.size(0), C = x.size(1), M = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  const Tensor coef = make_tensor({3 * C}, kFloat64, x.device());
  dispatch_floating(x.dtype(), "batch_norm_backward", [&]<class T>() {
    using A = acc_t<T>;
    const SumGrid grid(N, C, M);
    // (No values: pass 1 writes zeros, so the sums are 0, as on the CPU.)
    const Tensor part =
        channel_sums(GradPair<T, A>{g.data_ptr<T>(), x.data_ptr<T>(), mean.data_ptr<A>()}, grid,
                     x.device());
    grad_finish<A><<<channel_blocks(C), kThreads, 0, current_stream(x.device())>>>(
        reinterpret_cast<const double2*>(part.data_ptr<double>()), grid.groups,
        mean.data_ptr<A>(), invstd.data_ptr<A>(), weight.defined() ? weight.data_ptr<A>() : nullptr,
        gw.defined() ? gw.data_ptr<A>() : nullptr, gb.defined() ? gb.data_ptr<A>() : nullptr,
        coef.data_ptr<double>(), N * M, C, batch_stats);
    IGNIS_CUDA_CHECK(cudaGetLastError());
    if (gx.defined() && x.numel() > 0) {
      launch_indexed(x.numel(), [&]<class I>(I) {
        grad_input_cuda<T, A, I>
            <<<blocks_for(x.numel()), kThreads, 0, current_stream(x.device())>>>(
                gx.data_ptr<T>(), g.data_ptr<T>(), x.data_ptr<T>(), coef.data_ptr<double>(),
                static_cast<I>(x.numel()), static_cast<I>(C), static_cast<I>(M));
      });
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(batch_norm_train_stub, CUDA, &train_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CUDA, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CUDA, &backward_kernel);

}  // namespace ignis::cuda
