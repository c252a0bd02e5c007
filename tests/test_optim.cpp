// Optimizers against hand-computed updates of PyTorch's formulas, on three layouts (float64 and
// float32 contiguous: the fused kernels; a strided float64 view: the generic tensor-op path),
// plus groups, zero_grad, state_dict round trips, error messages and convergence.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <string>
#include <vector>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;
using Steps = std::vector<std::vector<double>>;

namespace {

// Three parameters, three steps of known gradients.
const std::vector<double> kP0 = {1.0, -2.0, 0.5};
const Steps kGrads = {{0.5, 0.1, -0.3}, {0.2, -0.3, 0.4}, {-0.1, 0.25, 0.05}};

enum class Layout { Fused64, Fused32, Strided64 };

std::vector<double> values(const Tensor& t) {
  Tensor c = t.detach().to(kFloat64).contiguous();
  const double* d = c.data_ptr<double>();
  return std::vector<double>(d, d + c.numel());
}

Tensor make_param(const std::vector<double>& v, Layout layout) {
  Tensor p;
  if (layout == Layout::Strided64) {
    // Every other element of a larger buffer: a non-contiguous leaf.
    std::vector<double> buf;
    for (double x : v) {
      buf.push_back(x);
      buf.push_back(99.0);
    }
    p = tensor(buf, kFloat64).slice(0, 0, std::nullopt, 2);
    EXPECT_FALSE(p.is_contiguous());
  } else {
    p = tensor(v, layout == Layout::Fused32 ? kFloat32 : kFloat64);
  }
  p.requires_grad_();
  return p;
}

void set_grad(Tensor p, const std::vector<double>& g) {
  p.mutable_grad() = tensor(g, p.dtype());
}

void expect_values(const Tensor& t, const std::vector<double>& expected, double tol,
                   const std::string& what) {
  std::vector<double> got = values(t);
  ASSERT_EQ(got.size(), expected.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    EXPECT_NEAR(got[i], expected[i], tol * std::max(1.0, std::abs(expected[i])))
        << what << " element " << i;
  }
}

// Runs the three steps on every layout and compares with the expected parameters.
template <class Opt, class Options>
void check_steps(const Options& options, const Steps& expected, const std::string& what) {
  for (Layout layout : {Layout::Fused64, Layout::Fused32, Layout::Strided64}) {
    const double tol = layout == Layout::Fused32 ? 2e-6 : 1e-13;
    const std::string name = what + (layout == Layout::Fused64   ? " [float64]"
                                     : layout == Layout::Fused32 ? " [float32]"
                                                                 : " [strided float64]");
    Tensor p = make_param(kP0, layout);
    Opt opt(std::vector<Tensor>{p}, options);
    for (size_t k = 0; k < kGrads.size(); ++k) {
      set_grad(p, kGrads[k]);
      opt.step();
      expect_values(p, expected[k], tol, name + " step " + std::to_string(k + 1));
    }
  }
}

}  // namespace

// ---- update formulas (expected values: PyTorch's formulas evaluated in float64 by hand / by an
// independent script; the first step of each is checked by hand in the comment)

TEST(SGD, Plain) {
  // p1 = p0 - 0.1 * g1 = {1 - 0.05, -2 - 0.01, 0.5 + 0.03}
  check_steps<optim::SGD>(optim::SGDOptions(0.1),
                          {{0.95, -2.01, 0.53}, {0.93, -1.98, 0.49}, {0.94, -2.005, 0.485}},
                          "sgd");
}

// LibTorch's spelling: a plain learning rate converts to the options.
TEST(SGD, TakesAPlainLearningRate) {
  Tensor p = tensor({1.0, 2.0}).requires_grad_(true);
  optim::SGD opt({p}, 0.5);
  (p * p).sum().backward();
  opt.step();
  EXPECT_EQ(vals(p), (std::vector<double>{0.0, 0.0}));  // p - 0.5 * 2p
  Tensor q = tensor({1.0}).requires_grad_(true);
  optim::Adam adam({q}, 0.1);
  EXPECT_DOUBLE_EQ(adam.param_groups()[0].options().get_lr(), 0.1);
}

