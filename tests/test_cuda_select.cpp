// The CUDA kernels of masked_select, nonzero (src/cuda/select_kernels.cu) and interpolate's
// resampling (src/cuda/interpolate_kernels.cu), with the CPU as the oracle: every dtype, NaN,
// infinities and signed zeros, broadcast, 0-d, empty and non-contiguous operands, inputs that need
// many blocks, and gradients. Without a GPU the tests are skipped and say why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <cstring>
#include <limits>
#include <string>
#include <vector>

#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;
using ::testing::HasSubstr;

namespace {



constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<DType> kAllDTypes = {kBool,     kUInt8,   kInt32,  kInt64,
                                       kBFloat16, kFloat32, kFloat64};
const std::vector<DType> kFloatDTypes = {kBFloat16, kFloat32, kFloat64};

Tensor G(const Tensor& t) { return t.to(kGpu); }

// gpu (on the GPU) and cpu have the same shape, dtype and bytes (signed zeros and NaNs
// included): for the ops that only move or index elements.
void expect_same(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const Tensor back = gpu.cpu().contiguous();
  const Tensor ref = cpu.contiguous();
  ASSERT_EQ(back.sizes(), ref.sizes()) << what;
  ASSERT_EQ(back.dtype(), ref.dtype()) << what;
  const size_t bytes = static_cast<size_t>(ref.numel()) * element_size(ref.dtype());
  EXPECT_TRUE(bytes == 0 || std::memcmp(back.data_ptr(), ref.data_ptr(), bytes) == 0)
      << what << "\ngpu: " << back << "\ncpu: " << ref;
}


double rtol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-5 : 1e-12; }
double atol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-5 : 1e-12; }

std::string name_of(DType t) { return std::string(dtype_name(t)); }

// A [4, 5] tensor of dtype dt with zeros (and for floats -0.0, NaN, +-inf and a denormal-sized
// value) among ordinary values.
Tensor sample(DType dt) {
  if (dt == kBool) {
    return tensor(std::vector<int64_t>{0, 1, 1, 0, 1, 0, 0, 0, 1, 1, 1, 0, 1, 0, 0, 1, 0, 1, 1, 0})
        .reshape({4, 5})
        .to(kBool);
  }
  if (is_floating_point(dt)) {
    return tensor(std::vector<double>{-2.5, -0.0, 0.0, kNaN, 3.0,  kInf, 0.0,   1e-30, -kInf, 7.0,
                                      0.0,  -0.0, 4.5, 1e4,  -1.0, 0.0,  -kNaN, 2.0,   0.0,   -0.0},
                  kFloat64)
        .reshape({4, 5})
        .to(dt);
  }
  Tensor t =
      tensor(std::vector<int64_t>{-7, 0, 3, 5, 0, 9, 0, 0, -1, 2, 0, 4, 0, 0, 8, 1, 6, 0, 0, -3})
          .reshape({4, 5});
  if (dt == kUInt8) t = t.abs();
  return t.to(dt);
}

Tensor bool_mask(IntArrayRef shape, double p) { return rand(shape) < p; }

}  // namespace

// ---- masked_select

TEST(CudaSelect, MaskedSelectMatchesTheCpuForEveryDtypeAndLayout) {
  REQUIRE_GPU();
  manual_seed(1);
  for (DType dt : kAllDTypes) {
    const std::string d = name_of(dt);
    const Tensor x = sample(dt);
    const Tensor m = bool_mask({4, 5}, 0.5);
    expect_same(masked_select(G(x), G(m)), masked_select(x, m), d + ": same shape");
    expect_same(masked_select(G(x.t()), G(m.t())), masked_select(x.t(), m.t()),
                d + ": transposed operands");
    const Tensor row = bool_mask({5}, 0.5);
    expect_same(masked_select(G(x), G(row)), masked_select(x, row), d + ": mask broadcast");
    const Tensor tall = bool_mask({3, 4, 5}, 0.5);
    expect_same(masked_select(G(x.narrow(0, 1, 1)), G(tall)),
                masked_select(x.narrow(0, 1, 1), tall), d + ": input broadcast");
    const Tensor m8 = m.to(kUInt8);
    expect_same(masked_select(G(x), G(m8)), masked_select(x, m8), d + ": uint8 mask");
    const Tensor none = zeros({4, 5}, kBool), all = ones({4, 5}, kBool);
    expect_same(masked_select(G(x), G(none)), masked_select(x, none), d + ": nothing selected");
    expect_same(masked_select(G(x), G(all)), masked_select(x, all), d + ": everything selected");
    // 0-d operands: a 1-D result of 0 or 1 elements; a 0-d input broadcast against a mask.
    const Tensor s = x.flatten()[2];
    for (bool b : {true, false}) {
      const Tensor mb = scalar_tensor(b, kBool);
      expect_same(masked_select(G(s), G(mb)), masked_select(s, mb), d + ": 0-d operands");
      expect_same(masked_select(G(x), G(mb)), masked_select(x, mb), d + ": 0-d mask");
    }
    const Tensor m3 = tensor(std::vector<int64_t>{1, 0, 1}).to(kBool);
    expect_same(masked_select(G(s), G(m3)), masked_select(s, m3), d + ": 0-d input");
    const Tensor e = x.narrow(0, 0, 0);
    expect_same(masked_select(G(e), G(m.narrow(0, 0, 0))), masked_select(e, m.narrow(0, 0, 0)),
                d + ": empty");
  }
}

