// Saved-tensor hooks (torch.autograd.graph.saved_tensors_hooks): every tensor saved for backward
// goes through pack and comes back through unpack with its history, so first and second
// derivatives equal the hook-free ones; misbehaving hooks are errors naming the fault.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using autograd::variable_list;
using autograd::graph::SavedTensorsHooks;
using autograd::graph::SaveOnCpu;
using ::testing::HasSubstr;

namespace {

// Hooks that keep a float64 copy of each saved tensor and count the calls.
struct CountingHooks {
  int packs = 0, unpacks = 0;
  std::vector<std::vector<int64_t>> shapes;
  SavedTensorsHooks install() {
    return SavedTensorsHooks(
        [this](const Tensor& t) -> std::any {
          ++packs;
          shapes.push_back(t.sizes().vec());
          EXPECT_FALSE(is_grad_enabled()) << "pack runs with grad mode off";
          EXPECT_EQ(t.grad_fn(), nullptr) << "pack gets the tensor without history";
          return std::make_pair(t.to(kFloat64, false, true), t.dtype());
        },
        [this](const std::any& p) {
          ++unpacks;
          const auto& [copy, dtype] = std::any_cast<const std::pair<Tensor, DType>&>(p);
          return copy.to(dtype);
        });
  }
};

}  // namespace

TEST(SavedTensorsHooks, EverySavedTensorIsPackedAndUnpackedOnce) {
  Tensor a = tensor({1.5, -2.0, 0.5}).requires_grad_(true);
  Tensor b = tensor({3.0, 0.25, -1.0}).requires_grad_(true);
  CountingHooks h;
  Tensor y;
  {
    auto guard = h.install();
    y = (a * b).exp().sum();  // mul saves a and b; exp saves its output
  }
  EXPECT_EQ(h.packs, 3);
  EXPECT_EQ(h.unpacks, 0);
  y.backward();
  EXPECT_EQ(h.unpacks, 3);
  const Tensor e = (a.detach() * b.detach()).exp();
  EXPECT_TRUE(allclose(a.grad(), e * b.detach(), 1e-6, 1e-6));
  EXPECT_TRUE(allclose(b.grad(), e * a.detach(), 1e-6, 1e-6));
  // Outside the guard nothing is packed.
  (a * b).sum().backward();
  EXPECT_EQ(h.packs, 3);
}

TEST(SavedTensorsHooks, SecondDerivativesFlowThroughUnpackedTensors) {
  // d/dx (x^3 w) = 3 x^2 w, d2/dx2 = 6 x w: the unpacked x must carry x's history (a leaf) and
  // the unpacked product its producer's, or the second derivative would be lost.
  Tensor x = tensor({0.5, -1.25, 2.0}, kFloat64).requires_grad_(true);
  Tensor w = tensor({2.0, 3.0, -1.0}, kFloat64).requires_grad_(true);
  CountingHooks h;
  Tensor y;
  {
    auto guard = h.install();
    Tensor h1 = (x * 1.0).sin();  // a non-leaf input saved by the next mul
    y = (x * x * h1 * w).sum();
  }
  Tensor gx = autograd::grad({y}, {x}, {}, std::nullopt, /*create_graph=*/true)[0];
  Tensor ggx = autograd::grad({gx.sum()}, {x})[0];
  // The same without hooks.
  Tensor h1 = (x * 1.0).sin();
  Tensor y2 = (x * x * h1 * w).sum();
  Tensor gx2 = autograd::grad({y2}, {x}, {}, std::nullopt, true)[0];
  Tensor ggx2 = autograd::grad({gx2.sum()}, {x})[0];
  EXPECT_TRUE(allclose(gx.detach(), gx2.detach(), 1e-12, 1e-12));
  EXPECT_TRUE(allclose(ggx, ggx2, 1e-12, 1e-12));
  EXPECT_GT(h.packs, 0);
  // gradgradcheck with every saved tensor going through hooks.
  // (Hooks that outlive fn's scope with the graph: they capture nothing of it.)
  auto fn = [](const variable_list& in) {
    SavedTensorsHooks guard(
        [](const Tensor& t) -> std::any {
          return std::make_pair(t.to(kFloat64, false, true), t.dtype());
        },
        [](const std::any& p) {
          const auto& [copy, dtype] = std::any_cast<const std::pair<Tensor, DType>&>(p);
          return copy.to(dtype);
        });
    return variable_list{(in[0] * in[0] * in[1]).tanh() / (in[1] * in[1] + 1)};
  };
  EXPECT_TRUE(autograd::gradcheck(fn, {x, w}));
  EXPECT_TRUE(autograd::gradgradcheck(fn, {x, w}));
}

TEST(SavedTensorsHooks, GuardsNestAndCustomFunctionsArePacked) {
  struct Square : autograd::Function<Square> {
    static Tensor forward(autograd::AutogradContext* ctx, const Tensor& x) {
      ctx->save_for_backward({x});
      return x * x;
    }
    static variable_list backward(autograd::AutogradContext* ctx, variable_list g) {
      return {2 * ctx->get_saved_variables()[0] * g[0]};
    }
  };
  Tensor x = tensor({3.0, -1.0}).requires_grad_(true);
  CountingHooks outer, inner;
  Tensor y;
  {
    auto g1 = outer.install();
    Tensor a = x.exp();  // outer
    {
      auto g2 = inner.install();
      y = Square::apply(a);  // inner: the custom function's save_for_backward
    }
    y = y.sum();  // saves nothing
  }
  EXPECT_EQ(outer.packs, 1);
  EXPECT_EQ(inner.packs, 1);
  y.backward();
  EXPECT_EQ(outer.unpacks, 1);
  EXPECT_EQ(inner.unpacks, 1);
  EXPECT_TRUE(allclose(x.grad(), 2 * x.detach().exp() * x.detach().exp(), 1e-5, 1e-5));
}