TEST(SGD, MomentumDampeningWeightDecay) {
  // step 1: g = 0.5 + 0.01 * 1 = 0.51, buf = g, p = 1 - 0.051 = 0.949
  // step 2: g = 0.2 + 0.01 * 0.949 = 0.20949, buf = 0.9 * 0.51 + 0.9 * g = 0.647541,
  //         p = 0.949 - 0.0647541 = 0.8842459
  check_steps<optim::SGD>(
      optim::SGDOptions(0.1).momentum(0.9).dampening(0.1).weight_decay(0.01),
      {{0.949, -2.008, 0.5295},
       {0.8842458999999999, -1.9863928, 0.51957345},
       {0.83417138869, -1.98765856648, 0.505671938895}},
      "sgd momentum");
}

TEST(SGD, Nesterov) {
  // step 1: g = 0.5 + 0.1 = 0.6, buf = 0.6, g' = 0.6 + 0.9 * 0.6 = 1.14, p = 1 - 0.114 = 0.886
  check_steps<optim::SGD>(
      optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.1),
      {{0.886, -1.981, 0.5475},
       {0.782566, -1.8782610000000002, 0.4813475},
       {0.7195806459999999, -1.8424379410000002, 0.4440921475}},
      "sgd nesterov");
}

TEST(SGD, Maximize) {
  check_steps<optim::SGD>(optim::SGDOptions(0.1).momentum(0.5).maximize(true),
                          {{1.05, -1.99, 0.47}, {1.095, -2.015, 0.495}, {1.1075, -2.0025, 0.5125}},
                          "sgd maximize");
}

TEST(Adam, Default) {
  // step 1: m = 0.05, v = 0.00025, step_size = 0.1 / 0.1 = 1,
  //         denom = sqrt(0.00025) / sqrt(0.001) + 1e-8 = 0.5 + 1e-8, p = 1 - 0.05 / denom
  check_steps<optim::Adam>(optim::AdamOptions(0.1),
                           {{0.900000002, -2.099999990000001, 0.5999999966666668},
                            {0.8101424839029282, -2.0505810088799348, 0.5806489563003092},
                            {0.7535255578069425, -2.060250960808799, 0.5594041667269937}},
                           "adam");
}

TEST(Adam, AmsgradWeightDecayBetas) {
  check_steps<optim::Adam>(
      optim::AdamOptions(0.1).betas({0.8, 0.9}).weight_decay(0.1).amsgrad(true),
      {{0.9000000016666667, -1.900000009999999, 0.5999999960000002},
       {0.8076978736347115, -1.8125434732984218, 0.5615291438691464},
       {0.7446720777556115, -1.7601949731727706, 0.5205757335382353}},
      "adam amsgrad");
}

TEST(Adam, Maximize) {
  check_steps<optim::Adam>(optim::AdamOptions(0.1).maximize(true),
                           {{1.099999998, -1.900000009999999, 0.4000000033333332},
                            {1.1898575160970717, -1.9494189911200654, 0.41935104369969073},
                            {1.2464744421930574, -1.9397490391912011, 0.4405958332730062}},
                           "adam maximize");
}

TEST(Adam, SmallBeta1UsesLerpFromTheFarEnd) {
  check_steps<optim::Adam>(optim::AdamOptions(0.1).betas({0.3, 0.999}),
                           {{0.900000002, -2.099999990000001, 0.5999999966666668},
                            {0.8292837303614761, -2.0071357507524037, 0.5325576133780006},
                            {0.8281457649997604, -2.0593676328599706, 0.49709044712052863}},
                           "adam beta1=0.3");
}

TEST(AdamW, DecoupledWeightDecay) {
  // step 1: p = 1 * (1 - 0.1 * 0.1) = 0.99, then the Adam step of -0.1 * 0.5 / (0.5 + 1e-8)
  check_steps<optim::AdamW>(optim::AdamWOptions(0.1).weight_decay(0.1),
                            {{0.890000002, -2.079999990000001, 0.5949999966666668},
                             {0.7912424838829282, -2.009781008979935, 0.5696989563336425},
                             {0.7267131329481132, -1.999353150819, 0.5427571771969906}},
                            "adamw");
}

TEST(AdamW, Amsgrad) {
  check_steps<optim::AdamW>(optim::AdamWOptions(0.1).weight_decay(0.01).amsgrad(true),
                            {{0.899000002, -2.097999990000001, 0.5994999966666668},
                             {0.8082434839009282, -2.0464830088899344, 0.5795494563036425},
                             {0.7508183143210415, -2.054106477809909, 0.5577251172740233}},
                            "adamw amsgrad");
}

