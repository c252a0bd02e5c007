// The fit callbacks: EarlyStopping against scripted metric sequences (Keras / Lightning
// patience semantics), and ProgressLogger's JSON-lines log (valid JSON for NaN and infinities;
// a resumed fit appends, a fresh one truncates).
#include <map>

#include "io/json.h"
#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::read_file;
using ignis::testing_util::tmp_path;
using ignis::testing_util::write_file;
using ::testing::HasSubstr;

namespace {

// Feeds `values` of `monitor` to an EarlyStopping, one epoch each, until it stops; returns
// the number of epochs run.
size_t epochs_until_stop(train::EarlyStopping& es, const std::string& monitor,
                         const std::vector<double>& values) {
  train::FitState s;
  for (size_t e = 0; e < values.size(); ++e) {
    s.epoch = static_cast<int64_t>(e);
    s.val = train::Metrics{};
    if (monitor == "loss") s.train.loss = values[e];
    if (monitor == "accuracy") s.train.accuracy = values[e];
    if (monitor == "val_loss") s.val->loss = values[e];
    if (monitor == "val_accuracy") s.val->accuracy = values[e];
    es.on_epoch_end(s);
    if (s.stop_training) {
      EXPECT_EQ(es.stopped_epoch(), static_cast<int64_t>(e));
      return e + 1;
    }
  }
  EXPECT_EQ(es.stopped_epoch(), -1);
  return values.size();
}

std::vector<std::string> lines_of(const std::string& text) {
  std::vector<std::string> out;
  std::istringstream is(text);
  for (std::string l; std::getline(is, l);) out.push_back(l);
  return out;
}

// A linearly separable problem of 64 samples in 4 unshuffled batches.
struct SmallRun {
  SmallRun() {
    manual_seed(5);
    Tensor x = randn({64, 2});
    Tensor y = (x.select(1, 0) > 0).to(kInt64);
    loader = std::make_unique<data::DataLoader>(std::make_shared<data::TensorDataset>(x, y),
                                                data::DataLoaderOptions{.batch_size = 16});
    model = std::make_shared<nn::Sequential>(nn::Linear(2, 2));
  }
  train::History fit(double lr, train::FitOptions fo,
                     std::vector<std::shared_ptr<train::Callback>> cbs) {
    optim::SGD opt(model->parameters(), optim::SGDOptions(lr));
    auto ce = [](const Tensor& o, const Tensor& t) { return nn::functional::cross_entropy(o, t); };
    return train::fit(*model, ce, opt, *loader, loader.get(), fo, cbs);
  }
  std::unique_ptr<data::DataLoader> loader;
  std::shared_ptr<nn::Sequential> model;
};

}  // namespace

TEST(EarlyStopping, StopsAfterPatienceEpochsWithoutImprovement) {
  // Best 0.8 at epoch 1; epochs 2 and 3 do not improve: with patience 2, stop after epoch 3.
  train::EarlyStopping es("val_loss", /*patience=*/2);
  EXPECT_EQ(epochs_until_stop(es, "val_loss", {1.0, 0.8, 0.9, 0.85, 0.7, 0.6}), 4u);
  // An improvement resets the count: 0.7 at epoch 3 comes in time.
  train::EarlyStopping es2("val_loss", 2);
  EXPECT_EQ(epochs_until_stop(es2, "val_loss", {1.0, 0.8, 0.9, 0.7, 0.75, 0.71, 0.5}), 6u);
  // Never two bad epochs in a row: runs to the end.
  train::EarlyStopping es3("val_loss", 2);
  EXPECT_EQ(epochs_until_stop(es3, "val_loss", {1.0, 1.1, 0.9, 1.0, 0.8}), 5u);
  // Patience 0: the first epoch without improvement stops.
  train::EarlyStopping es0("loss", 0);
  EXPECT_EQ(epochs_until_stop(es0, "loss", {1.0, 0.9, 0.9, 0.5}), 3u);
  // Patience 1.
  train::EarlyStopping es1("loss", 1);
  EXPECT_EQ(epochs_until_stop(es1, "loss", {1.0, 1.0, 0.5}), 2u);
}

