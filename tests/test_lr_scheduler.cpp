// Learning-rate schedulers against the sequences PyTorch's recursive (chainable) formulas give,
// worked out by hand or in float64 from the formulas quoted with each test.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <memory>
#include <numbers>
#include <string>
#include <vector>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::optim;
using ::testing::HasSubstr;

namespace {

// An optimizer over one parameter per group, with the given learning rates.
struct Rig {
  std::vector<Tensor> params;
  std::unique_ptr<SGD> opt;
  explicit Rig(std::vector<double> lrs, double momentum = 0) {
    std::vector<ParamGroup> groups;
    for (double lr : lrs) {
      params.push_back(tensor({1.0}).requires_grad_());
      groups.emplace_back(std::vector<Tensor>{params.back()},
                          SGDOptions(lr).momentum(momentum));
    }
    opt = std::make_unique<SGD>(groups, SGDOptions(0.1));
  }
  double lr(size_t g = 0) const { return opt->param_groups()[g].lr(); }
};

// The lr after construction, then after each of expected.size() - 1 calls of step().
template <class S>
void expect_sequence(Rig& s, S& sched, const std::vector<double>& expected, double tol,
                     const std::string& what, size_t group = 0) {
  for (size_t k = 0; k < expected.size(); ++k) {
    if (k > 0) sched.step();
    EXPECT_NEAR(s.lr(group), expected[k], tol) << what << " after " << k << " steps";
    EXPECT_NEAR(sched.get_last_lr()[group], expected[k], tol) << what << " get_last_lr";
  }
}

}  // namespace

TEST(StepLR, DecaysEveryStepSize) {
  Rig s({1.0});
  StepLR sched(*s.opt, /*step_size=*/3, /*gamma=*/0.5);
  expect_sequence(s, sched, {1, 1, 1, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.125}, 0, "StepLR");
  EXPECT_EQ(sched.last_epoch(), 9);
  EXPECT_EQ(sched.closed_form_lr()->at(0), 0.125);  // 1 * 0.5^(9 / 3)
}

TEST(MultiStepLR, RepeatedMilestonesCountTwice) {
  Rig s({1.0});
  MultiStepLR sched(*s.opt, {5, 2, 5}, 0.1);
  // lr * 0.1 at epoch 2, * 0.1^2 at epoch 5.
  expect_sequence(s, sched, {1, 1, 0.1, 0.1, 0.1, 0.001, 0.001, 0.001}, 1e-17, "MultiStepLR");
}

TEST(ConstantLR, FactorUntilTotalIters) {
  Rig s({0.2});
  ConstantLR sched(*s.opt, 0.5, 3);
  expect_sequence(s, sched, {0.1, 0.1, 0.1, 0.2, 0.2, 0.2}, 1e-17, "ConstantLR");
}

TEST(LinearLR, WarmUp) {
  Rig s({0.1});
  LinearLR sched(*s.opt, 0.25, 1.0, 4);
  // Recursive form: lr *= 1 + (end - start) / (total * start + (epoch - 1) * (end - start)),
  // i.e. 0.025 -> 0.025 * (1 + 0.75 / 1) = 0.04375 -> * (1 + 0.75 / 1.75) = 0.0625 ...
  expect_sequence(s, sched, {0.025, 0.04375, 0.0625, 0.08125, 0.1, 0.1, 0.1}, 1e-16, "LinearLR");
  // The closed form at the same epoch agrees.
  EXPECT_NEAR(sched.closed_form_lr()->at(0), 0.1, 1e-16);
}

TEST(LinearLR, Decay) {
  Rig s({0.5});
  LinearLR sched(*s.opt, 1.0, 0.1, 3);
  expect_sequence(s, sched, {0.5, 0.35, 0.2, 0.05, 0.05, 0.05}, 1e-16, "LinearLR decay");
}

TEST(ExponentialLR, EveryGroup) {
  Rig s({0.5, 2.0});
  ExponentialLR sched(*s.opt, 0.9);
  // Recursive: each step multiplies the current lr (0.5 * 0.9 * 0.9 ...), not base * 0.9^n.
  expect_sequence(s, sched, {0.5, 0.45, 0.405, 0.36450000000000005, 0.32805000000000006}, 0,
                  "ExponentialLR g0");
  EXPECT_EQ(sched.get_last_lr()[1], 1.3122000000000003);
  EXPECT_NEAR(sched.closed_form_lr()->at(1), 2.0 * std::pow(0.9, 4), 1e-15);
}

