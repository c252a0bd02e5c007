// End to end on the real MNIST: the demo MLP trained for one epoch (SGD lr 0.05, momentum 0.9,
// batch 128, normalised inputs) reaches at least 95% test accuracy. The data directory is
// $IGNIS_MNIST_DIR, else <repo>/data/mnist (`make test` fetches it there); the test is skipped,
// naming the path, when the files are absent.
#include <chrono>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include "training_test_util.h"

using namespace ignis;

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace {
std::string mnist_dir() {
  const char* env = std::getenv("IGNIS_MNIST_DIR");
  return env != nullptr && *env != '\0' ? std::string(env)
                                        : std::string(IGNIS_SOURCE_DIR) + "/data/mnist";
}
bool has_split(const std::string& dir, const std::string& prefix) {
  namespace fs = std::filesystem;
  for (const std::string& stem : {prefix + "-images-idx3-ubyte", prefix + "-labels-idx1-ubyte"}) {
    if (!fs::exists(dir + "/" + stem) && !fs::exists(dir + "/" + stem + ".gz")) return false;
  }
  return true;
}
}  // namespace

TEST(MnistEndToEnd, MlpReaches95PercentAfterOneEpoch) {
  const std::string dir = mnist_dir();
  if (!has_split(dir, "train") || !has_split(dir, "t10k")) {
    GTEST_SKIP() << "MNIST not found in " << dir
                 << " (set IGNIS_MNIST_DIR, or run `ignis fetch mnist --dir " << dir << "`)";
  }
  manual_seed(0);
  auto normalize = data::transforms::Normalize({0.1307}, {0.3081});
  auto train_raw = std::make_shared<data::MNIST>(dir, true);
  auto test_raw = std::make_shared<data::MNIST>(dir, false);
  ASSERT_EQ(train_raw->size(), 60000);
  ASSERT_EQ(test_raw->size(), 10000);
  auto train_set = std::make_shared<data::MapDataset>(train_raw, normalize);
  auto test_set = std::make_shared<data::MapDataset>(test_raw, normalize);
  data::DataLoader train_loader(train_set, {.batch_size = 128, .shuffle = true, .seed = 0});
  data::DataLoader test_loader(test_set, {.batch_size = 1000});

  auto model = models::mlp();
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  auto loss = [](const Tensor& out, const Tensor& t) {
    return nn::functional::cross_entropy(out, t);
  };
  const auto t0 = std::chrono::steady_clock::now();
  train::History h = train::fit(*model, loss, opt, train_loader, &test_loader, {.epochs = 1});
  const double secs = std::chrono::duration<double>(std::chrono::steady_clock::now() - t0).count();
  ASSERT_EQ(h.val.size(), 1u);
  std::cout << "mnist e2e: train loss " << h.train[0].loss << " acc " << h.train[0].accuracy
            << ", test loss " << h.val[0].loss << " acc " << h.val[0].accuracy << " ("
            << h.val[0].samples << " samples), " << secs << " s\n";
  EXPECT_EQ(h.val[0].samples, 10000);
  EXPECT_GE(h.val[0].accuracy, 0.95);
  EXPECT_LT(h.val[0].loss, 0.2);
  // The same figure from an independent count over the test set.
  model->eval();
  NoGradGuard ng;
  int64_t correct = 0;
  for (auto& b : test_loader) correct += train::count_correct(model->forward(b.data), b.target);
  EXPECT_EQ(correct, static_cast<int64_t>(std::llround(h.val[0].accuracy * 10000)));
}
