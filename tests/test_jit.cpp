// Graph mode, capture and execution: jit::trace of functions and zoo models, the printed graph,
// the executor against eager, host reads refused while tracing, jit::compile's guard, and
// training through a compiled module.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "core/tensor_impl.h"
#include "ignis/ignis.h"
#include "jit/branch_plan.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

std::vector<std::string> op_names(const jit::Graph& g) {
  std::vector<std::string> names;
  for (const jit::Node& n : g.nodes) names.push_back(n.name());
  return names;
}

void expect_close(const Tensor& a, const Tensor& b, double rtol, double atol,
                  const std::string& what) {
  ASSERT_TRUE(a.sizes().equals(b.sizes())) << what;
  EXPECT_TRUE(allclose(a, b, rtol, atol))
      << what << ": max |diff| = " << (a - b).abs().max().item<double>();
}

}  // namespace

TEST(JitTrace, MlpGraphHasNamedParametersAndPrintsReadably) {
  manual_seed(0);
  auto m = models::mlp();
  m->eval();
  Tensor x = randn({4, 1, 28, 28});
  jit::Graph g = jit::trace(m, {x});
  // The modules' own ops (the zoo's ReLUs are in place, as torchvision's are).
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"flatten.using_ints", "linear", "relu_",
                                                   "linear", "relu_", "linear"}));
  const std::string s = g.str();
  EXPECT_THAT(s, HasSubstr("graph(%x0 : float32[4, 1, 28, 28]):"));
  EXPECT_THAT(s, HasSubstr("%0 : float32[4, 784] = flatten.using_ints(%x0, start_dim=1, "
                           "end_dim=-1)"));
  EXPECT_THAT(s, HasSubstr("%1 : float32[4, 512] = linear(%0, %1.weight, %1.bias)"));
  EXPECT_THAT(s, HasSubstr("%2 : float32[4, 512] = relu_(%1)"));
  EXPECT_THAT(s, HasSubstr("return (%5)"));
  EXPECT_THAT(s, HasSubstr("parameters: %1.weight : float32[512, 784]; %1.bias : float32[512]"));
  // The parameters are the module's own tensors, by their dotted names.
  auto params = g.named_parameters();
  ASSERT_EQ(params.size(), 6u);
  EXPECT_EQ(params[0].first, "1.weight");
  EXPECT_EQ(params[0].second.impl(), m->get("1.weight").impl());
  // Run on new data: the eager forward, bit for bit (the same ops in the same order).
  Tensor x2 = randn({4, 1, 28, 28});
  NoGradGuard ng;
  EXPECT_TRUE(equal(g.run({x2})[0], m->forward(x2)));
  // fuse_ops makes each linear and its ReLU one linear_relu node.
  EXPECT_EQ(jit::fuse_ops(g), 2);
  EXPECT_THAT(g.str(), HasSubstr("%1 : float32[4, 512] = linear_relu(%0, %1.weight, %1.bias)"));
  EXPECT_TRUE(allclose(g.run({x2})[0], m->forward(x2), 1e-5, 1e-6));
}

TEST(JitTrace, FunctionWithConstantsAndTwoOutputs) {
  Tensor w = full({3}, 2.0);
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor a = in[0] * w + in[1];
        return TensorList{a.relu(), a.sum()};
      },
      {ones({3}), ones({3})});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"mul.Tensor", "add.Tensor", "relu", "sum"}));
  EXPECT_THAT(g.str(), HasSubstr("%0 : float32[3] = mul.Tensor(%x0, %c0)"));
  EXPECT_THAT(g.str(), HasSubstr("constants: %c0 : float32[3]"));
  TensorList r = g.run({full({3}, -1.0), full({3}, 1.0)});
  ASSERT_EQ(r.size(), 2u);
  EXPECT_EQ(vals(r[0]), (std::vector<double>{0, 0, 0}));
  EXPECT_EQ(r[1].item<double>(), -3.0);
}

