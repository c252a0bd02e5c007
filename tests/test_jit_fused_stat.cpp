// fused_reduction's statistics (sum, mean, amax, amin over trailing dims with an elementwise
// prologue and epilogue) and fuse_reductions making them from traced graphs: equal to the ops with
// the generated kernel and the interpreter (bit for bit to each other, whatever the number of
// threads), NaN and infinities as the ops, training through one node, every refusal's message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <functional>
#include <string>

#include "fusion_test_util.h"
#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;
using ::testing::Not;

using ignis::testing::Backend;
using ignis::testing::expect_close;
using ignis::testing::uniform;

namespace {

/// The statistic as its op over the trailing `dims` dims.
Tensor stat_op(const std::string& kind, const Tensor& x, int64_t dims, bool keepdim) {
  std::vector<int64_t> d;
  for (int64_t i = 0; i < dims; ++i) d.push_back(-1 - i);
  if (kind == "sum") return x.sum(d, keepdim);
  if (kind == "mean") return x.mean(d, keepdim);
  return kind == "amax" ? amax(x, d, keepdim) : amin(x, d, keepdim);
}

const char* const kKinds[] = {"sum", "mean", "amax", "amin"};

// The three forms over inputs x, s (a row), col (a value per row), half (one value): one value
// per row with keepdim, the rows' shape, one value per row without keepdim; and a bare statistic.
struct Form {
  const char* name;
  const char* epilogue;
  bool keepdim;
};
const Form kForms[] = {{"one value per row", "mul(i4,i2);add(v0,i3,1)", true},
                       {"the rows' shape", "sub(i0,i4,1);mul(v0,i1)", true},
                       {"without keepdim", "mul(i4,i3)", false}};

Tensor form_reference(const Form& f, const Tensor& y, const Tensor& x, const Tensor& s,
                      const Tensor& col, const Tensor& half) {
  if (f.keepdim && std::string(f.epilogue).starts_with("mul")) return y * col + half;
  if (f.keepdim) return (x - y) * s;
  return y * half;
}

}  // namespace

// ---- the op

TEST(FusedStatistic, EveryStatisticAndFormEqualsTheOps) {
  // Rows of 37 (not a multiple of the 16 lanes), 1024, and 40000 (three parts of 16384).
  manual_seed(3);
  for (int64_t cols : {37, 1024, 40000}) {
    const int64_t rows = cols > 10000 ? 2 : 6;
    for (DType dt : {kFloat32, kFloat64}) {
      Tensor x = uniform({rows, cols}, -3, 3, dt), s = uniform({cols}, 0.5, 1.5, dt);
      Tensor col = uniform({rows, 1}, -1, 1, dt), half = full({}, 0.5, dt);
      const double tol = dt == kFloat32 ? (cols > 10000 ? 1e-4 : 1e-5) : 1e-11;
      for (const std::string kind : kKinds) {
        const Tensor t = gelu(x * s + col);
        for (const Form& f : kForms) {
          const Tensor expected =
              form_reference(f, stat_op(kind, t, 1, f.keepdim), x, s, col, half);
          for (const char* backend : {"interpreter", "compiler"}) {
            Backend guard(backend);
            const Tensor out =
                jit::fused_reduction({x, s, col, half}, kind, 1, "mul(i0,i1);add(v0,i2,1);gelu(v1)",
                                     f.epilogue, 1e-5, f.keepdim);
            expect_close(out, expected, tol,
                         kind + ", " + f.name + ", " + backend + " " + std::string(dtype_name(dt)) +
                             " cols " + std::to_string(cols));
          }
        }
        // Without programs: the statistic alone.
        for (const char* backend : {"interpreter", "compiler"}) {
          Backend guard(backend);
          expect_close(jit::fused_reduction({x}, kind, 1, "", "", 1e-5, false),
                       stat_op(kind, x, 1, false), tol, kind + " alone, " + backend);
        }
      }
    }
  }
}

TEST(FusedStatistic, TheInterpreterAndTheGeneratedKernelAddInTheSameOrder) {
  // The same parts, tiles and lanes: with a prologue that rounds the same both ways (one
  // product; a chain may be contracted into fused multiply-adds by the compiler), the same bits.
  for (int64_t cols : {37, 40000}) {
    Tensor x = uniform({3, cols}, -1, 1), w = uniform({cols}, -1, 1);
    for (const std::string kind : kKinds) {
      Tensor by[2];
      int b = 0;
      for (const char* backend : {"interpreter", "compiler"}) {
        Backend guard(backend);
        by[b++] = jit::fused_reduction({x, w}, kind, 1, "mul(i0,i1)", "");
      }
      EXPECT_TRUE(equal(by[0], by[1])) << kind << ", cols " << cols << ": max |diff| "
                                       << (by[0] - by[1]).abs().max().item<double>();
    }
  }
}

TEST(FusedStatistic, ResultsDoNotDependOnTheNumberOfThreads) {
  // Parts of a row have a fixed size, so a sum over 3 x 50000 adds in the same order with 1 and
  // 2 threads.
  Tensor x = uniform({3, 50000}, -1, 1), w = uniform({50000}, -1, 1);
  const int threads = get_num_threads();
  Tensor one, two;
  set_num_threads(1);
  one = jit::fused_reduction({x, w}, "sum", 1, "mul(i0,i1);exp(v0)", "sub(i0,i2,1)");
  set_num_threads(2);
  two = jit::fused_reduction({x, w}, "sum", 1, "mul(i0,i1);exp(v0)", "sub(i0,i2,1)");
  set_num_threads(threads);
  EXPECT_TRUE(equal(one, two));
  expect_close(one, x - (x * w).exp().sum({-1}, true), 1e-4, "against the ops");
}

TEST(FusedStatistic, NansAndInfinitiesAsTheOps) {
  // A NaN anywhere in a row makes its amax and amin NaN (as the ops), in the first and the last
  // lane and past a part's end; infinities of both signs; a sum of +inf and -inf is NaN.
  const int64_t C = 20000;
  Tensor x = uniform({5, C}, -1, 1, kFloat64);
  x.index_put_({0, 0}, NAN);
  x.index_put_({1, C - 1}, NAN);
  x.index_put_({2, 16390}, NAN);
  x.index_put_({3, 7}, INFINITY);
  x.index_put_({3, 9}, -INFINITY);
  x.index_put_({4, 100}, INFINITY);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    for (const std::string kind : kKinds) {
      expect_close(jit::fused_reduction({x}, kind, 1, "mul(i0,1)", ""), stat_op(kind, x, 1, true),
                   1e-12, kind + " " + backend);
    }
  }
  const Tensor mx = jit::fused_reduction({x}, "amax", 1, "mul(i0,1)", "", 1e-5, false);
  EXPECT_TRUE(std::isnan(mx[0].item<double>()) && std::isnan(mx[1].item<double>()) &&
              std::isnan(mx[2].item<double>()));
  EXPECT_EQ(mx[3].item<double>(), INFINITY);
  const Tensor sm = jit::fused_reduction({x}, "sum", 1, "mul(i0,1)", "", 1e-5, false);
  EXPECT_TRUE(std::isnan(sm[3].item<double>()));
  EXPECT_EQ(sm[4].item<double>(), INFINITY);
}