TEST(CudaSelect, MaskedSelectKeepsSignedZerosAndNaN) {
  REQUIRE_GPU();
  const Tensor x = tensor(std::vector<double>{-0.0, kNaN, 0.0, -kInf}, kFloat32);
  const Tensor m = ones({4}, kBool);
  const Tensor y = masked_select(G(x), G(m)).cpu();
  ASSERT_EQ(y.numel(), 4);
  EXPECT_TRUE(std::signbit(y[0].item<float>()));
  EXPECT_TRUE(std::isnan(y[1].item<float>()));
  EXPECT_FALSE(std::signbit(y[2].item<float>()));
  EXPECT_EQ(y[3].item<float>(), -std::numeric_limits<float>::infinity());
}

TEST(CudaSelect, MaskedSelectOfManyElementsKeepsTheirOrder) {
  REQUIRE_GPU();
  manual_seed(2);
  // Many blocks, and runs of kept and dropped elements longer than a block.
  const int64_t n = 3'000'001;
  const Tensor x = arange(n, kInt64);
  Tensor m = bool_mask({n}, 0.3);
  m.narrow(0, 100'000, 70'000).fill_(true);
  m.narrow(0, 500'000, 90'000).fill_(false);
  expect_same(masked_select(G(x), G(m)), masked_select(x, m), "int64, 3M elements");
  const Tensor f = randn({1500, 2001});
  const Tensor mf = f > 0.7;
  expect_same(masked_select(G(f), G(mf)), masked_select(f, mf), "float32 [1500, 2001]");
  const Tensor b = randn({1 << 20}, kBFloat16);
  const Tensor mb = bool_mask({1 << 20}, 0.9);
  expect_same(masked_select(G(b), G(mb)), masked_select(b, mb), "bfloat16, 2^20 elements");
}

TEST(CudaSelect, MaskedSelectGradientMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(3);
  const Tensor x = randn({6, 7}, kFloat64);
  const Tensor m = bool_mask({7}, 0.5);  // broadcast: each column's elements picked per row
  const Tensor cx = x.detach().requires_grad_(true), gx = G(x).detach().requires_grad_(true);
  const Tensor yc = masked_select(cx, m), yg = masked_select(gx, G(m));
  const Tensor w = randn({yc.numel()}, kFloat64);
  (yc * w).sum().backward();
  (yg * G(w)).sum().backward();
  expect_matches(gx.grad(), cx.grad(), 1e-12, 1e-12, "grad of masked_select");
  // x[mask] with a mask of x's shape is masked_select; with a mask of leading dims it goes
  // through nonzero.
  const Tensor m2 = bool_mask({6, 7}, 0.4);
  expect_same(G(x).index({G(m2)}), x.index({m2}), "x[mask]");
  const Tensor x3 = randn({6, 7, 3}, kFloat64);
  expect_same(G(x3).index({G(m2)}), x3.index({m2}), "x3[mask of leading dims]");
}

