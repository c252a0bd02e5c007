// CompiledModel: Keras's compile / fit / evaluate / predict / summary on top of train::fit.
//
// fit hands train::fit a wrapper module (KerasForward) and a loss closure. The wrapper runs the
// user's module; for a Sequential ending in a Softmax (or Sigmoid) compiled with the matching
// cross-entropy it runs the body and the tail apart and keeps the logits, so that the closure
// computes the loss from them (log_softmax: finite, exact gradients where the softmax
// saturates), as Keras does with a softmax output. The closure also accumulates the compiled
// metrics, for the training batches or the validation ones by the wrapper's mode; a callback
// turns them into Keras's per-epoch logs.
#include "ignis/keras.h"

#include <unistd.h>

#include <algorithm>
#include <chrono>
#include <cmath>
#include <cstdio>
#include <iomanip>
#include <sstream>
#include <typeinfo>

#include "ignis/autograd.h"
#include "ignis/nn/layers.h"
#include "ignis/ops.h"
#include "train/keras_internal.h"

namespace ignis::train {

// ---- optimizers by name, options, factory or object

std::vector<std::string> OptimizerSpec::names() {
  return {"sgd", "adam", "adamw", "rmsprop", "adagrad"};
}

std::shared_ptr<optim::Optimizer> OptimizerSpec::build(const std::vector<Tensor>& params) const {
  if (optimizer_) {
    // An optimizer built elsewhere must update this model: at least one parameter in common.
    bool shared = false;
    for (const Tensor& p : optimizer_->parameters()) {
      for (const Tensor& q : params) shared = shared || p.is_same(q);
    }
    IGNIS_CHECK(shared, "compile: the ", optimizer_->name(),
                " optimizer holds none of the model's parameters");
    return optimizer_;
  }
  if (factory_) {
    auto opt = factory_(params);
    IGNIS_CHECK(opt != nullptr, "compile: the optimizer factory returned no optimizer");
    return opt;
  }
  if (options_) {
    const optim::OptimizerOptions& o = *options_;
    if (auto* p = dynamic_cast<const optim::SGDOptions*>(&o)) {
      return std::make_shared<optim::SGD>(params, *p);
    }
    if (auto* p = dynamic_cast<const optim::AdamOptions*>(&o)) {
      return std::make_shared<optim::Adam>(params, *p);
    }
    if (auto* p = dynamic_cast<const optim::AdamWOptions*>(&o)) {
      return std::make_shared<optim::AdamW>(params, *p);
    }
    if (auto* p = dynamic_cast<const optim::RMSpropOptions*>(&o)) {
      return std::make_shared<optim::RMSprop>(params, *p);
    }
    if (auto* p = dynamic_cast<const optim::AdagradOptions*>(&o)) {
      return std::make_shared<optim::Adagrad>(params, *p);
    }
    IGNIS_FAIL("compile: optimizer options of type ", o.type_name(),
               " are not known; pass a factory (params) -> optimizer instead");
  }
  // Keras's defaults (learning rates, epsilon 1e-7, RMSprop's rho 0.9, Adagrad's initial
  // accumulator 0.1, AdamW's weight decay 0.004) with PyTorch's update formulas.
  const std::string n = detail::lower(name_);
  if (n == "sgd") return std::make_shared<optim::SGD>(params, optim::SGDOptions(0.01));
  if (n == "adam") {
    return std::make_shared<optim::Adam>(params, optim::AdamOptions(0.001).eps(1e-7));
  }
  if (n == "adamw") {
    return std::make_shared<optim::AdamW>(params,
                                          optim::AdamWOptions(0.001).eps(1e-7).weight_decay(0.004));
  }
  if (n == "rmsprop") {
    return std::make_shared<optim::RMSprop>(params,
                                            optim::RMSpropOptions(0.001).alpha(0.9).eps(1e-7));
  }
  if (n == "adagrad") {
    return std::make_shared<optim::Adagrad>(
        params, optim::AdagradOptions(0.001).initial_accumulator_value(0.1).eps(1e-7));
  }
  IGNIS_FAIL("compile: unknown optimizer '", name_, "' (known: ", detail::join(names()),
             "; or pass optimizer options, a factory or an optimizer)");
}

namespace {
double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
}  // namespace

namespace detail {

enum class Tail { None, Softmax, Sigmoid };

// What fit trains: the user's module, with the logits before a trailing Softmax or Sigmoid kept
// for the loss.
class KerasForward : public nn::Module {
 public:
  KerasForward(std::shared_ptr<nn::Module> model, Tail tail) : model_(std::move(model)) {
    register_module("model", model_);
    auto seq = std::dynamic_pointer_cast<nn::Sequential>(model_);
    if (tail == Tail::None || seq == nullptr || seq->size() < 2) return;
    tail_ = tail;
    body_ = std::make_shared<nn::Sequential>();
    const auto children = seq->named_children();
    for (size_t i = 0; i + 1 < children.size(); ++i) {
      body_->push_back(children[i].first, children[i].second);
    }
    last_ = children.back().second;
    if (tail == Tail::Softmax) softmax_dim_ = static_cast<const nn::Softmax&>(*last_).dim();
  }
  std::string type_name() const override { return "CompiledModel"; }