TEST(FusedStatistic, SeveralTrailingDimsAndTheWholeTensor) {
  Tensor x = uniform({3, 4, 5}, -2, 2, kFloat64), y = uniform({3, 4, 5}, -2, 2, kFloat64);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    // mean over the last two dims, kept and dropped
    expect_close(jit::fused_reduction({x}, "mean", 2, "exp(i0)", ""), x.exp().mean({-1, -2}, true),
                 1e-12, backend);
    expect_close(jit::fused_reduction({x}, "amax", 2, "neg(i0)", "", 1e-5, false), amax(-x, {1, 2}),
                 0, backend);
    // the mean squared error over every element: a 0-d result
    const Tensor mse =
        jit::fused_reduction({x, y}, "mean", 3, "sub(i0,i1,1);mul(v0,v0)", "", 1e-5, false);
    EXPECT_EQ(mse.dim(), 0);
    expect_close(mse, nn::functional::mse_loss(x, y), 1e-12, backend);
  }
}

TEST(FusedStatistic, EpilogueInputsOfOneValuePerRow) {
  // A value per row broadcast over leading dims ([4, 1] against rows of [3, 4, 5]); rows of one
  // element, where an input of the rows' shape is also one value per row.
  Tensor x = uniform({3, 4, 5}, -1, 1, kFloat64), col = uniform({4, 1}, -1, 1, kFloat64);
  Tensor one = uniform({6, 1}, -1, 1, kFloat64), r = uniform({6, 1}, -1, 1, kFloat64);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_reduction({x, col}, "amin", 1, "exp(i0)", "mul(i2,i1)"),
                 amin(x.exp(), {-1}, true) * col, 1e-12, backend);
    expect_close(jit::fused_reduction({one, r}, "mean", 1, "exp(i0)", "sub(i2,i1,1)"),
                 one.exp() - r, 1e-12, backend);
    // Without a prologue input 0 is read in full by the reduction and, as one value per row,
    // by the epilogue (the rows' shape coming from another input).
    Tensor v = uniform({4, 1}, -1, 1, kFloat64), u = zeros({4, 8}, kFloat64);
    expect_close(jit::fused_reduction({v, u}, "sum", 1, "", "add(i2,i0,1)"), v * 9.0, 1e-12,
                 backend);
  }
}

TEST(FusedStatistic, EmptyRowsAndNoRows) {
  Tensor none = uniform({0, 5}, -1, 1), nothing = uniform({3, 0}, -1, 1);
  EXPECT_TRUE(jit::fused_reduction({none}, "sum", 1, "exp(i0)", "").sizes().equals({0, 1}));
  EXPECT_TRUE(jit::fused_reduction({none}, "amax", 1, "exp(i0)", "").sizes().equals({0, 1}));
  // Rows of nothing: the sum 0, the mean NaN (0 / 0), as the ops.
  expect_close(jit::fused_reduction({nothing}, "sum", 1, "exp(i0)", "add(i1,1,1)"),
               full({3, 1}, 1.0), 0, "sum of nothing");
  expect_close(jit::fused_reduction({nothing}, "mean", 1, "exp(i0)", "", 1e-5, false),
               nothing.mean({-1}), 0, "mean of nothing");
}

TEST(FusedStatistic, TrainingIsOneNodeWithTheOpsGradients) {
  manual_seed(4);
  for (int64_t cols : {9, 20000}) {
    for (const std::string kind : kKinds) {
      for (const Form& f : kForms) {
        const std::string what = kind + ", " + f.name + ", cols " + std::to_string(cols);
        Tensor x = uniform({3, cols}, -2, 2, kFloat64).requires_grad_(true);
        Tensor s = uniform({cols}, 0.5, 1.5, kFloat64).requires_grad_(true);
        Tensor col = uniform({3, 1}, -1, 1, kFloat64).requires_grad_(true);
        Tensor half = full({}, 0.5, kFloat64).requires_grad_(true);
        const Tensor e =
            form_reference(f, stat_op(kind, tanh(x * s), 1, f.keepdim), x, s, col, half);
        (e * e).sum().backward();
        std::vector<Tensor> expected;  // (undefined for an input the form does not read)
        for (Tensor* t : {&x, &s, &col, &half}) {
          expected.push_back(t->grad().defined() ? t->grad().clone() : Tensor());
          if (t->grad().defined()) t->grad().zero_();
        }
        Tensor y = jit::fused_reduction({x, s, col, half}, kind, 1, "mul(i0,i1);tanh(v0)",
                                        f.epilogue, 1e-5, f.keepdim);
        ASSERT_TRUE(y.grad_fn() != nullptr) << what;
        EXPECT_EQ(y.grad_fn()->name(), "FusedReductionBackward0") << what;
        expect_close(y, e.detach(), 1e-12, what + ": forward");
        (y * y).sum().backward();
        size_t k = 0;
        for (Tensor* t : {&x, &s, &col, &half}) {
          const std::string of = what + ": gradient of input " + std::to_string(k);
          if (expected[k].defined())
            expect_close(t->grad(), expected[k], 1e-10, of);
          else
            EXPECT_FALSE(t->grad().defined()) << of;
          ++k;
        }
      }
    }
  }
}

TEST(FusedStatistic, AnInputReadByBothProgramsGetsBothGradients) {
  // A weight row and a value per row read by the prologue and the epilogue: the epilogue's
  // gradient (summed to the input's shape) and the prologue's (in the rows' shape) are added
  // once each, with and without create_graph.
  for (bool create_graph : {false, true}) {
    Tensor x = uniform({4, 6}, -1, 1, kFloat64).requires_grad_(true);
    Tensor w = uniform({6}, 0.5, 1.5, kFloat64).requires_grad_(true);
    Tensor c = uniform({4, 1}, 0.5, 1.5, kFloat64).requires_grad_(true);
    const Tensor gy = uniform({4, 6}, -1, 1, kFloat64);
    const Tensor e = (x * w * c - (x * w * c).exp().sum({-1}, true)) * w * c;
    const std::vector<Tensor> ge = autograd::grad({e}, {x, w, c}, {gy});
    const Tensor y =
        jit::fused_reduction({x, w, c}, "sum", 1, "mul(i0,i1);mul(v0,i2);exp(v1)",
                             "mul(i0,i1);mul(v0,i2);sub(v1,i3,1);mul(v2,i1);mul(v3,i2)");
    expect_close(y, e.detach(), 1e-12, "forward");
    const std::vector<Tensor> gf = autograd::grad({y}, {x, w, c}, {gy}, create_graph, create_graph);
    for (size_t k = 0; k < 3; ++k)
      expect_close(
          gf[k], ge[k], 1e-11,
          "gradient of input " + std::to_string(k) + (create_graph ? " with create_graph" : ""));
  }
}

