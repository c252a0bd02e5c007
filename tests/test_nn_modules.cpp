// nn::Module bookkeeping (registration, names, modes, dtype moves, state dicts, printing) and
// every layer of ignis/nn/layers.h against float64 hand computations.
#include <cmath>
#include <map>
#include <sstream>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::expect_values;
using ignis::testing_util::to_vec;
using ::testing::HasSubstr;

namespace {

// A module with its own parameter, a frozen parameter, a buffer and two submodules.
class Block : public nn::Module {
 public:
  Block() {
    fc = register_module("fc", std::make_shared<nn::Linear>(3, 2));
    act = register_module("act", std::make_shared<nn::Tanh>());
    scale = register_parameter("scale", full({2}, 2.0));
    frozen = register_parameter("frozen", ones({4}), /*requires_grad=*/false);
    register_buffer("running", tensor({10.0, 20.0}));
  }
  std::string type_name() const override { return "Block"; }
  Tensor forward(const Tensor& x) override { return act->forward(fc->forward(x)) * scale; }
  std::shared_ptr<nn::Linear> fc;
  std::shared_ptr<nn::Tanh> act;
  Tensor scale, frozen;
};

class Net : public nn::Module {
 public:
  Net() {
    b1 = register_module("b1", std::make_shared<Block>());
    head = register_module("head", std::make_shared<nn::Linear>(2, 1, /*bias=*/false));
  }
  std::string type_name() const override { return "Net"; }
  Tensor forward(const Tensor& x) override { return head->forward(b1->forward(x)); }
  std::shared_ptr<Block> b1;
  std::shared_ptr<nn::Linear> head;
};

std::vector<std::string> names_of(const nn::NamedTensors& v) {
  std::vector<std::string> out;
  for (const auto& [n, t] : v) out.push_back(n);
  return out;
}

}  // namespace

// ---- Module bookkeeping

TEST(Module, RegistersParametersBuffersAndSubmodulesByName) {
  auto net = std::make_shared<Net>();
  EXPECT_EQ(names_of(net->named_parameters()),
            (std::vector<std::string>{"b1.scale", "b1.frozen", "b1.fc.weight", "b1.fc.bias",
                                      "head.weight"}));
  EXPECT_EQ(names_of(net->named_parameters(/*recurse=*/false)), std::vector<std::string>{});
  EXPECT_EQ(names_of(net->b1->named_parameters(false)),
            (std::vector<std::string>{"scale", "frozen"}));
  EXPECT_EQ(names_of(net->named_buffers()), std::vector<std::string>{"b1.running"});
  ASSERT_EQ(net->buffers().size(), 1u);
  expect_values(net->buffers()[0], {10, 20});
  EXPECT_EQ(net->parameters().size(), 5u);
  // Parameters are the registered tensors themselves (an optimizer updates the module).
  EXPECT_TRUE(net->parameters()[2].is_same(net->b1->fc->weight));
  EXPECT_TRUE(net->get("b1.fc.weight").is_same(net->b1->fc->weight));
  EXPECT_TRUE(net->b1->scale.requires_grad());
  EXPECT_FALSE(net->b1->frozen.requires_grad());
  EXPECT_FALSE(net->get("b1.running").requires_grad());

  auto kids = net->named_children();
  ASSERT_EQ(kids.size(), 2u);
  EXPECT_EQ(kids[0].first, "b1");
  EXPECT_EQ(kids[1].first, "head");
  EXPECT_EQ(net->children()[1].get(), net->head.get());
  std::vector<std::string> mods;
  for (auto& [n, m] : net->named_modules()) mods.push_back(n + ":" + m->type_name());
  EXPECT_EQ(mods, (std::vector<std::string>{":Net", "b1:Block", "b1.fc:Linear", "b1.act:Tanh",
                                            "head:Linear"}));
  EXPECT_EQ(net->modules().size(), 5u);
  EXPECT_EQ(net->child("head").get(), net->head.get());

  // Parameter counts: trainable excludes the frozen one.
  EXPECT_EQ(net->num_parameters(), 2 + 4 + 6 + 2 + 2);
  EXPECT_EQ(net->num_parameters(/*trainable_only=*/true), 2 + 6 + 2 + 2);
}

TEST(Module, RegistrationErrorsNameTheProblem) {
  Block b;
  EXPECT_THAT(error_of([&] { b.register_parameter("scale", ones({1})); }),
              HasSubstr("Module::register_parameter: 'scale' is already registered in Block"));
  EXPECT_THAT(error_of([&] { b.register_buffer("fc", ones({1})); }),
              HasSubstr("Module::register_buffer: 'fc' is already registered in Block"));
  EXPECT_THAT(error_of([&] { b.register_module("running", std::make_shared<nn::ReLU>()); }),
              HasSubstr("Module::register_module: 'running' is already registered in Block"));
  EXPECT_THAT(error_of([&] { b.register_parameter("a.b", ones({1})); }),
              HasSubstr("name 'a.b' must be non-empty and contain no '.'"));
  EXPECT_THAT(error_of([&] { b.register_buffer("", ones({1})); }),
              HasSubstr("name '' must be non-empty"));
  EXPECT_THAT(error_of([&] { b.register_module("m", std::shared_ptr<nn::ReLU>()); }),
              HasSubstr("'m' is null"));
  EXPECT_THAT(error_of([&] { b.get("nope"); }),
              HasSubstr("Block: no parameter or buffer named 'nope' (has: scale frozen running)"));
  EXPECT_THAT(error_of([&] { b.get("fc.nope"); }),
              HasSubstr("Linear: no parameter or buffer named 'nope' (has: weight bias)"));
  EXPECT_THAT(error_of([&] { b.child("xyz"); }), HasSubstr("Block: no submodule named 'xyz'"));
  nn::ModuleList list;
  EXPECT_THAT(error_of([&] { list.forward(ones({1})); }),
              HasSubstr("ModuleList: forward(Tensor) is not defined"));
}

