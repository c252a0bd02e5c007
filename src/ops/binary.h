// Stubs of the binary arithmetic ops (defined in ops/binary.cpp, kernels per device).
#pragma once

#include "ops/elementwise.h"

namespace ignis {
IGNIS_DECLARE_STUB(add_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(sub_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(mul_stub, ElementwiseFn);
IGNIS_DECLARE_STUB(div_stub, ElementwiseFn);
}  // namespace ignis
