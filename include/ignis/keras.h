// Keras-style models, as the lecture notes write them:
//
//   nn::Sequential net(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Dropout(0.2),
//                      nn::Linear(512, 10), nn::Softmax(1));
//   auto model = train::compile(net, {.optimizer = "adam",
//                                     .loss = "sparse_categorical_crossentropy",
//                                     .metrics = {"accuracy"}});
//   model.fit(x_train, y_train, {.epochs = 5});
//   model.evaluate(x_test, y_test);
//
// compile() chooses the optimizer, the loss and the metrics by name (Keras's names and default
// hyperparameters) or as objects; the CompiledModel it returns trains with train::fit (the same
// loop, callbacks and FitState), on tensors or on DataLoaders, and reports Keras's per-epoch
// logs (loss, accuracy, val_loss, val_accuracy, ...). docs/training.md, "Keras-style models".
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <utility>
#include <vector>

#include "ignis/data.h"
#include "ignis/nn/module.h"
#include "ignis/optim.h"
#include "ignis/train.h"

namespace ignis::train {

// ---- Keras's losses, on (model output, target), each the mean over the batch

namespace losses {
/// Keras's clipping constant (keras.backend.epsilon()).
inline constexpr double kEpsilon = 1e-7;
/// output [..., C]: probabilities (or logits with from_logits); target: integer class indices of
/// the output's shape without its last dim (or with a last dim of 1), as int or float values.
/// From logits: -log_softmax(output)[target]. From probabilities, as Keras: clipped to
/// [eps, 1 - eps], then -log of the clipped value over the clipped row's sum.
Tensor sparse_categorical_crossentropy(const Tensor& output, const Tensor& target,
                                       bool from_logits = false);
/// target: one-hot (or any probability) rows of the output's shape. From probabilities, as Keras:
/// each row divided by its sum, clipped to [eps, 1 - eps], then -sum(target * log(p)).
Tensor categorical_crossentropy(const Tensor& output, const Tensor& target,
                                bool from_logits = false);
/// target: 0/1 (or probabilities) of the output's shape ([N] for an output [N, 1] too).
/// From probabilities clipped to [eps, 1 - eps]; from logits, binary_cross_entropy_with_logits.
Tensor binary_crossentropy(const Tensor& output, const Tensor& target, bool from_logits = false);
Tensor mean_squared_error(const Tensor& output, const Tensor& target);
Tensor mean_absolute_error(const Tensor& output, const Tensor& target);
/// Huber loss with delta 1 (Keras's "huber").
Tensor huber(const Tensor& output, const Tensor& target);
}  // namespace losses

// ---- what compile() takes

/// Builds an optimizer over the given parameters.
using OptimizerFactory =
    std::function<std::shared_ptr<optim::Optimizer>(const std::vector<Tensor>& params)>;

/// compile's optimizer: a Keras name ("sgd", "adam", "adamw", "rmsprop", "adagrad", with Keras's
/// defaults), the options of one of ignis's optimizers (`optim::AdamOptions(3e-4)`: Adam with
/// those options), a factory called with the model's parameters, or an optimizer already built
/// over the model's parameters.
class OptimizerSpec {
 public:
  OptimizerSpec(const char* name) : name_(name) {}             // NOLINT: implicit, as Keras
  OptimizerSpec(std::string name) : name_(std::move(name)) {}  // NOLINT: implicit
  template <class O, std::enable_if_t<std::is_base_of_v<optim::OptimizerOptions, O>, int> = 0>
  OptimizerSpec(const O& options) : options_(options.clone()) {}  // NOLINT: implicit
  template <class F, std::enable_if_t<std::is_invocable_r_v<std::shared_ptr<optim::Optimizer>, F,
                                                            const std::vector<Tensor>&>,
                                      int> = 0>
  OptimizerSpec(F factory) : factory_(std::move(factory)) {}  // NOLINT: implicit
  template <class O, std::enable_if_t<std::is_base_of_v<optim::Optimizer, O>, int> = 0>
  OptimizerSpec(std::shared_ptr<O> optimizer)  // NOLINT: implicit
      : optimizer_(std::move(optimizer)) {}

  /// The optimizer over `params`; throws listing the known names for an unknown name.
  std::shared_ptr<optim::Optimizer> build(const std::vector<Tensor>& params) const;
  /// The known names: sgd, adam, adamw, rmsprop, adagrad.
  static std::vector<std::string> names();

