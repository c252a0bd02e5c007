// CPU kernels of ctc_loss: the forward (alpha) and backward (beta) recursions in log space over
// the extended label sequence l' = (blank, l1, blank, l2, ..., blank), one batch element per task
// (each sequence is serial in time). The formulas are PyTorch's (aten/src/ATen/native/LossCTC.cpp).
#include <algorithm>
#include <cmath>
#include <limits>
#include <vector>

#include "cpu/parallel.h"
#include "ops/ctc_loss.h"
#include "ops/log_math.h"

namespace ignis::cpu {
namespace {

template <class T>
constexpr T kNegInf = -std::numeric_limits<T>::infinity();


/// log_probs[t][b][c] through the tensor's strides, and the labels of sequence b.
template <class T>
struct CtcView {
  const T* lp;
  int64_t st, sb, sc;
  const int64_t* targets;
  const CtcArgs& a;
  CtcView(const Tensor& log_probs, const CtcArgs& args)
      : lp(log_probs.data_ptr<T>()),
        st(log_probs.stride(0)),
        sb(log_probs.stride(1)),
        sc(log_probs.stride(2)),
        targets(args.targets.data_ptr<int64_t>()),
        a(args) {}
  T at(int64_t t, int64_t b, int64_t c) const { return lp[t * st + b * sb + c * sc]; }
  /// The label of extended position s of sequence b.
  int64_t label(int64_t b, int64_t s) const {
    return s % 2 == 0 ? a.blank : targets[a.offsets[b] + s / 2];
  }
};

/// Sequences per task: enough recursion steps (~32k cells) to pay for a thread.
int64_t ctc_grain(int64_t t_max, int64_t s_max) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, t_max * s_max));
}

template <class T>
void ctc_forward(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                 const CtcArgs& a) {
  const CtcView<T> v(log_probs, a);
  const int64_t n = log_probs.size(1), t_max = log_probs.size(0);
  const int64_t s_max = 2 * a.max_target_length + 1;
  T* out = nll.data_ptr<T>();
  T* alpha_all = log_alpha.data_ptr<T>();
  parallel_for(0, n, ctc_grain(t_max, s_max), [&](int64_t b0, int64_t b1) {
    for (int64_t b = b0; b < b1; ++b) {
      T* la = alpha_all + b * t_max * s_max;
      std::fill(la, la + t_max * s_max, kNegInf<T>);
      const int64_t len = a.input_lengths[b], tl = a.target_lengths[b], s_len = 2 * tl + 1;
      if (len == 0) {  // an empty input emits only the empty sequence
        out[b] = tl == 0 ? T(0) : std::numeric_limits<T>::infinity();
        continue;
      }
      la[0] = v.at(0, b, a.blank);
      if (tl > 0) la[1] = v.at(0, b, v.label(b, 1));
      for (int64_t t = 1; t < len; ++t) {
        const T* prev = la + (t - 1) * s_max;
        T* cur = la + t * s_max;
        for (int64_t s = 0; s < s_len; ++s) {
          const int64_t l = v.label(b, s);
          const T a1 = prev[s];
          const T a2 = s > 0 ? prev[s - 1] : kNegInf<T>;
          // Skipping the blank between two labels is allowed unless they are equal.
          const T a3 = s > 1 && v.label(b, s - 2) != l ? prev[s - 2] : kNegInf<T>;
          cur[s] = log_add3(a1, a2, a3) + v.at(t, b, l);
        }
      }
      const T* last = la + (len - 1) * s_max;
      const T ll = tl > 0 ? log_add(last[s_len - 1], last[s_len - 2]) : last[0];
      out[b] = -ll;
    }
  });
}