TEST(Module, ReplaceModuleSwapsAChild) {
  nn::Sequential seq(nn::Linear(2, 2), nn::ReLU());
  seq.replace_module("1", std::make_shared<nn::Tanh>());
  EXPECT_EQ(seq.named_children()[1].second->type_name(), "Tanh");
  seq.replace_module("extra", std::make_shared<nn::Identity>());
  EXPECT_EQ(seq.named_children().size(), 3u);
  EXPECT_EQ(seq.named_children()[2].first, "extra");
}

TEST(Module, TrainAndEvalPropagateToEveryDescendant) {
  auto net = std::make_shared<Net>();
  for (auto& m : net->modules()) EXPECT_TRUE(m->is_training());
  net->eval();
  for (auto& [n, m] : net->named_modules()) EXPECT_FALSE(m->is_training()) << n;
  net->b1->train();  // a subtree only
  EXPECT_FALSE(net->is_training());
  EXPECT_TRUE(net->b1->fc->is_training());
  EXPECT_FALSE(net->head->is_training());
  net->train(true);
  for (auto& [n, m] : net->named_modules()) EXPECT_TRUE(m->is_training()) << n;

  // Dropout inside a Sequential follows the container's mode.
  nn::Sequential seq(nn::Dropout(0.5));
  seq.eval();
  Tensor x = ones({100});
  EXPECT_TRUE(equal(seq(x), x));
}

TEST(Module, ZeroGradClearsOrZeroesEveryGradient) {
  auto net = std::make_shared<Net>();
  Tensor x = tensor({{0.5, -1.0, 2.0}});
  net->forward(x).sum().backward();
  for (auto& [n, p] : net->named_parameters()) {
    if (p.requires_grad()) {
      EXPECT_TRUE(p.grad().defined()) << n;
    }
  }
  EXPECT_FALSE(net->b1->frozen.grad().defined());
  net->zero_grad(/*set_to_none=*/false);
  for (auto& [n, p] : net->named_parameters()) {
    if (!p.requires_grad()) continue;
    ASSERT_TRUE(p.grad().defined()) << n;
    for (double v : to_vec(p.grad())) EXPECT_EQ(v, 0.0) << n;
  }
  net->forward(x).sum().backward();
  net->zero_grad();  // set_to_none defaults to true, as in PyTorch 2
  for (auto& [n, p] : net->named_parameters()) EXPECT_FALSE(p.grad().defined()) << n;
}

TEST(Module, ToDtypeCastsInPlaceAndKeepsTheHandles) {
  auto net = std::make_shared<Net>();
  Tensor w_before = net->b1->fc->weight;
  const std::vector<double> w_values = to_vec(w_before);
  net->forward(tensor({{1.0, 2.0, 3.0}})).sum().backward();
  const std::vector<double> g_values = to_vec(net->b1->fc->weight.grad());
  net->to(kFloat64);
  for (auto& [n, p] : net->named_parameters()) EXPECT_EQ(p.dtype(), kFloat64) << n;
  for (auto& [n, b] : net->named_buffers()) EXPECT_EQ(b.dtype(), kFloat64) << n;
  // The same tensor object now holds float64 data with the same values (an optimizer holding
  // the handle sees the change), and its gradient was cast too.
  EXPECT_TRUE(w_before.is_same(net->b1->fc->weight));
  EXPECT_EQ(w_before.dtype(), kFloat64);
  EXPECT_TRUE(w_before.requires_grad());
  EXPECT_EQ(to_vec(w_before), w_values);
  ASSERT_TRUE(w_before.grad().defined());
  EXPECT_EQ(w_before.grad().dtype(), kFloat64);
  EXPECT_EQ(to_vec(w_before.grad()), g_values);
  Tensor y = net->forward(tensor({{1.0, 2.0, 3.0}}, kFloat64));
  EXPECT_EQ(y.dtype(), kFloat64);
  EXPECT_THAT(error_of([&] { net->to(kInt64); }),
              HasSubstr("Module::to: only floating dtypes are allowed, got int64"));
  // Non-floating buffers are left alone by a dtype cast.
  nn::Module m;
  m.register_buffer("count", tensor({3}));
  m.to(kFloat64);
  EXPECT_EQ(m.get("count").dtype(), kInt64);
}

