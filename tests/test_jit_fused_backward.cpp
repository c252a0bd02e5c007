// A fused_reduction's training backward in one pass over blocks of rows
// (jit/fused_reduction_backward.h): the gradients equal the ops' for every reduction and
// statistic, every way an input is read (in full, a repeated row, one value per row, one value, a
// block of rows, a bool mask), blocks that cross the chunks of rows and a last block cut short,
// ties and NaNs of amax and amin, with both backends; the backward calls no op but the engine's
// sums; the gradients have the same bits whatever the number of threads.
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "call_log.h"
#include "fusion_test_util.h"
#include "ignis/ignis.h"

using namespace ignis;

using ignis::testing::Backend;
using ignis::testing::CallLog;
using ignis::testing::expect_close;
using ignis::testing::uniform;

namespace {

// Rows of 700 (blocks of 23 rows) in 3 x 2 x 20 = 120 rows: chunks of 20 rows (the block
// inputs [20, 700] repeat for each of the 6 leading slices), blocks crossing them, the last one
// of 5 rows.
constexpr int64_t kCols = 700;
const Shape kRows = {3, 2, 20, kCols};

Tensor normalise(const std::string& kind, const Tensor& x) {
  if (kind == "softmax") return softmax(x, -1);
  if (kind == "log_softmax") return log_softmax(x, -1);
  if (kind == "rms_norm") return nn::functional::rms_norm(x, {kCols}, Tensor(), 1e-5);
  return nn::functional::layer_norm(x, {kCols});
}

Tensor statistic(const std::string& kind, const Tensor& x, bool keepdim) {
  if (kind == "sum") return x.sum({-1}, keepdim);
  if (kind == "mean") return x.mean({-1}, keepdim);
  return kind == "amax" ? amax(x, {-1}, keepdim) : amin(x, {-1}, keepdim);
}

/// The inputs: x (in full), w (a row), col (a value per row), a (one value), blk (a block of
/// rows), all requiring grad, and m (a bool block).
struct Inputs {
  Tensor x, w, col, a, blk, m;
  explicit Inputs(DType dt) {
    x = uniform(kRows, -2, 2, dt).requires_grad_(true);
    w = uniform({kCols}, 0.5, 1.5, dt).requires_grad_(true);
    col = uniform({3, 2, 20, 1}, -1, 1, dt).requires_grad_(true);
    a = full({}, 0.75, dt).requires_grad_(true);
    blk = uniform({20, kCols}, -1, 1, dt).requires_grad_(true);
    m = rand({20, kCols}) > 0.2;
  }
  std::vector<Tensor> grads() const { return {x, w, col, a, blk}; }
  Inputs detached() const {
    Inputs d = *this;
    for (Tensor* t : {&d.x, &d.w, &d.col, &d.a, &d.blk}) *t = t->detach().requires_grad_(true);
    return d;
  }
};

// The prologue gelu(where(m, (x w + col) a + blk, -3)); the epilogue (y w + blk) a; y is i6.
const char* kPrologue = "mul(i0,i1);add(v0,i2,1);mul(v1,i3);add(v2,i4,1);where(i5,v3,-3);gelu(v4)";
const char* kEpilogue = "mul(i6,i1);add(v0,i4,1);mul(v1,i3)";

Tensor prologue(const Inputs& in) {
  return gelu(where(in.m, (in.x * in.w + in.col) * in.a + in.blk, -3.0));
}

TEST(FusedReductionBackward, NormsGiveTheOpsGradientsForEveryLayoutInOnePass) {
  for (const char* backend : ignis::testing::kBackends) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      for (const std::string kind : {"layer_norm", "rms_norm", "softmax", "log_softmax"}) {
        const std::string what = kind + " " + backend + " " + std::string(dtype_name(dt));
        manual_seed(5);
        const Inputs in(dt);
        const Tensor gy = uniform(kRows, -1, 1, dt);
        const Tensor y = jit::fused_reduction({in.x, in.w, in.col, in.a, in.blk, in.m}, kind, 1,
                                              kPrologue, kEpilogue);
        ASSERT_EQ(y.grad_fn()->name(), "FusedReductionBackward0") << what;
        CallLog log;
        std::vector<Tensor> g;
        {
          op::InterposerGuard guard(&log);
          g = autograd::grad({y}, in.grads(), {gy});
        }
        // One pass: no op but the engine's sum of blk's gradient (at the rows' shape) to [20, C].
        for (const std::string& name : log.names)
          EXPECT_TRUE(name.rfind("sum", 0) == 0 || name == "reshape") << what << ": " << name;
        const Inputs e = in.detached();
        const Tensor y2 = (normalise(kind, prologue(e)) * e.w + e.blk) * e.a;
        const std::vector<Tensor> ge = autograd::grad({y2}, e.grads(), {gy});
        const double tol = dt == kFloat64 ? 1e-10 : 5e-4;
        const char* names[] = {"d/dx", "d/dw", "d/dcol", "d/da", "d/dblk"};
        for (size_t k = 0; k < ge.size(); ++k)
          expect_close(g[k], ge[k], tol, what + " " + names[k]);
      }
    }
  }
}

