// Channels-last (NHWC) tensors: the MemoryFormat API, elementwise ops keeping the layout, and the
// channels-last paths of conv2d, max_pool2d and batch_norm against the same ops on NCHW inputs
// (values, layouts and gradients), down to whole zoo models.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using S = std::vector<int64_t>;
S strides(const Tensor& t) { return S(t.strides().begin(), t.strides().end()); }

constexpr MemoryFormat kCL = MemoryFormat::ChannelsLast;

bool is_cl(const Tensor& t) { return t.suggest_memory_format() == kCL && !t.is_contiguous(); }

void expect_near(const Tensor& a, const Tensor& b, double tol) {
  ASSERT_TRUE(a.sizes().equals(b.sizes())) << a.sizes() << " vs " << b.sizes();
  const auto va = vals(a), vb = vals(b);
  for (size_t i = 0; i < va.size(); ++i) {
    ASSERT_NEAR(va[i], vb[i], tol * (1 + std::fabs(vb[i]))) << "element " << i;
  }
}

// ---- the API

TEST(MemoryFormat, ContiguousChannelsLastLaysOutNhwc) {
  manual_seed(0);
  const Tensor x = randn({2, 3, 4, 5});
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_FALSE(x.is_contiguous(kCL));
  const Tensor y = x.contiguous(kCL);
  EXPECT_EQ(strides(y), (S{60, 1, 15, 3}));
  EXPECT_TRUE(y.is_contiguous(kCL));
  EXPECT_FALSE(y.is_contiguous());
  EXPECT_EQ(y.suggest_memory_format(), kCL);
  EXPECT_EQ(vals(y), vals(x));  // same logical values
  // The NHWC element order in memory: y[n, c, h, w] at n*60 + h*15 + w*3 + c.
  const float* p = y.data_ptr<float>();
  EXPECT_EQ(p[1 * 60 + 2 * 15 + 3 * 3 + 1], x.index({1, 1, 2, 3}).item<float>());
  // Already channels-last: the same tensor; back to NCHW: a contiguous copy.
  EXPECT_EQ(y.contiguous(kCL).data_ptr(), y.data_ptr());
  const Tensor z = y.contiguous();
  EXPECT_TRUE(z.is_contiguous());
  EXPECT_EQ(vals(z), vals(x));
  // flatten/reshape copy a channels-last tensor into NCHW order; view refuses it.
  EXPECT_EQ(vals(y.reshape({2, -1})), vals(x.reshape({2, -1})));
  EXPECT_THAT(error_of([&] { (void)y.view({2, -1}); }),
              ::testing::HasSubstr("view: size [2, -1] is not compatible with the input's shape "
                                   "[2, 3, 4, 5] and strides [60, 1, 15, 3]"));
  // A permuted NHWC block is channels-last without a copy.
  const Tensor nhwc = randn({2, 4, 5, 3}).permute({0, 3, 1, 2});
  EXPECT_EQ(nhwc.suggest_memory_format(), kCL);
  EXPECT_EQ(nhwc.contiguous(kCL).data_ptr(), nhwc.data_ptr());
}

TEST(MemoryFormat, OneChannelIsARestrideWithoutCopy) {
  const Tensor x = arange(2 * 1 * 3 * 4, TensorOptions(kFloat32)).reshape({2, 1, 3, 4});
  EXPECT_TRUE(x.is_contiguous(kCL));  // size-1 dims' strides do not matter
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  const Tensor y = x.contiguous(kCL);
  EXPECT_EQ(y.data_ptr(), x.data_ptr());
  EXPECT_EQ(strides(y), (S{12, 1, 4, 1}));
  EXPECT_EQ(y.suggest_memory_format(), kCL);
  EXPECT_EQ(vals(y), vals(x));
}

TEST(MemoryFormat, ChannelsLastNeedsFourDims) {
  const Tensor x = zeros({2, 3, 4});
  EXPECT_FALSE(x.is_contiguous(kCL));
  EXPECT_EQ(x.suggest_memory_format(), MemoryFormat::Contiguous);
  EXPECT_EQ(error_of([&] { (void)x.contiguous(kCL); }),
            "contiguous: channels_last needs a 4-d tensor [N, C, H, W], but got shape [2, 3, 4]");
}

