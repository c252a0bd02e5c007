// CPU matrix multiply.
//  * float32: oneDNN's sgemm, which reads transposed views in place ('T' flag + leading dim),
//    except one row against a k-contiguous B (linear on one sample), which takes the small-M
//    dot kernel below: measured, it matches oneDNN single-threaded (both stream the weight at
//    cache speed) and its fixed column split keeps each thread's half of the weight in that
//    core's cache from one call to the next. For 2-4 rows and row-major B oneDNN was faster.
//  * float64: the small-M kernels for 1-4 rows, else a blocked loop kernel (gradcheck runs in
//    float64); integers: the blocked loop kernel.
//  * bfloat16: on CPUs with native bfloat16 (AVX512-BF16, AMX), oneDNN's bfloat16 matmul on the
//    operands in place (float32 accumulation, rounded once); elsewhere converted to float32,
//    multiplied, converted back.
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the number of threads except inside oneDNN's sgemm and matmul.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"
#include "cpu/onednn_util.h"
#include "cpu/parallel.h"
#include "ops/copy.h"
#include "ops/linalg.h"

namespace ignis::cpu {
namespace {

/// A strided matrix view: element (i, j) at p[i * rs + j * cs].
template <class T>
struct Mat {
  T* p;
  int64_t rs, cs;
  T& operator()(int64_t i, int64_t j) const { return p[i * rs + j * cs]; }
};

/// Multiply-adds below which work is not split over threads (the fork costs a few us).
constexpr int64_t kParallelWork = int64_t{1} << 17;

// The kernel below relies on a*b+c being contracted to fused multiply-adds, which ISO C++ mode
// turns off by default.
#pragma GCC push_options
#pragma GCC optimize("fp-contract=fast")

template <class T>
inline T finish(T acc, T alpha, T beta, const T* c) {
  return beta == T(0) ? alpha * acc : alpha * acc + beta * *c;
}

#if defined(__AVX512F__)
constexpr int kVecBytes = 64;
#else
constexpr int kVecBytes = 32;
#endif
constexpr int kTileVecs = kVecBytes == 64 ? 4 : 2;  // vectors per tile row: 4 x 4 or 4 x 2 live

// ---- small M (1 to 4 rows: inference on a few samples, matrix-vector products)
//
// At these sizes a product is a stream over B, and oneDNN's sgemm call costs more than the
// arithmetic; these kernels read B once, straight from its layout, with no call overhead:
//  * dot form, B's k-stride 1 (linear's weight^T, w.t()): C[m, n] = dot(A row m, B column n),
//    vectorised along k over NR columns at a time;
//  * axpy form, B's n-stride 1 (row-major B, e.g. g @ w): C[m, :] += A[m, k] * B[k, :],
//    vectorised along n.
// Each element is summed in a fixed order by one thread, so results do not depend on the thread
// count.

constexpr int64_t kSmallM = 4;
/// Multiply-adds above which a small-M product splits its columns over threads.
constexpr int64_t kSmallParallelWork = int64_t{1} << 16;

/// out[j] = the sum of the lanes of v[j], j < NR, each summed as a fixed tree. Eight float32
/// vectors of 16 lanes are reduced together by transposing halves (8 vector adds in all rather
/// than 4 per vector); other shapes fold each vector's halves in turn.
template <class T, int NR, class V>
inline void hsums(const V* v, T* out) {
  constexpr int W = sizeof(V) / sizeof(T);
  if constexpr (std::is_same_v<T, float> && W == 16 && NR == 8) {
    typedef float V8 __attribute__((vector_size(32)));
    V c[4], d[2];
    for (int i = 0; i < 4; ++i) {
      c[i] = __builtin_shufflevector(v[2 * i], v[2 * i + 1], 0, 1, 2, 3, 4, 5, 6, 7, 16, 17, 18, 19,
                                     20, 21, 22, 23) +
             __builtin_shufflevector(v[2 * i], v[2 * i + 1], 8, 9, 10, 11, 12, 13, 14, 15, 24, 25,
                                     26, 27, 28, 29, 30, 31);
    }
    for (int i = 0; i < 2; ++i) {
      d[i] = __builtin_shufflevector(c[2 * i], c[2 * i + 1], 0, 1, 2, 3, 8, 9, 10, 11, 16, 17, 18,
                                     19, 24, 25, 26, 27) +
             __builtin_shufflevector(c[2 * i], c[2 * i + 1], 4, 5, 6, 7, 12, 13, 14, 15, 20, 21, 22,
                                     23, 28, 29, 30, 31);
    }
    const V e = __builtin_shufflevector(d[0], d[1], 0, 1, 4, 5, 8, 9, 12, 13, 16, 17, 20, 21, 24,
                                        25, 28, 29) +
                __builtin_shufflevector(d[0], d[1], 2, 3, 6, 7, 10, 11, 14, 15, 18, 19, 22, 23, 26,
                                        27, 30, 31);
    const V8 f = __builtin_shufflevector(e, e, 0, 2, 4, 6, 8, 10, 12, 14) +
                 __builtin_shufflevector(e, e, 1, 3, 5, 7, 9, 11, 13, 15);
    std::memcpy(out, &f, sizeof(V8));
  } else {
    for (int j = 0; j < NR; ++j) {
      T lanes[W];
      std::memcpy(lanes, &v[j], sizeof(V));
      for (int w = W / 2; w >= 1; w /= 2) {
        for (int l = 0; l < w; ++l) lanes[l] += lanes[l + w];
      }
      out[j] = lanes[0];
    }
  }
}

/// C[0:MR, 0:NR] = alpha * A[0:MR, :] @ B[:, 0:NR] + beta * C, A rows and B columns contiguous
/// along k (leading dims lda, ldb).
template <class T, int MR, int NR>
void dot_tile(int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb, T* c, int64_t ldc,
              T alpha, T beta) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  V acc[MR][NR] = {};
  int64_t k = 0;
  for (; k + W <= K; k += W) {
    V av[MR];
    for (int m = 0; m < MR; ++m) std::memcpy(&av[m], a + m * lda + k, sizeof(V));
    for (int j = 0; j < NR; ++j) {
      V bv;
      std::memcpy(&bv, b + j * ldb + k, sizeof(V));
      for (int m = 0; m < MR; ++m) acc[m][j] += av[m] * bv;
    }
  }
  for (int m = 0; m < MR; ++m) {
    T sums[NR];
    hsums<T, NR>(acc[m], sums);
    for (int j = 0; j < NR; ++j) {
      T sum = sums[j];
      for (int64_t kk = k; kk < K; ++kk) sum += a[m * lda + kk] * b[j * ldb + kk];
      T* e = c + m * ldc + j;
      *e = finish(sum, alpha, beta, e);
    }
  }
}

template <class T, int MR>
void dot_cols(int64_t n0, int64_t n1, int64_t K, const T* a, int64_t lda, const T* b, int64_t ldb,
              T* c, int64_t ldc, T alpha, T beta) {
  constexpr int NR = MR <= 2 ? 8 : 4;
  int64_t n = n0;
  for (; n + NR <= n1; n += NR) {
    dot_tile<T, MR, NR>(K, a, lda, b + n * ldb, ldb, c + n, ldc, alpha, beta);
  }
  for (; n < n1; ++n) dot_tile<T, MR, 1>(K, a, lda, b + n * ldb, ldb, c + n, ldc, alpha, beta);
}

/// C[0:MR, n0:n1] = alpha * A @ B + beta * C with B rows contiguous along n (leading dim ldb).
template <class T, int MR>
void axpy_cols(int64_t n0, int64_t n1, int64_t K, Mat<const T> A, const T* b, int64_t ldb, T* c,
               int64_t ldc, T alpha, T beta) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  constexpr int NV = MR <= 2 ? 8 : 4;  // vectors per row of the tile
  constexpr int64_t NB = NV * W;
  int64_t n = n0;
  for (; n + NB <= n1; n += NB) {
    V acc[MR][NV] = {};
    for (int64_t k = 0; k < K; ++k) {
      V bv[NV];
      for (int v = 0; v < NV; ++v) std::memcpy(&bv[v], b + k * ldb + n + v * W, sizeof(V));
      for (int m = 0; m < MR; ++m) {
        const T am = A(m, k);
        for (int v = 0; v < NV; ++v) acc[m][v] += am * bv[v];
      }
    }
    for (int m = 0; m < MR; ++m) {
      for (int v = 0; v < NV; ++v) {
        for (int l = 0; l < W; ++l) {
          T* e = c + m * ldc + n + v * W + l;
          *e = finish(acc[m][v][l], alpha, beta, e);
        }
      }
    }
  }
  if (n < n1) {
    const int64_t nb = n1 - n;
    T acc[MR][NB] = {};
    for (int64_t k = 0; k < K; ++k) {
      const T* bk = b + k * ldb + n;
      for (int m = 0; m < MR; ++m) {
        const T am = A(m, k);
        for (int64_t j = 0; j < nb; ++j) acc[m][j] += am * bk[j];
      }
    }
    for (int m = 0; m < MR; ++m) {
      for (int64_t j = 0; j < nb; ++j) {
        T* e = c + m * ldc + n + j;
        *e = finish(acc[m][j], alpha, beta, e);
      }
    }
  }
}