TEST(Module, ApplyVisitsChildrenFirst) {
  auto net = std::make_shared<Net>();
  std::vector<std::string> order;
  net->apply([&](nn::Module& m) { order.push_back(m.type_name()); });
  EXPECT_EQ(order, (std::vector<std::string>{"Linear", "Tanh", "Block", "Linear", "Net"}));
  // The usual use: a custom initialisation of every Linear.
  net->apply([](nn::Module& m) {
    if (auto* lin = dynamic_cast<nn::Linear*>(&m)) {
      nn::init::constant_(lin->weight, 0.25);
      if (lin->bias.defined()) nn::init::zeros_(lin->bias);
    }
  });
  for (double v : to_vec(net->b1->fc->weight)) EXPECT_EQ(v, 0.25);
  for (double v : to_vec(net->head->weight)) EXPECT_EQ(v, 0.25);
  for (double v : to_vec(net->b1->fc->bias)) EXPECT_EQ(v, 0.0);
}

TEST(Module, StateDictListsParametersThenBuffersAndSharesStorage) {
  auto net = std::make_shared<Net>();
  nn::StateDict sd = net->state_dict();
  EXPECT_EQ(names_of(sd), (std::vector<std::string>{"b1.scale", "b1.frozen", "b1.fc.weight",
                                                    "b1.fc.bias", "head.weight", "b1.running"}));
  for (auto& [n, t] : sd) EXPECT_FALSE(t.requires_grad()) << n;
  // Detached views of the same storage: writing through the model shows in the state dict.
  {
    NoGradGuard ng;
    net->b1->scale.fill_(7.0);
  }
  expect_values(sd[0].second, {7, 7});

  auto other = std::make_shared<Net>();
  other->load_state_dict(sd);
  for (auto& [n, t] : sd) EXPECT_TRUE(equal(other->get(n), t)) << n;
  // The loaded tensors are copies: the source can change afterwards.
  {
    NoGradGuard ng;
    net->b1->scale.fill_(1.0);
  }
  expect_values(other->b1->scale, {7, 7});
  // Loading does not make frozen parameters trainable or drop requires_grad.
  EXPECT_TRUE(other->b1->scale.requires_grad());
  EXPECT_FALSE(other->b1->frozen.requires_grad());
}