TEST(MemoryFormat, ContiguousIsDifferentiable) {
  manual_seed(1);
  const Tensor x = randn({2, 3, 2, 2}).requires_grad_();
  const Tensor w = randn({2, 3, 2, 2});
  (x.contiguous(kCL) * w).sum().backward();
  EXPECT_EQ(vals(x.grad()), vals(w));
  // The restride of a one-channel tensor too.
  const Tensor x1 = randn({2, 1, 2, 2}).requires_grad_();
  (x1.contiguous(kCL) * 3.0).sum().backward();
  EXPECT_EQ(vals(x1.grad()), std::vector<double>(8, 3.0));
  // That restride is a view: an in-place write to it would change `b` behind autograd's back,
  // so it is refused, as for any view of a tensor that requires grad.
  const Tensor b = x1 * 1.0;
  Tensor c = b.contiguous(kCL);
  EXPECT_EQ(c.data_ptr(), b.data_ptr());
  EXPECT_EQ(error_of([&] { c.mul_(2.0); }),
            "mul_: in-place operation on a view of a tensor that requires grad is not "
            "supported; clone() the view first");
}

TEST(MemoryFormat, CopiesAndLikeFormsKeepChannelsLast) {
  manual_seed(3);
  const Tensor x = randn({2, 3, 4, 5});
  const Tensor y = x.contiguous(kCL);
  // clone(), to(dtype) and to(device, copy) keep the layout and the values (preserve_format).
  const Tensor c = y.clone();
  EXPECT_TRUE(is_cl(c));
  EXPECT_NE(c.data_ptr(), y.data_ptr());
  EXPECT_EQ(vals(c), vals(x));
  const Tensor d = y.to(kFloat64);
  EXPECT_TRUE(is_cl(d));
  EXPECT_EQ(strides(d), (S{60, 1, 15, 3}));
  EXPECT_EQ(vals(d), vals(x));
  EXPECT_TRUE(is_cl(y.to(kCPU, /*non_blocking=*/false, /*copy=*/true)));
  // The *_like forms too, with the values each promises.
  EXPECT_TRUE(is_cl(empty_like(y)));
  const Tensor z = zeros_like(y), o = ones_like(y, TensorOptions(kFloat64));
  const Tensor f = full_like(y, 2.5);
  EXPECT_TRUE(is_cl(z) && is_cl(o) && is_cl(f));
  EXPECT_EQ(vals(z), std::vector<double>(120, 0.0));
  EXPECT_EQ(vals(o), std::vector<double>(120, 1.0));
  EXPECT_EQ(o.dtype(), kFloat64);
  EXPECT_EQ(vals(f), std::vector<double>(120, 2.5));
  // Random *_like forms draw in logical order: the same numbers as for a contiguous tensor.
  manual_seed(4);
  const Tensor r = randn_like(y);
  manual_seed(4);
  const Tensor rc = randn_like(x);
  EXPECT_TRUE(is_cl(r));
  EXPECT_TRUE(rc.is_contiguous());
  EXPECT_EQ(vals(r), vals(rc));
  EXPECT_TRUE(is_cl(rand_like(y)));
  // contiguous() still gives NCHW, and gradients flow through clone() of a channels-last leaf.
  EXPECT_TRUE(c.contiguous().is_contiguous());
  const Tensor leaf = x.contiguous(kCL).detach().requires_grad_();
  (leaf.clone() * 3.0).sum().backward();
  EXPECT_EQ(vals(leaf.grad()), std::vector<double>(120, 3.0));
  // Any other strided input (a transpose) gives contiguous copies, as before.
  const Tensor t = randn({4, 3}).t();
  EXPECT_TRUE(t.clone().is_contiguous());
  EXPECT_TRUE(zeros_like(t).is_contiguous());
  EXPECT_TRUE(t.to(kFloat64).is_contiguous());
}

TEST(MemoryFormat, LeafGradientsAreChannelsLastOrContiguous) {
  manual_seed(6);
  // Runs (leaf * w).sum().backward() (the gradient: w's values, laid out like w) and tells
  // whether the engine kept the incoming gradient's block (seen by a hook) as .grad rather than
  // copying it.
  auto grad_of = [](const Tensor& leaf, const Tensor& w, bool& kept) {
    const void* seen = nullptr;
    leaf.register_hook([&](const Tensor& g) { seen = g.data_ptr(); });
    (leaf * w).sum().backward();
    kept = leaf.grad().data_ptr() == seen;
    return leaf.grad();
  };
  bool kept = false;
  // A transposed leaf: the (contiguous) incoming gradient is kept as it is, no copy.
  const Tensor t = randn({3, 4}).t().detach().requires_grad_();
  const Tensor wt = randn({4, 3});
  Tensor g = grad_of(t, wt, kept);
  EXPECT_TRUE(kept);
  EXPECT_TRUE(g.is_contiguous());
  EXPECT_EQ(vals(g), vals(wt));
  // A channels-last leaf and a channels-last gradient: kept too.
  const Tensor c = randn({2, 3, 2, 2}).contiguous(kCL).detach().requires_grad_();
  const Tensor wc = randn({2, 3, 2, 2}).contiguous(kCL);
  g = grad_of(c, wc, kept);
  EXPECT_TRUE(kept);
  EXPECT_TRUE(is_cl(g));
  EXPECT_EQ(vals(g), vals(wc));
  // A contiguous gradient for a channels-last leaf is copied into the leaf's layout.
  const Tensor c2 = randn({2, 3, 2, 2}).contiguous(kCL).detach().requires_grad_();
  (c2.contiguous() * 2.0).sum().backward();
  EXPECT_TRUE(is_cl(c2.grad()));
  EXPECT_EQ(vals(c2.grad()), std::vector<double>(24, 2.0));
}

