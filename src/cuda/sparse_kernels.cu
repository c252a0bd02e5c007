// CUDA kernels of the scatter reductions and sparse products (the stubs of ops/scatter.h; the
// CPU kernels, cpu/scatter_kernels.cpp, are the oracle). Deterministic without atomics on
// values, as on the CPU:
//
// - coo_to_csr sorts the entries by row with CUB's radix sort, which is stable, so perm lists
//   each row's entries in their order in index: the CPU's counting sort, entry for entry. rowptr
//   is then a binary search per row in the sorted rows.
// - segment_reduce and spmm give one thread each (destination row, feature): it combines the
//   row's entries in CSR order, in the CPU's accumulation type, so the result is the CPU's up
//   to the rounding of fused multiply-adds.
// - scatter_reduce's general path gives one thread each line along dim (as the CPU); the line's
//   partial results live in a scratch buffer of out's extent, laid out [size][lines] so that
//   neighbouring threads touch neighbouring words.
// - sddmm gives one thread each entry, a serial dot product in the CPU's order.
//
// Bad indices: every kernel records the *position* of a bad index with atomicMin, and a
// one-thread kernel then reads the index value there, so the host sees the first bad index in
// order, the one the CPU's serial loops report (one read back, which waits).
#include <bit>
#include <climits>
#include <cub/cub.cuh>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/dispatch_size.h"
#include "ops/scatter.h"

namespace ignis::cuda {
namespace {

constexpr unsigned long long kNone = ULLONG_MAX;

// ---- the first bad index of a launch

struct DeviceFirstBad {
  unsigned long long pos;  // kNone: none
  long long value;
};

__device__ __forceinline__ void record_bad(DeviceFirstBad* b, int64_t pos) {
  atomicMin(&b->pos, static_cast<unsigned long long>(pos));
}

// `slots` records on the device (all bytes 0xff: pos = kNone), read back together.
class FirstBad {
 public:
  FirstBad(Device device, cudaStream_t stream, int slots = 1)
      : buf_(make_tensor({static_cast<int64_t>(sizeof(DeviceFirstBad)) * slots}, kUInt8, device)),
        stream_(stream),
        slots_(slots) {
    IGNIS_CUDA_CHECK(cudaMemsetAsync(ptr(), 0xff, sizeof(DeviceFirstBad) * slots_, stream_));
  }
  DeviceFirstBad* ptr(int k = 0) const { return static_cast<DeviceFirstBad*>(buf_.data_ptr()) + k; }
  // Copies the records to the host (waits for the stream).
  void read(DeviceFirstBad* host) const {
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(host, ptr(), sizeof(DeviceFirstBad) * slots_,
                                     cudaMemcpyDeviceToHost, stream_));
    wait_for_stream(stream_);
  }

 private:
  Tensor buf_;
  cudaStream_t stream_;
  int slots_;
};

BadIndex as_bad_index(const DeviceFirstBad& b) {
  if (b.pos == kNone) return {};
  return {true, static_cast<int64_t>(b.value)};
}

// value = idx[pos] for a contiguous index vector.
template <class I>
__global__ void resolve_contiguous_cuda(DeviceFirstBad* b, const I* idx) {
  if (b->pos != kNone) b->value = static_cast<long long>(idx[b->pos]);
}

template <class I>
__global__ void first_bad_cuda(const I* idx, int64_t n, int64_t size, DeviceFirstBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    if (static_cast<uint64_t>(idx[e]) >= static_cast<uint64_t>(size)) record_bad(bad, e);
  }
}

// Queues the search for the first index of idx[0, n) outside [0, size) into *bad.
template <class I>
void queue_first_bad(const I* idx, int64_t n, int64_t size, DeviceFirstBad* bad, cudaStream_t s) {
  if (n == 0) return;
  first_bad_cuda<I><<<blocks_for(n), kThreads, 0, s>>>(idx, n, size, bad);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  resolve_contiguous_cuda<I><<<1, 1, 0, s>>>(bad, idx);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

__global__ void iota_cuda(int64_t* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = i;
  }
}

