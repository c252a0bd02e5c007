// Convolution and pooling beyond the op table: error messages, module shapes and parameter counts,
// PyTorch's output-size formulas (ceil_mode included), "same" padding with even kernels,
// hand-computed values, the fused conv2d_relu, max pooling against a scalar reference,
// graph mode's fusion of a Sequential's Conv2d / Linear with ReLU, and the cache of oneDNN
// primitives.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "autograd/node.h"
#include "ignis/ignis.h"
#include "ops/conv.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

using S = std::vector<int64_t>;
S shape(const Tensor& t) { return S(t.sizes().begin(), t.sizes().end()); }

Tensor seq(IntArrayRef shape, DType dt = kFloat32) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  return arange(n, TensorOptions(dt)).reshape(shape);
}

// ---- errors

TEST(ConvErrors, Ranks) {
  EXPECT_THAT(error_of([] {
                conv2d(randn({5, 5}), randn({1, 1, 3, 3}));
              }),
              HasSubstr("conv2d: expected a 3-d (unbatched) or 4-d (batched) input [N, C, H, W], "
                        "but got input of shape [5, 5]"));
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 2, 5, 5}), randn({3, 2, 3}));
              }),
              HasSubstr("conv2d: expected a 4-d weight, but got weight of shape [3, 2, 3]"));
  EXPECT_THAT(error_of([] {
                conv1d(randn({1, 2, 5, 5}), randn({3, 2, 3}));
              }),
              HasSubstr("conv1d: expected a 2-d (unbatched) or 3-d (batched) input [N, C, L]"));
  EXPECT_THAT(error_of([] {
                max_pool2d(randn({4, 4}), 2);
              }),
              HasSubstr("max_pool2d: expected a 3-d (unbatched) or 4-d (batched) input"));
  EXPECT_THAT(error_of([] {
                adaptive_avg_pool2d(randn({1, 1, 1, 4, 4}), 2);
              }),
              HasSubstr("adaptive_avg_pool2d: expected a 3-d (unbatched) or 4-d"));
}

TEST(ConvErrors, ChannelsAndGroups) {
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 3, 5, 5}), randn({4, 2, 3, 3}));
              }),
              HasSubstr("conv2d: expected input of shape [1, 3, 5, 5] to have 2 channels (weight "
                        "of shape [4, 2, 3, 3], groups = 1), but got 3 channels"));
  EXPECT_THAT(
      error_of([] {
        conv2d(randn({1, 4, 5, 5}), randn({5, 2, 3, 3}), {}, 1, 0, 1, 2);
      }),
      HasSubstr("conv2d: out_channels (weight.size(0) = 5) must be divisible by groups = 2"));
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 4, 5, 5}), randn({4, 2, 3, 3}), {}, 1, 0, 1, 0);
              }),
              HasSubstr("conv2d: groups must be positive, but got 0"));
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 2, 5, 5}), randn({4, 2, 3, 3}), randn({3}));
              }),
              HasSubstr("conv2d: expected a bias of shape [4], but got bias of shape [3]"));
  EXPECT_THAT(
      error_of([] {
        conv_transpose2d(randn({1, 3, 5, 5}), randn({4, 2, 3, 3}));
      }),
      HasSubstr("conv_transpose2d: expected input of shape [1, 3, 5, 5] to have 4 channels"));
  EXPECT_THAT(error_of([] { nn::Conv2d(3, 4, 3, 1, 0, 1, 2); }),
              HasSubstr("Conv2d: in_channels (3) must be divisible by groups (2)"));
}

TEST(ConvErrors, Dtypes) {
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 2, 5, 5}), randn({4, 2, 3, 3}, kFloat64));
              }),
              HasSubstr("conv2d: input (float32) and weight (float64) must have the same dtype"));
  EXPECT_THAT(error_of([] {
                conv2d(ones({1, 2, 5, 5}, kInt64), ones({4, 2, 3, 3}, kInt64));
              }),
              HasSubstr("conv2d: expected a floating point input, but got int64"));
  EXPECT_THAT(error_of([] {
                max_pool2d(ones({1, 2, 4, 4}, kInt64), 2);
              }),
              HasSubstr("max_pool2d: expected a floating point input, but got int64"));
}

