// CPU pooling kernels: direct loops over the windows of ops/pool.h, one N*C plane per task.
// (oneDNN's pooling keeps its argmax in an opaque workspace, while max_pool2d_with_indices must
// return PyTorch's flat indices, and pooling is memory-bound: one pass over x either way.) float32
// and float64 run natively; bfloat16 is compared and accumulated in float32. Channels-last inputs
// of every floating dtype run NHWC kernels.
#include <algorithm>
#include <cmath>
#include <cstdint>
#include <limits>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ops/pool.h"
#include "ops/pool_windows.h"

namespace ignis::cpu {
namespace {

int64_t planes(const Tensor& t) { return t.size(0) * t.size(1); }

/// Planes per task: enough work (~32k elements) to pay for a thread.
int64_t plane_grain(int64_t plane_elems) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, plane_elems));
}

/// True when every window of `c` holds the same number of positions, one apart (no dilation, no
/// clipping by padding or the input's end): the common case (kernel 2, stride 2) of CNNs.
bool uniform_windows(const Clipped& c) {
  if (c.step != 1 || c.n.empty()) return false;
  for (int64_t n : c.n) {
    if (n != c.n[0]) return false;
  }
  return true;
}

/// Max pooling of undilated windows, a plane at a time: for each position (i, j) of the window in
/// row-major order, one pass over all the plane's outputs, whose window corners (the first
/// position inside the input) are computed once. Selects instead of branches (a branch on "is
/// this the new max" mispredicts on every other element of real activations); values and
/// plane-local indices have the same width (float, int32), so the loop vectorises, and it runs
/// over the whole plane rather than short output rows. kClip: windows clipped by padding (the
/// ResNet stem's 3x3, stride 2, padding 1) hold fewer positions at the borders; a position
/// outside its window is read at the corner instead (always in bounds) and never taken. Same ties
/// and NaN rule as the general kernel: the first maximum in row-major order, NaN wins.
template <bool kClip>
void max_pool_dense_f32(const Tensor& out, int64_t* ip, const Tensor& x, const Clipped& ch,
                        const Clipped& cw, int64_t H, int64_t W) {
  const int64_t OH = static_cast<int64_t>(ch.n.size()), OW = static_cast<int64_t>(cw.n.size());
  const int64_t KH = *std::max_element(ch.n.begin(), ch.n.end());
  const int64_t KW = *std::max_element(cw.n.begin(), cw.n.end());
  const int64_t OHW = OH * OW;
  std::vector<int32_t> corner(static_cast<size_t>(OHW)), nh, nw;
  if (kClip) {
    nh.resize(static_cast<size_t>(OHW));
    nw.resize(static_cast<size_t>(OHW));
  }
  for (int64_t oh = 0; oh < OH; ++oh) {
    for (int64_t ow = 0; ow < OW; ++ow) {
      const int64_t o = oh * OW + ow;
      corner[o] = static_cast<int32_t>(ch.first[oh] * W + cw.first[ow]);
      if (kClip) {
        nh[o] = static_cast<int32_t>(ch.n[oh]);
        nw[o] = static_cast<int32_t>(cw.n[ow]);
      }
    }
  }
  const float* const xp = x.data_ptr<float>();
  float* const op = out.data_ptr<float>();
  parallel_for(0, planes(x), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
    std::vector<int32_t> arg(static_cast<size_t>(OHW));
    int32_t* __restrict const ap = arg.data();
    const int32_t* __restrict const cp = corner.data();
    const int32_t* __restrict const hp = nh.data();
    const int32_t* __restrict const wp = nw.data();
    for (int64_t pl = p0; pl < p1; ++pl) {
      const float* __restrict const xs = xp + pl * H * W;
      float* __restrict const bp = op + pl * OHW;
      for (int64_t o = 0; o < OHW; ++o) {
        bp[o] = xs[cp[o]];
        ap[o] = cp[o];
      }
      for (int64_t i = 0; i < KH; ++i) {
        for (int64_t j = (i == 0 ? 1 : 0); j < KW; ++j) {
          const int32_t d = static_cast<int32_t>(i * W + j);
          const int32_t i32 = static_cast<int32_t>(i), j32 = static_cast<int32_t>(j);
#pragma omp simd
          for (int64_t o = 0; o < OHW; ++o) {
            int32_t valid = 1;
            if constexpr (kClip) valid = (i32 < hp[o]) & (j32 < wp[o]);
            const int32_t at = cp[o] + (d & -valid);
            const float v = xs[at], b = bp[o];
            const int32_t a = ap[o];
            const bool take = (valid != 0) & ((v > b) | (v != v));
            bp[o] = take ? v : b;
            ap[o] = take ? at : a;
          }
        }
      }
      if (ip) {
        for (int64_t o = 0; o < OHW; ++o) ip[pl * OHW + o] = ap[o];
      }
    }
  });
}

