// The model zoo: parameter counts and state_dict keys against torchvision's, output shapes,
// forward + backward at small sizes, initialisation, and a LeNet convergence run on MNIST.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstdlib>
#include <filesystem>
#include <map>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {
std::map<std::string, Tensor> state_map(const nn::Module& m) {
  std::map<std::string, Tensor> out;
  for (auto& [k, v] : m.state_dict()) out[k] = v;
  return out;
}

void expect_key(const std::map<std::string, Tensor>& sd, const std::string& key,
                std::vector<int64_t> shape) {
  auto it = sd.find(key);
  ASSERT_NE(it, sd.end()) << "missing state_dict key " << key;
  EXPECT_TRUE(it->second.sizes().equals(shape)) << key << " has shape " << it->second.sizes();
}

// The sample standard deviation of a tensor, in float64.
double stddev(const Tensor& t) {
  const Tensor d = t.to(kFloat64).flatten();
  const double mean = d.mean().item<double>();
  return std::sqrt(((d - mean) * (d - mean)).sum().item<double>() /
                   static_cast<double>(d.numel() - 1));
}

const models::ModelConfig kImageNet{3, 224, 1000};
}  // namespace

// torchvision's counts (sum(p.numel() for p in model.parameters()) at 1000 classes).
TEST(Models, ImageNetParameterCountsEqualTorchvision) {
  const std::vector<std::pair<std::string, int64_t>> counts = {
      {"alexnet", 61100840},  {"vgg11", 132863336},    {"vgg11_bn", 132868840},
      {"vgg16", 138357544},   {"vgg16_bn", 138365992}, {"resnet18", 11689512},
      {"resnet34", 21797672}, {"resnet50", 25557032}};
  for (const auto& [name, n] : counts) {
    auto m = models::create(name, kImageNet);
    EXPECT_EQ(m->num_parameters(), n) << name;
  }
}

TEST(Models, SmallConfigParameterCounts) {
  // LeNet-5 by hand: 1*32*25+32 + 32*64*25+64 + 3136*512+512 + 512*10+10.
  EXPECT_EQ(models::create("lenet", {1, 28, 10})->num_parameters(), 1663370);
  // CIFAR: 3*32*25+32 + 51264 + 4096*512+512 + 5130.
  EXPECT_EQ(models::create("lenet", {3, 32, 10})->num_parameters(), 2156490);
  // The CIFAR stem of ResNet-18: conv1 is 3x3 (64*3*9 instead of 64*3*49), fc has 10 outputs.
  EXPECT_EQ(models::create("resnet18", {3, 32, 10})->num_parameters(),
            11689512 - 64 * 3 * 49 + 64 * 3 * 9 - 512 * 990 - 990);
  // AlexNet's CIFAR stem: features.0 is 64x3x3x3 instead of 64x3x11x11.
  EXPECT_EQ(models::create("alexnet", {3, 32, 1000})->num_parameters(),
            61100840 - 64 * 3 * 121 + 64 * 3 * 9);
  // VGG keeps its layout at any size (adaptive pooling feeds the same classifier).
  EXPECT_EQ(models::create("vgg11", {3, 32, 1000})->num_parameters(), 132863336);
}

