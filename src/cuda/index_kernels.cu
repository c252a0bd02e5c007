// CUDA kernels of the indexing ops: gather-style reads (index_select, gather, advanced
// indexing, with linear_index's flat offsets), index_put (with accumulate), scatter /
// scatter_add, index_add, masked_fill and iota, for the
// stubs of cpu/index_kernels.cpp. Index values are checked on the device; the first bad one is
// recorded there and read back by the host (which waits for it), so the front end throws the
// same message as on the CPU.
//
// Determinism: accumulation with possibly repeated indices (index_put_ with accumulate=true)
// sorts the elements by destination (stably) and gives each destination a thread adding its
// elements in the CPU's order; scatter_add's lines never share a destination, so they run in
// parallel and each line in order; index_add gives each thread its own destination column.
#include <algorithm>
#include <climits>
#include <cub/device/device_radix_sort.cuh>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/dispatch_size.h"
#include "ops/index.h"

namespace ignis::cuda {
namespace {

struct DeviceBad {
  int found;
  long long value;
};

__device__ inline bool fix_index(int64_t& i, const IndexBounds& b) {
  if (!b.check) return true;
  if (b.wrap && i < 0) i += b.size;
  return static_cast<uint64_t>(i) < static_cast<uint64_t>(b.size);
}
__device__ inline void record_bad(DeviceBad* bad, int64_t v) {
  if (atomicCAS(&bad->found, 0, 1) == 0) bad->value = v;
}

template <class T>
__device__ inline T add_values(T a, T b) {
  if constexpr (std::is_same_v<T, bool>)
    return a || b;
  else
    return static_cast<T>(static_cast<acc_t<T>>(a) + static_cast<acc_t<T>>(b));
}

// The bad-index record of one kernel launch, on the device. Inactive (`checked` false: the
// caller's indices need no check), it has no memory and reads as nothing found without waiting.
class BadSlot {
 public:
  BadSlot(Device device, cudaStream_t stream, bool checked = true) : stream_(stream) {
    if (!checked) return;
    buf_ = make_tensor({static_cast<int64_t>(sizeof(DeviceBad))}, kUInt8, device);
    IGNIS_CUDA_CHECK(cudaMemsetAsync(ptr(), 0, sizeof(DeviceBad), stream_));
  }
  DeviceBad* ptr() const {
    return buf_.defined() ? static_cast<DeviceBad*>(buf_.data_ptr()) : nullptr;
  }
  BadIndex read() const {
    if (!buf_.defined()) return {};
    DeviceBad h{};
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(&h, ptr(), sizeof h, cudaMemcpyDeviceToHost, stream_));
    wait_for_stream(stream_);
    return {h.found != 0, static_cast<int64_t>(h.value)};
  }

 private:
  Tensor buf_;
  cudaStream_t stream_;
};

// Element e's operand addresses (p) and its index value i (wrapped where negative indices
// count from the end): false, with the bad value recorded, when it is out of range.
template <class I>
__device__ inline bool indexed_element(const Geometry<3>& g, const Operands<3>& ops, int64_t e,
                                       const IndexBounds& b, DeviceBad* bad, char** p,
                                       int64_t& i) {
  operand_ptrs(g, ops, e, p);
  i = *reinterpret_cast<const I*>(p[2]);
  const int64_t orig = i;
  if (fix_index(i, b)) return true;
  record_bad(bad, orig);
  return false;
}

// ---- gather: out = *(src + index * stride)

template <class T, class I>
__global__ void gather_cuda(int64_t n, Operands<3> ops, Geometry<3> g, int64_t stride,
                            IndexBounds b, DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    char* p[3];
    int64_t i;
    if (!indexed_element<I>(g, ops, e, b, bad, p, i)) continue;
    *reinterpret_cast<T*>(p[0]) = *reinterpret_cast<const T*>(p[1] + i * stride);
  }
}

