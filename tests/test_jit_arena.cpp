// The executor's planned arena (ExecutorOptions::memory_arena): the arena alone (recording,
// placement by liveness, serving, falling back when bytes are still in use, outliving its
// executor), and graphs run from it with the results of runs without it.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/ignis.h"
#include "jit/planned_arena.h"
#include "test_util.h"

using namespace ignis;
using jit::detail::ArenaScope;
using jit::detail::PlannedArena;
using ::testing::HasSubstr;

namespace {

// Float32 tensors of 8 KiB and 16 KiB (above the hook's 4 KiB).
Tensor kib8() { return empty({2048}); }
Tensor kib16() { return empty({4096}); }

bool in_block(const PlannedArena& a, const Tensor& t) {
  const auto [lo, hi] = a.block();
  const char* p = static_cast<const char*>(t.data_ptr());
  return lo != nullptr && p >= lo && p < hi;
}

// One node's pattern: 8 KiB (A) and 16 KiB (B) alive together, A freed, then 8 KiB (C) made
// while B lives, then both freed. A and C may share bytes; B may not share with either.
void record_pattern(PlannedArena* arena) {
  ArenaScope scope(arena, 0);
  Tensor a = kib8(), b = kib16();
  a = Tensor();
  Tensor c = kib8();
  Tensor small = empty({16});  // 64 bytes: not the arena's
}

// An arena that recorded the pattern and planned it, ready to serve a run.
PlannedArena* planned_pattern() {
  PlannedArena* arena = PlannedArena::create();
  record_pattern(arena);
  arena->finish_recording();
  arena->begin_run();
  return arena;
}

}  // namespace

TEST(PlannedArena, PlacesTheRecordedAllocationsByLiveness) {
  PlannedArena* arena = PlannedArena::create();
  EXPECT_TRUE(arena->recording());
  record_pattern(arena);
  arena->finish_recording();
  const jit::ArenaStats s = arena->stats();
  EXPECT_EQ(s.planned, 3);
  EXPECT_EQ(s.planned_bytes, (8 + 16 + 8) * 1024);
  EXPECT_EQ(s.recorded_peak_bytes, (8 + 16) * 1024);
  EXPECT_EQ(s.arena_bytes, (8 + 16) * 1024);  // A and C share
  {
    arena->begin_run();
    ArenaScope scope(arena, 0);
    Tensor a = kib8(), b = kib16();
    EXPECT_TRUE(in_block(*arena, a));
    EXPECT_TRUE(in_block(*arena, b));
    a.fill_(1.0);
    b.fill_(2.0);
    const void* a_at = a.data_ptr();
    a = Tensor();
    Tensor c = kib8();
    EXPECT_EQ(c.data_ptr(), a_at);  // A's bytes, free again
    c.fill_(3.0);
    EXPECT_EQ(b.sum().item<double>(), 2.0 * 4096);  // C did not touch B
    Tensor small = empty({16});
    EXPECT_FALSE(in_block(*arena, small));
  }
  EXPECT_EQ(arena->stats().served, 3);
  EXPECT_EQ(arena->stats().missed, 0);
  arena->release();
}

TEST(PlannedArena, BytesStillInUseOrAnotherSizeComeFromTheCachingAllocator) {
  PlannedArena* arena = planned_pattern();
  {
    ArenaScope scope(arena, 0);
    Tensor a = kib8(), b = kib16();  // A is kept this time: C cannot have its bytes
    a.fill_(1.0);
    Tensor c = kib8();
    EXPECT_FALSE(in_block(*arena, c));
    c.fill_(3.0);
    EXPECT_EQ(a.sum().item<double>(), 2048.0);
  }
  EXPECT_EQ(arena->stats().served, 2);
  EXPECT_EQ(arena->stats().missed, 1);
  arena->begin_run();
  {
    ArenaScope scope(arena, 0);
    Tensor a = empty({3000});  // not the recorded size
    EXPECT_FALSE(in_block(*arena, a));
    ArenaScope other(arena, 5);  // a node the recording never saw
    EXPECT_FALSE(in_block(*arena, kib8()));
  }
  EXPECT_EQ(arena->stats().served, 0);
  EXPECT_EQ(arena->stats().missed, 1);
  EXPECT_EQ(arena->stats().unplanned, 1);
  arena->release();
}