TEST(MemoryFormat, Conv1dOfATransposedInputIsContiguous) {
  // [N, L, C] transposed to [N, C, L] looks channels-last once unsqueezed to 4-d; conv1d still
  // returns a contiguous [N, O, L] (so view works) with the values of the contiguous input.
  manual_seed(5);
  const Tensor nlc = randn({2, 8, 3}), w = randn({4, 3, 1});
  const Tensor y = conv1d(nlc.transpose(1, 2), w);
  EXPECT_TRUE(y.is_contiguous());
  const Tensor ref = conv1d(nlc.transpose(1, 2).contiguous(), w);
  EXPECT_EQ(vals(y.view({2, -1})), vals(ref.view({2, -1})));
}

// ---- elementwise ops keep the layout

TEST(MemoryFormat, ElementwiseResultsStayChannelsLast) {
  manual_seed(2);
  const Tensor a = randn({2, 3, 4, 5}), b = randn({2, 3, 4, 5});
  const Tensor bias = randn({1, 3, 1, 1});
  const Tensor ac = a.contiguous(kCL), bc = b.contiguous(kCL);
  const Tensor r = relu(ac);
  EXPECT_TRUE(is_cl(r));
  EXPECT_EQ(vals(r), vals(relu(a)));
  const Tensor s = ac + bc;
  EXPECT_TRUE(is_cl(s));
  EXPECT_EQ(vals(s), vals(a + b));
  const Tensor t = ac + bias;  // broadcast against a per-channel vector
  EXPECT_TRUE(is_cl(t));
  EXPECT_EQ(vals(t), vals(a + bias));
  const Tensor u = a * bc;  // mixed layouts: values right, laid out like the channels-last one
  EXPECT_TRUE(is_cl(u));
  EXPECT_EQ(vals(u), vals(a * b));
  const Tensor e = ones({1, 1, 1, 1}).expand({2, 3, 4, 5}) * bc;  // expanded, then channels-last
  EXPECT_TRUE(is_cl(e));
  EXPECT_EQ(vals(e), vals(b));
  Tensor v = ac.clone().contiguous(kCL);
  v.mul_(2.0).add_(b);
  EXPECT_TRUE(is_cl(v));
  EXPECT_EQ(vals(v), vals(a * 2.0 + b));
  // A transposed (non-channels-last) operand still gives a contiguous result.
  const Tensor m = randn({4, 3});
  EXPECT_TRUE((m.t() + 1.0).is_contiguous());
}

// ---- conv2d, max_pool2d, batch_norm: channels-last against NCHW

struct ConvCase {
  int64_t n, c, h, w, o, k, stride, pad, groups;
  bool relu;
};

class ConvChannelsLast : public ::testing::TestWithParam<ConvCase> {};

TEST_P(ConvChannelsLast, MatchesNchwWithGradients) {
  const ConvCase p = GetParam();
  for (DType dt : {kFloat32, kFloat64}) {  // float64 runs the reference loops on NCHW copies
    manual_seed(3);
    const Tensor x0 = randn({p.n, p.c, p.h, p.w}, TensorOptions(dt));
    const Tensor w0 = randn({p.o, p.c / p.groups, p.k, p.k}, TensorOptions(dt));
    const Tensor b0 = randn({p.o}, TensorOptions(dt));
    std::vector<Tensor> out, gx, gw, gb;
    for (bool cl : {false, true}) {
      Tensor x = (cl ? x0.contiguous(kCL) : x0.clone()).detach().requires_grad_();
      Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
      Tensor y = p.relu ? conv2d_relu(x, w, b, {p.stride}, {p.pad}, {1}, p.groups)
                        : conv2d(x, w, b, {p.stride}, {p.pad}, {1}, p.groups);
      EXPECT_EQ(is_cl(y), cl && y.size(2) * y.size(3) > 1);
      const Tensor g = cos(arange(y.numel(), TensorOptions(dt))).reshape(y.sizes());
      (y * g).sum().backward();
      // The gradient is laid out like its leaf (for one channel, a restrided NCHW block).
      if (cl) {
        EXPECT_EQ(x.grad().suggest_memory_format(), kCL);
      }
      out.push_back(y);
      gx.push_back(x.grad());
      gw.push_back(w.grad());
      gb.push_back(b.grad());
    }
    const double tol = dt == kFloat32 ? 1e-5 : 1e-12;
    expect_near(out[1], out[0], tol);
    expect_near(gx[1], gx[0], tol);
    expect_near(gw[1], gw[0], tol);
    expect_near(gb[1], gb[0], tol);
  }
}