template <class T>
void ctc_backward(const Tensor& grad, const Tensor& grad_out, const Tensor& log_probs,
                  const Tensor& nll_t, const Tensor& log_alpha, const CtcArgs& a,
                  bool zero_infinity) {
  const CtcView<T> v(log_probs, a);
  const int64_t n = log_probs.size(1), t_max = log_probs.size(0), c = log_probs.size(2);
  const int64_t s_max = 2 * a.max_target_length + 1;
  T* gp = grad.data_ptr<T>();  // [T, N, C] contiguous
  const T* go = grad_out.data_ptr<T>();
  const Tensor nll_c = nll_t.contiguous();
  const T* nll = nll_c.data_ptr<T>();
  const T* alpha_all = log_alpha.data_ptr<T>();
  parallel_for(0, n, ctc_grain(t_max, s_max + c), [&](int64_t b0, int64_t b1) {
    std::vector<T> beta, lcab;
    for (int64_t b = b0; b < b1; ++b) {
      const int64_t len = a.input_lengths[b], tl = a.target_lengths[b], s_len = 2 * tl + 1;
      const T gr = go[b * grad_out.stride(0)];
      auto g = [&](int64_t t, int64_t k) -> T& { return gp[(t * n + b) * c + k]; };
      if (len == 0 || (zero_infinity && nll[b] == std::numeric_limits<T>::infinity())) {
        for (int64_t t = 0; t < t_max; ++t) {
          for (int64_t k = 0; k < c; ++k) g(t, k) = 0;
        }
        continue;
      }
      const T* la = alpha_all + b * t_max * s_max;
      beta.assign(static_cast<size_t>(len * s_len), kNegInf<T>);
      // lcab[t][k] = log of sum over the positions s with label k of alpha[t][s] beta[t][s].
      lcab.assign(static_cast<size_t>(len * c), kNegInf<T>);
      auto lb = [&](int64_t t, int64_t s) -> T& { return beta[t * s_len + s]; };
      auto acc = [&](int64_t t, int64_t s) {
        T& cell = lcab[t * c + v.label(b, s)];
        cell = log_add(cell, la[t * s_max + s] + lb(t, s));
      };
      lb(len - 1, s_len - 1) = v.at(len - 1, b, a.blank);
      acc(len - 1, s_len - 1);
      if (tl > 0) {
        lb(len - 1, s_len - 2) = v.at(len - 1, b, v.label(b, s_len - 2));
        acc(len - 1, s_len - 2);
      }
      for (int64_t t = len - 2; t >= 0; --t) {
        for (int64_t s = s_len - 1; s >= 0; --s) {
          const int64_t l = v.label(b, s);
          const T b1v = lb(t + 1, s);
          const T b2v = s < s_len - 1 ? lb(t + 1, s + 1) : kNegInf<T>;
          const T b3v = s < s_len - 2 && v.label(b, s + 2) != l ? lb(t + 1, s + 2) : kNegInf<T>;
          lb(t, s) = log_add3(b1v, b2v, b3v) + v.at(t, b, l);
          acc(t, s);
        }
      }
      for (int64_t t = 0; t < t_max; ++t) {
        for (int64_t k = 0; k < c; ++k) {
          if (t >= len) {
            g(t, k) = 0;
            continue;
          }
          const T lp = v.at(t, b, k);
          g(t, k) = (std::exp(lp) - std::exp(lcab[t * c + k] + nll[b] - lp)) * gr;
        }
      }
    }
  });
}

void ctc_loss_kernel(const Tensor& nll, const Tensor& log_alpha, const Tensor& log_probs,
                     const CtcArgs& a) {
  if (log_probs.dtype() == kFloat64) {
    ctc_forward<double>(nll, log_alpha, log_probs, a);
  } else {
    ctc_forward<float>(nll, log_alpha, log_probs, a);
  }
}

void ctc_loss_backward_kernel(const Tensor& grad, const Tensor& grad_out, const Tensor& log_probs,
                              const Tensor& nll, const Tensor& log_alpha, const CtcArgs& a,
                              bool zero_infinity) {
  if (log_probs.dtype() == kFloat64) {
    ctc_backward<double>(grad, grad_out, log_probs, nll, log_alpha, a, zero_infinity);
  } else {
    ctc_backward<float>(grad, grad_out, log_probs, nll, log_alpha, a, zero_infinity);
  }
}

}  // namespace

IGNIS_REGISTER_KERNEL(ctc_loss_stub, CPU, &ctc_loss_kernel);
IGNIS_REGISTER_KERNEL(ctc_loss_backward_stub, CPU, &ctc_loss_backward_kernel);

}  // namespace ignis::cpu
