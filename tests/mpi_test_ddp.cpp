// nn::DistributedDataParallel on 2 ranks (ctest runs this under mpirun -np 2): DDP at batch 32
// per rank equals one process at batch 64; no_sync accumulation; unused parameters; buffers;
// the bucket layout.
#include <cmath>
#include <cstdlib>

#include "ignis/ignis.h"
#include "mpi_main.h"

namespace dist = ignis::distributed;
using namespace ignis;

namespace {

int rank() { return dist::get_rank(); }
int world() { return dist::get_world_size(); }

std::shared_ptr<nn::Sequential> make_mlp(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(nn::Linear(20, 32), nn::ReLU(), nn::Linear(32, 32),
                                          nn::ReLU(), nn::Linear(32, 4));
}

// The global batch: 64 samples, the same on every rank.
std::pair<Tensor, Tensor> global_batch(int step) {
  manual_seed(1000 + step);
  Tensor x = randn({64, 20});
  Tensor y = randint(0, 4, {64});
  return {x, y};
}

Tensor shard(const Tensor& t, int r, int parts) {
  const int64_t n = t.size(0) / parts;
  return t.narrow(0, r * n, n);
}

double max_param_diff(nn::Module& a, nn::Module& b) {
  auto pa = a.parameters(), pb = b.parameters();
  EXPECT_EQ(pa.size(), pb.size());
  double d = 0;
  for (size_t i = 0; i < pa.size(); ++i)
    d = std::max(d, (pa[i] - pb[i]).abs().max().item<double>());
  return d;
}

// 20 SGD steps of one process at batch 64 against DDP at batch 64 / world per rank.
void check_equivalence(nn::DistributedDataParallelOptions opts) {
  auto reference = make_mlp(7);
  // Rank 1 starts from other weights: DDP's construction broadcasts rank 0's.
  auto local = make_mlp(rank() == 0 ? 7 : 99);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(local, opts);
  EXPECT_EQ(max_param_diff(*reference, *local), 0.0);
  optim::SGD ref_opt(reference->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD ddp_opt(ddp->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  for (int step = 0; step < 20; ++step) {
    auto [x, y] = global_batch(step);
    ref_opt.zero_grad();
    nn::functional::cross_entropy(reference->forward(x), y).backward();
    ref_opt.step();
    ddp_opt.zero_grad();
    Tensor out = ddp->forward(shard(x, rank(), world()));
    nn::functional::cross_entropy(out, shard(y, rank(), world())).backward();
    ddp_opt.step();
  }
  EXPECT_LT(max_param_diff(*reference, *local), 1e-5);
  EXPECT_GT(ddp->last_iteration_stats().buckets, 0);
}

}  // namespace

TEST(DistributedDataParallel, TwoRanksAtBatch32EqualOneProcessAtBatch64) {
  nn::DistributedDataParallelOptions opts;
  check_equivalence(opts);
}

TEST(DistributedDataParallel, SmallBucketsWithAndWithoutOverlap) {
  for (bool overlap : {true, false}) {
    nn::DistributedDataParallelOptions opts;
    opts.bucket_cap_mb = 0.002;  // ~2 KB: several buckets
    opts.first_bucket_cap_mb = 0.0001;
    opts.overlap = overlap;
    check_equivalence(opts);
  }
}

TEST(DistributedDataParallel, GradientAsBucketView) {
  nn::DistributedDataParallelOptions opts;
  opts.bucket_cap_mb = 0.002;
  opts.gradient_as_bucket_view = true;
  check_equivalence(opts);
}

TEST(DistributedDataParallel, BucketsInReverseRegistrationOrderFirstOneSmall) {
  nn::DistributedDataParallelOptions opts;
  opts.first_bucket_cap_mb = 0.00001;  // 10 bytes: the first bucket closes after one parameter
  opts.bucket_cap_mb = 0.004;          // 4194 bytes
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(7), opts);
  auto layout = ddp->bucket_layout();
  // Parameters last to first: 4.bias (16 B) | 4.weight (512 B), 2.bias (128 B), 2.weight
  // (4096 B) | 0.bias (128 B), 0.weight (2560 B).
  ASSERT_EQ(layout.size(), 3u) << ddp->bucket_summary();
  EXPECT_EQ(layout[0].first, (std::vector<std::string>{"4.bias"}));
  EXPECT_EQ(layout[0].second, 16);
  EXPECT_EQ(layout[1].first, (std::vector<std::string>{"4.weight", "2.bias", "2.weight"}));
  EXPECT_EQ(layout[1].second, 512 + 128 + 4096);
  EXPECT_EQ(layout[2].first, (std::vector<std::string>{"0.bias", "0.weight"}));
  EXPECT_NE(ddp->bucket_summary().find("bucket 0: 16 bytes, 1 parameter(s): 4.bias"),
            std::string::npos)
      << ddp->bucket_summary();
}

TEST(DistributedDataParallel, NoSyncOverFourMicroBatchesEqualsOneLargeBatch) {
  auto reference = make_mlp(7);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(7));
  auto [x, y] = global_batch(0);
  nn::functional::cross_entropy(reference->forward(x), y).backward();
  // This rank's 32 samples in 4 micro-batches of 8; only the last backward communicates.
  Tensor xs = shard(x, rank(), world()), ys = shard(y, rank(), world());
  auto micro_step = [&](int m) {
    Tensor out = ddp->forward(shard(xs, m, 4));
    (nn::functional::cross_entropy(out, shard(ys, m, 4)) / 4.0).backward();
  };
  for (int m = 0; m < 3; ++m) {
    auto guard = ddp->no_sync();
    micro_step(m);
  }
  micro_step(3);
  auto pr = reference->parameters(), pd = ddp->module()->parameters();
  for (size_t i = 0; i < pr.size(); ++i) {
    EXPECT_LT((pr[i].grad() - pd[i].grad()).abs().max().item<double>(), 1e-6) << i;
  }
}

