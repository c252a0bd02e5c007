// Training checkpoints: a run resumed mid-epoch from train::save_checkpoint continues bit for bit
// (same losses, same batch order, same parameters) as the uninterrupted run; damaged checkpoint
// files give clear errors; an interrupted save leaves the previous file intact.
#include <signal.h>
#include <sys/resource.h>
#include <sys/stat.h>

#include <cstring>
#include <filesystem>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::read_file;
using ignis::testing_util::tmp_path;
using ignis::testing_util::to_vec;
using ignis::testing_util::write_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

enum class Opt { kSGDMomentum, kAdam };

// A small classification problem: 90 samples of 6 features, 3 classes; 6 batches per epoch
// (the last one of 10 samples), shuffled per epoch.
std::shared_ptr<data::TensorDataset> make_dataset() {
  Generator& g = default_generator();
  const uint64_t seed = g.seed(), offset = g.offset();
  manual_seed(2024);
  Tensor x = randn({90, 6});
  Tensor y = argmax(matmul(x, randn({6, 3})), 1);
  g.set_state(seed, offset);
  return std::make_shared<data::TensorDataset>(x, y);
}

// Model, optimizer and scheduler of one run. Dropout makes the run depend on the RNG stream.
struct Trainer {
  explicit Trainer(Opt kind, uint64_t init_seed, int workers = 0)
      : loader(make_dataset(),
               {.batch_size = 16, .shuffle = true, .num_workers = workers, .seed = 77}) {
    manual_seed(init_seed);
    model = std::make_shared<nn::Sequential>(nn::Linear(6, 32), nn::ReLU(), nn::Dropout(0.2),
                                             nn::Linear(32, 3));
    if (kind == Opt::kAdam) {
      opt = std::make_unique<optim::Adam>(model->parameters(),
                                          optim::AdamOptions(0.01).weight_decay(1e-3));
    } else {
      opt = std::make_unique<optim::SGD>(model->parameters(),
                                         optim::SGDOptions(0.05).momentum(0.9).nesterov(true));
    }
    sched = std::make_unique<optim::StepLR>(*opt, /*step_size=*/2, /*gamma=*/0.5);
  }
  std::shared_ptr<nn::Sequential> model;
  std::unique_ptr<optim::Optimizer> opt;
  std::unique_ptr<optim::LRScheduler> sched;
  data::DataLoader loader;
};

struct Record {
  std::vector<float> losses;
  std::vector<std::vector<int64_t>> targets;  // the batch order, seen through the labels
  std::vector<std::vector<float>> first_rows;
};

// Runs optimizer steps [step, end_step): the epoch and the position within it follow from the
// step (the data order is a function of (seed, epoch)); the scheduler steps once per epoch.
// Calls at_step(step) after each step.
void run(Trainer& t, int64_t step, int64_t end_step, Record& rec,
         const std::function<void(int64_t)>& at_step = nullptr) {
  const int64_t per_epoch = t.loader.size();
  auto ce = [](const Tensor& o, const Tensor& y) { return nn::functional::cross_entropy(o, y); };
  t.model->train();
  while (step < end_step) {
    const int64_t epoch = step / per_epoch;
    const int64_t skip = step % per_epoch;
    t.loader.set_epoch(epoch);
    int64_t b = 0;
    for (auto& batch : t.loader) {
      if (b++ < skip) continue;
      t.opt->zero_grad();
      Tensor loss = ce(t.model->forward(batch.data), batch.target);
      loss.backward();
      t.opt->step();
      ++step;
      if (step % per_epoch == 0) t.sched->step();
      rec.losses.push_back(loss.item<float>());
      Tensor tg = batch.target.contiguous();
      rec.targets.emplace_back(tg.data_ptr<int64_t>(), tg.data_ptr<int64_t>() + tg.numel());
      Tensor row = batch.data[0].contiguous();
      rec.first_rows.emplace_back(row.data_ptr<float>(), row.data_ptr<float>() + row.numel());
      if (at_step) at_step(step);
      if (step == end_step) break;
    }
  }
}