TEST(JitTrace, HostReadsAreErrorsNamingTheOp) {
  Tensor x = ones({2, 2});
  EXPECT_THAT(error_of([&] {
                jit::trace(
                    [](const TensorList& in) {
                      Tensor s = in[0].sum();
                      const double v = s.item<double>();  // data-dependent control flow
                      return TensorList{v > 0 ? in[0] * 2 : in[0]};
                    },
                    {x});
              }),
              HasSubstr("jit::trace: item() reads %0 (the output of sum) on the host while "
                        "tracing"));
  EXPECT_THAT(error_of([&] {
                jit::trace([](const TensorList& in) { return TensorList{nonzero(in[0])}; }, {x});
              }),
              HasSubstr("jit::trace: nonzero has an output shape that depends on tensor values"));
  EXPECT_THAT(error_of([&] {
                jit::trace(
                    [](const TensorList& in) { return TensorList{in[0].masked_select(in[0] > 0)}; },
                    {x});
              }),
              HasSubstr("jit::trace: masked_select has an output shape that depends on tensor "
                        "values"));
  EXPECT_THAT(error_of([&] {
                jit::trace(
                    [](const TensorList& in) {
                      const bool same = equal(in[0], in[0]);
                      return TensorList{same ? in[0] : in[0] * 0};
                    },
                    {x});
              }),
              HasSubstr("jit::trace: equal returns a host value (bool)"));
  EXPECT_THAT(error_of([&] {
                jit::trace(
                    [](const TensorList& in) {
                      Tensor y = in[0] + 1;
                      const float first = y.data_ptr<float>()[0];
                      return TensorList{y * first};
                    },
                    {x});
              }),
              HasSubstr("jit::trace: data_ptr() reads %0 (the output of add.Scalar)"));
  EXPECT_THAT(error_of([&] {
                jit::trace([](const TensorList& in) { return TensorList{one_hot(in[0])}; },
                           {ones({3}, kInt64)});
              }),
              HasSubstr("jit::trace: one_hot has an output shape that depends on tensor values"));
  // With its number of classes given, one_hot has a static shape and traces.
  jit::Graph g = jit::trace([](const TensorList& in) { return TensorList{one_hot(in[0], 4)}; },
                            {ones({3}, kInt64)});
  EXPECT_EQ(g.run({full({3}, 2, kInt64)})[0].sum().item<int64_t>(), 3);
  // After tracing, host reads are allowed again.
  EXPECT_EQ(x.sum().item<double>(), 4.0);
}

TEST(JitTrace, ModuleWithSeveralInputsNeedsAFunction) {
  auto m = models::mlp();
  EXPECT_THAT(error_of([&] {
                jit::trace(m, {ones({1, 784}), ones({1, 784})});
              }),
              HasSubstr("jit::trace: Sequential::forward takes one tensor but 2 example inputs "
                        "were given"));
}

// The tracers keep no intermediate alive: tracing needs the memory running eagerly does (a
// compiled module's first call, which traces, is not its peak). Before, every traced tensor was
// held until the trace ended: ResNet-50's first training step through jit::compile took
// 1,433 MB of RSS against eager's 1,077.
TEST(JitTrace, TracingFreesIntermediatesAsEagerDoes) {
  auto fn = [](const TensorList& in) {
    Tensor h = in[0];
    for (int i = 0; i < 8; ++i) h = (h * 2).relu();  // 4 MB each; the previous one dropped
    return TensorList{h.sum()};
  };
  Tensor x = randn({1 << 20});
  auto peak_of = [&](const std::function<void()>& f) {
    const int64_t base = memory_stats().allocated;
    reset_peak_memory_stats();
    f();
    return memory_stats().peak_allocated - base;
  };
  const int64_t eager = peak_of([&] { fn({x}); });
  const int64_t traced = peak_of([&] { jit::trace(fn, {x}); });
  const int64_t ops = peak_of([&] { jit::trace_ops(fn, {x}); });
  EXPECT_GE(eager, int64_t{8} << 20);  // two 4 MB tensors at once
  EXPECT_LE(traced, eager + (int64_t{1} << 20)) << "eager peak " << eager;
  EXPECT_LE(ops, eager + (int64_t{1} << 20)) << "eager peak " << eager;
}

TEST(JitRun, InputsMustMatchTheTrace) {
  auto m = models::mlp();
  m->eval();
  jit::Graph g = jit::trace(m, {randn({2, 784})});
  EXPECT_THAT(error_of([&] {
                g.run({randn({3, 784})});
              }),
              HasSubstr("graph: input %x0 was traced as float32[2, 784] but got float32[3, 784]"));
  EXPECT_THAT(error_of([&] { g.run({}); }), HasSubstr("graph: takes 1 inputs but got 0"));
  EXPECT_THAT(error_of([&] {
                g.run({randn({2, 784}, kFloat64)});
              }),
              HasSubstr("but got float64[2, 784]"));
}