TEST(ConvErrors, KernelLargerThanPaddedInput) {
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 1, 3, 3}), randn({1, 1, 5, 5}));
              }),
              HasSubstr("conv2d: the (dilated) kernel size (5 x 5) is larger than the padded "
                        "input size (3 x 3)"));
  EXPECT_THAT(error_of([] {
                conv2d(randn({1, 1, 4, 4}), randn({1, 1, 3, 3}), {}, 1, 0, 2);
              }),
              HasSubstr("kernel size (5 x 5) is larger than the padded input size (4 x 4)"));
  EXPECT_THAT(error_of([] {
                conv1d(randn({1, 1, 3}), randn({1, 1, 4}));
              }),
              HasSubstr("conv1d: the (dilated) kernel size 4 is larger than the padded input "
                        "size 3"));
  EXPECT_THAT(error_of([] { max_pool2d(randn({1, 1, 2, 2}), 2, 1, 1, 3); }),
              HasSubstr("max_pool2d: output position 0 has no input element in its window"));
  EXPECT_THAT(error_of([] { max_pool2d(randn({1, 1, 2, 2}), 3, 1, 1, 2); }),
              HasSubstr("max_pool2d: the (dilated) kernel size 5 is larger than the padded input "
                        "size 4"));
}

TEST(ConvErrors, BadStridePaddingDilation) {
  const Tensor x = randn({1, 2, 6, 6}), w = randn({3, 2, 3, 3});
  EXPECT_THAT(error_of([&] { conv2d(x, w, {}, 0); }),
              HasSubstr("conv2d: stride must be positive, but got 0"));
  EXPECT_THAT(error_of([&] { conv2d(x, w, {}, 1, -1); }),
              HasSubstr("conv2d: padding must be non-negative, but got -1"));
  EXPECT_THAT(error_of([&] {
                conv2d(x, w, {}, 1, 0, {1, 0});
              }),
              HasSubstr("conv2d: dilation must be positive, but got 0"));
  EXPECT_THAT(error_of([&] {
                conv2d(x, w, {}, {1, 2, 3});
              }),
              HasSubstr("conv2d: stride must have 1 or 2 values, but got 3 values [1, 2, 3]"));
  EXPECT_THAT(error_of([&] { conv2d(x, w, {}, 1, "full"); }),
              HasSubstr("conv2d: padding must be 'same' or 'valid' (or integers), but got 'full'"));
  EXPECT_THAT(error_of([&] { conv2d(x, w, {}, 2, "same"); }),
              HasSubstr("conv2d: padding='same' is not supported for strided convolutions"));
  EXPECT_THAT(error_of([&] {
                conv_transpose2d(randn({1, 3, 4, 4}), randn({3, 2, 3, 3}), {}, 2, 0, 2);
              }),
              HasSubstr("conv_transpose2d: output_padding 2 must be non-negative and smaller than "
                        "either stride 2 or dilation 1"));
  EXPECT_THAT(error_of([&] { max_pool2d(x, 3, 1, 2); }),
              HasSubstr("max_pool2d: padding must be non-negative and at most half of the kernel "
                        "size, but got padding 2 with kernel size 3"));
  EXPECT_THAT(error_of([&] { avg_pool2d(x, 0); }),
              HasSubstr("avg_pool2d: kernel_size must be positive, but got 0"));
  EXPECT_THAT(error_of([&] { max_pool2d(x, 2, 0); }),
              HasSubstr("max_pool2d: stride must be positive, but got 0"));
  EXPECT_THAT(error_of([&] {
                adaptive_max_pool2d(x, {0, 2});
              }),
              HasSubstr("adaptive_max_pool2d: output_size must be positive, but got [0, 2]"));
  EXPECT_THAT(error_of([&] {
                adaptive_avg_pool2d(x, {1, 2, 3});
              }),
              HasSubstr("adaptive_avg_pool2d: output_size must have 1 or 2 values"));
}

// ---- values

TEST(Conv, HandComputed) {
  // y[i, j] = x[i, j] - x[i + 1, j + 1] = -4 for x = arange(9) as 3x3.
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seq({1, 1, 3, 3}, dt);
    Tensor w = tensor({1.0, 0.0, 0.0, -1.0}, dt).reshape({1, 1, 2, 2});
    Tensor y = conv2d(x, w, tensor({0.5}, dt));
    EXPECT_EQ(shape(y), (S{1, 1, 2, 2}));
    EXPECT_THAT(vals(y), ::testing::Each(-3.5));
  }
}

