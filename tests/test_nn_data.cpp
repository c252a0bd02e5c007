// nn modules, losses, data loading and the training loop (the first tests of the training
// stack; the full set comes with its issue).
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {
}  // namespace

TEST(Module, NamedParametersAndStateDict) {
  auto model = models::mlp({1, 4, 3}, {5});  // 16 -> 5 -> 3
  auto names = model->named_parameters();
  ASSERT_EQ(names.size(), 4u);
  EXPECT_EQ(names[0].first, "1.weight");
  EXPECT_EQ(names[3].first, "3.bias");
  EXPECT_EQ(model->num_parameters(), 16 * 5 + 5 + 5 * 3 + 3);
  for (auto& [n, p] : names) EXPECT_TRUE(p.requires_grad()) << n;
  // Linear's default init: U(-1/sqrt(in), 1/sqrt(in)).
  Tensor w = model->get("1.weight");
  EXPECT_LE(w.abs().max().item<double>(), 1.0 / 4.0 + 1e-6);
  EXPECT_THAT(model->summary(), HasSubstr("Total params: 103"));
}

TEST(Module, LoadStateDictReportsEveryProblem) {
  auto a = models::mlp({1, 4, 3}, {5});
  auto b = models::mlp({1, 4, 3}, {5});
  b->load_state_dict(a->state_dict());
  EXPECT_TRUE(equal(a->get("3.weight"), b->get("3.weight")));
  auto sd = a->state_dict();
  sd.erase(sd.begin());                         // missing 1.weight
  sd.emplace_back("extra", zeros({1}));         // unexpected
  sd[0].second = zeros({7});                    // 1.bias has the wrong shape
  std::string msg = error_of([&] { b->load_state_dict(sd); });
  EXPECT_THAT(msg, HasSubstr("missing keys: 1.weight"));
  EXPECT_THAT(msg, HasSubstr("unexpected keys: extra"));
  EXPECT_THAT(msg, HasSubstr("1.bias: checkpoint [7] vs model [5]"));
}

TEST(Module, TrainEvalAndDropout) {
  nn::Dropout d(0.5);
  manual_seed(1);
  Tensor x = ones({1000});
  Tensor y = d(x);
  const double kept = (y != 0).sum().item<int64_t>() / 1000.0;
  EXPECT_NEAR(kept, 0.5, 0.06);
  EXPECT_DOUBLE_EQ(y.max().item<double>(), 2.0);  // survivors scaled by 1/(1-p)
  d.eval();
  EXPECT_TRUE(equal(d(x), x));
}

TEST(Losses, HandComputedValues) {
  Tensor in = tensor({1.0, 2.0, 3.0});
  Tensor tg = tensor({1.0, 0.0, 5.0});
  EXPECT_NEAR(nn::functional::mse_loss(in, tg).item<double>(), (0 + 4 + 4) / 3.0, 1e-6);
  EXPECT_NEAR(nn::functional::l1_loss(in, tg, "sum").item<double>(), 4.0, 1e-6);
  // cross entropy of logits [0, 0] with class 1 is log 2; weight and ignore_index.
  Tensor logits = zeros({2, 2});
  Tensor target = tensor({1, 0});
  EXPECT_NEAR(nn::functional::cross_entropy(logits, target).item<double>(), std::log(2.0), 1e-6);
  Tensor t2 = tensor({1, -100});
  EXPECT_NEAR(nn::functional::cross_entropy(logits, t2).item<double>(), std::log(2.0), 1e-6);
  EXPECT_THAT(error_of([&] { nn::functional::cross_entropy(logits, tensor({0, 2})); }),
              HasSubstr("out of bounds for 2 classes"));
}

TEST(Data, LoaderBatchesAreTheSameForAnyNumberOfWorkers) {
  Tensor x = arange(100).to(kFloat32).reshape({100, 1});
  auto ds = std::make_shared<data::TensorDataset>(x, arange(100));
  std::vector<std::vector<float>> runs[3];
  for (int w = 0; w < 3; ++w) {
    data::DataLoader loader(ds, {.batch_size = 8, .shuffle = true, .num_workers = w, .seed = 7});
    for (int epoch = 0; epoch < 2; ++epoch) {
      for (auto& b : loader) {
        Tensor v = b.data.reshape({-1}).contiguous();
        runs[w].emplace_back(v.data_ptr<float>(), v.data_ptr<float>() + v.numel());
      }
    }
  }
  EXPECT_EQ(runs[0], runs[1]);
  EXPECT_EQ(runs[0], runs[2]);
  ASSERT_EQ(runs[0].size(), 2u * 13u);  // 13 batches per epoch, the last one of 4
  EXPECT_NE(runs[0][0], runs[0][13]);   // epochs are shuffled differently
}

TEST(Train, FitLearnsASeparableProblemAndCheckpointsRoundTrip) {
  manual_seed(3);
  Tensor x = randn({256, 2});
  Tensor y = (x.select(1, 0) + x.select(1, 1) > 0).to(kInt64);
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  data::DataLoader loader(ds, {.batch_size = 32, .shuffle = true, .seed = 1});
  auto model = std::make_shared<nn::Sequential>(nn::Linear(2, 16), nn::ReLU(), nn::Linear(16, 2));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  auto loss = [](const Tensor& o, const Tensor& t) { return nn::functional::cross_entropy(o, t); };
  train::History h = train::fit(*model, loss, opt, loader, &loader, {.epochs = 10});
  ASSERT_EQ(h.val.size(), 10u);
  EXPECT_GT(h.val.back().accuracy, 0.95);
  EXPECT_LT(h.val.back().loss, h.train.front().loss);

  const std::string path = "/tmp/ignis_ckpt_" + std::to_string(::getpid()) + ".safetensors";
  train::save_checkpoint(path, *model, opt, nullptr, {10, 80});
  auto model2 =
      std::make_shared<nn::Sequential>(nn::Linear(2, 16), nn::ReLU(), nn::Linear(16, 2));
  optim::SGD opt2(model2->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  train::TrainingState s = train::load_checkpoint(path, *model2, opt2, nullptr);
  EXPECT_EQ(s.epoch, 10);
  EXPECT_EQ(s.step, 80);
  EXPECT_TRUE(equal(model->forward(x), model2->forward(x)));
  std::remove(path.c_str());
}
