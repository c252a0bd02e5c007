// The activations with parameters, square/trunc and atan2/fmod/remainder beyond the op table:
// integer dtypes and division by zero, PyTorch's edge values, the in-place forms, the nn
// modules and functional forms with LibTorch's options, and every error message.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <sstream>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;
namespace F = nn::functional;

const double kInf = std::numeric_limits<double>::infinity();

Tensor ints(std::vector<int64_t> v) { return tensor(v); }

// ---- fmod and remainder: the sign of the dividend and of the divisor, integers kept

TEST(BinaryMath, FmodFollowsTheDividendRemainderTheDivisor) {
  const Tensor a = ints({-7, 7, -7, 7, 0, 6});
  const Tensor b = ints({2, 2, -2, -2, 3, -3});
  const Tensor f = fmod(a, b), r = remainder(a, b);
  EXPECT_EQ(f.dtype(), kInt64);
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(vals(f), (std::vector<double>{-1, 1, -1, 1, 0, 0}));  // torch.fmod
  EXPECT_EQ(vals(r), (std::vector<double>{1, 1, -1, -1, 0, 0}));  // torch.remainder
  // Float, with a scalar other and a scalar self.
  EXPECT_EQ(vals(fmod(tensor({-7.5, 7.5}), 2)), (std::vector<double>{-1.5, 1.5}));
  EXPECT_EQ(vals(remainder(tensor({-7.5, 7.5}), 2)), (std::vector<double>{0.5, 1.5}));
  EXPECT_EQ(vals(remainder(2, ints({3, -3}))), (std::vector<double>{2, -1}));
  // An integer tensor with a float scalar promotes (torch: tensor([1., 2., -0.5])).
  const Tensor p = fmod(ints({1, 7, -3}), 2.5);
  EXPECT_EQ(p.dtype(), kFloat32);
  EXPECT_EQ(vals(p), (std::vector<double>{1, 2, -0.5}));
  // int32 and the MIN % -1 corner (0, not a trap).
  EXPECT_EQ(vals(remainder(ints({-7, 7}).to(kInt32), ints({3, -3}).to(kInt32))),
            (std::vector<double>{2, -2}));
  const int64_t mn = std::numeric_limits<int64_t>::min();
  EXPECT_EQ(vals(fmod(ints({mn}), ints({-1}))), (std::vector<double>{0}));
}

TEST(BinaryMath, FloatDivisionByZeroAndInfinityAsPyTorch) {
  const Tensor a = tensor({5.0, -1.0, 1.0, -0.0, 0.0, 3.0}, kFloat64);
  EXPECT_TRUE(std::isnan(vals(fmod(a, 0.0))[0]));
  EXPECT_TRUE(std::isnan(vals(remainder(a, 0.0))[0]));
  // remainder(x, inf): x for x >= 0, inf for x < 0 (fmod shifted by the divisor); zeros keep
  // their sign. torch: [5., inf, 1., -0., 0., 3.]
  const std::vector<double> r = vals(remainder(a, kInf));
  EXPECT_EQ(r[0], 5);
  EXPECT_EQ(r[1], kInf);
  EXPECT_TRUE(std::signbit(r[3]));
  EXPECT_FALSE(std::signbit(r[4]));
  // remainder(x, -2): torch [-1., -1., -1., -0., 0., -1.]
  const std::vector<double> m = vals(remainder(a, -2.0));
  EXPECT_EQ(m, (std::vector<double>{-1, -1, -1, 0, 0, -1}));
  EXPECT_TRUE(std::signbit(m[3]));
  EXPECT_FALSE(std::signbit(m[4]));
}

TEST(BinaryMath, IntegerDivisionByZeroIsAnError) {
  EXPECT_THAT(error_of([] {
                fmod(ints({1, 2}), ints({1, 0}));
              }),
              HasSubstr("fmod: integer division by zero (ZeroDivisionError): the divisor, of "
                        "dtype int64, has a zero"));
  EXPECT_THAT(error_of([] {
                remainder(ints({1, 2}), 0);
              }),
              HasSubstr("remainder: integer division by zero (ZeroDivisionError)"));
  EXPECT_THAT(error_of([] {
                remainder(0, ints({1, 0}).to(kInt32));
              }),
              HasSubstr("remainder: integer division by zero (ZeroDivisionError): the divisor, "
                        "of dtype int32"));
  // In place: refused before anything is written.
  Tensor x = ints({5, 6});
  EXPECT_THAT(error_of([&] {
                x.fmod_(ints({0, 1}));
              }),
              HasSubstr("fmod: integer division by zero"));
  EXPECT_EQ(vals(x), (std::vector<double>{5, 6}));
}