  Tensor forward(const Tensor& x) override {
    if (x.defined() && x.dim() >= 1) {
      seen_shape_.assign(x.sizes().begin() + 1, x.sizes().end());
      seen_dtype_ = x.dtype();
      seen_ = true;
    }
    last_out_ = last_logits_ = Tensor();
    if (tail_ == Tail::None) return model_->forward(x);
    Tensor logits = body_->forward(x);
    Tensor out = last_->forward(logits);
    // Keras's crossentropies take the class axis last: a softmax over another dim keeps its
    // probabilities.
    const int64_t d = softmax_dim_ < 0 ? softmax_dim_ + logits.dim() : softmax_dim_;
    if (tail_ == Tail::Sigmoid || d == logits.dim() - 1) {
      last_out_ = out;
      last_logits_ = logits;
    }
    return out;
  }

  /// The logits of `out` if it is the last forward's output with a tail applied; then forgets them.
  Tensor take_logits(const Tensor& out) {
    Tensor l = out.is_same(last_out_) ? last_logits_ : Tensor();
    last_out_ = last_logits_ = Tensor();
    return l;
  }
  void forget() { last_out_ = last_logits_ = Tensor(); }
  bool splits() const { return tail_ != Tail::None; }
  nn::Module& model() { return *model_; }
  const std::vector<int64_t>& seen_shape() const { return seen_shape_; }
  bool seen() const { return seen_; }
  DType seen_dtype() const { return seen_dtype_; }

 private:
  std::shared_ptr<nn::Module> model_;
  std::shared_ptr<nn::Sequential> body_;
  std::shared_ptr<nn::Module> last_;
  Tail tail_ = Tail::None;
  int64_t softmax_dim_ = -1;
  Tensor last_out_, last_logits_;
  std::vector<int64_t> seen_shape_;
  DType seen_dtype_ = kFloat32;
  bool seen_ = false;
};

// A sample-weighted running mean.
struct Mean {
  double sum = 0, n = 0;
  void add(double v, double w) {
    sum += v * w;
    n += w;
  }
  double value() const { return n > 0 ? sum / n : std::nan(""); }
};

struct MetricState {
  Metric metric;
  Mean train, eval;
};

}  // namespace detail

namespace {

using detail::KerasForward;
using detail::Tail;

// Sets `wrapper` (and so its subtree) to a mode, and back on scope exit to the mode `model` had:
// the wrapper's own flag may be stale when the model's mode was set directly.
struct ModeGuard {
  nn::Module& m;
  bool was;
  ModeGuard(nn::Module& wrapper, const nn::Module& model, bool training)
      : m(wrapper), was(model.is_training()) {
    m.train(training);
  }
  ~ModeGuard() { m.train(was); }
};

std::string tuple_shape(IntArrayRef sample) {
  // Keras's (None, 512): None is the batch dim.
  std::string s = "(None";
  for (int64_t d : sample) s += ", " + std::to_string(d);
  return s + (sample.empty() ? ",)" : ")");
}

std::string with_commas(int64_t v) {
  std::string s = std::to_string(v < 0 ? -v : v), out;
  for (size_t i = 0; i < s.size(); ++i) {
    if (i > 0 && (s.size() - i) % 3 == 0) out += ',';
    out += s[i];
  }
  return (v < 0 ? "-" : "") + out;
}

std::string readable_bytes(double bytes) {
  const char* units[] = {"B", "KB", "MB", "GB", "TB"};
  int u = 0;
  while (bytes >= 1024 && u < 4) {
    bytes /= 1024;
    ++u;
  }
  char buf[32];
  std::snprintf(buf, sizeof(buf), "%.2f %s", bytes, units[u]);
  return buf;
}

std::string bar(int64_t done, int64_t total) {
  const int width = 30;
  const double frac = total > 0 ? static_cast<double>(done) / static_cast<double>(total) : 1.0;
  const int fill = static_cast<int>(frac * width);
  std::string b(static_cast<size_t>(fill), '=');
  if (fill < width) b += '>';
  b.resize(width, '.');
  return "[" + b + "]";
}

std::string seconds_str(double s) {
  char buf[32];
  if (s >= 1 || s == 0) {
    std::snprintf(buf, sizeof(buf), "%.0fs", s);
  } else if (s >= 1e-3) {
    std::snprintf(buf, sizeof(buf), "%.0fms", s * 1e3);
  } else {
    std::snprintf(buf, sizeof(buf), "%.0fus", s * 1e6);
  }
  return buf;
}

}  // namespace

namespace detail {

// The state of a CompiledModel.
struct KerasState {
  std::shared_ptr<nn::Module> module;
  std::shared_ptr<KerasForward> fwd;
  std::shared_ptr<optim::Optimizer> optimizer;
  LossSpec loss;  // canonical name for a named loss
  LossFn loss_fn;
  LossFn logits_fn;          // the same loss from logits
  bool logits_loss = false;  // the named cross-entropy matching the model's tail
  std::vector<MetricState> metrics;
  int accuracy = -1;  // the index of the first accuracy metric
  std::vector<int64_t> input_shape;
  int64_t steps = 0;