template <class T>
std::vector<T> tail(const std::vector<T>& v, size_t from) {
  return std::vector<T>(v.begin() + static_cast<std::ptrdiff_t>(from), v.end());
}

void expect_bitwise_equal_models(const nn::Module& a, const nn::Module& b) {
  auto sa = a.state_dict(), sb = b.state_dict();
  ASSERT_EQ(sa.size(), sb.size());
  for (size_t i = 0; i < sa.size(); ++i) {
    const Tensor x = sa[i].second.contiguous(), y = sb[i].second.contiguous();
    ASSERT_EQ(x.nbytes(), y.nbytes());
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << sa[i].first;
  }
}

void resume_is_bit_exact(Opt kind, int workers) {
  constexpr int64_t kTotal = 20, kCut = 9;  // 6 batches per epoch: cut inside epoch 1
  const std::string path = tmp_path("resume.safetensors");
  // The uninterrupted run, which saves a checkpoint at step kCut on the way.
  Trainer a(kind, /*init_seed=*/1, workers);
  Record ra;
  run(a, 0, kTotal, ra, [&](int64_t step) {
    if (step == kCut) {
      train::save_checkpoint(path, *a.model, *a.opt, a.sched.get(),
                             {.epoch = step / a.loader.size(), .step = step});
    }
  });
  ASSERT_EQ(ra.losses.size(), static_cast<size_t>(kTotal));

  // A new process-like start: different initial weights, a disturbed RNG, then the checkpoint.
  Trainer b(kind, /*init_seed=*/999, workers);
  manual_seed(31337);
  (void)rand({1000});
  train::TrainingState s = train::load_checkpoint(path, *b.model, *b.opt, b.sched.get());
  EXPECT_EQ(s.step, kCut);
  EXPECT_EQ(s.epoch, 1);
  EXPECT_EQ(b.sched->last_epoch(), a.sched->last_epoch() - 2);  // saved after 1 epoch, now 3
  Record rb;
  run(b, s.step, kTotal, rb);

  // Bit for bit: the same losses, batches and final parameters.
  EXPECT_EQ(rb.losses, tail(ra.losses, kCut));
  EXPECT_EQ(rb.targets, tail(ra.targets, kCut));
  EXPECT_EQ(rb.first_rows, tail(ra.first_rows, kCut));
  expect_bitwise_equal_models(*a.model, *b.model);
  EXPECT_EQ(b.sched->get_last_lr(), a.sched->get_last_lr());
  EXPECT_EQ(b.opt->param_groups()[0].lr(), a.opt->param_groups()[0].lr());

  // The checkpoint really carries the RNG state: resuming with another stream diverges.
  Trainer c(kind, 999, workers);
  train::load_checkpoint(path, *c.model, *c.opt, c.sched.get());
  manual_seed(5);
  Record rc;
  run(c, kCut, kTotal, rc);
  EXPECT_EQ(rc.targets, rb.targets);  // the data order does not depend on it
  EXPECT_NE(rc.losses, rb.losses);    // the dropout masks do
  std::remove(path.c_str());
}

}  // namespace

TEST(Checkpoint, ResumeMidEpochIsBitExactWithSGDMomentum) {
  resume_is_bit_exact(Opt::kSGDMomentum, 0);
}

TEST(Checkpoint, ResumeMidEpochIsBitExactWithAdamAndLoaderWorkers) {
  resume_is_bit_exact(Opt::kAdam, 2);
}

