// CUDA pooling kernels over the windows of ops/pool_windows.h (the CPU kernels' clipped
// windows, uploaded to the device in one buffer per call through the pinned cache, without a
// host wait): one thread per output for the forward passes, reading x through
// its strides (NCHW or channels-last alike: out and indices share x's layout). Max pooling's
// backward gives each thread one input element, which gathers the gradients of the windows
// holding it in output order; average pooling's backward gives each thread one (n, c) plane and
// walks its outputs in order. Either way overlapping windows add up in a fixed order without
// atomics. Max pooling: the first maximum in row-major order
// wins, and NaN beats every number (the last NaN), as on the CPU; indices are h * W + w.
#include <bit>
#include <vector>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/loops.cuh"
#include "ignis/ops.h"
#include "ops/pool_windows.h"

namespace ignis::cuda {
namespace {

// The windows of both dims on the device, in one int64 buffer (one copy to the GPU per call):
// per dim, first and n per output position, then div (doubles, bit for bit).
struct WindowPtrs {
  const int64_t *first, *n;
  const double* div;
  int64_t step;
};
struct DevWindows {
  Tensor buf;
  WindowPtrs h, w;
  DevWindows(const PoolGeom& g, Device d) {
    const Clipped ch(g.h), cw(g.w);
    std::vector<int64_t> host;
    auto append = [&](const Clipped& c) {
      host.insert(host.end(), c.first.begin(), c.first.end());
      host.insert(host.end(), c.n.begin(), c.n.end());
      for (double v : c.div) host.push_back(std::bit_cast<int64_t>(v));
    };
    append(ch);
    append(cw);
    buf = detail::upload(host.data(), host.size() * sizeof(int64_t), kInt64,
                         static_cast<int64_t>(host.size()), d);
    const int64_t* p = buf.data_ptr<int64_t>();
    const auto oh = static_cast<int64_t>(ch.first.size());
    const auto ow = static_cast<int64_t>(cw.first.size());
    h = {p, p + oh, reinterpret_cast<const double*>(p + 2 * oh), ch.step};
    p += 3 * oh;
    w = {p, p + ow, reinterpret_cast<const double*>(p + 2 * ow), cw.step};
  }
};

// [N, C, H, W] element strides of a 4-d tensor.
struct Strides4 {
  int64_t n, c, h, w;
};
Strides4 strides4(const Tensor& t) { return {t.stride(0), t.stride(1), t.stride(2), t.stride(3)}; }

// One output per thread step. Outputs are enumerated in the output's memory order (channels
// fastest when it is channels-last), so neighbouring threads write, and read, neighbouring
// elements; any order gives the same values (each output's offset comes from its strides).
template <class T>
__global__ void max_pool_cuda(const T* x, T* out, int64_t* idx, int64_t N, int64_t C, int64_t OH,
                              int64_t OW, int64_t W, Strides4 xs, Strides4 os, WindowPtrs wh,
                              WindowPtrs ww, bool nhwc) {
  using A = acc_t<T>;
  const int64_t total = N * C * OH * OW;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    int64_t n, c, oh, ow;
    if (nhwc) {
      c = e % C, ow = (e / C) % OW, oh = (e / (C * OW)) % OH, n = e / (C * OW * OH);
    } else {
      ow = e % OW, oh = (e / OW) % OH, c = (e / (OW * OH)) % C, n = e / (OW * OH * C);
    }
    const T* xp = x + n * xs.n + c * xs.c;
    A best = 0;
    int64_t arg = -1;
    for (int64_t i = 0; i < wh.n[oh]; ++i) {
      const int64_t h = wh.first[oh] + i * wh.step;
      for (int64_t j = 0; j < ww.n[ow]; ++j) {
        const int64_t w = ww.first[ow] + j * ww.step;
        const A v = static_cast<A>(xp[h * xs.h + w * xs.w]);
        if (arg < 0 || v > best || v != v) {
          best = v;
          arg = h * W + w;
        }
      }
    }
    const int64_t o = n * os.n + c * os.c + oh * os.h + ow * os.w;
    out[o] = static_cast<T>(best);
    if (idx != nullptr) idx[o] = arg;
  }
}

void max_pool_kernel(const Tensor& out, const Tensor& indices, const Tensor& x,
                     const PoolGeom& g) {
  if (out.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const DevWindows win(g, x.device());
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    max_pool_cuda<T><<<blocks_for(out.numel()), kThreads, 0, current_stream(x.device())>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()),
        indices.defined() ? indices.data_ptr<int64_t>() : nullptr, x.size(0), x.size(1),
        out.size(2), out.size(3), g.w.in, strides4(x), strides4(out), win.h, win.w,
        out.size(1) > 1 && out.stride(1) < out.stride(3));
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// For each input position of a dim, the range [lo, hi] of outputs whose (clipped) window holds
// it (lo > hi: none), on the device: what a gathering backward walks.
struct DevInverse {
  Tensor buf;
  const int64_t *lo_h, *hi_h, *lo_w, *hi_w;
  DevInverse(const PoolGeom& g, Device d) {
    const Clipped ch(g.h), cw(g.w);
    std::vector<int64_t> host;
    auto append = [&](const Clipped& c, int64_t in) {
      const ClippedInverse inv(c, in);
      host.insert(host.end(), inv.lo.begin(), inv.lo.end());
      host.insert(host.end(), inv.hi.begin(), inv.hi.end());
    };
    append(ch, g.h.in);
    append(cw, g.w.in);
    buf = detail::upload(host.data(), host.size() * sizeof(int64_t), kInt64,
                         static_cast<int64_t>(host.size()), d);
    const int64_t* p = buf.data_ptr<int64_t>();
    lo_h = p;
    hi_h = p + g.h.in;
    lo_w = p + 2 * g.h.in;
    hi_w = lo_w + g.w.in;
  }
};

// gx at each input position = the sum, in output order, of gy over the windows holding it whose
// maximum it was (indices: h * W + w): a thread per input element, gathering (no atomics, the
// CPU's order of additions), consecutive threads on neighbouring elements of gx's layout.
template <class T>
__global__ void max_pool_backward_cuda(T* gx, const T* gy, const int64_t* idx, int64_t N,
                                       int64_t C, int64_t H, int64_t W, Strides4 xs, Strides4 ys,
                                       const int64_t* lo_h, const int64_t* hi_h,
                                       const int64_t* lo_w, const int64_t* hi_w, bool nhwc) {
  using A = acc_t<T>;
  const int64_t total = N * C * H * W;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    int64_t n, c, h, w;
    if (nhwc) {
      c = e % C;
      w = (e / C) % W;
      h = (e / (C * W)) % H;
      n = e / (C * W * H);
    } else {
      w = e % W;
      h = (e / W) % H;
      c = (e / (W * H)) % C;
      n = e / (W * H * C);
    }
    const int64_t target = h * W + w, base = n * ys.n + c * ys.c;
    A acc = 0;
    for (int64_t oh = lo_h[h]; oh <= hi_h[h]; ++oh) {
      for (int64_t ow = lo_w[w]; ow <= hi_w[w]; ++ow) {
        const int64_t y = base + oh * ys.h + ow * ys.w;
        if (idx[y] == target) acc += static_cast<A>(gy[y]);
      }
    }
    gx[n * xs.n + c * xs.c + h * xs.h + w * xs.w] = static_cast<T>(acc);
  }
}

