// CPU kernels of the scatter reductions and sparse products. Deterministic and race-free without
// atomics: reductions into rows go through the CSR of their destination index (a stable counting
// sort), and each thread owns whole destination rows, combining their entries in index order;
// the rows are split over threads by their number of entries (power-law graphs have a few rows
// with most of the edges). Index values are checked before anything is written.
#include <omp.h>

#include <algorithm>
#include <atomic>
#include <cmath>
#include <cstring>
#include <vector>

#include "cpu/loops.h"
#include "cpu/parallel.h"
#include "ops/scatter.h"

namespace ignis::cpu {
namespace {

template <class F>
decltype(auto) dispatch_index(DType dt, F&& f) {
  if (dt == kInt32) return f.template operator()<int32_t>();
  return f.template operator()<int64_t>();
}

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

template <class I>
BadIndex first_out_of_range(const I* idx, int64_t n, int64_t size) {
  bool any_bad = false;
  for (int64_t e = 0; e < n; ++e) any_bad |= static_cast<uint64_t>(idx[e]) >= uint64_t(size);
  if (!any_bad) return {};
  for (int64_t e = 0; e < n; ++e) {
    if (static_cast<uint64_t>(idx[e]) >= uint64_t(size)) return {true, int64_t(idx[e])};
  }
  return {};
}

/// Calls f(row_begin, row_end) on each thread for a share of [0, rows) holding about the same
/// number of entries plus rows (rowptr is a CSR row pointer); inline when the work is small.
template <class F>
void balanced_rows(const int64_t* rowptr, int64_t rows, int64_t row_cost, int64_t entry_cost,
                   const F& f) {
  if (rows <= 0) return;
  const int64_t nnz = rowptr[rows];
  const int64_t work = rows * row_cost + nnz * entry_cost;
  const int max_threads = omp_get_max_threads();
  if (work <= kGrainSize || max_threads == 1 || omp_in_parallel() || rows == 1) {
    f(int64_t(0), rows);
    return;
  }
  const int nt = static_cast<int>(std::min<int64_t>(max_threads, rows));
#pragma omp parallel num_threads(nt)
  {
    const int t = omp_get_thread_num();
    const int T = omp_get_num_threads();
    // The first row whose cumulative cost reaches t/T of the total.
    auto boundary = [&](int k) -> int64_t {
      if (k == 0) return 0;
      if (k == T) return rows;
      const int64_t target = work * k / T;
      int64_t lo = 0, hi = rows;  // smallest r with r*row_cost + rowptr[r]*entry_cost >= target
      while (lo < hi) {
        const int64_t mid = (lo + hi) / 2;
        if (mid * row_cost + rowptr[mid] * entry_cost >= target)
          hi = mid;
        else
          lo = mid + 1;
      }
      return lo;
    };
    const int64_t b = boundary(t), e = boundary(t + 1);
    if (b < e) f(b, e);
  }
}


// ---- coo_to_csr: a stable counting sort of the entries by row

template <class I>
BadIndex coo_to_csr_impl(const Tensor& index, int64_t rows, const Tensor& rowptr_t,
                         const Tensor& perm_t) {
  const int64_t E = index.numel();
  const I* idx = index.data_ptr<I>();
  BadIndex bad = first_out_of_range(idx, E, rows);
  if (bad.found) return bad;
  int64_t* rowptr = rowptr_t.data_ptr<int64_t>();
  int64_t* perm = perm_t.data_ptr<int64_t>();
  const int max_threads = omp_get_max_threads();
  // Parallel: each thread counts its chunk of the entries per row, then writes them at its own
  // offsets within each row (threads in order, entries in order: the same stable order as the
  // serial sort). Worth it when there are many entries per row of histogram memory.
  const int nt = static_cast<int>(std::min<int64_t>(max_threads, E / kGrainSize));
  if (nt >= 2 && !omp_in_parallel() && rows * nt <= 4 * E) {
    std::vector<int64_t> cnt(static_cast<size_t>(nt) * static_cast<size_t>(rows), 0);
    bool ran_parallel = true;
#pragma omp parallel num_threads(nt)
    {
      const int t = omp_get_thread_num();
      if (omp_get_num_threads() != nt) {
#pragma omp single
        ran_parallel = false;
      } else {
        int64_t* c = cnt.data() + static_cast<size_t>(t) * static_cast<size_t>(rows);
        const int64_t eb = E * t / nt, ee = E * (t + 1) / nt;
        for (int64_t e = eb; e < ee; ++e) ++c[int64_t(idx[e])];
#pragma omp barrier
#pragma omp single
        {
          // rowptr, and each thread's start within each row (kept in cnt).
          int64_t acc = 0;
          for (int64_t r = 0; r < rows; ++r) {
            rowptr[r] = acc;
            for (int k = 0; k < nt; ++k) {
              int64_t& ck = cnt[static_cast<size_t>(k) * static_cast<size_t>(rows) + r];
              const int64_t n = ck;
              ck = acc;
              acc += n;
            }
          }
          rowptr[rows] = acc;
        }
        for (int64_t e = eb; e < ee; ++e) perm[c[int64_t(idx[e])]++] = e;
      }
    }
    if (ran_parallel) return {};
  }
  std::fill(rowptr, rowptr + rows + 1, 0);
  for (int64_t e = 0; e < E; ++e) ++rowptr[int64_t(idx[e]) + 1];
  for (int64_t r = 0; r < rows; ++r) rowptr[r + 1] += rowptr[r];
  std::vector<int64_t> cur(rowptr, rowptr + rows);
  for (int64_t e = 0; e < E; ++e) perm[cur[int64_t(idx[e])]++] = e;
  return {};
}

BadIndex coo_to_csr_kernel(const Tensor& index, int64_t rows, const Tensor& rowptr,
                           const Tensor& perm) {
  return dispatch_index(index.dtype(),
                        [&]<class I>() { return coo_to_csr_impl<I>(index, rows, rowptr, perm); });
}

BadIndex csr_check_kernel(const Tensor& rowptr_t, int64_t nnz) {
  const int64_t n = rowptr_t.numel();
  const int64_t* rp = rowptr_t.data_ptr<int64_t>();
  if (n == 0) return {true, 0};
  if (rp[0] != 0) return {true, 0};
  for (int64_t i = 1; i < n; ++i) {
    if (rp[i] < rp[i - 1] || rp[i] > nnz) return {true, i};
  }
  if (rp[n - 1] != nnz) return {true, n - 1};
  return {};
}

void csr_rows_kernel(const Tensor& rowptr_t, const Tensor& rows_t) {
  const int64_t R = rowptr_t.numel() - 1;
  const int64_t* rp = rowptr_t.data_ptr<int64_t>();
  int64_t* out = rows_t.data_ptr<int64_t>();
  for (int64_t r = 0; r < R; ++r) std::fill(out + rp[r], out + rp[r + 1], r);
}

// ---- segment reduce: out[.., n, ..] reduced with the src rows of its entries

template <class T>
void segment_reduce_impl(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& rowptr_t,
                         const Tensor& perm_t, ReduceOp op, bool include_self) {
  using A = acc_t<T>;
  const auto ot = *collapse3(out, dim);
  const auto st = *collapse3(src, dim);
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
  for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.sizes()[d];
  const int64_t N = out.dim() == 0 ? 1 : out.sizes()[dim];
  if (outer == 0 || inner == 0) return;
  const int64_t* rp = rowptr_t.data_ptr<int64_t>();
  const int64_t* pm = perm_t.data_ptr<int64_t>();
  T* op_ = static_cast<T*>(out.data_ptr());
  const T* sp = static_cast<const T*>(src.data_ptr());
  const bool contiguous_rows = ot[2] == 1 && st[2] == 1;
  balanced_rows(rp, N, outer, outer * inner, [&](int64_t b, int64_t e) {
    std::vector<A> acc(static_cast<size_t>(inner));
    A* a = acc.data();
    for (int64_t o = 0; o < outer; ++o) {
      for (int64_t n = b; n < e; ++n) {
        int64_t k = rp[n];
        const int64_t k1 = rp[n + 1];
        if (k == k1) continue;
        T* dst = op_ + o * ot[0] + n * ot[1];
        auto src_row = [&](int64_t kk) { return sp + o * st[0] + pm[kk] * st[1]; };
        if (include_self) {
          for (int64_t i = 0; i < inner; ++i) a[i] = static_cast<A>(dst[i * ot[2]]);
        } else {
          const T* s = src_row(k++);
          for (int64_t i = 0; i < inner; ++i) a[i] = static_cast<A>(s[i * st[2]]);
        }
        for (; k < k1; ++k) {
          const T* __restrict s = src_row(k);
          if (contiguous_rows && (op == ReduceOp::Sum || op == ReduceOp::Mean)) {
            for (int64_t i = 0; i < inner; ++i) a[i] += static_cast<A>(s[i]);
          } else {
            for (int64_t i = 0; i < inner; ++i)
              a[i] = combine(op, a[i], static_cast<A>(s[i * st[2]]));
          }
        }
        if (op == ReduceOp::Mean) {
          const int64_t count = rp[n + 1] - rp[n] + (include_self ? 1 : 0);
          for (int64_t i = 0; i < inner; ++i) a[i] = divide(a[i], count);
        }
        for (int64_t i = 0; i < inner; ++i) dst[i * ot[2]] = static_cast<T>(a[i]);
      }
    }
  });
}

void segment_reduce_kernel(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& rowptr,
                           const Tensor& perm, ReduceOp op, bool include_self) {
  dispatch_dtype(out.dtype(), "scatter_reduce", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("scatter_reduce: bool tensors are not supported");
    } else {
      segment_reduce_impl<T>(out, src, dim, rowptr, perm, op, include_self);
    }
  });
}