TEST(FusedReductionBackward, NormsWithoutProgramsAndInputsReadByBothPrograms) {
  // No prologue: x's gradient is input 0's, plus the epilogue's (x read again as a residual).
  for (const char* backend : ignis::testing::kBackends) {
    Backend use(backend);
    manual_seed(6);
    Tensor x = uniform(kRows, -2, 2, kFloat64).requires_grad_(true);
    Tensor w = uniform({kCols}, 0.5, 1.5, kFloat64).requires_grad_(true);
    const Tensor gy = uniform(kRows, -1, 1, kFloat64);
    for (const std::string kind : {"layer_norm", "softmax"}) {
      const std::string what = kind + " " + backend;
      const Tensor y = jit::fused_reduction({x, w}, kind, 1, "", "mul(i2,i1);add(v0,i0,1)");
      const std::vector<Tensor> g = autograd::grad({y}, {x, w}, {gy});
      Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
      const std::vector<Tensor> ge =
          autograd::grad({normalise(kind, x2) * w2 + x2}, {x2, w2}, {gy});
      expect_close(g[0], ge[0], 1e-10, what + " d/dx");
      expect_close(g[1], ge[1], 1e-10, what + " d/dw");
      const Tensor alone = jit::fused_reduction({x}, kind, 1, "", "");
      expect_close(autograd::grad({alone}, {x}, {gy})[0],
                   autograd::grad({normalise(kind, x2)}, {x2}, {gy})[0], 1e-10, what + " alone");
    }
  }
}

TEST(FusedReductionBackward, StatisticsWithTiesAndNansGiveTheOpsGradients) {
  // Values on a grid of quarters: amax and amin have ties (the gradient split among them); a
  // NaN in row 0 and two in row 1 (the gradient goes to the NaNs, as amax's and amin's).
  for (const char* backend : ignis::testing::kBackends) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      for (const std::string kind : {"sum", "mean", "amax", "amin"}) {
        for (bool epilogue : {false, true}) {
          const std::string what = kind + (epilogue ? " with an epilogue " : " alone ") + backend +
                                   " " + std::string(dtype_name(dt));
          manual_seed(7);
          Tensor x = (round(uniform(kRows, -4, 4, kFloat64)) / 4).to(dt);
          const Tensor flat = x.view({-1});
          for (int64_t at : {int64_t{3}, kCols + 5, kCols + 9}) flat.narrow(0, at, 1).fill_(NAN);
          x = x.detach().requires_grad_(true);
          Tensor w = (round(uniform({kCols}, 2, 4, kFloat64)) / 2).to(dt).requires_grad_(true);
          Tensor col = (round(uniform({3, 2, 20, 1}, -2, 2, kFloat64)) / 4).to(dt);
          col.requires_grad_(true);
          // x w + col; with the epilogue (x - y) w over the rows, else y without keepdim.
          const Tensor y =
              jit::fused_reduction({x, w, col}, kind, 1, "mul(i0,i1);add(v0,i2,1)",
                                   epilogue ? "sub(i0,i3,1);mul(v0,i1)" : "", 1e-5, epilogue);
          ASSERT_EQ(y.grad_fn()->name(), "FusedReductionBackward0") << what;
          const Tensor gy = uniform(y.sizes(), -1, 1, dt);
          CallLog log;
          std::vector<Tensor> g;
          {
            op::InterposerGuard guard(&log);
            g = autograd::grad({y}, {x, w, col}, {gy});
          }
          for (const std::string& name : log.names)
            EXPECT_TRUE(name.rfind("sum", 0) == 0 || name == "reshape") << what << ": " << name;
          Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true),
                 col2 = col.detach().requires_grad_(true);
          const Tensor s = statistic(kind, x2 * w2 + col2, epilogue);
          const Tensor y2 = epilogue ? (x2 - s) * w2 : s;
          const std::vector<Tensor> ge = autograd::grad({y2}, {x2, w2, col2}, {gy});
          const double tol = dt == kFloat64 ? 1e-10 : 5e-4;
          expect_close(y.detach(), y2.detach(), tol, what + " forward");
          expect_close(g[0], ge[0], tol, what + " d/dx");
          expect_close(g[1], ge[1], tol, what + " d/dw");
          expect_close(g[2], ge[2], tol, what + " d/dcol");
        }
      }
    }
  }
}

