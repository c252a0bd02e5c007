// Activation checkpointing (torch.utils.checkpoint; Chen et al. 2016, "Training deep nets with
// sublinear memory cost"): a checkpointed function keeps none of its intermediate activations
// for backward; backward runs it again, with the random-number state of the forward restored
// (so dropout draws the same masks), and back-propagates through that second run.
//
//   TensorList y = autograd::checkpoint([&](const TensorList& in) {
//     return TensorList{block->forward(in[0])};
//   }, {x});
//   Tensor out = autograd::checkpoint_sequential(model, 4, x);  // 4 segments, the last plain
//
// One extra forward per checkpointed segment buys memory: with sqrt(n) segments of a chain of n
// layers, O(sqrt(n)) activations are held instead of O(n).
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ignis/nn/layers.h"
#include "ignis/tensor.h"

namespace ignis::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs fn(inputs) without recording its ops, and records one node whose backward re-runs fn on
/// the saved inputs (with grad mode on and the generator's state as it was in the forward) and
/// back-propagates the incoming gradients through it. Gradients reach the inputs and every
/// tensor fn reads that requires grad (parameters), as in eager, even when no input requires
/// grad. Inputs must not be modified in place before backward (checked). Not supported: double
/// backward through a checkpoint (create_graph).
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true);

/// Splits a Sequential into `segments` runs of consecutive modules, runs each but the last
/// through checkpoint(), the last one plainly (its activations are needed at once), like
/// torch.utils.checkpoint.checkpoint_sequential.
Tensor checkpoint_sequential(const std::shared_ptr<nn::Sequential>& model, int64_t segments,
                             const Tensor& x);

}  // namespace ignis::autograd