TEST(JitRun, LintNamesBrokenGraphs) {
  auto m = models::mlp();
  jit::Graph g = jit::trace(m, {randn({2, 784})});
  jit::fuse_ops(g);
  jit::Graph use_before_def = g;
  std::swap(use_before_def.nodes[0], use_before_def.nodes[1]);
  EXPECT_THAT(error_of([&] { use_before_def.lint(); }),
              HasSubstr("graph: node 0 (linear_relu) uses %0 before it is defined"));
  jit::Graph bad_ref = g;
  bad_ref.outputs[0] = 999;
  EXPECT_THAT(error_of([&] { bad_ref.lint(); }),
              HasSubstr("the graph's return refers to value 999"));
  jit::Graph same_name = g;
  same_name.values[1].name = "x0";
  EXPECT_THAT(error_of([&] { same_name.lint(); }),
              HasSubstr("graph: the name %x0 is used by two values"));
  jit::Graph no_tensor = g;
  no_tensor.tensors[2] = Tensor();
  EXPECT_THAT(error_of([&] { no_tensor.lint(); }), HasSubstr("has no tensor"));
}

// Every zoo model, eval mode: the graph gives the eager output bit for bit; frozen (batch norm
// folded, fused, constants folded) it agrees within float tolerance.
TEST(JitZoo, EveryModelCompiledEqualsEager) {
  for (const models::ModelInfo& info : models::list()) {
    SCOPED_TRACE(info.name);
    manual_seed(3);
    auto m = models::create(info.name, {3, 32, 10});
    m->eval();
    Tensor x = randn({2, 3, 32, 32});
    Tensor y;
    {
      NoGradGuard ng;
      y = m->forward(x);
    }
    jit::Graph g = jit::trace(m, {x});
    for (const jit::Node& n : g.nodes) EXPECT_NE(n.op, nullptr);
    // The printed graph names every parameter and buffer the forward reads.
    const std::string printed = g.str();
    EXPECT_THAT(printed, HasSubstr("graph(%x0 : float32[2, 3, 32, 32]):"));
    for (const auto& [name, t] : m->named_parameters())
      EXPECT_THAT(printed, HasSubstr("%" + name + " : ")) << info.name;
    for (const auto& [name, t] : m->named_buffers()) {
      if (name.find("num_batches_tracked") == std::string::npos) {
        EXPECT_THAT(printed, HasSubstr("%" + name + " : ")) << info.name;
      }
    }
    NoGradGuard ng;
    EXPECT_TRUE(equal(g.run({x})[0], y)) << info.name << ": graph differs from eager";
    jit::freeze(g);
    expect_close(g.run({x})[0], y, 1e-4, 1e-4, info.name + " frozen");
    EXPECT_EQ(g.count("batch_norm"), 0) << g.str();
  }
}

TEST(JitCompile, TracesOnceAndRetracesOnNewShapeDtypeOrMode) {
  manual_seed(4);
  auto m = models::lenet({1, 28, 10});
  auto c = jit::compile(m);
  Tensor x = randn({2, 1, 28, 28});
  Tensor eager = m->forward(x);
  NoGradGuard ng;
  Tensor first = c->forward(x);
  EXPECT_EQ(c->traces(), 1);
  Tensor second = c->forward(x);
  EXPECT_EQ(c->traces(), 1);
  EXPECT_TRUE(equal(first, eager));
  EXPECT_TRUE(equal(second, eager));
  // A new batch size: a new trace (the old graph is kept for the old shape).
  Tensor x3 = randn({3, 1, 28, 28});
  EXPECT_TRUE(equal(c->forward(x3), m->forward(x3)));
  EXPECT_EQ(c->traces(), 2);
  EXPECT_EQ(c->graph().values[static_cast<size_t>(c->graph().inputs[0])].sizes[0], 3);
  c->forward(x);
  EXPECT_EQ(c->traces(), 2);
  // A new dtype.
  m->to(kFloat64);
  Tensor xd = x.to(kFloat64);
  EXPECT_TRUE(equal(c->forward(xd), m->forward(xd)));
  EXPECT_EQ(c->traces(), 3);
  // eval() changes the graph (dropout, batch norm): a new trace.
  c->eval();
  EXPECT_FALSE(m->is_training());
  c->forward(xd);
  EXPECT_EQ(c->traces(), 4);
}