 private:
  std::string name_;
  std::shared_ptr<const optim::OptimizerOptions> options_;
  OptimizerFactory factory_;
  std::shared_ptr<optim::Optimizer> optimizer_;
};

/// compile's loss: a Keras name (see LossSpec::names()), optionally from logits
/// (`{"sparse_categorical_crossentropy", true}`, Keras's from_logits=True), or a LossFn
/// (output, target) -> scalar (note: PyTorch's argument order, not Keras's (y_true, y_pred)).
class LossSpec {
 public:
  LossSpec() = default;
  LossSpec(const char* name, bool from_logits = false)  // NOLINT: implicit
      : name_(name), from_logits_(from_logits) {}
  LossSpec(std::string name, bool from_logits = false)  // NOLINT: implicit
      : name_(std::move(name)), from_logits_(from_logits) {}
  template <class F,
            std::enable_if_t<std::is_invocable_r_v<Tensor, F, const Tensor&, const Tensor&> &&
                                 std::is_copy_constructible_v<F> &&
                                 !std::is_convertible_v<F, std::string>,
                             int> = 0>
  LossSpec(F fn, std::string name = "loss")  // NOLINT: implicit
      : name_(std::move(name)), fn_(std::move(fn)), custom_(true) {}

  bool defined() const { return custom_ || !name_.empty(); }
  bool custom() const { return custom_; }
  bool from_logits() const { return from_logits_; }
  /// The canonical name of a named loss ("mse" -> "mean_squared_error"); a custom loss's name.
  const std::string& name() const { return name_; }
  const LossFn& fn() const { return fn_; }
  /// The known names: sparse_categorical_crossentropy, categorical_crossentropy,
  /// binary_crossentropy, mean_squared_error (mse), mean_absolute_error (mae), huber.
  static std::vector<std::string> names();

 private:
  std::string name_;
  LossFn fn_;
  bool from_logits_ = false;
  bool custom_ = false;
};

/// A metric: its name in the logs and its value on a batch (the mean over the batch's samples).
/// fit and evaluate report the sample-weighted mean over the epoch, as Keras.
struct Metric {
  std::string name;
  std::function<double(const Tensor& output, const Tensor& target)> fn;
};

/// compile's metric: a Keras name ("accuracy" or "acc": binary, sparse categorical or categorical
/// accuracy as the loss (else the shapes) say, as Keras; "sparse_categorical_accuracy",
/// "categorical_accuracy", "binary_accuracy", "mse"/"mean_squared_error",
/// "mae"/"mean_absolute_error"), or a Metric.
class MetricSpec {
 public:
  MetricSpec(const char* name) : name_(name) {}              // NOLINT: implicit
  MetricSpec(std::string name) : name_(std::move(name)) {}   // NOLINT: implicit
  MetricSpec(Metric metric) : metric_(std::move(metric)) {}  // NOLINT: implicit
  const std::string& name() const { return metric_ ? metric_->name : name_; }
  const std::optional<Metric>& metric() const { return metric_; }
  static std::vector<std::string> names();

 private:
  std::string name_;
  std::optional<Metric> metric_;
};

struct CompileOptions {
  /// Keras's default: RMSprop at 0.001.
  OptimizerSpec optimizer = "rmsprop";
  /// Required.
  LossSpec loss{};
  std::vector<MetricSpec> metrics{};
  /// The shape of one sample (without the batch dim, as Keras's input_shape=(28, 28)), for
  /// summary() before the model has seen an input; optional.
  std::vector<int64_t> input_shape{};
};

// ---- what fit, evaluate and predict return and take

/// Named values in order ("loss", then the metrics in compile order, then "val_..."), as
/// Keras's logs dict.
class Logs {
 public:
  /// The value of `name`; throws listing the names there are.
  double at(const std::string& name) const;
  double operator[](const std::string& name) const { return at(name); }
  bool contains(const std::string& name) const;
  void set(const std::string& name, double value);
  const std::vector<std::pair<std::string, double>>& items() const { return items_; }
  /// "loss: 0.2950 - accuracy: 0.9140"
  std::string str() const;

