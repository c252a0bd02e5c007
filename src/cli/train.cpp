// Training from the command line: ignis train / eval / fetch / models.
#include "cli/train.h"

#include <omp.h>

#include <algorithm>
#include <chrono>
#include <cstdio>
#include <filesystem>
#include <iostream>
#include <map>

#include "ignis/data/distributed.h"
#include "ignis/ignis.h"
#include "ignis/jit.h"

namespace ignis::cli {

namespace {

const char* kTrainUsage =
    "usage: ignis train --model mlp|lenet|alexnet|vgg11|vgg16|resnet18|resnet34|resnet50|...\n"
    "                   --dataset mnist|fashion-mnist|cifar10 [--data DIR] [--epochs N]\n"
    "                   [--batch-size B] [--optimizer sgd|adam] [--lr LR] [--momentum M]\n"
    "                   [--seed S] [--threads T] [--workers W] [--save PATH] [--resume PATH]\n"
    "                   [--log metrics.jsonl] [--memory-format channels_last|contiguous]\n"
    "                   [--profile trace.json [--profile-steps N]] [--ddp [--bucket-cap-mb MB]]\n"
    "                   [--device cpu|cuda|cuda:N] [--compile]\n"
    "(`ignis models` lists the models; --lr defaults to 0.05 for sgd and 0.001 for adam;\n"
    " --momentum, default 0.9, is for sgd only; cifar10 reads the binary batches,\n"
    " data_batch_1.bin ..., from --data, default data/cifar10, and trains with random crops\n"
    " and flips; --memory-format is the layout of the image batches, default channels_last;\n"
    " --profile records the first N training steps, default 10, prints the profiler's table\n"
    " and writes a Chrome trace for Perfetto or chrome://tracing;\n"
    " --ddp: data-parallel over the processes of `mpirun -np N ignis train --ddp ...`, each on\n"
    " its 1/N of every epoch, --batch-size being the global batch; rank 0 prints and saves;\n"
    " --bucket-cap-mb: DDP's gradient bucket size, default 25; with --profile every rank\n"
    " writes its trace, the all-reduces on a communication track; --device cuda trains on a GPU:\n"
    " the model is moved there and each batch copied from pinned memory; with --ddp each process\n"
    " uses its node-local GPU and the gradients are all-reduced by NCCL, docs/cuda.md;\n"
    " --compile trains through graph mode, jit::compile: the model traced on its first batch\n"
    " and optimised (a layer and its ReLU one fused op, elementwise chains and norms fused\n"
    " kernels), re-traced for a new batch shape or train/eval; with --ddp too,\n"
    " docs/graph-mode.md)\n"
    "graph models: ignis train --model gcn|sage|gin|gat --dataset karate|cora|mnist-graph ...\n"
    " (ignis train --model gcn --help lists their options)\n";
const char* kEvalUsage =
    "usage: ignis eval --model NAME --dataset mnist|fashion-mnist|cifar10 --load PATH\n"
    "                  [--data DIR] [--batch-size B] [--threads T]\n"
    "                  [--memory-format channels_last|contiguous]\n";

struct Options {
  std::map<std::string, std::string> values;
  std::string get(const std::string& k, const std::string& def) const {
    auto it = values.find(k);
    return it == values.end() ? def : it->second;
  }
};

Options parse(const Args& args, const std::vector<std::string>& known, const char* usage) {
  Options o;
  for (size_t i = 0; i < args.size(); ++i) {
    const std::string& a = args[i];
    if (a == "--help" || a == "-h") throw HelpRequested(usage);
    bool ok = false;
    for (const auto& k : known) ok = ok || a == "--" + k;
    if (!ok) throw UsageError("unknown option '" + a + "'", usage);
    if (i + 1 >= args.size()) throw UsageError(a + " needs a value", usage);
    o.values[a.substr(2)] = args[++i];
  }
  return o;
}

double parse_double(const std::string& opt, const std::string& v, const char* usage) {
  try {
    size_t used = 0;
    double d = std::stod(v, &used);
    if (used == v.size()) return d;
  } catch (const std::exception&) {
  }
  throw UsageError(opt + " expects a number, got '" + v + "'", usage);
}

// The input a data set gives its model: MNIST-like 1x28x28, CIFAR-10 3x32x32, 10 classes.
models::ModelConfig dataset_config(const std::string& name) {
  if (name == "mnist" || name == "fashion-mnist") return {1, 28, 10};
  if (name == "cifar10") return {3, 32, 10};
  throw UsageError("unknown dataset '" + name + "' (expected mnist, fashion-mnist or cifar10)",
                   kTrainUsage);
}

// The training set gets CIFAR-10's usual augmentation (4-pixel padded random crops and
// horizontal flips, seeded); both splits are normalised with the data set's statistics.
std::shared_ptr<data::Dataset> load_dataset(const std::string& name, const std::string& dir,
                                            bool train, uint64_t seed = 0) {
  dataset_config(name);  // rejects unknown names
  if (name == "cifar10") {
    auto raw = std::make_shared<data::CIFAR10>(dir, train);
    std::vector<data::Transform> ts;
    if (train) {
      ts.push_back(data::transforms::RandomCrop(32, 4, seed));
      ts.push_back(data::transforms::RandomHorizontalFlip(0.5, seed + 1));
    }
    ts.push_back(data::transforms::Normalize(data::kCifar10Mean, data::kCifar10Std));
    return std::make_shared<data::MapDataset>(raw, data::transforms::Compose(std::move(ts)));
  }
  auto raw = std::make_shared<data::MNIST>(dir, train);
  // Fashion-MNIST's statistics differ; MNIST's are the usual (0.1307, 0.3081).
  const double mean = name == "mnist" ? 0.1307 : 0.2860;
  const double std = name == "mnist" ? 0.3081 : 0.3530;
  return std::make_shared<data::MapDataset>(raw, data::transforms::Normalize({mean}, {std}));
}

// The model `name` built for `dataset`. An unknown name is a usage error listing the zoo; a
// model that cannot take the data set's images is one naming both.
std::shared_ptr<nn::Module> create_model(const std::string& name, const std::string& dataset,
                                         const char* usage) {
  const models::ModelConfig cfg = dataset_config(dataset);
  std::string names;
  bool known = false;
  for (const models::ModelInfo& m : models::list()) {
    names += (names.empty() ? "" : ", ") + m.name;
    known = known || m.name == name;
  }
  if (!known) throw UsageError("unknown model '" + name + "' (available: " + names + ")", usage);
  try {
    return models::create(name, cfg);
  } catch (const Error& e) {
    throw UsageError("model '" + name + "' does not fit dataset '" + dataset + "' (" +
                         std::to_string(cfg.in_channels) + "x" + std::to_string(cfg.image_size) +
                         "x" + std::to_string(cfg.image_size) + " images, " +
                         std::to_string(cfg.num_classes) + " classes): " + e.what(),
                     usage);
  }
}

// --memory-format: the layout image batches reach the model in (channels_last runs the
// convolutions without layout reorders; the results are the same).
MemoryFormat memory_format(const Options& o, const char* usage) {
  const std::string v = o.get("memory-format", "channels_last");
  if (v == "channels_last") return MemoryFormat::ChannelsLast;
  if (v == "contiguous") return MemoryFormat::Contiguous;
  throw UsageError("--memory-format expects channels_last or contiguous, got '" + v + "'", usage);
}

// DDP: the epoch's training metrics over every rank's shard (before the logger prints them).
class GlobalMetrics : public train::Callback {
 public:
  explicit GlobalMetrics(Device device) : device_(device) {}
  void on_epoch_end(train::FitState& s) override {
    // On the group's device (NCCL moves GPU tensors only).
    Tensor m = tensor({s.train.loss * static_cast<double>(s.train.samples),
                       s.train.accuracy * static_cast<double>(s.train.samples),
                       static_cast<double>(s.train.samples)},
                      kFloat64)
                   .to(device_);
    distributed::all_reduce(m);
    m = m.cpu();
    const double n = m[2].item<double>();
    s.train.samples = static_cast<int64_t>(n);
    s.train.loss = n > 0 ? m[0].item<double>() / n : 0;
    s.train.accuracy = n > 0 ? m[1].item<double>() / n : 0;
  }