TEST(CudaSelect, MaskedSelectErrorsAreTheCpus) {
  REQUIRE_GPU();
  const Tensor x = randn({3, 4});
  const Tensor fm = ones({3, 4});
  EXPECT_EQ(error_of([&] { (void)masked_select(G(x), G(fm)); }),
            error_of([&] { (void)masked_select(x, fm); }));
  const Tensor bad = ones({5}, kBool);
  EXPECT_EQ(error_of([&] { (void)masked_select(G(x), G(bad)); }),
            error_of([&] { (void)masked_select(x, bad); }));
  EXPECT_THAT(error_of([&] {
                (void)masked_select(G(x), ones({3, 4}, kBool));
              }),
              HasSubstr("masked_select: expected all tensors on the same device"));
}

// ---- nonzero

TEST(CudaSelect, NonzeroMatchesTheCpuForEveryDtypeAndShape) {
  REQUIRE_GPU();
  for (DType dt : kAllDTypes) {
    const std::string d = name_of(dt);
    const Tensor x = sample(dt);
    expect_same(nonzero(G(x)), nonzero(x), d + ": 2-d");
    expect_same(nonzero(G(x.t())), nonzero(x.t()), d + ": transposed");
    expect_same(nonzero(G(x.flatten())), nonzero(x.flatten()), d + ": 1-d");
    const Tensor x3 = x.reshape({2, 2, 5});
    expect_same(nonzero(G(x3)), nonzero(x3), d + ": 3-d");
    const Tensor x4 = x.reshape({1, 2, 5, 2}).permute({2, 0, 3, 1});
    expect_same(nonzero(G(x4)), nonzero(x4), d + ": 4-d permuted");
    for (int64_t i : {0, 1, 2, 3}) {  // 0-d: [1, 0] or [0, 0]
      const Tensor s = x.flatten()[i];
      expect_same(nonzero(G(s)), nonzero(s), d + ": 0-d element " + std::to_string(i));
    }
    const Tensor e = x.narrow(1, 0, 0).reshape({4, 0, 3});
    expect_same(nonzero(G(e)), nonzero(e), d + ": empty");
    const Tensor z = zeros({3, 4}, dt);
    expect_same(nonzero(G(z)), nonzero(z), d + ": all zero");
  }
}

TEST(CudaSelect, NonzeroCountsNaNAndNotNegativeZero) {
  REQUIRE_GPU();
  for (DType dt : kFloatDTypes) {
    const Tensor x = tensor(std::vector<double>{0.0, -0.0, kNaN, 1.0, -kInf}, kFloat64).to(dt);
    const Tensor nz = nonzero(G(x)).cpu();
    EXPECT_TRUE(equal(nz, tensor(std::vector<int64_t>{2, 3, 4}).reshape({3, 1})))
        << name_of(dt) << ": " << nz;
    EXPECT_EQ(nonzero(G(x[1])).size(0), 0) << name_of(dt) << ": 0-d -0.0";
    EXPECT_EQ(nonzero(G(x[2])).size(0), 1) << name_of(dt) << ": 0-d NaN";
  }
}

TEST(CudaSelect, NonzeroOfManyElementsMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(4);
  const Tensor a = randn({2000, 2501}) * (rand({2000, 2501}) < 0.01).to(kFloat32);
  expect_same(nonzero(G(a)), nonzero(a), "float32 [2000, 2501], 1% nonzero");
  const Tensor b = bool_mask({5'000'003}, 0.5);
  expect_same(nonzero(G(b)), nonzero(b), "bool, 5M elements");
  const Tensor c = randint(0, 3, {64, 128, 97}, kInt32);
  expect_same(nonzero(G(c)), nonzero(c), "int32 [64, 128, 97]");
  const Tensor d = randint(0, 2, {9, 1000, 7, 11}, kUInt8);
  expect_same(nonzero(G(d.transpose(1, 3))), nonzero(d.transpose(1, 3)), "uint8 4-d transposed");
}

TEST(CudaSelect, NonzeroOfManyDimsMatchesTheCpu) {
  REQUIRE_GPU();
  // 40 dims: the coordinates are unravelled 32 dims at a time.
  std::vector<int64_t> shape(40, 1);
  shape[0] = 2;
  shape[5] = 3;
  shape[33] = 2;
  shape[39] = 3;
  const Tensor x = remainder(arange(36, kInt64), 4).reshape(shape);
  expect_same(nonzero(G(x)), nonzero(x), "40-d");
}