TEST(EarlyStopping, AccuracyIsMaximisedAndMinDeltaIsRequired) {
  train::EarlyStopping acc("val_accuracy", 2);
  EXPECT_EQ(epochs_until_stop(acc, "val_accuracy", {0.5, 0.6, 0.55, 0.6, 0.9}), 4u);
  train::EarlyStopping train_acc("accuracy", 1);
  EXPECT_EQ(epochs_until_stop(train_acc, "accuracy", {0.5, 0.7, 0.9, 0.8}), 4u);
  // Gains of 0.05 or 0.08 do not count with min_delta 0.1; a gain of 0.25 does.
  train::EarlyStopping delta("val_loss", 2, /*min_delta=*/0.1);
  EXPECT_EQ(epochs_until_stop(delta, "val_loss", {1.0, 0.95, 0.75, 0.7, 0.67, 0.1}), 5u);
  train::EarlyStopping delta2("val_loss", 2, 0.1);
  EXPECT_EQ(epochs_until_stop(delta2, "val_loss", {1.0, 0.95, 0.92, 0.5}), 3u);
}

TEST(EarlyStopping, EndsAFitAfterPatienceEpochs) {
  // lr 0 and no shuffling: every epoch has the same loss, so only the first one improves.
  SmallRun r;
  auto es = std::make_shared<train::EarlyStopping>("loss", 2);
  train::History h = r.fit(0.0, {.epochs = 10}, {es});
  ASSERT_EQ(h.train.size(), 3u);
  EXPECT_EQ(h.train[0].loss, h.train[2].loss);
  EXPECT_EQ(es->stopped_epoch(), 2);
}

TEST(EarlyStopping, Errors) {
  EXPECT_THAT(error_of([] { train::EarlyStopping("val_acc"); }),
              HasSubstr("EarlyStopping: unknown monitor 'val_acc' (expected loss, accuracy, "
                        "val_loss or val_accuracy)"));
  EXPECT_THAT(error_of([] { train::EarlyStopping("loss", -1); }),
              HasSubstr("EarlyStopping: patience must be >= 0"));
  train::EarlyStopping es("val_loss");
  train::FitState s;
  EXPECT_THAT(error_of([&] { es.on_epoch_end(s); }),
              HasSubstr("EarlyStopping: monitor 'val_loss' needs a validation loader"));
}

TEST(ProgressLogger, WritesNullForNanAndInfinity) {
  const std::string path = tmp_path("nan.jsonl");
  auto model = std::make_shared<nn::Sequential>(nn::Linear(2, 2));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.25));
  train::ProgressLogger logger(path, 0, /*tty=*/false);
  train::FitState s;
  s.optimizer = &opt;
  s.epochs = 1;
  logger.on_train_begin(s);
  logger.on_epoch_begin(s);
  s.step = 7;
  s.train = {.loss = std::nan(""), .accuracy = 0.5, .samples = 8};
  s.val = train::Metrics{.loss = INFINITY, .accuracy = 0.125, .samples = 4};
  s.epoch_seconds = 1.5;
  logger.on_epoch_end(s);
  s.epoch = 1;
  s.train.loss = -INFINITY;
  s.val->loss = 0.75;
  logger.on_epoch_end(s);
  const std::vector<std::string> lines = lines_of(read_file(path));
  ASSERT_EQ(lines.size(), 2u);
  EXPECT_EQ(lines[0],
            "{\"epoch\":1,\"step\":7,\"loss\":null,\"accuracy\":0.5,\"val_loss\":null,"
            "\"val_accuracy\":0.125,\"lr\":0.25,\"seconds\":1.5}");
  EXPECT_EQ(lines[1],
            "{\"epoch\":2,\"step\":7,\"loss\":null,\"accuracy\":0.5,\"val_loss\":0.75,"
            "\"val_accuracy\":0.125,\"lr\":0.25,\"seconds\":1.5}");
  for (const std::string& l : lines) {
    const json::Value v = json::parse(l, "log line");  // throws on invalid JSON
    EXPECT_EQ(v.find("loss")->kind, json::Value::Kind::Null);
  }
  std::remove(path.c_str());
}