  Tensor loss_of(const Tensor& out, const Tensor& target) {
    Tensor logits = fwd->take_logits(out);
    if (logits_loss && logits.defined()) {
      return logits_fn(logits, target);
    }
    return loss_fn(out, target);
  }

  void add_metrics(const Tensor& out, const Tensor& target) {
    if (metrics.empty()) return;
    NoGradGuard ng;
    const Tensor o = out.detach();
    const double n = target.dim() > 0 ? static_cast<double>(target.size(0)) : 1.0;
    const bool training = fwd->is_training();
    for (auto& m : metrics) (training ? m.train : m.eval).add(m.metric.fn(o, target), n);
  }

  LossFn fit_loss() {
    return [this](const Tensor& out, const Tensor& target) {
      Tensor l = loss_of(out, target);
      add_metrics(out, target);
      return l;
    };
  }

  void reset(bool train, bool eval) {
    for (auto& m : metrics) {
      if (train) m.train = Mean{};
      if (eval) m.eval = Mean{};
    }
  }

  Logs logs(double loss_value, bool train, const std::string& prefix = "") const {
    Logs l;
    l.set(prefix + "loss", loss_value);
    for (const auto& m : metrics) l.set(prefix + m.metric.name, (train ? m.train : m.eval).value());
    return l;
  }
};

}  // namespace detail

struct CompiledModel::Impl : detail::KerasState {};

namespace {

// Keras's per-epoch logs and progress output, first among fit's callbacks.
class KerasCallback : public Callback {
 public:
  KerasCallback(detail::KerasState& st, int verbose, KerasHistory& history)
      : st_(st), verbose_(verbose), history_(history), tty_(::isatty(STDOUT_FILENO) != 0) {}

  void on_epoch_begin(FitState& s) override {
    st_.reset(true, true);
    t0_ = last_draw_ = now_seconds();
    if (verbose_ > 0) {
      std::printf("Epoch %lld/%lld\n", static_cast<long long>(s.epoch + 1),
                  static_cast<long long>(s.epochs));
      std::fflush(stdout);
    }
  }

  void on_batch_end(FitState& s) override {
    if (verbose_ != 1 || !tty_) return;
    const double t = now_seconds();
    const int64_t done = s.batch + 1;
    if (t - last_draw_ < 0.1 && done != s.batches_per_epoch) return;
    last_draw_ = t;
    const double elapsed = t - t0_;
    const double eta =
        elapsed / static_cast<double>(done) * static_cast<double>(s.batches_per_epoch - done);
    std::printf("\r%lld/%lld %s - ETA: %s - %s   ", static_cast<long long>(done),
                static_cast<long long>(s.batches_per_epoch), bar(done, s.batches_per_epoch).c_str(),
                seconds_str(eta).c_str(), st_.logs(s.train.loss, true).str().c_str());
    std::fflush(stdout);
  }