TEST(JitCompile, FrozenNeedsEvalModeAndMatchesEager) {
  manual_seed(5);
  auto m = models::resnet18({3, 32, 10});
  auto c = jit::compile(m, {.freeze = true});
  EXPECT_THAT(error_of([&] {
                c->forward(randn({1, 3, 32, 32}));
              }),
              HasSubstr("jit::compile: freeze needs ResNet in eval mode"));
  c->eval();
  Tensor x = randn({1, 3, 32, 32});
  NoGradGuard ng;
  Tensor y = m->forward(x);
  c->forward(x);
  expect_close(c->forward(x), y, 1e-4, 1e-4, "frozen resnet18");
  EXPECT_EQ(c->graph().count("batch_norm"), 0);
  EXPECT_GT(c->graph().count("conv2d_relu"), 0);
  // The same with independent branches run concurrently (a ResNet's downsample branches).
  auto cp = jit::compile(m, {.freeze = true, .parallel_branches = true});
  cp->forward(x);
  expect_close(cp->forward(x), y, 1e-4, 1e-4, "frozen resnet18, parallel branches");
}

// Training through a graph: the executor calls the ops' front ends, so autograd records as in
// eager; an SGD loop through the compiled module follows the eager one.
TEST(JitTrain, SgdThroughCompiledModuleEqualsEager) {
  auto make = [] {
    manual_seed(6);
    return models::mlp({1, 8, 4}, {16, 8});
  };
  auto eager = make();
  auto base = make();
  auto compiled = jit::compile(base);
  optim::SGD opt_e(eager->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::SGD opt_c(compiled->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  manual_seed(7);
  Tensor x = randn({8, 1, 8, 8});
  Tensor t = randint(0, 4, {8});
  for (int step = 0; step < 5; ++step) {
    for (auto [model, opt] : {std::pair<nn::Module*, optim::SGD*>{eager.get(), &opt_e},
                              std::pair<nn::Module*, optim::SGD*>{compiled.get(), &opt_c}}) {
      opt->zero_grad();
      Tensor loss = nn::functional::cross_entropy(model->forward(x), t);
      loss.backward();
      opt->step();
    }
  }
  EXPECT_EQ(compiled->traces(), 1);
  auto pe = eager->named_parameters();
  auto pc = base->named_parameters();
  for (size_t i = 0; i < pe.size(); ++i) {
    expect_close(pc[i].second, pe[i].second, 1e-5, 1e-6, pe[i].first);
  }
}

TEST(JitTrain, GraphGradientsEqualEagerWithBatchNormAndDropout) {
  manual_seed(8);
  auto m = std::make_shared<nn::Sequential>(
      nn::Conv2d(3, 8, 3, 1, 1), nn::BatchNorm2d(8), nn::ReLU(), nn::Conv2d(8, 8, 3, 1, 1),
      nn::BatchNorm2d(8), nn::ReLU(), nn::Flatten(), nn::Dropout(0.3), nn::Linear(8 * 8 * 8, 5));
  Tensor x = randn({4, 3, 8, 8});
  jit::Graph g = jit::trace(m, {x});  // training mode: dropout and batch-norm statistics
  EXPECT_GT(g.count("dropout"), 0);
  jit::optimize(g);
  EXPECT_GT(g.count("dropout"), 0) << "DCE must keep random ops";
  EXPECT_EQ(g.count("batch_norm_relu"), 2) << g.str();  // each batch norm with its ReLU
  // Same RNG state and running statistics for both runs.
  auto sd = m->state_dict();
  std::vector<Tensor> saved;
  for (auto& [k, v] : sd) saved.push_back(v.clone());
  manual_seed(9);
  m->zero_grad();
  m->forward(x).pow(2).sum().backward();
  std::vector<Tensor> ge;
  for (const Tensor& p : m->parameters()) ge.push_back(p.grad().clone());
  {
    NoGradGuard ng;
    for (size_t i = 0; i < sd.size(); ++i) sd[i].second.copy_(saved[i]);
  }
  manual_seed(9);
  m->zero_grad();
  g.run({x})[0].pow(2).sum().backward();
  auto params = m->parameters();
  for (size_t i = 0; i < params.size(); ++i) {
    ASSERT_TRUE(params[i].grad().defined()) << i;
    expect_close(params[i].grad(), ge[i], 1e-5, 1e-6, "grad " + std::to_string(i));
  }
}

TEST(JitTrain, FitAcceptsACompiledModule) {
  auto make = [] {
    manual_seed(10);
    return models::mlp({1, 6, 3}, {12});
  };
  manual_seed(11);
  Tensor data = randn({64, 1, 6, 6});
  Tensor targets = randint(0, 3, {64});
  auto run = [&](nn::Module& model) {
    data::DataLoader train(std::make_shared<data::TensorDataset>(data, targets),
                           data::DataLoaderOptions{.batch_size = 16, .shuffle = true, .seed = 1});
    data::DataLoader val(std::make_shared<data::TensorDataset>(data, targets),
                         data::DataLoaderOptions{.batch_size = 32});
    optim::SGD opt(model.parameters(), optim::SGDOptions(0.05).momentum(0.9));
    auto loss = [](const Tensor& o, const Tensor& t) {
      return nn::functional::cross_entropy(o, t);
    };
    return train::fit(model, loss, opt, train, &val, {.epochs = 3});
  };
  auto eager = make();
  auto base = make();
  auto compiled = jit::compile(base);
  train::History he = run(*eager);
  train::History hc = run(*compiled);
  ASSERT_EQ(hc.train.size(), 3u);
  for (size_t e = 0; e < 3; ++e) {
    EXPECT_NEAR(hc.train[e].loss, he.train[e].loss, 1e-5) << e;
    EXPECT_NEAR(hc.val[e].loss, he.val[e].loss, 1e-5) << e;
    EXPECT_EQ(hc.val[e].accuracy, he.val[e].accuracy) << e;
  }
  // One graph for training batches of 16, one for evaluation batches of 32 (eval mode).
  EXPECT_EQ(compiled->traces(), 2);
}

TEST(JitCompile, RetracesOnANewDevice) {
  manual_seed(12);
  auto m = models::mlp({1, 4, 3}, {6});
  auto c = jit::compile(m);
  NoGradGuard ng;
  Tensor x = randn({2, 1, 4, 4});
  Tensor y = c->forward(x);
  EXPECT_EQ(c->traces(), 1);
  // The same shapes on the meta device: a new graph, run through the ops' shape rules alone.
  m->to(kMeta);
  Tensor ym = c->forward(x.to(kMeta));
  EXPECT_EQ(c->traces(), 2);
  EXPECT_TRUE(ym.device().is_meta());
  EXPECT_TRUE(ym.sizes().equals(y.sizes()));
  EXPECT_TRUE(c->graph().values[static_cast<size_t>(c->graph().inputs[0])].device.is_meta());
  EXPECT_THAT(c->graph().str(), HasSubstr("graph(%x0 : float32[2, 1, 4, 4] @meta)"));
}

TEST(JitParallel, LevelsAndBarriers) {
  Tensor a = randn({8, 8}), b = randn({8, 8});
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        Tensor l = in[0].matmul(a).relu();
        Tensor r = in[0].matmul(b).relu();
        Tensor s = l + r;
        s.mul_(2);  // writes: a barrier
        return TensorList{s.exp(), l.sigmoid()};
      },
      {randn({4, 8})});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"matmul", "relu", "matmul", "relu", "add.Tensor",
                                                   "mul_.Scalar", "exp", "sigmoid"}));
  jit::Executor ex(std::make_shared<jit::Graph>(g), {.parallel_branches = true});
  EXPECT_EQ(ex.levels(), (std::vector<std::vector<int>>{{0, 2}, {1, 3}, {4}, {5}, {6, 7}}));
  // Ops this small cost less than waking the pool: the cost model runs each alone.
  EXPECT_EQ(jit::detail::plan_levels(g, ex.levels(), 2),
            (std::vector<std::vector<int>>{{0}, {2}, {1}, {3}, {4}, {5}, {6}, {7}}));
  jit::Executor every(std::make_shared<jit::Graph>(g),
                      {.parallel_branches = true, .branch_cost_model = false});
  EXPECT_EQ(every.schedule(), every.levels());
}

