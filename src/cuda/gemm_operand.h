// A row-major matrix operand as cuBLAS and cuBLASLt see it (column-major), shared by
// cuda/blas.cpp (cuBLAS) and cuda/blaslt.cpp (cuBLASLt's epilogues). A row-major operand (unit
// column stride) read column-major is its own transpose (op N); a column-major one (a transposed
// view: unit row stride) takes op T; any other layout is copied dense first.
#pragma once

#include <cublas_api.h>

#include <algorithm>
#include <climits>

#include "ignis/tensor.h"

namespace ignis::cuda {

// A row-major [.., r, c] operand as cuBLAS sees it.
struct Operand {
  Tensor hold;  // a dense copy when the layout needed one
  const void* ptr = nullptr;
  cublasOperation_t op = CUBLAS_OP_N;
  int64_t ld = 1;
  int64_t batch_stride = 0;
};

inline Operand operand(const Tensor& x, bool batched) {
  const int64_t d = batched ? 1 : 0;
  const int64_t r = x.size(d), c = x.size(d + 1);
  // Strides of size-1 dims do not matter: give them the dense value.
  const int64_t s1 = c == 1 ? 1 : x.stride(d + 1);
  const int64_t s0 = r == 1 ? std::max<int64_t>(c, 1) : x.stride(d);
  Operand o;
  if (s1 == 1 && s0 >= c) {
    o.op = CUBLAS_OP_N;
    o.ld = s0;
  } else if (s0 == 1 && s1 >= r && r > 1) {
    o.op = CUBLAS_OP_T;
    o.ld = s1;
  } else {
    const Tensor dense = x.contiguous();
    Operand o2 = operand(dense, batched);  // dense: the first case
    o2.hold = dense;
    return o2;
  }
  o.ld = std::max<int64_t>(o.ld, 1);
  o.ptr = x.data_ptr();
  o.batch_stride = batched ? x.stride(0) : 0;
  return o;
}

inline int as_int(int64_t v, const char* what) {
  IGNIS_CHECK(v <= INT_MAX, "matmul on CUDA: ", what, " = ", v, " is beyond cuBLAS's 32-bit sizes");
  return static_cast<int>(v);
}

}  // namespace ignis::cuda
