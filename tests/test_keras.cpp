// Keras-style models (ignis/keras.h): compile's names and objects, Keras's losses (the stable
// softmax cross-entropy from the logits, clipping without them), metrics, fit / evaluate /
// predict on tensors and loaders, summary, and every error message.
#include <gmock/gmock.h>

#include <cmath>
#include <optional>

#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

// y = x W^T with W the identity: the model's output is its input (plus a trailing module).
std::shared_ptr<nn::Linear> identity_linear(int64_t n, DType dtype = kFloat32) {
  auto lin = std::make_shared<nn::Linear>(n, n);
  lin->to(dtype);
  NoGradGuard ng;
  lin->weight.copy_(eye(n, std::nullopt, dtype));
  lin->bias.zero_();
  return lin;
}

// Two Gaussian clusters in 4-d, labelled by which one: learnable in a few epochs.
std::pair<Tensor, Tensor> two_blobs(int64_t n, uint64_t seed) {
  manual_seed(seed);
  Tensor y = randint(0, 2, {n});
  Tensor x = randn({n, 4}) + (y.to(kFloat32) * 4 - 2).unsqueeze(1);
  return {x, y};
}

std::shared_ptr<nn::Sequential> small_classifier(uint64_t seed) {
  manual_seed(seed);
  return std::make_shared<nn::Sequential>(nn::Linear(4, 8), nn::ReLU(), nn::Linear(8, 2),
                                          nn::Softmax(1));
}

std::vector<double> param_values(nn::Module& m) {
  std::vector<double> out;
  for (const Tensor& p : m.parameters()) {
    auto v = vals(p);
    out.insert(out.end(), v.begin(), v.end());
  }
  return out;
}

}  // namespace

// ---- compile: names and objects