/// C = alpha * A @ B + beta * C for M <= kSmallM (float32, float64) when B is contiguous along
/// k or along n. False (nothing done) for other shapes and layouts.
template <class T>
bool gemm_small_m(int64_t M, int64_t N, int64_t K, T alpha, Mat<const T> A, Mat<const T> B, T beta,
                  T* C, int64_t ldc) {
  if (M < 1 || M > kSmallM || N < 1 || K < 1) return false;
  const bool dot = B.rs == 1 || K == 1;
  if (!dot && !(B.cs == 1 || N == 1)) return false;
  std::vector<T> packed;  // A's rows made contiguous for the dot form
  const T* a = A.p;
  int64_t lda = A.rs;
  if (dot && A.cs != 1 && K > 1) {
    packed.resize(static_cast<size_t>(M * K));
    for (int64_t m = 0; m < M; ++m) {
      for (int64_t k = 0; k < K; ++k) packed[m * K + k] = A(m, k);
    }
    a = packed.data();
    lda = K;
  }
  const int64_t ldb = dot ? B.cs : B.rs;
  auto run = [&]<int MR>(int64_t n0, int64_t n1) {
    if (dot) {
      dot_cols<T, MR>(n0, n1, K, a, lda, B.p, ldb, C, ldc, alpha, beta);
    } else {
      axpy_cols<T, MR>(n0, n1, K, A, B.p, ldb, C, ldc, alpha, beta);
    }
  };
  auto cols = [&](int64_t n0, int64_t n1) {
    switch (M) {
      case 1: run.template operator()<1>(n0, n1); break;
      case 2: run.template operator()<2>(n0, n1); break;
      case 3: run.template operator()<3>(n0, n1); break;
      default: run.template operator()<4>(n0, n1); break;
    }
  };
  // Column chunks of 64 (a whole number of tiles of either form) over threads when large.
  constexpr int64_t kChunk = 64;
  const int64_t chunks = (N + kChunk - 1) / kChunk;
  const int64_t grain =
      std::max<int64_t>(1, kSmallParallelWork / std::max<int64_t>(1, M * K * kChunk));
  parallel_for(0, chunks, grain,
               [&](int64_t c0, int64_t c1) { cols(c0 * kChunk, std::min(N, c1 * kChunk)); });
  return true;
}