 private:
  std::vector<std::pair<std::string, double>> items_;
};

/// Keras's History: one value per epoch for each log name.
struct KerasHistory {
  std::vector<int64_t> epoch;  // 0-based epochs that ran
  std::vector<std::pair<std::string, std::vector<double>>> history;
  /// The values of `name` ("loss", "val_accuracy", ...); throws listing the names there are.
  const std::vector<double>& operator[](const std::string& name) const;
  bool contains(const std::string& name) const;
};

struct KerasFitOptions {
  int64_t epochs = 1;
  /// Samples per batch: 32 when fitting tensors (Keras's default); a DataLoader brings its own
  /// (setting it with one is an error).
  std::optional<int64_t> batch_size{};
  /// In [0, 1): the last fraction of the samples (taken before shuffling, as Keras) is held out
  /// and evaluated after each epoch (val_loss, val_...). Tensors only.
  double validation_split = 0;
  /// Shuffle the training samples every epoch (tensors only; a DataLoader has its own).
  bool shuffle = true;
  /// 0: silent; 1: a progress bar on a terminal, and one line per epoch; 2: one line per epoch.
  int verbose = 1;
  /// Validation data (x, y) instead of validation_split.
  std::optional<std::pair<Tensor, Tensor>> validation_data{};
  /// Run after the CompiledModel's own: they see train::fit's FitState, whose train and val
  /// accuracy are the compiled "accuracy" metric when there is one.
  std::vector<std::shared_ptr<Callback>> callbacks{};
  /// The epoch to start at (resuming): epochs initial_epoch .. epochs - 1 run.
  int64_t initial_epoch = 0;
  /// The shuffle's seed (epoch e's order depends on (seed, e) only); unset: drawn from the
  /// default generator, so manual_seed fixes it.
  std::optional<uint64_t> seed{};
};

struct KerasEvalOptions {
  int64_t batch_size = 32;
  /// 0: silent; 1 or 2: one line with the logs.
  int verbose = 1;
};

/// A module compiled with an optimizer, a loss and metrics (train::compile). Move-only; holds
/// the module (owning it, or referring to it when compiled from a reference).
class CompiledModel {
 public:
  CompiledModel(std::shared_ptr<nn::Module> module, CompileOptions options);
  ~CompiledModel();
  CompiledModel(CompiledModel&&) noexcept;
  CompiledModel& operator=(CompiledModel&&) noexcept;

  nn::Module& module() const;
  optim::Optimizer& optimizer() const;
  /// "loss" then the metrics' names: the keys of evaluate's logs.
  std::vector<std::string> metrics_names() const;
  /// True when the loss is computed from the logits before the model's trailing Softmax (or
  /// Sigmoid), as Keras does for a softmax output compiled with a cross-entropy: the module is a
  /// Sequential ending in nn::Softmax (nn::Sigmoid) and the loss the matching named
  /// cross-entropy without from_logits. A softmax over another dim than the output's last keeps
  /// the probability loss at run time (Keras's class axis is the last).
  bool uses_logits() const;

  /// Trains on x [N, ...] and y [N, ...] (Keras's model.fit(x, y, ...)).
  KerasHistory fit(const Tensor& x, const Tensor& y, KerasFitOptions opts = {});
  /// Trains on a DataLoader (one epoch = one pass), validating on `validation` if given.
  KerasHistory fit(data::DataLoader& train, KerasFitOptions opts = {});
  KerasHistory fit(data::DataLoader& train, data::DataLoader& validation,
                   KerasFitOptions opts = {});

  /// Loss and metrics over (x, y) or a loader, in eval mode without gradients.
  Logs evaluate(const Tensor& x, const Tensor& y, KerasEvalOptions opts = {});
  Logs evaluate(data::DataLoader& loader, int verbose = 1);

  /// The model's outputs (probabilities for a softmax model) for x, batch by batch, in eval mode
  /// without gradients, concatenated along dim 0.
  Tensor predict(const Tensor& x, int64_t batch_size = 32);
  Tensor predict(data::DataLoader& loader);

  /// The compiled loss of the model on (x, y), in the module's current mode, with its graph:
  /// for a hand-written step (what fit differentiates; from the logits when uses_logits()).
  Tensor compute_loss(const Tensor& x, const Tensor& y);
  /// One optimizer step on the batch (x, y) in training mode (Keras's train_on_batch); returns
  /// the loss and metrics of the batch's forward, before the step.
  Logs train_on_batch(const Tensor& x, const Tensor& y);

  /// Keras's model.summary(): one row per layer (for a Sequential, each of its modules; for
  /// another module, its children, whose output shapes are shown as "?"), with its output shape
  /// ((None, 512): None is the batch dim) and its parameter count, then the total, trainable and
  /// non-trainable parameters. The output shapes come from a forward on the meta device (no
  /// data, no cost; a real forward of one zero sample if the model cannot run on meta), for the
  /// sample shape `input_shape`, else compile's input_shape, else the last input the model saw;
  /// without any, output shapes are "?". The parameters go back unchanged; not while another
  /// thread uses the model.
  std::string summary(std::vector<int64_t> input_shape = {}) const;

 private:
  struct Impl;
  std::unique_ptr<Impl> impl_;
};

/// Keras's model.compile: the module with its optimizer (built over module.parameters()), loss
/// and metrics. Unknown names throw listing the known ones. A module passed by reference must
/// outlive the CompiledModel; a shared_ptr or a temporary is kept by it.
CompiledModel compile(std::shared_ptr<nn::Module> module, CompileOptions options);
CompiledModel compile(nn::Module& module, CompileOptions options);
template <class M, std::enable_if_t<
                       std::is_base_of_v<nn::Module, M> && !std::is_lvalue_reference_v<M>, int> = 0>
CompiledModel compile(M&& module, CompileOptions options) {
  return compile(std::static_pointer_cast<nn::Module>(std::make_shared<M>(std::move(module))),
                 std::move(options));
}

}  // namespace ignis::train
