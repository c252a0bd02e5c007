// Copying and casting between tensors (any dtypes, any strides, broadcasting src to dst).
#pragma once

#include "ops/elementwise.h"

namespace ignis {

/// dst[...] = cast(src[...]); src broadcast to dst's shape. No autograd, no version bump.
/// Between devices, `non_blocking` lets a copy from or to pinned memory return before it ends.
void copy_into(const Tensor& dst, const Tensor& src, bool non_blocking = false);

/// x (4-d, dense in NHWC order but not laid out channels-last: C == 1, say) re-strided as
/// channels-last without a copy: a view (ops/view.cpp), so in-place writes to it are checked.
Tensor restride_channels_last(const Tensor& x);

/// The copy kernel: dst dtype and src dtype may differ.
using CopyFn = void (*)(const TensorIter& it, DType dst, DType src);
IGNIS_DECLARE_STUB(copy_stub, CopyFn);

/// dst (contiguous, on an accelerator) = value cast to dst's dtype, queued on the device's
/// stream: a scalar operand reaches the device as a kernel argument, without a host copy that
/// would wait for the stream. The CPU writes its scalars directly and registers no kernel.
using FillFn = void (*)(const Tensor& dst, Scalar value);
IGNIS_DECLARE_STUB(fill_stub, FillFn);

}  // namespace ignis
