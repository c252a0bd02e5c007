#include <unistd.h>

#include <chrono>
#include <cmath>
#include <cstdio>
#include <fstream>
#include <iomanip>
#include <iostream>
#include <sstream>

#include "ignis/train.h"
#include "io/json.h"

namespace ignis::train {

namespace {
// A JSON number, or null for NaN and infinities (which JSON cannot represent).
std::string json_number(double v) {
  if (!std::isfinite(v)) return "null";
  std::ostringstream os;
  os << std::setprecision(8) << v;
  return os.str();
}
double now_seconds() {
  using namespace std::chrono;
  return duration<double>(steady_clock::now().time_since_epoch()).count();
}
std::optional<double> metric(const FitState& s, const std::string& name) {
  if (name == "loss") return s.train.loss;
  if (name == "accuracy") return s.train.accuracy;
  if (!s.val) return std::nullopt;
  if (name == "val_loss") return s.val->loss;
  if (name == "val_accuracy") return s.val->accuracy;
  return std::nullopt;
}
}  // namespace

EarlyStopping::EarlyStopping(std::string monitor, int64_t patience, double min_delta)
    : monitor_(std::move(monitor)), patience_(patience), min_delta_(min_delta) {
  IGNIS_CHECK(monitor_ == "loss" || monitor_ == "accuracy" || monitor_ == "val_loss" ||
                  monitor_ == "val_accuracy",
              "EarlyStopping: unknown monitor '", monitor_,
              "' (expected loss, accuracy, val_loss or val_accuracy)");
  IGNIS_CHECK(patience_ >= 0, "EarlyStopping: patience must be >= 0");
}

void EarlyStopping::on_epoch_end(FitState& s) {
  auto v = metric(s, monitor_);
  IGNIS_CHECK(v.has_value(), "EarlyStopping: monitor '", monitor_, "' needs a validation loader");
  const bool maximize = monitor_.find("accuracy") != std::string::npos;
  const bool improved = !best_ || (maximize ? *v > *best_ + min_delta_ : *v < *best_ - min_delta_);
  if (improved) {
    best_ = *v;
    wait_ = 0;
    return;
  }
  if (++wait_ >= patience_) {  // Keras and Lightning: `patience` epochs without improvement
    s.stop_training = true;
    stopped_epoch_ = s.epoch;
  }
}

void LRSchedulerCallback::on_batch_end(FitState&) {
  if (sched_ && per_step_) sched_->step();
}

void LRSchedulerCallback::on_epoch_end(FitState& s) {
  if (sched_ && !per_step_) sched_->step();
  if (plateau_) plateau_->step(s.val ? s.val->loss : s.train.loss);
}

void CheckpointCallback::on_batch_end(FitState& s) {
  if (every_ > 0 && s.step % every_ == 0) save_(s);
}

void CheckpointCallback::on_epoch_end(FitState& s) {
  if (each_epoch_) save_(s);
}

ProgressLogger::ProgressLogger(std::string jsonl_path, int64_t print_every, std::optional<bool> tty)
    : log_path_(std::move(jsonl_path)),
      every_(print_every),
      tty_(tty.value_or(::isatty(STDOUT_FILENO) != 0)) {
  if (!log_path_.empty()) {
    std::ofstream f(log_path_, std::ios::app);  // truncated (or not) by on_train_begin
    IGNIS_CHECK(f.good(), "ProgressLogger: cannot write ", log_path_);
  }
}

void ProgressLogger::on_train_begin(FitState& s) {
  // A fresh run starts a fresh log; a resumed one (start_epoch > 0) keeps the earlier epochs.
  if (log_path_.empty() || s.epoch > 0) return;
  std::ofstream f(log_path_, std::ios::trunc);
  IGNIS_CHECK(f.good(), "ProgressLogger: cannot write ", log_path_);
}

void ProgressLogger::on_epoch_begin(FitState&) { epoch_start_ = last_draw_ = now_seconds(); }

void ProgressLogger::on_batch_end(FitState& s) {
  const double t = now_seconds();
  const double elapsed = t - epoch_start_;
  const int64_t done = s.batch + 1;
  const double sps = elapsed > 0 ? static_cast<double>(s.train.samples) / elapsed : 0;
  if (tty_) {
    if (t - last_draw_ < 0.1 && done != s.batches_per_epoch) return;
    last_draw_ = t;
    const int width = 30;
    const double frac = s.batches_per_epoch ? static_cast<double>(done) / s.batches_per_epoch : 1;
    const int fill = static_cast<int>(frac * width);
    const double eta = frac > 0 ? elapsed / frac - elapsed : 0;
    std::printf("\repoch %lld/%lld [%s%s] %lld/%lld loss %.4f %.0f samples/s ETA %.1fs ",
                static_cast<long long>(s.epoch + 1), static_cast<long long>(s.epochs),
                std::string(static_cast<size_t>(fill), '=').c_str(),
                std::string(static_cast<size_t>(width - fill), ' ').c_str(),
                static_cast<long long>(done), static_cast<long long>(s.batches_per_epoch),
                s.train.loss, sps, eta);
    std::fflush(stdout);
  } else if (every_ > 0 && done % every_ == 0) {
    // The lecture notes' "batch N loss: L" line (running mean over the epoch so far).
    std::printf("epoch %lld batch %lld loss: %.4f (%.0f samples/s)\n",
                static_cast<long long>(s.epoch + 1), static_cast<long long>(done), s.train.loss,
                sps);
    std::fflush(stdout);
  }
}

void ProgressLogger::on_epoch_end(FitState& s) {
  if (tty_) std::printf("\n");
  std::ostringstream line;
  line << std::fixed << std::setprecision(4) << "epoch " << s.epoch + 1 << "/" << s.epochs
       << " loss=" << s.train.loss << " accuracy=" << s.train.accuracy;
  if (s.val) line << " val_loss=" << s.val->loss << " val_accuracy=" << s.val->accuracy;
  line << std::setprecision(2) << " time=" << s.epoch_seconds << "s";
  std::printf("%s\n", line.str().c_str());
  if (s.breakdown.total() > 0) std::printf("  step time: %s\n", s.breakdown.str().c_str());
  std::fflush(stdout);
  if (!log_path_.empty()) {
    std::ofstream f(log_path_, std::ios::app);
    f << "{\"epoch\":" << s.epoch + 1 << ",\"step\":" << s.step
      << ",\"loss\":" << json_number(s.train.loss)
      << ",\"accuracy\":" << json_number(s.train.accuracy);
    if (s.val) {
      f << ",\"val_loss\":" << json_number(s.val->loss)
        << ",\"val_accuracy\":" << json_number(s.val->accuracy);
    }
    f << ",\"lr\":" << json_number(s.optimizer->param_groups().front().lr())
      << ",\"seconds\":" << json_number(s.epoch_seconds) << "}\n";
    IGNIS_CHECK(f.good(), "ProgressLogger: cannot write ", log_path_);
  }
}

}  // namespace ignis::train
