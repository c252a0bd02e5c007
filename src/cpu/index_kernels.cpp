// CPU kernels of the indexing ops: gather-style reads (index_select, gather, advanced
// indexing), scatter-style writes, index_add, masked_fill/masked_select, nonzero, one_hot.
// Index values are checked in the loops; a bad one is reported, never thrown from a thread.
#include <atomic>
#include <cstring>
#include <limits>

#include "cpu/loops.h"
#include "cpu/parallel.h"
#include "ops/dispatch_size.h"
#include "ops/index.h"

namespace ignis::cpu {
namespace {

/// The first bad index seen by any thread.
struct BadRecorder {
  std::atomic<bool> found{false};
  int64_t value = 0;
  void set(int64_t v) {
    bool expected = false;
    if (found.compare_exchange_strong(expected, true)) value = v;
  }
  BadIndex get() const { return {found.load(), value}; }
};

/// Wraps and checks index `i`; false when out of range.
inline bool fix_index(int64_t& i, const IndexBounds& b) {
  if (!b.check) return true;
  if (b.wrap && i < 0) i += b.size;
  return static_cast<uint64_t>(i) < static_cast<uint64_t>(b.size);
}

template <class T>
inline T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>) return a || b;
  else return static_cast<T>(static_cast<acc_t<T>>(a) + static_cast<acc_t<T>>(b));
}

/// Runs row over the iterator, in parallel when the work (elements x cost) is large.
template <class Row>
void run_rows(const TensorIter& it, int64_t cost, const Row& row) {
  if (it.numel == 0) return;
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(cost, 1));
  if (it.numel <= grain) {
    for_each_row(it, 0, it.numel, row);
    return;
  }
  parallel_for(0, it.numel, grain, [&](int64_t b, int64_t e) { for_each_row(it, b, e, row); });
}

// ---- gather: out = *(src + index * stride)

template <class T, class I>
BadIndex gather_impl(const TensorIter& it, int64_t stride, IndexBounds b) {
  BadRecorder bad;
  run_rows(it, 1, [&](char** p, int64_t n, const int64_t* s) {
    char* out = p[0];
    const char* src = p[1];
    const char* idx = p[2];
    if (s[2] == 0) {  // one index for the whole row (index_select/embedding rows): a row copy
      int64_t i = *reinterpret_cast<const I*>(idx);
      const int64_t orig = i;
      if (!fix_index(i, b)) return bad.set(orig);
      const char* sp = src + i * stride;
      if (s[0] == sizeof(T) && s[1] == sizeof(T)) {
        std::memcpy(out, sp, static_cast<size_t>(n) * sizeof(T));
      } else {
        for (int64_t k = 0; k < n; ++k) {
          *reinterpret_cast<T*>(out + k * s[0]) = *reinterpret_cast<const T*>(sp + k * s[1]);
        }
      }
      return;
    }
    if (s[0] == sizeof(T) && s[1] == 0 && s[2] == sizeof(I)) {  // 1-D gather
      T* o = reinterpret_cast<T*>(out);
      const I* ix = reinterpret_cast<const I*>(idx);
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = ix[k];
        if (!fix_index(i, b)) return bad.set(ix[k]);
        o[k] = *reinterpret_cast<const T*>(src + i * stride);
      }
      return;
    }
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = *reinterpret_cast<const I*>(idx + k * s[2]);
      const int64_t orig = i;
      if (!fix_index(i, b)) return bad.set(orig);
      *reinterpret_cast<T*>(out + k * s[0]) =
          *reinterpret_cast<const T*>(src + k * s[1] + i * stride);
    }
  });
  return bad.get();
}

BadIndex gather_kernel(const TensorIter& it, DType dt, DType index_dt, int64_t stride,
                       IndexBounds b) {
  return dispatch_size(dt, [&]<class T>() {
    return dispatch_index(index_dt, [&]<class I>() { return gather_impl<T, I>(it, stride, b); });
  });
}

// ---- put: *(dst + index * stride) = src (or +=)