  void on_epoch_end(FitState& s) override {
    Logs logs = st_.logs(s.train.loss, true);
    if (s.val) {
      const Logs val = st_.logs(s.val->loss, false, "val_");
      for (const auto& [n, v] : val.items()) logs.set(n, v);
    }
    // The FitState's accuracy (what EarlyStopping and ProgressLogger read) becomes the compiled
    // accuracy metric, which may be binary or categorical.
    if (st_.accuracy >= 0) {
      const auto& m = st_.metrics[static_cast<size_t>(st_.accuracy)];
      s.train.accuracy = m.train.value();
      if (s.val) s.val->accuracy = m.eval.value();
    }
    history_.epoch.push_back(s.epoch);
    for (const auto& [n, v] : logs.items()) {
      bool found = false;
      for (auto& [hn, hv] : history_.history) {
        if (hn == n) {
          hv.push_back(v);
          found = true;
        }
      }
      if (!found) history_.history.emplace_back(n, std::vector<double>{v});
    }
    if (verbose_ == 0) return;
    const double secs = now_seconds() - t0_;
    const double per_step = s.batch > 0 ? secs / static_cast<double>(s.batch) : 0;
    const long long b = static_cast<long long>(s.batch);
    if (verbose_ == 1) {
      std::printf("%s%lld/%lld %s - %s %s/step - %s\n", tty_ ? "\r" : "", b, b, bar(1, 1).c_str(),
                  seconds_str(secs).c_str(), seconds_str(per_step).c_str(), logs.str().c_str());
    } else {
      std::printf("%lld/%lld - %s - %s/step - %s\n", b, b, seconds_str(secs).c_str(),
                  seconds_str(per_step).c_str(), logs.str().c_str());
    }
    std::fflush(stdout);
  }

  void on_train_end(FitState& s) override { st_.steps = s.step; }