// Inputs of more than 2^31 elements: offsets past 2^31 are 64-bit. About 6.5 GB of GPU memory.
TEST(CudaSelect, InputsOfMoreThanTwoToThe31ElementsAreCompactedWhole) {
  REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 31) + 1000;
  const TensorOptions u8 = TensorOptions(kUInt8).device(kGpu);
  {
    const Tensor x = zeros({n}, u8);
    const std::vector<int64_t> at = {5, (int64_t{1} << 31) - 1, int64_t{1} << 31,
                                     (int64_t{1} << 31) + 17, n - 1};
    for (size_t k = 0; k < at.size(); ++k) x.narrow(0, at[k], 1).fill_(static_cast<int64_t>(k + 1));
    const Tensor nz = nonzero(x);
    EXPECT_TRUE(equal(nz.cpu(), tensor(at).reshape({5, 1}))) << nz.cpu();
    // masked_select of everything but the first 10 elements: the last 5 kept are x's last 5.
    Tensor m = ones({n}, TensorOptions(kBool).device(kGpu));
    m.narrow(0, 0, 10).fill_(false);
    x.narrow(0, n - 5, 5).copy_(G(tensor(std::vector<int64_t>{9, 8, 7, 6, 5}).to(kUInt8)));
    const Tensor y = masked_select(x, m);
    ASSERT_EQ(y.numel(), n - 10);
    EXPECT_TRUE(
        equal(y.narrow(0, n - 15, 5).cpu(), tensor(std::vector<int64_t>{9, 8, 7, 6, 5}).to(kUInt8)))
        << y.narrow(0, n - 15, 5).cpu();
    EXPECT_EQ(y.narrow(0, (int64_t{1} << 31) - 10, 1).cpu().item<int64_t>(), 3)
        << "the element at 2^31 moved to 2^31 - 10";
  }
  cuda::empty_cache();
}

// ---- interpolate's resampling

namespace {

// A [2, 3, 5, 7] input of dtype dt: random values (small integers for integer dtypes), laid
// out channels-last (not contiguous), so the front end's copy is exercised too.
Tensor image(DType dt, int64_t h = 5, int64_t w = 7) {
  const Tensor v = dt == kBool             ? (rand({2, h, w, 3}) < 0.5)
                   : is_floating_point(dt) ? randn({2, h, w, 3}, kFloat64).to(dt)
                                           : randint(0, 100, {2, h, w, 3}).to(dt);
  return v.permute({0, 3, 1, 2});
}

}  // namespace

TEST(CudaInterpolate, NearestMatchesTheCpuForEveryDtype) {
  REQUIRE_GPU();
  manual_seed(5);
  for (DType dt : kAllDTypes) {
    const std::string d = name_of(dt);
    const Tensor x = image(dt);
    for (const std::string mode : {"nearest", "nearest-exact"}) {
      for (std::vector<int64_t> size :
           {std::vector<int64_t>{9, 4}, {5, 13}, {2, 7}, {1, 1}, {17, 23}}) {
        const std::string what = d + " " + mode + " to [" + std::to_string(size[0]) + ", " +
                                 std::to_string(size[1]) + "]";
        expect_same(interpolate(G(x), IntArrayRef(size), mode),
                    interpolate(x, IntArrayRef(size), mode), what);
      }
      expect_same(interpolate(G(x), {2.0, 0.5}, mode), interpolate(x, {2.0, 0.5}, mode),
                  d + " " + mode + " scale [2, 0.5]");
      const Tensor x1 = x.select(2, 1);  // [2, 3, 7]
      expect_same(interpolate(G(x1), {2.5}, mode), interpolate(x1, {2.5}, mode),
                  d + " " + mode + " 1-d scale 2.5");
      expect_same(interpolate(G(x1), {3}, mode), interpolate(x1, {3}, mode),
                  d + " " + mode + " 1-d to 3");
    }
  }
}