/// Columns of a tile of C: a whole number of vectors for floating types.
template <class T>
struct TileCols {
  static constexpr int64_t value =
      std::is_floating_point_v<T> ? kTileVecs * kVecBytes / static_cast<int64_t>(sizeof(T)) : 32;
};

/// C[0:MR, 0:NB] = alpha * A[i0:i0+MR, :] @ panel + beta * C, the accumulators held in vector
/// registers. Same multiply-add sequence per element as the scalar edge loop.
template <class T, int MR>
void full_tile(int64_t K, Mat<const T> A, int64_t i0, const T* panel, T* c, int64_t ldc, T alpha,
               T beta) {
  typedef T V __attribute__((vector_size(kVecBytes)));
  constexpr int W = kVecBytes / sizeof(T);
  constexpr int64_t NB = TileCols<T>::value;
  V acc[MR][kTileVecs] = {};
  for (int64_t k = 0; k < K; ++k) {
    V bv[kTileVecs];
    for (int v = 0; v < kTileVecs; ++v) std::memcpy(&bv[v], panel + k * NB + v * W, sizeof(V));
    for (int m = 0; m < MR; ++m) {
      const T a = A(i0 + m, k);
      for (int v = 0; v < kTileVecs; ++v) acc[m][v] += a * bv[v];
    }
  }
  for (int m = 0; m < MR; ++m) {
    for (int v = 0; v < kTileVecs; ++v) {
      for (int l = 0; l < W; ++l) {
        T* e = c + m * ldc + v * W + l;
        *e = finish(acc[m][v][l], alpha, beta, e);
      }
    }
  }
}