void max_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const Tensor& indices,
                              const PoolGeom& g) {
  if (gx.numel() == 0) return;
  DeviceGuard guard(gx.device().index);
  const int64_t N = gx.size(0), C = gx.size(1), H = gx.size(2), W = gx.size(3);
  const DevInverse inv(g, gx.device());
  const bool nhwc = is_channels_last(gx);
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    max_pool_backward_cuda<T><<<blocks_for(gx.numel()), kThreads, 0,
                                current_stream(gx.device())>>>(
        static_cast<T*>(gx.data_ptr()), static_cast<const T*>(gy.data_ptr()),
        indices.data_ptr<int64_t>(), N, C, H, W, strides4(gx), strides4(gy), inv.lo_h, inv.hi_h,
        inv.lo_w, inv.hi_w, nhwc);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
__global__ void avg_pool_cuda(const T* x, T* out, int64_t N, int64_t C, int64_t OH, int64_t OW,
                              Strides4 xs, Strides4 os, WindowPtrs wh, WindowPtrs ww) {
  using A = acc_t<T>;
  const int64_t total = N * C * OH * OW;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t ow = e % OW, oh = (e / OW) % OH, c = (e / (OW * OH)) % C, n = e / (OW * OH * C);
    const T* xp = x + n * xs.n + c * xs.c;
    A sum = 0;
    for (int64_t i = 0; i < wh.n[oh]; ++i) {
      const int64_t h = wh.first[oh] + i * wh.step;
      for (int64_t j = 0; j < ww.n[ow]; ++j) {
        sum += static_cast<A>(xp[h * xs.h + (ww.first[ow] + j * ww.step) * xs.w]);
      }
    }
    out[n * os.n + c * os.c + oh * os.h + ow * os.w] =
        static_cast<T>(sum / static_cast<A>(wh.div[oh] * ww.div[ow]));
  }
}

