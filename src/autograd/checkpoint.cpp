// Activation checkpointing. Reentrant: the forward runs without a graph; one custom node re-runs
// it in backward (the generator's state restored) and back-propagates through the re-run.
// Non-reentrant: the forward records its graph but saved-tensor hooks keep only slot numbers;
// the first unpack re-runs fn under hooks that fill the slots.
#include "ignis/checkpoint.h"

#include <any>

#include "autograd/node.h"
#include "autograd/saved_hooks.h"
#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/generator.h"
#include "ignis/ops.h"
#include "ignis/saved_tensors_hooks.h"

namespace ignis::autograd {

namespace {

// Restores the default generator's state when it goes out of scope.
struct RngRestore {
  uint64_t seed, offset;
  RngRestore() : seed(default_generator().seed()), offset(default_generator().offset()) {}
  ~RngRestore() { default_generator().set_state(seed, offset); }
};

// fn may write into its inputs (an in-place ReLU starting a segment, as torchvision's and the
// zoo's models have): the backward must re-run it from the inputs as they were. So a copy is
// taken first, and kept in place of an input that fn changed (its version moved). Runs fn.
struct KeptInputs {
  std::vector<Tensor> kept;
  std::vector<bool> written;
  std::vector<Tensor> run(const CheckpointFn& fn, const std::vector<Tensor>& inputs) {
    std::vector<uint32_t> versions;
    {
      NoGradGuard no_grad;
      for (const Tensor& t : inputs) {
        versions.push_back(t._version());
        kept.push_back(t.clone());
      }
    }
    std::vector<Tensor> outputs = fn(inputs);
    for (size_t i = 0; i < inputs.size(); ++i) {
      written.push_back(inputs[i]._version() != versions[i]);
      if (!written.back()) kept[i] = inputs[i];  // unchanged: the input itself, not a copy
    }
    return outputs;
  }
  // What the re-run gets for input i, from the leaf `x` made of the kept input: a recorded copy
  // of one fn writes into (the kept tensor stays as it was; a leaf is never written in place).
  Tensor arg(size_t i, const Tensor& x) const { return written[i] ? x.clone() : x; }
};

// The non-reentrant form's state, shared by the slots the forward's saved tensors became.
class Frame {
 public:
  Frame(CheckpointFn fn, bool preserve_rng_state)
      : fn_(std::move(fn)),
        seed_(default_generator().seed()),
        offset_(default_generator().offset()),
        preserve_rng_state_(preserve_rng_state) {}

  std::vector<Tensor> forward(const std::vector<Tensor>& inputs,
                              const std::shared_ptr<Frame>& self) {
    std::vector<Tensor> outputs;
    {
      graph::SavedTensorsHooks hooks(
          [self](const Tensor& t) -> std::any {
            self->metas_.push_back({t.sizes().shape(), t.dtype()});
            return Slot{self, self->saved_++};
          },
          [](const std::any& p) {
            const auto& s = std::any_cast<const Slot&>(p);
            return s.frame->take(s.index);
          });
      outputs = inputs_.run(fn_, inputs);
    }
    for (size_t i = 0; i < inputs.size(); ++i) {
      requires_grad_.push_back(inputs[i].requires_grad());
      versions_.push_back(inputs_.kept[i]._version());
    }
    return outputs;
  }

 private:
  struct Slot {
    std::shared_ptr<Frame> frame;
    size_t index;
  };
  struct Meta {
    Shape shape;
    DType dtype;
  };

  // The saved tensor of slot i from a re-run of fn (one re-run fills every slot; each is
  // handed out once, so a second backward with retain_graph re-runs fn again).
  Tensor take(size_t i) {
    if (filled_.empty() || !filled_[i]) recompute();
    Tensor t = std::move(recomputed_[i]);
    filled_[i] = false;
    const Meta& m = metas_[i];
    IGNIS_CHECK(t.sizes().equals(m.shape) && t.dtype() == m.dtype, "checkpoint: saved tensor ", i,
                " of the function is a ", t.dtype(), " tensor of shape ", t.sizes(),
                " when run again in backward but was a ", m.dtype, " tensor of shape ",
                IntArrayRef(m.shape),
                " in the forward; the function must run the same ops each time");
    return t;
  }