TEST(BinaryMath, BoolAndInPlaceDtypeErrors) {
  const Tensor t = tensor(std::vector<bool>{true, false});
  EXPECT_THAT(error_of([&] { fmod(t, t); }),
              HasSubstr("fmod: not supported for bool tensors (shapes [2] and [2], dtypes bool "
                        "and bool)"));
  EXPECT_THAT(error_of([&] { remainder(t, t); }), HasSubstr("remainder: not supported for bool"));
  Tensor i = ints({1, 2});
  EXPECT_THAT(error_of([&] { i.atan2_(tensor({1.0, 1.0})); }), HasSubstr("atan2_"));
  EXPECT_THAT(error_of([&] {
                fmod(tensor({1.0, 2.0}), tensor({1.0, 2.0, 3.0}));
              }),
              HasSubstr("[2] and [3]"));
}

TEST(BinaryMath, Atan2PromotesIntegersAndTakesQuadrants) {
  const Tensor y = atan2(ints({1, 1, -1}), ints({1, -1, -1}));
  EXPECT_EQ(y.dtype(), kFloat32);
  const std::vector<double> v = vals(y);
  EXPECT_NEAR(v[0], M_PI / 4, 1e-6);
  EXPECT_NEAR(v[1], 3 * M_PI / 4, 1e-6);
  EXPECT_NEAR(v[2], -3 * M_PI / 4, 1e-6);
  // Gradients of both operands, un-broadcast by the engine.
  Tensor a = tensor({{1.0, 2.0}, {3.0, 4.0}}, kFloat64).requires_grad_(true);
  Tensor b = tensor({2.0}, kFloat64).requires_grad_(true);
  atan2(a, b).sum().backward();
  EXPECT_NEAR(vals(a.grad())[0], 2.0 / 5.0, 1e-12);
  double gb = 0;
  for (double av : {1.0, 2.0, 3.0, 4.0}) gb += -av / (av * av + 4);
  EXPECT_NEAR(vals(b.grad())[0], gb, 1e-12);
}

TEST(BinaryMath, SquareAndTruncKeepIntegers) {
  EXPECT_EQ(square(ints({1, 7, -3})).dtype(), kInt64);
  EXPECT_EQ(vals(square(ints({1, 7, -3}))), (std::vector<double>{1, 49, 9}));
  const Tensor sb = square(tensor(std::vector<bool>{true, false}));  // torch: int64 [1, 0]
  EXPECT_EQ(sb.dtype(), kInt64);
  EXPECT_EQ(vals(sb), (std::vector<double>{1, 0}));
  EXPECT_EQ(vals(trunc(ints({1, 7, -3}))), (std::vector<double>{1, 7, -3}));
  const std::vector<double> t = vals(tensor({-2.7, 2.7, -0.5, kInf}, kFloat64).trunc());
  EXPECT_EQ(t[0], -2);
  EXPECT_EQ(t[1], 2);
  EXPECT_TRUE(t[2] == 0 && std::signbit(t[2]));
  EXPECT_EQ(t[3], kInf);
}

// ---- activations

TEST(Activation, HardtanhAndRelu6KeepIntegers) {
  // torch: hardtanh(tensor([1, 7, -3])) = [1, 1, -1]; relu6 = [1, 6, 0]; float bounds truncate.
  EXPECT_EQ(hardtanh(ints({1, 7, -3})).dtype(), kInt64);
  EXPECT_EQ(vals(hardtanh(ints({1, 7, -3}))), (std::vector<double>{1, 1, -1}));
  EXPECT_EQ(vals(relu6(ints({1, 7, -3}))), (std::vector<double>{1, 6, 0}));
  EXPECT_EQ(vals(hardtanh(ints({1, 7, -3}), -1.5, 1.5)), (std::vector<double>{1, 1, -1}));
  // min > max: every element becomes max (torch: hardtanh(tensor([3.]), 2, 1) = [1.]).
  EXPECT_EQ(vals(hardtanh(tensor({3.0, -3.0}), 2, 1)), (std::vector<double>{1, 1}));
  EXPECT_THAT(error_of([] { hardtanh(tensor(std::vector<bool>{true})); }),
              HasSubstr("hardtanh: bool inputs are not supported (got a tensor of shape [1] and "
                        "dtype bool)"));
  EXPECT_THAT(error_of([] { relu6_(tensor(std::vector<bool>{true})); }),
              HasSubstr("hardtanh_: bool inputs are not supported"));
}

