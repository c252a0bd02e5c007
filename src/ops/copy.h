// Copying and casting between tensors (any dtypes, any strides, broadcasting src to dst).
#pragma once

#include "ops/elementwise.h"

namespace ignis {

/// dst[...] = cast(src[...]); src broadcast to dst's shape. No autograd, no version bump.
void copy_into(const Tensor& dst, const Tensor& src);

/// The copy kernel: dst dtype and src dtype may differ.
using CopyFn = void (*)(const TensorIter& it, DType dst, DType src);
IGNIS_DECLARE_STUB(copy_stub, CopyFn);

}  // namespace ignis
