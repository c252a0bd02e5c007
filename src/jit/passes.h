// Helpers shared by the graph passes and the loader (private to src/jit).
#pragma once

#include <string>
#include <vector>

#include "ignis/jit.h"

namespace ignis::jit::detail {

/// The node writes into one of its inputs (an in-place op, training-mode batch_norm).
bool writes_inputs(const Node& n);
/// A random op that draws numbers (dropout with train=False does not).
bool is_random(const Node& n);
/// Neither: the node may be removed, merged or folded.
bool is_pure(const Node& n);
/// A string that equals another's exactly when the attributes are equal (floats bit for bit).
std::string attr_key(const op::IValue& v);
/// Runs one node on the graph's held tensors (its inputs must all be held values).
std::vector<Tensor> run_node(const Node& n, const Graph& g);
/// Adds a constant value holding t.
int new_constant(Graph& g, const Tensor& t);
/// The node defining each result value (-1 for other values).
std::vector<int> producers(const Graph& g);
/// Removes the nodes marked in `dead` (by index), keeping the others' order.
void erase_nodes(Graph& g, const std::vector<char>& dead);

}  // namespace ignis::jit::detail