TEST(Models, StateDictKeysMatchTorchvision) {
  {
    auto sd = state_map(*models::create("alexnet", kImageNet));
    EXPECT_EQ(sd.size(), 16u);
    expect_key(sd, "features.0.weight", {64, 3, 11, 11});
    expect_key(sd, "features.3.weight", {192, 64, 5, 5});
    expect_key(sd, "features.10.bias", {256});
    expect_key(sd, "classifier.1.weight", {4096, 9216});
    expect_key(sd, "classifier.4.weight", {4096, 4096});
    expect_key(sd, "classifier.6.bias", {1000});
  }
  {
    auto sd = state_map(*models::create("vgg16", kImageNet));
    EXPECT_EQ(sd.size(), 32u);
    expect_key(sd, "features.0.weight", {64, 3, 3, 3});
    expect_key(sd, "features.28.weight", {512, 512, 3, 3});
    expect_key(sd, "classifier.0.weight", {4096, 25088});
    expect_key(sd, "classifier.3.bias", {4096});
    expect_key(sd, "classifier.6.weight", {1000, 4096});
  }
  {
    auto sd = state_map(*models::create("vgg16_bn", kImageNet));
    EXPECT_EQ(sd.size(), 32u + 13 * 5);  // each batch norm: weight, bias and three buffers
    expect_key(sd, "features.1.weight", {64});
    expect_key(sd, "features.1.running_mean", {64});
    expect_key(sd, "features.1.running_var", {64});
    expect_key(sd, "features.1.num_batches_tracked", {});
    expect_key(sd, "features.40.weight", {512, 512, 3, 3});
    expect_key(sd, "features.41.bias", {512});
  }
  {
    auto sd = state_map(*models::create("vgg11_bn", kImageNet));
    expect_key(sd, "features.25.weight", {512, 512, 3, 3});
    expect_key(sd, "features.26.running_var", {512});
  }
  {
    auto sd = state_map(*models::create("resnet18", kImageNet));
    EXPECT_EQ(sd.size(), 122u);
    expect_key(sd, "conv1.weight", {64, 3, 7, 7});
    expect_key(sd, "bn1.running_var", {64});
    expect_key(sd, "layer1.0.conv1.weight", {64, 64, 3, 3});
    expect_key(sd, "layer1.1.bn2.num_batches_tracked", {});
    expect_key(sd, "layer2.0.conv1.weight", {128, 64, 3, 3});
    expect_key(sd, "layer2.0.downsample.0.weight", {128, 64, 1, 1});
    expect_key(sd, "layer2.0.downsample.1.running_mean", {128});
    expect_key(sd, "layer4.1.bn2.bias", {512});
    expect_key(sd, "fc.weight", {1000, 512});
    EXPECT_EQ(sd.count("layer1.0.downsample.0.weight"), 0u);  // same size: identity shortcut
    EXPECT_EQ(sd.count("conv1.bias"), 0u);
  }
  {
    auto sd = state_map(*models::create("resnet34", kImageNet));
    EXPECT_EQ(sd.size(), 218u);
    expect_key(sd, "layer3.5.conv2.weight", {256, 256, 3, 3});
  }
  {
    auto sd = state_map(*models::create("resnet50", kImageNet));
    EXPECT_EQ(sd.size(), 320u);
    expect_key(sd, "layer1.0.conv1.weight", {64, 64, 1, 1});
    expect_key(sd, "layer1.0.conv3.weight", {256, 64, 1, 1});
    expect_key(sd, "layer1.0.downsample.0.weight", {256, 64, 1, 1});
    expect_key(sd, "layer2.0.conv2.weight", {128, 128, 3, 3});  // v1.5: stride in the 3x3
    expect_key(sd, "layer4.2.bn3.weight", {2048});
    expect_key(sd, "fc.weight", {1000, 2048});
  }
  {
    auto sd = state_map(*models::create("lenet", {1, 28, 10}));
    expect_key(sd, "0.weight", {32, 1, 5, 5});
    expect_key(sd, "3.weight", {64, 32, 5, 5});
    expect_key(sd, "7.weight", {512, 3136});
    expect_key(sd, "9.bias", {10});
  }
}

TEST(Models, ImageNetOutputShapes) {
  NoGradGuard ng;
  for (const std::string name : {"alexnet", "resnet18"}) {
    auto m = models::create(name, kImageNet);
    m->eval();
    const Tensor y = m->forward(randn({1, 3, 224, 224}));
    EXPECT_TRUE(y.sizes().equals({1, 1000})) << name << ": " << y.sizes();
  }
  // A size between the two: ImageNet stems on 64x64 images.
  for (const std::string name : {"resnet50", "vgg11_bn"}) {
    auto m = models::create(name, {3, 64, 7});
    m->eval();
    EXPECT_TRUE(m->forward(randn({2, 3, 64, 64})).sizes().equals({2, 7})) << name;
  }
}

// Every model trains on CIFAR-sized (and MNIST-sized) inputs: finite loss, finite gradients
// for every parameter, and a train step that lowers the loss on the same batch.
TEST(Models, ForwardBackwardAtSmallSizes) {
  manual_seed(1);
  // Every model at CIFAR's 3x32x32; one model of each family also at MNIST's 1x28x28 (the odd
  // sizes of VGG's pools, AlexNet's CIFAR stem at 28).
  std::vector<std::pair<std::string, models::ModelConfig>> runs;
  for (const auto& info : models::list()) runs.push_back({info.name, {3, 32, 10}});
  for (const char* name : {"mlp", "lenet", "alexnet", "vgg11_bn", "resnet50"}) {
    runs.push_back({name, {1, 28, 10}});
  }
  for (const auto& [name, cfg] : runs) {
    SCOPED_TRACE(name + " at " + std::to_string(cfg.in_channels) + "x" +
                 std::to_string(cfg.image_size));
    auto m = models::create(name, cfg);
    const Tensor x = randn({2, cfg.in_channels, cfg.image_size, cfg.image_size});
    const Tensor y = tensor({3, 7});
    const Tensor out = m->forward(x);
    ASSERT_TRUE(out.sizes().equals({2, 10})) << out.sizes();
    Tensor loss = nn::functional::cross_entropy(out, y);
    ASSERT_TRUE(std::isfinite(loss.item<double>()));
    loss.backward();
    for (auto& [pname, p] : m->named_parameters()) {
      ASSERT_TRUE(p.grad().defined()) << pname;
      ASSERT_TRUE(std::isfinite(p.grad().abs().sum().item<double>())) << pname;
    }
  }
}

