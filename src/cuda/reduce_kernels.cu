// CUDA kernels of the reductions: the one-pass reductions (sum, mean, prod, amax, amin, all, any,
// norm) and the two-pass ones (var / std, logsumexp) with the CPU's reducers (ops/reducers.h),
// max/min over one dim with indices, and softmax / log_softmax with their backward. The input is
// seen as a dense [outer, n, inner] block (ops/reduce_layout.h, the CPU driver's analysis): rows
// (inner = 1) are folded by a block of threads each, with a tree in shared memory; columns by one
// thread per output, whose neighbours read neighbouring addresses; a few long rows or columns
// (a full reduction) are first split into partial folds of fixed ranges, merged by a second
// kernel. The order of the folds is fixed, so results are deterministic.
#include <algorithm>
#include <cmath>
#include <utility>

#include "core/tensor_impl.h"
#include "cuda/loops.cuh"
#include "ops/reduce_layout.h"
#include "ops/reducers.h"

namespace ignis::cuda {
namespace {

constexpr int kRowThreads = 256;

unsigned grid_for(int64_t work, int64_t per_block) {
  const int64_t b = (work + per_block - 1) / per_block;
  return static_cast<unsigned>(b < 65536 ? (b > 0 ? b : 1) : 65536);
}

// ---- the driver: get_r(k) is output k's reducer (the same one for one-pass reductions; made
// from k's first-pass result for var and logsumexp)

template <class R>
struct SameReducer {
  R r;
  __device__ R operator()(int64_t) const { return r; }
};
template <class S, class Make>
struct SecondPass {
  const S* first;
  Make make;
  __device__ auto operator()(int64_t k) const { return make(first[k]); }
};

// Merges the threads' values `acc` with r.merge as a fixed tree in s (one slot per thread,
// blockDim.x a power of two): the result is in s[0].
template <class R, class A>
__device__ void block_merge(const R& r, A acc, A* s) {
  s[threadIdx.x] = acc;
  __syncthreads();
  for (int w = blockDim.x / 2; w > 0; w >>= 1) {
    if (threadIdx.x < w) s[threadIdx.x] = r.merge(s[threadIdx.x], s[threadIdx.x + w]);
    __syncthreads();
  }
}

// The block folds x[begin, end) with r, its threads striding, then merges their values
// (block_merge): the result is in s[0].
template <class T, class R, class A>
__device__ void block_fold(const R& r, const T* x, int64_t begin, int64_t end, A* s) {
  A acc = r.identity();
  for (int64_t j = begin + threadIdx.x; j < end; j += blockDim.x) {
    acc = r.step(acc, static_cast<acc_t<T>>(x[j]));
  }
  block_merge(r, acc, s);
}

template <class T, class Out, class GetR>
__global__ void reduce_rows_kernel(const T* x, Out* out, int64_t outer, int64_t n, GetR get_r) {
  using R = decltype(get_r(0));
  using A = typename R::acc_type;
  __shared__ A s[kRowThreads];
  for (int64_t row = blockIdx.x; row < outer; row += gridDim.x) {
    const R r = get_r(row);
    block_fold(r, x + row * n, 0, n, s);
    if (threadIdx.x == 0) out[row] = static_cast<Out>(r.finish(s[0], n));
    __syncthreads();
  }
}

template <class T, class Out, class GetR>
__global__ void reduce_cols_kernel(const T* x, Out* out, int64_t outer, int64_t n, int64_t inner,
                                   GetR get_r) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += step) {
    const int64_t o = k / inner, i = k % inner;
    const auto r = get_r(k);
    auto acc = r.identity();
    for (int64_t j = 0; j < n; ++j) {
      acc = r.step(acc, static_cast<acc_t<T>>(x[(o * n + j) * inner + i]));
    }
    out[k] = static_cast<Out>(r.finish(acc, n));
  }
}

// ---- long reductions: split into partial folds of fixed ranges, merged in a fixed order by a
// second kernel (deterministic), so that a few long rows or columns (a full reduction is one
// row) keep the whole GPU busy rather than one block or a few threads

