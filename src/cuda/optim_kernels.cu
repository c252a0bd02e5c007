// The optimizers' fused steps on the GPU, multi-tensor: one launch updates up to kList
// parameters (blockIdx.y picks the tensor, the blocks along x stride over its elements), with
// the CPU fused kernels' arithmetic (optim/fused_math.h). Called by optim/sgd.cpp, adam.cpp,
// rmsprop.cpp and adagrad.cpp for contiguous float32/float64 CUDA parameters, in place of the
// 4-10 kernels per parameter of the generic tensor-op path.
#include <algorithm>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/loops.cuh"
#include "optim/fused_math.h"

namespace ignis::cuda::detail {
namespace {

constexpr int kList = 16;  // tensors per launch (the argument block stays well under 4 KB)

template <class T>
struct SgdList {
  T* p[kList];
  const T* g[kList];
  T* b[kList];
  int64_t n[kList];
  bool first[kList];
};

template <class T, bool WD, bool MOM, bool NESTEROV>
__global__ void sgd_cuda(SgdList<T> l, T sign, T wd, T mom, T one_minus_damp, T neg_lr) {
  const int t = blockIdx.y;
  T unused = 0;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    T& b = MOM ? l.b[t][i] : unused;
    if (l.first[t]) {
      optim::sgd_element<T, WD, MOM, NESTEROV, true>(l.p[t][i], l.g[t][i], b, sign, wd, mom,
                                                     one_minus_damp, neg_lr);
    } else {
      optim::sgd_element<T, WD, MOM, NESTEROV, false>(l.p[t][i], l.g[t][i], b, sign, wd, mom,
                                                      one_minus_damp, neg_lr);
    }
  }
}

template <class T>
struct AdamList {
  T* p[kList];
  const T* g[kList];
  T *m[kList], *v[kList], *vmax[kList];
  int64_t n[kList];
  T neg_step_size[kList], bc2[kList];  // per tensor: each has its own step count
};

template <class T, bool L2, bool DECOUPLED, bool AMSGRAD, bool SMALL_W1>
__global__ void adam_cuda(AdamList<T> l, optim::AdamScalars<T> c0) {
  const int t = blockIdx.y;
  optim::AdamScalars<T> c = c0;
  c.neg_step_size = l.neg_step_size[t];
  c.bc2 = l.bc2[t];
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    optim::adam_element<T, L2, DECOUPLED, AMSGRAD, SMALL_W1>(
        l.p[t][i], l.g[t][i], l.m[t][i], l.v[t][i], AMSGRAD ? l.vmax[t] + i : nullptr, c);
  }
}

template <class T>
struct RMSpropList {
  T* p[kList];
  const T* g[kList];
  T *sq[kList], *ga[kList], *buf[kList];
  int64_t n[kList];
};

template <class T, bool WD, bool CENTERED, bool MOM, bool SMALL_W>
__global__ void rmsprop_cuda(RMSpropList<T> l, optim::RMSpropScalars<T> c) {
  const int t = blockIdx.y;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    optim::rmsprop_element<T, WD, CENTERED, MOM, SMALL_W>(
        l.p[t][i], l.g[t][i], l.sq[t][i], CENTERED ? l.ga[t] + i : nullptr,
        MOM ? l.buf[t] + i : nullptr, c);
  }
}

template <class T>
struct AdagradList {
  T* p[kList];
  const T* g[kList];
  T* sum[kList];
  int64_t n[kList];
  T neg_clr[kList];  // per tensor: each has its own step count (and so its own decayed lr)
};

template <class T, bool WD>
__global__ void adagrad_cuda(AdagradList<T> l, T sign, T wd, T eps) {
  const int t = blockIdx.y;
  const T neg_clr = l.neg_clr[t];
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    optim::adagrad_element<T, WD>(l.p[t][i], l.g[t][i], l.sum[t][i], sign, wd, eps, neg_clr);
  }
}

template <class F>
void with_flag(bool b, F&& f) {
  if (b) f(std::true_type{});
  else f(std::false_type{});
}

// Blocks along x for the largest tensor of a launch (grid-stride covers the rest).
dim3 grid_of(const int64_t* n, int count) {
  const int64_t most = *std::max_element(n, n + count);
  return dim3(static_cast<unsigned>(std::clamp<int64_t>((most + kThreads - 1) / kThreads, 1, 1024)),
              static_cast<unsigned>(count));
}

}  // namespace

void sgd_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& bufs, const std::vector<bool>& first,
                      const SgdHyper& h) {
  if (params.empty()) return;
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "SGD", [&]<class T>() {
    if constexpr (std::is_same_v<T, BFloat16>) {
      IGNIS_FAIL("SGD: the fused CUDA step takes float32 and float64");
    } else {
      for (size_t at = 0; at < params.size(); at += kList) {
        const int count = static_cast<int>(std::min<size_t>(kList, params.size() - at));
        SgdList<T> l{};
        for (int k = 0; k < count; ++k) {
          l.p[k] = params[at + k].data_ptr<T>();
          l.g[k] = grads[at + k].data_ptr<T>();
          l.b[k] = bufs[at + k].defined() ? bufs[at + k].data_ptr<T>() : nullptr;
          l.n[k] = params[at + k].numel();
          l.first[k] = first[at + k];
        }
        const dim3 grid = grid_of(l.n, count);
        with_flag(h.weight_decay != 0, [&](auto WD) {
          with_flag(h.momentum != 0, [&](auto MOM) {
            with_flag(h.nesterov, [&](auto NESTEROV) {
              sgd_cuda<T, decltype(WD)::value, decltype(MOM)::value, decltype(NESTEROV)::value>
                  <<<grid, kThreads, 0, stream>>>(l, h.maximize ? T(-1) : T(1), T(h.weight_decay),
                                                  T(h.momentum), T(1 - h.dampening), T(-h.lr));
            });
          });
        });
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
    }
  });
}

