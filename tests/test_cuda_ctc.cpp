// ctc_loss on the GPU (src/cuda/ctc_kernels.cu) against the CPU kernel as the oracle: the losses
// and the gradients with respect to log_probs, in float32 and float64, for padded and
// concatenated targets, repeated labels, empty targets and inputs, impossible alignments (with
// and without zero_infinity), non-contiguous log_probs, long targets and many classes (more
// states and classes than a block has threads), many sequences, every reduction; a float64
// gradcheck through the GPU kernels, and the front end's errors for bad labels on the GPU.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <string>
#include <vector>

#include "ignis/autograd.h"
#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "ignis/nn/loss_extra.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;
namespace F = ignis::nn::functional;

namespace {



Tensor i64(std::vector<int64_t> v) { return tensor(v); }

/// Seeded log-probabilities [shape] (log_softmax over the last dim) in float64, then `dt`.
Tensor log_probs(IntArrayRef shape, uint64_t seed, DType dt) {
  manual_seed(seed);
  return log_softmax(randn(shape, kFloat64) * 2.0, static_cast<int64_t>(shape.size()) - 1).to(dt);
}


// CUDA's exp and log differ from glibc's by an ulp or two: float32 results differ in the last
// digits (more over long recursions), float64 ones far below these tolerances.
double rtol_of(DType t) { return t == kFloat32 ? 1e-4 : 1e-11; }
double atol_of(DType t) { return t == kFloat32 ? 1e-4 : 1e-11; }

struct CtcCase {
  std::string name;
  Tensor lp;  // the leaf (CPU), any dtype of float32 / float64
  /// The log_probs passed to ctc_loss, made from the leaf (a view for non-contiguous cases).
  std::function<Tensor(const Tensor&)> layout = [](const Tensor& x) { return x; };
  Tensor targets;
  std::vector<int64_t> il, tl;
  int64_t blank = 0;
};

// Runs the case on both devices with each reduction and zero_infinity, and compares the loss and
// the gradient of sum(w * loss) (loss summed for the scalar reductions).
void check_case(const CtcCase& c, double rtol, double atol,
                const std::vector<bool>& zero_infinity = {false, true}) {
  const int64_t n = c.layout(c.lp).dim() == 3 ? c.layout(c.lp).size(1) : 1;
  manual_seed(11);
  const Tensor w = (rand({n}, kFloat64) + 0.5).to(c.lp.dtype());
  for (const std::string reduction : {"none", "mean", "sum"}) {
    for (const bool zinf : zero_infinity) {
      const std::string what = c.name + " (" + std::string(dtype_name(c.lp.dtype())) +
                               ", reduction " + reduction + ", zero_infinity " +
                               (zinf ? "true" : "false") + ")";
      const Tensor xc = c.lp.detach().clone().requires_grad_();
      const Tensor xg = c.lp.detach().to(kGpu).requires_grad_();
      const Tensor lc = F::ctc_loss(c.layout(xc), c.targets, c.il, c.tl, c.blank, reduction, zinf);
      const Tensor lg = F::ctc_loss(c.layout(xg), c.targets, c.il, c.tl, c.blank, reduction, zinf);
      expect_matches(lg, lc, rtol, atol, what + ": loss");
      if (reduction == "none" && lc.dim() == 1) {
        (lc * w).sum().backward();
        (lg * w.to(kGpu)).sum().backward();
      } else {
        lc.sum().backward();
        lg.sum().backward();
      }
      ASSERT_TRUE(xg.grad().defined()) << what;
      expect_matches(xg.grad(), xc.grad(), rtol, atol, what + ": gradient");
    }
  }
}

}  // namespace

// ---- everywhere

TEST(CudaCtc, WithoutAGpuLogProbsCannotGoThere) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available: covered by the GPU tests";
  const Tensor lp = log_probs({3, 1, 2}, 1, kFloat32);
  EXPECT_THAT(error_of([&] { (void)lp.to(kGpu); }),
              AnyOf(HasSubstr("ignis was built without a CUDA backend"),
                    HasSubstr("no GPU is available (")));
  // The CPU oracle itself still runs: one label in three frames of two classes.
  const Tensor loss =
      F::ctc_loss(lp, i64({1}), std::vector<int64_t>{3}, std::vector<int64_t>{1}, 0, "sum", false);
  EXPECT_TRUE(std::isfinite(loss.item<double>()));
}

// ---- on the GPU

TEST(CudaCtc, PaddedTargetsWithRepeatedLabelsAndEmptySequences) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    CtcCase c;
    c.name = "padded";
    c.lp = log_probs({7, 6, 4}, 1, dt);
    // b0: a repeated label (needs a blank between), b1: an empty target, b2: an empty input and
    // target (loss 0), b3: an empty input with a label (inf), b4: 1 1 1 in 4 frames (impossible:
    // needs 5), b5: input_length < T.
    c.targets = i64({1, 2, 2, 1, 1, 1, 0, 0, 0, 3, 0, 0, 1, 1, 1, 3, 2, 3}).reshape({6, 3});
    c.il = {7, 6, 0, 0, 4, 5};
    c.tl = {3, 0, 0, 1, 3, 3};
    check_case(c, rtol_of(dt), atol_of(dt));
  }
}