TEST(Module, LoadStateDictStrictReportsMissingUnexpectedAndMismatchedKeys) {
  auto net = std::make_shared<Net>();
  auto src = std::make_shared<Net>();
  nn::StateDict sd = src->state_dict();
  std::erase_if(sd,
                [](const auto& p) { return p.first == "b1.fc.bias" || p.first == "b1.running"; });
  sd.emplace_back("b1.extra", zeros({1}));
  sd.emplace_back("zzz", zeros({1}));
  for (auto& [n, t] : sd) {
    if (n == "head.weight") t = zeros({1, 3});
  }
  const Tensor before = net->b1->scale.clone();
  const std::string msg = error_of([&] { net->load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("load_state_dict: error(s) in loading state_dict for Net"));
  EXPECT_THAT(msg, HasSubstr("missing keys: b1.fc.bias, b1.running."));
  EXPECT_THAT(msg, HasSubstr("unexpected keys: b1.extra, zzz."));
  EXPECT_THAT(msg, HasSubstr("size mismatches: head.weight: checkpoint [1, 3] vs model [1, 2]."));
  // A failed load changes nothing.
  EXPECT_TRUE(equal(net->b1->scale, before));

  // Non-strict: missing and unexpected keys are tolerated, shape mismatches are not.
  EXPECT_THAT(error_of([&] { net->load_state_dict(sd, /*strict=*/false); }),
              ::testing::AllOf(HasSubstr("size mismatches: head.weight"),
                               ::testing::Not(HasSubstr("missing keys")),
                               ::testing::Not(HasSubstr("unexpected keys"))));
  for (auto& [n, t] : sd) {
    if (n == "head.weight") t = src->head->weight.detach();
  }
  const Tensor bias_before = net->b1->fc->bias.clone();
  net->load_state_dict(sd, /*strict=*/false);
  EXPECT_TRUE(equal(net->b1->fc->weight, src->b1->fc->weight));
  EXPECT_TRUE(equal(net->head->weight, src->head->weight));
  EXPECT_TRUE(equal(net->b1->fc->bias, bias_before));  // missing: left as it was
}

TEST(Module, PrintsTheTreeAndASummaryWithParameterCounts) {
  nn::Sequential seq(nn::Flatten(), nn::Linear(4, 3), nn::ReLU(), nn::Dropout(0.25),
                     nn::Linear(3, 2, false));
  std::ostringstream os;
  os << seq;
  EXPECT_EQ(os.str(),
            "Sequential(\n"
            "  (0): Flatten(start_dim=1, end_dim=-1)\n"
            "  (1): Linear(in_features=4, out_features=3, bias=true)\n"
            "  (2): ReLU()\n"
            "  (3): Dropout(p=0.25)\n"
            "  (4): Linear(in_features=3, out_features=2, bias=false)\n"
            ")");
  Net net;
  std::ostringstream nested;
  net.pretty_print(nested);
  EXPECT_EQ(nested.str(),
            "Net(\n"
            "  (b1): Block(\n"
            "    (fc): Linear(in_features=3, out_features=2, bias=true)\n"
            "    (act): Tanh()\n"
            "  )\n"
            "  (head): Linear(in_features=2, out_features=1, bias=false)\n"
            ")");

  const std::string s = net.summary();
  std::map<std::string, std::string> rows;  // label -> rest of the line
  std::istringstream lines(s);
  for (std::string line; std::getline(lines, line);) {
    const size_t paren = line.find(')');
    if (line.find(" (") != std::string::npos && paren != std::string::npos) {
      rows[line.substr(0, paren + 1)] = line.substr(paren + 1);
    }
  }
  auto count_of = [&](const std::string& label) {
    EXPECT_TRUE(rows.count(label)) << label << " not in\n" << s;
    std::istringstream rest(rows[label]);
    std::string tok, last;
    while (rest >> tok) last = tok;
    return last;
  };
  EXPECT_EQ(count_of("b1 (Block)"), "6");  // scale [2] + frozen [4]
  EXPECT_EQ(count_of("b1.fc (Linear)"), "8");
  EXPECT_EQ(count_of("b1.act (Tanh)"), "0");
  EXPECT_EQ(count_of("head (Linear)"), "2");
  EXPECT_THAT(rows["b1.fc (Linear)"], HasSubstr("[2, 3] [2]"));
  EXPECT_THAT(s, HasSubstr("Total params: 16\n"));
  EXPECT_THAT(s, HasSubstr("Trainable params: 12\n"));
  EXPECT_THAT(s, HasSubstr("Non-trainable params: 4\n"));
}

// ---- layers

TEST(Linear, ComputesXWTransposePlusBAgainstFloat64) {
  nn::Linear lin(3, 2);
  EXPECT_EQ(lin.weight.sizes().shape(), Shape({2, 3}));
  EXPECT_EQ(lin.bias.sizes().shape(), Shape({2}));
  {
    NoGradGuard ng;
    lin.weight.copy_(tensor({{1.0, -2.0, 0.5}, {0.0, 3.0, -1.0}}));
    lin.bias.copy_(tensor({0.25, -0.5}));
  }
  // A batch of 2 x 2 rows (the leading dims are kept).
  Tensor x =
      tensor({1.0, 2.0, 3.0, -1.0, 0.5, 4.0, 0.0, 0.0, 0.0, 2.0, -2.0, 1.0}).reshape({2, 2, 3});
  Tensor y = lin(x);
  EXPECT_EQ(y.sizes().shape(), Shape({2, 2, 2}));
  const double w[2][3] = {{1, -2, 0.5}, {0, 3, -1}};
  const double b[2] = {0.25, -0.5};
  const std::vector<double> xv = to_vec(x);
  std::vector<double> want;
  for (int r = 0; r < 4; ++r) {
    for (int o = 0; o < 2; ++o) {
      double acc = b[o];
      for (int i = 0; i < 3; ++i) acc += xv[r * 3 + i] * w[o][i];
      want.push_back(acc);
    }
  }
  expect_values(y, want, 1e-5);
  expect_values(nn::functional::linear(x, lin.weight, lin.bias), want, 1e-5);
  // Without bias.
  nn::Linear nb(3, 2, false);
  EXPECT_FALSE(nb.bias.defined());
  EXPECT_EQ(nb.named_parameters().size(), 1u);
  {
    NoGradGuard ng;
    nb.weight.copy_(lin.weight);
  }
  std::vector<double> want_nb = want;
  for (size_t i = 0; i < want_nb.size(); ++i) want_nb[i] -= b[i % 2];
  expect_values(nb(x), want_nb, 1e-5);

  EXPECT_THAT(error_of([&] {
                lin(ones({2, 4}));
              }),
              HasSubstr("Linear: input of shape [2, 4] does not end in in_features=3"));
  EXPECT_THAT(error_of([&] { nn::Linear(0, 3); }),
              HasSubstr("Linear: in_features and out_features must be positive, got 0 and 3"));
}

TEST(Linear, DefaultInitIsUniformWithinOneOverSqrtFanIn) {
  manual_seed(11);
  nn::Linear lin(400, 300);
  const double bound = 1.0 / std::sqrt(400.0);
  const std::vector<double> w = to_vec(lin.weight);
  double lo = 1, hi = -1, mean = 0, sq = 0;
  for (double v : w) {
    lo = std::min(lo, v);
    hi = std::max(hi, v);
    mean += v;
    sq += v * v;
  }
  mean /= static_cast<double>(w.size());
  const double var = sq / static_cast<double>(w.size()) - mean * mean;
  EXPECT_GE(lo, -bound);
  EXPECT_LE(hi, bound);
  // 120000 samples of U(-b, b): the extremes come close to the bound, the variance is b^2/3.
  EXPECT_LT(lo, -0.999 * bound);
  EXPECT_GT(hi, 0.999 * bound);
  EXPECT_NEAR(mean, 0.0, 5 * bound / std::sqrt(3.0 * 120000));
  EXPECT_NEAR(var, bound * bound / 3, 0.02 * bound * bound / 3);
  for (double v : to_vec(lin.bias)) {
    EXPECT_GE(v, -bound);
    EXPECT_LE(v, bound);
  }
}

TEST(Layers, IdentityFlattenUnflatten) {
  Tensor x = arange(24).to(kFloat32).reshape({2, 3, 4});
  nn::Identity id;
  EXPECT_TRUE(id(x).is_same(x));
  EXPECT_EQ(nn::Flatten()(x).sizes().shape(), Shape({2, 12}));
  EXPECT_EQ(nn::Flatten(0, 1)(x).sizes().shape(), Shape({6, 4}));
  EXPECT_EQ(nn::Flatten(0)(x).sizes().shape(), Shape({24}));
  expect_values(nn::Flatten()(x), to_vec(x));  // row-major order is kept
  Tensor u = nn::Unflatten(1, {2, 6})(x.flatten(1));
  EXPECT_EQ(u.sizes().shape(), Shape({2, 2, 6}));
  expect_values(u, to_vec(x));
  EXPECT_EQ(nn::Unflatten(-1, {2, 2})(x).sizes().shape(), Shape({2, 3, 2, 2}));
  EXPECT_THAT(error_of([&] { nn::Unflatten(1, {5, 2})(x); }), HasSubstr("unflatten"));
  std::ostringstream os;
  os << nn::Unflatten(1, {2, 2});
  EXPECT_EQ(os.str(), "Unflatten(dim=1, unflattened_size=[2, 2])");
}

namespace {
// Applies `m` and its functional form to float64 inputs and compares with `ref` per element.
void check_activation(nn::Module& m, const std::function<Tensor(const Tensor&)>& functional,
                      const std::function<double(double)>& ref, double tol,
                      const std::string& what) {
  const std::vector<double> xs = {-20.0, -3.5, -1.0, -0.25, 0.0, 1e-3, 0.5, 1.0, 2.75, 20.0};
  for (DType dt : {kFloat64, kFloat32}) {
    Tensor x = tensor(xs, dt);
    std::vector<double> want;
    // The reference at the input as stored (0.001 is not a float32 number).
    for (double v : to_vec(x)) want.push_back(ref(v));
    const double t = dt == kFloat64 ? 1e-12 : tol;
    expect_values(m(x), want, t, t, what + " module");
    expect_values(functional(x), want, t, t, what + " functional");
    EXPECT_EQ(m(x).dtype(), dt);
  }
}
}  // namespace

TEST(Layers, ActivationsMatchTheirFormulas) {
  namespace F = nn::functional;
  nn::ReLU relu;
  check_activation(
      relu, F::relu, [](double v) { return v > 0 ? v : 0.0; }, 0, "relu");
  nn::LeakyReLU leaky(0.2);
  check_activation(
      leaky, [](const Tensor& x) { return F::leaky_relu(x, 0.2); },
      [](double v) { return v > 0 ? v : 0.2 * v; }, 1e-7, "leaky_relu");
  nn::LeakyReLU leaky_default;
  check_activation(
      leaky_default, [](const Tensor& x) { return F::leaky_relu(x); },
      [](double v) { return v > 0 ? v : 0.01 * v; }, 1e-7, "leaky_relu default");
  nn::GELU gelu;
  check_activation(
      gelu, [](const Tensor& x) { return F::gelu(x); },
      [](double v) { return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0))); }, 1e-6, "gelu");
  nn::GELU gelu_tanh("tanh");
  check_activation(
      gelu_tanh, [](const Tensor& x) { return F::gelu(x, "tanh"); },
      [](double v) {
        const double k = std::sqrt(2.0 / M_PI);
        return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
      },
      1e-6, "gelu tanh");
  nn::SiLU silu;
  check_activation(
      silu, F::silu, [](double v) { return v / (1 + std::exp(-v)); }, 1e-6, "silu");
  nn::Sigmoid sigmoid;
  check_activation(
      sigmoid, F::sigmoid, [](double v) { return 1 / (1 + std::exp(-v)); }, 1e-6, "sigmoid");
  nn::Tanh tanh_m;
  check_activation(
      tanh_m, F::tanh, [](double v) { return std::tanh(v); }, 1e-6, "tanh");
  check_activation(
      relu, [](const Tensor& x) { return F::relu(x); }, [](double v) { return std::max(v, 0.0); },
      0, "relu functional");
  expect_values(F::softplus(tensor({-2.0, 0.0, 3.0, 30.0}, kFloat64)),
                {std::log1p(std::exp(-2.0)), std::log(2.0), std::log1p(std::exp(3.0)), 30.0},
                1e-12);
  std::ostringstream os;
  os << leaky << " " << gelu_tanh;
  EXPECT_EQ(os.str(), "LeakyReLU(negative_slope=0.2) GELU(approximate='tanh')");
}