TEST(Conv, SamePaddingEvenKernel) {
  // A 2x2 kernel of ones with "same": PyTorch pads 0 before and 1 after, so y[i, j] = x[i, j] +
  // x[i, j + 1] + x[i + 1, j] + x[i + 1, j + 1] (zeros outside).
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = seq({1, 1, 5, 5}, dt);
    Tensor y = conv2d(x, ones({1, 1, 2, 2}, dt), {}, 1, "same");
    ASSERT_EQ(shape(y), (S{1, 1, 5, 5}));
    const auto v = vals(y);
    EXPECT_EQ(v[0], 0 + 1 + 5 + 6);
    EXPECT_EQ(v[4], 4 + 9);
    EXPECT_EQ(v[20], 20 + 21);
    EXPECT_EQ(v[24], 24);
    EXPECT_EQ(v[12], 12 + 13 + 17 + 18);
  }
  // "valid" is no padding.
  EXPECT_EQ(shape(conv2d(randn({1, 1, 5, 6}), randn({1, 1, 2, 3}), {}, 1, "valid")),
            (S{1, 1, 4, 4}));
  // conv1d, even kernel with dilation 3: total padding 3 = 1 before + 2 after, so y[i] = x[i - 1] +
  // x[i + 2].
  Tensor y1 = conv1d(seq({1, 1, 4}, kFloat64), ones({1, 1, 2}, kFloat64), {}, 1, "same", 3);
  EXPECT_EQ(vals(y1), (std::vector<double>{0 + 2, 0 + 3, 1 + 0, 2 + 0}));
}

TEST(Conv, OutputSizes) {
  auto hw = [](const Tensor& t) { return std::vector<int64_t>{t.size(-2), t.size(-1)}; };
  const Tensor w5 = randn({2, 3, 5, 5}), w3 = randn({2, 3, 3, 3});
  EXPECT_EQ(hw(conv2d(randn({1, 3, 32, 32}), w5, {}, 1, 2)), (std::vector<int64_t>{32, 32}));
  EXPECT_EQ(hw(conv2d(randn({1, 3, 7, 8}), w3, {}, 2, 1)), (std::vector<int64_t>{4, 4}));
  EXPECT_EQ(hw(conv2d(randn({1, 3, 7, 8}), w3, {}, 2, 1, 2)), (std::vector<int64_t>{3, 3}));
  // (H - 1) s - 2 p + d (k - 1) + output_padding + 1
  EXPECT_EQ(hw(conv_transpose2d(randn({1, 3, 7, 7}), randn({3, 2, 4, 4}), {}, 2, 1)),
            (std::vector<int64_t>{14, 14}));
  EXPECT_EQ(hw(conv_transpose2d(randn({1, 3, 7, 5}), randn({3, 2, 3, 3}), {}, 2, 1, 1)),
            (std::vector<int64_t>{14, 10}));
  // Pooling, PyTorch's values: floor vs ceil, and the ceil window that would start in the right
  // padding is dropped (5 with k 2, s 2, p 1 gives 3 in both modes).
  const Tensor x6 = randn({1, 1, 6, 6}), x5 = randn({1, 1, 5, 5});
  EXPECT_EQ(hw(max_pool2d(x6, 3, 2)), (std::vector<int64_t>{2, 2}));
  EXPECT_EQ(hw(max_pool2d(x6, 3, 2, 0, 1, true)), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hw(max_pool2d(x5, 2, 2, 1)), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hw(max_pool2d(x5, 2, 2, 1, 1, true)), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hw(avg_pool2d(x6, 3, 2, 0, true)), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hw(avg_pool2d(x5, {2, 3}, {2, 1}, {1, 0})), (std::vector<int64_t>{3, 3}));
  EXPECT_EQ(hw(max_pool2d(randn({1, 1, 112, 112}), 3, 2, 1)), (std::vector<int64_t>{56, 56}));
  EXPECT_EQ(hw(adaptive_avg_pool2d(x5, {2, 3})), (std::vector<int64_t>{2, 3}));
}

// PyTorch's C++ spelling: braced stride and padding are integers, a string names the mode.
TEST(Conv, BracedAndNamedPaddingOverloads) {
  manual_seed(1);
  Tensor x = randn({1, 2, 6, 6}), w = randn({3, 2, 3, 3}), b = randn({3});
  const Tensor ref = conv2d(x, w, b, IntArrayRef({1, 1}), IntArrayRef({1, 1}));
  EXPECT_EQ(vals(conv2d(x, w, b, {1, 1}, {1, 1})), vals(ref));
  EXPECT_EQ(vals(conv2d(x, w, b, {1, 1}, 1)), vals(ref));
  EXPECT_EQ(vals(conv2d(x, w, b, {1, 1}, "same")), vals(ref));
  const std::string mode = "valid";
  EXPECT_EQ(shape(conv2d(x, w, b, {1, 1}, mode)), (S{1, 3, 4, 4}));
  EXPECT_EQ(shape(conv2d(x, w, b, {1, 1}, 0)), (S{1, 3, 4, 4}));
  EXPECT_THAT(error_of([&] { conv2d(x, w, b, {1, 1}, "full"); }),
              HasSubstr("conv2d: padding must be 'same' or 'valid' (or integers), but got 'full'"));
  Tensor x1 = randn({1, 2, 7}), w1 = randn({3, 2, 3});
  EXPECT_EQ(vals(conv1d(x1, w1, {}, {1}, "same")), vals(conv1d(x1, w1, {}, {1}, {1})));
}

