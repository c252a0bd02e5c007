// CUDA kernels of the stream compactions masked_select and nonzero (for the stubs of
// cpu/index_kernels.cpp). Each runs in two passes over its input, as PyTorch's do: a count of
// the kept elements (a block reduction and one atomic add per block), read back by the host
// (the one synchronisation these ops need: it sizes the result), then CUB's
// DeviceSelect::Flagged, which keeps the elements in order (row-major, as on the CPU). CUB's
// offsets are 64-bit, so inputs of more than 2^31 elements are compacted whole.
//
// nonzero selects the flat indices 0, 1, 2, ... of the nonzero elements (a counting iterator,
// the flags computed on the fly from x) and unravels them into the rows of the [n, dim] result.
// "Nonzero" is the CPU kernel's test, v != 0 in acc_t: NaN is nonzero, -0.0 is zero, and bool
// is read as bytes.
#include <thrust/iterator/counting_iterator.h>
#include <thrust/iterator/transform_iterator.h>

#include <algorithm>
#include <climits>
#include <cub/cub.cuh>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/dispatch_size.h"
#include "ops/index.h"

namespace ignis::cuda {
namespace {

/// 1 where v is nonzero (compared in acc_t, as the CPU kernel does).
template <class T>
struct NonzeroFlag {
  IGNIS_HD uint8_t operator()(T v) const { return static_cast<acc_t<T>>(v) != acc_t<T>(0) ? 1 : 0; }
};

// ---- pass 1: the number of nonzero elements of x, added to *count (zeroed by the caller)

template <class T>
__global__ void count_nonzero_cuda(const T* x, int64_t n, unsigned long long* count) {
  using Reduce = cub::BlockReduce<long long, kThreads>;
  __shared__ typename Reduce::TempStorage tmp;
  const NonzeroFlag<T> flag;
  long long c = 0;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    c += flag(x[i]);
  }
  const long long block = Reduce(tmp).Sum(c);  // valid in thread 0
  if (threadIdx.x == 0 && block != 0) atomicAdd(count, static_cast<unsigned long long>(block));
}

/// The count buffer of one call: an int64 on the device, zeroed on the stream. After the count
/// has been read, it receives CUB's number of selected elements.
class Counter {
 public:
  Counter(Device device, cudaStream_t stream)
      : buf_(make_tensor({1}, kInt64, device)), stream_(stream) {
    IGNIS_CUDA_CHECK(cudaMemsetAsync(ptr(), 0, sizeof(int64_t), stream_));
  }
  int64_t* ptr() const { return buf_.data_ptr<int64_t>(); }
  unsigned long long* counter() const { return reinterpret_cast<unsigned long long*>(ptr()); }

  /// Counts the nonzero elements of x (n of them, T the type they are compared in) and waits for
  /// the count.
  template <class T>
  int64_t count(const T* x, int64_t n) const {
    count_nonzero_cuda<T><<<blocks_for(n), kThreads, 0, stream_>>>(x, n, counter());
    IGNIS_CUDA_CHECK(cudaGetLastError());
    int64_t h = 0;
    IGNIS_CUDA_CHECK(cudaMemcpyAsync(&h, ptr(), sizeof h, cudaMemcpyDeviceToHost, stream_));
    wait_for_stream(stream_);  // the one wait: the count sizes the result
    return h;
  }

 private:
  Tensor buf_;
  cudaStream_t stream_;
};

// ---- pass 2: CUB's ordered selection, its temporary storage from the caching allocator

template <class In, class Flags, class Out>
void select_flagged(const char* op, In in, Flags flags, Out out, int64_t* num_selected, int64_t n,
                    Device device, cudaStream_t stream) {
#if CUB_VERSION < 300000  // older CUBs may count items in int
  IGNIS_CHECK(n <= INT_MAX, op, ": inputs of more than 2^31 - 1 elements need CUB 3.0 (CUDA 13) ",
              "on the GPU, but got ", n, " elements");
#else
  (void)op;
#endif
  size_t bytes = 0;
  IGNIS_CUDA_CHECK(
      cub::DeviceSelect::Flagged(nullptr, bytes, in, flags, out, num_selected, n, stream));
  // At least one byte: a null temporary storage asks CUB for its size instead.
  const Tensor tmp =
      make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, device);
  IGNIS_CUDA_CHECK(
      cub::DeviceSelect::Flagged(tmp.data_ptr(), bytes, in, flags, out, num_selected, n, stream));
}

