// CUDA kernels of sort, topk, mode and the scans cumprod and logcumsumexp (for the stubs of
// cpu/sort_kernels.cpp, whose results they reproduce exactly).
//
// Sorting: the lines along dim are copied out as unsigned integer keys whose order is the CPU's
// comparison order (-0.0 and +0.0 one key, every NaN one key above +inf; complemented for a
// descending sort, so NaN comes first there), paired with their positions in the line, and sorted
// with CUB's radix sorts, which are stable: equal keys keep their positions' order in both
// directions, as the CPU's stable_sort. Values are read back from x at the sorted positions, so
// signed zeros and NaN payloads come out as they went in. topk is the first k of that order (the
// CPU's partial_sort breaks ties by position, the same order); mode finds the first longest run
// of equal keys in each ascending line (a block per line). Lines are sorted a chunk at a time, so
// the scratch memory stays bounded and CUB's item counts are far from 32-bit limits.
//
// Scans: a thread per [outer, inner] column, in double (int64 for integers), in the CPU's order.
#include <algorithm>
#include <cmath>
#include <cub/block/block_reduce.cuh>
#include <cub/block/block_scan.cuh>
#include <cub/device/device_radix_sort.cuh>
#include <cub/device/device_segmented_radix_sort.cuh>
#include <limits>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/reduce_layout.h"
#include "ops/log_math.h"
#include "ops/sort.h"

namespace ignis::cuda {
namespace {

// ---- keys: unsigned integers in the CPU's order

/// Floating-point bits as a key: every NaN one key above +inf (bits of +inf: `inf`), -0.0 and
/// +0.0 one key, else the usual map (negatives complemented, positives above them).
template <class K>
__device__ __forceinline__ K float_key(K bits, K inf) {
  constexpr K sign = static_cast<K>(K(1) << (sizeof(K) * 8 - 1));
  const K mag = static_cast<K>(bits & static_cast<K>(~sign));
  if (mag > inf) return static_cast<K>(~K(0));
  if (mag == 0) return sign;
  return (bits & sign) ? static_cast<K>(~bits) : static_cast<K>(bits | sign);
}

/// SortKey<T>::K: the key type; of(v): v's key; kFloat: the all-ones key is NaN (NaN != NaN).
template <class T>
struct SortKey;
template <>
struct SortKey<bool> {
  using K = uint8_t;
  static constexpr bool kFloat = false;
  static __device__ K of(bool v) { return v ? 1 : 0; }
};
template <>
struct SortKey<uint8_t> {
  using K = uint8_t;
  static constexpr bool kFloat = false;
  static __device__ K of(uint8_t v) { return v; }
};
template <>
struct SortKey<int32_t> {
  using K = uint32_t;
  static constexpr bool kFloat = false;
  static __device__ K of(int32_t v) { return static_cast<uint32_t>(v) ^ 0x80000000u; }
};
template <>
struct SortKey<int64_t> {
  using K = uint64_t;
  static constexpr bool kFloat = false;
  static __device__ K of(int64_t v) { return static_cast<uint64_t>(v) ^ 0x8000000000000000ull; }
};
template <>
struct SortKey<BFloat16> {  // bfloat16 is float32's upper half: its bits sort as float's would
  using K = uint16_t;
  static constexpr bool kFloat = true;
  static __device__ K of(BFloat16 v) { return float_key<uint16_t>(v.bits, 0x7f80u); }
};
template <>
struct SortKey<float> {
  using K = uint32_t;
  static constexpr bool kFloat = true;
  static __device__ K of(float v) { return float_key<uint32_t>(__float_as_uint(v), 0x7f800000u); }
};
template <>
struct SortKey<double> {
  using K = uint64_t;
  static constexpr bool kFloat = true;
  static __device__ K of(double v) {
    return float_key<uint64_t>(static_cast<uint64_t>(__double_as_longlong(v)),
                               0x7ff0000000000000ull);
  }
};

// ---- sorting lines of a dense [outer, n, inner] block

/// Lines per chunk: at most this many items (keys and positions: 32 bytes each at most) at once.
/// The segmented sort so never sees more than 2^26 items or segments (its counts are int); a
/// line longer than a chunk is a chunk of its own, sorted by the device-wide radix sort, whose
/// item count is 64-bit.
constexpr int64_t kChunkItems = int64_t{1} << 26;
/// A chunk of at most kFewLines lines of at least kLongLine elements is sorted a line at a time
/// with the device-wide radix sort: the segmented sort gives a long line one block.
constexpr int64_t kFewLines = 8;
constexpr int64_t kLongLine = int64_t{1} << 15;

/// keys[j], pos[j] for j = (t - t0) * n + k: the key of element k of line t (flipped for a
/// descending sort) and k. Line t is x[o, :, i] with o = t / inner, i = t % inner.
template <class T, class K>
__global__ void make_keys_cuda(const T* x, K* keys, int64_t* pos, int64_t t0, int64_t count,
                               int64_t n, int64_t inner, bool flip) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += step) {
    const int64_t t = t0 + j / n, k = j % n;
    const K key = SortKey<T>::of(x[((t / inner) * n + k) * inner + t % inner]);
    keys[j] = flip ? static_cast<K>(~key) : key;
    pos[j] = k;
  }
}