void avg_pool_kernel(const Tensor& out, const Tensor& x, const PoolGeom& g) {
  if (out.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const DevWindows win(g, x.device());
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    avg_pool_cuda<T><<<blocks_for(out.numel()), kThreads, 0, current_stream(x.device())>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), x.size(0),
        x.size(1), out.size(2), out.size(3), strides4(x), strides4(out), win.h, win.w);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

template <class T>
__global__ void avg_pool_backward_cuda(T* gx, const T* gy, int64_t N, int64_t C, int64_t H,
                                       int64_t W, int64_t OH, int64_t OW, Strides4 xs,
                                       Strides4 ys, WindowPtrs wh, WindowPtrs ww,
                                       acc_t<T>* scratch) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t pl = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; pl < N * C;
       pl += step) {
    const int64_t n = pl / C, c = pl % C;
    A* acc = scratch + pl * H * W;
    for (int64_t i = 0; i < H * W; ++i) acc[i] = 0;
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        const A v = static_cast<A>(gy[n * ys.n + c * ys.c + oh * ys.h + ow * ys.w]) /
                    static_cast<A>(wh.div[oh] * ww.div[ow]);
        for (int64_t i = 0; i < wh.n[oh]; ++i) {
          A* row = acc + (wh.first[oh] + i * wh.step) * W + ww.first[ow];
          for (int64_t j = 0; j < ww.n[ow]; ++j) row[j * ww.step] += v;
        }
      }
    }
    for (int64_t i = 0; i < H * W; ++i) {
      gx[n * xs.n + c * xs.c + (i / W) * xs.h + (i % W) * xs.w] = static_cast<T>(acc[i]);
    }
  }
}

void avg_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const PoolGeom& g) {
  if (gx.numel() == 0) return;
  DeviceGuard guard(gx.device().index);
  const DevWindows win(g, gx.device());
  const int64_t N = gx.size(0), C = gx.size(1), H = gx.size(2), W = gx.size(3);
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const Tensor scratch = make_tensor({N * C * H * W}, dtype_of<A>::value, gx.device());
    avg_pool_backward_cuda<T><<<blocks_for(N * C), kThreads, 0,
                                current_stream(gx.device())>>>(
        static_cast<T*>(gx.data_ptr()), static_cast<const T*>(gy.data_ptr()), N, C, H, W,
        gy.size(2), gy.size(3), strides4(gx), strides4(gy), win.h, win.w,
        static_cast<A*>(scratch.data_ptr()));
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

IGNIS_REGISTER_KERNEL(max_pool2d_stub, CUDA, &max_pool_kernel);
IGNIS_REGISTER_KERNEL(max_pool2d_backward_stub, CUDA, &max_pool_backward_kernel);
IGNIS_REGISTER_KERNEL(avg_pool2d_stub, CUDA, &avg_pool_kernel);
IGNIS_REGISTER_KERNEL(avg_pool2d_backward_stub, CUDA, &avg_pool_backward_kernel);

}  // namespace ignis::cuda