TEST(CosineAnnealingLR, RecursiveFormPastTMax) {
  Rig s({1.0});
  CosineAnnealingLR sched(*s.opt, /*T_max=*/5, /*eta_min=*/0.1);
  // Exact float64 values of PyTorch's recursive form; past T_max the rate climbs back up
  // (the branch at (epoch - 1 - T_max) % (2 T_max) == 0 handles the cosine's minimum).
  const std::vector<double> expected = {
      1.0, 0.9140576474687263, 0.6890576474687263, 0.41094235253127365, 0.1859423525312737,
      0.1, 0.18594235253127367, 0.41094235253127387, 0.6890576474687268, 0.9140576474687271,
      1.0000000000000009, 0.9140576474687274, 0.689057647468727};
  expect_sequence(s, sched, expected, 1e-15, "CosineAnnealingLR");
  // Closed form: eta_min + (base - eta_min) * (1 + cos(pi * 12 / 5)) / 2.
  EXPECT_NEAR(sched.closed_form_lr()->at(0),
              0.1 + 0.9 * (1 + std::cos(std::numbers::pi * 12 / 5)) / 2, 1e-15);
}

TEST(CosineAnnealingLR, StepEpochUsesTheClosedForm) {
  Rig s({1.0});
  CosineAnnealingLR sched(*s.opt, 10, 0.0);
  sched.step(5);
  EXPECT_NEAR(s.lr(), 0.5, 1e-15);
  EXPECT_EQ(sched.last_epoch(), 5);
  sched.step();  // continues recursively from there
  EXPECT_NEAR(s.lr(), (1 + std::cos(std::numbers::pi * 6 / 10)) / 2, 1e-15);
}

TEST(LambdaLR, PerGroupLambdas) {
  Rig s({1.0, 0.5});
  LambdaLR sched(*s.opt, std::vector<LambdaLR::Lambda>{[](int64_t e) { return 1.0 / (e + 1); },
                                                       [](int64_t e) { return 0.5 * e; }});
  EXPECT_EQ(s.lr(0), 1.0);
  EXPECT_EQ(s.lr(1), 0.0);
  sched.step();
  sched.step();
  EXPECT_NEAR(s.lr(0), 1.0 / 3, 1e-16);
  EXPECT_EQ(s.lr(1), 0.5);
}

TEST(OneCycleLR, CosineTwoPhasesWithMomentum) {
  Rig s({0.1}, /*momentum=*/0.9);
  OneCycleLR sched(*s.opt, /*max_lr=*/1.0, /*total_steps=*/10);
  // initial_lr = 1 / 25 = 0.04, rising to 1 over steps 0..2 (pct_start 0.3: phase end 2),
  // then annealing to 0.04 / 1e4 = 4e-6 at step 9; momentum goes 0.95 -> 0.85 -> 0.95.
  const std::vector<double> lrs = {0.04, 0.52, 1.0, 0.9504846320134737, 0.8117456539497631,
                                   0.6112620219362893, 0.38874197806371075, 0.18825834605023697,
                                   0.049519367986526286, 4e-06, 0.04951936798652623};
  const std::vector<double> moms = {0.95, 0.9, 0.85, 0.854951556604879, 0.8688255099070633,
                                    0.8888739533021842, 0.9111260466978157, 0.9311744900929366,
                                    0.945048443395121, 0.95, 0.945048443395121};
  for (size_t k = 0; k < lrs.size(); ++k) {
    if (k > 0) sched.step();
    EXPECT_NEAR(s.lr(), lrs[k], 1e-15) << "step " << k;
    EXPECT_NEAR(s.opt->param_groups()[0].options().get("momentum"), moms[k], 1e-15) << k;
  }
  EXPECT_EQ(s.opt->param_groups()[0].initial_lr, 0.04);
  EXPECT_THAT(error_of([&] { sched.step(); }),
              HasSubstr("OneCycleLR: tried to step 11 times; the specified number of total "
                        "steps is 10"));
}