/// Max pooling of a channels-last (NHWC) input into channels-last out and indices: for each
/// output position, a scan of its window in row-major order with the C channels as the vector
/// dim (contiguous in x, out and indices). Same ties and NaN rule as the NCHW kernels. bfloat16
/// keeps the running maxima in float32 (exact: its values are float32's upper halves), so that
/// the scan vectorises as float32's does.
template <class T>
void max_pool_nhwc(const Tensor& out, int64_t* ip, const Tensor& x, const Clipped& ch,
                   const Clipped& cw, int64_t H, int64_t W) {
  using A = acc_t<T>;
  const int64_t N = x.size(0), C = x.size(1);
  const int64_t OH = static_cast<int64_t>(ch.n.size()), OW = static_cast<int64_t>(cw.n.size());
  const T* const xp = static_cast<const T*>(x.data_ptr());
  T* const op = static_cast<T*>(out.data_ptr());
  parallel_for(0, N * OH, plane_grain(OW * C * 4), [&](int64_t r0, int64_t r1) {
    std::vector<A> scratch(std::is_same_v<A, T> ? 0 : static_cast<size_t>(C));
    for (int64_t r = r0; r < r1; ++r) {
      const int64_t n = r / OH, oh = r % OH;
      const T* const xn = xp + n * H * W * C;
      for (int64_t ow = 0; ow < OW; ++ow) {
        A* __restrict bp;
        if constexpr (std::is_same_v<A, T>) {
          bp = op + (r * OW + ow) * C;
        } else {
          bp = scratch.data();
        }
        int64_t* __restrict const ap = ip + (r * OW + ow) * C;
        bool first = true;
        for (int64_t i = 0; i < ch.n[oh]; ++i) {
          const int64_t h = ch.first[oh] + i * ch.step;
          for (int64_t j = 0; j < cw.n[ow]; ++j) {
            const int64_t w = cw.first[ow] + j * cw.step, at = h * W + w;
            const T* __restrict const v = xn + at * C;
            if (first) {
              for (int64_t c = 0; c < C; ++c) {
                bp[c] = static_cast<A>(v[c]);
                ap[c] = at;
              }
              first = false;
              continue;
            }
#pragma omp simd
            for (int64_t c = 0; c < C; ++c) {
              const A vc = static_cast<A>(v[c]);
              const bool take = (vc > bp[c]) | (vc != vc);
              bp[c] = take ? vc : bp[c];
              ap[c] = take ? at : ap[c];
            }
          }
        }
        if constexpr (!std::is_same_v<A, T>) {
          T* const o = op + (r * OW + ow) * C;
          for (int64_t c = 0; c < C; ++c) o[c] = static_cast<T>(bp[c]);
        }
      }
    }
  });
}