BadIndex gather_kernel(const TensorIter& it, DType dt, DType index_dt, int64_t stride,
                       IndexBounds b) {
  if (it.numel == 0) return {};
  DeviceGuard guard(it.device.index);
  const cudaStream_t s = current_stream(it.device);
  BadSlot bad(it.device, s, b.check);
  dispatch_size(dt, [&]<class T>() {
    dispatch_index(index_dt, [&]<class I>() {
      gather_cuda<T, I><<<blocks_for(it.numel), kThreads, 0, s>>>(
          it.numel, operands_of<3>(it), geometry_of<3>(it, "CUDA indexing"), stride, b, bad.ptr());
    });
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
  return bad.read();
}

// ---- put: *(dst + index * stride) = src, in parallel

template <class T, class I>
__global__ void put_cuda(int64_t n, Operands<3> ops, Geometry<3> g, int64_t stride, IndexBounds b,
                         DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    char* p[3];
    int64_t i;
    if (!indexed_element<I>(g, ops, e, b, bad, p, i)) continue;
    *reinterpret_cast<T*>(p[0] + i * stride) = *reinterpret_cast<const T*>(p[1]);
  }
}

// ---- put with accumulate (+=), deterministic and parallel: each element's destination, as a
// byte offset from the destination operand's start (a bad index: the largest key, skipped), is
// sorted stably with the element's position (CUB's radix sort); then a thread per destination
// adds its elements in position order, the CPU's order, so the sums are the CPU's bit for bit.
// (With a bad index the CPU stops there; here the good ones are added. Either way the call
// throws, naming the first bad index found.)

constexpr int64_t kBadKey = INT64_MAX;

template <class I>
__global__ void put_keys_cuda(int64_t n, Operands<3> ops, Geometry<3> g, int64_t stride,
                              IndexBounds b, int64_t* key, int64_t* pos, DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    char* p[3];
    int64_t i;
    key[e] = indexed_element<I>(g, ops, e, b, bad, p, i) ? (p[0] - ops.data[0]) + i * stride
                                                          : kBadKey;
    pos[e] = e;
  }
}

template <class T>
__global__ void put_runs_cuda(int64_t n, Operands<3> ops, Geometry<3> g, const int64_t* key,
                              const int64_t* pos) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t j = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; j < n; j += step) {
    const int64_t k = key[j];
    if (k == kBadKey || (j > 0 && key[j - 1] == k)) continue;  // not the start of a run
    T* d = reinterpret_cast<T*>(ops.data[0] + k);
    T acc = *d;
    for (int64_t m = j; m < n && key[m] == k; ++m) {
      char* p[3];
      operand_ptrs(g, ops, pos[m], p);
      acc = add_values(acc, *reinterpret_cast<const T*>(p[1]));
    }
    *d = acc;
  }
}

BadIndex put_kernel(const TensorIter& it, DType dt, DType index_dt, int64_t stride, IndexBounds b,
                    bool accumulate) {
  if (it.numel == 0) return {};
  DeviceGuard guard(it.device.index);
  const cudaStream_t s = current_stream(it.device);
  BadSlot bad(it.device, s, b.check);
  const int64_t n = it.numel;
  const Operands<3> ops = operands_of<3>(it);
  const Geometry<3> g = geometry_of<3>(it, "CUDA indexing");
  dispatch_dtype(dt, "index_put_", [&]<class T>() {
    dispatch_index(index_dt, [&]<class I>() {
      if (!accumulate) {
        put_cuda<T, I><<<blocks_for(n), kThreads, 0, s>>>(n, ops, g, stride, b, bad.ptr());
        return;
      }
      // Keys and positions, twice (the sort's double buffer).
      const Tensor buf = make_tensor({4 * n}, kInt64, it.device);
      int64_t* k0 = buf.data_ptr<int64_t>();
      put_keys_cuda<I><<<blocks_for(n), kThreads, 0, s>>>(n, ops, g, stride, b, k0, k0 + 2 * n,
                                                         bad.ptr());
      IGNIS_CUDA_CHECK(cudaGetLastError());
      cub::DoubleBuffer<int64_t> keys(k0, k0 + n), pos(k0 + 2 * n, k0 + 3 * n);
      size_t bytes = 0;
      IGNIS_CUDA_CHECK(cub::DeviceRadixSort::SortPairs(nullptr, bytes, keys, pos, n, 0, 64, s));
      const Tensor temp =
          make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, it.device);
      IGNIS_CUDA_CHECK(
          cub::DeviceRadixSort::SortPairs(temp.data_ptr(), bytes, keys, pos, n, 0, 64, s));
      put_runs_cuda<T><<<blocks_for(n), kThreads, 0, s>>>(n, ops, g, keys.Current(),
                                                          pos.Current());
    });
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
  return bad.read();
}

// ---- scatter / scatter_add: one iterator element is a whole line along the scatter dim

template <class T, class I>
__global__ void scatter_cuda(int64_t n, Operands<3> ops, Geometry<3> g, ScatterArgs a,
                             DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    char* p[3];
    operand_ptrs(g, ops, e, p);
    for (int64_t l = 0; l < a.line; ++l) {
      int64_t i = *reinterpret_cast<const I*>(p[1] + l * a.index_stride);
      const int64_t orig = i;
      if (!fix_index(i, a.bounds)) {
        record_bad(bad, orig);
        break;
      }
      T* d = reinterpret_cast<T*>(p[0] + i * a.self_stride);
      const T v = *reinterpret_cast<const T*>(p[2] + l * a.src_stride);
      *d = a.accumulate ? add_values(*d, v) : v;
    }
  }
}