/// General C = alpha * A @ B + beta * C for float64 and integers. Each thread copies a K x NB
/// column panel of B into a contiguous buffer (any strides; and rows of a large B are 4 KiB
/// apart, which makes cache sets collide) and accumulates MB x NB tiles of C over the whole k
/// range for its rows.
template <class T>
void gemm_blocked(int64_t M, int64_t N, int64_t K, T alpha, Mat<const T> A, Mat<const T> B,
                  T beta, Mat<T> C) {
  if constexpr (std::is_floating_point_v<T>) {
    if (gemm_small_m<T>(M, N, K, alpha, A, B, beta, C.p, C.rs)) return;
  }
  constexpr int64_t MB = 4, NB = TileCols<T>::value;
  const int64_t nib = (M + MB - 1) / MB;
  const int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(1, MB * N * K));
  parallel_for(0, nib, grain, [&](int64_t ib0, int64_t ib1) {
    std::vector<T> panel(static_cast<size_t>(K * NB));
    T acc[MB][NB];
    for (int64_t j0 = 0; j0 < N; j0 += NB) {
      const int64_t nb = std::min(NB, N - j0);
      for (int64_t k = 0; k < K; ++k) {
        for (int64_t j = 0; j < nb; ++j) panel[k * NB + j] = B(k, j0 + j);
      }
      for (int64_t ib = ib0; ib < ib1; ++ib) {
        const int64_t i0 = ib * MB, mb = std::min(MB, M - i0);
        if constexpr (std::is_floating_point_v<T>) {
          if (mb == MB && nb == NB) {
            full_tile<T, MB>(K, A, i0, panel.data(), &C(i0, j0), C.rs, alpha, beta);
            continue;
          }
        }
        for (int64_t m = 0; m < mb; ++m) std::fill(acc[m], acc[m] + nb, T(0));
        for (int64_t k = 0; k < K; ++k) {
          const T* b = panel.data() + k * NB;
          for (int64_t m = 0; m < mb; ++m) {
            const T a = A(i0 + m, k);
            for (int64_t j = 0; j < nb; ++j) acc[m][j] += a * b[j];
          }
        }
        for (int64_t m = 0; m < mb; ++m) {
          for (int64_t j = 0; j < nb; ++j) {
            T* e = &C(i0 + m, j0 + j);
            *e = finish(acc[m][j], alpha, beta, e);
          }
        }
      }
    }
  });
}

#pragma GCC pop_options

/// How oneDNN reads a (rows x cols) operand with strides (rs, cs): 'N' with leading dim rs when
/// rows are contiguous, 'T' with leading dim cs when columns are. False when neither holds.
bool blas_layout(int64_t rows, int64_t cols, int64_t rs, int64_t cs, char& trans, int64_t& ld) {
  if ((cs == 1 || cols == 1) && (rows == 1 || rs >= std::max<int64_t>(1, cols))) {
    trans = 'N';
    ld = rows == 1 ? std::max<int64_t>(1, cols) : rs;
    return true;
  }
  if ((rs == 1 || rows == 1) && (cols == 1 || cs >= std::max<int64_t>(1, rows))) {
    trans = 'T';
    ld = cols == 1 ? std::max<int64_t>(1, rows) : cs;
    return true;
  }
  return false;
}

/// A contiguous copy of a strided matrix (for layouts oneDNN cannot read).
std::vector<float> pack(int64_t rows, int64_t cols, Mat<const float> X) {
  std::vector<float> v(static_cast<size_t>(rows * cols));
  for (int64_t i = 0; i < rows; ++i) {
    for (int64_t j = 0; j < cols; ++j) v[i * cols + j] = X(i, j);
  }
  return v;
}

/// One float32 product; C rows contiguous with leading dim ldc.
void sgemm(int64_t M, int64_t N, int64_t K, float alpha, Mat<const float> A, Mat<const float> B,
           float beta, float* C, int64_t ldc) {
  if (M == 0 || N == 0) return;
  if (K == 0) {
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) C[i * ldc + j] = beta == 0 ? 0.f : beta * C[i * ldc + j];
    }
    return;
  }
  // One row against a k-contiguous B (a linear layer on one sample): the dot kernel, which
  // matches oneDNN's speed single-threaded and splits columns over threads in a fixed way.
  // Measured, oneDNN is faster for 2-4 rows and for row-major B, so those go to it.
  if (M == 1 && (B.rs == 1 || K == 1) && gemm_small_m<float>(M, N, K, alpha, A, B, beta, C, ldc)) {
    return;
  }
  char ta, tb;
  int64_t lda, ldb;
  std::vector<float> ca, cb;
  const float* pa = A.p;
  const float* pb = B.p;
  if (!blas_layout(M, K, A.rs, A.cs, ta, lda)) {
    ca = pack(M, K, A);
    pa = ca.data();
    ta = 'N';
    lda = K;
  }
  if (!blas_layout(K, N, B.rs, B.cs, tb, ldb)) {
    cb = pack(K, N, B);
    pb = cb.data();
    tb = 'N';
    ldb = N;
  }
  const dnnl_status_t st =
      dnnl_sgemm(ta, tb, M, N, K, alpha, pa, lda, pb, ldb, beta, C, ldc);
  IGNIS_CHECK(st == dnnl_success, "matmul: oneDNN sgemm failed (status ", static_cast<int>(st),
              ") for M=", M, " N=", N, " K=", K);
}