TEST(FusedStatistic, RefusesWhatItCannotRunNamingTheFault) {
  Tensor x = ones({4, 5});
  EXPECT_THAT(
      error_of([&] { (void)jit::fused_reduction({x}, "layer_norm", 1, "", "", 1e-5, false); }),
      HasSubstr("fused_reduction: layer_norm keeps the input's shape (keepdim=False is for sum, "
                "mean, amax and amin)"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "sum", 1, "dropout(i0,0,0.5)", ""); }),
              HasSubstr("fused_reduction: sum takes programs without dropout"));
  EXPECT_THAT(
      error_of([&] {
        (void)jit::fused_reduction({x, ones({5})}, "mean", 1, "", "mul(i2,i1)", 1e-5, false);
      }),
      HasSubstr("fused_reduction: mean without keepdim: the epilogue may read only "
                "one-element inputs of at most 1 dims, but input 1 has shape [5]"));
  // (a one-element input of more dims would widen the result: [1, 4], not [4])
  EXPECT_THAT(
      error_of([&] {
        (void)jit::fused_reduction({x, ones({1, 1})}, "sum", 1, "", "mul(i2,i1)", 1e-5, false);
      }),
      HasSubstr("fused_reduction: sum without keepdim: the epilogue may read only "
                "one-element inputs of at most 1 dims, but input 1 has shape [1, 1]"));
  EXPECT_THAT(
      error_of([&] {
        (void)jit::fused_reduction({ones({3, 4, 5}), ones({1, 5})}, "sum", 2, "", "mul(i2,i1)");
      }),
      HasSubstr("fused_reduction: the epilogue of sum gives shape [3, 1, 5]; expected one "
                "value per row, [3, 1, 1], or the rows' shape [3, 4, 5]"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_reduction({ones({3, 0})}, "amax", 1, "", "");
              }),
              HasSubstr("fused_reduction: amax over 1 trailing dims of shape [3, 0] reduces empty "
                        "rows (it has no identity)"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "sum", 3, "", ""); }),
              HasSubstr("fused_reduction: sum over 3 trailing dims of an output of shape [4, 5] "
                        "(layer_norm, rms_norm and the statistics take 1 to 2"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({full({}, 1.0)}, "amin", 1, "", ""); }),
              HasSubstr("fused_reduction: amin over 1 trailing dims of an output of shape []"));
}

// ---- chains of statistics: each stage's prologue reads the statistics before it

namespace {
// A softmax: the max, then the sum of exp(x - max), then exp(x - max) / sum.
const char* const kSoftmaxPro = "|sub(i0,i1,1);exp(v0)";
const char* const kSoftmaxEpi = "sub(i0,i1,1);exp(v0);div(v1,i2)";
// A layer norm over inputs x, w, b: the mean, then the mean of (x - mean) ** 2, then
// (x - mean) * rsqrt(var + 1e-5) * w + b.
const char* const kNormPro = "|sub(i0,i3,1);mul(v0,v0)";
const char* const kNormEpi =
    "sub(i0,i3,1);add(i4,1e-05,1);rsqrt(v1);mul(v0,v2);mul(v3,i1);add(v4,i2,1)";
}  // namespace

TEST(FusedStatistic, ChainsEqualTheOps) {
  // Rows of 37, 1024 and 40000 (three parts of 16384: the passes run one after the other).
  manual_seed(6);
  for (int64_t cols : {37, 1024, 40000}) {
    const int64_t rows = cols > 10000 ? 3 : 7;
    for (DType dt : {kFloat32, kFloat64}) {
      Tensor x = uniform({rows, cols}, -8, 8, dt), w = uniform({cols}, 0.5, 1.5, dt);
      Tensor b = uniform({cols}, -0.5, 0.5, dt);
      const double tol = dt == kFloat32 ? (cols > 10000 ? 1e-4 : 1e-5) : 1e-11;
      for (const char* backend : {"interpreter", "compiler"}) {
        Backend guard(backend);
        const std::string what = std::string(backend) + " " + std::string(dtype_name(dt)) +
                                 " cols " + std::to_string(cols);
        expect_close(jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, kSoftmaxEpi),
                     softmax(x, -1), tol, "softmax, " + what);
        expect_close(jit::fused_reduction({x, w, b}, "mean,mean", 1, kNormPro, kNormEpi),
                     nn::functional::layer_norm(x, {cols}, w, b, 1e-5), tol * 10,
                     "layer norm, " + what);
        // logsumexp: one value per row, without keepdim
        expect_close(jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, "log(i2);add(v0,i1,1)",
                                          1e-5, false),
                     logsumexp(x, {-1}), tol, "logsumexp, " + what);
        // Three stages and no epilogue: the largest normalised value of each row.
        expect_close(
            jit::fused_reduction({x}, "mean,mean,amax", 1,
                                 "|sub(i0,i1,1);mul(v0,v0)|sub(i0,i1,1);add(i2,1e-05,1);"
                                 "rsqrt(v1);mul(v0,v2)",
                                 ""),
            amax(nn::functional::layer_norm(x, {cols}, Tensor(), Tensor(), 1e-5), {-1}, true),
            tol * 10, "three stages, " + what);
      }
    }
  }
}

TEST(FusedStatistic, AStageWithoutAPrologueReadsInput0InFull) {
  // Input 0 of one value per row, or one value, broadcast over the rows by another input: a
  // later stage without a prologue takes its statistic over the broadcast rows (stage 0 has
  // one, so input 0 is not otherwise read in full).
  const Tensor m = tensor(std::vector<double>{1, 2, 3}, kFloat64).reshape({3, 1});
  const Tensor one = full({}, 2.0, kFloat64);
  const Tensor u = ones({3, 4}, kFloat64);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_reduction({m, u}, "sum,sum", 1, "mul(i0,i1)|", ""),
                 tensor(std::vector<double>{4, 8, 12}, kFloat64).reshape({3, 1}), 0, backend);
    expect_close(jit::fused_reduction({one, u}, "mean,sum", 1, "mul(i0,i1)|", "add(i3,i2,1)"),
                 full({3, 1}, 10.0, kFloat64), 0, backend);
  }
}

TEST(FusedStatistic, ChainsGiveTheSameBitsWithEitherBackendAndAnyNumberOfThreads) {
  // Prologues of one product each (rounded alike by the compiler and the interpreter), rows of
  // one part and of four.
  for (int64_t cols : {300, 50000}) {
    Tensor x = uniform({3, cols}, -1, 1), w = uniform({cols}, -1, 1);
    const int threads = get_num_threads();
    std::vector<Tensor> by;
    for (int t : {1, 2}) {
      set_num_threads(t);
      for (const char* backend : {"interpreter", "compiler"}) {
        Backend guard(backend);
        by.push_back(jit::fused_reduction({x, w}, "amax,sum,mean", 1,
                                          "mul(i0,i1)|mul(i0,i2)|mul(i0,i3)", "mul(i0,i4)"));
      }
    }
    set_num_threads(threads);
    for (size_t k = 1; k < by.size(); ++k)
      EXPECT_TRUE(equal(by[0], by[k])) << "cols " << cols << ", run " << k << ": max |diff| "
                                       << (by[0] - by[k]).abs().max().item<double>();
    const Tensor m = amax(x * w, {-1}, true), s = (x * m).sum({-1}, true);
    expect_close(by[0], x * (x * s).mean({-1}, true), 1e-4, "against the ops");
  }
}