// The reducer type a GetR gives (its __device__ call operator cannot be named on the host).
template <class GetR>
struct ReducerOf;
template <class R>
struct ReducerOf<SameReducer<R>> {
  using type = R;
};
template <class S, class Make>
struct ReducerOf<SecondPass<S, Make>> {
  using type = decltype(std::declval<const Make&>()(std::declval<S>()));
};
template <class GetR>
using reducer_of = typename ReducerOf<GetR>::type;

constexpr int64_t kRowChunk = 16384;  // elements per partial fold of a row (about)
constexpr int64_t kColChunk = 256;    // rows per partial fold of a column (about)
constexpr int64_t kRowParts = 1024;   // blocks worth launching for rows
constexpr int64_t kColParts = 65536;  // threads worth launching for columns
constexpr int64_t kMaxChunks = 1024;  // partial folds per output: one thread merges them

// Block b folds row b / chunks over [c * len, min(n, (c + 1) * len)), c = b % chunks, into
// part[b], unfinished.
template <class T, class GetR>
__global__ void fold_row_chunks_kernel(const T* x, typename reducer_of<GetR>::acc_type* part,
                                       int64_t rows, int64_t n, int64_t chunks, int64_t len,
                                       GetR get_r) {
  using A = typename reducer_of<GetR>::acc_type;
  __shared__ A s[kRowThreads];
  for (int64_t b = blockIdx.x; b < rows * chunks; b += gridDim.x) {
    const int64_t row = b / chunks, begin = (b % chunks) * len;
    const int64_t end = begin + len < n ? begin + len : n;
    const auto r = get_r(row);
    block_fold(r, x + row * n, begin, end, s);
    if (threadIdx.x == 0) part[b] = s[0];
    __syncthreads();
  }
}

// Thread t folds column k = t % total over rows [c * len, min(n, (c + 1) * len)), c = t / total,
// into part[t], unfinished (neighbouring threads read neighbouring columns).
template <class T, class GetR>
__global__ void fold_col_chunks_kernel(const T* x, typename reducer_of<GetR>::acc_type* part,
                                       int64_t outer, int64_t n, int64_t inner, int64_t chunks,
                                       int64_t len, GetR get_r) {
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t t = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; t < total * chunks;
       t += step) {
    const int64_t k = t % total, begin = (t / total) * len;
    const int64_t end = begin + len < n ? begin + len : n;
    const int64_t o = k / inner, i = k % inner;
    const auto r = get_r(k);
    auto acc = r.identity();
    for (int64_t j = begin; j < end; ++j) {
      acc = r.step(acc, static_cast<acc_t<T>>(x[(o * n + j) * inner + i]));
    }
    part[t] = acc;
  }
}

// out[k] = the merge of output k's partial folds part[k * k_stride + c * c_stride], c in order.
template <class Out, class GetR>
__global__ void merge_chunks_kernel(const typename reducer_of<GetR>::acc_type* part, Out* out,
                                    int64_t nout, int64_t n, int64_t chunks, int64_t k_stride,
                                    int64_t c_stride, GetR get_r) {
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < nout;
       k += step) {
    const auto r = get_r(k);
    auto acc = r.identity();
    for (int64_t c = 0; c < chunks; ++c) acc = r.merge(acc, part[k * k_stride + c * c_stride]);
    out[k] = static_cast<Out>(r.finish(acc, n));
  }
}

int64_t ceil_div(int64_t a, int64_t b) { return (a + b - 1) / b; }