/// Runs f(b) for every batch: over threads when each product is small (oneDNN then runs
/// single-threaded inside the parallel region), else in turn with each product parallel.
template <class F>
void for_each_batch(int64_t nbatch, int64_t work, const F& f) {
  if (nbatch > 1 && work < kParallelWork * 8) {
    const int64_t grain = std::max<int64_t>(1, kParallelWork / std::max<int64_t>(1, work));
    parallel_for(0, nbatch, grain, [&](int64_t b0, int64_t b1) {
      for (int64_t b = b0; b < b1; ++b) f(b);
    });
  } else {
    for (int64_t b = 0; b < nbatch; ++b) f(b);
  }
}

/// The shared body of mm and bmm: `batched` tensors carry a leading batch dim.
void gemm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
                 bool batched) {
  // TensorImpl's inline accessors: this runs for every product, however small.
  const TensorImpl& oi = *out.impl();
  const TensorImpl& ai = *a.impl();
  const TensorImpl& bi = *b.impl();
  if (oi.numel() == 0) return;
  const int o = batched ? 1 : 0;
  const int64_t nbatch = batched ? oi.sizes()[0] : 1;
  const int64_t M = oi.sizes()[o], N = oi.sizes()[o + 1], K = ai.sizes()[o + 1];
  const int64_t sab = batched ? ai.strides()[0] : 0, sbb = batched ? bi.strides()[0] : 0;
  const int64_t rsa = ai.strides()[o], csa = ai.strides()[o + 1];
  const int64_t rsb = bi.strides()[o], csb = bi.strides()[o + 1];
  const int64_t soc = M * N;
  const int64_t work = M * N * std::max<int64_t>(K, 1);
  const DType dt = oi.dtype();
  if (dt == kBFloat16) {
    if (onednn::gemm_bf16(nbatch, M, N, K, static_cast<float>(alpha), ai.data(), sab, rsa, csa,
                          bi.data(), sbb, rsb, csb, static_cast<float>(beta), oi.data()))
      return;
    // float32 copies (contiguous; beta needs out's values too), then round back once.
    Tensor a32 = make_tensor(a.sizes(), kFloat32), b32 = make_tensor(b.sizes(), kFloat32);
    Tensor o32 = make_tensor(out.sizes(), kFloat32);
    copy_into(a32, a);
    copy_into(b32, b);
    if (beta != 0) copy_into(o32, out);
    gemm_kernel(o32, a32, b32, alpha, beta, batched);
    copy_into(out, o32);
    return;
  }
  if (dt == kFloat32) {
    const float* pa = reinterpret_cast<const float*>(ai.data());
    const float* pb = reinterpret_cast<const float*>(bi.data());
    float* po = reinterpret_cast<float*>(oi.data());
    for_each_batch(nbatch, work, [&](int64_t i) {
      sgemm(M, N, K, static_cast<float>(alpha), Mat<const float>{pa + i * sab, rsa, csa},
            Mat<const float>{pb + i * sbb, rsb, csb}, static_cast<float>(beta), po + i * soc, N);
    });
    return;
  }
  IGNIS_CHECK(dt != kBool, batched ? "bmm" : "mm", ": not implemented for bool tensors");
  dispatch_dtype(dt, "matmul", [&]<class T>() {
    if constexpr (!std::is_same_v<T, bool> && !std::is_same_v<T, BFloat16> &&
                  !std::is_same_v<T, float>) {
      const T* pa = static_cast<const T*>(a.data_ptr());
      const T* pb = static_cast<const T*>(b.data_ptr());
      T* po = static_cast<T*>(out.data_ptr());
      for_each_batch(nbatch, work, [&](int64_t i) {
        gemm_blocked<T>(M, N, K, static_cast<T>(alpha), Mat<const T>{pa + i * sab, rsa, csa},
                        Mat<const T>{pb + i * sbb, rsb, csb}, static_cast<T>(beta),
                        Mat<T>{po + i * soc, N, 1});
      });
    }
  });
}

void mm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  gemm_kernel(out, a, b, alpha, beta, false);
}
void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  gemm_kernel(out, a, b, alpha, beta, true);
}

}  // namespace

IGNIS_REGISTER_KERNEL(mm_stub, CPU, &mm_kernel);
IGNIS_REGISTER_KERNEL(bmm_stub, CPU, &bmm_kernel);

}  // namespace ignis::cpu