 private:
  Device device_;
};

// DDP: fit's step-time breakdown (the one the progress logger prints: data, forward, backward,
// optimizer, other) per iteration on rank 0, with backward split into its computation and the
// communication not hidden behind it (the lecture notes' per-iteration latency breakdown).
class LatencyBreakdown : public train::Callback {
 public:
  explicit LatencyBreakdown(const nn::DistributedDataParallel& ddp) : ddp_(ddp) {}
  void on_epoch_begin(train::FitState&) override {
    comm_ = 0;
    n_ = 0;
  }
  void on_batch_end(train::FitState&) override {
    comm_ += ddp_.last_iteration_stats().comm_wait;
    ++n_;
  }
  void on_epoch_end(train::FitState& s) override {
    if (n_ == 0 || distributed::get_rank() != 0) return;
    const double k = 1e3 / static_cast<double>(n_);
    const train::StepBreakdown& b = s.breakdown;
    const nn::DDPIterationStats& st = ddp_.last_iteration_stats();
    std::printf(
        "epoch %lld ddp per iteration: forward %.3f ms, backward compute %.3f ms, "
        "communication not hidden behind it %.3f ms, optimizer %.3f ms, data %.3f ms, other "
        "%.3f ms, total %.3f ms (%lld bucket(s), %lld bytes all-reduced per iteration)\n",
        static_cast<long long>(s.epoch + 1), b.forward * k, (b.backward - comm_) * k, comm_ * k,
        b.optimizer * k, b.data * k, b.other * k, b.total() * k, static_cast<long long>(st.buckets),
        static_cast<long long>(st.bytes));
    std::fflush(stdout);
  }