void iota(int64_t* out, int64_t n, cudaStream_t s) {
  if (n == 0) return;
  iota_cuda<<<blocks_for(n), kThreads, 0, s>>>(out, n);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- coo_to_csr: a stable radix sort of (row, position) pairs

// keys[e] = index[e] as an unsigned sort key (0 for a bad one, whose position is recorded).
template <class I, class K>
__global__ void csr_keys_cuda(const I* idx, int64_t n, int64_t rows, K* keys, DeviceFirstBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t v = idx[e];
    if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(rows)) {
      record_bad(bad, e);
      keys[e] = 0;
    } else {
      keys[e] = static_cast<K>(v);
    }
  }
}

// rowptr[r] = the number of sorted keys below r, r in [0, rows].
template <class K>
__global__ void csr_rowptr_cuda(const K* sorted, int64_t n, int64_t rows, int64_t* rowptr) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r <= rows;
       r += step) {
    int64_t lo = 0, hi = n;
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (static_cast<uint64_t>(sorted[mid]) < static_cast<uint64_t>(r)) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    rowptr[r] = lo;
  }
}

// Sorts keys (n of them, significant bits [0, bits)) with their positions into perm, stably;
// returns the buffer that holds the sorted keys (keys or alt).
template <class K, class N>
K* radix_sort_rows(K* keys, K* alt, int64_t* pos, int64_t* perm, N n, int bits, Device dev,
                   cudaStream_t s) {
  cub::DoubleBuffer<K> kb(keys, alt);
  cub::DoubleBuffer<int64_t> vb(pos, perm);
  size_t bytes = 0;
  IGNIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, kb, vb, n, 0, bits, s));
  const Tensor tmp = make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, dev);
  IGNIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(tmp.data_ptr(), bytes, kb, vb, n, 0, bits, s));
  if (vb.Current() != perm) {
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(perm, vb.Current(), sizeof(int64_t) * static_cast<size_t>(n),
                                     cudaMemcpyDeviceToDevice, s));
  }
  return kb.Current();
}

template <class I, class K>
void coo_to_csr_impl(const Tensor& index, int64_t rows, int64_t* rowptr, int64_t* perm,
                     DeviceFirstBad* bad, cudaStream_t s) {
  const int64_t E = index.numel();
  const Device dev = index.device();
  const DType key_dt = sizeof(K) == 4 ? kInt32 : kInt64;
  const I* idx = index.data_ptr<I>();
  const Tensor keys = make_tensor({E}, key_dt, dev);
  K* kp = static_cast<K*>(keys.data_ptr());
  csr_keys_cuda<I, K><<<blocks_for(E), kThreads, 0, s>>>(idx, E, rows, kp, bad);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  resolve_contiguous_cuda<I><<<1, 1, 0, s>>>(bad, idx);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  // The bits that tell valid rows apart (none with one row: every key is 0).
  const int bits =
      rows <= 1 ? 0 : static_cast<int>(std::bit_width(static_cast<uint64_t>(rows - 1)));
  const K* sorted = kp;
  Tensor alt, pos;
  if (bits == 0) {
    iota(perm, E, s);
  } else {
    alt = make_tensor({E}, key_dt, dev);
    pos = make_tensor({E}, kInt64, dev);
    iota(pos.data_ptr<int64_t>(), E, s);
    K* ap = static_cast<K*>(alt.data_ptr());
    int64_t* pp = pos.data_ptr<int64_t>();
    sorted = E <= INT_MAX
                 ? radix_sort_rows<K, int>(kp, ap, pp, perm, static_cast<int>(E), bits, dev, s)
                 : radix_sort_rows<K, int64_t>(kp, ap, pp, perm, E, bits, dev, s);
  }
  csr_rowptr_cuda<K><<<blocks_for(rows + 1), kThreads, 0, s>>>(sorted, E, rows, rowptr);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

BadIndex coo_to_csr_kernel(const Tensor& index, int64_t rows, const Tensor& rowptr,
                           const Tensor& perm) {
  const int64_t E = index.numel();
  const Device dev = rowptr.device();
  DeviceGuard guard(dev.index);
  const cudaStream_t s = current_stream(dev);
  int64_t* rp = rowptr.data_ptr<int64_t>();
  if (E == 0) {
    IGNIS_CUDA_CHECK(cudaMemsetAsync(rp, 0, sizeof(int64_t) * static_cast<size_t>(rows + 1), s));
    return {};
  }
  FirstBad bad(dev, s);
  int64_t* pm = perm.data_ptr<int64_t>();
  dispatch_index(index.dtype(), [&]<class I>() {
    if (static_cast<uint64_t>(rows) <= (uint64_t{1} << 32)) {
      coo_to_csr_impl<I, uint32_t>(index, rows, rp, pm, bad.ptr(), s);
    } else {
      coo_to_csr_impl<I, uint64_t>(index, rows, rp, pm, bad.ptr(), s);
    }
  });
  DeviceFirstBad h;
  bad.read(&h);
  return as_bad_index(h);
}

// ---- csr_check: the first position where rowptr stops being a row pointer of nnz entries

__global__ void csr_check_cuda(const int64_t* rp, int64_t n, int64_t nnz, DeviceFirstBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    // The CPU's checks in its order: rp[0] == 0; then rp[i] >= rp[i - 1] and rp[i] <= nnz for
    // each i; then rp[n - 1] == nnz, which fails only at n - 1, after every other position.
    const bool bad_here = (i == 0 && rp[0] != 0) || (i > 0 && (rp[i] < rp[i - 1] || rp[i] > nnz)) ||
                          (i == n - 1 && rp[i] != nnz);
    if (bad_here) record_bad(bad, i);
  }
}

