// CUDA kernels of batch norm (ops/norm.h): x is a contiguous [N, C, M] block, per-channel vectors
// are contiguous [C] of the statistics dtype (float32 for bfloat16 x). Per-channel sums run one
// block per channel, accumulating in float64 with a fixed tree in shared memory (deterministic,
// and as accurate as the CPU's float64 chunk sums); the elementwise passes run a thread per
// element.
#include <cmath>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/norm.h"

namespace ignis::cuda {
namespace {

constexpr int kSumThreads = 256;

// The block's sum of v (every thread's part) in shared memory; thread 0 gets it.
__device__ double block_sum(double v, double* s) {
  s[threadIdx.x] = v;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] += s[threadIdx.x + w];
    __syncthreads();
  }
  const double r = s[0];
  __syncthreads();
  return r;
}

// Channel c = blockIdx.x: mean and biased variance (two passes over the channel's N * M values).
template <class T, class A>
__global__ void stats_cuda(const T* x, A* mean, A* var, int64_t N, int64_t C, int64_t M) {
  __shared__ double s[kSumThreads];
  const int64_t c = blockIdx.x, count = N * M;
  double sum = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    sum += static_cast<double>(static_cast<A>(x[((k / M) * C + c) * M + k % M]));
  }
  const double mu = block_sum(sum, s) / static_cast<double>(count);
  double sq = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const double d = static_cast<double>(static_cast<A>(x[((k / M) * C + c) * M + k % M])) - mu;
    sq += d * d;
  }
  const double v = block_sum(sq, s) / static_cast<double>(count);
  if (threadIdx.x == 0) {
    mean[c] = static_cast<A>(mu);
    var[c] = static_cast<A>(v);
  }
}

// y = x * scale[c] + shift[c]; scale and shift computed per element from the statistics when
// `from_stats` (training: scale = w / sqrt(var + eps), shift = b - mean * scale).
template <class T, class A>
__global__ void affine_cuda(T* y, const T* x, const A* p0, const A* p1, const A* w, const A* b,
                            A eps, bool from_stats, int64_t total, int64_t C, int64_t M) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t c = (e / M) % C;
    A scale = p0[c], shift = p1[c];
    if (from_stats) {  // p0 = mean, p1 = var
      const A inv = A(1) / sqrt(p1[c] + eps);
      scale = w ? w[c] * inv : inv;
      shift = (b ? b[c] : A(0)) - p0[c] * scale;
    }
    y[e] = static_cast<T>(static_cast<A>(x[e]) * scale + shift);
  }
}

void train_kernel(const Tensor& y, const Tensor& mean, const Tensor& var, const Tensor& x,
                  const Tensor& weight, const Tensor& bias, double eps) {
  const int64_t N = x.size(0), C = x.size(1), M = x.size(2);
  if (C == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    stats_cuda<T, A><<<static_cast<unsigned>(C), kSumThreads, 0, current_stream(x.device())>>>(
        x.data_ptr<T>(), mean.data_ptr<A>(), var.data_ptr<A>(), N, C, M);
    IGNIS_CUDA_CHECK(cudaGetLastError());
    if (x.numel() == 0) return;
    affine_cuda<T, A><<<blocks_for(x.numel()), kThreads, 0, current_stream(x.device())>>>(
        y.data_ptr<T>(), x.data_ptr<T>(), mean.data_ptr<A>(), var.data_ptr<A>(),
        weight.defined() ? weight.data_ptr<A>() : nullptr,
        bias.defined() ? bias.data_ptr<A>() : nullptr, static_cast<A>(eps), true, x.numel(), C,
        M);
    IGNIS_CUDA_CHECK(cudaGetLastError());
  });
}

void affine_kernel(const Tensor& y, const Tensor& x, const Tensor& scale, const Tensor& shift) {
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_floating(x.dtype(), "batch_norm", [&]<class T>() {
    using A = acc_t<T>;
    affine_cuda<T, A><<<blocks_for(x.numel()), kThreads, 0, current_stream(x.device())>>>(
        y.data_ptr<T>(), x.data_ptr<T>(), scale.data_ptr<A>(), shift.data_ptr<A>(), nullptr,
        nullptr, A(0), false, x.numel(), x.size(1), x.size(2));
    IGNIS_CUDA_CHECK(cudaGetLastError());
  });
}

// Channel c = blockIdx.x: G = sum(g), S = sum(g * (x - mean)); grad_bias = G, grad_weight =
// S * invstd, and the coefficients of grad_input = k1 * g + k2 * x + k0 (see cpu/norm_kernels).
template <class T, class A>
__global__ void grad_sums_cuda(const T* g, const T* x, const A* mean, const A* invstd,
                               const A* w, A* gw, A* gb, double* coef, int64_t N, int64_t C,
                               int64_t M, bool batch_stats) {
  __shared__ double s[kSumThreads];
  const int64_t c = blockIdx.x, count = N * M;
  const double mu = static_cast<double>(mean[c]);
  double sg = 0, sgx = 0;
  for (int64_t k = threadIdx.x; k < count; k += blockDim.x) {
    const int64_t e = ((k / M) * C + c) * M + k % M;
    const double gv = static_cast<double>(static_cast<A>(g[e]));
    sg += gv;
    sgx += gv * (static_cast<double>(static_cast<A>(x[e])) - mu);
  }
  sg = block_sum(sg, s);
  sgx = block_sum(sgx, s);
  if (threadIdx.x == 0) {
    const double inv = static_cast<double>(invstd[c]);
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
}

template <class T, class A>
__global__ void grad_input_cuda(T* gx, const T* g, const T* x, const double* coef, int64_t total,
                                int64_t C, int64_t M) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const double* k = coef + 3 * ((e / M) % C);
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
    grad_sums_cuda<T, A><<<static_cast<unsigned>(C), kSumThreads, 0,
                           current_stream(x.device())>>>(
        g.data_ptr<T>(), x.data_ptr<T>(), mean.data_ptr<A>(), invstd.data_ptr<A>(),
        weight.defined() ? weight.data_ptr<A>() : nullptr, gw.defined() ? gw.data_ptr<A>() : nullptr,
        gb.defined() ? gb.data_ptr<A>() : nullptr, coef.data_ptr<double>(), N, C, M, batch_stats);
    IGNIS_CUDA_CHECK(cudaGetLastError());
    if (gx.defined() && x.numel() > 0) {
      grad_input_cuda<T, A><<<blocks_for(x.numel()), kThreads, 0, current_stream(x.device())>>>(
          gx.data_ptr<T>(), g.data_ptr<T>(), x.data_ptr<T>(), coef.data_ptr<double>(), x.numel(),
          C, M);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(batch_norm_train_stub, CUDA, &train_kernel);
IGNIS_REGISTER_KERNEL(channel_affine_stub, CUDA, &affine_kernel);
IGNIS_REGISTER_KERNEL(batch_norm_backward_stub, CUDA, &backward_kernel);

}  // namespace ignis::cuda
