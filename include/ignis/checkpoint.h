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
//
// Two forms, as torch.utils.checkpoint's use_reentrant:
// - reentrant (the default): fn runs without a graph; one node re-runs it in backward and runs
//   a backward of its own through the re-run. Neither autograd::grad nor double backward
//   (create_graph) can go through it.
// - non-reentrant (use_reentrant = false): fn runs with its graph recorded, but every tensor its
//   ops save for backward is dropped (saved-tensor hooks keep only a slot number); the first
//   backward node that needs one re-runs fn and takes the saved tensors from that run. The
//   graph is the plain one, so autograd::grad, create_graph and double backward work, and
//   gradients reach everything fn used, in one backward.
#pragma once

#include <functional>
#include <memory>
#include <vector>

#include "ignis/nn/layers.h"
#include "ignis/tensor.h"

namespace ignis::autograd {

using CheckpointFn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;

/// Runs fn(inputs) keeping none of its activations for backward, which runs fn again (with the
/// generator's state as it was in the forward when preserve_rng_state). Gradients reach the
/// inputs and every tensor fn reads that requires grad (parameters), as in eager, even when no
/// input requires grad. Inputs must not be modified in place before backward (checked), and fn
/// must run the same ops each time (the non-reentrant form checks the count, shapes and dtypes
/// of what they save). Reentrant: double backward (create_graph) and autograd::grad through the
/// checkpoint are refused with an error; non-reentrant: both work.
std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state = true, bool use_reentrant = true);

/// Splits a Sequential into `segments` runs of consecutive modules, runs each but the last
/// through checkpoint(), the last one plainly (its activations are needed at once), like
/// torch.utils.checkpoint.checkpoint_sequential.
Tensor checkpoint_sequential(const std::shared_ptr<nn::Sequential>& model, int64_t segments,
                             const Tensor& x, bool use_reentrant = true);

}  // namespace ignis::autograd