// memory_stats(kCPU) counts the bytes of live tensors whichever allocator made them: the block
// is reserved, not allocated; a storage served from it is allocated while it lives (so the
// profiler's per-op bytes, read from these counts, include graph runs served by the arena).
TEST(PlannedArena, ServedStoragesCountAsAllocatedTheBlockAsReserved) {
  PlannedArena* arena = PlannedArena::create();
  record_pattern(arena);  // through the caching allocator
  const MemoryStats before = memory_stats();
  arena->finish_recording();
  arena->begin_run();
  const MemoryStats planned = memory_stats();
  EXPECT_EQ(planned.allocated, before.allocated);
  EXPECT_EQ(planned.reserved, before.reserved + arena->stats().arena_bytes);
  {
    ArenaScope scope(arena, 0);
    reset_peak_memory_stats();
    Tensor a = kib8(), b = kib16();
    ASSERT_TRUE(in_block(*arena, a) && in_block(*arena, b));
    EXPECT_EQ(memory_stats().allocated, before.allocated + (8 + 16) * 1024);
    a = Tensor();
    EXPECT_EQ(memory_stats().allocated, before.allocated + 16 * 1024);
    Tensor c = kib8();
    // (The peak also counts small blocks parked in the thread's cache: a few bytes more.)
    EXPECT_GE(memory_stats().peak_allocated, before.allocated + (8 + 16) * 1024);
    EXPECT_LT(memory_stats().peak_allocated, before.allocated + (8 + 16 + 4) * 1024);
  }
  EXPECT_EQ(memory_stats().allocated, before.allocated);
  arena->release();
  EXPECT_EQ(memory_stats().reserved, before.reserved);
}

TEST(PlannedArena, OutlivesItsOwnerWhileItsMemoryIsHeld) {
  PlannedArena* arena = planned_pattern();
  Tensor kept;
  {
    ArenaScope scope(arena, 0);
    kept = kib8();
  }
  ASSERT_TRUE(in_block(*arena, kept));
  arena->release();  // the owner lets go: the block stays while `kept` holds it
  kept.fill_(4.0);
  EXPECT_EQ(kept.sum().item<double>(), 4.0 * 2048);
  kept = Tensor();  // the last reference: the arena and its block go (ASan checks)
}

TEST(PlannedArena, RecordsOnlyWhatItsRunFreed) {
  PlannedArena* arena = PlannedArena::create();
  Tensor escaped;
  {
    ArenaScope scope(arena, 0);
    Tensor t = kib8();
    escaped = kib16();  // alive after the run: a result, not planned
  }
  arena->finish_recording();
  EXPECT_EQ(arena->stats().planned, 1);
  EXPECT_EQ(arena->stats().arena_bytes, 8 * 1024);
  arena->release();
  escaped.fill_(1.0);  // made while recording, by the caching allocator: still valid
  EXPECT_EQ(escaped.sum().item<double>(), 4096.0);
}

TEST(JitArena, FrozenResNetRunsFromTheArenaWithTheSameResults) {
  manual_seed(3);
  auto m = models::resnet18({3, 32, 10});
  m->eval();
  NoGradGuard ng;
  const Tensor x1 = randn({2, 3, 32, 32}), x2 = randn({2, 3, 32, 32});
  auto g = std::make_shared<jit::Graph>(jit::trace(m, {x1}));
  jit::freeze(*g);
  jit::Executor plain(g, {.memory_arena = false});
  jit::Executor planned(g);
  const Tensor want1 = plain.run({x1})[0], want2 = plain.run({x2})[0];
  EXPECT_EQ(planned.arena_stats().recordings, 0);
  EXPECT_TRUE(equal(planned.run({x1})[0], want1));  // warm-up
  EXPECT_TRUE(equal(planned.run({x2})[0], want2));  // recorded
  jit::ArenaStats s = planned.arena_stats();
  EXPECT_EQ(s.recordings, 1);
  EXPECT_GT(s.planned, 20);  // every conv's result and temporaries
  EXPECT_LT(s.arena_bytes, s.planned_bytes / 2);
  EXPECT_GE(s.arena_bytes, s.recorded_peak_bytes);
  const Tensor y1 = planned.run({x1})[0];  // served
  s = planned.arena_stats();
  EXPECT_EQ(s.served, s.planned);
  EXPECT_EQ(s.missed, 0);
  EXPECT_TRUE(equal(y1, want1));
  // Outputs are never the arena's: y1 keeps its values through the next runs.
  EXPECT_TRUE(equal(planned.run({x2})[0], want2));
  EXPECT_TRUE(equal(planned.run({x2})[0], want2));
  EXPECT_TRUE(equal(y1, want1));
  EXPECT_EQ(planned.arena_stats().recordings, 1);
  // Branches run concurrently take their slots from several threads.
  jit::Executor parallel(g, {.parallel_branches = true});
  for (int run = 0; run < 4; ++run)
    EXPECT_TRUE(equal(parallel.run({run % 2 ? x2 : x1})[0], run % 2 ? want2 : want1)) << run;
  EXPECT_GT(parallel.arena_stats().served, 0);
}