TEST(Checkpoint, FitResumedAtAnEpochBoundaryMatchesTheUninterruptedFit) {
  const std::string path = tmp_path("fit.safetensors");
  auto ce = [](const Tensor& o, const Tensor& y) { return nn::functional::cross_entropy(o, y); };
  auto unowned = [](optim::LRScheduler* s) {
    return std::shared_ptr<optim::LRScheduler>(s, [](optim::LRScheduler*) {});
  };
  // Four epochs in one go, checkpointing (as `ignis train --save` does) after each epoch.
  Trainer a(Opt::kSGDMomentum, 1);
  std::vector<std::string> saved;
  auto save = std::make_shared<train::CheckpointCallback>([&](const train::FitState& s) {
    if (s.epoch != 1) return;
    train::save_checkpoint(path, *a.model, *a.opt, a.sched.get(), {s.epoch + 1, s.step});
    saved.push_back(path);
  });
  train::History ha =
      train::fit(*a.model, ce, *a.opt, a.loader, nullptr, {.epochs = 4},
                 {std::make_shared<train::LRSchedulerCallback>(unowned(a.sched.get())), save});
  ASSERT_EQ(saved.size(), 1u);
  // Resumed from the checkpoint taken after epoch 1.
  Trainer b(Opt::kSGDMomentum, 2);
  manual_seed(4);
  train::TrainingState st = train::load_checkpoint(path, *b.model, *b.opt, b.sched.get());
  EXPECT_EQ(st.epoch, 2);
  EXPECT_EQ(st.step, 2 * b.loader.size());
  train::History hb =
      train::fit(*b.model, ce, *b.opt, b.loader, nullptr,
                 {.epochs = 4, .start_epoch = st.epoch, .start_step = st.step},
                 {std::make_shared<train::LRSchedulerCallback>(unowned(b.sched.get()))});
  ASSERT_EQ(ha.train.size(), 4u);
  ASSERT_EQ(hb.train.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_EQ(hb.train[e].loss, ha.train[e + 2].loss) << "epoch " << e + 2;  // bit for bit
    EXPECT_EQ(hb.train[e].accuracy, ha.train[e + 2].accuracy);
    EXPECT_EQ(hb.train[e].samples, 90);
  }
  expect_bitwise_equal_models(*a.model, *b.model);
  EXPECT_EQ(b.sched->last_epoch(), 4);
  EXPECT_EQ(b.opt->param_groups()[0].lr(), a.opt->param_groups()[0].lr());
  std::remove(path.c_str());
}

TEST(Checkpoint, StoresCountersAndRngStateAsMetadata) {
  const std::string path = tmp_path("meta.safetensors");
  Trainer t(Opt::kAdam, 3);
  manual_seed(12345);
  (void)rand({10});
  train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {.epoch = 4, .step = 123});
  SafetensorsFile f = load_safetensors(path);
  EXPECT_EQ(f.metadata.at("format"), "ignis-checkpoint-1");
  EXPECT_EQ(f.metadata.at("epoch"), "4");
  EXPECT_EQ(f.metadata.at("step"), "123");
  EXPECT_EQ(f.metadata.at("rng_seed"), "12345");
  EXPECT_EQ(f.metadata.at("rng_offset"), std::to_string(default_generator().offset()));
  EXPECT_TRUE(equal(f.at("model.0.weight"), t.model->get("0.weight")));
  bool has_optim = false, has_sched = false;
  for (auto& [n, v] : f.tensors) {
    has_optim = has_optim || n.rfind("optim.", 0) == 0;
    has_sched = has_sched || n.rfind("sched.", 0) == 0;
  }
  EXPECT_TRUE(has_optim);
  EXPECT_TRUE(has_sched);
  // Loading restores the generator exactly.
  const uint64_t offset = default_generator().offset();
  const Tensor next = rand({5});
  manual_seed(1);
  train::load_checkpoint(path, *t.model, *t.opt, t.sched.get());
  EXPECT_EQ(default_generator().seed(), 12345u);
  EXPECT_EQ(default_generator().offset(), offset);
  EXPECT_TRUE(equal(rand({5}), next));
  std::remove(path.c_str());
}