TEST(RMSprop, Default) {
  // step 1: s = 0.01 * 0.25 = 0.0025, p = 1 - 0.01 * 0.5 / (0.05 + 1e-8)
  check_steps<optim::RMSprop>(optim::RMSpropOptions(0.01),
                              {{0.900000019999996, -2.0999999000000997, 0.5999999666666778},
                               {0.8626998346269039, -2.0050841304548706, 0.5198555927543966},
                               {0.881123036979054, -2.067312266138198, 0.5098377269867775}},
                              "rmsprop");
}

TEST(RMSprop, CenteredMomentumWeightDecay) {
  check_steps<optim::RMSprop>(
      optim::RMSpropOptions(0.01).centered(true).momentum(0.9).weight_decay(0.1),
      {{0.8994962353090928, -1.8994963194840784, 0.600503741121897},
       {0.7649619363972784, -1.7103562854977579, 0.602919415474378},
       {0.6474680082806772, -1.5558870721476243, 0.5843214738099695}},
      "rmsprop centered");
}

TEST(RMSprop, MaximizeAlpha) {
  check_steps<optim::RMSprop>(optim::RMSpropOptions(0.01).alpha(0.9).maximize(true),
                              {{1.031622774601684, -1.968377233398313, 0.46837722673164917},
                               {1.043908676183646, -1.9985283648257866, 0.49414349012793146},
                               {1.037565061789105, -1.9782239549028031, 0.49751909545359885}},
                              "rmsprop maximize");
}

TEST(Adagrad, Default) {
  // step 1: sum = 0.25, p = 1 - 0.1 * 0.5 / (0.5 + 1e-10)
  check_steps<optim::Adagrad>(optim::AdagradOptions(0.1),
                              {{0.90000000002, -2.0999999999, 0.5999999999666666},
                               {0.8628609323914862, -2.005131670124949, 0.5199999999826667},
                               {0.8811183509716584, -2.0671490374041683, 0.510049628082547}},
                              "adagrad");
}

TEST(Adagrad, LrDecayWeightDecayInitialAccumulator) {
  check_steps<optim::Adagrad>(
      optim::AdagradOptions(0.1).lr_decay(0.5).weight_decay(0.1).initial_accumulator_value(0.1),
      {{0.9115348263201052, -1.9698488655513144, 0.5620173672792196},
       {0.8852367489467027, -1.91439632117973, 0.5120598054122333},
       {0.88601409361366, -1.9192734853516398, 0.5038602184833247}},
      "adagrad lr_decay");
}

TEST(Adagrad, Maximize) {
  check_steps<optim::Adagrad>(optim::AdagradOptions(0.1).maximize(true),
                              {{1.09999999998, -1.9000000001, 0.40000000003333336},
                               {1.1371390676085138, -1.9948683298750514, 0.48000000001733334},
                               {1.1188816490283415, -1.9328509625958317, 0.48995037191745305}},
                              "adagrad maximize");
}

TEST(Adam, BFloat16TakesTheGenericPath) {
  // bfloat16 state and arithmetic (as PyTorch), so only roughly the float64 values.
  Tensor p = tensor(kP0, kBFloat16).requires_grad_();
  optim::Adam opt(std::vector<Tensor>{p}, optim::AdamOptions(0.1).amsgrad(true));
  for (size_t k = 0; k < kGrads.size(); ++k) {
    set_grad(p, kGrads[k]);
    opt.step();
  }
  EXPECT_EQ(opt.state_as<optim::AdamParamState>(p)->exp_avg.dtype(), kBFloat16);
  expect_values(p, {0.7535, -2.0603, 0.5594}, 2e-2, "bfloat16 adam");
}