// out (contiguous, nout elements) from the layout: rows by blocks, columns by threads; long
// ones split into partial folds first.
template <class T, class Out, class GetR>
void reduce_layout_into(const ReduceLayout& L, Out* o, int64_t nout, const GetR& get_r, Device dev,
                        cudaStream_t stream) {
  using A = typename reducer_of<GetR>::acc_type;
  const T* p = static_cast<const T*>(L.data);
  const bool rows = L.inner == 1 && L.n >= 64;
  const int64_t chunks =
      rows ? std::min(ceil_div(L.n, kRowChunk), ceil_div(kRowParts, L.outer))
           : std::min({ceil_div(L.n, kColChunk), ceil_div(kColParts, nout), kMaxChunks});
  if (chunks >= 2) {
    const int64_t len = ceil_div(L.n, chunks);
    const Tensor part_buf =
        make_tensor({nout * chunks * static_cast<int64_t>(sizeof(A))}, kUInt8, dev);
    A* part = static_cast<A*>(part_buf.data_ptr());
    if (rows) {
      fold_row_chunks_kernel<T, GetR><<<grid_for(L.outer * chunks, 1), kRowThreads, 0, stream>>>(
          p, part, L.outer, L.n, chunks, len, get_r);
    } else {
      fold_col_chunks_kernel<T, GetR><<<grid_for(nout * chunks, kThreads), kThreads, 0, stream>>>(
          p, part, L.outer, L.n, L.inner, chunks, len, get_r);
    }
    IGNIS_CUDA_CHECK(cudaGetLastError());
    // (part_buf's block is reused only by later work on this stream: freeing it here is safe.)
    merge_chunks_kernel<Out, GetR><<<grid_for(nout, kThreads), kThreads, 0, stream>>>(
        part, o, nout, L.n, chunks, rows ? chunks : 1, rows ? 1 : nout, get_r);
  } else if (rows) {
    reduce_rows_kernel<T, Out, GetR>
        <<<grid_for(L.outer, 1), kRowThreads, 0, stream>>>(p, o, L.outer, L.n, get_r);
  } else {
    reduce_cols_kernel<T, Out, GetR>
        <<<grid_for(nout, kThreads), kThreads, 0, stream>>>(p, o, L.outer, L.n, L.inner, get_r);
  }
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// Every output folds nothing: the reducer's empty value.
template <class T, class Out, class GetR>
void fill_empty(Out* o, int64_t nout, const GetR& get_r, cudaStream_t stream) {
  reduce_cols_kernel<T, Out, GetR>
      <<<grid_for(nout, kThreads), kThreads, 0, stream>>>(nullptr, o, nout, 0, 1, get_r);
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

template <class T, class Out, class R>
void run_reduction(const Tensor& out, const Tensor& x, const ReducePlan& plan, const R& r) {
  const int64_t nout = out.numel();
  if (nout == 0) return;
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream(out.device());
  Out* o = static_cast<Out*>(out.data_ptr());
  if (plan.reduced_numel == 0) return fill_empty<T, Out>(o, nout, SameReducer<R>{r}, stream);
  reduce_layout_into<T, Out>(reduce_layout(x, plan), o, nout, SameReducer<R>{r}, out.device(),
                             stream);
}

// s_k = r1's result over output k's elements, then out[k] = make2(s_k)'s over the same ones.
template <class T, class Out, class R1, class Make2>
void run_two_pass(const Tensor& out, const Tensor& x, const ReducePlan& plan, const R1& r1,
                  const Make2& make2) {
  using S = decltype(r1.finish(r1.identity(), 0));
  const int64_t nout = out.numel();
  if (nout == 0) return;
  DeviceGuard guard(out.device().index);
  cudaStream_t stream = current_stream(out.device());
  Out* o = static_cast<Out*>(out.data_ptr());
  const Tensor first = make_tensor({nout}, dtype_of<S>::value, out.device());
  S* s = static_cast<S*>(first.data_ptr());
  if (plan.reduced_numel == 0) {
    fill_empty<T, S>(s, nout, SameReducer<R1>{r1}, stream);
    return fill_empty<T, Out>(o, nout, SecondPass<S, Make2>{s, make2}, stream);
  }
  const ReduceLayout L = reduce_layout(x, plan);
  reduce_layout_into<T, S>(L, s, nout, SameReducer<R1>{r1}, out.device(), stream);
  reduce_layout_into<T, Out>(L, o, nout, SecondPass<S, Make2>{s, make2}, out.device(), stream);
}

// Integer and bool inputs fold in int64 (sum, prod promote them to int64), as on the CPU.
template <template <class> class R>
void int64_or_same_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan,
                          const char* op) {
  with_int64_or_same<R>(x.dtype(), out.dtype(), op, [&]<class T, class Out>(const auto& r) {
    run_reduction<T, Out>(out, x, plan, r);
  });
}

void sum_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<SumReducer>(out, x, plan, "sum");
}
void mean_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "mean",
                    [&]<class T>() { run_reduction<T, T>(out, x, plan, MeanReducer<acc_t<T>>{}); });
}
void prod_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<ProdReducer>(out, x, plan, "prod");
}
template <bool IsMax>
void minmax_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsMax ? "amax" : "amin", [&]<class T>() {
    run_reduction<T, T>(out, x, plan, MinMaxReducer<acc_t<T>, IsMax>{});
  });
}
template <bool IsAll>
void all_any_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsAll ? "all" : "any",
                 [&]<class T>() { run_reduction<T, bool>(out, x, plan, AllAnyReducer<IsAll>{}); });
}

