// The lecture notes' training loop, written by hand in C++: for each batch of the loader --
// zero_grad, forward, loss, backward, optimizer step -- with the running loss printed every
// `print_every` batches ("batch N loss: L").
//
//   ./training_loop [MNIST_DIR]    (without a directory: a synthetic 10-class problem)
#include <filesystem>
#include <iostream>

#include <ignis/ignis.h>

using namespace ignis;

int main(int argc, char** argv) {
  manual_seed(0);
  std::shared_ptr<data::Dataset> train_set;
  if (argc > 1 && std::filesystem::exists(argv[1])) {
    auto mnist = std::make_shared<data::MNIST>(argv[1], /*train=*/true);
    train_set = std::make_shared<data::MapDataset>(
        mnist, data::transforms::Normalize({0.1307}, {0.3081}));
    std::cout << "MNIST: " << train_set->size() << " training images\n";
  } else {
    // 10 Gaussian blobs in 28x28 "images", close to each other against the noise: learnable,
    // so the loss visibly falls.
    Tensor centers = 0.1 * randn({10, 1, 28, 28});
    Tensor labels = randint(0, 10, {12800});  // 200 batches: two running-loss lines an epoch
    Tensor images = index_select(centers, 0, labels) + randn({12800, 1, 28, 28});
    train_set = std::make_shared<data::TensorDataset>(images, labels);
    std::cout << "synthetic data: " << train_set->size() << " samples\n";
  }
  data::DataLoader loader(train_set, data::DataLoaderOptions{.batch_size = 64, .shuffle = true,
                                                             .num_workers = 1, .seed = 0});
  auto model = models::mlp();
  optim::SGD optimizer(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
  nn::CrossEntropyLoss criterion;

  const int print_every = 100;
  for (int epoch = 0; epoch < 2; ++epoch) {
    double running_loss = 0;
    int i = 0;
    for (auto& batch : loader) {
      optimizer.zero_grad();                      // 1. clear the gradients
      Tensor output = model->forward(batch.data);  // 2. forward
      Tensor loss = criterion(output, batch.target);  // 3. loss
      loss.backward();                             // 4. backward
      optimizer.step();                            // 5. update
      running_loss += loss.item<double>();
      if (++i % print_every == 0) {
        std::cout << "epoch " << epoch + 1 << " batch " << i
                  << " loss: " << running_loss / print_every << "\n";
        running_loss = 0;
      }
    }
  }
  return 0;
}