TEST(Activation, FloatingActivationsPromoteIntegers) {
  const Tensor y = elu(ints({-1, 2}));
  EXPECT_EQ(y.dtype(), kFloat32);
  EXPECT_NEAR(vals(y)[0], std::expm1(-1.0), 1e-6);
  // In place into an integer tensor: the float result cannot be stored.
  Tensor i = ints({-1, 2});
  EXPECT_THAT(error_of([&] { mish_(i); }), HasSubstr("int64"));
}

TEST(Activation, InPlaceFormsWriteThroughTheHandle) {
  const Tensor x = tensor({-1.0, 0.5, 4.0}, kFloat64);
  const Tensor& r = elu_(x, 2.0);
  EXPECT_EQ(&r, &x);
  EXPECT_NEAR(vals(x)[0], 2 * std::expm1(-1.0), 1e-15);
  EXPECT_EQ(vals(x)[2], 4.0);
  // With autograd: the in-place op records, and the gradient flows through it.
  Tensor leaf = tensor({-1.0, 0.5, 7.0}, kFloat64).requires_grad_(true);
  Tensor h = leaf * 1;
  relu6_(h);
  h.sum().backward();
  EXPECT_EQ(vals(leaf.grad()), (std::vector<double>{0, 1, 0}));
  EXPECT_THAT(error_of([&] { hardswish_(leaf); }), HasSubstr("hardswish_"));
}

TEST(Activation, CompositeErrorsNameTheOpAndShapes) {
  EXPECT_THAT(error_of([] { celu(ones({2}), 0); }),
              HasSubstr("celu: alpha cannot be 0 (ZeroDivisionError)"));
  EXPECT_THAT(error_of([] { celu_(ones({2}), 0.0); }), HasSubstr("celu_: alpha cannot be 0"));
  EXPECT_THAT(error_of([] {
                glu(ones({2, 3}), 1);
              }),
              HasSubstr("glu: halving dimension must be even, but dimension 1 is size 3 (input of "
                        "shape [2, 3])"));
  EXPECT_THAT(error_of([] { glu(ones({})); }), HasSubstr("glu: 0-d tensors are not supported"));
  EXPECT_THAT(error_of([] {
                glu(ints({1, 2}));
              }),
              HasSubstr("glu: expected a floating point tensor, but got int64 of shape [2]"));
  EXPECT_THAT(error_of([] { glu(ones({2, 4}), 2); }), HasSubstr("glu"));
  EXPECT_THAT(error_of([] {
                softmin(ints({1, 2}), 0);
              }),
              HasSubstr("softmin: expected a floating point tensor, but got int64 of shape [2]"));
  EXPECT_THAT(
      error_of([] {
        prelu(ones({2, 3}), ones({1, 3}));
      }),
      HasSubstr("prelu: expected weight to be a scalar or 1-D tensor, but got shape [1, 3]"));
  EXPECT_THAT(error_of([] {
                prelu(ones({2, 3}), ones({2}));
              }),
              HasSubstr("prelu: weight has 2 elements but the input of shape [2, 3] has 3 "
                        "channel(s) (dim 1)"));
  EXPECT_THAT(
      error_of([] { prelu(ones({3}), ones({3})); }),
      HasSubstr("prelu: weight has 3 elements but the input of shape [3] has 1 channel(s)"));
  EXPECT_THAT(error_of([] { prelu(ints({1}), ones({1})); }),
              HasSubstr("prelu: expected floating point tensors, but got input int64 and weight "
                        "float32"));
}

TEST(Activation, SoftminAndLogSigmoidAreStable) {
  const std::vector<double> s = vals(softmin(tensor({1000.0, 1001.0}, kFloat32), 0));
  EXPECT_NEAR(s[0], 1 / (1 + std::exp(-1.0)), 1e-6);
  const std::vector<double> l = vals(log_sigmoid(tensor({-200.0, 200.0, 0.0}, kFloat32)));
  EXPECT_EQ(l[0], -200.0);
  EXPECT_EQ(l[1], 0.0);
  EXPECT_NEAR(l[2], -std::log(2.0), 1e-7);
  Tensor x = tensor({-200.0, 200.0}, kFloat32).requires_grad_(true);
  log_sigmoid(x).sum().backward();
  EXPECT_EQ(vals(x.grad()), (std::vector<double>{1, 0}));
}