 private:
  const nn::DistributedDataParallel& ddp_;
  double comm_ = 0;
  int64_t n_ = 0;
};

void set_threads(const Options& o, const char* usage) {
  if (o.values.count("threads")) {
    set_num_threads(
        static_cast<int>(parse_int("--threads", o.get("threads", "1"), 1, 4096, usage)));
  }
}

}  // namespace

/// --profile: records the first `steps` optimizer steps, then prints the table and writes the
/// trace (or at the end of training, if it has fewer steps).
class ProfileSteps final : public train::Callback {
 public:
  ProfileSteps(std::string path, int64_t steps, bool print = true)
      : path_(std::move(path)), steps_(steps), print_(print) {}
  void on_train_begin(train::FitState&) override { prof_ = std::make_unique<profiler::Profile>(); }
  void on_batch_end(train::FitState&) override {
    if (prof_ && ++seen_ >= steps_) finish();
  }
  void on_train_end(train::FitState&) override { finish(); }

 private:
  void finish() {
    if (!prof_) return;
    prof_->stop();
    if (print_) {
      std::cout << "profile of " << seen_ << " training steps (top 25 by total time):\n"
                << prof_->table(25);
    }
    prof_->export_chrome_trace(path_);
    if (print_) std::cout << "wrote the trace to " << path_ << "\n";
    prof_.reset();
  }
  std::string path_;
  int64_t steps_;
  bool print_;
  int64_t seen_ = 0;
  std::unique_ptr<profiler::Profile> prof_;
};

int train_main(const Args& all_args) {
  if (is_graph_training(all_args)) return train_gnn_main(all_args);
  Args args;
  bool ddp = false, compiled = false;
  for (const std::string& a : all_args) {
    if (a == "--ddp") {
      ddp = true;
    } else if (a == "--compile") {
      compiled = true;
    } else {
      args.push_back(a);
    }
  }
  Options o = parse(args,
                    {"model", "dataset", "data", "epochs", "batch-size", "optimizer", "lr",
                     "momentum", "seed", "threads", "workers", "save", "resume", "log",
                     "memory-format", "profile", "profile-steps", "bucket-cap-mb", "device"},
                    kTrainUsage);
  Device device =
      parse_device(o.get("device", "cpu"), "cannot train (it has no data)", kTrainUsage);
  set_threads(o, kTrainUsage);
  const int64_t profile_steps =
      parse_int("--profile-steps", o.get("profile-steps", "10"), 1, INT64_MAX, kTrainUsage);
  if (o.values.count("profile-steps") && !o.values.count("profile")) {
    throw UsageError("--profile-steps needs --profile PATH", kTrainUsage);
  }
  double bucket_cap_mb = 25;  // DDP's default
  if (o.values.count("bucket-cap-mb")) {
    if (!ddp) throw UsageError("--bucket-cap-mb is a --ddp option", kTrainUsage);
    bucket_cap_mb = parse_double("--bucket-cap-mb", o.get("bucket-cap-mb", ""), kTrainUsage);
    if (!(bucket_cap_mb > 0)) {
      throw UsageError("--bucket-cap-mb must be positive, got " + o.get("bucket-cap-mb", ""),
                       kTrainUsage);
    }
  }
  const std::string dataset = o.get("dataset", "mnist");
  const std::string dir = o.get("data", "data/" + dataset);
  const int64_t epochs = parse_int("--epochs", o.get("epochs", "3"), 1, 100000, kTrainUsage);
  const int64_t batch =
      parse_int("--batch-size", o.get("batch-size", "128"), 1, 1 << 20, kTrainUsage);
  const int64_t seed = parse_int("--seed", o.get("seed", "0"), 0, INT64_MAX, kTrainUsage);
  const int64_t workers = parse_int("--workers", o.get("workers", "1"), 0, 64, kTrainUsage);
  const std::string opt_name = o.get("optimizer", "sgd");
  if (opt_name != "sgd" && opt_name != "adam") {
    throw UsageError("unknown optimizer '" + opt_name + "' (expected sgd or adam)", kTrainUsage);
  }
  if (opt_name == "adam" && o.values.count("momentum")) {
    throw UsageError("--momentum is an sgd option; adam does not take it", kTrainUsage);
  }
  // Adam's default is PyTorch's 1e-3; SGD has none in PyTorch, 0.05 suits the zoo on MNIST.
  const double lr =
      parse_double("--lr", o.get("lr", opt_name == "adam" ? "0.001" : "0.05"), kTrainUsage);
  const double momentum = parse_double("--momentum", o.get("momentum", "0.9"), kTrainUsage);
  int rank = 0, world = 1;
  if (ddp) {
    // GPUs communicate through NCCL, each process on its node-local GPU (the group picks it).
    distributed::init_process_group(device.is_cuda() ? "nccl" : "mpi");
    if (device.is_cuda() && cuda::current_device() != device.index) {
      std::cerr << "note: --ddp runs each process on its node-local GPU: rank "
                << distributed::get_rank() << " uses cuda:" << cuda::current_device() << ", not "
                << device << "\n";
    }
    if (device.is_cuda()) device = Device(kCUDA, cuda::current_device());
    rank = distributed::get_rank();
    world = distributed::get_world_size();
    if (batch % world != 0) {
      throw UsageError("--batch-size " + std::to_string(batch) + " is not divisible by the " +
                           std::to_string(world) + " processes of --ddp",
                       kTrainUsage);
    }
  }
  const bool lead = rank == 0;  // prints, logs and saves
  manual_seed(static_cast<uint64_t>(seed));
  const std::string model_name = o.get("model", "mlp");
  auto model = create_model(model_name, dataset, kTrainUsage);
  model->to(device);  // before the optimizer takes its parameters
  // --compile: the graph-mode module over the same parameters (the optimizer's and the
  // checkpoints' are the eager model's own tensors); DDP wraps it as it would the model.
  std::shared_ptr<jit::CompiledModule> graph_model;
  if (compiled) graph_model = jit::compile(model);
  std::shared_ptr<nn::Module> trained = compiled ? std::shared_ptr<nn::Module>(graph_model) : model;
  std::shared_ptr<nn::DistributedDataParallel> ddp_model;
  if (ddp) {
    nn::DistributedDataParallelOptions dopts;
    dopts.print_buckets = true;
    dopts.bucket_cap_mb = bucket_cap_mb;
    dopts.first_bucket_cap_mb = std::min(dopts.first_bucket_cap_mb, bucket_cap_mb);
    // The averaged gradients stay in the buckets: no copy back into .grad() per step.
    dopts.gradient_as_bucket_view = true;
    ddp_model = std::make_shared<nn::DistributedDataParallel>(trained, dopts);
  }
  std::unique_ptr<optim::Optimizer> opt;
  if (opt_name == "sgd") {
    opt =
        std::make_unique<optim::SGD>(model->parameters(), optim::SGDOptions(lr).momentum(momentum));
  } else {
    opt = std::make_unique<optim::Adam>(model->parameters(), optim::AdamOptions(lr));
  }
  train::FitOptions fo{.epochs = epochs, .memory_format = memory_format(o, kTrainUsage)};
  if (o.values.count("resume")) {
    train::TrainingState s = train::load_checkpoint(o.get("resume", ""), *model, *opt, nullptr);
    fo.start_epoch = s.epoch;
    fo.start_step = s.step;
    if (lead)
      std::cout << "resumed from " << o.get("resume", "") << " at epoch " << s.epoch << "\n";
  }
  // The hyperparameters in effect (a resumed run has its checkpoint's).
  const optim::OptimizerOptions& hp = opt->param_groups().front().options();
  if (lead) {
    std::cout << "model=" << model_name << " dataset=" << dataset << " optimizer=" << opt_name
              << " lr=" << hp.get_lr();
    if (opt_name == "sgd") std::cout << " momentum=" << hp.get("momentum");
    std::cout << " batch_size=" << batch << " epochs=" << epochs << " seed=" << seed;
    if (!device.is_cpu()) std::cout << " device=" << device;
    if (ddp) std::cout << " ddp_ranks=" << world << " batch_per_rank=" << batch / world;
    if (compiled) std::cout << " compiled=graph";
    std::cout << std::endl;
  }
  auto train_set = load_dataset(dataset, dir, true, static_cast<uint64_t>(seed));
  auto test_set = load_dataset(dataset, dir, false);
  std::shared_ptr<data::Sampler> sampler;
  if (ddp) {  // this rank's 1/world of each epoch, reshuffled per epoch from (seed, epoch)
    sampler = std::make_shared<data::DistributedSampler>(train_set->size(), world, rank, true,
                                                         static_cast<uint64_t>(seed));
  }
  data::DataLoader train_loader(train_set,
                                {.batch_size = batch / world,
                                 .shuffle = !ddp,
                                 .num_workers = static_cast<int>(workers),
                                 .seed = static_cast<uint64_t>(seed),
                                 .pin_memory = device.is_cuda()},
                                sampler);
  data::DataLoader test_loader(test_set, {.batch_size = 1000, .pin_memory = device.is_cuda()});
  // A resumed fit (start_epoch > 0) appends to the --log file instead of truncating it.
  std::vector<std::shared_ptr<train::Callback>> cbs;
  // DDP: the epoch's metrics are made global before the logger prints them; the latency
  // breakdown prints after the logger's epoch line.
  if (ddp) cbs.push_back(std::make_shared<GlobalMetrics>(device));
  if (lead) cbs.push_back(std::make_shared<train::ProgressLogger>(o.get("log", "")));
  if (ddp) cbs.push_back(std::make_shared<LatencyBreakdown>(*ddp_model));
  if (o.values.count("profile")) {
    // DDP: every rank records its steps (the all-reduces on a "communication" track); rank 0
    // writes PATH and prints the table, rank r writes PATH.rank<r>.json.
    std::string path = o.get("profile", "");
    if (rank != 0) {
      const std::string stem =
          path.size() > 5 && path.ends_with(".json") ? path.substr(0, path.size() - 5) : path;
      path = stem + ".rank" + std::to_string(rank) + ".json";
    }
    cbs.push_back(std::make_shared<ProfileSteps>(path, profile_steps, lead));
  }
  const std::string save = o.get("save", "");
  if (!save.empty() && lead) {
    cbs.push_back(std::make_shared<train::CheckpointCallback>([&](const train::FitState& s) {
      train::save_checkpoint(save, *model, *opt, nullptr, {s.epoch + 1, s.step});
    }));
  }
  nn::Module& net = ddp ? static_cast<nn::Module&>(*ddp_model) : *trained;
  const train::History h = train::fit(
      net, [](const Tensor& out, const Tensor& t) { return nn::functional::cross_entropy(out, t); },
      *opt, train_loader, &test_loader, fo, cbs);
  if (!h.val.empty() && lead) {  // the validation set is the test split: the final result
    std::cout << "test_loss=" << h.val.back().loss << " test_acc=" << h.val.back().accuracy
              << " samples=" << h.val.back().samples << "\n";
  }
  if (ddp) {
    ddp_model.reset();  // (its reducer's group goes before the default group)
    distributed::destroy_process_group();
  }
  return 0;
}

int eval_main(const Args& args) {
  Options o =
      parse(args, {"model", "dataset", "data", "load", "batch-size", "threads", "memory-format"},
            kEvalUsage);
  set_threads(o, kEvalUsage);
  const MemoryFormat format = memory_format(o, kEvalUsage);
  if (!o.values.count("load")) throw UsageError("--load is required", kEvalUsage);
  const std::string dataset = o.get("dataset", "mnist");
  auto model = create_model(o.get("model", "mlp"), dataset, kEvalUsage);
  auto test_set = load_dataset(dataset, o.get("data", "data/" + dataset), false);
  data::DataLoader loader(
      test_set, {.batch_size = parse_int("--batch-size", o.get("batch-size", "1000"), 1, 1 << 20,
                                         kEvalUsage)});
  SafetensorsFile f = load_safetensors(o.get("load", ""));
  nn::StateDict sd;
  for (auto& [n, t] : f.tensors) {
    if (n.rfind("model.", 0) == 0) sd.emplace_back(n.substr(6), t);
  }
  model->load_state_dict(sd.empty() ? f.tensors : sd);
  train::Metrics m = train::evaluate(
      *model,
      [](const Tensor& out, const Tensor& t) { return nn::functional::cross_entropy(out, t); },
      loader, format);
  std::cout << "test_loss=" << m.loss << " test_acc=" << m.accuracy << " samples=" << m.samples
            << "\n";
  return 0;
}

int fetch_main(const Args& args) {
  const char* usage = "usage: ignis fetch mnist [--dir DIR]\n";
  if (!args.empty() && (args[0] == "--help" || args[0] == "-h")) throw HelpRequested(usage);
  if (args.empty() || args[0] != "mnist")
    throw UsageError("expected a data set name (mnist)", usage);
  std::string dir = "data/mnist";
  for (size_t i = 1; i < args.size(); ++i) {
    if (args[i] == "--dir") {
      if (i + 1 >= args.size()) throw UsageError("--dir expects a directory", usage);
      dir = args[++i];
    } else {
      throw UsageError("unknown option '" + args[i] + "'", usage);
    }
  }
  data::fetch_mnist(dir);
  return 0;
}

int models_main(const Args& args) {
  if (!args.empty()) throw UsageError("models takes no arguments", "usage: ignis models\n");
  // Each model at its natural configuration: the ImageNet models at 3x224x224 and 1000 classes
  // (torchvision's parameter counts), lenet and mlp at MNIST's 1x28x28 and 10 classes.
  for (const auto& m : models::list()) {
    auto model = models::create(m.name, m.natural);
    std::cout << "model=" << m.name << " params=" << model->num_parameters() << "\n";
  }
  return 0;
}

}  // namespace ignis::cli