TEST(JitParallel, CostModelRunsSmallBranchesTogetherAndLetsLargeOpsKeepTheirThreads) {
  using Plan = std::vector<std::vector<int>>;
  manual_seed(14);
  // Eight chains of a [64, 128] x [128, 128] product and a tanh (examples/parallel_branches.cpp):
  // each product ~1M multiply-adds, each tanh 8192 elements (one grain: one core anyway).
  std::vector<std::pair<std::string, Tensor>> ws;
  for (int k = 0; k < 8; ++k) ws.emplace_back("w" + std::to_string(k), randn({128, 128}) * 0.1);
  jit::Graph chains = jit::trace(
      [&](const TensorList& in) {
        TensorList outs;
        for (const auto& [name, w] : ws) outs.push_back(in[0].matmul(w).tanh());
        return outs;
      },
      {randn({64, 128})}, ws);
  const Plan levels = jit::detail::dependency_levels(chains);
  ASSERT_EQ(levels.size(), 2u);
  const jit::detail::NodeCost mm = jit::detail::node_cost(chains, chains.nodes[0]);
  EXPECT_NEAR(mm.ns, 64.0 * 128 * 128 * 0.03, 1e-6);
  EXPECT_TRUE(mm.threaded);
  const jit::detail::NodeCost th = jit::detail::node_cost(chains, chains.nodes[1]);
  EXPECT_NEAR(th.ns, 64.0 * 128, 1e-9);
  EXPECT_FALSE(th.threaded);
  // On two threads both levels run together (8 x 31 us over 2 cores beats 8 x (16 us + a fork));
  // on one thread every node runs alone.
  EXPECT_EQ(jit::detail::plan_levels(chains, levels, 2), levels);
  EXPECT_EQ(jit::detail::plan_levels(chains, levels, 1).size(), chains.nodes.size());
  // A large product beside small ops: it keeps its threads, run alone; the small ops are not
  // worth a fork either.
  Tensor big = randn({512, 512});
  jit::Graph mixed = jit::trace(
      [&](const TensorList& in) {
        return TensorList{in[1].relu(), in[0].matmul(big), in[1].sigmoid(), in[1].exp()};
      },
      {randn({512, 512}), randn({16, 16})}, {{"big", big}});
  const Plan mixed_levels = jit::detail::dependency_levels(mixed);
  ASSERT_EQ(mixed_levels, (Plan{{0, 1, 2, 3}}));
  EXPECT_EQ(jit::detail::plan_levels(mixed, mixed_levels, 2), (Plan{{0}, {1}, {2}, {3}}));
  // Larger small ops: the product alone on both threads, then the rest together.
  jit::Graph mixed2 = jit::trace(
      [&](const TensorList& in) {
        return TensorList{in[1].relu(), in[0].matmul(big), in[1].sigmoid(), in[1].exp()};
      },
      {randn({512, 512}), randn({128, 128})}, {{"big", big}});
  EXPECT_EQ(jit::detail::plan_levels(mixed2, jit::detail::dependency_levels(mixed2), 2),
            (Plan{{1}, {0, 2, 3}}));
  // The executor plans for the pool it has, and runs the plan with the results of node by node.
  auto shared = std::make_shared<jit::Graph>(chains);
  jit::Executor seq(shared), planned(shared, {.parallel_branches = true});
  EXPECT_EQ(planned.schedule(), jit::detail::plan_levels(chains, levels, get_num_threads()));
  NoGradGuard ng;
  Tensor x = randn({64, 128});
  TensorList a = seq.run({x}), b = planned.run({x});
  for (size_t k = 0; k < a.size(); ++k) EXPECT_TRUE(allclose(a[k], b[k], 1e-5, 1e-6)) << k;
}

