// CPU kernels of the joining and rearranging ops: cat (memcpy of contiguous blocks), flip,
// tril/triu. All move bytes only, so they dispatch on the element size.
#include <cstring>

#include "cpu/parallel.h"
#include "ops/dispatch_size.h"
#include "ops/index.h"

namespace ignis::cpu {
namespace {

/// Bytes below which a copy runs on the calling thread.
constexpr int64_t kCopyGrainBytes = int64_t{1} << 18;

// The output of cat is a sequence of rows (one per index of the dims before `dim`), each the
// concatenation of one block per input. Threads split the output bytes evenly and copy the
// pieces of blocks that fall in their range.
void cat_kernel(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  const int64_t es = static_cast<int64_t>(out.element_size());
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
  const size_t k = inputs.size();
  std::vector<int64_t> prefix(k + 1, 0);  // block byte offsets within an output row
  std::vector<const char*> src(k);
  for (size_t i = 0; i < k; ++i) {
    const int64_t n = inputs[i].numel();
    prefix[i + 1] = prefix[i] + (outer ? n / outer : 0) * es;
    src[i] = static_cast<const char*>(inputs[i].data_ptr());
  }
  const int64_t row = prefix[k];
  const int64_t total = row * outer;
  char* dst = static_cast<char*>(out.data_ptr());
  if (total == 0) return;
  parallel_for(0, total, kCopyGrainBytes, [&](int64_t b, int64_t e) {
    int64_t o = b / row;
    int64_t pos = b % row;
    size_t i = static_cast<size_t>(std::upper_bound(prefix.begin(), prefix.end(), pos) -
                                   prefix.begin()) - 1;
    while (b < e) {
      const int64_t block = prefix[i + 1] - prefix[i];
      const int64_t within = pos - prefix[i];
      const int64_t take = std::min(e - b, block - within);
      if (take > 0) {
        std::memcpy(dst + b, src[i] + o * block + within, static_cast<size_t>(take));
        b += take;
        pos += take;
      }
      if (pos == prefix[i + 1]) {
        if (++i == k) {
          i = 0;
          pos = 0;
          ++o;
        }
      }
    }
  });
}

// out[p] = x[p with the flipped coordinates mirrored]: rows along the last dim, each copied
// forwards or backwards from x's strides.
void flip_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& flip) {
  const int64_t nd = x.dim();
  const int64_t n = x.numel();
  if (n == 0) return;
  if (nd == 0) {
    std::memcpy(out.data_ptr(), x.data_ptr(), out.element_size());
    return;
  }
  Shape st(static_cast<size_t>(nd));
  int64_t base = 0;
  for (int64_t d = 0; d < nd; ++d) {
    st[d] = flip[d] ? -x.strides()[d] : x.strides()[d];
    if (flip[d]) base += (x.sizes()[d] - 1) * x.strides()[d];
  }
  const Shape sz = x.sizes().shape();
  const int64_t last = sz[nd - 1];
  const int64_t rows = n / last;
  const int64_t ls = st[nd - 1];
  dispatch_size(x.dtype(), [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr()) + base;
    T* op = static_cast<T*>(out.data_ptr());
    parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / last), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r) {
        int64_t off = 0, rem = r;
        for (int64_t d = nd - 2; d >= 0; --d) {
          off += (rem % sz[d]) * st[d];
          rem /= sz[d];
        }
        const T* s = xp + off;
        T* o = op + r * last;
        if (ls == 1) {
          std::memcpy(o, s, static_cast<size_t>(last) * sizeof(T));
        } else if (ls == -1) {
          for (int64_t j = 0; j < last; ++j) o[j] = s[-j];
        } else {
          for (int64_t j = 0; j < last; ++j) o[j] = s[j * ls];
        }
      }
    });
  });
}

// tril keeps column j of row i when j <= i + diagonal, triu when j >= i + diagonal.
void tri_kernel(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t nd = x.dim();
  const int64_t R = x.sizes()[nd - 2], C = x.sizes()[nd - 1];
  const int64_t rows = R == 0 || C == 0 ? 0 : x.numel() / C;
  const size_t es = x.element_size();
  const char* xp = static_cast<const char*>(x.data_ptr());
  char* op = static_cast<char*>(out.data_ptr());
  parallel_for(0, rows, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(C, 1)),
               [&](int64_t b, int64_t e) {
                 for (int64_t r = b; r < e; ++r) {
                   const int64_t i = r % R;
                   const char* s = xp + r * C * es;
                   char* o = op + r * C * es;
                   // [lo, hi): the kept columns.
                   int64_t lo = 0, hi = C;
                   if (lower) hi = std::clamp<int64_t>(i + diagonal + 1, 0, C);
                   else lo = std::clamp<int64_t>(i + diagonal, 0, C);
                   if (lo >= hi) {
                     std::memset(o, 0, C * es);
                     continue;
                   }
                   std::memset(o, 0, lo * es);
                   std::memcpy(o + lo * es, s + lo * es, (hi - lo) * es);
                   std::memset(o + hi * es, 0, (C - hi) * es);
                 }
               });
}

}  // namespace

IGNIS_REGISTER_KERNEL(cat_stub, CPU, &cat_kernel);
IGNIS_REGISTER_KERNEL(flip_stub, CPU, &flip_kernel);
IGNIS_REGISTER_KERNEL(tri_stub, CPU, &tri_kernel);

}  // namespace ignis::cpu