TEST(SavedTensorsHooks, SaveOnCpuKeepsCpuTensorsAsTheyAre) {
  Tensor x = randn({4, 5}).requires_grad_(true);
  Tensor w = randn({3, 5}).requires_grad_(true);
  Tensor y;
  {
    SaveOnCpu offload(/*pin_memory=*/false);
    y = linear(x, w).relu().sum();
  }
  y.backward();
  Tensor gx = x.grad().clone(), gw = w.grad().clone();
  x.set_grad(Tensor());
  w.set_grad(Tensor());
  linear(x, w).relu().sum().backward();
  EXPECT_TRUE(allclose(gx, x.grad(), 0, 0));
  EXPECT_TRUE(allclose(gw, w.grad(), 0, 0));
}

TEST(SavedTensorsHooks, InPlaceChangesAfterSavingAreStillCaught) {
  // Hooks do not widen what autograd accepts: the saved storage still lives and was written.
  Tensor x = tensor({1.0, 2.0}).requires_grad_(true);
  Tensor h = x * 1;
  Tensor y;
  {
    SaveOnCpu offload;
    y = (h * h).sum();
  }
  h.add_(1);
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("has been modified by an in-place operation"));
}

TEST(SavedTensorsHooks, MisbehavingHooksAreErrors) {
  Tensor x = tensor({1.0, 2.0, 3.0}).requires_grad_(true);
  EXPECT_THAT(
      error_of([] { SavedTensorsHooks h(nullptr, [](const std::any&) { return Tensor(); }); }),
      HasSubstr("saved_tensors_hooks: both the pack and the unpack hook must be set"));
  {
    SavedTensorsHooks writes([](const Tensor& t) -> std::any { return t.mul_(2); },
                             [](const std::any& p) { return std::any_cast<Tensor>(p); });
    EXPECT_THAT(error_of([&] { x.exp(); }),
                HasSubstr("saved_tensors_hooks: the pack hook modified the tensor it was given "
                          "in place (a float32 tensor of shape [3])"));
  }
  Tensor y;
  {
    SavedTensorsHooks shrinks([](const Tensor& t) -> std::any { return t.narrow(0, 0, 2); },
                              [](const std::any& p) { return std::any_cast<Tensor>(p); });
    y = x.exp().sum();
  }
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("saved_tensors_hooks: the unpack hook returned a float32 tensor of shape "
                        "[2] on cpu at ExpBackward0 but a float32 tensor of shape [3] on cpu was "
                        "saved"));
  {
    SavedTensorsHooks drops([](const Tensor&) -> std::any { return {}; },
                            [](const std::any&) { return Tensor(); });
    y = x.exp().sum();
  }
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("saved_tensors_hooks: the unpack hook returned an undefined tensor at "
                        "ExpBackward0; expected a float32 tensor of shape [3] on cpu"));
  {
    SavedTensorsHooks retyped([](const Tensor& t) -> std::any { return t.to(kFloat64); },
                              [](const std::any& p) { return std::any_cast<Tensor>(p); });
    y = x.exp().sum();
  }
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("returned a float64 tensor of shape [3] on cpu at ExpBackward0 but a "
                        "float32 tensor"));
  // After a backward without retain_graph the packed tensors are freed, as without hooks.
  {
    SaveOnCpu offload;
    y = x.exp().sum();
  }
  y.backward();
  EXPECT_THAT(error_of([&] { y.backward(); }),
              HasSubstr("backward through the graph a second time"));
}

// The header's example: float activations kept in bfloat16, indices (max pooling's, up to 1023
// here: not all exact in bfloat16) as they are; the gradients are the plain ones within
// bfloat16's precision. Rounding the indices too would send gradients to the wrong pixels.
TEST(SavedTensorsHooks, BFloat16StorageKeepsIndicesExact) {
  manual_seed(9);
  auto conv = std::make_shared<nn::Conv2d>(3, 8, 3, 1, 1);
  const Tensor x = randn({2, 3, 32, 32});
  auto loss = [&] { return max_pool2d(conv->forward(x).relu(), 2).pow(2).sum(); };
  loss().backward();
  const Tensor plain = conv->weight.grad().clone();
  auto relative_error = [&](bool round_everything) {
    conv->zero_grad();
    Tensor l;
    {
      SavedTensorsHooks hooks(
          [round_everything](const Tensor& t) -> std::any {
            const bool round = round_everything || t.is_floating_point();
            return std::make_pair(round ? t.to(kBFloat16) : t, t.dtype());
          },
          [](const std::any& p) {
            const auto& [kept, dtype] = std::any_cast<const std::pair<Tensor, DType>&>(p);
            return kept.to(dtype);
          });
      l = loss();
    }
    l.backward();
    return ((conv->weight.grad() - plain).norm() / plain.norm()).item<double>();
  };
  EXPECT_LT(relative_error(false), 1e-2);
  EXPECT_GT(relative_error(true), 1e-1);
}