TEST(Checkpoint, WrongFilesAndMismatchedStateAreClearErrors) {
  const std::string path = tmp_path("wrong.safetensors");
  Trainer t(Opt::kAdam, 3);
  // A module file is not a training checkpoint.
  train::save_module(path, *t.model);
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *t.model, *t.opt, nullptr); }),
              HasSubstr("load_checkpoint: " + path +
                        " is not an ignis training checkpoint "
                        "(format metadata 'ignis-module-1')"));
  save_safetensors(path, {{"x", ones({1})}});
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *t.model, *t.opt, nullptr); }),
              HasSubstr("(format metadata '<none>')"));
  // An Adam checkpoint into an SGD run.
  train::save_checkpoint(path, *t.model, *t.opt, nullptr, {});
  Trainer s(Opt::kSGDMomentum, 3);
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *s.model, *s.opt, nullptr); }),
              HasSubstr("holds the state of a Adam optimizer, not SGD"));
  // A checkpoint of another architecture: the model's load_state_dict lists the problems.
  auto other = std::make_shared<nn::Sequential>(nn::Linear(6, 8), nn::ReLU(), nn::Linear(8, 3));
  optim::Adam other_opt(other->parameters());
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *other, other_opt, nullptr); }),
              ::testing::AllOf(HasSubstr("size mismatches: 0.weight: checkpoint [32, 6] vs model "
                                         "[8, 6]"),
                               HasSubstr("unexpected keys: 3.weight, 3.bias")));
  // Bad counters in the metadata.
  const SafetensorsFile good = load_safetensors(path);
  auto meta = good.metadata;
  meta["step"] = "12x";
  save_safetensors(path, good.tensors, meta);
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *t.model, *t.opt, nullptr); }),
              HasSubstr("load_checkpoint: " + path + ": metadata 'step' = '12x' is not a number"));
  meta.erase("step");
  save_safetensors(path, good.tensors, meta);
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *t.model, *t.opt, nullptr); }),
              HasSubstr("load_checkpoint: " + path + " has no 'step' metadata"));
  std::remove(path.c_str());
}

namespace {
// Deep copies, to compare with later.
NamedTensorList clone_all(const NamedTensorList& l) {
  NamedTensorList out;
  for (const auto& [n, t] : l) out.emplace_back(n, t.detach().clone());
  return out;
}
void expect_bitwise_equal(const NamedTensorList& a, const NamedTensorList& b) {
  ASSERT_EQ(a.size(), b.size());
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_EQ(a[i].first, b[i].first);
    const Tensor x = a[i].second.contiguous(), y = b[i].second.contiguous();
    ASSERT_EQ(x.dtype(), y.dtype()) << a[i].first;
    ASSERT_EQ(x.nbytes(), y.nbytes()) << a[i].first;
    EXPECT_EQ(std::memcmp(x.data_ptr(), y.data_ptr(), x.nbytes()), 0) << a[i].first;
  }
}
// The file's tensors with `key` replaced by `value` (or dropped when undefined), and the
// tensors whose names start with `drop_prefix` dropped.
NamedTensorList edited(const SafetensorsFile& f, const std::string& key, const Tensor& value,
                       const std::string& drop_prefix = "") {
  NamedTensorList out;
  for (const auto& [n, t] : f.tensors) {
    if (!drop_prefix.empty() && n.rfind(drop_prefix, 0) == 0) continue;
    if (n != key) {
      out.emplace_back(n, t);
    } else if (value.defined()) {
      out.emplace_back(n, value);
    }
  }
  return out;
}
}  // namespace