TEST(FusedReductionBackward, ChainsTrainAsOneNodeInOnePass) {
  // A layer norm written with two means over h = (x w + col) a + blk (the block and the
  // per-row value read in place): stage 1's prologue (h - s0)^2, the epilogue
  // (h - s0) rsqrt(s1 + eps) w + blk; and a softmax written as amax, then a sum of exponentials.
  // Inputs x, w, col, a, blk; the statistics i5 and i6.
  const std::string h = "mul(i0,i1);add(v0,i2,1);mul(v1,i3);add(v2,i4,1)";
  const std::string pro = h + "|" + h + ";sub(v3,i5,1);mul(v4,v4)";
  const std::string epi = h + ";sub(v3,i5,1);add(i6,1e-05,1);rsqrt(v5);mul(v4,v6);mul(v7,i1);" +
                          "add(v8,i4,1)";
  for (const char* backend : ignis::testing::kBackends) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      const std::string what = std::string(backend) + " " + std::string(dtype_name(dt));
      manual_seed(9);
      const Inputs in(dt);
      const std::vector<Tensor> inputs = {in.x, in.w, in.col, in.a, in.blk};
      const Tensor gy = uniform(kRows, -1, 1, dt);
      CallLog forward, backward;
      Tensor y;
      {
        op::InterposerGuard guard(&forward);
        y = jit::fused_reduction(inputs, "mean,mean", 1, pro, epi);
      }
      // One node: the forward is one call (not a node per statistic) ...
      EXPECT_EQ(forward.names, std::vector<std::string>{"fused_reduction"}) << what;
      std::vector<Tensor> g;
      {
        op::InterposerGuard guard(&backward);
        g = autograd::grad({y}, in.grads(), {gy});
      }
      // ... and the backward one pass, calling no op but the engine's sums.
      for (const std::string& name : backward.names)
        EXPECT_TRUE(name.rfind("sum", 0) == 0 || name == "reshape") << what << ": " << name;
      const Inputs e = in.detached();
      const Tensor he = (e.x * e.w + e.col) * e.a + e.blk;
      const Tensor d = he - he.mean({-1}, true);
      const Tensor y2 = d * rsqrt((d * d).mean({-1}, true) + 1e-5) * e.w + e.blk;
      const std::vector<Tensor> ge = autograd::grad({y2}, e.grads(), {gy});
      const double tol = dt == kFloat64 ? 1e-10 : 5e-4;
      expect_close(y.detach(), y2.detach(), tol, what + " layer norm forward");
      const char* names[] = {"d/dx", "d/dw", "d/dcol", "d/da", "d/dblk"};
      for (size_t k = 0; k < ge.size(); ++k)
        expect_close(g[k], ge[k], tol, what + " layer norm " + names[k]);
      // The softmax: amax's gradient reaches x through the second stage's prologue only.
      Tensor x = in.x.detach().requires_grad_(true);
      const Tensor sm = jit::fused_reduction({x}, "amax,sum", 1, "|sub(i0,i1,1);exp(v0)",
                                             "sub(i0,i1,1);exp(v0);div(v1,i2)");
      Tensor x2 = x.detach().requires_grad_(true);
      expect_close(autograd::grad({sm}, {x}, {gy})[0],
                   autograd::grad({softmax(x2, -1)}, {x2}, {gy})[0], tol, what + " softmax");
    }
  }
}