// ---- scatter_reduce, general index: one line along dim at a time

template <class T, class I>
BadIndex scatter_reduce_impl(const TensorIter& it, const ScatterReduceArgs& a) {
  using A = acc_t<T>;
  BadRecorder bad;
  auto row = [&](char** p, int64_t n, const int64_t* s) {
    std::vector<int64_t> cnt(static_cast<size_t>(a.size));
    std::vector<A> acc(static_cast<size_t>(a.size));
    for (int64_t k = 0; k < n; ++k) {
      char* ob = p[0] + k * s[0];
      const char* ib = p[1] + k * s[1];
      const char* sb = p[2] + k * s[2];
      // Check the whole line first: a bad index leaves it untouched.
      for (int64_t l = 0; l < a.line; ++l) {
        const int64_t i = *reinterpret_cast<const I*>(ib + l * a.index_stride);
        if (static_cast<uint64_t>(i) >= static_cast<uint64_t>(a.size)) return bad.set(i);
      }
      std::fill(cnt.begin(), cnt.end(), 0);
      for (int64_t l = 0; l < a.line; ++l) {
        const int64_t i = *reinterpret_cast<const I*>(ib + l * a.index_stride);
        const A v = static_cast<A>(*reinterpret_cast<const T*>(sb + l * a.src_stride));
        if (cnt[i] == 0) {
          acc[i] =
              a.include_self
                  ? combine(a.op, static_cast<A>(*reinterpret_cast<T*>(ob + i * a.self_stride)), v)
                  : v;
        } else {
          acc[i] = combine(a.op, acc[i], v);
        }
        ++cnt[i];
      }
      for (int64_t i = 0; i < a.size; ++i) {
        if (cnt[i] == 0) continue;
        A v = acc[i];
        if (a.op == ReduceOp::Mean) v = divide(v, cnt[i] + (a.include_self ? 1 : 0));
        *reinterpret_cast<T*>(ob + i * a.self_stride) = static_cast<T>(v);
      }
    }
  };
  if (it.numel == 0) return {};
  const int64_t grain = std::max<int64_t>(1, kGrainSize / std::max<int64_t>(a.line + a.size, 1));
  if (it.numel <= grain) {
    for_each_row(it, 0, it.numel, row);
  } else {
    parallel_for(0, it.numel, grain, [&](int64_t b, int64_t e) { for_each_row(it, b, e, row); });
  }
  return bad.get();
}