/// Max pooling in two passes per output row: first the maxima over the window's rows for every
/// input column (a contiguous, vectorisable loop over the row), then over each window's columns.
/// Ties go to the first position in row-major order, as PyTorch's single scan does; NaN wins (the
/// last NaN in row-major order, as in that scan).
void max_pool_kernel(const Tensor& out, const Tensor& indices, const Tensor& x,
                     const PoolGeom& g) {
  const int64_t H = g.h.in, W = g.w.in, OH = g.h.out(), OW = g.w.out();
  const Clipped ch(g.h), cw(g.w);
  int64_t* const ip = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
  if (!x.is_contiguous()) {  // channels-last: out and indices are too (ops/pool.cpp)
    if (x.dtype() == DType::Float32) return max_pool_nhwc<float>(out, ip, x, ch, cw, H, W);
    if (x.dtype() == DType::BFloat16) return max_pool_nhwc<BFloat16>(out, ip, x, ch, cw, H, W);
    return max_pool_nhwc<double>(out, ip, x, ch, cw, H, W);
  }
  if (x.dtype() == DType::Float32 && H * W <= INT32_MAX && ch.step == 1 && cw.step == 1 &&
      !ch.n.empty() && !cw.n.empty()) {
    if (uniform_windows(ch) && uniform_windows(cw)) {
      max_pool_dense_f32<false>(out, ip, x, ch, cw, H, W);
    } else {
      max_pool_dense_f32<true>(out, ip, x, ch, cw, H, W);
    }
    return;
  }
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* const xp = static_cast<const T*>(x.data_ptr());
    T* const op = static_cast<T*>(out.data_ptr());
    parallel_for(0, planes(x), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      const int64_t *hf = ch.first.data(), *hn = ch.n.data(), *wf = cw.first.data(),
                    *wn = cw.n.data();
      const int64_t hs = ch.step, ws = cw.step;
      std::vector<A> m(static_cast<size_t>(W));
      std::vector<int64_t> r(static_cast<size_t>(W));
      A* const mp = m.data();
      int64_t* const rp = r.data();
      for (int64_t pl = p0; pl < p1; ++pl) {
        const T* xs = xp + pl * H * W;
        for (int64_t oh = 0; oh < OH; ++oh) {
          // Pass 1: per column, the max over the window's rows and the row it is in (the earliest
          // row among equal values). Windows are never empty (checked by the caller).
          const T* row0 = xs + hf[oh] * W;
          for (int64_t w = 0; w < W; ++w) {
            mp[w] = static_cast<A>(row0[w]);
            rp[w] = hf[oh];
          }
          for (int64_t i = 1; i < hn[oh]; ++i) {
            const int64_t h = hf[oh] + i * hs;
            const T* row = xs + h * W;
            for (int64_t w = 0; w < W; ++w) {
              const A v = static_cast<A>(row[w]);
              const bool take = (v > mp[w]) | (v != v);
              mp[w] = take ? v : mp[w];
              rp[w] = take ? h : rp[w];
            }
          }
          // Pass 2: over each window's columns; among equal maxima the smaller flat index, among
          // NaNs the larger (PyTorch's row-major scan keeps the last NaN).
          for (int64_t ow = 0; ow < OW; ++ow) {
            A best = mp[wf[ow]];
            int64_t arg = rp[wf[ow]] * W + wf[ow];
            for (int64_t j = 1; j < wn[ow]; ++j) {
              const int64_t w = wf[ow] + j * ws;
              const A v = mp[w];
              const int64_t at = rp[w] * W + w;
              const bool take = (v > best) | ((v != v) & ((best == best) | (at > arg))) |
                                ((v == best) & (at < arg));
              best = take ? v : best;
              arg = take ? at : arg;
            }
            const int64_t o = (pl * OH + oh) * OW + ow;
            op[o] = static_cast<T>(best);
            if (ip) ip[o] = arg;
          }
        }
      }
    });
  });
}

/// The gradient of channels-last max pooling: one sample per task (windows of one sample may
/// overlap), the C channels of each output position as the vector dim. bfloat16 sums a sample in
/// float32 scratch and rounds once, as the NCHW kernel does.
template <class T>
void max_pool_backward_nhwc(const Tensor& gx, const Tensor& gy, const Tensor& indices) {
  using A = acc_t<T>;
  const int64_t N = gx.size(0), C = gx.size(1), HW = gx.size(2) * gx.size(3);
  const int64_t OHW = gy.size(2) * gy.size(3);
  const int64_t* const ip = indices.data_ptr<int64_t>();
  const T* const gp = static_cast<const T*>(gy.data_ptr());
  T* const xp = static_cast<T*>(gx.data_ptr());
  parallel_for(0, N, 1, [&](int64_t n0, int64_t n1) {
    Tensor scratch;  // bfloat16: one sample's sums (the caching allocator's)
    if constexpr (!std::is_same_v<A, T>) scratch = make_tensor({HW * C}, kFloat32);
    for (int64_t n = n0; n < n1; ++n) {
      A* __restrict gxn;
      if constexpr (std::is_same_v<A, T>) {
        gxn = xp + n * HW * C;
      } else {
        gxn = scratch.data_ptr<float>();
      }
      std::fill(gxn, gxn + HW * C, A(0));
      for (int64_t o = 0; o < OHW; ++o) {
        const int64_t* __restrict const a = ip + (n * OHW + o) * C;
        const T* __restrict const g = gp + (n * OHW + o) * C;
        for (int64_t c = 0; c < C; ++c) {
          if (a[c] >= 0) gxn[a[c] * C + c] += static_cast<A>(g[c]);
        }
      }
      if constexpr (!std::is_same_v<A, T>) {
        std::copy(gxn, gxn + HW * C, xp + n * HW * C);  // rounds to bfloat16
      }
    }
  });
}