__global__ void segment_offsets_cuda(int64_t* offsets, int64_t count, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < count;
       t += step) {
    offsets[t] = t * n;
  }
}

/// A uint8 tensor of at least `bytes` on `dev` (CUB's temporary storage), grown when too small.
void* ensure_bytes(Tensor& buf, size_t bytes, Device dev) {
  const int64_t want = std::max<int64_t>(static_cast<int64_t>(bytes), 1);
  if (!buf.defined() || buf.numel() < want) buf = make_tensor({want}, kUInt8, dev);
  return buf.data_ptr();
}

/// Sorts the lines of L (T elements on `dev`), a chunk of lines at a time, stably by key
/// (descending: NaN first, then from +inf down). After each chunk of lines [t0, t0 + cl) it calls
/// done(t0, cl, keys, pos): pos[(t - t0) * n + r] is the position in line t of its r-th element
/// in sorted order and keys[(t - t0) * n + r] that element's key (ascending keys, unflipped, when
/// !descending).
template <class T, class Done>
void sort_lines(const ReduceLayout& L, Device dev, bool descending, const char* op,
                const Done& done) {
  using K = typename SortKey<T>::K;
  const int64_t n = L.n, lines = L.outer * L.inner;
  if (n == 0 || lines == 0) return;
#if CUB_VERSION < 200200
  IGNIS_CHECK(n <= std::numeric_limits<int32_t>::max(), op, ": a line of ", n,
              " elements along the dim is longer than this CUB (", CUB_VERSION,
              ") can sort on the GPU (2^31 - 1)");
#else
  (void)op;
#endif
  const int64_t per_chunk = std::min(lines, std::max<int64_t>(kChunkItems / n, 1));
  const int64_t max_items = per_chunk * n;
  const cudaStream_t s = current_stream(dev);
  const T* x = static_cast<const T*>(L.data);

  const Tensor key_buf =
      make_tensor({2 * max_items * static_cast<int64_t>(sizeof(K))}, kUInt8, dev);
  const Tensor pos_buf = make_tensor({2 * max_items}, kInt64, dev);
  K* const keys0 = static_cast<K*>(key_buf.data_ptr());
  int64_t* const pos0 = pos_buf.data_ptr<int64_t>();
  Tensor offsets, temp;
  for (int64_t t0 = 0; t0 < lines; t0 += per_chunk) {
    const int64_t cl = std::min(per_chunk, lines - t0), count = cl * n;
    make_keys_cuda<T, K>
        <<<blocks_for(count), kThreads, 0, s>>>(x, keys0, pos0, t0, count, n, L.inner, descending);
    IGNIS_CUDA_CHECK(cudaGetLastError());
    // The halves of the buffers are CUB's double buffers: Current() holds the result.
    cub::DoubleBuffer<K> keys(keys0, keys0 + max_items);
    cub::DoubleBuffer<int64_t> pos(pos0, pos0 + max_items);
    size_t bytes = 0;
    if (cl == 1 || (cl <= kFewLines && n >= kLongLine)) {
      // A line at a time, each in its own slice of both halves (the buffer its result ends in
      // is its DoubleBuffer's Current()).
      IGNIS_CUDA_CHECK(
          cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, pos, n, 0, int(sizeof(K) * 8), s));
      void* tmp = ensure_bytes(temp, bytes, dev);
      for (int64_t l = 0; l < cl; ++l) {
        cub::DoubleBuffer<K> lk(keys0 + l * n, keys0 + max_items + l * n);
        cub::DoubleBuffer<int64_t> lp(pos0 + l * n, pos0 + max_items + l * n);
        IGNIS_CUDA_CHECK(
            cub::DeviceRadixSort::SortPairs(tmp, bytes, lk, lp, n, 0, int(sizeof(K) * 8), s));
        done(t0 + l, int64_t{1}, static_cast<const K*>(lk.Current()),
             static_cast<const int64_t*>(lp.Current()));
      }
    } else {
      if (!offsets.defined()) {
        offsets = make_tensor({per_chunk + 1}, kInt64, dev);
        segment_offsets_cuda<<<blocks_for(per_chunk + 1), kThreads, 0, s>>>(
            offsets.data_ptr<int64_t>(), per_chunk + 1, n);
        IGNIS_CUDA_CHECK(cudaGetLastError());
      }
      // The segmented radix sort (stable, as every radix sort): DeviceSegmentedSort would read
      // its partition sizes back to the host above a few hundred segments, waiting for the
      // stream. A chunk's items and lines fit its int counts (kChunkItems).
      const int64_t* off = offsets.data_ptr<int64_t>();
      const int items = static_cast<int>(count), segments = static_cast<int>(cl);
      constexpr int kBits = static_cast<int>(sizeof(K) * 8);
      IGNIS_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
          nullptr, bytes, keys, pos, items, segments, off, off + 1, 0, kBits, s));
      IGNIS_CUDA_CHECK(cub::DeviceSegmentedRadixSort::SortPairs(
          ensure_bytes(temp, bytes, dev), bytes, keys, pos, items, segments, off, off + 1, 0,
          kBits, s));
      done(t0, cl, static_cast<const K*>(keys.Current()),
           static_cast<const int64_t*>(pos.Current()));
    }
  }
}