TEST(FusedStatistic, TrainingThroughAChainGivesTheOpsGradients) {
  // Each stage a fused_reduction of its own and the epilogue a fused_elementwise, each with its
  // fused backward; double backward through the ops.
  manual_seed(7);
  for (int64_t cols : {9, 20000}) {
    const std::string what = "cols " + std::to_string(cols);
    Tensor x = uniform({3, cols}, -2, 2, kFloat64).requires_grad_(true);
    Tensor w = uniform({cols}, 0.5, 1.5, kFloat64).requires_grad_(true);
    Tensor b = uniform({cols}, -0.5, 0.5, kFloat64).requires_grad_(true);
    const Tensor gy = uniform({3, cols}, -1, 1, kFloat64);
    const Tensor e = nn::functional::layer_norm(x, {cols}, w, b, 1e-5);
    const std::vector<Tensor> ge = autograd::grad({e}, {x, w, b}, {gy}, true, true);
    const Tensor y = jit::fused_reduction({x, w, b}, "mean,mean", 1, kNormPro, kNormEpi);
    expect_close(y, e.detach(), 1e-12, what + ": forward");
    const std::vector<Tensor> gf = autograd::grad({y}, {x, w, b}, {gy}, true, true);
    for (size_t k = 0; k < 3; ++k)
      expect_close(gf[k], ge[k], 1e-10, what + ": gradient of input " + std::to_string(k));
    // The second derivative through the first's history.
    expect_close(autograd::grad({(gf[0] * gf[0]).sum()}, {w})[0],
                 autograd::grad({(ge[0] * ge[0]).sum()}, {w})[0], 1e-9, what + ": double backward");
    // A softmax's gradient; a logsumexp's (one value per row, no keepdim).
    Tensor s = jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, kSoftmaxEpi);
    expect_close(autograd::grad({s}, {x}, {gy})[0], autograd::grad({softmax(x, -1)}, {x}, {gy})[0],
                 1e-12, what + ": softmax");
    Tensor l =
        jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, "log(i2);add(v0,i1,1)", 1e-5, false);
    expect_close(autograd::grad({l.sum()}, {x})[0],
                 autograd::grad({logsumexp(x, {-1}).sum()}, {x})[0], 1e-12, what + ": logsumexp");
  }
}

TEST(FusedStatistic, ChainsRefuseWhatTheyCannotRunNamingTheFault) {
  Tensor x = ones({4, 5});
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "amax,median", 1, "|", ""); }),
              HasSubstr("fused_reduction: unknown reduction 'amax,median' (expected layer_norm, "
                        "rms_norm, softmax, log_softmax, or sum, mean, amax, amin alone or as a "
                        "chain separated by commas, such as 'amax,sum')"));
  EXPECT_THAT(
      error_of([&] { (void)jit::fused_reduction({x}, "sum,sum,sum,sum,sum", 1, "||||", ""); }),
      HasSubstr("fused_reduction: a chain of at most 4 statistics, got 5"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "amax,sum", 1, "exp(i0)", ""); }),
              HasSubstr("fused_reduction: amax,sum takes one prologue per statistic, separated "
                        "by '|' (empty for input 0): expected 2, got 1"));
  EXPECT_THAT(
      error_of([&] { (void)jit::fused_reduction({x}, "amax,sum", 1, "|sub(i0,i2,1)", ""); }),
      HasSubstr("fused_reduction: the prologue of stage 1 (sum): "));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "amax,sum", 1, "|", "mul(i3,i0)"); }),
              HasSubstr("fused_reduction: the epilogue: "));
  EXPECT_THAT(
      error_of([&] { (void)jit::fused_reduction({x}, "amax,sum", 1, "|dropout(i1,0,0.5)", ""); }),
      HasSubstr("fused_reduction: amax,sum takes programs without dropout"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_reduction({ones({3, 0})}, "sum,amin", 1, "|", "");
              }),
              HasSubstr("fused_reduction: amin over 1 trailing dims of shape [3, 0] reduces empty "
                        "rows (it has no identity)"));
  std::vector<Tensor> many(62, x);
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction(many, "amax,sum,mean", 1, "||", ""); }),
              HasSubstr("fused_reduction: 62 inputs and 3 statistics are more than the "
                        "epilogue's 64 inputs"));
}

TEST(FusedStatistic, RunsOnTheMetaDevice) {
  const TensorOptions meta = TensorOptions(kFloat32).device(kMeta);
  Tensor x = empty({6, 7}, meta), s = empty({7}, meta), col = empty({6, 1}, meta),
         half = empty({}, meta);
  const Shape shapes[] = {{6, 1}, {6, 7}, {6}};
  int k = 0;
  for (const Form& f : kForms) {
    Tensor out =
        jit::fused_reduction({x, s, col, half}, "mean", 1, "exp(i0)", f.epilogue, 1e-5, f.keepdim);
    EXPECT_TRUE(out.device().is_meta());
    EXPECT_TRUE(out.sizes().equals(shapes[k++])) << f.name << ": " << out.sizes();
  }
  EXPECT_TRUE(
      jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, kSoftmaxEpi).sizes().equals({6, 7}));
  EXPECT_TRUE(
      jit::fused_reduction({x}, "amax,sum", 1, kSoftmaxPro, "", 1e-5, false).sizes().equals({6}));
}

// ---- the pass

TEST(FuseStatistics, AHandWrittenRmsNormBecomesOneNode) {
  // LLaMA's RMSNorm as PyTorch code writes it: x * rsqrt(mean(x ** 2, -1, keepdim) + eps) * w.
  // fuse_elementwise makes the scalar chain (add, rsqrt) and the scaling (mul, mul) two nodes;
  // fuse_reductions takes x ** 2 as the prologue and both as the epilogue: one pass per row.
  manual_seed(5);
  Tensor x = uniform({8, 96}, -2, 2), w = uniform({96}, 0.5, 1.5);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor& h = in[0];
    const Tensor ms = h.pow(2).mean({-1}, true);
    return std::vector<Tensor>{h * rsqrt(ms + 1e-6) * w};
  };
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}});
  NoGradGuard ng;
  const Tensor eager = fn({x})[0];
  jit::optimize(g);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_EQ(g.nodes[0].name(), "fused_reduction");
  EXPECT_THAT(g.str(), HasSubstr("reduction='mean', dims=1, prologue='pow(i0,2)'"));
  EXPECT_THAT(g.str(), HasSubstr("keepdim=True"));
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(g.run({x})[0], eager, 1e-6, backend);
  }
  // The same as nn::functional::rms_norm.
  expect_close(eager, nn::functional::rms_norm(x, {96}, w, 1e-6), 1e-6, "rms_norm");
}

