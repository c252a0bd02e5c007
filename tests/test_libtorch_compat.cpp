// LibTorch code with only the namespace changed. Each test is a snippet written as LibTorch's C++
// frontend spells it (its tutorials and API docs): `torch::` below is ignis, through the alias
// on the next lines and nothing else. The snippets compile and their values are checked, so a
// change that makes a LibTorch spelling mean something else in ignis fails here.
// The deliberate differences (ModuleHolder types, the data API, the file format) are listed in
// docs/from-pytorch.md.
#include <gtest/gtest.h>

#include <cmath>
#include <filesystem>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/ignis.h"
#include "test_util.h"

namespace torch = ignis;

namespace {

template <class F>
void expect_error(F&& f, const std::string& part) {
  const std::string msg = ignis::error_of(std::forward<F>(f));
  EXPECT_NE(msg.find(part), std::string::npos) << msg;
}

// ---- tensor creation and options

TEST(LibTorchCompat, TensorOptions) {
  auto options = torch::TensorOptions().dtype(torch::kFloat64).requires_grad(true);
  torch::Tensor a = torch::ones({2, 3}, options);
  EXPECT_EQ(a.dtype(), torch::kFloat64);
  EXPECT_TRUE(a.requires_grad());
  EXPECT_EQ(a.sizes(), (std::vector<int64_t>{2, 3}));

  torch::Tensor b = torch::zeros({2, 2}, torch::dtype(torch::kInt64));
  EXPECT_EQ(b.dtype(), torch::kLong);
  torch::Tensor c = torch::randn({3}, torch::requires_grad());
  EXPECT_TRUE(c.requires_grad());
  EXPECT_EQ(c.dtype(), torch::kFloat);
  torch::Tensor d = torch::empty({4}, torch::device(torch::kCPU).dtype(torch::kDouble));
  EXPECT_EQ(d.dtype(), torch::kFloat64);
  EXPECT_EQ(d.device(), torch::Device(torch::kCPU));
}

TEST(LibTorchCompat, LectureArithmetic) {
  // The lecture notes' first examples.
  torch::Tensor x = torch::zeros({2, 2}) + 1;
  torch::Tensor twos = torch::ones({2, 2}) * 2;
  torch::Tensor y = (torch::ones({2, 2}) * 7 - 1) / 2;
  EXPECT_FLOAT_EQ(x.sum().item<float>(), 4);
  EXPECT_FLOAT_EQ(twos.pow(2)[0][0].item<float>(), 4);
  EXPECT_FLOAT_EQ(torch::pow(twos, 0.5)[1][1].item<float>(), std::sqrt(2.0f));
  EXPECT_FLOAT_EQ(y[1][0].item<float>(), 3);
  torch::Tensor r = torch::rand({2, 4}) * (torch::ones({1, 4}) * 2);
  EXPECT_EQ(r.sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_LE(r.max().item<float>(), 2);
}

TEST(LibTorchCompat, FromBlobArangeTensor) {
  float data[] = {1, 2, 3, 4, 5, 6};
  torch::Tensor t = torch::from_blob(data, {2, 3}, torch::kFloat32).clone();
  EXPECT_EQ(t.size(0), 2);
  EXPECT_EQ(t.size(-1), 3);
  EXPECT_EQ(t.numel(), 6);
  EXPECT_EQ(t.dim(), 2);
  EXPECT_FLOAT_EQ(t[1][2].item<float>(), 6);
  EXPECT_FLOAT_EQ(t.data_ptr<float>()[4], 5);

  torch::Tensor a = torch::arange(6).reshape({2, 3});
  EXPECT_EQ(a.dtype(), torch::kLong);
  EXPECT_EQ(a[1][0].item<int64_t>(), 3);
  torch::Tensor f = torch::arange(0, 1, 0.25);
  EXPECT_EQ(f.numel(), 4);
  EXPECT_FLOAT_EQ(f[3].item<float>(), 0.75f);

  torch::Tensor v = torch::tensor({1.5, 2.5, 3.5});
  EXPECT_EQ(v.dtype(), torch::kFloat);  // LibTorch: floating lists get the default dtype
  EXPECT_DOUBLE_EQ(v.sum().item<double>(), 7.5);
  EXPECT_EQ(torch::tensor({1, 2, 3}).dtype(), torch::kLong);
}

TEST(LibTorchCompat, ToAndCopySemantics) {
  torch::Tensor x = torch::ones({2});
  // to(dtype): a copy only when the dtype changes; to(dtype, non_blocking, copy=true) copies.
  EXPECT_TRUE(x.to(torch::kFloat32).is_same(x));
  EXPECT_FALSE(x.to(torch::kFloat32, /*non_blocking=*/false, /*copy=*/true).is_same(x));
  // to(device, bool): the bool is non_blocking, as in LibTorch (no copy on the same device).
  EXPECT_TRUE(x.to(torch::kCPU, /*non_blocking=*/true).is_same(x));
  torch::Tensor d = x.to(torch::kCPU, torch::kFloat64);
  EXPECT_EQ(d.dtype(), torch::kFloat64);
}

TEST(LibTorchCompat, ReductionsWithLibTorchOverloads) {
  torch::Tensor x = torch::tensor({{1.0, 2.0}, {3.0, 5.0}});
  // x.std(false) is unbiased=false over all elements (not "dim 0"), as in LibTorch.
  const double mean = 11.0 / 4;
  double ss = 0;
  for (double v : {1.0, 2.0, 3.0, 5.0}) ss += (v - mean) * (v - mean);
  EXPECT_NEAR(x.var(false).item<double>(), ss / 4, 1e-6);
  EXPECT_NEAR(x.var(true).item<double>(), ss / 3, 1e-6);
  EXPECT_NEAR(x.std(false).item<double>(), std::sqrt(ss / 4), 1e-6);
  EXPECT_NEAR(torch::std(x, true).item<double>(), std::sqrt(ss / 3), 1e-6);
  EXPECT_EQ(x.var(false).dim(), 0);
  // Only a bool picks unbiased: a braced dim list stays a reduction over that dim.
  EXPECT_EQ(x.var({0}).sizes(), (std::vector<int64_t>{2}));
  EXPECT_NEAR(torch::var(x, {1})[1].item<double>(), 2.0, 1e-6);
  // max(dim) returns (values, indices); sum/mean over a dim; item() as a Scalar.
  auto [values, indices] = x.max(1);
  EXPECT_FLOAT_EQ(values[1].item<float>(), 5);
  EXPECT_EQ(indices[0].item<int64_t>(), 1);
  EXPECT_FLOAT_EQ(x.sum(1)[1].item<float>(), 8);
  EXPECT_FLOAT_EQ(x.mean(0)[0].item<float>(), 2);
  EXPECT_FLOAT_EQ(x.sum().item().toFloat(), 11);
  EXPECT_EQ(x.argmax().item().toLong(), 3);
  EXPECT_EQ(torch::cat({x, x}, 1).sizes(), (std::vector<int64_t>{2, 4}));
  EXPECT_TRUE(x.sizes() == torch::zeros({2, 2}).sizes());
}

// ---- indexing (torch::indexing)

TEST(LibTorchCompat, Indexing) {
  using namespace torch::indexing;
  torch::Tensor b = torch::arange(12, torch::kFloat32).reshape({3, 4});
  torch::Tensor col = b.index({Slice(), 1});
  EXPECT_EQ(col.sizes(), (std::vector<int64_t>{3}));
  EXPECT_FLOAT_EQ(col[2].item<float>(), 9);
  torch::Tensor head = b.index({1, Slice(None, 2)});
  EXPECT_FLOAT_EQ(head[0].item<float>(), 4);
  EXPECT_FLOAT_EQ(head[1].item<float>(), 5);
  torch::Tensor tail = b.index({Slice(1), Slice(None, None, 2)});
  EXPECT_EQ(tail.sizes(), (std::vector<int64_t>{2, 2}));
  EXPECT_FLOAT_EQ(tail[1][1].item<float>(), 10);
  EXPECT_EQ(b.index({None, Ellipsis, 0}).sizes(), (std::vector<int64_t>{1, 3}));
  torch::Tensor masked = b.index({b > 9});
  EXPECT_EQ(masked.numel(), 2);
  EXPECT_FLOAT_EQ(masked[1].item<float>(), 11);
  b.index_put_({0, 0}, 100);
  EXPECT_FLOAT_EQ(b[0][0].item<float>(), 100);
  b.index_put_({Slice(), 3}, torch::zeros({3}));
  EXPECT_FLOAT_EQ(b.index({Slice(), 3}).sum().item<float>(), 0);
  torch::Tensor idx = torch::tensor({2, 0});
  EXPECT_FLOAT_EQ(b.index({idx, 1}).sum().item<float>(), 9 + 1);
}

// ---- autograd (LibTorch's autograd tutorial)

TEST(LibTorchCompat, AutogradTutorial) {
  torch::Tensor x = torch::ones({2, 2}, torch::requires_grad());
  torch::Tensor y = x + 2;
  torch::Tensor z = y * y * 3;
  torch::Tensor out = z.mean();
  EXPECT_EQ(z.grad_fn()->name(), "MulBackward0");
  EXPECT_EQ(out.grad_fn()->name(), "MeanBackward0");
  out.backward();
  for (int64_t i = 0; i < 4; ++i) EXPECT_FLOAT_EQ(x.grad().view({-1})[i].item<float>(), 4.5f);

  torch::Tensor a = torch::randn({2, 2});
  a = ((a * 3) / (a - 1));
  EXPECT_FALSE(a.requires_grad());
  a.requires_grad_(true);
  EXPECT_TRUE(a.requires_grad());
  torch::Tensor b = (a * a).sum();
  EXPECT_EQ(b.grad_fn()->name(), "SumBackward0");

  {
    torch::NoGradGuard no_grad;
    EXPECT_FALSE(x.pow(2).requires_grad());
  }
  EXPECT_TRUE(x.detach().requires_grad() == false);
}

TEST(LibTorchCompat, AutogradGrad) {
  // torch::autograd::grad with LibTorch's positional arguments, then with named options.
  torch::Tensor x = torch::tensor({0.5, -1.0}, torch::requires_grad());
  torch::Tensor y = (x * x * x).sum();
  auto g = torch::autograd::grad({y}, {x}, /*grad_outputs=*/{torch::ones_like(y)},
                                 /*retain_graph=*/true, /*create_graph=*/true);
  EXPECT_DOUBLE_EQ(g[0][0].item<double>(), 3 * 0.25);
  EXPECT_TRUE(g[0].requires_grad());
  auto gg = torch::autograd::grad({g[0].sum()}, {x}, {}, {.create_graph = false});
  EXPECT_DOUBLE_EQ(gg[0][1].item<double>(), 6 * -1.0);
  EXPECT_FALSE(gg[0].requires_grad());

  torch::Tensor unused = torch::ones({1}, torch::requires_grad());
  torch::Tensor w = (x * 2).sum();
  auto r = torch::autograd::grad({w}, {x, unused}, {}, {.allow_unused = true});
  EXPECT_TRUE(r[0].defined());
  EXPECT_FALSE(r[1].defined());
  torch::Tensor w2 = (x * 2).sum();
  expect_error(
      [&] {
        torch::autograd::grad({w2}, {x, unused});
      },
      "grad: input 1 was not used in the graph");
}

TEST(LibTorchCompat, InPlaceThroughConstReference) {
  // A Tensor is a handle: in-place methods are callable through const references, as in LibTorch.
  torch::Tensor w = torch::ones({3}, torch::requires_grad());
  (w * 2).sum().backward();
  const torch::Tensor& g = w.grad();
  g.zero_();
  EXPECT_FLOAT_EQ(w.grad().sum().item<float>(), 0);
  w.grad().copy_(torch::full({3}, 5.0));
  EXPECT_FLOAT_EQ(w.grad().sum().item<float>(), 15);
  const torch::Tensor c = torch::zeros({2});
  c.add_(1).mul_(3);  // chaining returns the handle
  EXPECT_FLOAT_EQ(c.sum().item<float>(), 6);
  c += 1;
  EXPECT_FLOAT_EQ(c[0].item<float>(), 4);
  torch::Tensor& same = c.fill_(7);
  EXPECT_TRUE(same.is_same(c));
}

// ---- modules (the C++ frontend tutorial's two forms)

struct Net : torch::nn::Module {
  Net(int64_t N, int64_t M) {
    W = register_parameter("W", torch::randn({N, M}));
    b = register_parameter("b", torch::randn(M));
  }
  torch::Tensor forward(torch::Tensor input) { return torch::addmm(b, input, W); }
  torch::Tensor W, b;
};

struct Net2 : torch::nn::Module {
  Net2(int64_t N, int64_t M)
      : linear(register_module("linear", std::make_shared<torch::nn::LinearImpl>(N, M))) {
    another_bias = register_parameter("b", torch::randn(M));
  }
  torch::Tensor forward(torch::Tensor input) { return linear->forward(input) + another_bias; }
  std::shared_ptr<torch::nn::LinearImpl> linear;
  torch::Tensor another_bias;
};

TEST(LibTorchCompat, Modules) {
  torch::manual_seed(0);
  Net net(4, 5);
  torch::Tensor in = torch::ones({2, 4});
  torch::Tensor out = net.forward(in);
  EXPECT_EQ(out.sizes(), (std::vector<int64_t>{2, 5}));
  torch::Tensor expect = net.W.sum(0) + net.b;
  EXPECT_TRUE(torch::allclose(out[1], expect));
  EXPECT_EQ(net.parameters().size(), 2u);

  auto net2 = std::make_shared<Net2>(4, 5);
  int64_t count = 0;
  for (const auto& p : net2->parameters()) count += p.numel();
  EXPECT_EQ(count, 4 * 5 + 5 + 5);
  std::vector<std::string> names;
  for (const auto& [name, p] : net2->named_parameters()) names.push_back(name);
  EXPECT_EQ(names, (std::vector<std::string>{"b", "linear.weight", "linear.bias"}));
  torch::Tensor y = net2->forward(torch::ones({3, 4}));
  EXPECT_TRUE(
      torch::allclose(y[0], net2->linear->weight.sum(1) + net2->linear->bias + net2->another_bias));

  // Module utilities: train/eval, zero_grad, to, apply, printing.
  net2->eval();
  EXPECT_FALSE(net2->is_training());
  net2->train();
  EXPECT_TRUE(net2->linear->is_training());
  y.sum().backward();
  EXPECT_TRUE(net2->linear->weight.grad().defined());
  net2->zero_grad();
  EXPECT_FALSE(net2->linear->weight.grad().defined());  // set_to_none, as LibTorch 2.x
  net2->to(torch::kFloat64);
  EXPECT_EQ(net2->linear->weight.dtype(), torch::kFloat64);
  std::ostringstream os;
  os << *net2->linear;
  EXPECT_NE(os.str().find("Linear(in_features=4, out_features=5, bias=true)"), std::string::npos)
      << os.str();

  torch::nn::Sequential seq(torch::nn::Linear(3, 2), torch::nn::ReLU(), torch::nn::Linear(2, 1));
  EXPECT_EQ(seq.size(), 3u);
  EXPECT_EQ(seq.forward(torch::ones({4, 3})).sizes(), (std::vector<int64_t>{4, 1}));
  EXPECT_EQ(seq.parameters().size(), 4u);
}

TEST(LibTorchCompat, InitAndFunctional) {
  namespace F = torch::nn::functional;
  auto linear = std::make_shared<torch::nn::LinearImpl>(3, 4);
  torch::nn::init::constant_(linear->bias, 0.5);
  torch::nn::init::xavier_uniform_(linear->weight);
  EXPECT_FLOAT_EQ(linear->bias.sum().item<float>(), 2);
  const double bound = std::sqrt(6.0 / (3 + 4));
  EXPECT_LE(linear->weight.abs().max().item<float>(), bound);
  // init functions take the tensor by value (a handle), so a temporary works as in LibTorch.
  torch::nn::init::zeros_(linear->parameters()[0]);
  EXPECT_FLOAT_EQ(linear->weight.abs().sum().item<float>(), 0);

  torch::Tensor x = torch::tensor({-1.0, 0.0, 2.0});
  EXPECT_DOUBLE_EQ(torch::relu(x).sum().item<double>(), 2);
  EXPECT_DOUBLE_EQ(F::relu(x).sum().item<double>(), 2);
  // float32 (the default dtype): within 2 ulp of the exact value (-0.3132617, not -0.3132324).
  torch::Tensor logits = torch::tensor({{1000.0, 999.0, 0.0}});
  EXPECT_EQ(logits.dtype(), torch::kFloat32);
  EXPECT_NEAR(F::log_softmax(logits, F::LogSoftmaxFuncOptions(1))[0][0].item<double>(),
              -0.31326168751822286, 6e-8);
  torch::Tensor target = torch::tensor({1});
  EXPECT_NEAR(F::cross_entropy(logits, target).item<double>(), 1.3132616875182228, 2.4e-7);
  // float64, with ATen's argument order: weight, reduction, ignore_index.
  torch::Tensor l64 = logits.to(torch::kFloat64);
  EXPECT_NEAR(torch::nll_loss(torch::log_softmax(l64, 1), target).item<double>(),
              1.3132616875182228, 1e-12);
  torch::Tensor two = torch::tensor({1, 0});
  torch::Tensor l2 = torch::cat({l64, l64});
  EXPECT_NEAR(
      torch::nll_loss(torch::log_softmax(l2, 1), two, {}, torch::Reduction::Sum, 0).item<double>(),
      1.3132616875182228, 1e-12);  // target 0 ignored
  EXPECT_NEAR(torch::mse_loss(l64, torch::zeros_like(l64), torch::Reduction::Sum).item<double>(),
              1000.0 * 1000 + 999.0 * 999, 1e-6);
  expect_error([&] { torch::mse_loss(l64, l64, 3); },
               "mse_loss: reduction must be 0 (None), 1 (Mean) or 2 (Sum), got 3");
}

// ---- optimizers

TEST(LibTorchCompat, Optimizers) {
  torch::manual_seed(1);
  auto model = std::make_shared<torch::nn::LinearImpl>(2, 1);
  torch::nn::init::zeros_(model->weight);
  torch::nn::init::zeros_(model->bias);
  torch::optim::SGD optimizer(model->parameters(), torch::optim::SGDOptions(0.1).momentum(0.9));
  torch::Tensor x = torch::tensor({{1.0f, 2.0f}});
  torch::Tensor y = torch::full({1, 1}, 1.0f);
  for (int step = 0; step < 2; ++step) {
    optimizer.zero_grad();
    torch::Tensor loss = torch::mse_loss(model->forward(x), y);
    loss.backward();
    optimizer.step();
  }
  // By hand: step 1 grad w = -2*[1,2], b = -2 -> w = [0.2, 0.4], b = 0.2, v = g.
  // Step 2: pred = 0.2 + 0.8 + 0.2 = 1.2, grad = 2*0.2*[1,2] = [0.4, 0.8], b 0.4;
  // v = 0.9*v + g = [-1.4, -2.8], b -1.4; w = [0.2, 0.4] - 0.1*v = [0.34, 0.68], b 0.34.
  EXPECT_NEAR(model->weight[0][0].item<float>(), 0.34f, 1e-6);
  EXPECT_NEAR(model->weight[0][1].item<float>(), 0.68f, 1e-6);
  EXPECT_NEAR(model->bias[0].item<float>(), 0.34f, 1e-6);

  // A plain learning rate, and Adam's options.
  torch::optim::SGD plain(model->parameters(), /*lr=*/0.01);
  EXPECT_DOUBLE_EQ(plain.param_groups()[0].options().get_lr(), 0.01);
  torch::optim::Adam adam(model->parameters(), torch::optim::AdamOptions(1e-3).betas({0.9, 0.99}));
  EXPECT_DOUBLE_EQ(adam.param_groups()[0].options().get_lr(), 1e-3);
}

// ---- data loading

TEST(LibTorchCompat, DataLoader) {
  torch::Tensor images = torch::arange(20, torch::kFloat32).reshape({10, 2});
  torch::Tensor labels = torch::arange(10);
  auto dataset = std::make_shared<torch::data::TensorDataset>(images, labels);
  torch::data::DataLoader loader(dataset, {.batch_size = 4});
  int64_t batches = 0, seen = 0;
  for (auto& batch : loader) {
    EXPECT_EQ(batch.data.size(0), batch.target.size(0));
    seen += batch.target.size(0);
    ++batches;
  }
  EXPECT_EQ(batches, 3);
  EXPECT_EQ(seen, 10);
}

// ---- serialization (torch::save / torch::load)

void test_error_paths_of_save_load(const ignis::TempDir& dir) {
  expect_error([&] { torch::save(torch::Tensor(), dir.file("u.pt")); },
               "save: the tensor is undefined");
  expect_error(
      [&] {
        torch::save(std::vector<torch::Tensor>{torch::ones({1}), {}}, dir.file("u.pt"));
      },
      "save: tensor 1 of the list is undefined");
  // A file that claims to hold one tensor but holds two.
  ignis::save_safetensors(dir.file("two.pt"),
                          {{"tensor", torch::ones({1})}, {"x", torch::ones({1})}},
                          {{"format", "ignis-tensor-1"}});
  torch::Tensor t;
  expect_error([&] { torch::load(t, dir.file("two.pt")); }, "holds 2 tensors, expected 1");
  // A list file with a gap in its names.
  ignis::save_safetensors(dir.file("gap.pt"), {{"0", torch::ones({1})}, {"2", torch::ones({1})}},
                          {{"format", "ignis-tensor-list-1"}});
  std::vector<torch::Tensor> list;
  expect_error([&] { torch::load(list, dir.file("gap.pt")); },
               "no tensor named '1' (the file has: 0 2)");
  EXPECT_TRUE(list.empty());  // a failed load leaves the list as it was
}

TEST(LibTorchCompat, SaveLoad) {
  ignis::TempDir dir;
  torch::Tensor t = torch::arange(6, torch::kFloat64).reshape({2, 3});
  torch::save(t, dir.file("t.pt"));
  torch::Tensor back;
  torch::load(back, dir.file("t.pt"));
  EXPECT_TRUE(torch::equal(back, t));
  EXPECT_EQ(back.dtype(), torch::kFloat64);

  std::vector<torch::Tensor> list = {torch::ones({2}), torch::arange(3)};
  torch::save(list, dir.file("list.pt"));
  std::vector<torch::Tensor> list_back;
  torch::load(list_back, dir.file("list.pt"));
  ASSERT_EQ(list_back.size(), 2u);
  EXPECT_TRUE(torch::equal(list_back[1], list[1]));

  torch::manual_seed(3);
  auto model = std::make_shared<Net2>(4, 5);
  torch::save(model, dir.file("model.pt"));
  torch::manual_seed(4);
  auto other = std::make_shared<Net2>(4, 5);
  EXPECT_FALSE(torch::equal(other->linear->weight, model->linear->weight));
  torch::load(other, dir.file("model.pt"));
  EXPECT_TRUE(torch::equal(other->linear->weight, model->linear->weight));
  EXPECT_TRUE(torch::equal(other->another_bias, model->another_bias));

  torch::optim::Adam opt(model->parameters(), torch::optim::AdamOptions(0.01));
  model->forward(torch::ones({2, 4})).sum().backward();
  opt.step();
  torch::save(opt, dir.file("opt.pt"));
  torch::optim::Adam opt2(model->parameters(), torch::optim::AdamOptions(0.01));
  torch::load(opt2, dir.file("opt.pt"));
  EXPECT_EQ(opt2.state_dict().size(), opt.state_dict().size());

  // What a wrong file gives: the op, the file and what it holds.
  expect_error([&] { torch::load(back, dir.file("model.pt")); },
               "does not hold a tensor (format 'ignis-module-1', expected 'ignis-tensor-1')");
  expect_error([&] { torch::load(opt2, dir.file("t.pt")); }, "does not hold an optimizer");
  auto small = std::make_shared<Net2>(3, 5);
  expect_error([&] { torch::load(small, dir.file("model.pt")); }, "linear.weight");
  test_error_paths_of_save_load(dir);
  std::shared_ptr<Net2> null;
  expect_error([&] { torch::save(null, dir.file("x.pt")); }, "save: the module is null");
}

}  // namespace