TEST(CudaCtc, ConcatenatedTargetsAndAnotherBlank) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    CtcCase c;
    c.name = "concatenated, blank 4";
    c.lp = log_probs({6, 4, 5}, 2, dt);
    c.targets = i64({1, 3, 3, 0, 2, 2, 1, 0});  // [1 3] [] [3 0 2 2] [1 0]
    c.il = {6, 5, 6, 2};
    c.tl = {2, 0, 4, 2};
    c.blank = 4;
    check_case(c, rtol_of(dt), atol_of(dt));
  }
}

TEST(CudaCtc, ImpossibleAlignmentIsInfiniteUnlessZeroInfinity) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor lp = log_probs({4, 2, 3}, 3, dt);
    const Tensor targets = i64({1, 1, 1, 2, 1, 0}).reshape({2, 3});  // 1 1 1 cannot fit 4 frames
    for (const bool zinf : {false, true}) {
      const Tensor xg = lp.to(kGpu).requires_grad_();
      const Tensor loss = F::ctc_loss(xg, targets, std::vector<int64_t>{4, 4},
                                      std::vector<int64_t>{3, 2}, 0, "none", zinf)
                              .cpu();
      if (zinf) {
        EXPECT_EQ(loss.to(kFloat64).data_ptr<double>()[0], 0.0);
      } else {
        EXPECT_EQ(loss.to(kFloat64).data_ptr<double>()[0], std::numeric_limits<double>::infinity());
      }
      EXPECT_TRUE(std::isfinite(loss.to(kFloat64).data_ptr<double>()[1]));
    }
    CtcCase c;
    c.name = "impossible";
    c.lp = lp;
    c.targets = targets;
    c.il = {4, 4};
    c.tl = {3, 2};
    check_case(c, rtol_of(dt), atol_of(dt));
  }
}

TEST(CudaCtc, ZeroInfinityZeroesOnlyTheInfiniteSequencesGradient) {
  REQUIRE_GPU();
  const Tensor lp = log_probs({4, 2, 3}, 4, kFloat64);
  const Tensor xg = lp.to(kGpu).requires_grad_();
  const Tensor targets = i64({1, 1, 1, 2, 1, 0}).reshape({2, 3});
  F::ctc_loss(xg, targets, std::vector<int64_t>{4, 4}, std::vector<int64_t>{3, 2}, 0, "sum", true)
      .backward();
  const Tensor g = xg.grad().cpu();
  EXPECT_EQ(g.select(1, 0).abs().sum().item<double>(), 0.0);
  EXPECT_GT(g.select(1, 1).abs().sum().item<double>(), 0.0);
}

TEST(CudaCtc, NonContiguousLogProbs) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64}) {
    CtcCase t;  // a [N, T, C] leaf seen as [T, N, C]
    t.name = "transposed";
    t.lp = log_probs({3, 6, 5}, 5, dt);
    t.layout = [](const Tensor& x) { return x.transpose(0, 1); };
    t.targets = i64({1, 3, 3, 0, 2, 2, 4, 0, 1, 1, 0, 0}).reshape({3, 4});
    t.il = {6, 5, 6};
    t.tl = {3, 3, 2};
    check_case(t, rtol_of(dt), atol_of(dt));

    CtcCase s;  // every other class of a [T, N, 2C] leaf, and a narrowed batch
    s.name = "class stride 2, narrowed batch";
    s.lp = log_probs({8, 4, 12}, 6, dt);
    s.layout = [](const Tensor& x) { return x.slice(2, 0, 12, 2).narrow(1, 1, 2); };
    s.targets = i64({5, 5, 1, 5, 3, 3, 3, 0}).reshape({2, 4});
    s.il = {8, 7};
    s.tl = {4, 3};
    check_case(s, rtol_of(dt), atol_of(dt));
  }
}

TEST(CudaCtc, UnbatchedLogProbs) {
  REQUIRE_GPU();
  CtcCase c;
  c.name = "unbatched [T, C]";
  c.lp = log_probs({6, 4}, 7, kFloat64);
  c.targets = i64({1, 2, 2});
  c.il = {6};
  c.tl = {3};
  check_case(c, rtol_of(kFloat64), atol_of(kFloat64));
}