BadIndex csr_check_kernel(const Tensor& rowptr, int64_t nnz) {
  const int64_t n = rowptr.numel();
  if (n == 0) return {true, 0};
  const Device dev = rowptr.device();
  DeviceGuard guard(dev.index);
  const cudaStream_t s = current_stream(dev);
  FirstBad bad(dev, s);
  csr_check_cuda<<<blocks_for(n), kThreads, 0, s>>>(rowptr.data_ptr<int64_t>(), n, nnz, bad.ptr());
  IGNIS_CUDA_CHECK(cudaGetLastError());
  DeviceFirstBad h;
  bad.read(&h);
  if (h.pos == kNone) return {};
  return {true, static_cast<int64_t>(h.pos)};
}

// ---- csr_rows: rows[k] = the r with rowptr[r] <= k < rowptr[r + 1]

__global__ void csr_rows_cuda(const int64_t* rp, int64_t R, int64_t* rows, int64_t nnz) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < nnz;
       k += step) {
    // The last r in [0, R) with rp[r] <= k (empty rows before it are skipped).
    int64_t lo = 0, hi = R;  // first r in [0, R] with rp[r] > k, minus one
    while (lo < hi) {
      const int64_t mid = lo + (hi - lo) / 2;
      if (rp[mid] <= k) {
        lo = mid + 1;
      } else {
        hi = mid;
      }
    }
    rows[k] = lo - 1;
  }
}

void csr_rows_kernel(const Tensor& rowptr, const Tensor& rows) {
  const int64_t R = rowptr.numel() - 1;
  const int64_t nnz = rows.numel();
  if (nnz == 0 || R <= 0) return;
  const Device dev = rowptr.device();
  DeviceGuard guard(dev.index);
  csr_rows_cuda<<<blocks_for(nnz), kThreads, 0, current_stream(dev)>>>(
      rowptr.data_ptr<int64_t>(), R, rows.data_ptr<int64_t>(), nnz);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- segment_reduce: a thread per (outer, destination row, inner) element of out

struct Strides3 {
  int64_t o, n, i;  // elements
};

template <class T>
__global__ void segment_reduce_cuda(T* out, const T* src, const int64_t* rp, const int64_t* pm,
                                    int64_t outer, int64_t N, int64_t inner, Strides3 os,
                                    Strides3 ss, ReduceOp op, bool include_self) {
  using A = acc_t<T>;
  const int64_t total = outer * N * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < total;
       c += step) {
    const int64_t i = c % inner;
    const int64_t n = (c / inner) % N;
    const int64_t o = c / (inner * N);
    int64_t k = rp[n];
    const int64_t k1 = rp[n + 1];
    if (k == k1) continue;  // no entry: out keeps self's value
    T* dst = out + o * os.o + n * os.n + i * os.i;
    const T* s = src + o * ss.o + i * ss.i;
    A a;
    if (include_self) {
      a = static_cast<A>(*dst);
    } else {
      a = static_cast<A>(s[pm[k++] * ss.n]);
    }
    for (; k < k1; ++k) a = combine(op, a, static_cast<A>(s[pm[k] * ss.n]));
    if (op == ReduceOp::Mean) a = divide(a, k1 - rp[n] + (include_self ? 1 : 0));
    *dst = static_cast<T>(a);
  }
}

