// CPU matrix multiply.
//  * float32: oneDNN's sgemm, which reads transposed views in place ('T' flag + leading dim).
//    Measured, its fixed cost is small (0.1-0.4 us single-threaded for 1x32 @ 32x10 .. 2x3 @ 3x4)
//    and its skinny products (1xK @ KxN, matrix-vector) stream the weight at memory speed, so
//    every float32 product goes to it; hand-written register-blocked kernels for M <= 4 were
//    no faster at M = 1 and up to 2x slower at M = 4.
//  * float64 and integers: a blocked loop kernel (gradcheck runs in float64).
//  * bfloat16: converted to float32, multiplied, converted back.
// Every output element is computed by one thread in a fixed order, so results do not depend on
// the number of threads except inside oneDNN's sgemm.
#include <oneapi/dnnl/dnnl.h>

#include <algorithm>
#include <cstring>
#include <type_traits>
#include <vector>

#include "core/tensor_impl.h"
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