TEST(Keras, OptimizerNamesUseKerasDefaults) {
  struct Case {
    const char* name;
    const char* type;
    double lr;
  };
  for (const Case& c : {Case{"sgd", "SGD", 0.01}, Case{"adam", "Adam", 0.001},
                        Case{"adamw", "AdamW", 0.001}, Case{"rmsprop", "RMSprop", 0.001},
                        Case{"adagrad", "Adagrad", 0.001}, Case{"Adam", "Adam", 0.001}}) {
    nn::Linear lin(3, 2);
    auto model = train::compile(lin, {.optimizer = c.name, .loss = "mse"});
    EXPECT_EQ(model.optimizer().name(), c.type) << c.name;
    EXPECT_DOUBLE_EQ(model.optimizer().param_groups().front().lr(), c.lr) << c.name;
    EXPECT_EQ(model.optimizer().size(), 2u);
  }
  nn::Linear lin(3, 2);
  auto adam = train::compile(lin, {.optimizer = "adam", .loss = "mse"});
  EXPECT_DOUBLE_EQ(adam.optimizer().defaults().get("eps"), 1e-7);
  auto rms = train::compile(lin, {.loss = "mse"});  // Keras's default optimizer
  EXPECT_EQ(rms.optimizer().name(), "RMSprop");
  EXPECT_DOUBLE_EQ(rms.optimizer().defaults().get("alpha"), 0.9);
  auto adamw = train::compile(lin, {.optimizer = "adamw", .loss = "mse"});
  EXPECT_DOUBLE_EQ(adamw.optimizer().defaults().get("weight_decay"), 0.004);
  auto ada = train::compile(lin, {.optimizer = "adagrad", .loss = "mse"});
  EXPECT_DOUBLE_EQ(ada.optimizer().defaults().get("initial_accumulator_value"), 0.1);
  // A temporary module is kept by the CompiledModel.
  auto owned = train::compile(nn::Sequential(nn::Linear(2, 3), nn::Softmax(1)),
                              {.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  EXPECT_EQ(owned.module().type_name(), "Sequential");
  EXPECT_EQ(owned.module().num_parameters(), 9);
  EXPECT_TRUE(owned.uses_logits());
  EXPECT_EQ(owned.predict(zeros({4, 2})).size(1), 3);
}

TEST(Keras, OptimizerObjects) {
  nn::Linear lin(3, 2);
  // Options of one of ignis's optimizers.
  auto a = train::compile(lin, {.optimizer = optim::SGDOptions(0.5).momentum(0.9), .loss = "mse"});
  EXPECT_EQ(a.optimizer().name(), "SGD");
  EXPECT_DOUBLE_EQ(a.optimizer().param_groups().front().lr(), 0.5);
  EXPECT_DOUBLE_EQ(a.optimizer().defaults().get("momentum"), 0.9);
  // A factory.
  auto b = train::compile(lin, {.optimizer =
                                    [](const std::vector<Tensor>& ps) {
                                      return std::make_unique<optim::RMSprop>(
                                          ps, optim::RMSpropOptions(0.02));
                                    },
                                .loss = "mse"});
  EXPECT_EQ(b.optimizer().name(), "RMSprop");
  EXPECT_DOUBLE_EQ(b.optimizer().param_groups().front().lr(), 0.02);
  // An optimizer built over the model's parameters is used as it is.
  auto opt = std::make_shared<optim::Adam>(lin.parameters(), optim::AdamOptions(0.25));
  auto c = train::compile(lin, {.optimizer = opt, .loss = "mse"});
  EXPECT_EQ(&c.optimizer(), opt.get());
  nn::Linear other(3, 2);
  auto foreign = std::make_shared<optim::SGD>(other.parameters(), optim::SGDOptions(0.1));
  EXPECT_EQ(error_of([&] { train::compile(lin, {.optimizer = foreign, .loss = "mse"}); }),
            "compile: the SGD optimizer holds none of the model's parameters");
}

TEST(Keras, UnknownNamesListTheKnownOnes) {
  nn::Linear lin(3, 2);
  EXPECT_EQ(error_of([&] { train::compile(lin, {.optimizer = "adamax", .loss = "mse"}); }),
            "compile: unknown optimizer 'adamax' (known: sgd, adam, adamw, rmsprop, adagrad; or "
            "pass optimizer options, a factory or an optimizer)");
  EXPECT_EQ(error_of([&] { train::compile(lin, {.loss = "hinge"}); }),
            "compile: unknown loss 'hinge' (known: sparse_categorical_crossentropy, "
            "categorical_crossentropy, binary_crossentropy, mean_squared_error, mse, "
            "mean_absolute_error, mae, huber; or pass a function (output, target) -> Tensor)");
  EXPECT_EQ(error_of([&] { train::compile(lin, {.loss = "mse", .metrics = {"f1"}}); }),
            "compile: unknown metric 'f1' (known: accuracy, acc, sparse_categorical_accuracy, "
            "categorical_accuracy, binary_accuracy, mse, mean_squared_error, mae, "
            "mean_absolute_error; or pass a train::Metric{name, fn})");
  EXPECT_THAT(error_of([&] { train::compile(lin, {.optimizer = "sgd"}); }),
              HasSubstr("compile: a loss is required (known: sparse_categorical_crossentropy, "));
  EXPECT_EQ(error_of([&] {
              train::compile(lin, {.loss = {"mse", true}});
            }),
            "compile: from_logits applies to the cross-entropies, not to 'mean_squared_error'");
  EXPECT_EQ(
      error_of([&] {
        train::compile(lin, {.loss = "mse", .metrics = {"mae", "mean_absolute_error", "mae"}});
      }),
      "compile: metric 'mae' given twice");
  EXPECT_EQ(error_of([&] { train::compile(std::shared_ptr<nn::Module>(), {.loss = "mse"}); }),
            "compile: the module is null");
  EXPECT_EQ(error_of([&] {
              train::compile(lin, {.loss = "mse", .metrics = {train::Metric{"m", nullptr}}});
            }),
            "compile: a Metric needs a name and a function");
  EXPECT_EQ(error_of([&] {
              train::compile(lin, {.loss = "mse",
                                   .metrics = {train::Metric{
                                       "loss", [](const Tensor&, const Tensor&) { return 0.0; }}}});
            }),
            "compile: a metric cannot be named 'loss'");
  EXPECT_EQ(error_of([&] {
              train::compile(lin, {.optimizer =
                                       [](const std::vector<Tensor>&) {
                                         return std::shared_ptr<optim::Optimizer>();
                                       },
                                   .loss = "mse"});
            }),
            "compile: the optimizer factory returned no optimizer");
  EXPECT_EQ(error_of([&] {
              train::compile(lin, {.loss = "mse", .input_shape = {3, 0}});
            }),
            "compile: input_shape [3, 0] must have positive sizes");
  struct Odd : optim::OptimizerOptions {
    double lr = 0.1;
    std::unique_ptr<optim::OptimizerOptions> clone() const override {
      return std::make_unique<Odd>(*this);
    }
    const char* type_name() const override { return "OddOptions"; }
    std::vector<optim::HParamRef> hparams() override { return {{"lr", &lr}}; }
  };
  EXPECT_EQ(error_of([&] { train::compile(lin, {.optimizer = Odd(), .loss = "mse"}); }),
            "compile: optimizer options of type OddOptions are not known; pass a factory "
            "(params) -> optimizer instead");
}

// ---- losses

TEST(Keras, SoftmaxModelLossComesFromTheLogits) {
  // A softmax saturated to exactly 0 for the labelled class: log(softmax) is -inf, Keras (and
  // this) take the loss from the logits: log_softmax, finite, with finite gradients.
  auto lin = identity_linear(3, kFloat64);
  auto net = std::make_shared<nn::Sequential>(lin, nn::Softmax(1));
  auto model = train::compile(net, {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  EXPECT_TRUE(model.uses_logits());
  Tensor x = tensor({1000.0, 0.0, -1000.0, 0.0, 800.0, 0.0}, kFloat64).reshape({2, 3});
  Tensor y = tensor({1, 2}, kInt64);
  Tensor naive = -log(softmax(x, 1)).gather(1, y.unsqueeze(1)).mean();
  EXPECT_TRUE(std::isinf(naive.item<double>()));
  Tensor reference = -log_softmax(x, 1).gather(1, y.unsqueeze(1)).mean();  // (1000 + 800) / 2
  EXPECT_NEAR(reference.item<double>(), 900.0, 1e-9);
  Tensor loss = model.compute_loss(x, y);
  EXPECT_NEAR(loss.item<double>(), reference.item<double>(), 1e-9);
  loss.backward();
  // The gradient of the mean cross-entropy w.r.t. the logits is (softmax - onehot) / N; the
  // weight's is its outer product with x.
  Tensor g_logits = (softmax(x, 1) - one_hot(y, 3).to(kFloat64)) / 2;
  EXPECT_TRUE(allclose(lin->bias.grad(), g_logits.sum(0), 1e-9, 1e-9));
  EXPECT_TRUE(allclose(lin->weight.grad(), g_logits.t().matmul(x), 1e-9, 1e-9));
  EXPECT_TRUE(isfinite(lin->weight.grad()).all().item<bool>());
  // evaluate reports the same finite value.
  EXPECT_NEAR(model.evaluate(x, y, {.verbose = 0})["loss"], 900.0, 1e-9);
  // predict gives the softmax's probabilities.
  Tensor p = model.predict(x);
  EXPECT_TRUE(allclose(p, softmax(x, 1)));
  // The same in float32, the usual dtype: the softmax's 0 is exact there too.
  auto net32 = std::make_shared<nn::Sequential>(identity_linear(3), nn::Softmax(1));
  auto model32 =
      train::compile(net32, {.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  Tensor x32 = x.to(kFloat32);
  EXPECT_TRUE(std::isinf(-log(softmax(x32, 1)).gather(1, y.unsqueeze(1)).mean().item<double>()));
  Tensor l32 = model32.compute_loss(x32, y);
  EXPECT_NEAR(l32.item<double>(), 900.0, 1e-3);
  l32.backward();
  EXPECT_TRUE(isfinite(net32->at<nn::Linear>(0)->weight.grad()).all().item<bool>());
}

TEST(Keras, CategoricalAndBinaryFromTheLogitsOfTheTail) {
  auto lin = identity_linear(3, kFloat64);
  auto net = std::make_shared<nn::Sequential>(lin, nn::Softmax(-1));
  auto model = train::compile(net, {.optimizer = "sgd", .loss = "categorical_crossentropy"});
  EXPECT_TRUE(model.uses_logits());
  Tensor x = tensor({1000.0, 0.0, -1000.0}, kFloat64).reshape({1, 3});
  Tensor t = tensor({0.0, 0.5, 0.5}, kFloat64).reshape({1, 3});
  // -(0.5 * (0 - 1000) + 0.5 * (-1000 - 1000)) = 1500
  EXPECT_NEAR(model.compute_loss(x, t).item<double>(), 1500.0, 1e-9);

  auto lin1 = identity_linear(1, kFloat64);
  auto bnet = std::make_shared<nn::Sequential>(lin1, nn::Sigmoid());
  auto bmodel = train::compile(bnet, {.optimizer = "sgd", .loss = "binary_crossentropy"});
  EXPECT_TRUE(bmodel.uses_logits());
  Tensor bx = tensor({-200.0, 300.0}, kFloat64).reshape({2, 1});
  Tensor by = tensor({1.0, 1.0}, kFloat64);  // [N] against the output [N, 1], as Keras
  EXPECT_NEAR(bmodel.compute_loss(bx, by).item<double>(), 100.0, 1e-9);  // (200 + 0) / 2

  // A loss that is not the tail's cross-entropy uses the probabilities.
  auto mnet = std::make_shared<nn::Sequential>(identity_linear(3), nn::Softmax(1));
  EXPECT_FALSE(train::compile(mnet, {.loss = "mse"}).uses_logits());
  EXPECT_FALSE(
      train::compile(mnet, {.loss = {"sparse_categorical_crossentropy", true}}).uses_logits());
  // A softmax over another dim than the last keeps the probabilities (Keras's class axis is last).
  auto unet = std::make_shared<nn::Sequential>(nn::Identity(), nn::Softmax(0));
  auto umodel = train::compile(unet, {.optimizer =
                                          [](const std::vector<Tensor>&) {
                                            return std::make_shared<optim::SGD>(
                                                std::vector<Tensor>{zeros({1}).requires_grad_()});
                                          },
                                      .loss = "sparse_categorical_crossentropy"});
  Tensor ux = tensor({0.0, 0.0, 0.0, 0.0}).reshape({2, 2});
  Tensor uy = tensor({0, 1}, kInt64);
  // softmax over dim 0 of zeros is 0.5 everywhere: -log(0.5 / (0.5 + 0.5)) = log 2.
  EXPECT_NEAR(umodel.compute_loss(ux, uy).item<double>(), std::log(2.0), 1e-6);
}

TEST(Keras, ProbabilityLossesClipAsKeras) {
  const double eps = 1e-7;
  Tensor p = tensor({1.0, 0.0, 0.0}, kFloat64).reshape({1, 3});
  // Clipped to [eps, 1 - eps]; the sparse loss divides by the clipped row's sum.
  EXPECT_NEAR(train::losses::sparse_categorical_crossentropy(p, tensor({1}, kInt64)).item<double>(),
              -std::log(eps / (1 - eps + 2 * eps)), 1e-9);
  EXPECT_NEAR(
      train::losses::categorical_crossentropy(p, tensor({0.0, 1.0, 0.0}, kFloat64).reshape({1, 3}))
          .item<double>(),
      -std::log(eps), 1e-9);
  EXPECT_NEAR(train::losses::binary_crossentropy(tensor({0.0}, kFloat64), tensor({1.0}, kFloat64))
                  .item<double>(),
              -std::log(eps), 1e-9);
  EXPECT_NEAR(train::losses::binary_crossentropy(tensor({1.0}, kFloat64), tensor({1.0}, kFloat64))
                  .item<double>(),
              -std::log(1 - eps), 1e-12);
  // Unclipped values agree with the textbook formulas.
  manual_seed(3);
  Tensor logits = randn({5, 4}, kFloat64);
  Tensor labels = randint(0, 4, {5});
  Tensor probs = softmax(logits, 1);
  Tensor ce = nn::functional::cross_entropy(logits, labels);
  EXPECT_NEAR(train::losses::sparse_categorical_crossentropy(probs, labels).item<double>(),
              ce.item<double>(), 1e-9);
  EXPECT_NEAR(train::losses::sparse_categorical_crossentropy(logits, labels, true).item<double>(),
              ce.item<double>(), 1e-12);
  // Float labels (and [N, 1] labels) are accepted as Keras does.
  EXPECT_NEAR(
      train::losses::sparse_categorical_crossentropy(logits, labels.to(kFloat32).unsqueeze(1), true)
          .item<double>(),
      ce.item<double>(), 1e-12);
  Tensor onehot = one_hot(labels, 4).to(kFloat64);
  EXPECT_NEAR(train::losses::categorical_crossentropy(probs, onehot).item<double>(),
              ce.item<double>(), 1e-9);
  EXPECT_NEAR(train::losses::categorical_crossentropy(logits, onehot, true).item<double>(),
              ce.item<double>(), 1e-12);
  Tensor t = randint(0, 2, {5, 4}).to(kFloat64);
  EXPECT_NEAR(train::losses::binary_crossentropy(sigmoid(logits), t).item<double>(),
              nn::functional::binary_cross_entropy_with_logits(logits, t).item<double>(), 1e-9);
  EXPECT_NEAR(train::losses::mean_squared_error(logits, t).item<double>(),
              nn::functional::mse_loss(logits, t).item<double>(), 1e-12);
  EXPECT_NEAR(train::losses::mean_absolute_error(logits, t).item<double>(),
              nn::functional::l1_loss(logits, t).item<double>(), 1e-12);
  EXPECT_NEAR(train::losses::huber(logits, t).item<double>(),
              nn::functional::huber_loss(logits, t).item<double>(), 1e-12);
}

TEST(Keras, LossErrorsNameTheShapes) {
  Tensor out = zeros({4, 10});
  EXPECT_EQ(error_of([&] {
              train::losses::sparse_categorical_crossentropy(out, tensor({1, 2, 3}, kInt64));
            }),
            "sparse_categorical_crossentropy: integer labels of shape [3] do not match the "
            "output's shape [4, 10] (expected the output's shape without its last dim)");
  EXPECT_EQ(error_of([&] {
              train::losses::sparse_categorical_crossentropy(out, tensor({1, 2, 10, 3}, kInt64));
            }),
            "sparse_categorical_crossentropy: label 10 out of range for an output of 10 classes "
            "(shape [4, 10])");
  EXPECT_EQ(error_of([&] {
              train::losses::sparse_categorical_crossentropy(out, tensor({1, -1, 0, 3}, kInt64));
            }),
            "sparse_categorical_crossentropy: label -1 out of range for an output of 10 classes "
            "(shape [4, 10])");
  EXPECT_EQ(error_of([&] {
              train::losses::categorical_crossentropy(out, zeros({4, 9}));
            }),
            "categorical_crossentropy: target of shape [4, 9] does not match the output's shape "
            "[4, 10]");
  EXPECT_EQ(error_of([&] {
              train::losses::binary_crossentropy(zeros({4, 1}), zeros({3}));
            }),
            "binary_crossentropy: target of shape [3] does not match the output's shape [4, 1]");
  EXPECT_EQ(error_of([&] {
              train::losses::mean_squared_error(zeros({4, 2}), zeros({4}));
            }),
            "mean_squared_error: target of shape [4] does not match the output's shape [4, 2]");
  EXPECT_EQ(error_of([&] { train::losses::sparse_categorical_crossentropy(Tensor(), zeros({2})); }),
            "sparse_categorical_crossentropy: output and target must be defined");
  EXPECT_EQ(error_of([&] { train::losses::sparse_categorical_crossentropy(zeros({}), zeros({})); }),
            "sparse_categorical_crossentropy: the output needs a class dim, got shape []");
  EXPECT_EQ(error_of([&] { train::losses::categorical_crossentropy(zeros({}), zeros({})); }),
            "categorical_crossentropy: the output needs a class dim, got shape []");
  EXPECT_EQ(error_of([&] { train::losses::binary_crossentropy(zeros({2}), Tensor()); }),
            "binary_crossentropy: output and target must be defined");
  EXPECT_EQ(error_of([&] { train::losses::mean_absolute_error(zeros({2}), zeros({3})); }),
            "mean_absolute_error: target of shape [3] does not match the output's shape [2]");
}

// ---- metrics

TEST(Keras, AccuracyFollowsTheLoss) {
  // An identity model: the outputs are the inputs, so every metric is known in closed form.
  Tensor x = tensor({0.9, 0.1, 0.2, 0.8, 0.6, 0.4}).reshape({3, 2});
  Tensor labels = tensor({0, 0, 0}, kInt64);
  auto sparse = train::compile(
      identity_linear(2),
      {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  // Batches of 2 and 1: the sample-weighted means over the 3 samples.
  train::Logs l = sparse.evaluate(x, labels, {.batch_size = 2, .verbose = 0});
  EXPECT_EQ(sparse.metrics_names(), (std::vector<std::string>{"loss", "accuracy"}));
  ASSERT_EQ(l.items().size(), 2u);
  EXPECT_EQ(l.items()[0].first, "loss");
  EXPECT_NEAR(l["accuracy"], 2.0 / 3, 1e-12);
  EXPECT_NEAR(l["loss"], train::losses::sparse_categorical_crossentropy(x, labels).item<double>(),
              1e-6);
  // A metric that does not fit the target (mse of class labels) names the shapes.
  auto wrong = train::compile(
      identity_linear(2),
      {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"mse"}});
  EXPECT_EQ(error_of([&] { wrong.evaluate(x, labels, {.verbose = 0}); }),
            "mean_squared_error: target of shape [3] does not match the output's shape [3, 2]");
  Tensor onehot = tensor({0.0, 1.0, 0.0, 1.0, 0.0, 1.0}).reshape({3, 2});
  auto cat = train::compile(
      identity_linear(2),
      {.optimizer = "sgd", .loss = "categorical_crossentropy", .metrics = {"acc", "mae"}});
  l = cat.evaluate(x, onehot, {.verbose = 0});
  EXPECT_NEAR(l["acc"], 1.0 / 3, 1e-12);
  EXPECT_NEAR(l["mae"], (0.9 + 0.9 + 0.2 + 0.2 + 0.6 + 0.6) / 6, 1e-6);

  Tensor bx = tensor({0.7, 0.2, 0.4, 0.9}).reshape({4, 1});
  Tensor by = tensor({1.0, 1.0, 0.0, 1.0});
  auto bin =
      train::compile(identity_linear(1),
                     {.optimizer = "sgd", .loss = "binary_crossentropy", .metrics = {"accuracy"}});
  EXPECT_NEAR(bin.evaluate(bx, by, {.verbose = 0})["accuracy"], 0.75, 1e-12);
  // From logits, the threshold is the logit 0.
  auto binl = train::compile(
      identity_linear(1),
      {.optimizer = "sgd", .loss = {"binary_crossentropy", true}, .metrics = {"binary_accuracy"}});
  EXPECT_NEAR(binl.evaluate(bx - 0.5, by, {.verbose = 0})["binary_accuracy"], 0.75, 1e-12);
  // Without a cross-entropy, "accuracy" goes by the shapes (Keras 3): one column is binary.
  auto shp = train::compile(identity_linear(1),
                            {.optimizer = "sgd", .loss = "mse", .metrics = {"accuracy"}});
  EXPECT_NEAR(shp.evaluate(bx, by, {.verbose = 0})["accuracy"], 0.75, 1e-12);
  // Metrics whose target does not fit name the shapes.
  auto sca = train::compile(
      identity_linear(2),
      {.optimizer = "sgd", .loss = "mse", .metrics = {"sparse_categorical_accuracy"}});
  EXPECT_EQ(error_of([&] { sca.evaluate(x, onehot, {.verbose = 0}); }),
            "sparse_categorical_accuracy: labels of shape [3, 2] do not match the output's shape "
            "[3, 2]");
  auto zero_loss = [](const Tensor& o, const Tensor&) { return o.sum() * 0; };
  auto ca =
      train::compile(identity_linear(2),
                     {.optimizer = "sgd", .loss = zero_loss, .metrics = {"categorical_accuracy"}});
  EXPECT_EQ(error_of([&] { ca.evaluate(x, labels, {.verbose = 0}); }),
            "categorical_accuracy: target of shape [3] does not match the output's shape [3, 2]");
  // A custom loss is used as it is.
  EXPECT_DOUBLE_EQ(ca.evaluate(x, onehot, {.verbose = 0})["loss"], 0.0);
  // A custom metric.
  train::Metric max_out{"max_output",
                        [](const Tensor& o, const Tensor&) { return amax(o).item<double>(); }};
  auto custom =
      train::compile(identity_linear(1), {.optimizer = "sgd", .loss = "mse", .metrics = {max_out}});
  l = custom.evaluate(bx, by, {.batch_size = 2, .verbose = 0});
  EXPECT_NEAR(l["max_output"], (0.7 * 2 + 0.9 * 2) / 4, 1e-6);  // per-batch maxima, weighted
  EXPECT_EQ(error_of([&] { l["f1"]; }), "Logs: no value named 'f1' (there are: loss, max_output)");
}

// ---- fit, evaluate, predict

TEST(Keras, FitOnTensorsLearnsAndLogsAsKeras) {
  auto [x, y] = two_blobs(400, 1);
  auto model = train::compile(
      small_classifier(2),
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  train::KerasHistory h =
      model.fit(x, y, {.epochs = 4, .batch_size = 16, .validation_split = 0.25, .verbose = 0});
  ASSERT_EQ(h.history.size(), 4u);
  EXPECT_EQ(h.history[0].first, "loss");
  EXPECT_EQ(h.history[1].first, "accuracy");
  EXPECT_EQ(h.history[2].first, "val_loss");
  EXPECT_EQ(h.history[3].first, "val_accuracy");
  EXPECT_EQ(h.epoch, (std::vector<int64_t>{0, 1, 2, 3}));
  EXPECT_EQ(h["loss"].size(), 4u);
  EXPECT_LT(h["loss"].back(), h["loss"].front());
  EXPECT_GT(h["accuracy"].back(), 0.9);
  EXPECT_GT(h["val_accuracy"].back(), 0.9);
  // The validation set is the last 25% of the samples (taken before shuffling): evaluating them
  // now gives the last epoch's validation logs exactly.
  train::Logs v = model.evaluate(x.narrow(0, 300, 100), y.narrow(0, 300, 100),
                                 {.batch_size = 16, .verbose = 0});
  EXPECT_DOUBLE_EQ(v["loss"], h["val_loss"].back());
  EXPECT_DOUBLE_EQ(v["accuracy"], h["val_accuracy"].back());
  EXPECT_EQ(error_of([&] { h["val_mse"]; }),
            "KerasHistory: no values named 'val_mse' (there are: loss, accuracy, val_loss, "
            "val_accuracy)");
}

TEST(Keras, FitIsReproducibleAndShuffles) {
  auto [x, y] = two_blobs(200, 4);
  auto run = [&](bool shuffle, std::optional<uint64_t> seed) {
    auto net = small_classifier(7);
    manual_seed(11);  // the shuffle seed is drawn from the default generator when unset
    auto model = train::compile(
        net,
        {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
    model.fit(x, y, {.epochs = 2, .shuffle = shuffle, .verbose = 0, .seed = seed});
    return param_values(*net);
  };
  EXPECT_EQ(run(true, std::nullopt), run(true, std::nullopt));
  EXPECT_EQ(run(true, 5), run(true, 5));
  EXPECT_EQ(run(false, std::nullopt), run(false, 99));  // no shuffle: the seed plays no part
  EXPECT_NE(run(true, 5), run(false, std::nullopt));
  EXPECT_NE(run(true, 5), run(true, 6));
}

TEST(Keras, FitOnLoadersAndValidationData) {
  auto [x, y] = two_blobs(256, 8);
  auto [vx, vy] = two_blobs(64, 9);
  data::DataLoader train(std::make_shared<data::TensorDataset>(x, y),
                         {.batch_size = 32, .shuffle = true, .seed = 1});
  data::DataLoader val(std::make_shared<data::TensorDataset>(vx, vy), {.batch_size = 64});
  auto model = train::compile(
      small_classifier(3),
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  auto h = model.fit(train, val, {.epochs = 3, .verbose = 0});
  EXPECT_TRUE(h.contains("val_accuracy"));
  EXPECT_GT(h["val_accuracy"].back(), 0.9);
  EXPECT_DOUBLE_EQ(model.evaluate(val, 0)["accuracy"], h["val_accuracy"].back());
  auto h2 = model.fit(train, {.epochs = 1, .verbose = 0, .validation_data = std::pair{vx, vy}});
  EXPECT_TRUE(h2.contains("val_loss"));
  auto h3 = model.fit(x, y, {.epochs = 1, .verbose = 0, .validation_data = std::pair{vx, vy}});
  EXPECT_TRUE(h3.contains("val_loss"));
  auto h4 = model.fit(train, {.epochs = 1, .verbose = 0});
  EXPECT_FALSE(h4.contains("val_loss"));
  // predict on a loader: the outputs of every batch in order.
  data::DataLoader plain(std::make_shared<data::TensorDataset>(vx, vy), {.batch_size = 10});
  EXPECT_TRUE(allclose(model.predict(plain), model.predict(vx, 7)));
}

TEST(Keras, InitialEpochCallbacksAndFitStateAccuracy) {
  // Binary labels with a sigmoid output: the FitState's accuracy is the compiled binary
  // accuracy (train::fit's own is argmax-based), so callbacks see Keras's value.
  manual_seed(2);
  Tensor x = randn({128, 3});
  Tensor y = (x.select(1, 0) > 0).to(kFloat32);
  auto net = std::make_shared<nn::Sequential>(nn::Linear(3, 1), nn::Sigmoid());
  auto model = train::compile(net, {.optimizer = optim::SGDOptions(0.5),
                                    .loss = "binary_crossentropy",
                                    .metrics = {"accuracy"}});
  struct Record : train::Callback {
    std::vector<double> acc;
    std::vector<int64_t> epochs;
    void on_epoch_end(train::FitState& s) override {
      acc.push_back(s.train.accuracy);
      epochs.push_back(s.epoch);
      if (s.epoch == 3) s.stop_training = true;
    }
  };
  auto rec = std::make_shared<Record>();
  auto h = model.fit(x, y, {.epochs = 10, .verbose = 0, .callbacks = {rec}, .initial_epoch = 1});
  EXPECT_EQ(h.epoch, (std::vector<int64_t>{1, 2, 3}));  // stopped after epoch 3
  EXPECT_EQ(rec->epochs, h.epoch);
  EXPECT_EQ(rec->acc, h["accuracy"]);
  EXPECT_GT(h["accuracy"].back(), 0.8);
}

TEST(Keras, PredictIsBatchedInEvalModeWithoutGradients) {
  manual_seed(4);
  auto net = std::make_shared<nn::Sequential>(nn::Linear(5, 6), nn::ReLU(), nn::Dropout(0.5),
                                              nn::Linear(6, 3), nn::Softmax(1));
  auto model =
      train::compile(net, {.optimizer = "adam", .loss = "sparse_categorical_crossentropy"});
  Tensor x = randn({10, 5});
  Tensor p = model.predict(x, 3);
  EXPECT_EQ(p.sizes().vec(), (std::vector<int64_t>{10, 3}));
  EXPECT_FALSE(p.requires_grad());
  EXPECT_TRUE(net->is_training());  // the mode is restored
  EXPECT_TRUE(allclose(p.sum(1), ones({10}), 1e-5, 1e-6));
  net->eval();
  EXPECT_TRUE(allclose(p, net->forward(x), 1e-5, 1e-6));  // dropout off, as in eval mode
  net->train();
  // train_on_batch: one step, returning the loss of its forward.
  Tensor y = randint(0, 3, {10});
  const auto before = param_values(*net);
  manual_seed(9);
  const double expected = model.compute_loss(x, y).item<double>();
  manual_seed(9);  // the same dropout mask
  train::Logs l = model.train_on_batch(x, y);
  EXPECT_DOUBLE_EQ(l["loss"], expected);
  EXPECT_NE(param_values(*net), before);
}

TEST(Keras, FitEvaluatePredictErrors) {
  auto model = train::compile(small_classifier(1),
                              {.optimizer = "sgd", .loss = "sparse_categorical_crossentropy"});
  Tensor x = randn({10, 4}), y = randint(0, 2, {10});
  EXPECT_EQ(error_of([&] { model.fit(x, y.narrow(0, 0, 9), {.verbose = 0}); }),
            "fit: x and y have different numbers of samples: x [10, 4], y [9]");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.validation_split = 1.0}); }),
            "fit: validation_split must be in [0, 1), got 1");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.validation_split = -0.1}); }),
            "fit: validation_split must be in [0, 1), got -0.1");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.validation_split = 1e-17}); }),
            "fit: validation_split 1e-17 of 10 samples leaves 10 for training and 0 for "
            "validation; both need at least one");
  EXPECT_EQ(
      error_of([&] { model.fit(x.narrow(0, 0, 1), y.narrow(0, 0, 1), {.validation_split = 0.5}); }),
      "fit: validation_split 0.5 of 1 samples leaves 0 for training and 1 for validation; "
      "both need at least one");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.batch_size = 0}); }),
            "fit: batch_size must be positive, got 0");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.epochs = -1}); }), "fit: epochs must be >= 0, got -1");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.verbose = 3}); }),
            "fit: verbose must be 0, 1 or 2, got 3");
  EXPECT_EQ(error_of([&] { model.fit(x, y, {.initial_epoch = -2}); }),
            "fit: initial_epoch must be >= 0, got -2");
  EXPECT_EQ(error_of([&] {
              model.fit(x, y, {.validation_split = 0.2, .validation_data = std::pair{x, y}});
            }),
            "fit: pass validation_split or validation_data, not both");
  EXPECT_EQ(error_of([&] {
              model.fit(x, y, {.verbose = 0, .validation_data = std::pair{x, y.narrow(0, 0, 3)}});
            }),
            "fit: validation_data x and validation_data y have different numbers of samples: "
            "validation_data x [10, 4], validation_data y [3]");
  EXPECT_EQ(error_of([&] { model.fit(x.narrow(0, 0, 0), y.narrow(0, 0, 0)); }),
            "fit: x has no samples (shape [0, 4])");
  EXPECT_EQ(error_of([&] { model.fit(Tensor(), y); }), "fit: x and y must be defined");
  EXPECT_EQ(error_of([&] { model.fit(zeros({}), y); }),
            "fit: x and y need a batch dim, got shapes [] and [10]");
  data::DataLoader loader(std::make_shared<data::TensorDataset>(x, y), {.batch_size = 4});
  EXPECT_EQ(error_of([&] { model.fit(loader, {.batch_size = 8}); }),
            "fit: batch_size comes from the DataLoader (got 8); set it in its DataLoaderOptions");
  EXPECT_EQ(error_of([&] { model.fit(loader, {.validation_split = 0.2}); }),
            "fit: validation_split (0.2) needs tensors; with a DataLoader pass a validation "
            "loader or validation_data");
  EXPECT_EQ(error_of([&] {
              model.fit(loader, loader, {.validation_data = std::pair{x, y}});
            }),
            "fit: pass a validation loader or validation_data, not both");
  EXPECT_EQ(error_of([&] { model.evaluate(x, y.narrow(0, 0, 4)); }),
            "evaluate: x and y have different numbers of samples: x [10, 4], y [4]");
  EXPECT_EQ(error_of([&] { model.evaluate(x, y, {.batch_size = 0}); }),
            "evaluate: batch_size must be positive, got 0");
  EXPECT_EQ(error_of([&] { model.evaluate(loader, 7); }),
            "evaluate: verbose must be 0, 1 or 2, got 7");
  data::DataLoader empty(
      std::make_shared<data::TensorDataset>(x.narrow(0, 0, 0), y.narrow(0, 0, 0)),
      {.batch_size = 4});
  EXPECT_EQ(error_of([&] { model.evaluate(empty, 0); }), "evaluate: the data has no samples");
  EXPECT_EQ(error_of([&] { model.predict(empty); }), "predict: the loader has no batches");
  EXPECT_EQ(error_of([&] { model.predict(x, -1); }),
            "predict: batch_size must be positive, got -1");
  EXPECT_EQ(error_of([&] { model.predict(zeros({})); }), "predict: x needs a batch dim, got []");
  EXPECT_EQ(error_of([&] { model.predict(x.narrow(0, 0, 0)); }),
            "predict: x has no samples (shape [0, 4])");
  // A wrong label reaches the loss's own message.
  EXPECT_EQ(error_of([&] { model.evaluate(x, zeros({10}, kInt64) + 7, {.verbose = 0}); }),
            "sparse_categorical_crossentropy: label 7 out of range for an output of 2 classes "
            "(shape [10, 2])");
  EXPECT_EQ(error_of([&] { model.compute_loss(x, y.narrow(0, 0, 2)); }),
            "compute_loss: x and y have different numbers of samples: x [10, 4], y [2]");
}