TEST(DistributedDataParallel, NoSyncForwardDropsAnUnfinishedSynchronisedIteration) {
  auto local = make_mlp(7);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(7));
  auto [x, y] = global_batch(0);
  Tensor xs = shard(x, rank(), world()), ys = shard(y, rank(), world());
  ddp->forward(xs);  // prepared for a synchronised backward that never comes
  {
    auto guard = ddp->no_sync();
    nn::functional::cross_entropy(ddp->forward(xs), ys).backward();
  }
  // The gradients are this rank's own, not averages.
  nn::functional::cross_entropy(local->forward(xs), ys).backward();
  auto pl = local->parameters(), pd = ddp->module()->parameters();
  for (size_t i = 0; i < pl.size(); ++i) {
    EXPECT_LT((pl[i].grad() - pd[i].grad()).abs().max().item<double>(), 1e-6) << i;
  }
}

namespace {
// fc2 is registered but used only when `use_fc2`.
struct PartlyUsed : nn::Module {
  std::shared_ptr<nn::Linear> fc1, fc2;
  bool use_fc2 = false;
  PartlyUsed() {
    fc1 = register_module("fc1", std::make_shared<nn::Linear>(20, 4));
    fc2 = register_module("fc2", std::make_shared<nn::Linear>(4, 4));
  }
  Tensor forward(const Tensor& x) override {
    Tensor h = fc1->forward(x);
    return use_fc2 ? fc2->forward(h) : h;
  }
};
}  // namespace

TEST(DistributedDataParallel, UnusedParametersWithFindUnusedParameters) {
  manual_seed(3);
  auto model = std::make_shared<PartlyUsed>();
  nn::DistributedDataParallelOptions opts;
  opts.find_unused_parameters = true;
  auto ddp = std::make_shared<nn::DistributedDataParallel>(model, opts);
  auto [x, y] = global_batch(1);
  // Reference gradient of fc1 on the whole batch.
  Tensor w = model->fc1->get("weight").detach().clone().requires_grad_(true);
  Tensor b = model->fc1->get("bias").detach().clone().requires_grad_(true);
  nn::functional::cross_entropy(linear(x, w, b), y).backward();
  for (int it = 0; it < 2; ++it) {
    ddp->zero_grad();
    nn::functional::cross_entropy(ddp->forward(shard(x, rank(), world())),
                                  shard(y, rank(), world()))
        .backward();
  }
  EXPECT_LT((model->fc1->get("weight").grad() - w.grad()).abs().max().item<double>(), 1e-6);
  EXPECT_LT((model->fc1->get("bias").grad() - b.grad()).abs().max().item<double>(), 1e-6);
  // The unused parameters' gradients are all-reduced zeros.
  EXPECT_TRUE(equal(model->fc2->get("weight").grad(), zeros({4, 4})));
}

TEST(DistributedDataParallel, UnusedParametersWithoutFindUnusedParametersAreAnError) {
  manual_seed(3);
  auto model = std::make_shared<PartlyUsed>();
  auto ddp = std::make_shared<nn::DistributedDataParallel>(model);
  auto [x, y] = global_batch(1);
  EXPECT_ERROR_WITH(nn::functional::cross_entropy(ddp->forward(shard(x, rank(), world())),
                                                  shard(y, rank(), world()))
                        .backward(),
                    "DistributedDataParallel: 2 parameter(s) received no gradient in this "
                    "backward: fc2.weight, fc2.bias. Pass find_unused_parameters = true");
  // With every parameter used, the same wrapper works.
  model->use_fc2 = true;
  ddp->zero_grad();
  nn::functional::cross_entropy(ddp->forward(shard(x, rank(), world())), shard(y, rank(), world()))
      .backward();
  EXPECT_TRUE(model->fc2->get("weight").grad().defined());
}

