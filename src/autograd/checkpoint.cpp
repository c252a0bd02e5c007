// Activation checkpointing: the forward runs without a graph; one custom node re-runs it in
// backward (the generator's state restored) and back-propagates through the re-run.
#include "ignis/checkpoint.h"

#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/generator.h"
#include "ignis/ops.h"

namespace ignis::autograd {

namespace {

// Restores the default generator's state when it goes out of scope.
struct RngRestore {
  uint64_t seed, offset;
  RngRestore() : seed(default_generator().seed()), offset(default_generator().offset()) {}
  ~RngRestore() { default_generator().set_state(seed, offset); }
};

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state) {
  IGNIS_CHECK(fn != nullptr, "checkpoint: the function is empty");
  if (!is_grad_enabled()) return fn(inputs);  // nothing would be recorded anyway
  for (size_t i = 0; i < inputs.size(); ++i)
    IGNIS_CHECK(inputs[i].defined(), "checkpoint: input ", i, " is undefined");
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  // fn may write into its inputs (an in-place ReLU starting a segment, as torchvision's and the
  // zoo's models have): the backward must re-run it from the inputs as they were. So a copy is
  // taken first, and kept in place of an input that fn changed (its version moved).
  std::vector<Tensor> outputs, kept;
  std::vector<bool> written;
  {
    NoGradGuard no_grad;
    std::vector<uint32_t> versions;
    for (const Tensor& t : inputs) {
      versions.push_back(t._version());
      kept.push_back(t.clone());
    }
    outputs = fn(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      written.push_back(inputs[i]._version() != versions[i]);
      if (!written.back()) kept[i] = inputs[i];  // unchanged: the input itself, not a copy
    }
  }
  // The node's inputs: the function's, plus one that requires grad, so that the node is
  // recorded (and parameters inside fn get gradients) when no input requires grad.
  std::vector<Tensor> node_inputs = inputs;
  node_inputs.push_back(zeros({}).requires_grad_(true));
  std::vector<bool> input_requires_grad;
  for (const Tensor& t : inputs) input_requires_grad.push_back(t.requires_grad());
  auto ctx = std::make_shared<AutogradContext>();
  detail::init_context(*ctx, node_inputs);
  ctx->save_for_backward(kept);  // checked against in-place changes when unpacked
  const size_t n_in = inputs.size();
  detail::record_custom(
      "CheckpointFunction", ctx, node_inputs, outputs,
      [fn, seed, offset, preserve_rng_state, input_requires_grad, written, n_in](
          AutogradContext* c, variable_list grads) -> variable_list {
        // The engine runs nodes with grad mode on only for create_graph.
        IGNIS_CHECK(!is_grad_enabled(),
                    "checkpoint: double backward (create_graph) through a "
                    "checkpoint is not supported");
        variable_list saved = c->get_saved_variables();
        std::vector<Tensor> x, arg;  // the leaves whose gradients are returned; what fn gets
        x.reserve(n_in);
        for (size_t i = 0; i < n_in; ++i) {
          Tensor d = saved[i].detach();
          if (input_requires_grad[i]) d.requires_grad_(true);
          x.push_back(d);
        }
        std::vector<Tensor> outs;
        {
          RngRestore restore;  // the generator continues where it was before this backward
          if (preserve_rng_state) default_generator().set_state(seed, offset);
          AutoGradMode grad_on(true);
          // An input fn wrote into gets a copy (recorded, so its gradient reaches the leaf):
          // the saved tensor stays as it was, and a leaf is never written in place.
          for (size_t i = 0; i < n_in; ++i) arg.push_back(written[i] ? x[i].clone() : x[i]);
          outs = fn(arg);
        }
        IGNIS_CHECK(outs.size() == grads.size(), "checkpoint: the function returned ", outs.size(),
                    " tensors when run again in backward but ", grads.size(), " in the forward");
        variable_list roots, root_grads;
        for (size_t i = 0; i < outs.size(); ++i) {
          if (outs[i].defined() && outs[i].requires_grad() && grads[i].defined()) {
            roots.push_back(outs[i]);
            root_grads.push_back(grads[i]);
          }
        }
        if (!roots.empty()) backward(roots, root_grads);
        variable_list result(n_in + 1);
        for (size_t i = 0; i < n_in; ++i)
          if (input_requires_grad[i]) result[i] = x[i].grad();
        return result;
      });
  return outputs;
}

Tensor checkpoint_sequential(const std::shared_ptr<nn::Sequential>& model, int64_t segments,
                             const Tensor& x) {
  IGNIS_CHECK(model != nullptr, "checkpoint_sequential: the model is null");
  const int64_t n = static_cast<int64_t>(model->size());
  IGNIS_CHECK(segments >= 1 && segments <= std::max<int64_t>(n, 1),
              "checkpoint_sequential: ", segments, " segments for a Sequential of ", n,
              " modules (1 to ", n, " allowed)");
  // Segment k holds modules [k * n / segments, (k + 1) * n / segments).
  Tensor h = x;
  for (int64_t k = 0; k < segments; ++k) {
    auto seg = std::make_shared<nn::Sequential>();
    for (int64_t i = k * n / segments; i < (k + 1) * n / segments; ++i)
      seg->push_back((*model)[static_cast<size_t>(i)]);
    if (k + 1 == segments) {
      h = seg->forward(h);
    } else {
      h = checkpoint(
          [seg](const std::vector<Tensor>& in) { return std::vector<Tensor>{seg->forward(in[0])}; },
          {h})[0];
    }
  }
  return h;
}

}  // namespace ignis::autograd