TEST(FuseStatistics, AHandWrittenLayerNormIsOneNode) {
  // d = x - mean(x); d / sqrt(mean(d ** 2) + eps) * w + b: the first mean with its epilogue (the
  // centring), and the variance with d ** 2 as its prologue and the normalisation and affine
  // part as its epilogue, chained: one node whose second stage and epilogue recompute d. Equal
  // to eager and to layer_norm, forward and (float64) backward.
  Tensor x = uniform({8, 64}, -2, 2, kFloat64).requires_grad_(true);
  Tensor w = uniform({64}, 0.5, 1.5, kFloat64), b = uniform({64}, -0.5, 0.5, kFloat64);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor d = in[0] - in[0].mean({-1}, true);
    return std::vector<Tensor>{d / sqrt(d.pow(2).mean({-1}, true) + 1e-5) * w + b};
  };
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}, {"b", b}});
  jit::optimize(g);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_THAT(g.str(),
              HasSubstr("reduction='mean,mean', dims=1, prologue='|sub(i0,i3,1);pow(v0,2)', "
                        "epilogue='sub(i0,i3,1);add(i4,1.0000000000000001e-05,1);"
                        "sqrt(v1);div(v0,v2);mul(v3,i1);add(v4,i2,1)'"));
  const Tensor eager = fn({x})[0];
  const Tensor ge = autograd::grad({(eager * eager).sum()}, {x})[0];
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor out = g.run({x})[0];
    expect_close(out, eager.detach(), 1e-12, backend);
    expect_close(autograd::grad({(out * out).sum()}, {x})[0], ge, 1e-11, backend);
  }
  expect_close(eager.detach(), nn::functional::layer_norm(x.detach(), {64}, w, b, 1e-5), 1e-12,
               "layer_norm");
}

TEST(FuseStatistics, AHandWrittenSoftmaxIsOneNode) {
  // e = exp(x - amax(x)); e / sum(e): the max with the shift and exp as its epilogue, and the
  // sum with the division as its epilogue, chained: one node. Equal to eager and to softmax,
  // forward and backward.
  Tensor x = uniform({8, 64}, -20, 20, kFloat64).requires_grad_(true);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor e = (in[0] - amax(in[0], {-1}, true)).exp();
    return std::vector<Tensor>{e / e.sum({-1}, true)};
  };
  jit::Graph g = jit::trace(fn, {x});
  jit::optimize(g);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_THAT(g.str(), HasSubstr("reduction='amax,sum', dims=1, prologue='|sub(i0,i1,1);exp(v0)', "
                                 "epilogue='sub(i0,i1,1);exp(v0);div(v1,i2)'"));
  const Tensor eager = fn({x})[0];
  const Tensor gy = uniform({8, 64}, -1, 1, kFloat64);
  const Tensor ge = autograd::grad({eager}, {x}, {gy})[0];
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor out = g.run({x})[0];
    expect_close(out, eager.detach(), 1e-14, backend);
    expect_close(autograd::grad({out}, {x}, {gy})[0], ge, 1e-13, backend);
  }
  expect_close(eager.detach(), softmax(x.detach(), -1), 1e-14, "softmax");
}

TEST(FuseStatistics, DistancesWithoutKeepdimAndWholeTensorReductions) {
  Tensor a = uniform({16, 32}, -1, 1, kFloat64), b = uniform({16, 32}, -1, 1, kFloat64);
  // The Euclidean distance of each row pair: (a - b) ** 2 summed, then its square root.
  auto dist = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] - in[1]).pow(2).sum({-1}).sqrt()};
  };
  // Every element: the mean squared error, and max() of a scaled tensor.
  auto whole = [](const std::vector<Tensor>& in) {
    const Tensor d = in[0] - in[1];
    return std::vector<Tensor>{(d * d).mean(), (in[0] * 2.0).max()};
  };
  NoGradGuard ng;
  for (auto fn : {+dist, +whole}) {
    jit::Graph g = jit::trace(fn, {a, b});
    const std::vector<Tensor> eager = fn({a, b});
    const int nodes = static_cast<int>(eager.size());
    jit::optimize(g);
    EXPECT_EQ(g.count("fused_reduction"), nodes) << g.str();
    EXPECT_EQ(static_cast<int>(g.nodes.size()), nodes) << g.str();
    const std::vector<Tensor> out = g.run({a, b});
    for (size_t i = 0; i < out.size(); ++i) expect_close(out[i], eager[i], 1e-12, g.str());
  }
  jit::Graph g = jit::trace(dist, {a, b});
  jit::optimize(g);
  EXPECT_THAT(g.str(), HasSubstr("reduction='sum', dims=1, prologue='sub(i0,i1,1);pow(v0,2)', "
                                 "epilogue='sqrt(i2)', eps=1e-05, keepdim=False"));
}

TEST(FuseStatistics, LeavesWhatItCannotTake) {
  Tensor x = uniform({4, 5}, -1, 1);
  auto leading = [](const std::vector<Tensor>& in) {  // a leading dim: not rows
    return std::vector<Tensor>{in[0].exp().sum({0}, true)};
  };
  auto bare = [](const std::vector<Tensor>& in) {  // nothing to fuse with
    return std::vector<Tensor>{in[0].mean({-1}, true)};
  };
  auto shared = [](const std::vector<Tensor>& in) {  // the prologue's value is read again
    const Tensor e = in[0].exp();
    return std::vector<Tensor>{e.sum({-1}, true) + 1.0, e};
  };
  NoGradGuard ng;
  for (auto fn : {+leading, +bare}) {
    jit::Graph g = jit::trace(fn, {x});
    EXPECT_EQ(jit::fuse_reductions(g), 0) << g.str();
  }
  jit::Graph g = jit::trace(shared, {x});
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  EXPECT_THAT(g.str(), HasSubstr("reduction='sum', dims=1, prologue='', epilogue='add(i1,1,1)'"));
  const std::vector<Tensor> eager = shared({x}), out = g.run({x});
  expect_close(out[0], eager[0], 1e-6, "sum");
  expect_close(out[1], eager[1], 0, "exp");
}

TEST(FuseStatistics, VarIsAChainOfTwoStatistics) {
  // var over trailing dims with a prologue or an epilogue: the mean, then the sum of squared
  // deviations over C - correction, as the op. A bare var stays the op, and so does a var of
  // rows no longer than its correction (its gradient is infinite there: the chain's is NaN).
  Tensor x = uniform({6, 40}, -2, 2, kFloat64), w = uniform({40}, 0.5, 1.5, kFloat64);
  Tensor one = uniform({4, 1}, -1, 1, kFloat64), x3 = uniform({3, 4, 5}, -1, 1, kFloat64);
  auto scaled = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * w).var({-1}, 1, true) + 1.0};
  };
  auto two_dims = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].exp().var({-1, -2}, 0, false)};
  };
  auto too_few = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].exp().var({-1}, 1, true)};
  };
  NoGradGuard ng;
  const std::pair<std::function<std::vector<Tensor>(const std::vector<Tensor>&)>, Tensor> cases[] =
      {{scaled, x}, {two_dims, x3}};
  for (const auto& [fn, in] : cases) {
    jit::Graph g = jit::trace(fn, {in}, {{"w", w}});
    jit::optimize(g);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(), HasSubstr("reduction='mean,sum'"));
    const Tensor eager = fn({in})[0];
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      expect_close(g.run({in})[0], eager, 1e-12, g.str() + backend);
    }
  }
  jit::Graph g = jit::trace(scaled, {x}, {{"w", w}});
  jit::optimize(g);
  EXPECT_THAT(g.str(), HasSubstr("prologue='mul(i0,i1)|mul(i0,i1);sub(v0,i2,1);mul(v1,v1)', "
                                 "epilogue='div(i3,39);add(v0,1,1)'"));
  auto bare = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].var({-1}, 0, true)};
  };
  jit::Graph b = jit::trace(bare, {x});
  EXPECT_EQ(jit::fuse_reductions(b), 0) << b.str();
  jit::Graph t = jit::trace(too_few, {one});
  EXPECT_EQ(jit::fuse_reductions(t), 0) << t.str();
  EXPECT_TRUE(std::isnan(t.run({one})[0][0][0].item<double>()));  // 0 / 0, as eager's
}