TEST(OneCycleLR, LinearThreePhases) {
  Rig s({0.1}, 0.9);
  OneCycleLR sched(*s.opt, 0.5, 8, OneCycleLROptions().anneal_strategy("linear").three_phase(true)
                                       .pct_start(0.25));
  // Phases end at steps 1 (up to 0.5), 2 (back to 0.02), 7 (down to 2e-6).
  const std::vector<double> lrs = {0.02, 0.5, 0.020000000000000018, 0.016000399999999998,
                                   0.012000799999999999, 0.0080012, 0.0040015999999999975,
                                   1.9999999999985307e-06, -0.0039976000000000005};
  expect_sequence(s, sched, lrs, 1e-15, "OneCycleLR three phase");
  EXPECT_NEAR(s.opt->param_groups()[0].options().get("momentum"), 0.95, 1e-15);
}

TEST(OneCycleLR, CyclesAdamBeta1) {
  Tensor p = tensor({1.0}).requires_grad_();
  Adam adam(std::vector<Tensor>{p}, AdamOptions(1e-3).betas({0.9, 0.99}));
  OneCycleLR sched(adam, 1.0, 10);
  EXPECT_NEAR(adam.param_groups()[0].options().get("betas.0"), 0.95, 1e-15);
  sched.step();
  EXPECT_NEAR(adam.param_groups()[0].options().get("betas.0"), 0.9, 1e-15);
  EXPECT_EQ(adam.param_groups()[0].options().get("betas.1"), 0.99);
}

TEST(OneCycleLR, Errors) {
  Tensor p = tensor({1.0}).requires_grad_();
  Adagrad ada(std::vector<Tensor>{p});
  EXPECT_THAT(error_of([&] { OneCycleLR(ada, 1.0, 10); }),
              HasSubstr("must support momentum or beta1"));
  OneCycleLR ok(ada, 1.0, 10, OneCycleLROptions().cycle_momentum(false));
  EXPECT_NEAR(ada.param_groups()[0].lr(), 0.04, 1e-15);
  Rig s({0.1});
  EXPECT_THAT(error_of([&] { OneCycleLR(*s.opt, 1.0, 0); }),
              HasSubstr("expected a positive total_steps"));
  EXPECT_THAT(error_of([&] { OneCycleLR(*s.opt, 1.0, 10, OneCycleLROptions().pct_start(1.5)); }),
              HasSubstr("pct_start between 0 and 1"));
  EXPECT_THAT(error_of([&] {
                OneCycleLR(*s.opt, 1.0, 10, OneCycleLROptions().anneal_strategy("cosine"));
              }),
              HasSubstr("anneal_strategy must be one of 'cos' or 'linear'"));
}

TEST(ChainedScheduler, EffectsMultiply) {
  Rig s({1.0});
  auto constant = std::make_shared<ConstantLR>(*s.opt, 0.1, 2);
  auto expo = std::make_shared<ExponentialLR>(*s.opt, 0.9);
  ChainedScheduler sched({constant, expo});
  // Step 1: constant keeps 0.1, exponential -> 0.09; step 2: constant undoes its factor
  // (0.09 / 0.1 = 0.9), exponential -> 0.81; then * 0.9 each step.
  expect_sequence(s, sched, {0.1, 0.09, 0.81, 0.729, 0.6561, 0.59049}, 1e-15, "Chained");
}

TEST(SequentialLR, SwitchesAtMilestones) {
  Rig s({1.0});
  auto constant = std::make_shared<ConstantLR>(*s.opt, 0.1, 2);
  auto expo = std::make_shared<ExponentialLR>(*s.opt, 0.9);
  SequentialLR sched(*s.opt, {constant, expo}, {2});
  // At the milestone the exponential scheduler restarts from its epoch 0 (closed form: base).
  expect_sequence(s, sched, {0.1, 0.1, 1.0, 0.9, 0.81, 0.729}, 1e-15, "Sequential");
}

TEST(SequentialLR, WarmUpThenCosine) {
  Rig s({0.1});
  auto warm = std::make_shared<LinearLR>(*s.opt, 0.1, 1.0, 3);
  auto cosine = std::make_shared<CosineAnnealingLR>(*s.opt, 4, 0.01);
  SequentialLR sched(*s.opt, {warm, cosine}, {3});
  const std::vector<double> expected = {0.01, 0.04, 0.07, 0.1, 0.08681980515339464, 0.055,
                                        0.023180194846605363, 0.01, 0.023180194846605363,
                                        0.055};
  expect_sequence(s, sched, expected, 1e-15, "warm-up + cosine");
}