// 2S + 1 = 301 states and 300 classes: more than a block's 256 threads, so the kernels loop over
// both in chunks; labels repeat (chains of several states per class).
TEST(CudaCtc, LongTargetsAndManyClasses) {
  REQUIRE_GPU();
  manual_seed(8);
  const int64_t t_max = 330, s = 150, classes = 300;
  Tensor targets = randint(1, 6, {2, s});  // few distinct labels: long chains, repeats
  targets = cat({targets, randint(1, classes, {1, s})}, 0);
  for (DType dt : {kFloat32, kFloat64}) {
    CtcCase c;
    c.name = "long targets";
    c.lp = log_probs({t_max, 3, classes}, 9, dt);
    c.targets = targets;
    c.il = {t_max, t_max - 7, t_max};
    c.tl = {s, s - 20, s};
    // Losses of ~2000: float32's rounding differences accumulate over 330 steps, and the gradient
    // exp(lcab + nll - lp) amplifies those of lcab + nll (each ~2000, an ulp of 1e-4).
    check_case(c, dt == kFloat32 ? 1e-3 : 1e-10, dt == kFloat32 ? 1e-2 : 1e-9, {false});
  }
}

TEST(CudaCtc, ManySequences) {
  REQUIRE_GPU();
  manual_seed(10);
  const int64_t n = 700, t_max = 20, s = 6;
  std::vector<int64_t> il(n), tl(n);
  for (int64_t b = 0; b < n; ++b) {
    il[b] = t_max - b % 5;
    tl[b] = b % (s + 1);
  }
  for (DType dt : {kFloat32, kFloat64}) {
    CtcCase c;
    c.name = "700 sequences";
    c.lp = log_probs({t_max, n, 9}, 12, dt);
    c.targets = randint(1, 9, {n, s});
    c.il = il;
    c.tl = tl;
    check_case(c, dt == kFloat32 ? 1e-4 : 1e-10, dt == kFloat32 ? 1e-4 : 1e-10, {false});
  }
}

// Targets and lengths given as GPU tensors (int32 and int64) are read on the host by the front
// end; the result is the same as with host values.
TEST(CudaCtc, TargetsAndLengthsOnTheGpu) {
  REQUIRE_GPU();
  const Tensor lp = log_probs({5, 2, 4}, 13, kFloat64);
  const Tensor targets = i64({1, 2, 2, 3, 0, 0}).reshape({2, 3});
  const Tensor ref = F::ctc_loss(lp, targets, std::vector<int64_t>{5, 4},
                                 std::vector<int64_t>{3, 1}, 0, "none", false);
  for (DType it : {kInt32, kInt64}) {
    const Tensor got = F::ctc_loss(lp.to(kGpu), targets.to(it).to(kGpu), i64({5, 4}).to(kGpu),
                                   i64({3, 1}).to(it).to(kGpu), 0, "none", false);
    expect_matches(got, ref, 1e-11, 1e-11, "targets of " + std::string(dtype_name(it)));
  }
}

TEST(CudaCtc, GradcheckThroughTheGpuKernels) {
  REQUIRE_GPU();
  manual_seed(14);
  const Tensor x = randn({5, 3, 4}, kFloat64).requires_grad_();  // raw scores on the CPU
  const Tensor targets = i64({1, 2, 2, 3, 0, 0, 1, 1, 0}).reshape({3, 3});
  for (const std::string reduction : {"none", "mean"}) {
    auto fn = [&](const autograd::variable_list& in) -> autograd::variable_list {
      const Tensor lp = log_softmax(in[0].to(kGpu), 2);
      return {F::ctc_loss(lp, targets, std::vector<int64_t>{5, 4, 5}, std::vector<int64_t>{3, 1, 2},
                          0, reduction, false)
                  .cpu()};
    };
    EXPECT_TRUE(autograd::gradcheck(fn, {x})) << reduction;
  }
}

TEST(CudaCtc, BadLabelsOnTheGpuGiveTheCpusMessages) {
  REQUIRE_GPU();
  const Tensor lp = log_probs({3, 2, 4}, 15, kFloat32);
  auto message = [&](const Tensor& lp_on, const Tensor& targets) {
    return error_of([&] {
      F::ctc_loss(lp_on, targets, std::vector<int64_t>{3, 3}, std::vector<int64_t>{3, 1}, 0, "mean",
                  false);
    });
  };
  const Tensor out_of_range = i64({1, 5, 3, 1, 0, 0}).reshape({2, 3});
  const Tensor blank = i64({1, 0, 3, 1, 0, 0}).reshape({2, 3});
  for (const Tensor& t : {out_of_range, blank}) {
    const std::string cpu = message(lp, t);
    EXPECT_EQ(message(lp.to(kGpu), t.to(kGpu)), cpu);
    EXPECT_EQ(message(lp.to(kGpu), t), cpu);
  }
  EXPECT_THAT(message(lp.to(kGpu), out_of_range.to(kGpu)),
              HasSubstr("ctc_loss: target label 5 of sequence 0 (position 1) is out of range for "
                        "4 classes"));
  EXPECT_THAT(message(lp.to(kGpu), blank.to(kGpu)),
              HasSubstr("ctc_loss: target label 0 of sequence 0 (position 1) is the blank label"));
}
