// The optimizers' fused steps on the GPU, multi-tensor: one launch updates up to kList
// parameters (blockIdx.y picks the tensor, the blocks along x stride over its elements), with
// the CPU fused kernels' arithmetic (optim/fused_math.h). Called by optim/sgd.cpp, adam.cpp,
// rmsprop.cpp and adagrad.cpp for contiguous float32, float64 and bfloat16 CUDA parameters, in
// place of the 4-10 kernels per parameter of the generic tensor-op path; the lists may mix
// devices and dtypes (a launch per device, dtype and kList tensors). A bfloat16 parameter and
// its state are computed in float32 and rounded once per step (as PyTorch's foreach kernels).
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

// S: the stored type, T = acc_t<S> the computed one (float for bfloat16).
template <class S, bool WD, bool MOM, bool NESTEROV, class T = acc_t<S>>
__global__ void sgd_cuda(SgdList<S> l, T sign, T wd, T mom, T one_minus_damp, T neg_lr) {
  const int t = blockIdx.y;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    T p = static_cast<T>(l.p[t][i]), b = MOM ? static_cast<T>(l.b[t][i]) : T(0);
    const T g = static_cast<T>(l.g[t][i]);
    if (l.first[t]) {
      optim::sgd_element<T, WD, MOM, NESTEROV, true>(p, g, b, sign, wd, mom, one_minus_damp,
                                                     neg_lr);
    } else {
      optim::sgd_element<T, WD, MOM, NESTEROV, false>(p, g, b, sign, wd, mom, one_minus_damp,
                                                      neg_lr);
    }
    l.p[t][i] = static_cast<S>(p);
    if (MOM) l.b[t][i] = static_cast<S>(b);
  }
}

template <class S, class T = acc_t<S>>
struct AdamList {
  S* p[kList];
  const S* g[kList];
  S *m[kList], *v[kList], *vmax[kList];
  int64_t n[kList];
  T neg_step_size[kList], bc2[kList];  // per tensor: each has its own step count
};

template <class S, bool L2, bool DECOUPLED, bool AMSGRAD, bool SMALL_W1, class T = acc_t<S>>
__global__ void adam_cuda(AdamList<S> l, optim::AdamScalars<T> c0) {
  const int t = blockIdx.y;
  optim::AdamScalars<T> c = c0;
  c.neg_step_size = l.neg_step_size[t];
  c.bc2 = l.bc2[t];
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    T p = static_cast<T>(l.p[t][i]), m = static_cast<T>(l.m[t][i]),
      v = static_cast<T>(l.v[t][i]), vmax = AMSGRAD ? static_cast<T>(l.vmax[t][i]) : T(0);
    optim::adam_element<T, L2, DECOUPLED, AMSGRAD, SMALL_W1>(
        p, static_cast<T>(l.g[t][i]), m, v, AMSGRAD ? &vmax : nullptr, c);
    l.p[t][i] = static_cast<S>(p);
    l.m[t][i] = static_cast<S>(m);
    l.v[t][i] = static_cast<S>(v);
    if (AMSGRAD) l.vmax[t][i] = static_cast<S>(vmax);
  }
}

template <class S>
struct RMSpropList {
  S* p[kList];
  const S* g[kList];
  S *sq[kList], *ga[kList], *buf[kList];
  int64_t n[kList];
};

template <class S, bool WD, bool CENTERED, bool MOM, bool SMALL_W, class T = acc_t<S>>
__global__ void rmsprop_cuda(RMSpropList<S> l, optim::RMSpropScalars<T> c) {
  const int t = blockIdx.y;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    T p = static_cast<T>(l.p[t][i]), sq = static_cast<T>(l.sq[t][i]),
      ga = CENTERED ? static_cast<T>(l.ga[t][i]) : T(0),
      buf = MOM ? static_cast<T>(l.buf[t][i]) : T(0);
    optim::rmsprop_element<T, WD, CENTERED, MOM, SMALL_W>(
        p, static_cast<T>(l.g[t][i]), sq, CENTERED ? &ga : nullptr, MOM ? &buf : nullptr, c);
    l.p[t][i] = static_cast<S>(p);
    l.sq[t][i] = static_cast<S>(sq);
    if (CENTERED) l.ga[t][i] = static_cast<S>(ga);
    if (MOM) l.buf[t][i] = static_cast<S>(buf);
  }
}

template <class S, class T = acc_t<S>>
struct AdagradList {
  S* p[kList];
  const S* g[kList];
  S* sum[kList];
  int64_t n[kList];
  T neg_clr[kList];  // per tensor: each has its own step count (and so its own decayed lr)
};