TEST(Conv, UnbatchedInputs) {
  Tensor x = randn({3, 6, 5}), w = randn({4, 3, 3, 3}), b = randn({4});
  Tensor y = conv2d(x, w, b, 1, 1);
  EXPECT_EQ(shape(y), (S{4, 6, 5}));
  EXPECT_TRUE(allclose(y, conv2d(x.unsqueeze(0), w, b, 1, 1).squeeze(0)));
  EXPECT_EQ(shape(conv1d(randn({3, 9}), randn({2, 3, 4}))), (S{2, 6}));
  EXPECT_EQ(shape(max_pool2d(x, 2)), (S{3, 3, 2}));
  EXPECT_EQ(shape(conv_transpose2d(randn({4, 3, 3}), w)), (S{3, 5, 5}));
}

TEST(Conv, FusedReluMatchesComposite) {
  manual_seed(3);
  Tensor x = randn({4, 8, 10, 10}), w = randn({16, 8, 3, 3}), b = randn({16});
  Tensor ref = relu(conv2d(x, w, b, 1, 1));
  Tensor fused;
  {
    NoGradGuard ng;
    fused = conv2d_relu(x, w, b, 1, 1);
  }
  EXPECT_TRUE(allclose(fused, ref, 1e-5, 1e-5));
  EXPECT_GT(vals(ref == 0).size(), 0u);
  // With autograd it is one node (Conv2dReluBackward0) whose gradients match the composite's.
  Tensor wg = w.clone().requires_grad_(true);
  conv2d_relu(x, wg, b, 1, 1).sum().backward();
  Tensor wr = w.clone().requires_grad_(true);
  relu(conv2d(x, wr, b, 1, 1)).sum().backward();
  EXPECT_TRUE(allclose(wg.grad(), wr.grad(), 1e-5, 1e-5));
  // The module form.
  nn::Conv2d conv(8, 16, 3, 1, 1);
  conv.eval();
  NoGradGuard ng;
  EXPECT_TRUE(allclose(conv.forward_relu(x), relu(conv.forward(x)), 1e-5, 1e-5));
}

TEST(Conv, FusedReluKeepsItsSavedOutputOnlyWithRetainGraph) {
  // The fused node drops its saved output during backward unless the graph is retained.
  manual_seed(4);
  Tensor x = randn({2, 3, 6, 6}).requires_grad_(true), w = randn({4, 3, 3, 3});
  Tensor loss = conv2d_relu(x, w, {}, 1, 1).sum();
  loss.backward({}, true);
  const Tensor first = x.grad().clone();
  loss.backward();  // the retained graph runs again; gradients accumulate
  EXPECT_TRUE(allclose(x.grad(), first * 2, 1e-6, 1e-6));
  EXPECT_THAT(error_of([&] { loss.backward(); }),
              HasSubstr("backward through the graph a second time"));
}

TEST(Conv, Float32MatchesFloat64Backward) {
  // The oneDNN backward (float32) against the loops (float64) on a LeNet-like layer.
  manual_seed(5);
  Tensor x = randn({3, 6, 9, 9}, kFloat64), w = randn({8, 3, 5, 5}, kFloat64);
  Tensor b = randn({8}, kFloat64), g = randn({3, 8, 5, 5}, kFloat64);
  auto run = [&](DType dt) {
    Tensor xx = x.to(dt).requires_grad_(true), ww = w.to(dt).requires_grad_(true);
    Tensor bb = b.to(dt).requires_grad_(true);
    (conv2d(xx, ww, bb, 2, 2, 1, 2) * g.to(dt)).sum().backward();
    return std::vector<Tensor>{xx.grad(), ww.grad(), bb.grad()};
  };
  auto r32 = run(kFloat32), r64 = run(kFloat64);
  for (size_t i = 0; i < 3; ++i) {
    EXPECT_TRUE(allclose(r32[i].to(kFloat64), r64[i], 1e-4, 1e-4)) << "gradient " << i;
  }
}

