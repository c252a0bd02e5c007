// linear's GEMM with its bias and ReLU in the epilogue (mm_epilogue_stub), through cuBLASLt,
// opened at first use: out = relu?(a @ b + bias) in one kernel instead of a bias fill, a GEMM
// and a ReLU pass over the output. The row-major product is the column-major C^T = B^T A^T (see
// cuda/gemm_operand.h), whose rows are out's columns: cuBLASLt's bias, one value per row of its
// D, is then linear's bias over out_features. float32 runs without TF32 (as cuBLAS in
// cuda/blas.cpp), bfloat16 computes in float32. Where cuBLASLt's heuristic finds no algorithm
// (float64 with a bias, say) the stub says so and linear runs the three steps. The heuristic's
// answer is cached per problem (cuda/plan_cache.h).
#include <cublasLt.h>

#include <optional>
#include <vector>

#include "core/tensor_impl.h"
#include "cuda/cuda_check.h"
#include "cuda/gemm_operand.h"
#include "cuda/lazy_library.h"
#include "cuda/plan_cache.h"
#include "ops/linalg.h"

namespace ignis::cuda {
namespace {

struct CublasLt {
  detail::LazyLibrary lib{"libcublasLt.so." IGNIS_CUBLAS_MAJOR, "cuBLASLt"};
  template <class F>
  F get(const char* name) {
    return lib.get<F>(name);
  }
  decltype(&cublasLtCreate) create = get<decltype(&cublasLtCreate)>("cublasLtCreate");
  decltype(&cublasLtMatmulDescCreate) desc_create =
      get<decltype(&cublasLtMatmulDescCreate)>("cublasLtMatmulDescCreate");
  decltype(&cublasLtMatmulDescDestroy) desc_destroy =
      get<decltype(&cublasLtMatmulDescDestroy)>("cublasLtMatmulDescDestroy");
  decltype(&cublasLtMatmulDescSetAttribute) desc_set =
      get<decltype(&cublasLtMatmulDescSetAttribute)>("cublasLtMatmulDescSetAttribute");
  decltype(&cublasLtMatrixLayoutCreate) layout_create =
      get<decltype(&cublasLtMatrixLayoutCreate)>("cublasLtMatrixLayoutCreate");
  decltype(&cublasLtMatrixLayoutDestroy) layout_destroy =
      get<decltype(&cublasLtMatrixLayoutDestroy)>("cublasLtMatrixLayoutDestroy");
  decltype(&cublasLtMatmulPreferenceCreate) pref_create =
      get<decltype(&cublasLtMatmulPreferenceCreate)>("cublasLtMatmulPreferenceCreate");
  decltype(&cublasLtMatmulPreferenceDestroy) pref_destroy =
      get<decltype(&cublasLtMatmulPreferenceDestroy)>("cublasLtMatmulPreferenceDestroy");
  decltype(&cublasLtMatmulPreferenceSetAttribute) pref_set =
      get<decltype(&cublasLtMatmulPreferenceSetAttribute)>("cublasLtMatmulPreferenceSetAttribute");
  decltype(&cublasLtMatmulAlgoGetHeuristic) heuristic =
      get<decltype(&cublasLtMatmulAlgoGetHeuristic)>("cublasLtMatmulAlgoGetHeuristic");
  decltype(&cublasLtMatmul) matmul = get<decltype(&cublasLtMatmul)>("cublasLtMatmul");
  decltype(&cublasLtGetStatusName) status_name =
      get<decltype(&cublasLtGetStatusName)>("cublasLtGetStatusName");
  decltype(&cublasLtGetStatusString) status_string =
      get<decltype(&cublasLtGetStatusString)>("cublasLtGetStatusString");
};

const CublasLt& lt() { return detail::lazy_api<CublasLt>(); }

void check(cublasStatus_t st, const char* what) {
  if (st == CUBLAS_STATUS_SUCCESS) return;
  IGNIS_FAIL("cuBLASLt error in ", what, ": ", lt().status_name(st), " (", lt().status_string(st),
             ")");
}

// One handle per (thread, device), as for cuBLAS.
cublasLtHandle_t handle(int device) {
  thread_local std::vector<cublasLtHandle_t> handles;
  if (handles.empty()) handles.resize(static_cast<size_t>(device_count()), nullptr);
  cublasLtHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) check(lt().create(&h), "cublasLtCreate");
  return h;
}

// The descriptors of one call, destroyed at scope exit.
struct Descriptors {
  cublasLtMatmulDesc_t op = nullptr;
  cublasLtMatrixLayout_t a = nullptr, b = nullptr, c = nullptr;
  cublasLtMatmulPreference_t pref = nullptr;
  ~Descriptors() {
    if (pref) (void)lt().pref_destroy(pref);
    for (cublasLtMatrixLayout_t l : {a, b, c}) {
      if (l) (void)lt().layout_destroy(l);
    }
    if (op) (void)lt().desc_destroy(op);
  }
};

// The largest power of two (up to 16) that divides a pointer's address: cuBLASLt picks kernels
// by the operands' alignment.
uint32_t alignment(const void* p) {
  const auto v = reinterpret_cast<uintptr_t>(p);
  uint32_t a = 16;
  while (a > 1 && v % a != 0) a /= 2;
  return a;
}

// cuBLASLt's workspace: at most what its heuristic may ask for; the algorithm's own size is taken
// from the caching allocator.
constexpr size_t kWorkspaceBytes = size_t{32} << 20;  // NVIDIA's advice for Hopper

bool gemm_epilogue(const Tensor& out, const Tensor& a, const Tensor& b, const Tensor& bias,
                   bool relu) {
  const int64_t M = out.size(0), N = out.size(1), K = a.size(1);
  // Nothing to fuse in an empty product; and like PyTorch, single-row or single-column operands
  // stay with plain cuBLAS (cuBLASLt's heuristic has rejected them as invalid values).
  if (out.numel() == 0 || M <= 1 || N <= 1 || K <= 1) return false;
  cudaDataType_t type, scale_type;
  cublasComputeType_t compute;
  switch (out.dtype()) {
    case DType::Float32: type = scale_type = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F; break;
    case DType::Float64: type = scale_type = CUDA_R_64F, compute = CUBLAS_COMPUTE_64F; break;
    case DType::BFloat16:
      type = CUDA_R_16BF, scale_type = CUDA_R_32F, compute = CUBLAS_COMPUTE_32F;
      break;
    default: return false;
  }
  // A misaligned bias (a view into a bigger tensor) is left to the plain path.
  if (bias.defined() && alignment(bias.data_ptr()) < 16) return false;
  const cublasLtEpilogue_t epilogue =
      bias.defined() ? (relu ? CUBLASLT_EPILOGUE_RELU_BIAS : CUBLASLT_EPILOGUE_BIAS)
                     : (relu ? CUBLASLT_EPILOGUE_RELU : CUBLASLT_EPILOGUE_DEFAULT);
  const Operand A = operand(a, false), B = operand(b, false);
  const int device = out.device().index;
  DeviceGuard guard(device);
  Descriptors d;
  check(lt().desc_create(&d.op, compute, scale_type), "cublasLtMatmulDescCreate");
  // Column-major: D^T [N, M] = B^T [N, K] * A^T [K, M]: cuBLASLt's "A" is our b.
  const cublasOperation_t ta = B.op, tb = A.op;
  check(lt().desc_set(d.op, CUBLASLT_MATMUL_DESC_TRANSA, &ta, sizeof ta), "TRANSA");
  check(lt().desc_set(d.op, CUBLASLT_MATMUL_DESC_TRANSB, &tb, sizeof tb), "TRANSB");
  check(lt().desc_set(d.op, CUBLASLT_MATMUL_DESC_EPILOGUE, &epilogue, sizeof epilogue), "EPILOGUE");
  if (bias.defined()) {
    const void* bp = bias.data_ptr();
    check(lt().desc_set(d.op, CUBLASLT_MATMUL_DESC_BIAS_POINTER, &bp, sizeof bp), "BIAS_POINTER");
  }
  // The stored matrices: op N stores rows x cols of the product's operand, op T its transpose.
  const auto rows = [](const Operand& o, int64_t r, int64_t c) {
    return o.op == CUBLAS_OP_N ? r : c;
  };
  check(lt().layout_create(&d.a, type, rows(B, N, K), rows(B, K, N), B.ld), "layout A");
  check(lt().layout_create(&d.b, type, rows(A, K, M), rows(A, M, K), A.ld), "layout B");
  check(lt().layout_create(&d.c, type, N, M, N), "layout C");
  (void)as_int(M, "M"), (void)as_int(N, "N"), (void)as_int(K, "K");
  check(lt().pref_create(&d.pref), "cublasLtMatmulPreferenceCreate");
  const uint64_t ws = kWorkspaceBytes;
  check(lt().pref_set(d.pref, CUBLASLT_MATMUL_PREF_MAX_WORKSPACE_BYTES, &ws, sizeof ws),
        "MAX_WORKSPACE_BYTES");
  const uint32_t align_a = alignment(B.ptr), align_b = alignment(A.ptr),
                 align_c = alignment(out.data_ptr());
  check(lt().pref_set(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_A_BYTES, &align_a, sizeof align_a),
        "MIN_ALIGNMENT_A_BYTES");
  check(lt().pref_set(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_B_BYTES, &align_b, sizeof align_b),
        "MIN_ALIGNMENT_B_BYTES");
  check(lt().pref_set(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_C_BYTES, &align_c, sizeof align_c),
        "MIN_ALIGNMENT_C_BYTES");
  check(lt().pref_set(d.pref, CUBLASLT_MATMUL_PREF_MIN_ALIGNMENT_D_BYTES, &align_c, sizeof align_c),
        "MIN_ALIGNMENT_D_BYTES");
  // The heuristic's answer, cached per problem (cuda/plan_cache.h): everything set above.
  static detail::PlanCache<std::optional<cublasLtMatmulHeuristicResult_t>> cache;
  const detail::PlanCache<std::optional<cublasLtMatmulHeuristicResult_t>>::Key key = {
      device, static_cast<int64_t>(out.dtype()), M, N, K, B.op, A.op, B.ld, A.ld, epilogue,
      bias.defined(), align_a, align_b, align_c};
  std::optional<cublasLtMatmulHeuristicResult_t> choice;
  if (const auto hit = cache.find(key)) {
    choice = *hit;
  } else {
    cublasLtMatmulHeuristicResult_t result{};
    int found = 0;
    const cublasStatus_t st =
        lt().heuristic(handle(device), d.op, d.a, d.b, d.c, d.c, d.pref, 1, &result, &found);
    if (st == CUBLAS_STATUS_SUCCESS && found > 0 && result.state == CUBLAS_STATUS_SUCCESS) {
      choice = result;
    }
    cache.put(key, choice);
  }
  // No algorithm for this case (not supported, or a layout it rejects): the plain path runs.
  if (!choice) return false;
  const cublasLtMatmulHeuristicResult_t& result = *choice;
  const Tensor workspace =
      result.workspaceSize > 0
          ? make_tensor({static_cast<int64_t>(result.workspaceSize)}, kUInt8, out.device())
          : Tensor();
  const double alpha64 = 1, beta64 = 0;
  const float alpha32 = 1, beta32 = 0;
  const bool f64 = scale_type == CUDA_R_64F;
  const cublasStatus_t done = lt().matmul(
      handle(device), d.op, f64 ? static_cast<const void*>(&alpha64) : &alpha32, B.ptr, d.a, A.ptr,
      d.b, f64 ? static_cast<const void*>(&beta64) : &beta32, out.data_ptr(), d.c, out.data_ptr(),
      d.c, &result.algo, workspace.defined() ? workspace.data_ptr() : nullptr, result.workspaceSize,
      detail::current_stream(out.device()));
  // Refused before launching (out untouched): the plain path runs.
  if (done == CUBLAS_STATUS_NOT_SUPPORTED || done == CUBLAS_STATUS_INVALID_VALUE ||
      done == CUBLAS_STATUS_ARCH_MISMATCH) {
    return false;
  }
  check(done, "cublasLtMatmul");
  return true;
}

}  // namespace

IGNIS_REGISTER_KERNEL(mm_epilogue_stub, CUDA, &gemm_epilogue);

}  // namespace ignis::cuda