  void recompute() {
    for (size_t i = 0; i < versions_.size(); ++i) {
      IGNIS_CHECK(inputs_.kept[i]._version() == versions_[i], "checkpoint: input ", i, " (a ",
                  inputs_.kept[i].dtype(), " tensor of shape ", inputs_.kept[i].sizes(),
                  ") was modified by an in-place operation after the checkpointed forward; "
                  "backward needs it as it was to run the function again");
    }
    recomputed_.assign(saved_, Tensor());
    filled_.assign(saved_, false);
    size_t count = 0;
    {
      RngRestore restore;  // the generator continues where it was before this backward
      if (preserve_rng_state_) default_generator().set_state(seed_, offset_);
      AutoGradMode grad_on(true);  // so that fn's ops save what they saved in the forward
      graph::SavedTensorsHooks hooks(
          [this, &count](const Tensor& t) -> std::any {
            if (count < saved_) {
              recomputed_[count] = t;
              filled_[count] = true;
            }
            ++count;
            return {};
          },
          [](const std::any&) -> Tensor {
            IGNIS_FAIL(
                "checkpoint: a tensor saved while the function was run again for "
                "backward was unpacked (backward inside a checkpointed function is not "
                "supported)");
          });
      std::vector<Tensor> args;
      for (size_t i = 0; i < versions_.size(); ++i) {
        Tensor x = alias_without_history(inputs_.kept[i]);
        if (requires_grad_[i]) x.requires_grad_(true);
        args.push_back(inputs_.arg(i, x));
      }
      fn_(args);
    }
    IGNIS_CHECK(count == saved_, "checkpoint: the function saved ", count,
                " tensors for backward when run again in backward but ", saved_,
                " in the forward; it must run the same ops each time (no branching on "
                "random draws or on global state)");
  }

  CheckpointFn fn_;
  uint64_t seed_, offset_;
  bool preserve_rng_state_;
  KeptInputs inputs_;
  std::vector<bool> requires_grad_;
  std::vector<uint32_t> versions_;
  size_t saved_ = 0;         // tensors the forward saved (slots)
  std::vector<Meta> metas_;  // their shapes and dtypes
  std::vector<Tensor> recomputed_;
  std::vector<bool> filled_;
};

std::vector<Tensor> checkpoint_non_reentrant(const CheckpointFn& fn,
                                             const std::vector<Tensor>& inputs,
                                             bool preserve_rng_state) {
  auto frame = std::make_shared<Frame>(fn, preserve_rng_state);
  return frame->forward(inputs, frame);
}

}  // namespace

std::vector<Tensor> checkpoint(const CheckpointFn& fn, const std::vector<Tensor>& inputs,
                               bool preserve_rng_state, bool use_reentrant) {
  IGNIS_CHECK(fn != nullptr, "checkpoint: the function is empty");
  if (!is_grad_enabled()) return fn(inputs);  // nothing would be recorded anyway
  for (size_t i = 0; i < inputs.size(); ++i)
    IGNIS_CHECK(inputs[i].defined(), "checkpoint: input ", i, " is undefined");
  if (!use_reentrant) return checkpoint_non_reentrant(fn, inputs, preserve_rng_state);
  const uint64_t seed = default_generator().seed(), offset = default_generator().offset();
  KeptInputs in;
  std::vector<Tensor> outputs;
  {
    NoGradGuard no_grad;
    outputs = in.run(fn, inputs);
  }
  std::vector<Tensor>& kept = in.kept;
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
      [fn, seed, offset, preserve_rng_state, input_requires_grad, in, n_in](
          AutogradContext* c, variable_list grads) -> variable_list {
        // The engine runs nodes with grad mode on only for create_graph.
        IGNIS_CHECK(!is_grad_enabled(),
                    "checkpoint: double backward (create_graph) through a reentrant "
                    "checkpoint is not supported; use use_reentrant=false");
        IGNIS_CHECK(backward_accumulates(),
                    "checkpoint: autograd::grad (or backward with `inputs`) cannot go through "
                    "a reentrant checkpoint, whose backward accumulates into .grad(); use "
                    "use_reentrant=false");
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
          for (size_t i = 0; i < n_in; ++i) arg.push_back(in.arg(i, x[i]));
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
                             const Tensor& x, bool use_reentrant) {
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
          {h}, /*preserve_rng_state=*/true, use_reentrant)[0];
    }
  }
  return h;
}

}  // namespace ignis::autograd