TEST(Checkpoint, AFailedLoadChangesNothing) {
  const std::string path = tmp_path("partial.safetensors");
  Trainer a(Opt::kAdam, 1);
  Record ra;
  run(a, 0, 8, ra);  // Adam state and a scheduler step
  train::save_checkpoint(path, *a.model, *a.opt, a.sched.get(), {1, 8});
  const SafetensorsFile good = load_safetensors(path);

  // The run the checkpoint is loaded into, with state of its own.
  Trainer b(Opt::kAdam, 2);
  Record rb;
  run(b, 0, 3, rb);
  manual_seed(77);
  const NamedTensorList model_before = clone_all(b.model->state_dict());
  const NamedTensorList optim_before = b.opt->state_dict();
  const NamedTensorList sched_before = b.sched->state_dict();
  const uint64_t rng_offset = default_generator().offset();
  auto expect_unchanged = [&](const std::string& what) {
    SCOPED_TRACE(what);
    expect_bitwise_equal(b.model->state_dict(), model_before);
    expect_bitwise_equal(b.opt->state_dict(), optim_before);
    expect_bitwise_equal(b.sched->state_dict(), sched_before);
    EXPECT_EQ(default_generator().seed(), 77u);
    EXPECT_EQ(default_generator().offset(), rng_offset);
  };
  auto load_err = [&](const NamedTensorList& tensors, const std::map<std::string, std::string>& m) {
    save_safetensors(path, tensors, m);
    return error_of([&] { train::load_checkpoint(path, *b.model, *b.opt, b.sched.get()); });
  };

  // The optimizer part does not fit: a moment of the wrong shape.
  EXPECT_THAT(load_err(edited(good, "optim.state.0.exp_avg", zeros({3})), good.metadata),
              HasSubstr("Adam.load_state_dict: 'state.0.exp_avg' has shape [3] but parameter 0 "
                        "has shape [32, 6]"));
  expect_unchanged("optimizer state of the wrong shape");
  EXPECT_THAT(load_err(edited(good, "optim.param_groups.0.lr", Tensor()), good.metadata),
              HasSubstr("Adam.load_state_dict: missing key 'param_groups.0.lr'"));
  expect_unchanged("optimizer hyperparameter missing");
  // The scheduler part is missing (a checkpoint saved without a scheduler).
  EXPECT_THAT(load_err(edited(good, "", Tensor(), "sched."), good.metadata),
              HasSubstr("StepLR.load_state_dict: missing key 'last_epoch'; missing key "
                        "'step_count'; missing key 'base_lrs'; missing key 'last_lr'"));
  expect_unchanged("scheduler state missing");
  // A model key missing, and bad metadata: both used to be found after the model was loaded.
  EXPECT_THAT(load_err(edited(good, "model.3.bias", Tensor()), good.metadata),
              HasSubstr("load_state_dict: error(s) in loading state_dict for Sequential: "
                        "missing keys: 3.bias."));
  expect_unchanged("model key missing");
  auto meta = good.metadata;
  meta["rng_offset"] = "-";
  EXPECT_THAT(load_err(good.tensors, meta), HasSubstr("load_checkpoint: " + path +
                                                      ": metadata 'rng_offset' = '-' is not a "
                                                      "number"));
  expect_unchanged("bad metadata");

  // The good checkpoint loads all of it.
  save_safetensors(path, good.tensors, good.metadata);
  train::load_checkpoint(path, *b.model, *b.opt, b.sched.get());
  expect_bitwise_equal(b.model->state_dict(), a.model->state_dict());
  expect_bitwise_equal(b.opt->state_dict(), a.opt->state_dict());
  expect_bitwise_equal(b.sched->state_dict(), a.sched->state_dict());
  std::remove(path.c_str());
}

