// Products beyond ops.h: matrix-vector, batched add-multiply, and einsum (lowered to permutes,
// reshapes and batched matrix products).
#pragma once

#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis {

/// self [n, m] @ vec [m] -> [n].
Tensor mv(const Tensor& self, const Tensor& vec);
/// beta * self + alpha * bmm(batch1, batch2); self broadcasts to [b, n, p]. With beta = 0, self
/// is not read (NaN and inf in it do not propagate), as in PyTorch.
Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
               Scalar alpha = 1);
/// Einstein summation, as torch::einsum: "ij,jk->ik", implicit output ("ij,jk": the labels seen
/// once, in alphabetical order, upper case first), "..." for broadcast dims, a label repeated in
/// one operand takes its diagonal ("ii->i", "ii" is the trace). Contractions run as batched
/// matrix products.
Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors);

}  // namespace ignis