TEST(Pool, HandComputed) {
  Tensor x = seq({1, 1, 4, 4});
  auto [v, idx] = max_pool2d_with_indices(x, 2);
  EXPECT_EQ(vals(v), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(vals(idx), (std::vector<double>{5, 7, 13, 15}));
  EXPECT_EQ(idx.dtype(), kInt64);
  EXPECT_EQ(vals(avg_pool2d(x, 2)), (std::vector<double>{2.5, 4.5, 10.5, 12.5}));
  // count_include_pad: the corner window of a 3x3 pool with padding 1 holds 4 of 9 elements.
  Tensor ones3 = ones({1, 1, 3, 3});
  EXPECT_NEAR(vals(avg_pool2d(ones3, 3, 1, 1))[0], 4.0 / 9.0, 1e-6);
  EXPECT_NEAR(vals(avg_pool2d(ones3, 3, 1, 1, false, false))[0], 1.0, 1e-6);
  EXPECT_EQ(vals(adaptive_avg_pool2d(x, 1)), (std::vector<double>{7.5}));
  EXPECT_EQ(vals(adaptive_max_pool2d(x, {1, 2})), (std::vector<double>{13, 15}));
}

TEST(Pool, MaxPoolGradientGoesToTheArgmax) {
  Tensor x = tensor({1.0, 9.0, 2.0, 3.0, 4.0, 0.0, 8.0, 7.0, 5.0}).reshape({1, 1, 3, 3});
  x.requires_grad_(true);
  // Overlapping 2x2 windows, stride 1: 9 is the max of both top windows, 8 of bottom-left.
  max_pool2d(x, 2, 1).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{0, 2, 0, 0, 0, 0, 1, 1, 0}));
}

// float32 pooling with whole, undilated windows takes a vectorised path; float64 (and windows
// clipped by padding) the general one. Both give the same values and indices, ties included (the
// first maximum in row-major order: ReLU outputs are full of equal zeros) and NaN (it wins).
TEST(Pool, DenseWindowPathMatchesGeneralPath) {
  manual_seed(3);
  Tensor x = relu(randn({2, 3, 9, 11}));  // about half the elements are 0
  x.select(1, 1).fill_(2.0);              // a plane of equal values
  x.data_ptr<float>()[5] = std::nanf("");
  // Padded windows (clipped at the borders, as the ResNet stem's 3x3, stride 2, padding 1) take
  // the float32 path too; float64 runs the general kernel.
  for (auto [k, s, pad] : {std::tuple<int64_t, int64_t, int64_t>{2, 2, 0}, {3, 2, 0}, {2, 1, 0},
                           {3, 3, 0}, {3, 2, 1}, {2, 2, 1}, {3, 1, 1}, {5, 2, 2}}) {
    auto [v32, i32] = max_pool2d_with_indices(x, k, s, pad);
    auto [v64, i64] = max_pool2d_with_indices(x.to(kFloat64), k, s, pad);
    const std::vector<double> a = vals(v32), b = vals(v64);
    ASSERT_EQ(a.size(), b.size());
    for (size_t j = 0; j < a.size(); ++j) {
      if (std::isnan(b[j])) {
        EXPECT_TRUE(std::isnan(a[j])) << "kernel " << k << " stride " << s << " pad " << pad;
      } else {
        EXPECT_EQ(a[j], b[j]) << "kernel " << k << " stride " << s << " pad " << pad << " at " << j;
      }
    }
    EXPECT_EQ(vals(i32), vals(i64)) << "kernel " << k << " stride " << s << " pad " << pad;
  }
  // The plane of equal values: each window's index is its top-left corner.
  auto [v, idx] = max_pool2d_with_indices(x, 2, 2);
  EXPECT_EQ(vals(idx.select(0, 0).select(0, 1).select(0, 0)),
            (std::vector<double>{0, 2, 4, 6, 8}));
  std::vector<double> v0 = vals(v.select(0, 0).select(0, 0).select(0, 0));
  EXPECT_TRUE(std::isnan(v0[2]));  // x[0, 0, 0, 5] is NaN: the window over columns 4-5
}

// ---- modules