template <class T, class I>
BadIndex put_impl(const TensorIter& it, int64_t stride, IndexBounds b, bool accumulate) {
  BadRecorder bad;
  auto row = [&](char** p, int64_t n, const int64_t* s) {
    for (int64_t k = 0; k < n; ++k) {
      int64_t i = *reinterpret_cast<const I*>(p[2] + k * s[2]);
      const int64_t orig = i;
      if (!fix_index(i, b)) return bad.set(orig);
      T* d = reinterpret_cast<T*>(p[0] + k * s[0] + i * stride);
      const T v = *reinterpret_cast<const T*>(p[1] + k * s[1]);
      *d = accumulate ? add_values(*d, v) : v;
    }
  };
  // Duplicate indices make accumulation order-dependent: run it on one thread.
  if (accumulate) {
    if (it.numel) for_each_row(it, 0, it.numel, row);
  } else {
    run_rows(it, 1, row);
  }
  return bad.get();
}

BadIndex put_kernel(const TensorIter& it, DType dt, DType index_dt, int64_t stride,
                    IndexBounds b, bool accumulate) {
  return dispatch_dtype(dt, "index_put_", [&]<class T>() {
    return dispatch_index(index_dt,
                          [&]<class I>() { return put_impl<T, I>(it, stride, b, accumulate); });
  });
}

// ---- scatter / scatter_add: one iterator element is a whole line along the scatter dim

template <class T, class I>
BadIndex scatter_impl(const TensorIter& it, const ScatterArgs& a) {
  BadRecorder bad;
  run_rows(it, a.line, [&](char** p, int64_t n, const int64_t* s) {
    // Line position outer, row inner: the row (other dims) is usually the contiguous one.
    for (int64_t l = 0; l < a.line; ++l) {
      const char* il = p[1] + l * a.index_stride;
      const char* sl = p[2] + l * a.src_stride;
      for (int64_t k = 0; k < n; ++k) {
        int64_t i = *reinterpret_cast<const I*>(il + k * s[1]);
        const int64_t orig = i;
        if (!fix_index(i, a.bounds)) return bad.set(orig);
        T* d = reinterpret_cast<T*>(p[0] + k * s[0] + i * a.self_stride);
        const T v = *reinterpret_cast<const T*>(sl + k * s[2]);
        *d = a.accumulate ? add_values(*d, v) : v;
      }
    }
  });
  return bad.get();
}

BadIndex scatter_kernel(const TensorIter& it, DType dt, DType index_dt, const ScatterArgs& a) {
  return dispatch_dtype(dt, "scatter", [&]<class T>() {
    return dispatch_index(index_dt, [&]<class I>() { return scatter_impl<T, I>(it, a); });
  });
}

// ---- index_add: self[.., index[e], ..] += alpha * source[.., e, ..]

template <class T>
struct RowAdder {
  using A = acc_t<T>;
  A alpha;
  int64_t n, ds, ss;  // row length, element strides of dst and src
  void operator()(T* __restrict d, const T* __restrict s) const {
    if constexpr (std::is_same_v<T, bool>) {
      for (int64_t k = 0; k < n; ++k) d[k * ds] = d[k * ds] || (alpha && s[k * ss]);
    } else if (ds == 1 && ss == 1) {
      if (alpha == A(1)) {
        for (int64_t k = 0; k < n; ++k) d[k] = static_cast<T>(A(d[k]) + A(s[k]));
      } else {
        for (int64_t k = 0; k < n; ++k) d[k] = static_cast<T>(A(d[k]) + alpha * A(s[k]));
      }
    } else {
      for (int64_t k = 0; k < n; ++k) {
        d[k * ds] = static_cast<T>(A(d[k * ds]) + alpha * A(s[k * ss]));
      }
    }
  }
};