TEST(JitParallel, BranchesRunConcurrentlyWithTheResultsAndGradientsOfSequential) {
  manual_seed(13);
  // Eight independent branches of small ops, as the lecture's independent computations.
  std::vector<Tensor> ws;
  for (int k = 0; k < 8; ++k) ws.push_back((randn({32, 32}) * 0.2).requires_grad_(true));
  auto fn = [&](const TensorList& in) {
    Tensor sum;
    for (const Tensor& w : ws) {
      Tensor h = in[0].matmul(w).tanh().matmul(w).sigmoid();
      sum = sum.defined() ? sum + h : h;
    }
    return TensorList{sum};
  };
  std::vector<std::pair<std::string, Tensor>> named;
  for (size_t k = 0; k < ws.size(); ++k) named.emplace_back("w" + std::to_string(k), ws[k]);
  Tensor x = randn({16, 32});
  auto g = std::make_shared<jit::Graph>(jit::trace(fn, {x}, named));
  // Every level run together (these ops are too small for the cost model to choose it).
  jit::Executor seq(g), par(g, {.parallel_branches = true, .branch_cost_model = false});
  EXPECT_EQ(par.levels()[0].size(), 8u);
  EXPECT_EQ(par.schedule(), par.levels());
  for (Tensor& w : ws) w.set_grad(Tensor());
  Tensor ys = seq.run({x})[0];
  ys.sum().backward();
  std::vector<Tensor> gs;
  for (const Tensor& w : ws) gs.push_back(w.grad().clone());
  for (Tensor& w : ws) w.set_grad(Tensor());
  Tensor yp = par.run({x})[0];
  EXPECT_TRUE(yp.requires_grad()) << "grad mode reaches the pool's threads";
  EXPECT_TRUE(allclose(yp, ys, 1e-5, 1e-6));
  yp.sum().backward();
  for (size_t k = 0; k < ws.size(); ++k) EXPECT_TRUE(allclose(ws[k].grad(), gs[k], 1e-5, 1e-6));
  {
    NoGradGuard ng;  // and so does no-grad mode
    EXPECT_FALSE(par.run({x})[0].requires_grad());
  }
  // Under saved-tensor hooks (here non-reentrant checkpointing, whose hooks are this thread's)
  // the nodes run on the calling thread in order: every saved tensor is packed, in the same
  // order in the forward and the re-run, and the gradients are the sequential run's.
  for (Tensor& w : ws) w.set_grad(Tensor());
  Tensor xr = x.clone().requires_grad_(true);
  autograd::checkpoint([&](const TensorList& in) { return par.run({in[0]}); }, {xr}, true, false)[0]
      .sum()
      .backward();
  for (size_t k = 0; k < ws.size(); ++k) EXPECT_TRUE(allclose(ws[k].grad(), gs[k], 1e-5, 1e-6));
  // An error inside a concurrent level reaches the caller.
  auto broken = std::make_shared<jit::Graph>(*g);
  for (size_t id = 0; id < broken->values.size(); ++id)
    if (broken->values[id].name == "w3") broken->tensors[id] = randn({5, 5});
  jit::Executor bad(broken, {.parallel_branches = true, .branch_cost_model = false});
  EXPECT_THAT(error_of([&] { bad.run({x}); }), HasSubstr("matmul"));
}