void segment_reduce_kernel(const Tensor& out, const Tensor& src, int64_t dim, const Tensor& rowptr,
                           const Tensor& perm, ReduceOp op, bool include_self) {
  dispatch_dtype(out.dtype(), "scatter_reduce", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("scatter_reduce: bool tensors are not supported");
    } else {
      const auto ot = *collapse3(out, dim);
      const auto st = *collapse3(src, dim);
      int64_t outer = 1, inner = 1;
      for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
      for (int64_t d = dim + 1; d < out.dim(); ++d) inner *= out.sizes()[d];
      const int64_t N = out.dim() == 0 ? 1 : out.sizes()[dim];
      const int64_t total = outer * N * inner;
      if (total == 0) return;
      const Device dev = out.device();
      DeviceGuard guard(dev.index);
      segment_reduce_cuda<T><<<blocks_for(total), kThreads, 0, current_stream(dev)>>>(
          static_cast<T*>(out.data_ptr()), static_cast<const T*>(src.data_ptr()),
          rowptr.data_ptr<int64_t>(), perm.data_ptr<int64_t>(), outer, N, inner,
          Strides3{ot[0], ot[1], ot[2]}, Strides3{st[0], st[1], st[2]}, op, include_self);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

// ---- scatter_reduce, general index: a thread per line along dim

// acc and cnt: [size][lines] scratch (cnt zeroed); line e's partial result for position i is at
// i * lines + e. cnt is back to zero for every position when the kernel ends.
template <class T, class I>
__global__ void scatter_reduce_cuda(int64_t lines, Operands<3> ops, Geometry<3> g,
                                    ScatterReduceArgs a, acc_t<T>* acc, int64_t* cnt,
                                    DeviceFirstBad* bad) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < lines;
       e += step) {
    char* p[3];
    operand_ptrs(g, ops, e, p);
    char* ob = p[0];
    const char* ib = p[1];
    const char* sb = p[2];
    auto index_at = [&](int64_t l) {
      return static_cast<int64_t>(*reinterpret_cast<const I*>(ib + l * a.index_stride));
    };
    // The whole line is checked first: a bad index leaves it untouched.
    bool ok = true;
    for (int64_t l = 0; l < a.line; ++l) {
      if (static_cast<uint64_t>(index_at(l)) >= static_cast<uint64_t>(a.size)) {
        record_bad(bad, e * a.line + l);
        ok = false;
        break;
      }
    }
    if (!ok) continue;
    for (int64_t l = 0; l < a.line; ++l) {
      const int64_t i = index_at(l);
      const A v = static_cast<A>(*reinterpret_cast<const T*>(sb + l * a.src_stride));
      const int64_t slot = i * lines + e;
      if (cnt[slot] == 0) {
        acc[slot] =
            a.include_self
                ? combine(a.op, static_cast<A>(*reinterpret_cast<const T*>(ob + i * a.self_stride)),
                          v)
                : v;
      } else {
        acc[slot] = combine(a.op, acc[slot], v);
      }
      ++cnt[slot];
    }
    // Each reached position once (its count is reset as it is written).
    for (int64_t l = 0; l < a.line; ++l) {
      const int64_t i = index_at(l);
      const int64_t slot = i * lines + e;
      const int64_t c = cnt[slot];
      if (c == 0) continue;
      A v = acc[slot];
      if (a.op == ReduceOp::Mean) v = divide(v, c + (a.include_self ? 1 : 0));
      *reinterpret_cast<T*>(ob + i * a.self_stride) = static_cast<T>(v);
      cnt[slot] = 0;
    }
  }
}