TEST(Layers, SoftmaxAndLogSoftmaxAgainstFloat64) {
  Tensor x = tensor({{1.0, 2.0, 3.0}, {-1.0, 0.0, 1000.0}}, kFloat64);
  std::vector<double> sm, lsm, sm0;
  const std::vector<double> xv = to_vec(x);
  for (int r = 0; r < 2; ++r) {
    double mx = -1e300, z = 0;
    for (int c = 0; c < 3; ++c) mx = std::max(mx, xv[r * 3 + c]);
    for (int c = 0; c < 3; ++c) z += std::exp(xv[r * 3 + c] - mx);
    for (int c = 0; c < 3; ++c) {
      sm.push_back(std::exp(xv[r * 3 + c] - mx) / z);
      lsm.push_back(xv[r * 3 + c] - mx - std::log(z));
    }
  }
  nn::Softmax softmax(1);
  nn::LogSoftmax log_softmax(-1);
  expect_values(softmax(x), sm, 1e-12);
  expect_values(log_softmax(x), lsm, 1e-12);
  expect_values(nn::functional::softmax(x, 1), sm, 1e-12);
  expect_values(nn::functional::log_softmax(x, 1), lsm, 1e-12);
  // dim 0 of a [2, 2] input: each column sums to 1.
  Tensor c = nn::Softmax(0)(tensor({{0.0, 1.0}, {std::log(3.0), 1.0}}, kFloat64));
  expect_values(c, {0.25, 0.5, 0.75, 0.5}, 1e-12);
  // float32 with a large logit stays finite.
  expect_values(nn::LogSoftmax(1)(x.to(kFloat32)), lsm, 1e-4);
}