// Large tensors (split over threads by the fused kernels) against the generic tensor-op path,
// up to float32 rounding (the paths may round a multiply-add differently).
template <class Opt, class Options>
void check_fused_matches_generic(const Options& opts, const std::string& what) {
  manual_seed(1);
  const int64_t n = 100003;
  Tensor init = randn({n});
  Tensor fused = init.clone().requires_grad_();
  Tensor strided_base = zeros({2 * n});
  Tensor strided = strided_base.slice(0, 0, std::nullopt, 2);
  strided.copy_(init);
  strided.requires_grad_();
  Opt a(std::vector<Tensor>{fused}, opts);
  Opt b(std::vector<Tensor>{strided}, opts);
  for (int k = 0; k < 3; ++k) {
    Tensor g = randn({n});
    fused.mutable_grad() = g;
    strided.mutable_grad() = g.clone();
    a.step();
    b.step();
  }
  std::vector<double> x = values(fused), y = values(strided);
  for (int64_t i = 0; i < n; ++i) {
    ASSERT_NEAR(x[i], y[i], 1e-5 * std::max(1.0, std::abs(y[i]))) << what << " element " << i;
  }
}

TEST(Optimizer, FusedKernelsMatchTheGenericPathOnLargeTensors) {
  check_fused_matches_generic<optim::SGD>(
      optim::SGDOptions(0.1).momentum(0.9).nesterov(true).weight_decay(0.01), "sgd");
  check_fused_matches_generic<optim::Adam>(optim::AdamOptions(0.01).amsgrad(true), "adam");
  check_fused_matches_generic<optim::AdamW>(optim::AdamWOptions(0.01), "adamw");
  check_fused_matches_generic<optim::RMSprop>(
      optim::RMSpropOptions(0.01).centered(true).momentum(0.5).weight_decay(0.1), "rmsprop");
  check_fused_matches_generic<optim::Adagrad>(optim::AdagradOptions(0.1).lr_decay(0.01),
                                               "adagrad");
}

// ---- behaviour

TEST(Optimizer, ParamGroupsWithTheirOwnOptions) {
  Tensor a = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor b = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor c = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  std::vector<optim::ParamGroup> groups;
  groups.emplace_back(std::vector<Tensor>{a});  // takes the defaults
  groups.emplace_back(std::vector<Tensor>{b}, optim::SGDOptions(0.01));
  groups.emplace_back(std::vector<Tensor>{c},
                      std::make_unique<optim::SGDOptions>(optim::SGDOptions(1.0).momentum(0.5)));
  optim::SGD opt(groups, optim::SGDOptions(0.1).momentum(0.9));
  ASSERT_EQ(opt.param_groups().size(), 3u);
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.1);
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.01);
  EXPECT_EQ(opt.param_groups()[2].lr(), 1.0);
  auto& o0 = static_cast<optim::SGDOptions&>(opt.param_groups()[0].options());
  EXPECT_EQ(o0.momentum(), 0.9);  // inherited
  EXPECT_EQ(opt.param_groups()[1].options().get("momentum"), 0.0);  // its own options
  for (Tensor p : {a, b, c}) set_grad(p, {1.0, -1.0});
  opt.step();
  expect_values(a, {0.9, 2.1}, 1e-15, "group 0");
  expect_values(b, {0.99, 2.01}, 1e-15, "group 1");
  expect_values(c, {0.0, 3.0}, 1e-15, "group 2");
  // lr through the base class, as schedulers set it.
  optim::Optimizer& base = opt;
  base.param_groups()[1].set_lr(0.5);
  EXPECT_EQ(o0.lr(), 0.1);
  EXPECT_EQ(static_cast<optim::SGDOptions&>(opt.param_groups()[1].options()).lr(), 0.5);
  EXPECT_EQ(opt.size(), 3u);
  EXPECT_EQ(opt.parameters().size(), 3u);
}

TEST(Optimizer, AddParamGroup) {
  Tensor a = tensor({1.0}, kFloat64).requires_grad_();
  Tensor b = tensor({1.0}, kFloat64).requires_grad_();
  optim::Adam opt(std::vector<Tensor>{a}, optim::AdamOptions(0.1));
  opt.add_param_group(optim::ParamGroup({b}));
  EXPECT_EQ(opt.param_groups()[1].lr(), 0.1);
  EXPECT_THAT(error_of([&] { opt.add_param_group(optim::ParamGroup({b})); }),
              HasSubstr("appears more than once"));
}

TEST(Optimizer, ParamsWithoutGradAreSkipped) {
  Tensor a = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor b = tensor({3.0}, kFloat64).requires_grad_();
  optim::Adam opt(std::vector<Tensor>{a, b}, optim::AdamOptions(0.1));
  set_grad(a, {1.0, 1.0});
  opt.step();
  expect_values(b, {3.0}, 0, "no grad");
  EXPECT_EQ(opt.state(b), nullptr);
  auto* st = opt.state_as<optim::AdamParamState>(a);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->step, 1);
  expect_values(st->exp_avg, {0.1, 0.1}, 1e-15, "exp_avg");
}

