// CPU pooling kernels: direct loops over the windows of ops/pool.h, one N*C
// plane per task. (oneDNN's pooling keeps its argmax in an opaque workspace,
// while max_pool2d_with_indices must return PyTorch's flat indices, and pooling
// is memory-bound: one pass over x either way.) float32 and float64 run
// natively; bfloat16 is accumulated in float32.
#include <cmath>
#include <limits>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ops/pool.h"

namespace ignis::cpu {
namespace {

int64_t planes(const Tensor& t) { return t.size(0) * t.size(1); }

/// Planes per task: enough work (~32k elements) to pay for a thread.
int64_t plane_grain(int64_t plane_elems) {
  return std::max<int64_t>(1, kGrainSize / std::max<int64_t>(1, plane_elems));
}

void max_pool_kernel(const Tensor& out, const Tensor& indices, const Tensor& x, const PoolGeom& g) {
  const int64_t H = g.h.in, W = g.w.in, OH = g.h.out(), OW = g.w.out();
  int64_t* ip = indices.defined() ? indices.data_ptr<int64_t>() : nullptr;
  dispatch_floating(x.dtype(), "max_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    parallel_for(0, planes(x), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const T* xs = xp + pl * H * W;
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            A best = -std::numeric_limits<A>::infinity();
            int64_t arg = -1;
            for (int64_t i = 0; i < g.h.count[oh]; ++i) {
              const int64_t h = g.h.start[oh] + i * g.h.step;
              if (h < 0 || h >= H) continue;
              for (int64_t j = 0; j < g.w.count[ow]; ++j) {
                const int64_t w = g.w.start[ow] + j * g.w.step;
                if (w < 0 || w >= W) continue;
                const A v = static_cast<A>(xs[h * W + w]);
                if (arg < 0 || v > best || std::isnan(v)) {
                  best = v;
                  arg = h * W + w;
                }
              }
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

void max_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const Tensor& indices) {
  const int64_t HW = gx.size(2) * gx.size(3), OHW = gy.size(2) * gy.size(3);
  const int64_t* ip = indices.data_ptr<int64_t>();
  dispatch_floating(gx.dtype(), "max_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(gy.data_ptr());
    T* xp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, planes(gx), plane_grain(HW + OHW), [&](int64_t p0, int64_t p1) {
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
  dispatch_floating(x.dtype(), "avg_pool2d", [&]<class T>() {
    using A = acc_t<T>;
    const T* xp = static_cast<const T*>(x.data_ptr());
    T* op = static_cast<T*>(out.data_ptr());
    parallel_for(0, planes(x), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      for (int64_t pl = p0; pl < p1; ++pl) {
        const T* xs = xp + pl * H * W;
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            A sum = 0;
            for (int64_t i = 0; i < g.h.count[oh]; ++i) {
              const int64_t h = g.h.start[oh] + i * g.h.step;
              if (h < 0 || h >= H) continue;
              for (int64_t j = 0; j < g.w.count[ow]; ++j) {
                const int64_t w = g.w.start[ow] + j * g.w.step;
                if (w < 0 || w >= W) continue;
                sum += static_cast<A>(xs[h * W + w]);
              }
            }
            const A div = static_cast<A>(g.h.div[oh] * g.w.div[ow]);
            op[(pl * OH + oh) * OW + ow] = static_cast<T>(sum / div);
          }
        }
      }
    });
  });
}

void avg_pool_backward_kernel(const Tensor& gx, const Tensor& gy, const PoolGeom& g) {
  const int64_t H = g.h.in, W = g.w.in, OH = g.h.out(), OW = g.w.out();
  dispatch_floating(gx.dtype(), "avg_pool2d_backward", [&]<class T>() {
    using A = acc_t<T>;
    const T* gp = static_cast<const T*>(gy.data_ptr());
    T* xp = static_cast<T*>(gx.data_ptr());
    parallel_for(0, planes(gx), plane_grain(H * W), [&](int64_t p0, int64_t p1) {
      std::vector<A> acc(static_cast<size_t>(H * W));
      for (int64_t pl = p0; pl < p1; ++pl) {
        std::fill(acc.begin(), acc.end(), A(0));
        for (int64_t oh = 0; oh < OH; ++oh) {
          for (int64_t ow = 0; ow < OW; ++ow) {
            const A v = static_cast<A>(gp[(pl * OH + oh) * OW + ow]) /
                        static_cast<A>(g.h.div[oh] * g.w.div[ow]);
            for (int64_t i = 0; i < g.h.count[oh]; ++i) {
              const int64_t h = g.h.start[oh] + i * g.h.step;
              if (h < 0 || h >= H) continue;
              for (int64_t j = 0; j < g.w.count[ow]; ++j) {
                const int64_t w = g.w.start[ow] + j * g.w.step;
                if (w < 0 || w >= W) continue;
                acc[h * W + w] += v;
              }
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