BadIndex scatter_reduce_kernel(const TensorIter& it, DType dt, DType index_dt,
                               const ScatterReduceArgs& a) {
  return dispatch_dtype(dt, "scatter_reduce", [&]<class T>() -> BadIndex {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("scatter_reduce: bool tensors are not supported");
    } else {
      return dispatch_index(index_dt, [&]<class I>() { return scatter_reduce_impl<T, I>(it, a); });
    }
  });
}

// ---- spmm: out[r] = sum_k values[p] * dense[col[p]], p = perm[k], k in row r

template <class A>
inline void axpy(A* __restrict y, const A* __restrict x, A w, int64_t n) {
  for (int64_t i = 0; i < n; ++i) y[i] += w * x[i];
}

template <class T, class I>
BadIndex spmm_impl(const Tensor& out, const Tensor& rowptr_t, const Tensor& col_t,
                   const Tensor& values, const Tensor& perm_t, const Tensor& dense) {
  using A = acc_t<T>;
  const int64_t R = out.size(0), F = out.size(1), K = dense.size(0);
  const I* col = col_t.data_ptr<I>();
  BadIndex bad = first_out_of_range(col, col_t.numel(), K);
  if (bad.found) return bad;
  const int64_t* rp = rowptr_t.data_ptr<int64_t>();
  const int64_t* pm = perm_t.defined() ? perm_t.data_ptr<int64_t>() : nullptr;
  const T* vals = values.defined() ? static_cast<const T*>(values.data_ptr()) : nullptr;
  const T* x = static_cast<const T*>(dense.data_ptr());
  T* y = static_cast<T*>(out.data_ptr());
  constexpr int64_t kAhead = 4;
  balanced_rows(rp, R, F, F, [&](int64_t b, int64_t e) {
    const int64_t e_end = rp[e];
    std::vector<A> buf;
    if constexpr (!std::is_same_v<A, T>) buf.resize(static_cast<size_t>(F));
    for (int64_t r = b; r < e; ++r) {
      A* acc;
      if constexpr (std::is_same_v<A, T>)
        acc = y + r * F;
      else
        acc = buf.data();
      std::fill(acc, acc + F, A(0));
      for (int64_t k = rp[r]; k < rp[r + 1]; ++k) {
        const int64_t p = pm ? pm[k] : k;
        const A w = vals ? static_cast<A>(vals[p]) : A(1);
        const T* xr = x + int64_t(col[p]) * F;
        // The rows are gathered at random: fetch the one a few entries ahead.
        if (k + kAhead < e_end) {
          const int64_t q = pm ? pm[k + kAhead] : k + kAhead;
          const char* next = reinterpret_cast<const char*>(x + int64_t(col[q]) * F);
          for (int64_t b = 0; b < F * int64_t(sizeof(T)); b += 64) __builtin_prefetch(next + b);
        }
        if constexpr (std::is_same_v<A, T>) {
          axpy(acc, xr, w, F);
        } else {
          for (int64_t i = 0; i < F; ++i) acc[i] += w * static_cast<A>(xr[i]);
        }
      }
      if constexpr (!std::is_same_v<A, T>) {
        for (int64_t i = 0; i < F; ++i) y[r * F + i] = static_cast<T>(acc[i]);
      }
    }
  });
  return {};
}