TEST(ConvModules, ShapesAndParameters) {
  nn::Conv2d c(3, 64, 3, 2, 1);
  EXPECT_EQ(shape(c.weight), (S{64, 3, 3, 3}));
  EXPECT_EQ(shape(c.bias), (S{64}));
  EXPECT_EQ(c.num_parameters(), 64 * 27 + 64);
  EXPECT_EQ(shape(c.forward(randn({2, 3, 32, 32}))), (S{2, 64, 16, 16}));
  auto names = c.named_parameters();
  ASSERT_EQ(names.size(), 2u);
  EXPECT_EQ(names[0].first, "weight");
  EXPECT_EQ(names[1].first, "bias");

  nn::Conv2d c2(nn::Conv2dOptions(3, 64, {3, 5}).stride(2).padding(1).bias(false));
  EXPECT_EQ(shape(c2.weight), (S{64, 3, 3, 5}));
  EXPECT_FALSE(c2.bias.defined());
  EXPECT_EQ(c2.named_parameters().size(), 1u);
  EXPECT_EQ(shape(c2.forward(randn({1, 3, 9, 9}))), (S{1, 64, 5, 4}));

  nn::Conv2d same(nn::Conv2dOptions(4, 4, 4).padding("same"));
  EXPECT_EQ(shape(same.forward(randn({1, 4, 7, 6}))), (S{1, 4, 7, 6}));

  nn::Conv2d grouped(8, 16, 3, 1, 1, 1, 4);
  EXPECT_EQ(shape(grouped.weight), (S{16, 2, 3, 3}));
  EXPECT_EQ(grouped.num_parameters(), 16 * 18 + 16);

  nn::Conv1d c1(4, 8, 5);
  EXPECT_EQ(shape(c1.weight), (S{8, 4, 5}));
  EXPECT_EQ(shape(c1.forward(randn({2, 4, 20}))), (S{2, 8, 16}));

  nn::ConvTranspose2d t(16, 8, 4, 2, 1);
  EXPECT_EQ(shape(t.weight), (S{16, 8, 4, 4}));
  EXPECT_EQ(t.num_parameters(), 16 * 8 * 16 + 8);
  EXPECT_EQ(shape(t.forward(randn({1, 16, 7, 7}))), (S{1, 8, 14, 14}));

  EXPECT_EQ(shape(nn::MaxPool2d(2).forward(randn({1, 3, 8, 8}))), (S{1, 3, 4, 4}));
  EXPECT_EQ(shape(nn::MaxPool2d(3, 2, 1).forward(randn({1, 2, 112, 112}))), (S{1, 2, 56, 56}));
  EXPECT_EQ(shape(nn::AvgPool2d(2).forward(randn({1, 3, 8, 8}))), (S{1, 3, 4, 4}));
  EXPECT_EQ(shape(nn::AdaptiveAvgPool2d(1).forward(randn({2, 5, 7, 7}))), (S{2, 5, 1, 1}));
  EXPECT_EQ(shape(nn::AdaptiveMaxPool2d(2, 3).forward(randn({2, 5, 7, 7}))), (S{2, 5, 2, 3}));
  EXPECT_EQ(nn::MaxPool2d(2).num_parameters(), 0);
}

TEST(ConvModules, DefaultInitBoundsAndStateDict) {
  manual_seed(0);
  nn::Conv2d c(6, 16, 5);
  const double bound =
      1.0 / std::sqrt(6.0 * 25.0);  // kaiming-uniform(a = sqrt(5)) = 1/sqrt(fan_in)
  for (double v : vals(c.weight)) EXPECT_LE(std::abs(v), bound);
  for (double v : vals(c.bias)) EXPECT_LE(std::abs(v), bound);
  EXPECT_GT(vals(c.weight.abs().max()).at(0), 0.8 * bound);

  nn::Sequential net(nn::Conv2d(1, 6, 5, 1, 2), nn::ReLU(), nn::MaxPool2d(2), nn::Conv2d(6, 16, 5),
                     nn::ReLU(), nn::AvgPool2d(2), nn::Flatten(), nn::Linear(16 * 5 * 5, 10));
  auto sd = net.state_dict();
  ASSERT_EQ(sd.size(), 6u);
  EXPECT_EQ(sd[0].first, "0.weight");
  EXPECT_EQ(sd[2].first, "3.weight");
  EXPECT_EQ(shape(net.forward(randn({4, 1, 28, 28}))), (S{4, 10}));
  std::ostringstream os;
  os << *net[0];
  EXPECT_THAT(os.str(),
              HasSubstr("Conv2d(1, 6, kernel_size=(5, 5), stride=(1, 1), padding=(2, 2))"));
  std::ostringstream os2;
  os2 << nn::Conv2d(nn::Conv2dOptions(3, 8, 3).stride(2).bias(false).groups(1));
  EXPECT_THAT(os2.str(), HasSubstr("Conv2d(3, 8, kernel_size=(3, 3), stride=(2, 2), bias=False)"));
}