INSTANTIATE_TEST_SUITE_P(Cases, ConvChannelsLast,
                         ::testing::Values(ConvCase{2, 3, 8, 7, 4, 3, 1, 1, 1, false},
                                           ConvCase{2, 8, 9, 9, 16, 5, 2, 2, 1, true},
                                           ConvCase{3, 1, 12, 12, 8, 5, 1, 2, 1, true},
                                           ConvCase{2, 4, 6, 6, 6, 3, 1, 1, 2, false},
                                           ConvCase{2, 16, 5, 5, 32, 1, 1, 0, 1, false}));

TEST(MemoryFormat, MaxPoolChannelsLastMatchesNchw) {
  manual_seed(4);
  // bfloat16 too: its output stays channels-last (before, it fell back to NCHW, and every later
  // layer of a bfloat16 network with it), its gradient summed in float32 in both layouts.
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    // 2x2/2 (LeNet) and 3x3/2 with padding (the ResNet stem: windows clipped at the borders).
    for (auto [k, s, pd] : {std::tuple{2, 2, 0}, std::tuple{3, 2, 1}}) {
      const Tensor x0 = randn({2, 5, 7, 6}, TensorOptions(dt));
      std::vector<Tensor> y, idx, gx;
      for (bool cl : {false, true}) {
        Tensor x = (cl ? x0.contiguous(kCL) : x0.clone()).detach().requires_grad_();
        auto [o, i] = max_pool2d_with_indices(x, {k}, {s}, {pd});
        EXPECT_EQ(is_cl(o), cl);
        EXPECT_EQ(is_cl(i), cl);
        const Tensor g = sin(arange(o.numel(), TensorOptions(dt))).reshape(o.sizes());
        (o * g).sum().backward();
        EXPECT_EQ(is_cl(x.grad()), cl);
        y.push_back(o);
        idx.push_back(i);
        gx.push_back(x.grad());
      }
      EXPECT_EQ(vals(y[1]), vals(y[0]));
      EXPECT_EQ(vals(idx[1]), vals(idx[0]));  // plane offsets h * W + w in both layouts
      EXPECT_EQ(vals(gx[1]), vals(gx[0]));
    }
  }
  // Ties go to the first position in row-major order, NaN is taken, as in NCHW.
  Tensor t = tensor(std::vector<float>{1, 1, 1, 1, 2, NAN, 2, 0}).reshape({1, 2, 2, 2});
  auto [o, i] = max_pool2d_with_indices(t.contiguous(kCL), {2});
  auto [on, in] = max_pool2d_with_indices(t, {2});
  EXPECT_EQ(vals(i), vals(in));
  EXPECT_EQ(vals(i), (std::vector<double>{0, 1}));
  EXPECT_TRUE(std::isnan(vals(o)[1]));
}

