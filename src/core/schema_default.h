// Reading a schema argument's default ("1", "None", "'none'", "[1, 2]", ...) as a value: for
// boxed calls that leave trailing arguments out (op::call_boxed) and for graph files written
// before an op gained an argument (jit::load).
#pragma once

#include "ignis/op_registry.h"

namespace ignis::op::detail {

/// The value of `a`'s default; an ignis::Error when it has none or it cannot be read.
IValue parse_default(const Argument& a);

}  // namespace ignis::op::detail