// ---- the primitive cache

// ---- max pooling against a scalar reference

// The window maxima and their plane-local indices of a [P, H, W] float64 copy of x: the first
// maximum in row-major order, a later NaN replacing an earlier value (the kernels' rule).
struct PoolRef {
  std::vector<double> vals;
  std::vector<int64_t> idx;
};
PoolRef pool_ref(const Tensor& x, int64_t k, int64_t s) {
  const int64_t H = x.size(2), W = x.size(3), P = x.size(0) * x.size(1);
  const int64_t OH = (H - k) / s + 1, OW = (W - k) / s + 1;
  const std::vector<double> v = vals(x.contiguous());
  PoolRef r;
  for (int64_t p = 0; p < P; ++p) {
    for (int64_t oh = 0; oh < OH; ++oh) {
      for (int64_t ow = 0; ow < OW; ++ow) {
        double best = 0;
        int64_t arg = -1;
        for (int64_t i = 0; i < k; ++i) {
          for (int64_t j = 0; j < k; ++j) {
            const int64_t at = (oh * s + i) * W + ow * s + j;
            const double e = v[p * H * W + at];
            if (arg < 0 || e > best || std::isnan(e)) {
              best = e;
              arg = at;
            }
          }
        }
        r.vals.push_back(best);
        r.idx.push_back(arg);
      }
    }
  }
  return r;
}

TEST(MaxPoolReference, ValuesIndicesAndGradient2x2) {
  manual_seed(11);
  for (DType dt : {kFloat32, kFloat64}) {
    // Odd sizes (a last row and column outside every window), ties (few distinct values), a NaN,
    // and a non-contiguous input (a transposed view).
    Tensor x = randint(0, 4, {2, 3, 9, 7}).to(dt);
    x.index_put_({0, 1, 2, 3}, std::nan(""));
    // Two NaNs in one window, in different rows and columns: the last in row-major order wins.
    x.index_put_({1, 2, 4, 1}, std::nan(""));
    x.index_put_({1, 2, 5, 0}, std::nan(""));
    for (const Tensor& in : {x, x.transpose(2, 3).contiguous().transpose(2, 3)}) {
      const PoolRef ref = pool_ref(in, 2, 2);
      auto [y, ind] = max_pool2d_with_indices(in, {2});
      EXPECT_EQ(shape(y), (S{2, 3, 4, 3}));
      const std::vector<double> yv = vals(y);
      ASSERT_EQ(yv.size(), ref.vals.size());
      for (size_t i = 0; i < yv.size(); ++i) {
        if (std::isnan(ref.vals[i])) {
          EXPECT_TRUE(std::isnan(yv[i])) << i;
        } else {
          EXPECT_EQ(yv[i], ref.vals[i]) << i;
        }
      }
      const std::vector<double> iv = vals(ind);
      for (size_t i = 0; i < iv.size(); ++i) EXPECT_EQ(iv[i], ref.idx[i]) << i;
      // Backward: each window's gradient lands on its argmax; nothing else is written.
      Tensor xg = in.detach().clone().requires_grad_(true);
      const double ny = static_cast<double>(y.numel());
      Tensor g = arange(1, 1 + ny, 1, TensorOptions(dt)).view(y.sizes());
      (max_pool2d(xg, 2) * g).sum().backward();
      std::vector<double> expect(static_cast<size_t>(in.numel()), 0.0);
      const int64_t HW = 9 * 7, OHW = 4 * 3;
      for (size_t o = 0; o < ref.idx.size(); ++o) {
        expect[(o / OHW) * HW + ref.idx[o]] += static_cast<double>(o + 1);
      }
      EXPECT_EQ(vals(xg.grad()), expect);
    }
  }
}

TEST(MaxPoolReference, OverlappingWindowsAccumulate) {
  // 3x3 windows with stride 2 on 7x7 overlap: a maximum shared by two windows gets both
  // gradients.
  manual_seed(12);
  Tensor x = randn({2, 2, 7, 7}, kFloat64);
  const PoolRef ref = pool_ref(x, 3, 2);
  Tensor xg = x.clone().requires_grad_(true);
  max_pool2d(xg, 3, 2).sum().backward();
  std::vector<double> expect(static_cast<size_t>(x.numel()), 0.0);
  for (size_t o = 0; o < ref.idx.size(); ++o) expect[(o / 9) * 49 + ref.idx[o]] += 1.0;
  EXPECT_EQ(vals(xg.grad()), expect);
}

// ---- Sequential runs each module; graph mode fuses a layer with its ReLU