BadIndex spmm_kernel(const Tensor& out, const Tensor& rowptr, const Tensor& col,
                     const Tensor& values, const Tensor& perm, const Tensor& dense) {
  return dispatch_floating(out.dtype(), "sparse_mm", [&]<class T>() {
    return dispatch_index(col.dtype(), [&]<class I>() {
      return spmm_impl<T, I>(out, rowptr, col, values, perm, dense);
    });
  });
}

// ---- sddmm: out[e] = dot(a[row[e]], b[col[e]])

template <class T, class I>
BadIndex sddmm_impl(const Tensor& out, const Tensor& row_t, const Tensor& col_t, const Tensor& a,
                    const Tensor& b, int& which) {
  using A = acc_t<T>;
  const int64_t E = out.numel(), F = a.size(1);
  const I* row = row_t.data_ptr<I>();
  const I* col = col_t.data_ptr<I>();
  BadIndex bad = first_out_of_range(row, E, a.size(0));
  if (bad.found) {
    which = 0;
    return bad;
  }
  bad = first_out_of_range(col, E, b.size(0));
  if (bad.found) {
    which = 1;
    return bad;
  }
  const T* ap = static_cast<const T*>(a.data_ptr());
  const T* bp = static_cast<const T*>(b.data_ptr());
  T* o = static_cast<T*>(out.data_ptr());
  parallel_for(0, E, std::max<int64_t>(1, kGrainSize / std::max<int64_t>(F, 1)),
               [&](int64_t eb, int64_t ee) {
                 for (int64_t e = eb; e < ee; ++e) {
                   const T* __restrict x = ap + int64_t(row[e]) * F;
                   const T* __restrict y = bp + int64_t(col[e]) * F;
                   A s = 0;
                   for (int64_t i = 0; i < F; ++i) s += static_cast<A>(x[i]) * static_cast<A>(y[i]);
                   o[e] = static_cast<T>(s);
                 }
               });
  return {};
}

BadIndex sddmm_kernel(const Tensor& out, const Tensor& row, const Tensor& col, const Tensor& a,
                      const Tensor& b, int& which) {
  return dispatch_floating(out.dtype(), "sddmm", [&]<class T>() {
    return dispatch_index(row.dtype(),
                          [&]<class I>() { return sddmm_impl<T, I>(out, row, col, a, b, which); });
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(coo_to_csr_stub, CPU, &coo_to_csr_kernel);
IGNIS_REGISTER_KERNEL(csr_check_stub, CPU, &csr_check_kernel);
IGNIS_REGISTER_KERNEL(csr_rows_stub, CPU, &csr_rows_kernel);
IGNIS_REGISTER_KERNEL(segment_reduce_stub, CPU, &segment_reduce_kernel);
IGNIS_REGISTER_KERNEL(scatter_reduce_stub, CPU, &scatter_reduce_kernel);
IGNIS_REGISTER_KERNEL(spmm_stub, CPU, &spmm_kernel);
IGNIS_REGISTER_KERNEL(sddmm_stub, CPU, &sddmm_kernel);

}  // namespace ignis::cpu
