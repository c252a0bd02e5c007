// CPU kernel of cumsum (forward and reverse), accumulating in double for floating types (as
// PyTorch's CPU kernel) and int64 for integers.
#include "cpu/reduce.h"

namespace ignis::cpu {
namespace {

template <class T>
using scan_acc_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;

template <class T>
void cumsum_rows(const T* p, T* o, int64_t outer, int64_t n, bool reverse) {
  using A = scan_acc_t<T>;
  parallel_for(0, outer, std::max<int64_t>(kGrainSize / std::max<int64_t>(n, 1), 1),
               [&](int64_t b, int64_t e) {
                 for (int64_t k = b; k < e; ++k) {
                   const T* __restrict x = p + k * n;
                   T* __restrict y = o + k * n;
                   A acc = 0;
                   if (reverse) {
                     for (int64_t i = n; i-- > 0;) {
                       acc += static_cast<A>(static_cast<acc_t<T>>(x[i]));
                       y[i] = static_cast<T>(acc);
                     }
                   } else {
                     for (int64_t i = 0; i < n; ++i) {
                       acc += static_cast<A>(static_cast<acc_t<T>>(x[i]));
                       y[i] = static_cast<T>(acc);
                     }
                   }
                 }
               });
}

template <class T>
void cumsum_cols(const T* p, T* o, int64_t outer, int64_t n, int64_t inner, bool reverse) {
  using A = scan_acc_t<T>;
  const int64_t tiles = (inner + kTile - 1) / kTile;
  const int64_t work = std::max<int64_t>(n * std::min(inner, kTile), 1);
  parallel_for(0, outer * tiles, std::max<int64_t>(kGrainSize / work, 1),
               [&](int64_t b, int64_t e) {
                 A acc[kTile];
                 for (int64_t t = b; t < e; ++t) {
                   const int64_t ob = t / tiles, i0 = (t % tiles) * kTile;
                   const int64_t w = std::min(kTile, inner - i0);
                   for (int64_t i = 0; i < w; ++i) acc[i] = 0;
                   for (int64_t s = 0; s < n; ++s) {
                     const int64_t r = reverse ? n - 1 - s : s;
                     const int64_t off = (ob * n + r) * inner + i0;
                     const T* x = p + off;
                     T* y = o + off;
                     for (int64_t i = 0; i < w; ++i) {
                       acc[i] += static_cast<A>(static_cast<acc_t<T>>(x[i]));
                       y[i] = static_cast<T>(acc[i]);
                     }
                   }
                 }
               });
}

void cumsum_kernel(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) {
  if (out.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, dim);
  dispatch_dtype(x.dtype(), "cumsum", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("cumsum: bool inputs are summed as int64");
    } else {
      const T* p = static_cast<const T*>(L.data);
      T* o = out.data_ptr<T>();
      if (L.inner == 1) {
        cumsum_rows(p, o, L.outer, L.n, reverse);
      } else {
        cumsum_cols(p, o, L.outer, L.n, L.inner, reverse);
      }
    }
  });
}

}  // namespace
IGNIS_REGISTER_KERNEL(cumsum_stub, CPU, &cumsum_kernel);
}  // namespace ignis::cpu