TEST(Keras, VerboseOutput) {
  auto [x, y] = two_blobs(64, 3);
  auto model = train::compile(
      small_classifier(1),
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  ::testing::internal::CaptureStdout();
  model.fit(x, y, {.epochs = 2, .validation_split = 0.25, .verbose = 2});
  model.evaluate(x, y);
  const std::string out = ::testing::internal::GetCapturedStdout();
  EXPECT_THAT(out, HasSubstr("Epoch 1/2\n2/2 - "));
  EXPECT_THAT(out, HasSubstr("Epoch 2/2\n"));
  EXPECT_THAT(out, HasSubstr("/step - loss: "));
  EXPECT_THAT(out, HasSubstr(" - accuracy: "));
  EXPECT_THAT(out, HasSubstr(" - val_loss: "));
  EXPECT_THAT(out, HasSubstr(" - val_accuracy: "));
  EXPECT_THAT(out, HasSubstr("2/2 [==============================] - "));
  ::testing::internal::CaptureStdout();
  model.fit(x, y, {.epochs = 1, .verbose = 0});
  model.evaluate(x, y, {.verbose = 0});
  EXPECT_EQ(::testing::internal::GetCapturedStdout(), "");
}

// ---- summary

TEST(Keras, SummaryOfTheLectureModel) {
  manual_seed(0);
  auto net =
      std::make_shared<nn::Sequential>(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(),
                                       nn::Dropout(0.2), nn::Linear(512, 10), nn::Softmax(1));
  auto model = train::compile(
      net,
      {.optimizer = "adam", .loss = "sparse_categorical_crossentropy", .metrics = {"accuracy"}});
  const auto before = param_values(*net);
  const Tensor w = net->at<nn::Linear>(1)->weight;
  // Before any input and without a shape: the parameters, and "?" for the shapes.
  std::string s = model.summary();
  EXPECT_THAT(s, HasSubstr(" 1 (Linear)                  ?                         401,920\n"));
  EXPECT_THAT(s, HasSubstr("output shapes unknown"));
  s = model.summary({28, 28});
  EXPECT_EQ(s,
            "Model: \"Sequential\"\n"
            "_________________________________________________________________\n"
            " Layer (type)                Output Shape              Param #\n"
            "=================================================================\n"
            " 0 (Flatten)                 (None, 784)               0\n"
            " 1 (Linear)                  (None, 512)               401,920\n"
            " 2 (ReLU)                    (None, 512)               0\n"
            " 3 (Dropout)                 (None, 512)               0\n"
            " 4 (Linear)                  (None, 10)                5,130\n"
            " 5 (Softmax)                 (None, 10)                0\n"
            "=================================================================\n"
            "Total params: 407,050 (1.55 MB)\n"
            "Trainable params: 407,050 (1.55 MB)\n"
            "Non-trainable params: 0 (0.00 B)\n"
            "_________________________________________________________________\n");
  // The meta forward leaves the parameters as they were: same handles, values, device.
  EXPECT_EQ(param_values(*net), before);
  EXPECT_TRUE(net->at<nn::Linear>(1)->weight.is_same(w));
  EXPECT_TRUE(w.device().is_cpu());
  EXPECT_TRUE(net->is_training());
  // After the model has seen inputs, their shape is used.
  model.predict(zeros({2, 1, 28, 28}));
  EXPECT_THAT(model.summary(), HasSubstr(" 0 (Flatten)                 (None, 784)"));
  // From compile's input_shape.
  auto m2 = train::compile(net, {.optimizer = "sgd", .loss = "mse", .input_shape = {784}});
  EXPECT_THAT(m2.summary(), HasSubstr(" 4 (Linear)                  (None, 10)"));
  EXPECT_THAT(error_of([&] { model.summary({5}); }),
              HasSubstr("summary: the model's forward failed on an input of shape (None, 5): "));
  EXPECT_EQ(error_of([&] { model.summary({-1}); }),
            "summary: input_shape [-1] must have positive sizes");
}

TEST(Keras, SummaryOfOtherModules) {
  struct Net : nn::Module {
    Net() {
      fc1 = register_module("fc1", std::make_shared<nn::Linear>(3, 4));
      fc2 = register_module("fc2", std::make_shared<nn::Linear>(4, 2));
      register_parameter("scale", ones({2}), /*requires_grad=*/false);
    }
    std::string type_name() const override { return "Net"; }
    Tensor forward(const Tensor& x) override {
      seen = x.device();
      return fc2->forward(relu(fc1->forward(x)));
    }
    std::shared_ptr<nn::Linear> fc1, fc2;
    Device seen;
  };
  auto net = std::make_shared<Net>();
  auto model = train::compile(net, {.optimizer = "sgd", .loss = "mse"});
  const std::string s = model.summary({3});
  EXPECT_THAT(s, HasSubstr("Model: \"Net\"\n"));
  EXPECT_THAT(s, HasSubstr(" fc1 (Linear)                ?                         16\n"));
  EXPECT_THAT(s, HasSubstr(" fc2 (Linear)                ?                         10\n"));
  EXPECT_THAT(s, HasSubstr("Total params: 28 (112.00 B)\nTrainable params: 26 (104.00 B)\n"
                           "Non-trainable params: 2 (8.00 B)\n"));
  EXPECT_THAT(s, HasSubstr("Input (None, 3) -> output (None, 2)\n"));
  EXPECT_TRUE(net->seen.is_meta());  // the shapes came from a forward on the meta device
  EXPECT_TRUE(net->fc1->weight.device().is_cpu());
  // A module that reads data on the host cannot run on meta: one real zero sample instead.
  struct HostRead : nn::Module {
    std::string type_name() const override { return "HostRead"; }
    Tensor forward(const Tensor& x) override {
      seen = x.device();
      sum = x.sum().item<double>();
      return x;
    }
    Device seen{kMeta};
    double sum = -1;
  };
  auto host = std::make_shared<HostRead>();
  auto seq = std::make_shared<nn::Sequential>(nn::Linear(3, 4), host);
  const std::string hs = train::compile(seq, {.optimizer = "sgd", .loss = "mse"}).summary({3});
  EXPECT_THAT(hs, HasSubstr(" 1 (HostRead)                (None, 4)                 0\n"));
  EXPECT_TRUE(host->seen.is_cpu());
  // A leaf module is one row.
  nn::Linear lin(3, 5);
  auto m2 = train::compile(lin, {.optimizer = "sgd", .loss = "mse"});
  EXPECT_THAT(m2.summary({3}),
              HasSubstr(" (Linear)                    (None, 5)                 20\n"));
}