// (The CPU scatters along the outputs: it needs no windows.)
void max_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const Tensor& indices,
                              const PoolGeom&) {
  const int64_t HW = gx.size(2) * gx.size(3), OHW = gy.size(2) * gy.size(3);
  const int64_t* ip = indices.data_ptr<int64_t>();
  if (!gx.is_contiguous()) {  // channels-last, as gy and the indices (ops/pool.cpp)
    if (gx.dtype() == DType::Float32) return max_pool_backward_nhwc<float>(gx, gy, indices);
    if (gx.dtype() == DType::BFloat16) return max_pool_backward_nhwc<BFloat16>(gx, gy, indices);
    return max_pool_backward_nhwc<double>(gx, gy, indices);
  }
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(gy.data_ptr());
    T* xp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, planes(gx), plane_grain(HW + OHW), [&](int64_t p0, int64_t p1) {
      if constexpr (std::is_same_v<A, T>) {  // accumulate straight into the zeroed plane
        std::fill(xp + p0 * HW, xp + p1 * HW, T(0));
        for (int64_t pl = p0; pl < p1; ++pl) {
          T* const gxp = xp + pl * HW;
          const int64_t* const ipp = ip + pl * OHW;
          const T* const gyp = gp + pl * OHW;
          for (int64_t o = 0; o < OHW; ++o) {
            if (ipp[o] >= 0) gxp[ipp[o]] += gyp[o];
          }
        }
        return;
      }
      std::vector<A> acc(static_cast<size_t>(HW));
      for (int64_t pl = p0; pl < p1; ++pl) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t o = 0; o < OHW; ++o) {
          const int64_t i = ip[pl * OHW + o];
          if (i >= 0) acc[i] += static_cast<A>(gp[pl * OHW + o]);
        }
        for (int64_t i = 0; i < HW; ++i) xp[pl * HW + i] = static_cast<T>(acc[i]);
      }
    });
  });
}

void avg_pool_kernel(const Tensor& out, const Tensor& x, const PoolGeom& g) {
  const int64_t H = g.h.in, W = g.w.in, OH = g.h.out(), OW = g.w.out();
  const Clipped ch(g.h), cw(g.w);
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* const xp = static_cast<const T*>(x.data_ptr());
    T* const op = static_cast<T*>(out.data_ptr());
    parallel_for(0, planes(x), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      const int64_t *hf = ch.first.data(), *hn = ch.n.data(), *wf = cw.first.data(),
                    *wn = cw.n.data();
      const double *hd = ch.div.data(), *wd = cw.div.data();
      const int64_t hs = ch.step, ws = cw.step;
      for (int64_t pl = p0; pl < p1; ++pl) {
        const T* xs = xp + pl * H * W;
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            A sum = 0;
            for (int64_t i = 0; i < hn[oh]; ++i) {
              const T* row = xs + (hf[oh] + i * hs) * W + wf[ow];
              for (int64_t j = 0; j < wn[ow]; ++j) sum += static_cast<A>(row[j * ws]);
            }
            op[(pl * OH + oh) * OW + ow] = static_cast<T>(sum / static_cast<A>(hd[oh] * wd[ow]));
          }
        }
      }
    });
  });
}

void avg_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const PoolGeom& g) {
  const int64_t H = g.h.in, W = g.w.in, OH = g.h.out(), OW = g.w.out();
  const Clipped ch(g.h), cw(g.w);
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* const gp = static_cast<const T*>(gy.data_ptr());
    T* const xp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, planes(gx), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      const int64_t *hf = ch.first.data(), *hn = ch.n.data(), *wf = cw.first.data(),
                    *wn = cw.n.data();
      const double *hd = ch.div.data(), *wd = cw.div.data();
      const int64_t hs = ch.step, ws = cw.step;
      std::vector<A> acc(static_cast<size_t>(H * W));
      for (int64_t pl = p0; pl < p1; ++pl) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            const A v = static_cast<A>(gp[(pl * OH + oh) * OW + ow]) /
                        static_cast<A>(hd[oh] * wd[ow]);
            for (int64_t i = 0; i < hn[oh]; ++i) {
              A* row = acc.data() + (hf[oh] + i * hs) * W + wf[ow];
              for (int64_t j = 0; j < wn[ow]; ++j) row[j * ws] += v;
            }
          }
        }
        for (int64_t i = 0; i < H * W; ++i) xp[pl * H * W + i] = static_cast<T>(acc[i]);
      }
    });
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(max_pool2d_stub, CPU, &max_pool_kernel);
IGNIS_REGISTER_KERNEL(max_pool2d_backward_stub, CPU, &max_pool_backward_kernel);
IGNIS_REGISTER_KERNEL(avg_pool2d_stub, CPU, &avg_pool_kernel);
IGNIS_REGISTER_KERNEL(avg_pool2d_backward_stub, CPU, &avg_pool_backward_kernel);

}  // namespace ignis::cpu