template <class T, class I>
BadIndex index_add_impl(const Tensor& self, int64_t dim, const Tensor& index, const Tensor& src,
                        Scalar alpha) {
  const auto st = *collapse3(self, dim);
  const auto rt = *collapse3(src, dim);
  const int64_t nd = self.dim();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.sizes()[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= self.sizes()[d];
  const int64_t N = nd == 0 ? 1 : self.sizes()[dim];
  const int64_t E = index.numel();
  const I* idx = index.data_ptr<I>();
  // Check every index first, so that a bad one leaves self untouched.
  bool any_bad = false;
  for (int64_t e = 0; e < E; ++e) any_bad |= static_cast<uint64_t>(idx[e]) >= uint64_t(N);
  if (any_bad) {
    for (int64_t e = 0; e < E; ++e) {
      if (static_cast<uint64_t>(idx[e]) >= uint64_t(N)) return {true, int64_t(idx[e])};
    }
  }
  if (outer == 0 || inner == 0 || E == 0) return {};
  T* sp = static_cast<T*>(self.data_ptr());
  const T* rp = static_cast<const T*>(src.data_ptr());
  const RowAdder<T> add{alpha.to<acc_t<T>>(), inner, st[2], rt[2]};
  auto edge = [&](int64_t o, int64_t e) {
    add(sp + o * st[0] + int64_t(idx[e]) * st[1], rp + o * rt[0] + e * rt[1]);
  };
  const int64_t work = outer * E * inner;
  const int max_threads = omp_get_max_threads();
  if (work <= 4 * kGrainSize || max_threads == 1 || omp_in_parallel() || E < 4) {
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t e = 0; e < E; ++e) edge(o, e);
    }
    return {};
  }
  if (outer >= 2 * max_threads) {  // independent outer slices
    parallel_for(0, outer, 1, [&](int64_t b, int64_t e) {
      for (int64_t o = b; o < e; ++o) {
        for (int64_t k = 0; k < E; ++k) edge(o, k);
      }
    });
    return {};
  }
  // Race-free and deterministic: thread t owns destinations [N*t/nt, N*(t+1)/nt). Phase 1 buckets
  // each thread's chunk of edges by owner (a counting sort, stable); phase 2 has every owner add
  // its edges in their original order, so the result does not depend on the thread count's
  // scheduling and no two threads write the same row.
  const int nt = static_cast<int>(std::min<int64_t>(max_threads, E));
  std::vector<int64_t> counts(static_cast<size_t>(nt) * (nt + 1), 0);
  Tensor perm_t = make_tensor({E}, kInt64);
  int64_t* perm = perm_t.data_ptr<int64_t>();
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int T_ = omp_get_num_threads();  // may be fewer than asked
    if (T_ == nt) {
      const int64_t eb = E * t / nt, ee = E * (t + 1) / nt;
      int64_t* off = counts.data() + static_cast<size_t>(t) * (nt + 1);
      for (int64_t e = eb; e < ee; ++e) ++off[int64_t(idx[e]) * nt / N + 1];
      for (int k = 0; k < nt; ++k) off[k + 1] += off[k];
      std::vector<int64_t> cur(off, off + nt);
      for (int64_t e = eb; e < ee; ++e) perm[eb + cur[int64_t(idx[e]) * nt / N]++] = e;
#pragma omp barrier
      for (int64_t o = 0; o < outer; ++o) {
        for (int c = 0; c < nt; ++c) {
          const int64_t cb = E * c / nt;
          const int64_t* coff = counts.data() + static_cast<size_t>(c) * (nt + 1);
          for (int64_t p = coff[t]; p < coff[t + 1]; ++p) edge(o, perm[cb + p]);
        }
      }
    } else if (t == 0) {  // the runtime gave us fewer threads: do it serially
      for (int64_t o = 0; o < outer; ++o) {
        for (int64_t e = 0; e < E; ++e) edge(o, e);
      }
    }
  }
  return {};
}

BadIndex index_add_kernel(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& source, Scalar alpha) {
  return dispatch_dtype(self.dtype(), "index_add", [&]<class T>() {
    return dispatch_index(index.dtype(), [&]<class I>() {
      return index_add_impl<T, I>(self, dim, index, source, alpha);
    });
  });
}

// ---- masked_fill

// Written out (rather than through cpu_kernel) so that the select vectorises: restrict
// parameters (GCC ignores restrict on locals), the mask read as bytes (GCC does not vectorise
// selects on bool loads), and both operands loaded unconditionally.
template <class T>
void select_row(T* __restrict o, const T* __restrict a, const uint8_t* __restrict m, int64_t n,
                const T v) {
  for (int64_t k = 0; k < n; ++k) {
    const T ak = a[k];
    o[k] = m[k] != 0 ? v : ak;
  }
}
template <class T>
void select_row_inplace(T* __restrict o, const uint8_t* __restrict m, int64_t n, const T v) {
  for (int64_t k = 0; k < n; ++k) {
    const T ok = o[k];
    o[k] = m[k] != 0 ? v : ok;
  }
}