TEST(FusedReductionBackward, LongRowsAndEpiloguesPerRowTakeAPassPerStep) {
  // Rows of more than 65536 elements, and a statistic's epilogue over one value per row (a
  // chain's without keepdim): the steps one pass each (a chain: a node per statistic), the
  // same gradients.
  manual_seed(10);
  Tensor x = uniform({2, 70000}, -2, 2, kFloat64).requires_grad_(true);
  Tensor w = uniform({70000}, 0.5, 1.5, kFloat64).requires_grad_(true);
  const Tensor gy = uniform({2, 70000}, -1, 1, kFloat64);
  Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
  const Tensor y = jit::fused_reduction({x, w}, "mean,mean", 1, "|sub(i0,i2,1);mul(v0,v0)",
                                        "sub(i0,i2,1);add(i3,1e-05,1);rsqrt(v1);mul(v0,v2);"
                                        "mul(v3,i1)");
  const Tensor d = x2 - x2.mean({-1}, true);
  const Tensor y2 = d * rsqrt((d * d).mean({-1}, true) + 1e-5) * w2;
  const std::vector<Tensor> g = autograd::grad({y}, {x, w}, {gy});
  const std::vector<Tensor> ge = autograd::grad({y2}, {x2, w2}, {gy});
  expect_close(g[0], ge[0], 1e-10, "long rows: d/dx");
  expect_close(g[1], ge[1], 1e-10, "long rows: d/dw");
  const Tensor lse = jit::fused_reduction({x}, "amax,sum", 1, "|sub(i0,i1,1);exp(v0)",
                                          "log(i2);add(v0,i1,1)", 1e-5, false);
  expect_close(autograd::grad({lse.sum()}, {x})[0],
               autograd::grad({logsumexp(x2, {-1}).sum()}, {x2})[0], 1e-12, "logsumexp");
  const Tensor m = jit::fused_reduction({x, w}, "mean", 1, "mul(i0,i1)", "mul(i2,i2)", 1e-5,
                                        false);
  expect_close(autograd::grad({m.sum()}, {x, w})[1],
               autograd::grad({((x2 * w2).mean({-1}) * (x2 * w2).mean({-1})).sum()}, {w2})[0],
               1e-10, "a mean's epilogue per row");
}

TEST(FusedReductionBackward, AnInputGivenTwiceGetsEachSlotsGradient) {
  // x as the layer norm's input and as its residual (two slots), contiguous and transposed, in
  // one pass and with create_graph (the stages as nodes): the two slots' gradients add up.
  manual_seed(11);
  const Tensor gy = uniform({3, 8}, -1, 1, kFloat64);
  for (const Tensor& a : {uniform({3, 8}, -2, 2, kFloat64).requires_grad_(true),
                          uniform({8, 3}, -2, 2, kFloat64).t().detach().requires_grad_(true)}) {
    for (bool create_graph : {false, true}) {
      const std::string what = std::string(a.is_contiguous() ? "contiguous" : "transposed") +
                               (create_graph ? ", create_graph" : "");
      const Tensor y =
          jit::fused_reduction({a, a}, "mean,mean", 1, "|sub(i0,i2,1);mul(v0,v0)",
                               "sub(i0,i2,1);add(i3,1e-05,1);rsqrt(v1);mul(v0,v2);add(v3,i1,1)");
      const Tensor g = autograd::grad({y}, {a}, {gy}, create_graph, create_graph)[0];
      Tensor a2 = a.detach().requires_grad_(true);
      const Tensor d = a2 - a2.mean({-1}, true);
      const Tensor y2 = d * rsqrt((d * d).mean({-1}, true) + 1e-5) + a2;
      expect_close(g, autograd::grad({y2}, {a2}, {gy})[0], 1e-12, what);
    }
  }
}

TEST(FusedReductionBackward, TheSameBitsWhateverTheNumberOfThreads) {
  // The blocks are fixed by the row length and their partial sums added in block order.
  const int threads = get_num_threads();
  manual_seed(8);
  const Inputs in(kFloat32);
  const Tensor gy = uniform(kRows, -1, 1);
  for (const char* backend : ignis::testing::kBackends) {
    Backend use(backend);
    std::vector<std::vector<Tensor>> runs;
    for (int t : {1, 2}) {
      set_num_threads(t);
      const Tensor y = jit::fused_reduction({in.x, in.w, in.col, in.a, in.blk, in.m}, "layer_norm",
                                            1, kPrologue, kEpilogue);
      runs.push_back(autograd::grad({y}, in.grads(), {gy}));
    }
    set_num_threads(threads);
    for (size_t k = 0; k < runs[0].size(); ++k)
      EXPECT_TRUE(equal(runs[0][k], runs[1][k])) << backend << ": gradient " << k;
  }
}

}  // namespace