// value = the index at the first bad position (line pos / line, entry pos % line).
template <class I>
__global__ void resolve_lines_cuda(DeviceFirstBad* b, Operands<3> ops, Geometry<3> g, int64_t line,
                                   int64_t index_stride) {
  if (b->pos == kNone) return;
  const auto pos = static_cast<int64_t>(b->pos);
  char* p[3];
  operand_ptrs(g, ops, pos / line, p);
  b->value =
      static_cast<long long>(*reinterpret_cast<const I*>(p[1] + (pos % line) * index_stride));
}

template <class T, class I>
BadIndex scatter_reduce_impl(const TensorIter& it, const ScatterReduceArgs& a) {
  using A = acc_t<T>;
  const Device dev = it.device;
  DeviceGuard guard(dev.index);
  const cudaStream_t s = current_stream(dev);
  const int64_t lines = it.numel;
  const Geometry<3> g = geometry_of<3>(it, "scatter_reduce");
  const Operands<3> ops = operands_of<3>(it);
  // lines * size <= out.numel(): the scratch is at most out's extent.
  const int64_t slots = lines * a.size;
  const Tensor acc = make_tensor({slots * static_cast<int64_t>(sizeof(A))}, kUInt8, dev);
  const Tensor cnt = make_tensor({slots}, kInt64, dev);
  if (slots > 0) {
    IGNIS_CUDA_CHECK(
        cudaMemsetAsync(cnt.data_ptr(), 0, sizeof(int64_t) * static_cast<size_t>(slots), s));
  }
  FirstBad bad(dev, s);
  scatter_reduce_cuda<T, I>
      <<<blocks_for(lines), kThreads, 0, s>>>(lines, ops, g, a, static_cast<A*>(acc.data_ptr()),
                                              static_cast<int64_t*>(cnt.data_ptr()), bad.ptr());
  IGNIS_CUDA_CHECK(cudaGetLastError());
  resolve_lines_cuda<I><<<1, 1, 0, s>>>(bad.ptr(), ops, g, a.line, a.index_stride);
  IGNIS_CUDA_CHECK(cudaGetLastError());
  DeviceFirstBad h;
  bad.read(&h);  // also keeps the scratch alive until the kernel is done
  return as_bad_index(h);
}

BadIndex scatter_reduce_kernel(const TensorIter& it, DType dt, DType index_dt,
                               const ScatterReduceArgs& a) {
  return dispatch_dtype(dt, "scatter_reduce", [&]<class T>() -> BadIndex {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("scatter_reduce: bool tensors are not supported");
    } else {
      if (it.numel == 0 || a.line == 0) return {};
      return dispatch_index(index_dt, [&]<class I>() { return scatter_reduce_impl<T, I>(it, a); });
    }
  });
}

// ---- spmm: a thread per (row, feature) of out, over the row's entries in CSR order

template <class T, class I>
__global__ void spmm_cuda(T* y, const int64_t* rp, const I* col, const T* vals, const int64_t* pm,
                          const T* x, int64_t R, int64_t F, int64_t K) {
  using A = acc_t<T>;
  const int64_t total = R * F;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < total;
       c += step) {
    const int64_t r = c / F, f = c % F;
    A acc = 0;
    for (int64_t k = rp[r]; k < rp[r + 1]; ++k) {
      const int64_t p = pm != nullptr ? pm[k] : k;
      const int64_t j = col[p];
      if (static_cast<uint64_t>(j) >= static_cast<uint64_t>(K)) continue;  // reported, not read
      const A w = vals != nullptr ? static_cast<A>(vals[p]) : A(1);
      acc += w * static_cast<A>(x[j * F + f]);
    }
    y[c] = static_cast<T>(acc);
  }
}

