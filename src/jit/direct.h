// Direct (unboxed) calls of hot ops by the graph executor (src/jit/direct.cpp).
#pragma once

#include <vector>

#include "ignis/jit.h"

namespace ignis::jit::detail {

/// Calls the node's op through its C++ front end; `env` holds the values by id.
using DirectFn = Tensor (*)(const Node& n, const std::vector<Tensor>& env);
/// The direct call of `rec`, or nullptr when the op is called boxed. The node's arguments must
/// have the schema's types (the tracer and the loader guarantee it).
DirectFn find_direct(const op::Record& rec);

}  // namespace ignis::jit::detail