TEST(Models, StemsFollowTheImageSize) {
  auto small = models::resnet18({3, 32, 10});
  EXPECT_TRUE(small->get("conv1.weight").sizes().equals({64, 3, 3, 3}));
  EXPECT_EQ(small->maxpool->type_name(), "Identity");
  auto large = models::resnet18({3, 33, 10});
  EXPECT_TRUE(large->get("conv1.weight").sizes().equals({64, 3, 7, 7}));
  EXPECT_EQ(large->maxpool->type_name(), "MaxPool2d");
  // Forced by name.
  auto forced = models::resnet18({3, 32, 10}, models::Stem::kImageNet);
  EXPECT_TRUE(forced->get("conv1.weight").sizes().equals({64, 3, 7, 7}));
  NoGradGuard ng;
  forced->eval();
  EXPECT_TRUE(forced->forward(randn({1, 3, 32, 32})).sizes().equals({1, 10}));
  auto cifar_big = models::resnet50({3, 64, 10}, models::Stem::kCifar);
  EXPECT_TRUE(cifar_big->get("conv1.weight").sizes().equals({64, 3, 3, 3}));
  EXPECT_TRUE(models::alexnet({1, 28, 10})->get("features.0.weight").sizes().equals({64, 1, 3, 3}));
}

TEST(Models, InitialisationAsTorchvision) {
  manual_seed(3);
  auto vgg = models::vgg11({3, 32, 10}, true);  // classifier 25088 -> 4096 -> 4096 -> 10
  // Linear: N(0, 0.01), bias 0.
  EXPECT_NEAR(stddev(vgg->get("classifier.0.weight").narrow(0, 0, 64)), 0.01, 0.0002);
  EXPECT_EQ(vgg->get("classifier.3.bias").abs().max().item<double>(), 0.0);
  // Conv: kaiming normal, fan_out = 128 * 3 * 3 -> std sqrt(2 / 1152); bias 0.
  EXPECT_NEAR(stddev(vgg->get("features.4.weight")), std::sqrt(2.0 / (128 * 9)), 0.002);
  EXPECT_EQ(vgg->get("features.0.bias").abs().max().item<double>(), 0.0);
  // BatchNorm: weight 1, bias 0, running stats 0 and 1.
  EXPECT_EQ(vgg->get("features.1.weight").min().item<double>(), 1.0);
  EXPECT_EQ(vgg->get("features.1.bias").abs().max().item<double>(), 0.0);
  EXPECT_EQ(vgg->get("features.1.running_var").min().item<double>(), 1.0);
  auto rn = models::resnet50(kImageNet);
  // conv1: fan_out = 64 * 7 * 7.
  EXPECT_NEAR(stddev(rn->get("conv1.weight")), std::sqrt(2.0 / (64 * 49)), 0.001);
  EXPECT_NEAR(stddev(rn->get("layer3.0.conv2.weight")), std::sqrt(2.0 / (256 * 9)), 0.0005);
  EXPECT_EQ(rn->get("layer2.0.bn3.weight").min().item<double>(), 1.0);
  // fc keeps PyTorch's Linear default, U(-1/sqrt(2048), 1/sqrt(2048)).
  EXPECT_LE(rn->get("fc.weight").abs().max().item<double>(), 1.0 / std::sqrt(2048.0));
}

TEST(Models, StateDictRoundTripInEvalMode) {
  manual_seed(4);
  auto a = models::resnet18({3, 32, 10});
  // A training forward updates the running statistics, so the buffers hold real values.
  a->forward(randn({4, 3, 32, 32}));
  auto b = models::resnet18({3, 32, 10});
  b->load_state_dict(a->state_dict());
  a->eval();
  b->eval();
  NoGradGuard ng;
  const Tensor x = randn({2, 3, 32, 32});
  EXPECT_TRUE(equal(a->forward(x), b->forward(x)));
  EXPECT_EQ(b->get("bn1.num_batches_tracked").item<int64_t>(), 1);
}