// ---- modules and functional forms, with LibTorch's options

TEST(ActivationModules, OptionsAndForward) {
  const Tensor x = tensor({-2.0, -0.5, 0.5, 3.0, 7.0}, kFloat64);
  nn::ELU elu_m(nn::ELUOptions().alpha(0.5));
  EXPECT_TRUE(allclose(elu_m(x), elu(x, 0.5)));
  EXPECT_TRUE(allclose(F::elu(x, F::ELUFuncOptions().alpha(0.5)), elu(x, 0.5)));
  EXPECT_TRUE(allclose(nn::SELU()(x), selu(x)));
  EXPECT_TRUE(allclose(nn::CELU(nn::CELUOptions().alpha(2))(x), celu(x, 2)));
  EXPECT_TRUE(
      allclose(nn::Hardtanh(nn::HardtanhOptions().min_val(-0.5).max_val(2))(x), clamp(x, -0.5, 2)));
  EXPECT_TRUE(allclose(nn::ReLU6()(x), clamp(x, 0, 6)));
  EXPECT_TRUE(allclose(nn::Hardswish()(x), hardswish(x)));
  EXPECT_TRUE(allclose(nn::Hardsigmoid()(x), hardsigmoid(x)));
  EXPECT_TRUE(allclose(nn::Mish()(x), mish(x)));
  EXPECT_TRUE(allclose(nn::LogSigmoid()(x), F::logsigmoid(x)));
  const Tensor m = tensor({{1.0, 2.0}, {3.0, 5.0}}, kFloat64);
  EXPECT_TRUE(allclose(nn::Softmin(1)(m), softmax(-m, 1)));
  EXPECT_TRUE(allclose(F::softmin(m, F::SoftminFuncOptions(0).dtype(kFloat32)),
                       softmax(-m, 0).to(kFloat32)));
  EXPECT_EQ(F::softmin(m, F::SoftminFuncOptions(0).dtype(kFloat32)).dtype(), kFloat32);
  EXPECT_TRUE(allclose(nn::GLU()(m), m.narrow(1, 0, 1) * sigmoid(m.narrow(1, 1, 1))));
  EXPECT_TRUE(allclose(F::glu(m, 0), m.narrow(0, 0, 1) * sigmoid(m.narrow(0, 1, 1))));
  EXPECT_TRUE(
      allclose(F::hardtanh(x, F::HardtanhFuncOptions().min_val(0).max_val(1)), clamp(x, 0, 1)));
  EXPECT_TRUE(allclose(F::relu6(x), clamp(x, 0, 6)));
  EXPECT_TRUE(allclose(F::selu(x), selu(x)));
  EXPECT_TRUE(allclose(F::celu(x, F::CELUFuncOptions().alpha(0.5)), celu(x, 0.5)));
  EXPECT_TRUE(allclose(F::mish(x), mish(x)));
  EXPECT_TRUE(allclose(F::hardswish(x), hardswish(x)));
  EXPECT_TRUE(allclose(F::hardsigmoid(x), hardsigmoid(x)));
}

TEST(ActivationModules, InplaceOptionWritesIntoTheInput) {
  Tensor x = tensor({-1.0, 8.0}, kFloat64);
  const Tensor y = nn::ReLU6(nn::ReLU6Options(true))(x);
  EXPECT_EQ(vals(x), (std::vector<double>{0, 6}));
  EXPECT_EQ(y.data_ptr(), x.data_ptr());
  Tensor r = tensor({-2.0, 3.0}, kFloat64);
  const Tensor ry = nn::ReLU(nn::ReLUOptions().inplace(true))(r);
  EXPECT_EQ(vals(r), (std::vector<double>{0, 3}));
  EXPECT_EQ(ry.data_ptr(), r.data_ptr());
  Tensor r2 = tensor({-2.0}, kFloat64);
  F::relu(r2, F::ReLUFuncOptions(true));
  EXPECT_EQ(vals(r2)[0], 0.0);
  Tensor z = tensor({-1.0}, kFloat64);
  F::elu(z, F::ELUFuncOptions().inplace(true));
  EXPECT_NEAR(vals(z)[0], std::expm1(-1.0), 1e-15);
  Tensor w = tensor({-4.0}, kFloat64);
  F::hardswish(w, true);
  EXPECT_EQ(vals(w)[0], 0.0);
}

