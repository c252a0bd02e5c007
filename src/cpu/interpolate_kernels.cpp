// CPU kernel of interpolate's forward: one output row per work item, reading one source row
// (nearest) or blending two (bilinear), with the column indices and weights from the tables.
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

}  // namespace ignis::cpu