template <class T>
void masked_fill_impl(const TensorIter& it, const T v) {
  run_rows(it, 1, [v](char** p, int64_t n, const int64_t* s) {
    constexpr auto es = static_cast<int64_t>(sizeof(T));
    const auto* m = reinterpret_cast<const uint8_t*>(p[2]);
    T* o = reinterpret_cast<T*>(p[0]);
    if (s[0] == es && s[1] == es && s[2] == 1) {
      if (p[0] == p[1]) select_row_inplace(o, m, n, v);
      else select_row(o, reinterpret_cast<const T*>(p[1]), m, n, v);
      return;
    }
    if (s[2] == 0 && s[0] == es && s[1] == es) {  // one mask value for the row
      if (*m != 0) std::fill(o, o + n, v);
      else if (p[0] != p[1]) std::memmove(o, p[1], static_cast<size_t>(n) * sizeof(T));
      return;
    }
    for (int64_t k = 0; k < n; ++k) {
      *reinterpret_cast<T*>(p[0] + k * s[0]) =
          m[k * s[2]] != 0 ? v : *reinterpret_cast<const T*>(p[1] + k * s[1]);
    }
  });
}

void masked_fill_kernel(const TensorIter& it, DType dt, Scalar value) {
  dispatch_dtype(dt, "masked_fill", [&]<class T>() {
    masked_fill_impl<T>(it, static_cast<T>(value.to<acc_t<T>>()));
  });
}

// ---- stream compaction (masked_select, nonzero): count per chunk, prefix, fill per chunk

/// count(b, e) -> elements kept in [b, e); fill(b, e, j, j_end) writes them to positions
/// [j, j_end). `alloc(total)` runs between the phases.
template <class Count, class Alloc, class Fill>
void compact(int64_t n, const Count& count, const Alloc& alloc, const Fill& fill) {
  const int64_t chunks =
      std::max<int64_t>(1, std::min<int64_t>(omp_get_max_threads(), n / kGrainSize));
  std::vector<int64_t> start(static_cast<size_t>(chunks) + 1, 0);
  auto bounds = [&](int64_t c) { return std::pair{n * c / chunks, n * (c + 1) / chunks}; };
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      auto [lo, hi] = bounds(c);
      start[c + 1] = count(lo, hi);
    }
  });
  for (int64_t c = 0; c < chunks; ++c) start[c + 1] += start[c];
  alloc(start[chunks]);
  parallel_for(0, chunks, 1, [&](int64_t b, int64_t e) {
    for (int64_t c = b; c < e; ++c) {
      auto [lo, hi] = bounds(c);
      fill(lo, hi, start[c], start[c + 1]);
    }
  });
}

Tensor masked_select_kernel(const Tensor& x, const Tensor& mask) {
  const auto* m = static_cast<const uint8_t*>(mask.data_ptr());  // bytes: the count vectorises
  Tensor out;
  dispatch_size(x.dtype(), [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    compact(
        x.numel(),
        [&](int64_t b, int64_t e) {
          int64_t c = 0;
          for (int64_t i = b; i < e; ++i) c += m[i] != 0;
          return c;
        },
        [&](int64_t total) { out = make_tensor({total}, x.dtype(), x.device()); },
        [&](int64_t b, int64_t e, int64_t j, int64_t j_end) {
          // Branchless: store every element, advance only past kept ones. Stop once the chunk's
          // last kept element is written (the next slot belongs to the next chunk).
          T* o = static_cast<T*>(out.data_ptr());
          for (int64_t i = b; i < e && j < j_end; ++i) {
            o[j] = xp[i];
            j += m[i] != 0;
          }
        });
  });
  return out;
}

Tensor nonzero_kernel(const Tensor& x) {
  const int64_t nd = x.dim();
  const IntArrayRef sizes = x.sizes();
  Tensor out;
  // Compare in the storage type; bfloat16 -0.0 would compare equal anyway via float.
  // bool read as bytes (vectorises).
  dispatch_dtype(x.dtype() == kBool ? kUInt8 : x.dtype(), "nonzero", [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    auto nz = [](T v) { return static_cast<acc_t<T>>(v) != acc_t<T>(0); };
    compact(
        x.numel(),
        [&](int64_t b, int64_t e) {
          int64_t c = 0;
          for (int64_t i = b; i < e; ++i) c += nz(xp[i]);
          return c;
        },
        [&](int64_t total) { out = make_tensor({total, nd}, kInt64, x.device()); },
        [&](int64_t b, int64_t e, int64_t j, int64_t j_end) {
          if (j >= j_end) return;
          int64_t* o = out.data_ptr<int64_t>();
          if (nd == 0) {  // a 0-d input: rows of no coordinates
            return;
          }
          // Walk rows of the last dim: the leading coordinates are fixed along a row.
          const int64_t last = sizes[nd - 1];
          Shape pos(static_cast<size_t>(nd), 0);
          int64_t rem = b;
          for (int64_t d = nd - 1; d >= 0; --d) {
            pos[d] = rem % sizes[d];
            rem /= sizes[d];
          }
          int64_t i = b;
          while (i < e && j < j_end) {
            const int64_t row_end = std::min(e, i + (last - pos[nd - 1]));
            // Branchless, as in masked_select: write every position, advance past nonzeros.
            for (int64_t k = pos[nd - 1]; i < row_end && j < j_end; ++i, ++k) {
              int64_t* r = o + j * nd;
              for (int64_t d = 0; d < nd - 1; ++d) r[d] = pos[d];
              r[nd - 1] = k;
              j += nz(xp[i]);
            }
            pos[nd - 1] = 0;
            for (int64_t d = nd - 2; d >= 0; --d) {  // next row
              if (++pos[d] < sizes[d]) break;
              pos[d] = 0;
            }
          }
        });
  });
  return out;
}