TEST(Dropout, ZeroesAndScalesInTrainingIsIdentityInEval) {
  nn::Dropout d(0.3);
  Tensor x = ones({20000}).requires_grad_();
  manual_seed(123);
  Tensor y = d(x);
  const std::vector<double> yv = to_vec(y);
  int64_t kept = 0;
  for (double v : yv) {
    if (v != 0) {
      ++kept;
      EXPECT_FLOAT_EQ(static_cast<float>(v), static_cast<float>(1.0 / 0.7));
    }
  }
  // Binomial(20000, 0.7): sd 65, so 5 sd is 0.016 of the rate.
  EXPECT_NEAR(kept / 20000.0, 0.7, 0.016);
  // The gradient is the same mask and scale.
  y.sum().backward();
  EXPECT_EQ(to_vec(x.grad()), yv);
  // Seeded: the same seed gives the same mask; the next draw a different one.
  manual_seed(123);
  Tensor y2 = d(x.detach());
  EXPECT_TRUE(equal(y2, y.detach()));
  EXPECT_FALSE(equal(d(x.detach()), y2));
  // Eval and p = 0 return the input itself; p = 1 zeroes everything.
  d.eval();
  EXPECT_TRUE(equal(d(x), x));
  EXPECT_TRUE(nn::Dropout(0.0)(x).is_same(x));
  for (double v : to_vec(nn::Dropout(1.0)(x))) EXPECT_EQ(v, 0.0);
  EXPECT_TRUE(nn::functional::dropout(x, 0.5, /*training=*/false).is_same(x));
  EXPECT_THAT(error_of([] { nn::Dropout(1.5); }),
              HasSubstr("Dropout: probability has to be between 0 and 1, but got 1.5"));
  EXPECT_THAT(error_of([&] { nn::functional::dropout(x, -0.1); }),
              HasSubstr("dropout: probability has to be between 0 and 1, but got -0.1"));
}

TEST(Embedding, LooksUpRowsAndHonoursPaddingIdx) {
  nn::Embedding emb(5, 3, /*padding_idx=*/1);
  EXPECT_EQ(emb.weight.sizes().shape(), Shape({5, 3}));
  for (double v : to_vec(emb.weight.select(0, 1))) EXPECT_EQ(v, 0.0);  // padding row zeroed
  {
    NoGradGuard ng;
    emb.weight.copy_(arange(15).to(kFloat32).reshape({5, 3}));
  }
  Tensor idx = tensor({{4, 1}, {0, 4}});
  Tensor y = emb(idx);
  EXPECT_EQ(y.sizes().shape(), Shape({2, 2, 3}));
  expect_values(y, {12, 13, 14, 0, 0, 0, 0, 1, 2, 12, 13, 14});
  y.sum().backward();
  // Row 4 was used twice, row 0 once, the padding row gets no gradient.
  expect_values(emb.weight.grad(), {1, 1, 1, 0, 0, 0, 0, 0, 0, 0, 0, 0, 2, 2, 2});
  // int32 indices work too; negative padding_idx counts from the end.
  nn::Embedding e2(4, 2, -1);
  EXPECT_THAT(e2.extra_repr(), HasSubstr("padding_idx=3"));
  EXPECT_EQ(e2(tensor({0, 3}).to(kInt32)).sizes().shape(), Shape({2, 2}));
  // functional form without padding.
  Tensor w = tensor({{1.0, 2.0}, {3.0, 4.0}});
  expect_values(nn::functional::embedding(tensor({1, 1, 0}), w), {3, 4, 3, 4, 1, 2});

  EXPECT_THAT(error_of([&] {
                emb(tensor({0, 5}));
              }),
              HasSubstr("embedding: index_select: index 5 is out of bounds for dimension 0 with "
                        "size 5 (num_embeddings = 5)"));
  EXPECT_THAT(error_of([&] { emb(tensor({2.0})); }),
              HasSubstr("embedding: indices must be int64 or int32, got float32"));
  EXPECT_THAT(error_of([&] { nn::functional::embedding(tensor({0}), ones({3})); }),
              HasSubstr("embedding: weight must be 2-d, got shape [3]"));
  EXPECT_THAT(error_of([] { nn::Embedding(3, 2, 3); }),
              HasSubstr("Embedding: padding_idx 3 must be within num_embeddings (3)"));
  EXPECT_THAT(error_of([] { nn::Embedding(0, 2); }),
              HasSubstr("Embedding: num_embeddings and embedding_dim must be positive"));
}

