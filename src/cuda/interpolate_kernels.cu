// CUDA kernels of interpolate's table-driven resampling (nearest, nearest-exact and bilinear, for
// the stubs of cpu/interpolate_kernels.cpp; bicubic and area are compositions of other ops).
// The tables of both spatial dims reach the device in one int64 buffer per call (the weights as
// doubles, bit for bit), uploaded through the pinned cache without a host wait (detail::upload),
// as the pooling windows are.
//
// Forward: one thread per output element, with the CPU kernel's formula in acc_t.
// Backward: one thread per source element (a gather, no atomics). Each dim's table is inverted on
// the host into, per source index, the output indices that read it in increasing order (with
// which of i0 / i1 they read it as), so a thread adds its contributions in exactly the order the
// CPU kernel's scatter adds them to that element, in acc_t (float for bfloat16): the result is
// deterministic and, up to fused multiply-adds, the CPU's.
#include <bit>
#include <vector>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/loops.cuh"
#include "ignis/ops.h"
#include "ops/dispatch_size.h"
#include "ops/interpolate.h"

namespace ignis::cuda {
namespace {

// ---- forward: out [P, OH, OW] from x [P, H, W]

struct FwdTable {  // device pointers into the call's buffer
  const int64_t *i0, *i1;
  const double* lam;
};

template <class T>
__global__ void nearest_cuda(const T* x, T* out, int64_t total, int64_t h, int64_t w, int64_t oh,
                             int64_t ow, FwdTable th, FwdTable tw) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % ow, r = e / ow, o = r % oh, q = r / oh;
    out[e] = x[(q * h + th.i0[o]) * w + tw.i0[j]];
  }
}

template <class T>
__global__ void bilinear_cuda(const T* x, T* out, int64_t total, int64_t h, int64_t w, int64_t oh,
                              int64_t ow, FwdTable th, FwdTable tw) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t j = e % ow, r = e / ow, o = r % oh, plane = (r / oh) * h;
    const T* r0 = x + (plane + th.i0[o]) * w;
    const T* r1 = x + (plane + th.i1[o]) * w;
    const A lh = static_cast<A>(th.lam[o]), lh0 = A(1) - lh;
    const int64_t a = tw.i0[j], c = tw.i1[j];
    const A l = static_cast<A>(tw.lam[j]), l0 = A(1) - l;
    const A top = l0 * static_cast<A>(r0[a]) + l * static_cast<A>(r0[c]);
    const A bot = l0 * static_cast<A>(r1[a]) + l * static_cast<A>(r1[c]);
    out[e] = static_cast<T>(lh0 * top + lh * bot);
  }
}

void check_table(const ResampleTable& t, int64_t out, int64_t in, const char* dim) {
  const auto n = static_cast<size_t>(out);
  IGNIS_CHECK(t.i0.size() == n && t.i1.size() == n && t.lam.size() == n, "interpolate: the ", dim,
              " table has ", t.i0.size(), " entries for ", out, " outputs");
  for (size_t o = 0; o < n; ++o) {  // the kernels index x with these unchecked
    IGNIS_CHECK(t.i0[o] >= 0 && t.i0[o] < in && t.i1[o] >= 0 && t.i1[o] < in, "interpolate: the ",
                dim, " table reads index ", t.i0[o], " or ", t.i1[o], " of a dim of size ", in);
  }
}

// The tables of both dims in one buffer: i0, i1 and lam (as int64 bits) of h, then of w.
struct FwdTables {
  Tensor buf;
  FwdTable h, w;
  FwdTables(const ResampleTable& th, const ResampleTable& tw, Device d) {
    std::vector<int64_t> host;
    host.reserve(3 * (th.i0.size() + tw.i0.size()));
    for (const ResampleTable* t : {&th, &tw}) {
      host.insert(host.end(), t->i0.begin(), t->i0.end());
      host.insert(host.end(), t->i1.begin(), t->i1.end());
      for (double v : t->lam) host.push_back(std::bit_cast<int64_t>(v));
    }
    buf = detail::upload(host.data(), host.size() * sizeof(int64_t), kInt64,
                         static_cast<int64_t>(host.size()), d);
    const int64_t* p = buf.data_ptr<int64_t>();
    const auto oh = static_cast<int64_t>(th.i0.size()), ow = static_cast<int64_t>(tw.i0.size());
    h = {p, p + oh, reinterpret_cast<const double*>(p + 2 * oh)};
    p += 3 * oh;
    w = {p, p + ow, reinterpret_cast<const double*>(p + 2 * ow)};
  }
};

void resample2d_kernel(const Tensor& out, const Tensor& x, const ResampleTable& th,
                       const ResampleTable& tw, bool is_bilinear) {
  const int64_t h = x.size(1), w = x.size(2), oh = out.size(1), ow = out.size(2);
  const int64_t total = out.numel();
  // The dtype is checked (the CPU kernel's error) before an empty result returns.
  auto run = [&]<class T>() {
    if (total == 0) return;
    check_table(th, oh, h, "height");
    check_table(tw, ow, w, "width");
    DeviceGuard guard(x.device().index);
    const cudaStream_t s = current_stream(x.device());
    const FwdTables t(th, tw, x.device());
    const auto* px = static_cast<const T*>(x.data_ptr());
    auto* py = static_cast<T*>(out.data_ptr());
    if constexpr (std::is_floating_point_v<acc_t<T>>) {
      bilinear_cuda<T>
          <<<blocks_for(total), kThreads, 0, s>>>(px, py, total, h, w, oh, ow, t.h, t.w);
    } else {  // nearest only copies: T is an unsigned type of the element's size
      nearest_cuda<T><<<blocks_for(total), kThreads, 0, s>>>(px, py, total, h, w, oh, ow, t.h, t.w);
    }
    IGNIS_CUDA_CHECK(cudaGetLastError());
  };
  if (is_bilinear) {
    dispatch_floating(x.dtype(), "interpolate", run);
  } else {
    dispatch_size(x.dtype(), run);
  }
}