// Training: what the ops save for backward outlives the run, so it is not planned, or when a
// later run keeps a slot longer than the recorded one, that run's allocation falls back. Two
// forwards before their backwards, and a grad-mode change (recorded again), keep every gradient.
TEST(JitArena, TrainingRunsKeepWhatTheySaveForBackward) {
  manual_seed(4);
  auto base = models::resnet18({3, 16, 10});
  const Tensor x = randn({4, 3, 16, 16}), t = randint(0, 10, {4});
  auto g = std::make_shared<jit::Graph>(jit::trace(base, {x}));
  jit::optimize(*g);
  jit::Executor plain(g, {.memory_arena = false}), planned(g);
  auto grads = [&](jit::Executor& ex, const Tensor& in) {
    for (auto& p : base->parameters()) p.mutable_grad() = Tensor();
    Tensor loss = nn::functional::cross_entropy(ex.run({in})[0], t);
    loss.backward();
    std::vector<Tensor> gs;
    for (auto& p : base->parameters()) gs.push_back(p.grad().clone());
    return gs;
  };
  const std::vector<Tensor> want = grads(plain, x);
  for (int run = 0; run < 4; ++run) {
    const std::vector<Tensor> got = grads(planned, x);
    for (size_t i = 0; i < want.size(); ++i) EXPECT_TRUE(equal(got[i], want[i])) << run << " " << i;
  }
  jit::ArenaStats s = planned.arena_stats();
  EXPECT_EQ(s.recordings, 1);
  EXPECT_GT(s.served, 20);     // the ops' temporaries (oneDNN's reorders)
  EXPECT_GT(s.unplanned, 20);  // what the ops save for backward
  EXPECT_EQ(s.missed, 0);
  // Two forwards alive together, then both backwards.
  Tensor l1 = nn::functional::cross_entropy(planned.run({x})[0], t);
  Tensor l2 = nn::functional::cross_entropy(planned.run({x * 2})[0], t);
  Tensor want2 = nn::functional::cross_entropy(plain.run({x * 2})[0], t);
  auto params = base->parameters();
  const TensorList g2 = autograd::grad({l2}, params);
  const TensorList w2 = autograd::grad({want2}, params);
  const TensorList g1 = autograd::grad({l1}, params);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(equal(g1[i], want[i])) << i;
    EXPECT_TRUE(equal(g2[i], w2[i])) << i;
  }
  // Inference runs record their own pattern.
  NoGradGuard ng;
  const Tensor y = plain.run({x})[0];
  for (int run = 0; run < 2; ++run) EXPECT_TRUE(equal(planned.run({x})[0], y));
  EXPECT_EQ(planned.arena_stats().recordings, 2);
}

namespace {
// Throws from the op named `name` while armed.
struct FailOn final : op::Interposer {
  std::string name;
  bool armed = false;
  void around(op::Call& call, const std::function<void()>& next) override {
    IGNIS_CHECK(!armed || call.op.schema.full_name() != name, "injected failure in ", name);
    next();
  }
};
}  // namespace

// A recorded run that fails plans nothing; the next run records again.
TEST(JitArena, AFailedRecordingIsDropped) {
  Tensor w = randn({64, 64});
  auto g = std::make_shared<jit::Graph>(jit::trace(
      [&](const TensorList& in) { return TensorList{(in[0].matmul(w).relu() + 1).sum()}; },
      {randn({64, 64})}));
  jit::Executor ex(g);
  const Tensor x = randn({64, 64});
  const Tensor want = ex.run({x})[0];
  FailOn fail;
  fail.name = "add.Scalar";
  {
    op::InterposerGuard guard(&fail);
    fail.armed = true;
    EXPECT_THAT(error_of([&] { ex.run({x}); }), HasSubstr("injected failure in add.Scalar"));
  }
  EXPECT_EQ(ex.arena_stats().recordings, 1);
  EXPECT_EQ(ex.arena_stats().arena_bytes, 0);
  EXPECT_TRUE(equal(ex.run({x})[0], want));  // recorded again
  EXPECT_TRUE(equal(ex.run({x})[0], want));  // served
  const jit::ArenaStats s = ex.arena_stats();
  EXPECT_EQ(s.recordings, 2);
  EXPECT_EQ(s.planned, 3);  // the product, relu's and add's results (16 KiB each)
  EXPECT_EQ(s.served, 3);
  EXPECT_EQ(s.arena_bytes, 2 * 16 * 1024);  // the product's bytes taken again by add's result
}

TEST(JitArena, CompiledModulesTakeTheOption) {
  manual_seed(5);
  auto m = models::resnet18({3, 32, 10});
  m->eval();
  auto c = jit::compile(m, {.freeze = true});
  auto off = jit::compile(m, {.freeze = true, .memory_arena = false});
  NoGradGuard ng;
  const Tensor x = randn({1, 3, 32, 32});
  const Tensor y = m->forward(x);
  EXPECT_THAT(error_of([&] { c->arena_stats(); }), HasSubstr("no graph yet"));
  for (int run = 0; run < 4; ++run) {  // the first call traces, the second warms up
    EXPECT_TRUE(allclose(c->forward(x), y, 1e-4, 1e-4)) << run;
    EXPECT_TRUE(allclose(off->forward(x), y, 1e-4, 1e-4)) << run;
  }
  EXPECT_EQ(c->arena_stats().recordings, 1);
  EXPECT_GT(c->arena_stats().served, 0);
  EXPECT_EQ(off->arena_stats().recordings, 0);
  EXPECT_EQ(off->arena_stats().arena_bytes, 0);
}