 private:
  detail::KerasState& st_;
  int verbose_;
  KerasHistory& history_;
  bool tty_;
  double t0_ = 0, last_draw_ = 0;
};

void check_xy(const char* fn, const Tensor& x, const Tensor& y, const char* xname = "x",
              const char* yname = "y") {
  IGNIS_CHECK(x.defined() && y.defined(), fn, ": ", xname, " and ", yname, " must be defined");
  IGNIS_CHECK(x.dim() >= 1 && y.dim() >= 1, fn, ": ", xname, " and ", yname,
              " need a batch dim, got shapes ", x.sizes(), " and ", y.sizes());
  IGNIS_CHECK(x.size(0) == y.size(0), fn, ": ", xname, " and ", yname,
              " have different numbers of samples: ", xname, " ", x.sizes(), ", ", yname, " ",
              y.sizes());
  IGNIS_CHECK(x.size(0) > 0, fn, ": ", xname, " has no samples (shape ", x.sizes(), ")");
}

void check_fit_options(const KerasFitOptions& o) {
  IGNIS_CHECK(o.epochs >= 0, "fit: epochs must be >= 0, got ", o.epochs);
  IGNIS_CHECK(o.initial_epoch >= 0, "fit: initial_epoch must be >= 0, got ", o.initial_epoch);
  IGNIS_CHECK(o.verbose >= 0 && o.verbose <= 2, "fit: verbose must be 0, 1 or 2, got ", o.verbose);
  IGNIS_CHECK(!o.batch_size || *o.batch_size > 0, "fit: batch_size must be positive, got ",
              o.batch_size.value_or(0));
  IGNIS_CHECK(o.validation_split >= 0 && o.validation_split < 1,
              "fit: validation_split must be in [0, 1), got ", o.validation_split);
  IGNIS_CHECK(o.validation_split == 0 || !o.validation_data,
              "fit: pass validation_split or validation_data, not both");
}

std::unique_ptr<data::DataLoader> tensor_loader(const Tensor& x, const Tensor& y, int64_t batch,
                                                bool shuffle, uint64_t seed) {
  return std::make_unique<data::DataLoader>(
      std::make_shared<data::TensorDataset>(x, y),
      data::DataLoaderOptions{.batch_size = batch, .shuffle = shuffle, .seed = seed});
}

}  // namespace

// ---- CompiledModel

CompiledModel::CompiledModel(std::shared_ptr<nn::Module> module, CompileOptions options)
    : impl_(std::make_unique<Impl>()) {
  IGNIS_CHECK(module != nullptr, "compile: the module is null");
  IGNIS_CHECK(options.loss.defined(),
              "compile: a loss is required (known: ", detail::join(LossSpec::names()),
              "; or a function (output, target) -> Tensor)");
  Impl& st = *impl_;
  st.module = module;
  if (options.loss.custom()) {
    st.loss = options.loss;
    st.loss_fn = options.loss.fn();
  } else {
    st.loss = LossSpec(detail::canonical_loss(options.loss.name()), options.loss.from_logits());
    st.loss_fn = detail::named_loss(st.loss.name(), st.loss.from_logits());
  }
  // Keras computes a cross-entropy of a softmax (sigmoid) output from its logits.
  Tail tail = Tail::None;
  if (auto seq = std::dynamic_pointer_cast<nn::Sequential>(module);
      seq && seq->size() >= 2 && !st.loss.custom() && !st.loss.from_logits()) {
    const nn::Module& last = *(*seq)[seq->size() - 1];
    const std::string& l = st.loss.name();
    if (typeid(last) == typeid(nn::Softmax) &&
        (l == "sparse_categorical_crossentropy" || l == "categorical_crossentropy")) {
      tail = Tail::Softmax;
    } else if (typeid(last) == typeid(nn::Sigmoid) && l == "binary_crossentropy") {
      tail = Tail::Sigmoid;
    }
  }
  st.logits_loss = tail != Tail::None;
  if (st.logits_loss) st.logits_fn = detail::named_loss(st.loss.name(), /*from_logits=*/true);
  st.fwd = std::make_shared<KerasForward>(module, tail);
  for (const MetricSpec& m : options.metrics) {
    Metric metric = m.metric() ? *m.metric() : detail::named_metric(m.name(), st.loss);
    IGNIS_CHECK(!metric.name.empty() && metric.fn, "compile: a Metric needs a name and a function");
    for (const auto& other : st.metrics) {
      IGNIS_CHECK(other.metric.name != metric.name, "compile: metric '", metric.name,
                  "' given twice");
    }
    IGNIS_CHECK(metric.name != "loss", "compile: a metric cannot be named 'loss'");
    const std::string l = detail::lower(metric.name);
    if (st.accuracy < 0 && l.find("acc") != std::string::npos) {
      st.accuracy = static_cast<int>(st.metrics.size());
    }
    st.metrics.push_back(detail::MetricState{std::move(metric), {}, {}});
  }
  st.input_shape = options.input_shape;
  for (int64_t d : st.input_shape) {
    IGNIS_CHECK(d > 0, "compile: input_shape ", IntArrayRef(st.input_shape),
                " must have positive sizes");
  }
  st.optimizer = options.optimizer.build(module->parameters());
}

CompiledModel::~CompiledModel() = default;
CompiledModel::CompiledModel(CompiledModel&&) noexcept = default;
CompiledModel& CompiledModel::operator=(CompiledModel&&) noexcept = default;

nn::Module& CompiledModel::module() const { return *impl_->module; }
optim::Optimizer& CompiledModel::optimizer() const { return *impl_->optimizer; }
bool CompiledModel::uses_logits() const { return impl_->logits_loss; }

std::vector<std::string> CompiledModel::metrics_names() const {
  std::vector<std::string> out{"loss"};
  for (const auto& m : impl_->metrics) out.push_back(m.metric.name);
  return out;
}

namespace {

KerasHistory run_fit(detail::KerasState& st, data::DataLoader& train_loader,
                     data::DataLoader* val_loader, const KerasFitOptions& opts) {
  KerasHistory history;
  std::vector<std::shared_ptr<Callback>> callbacks{
      std::make_shared<KerasCallback>(st, opts.verbose, history)};
  callbacks.insert(callbacks.end(), opts.callbacks.begin(), opts.callbacks.end());
  train::fit(*st.fwd, st.fit_loss(), *st.optimizer, train_loader, val_loader,
             {.epochs = opts.epochs, .start_epoch = opts.initial_epoch, .start_step = st.steps},
             callbacks);
  st.fwd->forget();
  return history;
}

// fit's options that a DataLoader brings itself.
void check_loader_options(const KerasFitOptions& opts) {
  IGNIS_CHECK(!opts.batch_size, "fit: batch_size comes from the DataLoader (got ",
              opts.batch_size.value_or(0), "); set it in its DataLoaderOptions");
  IGNIS_CHECK(opts.validation_split == 0, "fit: validation_split (", opts.validation_split,
              ") needs tensors; with a DataLoader pass a validation loader or validation_data");
}

}  // namespace

KerasHistory CompiledModel::fit(const Tensor& x, const Tensor& y, KerasFitOptions opts) {
  check_fit_options(opts);
  check_xy("fit", x, y);
  const int64_t n = x.size(0);
  const int64_t batch = opts.batch_size.value_or(32);
  // Keras holds out the last fraction of the samples, before any shuffling.
  int64_t n_train = n;
  if (opts.validation_split > 0) {
    n_train =
        static_cast<int64_t>(std::floor(static_cast<double>(n) * (1 - opts.validation_split)));
    IGNIS_CHECK(n_train > 0 && n_train < n, "fit: validation_split ", opts.validation_split, " of ",
                n, " samples leaves ", n_train, " for training and ", n - n_train,
                " for validation; both need at least one");
  }
  uint64_t seed = 0;
  if (opts.seed) {
    seed = *opts.seed;
  } else if (opts.shuffle) {
    seed = static_cast<uint64_t>(
        randint(0, int64_t{1} << 62, std::vector<int64_t>{1}).item<int64_t>());
  }
  auto train_loader =
      tensor_loader(x.narrow(0, 0, n_train), y.narrow(0, 0, n_train), batch, opts.shuffle, seed);
  std::unique_ptr<data::DataLoader> val_loader;
  if (n_train < n) {
    val_loader = tensor_loader(x.narrow(0, n_train, n - n_train), y.narrow(0, n_train, n - n_train),
                               batch, false, 0);
  }
  if (opts.validation_data) {
    const auto& [vx, vy] = *opts.validation_data;
    check_xy("fit", vx, vy, "validation_data x", "validation_data y");
    val_loader = tensor_loader(vx, vy, batch, false, 0);
  }
  return run_fit(*impl_, *train_loader, val_loader.get(), opts);
}

KerasHistory CompiledModel::fit(data::DataLoader& train_loader, KerasFitOptions opts) {
  check_fit_options(opts);
  check_loader_options(opts);
  std::unique_ptr<data::DataLoader> val_loader;
  if (opts.validation_data) {
    const auto& [vx, vy] = *opts.validation_data;
    check_xy("fit", vx, vy, "validation_data x", "validation_data y");
    val_loader = tensor_loader(vx, vy, train_loader.options().batch_size, false, 0);
  }
  return run_fit(*impl_, train_loader, val_loader.get(), opts);
}

KerasHistory CompiledModel::fit(data::DataLoader& train_loader, data::DataLoader& validation,
                                KerasFitOptions opts) {
  check_fit_options(opts);
  check_loader_options(opts);
  IGNIS_CHECK(!opts.validation_data, "fit: pass a validation loader or validation_data, not both");
  return run_fit(*impl_, train_loader, &validation, opts);
}

Logs CompiledModel::evaluate(const Tensor& x, const Tensor& y, KerasEvalOptions opts) {
  check_xy("evaluate", x, y);
  IGNIS_CHECK(opts.batch_size > 0, "evaluate: batch_size must be positive, got ", opts.batch_size);
  auto loader = tensor_loader(x, y, opts.batch_size, false, 0);
  return evaluate(*loader, opts.verbose);
}

Logs CompiledModel::evaluate(data::DataLoader& loader, int verbose) {
  IGNIS_CHECK(verbose >= 0 && verbose <= 2, "evaluate: verbose must be 0, 1 or 2, got ", verbose);
  Impl& st = *impl_;
  st.reset(false, true);
  const double t0 = now_seconds();
  const bool was_training = st.module->is_training();
  Metrics m;
  try {
    m = train::evaluate(*st.fwd, st.fit_loss(), loader);
  } catch (...) {
    st.fwd->train(was_training);
    st.fwd->forget();
    throw;
  }
  st.fwd->train(was_training);  // the model's mode, which the wrapper's may not know
  st.fwd->forget();
  IGNIS_CHECK(m.samples > 0, "evaluate: the data has no samples");
  Logs logs = st.logs(m.loss, false);
  if (verbose > 0) {
    const double secs = now_seconds() - t0;
    const long long b = static_cast<long long>(loader.size());
    std::printf("%lld/%lld %s - %s %s/step - %s\n", b, b, bar(1, 1).c_str(),
                seconds_str(secs).c_str(), seconds_str(secs / static_cast<double>(b)).c_str(),
                logs.str().c_str());
    std::fflush(stdout);
  }
  return logs;
}

Tensor CompiledModel::predict(const Tensor& x, int64_t batch_size) {
  IGNIS_CHECK(x.defined() && x.dim() >= 1, "predict: x needs a batch dim, got ",
              x.defined() ? x.sizes() : IntArrayRef());
  IGNIS_CHECK(batch_size > 0, "predict: batch_size must be positive, got ", batch_size);
  IGNIS_CHECK(x.size(0) > 0, "predict: x has no samples (shape ", x.sizes(), ")");
  Impl& st = *impl_;
  ModeGuard mode(*st.fwd, *st.module, false);
  NoGradGuard ng;
  std::vector<Tensor> outs;
  for (int64_t i = 0; i < x.size(0); i += batch_size) {
    outs.push_back(st.fwd->forward(x.narrow(0, i, std::min(batch_size, x.size(0) - i))));
  }
  st.fwd->forget();
  return outs.size() == 1 ? outs[0] : cat(outs, 0);
}

Tensor CompiledModel::predict(data::DataLoader& loader) {
  Impl& st = *impl_;
  ModeGuard mode(*st.fwd, *st.module, false);
  NoGradGuard ng;
  std::vector<Tensor> outs;
  for (auto& batch : loader) outs.push_back(st.fwd->forward(batch.data));
  st.fwd->forget();
  IGNIS_CHECK(!outs.empty(), "predict: the loader has no batches");
  return outs.size() == 1 ? outs[0] : cat(outs, 0);
}

Tensor CompiledModel::compute_loss(const Tensor& x, const Tensor& y) {
  check_xy("compute_loss", x, y);
  Impl& st = *impl_;
  return st.loss_of(st.fwd->forward(x), y);
}

Logs CompiledModel::train_on_batch(const Tensor& x, const Tensor& y) {
  check_xy("train_on_batch", x, y);
  Impl& st = *impl_;
  st.fwd->train();
  st.reset(true, false);
  st.optimizer->zero_grad();
  Tensor out = st.fwd->forward(x);
  Tensor l = st.loss_of(out, y);
  l.backward();
  st.optimizer->step();
  ++st.steps;
  st.add_metrics(out, y);
  return st.logs(l.item<double>(), true);
}

// ---- summary

namespace {

// Swaps every parameter and buffer of a module for a meta tensor of its shape and dtype (the
// handles keep their identity, as Module::to), and back on destruction.
class MetaSwap {
 public:
  explicit MetaSwap(nn::Module& m) {
    NoGradGuard ng;
    auto swap = [&](const nn::NamedTensors& ts) {
      for (const auto& [n, t] : ts) {
        if (!t.defined() || t.device().is_meta()) continue;
        saved_.emplace_back(t, t.detach());
        t.set_data(empty(t.sizes(), TensorOptions(t.dtype()).device(kMeta)));
      }
    };
    try {
      swap(m.named_parameters());
      swap(m.named_buffers());
    } catch (...) {
      restore();
      throw;
    }
  }
  ~MetaSwap() { restore(); }
  MetaSwap(const MetaSwap&) = delete;
  MetaSwap& operator=(const MetaSwap&) = delete;