// ---- masked_select: x and mask contiguous, of one shape; mask bool (read as bytes)

Tensor masked_select_kernel(const Tensor& x, const Tensor& mask) {
  const int64_t n = x.numel();
  if (n == 0) return make_tensor({0}, x.dtype(), x.device());
  DeviceGuard guard(x.device().index);
  const cudaStream_t s = current_stream(x.device());
  const auto* m = static_cast<const uint8_t*>(mask.data_ptr());
  const Counter counter(x.device(), s);
  const int64_t total = counter.count(m, n);
  Tensor out = make_tensor({total}, x.dtype(), x.device());
  if (total == 0) return out;
  dispatch_size(x.dtype(), [&]<class T>() {
    select_flagged("masked_select", static_cast<const T*>(x.data_ptr()), m,
                   static_cast<T*>(out.data_ptr()), counter.ptr(), n, x.device(), s);
  });
  return out;
}

// ---- nonzero: x contiguous, any dtype; the result int64 [count, dim]

constexpr int kUnravelDims = 32;  // dims unravelled per launch
struct UnravelDims {
  int first, count;  // the result's columns [first, first + count)
  int64_t inner;     // the product of the sizes after them
  int64_t sizes[kUnravelDims];
};

// out[r, first + d] = the coordinate along dim first + d of flat index flat[r].
__global__ void unravel_cuda(const int64_t* flat, int64_t* out, int64_t rows, int64_t nd,
                             UnravelDims u) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t r = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; r < rows;
       r += step) {
    int64_t f = flat[r] / u.inner;
    int64_t* row = out + r * nd + u.first;
    for (int d = u.count - 1; d >= 0; --d) {
      row[d] = f % u.sizes[d];
      f /= u.sizes[d];
    }
  }
}

Tensor nonzero_kernel(const Tensor& x) {
  const int64_t nd = x.dim(), n = x.numel();
  if (n == 0) return make_tensor({0, nd}, kInt64, x.device());
  const Device dev = x.device();
  DeviceGuard guard(dev.index);
  const cudaStream_t s = current_stream(dev);
  const Counter counter(dev, s);
  Tensor out;
  dispatch_dtype(x.dtype() == kBool ? kUInt8 : x.dtype(), "nonzero", [&]<class T>() {
    const T* xp = static_cast<const T*>(x.data_ptr());
    const int64_t total = counter.count(xp, n);
    out = make_tensor({total, nd}, kInt64, dev);
    if (total == 0 || nd == 0) return;  // a 0-d input: rows of no coordinates
    // The flat indices of the nonzeros: straight into out when it has one column.
    const Tensor flat = nd == 1 ? out : make_tensor({total}, kInt64, dev);
    select_flagged("nonzero", thrust::counting_iterator<int64_t>(0),
                   thrust::transform_iterator<NonzeroFlag<T>, const T*>(xp, NonzeroFlag<T>{}),
                   flat.data_ptr<int64_t>(), counter.ptr(), n, dev, s);
    if (nd == 1) return;
    int64_t inner = 1;
    for (int64_t end = nd; end > 0; end -= kUnravelDims) {  // the last dims first
      UnravelDims u{};
      u.first = static_cast<int>(std::max<int64_t>(0, end - kUnravelDims));
      u.count = static_cast<int>(end - u.first);
      u.inner = inner;
      for (int d = 0; d < u.count; ++d) {
        u.sizes[d] = x.size(u.first + d);
        inner *= u.sizes[d];
      }
      unravel_cuda<<<blocks_for(total), kThreads, 0, s>>>(flat.data_ptr<int64_t>(),
                                                          out.data_ptr<int64_t>(), total, nd, u);
      IGNIS_CUDA_CHECK(cudaGetLastError());
    }
  });
  return out;
}

}  // namespace

IGNIS_REGISTER_KERNEL(masked_select_stub, CUDA, &masked_select_kernel);
IGNIS_REGISTER_KERNEL(nonzero_stub, CUDA, &nonzero_kernel);

}  // namespace ignis::cuda