TEST(ProgressLogger, AResumedFitAppendsAndAFreshFitTruncates) {
  const std::string path = tmp_path("resume.jsonl");
  write_file(path, "stale line of an older run\n");
  SmallRun r;
  auto logger = [&] { return std::make_shared<train::ProgressLogger>(path, 0, false); };
  r.fit(0.1, {.epochs = 2}, {logger()});
  std::vector<std::string> lines = lines_of(read_file(path));
  ASSERT_EQ(lines.size(), 2u);  // the stale line is gone
  // Resumed at epoch 2 (as `ignis train --resume ck --log same.jsonl`): epochs 1 and 2 stay.
  r.fit(0.1, {.epochs = 4, .start_epoch = 2, .start_step = 8}, {logger()});
  lines = lines_of(read_file(path));
  ASSERT_EQ(lines.size(), 4u);
  for (size_t e = 0; e < 4; ++e) {
    const json::Value v = json::parse(lines[e], "log line");
    EXPECT_EQ(v.find("epoch")->integer, static_cast<int64_t>(e + 1));
    EXPECT_EQ(v.find("step")->integer, static_cast<int64_t>(4 * (e + 1)));
    EXPECT_EQ(v.find("lr")->number, 0.1);
    EXPECT_EQ(v.find("val_loss")->kind, json::Value::Kind::Number);
  }
  // A new run from epoch 0 starts the log afresh.
  r.fit(0.1, {.epochs = 1}, {logger()});
  lines = lines_of(read_file(path));
  ASSERT_EQ(lines.size(), 1u);
  EXPECT_EQ(lines[0].rfind("{\"epoch\":1,\"step\":4,", 0), 0u) << lines[0];
  std::remove(path.c_str());
}

TEST(ProgressLogger, UnwritablePathIsAnError) {
  EXPECT_THAT(error_of([] { train::ProgressLogger("/nonexistent/dir/m.jsonl"); }),
              HasSubstr("ProgressLogger: cannot write /nonexistent/dir/m.jsonl"));
}

// fit times every phase of a step (the lecture notes' per-iteration latency breakdown) and
// marks each as a profiler range.
namespace {
struct BreakdownProbe : train::Callback {
  std::vector<train::StepBreakdown> seen;
  void on_epoch_end(train::FitState& s) override { seen.push_back(s.breakdown); }
};
}  // namespace

TEST(Fit, StepBreakdownCoversEachPhaseAndShowsInAProfile) {
  SmallRun r;
  auto probe = std::make_shared<BreakdownProbe>();
  profiler::Profile prof;
  r.fit(0.1, {.epochs = 2}, {probe});
  prof.stop();
  ASSERT_EQ(probe->seen.size(), 2u);
  for (const train::StepBreakdown& b : probe->seen) {
    EXPECT_GT(b.forward, 0);
    EXPECT_GT(b.backward, 0);
    EXPECT_GT(b.optimizer, 0);
    EXPECT_GE(b.data, 0);
    EXPECT_GE(b.other, 0);
    EXPECT_NEAR(b.total(), b.data + b.forward + b.backward + b.optimizer + b.other, 1e-12);
  }
  std::map<std::string, int64_t> calls;
  for (const auto& s : prof.key_averages()) calls[s.name] = s.calls;
  EXPECT_EQ(calls["forward"], 8);  // 2 epochs of 4 batches
  EXPECT_EQ(calls["backward"], 8);
  EXPECT_EQ(calls["optimizer"], 8);
  EXPECT_EQ(calls["zero_grad"], 8);
  EXPECT_EQ(calls["data"], 2 * (4 + 1));  // begin() and each advance, per epoch
  const std::string line = probe->seen[0].str();
  EXPECT_THAT(line, HasSubstr("data "));
  EXPECT_THAT(line, HasSubstr("forward "));
  EXPECT_THAT(line, HasSubstr("backward "));
  EXPECT_THAT(line, HasSubstr("optimizer "));
  EXPECT_THAT(line, HasSubstr("other "));
  EXPECT_THAT(line, HasSubstr("%)"));
}
