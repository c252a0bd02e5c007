// Matrix products on the GPU (mm_stub, bmm_stub) through cuBLAS, loaded at first use: float32
// (computed in float32, no TF32, as PyTorch's default), float64, and bfloat16 (computed in
// float32).
//
// ignis's matrices are row-major; cuBLAS's are column-major. A row-major C = A B is the
// column-major C^T = B^T A^T, so cuBLAS is called with the operands swapped. A row-major operand
// (unit column stride) is, read column-major, its own transpose (no transpose op needed); a
// column-major one (a transposed view: unit row stride) takes the transpose op. Any other layout
// is copied dense first.
#include <cublas_v2.h>

#include <climits>
#include <memory>
#include <mutex>
#include <vector>

#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "cuda/gemm_operand.h"
#include "cuda/lazy_library.h"
#include "ops/linalg.h"

namespace ignis::cuda {
namespace {

// cuBLAS, opened at the first product (cuda/lazy_library.h).
struct Cublas {
  detail::LazyLibrary lib{"libcublas.so." IGNIS_CUBLAS_MAJOR, "cuBLAS"};
  decltype(&cublasCreate_v2) create = lib.get<decltype(&cublasCreate_v2)>("cublasCreate_v2");
  decltype(&cublasSetMathMode) set_math_mode =
      lib.get<decltype(&cublasSetMathMode)>("cublasSetMathMode");
  decltype(&cublasSetStream_v2) set_stream =
      lib.get<decltype(&cublasSetStream_v2)>("cublasSetStream_v2");
  // (cublas_api.h overloads this name in C++: the C entry point's type, written out.)
  using Gemm = cublasStatus_t (*)(cublasHandle_t, cublasOperation_t, cublasOperation_t, int, int,
                                  int, const void*, const void*, cudaDataType, int, long long,
                                  const void*, cudaDataType, int, long long, const void*, void*,
                                  cudaDataType, int, long long, int, cublasComputeType_t,
                                  cublasGemmAlgo_t);
  Gemm gemm = lib.get<Gemm>("cublasGemmStridedBatchedEx");
  decltype(&cublasGetStatusName) status_name =
      lib.get<decltype(&cublasGetStatusName)>("cublasGetStatusName");
  decltype(&cublasGetStatusString) status_string =
      lib.get<decltype(&cublasGetStatusString)>("cublasGetStatusString");
};

const Cublas& cublas() { return detail::lazy_api<Cublas>(); }

void check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  IGNIS_FAIL("cuBLAS error in ", what, ": ", cublas().status_name(st), " (",
             cublas().status_string(st), ")");
}

// One handle per (thread, device), made at first use (a handle is not thread-safe).
cublasHandle_t handle(int device) {
  thread_local std::vector<cublasHandle_t> handles;
  if (handles.empty()) handles.resize(static_cast<size_t>(device_count()), nullptr);
  cublasHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) {
    check(cublas().create(&h), "cublasCreate");
    check(cublas().set_math_mode(h, CUBLAS_DEFAULT_MATH), "cublasSetMathMode");
  }
  return h;
}

void gemm(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta,
          bool batched) {
  if (out.numel() == 0) return;
  const int64_t d = batched ? 1 : 0;
  const int64_t M = out.size(d), N = out.size(d + 1), K = a.size(d + 1);
  if (K == 0) {  // out = beta * out, without cuBLAS (whose k = 0 behaviour is not documented)
    NoGradGuard ng;
    if (beta == 0) {
      Tensor(out).zero_();
    } else if (beta != 1) {
      Tensor(out).mul_(beta);
    }
    return;
  }
  const int64_t batch = batched ? out.size(0) : 1;
  const Operand A = operand(a, batched), B = operand(b, batched);
  cudaDataType_t type;
  cublasComputeType_t compute;
  switch (out.dtype()) {
    case DType::Float32: type = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F; break;
    case DType::Float64: type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case DType::BFloat16: type = CUDA_R_16BF, compute = CUBLAS_COMPUTE_32F; break;
    default:
      IGNIS_FAIL(batched ? "bmm" : "mm", ": on CUDA, float32, float64 and bfloat16 are supported, "
                 "not ", out.dtype());
  }
  const int device = out.device().index;
  DeviceGuard guard(device);
  cublasHandle_t h = handle(device);
  check(cublas().set_stream(h, detail::current_stream(Device(kCUDA, device))),
        "cublasSetStream");
  const float af = static_cast<float>(alpha), bf = static_cast<float>(beta);
  const void* pa = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&alpha) : &af;
  const void* pb = compute == CUBLAS_COMPUTE_64F ? static_cast<const void*>(&beta) : &bf;
  // Column-major: C^T [N, M] = B^T [N, K] * A^T [K, M].
  check(cublas().gemm(h, B.op, A.op, as_int(N, "N"), as_int(M, "M"), as_int(K, "K"), pa, B.ptr,
                      type, as_int(B.ld, "ld"), B.batch_stride, A.ptr, type, as_int(A.ld, "ld"),
                      A.batch_stride, pb, out.data_ptr(), type, as_int(N, "N"), M * N,
                      as_int(batch, "batch"), compute, CUBLAS_GEMM_DEFAULT),
        "cublasGemmStridedBatchedEx");
}

void mm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  gemm(out, a, b, alpha, beta, false);
}
void bmm_kernel(const Tensor& out, const Tensor& a, const Tensor& b, double alpha, double beta) {
  gemm(out, a, b, alpha, beta, true);
}

}  // namespace

IGNIS_REGISTER_KERNEL(mm_stub, CUDA, &mm_kernel);
IGNIS_REGISTER_KERNEL(bmm_stub, CUDA, &bmm_kernel);

}  // namespace ignis::cuda