TEST(CudaInterpolate, BilinearMatchesTheCpu) {
  REQUIRE_GPU();
  manual_seed(6);
  for (DType dt : kFloatDTypes) {
    const std::string d = name_of(dt);
    Tensor x = image(dt);
    for (bool ac : {false, true}) {
      for (std::vector<int64_t> size :
           {std::vector<int64_t>{11, 17}, {2, 3}, {9, 3}, {5, 13}, {1, 1}, {5, 7}}) {
        const std::string what = d + " bilinear align_corners=" + std::to_string(ac) + " to [" +
                                 std::to_string(size[0]) + ", " + std::to_string(size[1]) + "]";
        expect_matches(interpolate(G(x), IntArrayRef(size), "bilinear", ac),
                     interpolate(x, IntArrayRef(size), "bilinear", ac), rtol_of(dt), atol_of(dt),
                     what);
      }
      expect_matches(interpolate(G(x), {1.7, 0.6}, "bilinear", ac),
                   interpolate(x, {1.7, 0.6}, "bilinear", ac), rtol_of(dt), atol_of(dt),
                   d + " bilinear scale [1.7, 0.6]");
    }
    // NaN and infinities spread as on the CPU.
    Tensor xs = x.contiguous();
    xs.narrow(2, 1, 1).narrow(3, 2, 1).fill_(kNaN);
    xs.narrow(2, 3, 1).narrow(3, 0, 1).fill_(kInf);
    xs.narrow(2, 4, 1).narrow(3, 6, 1).fill_(-kInf);
    expect_matches(interpolate(G(xs), {8, 12}, "bilinear"), interpolate(xs, {8, 12}, "bilinear"),
                 rtol_of(dt), atol_of(dt), d + " bilinear with NaN and infinities");
  }
  // Many blocks.
  const Tensor big = randn({2, 3, 67, 45});
  expect_matches(interpolate(G(big), {301, 211}, "bilinear"),
               interpolate(big, {301, 211}, "bilinear"), 1e-5, 1e-5,
               "float32 [2, 3, 67, 45] to [301, 211]");
  const Tensor tall = randn({1, 2, 400, 300}, kFloat64);
  expect_matches(interpolate(G(tall), {37, 29}, "bilinear", true),
               interpolate(tall, {37, 29}, "bilinear", true), 1e-12, 1e-12,
               "float64 [1, 2, 400, 300] to [37, 29]");
}

TEST(CudaInterpolate, GradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(7);
  struct Case {
    std::string mode;
    bool ac;
    std::vector<int64_t> size;
  };
  // Up (sources shared by many outputs), down (some sources read by none), one dim unchanged
  // (its identity table), a single output.
  const std::vector<Case> cases = {
      {"nearest", false, {11, 17}}, {"nearest", false, {2, 3}},    {"nearest-exact", false, {9, 5}},
      {"nearest", false, {5, 16}},  {"bilinear", false, {11, 17}}, {"bilinear", true, {11, 17}},
      {"bilinear", false, {2, 3}},  {"bilinear", true, {3, 2}},    {"bilinear", false, {5, 13}},
      {"bilinear", false, {12, 7}}, {"bilinear", true, {1, 1}},    {"bilinear", false, {1, 1}},
  };
  for (DType dt : kFloatDTypes) {
    const Tensor x = image(dt);
    for (const Case& c : cases) {
      const bool ac_ok = c.mode == "bilinear";
      const std::string what = name_of(dt) + " " + c.mode + (c.ac ? " align_corners" : "") +
                               " to [" + std::to_string(c.size[0]) + ", " +
                               std::to_string(c.size[1]) + "]";
      const Tensor cx = x.detach().requires_grad_(true), gx = G(x).detach().requires_grad_(true);
      std::optional<bool> ac;
      if (ac_ok) ac = c.ac;
      const Tensor yc = interpolate(cx, IntArrayRef(c.size), c.mode, ac);
      const Tensor yg = interpolate(gx, IntArrayRef(c.size), c.mode, ac);
      const Tensor w = randn(yc.sizes(), kFloat64).to(dt);
      (yc * w).sum().backward();
      (yg * G(w)).sum().backward();
      expect_matches(gx.grad(), cx.grad(), rtol_of(dt), atol_of(dt), "grad of " + what);
    }
  }
  // 3-d nearest, and a large upsampling: every source element gathers ~10^4 contributions.
  const Tensor x1 = randn({2, 3, 7}, kFloat64);
  const Tensor c1 = x1.detach().requires_grad_(true), g1 = G(x1).detach().requires_grad_(true);
  const Tensor w1 = randn({2, 3, 17}, kFloat64);
  (interpolate(c1, {17}) * w1).sum().backward();
  (interpolate(g1, {17}) * G(w1)).sum().backward();
  expect_matches(g1.grad(), c1.grad(), 1e-12, 1e-12, "grad of 1-d nearest");
  const Tensor xb = randn({1, 2, 3, 2}, kFloat64);
  for (const std::string mode : {"bilinear", "nearest"}) {
    const Tensor cb = xb.detach().requires_grad_(true), gb = G(xb).detach().requires_grad_(true);
    const Tensor wb = randn({1, 2, 200, 150}, kFloat64);
    (interpolate(cb, {200, 150}, mode) * wb).sum().backward();
    (interpolate(gb, {200, 150}, mode) * G(wb)).sum().backward();
    expect_matches(gb.grad(), cb.grad(), 1e-11, 1e-11, "grad of a 100x upsampling, " + mode);
  }
  // Many blocks in float32.
  const Tensor xl = randn({2, 3, 67, 45});
  const Tensor cl = xl.detach().requires_grad_(true), gl = G(xl).detach().requires_grad_(true);
  const Tensor wl = randn({2, 3, 150, 31});
  (interpolate(cl, {150, 31}, "bilinear") * wl).sum().backward();
  (interpolate(gl, {150, 31}, "bilinear") * G(wl)).sum().backward();
  expect_matches(gl.grad(), cl.grad(), 1e-5, 1e-5, "grad of float32 [2, 3, 67, 45] to [150, 31]");
}

