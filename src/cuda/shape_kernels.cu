// CUDA kernels of cumsum, flip, tril/triu, one_hot and the min/max of an index tensor (for the
// stubs of cpu/reduce_scan_kernels.cpp, cpu/join_kernels.cpp and cpu/index_kernels.cpp).
#include <limits>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/dispatch_size.h"
#include "ops/index.h"
#include "ops/reduce.h"
#include "ops/reduce_layout.h"

namespace ignis::cuda {
namespace {

// ---- cumsum along one dim: a thread per [outer, inner] column, in double for floating types
// and int64 for integers (as the CPU kernel)

template <class T>
using scan_acc_t = std::conditional_t<std::is_floating_point_v<acc_t<T>>, double, int64_t>;

template <class T>
__global__ void cumsum_cuda(const T* x, T* y, int64_t outer, int64_t n, int64_t inner,
                            bool reverse) {
  using A = scan_acc_t<T>;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < outer * inner;
       k += step) {
    const int64_t base = (k / inner) * n * inner + k % inner;
    A acc = 0;
    for (int64_t s = 0; s < n; ++s) {
      const int64_t e = base + (reverse ? n - 1 - s : s) * inner;
      acc += static_cast<A>(static_cast<acc_t<T>>(x[e]));
      y[e] = static_cast<T>(acc);
    }
  }
}

void cumsum_kernel(const Tensor& out, const Tensor& x, int64_t dim, bool reverse) {
  if (out.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, dim);
  DeviceGuard guard(x.device().index);
  dispatch_dtype(x.dtype(), "cumsum", [&]<class T>() {
    if constexpr (std::is_same_v<T, bool>) {
      IGNIS_FAIL("cumsum: bool inputs are summed as int64");
    } else {
      cumsum_cuda<T><<<blocks_for(L.outer * L.inner), kThreads, 0, current_stream(x.device())>>>(
          static_cast<const T*>(L.data), out.data_ptr<T>(), L.outer, L.n, L.inner, reverse);
    }
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- flip: out (contiguous) = x with some dims reversed (x read through its strides)

template <class T>
__global__ void flip_cuda(const T* x, T* out, int64_t n, Geometry<1> g) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    int64_t rem = e, off = 0;
    for (int d = 0; d < g.ndim; ++d) {  // innermost first
      off += (rem % g.shape[d]) * g.strides[0][d];
      rem /= g.shape[d];
    }
    out[e] = x[off];
  }
}

void flip_kernel(const Tensor& out, const Tensor& x, const std::vector<bool>& flip) {
  const int64_t nd = x.dim(), n = x.numel();
  if (n == 0) return;
  IGNIS_CHECK(nd <= kMaxDims, "flip: more than ", kMaxDims, " dims on CUDA");
  Geometry<1> g{};
  g.ndim = static_cast<int>(nd);
  int64_t base = 0;
  for (int64_t d = 0; d < nd; ++d) {
    const int64_t k = nd - 1 - d;  // innermost first
    g.shape[k] = x.size(d);
    g.strides[0][k] = flip[d] ? -x.stride(d) : x.stride(d);
    if (flip[d]) base += (x.size(d) - 1) * x.stride(d);
  }
  DeviceGuard guard(x.device().index);
  dispatch_size(x.dtype(), [&]<class T>() {
    flip_cuda<T><<<blocks_for(n), kThreads, 0, current_stream(x.device())>>>(
        static_cast<const T*>(x.data_ptr()) + base, static_cast<T*>(out.data_ptr()), n, g);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- tril / triu over the last two dims of a contiguous x

template <class T>
__global__ void tri_cuda(const T* x, T* out, int64_t n, int64_t R, int64_t C, int64_t diagonal,
                         bool lower) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t e = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; e < n; e += step) {
    const int64_t j = e % C, i = (e / C) % R;
    const bool keep = lower ? j <= i + diagonal : j >= i + diagonal;
    out[e] = keep ? x[e] : T(0);
  }
}

void tri_kernel(const Tensor& out, const Tensor& x, int64_t diagonal, bool lower) {
  const int64_t nd = x.dim(), n = x.numel();
  if (n == 0) return;
  DeviceGuard guard(x.device().index);
  dispatch_size(x.dtype(), [&]<class T>() {
    tri_cuda<T><<<blocks_for(n), kThreads, 0, current_stream(x.device())>>>(
        static_cast<const T*>(x.data_ptr()), static_cast<T*>(out.data_ptr()), n, x.size(nd - 2),
        x.size(nd - 1), diagonal, lower);
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- one_hot: out (int64, zeroed) [..., classes]; a bad index is read back by the host

template <class I>
__global__ void one_hot_cuda(const I* ix, int64_t* out, int64_t n, int64_t classes,
                             unsigned long long* bad) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t i = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; i < n; i += step) {
    const int64_t v = ix[i];
    if (static_cast<uint64_t>(v) >= static_cast<uint64_t>(classes)) {
      // bad[0]: a flag, bad[1]: the value (first writer wins)
      if (atomicCAS(bad, 0ull, 1ull) == 0ull) bad[1] = static_cast<unsigned long long>(v);
      continue;
    }
    out[i * classes + v] = 1;
  }
}

BadIndex one_hot_kernel(const Tensor& out, const Tensor& index, int64_t classes) {
  const int64_t n = index.numel();
  if (n == 0) return {};
  DeviceGuard guard(index.device().index);
  const cudaStream_t s = current_stream(index.device());
  const Tensor bad = zeros({2}, TensorOptions(kInt64).device(index.device()));
  auto* bp = static_cast<unsigned long long*>(bad.data_ptr());
  if (index.dtype() == kInt32) {
    one_hot_cuda<int32_t><<<blocks_for(n), kThreads, 0, s>>>(index.data_ptr<int32_t>(),
                                                             out.data_ptr<int64_t>(), n, classes, bp);
  } else {
    one_hot_cuda<int64_t><<<blocks_for(n), kThreads, 0, s>>>(index.data_ptr<int64_t>(),
                                                             out.data_ptr<int64_t>(), n, classes, bp);
  }
  IGNIS_CUDA_CHECK(cudaGetLastError());
  const Tensor host = bad.cpu();  // waits
  const int64_t* h = host.data_ptr<int64_t>();
  return {h[0] != 0, h[1]};
}

// ---- the min and max of an integer index tensor (one_hot's num_classes inference)

std::pair<int64_t, int64_t> int_minmax_kernel(const Tensor& index) {
  if (index.numel() == 0) {  // the CPU kernel's empty result
    if (index.dtype() == kInt32) {
      return {std::numeric_limits<int32_t>::max(), std::numeric_limits<int32_t>::min()};
    }
    return {std::numeric_limits<int64_t>::max(), std::numeric_limits<int64_t>::min()};
  }
  NoGradGuard ng;
  return {index.amin().item<int64_t>(), index.amax().item<int64_t>()};
}

}  // namespace

IGNIS_REGISTER_KERNEL(cumsum_stub, CUDA, &cumsum_kernel);
IGNIS_REGISTER_KERNEL(flip_stub, CUDA, &flip_kernel);
IGNIS_REGISTER_KERNEL(tri_stub, CUDA, &tri_kernel);
IGNIS_REGISTER_KERNEL(one_hot_stub, CUDA, &one_hot_kernel);
IGNIS_REGISTER_KERNEL(int_minmax_stub, CUDA, &int_minmax_kernel);

}  // namespace ignis::cuda