void norm_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, double p) {
  dispatch_floating(x.dtype(), "norm", [&]<class T>() {
    with_norm_reducer<acc_t<T>>(p, [&](const auto& r) { run_reduction<T, T>(out, x, plan, r); });
  });
}

// var / std in float64 for every dtype, as on the CPU.
void var_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan, int64_t correction,
                bool take_sqrt) {
  const double divisor = static_cast<double>(std::max<int64_t>(plan.reduced_numel - correction, 0));
  dispatch_floating(x.dtype(), "var", [&]<class T>() {
    run_two_pass<T, T>(out, x, plan, MeanReducer<double>{},
                       VarSecondPass<double>{divisor, take_sqrt});
  });
}

void logsumexp_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "logsumexp", [&]<class T>() {
    using A = acc_t<T>;
    run_two_pass<T, T>(out, x, plan, MinMaxReducer<A, true>{}, LseSecondPass<A>{});
  });
}

// ---- max / min over one dim with indices: the first occurrence wins, the first NaN beats all

template <class T, bool IsMax>
__global__ void minmax_dim_cuda(const T* x, T* vals, int64_t* idx, int64_t outer, int64_t n,
                                int64_t inner) {
  using A = acc_t<T>;
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += step) {
    const T* p = x + (k / inner) * n * inner + k % inner;
    A best = static_cast<A>(p[0]);
    int64_t at = 0;
    for (int64_t j = 1; j < n; ++j) {
      const A v = static_cast<A>(p[j * inner]);
      bool better = IsMax ? (v > best) : (v < best);
      if constexpr (std::is_floating_point_v<A>) better = better || (v != v && best == best);
      if (better) {
        best = v;
        at = j;
      }
    }
    if (vals != nullptr) vals[k] = static_cast<T>(best);
    idx[k] = at;
  }
}

