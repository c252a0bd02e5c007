// A Keras-like training loop (fit / evaluate) with metrics and callbacks, and full training
// checkpoints. The hand-written loop (zero_grad, forward, loss, backward, step) stays the
// first-class way; fit is that loop plus bookkeeping.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ignis/data.h"
#include "ignis/nn/module.h"
#include "ignis/optim.h"

namespace ignis::train {

/// loss(output, target) -> a scalar tensor.
using LossFn = std::function<Tensor(const Tensor& output, const Tensor& target)>;

/// Mean loss and accuracy (argmax over dim 1 equals an integer target) over `samples`.
struct Metrics {
  double loss = 0;
  double accuracy = 0;
  int64_t samples = 0;
};

/// What callbacks see and may change (stop_training).
/// Where an epoch's training steps spent their time (seconds), as the lecture notes' per-
/// iteration latency breakdown: waiting for the next batch, forward (model and loss), backward,
/// the optimizer (zero_grad and step), and the rest (metrics, callbacks).
struct StepBreakdown {
  double data = 0, forward = 0, backward = 0, optimizer = 0, other = 0;
  double total() const { return data + forward + backward + optimizer + other; }
  /// "data 0.12s (4.1%) forward 1.02s (35.2%) ... other 0.03s (1.0%)"
  std::string str() const;
};

struct FitState {
  nn::Module* model = nullptr;
  optim::Optimizer* optimizer = nullptr;
  int64_t epoch = 0;   // 0-based current epoch (on_train_begin: start_epoch)
  int64_t epochs = 0;  // total epochs of this fit
  int64_t step = 0;    // optimizer steps so far (global, survives resume)
  int64_t batch = 0;   // batch index within the epoch
  int64_t batches_per_epoch = 0;
  int64_t batch_size = 0;  // samples in the last batch
  double batch_loss = 0;
  Metrics train;               // running over the current epoch
  std::optional<Metrics> val;  // after the epoch's validation
  double epoch_seconds = 0;
  StepBreakdown breakdown;  // of the current epoch's training steps
  bool stop_training = false;
};

class Callback {
 public:
  virtual ~Callback() = default;
  virtual void on_train_begin(FitState&) {}
  virtual void on_epoch_begin(FitState&) {}
  virtual void on_batch_end(FitState&) {}
  virtual void on_epoch_end(FitState&) {}
  virtual void on_train_end(FitState&) {}
};

struct History {
  std::vector<Metrics> train;
  std::vector<Metrics> val;
};

struct FitOptions {
  int64_t epochs = 1;
  /// Resume: the epoch to start at and the optimizer steps already taken.
  int64_t start_epoch = 0;
  int64_t start_step = 0;
  /// The layout 4-d input batches are given to the model in: ChannelsLast runs convolutional
  /// networks without layout reorders (docs/cnn.md); other inputs are passed as they are.
  MemoryFormat memory_format = MemoryFormat::Contiguous;
};

/// Trains `model` for opts.epochs passes over train_loader (one epoch = one pass; the loader's
/// epoch counter is set so that data order depends only on (seed, epoch)), evaluating on
/// val_loader (if any) after each epoch.
History fit(nn::Module& model, const LossFn& loss, optim::Optimizer& optimizer,
            data::DataLoader& train_loader, data::DataLoader* val_loader, FitOptions opts,
            const std::vector<std::shared_ptr<Callback>>& callbacks = {});

/// Loss and accuracy of `model` (in eval mode, without gradients) over a loader, its 4-d input
/// batches laid out in `memory_format`.
Metrics evaluate(nn::Module& model, const LossFn& loss, data::DataLoader& loader,
                 MemoryFormat memory_format = MemoryFormat::Contiguous);

/// Number of correct predictions: argmax(output, 1) == target.
int64_t count_correct(const Tensor& output, const Tensor& target);

// ---- callbacks

/// Stops when `monitor` ("val_loss", "val_accuracy", "loss", "accuracy") has gone `patience`
/// epochs in a row without improving on its best by more than min_delta (as Keras and
/// Lightning): with patience 2, val_loss 1.0, 0.8, 0.9, 0.85 stops after the fourth epoch;
/// patience 0 stops at the first epoch without improvement.
class EarlyStopping : public Callback {
 public:
  explicit EarlyStopping(std::string monitor = "val_loss", int64_t patience = 3,
                         double min_delta = 0);
  void on_epoch_end(FitState& s) override;
  int64_t stopped_epoch() const { return stopped_epoch_; }