TEST(Optimizer, StepBumpsTheVersionAndKeepsTheStorage) {
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  const void* data = p.data_ptr();
  optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(0.1));
  set_grad(p, {1.0, 1.0});
  const uint32_t v = p._version();
  opt.step();
  EXPECT_GT(p._version(), v);
  EXPECT_EQ(p.data_ptr(), data);
  EXPECT_TRUE(p.requires_grad());
  EXPECT_TRUE(p.is_leaf());
}

TEST(Optimizer, ZeroGrad) {
  Tensor p = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(0.1));
  set_grad(p, {1.0, 1.0});
  Tensor g = p.grad();
  opt.zero_grad(/*set_to_none=*/false);
  ASSERT_TRUE(p.grad().defined());
  EXPECT_TRUE(p.grad().is_same(g));  // zeroed in place
  expect_values(p.grad(), {0.0, 0.0}, 0, "zeroed grad");
  opt.zero_grad();
  EXPECT_FALSE(p.grad().defined());
  opt.zero_grad();  // no gradient: nothing to do
  EXPECT_FALSE(p.grad().defined());
}

TEST(Optimizer, ClosureReturnsTheLoss) {
  Tensor p = tensor({3.0}, kFloat64).requires_grad_();
  optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(0.25));
  Tensor loss = opt.step([&] {
    opt.zero_grad();
    Tensor l = (p * p).sum();  // d/dp = 2p = 6
    l.backward();
    return l;
  });
  ASSERT_TRUE(loss.defined());
  EXPECT_DOUBLE_EQ(loss.item<double>(), 9.0);
  expect_values(p, {1.5}, 1e-15, "after closure step");
  EXPECT_FALSE(opt.step().defined());
}

TEST(Optimizer, GradientsComputedByBackward) {
  // p.grad from autograd, not set by hand: loss = sum(p^2) / 2, grad = p.
  Tensor p = tensor({1.0, -2.0}).requires_grad_();
  optim::SGD opt(std::vector<Tensor>{p}, optim::SGDOptions(0.5));
  for (int i = 0; i < 2; ++i) {
    opt.zero_grad();
    ((p * p).sum() * 0.5).backward();
    opt.step();
  }
  expect_values(p, {0.25, -0.5}, 1e-7, "halved twice");
}

TEST(Optimizer, AdagradCreatesStateWithTheOptimizer) {
  Tensor p = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  optim::Adagrad opt(std::vector<Tensor>{p},
                     optim::AdagradOptions(0.1).initial_accumulator_value(0.5));
  auto* st = opt.state_as<optim::AdagradParamState>(p);
  ASSERT_NE(st, nullptr);
  EXPECT_EQ(st->step, 0);
  expect_values(st->sum, {0.5, 0.5}, 0, "initial accumulator");
}

// ---- state_dict