void minmax_dim_kernel(const Tensor& values, const Tensor& indices, const Tensor& x, int64_t dim,
                       bool is_max) {
  if (indices.numel() == 0) return;
  ReducePlan plan;
  plan.mask = x.dim() == 0 ? 0 : (uint64_t{1} << dim);
  plan.reduced_numel = x.dim() == 0 ? 1 : x.sizes()[dim];
  const ReduceLayout L = reduce_layout(x, plan);
  DeviceGuard guard(x.device().index);
  cudaStream_t stream = current_stream(x.device());
  int64_t* idx = indices.data_ptr<int64_t>();
  dispatch_dtype(x.dtype(), is_max ? "max" : "min", [&]<class T>() {
    const T* p = static_cast<const T*>(L.data);
    T* vals = values.defined() ? values.data_ptr<T>() : nullptr;
    const unsigned g = grid_for(L.outer * L.inner, kThreads);
    if (is_max) {
      minmax_dim_cuda<T, true><<<g, kThreads, 0, stream>>>(p, vals, idx, L.outer, L.n, L.inner);
    } else {
      minmax_dim_cuda<T, false><<<g, kThreads, 0, stream>>>(p, vals, idx, L.outer, L.n, L.inner);
    }
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// ---- softmax and log_softmax along one dim: rows (the dim innermost, as attention's and a
// classifier's) a block each, the block's threads striding along the row and combining with a
// fixed tree; other dims one thread per [outer, inner] position, whose neighbours read
// neighbouring addresses.

// Threads per row block: a power of two from 32 to kRowThreads covering n.
unsigned row_threads(int64_t n) {
  unsigned t = 32;
  while (t < kRowThreads && t < n) t *= 2;
  return t;
}

// The row's max (NaN winning) and sum of exp(x - max) by the reductions' reducers (block_fold),
// then the outputs.
template <class T>
__global__ void softmax_rows_cuda(const T* x, T* y, int64_t rows, int64_t n, bool log) {
  using A = acc_t<T>;
  __shared__ A sh[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const T* xr = x + r * n;
    T* yr = y + r * n;
    block_fold(MinMaxReducer<A, true>{}, xr, 0, n, sh);
    const A m = sh[0];
    __syncthreads();  // (sh is reused)
    // All -inf: exp(x - m) is NaN for every element, as in PyTorch.
    LseReducer<A> sum_exp;
    sum_exp.shift = m;
    block_fold(sum_exp, xr, 0, n, sh);
    const A s = sh[0];
    __syncthreads();
    const A ls = std::log(s);
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const A d = static_cast<A>(xr[j]) - m;
      yr[j] = static_cast<T>(log ? d - ls : exp_of(d) / s);
    }
  }
}

template <class T>
__global__ void softmax_cuda(const T* x, T* y, int64_t outer, int64_t n, int64_t inner, bool log) {
  using A = acc_t<T>;
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += step) {
    const int64_t base = (k / inner) * n * inner + k % inner;
    const MinMaxReducer<A, true> max_nan;
    A m = max_nan.identity();
    for (int64_t j = 0; j < n; ++j) m = max_nan.step(m, static_cast<A>(x[base + j * inner]));
    A s = 0;
    for (int64_t j = 0; j < n; ++j) s += exp_of(static_cast<A>(x[base + j * inner]) - m);
    const A ls = std::log(s);
    for (int64_t j = 0; j < n; ++j) {
      const A d = static_cast<A>(x[base + j * inner]) - m;
      y[base + j * inner] = static_cast<T>(log ? d - ls : exp_of(d) / s);
    }
  }
}

void softmax_kernel(const Tensor& out, const Tensor& x, int64_t dim, bool log) {
  if (out.numel() == 0) return;
  const ReduceLayout L = dim_layout(x, dim);
  DeviceGuard guard(x.device().index);
  const cudaStream_t stream = current_stream(x.device());
  dispatch_floating(x.dtype(), log ? "log_softmax" : "softmax", [&]<class T>() {
    const T* in = static_cast<const T*>(L.data);
    if (L.inner == 1) {
      softmax_rows_cuda<T><<<grid_for(L.outer, 1), row_threads(L.n), 0, stream>>>(
          in, out.data_ptr<T>(), L.outer, L.n, log);
    } else {
      softmax_cuda<T><<<grid_for(L.outer * L.inner, kThreads), kThreads, 0, stream>>>(
          in, out.data_ptr<T>(), L.outer, L.n, L.inner, log);
    }
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

// softmax: y * (g - sum(g * y)); log_softmax: g - exp(y) * sum(g).
template <class T>
__global__ void softmax_backward_rows_cuda(const T* g, const T* y, T* gi, int64_t rows, int64_t n,
                                           bool log) {
  using A = acc_t<T>;
  __shared__ A sh[kRowThreads];
  for (int64_t r = blockIdx.x; r < rows; r += gridDim.x) {
    const int64_t base = r * n;
    A s = 0;
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const A gv = static_cast<A>(g[base + j]);
      s += log ? gv : gv * static_cast<A>(y[base + j]);
    }
    block_merge(SumReducer<A>{}, s, sh);
    s = sh[0];
    __syncthreads();
    for (int64_t j = threadIdx.x; j < n; j += blockDim.x) {
      const A gv = static_cast<A>(g[base + j]), yv = static_cast<A>(y[base + j]);
      gi[base + j] = static_cast<T>(log ? gv - exp_of(yv) * s : yv * (gv - s));
    }
  }
}

template <class T>
__global__ void softmax_backward_cuda(const T* g, const T* y, T* gi, int64_t outer, int64_t n,
                                      int64_t inner, bool log) {
  using A = acc_t<T>;
  const int64_t total = outer * inner;
  const int64_t step = static_cast<int64_t>(blockDim.x) * gridDim.x;
  for (int64_t k = static_cast<int64_t>(blockIdx.x) * blockDim.x + threadIdx.x; k < total;
       k += step) {
    const int64_t base = (k / inner) * n * inner + k % inner;
    A s = 0;
    for (int64_t j = 0; j < n; ++j) {
      const int64_t e = base + j * inner;
      s += log ? static_cast<A>(g[e]) : static_cast<A>(g[e]) * static_cast<A>(y[e]);
    }
    for (int64_t j = 0; j < n; ++j) {
      const int64_t e = base + j * inner;
      const A gv = static_cast<A>(g[e]), yv = static_cast<A>(y[e]);
      gi[e] = static_cast<T>(log ? gv - exp_of(yv) * s : yv * (gv - s));
    }
  }
}

void softmax_backward_kernel(const Tensor& grad_in, const Tensor& g, const Tensor& y, int64_t dim,
                             bool log) {
  if (grad_in.numel() == 0) return;
  const ReduceLayout Lg = dim_layout(g, dim), Ly = dim_layout(y, dim);
  DeviceGuard guard(g.device().index);
  const cudaStream_t stream = current_stream(g.device());
  dispatch_floating(g.dtype(), log ? "log_softmax_backward" : "softmax_backward", [&]<class T>() {
    const T* gp = static_cast<const T*>(Lg.data);
    const T* yp = static_cast<const T*>(Ly.data);
    if (Lg.inner == 1) {
      softmax_backward_rows_cuda<T><<<grid_for(Lg.outer, 1), row_threads(Lg.n), 0, stream>>>(
          gp, yp, grad_in.data_ptr<T>(), Lg.outer, Lg.n, log);
    } else {
      softmax_backward_cuda<T><<<grid_for(Lg.outer * Lg.inner, kThreads), kThreads, 0, stream>>>(
          gp, yp, grad_in.data_ptr<T>(), Lg.outer, Lg.n, Lg.inner, log);
    }
  });
  IGNIS_CUDA_CHECK(cudaGetLastError());
}

}  // namespace

IGNIS_REGISTER_KERNEL(sum_stub, CUDA, &sum_kernel);
IGNIS_REGISTER_KERNEL(mean_stub, CUDA, &mean_kernel);
IGNIS_REGISTER_KERNEL(prod_stub, CUDA, &prod_kernel);
IGNIS_REGISTER_KERNEL(amax_stub, CUDA, &minmax_kernel<true>);
IGNIS_REGISTER_KERNEL(amin_stub, CUDA, &minmax_kernel<false>);
IGNIS_REGISTER_KERNEL(all_stub, CUDA, &all_any_kernel<true>);
IGNIS_REGISTER_KERNEL(any_stub, CUDA, &all_any_kernel<false>);
IGNIS_REGISTER_KERNEL(norm_stub, CUDA, &norm_kernel);
IGNIS_REGISTER_KERNEL(var_stub, CUDA, &var_kernel);
IGNIS_REGISTER_KERNEL(logsumexp_stub, CUDA, &logsumexp_kernel);
IGNIS_REGISTER_KERNEL(minmax_dim_stub, CUDA, &minmax_dim_kernel);
IGNIS_REGISTER_KERNEL(softmax_stub, CUDA, &softmax_kernel);
IGNIS_REGISTER_KERNEL(softmax_backward_stub, CUDA, &softmax_backward_kernel);

}  // namespace ignis::cuda
