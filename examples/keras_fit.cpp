// The lecture notes' Keras example, line for line in ignis:
//
//   (x_train, y_train), (x_test, y_test) = mnist.load_data()
//   x_train, x_test = x_train / 255.0, x_test / 255.0
//   model = Sequential([Flatten(input_shape=(28, 28)), Dense(512, activation='relu'),
//                       Dropout(0.2), Dense(10, activation='softmax')])
//   model.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['accuracy'])
//   model.fit(x_train, y_train, epochs=5)
//   model.evaluate(x_test, y_test)
//
// A Dense layer is a Linear with its activation after it; as in Keras, the loss of the softmax
// output is computed from the logits before the softmax (docs/training.md, "Keras-style models").
//
//   ./keras_fit [MNIST_DIR] [EPOCHS]   (without a directory: synthetic 10-class "images")
#include <ignis/ignis.h>

#include <cstdio>
#include <cstdlib>
#include <filesystem>
#include <iostream>

using namespace ignis;

int main(int argc, char** argv) {
  manual_seed(0);
  const int64_t epochs = argc > 2 ? std::atoll(argv[2]) : 5;

  // (x_train, y_train), (x_test, y_test) = mnist.load_data()
  // x_train, x_test = x_train / 255.0, x_test / 255.0     (data::MNIST's images are in [0, 1])
  Tensor x_train, y_train, x_test, y_test;
  if (argc > 1 && std::filesystem::exists(argv[1])) {
    data::MNIST train(argv[1], /*train=*/true), test(argv[1], /*train=*/false);
    x_train = train.data(), y_train = train.targets();
    x_test = test.data(), y_test = test.targets();
    std::cout << "MNIST: " << x_train.size(0) << " training, " << x_test.size(0)
              << " test images\n";
  } else {
    // 10 Gaussian blobs in 28x28 "images", labelled by the blob each was drawn around: near
    // each other, so that the noise matters and the model overfits as on a small data set.
    const Tensor centers = 0.1 * randn({10, 1, 28, 28});
    y_train = randint(0, 10, {6000});
    x_train = index_select(centers, 0, y_train) + randn({6000, 1, 28, 28});
    y_test = randint(0, 10, {1000});
    x_test = index_select(centers, 0, y_test) + randn({1000, 1, 28, 28});
    std::cout << "synthetic data: " << x_train.size(0) << " training, " << x_test.size(0)
              << " test samples\n";
  }

  // model = Sequential([Flatten(input_shape=(28, 28)), Dense(512, activation='relu'),
  //                     Dropout(0.2), Dense(10, activation='softmax')])
  nn::Sequential net(nn::Flatten(), nn::Linear(28 * 28, 512), nn::ReLU(), nn::Dropout(0.2),
                     nn::Linear(512, 10), nn::Softmax(1));

  // model.compile(optimizer='adam', loss='sparse_categorical_crossentropy', metrics=['accuracy'])
  auto model = train::compile(net, {.optimizer = "adam",
                                    .loss = "sparse_categorical_crossentropy",
                                    .metrics = {"accuracy"},
                                    .input_shape = {28, 28}});
  std::cout << model.summary();

  // model.fit(x_train, y_train, epochs=5)
  train::KerasHistory history = model.fit(x_train, y_train, {.epochs = epochs});

  // model.evaluate(x_test, y_test)
  train::Logs test = model.evaluate(x_test, y_test);

  std::printf(
      "test loss %.4f accuracy %.4f (training loss %.4f after the first epoch, %.4f after "
      "the last)\n",
      test["loss"], test["accuracy"], history["loss"].front(), history["loss"].back());
  return 0;
}