TEST(CudaInterpolate, DoubleBackwardBicubicAndAreaRunOnTheGpu) {
  REQUIRE_GPU();
  manual_seed(8);
  const Tensor x = randn({2, 3, 6, 5}, kFloat64);
  for (const std::string mode : {"bilinear", "nearest", "bicubic", "area"}) {
    std::optional<bool> ac;
    if (mode == "bilinear" || mode == "bicubic") ac = false;
    const Tensor cx = x.detach().requires_grad_(true), gx = G(x).detach().requires_grad_(true);
    const Tensor yc = interpolate(cx, {9, 4}, mode, ac), yg = interpolate(gx, {9, 4}, mode, ac);
    expect_matches(yg, yc.detach(), 1e-12, 1e-12, mode + " forward");
    const Tensor w = randn({2, 3, 9, 4}, kFloat64);
    // The gradient of a loss quadratic in y as a graph (create_graph), then differentiated again.
    const Tensor dc =
        autograd::grad({(yc * yc * w).sum()}, {cx}, {}, std::nullopt, /*create_graph=*/true)[0];
    const Tensor dg =
        autograd::grad({(yg * yg * G(w)).sum()}, {gx}, {}, std::nullopt, /*create_graph=*/true)[0];
    expect_matches(dg, dc.detach(), 1e-12, 1e-12, mode + " backward with create_graph");
    // The fused backward (no graph), of a loss linear in y.
    const Tensor fc = autograd::grad({(yc * w).sum()}, {cx}, {}, /*retain_graph=*/true)[0];
    const Tensor fg = autograd::grad({(yg * G(w)).sum()}, {gx}, {}, /*retain_graph=*/true)[0];
    expect_matches(fg, fc, 1e-12, 1e-12, mode + " fused backward");
    const Tensor v = randn({2, 3, 6, 5}, kFloat64);
    const Tensor hc = autograd::grad({(dc * v).sum()}, {cx})[0];
    const Tensor hg = autograd::grad({(dg * G(v)).sum()}, {gx})[0];
    expect_matches(hg, hc, 1e-12, 1e-12, mode + " double backward");
  }
}

TEST(CudaInterpolate, ErrorsAndEmptyBatchesAreTheCpus) {
  REQUIRE_GPU();
  const Tensor xi = randint(0, 9, {1, 2, 4, 4});
  EXPECT_EQ(error_of([&] {
              (void)interpolate(G(xi), {8, 8}, "bilinear");
            }),
            error_of([&] {
              (void)interpolate(xi, {8, 8}, "bilinear");
            }));
  const Tensor e = randn({0, 3, 5, 7});
  expect_same(interpolate(G(e), {9, 4}, "bilinear"), interpolate(e, {9, 4}, "bilinear"),
              "empty batch, bilinear");
  expect_same(interpolate(G(e), {9, 4}), interpolate(e, {9, 4}), "empty batch, nearest");
  const Tensor ge = G(e).detach().requires_grad_(true), ce = e.detach().requires_grad_(true);
  interpolate(ge, {9, 4}, "bilinear").sum().backward();
  interpolate(ce, {9, 4}, "bilinear").sum().backward();
  expect_same(ge.grad(), ce.grad(), "empty batch, gradient");
}