TEST(FuseStatistics, Float32VarAndStdCorrectTheRoundedMean) {
  // Rows far from 0 with a small spread (1e4 +- 0.01): eager accumulates float32 var and std in
  // double; the float32 chain takes a third statistic, the deviations' sum, to correct its
  // rounded mean (the plain two passes in float32 were off by 1.7e-3 for var on such rows), and
  // stays within 1e-5 of eager. float64 keeps eager's two passes.
  const Tensor x = (uniform({8, 1024}, -0.01, 0.01, kFloat64) + 1e4).to(kFloat32);
  auto var = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].var({-1}, 1, true) * 2.0};
  };
  auto sd = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].std({-1}, 0, false) + 1.0};
  };
  NoGradGuard ng;
  for (auto fn : {+var, +sd}) {
    jit::Graph g = jit::trace(fn, {x});
    jit::optimize(g);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(), HasSubstr("reduction='mean,sum,sum'"));
    const Tensor eager = fn({x})[0];
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      const Tensor out = g.run({x})[0];
      const double rel = ((out.to(kFloat64) - eager.to(kFloat64)).abs() /
                          (eager.to(kFloat64) - (fn == +sd ? 1.0 : 0.0)).abs())
                             .max()
                             .item<double>();
      EXPECT_LT(rel, 1e-5) << backend << "\n" << g.str();
    }
  }
  jit::Graph g = jit::trace(var, {x.to(kFloat64)});
  jit::optimize(g);
  EXPECT_THAT(g.str(), HasSubstr("reduction='mean,sum',"));
}

TEST(FuseStatistics, StdIsTheVarChainWithEagersGradientAtEqualValues) {
  // std: var's chain, its epilogue ending in sqrt(relu(v)); at rows of equal values (1 and 4)
  // its gradient is eager's, 0 (relu's derivative masks the square root's infinite one), and so
  // is the second derivative but where the epilogue also reads x (NaN there: documented). A
  // standardisation (x - mean) / std is one node of two statistics.
  Tensor x = uniform({6, 40}, -2, 2, kFloat64);
  x.index_put_({1}, 0.75);
  x.index_put_({4}, -2.0);
  x.requires_grad_(true);
  auto of_exp = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].exp().std({-1}, 1, true) * 2.0};
  };
  auto standardise = [](const std::vector<Tensor>& in) {
    const Tensor m = in[0].mean({-1}, true), s = in[0].std({-1}, 1, true);
    return std::vector<Tensor>{(in[0] - m) / (s + 1e-3)};
  };
  const Tensor gy = uniform({6, 40}, -1, 1, kFloat64), gz = uniform({6, 40}, -1, 1, kFloat64);
  const Tensor varied = tensor(std::vector<int64_t>{0, 2, 3, 5}),
               equal = tensor(std::vector<int64_t>{1, 4});
  struct Case {
    const char* name;
    std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
    const char* fused;
  };
  const Case cases[] = {
      {"std of exp", of_exp,
       "reduction='mean,sum', dims=1, prologue='exp(i0)|exp(i0);sub(v0,i1,1);mul(v1,v1)', "
       "epilogue='div(i2,39);relu(v0);sqrt(v1);mul(v2,2)'"},
      {"standardise", standardise,
       "reduction='mean,sum', dims=1, prologue='|sub(i0,i1,1);mul(v0,v0)', "
       "epilogue='div(i2,39);relu(v0);sqrt(v1);add(v2,0.001,1);sub(i0,i1,1);div(v4,v3)'"}};
  for (const Case& c : cases) {
    jit::Graph g = jit::trace(c.fn, {x});
    jit::optimize(g);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(), HasSubstr(c.fused));
    const Tensor eager = c.fn({x})[0];
    const Tensor g_out = gy.narrow(1, 0, eager.size(1));
    const Tensor ge = autograd::grad({eager}, {x}, {g_out}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor gge = autograd::grad({ge}, {x}, {gz})[0];
    if (std::string(c.name) == "std of exp") {
      EXPECT_EQ(ge.index_select(0, equal).abs().max().item<double>(), 0);  // the subgradient
    }
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      const std::string what = std::string(c.name) + " " + backend;
      const Tensor out = g.run({x})[0];
      expect_close(out, eager.detach(), 1e-12, what);
      const Tensor gx = autograd::grad({out}, {x}, {g_out}, std::nullopt, /*create_graph=*/true)[0];
      expect_close(gx.detach(), ge.detach(), 1e-11, what + " gradient");
      const Tensor ggx = autograd::grad({gx}, {x}, {gz})[0];
      expect_close(ggx.index_select(0, varied), gge.index_select(0, varied), 1e-10,
                   what + " second derivative");
      // (Where the epilogue also reads x, the epilogue's backward program goes through the
      // square root's infinite derivative again: NaN at rows of equal values, documented.)
      if (std::string(c.name) == "standardise")
        EXPECT_TRUE(isnan(ggx.index_select(0, equal)).all().item<bool>()) << what;
      else
        expect_close(ggx.index_select(0, equal), gge.index_select(0, equal), 1e-10,
                     what + " second derivative at equal values");
    }
  }
}

