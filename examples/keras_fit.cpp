// The lecture notes' Keras-style model, in ignis: Sequential(Flatten(28x28), Dense(512, relu),
// Dropout(0.2), Dense(10, softmax)), compiled with Adam, sparse categorical cross-entropy and
// accuracy, fitted for 5 epochs and evaluated on the test set.
//
// PyTorch's (and ignis's) spelling of the same model: the softmax is folded into the loss
// (cross_entropy takes logits, as Keras's from_logits=True), and "compile" is choosing the
// optimizer, the loss and the metrics that fit() reports.
//
//   ./keras_fit [MNIST_DIR] [EPOCHS]   (without a directory: synthetic 10-class "images")
#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

#include <ignis/ignis.h>

using namespace ignis;

namespace {

// 10 Gaussian blobs in 28x28 "images" (the labels the blob each image was drawn around):
// learnable, so the loss falls and the accuracy rises like MNIST's.
std::shared_ptr<data::Dataset> blobs(const Tensor& centers, int64_t n) {
  Tensor labels = randint(0, 10, {n});
  Tensor images = index_select(centers, 0, labels) + randn({n, 1, 28, 28});
  return std::make_shared<data::TensorDataset>(images, labels);
}

}  // namespace

int main(int argc, char** argv) {
  manual_seed(0);
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 5;
  std::shared_ptr<data::Dataset> train_set, test_set;
  if (argc > 1 && std::filesystem::exists(argv[1])) {
    auto normalize = data::transforms::Normalize({0.1307}, {0.3081});
    train_set = std::make_shared<data::MapDataset>(
        std::make_shared<data::MNIST>(argv[1], /*train=*/true), normalize);
    test_set = std::make_shared<data::MapDataset>(
        std::make_shared<data::MNIST>(argv[1], /*train=*/false), normalize);
    std::cout << "MNIST: " << train_set->size() << " training, " << test_set->size()
              << " test images\n";
  } else {
    const Tensor centers = 0.1 * randn({10, 1, 28, 28});  // near each other: noise matters
    train_set = blobs(centers, 6000);
    test_set = blobs(centers, 1000);
    std::cout << "synthetic data: " << train_set->size() << " training, " << test_set->size()
              << " test samples\n";
  }

  // model = Sequential([Flatten(input_shape=(28, 28)), Dense(512, activation='relu'),
  //                     Dropout(0.2), Dense(10, activation='softmax')])
  nn::Sequential model(nn::Flatten(), nn::Linear(784, 512), nn::ReLU(), nn::Dropout(0.2),
                       nn::Linear(512, 10));
  std::cout << model.summary();

  // model.compile(optimizer='adam', loss='sparse_categorical_crossentropy',
  //               metrics=['accuracy'])
  optim::Adam optimizer(model.parameters(), optim::AdamOptions(1e-3));
  auto loss = [](const Tensor& logits, const Tensor& labels) {
    return nn::functional::cross_entropy(logits, labels);
  };
  data::DataLoader train_loader(train_set, {.batch_size = 32, .shuffle = true, .seed = 0});
  data::DataLoader test_loader(test_set, {.batch_size = 1000});

  // model.fit(x_train, y_train, epochs=5): one summary line per epoch (loss, accuracy).
  train::History history =
      train::fit(model, loss, optimizer, train_loader, nullptr, {.epochs = epochs},
                 {std::make_shared<train::ProgressLogger>("", /*print_every=*/1000)});

  // model.evaluate(x_test, y_test)
  const train::Metrics m = train::evaluate(model, loss, test_loader);
  std::printf("test loss %.4f accuracy %.4f (first epoch's training loss %.4f, last %.4f)\n",
              m.loss, m.accuracy, history.train.front().loss, history.train.back().loss);
  return 0;
}