TEST(Checkpoint, AFailedLoadRestoresAPartlyLoadedChainedScheduler) {
  // ChainedScheduler loads its schedulers one by one: the second failing after the first
  // loaded must leave both as they were.
  const std::string path = tmp_path("chained.safetensors");
  auto chained = [](optim::Optimizer& opt) {
    return std::make_unique<optim::ChainedScheduler>(
        std::vector<std::shared_ptr<optim::LRScheduler>>{
            std::make_shared<optim::StepLR>(opt, 2, 0.5),
            std::make_shared<optim::ExponentialLR>(opt, 0.9)});
  };
  Trainer a(Opt::kSGDMomentum, 1);
  a.sched = chained(*a.opt);
  for (int i = 0; i < 5; ++i) a.sched->step();
  train::save_checkpoint(path, *a.model, *a.opt, a.sched.get(), {5, 0});
  const SafetensorsFile good = load_safetensors(path);
  save_safetensors(path, edited(good, "sched.schedulers.1.base_lrs", tensor({0.1, 0.2}, kFloat64)),
                   good.metadata);
  Trainer b(Opt::kSGDMomentum, 2);
  b.sched = chained(*b.opt);
  b.sched->step();
  const NamedTensorList model_before = clone_all(b.model->state_dict());
  const NamedTensorList optim_before = b.opt->state_dict();
  const NamedTensorList sched_before = b.sched->state_dict();
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path, *b.model, *b.opt, b.sched.get()); }),
              HasSubstr("ExponentialLR.load_state_dict: the state dict has 2 base_lrs but the "
                        "scheduler has 1 parameter groups"));
  expect_bitwise_equal(b.sched->state_dict(), sched_before);
  expect_bitwise_equal(b.opt->state_dict(), optim_before);
  expect_bitwise_equal(b.model->state_dict(), model_before);
  std::remove(path.c_str());
}

TEST(Checkpoint, TruncatedOrCorruptedFilesAreClearErrors) {
  const std::string path = tmp_path("corrupt.safetensors");
  Trainer t(Opt::kSGDMomentum, 3);
  Record scratch;
  run(t, 0, 3, scratch);  // momentum buffers exist
  train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 3});
  const std::string bytes = read_file(path);
  ASSERT_GT(bytes.size(), 1000u);
  auto load_err = [&](const std::string& b) {
    write_file(path, b);
    return error_of([&] { train::load_checkpoint(path, *t.model, *t.opt, t.sched.get()); });
  };
  uint64_t header_len = 0;
  for (int i = 7; i >= 0; --i) header_len = (header_len << 8) | static_cast<uint8_t>(bytes[i]);
  // Truncated in the data section, in the header, in the length prefix.
  EXPECT_THAT(load_err(bytes.substr(0, bytes.size() - 100)),
              ::testing::AllOf(HasSubstr(path), HasSubstr("out of bounds")));
  EXPECT_THAT(load_err(bytes.substr(0, 8 + header_len / 2)),
              ::testing::AllOf(HasSubstr(path), HasSubstr("runs past the end")));
  EXPECT_THAT(load_err(bytes.substr(0, 5)),
              ::testing::AllOf(HasSubstr(path), HasSubstr("too short")));
  EXPECT_THAT(load_err(""), HasSubstr("too short"));
  // Trailing garbage after the data.
  EXPECT_THAT(load_err(bytes + "junk"), HasSubstr("the tensors cover"));
  // A corrupted header: broken JSON, a dtype overwritten.
  std::string broken = bytes;
  broken[8] = '[';
  EXPECT_THAT(load_err(broken), ::testing::AllOf(HasSubstr(path), HasSubstr("JSON")));
  std::string bad_dtype = bytes;
  const size_t at = bad_dtype.find("\"F32\"");
  ASSERT_NE(at, std::string::npos);
  bad_dtype.replace(at, 5, "\"Q32\"");
  EXPECT_THAT(load_err(bad_dtype), HasSubstr("unsupported dtype 'Q32'"));
  // A missing file.
  EXPECT_THAT(error_of([&] { train::load_checkpoint(path + ".nope", *t.model, *t.opt, nullptr); }),
              HasSubstr("load_safetensors: cannot open " + path + ".nope: No such file"));
  std::remove(path.c_str());
}

namespace {
std::string tmp_name(const std::string& path) {
  return path + ".tmp." + std::to_string(::getpid());
}
}  // namespace

