// CUDA kernels of ctc_loss (ops/ctc_loss.h), the CPU kernels' recursions (cpu/ctc_kernels.cpp,
// PyTorch's formulas) in the layout of PyTorch's CUDA CTC:
//  - forward: one block per sequence b, threads over the 2S + 1 extended-label states (in chunks
//    when there are more states than threads), one __syncthreads() per time step; the alpha
//    rows live in log_alpha (global memory), each step reads row t - 1 and writes row t;
//  - backward: the beta recursion likewise (into a [N, T, 2S + 1] workspace), then one block per
//    (t, b) for the gradient row: the log-sum of alpha * beta per class is accumulated by one
//    thread per class, walking that class's states in descending s, which is the CPU's order (so
//    its log_add handling of -inf and NaN is reproduced exactly, not only up to rounding); the
//    chains (the next lower state with the same label) are found once per sequence by the beta
//    kernel. No atomics: the result is deterministic.
#include <limits>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/loops.cuh"
#include "ops/ctc_loss.h"
#include "ops/log_math.h"

namespace ignis::cuda {
namespace {

template <class T>
constexpr T kInf = std::numeric_limits<T>::infinity();


/// log_probs [T, N, C] through its strides.
template <class T>
struct LogProbs {
  const T* p;
  int64_t st, sb, sc;
  __device__ T at(int64_t t, int64_t b, int64_t c) const { return p[t * st + b * sb + c * sc]; }
};

/// The batch geometry on the device: per sequence its label offset, input and target length,
/// and the labels (int64).
struct Batch {
  const int64_t* offsets;
  const int64_t* input_lengths;
  const int64_t* target_lengths;
  const int64_t* targets;
  int64_t blank;
  /// The label of extended position s of the sequence whose labels start at `off`.
  __device__ int64_t label(int64_t off, int64_t s) const {
    return s % 2 == 0 ? blank : targets[off + s / 2];
  }
};

/// Copies the host geometry to `dev`: one int64 tensor [offsets, input lengths, target lengths
/// (, labels when they are on the CPU)], uploaded through the pinned cache without a host wait;
/// `keep` holds the device tensors until the launches are queued (the caching allocator reuses
/// their blocks only on this stream, after the kernels).
Batch device_batch(const CtcArgs& a, Device dev, int64_t n, std::vector<Tensor>& keep) {
  const bool host_targets = !a.targets.device().is_cuda();
  const int64_t nt = host_targets ? a.targets.numel() : 0;
  Tensor host = make_tensor({3 * n + nt}, kInt64, kCPU);
  int64_t* h = host.data_ptr<int64_t>();
  for (int64_t b = 0; b < n; ++b) {
    h[b] = a.offsets[static_cast<size_t>(b)];
    h[n + b] = a.input_lengths[static_cast<size_t>(b)];
    h[2 * n + b] = a.target_lengths[static_cast<size_t>(b)];
  }
  Tensor labels;
  if (nt > 0) {
    labels = a.targets.to(kInt64).contiguous();
    const int64_t* tp = labels.data_ptr<int64_t>();
    for (int64_t i = 0; i < nt; ++i) h[3 * n + i] = tp[i];
  }
  const Tensor d = detail::upload(host.data_ptr(), host.nbytes(), kInt64, host.numel(), dev);
  keep.push_back(d);
  Batch g{};
  const int64_t* dp = d.data_ptr<int64_t>();
  g.offsets = dp;
  g.input_lengths = dp + n;
  g.target_lengths = dp + 2 * n;
  if (host_targets) {
    g.targets = dp + 3 * n;
  } else {
    const Tensor t = a.targets.to(dev).to(kInt64).contiguous();
    keep.push_back(t);
    g.targets = t.data_ptr<int64_t>();
  }
  g.blank = a.blank;
  return g;
}

/// Threads per block for `work` parallel items: a multiple of the warp, at most kThreads.
unsigned threads_for(int64_t work) {
  const int64_t w = std::max<int64_t>(32, std::min<int64_t>(kThreads, (work + 31) / 32 * 32));
  return static_cast<unsigned>(w);
}

template <class T>
LogProbs<T> view_of(const Tensor& log_probs) {
  return {log_probs.data_ptr<T>(), log_probs.stride(0), log_probs.stride(1), log_probs.stride(2)};
}

// ---- forward: block b fills its alpha slice [T, 2S + 1] with -inf, then runs the recursion.

template <class T>
__global__ void ctc_alpha_cuda(T* nll, T* alpha_all, LogProbs<T> v, Batch g, int64_t t_max,
                               int64_t s_max) {
  const int64_t b = blockIdx.x;
  T* la = alpha_all + b * t_max * s_max;
  for (int64_t e = threadIdx.x; e < t_max * s_max; e += blockDim.x) la[e] = -kInf<T>;
  const int64_t len = g.input_lengths[b], tl = g.target_lengths[b], off = g.offsets[b];
  const int64_t s_len = 2 * tl + 1;
  if (len == 0) {  // an empty input emits only the empty sequence (block-uniform return)
    if (threadIdx.x == 0) nll[b] = tl == 0 ? T(0) : kInf<T>;
    return;
  }
  __syncthreads();  // the fill is done before row 0 is written
  if (threadIdx.x == 0) {
    la[0] = v.at(0, b, g.blank);
    if (tl > 0) la[1] = v.at(0, b, g.label(off, 1));
  }
  __syncthreads();
  for (int64_t t = 1; t < len; ++t) {
    const T* prev = la + (t - 1) * s_max;
    T* cur = la + t * s_max;
    for (int64_t s = threadIdx.x; s < s_len; s += blockDim.x) {
      const int64_t l = g.label(off, s);
      const T a1 = prev[s];
      const T a2 = s > 0 ? prev[s - 1] : -kInf<T>;
      // Skipping the blank between two labels is allowed unless they are equal.
      const T a3 = s > 1 && g.label(off, s - 2) != l ? prev[s - 2] : -kInf<T>;
      cur[s] = log_add3(a1, a2, a3) + v.at(t, b, l);
    }
    __syncthreads();  // row t is complete before row t + 1 reads it
  }
  if (threadIdx.x == 0) {
    const T* last = la + (len - 1) * s_max;
    const T ll = tl > 0 ? log_add(last[s_len - 1], last[s_len - 2]) : last[0];
    nll[b] = -ll;
  }
}

template <class T>
void ctc_forward(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                 const CtcArgs& a) {
  const int64_t n = log_probs.size(1), t_max = log_probs.size(0);
  const int64_t s_max = 2 * a.max_target_length + 1;
  const Device dev = log_probs.device();
  DeviceGuard guard(dev.index);
  std::vector<Tensor> keep;
  const Batch g = device_batch(a, dev, n, keep);
  T* alpha = t_max > 0 ? log_alpha.data_ptr<T>() : nullptr;
  ctc_alpha_cuda<T><<<static_cast<unsigned>(n), threads_for(s_max), 0, current_stream(dev)>>>(
      nll.data_ptr<T>(), alpha, view_of<T>(log_probs), g, t_max, s_max);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- backward, part 1: block b finds its label chains and runs the beta recursion.
// links [N, 2, 2S + 1]: links[b][0][s] = the next lower state with the label of s (-1: none),
// links[b][1][s] = 1 when s is the highest state with its label (the head of the chain).

template <class T>
__device__ __forceinline__ bool skip_sequence(int64_t len, T nll, bool zero_infinity) {
  return len == 0 || (zero_infinity && nll == kInf<T>);
}

template <class T>
__global__ void ctc_beta_cuda(T* beta_all, int64_t* links, const T* nll, LogProbs<T> v, Batch g,
                              int64_t t_max, int64_t s_max, bool zero_infinity) {
  const int64_t b = blockIdx.x;
  const int64_t len = g.input_lengths[b], tl = g.target_lengths[b], off = g.offsets[b];
  const int64_t s_len = 2 * tl + 1;
  if (skip_sequence(len, nll[b], zero_infinity)) return;  // its gradient is zero
  int64_t* down = links + b * 2 * s_max;
  int64_t* head = down + s_max;
  for (int64_t s = threadIdx.x; s < s_len; s += blockDim.x) {
    if (s % 2 == 0) {  // the blanks: every even state
      down[s] = s - 2 >= 0 ? s - 2 : -1;
      head[s] = s == s_len - 1;
    } else {
      const int64_t i = s / 2, k = g.targets[off + i];
      int64_t dn = -1;
      for (int64_t j = i - 1; j >= 0; --j) {
        if (g.targets[off + j] == k) {
          dn = 2 * j + 1;
          break;
        }
      }
      int64_t hd = 1;
      for (int64_t j = i + 1; j < tl; ++j) {
        if (g.targets[off + j] == k) {
          hd = 0;
          break;
        }
      }
      down[s] = dn;
      head[s] = hd;
    }
  }
  T* lb = beta_all + b * t_max * s_max;
  {
    T* row = lb + (len - 1) * s_max;
    for (int64_t s = threadIdx.x; s < s_len; s += blockDim.x) {
      T v0 = -kInf<T>;
      if (s == s_len - 1) {
        v0 = v.at(len - 1, b, g.blank);
      } else if (tl > 0 && s == s_len - 2) {
        v0 = v.at(len - 1, b, g.label(off, s));
      }
      row[s] = v0;
    }
  }
  __syncthreads();
  for (int64_t t = len - 2; t >= 0; --t) {
    const T* next = lb + (t + 1) * s_max;
    T* cur = lb + t * s_max;
    for (int64_t s = threadIdx.x; s < s_len; s += blockDim.x) {
      const int64_t l = g.label(off, s);
      const T b1 = next[s];
      const T b2 = s < s_len - 1 ? next[s + 1] : -kInf<T>;
      const T b3 = s < s_len - 2 && g.label(off, s + 2) != l ? next[s + 2] : -kInf<T>;
      cur[s] = log_add3(b1, b2, b3) + v.at(t, b, l);
    }
    __syncthreads();
  }
}

// ---- backward, part 2: one block per (t, b) row of grad [T, N, C]. The row first holds, per
// class k, the log of the sum of alpha[t][s] beta[t][s] over the states s with label k (the
// CPU's lcab, in its order: descending s; at t = len - 1 only the last two states), then the
// gradient exp(lp) - exp(lcab + nll - lp), times grad_out[b].

template <class T>
__global__ void ctc_grad_cuda(T* grad, const T* go, int64_t go_stride, const T* nll,
                              const T* alpha_all, const T* beta_all, const int64_t* links,
                              LogProbs<T> v, Batch g, int64_t t_max, int64_t n, int64_t c,
                              int64_t s_max, bool zero_infinity) {
  const int64_t rows = t_max * n;
  for (int64_t tb = blockIdx.x; tb < rows; tb += gridDim.x) {  // tb is block-uniform
    const int64_t t = tb / n, b = tb % n;
    T* row = grad + tb * c;
    const int64_t len = g.input_lengths[b], tl = g.target_lengths[b], off = g.offsets[b];
    const int64_t s_len = 2 * tl + 1;
    const T nb = nll[b];
    if (skip_sequence(len, nb, zero_infinity) || t >= len) {
      for (int64_t k = threadIdx.x; k < c; k += blockDim.x) row[k] = T(0);
      continue;
    }
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) row[k] = -kInf<T>;
    __syncthreads();  // the row is -inf before the chains write their classes
    const T* la = alpha_all + (b * t_max + t) * s_max;
    const T* lb = beta_all + (b * t_max + t) * s_max;
    const int64_t* down = links + b * 2 * s_max;
    const int64_t* head = down + s_max;
    // At t = len - 1 the CPU accumulates only the states s_len - 1 and s_len - 2 (if tl > 0).
    const int64_t lowest = t == len - 1 ? std::max<int64_t>(s_len - 2, 0) : 0;
    for (int64_t s = threadIdx.x; s < s_len; s += blockDim.x) {
      if (head[s] == 0 || s < lowest) continue;
      T acc = -kInf<T>;
      for (int64_t q = s; q >= lowest; q = down[q]) acc = log_add(acc, la[q] + lb[q]);
      row[g.label(off, s)] = acc;  // heads have distinct labels: no two threads write a class
    }
    __syncthreads();
    const T gr = go[b * go_stride];
    for (int64_t k = threadIdx.x; k < c; k += blockDim.x) {
      const T lp = v.at(t, b, k);
      row[k] = (std::exp(lp) - std::exp(row[k] + nb - lp)) * gr;
    }
    // The next row tb' != tb touches other memory: no barrier needed before it.
  }
}

template <class T>
void ctc_backward(const Tensor& grad, const Tensor& grad_out, const Tensor& log_probs,
                  const Tensor& nll_t, const Tensor& log_alpha, const CtcArgs& a,
                  bool zero_infinity) {
  const int64_t n = log_probs.size(1), t_max = log_probs.size(0), c = log_probs.size(2);
  const int64_t s_max = 2 * a.max_target_length + 1;
  const Device dev = log_probs.device();
  DeviceGuard guard(dev.index);
  const cudaStream_t stream = current_stream(dev);
  std::vector<Tensor> keep;
  const Batch g = device_batch(a, dev, n, keep);
  const Tensor nll_c = nll_t.to(dev).contiguous();
  const Tensor go = grad_out.to(dev);
  const Tensor alpha = log_alpha.to(dev).contiguous();
  const Tensor beta = make_tensor({n, t_max, s_max}, log_probs.dtype(), dev);
  const Tensor links = make_tensor({n, 2, s_max}, kInt64, dev);
  const LogProbs<T> v = view_of<T>(log_probs);
  ctc_beta_cuda<T><<<static_cast<unsigned>(n), threads_for(s_max), 0, stream>>>(
      beta.data_ptr<T>(), links.data_ptr<int64_t>(), nll_c.data_ptr<T>(), v, g, t_max, s_max,
      zero_infinity);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  const int64_t rows = t_max * n;
  const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(rows, int64_t{1} << 18));
  ctc_grad_cuda<T><<<blocks, threads_for(std::max(c, s_max)), 0, stream>>>(
      grad.data_ptr<T>(), go.data_ptr<T>(), go.dim() == 0 ? 0 : go.stride(0), nll_c.data_ptr<T>(),
      alpha.data_ptr<T>(), beta.data_ptr<T>(), links.data_ptr<int64_t>(), v, g, t_max, n, c, s_max,
      zero_infinity);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

void ctc_loss_kernel(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                     const CtcArgs& a) {
  if (log_probs.size(1) == 0) return;
  if (log_probs.dtype() == kFloat64) {
    ctc_forward<double>(nll, log_alpha, log_probs, a);
  } else {
    IGNIS_CHECK(log_probs.dtype() == kFloat32,
                "ctc_loss: expected log_probs of dtype float32 or float64, but got ",
                log_probs.dtype());
    ctc_forward<float>(nll, log_alpha, log_probs, a);
  }
}

void ctc_loss_backward_kernel(const Tensor& grad, const Tensor& grad_out, const Tensor& log_probs,
                              const Tensor& nll, const Tensor& log_alpha, const CtcArgs& a,
                              bool zero_infinity) {
  if (grad.numel() == 0) return;
  if (log_probs.dtype() == kFloat64) {
    ctc_backward<double>(grad, grad_out, log_probs, nll, log_alpha, a, zero_infinity);
  } else {
    IGNIS_CHECK(log_probs.dtype() == kFloat32,
                "ctc_loss: expected log_probs of dtype float32 or float64, but got ",
                log_probs.dtype());
    ctc_backward<float>(grad, grad_out, log_probs, nll, log_alpha, a, zero_infinity);
  }
}

}  // namespace

IGNIS_REGISTER_KERNEL(ctc_loss_stub, CUDA, &ctc_loss_kernel);
IGNIS_REGISTER_KERNEL(ctc_loss_backward_stub, CUDA, &ctc_loss_backward_kernel);

}  // namespace ignis::cuda