TEST(Models, RegistryListsTheZoo) {
  std::map<std::string, models::ModelConfig> natural;
  for (const auto& m : models::list()) natural[m.name] = m.natural;
  for (const std::string name : {"mlp", "lenet", "alexnet", "vgg11", "vgg11_bn", "vgg16",
                                 "vgg16_bn", "resnet18", "resnet34", "resnet50"}) {
    ASSERT_EQ(natural.count(name), 1u) << name;
  }
  EXPECT_EQ(natural["resnet50"].image_size, 224);
  EXPECT_EQ(natural["resnet50"].num_classes, 1000);
  EXPECT_EQ(natural["lenet"].in_channels, 1);
  EXPECT_EQ(natural["lenet"].image_size, 28);
}

TEST(Models, Errors) {
  EXPECT_THAT(error_of([] {
                models::create("lenet", {1, 3, 10});
              }),
              HasSubstr("models::lenet: image_size 3 is too small: the feature map is 1x1 "
                        "before the second max-pool"));
  EXPECT_THAT(error_of([] {
                models::create("alexnet", {3, 8, 10});
              }),
              HasSubstr("models::alexnet: image_size 8 is too small: the feature map is 1x1 "
                        "before features.12"));
  EXPECT_THAT(error_of([] {
                models::create("alexnet", {3, 40, 10});
              }),
              HasSubstr("models::alexnet: image_size 40 is too small"));
  EXPECT_THAT(error_of([] {
                models::create("vgg11", {3, 32, 0});
              }),
              HasSubstr("models::vgg: channels, image size and classes must be positive (got "
                        "in_channels=3, image_size=32, num_classes=0)"));
  EXPECT_THAT(error_of([] {
                models::create("resnet18", {0, 32, 10});
              }),
              HasSubstr("models::resnet: channels, image size and classes must be positive"));
  EXPECT_THAT(error_of([] { models::create("resnet19"); }),
              HasSubstr("models: unknown model 'resnet19' (registered: alexnet lenet mlp"));
  // A model fed the wrong number of channels fails in its first convolution.
  auto m = models::create("lenet", {1, 28, 10});
  EXPECT_THROW(m->forward(zeros({1, 3, 28, 28})), Error);
}

namespace {
std::string find_mnist() {
  std::vector<std::string> dirs;
  if (const char* env = std::getenv("IGNIS_MNIST_DIR")) dirs.push_back(env);
  for (const char* d : {"data/mnist", "../data/mnist", "../../data/mnist", "../../../data/mnist",
                        "/work/main/data/mnist"}) {
    dirs.push_back(d);
  }
  for (const auto& d : dirs) {
    if (std::filesystem::exists(d + "/train-images-idx3-ubyte") ||
        std::filesystem::exists(d + "/train-images-idx3-ubyte.gz")) {
      return d;
    }
  }
  return "";
}
}  // namespace

// LeNet-5 learns MNIST: 3 epochs (batch 32, the benchmark's SGD) on 1,024 training images
// reach > 85% on 500 test images (a model that does not learn stays near 10%).
TEST(Models, LeNetConvergesOnMnistSubset) {
  const std::string dir = find_mnist();
  if (dir.empty()) {
    GTEST_SKIP() << "MNIST not found (set IGNIS_MNIST_DIR or run `ignis fetch mnist --dir "
                    "data/mnist` at the repository root)";
  }
  manual_seed(0);
  auto norm = data::transforms::Normalize({0.1307}, {0.3081});
  auto train_all = std::make_shared<data::MNIST>(dir, true);
  auto test_all = std::make_shared<data::MNIST>(dir, false);
  std::vector<int64_t> tr(1024), te(500);
  for (size_t i = 0; i < tr.size(); ++i) tr[i] = static_cast<int64_t>(i);
  for (size_t i = 0; i < te.size(); ++i) te[i] = static_cast<int64_t>(i);
  auto train_set =
      std::make_shared<data::MapDataset>(std::make_shared<data::Subset>(train_all, tr), norm);
  auto test_set =
      std::make_shared<data::MapDataset>(std::make_shared<data::Subset>(test_all, te), norm);
  auto model = models::lenet({1, 28, 10});
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.02).momentum(0.9));
  data::DataLoader loader(train_set, {.batch_size = 32, .shuffle = true, .seed = 0});
  data::DataLoader test_loader(test_set, {.batch_size = 500});
  auto loss_fn = [](const Tensor& out, const Tensor& t) {
    return nn::functional::cross_entropy(out, t);
  };
  const double before = train::evaluate(*model, loss_fn, test_loader).accuracy;
  for (int epoch = 0; epoch < 3; ++epoch) {
    for (auto& b : loader) {
      opt.zero_grad();
      Tensor loss = loss_fn(model->forward(b.data), b.target);
      loss.backward();
      opt.step();
    }
  }
  const train::Metrics m = train::evaluate(*model, loss_fn, test_loader);
  EXPECT_LT(before, 0.3);
  EXPECT_GT(m.accuracy, 0.85) << "test loss " << m.loss;
}