TEST(Embedding, NegativeIndexIsAnError) {
  nn::Embedding emb(5, 3);
  // torch.nn.functional.embedding refuses negative indices rather than wrapping around.
  EXPECT_THAT(error_of([&] {
                emb(tensor({0, -1}));
              }),
              HasSubstr("embedding: index_select: index -1 is out of bounds for dimension 0"));
}

namespace {
// LayerNorm over the trailing `k` elements of each row, in float64.
std::vector<double> layer_norm_ref(const std::vector<double>& x, size_t k, double eps,
                                   const std::vector<double>& w, const std::vector<double>& b) {
  std::vector<double> out;
  for (size_t r = 0; r < x.size() / k; ++r) {
    double mu = 0, var = 0;
    for (size_t i = 0; i < k; ++i) mu += x[r * k + i];
    mu /= static_cast<double>(k);
    for (size_t i = 0; i < k; ++i) var += (x[r * k + i] - mu) * (x[r * k + i] - mu);
    var /= static_cast<double>(k);  // biased, as LayerNorm uses
    for (size_t i = 0; i < k; ++i) {
      const double n = (x[r * k + i] - mu) / std::sqrt(var + eps);
      out.push_back(w.empty() ? n : n * w[i] + b[i]);
    }
  }
  return out;
}
}  // namespace

TEST(LayerNorm, MatchesAFloat64HandComputation) {
  manual_seed(5);
  Tensor x = randn({3, 2, 4}) * 3 + 1;
  const std::vector<double> xv = to_vec(x);
  // Affine over the last two dims, with non-trivial weight and bias.
  nn::LayerNorm ln({2, 4});
  EXPECT_EQ(ln.named_parameters().size(), 2u);
  expect_values(ln.weight, std::vector<double>(8, 1.0));
  expect_values(ln.bias, std::vector<double>(8, 0.0));
  std::vector<double> w, b;
  for (int i = 0; i < 8; ++i) {
    w.push_back(0.5 + 0.25 * i);
    b.push_back(-1.0 + 0.3 * i);
  }
  {
    NoGradGuard ng;
    ln.weight.copy_(tensor(w).reshape({2, 4}));
    ln.bias.copy_(tensor(b).reshape({2, 4}));
  }
  expect_values(ln(x), layer_norm_ref(xv, 8, 1e-5, w, b), 1e-5, 1e-5);
  // Without affine: no parameters; eps as given.
  nn::LayerNorm plain({4}, 0.1, /*elementwise_affine=*/false);
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_FALSE(plain.weight.defined());
  expect_values(plain(x), layer_norm_ref(xv, 4, 0.1, {}, {}), 1e-5, 1e-5);
  expect_values(nn::functional::layer_norm(x.to(kFloat64), {4}, Tensor(), Tensor(), 0.1),
                layer_norm_ref(xv, 4, 0.1, {}, {}), 1e-12, 1e-12);
  EXPECT_EQ(plain.extra_repr(), "[4], eps=0.1, elementwise_affine=false");

  EXPECT_THAT(error_of([&] {
                ln(ones({2, 3}));
              }),
              HasSubstr("layer_norm: normalized_shape [2, 4] does not match the trailing dims of "
                        "input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { ln(ones({4})); }),
              HasSubstr("layer_norm: normalized_shape [2, 4] does not fit input of shape [4]"));
  EXPECT_THAT(error_of([] { nn::LayerNorm(std::vector<int64_t>{}); }),
              HasSubstr("LayerNorm: normalized_shape must not be empty"));
}

TEST(LayerNorm, GradcheckInFloat64) {
  manual_seed(6);
  Tensor x = randn({2, 5}, kFloat64).requires_grad_();
  Tensor w = (randn({5}, kFloat64) + 1).requires_grad_();
  Tensor b = randn({5}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const autograd::variable_list& in) {
        return autograd::variable_list{nn::functional::layer_norm(in[0], {5}, in[1], in[2], 1e-5)};
      },
      {x, w, b}));
}

TEST(Layers, GradcheckLinearEmbeddingAndActivationsInFloat64) {
  manual_seed(8);
  using autograd::variable_list;
  Tensor x = randn({3, 4}, kFloat64).requires_grad_();
  Tensor w = randn({2, 4}, kFloat64).requires_grad_();
  Tensor b = randn({2}, kFloat64).requires_grad_();
  EXPECT_TRUE(autograd::gradcheck(
      [](const variable_list& in) {
        return variable_list{nn::functional::linear(in[0], in[1], in[2])};
      },
      {x, w, b}));
  // Embedding: gradient into the rows used (twice for a repeated index), none into padding.
  Tensor table = randn({5, 3}, kFloat64).requires_grad_();
  const Tensor idx = tensor({{4, 1}, {4, 0}});
  EXPECT_TRUE(autograd::gradcheck(
      [&](const variable_list& in) {
        return variable_list{nn::functional::embedding(idx, in[0], /*padding_idx=*/1)};
      },
      {table}));
  // Activations away from their kinks.
  Tensor a = (randn({6}, kFloat64) + tensor({-2.0, -1.0, -0.5, 0.5, 1.0, 2.0}, kFloat64))
                 .detach()
                 .requires_grad_();
  for (const auto& f : std::vector<std::function<Tensor(const Tensor&)>>{
           [](const Tensor& t) { return nn::functional::gelu(t); },
           [](const Tensor& t) { return nn::functional::gelu(t, "tanh"); },
           [](const Tensor& t) { return nn::functional::silu(t); },
           [](const Tensor& t) { return nn::functional::leaky_relu(t, 0.1); },
           [](const Tensor& t) { return nn::functional::softmax(t, 0); },
           [](const Tensor& t) { return nn::functional::log_softmax(t, 0); }}) {
    EXPECT_TRUE(
        autograd::gradcheck([&](const variable_list& in) { return variable_list{f(in[0])}; }, {a}));
  }
}