// An in-place ReLU after a layer (torchvision's models, and ignis's zoo) gives the gradients of
// the out-of-place one: the layers' backward formulas do not read their outputs.
TEST(ActivationModules, InplaceReluAfterALayerHasTheSameGradients) {
  manual_seed(3);
  const Tensor x = randn({2, 3, 6, 6}, kFloat64);
  auto gradients = [&](bool inplace) {
    manual_seed(4);
    nn::Sequential net(nn::Conv2d(3, 4, 3, 1, 1), nn::ReLU(inplace), nn::Flatten(),
                       nn::Linear(144, 5), nn::ReLU(inplace), nn::Linear(5, 2));
    net.to(kFloat64);
    const Tensor xi = x.clone().requires_grad_(true);
    net.forward(xi).pow(2).sum().backward();
    std::vector<std::vector<double>> grads{vals(xi.grad())};
    for (const Tensor& p : net.parameters()) grads.push_back(vals(p.grad()));
    return grads;
  };
  const auto plain = gradients(false), inplace = gradients(true);
  ASSERT_EQ(plain.size(), 7u);
  ASSERT_EQ(inplace.size(), plain.size());
  for (size_t i = 0; i < plain.size(); ++i) {
    ASSERT_EQ(inplace[i].size(), plain[i].size());
    for (size_t k = 0; k < plain[i].size(); ++k) EXPECT_NEAR(inplace[i][k], plain[i][k], 1e-12);
  }
}

TEST(ActivationModules, PReLUHasALearnableWeight) {
  nn::PReLU p(nn::PReLUOptions().num_parameters(3).init(0.1));
  const auto named = p.named_parameters();
  ASSERT_EQ(named.size(), 1u);
  EXPECT_EQ(named[0].first, "weight");
  ASSERT_EQ(p.weight.numel(), 3);
  for (double w : vals(p.weight)) EXPECT_NEAR(w, 0.1, 1e-7);
  const Tensor x = tensor({{-1.0, 2.0, -3.0}, {4.0, -5.0, 6.0}});
  const Tensor y = p(x);
  const std::vector<double> yv = vals(y);
  EXPECT_NEAR(yv[0], -0.1, 1e-6);
  EXPECT_NEAR(yv[1], 2.0, 1e-6);
  y.sum().backward();
  // d/dw_c = sum of the negative inputs of channel c.
  const std::vector<double> g = vals(p.weight.grad());
  EXPECT_NEAR(g[0], -1, 1e-6);
  EXPECT_NEAR(g[1], -5, 1e-6);
  EXPECT_NEAR(g[2], -3, 1e-6);
  nn::PReLU one;  // one slope of 0.25 for every channel
  EXPECT_EQ(one.weight.numel(), 1);
  EXPECT_NEAR(vals(one(x))[0], -0.25, 1e-7);
  EXPECT_THAT(error_of([] { nn::PReLU(nn::PReLUOptions().num_parameters(0)); }),
              HasSubstr("PReLU: num_parameters must be at least 1, but got 0"));
  EXPECT_THAT(error_of([] { nn::Hardtanh(nn::HardtanhOptions().min_val(1).max_val(1)); }),
              HasSubstr("Hardtanh: max_val (1) must be greater than min_val (1)"));
}

TEST(ActivationModules, PrintLikePyTorch) {
  auto repr = [](const nn::Module& m) {
    std::ostringstream os;
    os << m;
    return os.str();
  };
  EXPECT_EQ(repr(nn::ELU()), "ELU(alpha=1.0)");
  EXPECT_EQ(repr(nn::ELU(nn::ELUOptions().alpha(0.5).inplace(true))),
            "ELU(alpha=0.5, inplace=True)");
  EXPECT_EQ(repr(nn::Hardtanh()), "Hardtanh(min_val=-1.0, max_val=1.0)");
  EXPECT_EQ(repr(nn::ReLU6()), "ReLU6()");
  EXPECT_EQ(repr(nn::ReLU()), "ReLU()");
  EXPECT_EQ(repr(nn::ReLU(true)), "ReLU(inplace=True)");
  EXPECT_EQ(repr(nn::Softmin(1)), "Softmin(dim=1)");
  EXPECT_EQ(repr(nn::GLU()), "GLU(dim=-1)");
  EXPECT_EQ(repr(nn::PReLU()), "PReLU(num_parameters=1)");
  EXPECT_EQ(repr(nn::Mish()), "Mish()");
}

}  // namespace
}  // namespace ignis
