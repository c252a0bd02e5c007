// bfloat16 products and convolutions on the CPU: on CPUs with native bfloat16 (AVX512-BF16, AMX)
// they run oneDNN's bfloat16 primitives; elsewhere (and with the native path turned off) they
// compute on float32 copies. Both accumulate in float32 and round once, so they agree to a
// bfloat16 rounding; both are checked against float64.
#include <gtest/gtest.h>

#include <cmath>
#include <sstream>
#include <string>

#include "cpu/onednn_util.h"
#include "ignis/ignis.h"
#include "ops/conv.h"
#include "test_util.h"

namespace ignis {
namespace {

namespace onednn = cpu::onednn;

/// Runs f with the native bfloat16 path on (when the CPU has it) or off.
template <class F>
auto with_native(bool on, F&& f) {
  const bool before = onednn::set_native_bf16_enabled(on);
  auto r = f();
  onednn::set_native_bf16_enabled(before);
  return r;
}

/// Checks a bfloat16 result against its float64 value `want`: within two bfloat16 roundings of
/// |want| plus float32 accumulation error on `scale` (the sum of |products| per element).
void expect_bf16_close(const Tensor& got, const Tensor& want, const Tensor& scale,
                       const std::string& what) {
  ASSERT_EQ(got.dtype(), kBFloat16) << what;
  ASSERT_EQ(got.sizes(), want.sizes()) << what;
  const std::vector<double> g = vals(got), w = vals(want), s = vals(scale);
  for (size_t i = 0; i < g.size(); ++i) {
    const double tol = std::ldexp(std::abs(w[i]), -7) + 1e-5 * s[i] + 1e-30;
    ASSERT_NEAR(g[i], w[i], tol) << what << " at " << i;
  }
}

/// The CPU's native bfloat16, or a skip saying it has none.
#define REQUIRE_NATIVE_BF16()                                                               \
  if (!onednn::native_bf16())                                                               \
  GTEST_SKIP() << "this CPU has no native bfloat16 (AVX512-BF16 or AMX): bfloat16 runs on " \
                  "float32 copies, which the other bfloat16 tests check"

enum class Layout { kContiguous, kTransposed, kStrided };

Tensor matrix(int64_t r, int64_t c, Layout l) {
  switch (l) {
    case Layout::kContiguous: return randn({r, c}).to(kBFloat16);
    case Layout::kTransposed: return randn({c, r}).to(kBFloat16).t();
    default: return randn({r, 2 * c}).to(kBFloat16).slice(1, 0, std::nullopt, 2);
  }
}

TEST(NativeBFloat16, ProductsMatchFloat64OnBothPaths) {
  manual_seed(3);
  for (int64_t M : {1, 4, 37}) {
    for (int64_t K : {1, 64, 129}) {
      for (Layout la : {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
        for (Layout lb : {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
          const Tensor a = matrix(M, K, la), b = matrix(K, 23, lb);
          const Tensor want = mm(a.to(kFloat64), b.to(kFloat64));
          const Tensor scale = mm(a.to(kFloat64).abs(), b.to(kFloat64).abs());
          const std::string what = "M=" + std::to_string(M) + " K=" + std::to_string(K) +
                                   " layouts " + std::to_string(static_cast<int>(la)) +
                                   std::to_string(static_cast<int>(lb));
          for (bool native : {true, false}) {
            expect_bf16_close(with_native(native, [&] { return mm(a, b); }), want, scale,
                              what + (native ? " native" : " copies"));
          }
        }
      }
    }
  }
}

TEST(NativeBFloat16, BatchesBroadcastsAndScales) {
  manual_seed(5);
  const Tensor a = randn({1, 9, 40}).to(kBFloat16), b = randn({3, 40, 17}).to(kBFloat16);
  const Tensor bt = randn({3, 17, 40}).to(kBFloat16).transpose(1, 2);
  const Tensor self = randn({9, 17}).to(kBFloat16), row = randn({17}).to(kBFloat16);
  const Tensor a2 = a.squeeze(0), b2 = b.select(0, 1);
  const Tensor nan_self = full({9, 17}, NAN).to(kBFloat16);
  const Tensor w = randn({17, 40}).to(kBFloat16);
  auto f64 = [](const Tensor& t) { return t.to(kFloat64); };
  for (bool native : {true, false}) {
    const std::string path = native ? " native" : " copies";
    with_native(native, [&] {
      // a [1, 9, 40] broadcast against a batch of 3 (a batch stride of 0), B transposed.
      expect_bf16_close(matmul(a, b), matmul(f64(a), f64(b)), matmul(f64(a).abs(), f64(b).abs()),
                        "broadcast batch" + path);
      expect_bf16_close(bmm(a.expand({3, 9, 40}), bt), bmm(f64(a).expand({3, 9, 40}), f64(bt)),
                        bmm(f64(a).abs().expand({3, 9, 40}), f64(bt).abs()), "bmm" + path);
      // beta * self + alpha * a @ b, a bias row, and beta = 0 ignoring a NaN self.
      const Tensor s = matmul(f64(a2).abs(), f64(b2).abs());
      expect_bf16_close(addmm(self, a2, b2, 0.5, -2.0),
                        addmm(f64(self), f64(a2), f64(b2), 0.5, -2.0),
                        s * 2.0 + f64(self).abs() * 0.5, "addmm scales" + path);
      expect_bf16_close(addmm(row, a2, b2), addmm(f64(row), f64(a2), f64(b2)), s + f64(row).abs(),
                        "addmm row" + path);
      expect_bf16_close(addmm(nan_self, a2, b2, 0.0, 1.0), mm(f64(a2), f64(b2)), s,
                        "addmm beta 0" + path);
      expect_bf16_close(linear(a2, w, row), linear(f64(a2), f64(w), f64(row)),
                        linear(f64(a2).abs(), f64(w).abs(), f64(row).abs()), "linear" + path);
      return 0;
    });
  }
}

TEST(NativeBFloat16, ProductsRunOneDnnsBFloat16Matmul) {
  REQUIRE_NATIVE_BF16();
  manual_seed(6);
  // A shape no other test uses: its primitive is made on the first call and reused after.
  const Tensor a = randn({11, 53}).to(kBFloat16), b = randn({53, 7}).to(kBFloat16);
  const int64_t before = onednn::gemm_bf16_primitives_made();
  mm(a, b);
  EXPECT_EQ(onednn::gemm_bf16_primitives_made(), before + 1);
  mm(a, b);
  EXPECT_EQ(onednn::gemm_bf16_primitives_made(), before + 1);
  // Turned off, the product takes the float32 copies.
  with_native(false, [&] { return mm(a, b.t().contiguous().t()); });
  EXPECT_EQ(onednn::gemm_bf16_primitives_made(), before + 1);
  // Float32 never takes it.
  mm(a.to(kFloat32), b.to(kFloat32));
  EXPECT_EQ(onednn::gemm_bf16_primitives_made(), before + 1);
}

struct ConvCase {
  Shape x, w;
  int64_t stride, padding, dilation, groups;
  bool bias, channels_last;
};

TEST(NativeBFloat16, ConvolutionsAndTheirGradientsMatchFloat64OnBothPaths) {
  manual_seed(7);
  const ConvCase cases[] = {
      {{2, 16, 9, 9}, {32, 16, 3, 3}, 1, 1, 1, 1, true, false},
      {{2, 16, 9, 9}, {32, 16, 3, 3}, 2, 1, 1, 1, false, true},
      {{1, 3, 12, 10}, {8, 3, 5, 5}, 2, 2, 1, 1, true, true},
      {{2, 8, 7, 7}, {8, 4, 3, 3}, 1, 2, 2, 2, true, false},  // groups 2, dilation 2
      {{3, 32, 5, 5}, {64, 32, 1, 1}, 1, 0, 1, 1, true, true},
  };
  for (const ConvCase& c : cases) {
    std::ostringstream os;
    os << "x " << IntArrayRef(c.x) << " w " << IntArrayRef(c.w)
       << (c.channels_last ? " channels-last" : " NCHW");
    const std::string what = os.str();
    Tensor x = randn(c.x).to(kBFloat16), w = randn(c.w).to(kBFloat16);
    if (c.channels_last) x = x.contiguous(MemoryFormat::ChannelsLast);
    const Tensor b = c.bias ? randn({c.w[0]}).to(kBFloat16) : Tensor();
    auto run = [&](DType dt, bool abs_values) {
      auto cast = [&](const Tensor& t) {
        if (!t.defined()) return Tensor();
        Tensor r = t.to(dt);
        return (abs_values ? r.abs() : r).detach().requires_grad_(true);
      };
      Tensor xi = cast(x), wi = cast(w), bi = cast(b);
      Tensor y = conv2d(xi, wi, bi, {c.stride}, {c.padding}, {c.dilation}, c.groups);
      // The same (bfloat16) values in every dtype.
      Tensor gy = cos(arange(y.numel(), kFloat64).reshape(y.sizes())).to(kBFloat16).to(dt);
      if (abs_values) gy = gy.abs();
      y.backward(gy);
      return std::vector<Tensor>{y.detach(), xi.grad(), wi.grad(), c.bias ? bi.grad() : Tensor()};
    };
    const std::vector<Tensor> want = run(kFloat64, false), scale = run(kFloat64, true);
    for (bool native : {true, false}) {
      const std::vector<Tensor> got = with_native(native, [&] { return run(kBFloat16, false); });
      const char* names[] = {"output", "input grad", "weight grad", "bias grad"};
      for (size_t k = 0; k < 4; ++k) {
        if (!want[k].defined()) continue;
        expect_bf16_close(got[k], want[k], scale[k],
                          what + " " + names[k] + (native ? " native" : " copies"));
      }
      EXPECT_EQ(got[0].is_contiguous(MemoryFormat::ChannelsLast), c.channels_last) << what;
    }
  }
}

TEST(NativeBFloat16, ConvolutionsRunOneDnnsBFloat16Primitives) {
  REQUIRE_NATIVE_BF16();
  manual_seed(8);
  const Tensor x = randn({1, 5, 11, 13}).to(kBFloat16), w = randn({6, 5, 3, 3}).to(kBFloat16);
  const int64_t before = conv_primitive_cache_stats().misses;
  conv2d(x, w);
  EXPECT_EQ(conv_primitive_cache_stats().misses, before + 1);
  with_native(false, [&] { return conv2d(x, w, {}, {2}); });  // float32 copies: a float32 primitive
  const int64_t after = conv_primitive_cache_stats().misses;
  conv2d(x.to(kFloat32), w.to(kFloat32), {}, {2});  // the same float32 primitive: a hit
  EXPECT_EQ(conv_primitive_cache_stats().misses, after);
}

// Graph mode's fused nodes in bfloat16: the convolution or product, its residual and its
// activation in one oneDNN primitive, rounded once. The values make the rounding visible: every
// output is 1 + 2^-8 (a tie between two bfloat16 values) before the residual 2^-8 is added. The
// ops one by one round it to 1 (to even), then 1 + 2^-8 to 1 again; the fused node gives 1 + 2^-7.
constexpr double kTie = 1.0 + 1.0 / 256, kOnce = 1.0 + 1.0 / 128;

/// x [1, 16, 4, 4] channels-last with channels 0 and 1 all ones; w [16, 16, 1, 1] with
/// w[o][0] = 1 and w[o][1] = 2^-8: the convolution is 1 + 2^-8 everywhere.
std::pair<Tensor, Tensor> tie_conv() {
  Tensor x = zeros({1, 16, 4, 4}, kBFloat16).contiguous(MemoryFormat::ChannelsLast);
  x.narrow(1, 0, 2).fill_(1.0);
  Tensor w = zeros({16, 16, 1, 1}, kBFloat16);
  w.select(1, 0).fill_(1.0);
  w.select(1, 1).fill_(1.0 / 256);
  return {x, w};
}

void expect_all(const Tensor& t, double v, const std::string& what) {
  for (double e : vals(t)) ASSERT_EQ(e, v) << what;
}

TEST(NativeBFloat16, FusedConvolutionsAndProductsRoundOnce) {
  REQUIRE_NATIVE_BF16();
  auto [x, w] = tie_conv();
  const Tensor r = full({1, 16, 4, 4}, 1.0 / 256, kBFloat16);
  NoGradGuard ng;
  expect_all(conv2d_add_relu(x, w, Tensor(), r), kOnce, "conv2d_add_relu");
  expect_all(relu(conv2d(x, w) + r), 1.0, "the ops one by one");
  expect_all(jit::conv2d_pointwise(x, w, Tensor(), r, {1}, {0}, {1}, 1, "relu", true), kOnce,
             "conv2d_pointwise");
  // linear_pointwise on 8 rows (the composite runs below 8).
  Tensor a = zeros({8, 16}, kBFloat16), wl = zeros({16, 16}, kBFloat16);
  a.narrow(1, 0, 2).fill_(1.0);
  wl.select(1, 0).fill_(1.0);
  wl.select(1, 1).fill_(1.0 / 256);
  const Tensor rl = full({8, 16}, 1.0 / 256, kBFloat16);
  expect_all(jit::linear_pointwise(a, wl, Tensor(), rl, "none", true), kOnce, "linear_pointwise");
  expect_all(linear(a, wl) + rl, 1.0, "linear, add");
}

TEST(NativeBFloat16, FrozenGraphsPackTheirBFloat16Weights) {
  auto [x, w] = tie_conv();
  const Tensor r = full({1, 16, 4, 4}, 1.0 / 256, kBFloat16);
  NoGradGuard ng;
  // The weight is a constant of the graph: the executor packs it on its first run.
  auto g = std::make_shared<jit::Graph>(jit::trace(
      [&](const TensorList& in) {
        return TensorList{conv2d_add_relu(in[0], w, Tensor(), r, {1}, {0})};
      },
      {x}));
  ASSERT_EQ(g->count("conv2d_add_relu"), 1);
  jit::Executor ex(g);
  const double fused = onednn::native_bf16() ? kOnce : 1.0;
  for (int run = 0; run < 3; ++run) expect_all(ex.run({x})[0], fused, "run " + std::to_string(run));
  // A write into the weight (its version changes): the next run packs it again. The convolution
  // is now 1, plus the residual 2^-8: a tie, rounded to 1 by either path.
  w.select(1, 1).zero_();
  expect_all(ex.run({x})[0], 1.0, "after a write into the weight");
  w.select(1, 1).fill_(1.0 / 256);
  expect_all(ex.run({x})[0], fused, "after writing it back");
}

}  // namespace
}  // namespace ignis
