// fit / evaluate: the training loop of the lecture notes (zero_grad, forward, loss, backward,
// step) with metrics and callbacks around it.
#include <chrono>
#include <iomanip>
#include <sstream>

#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "ignis/profiler.h"
#include "ignis/train.h"

namespace ignis::train {

namespace {
double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
void add_batch(Metrics& m, double loss, int64_t correct, int64_t n) {
  const int64_t total = m.samples + n;
  if (total == 0) return;
  m.loss = (m.loss * static_cast<double>(m.samples) + loss * static_cast<double>(n)) /
           static_cast<double>(total);
  m.accuracy = (m.accuracy * static_cast<double>(m.samples) + static_cast<double>(correct)) /
               static_cast<double>(total);
  m.samples = total;
}
// A 4-d batch in `format` (a copy, or a restride for one channel); other batches as they are.
Tensor laid_out(const Tensor& x, MemoryFormat format) {
  return format == MemoryFormat::ChannelsLast && x.dim() == 4 ? x.contiguous(format) : x;
}

// The device of the model's parameters (its buffers', if it has none; else the CPU): fit and
// evaluate copy each batch there, as Lightning does, so a model moved with to(Device(kCUDA))
// trains on the GPU with no other change. The copy does not block when the loader pins memory.
Device model_device(const nn::Module& model) {
  for (const Tensor& p : model.parameters()) return p.device();
  for (const auto& [name, b] : model.named_buffers()) {
    if (b.defined()) return b.device();
  }
  return kCPU;
}
Tensor on_device(const Tensor& t, Device d) {
  return t.defined() && t.device() != d && !t.device().is_meta() ? t.to(d, /*non_blocking=*/true)
                                                                  : t;
}

}  // namespace

int64_t count_correct(const Tensor& output, const Tensor& target) {
  if (output.dim() != 2 || target.dim() != 1 || target.is_floating_point()) return 0;
  NoGradGuard ng;
  return (argmax(output, 1) == target.to(kInt64)).sum().item<int64_t>();
}

Metrics evaluate(nn::Module& model, const LossFn& loss, data::DataLoader& loader,
                 MemoryFormat memory_format) {
  const bool was_training = model.is_training();
  model.eval();
  NoGradGuard ng;
  Metrics m;
  const Device dev = model_device(model);
  for (auto& batch : loader) {
    const Tensor x = on_device(batch.data, dev), y = on_device(batch.target, dev);
    Tensor out = model.forward(laid_out(x, memory_format));
    const double l = loss(out, y).item<double>();
    add_batch(m, l, count_correct(out, y), x.size(0));
  }
  model.train(was_training);
  return m;
}

std::string StepBreakdown::str() const {
  const double t = total();
  std::ostringstream os;
  os << std::fixed;
  auto part = [&](const char* name, double v) {
    os << name << " " << std::setprecision(3) << v << "s (" << std::setprecision(1)
       << (t > 0 ? 100 * v / t : 0.0) << "%)";
  };
  part("data", data);
  os << " ";
  part("forward", forward);
  os << " ";
  part("backward", backward);
  os << " ";
  part("optimizer", optimizer);
  os << " ";
  part("other", other);
  return os.str();
}

History fit(nn::Module& model, const LossFn& loss, optim::Optimizer& optimizer,
            data::DataLoader& train_loader, data::DataLoader* val_loader, FitOptions opts,
            const std::vector<std::shared_ptr<Callback>>& callbacks) {
  IGNIS_CHECK(opts.epochs >= 0 && opts.start_epoch >= 0,
              "fit: epochs and start_epoch must be "
              "non-negative");
  History history;
  FitState s;
  s.model = &model;
  s.optimizer = &optimizer;
  s.epochs = opts.epochs;
  s.epoch = opts.start_epoch;  // on_train_begin sees where the run starts (0, or a resume)
  s.step = opts.start_step;
  s.batches_per_epoch = train_loader.size();
  for (auto& c : callbacks) c->on_train_begin(s);
  for (int64_t epoch = opts.start_epoch; epoch < opts.epochs && !s.stop_training; ++epoch) {
    s.epoch = epoch;
    s.train = Metrics{};
    s.val.reset();
    s.batch = 0;
    model.train();
    train_loader.set_epoch(epoch);  // data order depends only on (seed, epoch)
    for (auto& c : callbacks) c->on_epoch_begin(s);
    const double t0 = now_seconds();
    s.breakdown = StepBreakdown{};
    StepBreakdown& b = s.breakdown;
    // Each phase is timed, and is a profiler range when a profile is active.
    auto timed = [](double& acc, const char* name, auto&& f) {
      profiler::Range r(name);
      const double start = now_seconds();
      f();
      acc += now_seconds() - start;
    };
    const double begin_start = now_seconds();
    auto it = [&] {
      profiler::Range r("data");
      return train_loader.begin();
    }();
    b.data += now_seconds() - begin_start;
    // Fetching a batch (begin() and each ++it) is the data phase.
    const Device dev = model_device(model);
    while (it != train_loader.end()) {
      auto& batch = *it;
      Tensor out, l, x = batch.data, y = batch.target;
      if (!dev.is_cpu()) {  // the copy to the model's device is part of the data phase
        timed(b.data, "data", [&] {
          x = on_device(batch.data, dev);
          y = on_device(batch.target, dev);
        });
      }
      timed(b.optimizer, "zero_grad", [&] { optimizer.zero_grad(); });
      timed(b.forward, "forward", [&] {
        out = model.forward(laid_out(x, opts.memory_format));
        l = loss(out, y);
      });
      timed(b.backward, "backward", [&] { l.backward(); });
      timed(b.optimizer, "optimizer", [&] { optimizer.step(); });
      const double rest_start = now_seconds();  // metrics and callbacks: "other"
      ++s.step;
      s.batch_size = x.size(0);
      s.batch_loss = l.item<double>();
      add_batch(s.train, s.batch_loss, count_correct(out, y), s.batch_size);
      for (auto& c : callbacks) c->on_batch_end(s);
      ++s.batch;
      b.other += now_seconds() - rest_start;
      if (s.stop_training) break;
      timed(b.data, "data", [&] { ++it; });
    }
    s.epoch_seconds = now_seconds() - t0;
    history.train.push_back(s.train);
    if (val_loader != nullptr) {
      s.val = evaluate(model, loss, *val_loader, opts.memory_format);
      history.val.push_back(*s.val);
    }
    for (auto& c : callbacks) c->on_epoch_end(s);
  }
  for (auto& c : callbacks) c->on_train_end(s);
  return history;
}

}  // namespace ignis::train
