// The front end shared by elementwise ops: type promotion, broadcasting, casting the operands,
// allocating the output, and calling the op's kernel for the device.
#pragma once

#include "core/dispatch.h"
#include "core/tensor_iter.h"
#include "ignis/ops.h"
#include "ops/functors.h"

namespace ignis {

/// An elementwise kernel: runs the op over `it` with operands of compute dtype `dtype`.
using ElementwiseFn = void (*)(const TensorIter& it, DType dtype, OpArgs args);

/// PyTorch's result_type: dimensioned tensors win; 0-d tensors only when of a higher category.
DType result_type(const Tensor& a, const Tensor& b);
/// Same with a scalar operand (a Python number in PyTorch).
DType result_type(const Tensor& a, Scalar b);
/// The dtype for ops that need floating math (exp, div): integers and bool go to float32.
inline DType to_floating(DType t) { return is_floating_point(t) ? t : default_dtype(); }

/// A 0-d tensor holding `s` as `dtype` (the scalar operand of a binary op).
Tensor wrap_scalar(Scalar s, DType dtype, Device device);

/// `x` as an operand on `device`: a CPU 0-d tensor (a scalar) moves to the other operand's
/// device, as in PyTorch; any other tensor is returned as is.
Tensor to_operand_device(const Tensor& x, Device device);

/// x cast to `dtype` (x itself when it already has it).
Tensor cast(const Tensor& x, DType dtype);

/// out = op(a, b): broadcasts, casts a and b to `compute`, allocates out as `out_dtype`.
Tensor binary_op(const DispatchStub<ElementwiseFn>& stub, const Tensor& a, const Tensor& b,
                 DType compute, DType out_dtype, OpArgs args = {});
/// out = op(x) with x cast to `compute`.
Tensor unary_op(const DispatchStub<ElementwiseFn>& stub, const Tensor& x, DType compute,
                DType out_dtype, OpArgs args = {});
/// In place: self = op(self, other) (or op(self) when other is undefined); other broadcast to
/// self's shape. Checks that the result dtype can be stored in self.
void inplace_op(const DispatchStub<ElementwiseFn>& stub, Tensor& self, const Tensor& other,
                DType compute, OpArgs args = {});

/// Refuses in-place writes that would corrupt autograd: a leaf requiring grad, or a view of one.
void check_inplace(const Tensor& self, const char* op);

/// Makes `self` take the history of `result` after an in-place op computed out of place:
/// copies result's values into self and gives self result's grad_fn.
Tensor& inplace_from(Tensor& self, const Tensor& result, const char* op);

}  // namespace ignis