void adam_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                       const std::vector<Tensor>& max_exp_avg_sq,
                       const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                       const AdamHyperCuda& h) {
  if (params.empty()) return;
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "Adam", [&]<class T>() {
    if constexpr (std::is_same_v<T, BFloat16>) {
      IGNIS_FAIL("Adam: the fused CUDA step takes float32 and float64");
    } else {
      const optim::AdamScalars<T> c{h.maximize ? T(-1) : T(1), T(h.weight_decay),
                                    T(1 - h.lr * h.weight_decay), T(1 - h.beta1), T(h.beta2),
                                    T(1 - h.beta2), T(0), T(1), T(h.eps)};
      const bool small_w1 = c.w1 < T(0.5) && c.w1 > T(-0.5);
      for (size_t at = 0; at < params.size(); at += kList) {
        const int count = static_cast<int>(std::min<size_t>(kList, params.size() - at));
        AdamList<T> l{};
        for (int k = 0; k < count; ++k) {
          const size_t j = at + k;
          l.p[k] = params[j].data_ptr<T>();
          l.g[k] = grads[j].data_ptr<T>();
          l.m[k] = exp_avg[j].data_ptr<T>();
          l.v[k] = exp_avg_sq[j].data_ptr<T>();
          l.vmax[k] = h.amsgrad ? max_exp_avg_sq[j].data_ptr<T>() : nullptr;
          l.n[k] = params[j].numel();
          l.neg_step_size[k] = T(-step_size[j]);
          l.bc2[k] = T(bc2_sqrt[j]);
        }
        const dim3 grid = grid_of(l.n, count);
        with_flag(h.weight_decay != 0 && !h.decoupled, [&](auto L2) {
          with_flag(h.weight_decay != 0 && h.decoupled, [&](auto DECOUPLED) {
            with_flag(h.amsgrad, [&](auto AMSGRAD) {
              with_flag(small_w1, [&](auto SMALL_W1) {
                adam_cuda<T, decltype(L2)::value, decltype(DECOUPLED)::value,
                          decltype(AMSGRAD)::value, decltype(SMALL_W1)::value>
                    <<<grid, kThreads, 0, stream>>>(l, c);
              });
            });
          });
        });
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
    }
  });
}

void rmsprop_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& square_avg,
                          const std::vector<Tensor>& grad_avg,
                          const std::vector<Tensor>& momentum_buffer, const RMSpropHyper& h) {
  if (params.empty()) return;
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "RMSprop", [&]<class T>() {
    if constexpr (std::is_same_v<T, BFloat16>) {
      IGNIS_FAIL("RMSprop: the fused CUDA step takes float32 and float64");
    } else {
      const optim::RMSpropScalars<T> c{h.maximize ? T(-1) : T(1), T(h.weight_decay), T(h.alpha),
                                       T(1 - h.alpha), T(h.eps), T(h.momentum), T(-h.lr)};
      const bool small_w = c.one_minus_alpha < T(0.5) && c.one_minus_alpha > T(-0.5);
      const bool mom = h.momentum > 0;
      for (size_t at = 0; at < params.size(); at += kList) {
        const int count = static_cast<int>(std::min<size_t>(kList, params.size() - at));
        RMSpropList<T> l{};
        for (int k = 0; k < count; ++k) {
          const size_t j = at + k;
          l.p[k] = params[j].data_ptr<T>();
          l.g[k] = grads[j].data_ptr<T>();
          l.sq[k] = square_avg[j].data_ptr<T>();
          l.ga[k] = h.centered ? grad_avg[j].data_ptr<T>() : nullptr;
          l.buf[k] = mom ? momentum_buffer[j].data_ptr<T>() : nullptr;
          l.n[k] = params[j].numel();
        }
        const dim3 grid = grid_of(l.n, count);
        with_flag(h.weight_decay != 0, [&](auto WD) {
          with_flag(h.centered, [&](auto CENTERED) {
            with_flag(mom, [&](auto MOM) {
              with_flag(small_w, [&](auto SMALL_W) {
                rmsprop_cuda<T, decltype(WD)::value, decltype(CENTERED)::value,
                             decltype(MOM)::value, decltype(SMALL_W)::value>
                    <<<grid, kThreads, 0, stream>>>(l, c);
              });
            });
          });
        });
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
    }
  });
}

void adagrad_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& sums, const std::vector<double>& clr,
                          const AdagradHyper& h) {
  if (params.empty()) return;
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "Adagrad", [&]<class T>() {
    if constexpr (std::is_same_v<T, BFloat16>) {
      IGNIS_FAIL("Adagrad: the fused CUDA step takes float32 and float64");
    } else {
      for (size_t at = 0; at < params.size(); at += kList) {
        const int count = static_cast<int>(std::min<size_t>(kList, params.size() - at));
        AdagradList<T> l{};
        for (int k = 0; k < count; ++k) {
          const size_t j = at + k;
          l.p[k] = params[j].data_ptr<T>();
          l.g[k] = grads[j].data_ptr<T>();
          l.sum[k] = sums[j].data_ptr<T>();
          l.n[k] = params[j].numel();
          l.neg_clr[k] = T(-clr[j]);
        }
        const dim3 grid = grid_of(l.n, count);
        with_flag(h.weight_decay != 0, [&](auto WD) {
          adagrad_cuda<T, decltype(WD)::value><<<grid, kThreads, 0, stream>>>(
              l, h.maximize ? T(-1) : T(1), T(h.weight_decay), T(h.eps));
        });
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
    }
  });
}

}  // namespace ignis::cuda::detail