BadIndex scatter_kernel(const TensorIter& it, DType dt, DType index_dt, const ScatterArgs& a) {
  if (it.numel == 0 || a.line == 0) return {};
  DeviceGuard guard(it.device.index);
  const cudaStream_t s = current_stream(it.device);
  BadSlot bad(it.device, s, a.bounds.check);
  dispatch_dtype(dt, "scatter", [&]<class T>() {
    dispatch_index(index_dt, [&]<class I>() {
      scatter_cuda<T, I><<<blocks_for(it.numel), kThreads, 0, s>>>(
          it.numel, operands_of<3>(it), geometry_of<3>(it, "CUDA indexing"), a, bad.ptr());
    });
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
  return bad.read();
}

// ---- index_add: self[o, index[e], k] += alpha * source[o, e, k]. One thread per (o, k) column
// walks the edges in order: no two threads write one element, and the sums' order is fixed.

template <class I>
__global__ void check_indices_cuda(const I* idx, int64_t E, int64_t N, DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < E; e += step) {
    if (static_cast<uint64_t>(idx[e]) >= static_cast<uint64_t>(N)) record_bad(bad, idx[e]);
  }
}

template <class T, class I>
__global__ void index_add_cuda(T* self, const T* src, const I* idx, int64_t outer, int64_t E,
                               int64_t inner, int64_t s0, int64_t s1, int64_t s2, int64_t r0,
                               int64_t r1, int64_t r2, acc_t<T> alpha) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t c = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; c < outer * inner;
       c += step) {
    const int64_t o = c / inner, k = c % inner;
    for (int64_t e = 0; e < E; ++e) {
      T* d = self + o * s0 + static_cast<int64_t>(idx[e]) * s1 + k * s2;
      const T v = src[o * r0 + e * r1 + k * r2];
      if constexpr (std::is_same_v<T, bool>) {
        *d = *d || (alpha && v);
      } else {
        *d = static_cast<T>(static_cast<acc_t<T>>(*d) + alpha * static_cast<acc_t<T>>(v));
      }
    }
  }
}