TEST(MemoryFormat, BatchNormChannelsLastMatchesNchw) {
  manual_seed(5);
  for (DType dt : {kFloat32, kFloat64}) {
    // 600 rows of channels: more than one chunk of the per-channel sums.
    const Tensor x0 = randn({3, 6, 10, 20}, TensorOptions(dt)) * 2.0 + 0.5;
    const Tensor w0 = randn({6}, TensorOptions(dt)), b0 = randn({6}, TensorOptions(dt));
    for (bool training : {true, false}) {
      std::vector<Tensor> y, gx, gw, gb, rm, rv;
      for (bool cl : {false, true}) {
        Tensor x = (cl ? x0.contiguous(kCL) : x0.clone()).detach().requires_grad_();
        Tensor w = w0.clone().requires_grad_(), b = b0.clone().requires_grad_();
        Tensor m = zeros({6}, TensorOptions(dt)) + 0.1, v = ones({6}, TensorOptions(dt)) * 1.5;
        Tensor o = batch_norm(x, m, v, w, b, training, 0.1, 1e-5);
        EXPECT_EQ(is_cl(o), cl);
        const Tensor g = cos(arange(o.numel(), TensorOptions(dt))).reshape(o.sizes());
        (o * g).sum().backward();
        EXPECT_EQ(is_cl(x.grad()), cl);
        y.push_back(o);
        gx.push_back(x.grad());
        gw.push_back(w.grad());
        gb.push_back(b.grad());
        rm.push_back(m);
        rv.push_back(v);
      }
      const double tol = dt == kFloat32 ? 2e-5 : 1e-12;
      expect_near(y[1], y[0], tol);
      expect_near(gx[1], gx[0], tol);
      expect_near(gw[1], gw[0], tol);
      expect_near(gb[1], gb[0], tol);
      expect_near(rm[1], rm[0], tol);
      expect_near(rv[1], rv[0], tol);
    }
  }
}

// ---- whole models: a channels-last input gives the NCHW loss and gradients

TEST(MemoryFormat, ZooModelsTrainTheSameChannelsLast) {
  struct M {
    const char* name;
    models::ModelConfig cfg;
  };
  for (const M& m : {M{"lenet", {1, 28, 10}}, M{"resnet18", {3, 32, 10}},
                     M{"vgg11_bn", {3, 32, 10}}}) {
    SCOPED_TRACE(m.name);
    manual_seed(6);
    auto model = models::create(m.name, m.cfg);
    model->train();
    const Tensor x = randn({3, m.cfg.in_channels, m.cfg.image_size, m.cfg.image_size});
    const Tensor y = tensor(std::vector<int64_t>{1, 7, 3});
    double loss[2];
    std::vector<Tensor> grads[2];
    for (int cl = 0; cl < 2; ++cl) {
      manual_seed(7);  // the same dropout masks
      model->zero_grad();
      Tensor l = nn::functional::cross_entropy(
          model->forward(cl ? x.contiguous(kCL) : x), y);
      l.backward();
      loss[cl] = l.item<double>();
      for (const Tensor& p : model->parameters()) grads[cl].push_back(p.grad().clone());
    }
    EXPECT_NEAR(loss[1], loss[0], 1e-5);
    // Per parameter, the mean difference against the mean gradient: float32 sums in another
    // order can flip a ReLU whose input is within rounding of 0, and through batch norm's
    // statistics that moves the earlier gradients by ~2e-3 of their scale (in either layout,
    // measured against float64); a layout mix-up moves them by their scale. (Conv biases ahead
    // of batch norm have gradients near 0: the absolute floor.)
    for (size_t i = 0; i < grads[0].size(); ++i) {
      const double scale = grads[0][i].abs().mean().item<double>();
      EXPECT_LE((grads[1][i] - grads[0][i]).abs().mean().item<double>(), 2e-2 * scale + 1e-6)
          << "parameter " << i;
    }
  }
}

// fit / evaluate with memory_format = ChannelsLast: the same losses and accuracy as NCHW.
TEST(MemoryFormat, FitChannelsLastTrainsLikeContiguous) {
  manual_seed(8);
  const Tensor x = randn({96, 1, 12, 12});
  const Tensor y = randint(0, 3, {96});
  auto ds = std::make_shared<data::TensorDataset>(x, y);
  auto loss = [](const Tensor& o, const Tensor& t) { return nn::functional::cross_entropy(o, t); };
  std::vector<train::History> h;
  for (MemoryFormat f : {MemoryFormat::Contiguous, kCL}) {
    manual_seed(9);
    auto model = models::create("lenet", {1, 12, 3});
    optim::SGD opt(model->parameters(), optim::SGDOptions(0.05).momentum(0.9));
    data::DataLoader train(ds, {.batch_size = 16, .shuffle = true, .seed = 1});
    data::DataLoader val(ds, {.batch_size = 32});
    h.push_back(train::fit(*model, loss, opt, train, &val, {.epochs = 2, .memory_format = f}));
  }
  ASSERT_EQ(h[0].val.size(), 2u);
  ASSERT_EQ(h[1].val.size(), 2u);
  for (size_t e = 0; e < 2; ++e) {
    EXPECT_NEAR(h[1].train[e].loss, h[0].train[e].loss, 1e-4);
    EXPECT_NEAR(h[1].val[e].loss, h[0].val[e].loss, 1e-4);
    EXPECT_EQ(h[1].val[e].accuracy, h[0].val[e].accuracy);
  }
}

}  // namespace
}  // namespace ignis