 private:
  void restore() {
    for (auto& [handle, original] : saved_) handle.set_data(original);
    saved_.clear();
  }
  std::vector<std::pair<Tensor, Tensor>> saved_;
};

// The per-sample output shapes of each top-level layer of a Sequential (or of the whole module)
// on one sample of `shape` on `device`; throws what the forward throws.
std::vector<std::vector<int64_t>> layer_shapes(nn::Module& m, const std::vector<int64_t>& shape,
                                               DType dtype, Device device) {
  std::vector<int64_t> full{1};
  full.insert(full.end(), shape.begin(), shape.end());
  Tensor h = zeros(full, TensorOptions(dtype).device(device));
  std::vector<std::vector<int64_t>> out;
  auto sample_shape = [](const Tensor& t) {
    return std::vector<int64_t>(t.sizes().begin() + (t.dim() > 0 ? 1 : 0), t.sizes().end());
  };
  if (auto* seq = dynamic_cast<nn::Sequential*>(&m)) {
    for (size_t i = 0; i < seq->size(); ++i) {
      h = (*seq)[i]->forward(h);
      out.push_back(sample_shape(h));
    }
  } else {
    out.push_back(sample_shape(m.forward(h)));
  }
  return out;
}

}  // namespace

std::string CompiledModel::summary(std::vector<int64_t> input_shape) const {
  Impl& st = *impl_;
  nn::Module& m = *st.module;
  for (int64_t d : input_shape) {
    IGNIS_CHECK(d > 0, "summary: input_shape ", IntArrayRef(input_shape),
                " must have positive sizes");
  }
  bool known = true;
  DType dtype = kFloat32;
  for (const Tensor& p : m.parameters()) {
    if (p.is_floating_point()) {
      dtype = p.dtype();
      break;
    }
  }
  if (input_shape.empty()) input_shape = st.input_shape;
  if (input_shape.empty() && st.fwd->seen()) {
    input_shape = st.fwd->seen_shape();
    dtype = st.fwd->seen_dtype();
  }
  if (input_shape.empty()) known = false;

  std::vector<std::vector<int64_t>> shapes;
  if (known) {
    ModeGuard mode(m, m, false);
    NoGradGuard ng;
    try {
      MetaSwap meta(m);
      shapes = layer_shapes(m, input_shape, dtype, kMeta);
    } catch (const std::exception&) {
      // A module that reads data on the host (or has no meta kernel): one real zero sample.
      try {
        shapes = layer_shapes(m, input_shape, dtype, kCPU);
      } catch (const std::exception& e) {
        IGNIS_FAIL("summary: the model's forward failed on an input of shape ",
                   tuple_shape(input_shape), ": ", e.what());
      }
    }
  }

  std::ostringstream os;
  const std::string thin(65, '_'), thick(65, '=');
  auto row = [&](const std::string& a, const std::string& b, const std::string& c) {
    std::string line = " " + a;
    line.resize(std::max<size_t>(line.size() + 1, 29), ' ');
    line += b;
    line.resize(std::max<size_t>(line.size() + 1, 55), ' ');
    line += c;
    os << line << "\n";
  };
  os << "Model: \"" << m.type_name() << "\"\n" << thin << "\n";
  row("Layer (type)", "Output Shape", "Param #");
  os << thick << "\n";
  const bool is_seq = dynamic_cast<nn::Sequential*>(&m) != nullptr;
  const auto children = m.named_children();
  if (is_seq || !children.empty()) {
    for (size_t i = 0; i < children.size(); ++i) {
      const auto& [name, c] = children[i];
      std::string shape = "?";
      if (known && is_seq) shape = tuple_shape(shapes[i]);
      row(name + " (" + c->type_name() + ")", shape, with_commas(c->num_parameters()));
    }
  } else {
    row("(" + m.type_name() + ")", known ? tuple_shape(shapes.back()) : "?",
        with_commas(m.num_parameters()));
  }
  os << thick << "\n";
  double total_bytes = 0, trainable_bytes = 0;
  for (const Tensor& p : m.parameters()) {
    total_bytes += static_cast<double>(p.nbytes());
    if (p.requires_grad()) trainable_bytes += static_cast<double>(p.nbytes());
  }
  const int64_t total = m.num_parameters(), trainable = m.num_parameters(true);
  os << "Total params: " << with_commas(total) << " (" << readable_bytes(total_bytes) << ")\n"
     << "Trainable params: " << with_commas(trainable) << " (" << readable_bytes(trainable_bytes)
     << ")\n"
     << "Non-trainable params: " << with_commas(total - trainable) << " ("
     << readable_bytes(total_bytes - trainable_bytes) << ")\n";
  if (known && !is_seq && !children.empty()) {
    os << "Input " << tuple_shape(input_shape) << " -> output " << tuple_shape(shapes.back())
       << "\n";
  }
  if (!known) {
    os << "(output shapes unknown: pass an input shape to summary() or compile's input_shape, "
          "or run the model first)\n";
  }
  os << thin << "\n";
  return os.str();
}

// ---- compile

CompiledModel compile(std::shared_ptr<nn::Module> module, CompileOptions options) {
  return CompiledModel(std::move(module), std::move(options));
}

CompiledModel compile(nn::Module& module, CompileOptions options) {
  // Shared ownership when the module is already held by a shared_ptr; else a non-owning handle
  // (the caller keeps the module alive).
  std::shared_ptr<nn::Module> p = module.weak_from_this().lock();
  if (!p) p = std::shared_ptr<nn::Module>(&module, [](nn::Module*) {});
  return CompiledModel(std::move(p), std::move(options));
}

}  // namespace ignis::train