TEST(JitTrace, HostReadsOfConstantsAreAllowedUnseenWritesAreNot) {
  // A value computed from constants alone is the same at every run: reading it is fine.
  Tensor c = full({3}, 2.0);
  jit::Graph g = jit::trace(
      [&](const TensorList& in) {
        const double scale = c.sum().item<double>();  // 6, baked into the graph
        return TensorList{in[0] * scale};
      },
      {ones({2})});
  EXPECT_THAT(g.str(), HasSubstr("mul.Scalar(%x0, other=6"));
  EXPECT_EQ(vals(g.run({full({2}, 0.5)})[0]), (std::vector<double>{3, 3}));
  // Host data written into a fresh tensor: the graph holds that tensor as a constant.
  jit::Graph filled = jit::trace(
      [](const TensorList& in) {
        Tensor t = empty({2});
        float* p = t.data_ptr<float>();
        p[0] = 1;
        p[1] = 2;
        return TensorList{in[0] + t};
      },
      {ones({2})});
  jit::eliminate_dead_code(filled);
  EXPECT_EQ(filled.count("empty"), 0) << filled.str();
  EXPECT_EQ(vals(filled.run({full({2}, 10.0)})[0]), (std::vector<double>{11, 12}));
  // A write through code outside the registry (a kernel called directly, as an extension might;
  // here its version bump) would be missing from the graph: refused.
  EXPECT_THAT(error_of([&] {
                jit::trace(
                    [](const TensorList& in) {
                      Tensor y = in[0].clone();
                      y.impl()->bump_version();
                      return TensorList{y + 1};
                    },
                    {ones({2, 2})});
              }),
              HasSubstr("jit::trace: %0 was written in place by code the tracer does not see"));
}