BadIndex index_add_kernel(const Tensor& self, int64_t dim, const Tensor& index,
                          const Tensor& source, Scalar alpha) {
  const auto st = *collapse3(self, dim);
  const auto rt = *collapse3(source, dim);
  const int64_t nd = self.dim();
  int64_t outer = 1, inner = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= self.sizes()[d];
  for (int64_t d = dim + 1; d < nd; ++d) inner *= self.sizes()[d];
  const int64_t N = nd == 0 ? 1 : self.sizes()[dim];
  const int64_t E = index.numel();
  if (E == 0) return {};
  DeviceGuard guard(self.device().index);
  const cudaStream_t s = current_stream(self.device());
  return dispatch_dtype(self.dtype(), "index_add", [&]<class T>() {
    return dispatch_index(index.dtype(), [&]<class I>() -> BadIndex {
      const I* idx = index.data_ptr<I>();
      // Every index is checked first, so that a bad one leaves self untouched.
      BadSlot bad(self.device(), s);
      check_indices_cuda<I><<<blocks_for(E), kThreads, 0, s>>>(idx, E, N, bad.ptr());
      IGNIS_CUDA_CHECK(cudaGetLastError());
      const BadIndex b = bad.read();
      if (b.found || outer == 0 || inner == 0) return b;
      index_add_cuda<T, I><<<blocks_for(outer * inner), kThreads, 0, s>>>(
          static_cast<T*>(self.data_ptr()), static_cast<const T*>(source.data_ptr()), idx, outer, E,
          inner, st[0], st[1], st[2], rt[0], rt[1], rt[2], alpha.to<acc_t<T>>());
      IGNIS_CUDA_CHECK(cudaGetLastError());
      return {};
    });
  });
}

// ---- masked_fill: out = mask ? value : x

template <class A>
struct MaskedFill {
  A value;
  IGNIS_HD A operator()(A x, uint8_t m) const { return m ? value : x; }
};

void masked_fill_kernel(const TensorIter& it, DType dt, Scalar value) {
  dispatch_dtype(dt, "masked_fill", [&]<class T>() {
    using L = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;
    gpu_kernel<L, L, uint8_t>(it,
                              MaskedFill<acc_t<L>>{static_cast<acc_t<L>>(value.to<acc_t<T>>())});
  });
}

// ---- linear_index: out = sum_k wrap(idx[k]) * strides[k] (advanced indexing's flat offsets)

__global__ void linear_index_cuda(int64_t* out, const int64_t* ix, int64_t n, int64_t stride,
                                  IndexBounds b, bool first, DeviceBad* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    int64_t v = ix[i];
    if (!fix_index(v, b)) {
      record_bad(bad, ix[i]);
      continue;
    }
    out[i] = (first ? 0 : out[i]) + v * stride;
  }
}

BadIndex linear_index_kernel(const Tensor& out, const std::vector<Tensor>& idx,
                             const std::vector<int64_t>& strides, const std::vector<int64_t>& sizes,
                             int64_t& bad_k) {
  const int64_t n = out.numel();
  if (n == 0) return {};
  DeviceGuard guard(out.device().index);
  const cudaStream_t s = current_stream(out.device());
  for (size_t k = 0; k < idx.size(); ++k) {
    BadSlot bad(out.device(), s);
    linear_index_cuda<<<blocks_for(n), kThreads, 0, s>>>(
        out.data_ptr<int64_t>(), idx[k].data_ptr<int64_t>(), n, strides[k],
        IndexBounds{sizes[k], true, true}, k == 0, bad.ptr());
    IGNIS_CUDA_CHECK(cudaGetLastError());
    if (const BadIndex b = bad.read(); b.found) {
      bad_k = static_cast<int64_t>(k);
      return b;
    }
  }
  return {};
}

// ---- iota: 0, 1, 2, ...

__global__ void iota_cuda(int64_t* out, int64_t n) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    out[i] = i;
  }
}

void iota_kernel(const Tensor& out) {
  if (out.numel() == 0) return;
  DeviceGuard guard(out.device().index);
  iota_cuda<<<blocks_for(out.numel()), kThreads, 0, current_stream(out.device())>>>(
      out.data_ptr<int64_t>(), out.numel());
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

IGNIS_REGISTER_KERNEL(index_gather_stub, CUDA, &gather_kernel);
IGNIS_REGISTER_KERNEL(index_put_stub, CUDA, &put_kernel);
IGNIS_REGISTER_KERNEL(scatter_stub, CUDA, &scatter_kernel);
IGNIS_REGISTER_KERNEL(index_add_stub, CUDA, &index_add_kernel);
IGNIS_REGISTER_KERNEL(masked_fill_stub, CUDA, &masked_fill_kernel);
IGNIS_REGISTER_KERNEL(iota_stub, CUDA, &iota_kernel);
IGNIS_REGISTER_KERNEL(linear_index_stub, CUDA, &linear_index_kernel);

}  // namespace ignis::cuda