TEST(SequentialLR, Errors) {
  Rig s({1.0}), other({1.0});
  auto a = std::make_shared<ConstantLR>(*s.opt, 0.1, 2);
  auto b = std::make_shared<ExponentialLR>(*s.opt, 0.9);
  auto c = std::make_shared<ExponentialLR>(*other.opt, 0.9);
  EXPECT_THAT(error_of([&] { SequentialLR(*s.opt, {a, b}, {2, 3}); }),
              HasSubstr("one more than the number of milestones, but got 2 schedulers and 2 "
                        "milestones"));
  EXPECT_THAT(error_of([&] { SequentialLR(*s.opt, {a, c}, {2}); }),
              HasSubstr("scheduler 1 (ExponentialLR) has a different one"));
  EXPECT_THAT(error_of([&] { SequentialLR(*s.opt, {}, {}); }),
              HasSubstr("expects at least one scheduler"));
  EXPECT_THAT(error_of([&] { ChainedScheduler({a, c}); }),
              HasSubstr("ChainedScheduler: expects all schedulers to belong to the same "
                        "optimizer"));
}

TEST(ReduceLROnPlateau, PatienceAndCooldown) {
  Rig s({1.0});
  ReduceLROnPlateau sched(*s.opt, ReduceLROnPlateauOptions()
                                      .factor(0.5)
                                      .patience(2)
                                      .cooldown(1)
                                      .threshold(0)
                                      .threshold_mode("abs")
                                      .min_lr(0.2));
  // epoch: metric -> bad epochs -> lr
  //  1: 10 best              1
  //  2:  9 best              1
  //  3,4: 9 bad 1, 2         1
  //  5:  9 bad 3 > 2: reduce 0.5, cooldown 1
  //  6:  8 best; cooldown ends (counter 0)
  //  7,8: bad 1, 2; 9: bad 3: reduce 0.25, cooldown 1
  // 10: bad, ignored in cooldown; 11,12: bad 1, 2; 13: reduce to max(0.125, min_lr) = 0.2
  // 14-16: bad 1..3 -> 0.2 * 0.5 clipped to 0.2: no change
  const std::vector<double> metrics = {10, 9, 9, 9, 9, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8, 8};
  const std::vector<double> lrs = {1, 1, 1, 1, 0.5, 0.5, 0.5, 0.5, 0.25, 0.25, 0.25, 0.25,
                                   0.2, 0.2, 0.2, 0.2};
  for (size_t k = 0; k < metrics.size(); ++k) {
    sched.step(metrics[k]);
    EXPECT_EQ(s.lr(), lrs[k]) << "epoch " << k + 1;
    EXPECT_EQ(sched.get_last_lr()[0], lrs[k]);
  }
  EXPECT_EQ(sched.best(), 8);
  EXPECT_EQ(sched.last_epoch(), 16);
}

TEST(ReduceLROnPlateau, MaxModeRelativeThreshold) {
  Rig s({1.0});
  ReduceLROnPlateau sched(*s.opt,
                          ReduceLROnPlateauOptions().mode("max").patience(0).threshold(0.1));
  sched.step(1.0);   // best 1
  sched.step(1.05);  // not > 1 * 1.1: bad 1 > 0: reduce
  EXPECT_NEAR(s.lr(), 0.1, 1e-17);
  sched.step(1.2);  // > 1.1: better
  EXPECT_NEAR(s.lr(), 0.1, 1e-17);
  EXPECT_EQ(sched.best(), 1.2);
  EXPECT_EQ(sched.num_bad_epochs(), 0);
}

TEST(ReduceLROnPlateau, Errors) {
  Rig s({1.0, 0.5});
  EXPECT_THAT(error_of([&] { ReduceLROnPlateau(*s.opt, ReduceLROnPlateauOptions().factor(1.0)); }),
              HasSubstr("factor should be < 1.0"));
  EXPECT_THAT(error_of([&] { ReduceLROnPlateau(*s.opt, ReduceLROnPlateauOptions().mode("up")); }),
              HasSubstr("mode 'up' is unknown"));
  EXPECT_THAT(error_of([&] {
                ReduceLROnPlateau(*s.opt, ReduceLROnPlateauOptions().threshold_mode("x"));
              }),
              HasSubstr("threshold mode 'x' is unknown"));
  EXPECT_THAT(error_of([&] {
                ReduceLROnPlateau(*s.opt, ReduceLROnPlateauOptions().min_lr({0.1, 0.2, 0.3}));
              }),
              HasSubstr("expected 2 min_lrs"));
}