// ---- one_hot and integer min/max

BadIndex one_hot_kernel(const Tensor& out, const Tensor& index, int64_t classes) {
  return dispatch_index(index.dtype(), [&]<class I>() {
    const I* ix = index.data_ptr<I>();
    int64_t* o = out.data_ptr<int64_t>();
    BadRecorder bad;
    parallel_for(0, index.numel(), kGrainSize, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) {
        const int64_t v = ix[i];
        if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(classes)) return bad.set(v);
        o[i * classes + v] = 1;
      }
    });
    return bad.get();
  });
}

std::pair<int64_t, int64_t> int_minmax_kernel(const Tensor& index) {
  return dispatch_index(index.dtype(), [&]<class I>() {
    const I* ix = index.data_ptr<I>();
    I lo = std::numeric_limits<I>::max(), hi = std::numeric_limits<I>::min();
    for (int64_t i = 0; i < index.numel(); ++i) {
      lo = std::min(lo, ix[i]);
      hi = std::max(hi, ix[i]);
    }
    return std::pair<int64_t, int64_t>{lo, hi};
  });
}

BadIndex linear_index_kernel(const Tensor& out, const std::vector<Tensor>& idx,
                             const std::vector<int64_t>& strides, const std::vector<int64_t>& sizes,
                             int64_t& bad_k) {
  int64_t* o = out.data_ptr<int64_t>();
  const int64_t n = out.numel();
  std::fill(o, o + n, int64_t{0});
  for (size_t k = 0; k < idx.size(); ++k) {
    const int64_t* ix = idx[k].data_ptr<int64_t>();
    const int64_t st = strides[k];
    const IndexBounds b{sizes[k], true, true};
    BadRecorder bad;
    parallel_for(0, n, kGrainSize, [&](int64_t lo, int64_t hi) {
      for (int64_t i = lo; i < hi; ++i) {
        int64_t v = ix[i];
        if (!fix_index(v, b)) return bad.set(ix[i]);
        o[i] += v * st;
      }
    });
    if (bad.found) {
      bad_k = static_cast<int64_t>(k);
      return bad.get();
    }
  }
  return {};
}

void iota_kernel(const Tensor& out) {
  int64_t* o = out.data_ptr<int64_t>();
  parallel_for(0, out.numel(), kGrainSize, [&](int64_t b, int64_t e) {
    for (int64_t i = b; i < e; ++i) o[i] = i;
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(linear_index_stub, CPU, &linear_index_kernel);
IGNIS_REGISTER_KERNEL(iota_stub, CPU, &iota_kernel);
IGNIS_REGISTER_KERNEL(index_gather_stub, CPU, &gather_kernel);
IGNIS_REGISTER_KERNEL(index_put_stub, CPU, &put_kernel);
IGNIS_REGISTER_KERNEL(scatter_stub, CPU, &scatter_kernel);
IGNIS_REGISTER_KERNEL(index_add_stub, CPU, &index_add_kernel);
IGNIS_REGISTER_KERNEL(masked_fill_stub, CPU, &masked_fill_kernel);
IGNIS_REGISTER_KERNEL(masked_select_stub, CPU, &masked_select_kernel);
IGNIS_REGISTER_KERNEL(nonzero_stub, CPU, &nonzero_kernel);
IGNIS_REGISTER_KERNEL(one_hot_stub, CPU, &one_hot_kernel);
IGNIS_REGISTER_KERNEL(int_minmax_stub, CPU, &int_minmax_kernel);

}  // namespace ignis::cpu