TEST(Checkpoint, InterruptedSaveLeavesThePreviousFileIntact) {
  const std::string dir = tmp_path("ckdir");
  fs::create_directories(dir);
  const std::string path = dir + "/model.safetensors";
  Trainer t(Opt::kAdam, 3);
  Record scratch;
  run(t, 0, 2, scratch);
  train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 2});
  const std::string before = read_file(path);
  run(t, 2, 4, scratch);  // the state changes

  // 1. The temporary file cannot be created (a directory is in the way).
  fs::create_directories(tmp_name(path));
  EXPECT_THAT(error_of([&] {
                train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 4});
              }),
              HasSubstr("save: cannot create: " + tmp_name(path) + ": Is a directory"));
  EXPECT_EQ(read_file(path), before);
  fs::remove(tmp_name(path));

  // 2. The disk fills up mid-write (a file size limit below the checkpoint's size): the partial
  //    temporary file is removed, the target untouched.
  {
    struct sigaction ignore = {}, old = {};
    ignore.sa_handler = SIG_IGN;
    ASSERT_EQ(::sigaction(SIGXFSZ, &ignore, &old), 0);
    rlimit saved{};
    ASSERT_EQ(::getrlimit(RLIMIT_FSIZE, &saved), 0);
    rlimit small = saved;
    small.rlim_cur = before.size() / 2;
    ASSERT_EQ(::setrlimit(RLIMIT_FSIZE, &small), 0);
    const std::string msg = error_of([&] {
      train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 4});
    });
    ::setrlimit(RLIMIT_FSIZE, &saved);
    ::sigaction(SIGXFSZ, &old, nullptr);
    EXPECT_THAT(msg, HasSubstr("save: " + tmp_name(path)));
    EXPECT_THAT(msg, HasSubstr("File too large"));
  }
  EXPECT_EQ(read_file(path), before);
  EXPECT_FALSE(fs::exists(tmp_name(path)));

  // 3. The directory is read-only (only meaningful when not running as root).
  if (::geteuid() != 0) {
    fs::permissions(dir, fs::perms::owner_read | fs::perms::owner_exec);
    EXPECT_THAT(error_of([&] {
                  train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 4});
                }),
                HasSubstr("Permission denied"));
    fs::permissions(dir, fs::perms::owner_all);
    EXPECT_EQ(read_file(path), before);
  }

  // The intact file still loads, and a save that succeeds replaces it.
  Trainer r(Opt::kAdam, 5);
  EXPECT_EQ(train::load_checkpoint(path, *r.model, *r.opt, r.sched.get()).step, 2);
  train::save_checkpoint(path, *t.model, *t.opt, t.sched.get(), {0, 4});
  EXPECT_NE(read_file(path), before);
  EXPECT_EQ(train::load_checkpoint(path, *r.model, *r.opt, r.sched.get()).step, 4);
  expect_bitwise_equal_models(*r.model, *t.model);
  fs::remove_all(dir);
}

TEST(Checkpoint, SaveAndLoadModuleRoundTrip) {
  const std::string path = tmp_path("module.safetensors");
  Trainer a(Opt::kSGDMomentum, 1), b(Opt::kSGDMomentum, 2);
  train::save_module(path, *a.model);
  train::load_module(path, *b.model);
  expect_bitwise_equal_models(*a.model, *b.model);
  auto bigger = std::make_shared<nn::Sequential>(nn::Linear(6, 32), nn::ReLU(), nn::Dropout(0.2),
                                                 nn::Linear(32, 3), nn::Linear(3, 2));
  EXPECT_THAT(error_of([&] { train::load_module(path, *bigger); }),
              HasSubstr("missing keys: 4.weight, 4.bias"));
  train::load_module(path, *bigger, /*strict=*/false);
  EXPECT_TRUE(equal(bigger->get("3.weight"), a.model->get("3.weight")));
  std::remove(path.c_str());
}