TEST(SchedulerErrors, InvalidArguments) {
  Rig s({1.0});
  EXPECT_THAT(error_of([&] { StepLR(*s.opt, 0); }),
              HasSubstr("StepLR: step_size must be positive"));
  EXPECT_THAT(error_of([&] { LinearLR(*s.opt, 0.0); }),
              HasSubstr("starting multiplicative factor expected to be greater than 0"));
  EXPECT_THAT(error_of([&] { LinearLR(*s.opt, 0.5, 1.5); }),
              HasSubstr("ending multiplicative factor expected to be between 0 and 1"));
  EXPECT_THAT(error_of([&] { ConstantLR(*s.opt, 2.0); }),
              HasSubstr("factor expected to be between 0 and 1"));
  EXPECT_THAT(error_of([&] { CosineAnnealingLR(*s.opt, 0); }), HasSubstr("T_max must be positive"));
  Rig fresh({1.0});
  EXPECT_THAT(error_of([&] { StepLR(*fresh.opt, 2, 0.1, /*last_epoch=*/5); }),
              HasSubstr("initial_lr is not set in param_groups[0]"));
}

TEST(SchedulerStateDict, ResumeContinuesIdentically) {
  // Train 4 epochs, save optimizer + scheduler, restore both into fresh objects, continue.
  Rig a({1.0});
  CosineAnnealingLR sa(*a.opt, 7, 0.05);
  for (int i = 0; i < 4; ++i) sa.step();
  OptimizerStateDict opt_state = a.opt->state_dict();
  OptimizerStateDict sched_state = sa.state_dict();

  Rig b({1.0});
  CosineAnnealingLR sb(*b.opt, 7, 0.05);
  b.opt->load_state_dict(opt_state);
  sb.load_state_dict(sched_state);
  EXPECT_EQ(sb.last_epoch(), 4);
  EXPECT_EQ(b.lr(), a.lr());
  for (int i = 0; i < 6; ++i) {
    sa.step();
    sb.step();
    EXPECT_EQ(a.lr(), b.lr()) << i;
  }
  EXPECT_EQ(b.opt->param_groups()[0].initial_lr, 1.0);  // saved with the optimizer
}

TEST(SchedulerStateDict, NestedAndPlateau) {
  Rig a({1.0});
  auto w = std::make_shared<LinearLR>(*a.opt, 0.5, 1.0, 2);
  auto e = std::make_shared<ExponentialLR>(*a.opt, 0.5);
  SequentialLR seq(*a.opt, {w, e}, {2});
  seq.step();
  OptimizerStateDict sd = seq.state_dict();
  bool found = false;
  for (auto& [k, v] : sd) found |= k == "schedulers.1.last_epoch";
  EXPECT_TRUE(found);
  seq.step();
  seq.step();
  const double lr_after = a.lr();
  seq.load_state_dict(sd);
  a.opt->param_groups()[0].set_lr(seq.get_last_lr()[0]);
  seq.step();
  seq.step();
  EXPECT_EQ(a.lr(), lr_after);

  Rig p({1.0});
  ReduceLROnPlateau plateau(*p.opt, ReduceLROnPlateauOptions().patience(1));
  plateau.step(3);
  plateau.step(4);
  OptimizerStateDict psd = plateau.state_dict();
  ReduceLROnPlateau restored(*p.opt, ReduceLROnPlateauOptions().patience(1));
  restored.load_state_dict(psd);
  EXPECT_EQ(restored.best(), 3);
  EXPECT_EQ(restored.num_bad_epochs(), 1);
  restored.step(5);  // second bad epoch > patience 1: reduce
  EXPECT_NEAR(p.lr(), 0.1, 1e-17);

  psd.emplace_back("bogus", scalar_tensor(1.0));
  EXPECT_THAT(error_of([&] { restored.load_state_dict(psd); }),
              HasSubstr("ReduceLROnPlateau.load_state_dict: unexpected key 'bogus'"));
  OptimizerStateDict bad = StepLR(*p.opt, 2).state_dict();
  bad.pop_back();
  EXPECT_THAT(error_of([&] { StepLR(*p.opt, 2).load_state_dict(bad); }),
              HasSubstr("StepLR.load_state_dict: missing key 'last_lr'"));
}