 private:
  std::string monitor_;
  int64_t patience_;
  double min_delta_;
  std::optional<double> best_;
  int64_t wait_ = 0;
  int64_t stopped_epoch_ = -1;
};

/// Steps an LR scheduler every epoch (or every optimizer step).
class LRSchedulerCallback : public Callback {
 public:
  explicit LRSchedulerCallback(std::shared_ptr<optim::LRScheduler> s, bool per_step = false)
      : sched_(std::move(s)), per_step_(per_step) {}
  /// ReduceLROnPlateau, stepped with val_loss (or the training loss without validation).
  explicit LRSchedulerCallback(std::shared_ptr<optim::ReduceLROnPlateau> s)
      : plateau_(std::move(s)) {}
  void on_batch_end(FitState& s) override;
  void on_epoch_end(FitState& s) override;

 private:
  std::shared_ptr<optim::LRScheduler> sched_;
  std::shared_ptr<optim::ReduceLROnPlateau> plateau_;
  bool per_step_ = false;
};

/// Calls `save(state)` every `every_n_steps` optimizer steps and/or at each epoch end.
class CheckpointCallback : public Callback {
 public:
  CheckpointCallback(std::function<void(const FitState&)> save, int64_t every_n_steps = 0,
                     bool each_epoch = true)
      : save_(std::move(save)), every_(every_n_steps), each_epoch_(each_epoch) {}
  void on_batch_end(FitState& s) override;
  void on_epoch_end(FitState& s) override;

 private:
  std::function<void(const FitState&)> save_;
  int64_t every_;
  bool each_epoch_;
};

/// Progress output: a live bar (samples/s, loss, ETA) on a terminal, plain lines otherwise
/// (every `print_every` batches), a summary line per epoch, and optionally a JSON-lines log:
/// one object per epoch (epoch, step, loss, accuracy, val_loss, val_accuracy, lr, seconds;
/// NaN and infinities as null). A fit from epoch 0 truncates the log; a resumed fit
/// (start_epoch > 0) appends to it.
class ProgressLogger : public Callback {
 public:
  explicit ProgressLogger(std::string jsonl_path = "", int64_t print_every = 100,
                          std::optional<bool> tty = std::nullopt);
  void on_train_begin(FitState& s) override;
  void on_epoch_begin(FitState& s) override;
  void on_batch_end(FitState& s) override;
  void on_epoch_end(FitState& s) override;

 private:
  std::string log_path_;
  int64_t every_;
  bool tty_;
  double epoch_start_ = 0;
  double last_draw_ = 0;
};

// ---- checkpoints

/// Where a run stands. With the model, optimizer, scheduler and generator state saved beside it,
/// a resumed run continues bit for bit, except that the draw counters of random transforms
/// (data::transforms::RandomCrop, ...) are not saved: they restart on resume.
struct TrainingState {
  int64_t epoch = 0;  // the next epoch to run
  int64_t step = 0;   // optimizer steps taken
};

/// Saves model, optimizer, scheduler (optional), epoch, step and the RNG state to one
/// safetensors file (atomically). Keys: "model.<name>", "optim.<key>", "sched.<key>", and
/// metadata "format", "epoch", "step", "optimizer" (its name), "rng_seed", "rng_offset".
void save_checkpoint(const std::string& path, const nn::Module& model,
                     const optim::Optimizer& optimizer, const optim::LRScheduler* scheduler,
                     const TrainingState& state);
/// Restores what save_checkpoint wrote (and the RNG state); returns epoch and step. All or
/// nothing: the metadata, the model's keys and shapes, the optimizer's and the scheduler's state
/// are checked before anything changes, so a failing load leaves model, optimizer, scheduler
/// and generator as they were.
TrainingState load_checkpoint(const std::string& path, nn::Module& model,
                              optim::Optimizer& optimizer, optim::LRScheduler* scheduler);

/// Saves / loads just a module's state_dict.
void save_module(const std::string& path, const nn::Module& model);
void load_module(const std::string& path, nn::Module& model, bool strict = true);

}  // namespace ignis::train
