// CPU kernels of interpolate. Forward: one output row per work item, reading one source row
// (nearest) or blending two (bilinear), with the column indices and weights from the tables.
// Backward: the transposed scatter, one plane per work item, accumulated in acc_t.
#include <algorithm>
#include <vector>

#include "cpu/parallel.h"
#include "ops/interpolate.h"

namespace ignis::cpu {
namespace {

template <class T>
void nearest(const Tensor& out, const Tensor& x, const ResampleTable& th, const ResampleTable& tw) {
  const int64_t p = x.size(0), h = x.size(1), w = x.size(2), oh = out.size(1), ow = out.size(2);
  const T* px = x.data_ptr<T>();
  T* py = out.data_ptr<T>();
  parallel_for(0, p * oh, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(ow, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const T* src = px + ((r / oh) * h + th.i0[r % oh]) * w;
                   T* dst = py + r * ow;
                   for (int64_t j = 0; j < ow; ++j) dst[j] = src[tw.i0[j]];
                 }
               });
}

template <class T>
void bilinear(const Tensor& out, const Tensor& x, const ResampleTable& th,
              const ResampleTable& tw) {
  using A = acc_t<T>;
  const int64_t p = x.size(0), h = x.size(1), w = x.size(2), oh = out.size(1), ow = out.size(2);
  const T* px = x.data_ptr<T>();
  T* py = out.data_ptr<T>();
  std::vector<A> lw(static_cast<size_t>(ow));
  for (int64_t j = 0; j < ow; ++j) lw[j] = static_cast<A>(tw.lam[j]);
  parallel_for(0, p * oh, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(4 * ow, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t plane = (r / oh) * h, o = r % oh;
                   const T* r0 = px + (plane + th.i0[o]) * w;
                   const T* r1 = px + (plane + th.i1[o]) * w;
                   const A lh = static_cast<A>(th.lam[o]), lh0 = A(1) - lh;
                   T* dst = py + r * ow;
                   for (int64_t j = 0; j < ow; ++j) {
                     const int64_t a = tw.i0[j], c = tw.i1[j];
                     const A l = lw[j], l0 = A(1) - l;
                     const A top = l0 * static_cast<A>(r0[a]) + l * static_cast<A>(r0[c]);
                     const A bot = l0 * static_cast<A>(r1[a]) + l * static_cast<A>(r1[c]);
                     dst[j] = static_cast<T>(lh0 * top + lh * bot);
                   }
                 }
               });
}

// The transpose, one plane per work item (planes never share a source element, so no races):
// every output gradient is added to the (up to four) source elements it was read from.
template <class T>
void scatter(const Tensor& gx, const Tensor& g, const ResampleTable& th, const ResampleTable& tw,
             bool is_bilinear) {
  using A = acc_t<T>;
  const int64_t p = gx.size(0), h = gx.size(1), w = gx.size(2), oh = g.size(1), ow = g.size(2);
  const T* pg = g.data_ptr<T>();
  T* px = gx.data_ptr<T>();
  parallel_for(0, p, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(oh * ow, 1)),
               [&](int64_t b, int64_t e) {
                 std::vector<A> acc(static_cast<size_t>(h * w));
                 for (int64_t q = b; q < e; ++q) {
                   std::fill(acc.begin(), acc.end(), A(0));
                   for (int64_t o = 0; o < oh; ++o) {
                     const T* gr = pg + (q * oh + o) * ow;
                     A* r0 = acc.data() + th.i0[o] * w;
                     if (!is_bilinear) {
                       for (int64_t j = 0; j < ow; ++j) r0[tw.i0[j]] += static_cast<A>(gr[j]);
                       continue;
                     }
                     A* r1 = acc.data() + th.i1[o] * w;
                     const A lh = static_cast<A>(th.lam[o]), lh0 = A(1) - lh;
                     for (int64_t j = 0; j < ow; ++j) {
                       const A v = static_cast<A>(gr[j]), l = static_cast<A>(tw.lam[j]);
                       const A top = lh0 * v, bot = lh * v;
                       r0[tw.i0[j]] += (A(1) - l) * top;
                       r0[tw.i1[j]] += l * top;
                       r1[tw.i0[j]] += (A(1) - l) * bot;
                       r1[tw.i1[j]] += l * bot;
                     }
                   }
                   T* dst = px + q * h * w;
                   for (int64_t k = 0; k < h * w; ++k) dst[k] = static_cast<T>(acc[k]);
                 }
               });
}

void resample2d_backward_kernel(const Tensor& gx, const Tensor& g, const ResampleTable& th,
                                const ResampleTable& tw, bool is_bilinear) {
  dispatch_floating(g.dtype(), "interpolate_backward",
                    [&]<class T>() { scatter<T>(gx, g, th, tw, is_bilinear); });
}

void resample2d_kernel(const Tensor& out, const Tensor& x, const ResampleTable& th,
                       const ResampleTable& tw, bool is_bilinear) {
  if (is_bilinear) {
    dispatch_floating(x.dtype(), "interpolate", [&]<class T>() { bilinear<T>(out, x, th, tw); });
  } else {
    dispatch_dtype(x.dtype(), "interpolate", [&]<class T>() { nearest<T>(out, x, th, tw); });
  }
}

}  // namespace

IGNIS_REGISTER_KERNEL(resample2d_stub, CPU, &resample2d_kernel);
IGNIS_REGISTER_KERNEL(resample2d_backward_stub, CPU, &resample2d_backward_kernel);

}  // namespace ignis::cpu