BadIndex spmm_kernel(const Tensor& out, const Tensor& rowptr, const Tensor& col,
                     const Tensor& values, const Tensor& perm, const Tensor& dense) {
  return dispatch_floating(out.dtype(), "sparse_mm", [&]<class T>() {
    return dispatch_index(col.dtype(), [&]<class I>() -> BadIndex {
      const int64_t R = out.size(0), F = out.size(1), K = dense.size(0);
      const int64_t nnz = col.numel();
      const Device dev = out.device();
      DeviceGuard guard(dev.index);
      const cudaStream_t s = current_stream(dev);
      const I* cp = col.data_ptr<I>();
      FirstBad bad(dev, s);
      queue_first_bad<I>(cp, nnz, K, bad.ptr(), s);
      if (R * F > 0) {
        spmm_cuda<T, I><<<blocks_for(R * F), kThreads, 0, s>>>(
            static_cast<T*>(out.data_ptr()), rowptr.data_ptr<int64_t>(), cp,
            values.defined() ? static_cast<const T*>(values.data_ptr()) : nullptr,
            perm.defined() ? perm.data_ptr<int64_t>() : nullptr,
            static_cast<const T*>(dense.data_ptr()), R, F, K);
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
      if (nnz == 0) return {};
      DeviceFirstBad h;
      bad.read(&h);
      return as_bad_index(h);
    });
  });
}

// ---- sddmm: a thread per entry, a serial dot product in the CPU's order

template <class T, class I>
__global__ void sddmm_cuda(T* out, const I* row, const I* col, const T* a, const T* b, int64_t E,
                           int64_t F, int64_t Ra, int64_t Rb) {
  using A = acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < E; e += step) {
    const int64_t r = row[e], c = col[e];
    if (static_cast<uint64_t>(r) >= static_cast<uint64_t>(Ra) ||
        static_cast<uint64_t>(c) >= static_cast<uint64_t>(Rb)) {
      continue;  // reported, not read
    }
    const T* x = a + r * F;
    const T* y = b + c * F;
    A s = 0;
    for (int64_t i = 0; i < F; ++i) s += static_cast<A>(x[i]) * static_cast<A>(y[i]);
    out[e] = static_cast<T>(s);
  }
}

BadIndex sddmm_kernel(const Tensor& out, const Tensor& row, const Tensor& col, const Tensor& a,
                      const Tensor& b, int& which) {
  return dispatch_floating(out.dtype(), "sddmm", [&]<class T>() {
    return dispatch_index(row.dtype(), [&]<class I>() -> BadIndex {
      const int64_t E = out.numel(), F = a.size(1);
      if (E == 0) return {};
      const Device dev = out.device();
      DeviceGuard guard(dev.index);
      const cudaStream_t s = current_stream(dev);
      const I* rp = row.data_ptr<I>();
      const I* cp = col.data_ptr<I>();
      FirstBad bad(dev, s, 2);  // 0: rows, 1: columns
      queue_first_bad<I>(rp, E, a.size(0), bad.ptr(0), s);
      queue_first_bad<I>(cp, E, b.size(0), bad.ptr(1), s);
      sddmm_cuda<T, I><<<blocks_for(E), kThreads, 0, s>>>(
          static_cast<T*>(out.data_ptr()), rp, cp, static_cast<const T*>(a.data_ptr()),
          static_cast<const T*>(b.data_ptr()), E, F, a.size(0), b.size(0));
      IGNIS_CUDA_CHECK(cudaGetLastError());
      DeviceFirstBad h[2];
      bad.read(h);
      for (int k = 0; k < 2; ++k) {
        if (h[k].pos != kNone) {
          which = k;
          return as_bad_index(h[k]);
        }
      }
      return {};
    });
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(coo_to_csr_stub, CUDA, &coo_to_csr_kernel);
IGNIS_REGISTER_KERNEL(csr_check_stub, CUDA, &csr_check_kernel);
IGNIS_REGISTER_KERNEL(csr_rows_stub, CUDA, &csr_rows_kernel);
IGNIS_REGISTER_KERNEL(segment_reduce_stub, CUDA, &segment_reduce_kernel);
IGNIS_REGISTER_KERNEL(scatter_reduce_stub, CUDA, &scatter_reduce_kernel);
IGNIS_REGISTER_KERNEL(spmm_stub, CUDA, &spmm_kernel);
IGNIS_REGISTER_KERNEL(sddmm_stub, CUDA, &sddmm_kernel);

}  // namespace ignis::cuda