TEST(FuseStatistics, TheTwoNormIsASumOfSquaresWithEagersGradientAtZero) {
  // norm(x, 2) over trailing dims with a prologue or an epilogue: the sum of squares, its
  // epilogue starting with sqrt(relu(s)), so that rows of zeros (x[2]) have eager's gradient, 0,
  // and second derivative (NaN there when the epilogue also reads x: documented). Other p, and
  // a bare norm, stay the op.
  Tensor x = uniform({5, 3, 8}, -2, 2, kFloat64), w = uniform({8}, 0.5, 1.5, kFloat64);
  x.index_put_({2}, 0.0);
  x.requires_grad_(true);
  auto scaled = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].norm(2, {-1}, true) * 3.0};
  };
  auto normalise = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0] / (in[0].norm(2, {-1}, true) + 1e-6)};
  };
  auto two_dims = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] * w).norm(2, {-1, -2}, false)};
  };
  const Tensor nonzero = tensor(std::vector<int64_t>{0, 1, 3, 4});
  struct Case {
    const char* name;
    std::function<std::vector<Tensor>(const std::vector<Tensor>&)> fn;
    const char* fused;
    bool per_row;  // the epilogue gives one value per row (else it reads x too)
  };
  const Case cases[] = {
      {"scaled", scaled,
       "reduction='sum', dims=1, prologue='mul(i0,i0)', epilogue='relu(i1);sqrt(v0);mul(v1,3)'",
       true},
      {"normalise", normalise,
       "reduction='sum', dims=1, prologue='mul(i0,i0)', "
       "epilogue='relu(i1);sqrt(v0);add(v1,9.9999999999999995e-07,1);div(i0,v2)'",
       false},
      {"two dims", two_dims,
       "reduction='sum', dims=2, prologue='mul(i0,i1);mul(v0,v0)', epilogue='relu(i2);sqrt(v0)', "
       "eps=1e-05, keepdim=False",
       true}};
  for (const Case& c : cases) {
    jit::Graph g = jit::trace(c.fn, {x}, {{"w", w}});
    jit::optimize(g);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(), HasSubstr(c.fused));
    const Tensor eager = c.fn({x})[0];
    const Tensor gy = uniform(eager.sizes(), -1, 1, kFloat64);
    const Tensor gz = uniform(x.sizes(), -1, 1, kFloat64);
    const Tensor ge = autograd::grad({eager}, {x}, {gy}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor gge = autograd::grad({ge}, {x}, {gz})[0];
    if (c.per_row) {
      EXPECT_EQ(ge[2].abs().max().item<double>(), 0) << c.name;  // the subgradient
    }
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      const std::string what = std::string(c.name) + " " + backend;
      const Tensor out = g.run({x})[0];
      expect_close(out, eager.detach(), 1e-12, what);
      const Tensor gx = autograd::grad({out}, {x}, {gy}, std::nullopt, /*create_graph=*/true)[0];
      expect_close(gx.detach(), ge.detach(), 1e-11, what + " gradient");
      const Tensor ggx = autograd::grad({gx}, {x}, {gz})[0];
      expect_close(ggx.index_select(0, nonzero), gge.index_select(0, nonzero), 1e-10,
                   what + " second derivative");
      if (c.per_row)
        expect_close(ggx[2], gge[2], 1e-10, what + " second derivative at zeros");
      else  // (as std's standardisation: documented)
        EXPECT_TRUE(isnan(ggx[2]).all().item<bool>()) << what;
    }
  }
  auto one_norm = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].exp().norm(1, {-1}, true)};
  };
  auto bare = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{in[0].norm(2, {-1}, true)};
  };
  NoGradGuard ng;
  for (auto fn : {+one_norm, +bare}) {
    jit::Graph g = jit::trace(fn, {x.detach()});
    EXPECT_EQ(jit::fuse_reductions(g), 0) << g.str();
  }
}

TEST(FuseStatistics, AHandWrittenLayerNormWithVarIsOneNode) {
  // (x - mean(x)) / sqrt(var(x, correction=0) + eps) * w + b: the var node (two statistics, its
  // epilogue the square root, one value per row) chained into the mean node reading it, whose
  // mean of x equals the var's first stage: two statistics in one node, the epilogue reading
  // the first mean for both. Equal to eager and to layer_norm, forward and backward.
  Tensor x = uniform({8, 64}, -2, 2, kFloat64).requires_grad_(true);
  Tensor w = uniform({64}, 0.5, 1.5, kFloat64), b = uniform({64}, -0.5, 0.5, kFloat64);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor m = in[0].mean({-1}, true), v = in[0].var({-1}, 0, true);
    return std::vector<Tensor>{(in[0] - m) / sqrt(v + 1e-5) * w + b};
  };
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}, {"b", b}});
  jit::optimize(g);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_THAT(g.str(),
              HasSubstr("reduction='mean,sum', dims=1, prologue='|sub(i0,i3,1);mul(v0,v0)', "
                        "epilogue='div(i4,64);add(v0,1.0000000000000001e-05,1);sqrt(v1);"
                        "sub(i0,i3,1);div(v3,v2);mul(v4,i1);add(v5,i2,1)'"));
  const Tensor eager = fn({x})[0];
  const Tensor gy = uniform({8, 64}, -1, 1, kFloat64);
  const Tensor ge = autograd::grad({eager}, {x}, {gy})[0];
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor out = g.run({x})[0];
    expect_close(out, eager.detach(), 1e-12, backend);
    expect_close(autograd::grad({out}, {x}, {gy})[0], ge, 1e-11, backend);
  }
  expect_close(eager.detach(), nn::functional::layer_norm(x.detach(), {64}, w, b, 1e-5), 1e-12,
               "layer_norm");
}

TEST(FuseStatistics, AStageEqualToAnEarlierOneIsTakenOnce) {
  // The mean of x, then a node taking the sum of (x - mean) ** 2 and the mean of x again: merged,
  // the third stage equals the first. With an epilogue it is dropped (the epilogue reads the
  // first); without one it stays, being the node's result.
  const Tensor x = uniform({5, 12}, -2, 2, kFloat64);
  auto with = [](const char* epilogue) {
    return [epilogue](const std::vector<Tensor>& in) {
      const Tensor m = jit::fused_reduction({in[0]}, "mean", 1, "", "");
      return std::vector<Tensor>{
          jit::fused_reduction({in[0], m}, "sum,mean", 1, "sub(i0,i1,1);mul(v0,v0)|", epilogue)};
    };
  };
  NoGradGuard ng;
  const Tensor m = x.mean({-1}, true), ss = (x - m).pow(2).sum({-1}, true);
  struct Case {
    const char* epilogue;
    const char* fused;
    Tensor expected;
  };
  const Case cases[] = {
      {"div(i2,i3)",
       "reduction='mean,sum', dims=1, prologue='|sub(i0,i1,1);mul(v0,v0)', "
       "epilogue='div(i2,i1)'",
       ss / m},
      {"", "reduction='mean,sum,mean', dims=1, prologue='|sub(i0,i1,1);mul(v0,v0)|', epilogue=''",
       m}};
  for (const Case& c : cases) {
    jit::Graph g = jit::trace(with(c.epilogue), {x});
    expect_close(g.run({x})[0], c.expected, 1e-12, "unfused");
    EXPECT_EQ(jit::fuse_reductions(g), 1) << g.str();
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    EXPECT_THAT(g.str(), HasSubstr(c.fused));
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      expect_close(g.run({x})[0], c.expected, 1e-12, g.str() + backend);
    }
  }
}

TEST(FuseStatistics, ChainsOnlyWhereTheFirstResultIsReadByTheSecondAlone) {
  // The exponentials are also a result of the graph: they are written anyway, and the two nodes
  // stay two. A sum over another dim is not a statistic of the same rows.
  Tensor x = uniform({6, 10}, -3, 3, kFloat64);
  auto shared = [](const std::vector<Tensor>& in) {
    const Tensor e = (in[0] - amax(in[0], {-1}, true)).exp();
    return std::vector<Tensor>{e / e.sum({-1}, true), e};
  };
  auto other_rows = [](const std::vector<Tensor>& in) {
    const Tensor e = (in[0] - amax(in[0], {-1}, true)).exp();
    return std::vector<Tensor>{e / e.sum({0}, true)};
  };
  NoGradGuard ng;
  for (auto fn : {+shared, +other_rows}) {
    jit::Graph g = jit::trace(fn, {x});
    jit::optimize(g);
    EXPECT_THAT(g.str(), Not(HasSubstr("reduction='amax,sum'")));
    const std::vector<Tensor> eager = fn({x}), out = g.run({x});
    for (size_t i = 0; i < out.size(); ++i) expect_close(out[i], eager[i], 1e-12, g.str());
  }
  jit::Graph g = jit::trace(shared, {x});
  jit::optimize(g);
  EXPECT_EQ(g.count("fused_reduction"), 2) << g.str();
}