/// io/vo (m elements per line: n for sort, k for topk) from the first m sorted positions of lines
/// [t0, t0 + cl): element r of line t goes to out[o, r, i] (o = t / inner, i = t % inner); its
/// value is x[o, pos, i]. vo may be null (argsort).
template <class T>
__global__ void write_sorted_cuda(const T* x, const int64_t* pos, T* vo, int64_t* io, int64_t t0,
                                  int64_t count, int64_t n, int64_t m, int64_t inner) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < count;
       j += step) {
    const int64_t tl = j / m, r = j % m;
    const int64_t t = t0 + tl, o = t / inner, i = t % inner;
    const int64_t p = pos[tl * n + r];
    const int64_t dst = (o * m + r) * inner + i;
    io[dst] = p;
    if (vo != nullptr) vo[dst] = x[(o * n + p) * inner + i];
  }
}

/// The dense block of x along dim (0-d x: one line of one element).
ReduceLayout lines_of(const Tensor& x, int64_t dim) {
  return dim_layout(x, x.dim() == 0 ? 0 : dim);
}

template <class T>
void write_sorted(const ReduceLayout& L, const Tensor& values, const Tensor& indices, int64_t m,
                  int64_t t0, int64_t cl, const int64_t* pos, cudaStream_t s) {
  const int64_t count = cl * m;
  write_sorted_cuda<T><<<blocks_for(count), kThreads, 0, s>>>(
      static_cast<const T*>(L.data), pos, values.defined() ? values.data_ptr<T>() : nullptr,
      indices.data_ptr<int64_t>(), t0, count, L.n, m, L.inner);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

void sort_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                 bool descending) {
  if (x.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const ReduceLayout L = lines_of(x, dim);
  const cudaStream_t s = current_stream(x.device());
  dispatch_dtype(x.dtype(), "sort", [&]<class T>() {
    using K = typename SortKey<T>::K;
    sort_lines<T>(L, x.device(), descending, "sort",
                  [&](int64_t t0, int64_t cl, const K*, const int64_t* pos) {
                    write_sorted<T>(L, values, indices, L.n, t0, cl, pos, s);
                  });
  });
}

void topk_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                 int64_t k, bool largest) {
  if (values.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const ReduceLayout L = lines_of(x, dim);
  const cudaStream_t s = current_stream(x.device());
  dispatch_dtype(x.dtype(), "topk", [&]<class T>() {
    using K = typename SortKey<T>::K;
    // The CPU's order: largest first (NaN first) or smallest first (NaN last), ties by position:
    // a stable sort's first k.
    sort_lines<T>(L, x.device(), largest, "topk",
                  [&](int64_t t0, int64_t cl, const K*, const int64_t* pos) {
                    write_sorted<T>(L, values, indices, k, t0, cl, pos, s);
                  });
  });
}

// ---- mode: in each ascending line, the last position of the first longest run of equal keys

constexpr int kModeThreads = 128;

struct ModeRun {
  int64_t len, end;  // a run of len keys ending at sorted index end
};
struct LongerFirst {  // the longer run, else the earlier one: a total order, so commutative
  __device__ ModeRun operator()(const ModeRun& a, const ModeRun& b) const {
    return (a.len > b.len || (a.len == b.len && a.end < b.end)) ? a : b;
  }
};
struct MaxOf {
  __device__ int64_t operator()(int64_t a, int64_t b) const { return a > b ? a : b; }
};

/// One block per line (grid-stride over the lines of the chunk): each thread takes a contiguous
/// slice of the line; the start of the run open at the slice's beginning is the latest run start
/// before it (an exclusive max-scan over the threads); each thread finds its first longest run
/// ending in its slice, and a block reduction picks the first longest of all.
template <class K, bool kFloat>
__global__ void mode_cuda(const K* keys, const int64_t* pos, int64_t* io, int64_t t0, int64_t lines,
                          int64_t n) {
  using Scan = cub::BlockScan<int64_t, kModeThreads>;
  using Reduce = cub::BlockReduce<ModeRun, kModeThreads>;
  __shared__ union {
    typename Scan::TempStorage scan;
    typename Reduce::TempStorage reduce;
  } tmp;
  const int64_t slice = (n + kModeThreads - 1) / kModeThreads;
  const int64_t lo = std::min<int64_t>(n, static_cast<int64_t>(threadIdx.x) * slice);
  const int64_t hi = std::min<int64_t>(n, lo + slice);
  for (int64_t t = blockIdx.x; t < lines; t += gridDim.x) {
    const K* kk = keys + t * n;
    // A run starts at j when j is first or kk[j] differs from kk[j - 1]; NaN (the all-ones key
    // of a floating type) equals nothing, so each NaN is a run of its own.
    auto starts = [kk](int64_t j) {
      if (j == 0 || kk[j] != kk[j - 1]) return true;
      return kFloat && kk[j] == static_cast<K>(~K(0));
    };
    int64_t last = -1;
    for (int64_t j = lo; j < hi; ++j) {
      if (starts(j)) last = j;
    }
    int64_t start = -1;
    Scan(tmp.scan).ExclusiveScan(last, start, int64_t{-1}, MaxOf());
    __syncthreads();  // tmp is reused by the reduction
    ModeRun best{0, 0};
    for (int64_t j = lo; j < hi; ++j) {
      if (starts(j)) start = j;
      if (j + 1 == n || starts(j + 1)) {
        const int64_t len = j - start + 1;
        if (len > best.len) best = ModeRun{len, j};
      }
    }
    const ModeRun win = Reduce(tmp.reduce).Reduce(best, LongerFirst());
    if (threadIdx.x == 0) io[t0 + t] = pos[t * n + win.end];
    __syncthreads();  // tmp is reused by the next line
  }
}

void mode_kernel(const Tensor& indices, const Tensor& x, int64_t dim) {
  if (indices.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const ReduceLayout L = lines_of(x, dim);
  const cudaStream_t s = current_stream(x.device());
  int64_t* io = indices.data_ptr<int64_t>();
  dispatch_dtype(x.dtype(), "mode", [&]<class T>() {
    using K = typename SortKey<T>::K;
    sort_lines<T>(L, x.device(), false, "mode",
                  [&](int64_t t0, int64_t cl, const K* keys, const int64_t* pos) {
                    const unsigned blocks = static_cast<unsigned>(std::min<int64_t>(cl, 65536));
                    mode_cuda<K, SortKey<T>::kFloat>
                        <<<blocks, kModeThreads, 0, s>>>(keys, pos, io, t0, cl, L.n);
                    IGNIS_CUDA_CHECK(cudaGetLastError());
                  });
  });
}

// ---- cumprod and logcumsumexp: a thread per [outer, inner] column, in the CPU's order and
// accumulator types

template <class T>
using scan_acc_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;


template <class T>
__global__ void scan_cuda(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, int kind) {
  using A = scan_acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner;
       c += step) {
    const int64_t base = (c / inner) * n * inner + c % inner;
    if (kind == 0) {
      A acc = 1;
      for (int64_t k = 0; k < n; ++k) {
        const int64_t e = base + k * inner;
        acc *= static_cast<A>(static_cast<acc_t<T>>(x[e]));
        y[e] = static_cast<T>(acc);
      }
    } else if constexpr (std::is_floating_point_v<A>) {
      A acc = -std::numeric_limits<double>::infinity();
      for (int64_t k = 0; k < n; ++k) {
        const int64_t e = base + k * inner;
        acc = log_add_exp(acc, static_cast<A>(static_cast<acc_t<T>>(x[e])));
        y[e] = static_cast<T>(acc);
      }
    }
  }
}

void scan_kernel(const Tensor& out, const Tensor& x, int64_t dim, int kind) {
  if (out.numel() == 0) return;
  DeviceGuard guard(x.device().index);
  const ReduceLayout L = lines_of(x, dim);
  dispatch_dtype(x.dtype(), kind == 0 ? "cumprod" : "logcumsumexp", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL(kind == 0 ? "cumprod" : "logcumsumexp", ": bool inputs are promoted first");
    } else {
      scan_cuda<T><<<blocks_for(L.outer * L.inner), kThreads, 0, current_stream(x.device())>>>(
          static_cast<const T*>(L.data), out.data_ptr<T>(), L.outer, L.n, L.inner, kind);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(sort_stub, CUDA, &sort_kernel);
IGNIS_REGISTER_KERNEL(topk_stub, CUDA, &topk_kernel);
IGNIS_REGISTER_KERNEL(mode_stub, CUDA, &mode_kernel);
IGNIS_REGISTER_KERNEL(scan_stub, CUDA, &scan_kernel);

}  // namespace ignis::cuda