// ---- containers

TEST(Containers, SequentialRunsItsModulesInOrder) {
  auto lin = std::make_shared<nn::Linear>(2, 2);
  {
    NoGradGuard ng;
    lin->weight.copy_(tensor({{1.0, -1.0}, {2.0, 0.5}}));
    lin->bias.copy_(tensor({0.0, -3.0}));
  }
  nn::Sequential seq(lin, nn::ReLU(), nn::Linear(2, 1));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(names_of(seq.named_parameters()),
            (std::vector<std::string>{"0.weight", "0.bias", "2.weight", "2.bias"}));
  EXPECT_EQ(seq[0].get(), lin.get());  // a shared_ptr argument is shared, not copied
  auto last = seq.at<nn::Linear>(2);
  Tensor x = tensor({{1.0, 2.0}, {3.0, 1.0}});
  // Hidden: relu([1-2, 2+1-3]) = [0, 0] and relu([3-1, 6+0.5-3]) = [2, 3.5].
  const std::vector<double> w2 = to_vec(last->weight), b2 = to_vec(last->bias);
  expect_values(seq(x), {b2[0], 2 * w2[0] + 3.5 * w2[1] + b2[0]}, 1e-6);
  EXPECT_THAT(error_of([&] { seq[3]; }), HasSubstr("Sequential: index 3 is out of range (size 3)"));
  EXPECT_THAT(error_of([&] { seq.at<nn::Linear>(1); }),
              HasSubstr("Sequential::at: module 1 is a ReLU"));
  // Named children.
  nn::Sequential named;
  named.push_back("enc", std::make_shared<nn::Linear>(2, 3));
  named.push_back("act", std::make_shared<nn::Sigmoid>());
  EXPECT_EQ(names_of(named.named_parameters()),
            (std::vector<std::string>{"enc.weight", "enc.bias"}));
  EXPECT_EQ(named(ones({1, 2})).sizes().shape(), Shape({1, 3}));
  // An empty Sequential is the identity.
  nn::Sequential empty_seq;
  EXPECT_TRUE(equal(empty_seq(x), x));
}

TEST(Containers, ModuleListAndModuleDict) {
  nn::ModuleList list;
  for (int i = 0; i < 3; ++i) list.push_back(std::make_shared<nn::Linear>(2, 2));
  EXPECT_EQ(list.size(), 3u);
  EXPECT_EQ(list.named_parameters().size(), 6u);
  EXPECT_EQ(list.named_parameters()[4].first, "2.weight");
  int n = 0;
  Tensor h = ones({1, 2});
  for (const auto& m : list) {
    h = m->forward(h);
    ++n;
  }
  EXPECT_EQ(n, 3);
  EXPECT_EQ(h.sizes().shape(), Shape({1, 2}));
  EXPECT_THAT(error_of([&] { list[3]; }),
              HasSubstr("ModuleList: index 3 is out of range (size 3)"));

  nn::ModuleDict dict;
  dict.insert("encoder", std::make_shared<nn::Linear>(4, 2));
  dict.insert("act", std::make_shared<nn::GELU>());
  EXPECT_EQ(dict.size(), 2u);
  EXPECT_TRUE(dict.contains("act"));
  EXPECT_FALSE(dict.contains("decoder"));
  EXPECT_EQ(dict["encoder"]->type_name(), "Linear");
  EXPECT_EQ(names_of(dict.named_parameters()),
            (std::vector<std::string>{"encoder.weight", "encoder.bias"}));
  EXPECT_THAT(error_of([&] { dict["decoder"]; }),
              HasSubstr("ModuleDict: no submodule named 'decoder'"));
  EXPECT_THAT(error_of([&] { dict.insert("act", std::make_shared<nn::ReLU>()); }),
              HasSubstr("'act' is already registered in ModuleDict"));
  // Containers take part in train/eval and state dicts like any module.
  dict.eval();
  EXPECT_FALSE(dict["act"]->is_training());
  EXPECT_EQ(dict.state_dict().size(), 2u);
}

TEST(Containers, TiedParametersAreListedOnce) {
  auto a = std::make_shared<nn::Linear>(3, 3);
  nn::Sequential seq(a, a);
  EXPECT_EQ(seq.parameters().size(), 2u);
  EXPECT_EQ(seq.num_parameters(), 12);
}