TEST(FuseStatistics, EdgeValuesGiveEagersResults) {
  // Every fused form of a norm or a softmax (hand-written chains, var, the ops fused) on rows
  // holding NaN, infinities of either sign, all -inf, a value whose square overflows, rows of
  // equal values (ordinary and large), short and long (three parts): the compiled graph gives
  // eager's values, NaN where eager's are NaN.
  using Fn = std::function<std::vector<Tensor>(const std::vector<Tensor>&)>;
  auto one = [](Tensor t) { return std::vector<Tensor>{std::move(t)}; };
  const std::pair<const char*, Fn> fns[] = {
      {"softmax",
       [&](const std::vector<Tensor>& in) {
         const Tensor e = (in[0] - amax(in[0], {-1}, true)).exp();
         return one(e / e.sum({-1}, true));
       }},
      {"log_softmax",
       [&](const std::vector<Tensor>& in) {
         const Tensor d = in[0] - amax(in[0], {-1}, true);
         return one(d - d.exp().sum({-1}, true).log());
       }},
      {"layer norm",
       [&](const std::vector<Tensor>& in) {
         const Tensor d = in[0] - in[0].mean({-1}, true);
         return one(d / sqrt(d.pow(2).mean({-1}, true) + 1e-5) * 1.5);
       }},
      {"layer norm with var",
       [&](const std::vector<Tensor>& in) {
         const Tensor m = in[0].mean({-1}, true), v = in[0].var({-1}, 0, true);
         return one((in[0] - m) / sqrt(v + 1e-5) + 0.25);
       }},
      {"rms norm",
       [&](const std::vector<Tensor>& in) {
         return one(in[0] * rsqrt(in[0].pow(2).mean({-1}, true) + 1e-6) * 2.0);
       }},
      {"var", [&](const std::vector<Tensor>& in) { return one((in[0] * 0.5).var({-1}, 1, true)); }},
      {"normalisation",
       [&](const std::vector<Tensor>& in) {
         return one(in[0] / (in[0].norm(2, {-1}, true) + 1e-6));
       }},
      {"standardisation",
       [&](const std::vector<Tensor>& in) {
         return one((in[0] - in[0].mean({-1}, true)) / (in[0].std({-1}, 1, true) + 1e-3));
       }},
      {"the ops", [&](const std::vector<Tensor>& in) {
         namespace F = nn::functional;
         return std::vector<Tensor>{F::softmax(in[0] * 2.0, -1), F::log_softmax(in[0] + 1.0, -1),
                                    F::layer_norm(in[0], {in[0].size(-1)}, {}, {}, 1e-5) + 1.0};
       }}};
  NoGradGuard ng;
  for (int64_t cols : {7, 40000}) {
    for (DType dt : {kFloat32, kFloat64}) {
      // (Powers of two: a row of them sums exactly in any order.)
      const double big = std::ldexp(1.0, dt == kFloat32 ? 100 : 990);
      Tensor x = uniform({9, cols}, -3, 3, dt);
      x.index_put_({0, 1}, NAN);
      x.index_put_({1, cols - 1}, INFINITY);
      x.index_put_({2, 0}, -INFINITY);
      x.index_put_({3}, -INFINITY);
      x.index_put_({4, 2}, INFINITY);
      x.index_put_({4, 3}, -INFINITY);
      x.index_put_({5, cols - 2}, -big);
      x.index_put_({6}, 2.5);
      x.index_put_({7}, big);
      const double tol = dt == kFloat32 ? (cols > 10000 ? 2e-4 : 1e-5) : 1e-10;
      for (const auto& [name, fn] : fns) {
        jit::Graph g = jit::trace(fn, {x});
        jit::optimize(g);
        EXPECT_EQ(g.count("fused_reduction"), static_cast<int>(g.nodes.size())) << g.str();
        const std::vector<Tensor> eager = fn({x});
        for (const char* backend : {"interpreter", "compiler"}) {
          Backend guard(backend);
          const std::vector<Tensor> out = g.run({x});
          for (size_t k = 0; k < out.size(); ++k)
            for (int64_t r = 0; r < x.size(0); ++r) {
              // (float32 std: eager accumulates the squares in double, the chain in float32:
              // row 5's square overflows, its std is inf and the row 0.)
              if (std::string(name) == "standardisation" && dt == kFloat32 && r == 5) {
                EXPECT_TRUE(std::isfinite(eager[k][r].abs().max().item<double>()));
                EXPECT_EQ(out[k][r].abs().max().item<double>(), 0);
                continue;
              }
              expect_close(out[k][r], eager[k][r], tol,
                           std::string(name) + " " + backend + " " + std::string(dtype_name(dt)) +
                               " cols " + std::to_string(cols) + " row " + std::to_string(r));
            }
        }
      }
    }
  }
}

TEST(FuseStatistics, TrainingThroughTheGraphGivesEagerGradients) {
  Tensor x = uniform({5, 12}, -1, 1, kFloat64).requires_grad_(true);
  Tensor w = uniform({12}, 0.5, 1.5, kFloat64).requires_grad_(true);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor h = in[0] * rsqrt(in[0].pow(2).mean({-1}, true) + 1e-6) * w;
    return std::vector<Tensor>{h - amax(h, {-1}, true)};
  };
  Tensor e = fn({x})[0];
  (e * e).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.grad().zero_();
  w.grad().zero_();
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}});
  jit::optimize(g);
  // (the RMS norm, then the max of its result: a chain)
  EXPECT_EQ(g.count("fused_reduction"), 1) << g.str();
  EXPECT_THAT(g.str(), HasSubstr("reduction='mean,amax'"));
  Tensor y = g.run({x})[0];
  expect_close(y, e.detach(), 1e-13, "forward");
  (y * y).sum().backward();
  expect_close(x.grad(), gx, 1e-12, "d/dx");
  expect_close(w.grad(), gw, 1e-12, "d/dw");
}

TEST(FuseStatistics, SavedGraphsKeepTheStatistic) {
  Tensor a = uniform({6, 8}, -1, 1), b = uniform({6, 8}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(in[0] - in[1]).pow(2).sum({-1}).sqrt()};
  };
  jit::Graph g = jit::trace(fn, {a, b});
  jit::optimize(g);
  const std::string path =
      (std::filesystem::temp_directory_path() / "ignis_fused_stat.ignis").string();
  g.save(path);
  jit::Graph loaded = jit::load(path);
  std::filesystem::remove(path);
  EXPECT_EQ(loaded.str(), g.str());
  NoGradGuard ng;
  expect_close(loaded.run({a, b})[0], fn({a, b})[0], 1e-6, "loaded");
  // A chain: a hand-written softmax.
  auto sm = [](const std::vector<Tensor>& in) {
    const Tensor e = (in[0] - amax(in[0], {-1}, true)).exp();
    return std::vector<Tensor>{e / e.sum({-1}, true)};
  };
  jit::Graph c = jit::trace(sm, {a});
  jit::optimize(c);
  c.save(path);
  jit::Graph chain = jit::load(path);
  std::filesystem::remove(path);
  EXPECT_THAT(chain.str(), HasSubstr("reduction='amax,sum'"));
  expect_close(chain.run({a})[0], softmax(a, -1), 1e-6, "a loaded chain");
}