template <class S, bool WD, class T = acc_t<S>>
__global__ void adagrad_cuda(AdagradList<S> l, T sign, T wd, T eps) {
  const int t = blockIdx.y;
  const T neg_clr = l.neg_clr[t];
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < l.n[t];
       i += step) {
    T p = static_cast<T>(l.p[t][i]), sum = static_cast<T>(l.sum[t][i]);
    optim::adagrad_element<T, WD>(p, static_cast<T>(l.g[t][i]), sum, sign, wd, eps, neg_clr);
    l.p[t][i] = static_cast<S>(p);
    l.sum[t][i] = static_cast<S>(sum);
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

// The positions of `params` per (device, dtype), each in order: one launch series per group.
std::vector<std::vector<size_t>> groups_of(const std::vector<Tensor>& params) {
  std::vector<std::vector<size_t>> groups;
  std::vector<std::pair<Device, DType>> keys;
  for (size_t i = 0; i < params.size(); ++i) {
    const std::pair<Device, DType> key{params[i].device(), params[i].dtype()};
    const auto it = std::find(keys.begin(), keys.end(), key);
    if (it == keys.end()) {
      keys.push_back(key);
      groups.push_back({i});
    } else {
      groups[static_cast<size_t>(it - keys.begin())].push_back(i);
    }
  }
  return groups;
}

// v's entries at `idx` (v may be empty: then nothing).
template <class V>
V pick(const V& v, const std::vector<size_t>& idx) {
  if (v.empty()) return v;
  V out;
  for (const size_t i : idx) out.push_back(v[i]);
  return out;
}

// One (device, dtype) group of each optimizer's lists: launches of up to kList tensors.
void sgd_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
               const std::vector<Tensor>& bufs, const std::vector<bool>& first,
               const SgdHyper& h) {
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "SGD", [&]<class T>() {
    using A = acc_t<T>;
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
                <<<grid, kThreads, 0, stream>>>(l, h.maximize ? A(-1) : A(1), A(h.weight_decay),
                                                A(h.momentum), A(1 - h.dampening), A(-h.lr));
          });
        });
      });
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

void adam_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                const std::vector<Tensor>& max_exp_avg_sq, const std::vector<double>& step_size,
                const std::vector<double>& bc2_sqrt, const AdamHyperCuda& h) {
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "Adam", [&]<class T>() {
    using A = acc_t<T>;
    const optim::AdamScalars<A> c{h.maximize ? A(-1) : A(1), A(h.weight_decay),
                                  A(1 - h.lr * h.weight_decay), A(1 - h.beta1), A(h.beta2),
                                  A(1 - h.beta2), A(0), A(1), A(h.eps)};
    const bool small_w1 = c.w1 < A(0.5) && c.w1 > A(-0.5);
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
        l.neg_step_size[k] = A(-step_size[j]);
        l.bc2[k] = A(bc2_sqrt[j]);
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
  });
}

void rmsprop_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& square_avg, const std::vector<Tensor>& grad_avg,
                   const std::vector<Tensor>& momentum_buffer, const RMSpropHyper& h) {
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "RMSprop", [&]<class T>() {
    using A = acc_t<T>;
    const optim::RMSpropScalars<A> c{h.maximize ? A(-1) : A(1), A(h.weight_decay), A(h.alpha),
                                     A(1 - h.alpha), A(h.eps), A(h.momentum), A(-h.lr)};
    const bool small_w = c.one_minus_alpha < A(0.5) && c.one_minus_alpha > A(-0.5);
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
  });
}

void adagrad_group(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                   const std::vector<Tensor>& sums, const std::vector<double>& clr,
                   const AdagradHyper& h) {
  const Device dev = params[0].device();
  DeviceGuard guard(dev.index);
  const auto stream = current_stream(dev);
  dispatch_floating(params[0].dtype(), "Adagrad", [&]<class T>() {
    using A = acc_t<T>;
    for (size_t at = 0; at < params.size(); at += kList) {
      const int count = static_cast<int>(std::min<size_t>(kList, params.size() - at));
      AdagradList<T> l{};
      for (int k = 0; k < count; ++k) {
        const size_t j = at + k;
        l.p[k] = params[j].data_ptr<T>();
        l.g[k] = grads[j].data_ptr<T>();
        l.sum[k] = sums[j].data_ptr<T>();
        l.n[k] = params[j].numel();
        l.neg_clr[k] = A(-clr[j]);
      }
      const dim3 grid = grid_of(l.n, count);
      with_flag(h.weight_decay != 0, [&](auto WD) {
        adagrad_cuda<T, decltype(WD)::value><<<grid, kThreads, 0, stream>>>(
            l, h.maximize ? A(-1) : A(1), A(h.weight_decay), A(h.eps));
      });
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace

void sgd_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                      const std::vector<Tensor>& bufs, const std::vector<bool>& first,
                      const SgdHyper& h) {
  for (const std::vector<size_t>& g : groups_of(params)) {
    sgd_group(pick(params, g), pick(grads, g), pick(bufs, g), pick(first, g), h);
  }
}

void adam_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                       const std::vector<Tensor>& exp_avg, const std::vector<Tensor>& exp_avg_sq,
                       const std::vector<Tensor>& max_exp_avg_sq,
                       const std::vector<double>& step_size, const std::vector<double>& bc2_sqrt,
                       const AdamHyperCuda& h) {
  for (const std::vector<size_t>& g : groups_of(params)) {
    adam_group(pick(params, g), pick(grads, g), pick(exp_avg, g), pick(exp_avg_sq, g),
               pick(max_exp_avg_sq, g), pick(step_size, g), pick(bc2_sqrt, g), h);
  }
}

void rmsprop_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& square_avg,
                          const std::vector<Tensor>& grad_avg,
                          const std::vector<Tensor>& momentum_buffer, const RMSpropHyper& h) {
  for (const std::vector<size_t>& g : groups_of(params)) {
    rmsprop_group(pick(params, g), pick(grads, g), pick(square_avg, g), pick(grad_avg, g),
                  pick(momentum_buffer, g), h);
  }
}

void adagrad_multi_tensor(const std::vector<Tensor>& params, const std::vector<Tensor>& grads,
                          const std::vector<Tensor>& sums, const std::vector<double>& clr,
                          const AdagradHyper& h) {
  for (const std::vector<size_t>& g : groups_of(params)) {
    adagrad_group(pick(params, g), pick(grads, g), pick(sums, g), pick(clr, g), h);
  }
}

}  // namespace ignis::cuda::detail