TEST(DistributedDataParallel, BuffersBroadcastFromRankZero) {
  manual_seed(5);
  auto bn = std::make_shared<nn::BatchNorm1d>(3, 1e-5, /*momentum=*/0.0);  // stats stay put
  auto model = std::make_shared<nn::Sequential>(nn::Linear(3, 3));
  model->push_back("bn", bn);
  auto ddp = std::make_shared<nn::DistributedDataParallel>(model);
  // The ranks' running statistics drift apart (as with per-rank batches) ...
  bn->get("running_mean").fill_(static_cast<double>(rank() + 1));
  ddp->forward(randn({4, 3}));
  // ... and each training forward starts from rank 0's.
  EXPECT_TRUE(equal(bn->get("running_mean"), full({3}, 1.0)));
  // Not with broadcast_buffers off.
  nn::DistributedDataParallelOptions opts;
  opts.broadcast_buffers = false;
  auto ddp2 = std::make_shared<nn::DistributedDataParallel>(model, opts);
  bn->get("running_mean").fill_(static_cast<double>(rank() + 1));
  ddp2->forward(randn({4, 3}));
  EXPECT_TRUE(equal(bn->get("running_mean"), full({3}, rank() + 1.0)));
}

TEST(DistributedDataParallel, ProfileShowsBucketAllReducesOverlappingBackward) {
  // The profiler (what `ignis train --ddp --profile` uses) puts every collective, from post to
  // completion, on a track of its own named "communication"; the bucket all-reduces start while
  // backward nodes still run.
  nn::DistributedDataParallelOptions opts;
  opts.first_bucket_cap_mb = 0.00001;  // 3 buckets: the first two start during backward
  opts.bucket_cap_mb = 0.004;
  auto ddp = std::make_shared<nn::DistributedDataParallel>(make_mlp(7), opts);
  auto step = [&](int i) {
    auto [x, y] = global_batch(i);
    ddp->zero_grad();
    Tensor loss = nn::functional::cross_entropy(ddp->forward(shard(x, rank(), world())),
                                                shard(y, rank(), world()));
    profiler::Range r("backward");
    loss.backward();
  };
  step(0);  // (the buckets are rebuilt after the first iteration)
  profiler::Profile prof;
  step(1);
  prof.stop();
  const std::vector<profiler::Event> events = prof.events();
  int64_t range_start = -1, range_end = -1, last_node_end = -1;
  uint64_t compute_thread = 0;
  for (const profiler::Event& e : events) {
    if (e.category == "range" && e.name == "backward") {
      range_start = e.start_ns;
      range_end = e.start_ns + e.duration_ns;
      compute_thread = e.thread;
    }
    if (e.category == "backward") last_node_end = std::max(last_node_end, e.start_ns + e.duration_ns);
  }
  ASSERT_GE(range_start, 0);
  ASSERT_GT(last_node_end, range_start);
  int reduces = 0, overlapping = 0, beside_compute = 0;
  for (const profiler::Event& e : events) {
    if (e.category != "communication") continue;
    EXPECT_EQ(e.name, "all_reduce");
    EXPECT_NE(e.thread, compute_thread);  // its own track
    ++reduces;
    // Posted inside backward, before its last node finished, and over by the end of backward.
    if (e.start_ns >= range_start && e.start_ns < last_node_end &&
        e.start_ns + e.duration_ns <= range_end) {
      ++overlapping;
    }
    // Posted before a layer's backward computes (the engine runs a leaf's AccumulateGrad as
    // soon as it is ready, so a full bucket starts before the earlier layers' backward). (An
    // ordering: whether it is still in flight then depends on the peer and the scheduler.)
    for (const profiler::Event& b : events) {
      if (b.category == "backward" && b.name != "AccumulateGrad" && b.start_ns > e.start_ns) {
        ++beside_compute;
        break;
      }
    }
  }
  EXPECT_EQ(reduces, 3);
  EXPECT_GE(overlapping, 2);
  EXPECT_EQ(beside_compute, 2);  // buckets 0 and 1; bucket 2 waits for the first layer
  // The Chrome trace names the track.
  const std::string json = prof.chrome_trace();
  EXPECT_NE(json.find("{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, \"tid\": "),
            std::string::npos);
  EXPECT_NE(json.find("\"args\": {\"name\": \"communication\"}"), std::string::npos);
  EXPECT_NE(json.find("\"name\": \"all_reduce\", \"cat\": \"communication\""), std::string::npos);
}

int main(int argc, char** argv) { return mpi_test_main(argc, argv); }