// Names of a graph's ops, in order.
std::vector<std::string> op_names(const jit::Graph& g) {
  std::vector<std::string> names;
  for (const jit::Node& n : g.nodes) names.push_back(n.name());
  return names;
}

TEST(SequentialFusion, EagerRunsEveryModuleAndGraphModeFusesTheRelu) {
  manual_seed(13);
  auto net =
      std::make_shared<nn::Sequential>(nn::Conv2d(3, 8, 3, 1, 1), nn::ReLU(), nn::MaxPool2d(2),
                                       nn::Flatten(), nn::Linear(128, 6), nn::ReLU(true));
  const Tensor x = randn({4, 3, 8, 8});
  // Eager: the ReLU modules themselves ran (no pattern match on module types).
  nn::Sequential cr(nn::Conv2d(3, 8, 3, 1, 1), nn::ReLU());
  EXPECT_EQ(cr.forward(x).grad_fn()->name(), "ReluBackward0");
  const Tensor eager = net->forward(x);
  EXPECT_EQ(eager.grad_fn()->name(), "ReluBackward0");
  // Graph mode: fuse_ops turns conv2d + relu and linear + relu_ into one node each.
  jit::Graph g = jit::trace(net, {x});
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"conv2d", "relu", "max_pool2d",
                                                   "flatten.using_ints", "linear", "relu_"}));
  EXPECT_EQ(jit::fuse_ops(g), 2);
  EXPECT_EQ(op_names(g), (std::vector<std::string>{"conv2d_relu", "max_pool2d",
                                                   "flatten.using_ints", "linear_relu"}));
  // Compiled, values and gradients equal eager's.
  auto compiled = jit::compile(net);
  const Tensor y = compiled->forward(x);
  EXPECT_TRUE(allclose(y, eager, 1e-5, 1e-6));
  const Tensor gy = randn(y.sizes());
  (eager * gy).sum().backward();
  std::vector<Tensor> eager_grads;
  for (const Tensor& p : net->parameters()) eager_grads.push_back(p.grad().clone());
  net->zero_grad();
  (y * gy).sum().backward();
  const auto params = net->named_parameters();
  ASSERT_EQ(params.size(), 4u);
  for (size_t i = 0; i < params.size(); ++i) {
    EXPECT_TRUE(allclose(params[i].second.grad(), eager_grads[i], 1e-5, 1e-6)) << params[i].first;
  }
}

// forward_relu: the fused op on a layer's own weights, equal to relu(forward(x)).
TEST(SequentialFusion, ForwardReluIsTheFusedOp) {
  manual_seed(14);
  nn::Linear lin(12, 20);
  const Tensor x = randn({16, 12});
  EXPECT_EQ(lin.forward_relu(x).grad_fn()->name(), "LinearReluBackward0");
  NoGradGuard ng;
  EXPECT_TRUE(
      allclose(lin.forward_relu(x), relu(matmul(x, lin.weight.t()) + lin.bias), 1e-5, 1e-6));
}

TEST(ConvCache, PrimitivesAreCreatedOncePerShape) {
  conv_primitive_cache_clear();
  Tensor x = randn({2, 4, 8, 8}), w = randn({6, 4, 3, 3}), b = randn({6});
  conv2d(x, w, b, 1, 1);
  ConvCacheStats s = conv_primitive_cache_stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 0);
  for (int i = 0; i < 3; ++i) conv2d(x, w, b, 1, 1);
  s = conv_primitive_cache_stats();
  EXPECT_EQ(s.misses, 1);
  EXPECT_EQ(s.hits, 3);
  // Another shape, stride or bias flag is another primitive.
  conv2d(randn({3, 4, 8, 8}), w, b, 1, 1);
  conv2d(x, w, b, 2, 1);
  conv2d(x, w, {}, 1, 1);
  EXPECT_EQ(conv_primitive_cache_stats().misses, 4);
  // Training: backward-data and backward-weights primitives, once each.
  Tensor wg = w.clone().requires_grad_(true), xg = x.clone().requires_grad_(true);
  for (int i = 0; i < 3; ++i) conv2d(xg, wg, b, 1, 1).sum().backward();
  s = conv_primitive_cache_stats();
  EXPECT_EQ(s.misses, 6);
  EXPECT_EQ(s.size, 6);
  // float64 runs the loops and never touches the cache.
  conv2d(x.to(kFloat64), w.to(kFloat64));
  EXPECT_EQ(conv_primitive_cache_stats().misses, 6);
}

}  // namespace
}  // namespace ignis
