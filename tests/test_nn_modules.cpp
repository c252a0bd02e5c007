// nn::Module bookkeeping (registration, names, modes, dtype moves, state dicts, printing) and
// the containers Sequential, ModuleList, ModuleDict. The layers are in test_nn_layers.cpp.
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