TEST(OptimizerStateDict, NamesAndValues) {
  Tensor a = tensor({1.0, 2.0}, kFloat64).requires_grad_();
  Tensor b = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_();
  std::vector<optim::ParamGroup> groups{optim::ParamGroup({a}),
                                        optim::ParamGroup({b}, optim::AdamOptions(0.5))};
  optim::Adam opt(groups, optim::AdamOptions(0.1).betas({0.8, 0.9}).amsgrad(true));
  set_grad(b, {1.0, 1.0, 1.0, 1.0});
  b.mutable_grad() = b.grad().reshape({2, 2});
  opt.step();
  opt.step();
  optim::OptimizerStateDict sd = opt.state_dict();
  auto get = [&](const std::string& key) -> Tensor {
    for (auto& [k, v] : sd) {
      if (k == key) return v;
    }
    ADD_FAILURE() << "missing " << key;
    return Tensor();
  };
  // a had no gradient: no state. b is parameter 1.
  for (auto& [k, v] : sd) EXPECT_EQ(k.rfind("state.0.", 0), std::string::npos) << k;
  EXPECT_EQ(get("state.1.step").dtype(), kInt64);
  EXPECT_EQ(get("state.1.step").item<int64_t>(), 2);
  EXPECT_EQ(get("state.1.exp_avg").sizes().vec(), (std::vector<int64_t>{2, 2}));
  for (auto& [k, v] : sd) EXPECT_NE(k, "state.1.max_exp_avg_sq");  // group 1: amsgrad off
  EXPECT_EQ(get("param_groups.0.lr").dtype(), kFloat64);
  EXPECT_EQ(get("param_groups.0.lr").dim(), 0);
  EXPECT_DOUBLE_EQ(get("param_groups.0.lr").item<double>(), 0.1);
  EXPECT_DOUBLE_EQ(get("param_groups.0.betas.0").item<double>(), 0.8);
  EXPECT_DOUBLE_EQ(get("param_groups.0.amsgrad").item<double>(), 1.0);
  EXPECT_DOUBLE_EQ(get("param_groups.1.lr").item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(get("param_groups.1.amsgrad").item<double>(), 0.0);
  EXPECT_EQ(values(get("param_groups.0.params")), (std::vector<double>{0}));
  EXPECT_EQ(values(get("param_groups.1.params")), (std::vector<double>{1}));
  // A snapshot: later steps leave it alone.
  std::vector<double> before = values(get("state.1.exp_avg"));
  opt.step();
  EXPECT_EQ(values(get("state.1.exp_avg")), before);
}

// Steps opt1 twice, saves, steps it twice more; a fresh optimizer loaded from the save (over a
// copy of the parameters as saved) must follow exactly the same path.
template <class Opt, class Options>
void check_round_trip(const Options& opts, const std::string& what) {
  Tensor p1 = tensor({1.0, -2.0, 0.5}).requires_grad_();
  Opt opt1(std::vector<Tensor>{p1}, opts);
  for (int k = 0; k < 2; ++k) {
    set_grad(p1, kGrads[k]);
    opt1.step();
  }
  optim::OptimizerStateDict sd = opt1.state_dict();
  Tensor p2 = p1.detach().clone().requires_grad_();
  Options other = opts;
  other.lr(123.0);  // replaced by the loaded hyperparameters
  Opt opt2(std::vector<Tensor>{p2}, other);
  opt2.load_state_dict(sd);
  EXPECT_EQ(opt2.param_groups()[0].lr(), opts.lr()) << what;
  for (int k = 0; k < 3; ++k) {
    for (Tensor p : {p1, p2}) set_grad(p, kGrads[k % 3]);
    opt1.step();
    opt2.step();
    EXPECT_EQ(values(p1), values(p2)) << what << " step " << k;
  }
}

TEST(OptimizerStateDict, RoundTripContinuesIdentically) {
  check_round_trip<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9).nesterov(true), "sgd");
  check_round_trip<optim::Adam>(optim::AdamOptions(0.1).amsgrad(true), "adam");
  check_round_trip<optim::AdamW>(optim::AdamWOptions(0.1), "adamw");
  check_round_trip<optim::RMSprop>(optim::RMSpropOptions(0.01).centered(true).momentum(0.5),
                                   "rmsprop");
  check_round_trip<optim::Adagrad>(optim::AdagradOptions(0.1).lr_decay(0.1), "adagrad");
}