// ---- backward: grad_x [P, H, W] from grad [P, OH, OW]

// One dim's table inverted: the outputs reading source index i are entries [start[i],
// start[i + 1]), each o * 4 + (1 if i0[o] == i) + (2 if i1[o] == i), o increasing.
struct BwdTable {
  const int64_t *start, *entry;
  const double* lam;
};

template <class T>
__global__ void resample_backward_cuda(const T* g, T* gx, int64_t total, int64_t h, int64_t w,
                                       int64_t oh, int64_t ow, BwdTable th, BwdTable tw,
                                       bool is_bilinear) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < total;
       e += step) {
    const int64_t xi = e % w, r = e / w, yi = r % h, q = r / h;
    const T* gq = g + q * oh * ow;
    const int64_t hb = th.start[yi], he = th.start[yi + 1];
    const int64_t wb = tw.start[xi], we = tw.start[xi + 1];
    A acc = A(0);
    for (int64_t a = hb; a < he; ++a) {
      const int64_t eh = th.entry[a], o = eh >> 2;
      const T* gr = gq + o * ow;
      if (!is_bilinear) {
        for (int64_t b = wb; b < we; ++b) acc += static_cast<A>(gr[tw.entry[b] >> 2]);
        continue;
      }
      const A lh = static_cast<A>(th.lam[o]), lh0 = A(1) - lh;
      for (int64_t b = wb; b < we; ++b) {
        const int64_t ew = tw.entry[b], j = ew >> 2;
        // The CPU's terms and their order: r0[i0], r0[i1], r1[i0], r1[i1].
        const A v = static_cast<A>(gr[j]), l = static_cast<A>(tw.lam[j]);
        const A top = lh0 * v, bot = lh * v;
        if (eh & 1) {
          if (ew & 1) acc += (A(1) - l) * top;
          if (ew & 2) acc += l * top;
        }
        if (eh & 2) {
          if (ew & 1) acc += (A(1) - l) * bot;
          if (ew & 2) acc += l * bot;
        }
      }
    }
    gx[e] = static_cast<T>(acc);
  }
}

// Both dims' inverted tables in one buffer: per dim start (in + 1), entries, lam.
struct BwdTables {
  Tensor buf;
  BwdTable h, w;
  BwdTables(const ResampleTable& th, int64_t ih, const ResampleTable& tw, int64_t iw,
            bool is_bilinear, Device d) {
    std::vector<int64_t> host;
    std::vector<size_t> at;  // offsets of each dim's start, entry and lam in host
    for (auto [t, in] : {std::pair{&th, ih}, std::pair{&tw, iw}}) {
      const auto out = static_cast<int64_t>(t->i0.size());
      // A counting sort by source index; o increasing within each source.
      std::vector<int64_t> count(static_cast<size_t>(in) + 1, 0);
      auto reads_i1 = [&](int64_t o) { return is_bilinear && t->i1[o] != t->i0[o]; };
      for (int64_t o = 0; o < out; ++o) {
        ++count[t->i0[o] + 1];
        if (reads_i1(o)) ++count[t->i1[o] + 1];
      }
      for (int64_t i = 0; i < in; ++i) count[i + 1] += count[i];
      const size_t base = host.size();
      at.push_back(base);
      host.insert(host.end(), count.begin(), count.end());
      const size_t entries = host.size();
      at.push_back(entries);
      host.resize(entries + static_cast<size_t>(count[in]));
      for (int64_t o = 0; o < out; ++o) {
        const bool same = is_bilinear && t->i1[o] == t->i0[o];
        host[entries + count[t->i0[o]]++] = o * 4 + 1 + (same ? 2 : 0);
        if (reads_i1(o)) host[entries + count[t->i1[o]]++] = o * 4 + 2;
      }
      at.push_back(host.size());
      for (double v : t->lam) host.push_back(std::bit_cast<int64_t>(v));
    }
    buf = detail::upload(host.data(), host.size() * sizeof(int64_t), kInt64,
                         static_cast<int64_t>(host.size()), d);
    const int64_t* p = buf.data_ptr<int64_t>();
    h = {p + at[0], p + at[1], reinterpret_cast<const double*>(p + at[2])};
    w = {p + at[3], p + at[4], reinterpret_cast<const double*>(p + at[5])};
  }
};

void resample2d_backward_kernel(const Tensor& gx, const Tensor& g, const ResampleTable& th,
                                const ResampleTable& tw, bool is_bilinear) {
  const int64_t h = gx.size(1), w = gx.size(2), oh = g.size(1), ow = g.size(2);
  dispatch_floating(g.dtype(), "interpolate_backward", [&]<class T>() {
    const int64_t total = gx.numel();
    if (total == 0) return;
    check_table(th, oh, h, "height");
    check_table(tw, ow, w, "width");
    DeviceGuard guard(g.device().index);
    const BwdTables t(th, h, tw, w, is_bilinear, g.device());
    resample_backward_cuda<T><<<blocks_for(total), kThreads, 0, current_stream(g.device())>>>(
        static_cast<const T*>(g.data_ptr()), static_cast<T*>(gx.data_ptr()), total, h, w, oh, ow,
        t.h, t.w, is_bilinear);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

IGNIS_REGISTER_KERNEL(resample2d_stub, CUDA, &resample2d_kernel);
IGNIS_REGISTER_KERNEL(resample2d_backward_stub, CUDA, &resample2d_backward_kernel);

}  // namespace ignis::cuda
