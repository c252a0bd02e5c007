// Direct (unboxed) calls of hot ops by the graph executor (src/jit/direct.cpp).
#pragma once

#include <memory>
#include <vector>

#include "ignis/jit.h"
#include "jit/packed_weight.h"

namespace ignis::jit::detail {

/// Calls the node's op through its C++ front end; `env` holds the values by id; `state` is the
/// step's own state (make_direct_state), or null.
using DirectFn = Tensor (*)(const Node& n, const std::vector<Tensor>& env, void* state);
/// The direct call of `rec`, or nullptr when the op is called boxed. The node's arguments must
/// have the schema's types (the tracer and the loader guarantee it).
DirectFn find_direct(const op::Record& rec);
/// State a node's direct call keeps between runs: a pre-packed weight for a convolution
/// (conv2d, conv2d_relu, conv2d_add_relu, conv2d_pointwise) or a linear_pointwise whose weight
/// (argument 1) is a constant of the graph; else null. A direct call whose weight the executor
/// released returns an undefined tensor where only the plain weight would do (the executor then
/// rebuilds it and calls again).
std::shared_ptr<PackedWeight> make_direct_state(const Graph& g, const Node& n);

}  // namespace ignis::jit::detail