TEST(OptimizerStateDict, LoadErrors) {
  Tensor p = tensor({1.0, 2.0}).requires_grad_();
  optim::Adam opt(std::vector<Tensor>{p}, optim::AdamOptions(0.1));
  set_grad(p, {1.0, 1.0});
  opt.step();
  optim::OptimizerStateDict sd = opt.state_dict();

  // Another optimizer type: its state and hyperparameters do not fit.
  Tensor q = tensor({1.0, 2.0}).requires_grad_();
  optim::SGD sgd(std::vector<Tensor>{q}, optim::SGDOptions(0.1));
  std::string msg = error_of([&] { sgd.load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("SGD.load_state_dict"));
  EXPECT_THAT(msg, HasSubstr("unexpected key 'state.0.exp_avg'"));
  EXPECT_THAT(msg, HasSubstr("missing key 'param_groups.0.momentum'"));
  EXPECT_EQ(sgd.param_groups()[0].lr(), 0.1);  // unchanged

  // Shape mismatch.
  Tensor r = tensor({1.0, 2.0, 3.0}).requires_grad_();
  optim::Adam other(std::vector<Tensor>{r}, optim::AdamOptions(0.1));
  msg = error_of([&] { other.load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("'state.0.exp_avg' has shape [2] but parameter 0 has shape [3]"));
  EXPECT_EQ(other.state(r), nullptr);  // nothing applied

  // Parameter count and group count.
  Tensor s = tensor({1.0, 2.0}).requires_grad_();
  optim::Adam two(std::vector<Tensor>{p.detach().clone().requires_grad_(), s});
  msg = error_of([&] { two.load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("param_groups.0 has 1 parameters in the state dict but 2 in the "
                             "optimizer"));
  std::vector<optim::ParamGroup> groups{optim::ParamGroup({s}),
                                        optim::ParamGroup({q.detach().clone()})};
  optim::Adam grouped(groups);
  msg = error_of([&] { grouped.load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("the state dict has 1 parameter groups but the optimizer has 2"));

  // Unknown top-level key and invalid hyperparameters.
  optim::OptimizerStateDict bad = sd;
  bad.emplace_back("foo", scalar_tensor(1.0));
  msg = error_of([&] { opt.load_state_dict(bad); });
  EXPECT_THAT(msg, HasSubstr("unexpected key 'foo'"));
  bad = sd;
  for (auto& [k, v] : bad) {
    if (k == "param_groups.0.lr") v = scalar_tensor(-1.0, kFloat64);
  }
  msg = error_of([&] { opt.load_state_dict(bad); });
  EXPECT_THAT(msg, HasSubstr("invalid learning rate: -1"));
  EXPECT_EQ(opt.param_groups()[0].lr(), 0.1);
}

// ---- errors

TEST(OptimizerErrors, InvalidOptions) {
  Tensor p = tensor({1.0}).requires_grad_();
  std::vector<Tensor> ps{p};
  EXPECT_THAT(error_of([&] { optim::SGD(ps, optim::SGDOptions(-0.1)); }),
              HasSubstr("SGD: invalid learning rate: -0.1"));
  EXPECT_THAT(error_of([&] { optim::SGD(ps, optim::SGDOptions(0.1).momentum(-1)); }),
              HasSubstr("SGD: invalid momentum value: -1"));
  EXPECT_THAT(error_of([&] { optim::SGD(ps, optim::SGDOptions(0.1).weight_decay(-1)); }),
              HasSubstr("SGD: invalid weight_decay value: -1"));
  EXPECT_THAT(error_of([&] { optim::SGD(ps, optim::SGDOptions(0.1).nesterov(true)); }),
              HasSubstr("Nesterov momentum requires a momentum and zero dampening"));
  EXPECT_THAT(error_of([&] {
                optim::SGD(ps, optim::SGDOptions(0.1).nesterov(true).momentum(0.9).dampening(0.1));
              }),
              HasSubstr("zero dampening"));
  EXPECT_THAT(error_of([&] { optim::Adam(ps, optim::AdamOptions(-1)); }),
              HasSubstr("Adam: invalid learning rate: -1"));
  EXPECT_THAT(error_of([&] { optim::Adam(ps, optim::AdamOptions(0.1).betas({1.0, 0.999})); }),
              HasSubstr("Adam: invalid beta parameter at index 0: 1"));
  EXPECT_THAT(error_of([&] { optim::Adam(ps, optim::AdamOptions(0.1).betas({0.9, -0.1})); }),
              HasSubstr("Adam: invalid beta parameter at index 1: -0.1"));
  EXPECT_THAT(error_of([&] { optim::Adam(ps, optim::AdamOptions(0.1).eps(-1e-8)); }),
              HasSubstr("Adam: invalid epsilon value"));
  EXPECT_THAT(error_of([&] { optim::AdamW(ps, optim::AdamWOptions(0.1).weight_decay(-1)); }),
              HasSubstr("AdamW: invalid weight_decay value: -1"));
  EXPECT_THAT(error_of([&] { optim::RMSprop(ps, optim::RMSpropOptions(0.1).alpha(-0.5)); }),
              HasSubstr("RMSprop: invalid alpha value: -0.5"));
  EXPECT_THAT(error_of([&] { optim::RMSprop(ps, optim::RMSpropOptions(0.1).momentum(-0.5)); }),
              HasSubstr("RMSprop: invalid momentum value"));
  EXPECT_THAT(error_of([&] { optim::Adagrad(ps, optim::AdagradOptions(0.1).lr_decay(-1)); }),
              HasSubstr("Adagrad: invalid lr_decay value: -1"));
  EXPECT_THAT(error_of([&] {
                optim::Adagrad(ps, optim::AdagradOptions(0.1).initial_accumulator_value(-1));
              }),
              HasSubstr("Adagrad: invalid initial_accumulator_value value: -1"));
  // A group's own options are checked too, and must be of the optimizer's type.
  EXPECT_THAT(error_of([&] {
                optim::SGD({optim::ParamGroup({p}, optim::SGDOptions(-2))}, optim::SGDOptions(0.1));
              }),
              HasSubstr("invalid learning rate: -2"));
  EXPECT_THAT(error_of([&] {
                optim::SGD({optim::ParamGroup({p}, optim::AdamOptions(0.1))});
              }),
              HasSubstr("SGD: parameter group options must be SGDOptions, got AdamOptions"));
}

TEST(OptimizerErrors, InvalidParameters) {
  EXPECT_THAT(error_of([&] { optim::SGD(std::vector<Tensor>{}, optim::SGDOptions(0.1)); }),
              HasSubstr("SGD: got an empty parameter list"));
  Tensor p = tensor({1.0}).requires_grad_();
  EXPECT_THAT(error_of([&] { optim::Adam(std::vector<Tensor>{p, p}); }),
              HasSubstr("appears more than once"));
  EXPECT_THAT(error_of([&] {
                optim::Adam({optim::ParamGroup({p}), optim::ParamGroup({p})});
              }),
              HasSubstr("parameter 0 of group 1 (shape [1]) appears more than once"));
  Tensor nonleaf = p * 2;
  EXPECT_THAT(error_of([&] { optim::SGD(std::vector<Tensor>{nonleaf}); }),
              HasSubstr("can't optimize a non-leaf tensor"));
  EXPECT_THAT(error_of([&] { optim::SGD(std::vector<Tensor>{Tensor()}); }),
              HasSubstr("undefined tensor"));
  EXPECT_THAT(error_of([&] { optim::SGD(std::vector<Tensor>{tensor({1, 2})}); }),
              HasSubstr("can only optimize floating point tensors"));
  optim::SGD opt(std::vector<Tensor>{p});
  EXPECT_THAT(error_of([&] { opt.param_groups()[0].options().set("foo", 1); }),
              HasSubstr("SGDOptions: no hyperparameter named 'foo'"));
}

// ---- convergence: linear regression y = 3x + 2

namespace {

template <class Opt, class Options>
double fit_line(const Options& opts, int steps) {
  manual_seed(0);
  std::vector<double> xs, ys;
  for (int i = 0; i < 64; ++i) {
    double x = -1.0 + 2.0 * i / 63.0;
    xs.push_back(x);
    ys.push_back(3 * x + 2);
  }
  Tensor x = tensor(xs).reshape({64, 1});
  Tensor y = tensor(ys).reshape({64, 1});
  Tensor w = zeros({1}).requires_grad_();
  Tensor b = zeros({1}).requires_grad_();
  Opt opt(std::vector<Tensor>{w, b}, opts);
  double loss_value = 0;
  for (int s = 0; s < steps; ++s) {
    opt.zero_grad();
    Tensor err = x * w + b - y;
    Tensor loss = (err * err).mean();
    loss.backward();
    opt.step();
    loss_value = loss.item<double>();
  }
  EXPECT_NEAR(w.item<double>(), 3.0, 1e-2);
  EXPECT_NEAR(b.item<double>(), 2.0, 1e-2);
  return loss_value;
}

}  // namespace

TEST(Convergence, LinearRegressionSGDMomentum) {
  EXPECT_LT(fit_line<optim::SGD>(optim::SGDOptions(0.1).momentum(0.9), 200), 1e-5);
}

TEST(Convergence, LinearRegressionAdam) {
  EXPECT_LT(fit_line<optim::Adam>(optim::AdamOptions(0.1), 500), 1e-5);
}

TEST(Convergence, LinearRegressionOthers) {
  EXPECT_LT(fit_line<optim::AdamW>(optim::AdamWOptions(0.05).weight_decay(0), 800), 1e-4);
  EXPECT_LT(fit_line<optim::RMSprop>(optim::RMSpropOptions(0.01), 1500), 1e-4);
  EXPECT_LT(fit_line<optim::Adagrad>(optim::AdagradOptions(0.5), 1500), 1e-4);
}
