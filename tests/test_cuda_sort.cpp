// The CUDA kernels of sort, argsort, topk, median, mode, cumprod and logcumsumexp
// (src/cuda/sort_kernels.cu) against the CPU's (the oracle): every dtype, every dim of 3-d inputs
// and their transposes, 0-d and empty inputs, ties, NaN of both signs, infinities and signed
// zeros (the values must come back bit for bit: the GPU reads them from the input at the sorted
// positions), sizes that take each of the kernels' paths (one long line, a few long lines, many
// short lines, more lines than one grid, more items than one chunk), the float64 gradients, and
// the front ends' errors. Without a GPU every test is skipped and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <limits>
#include <string>
#include <vector>

#include "cuda/backend.h"
#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;

namespace {

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();


const std::vector<DType> kAllDTypes = {kBool,     kUInt8,   kInt32,  kInt64,
                                       kBFloat16, kFloat32, kFloat64};

// A GPU tensor's elements as float64 (copied to the CPU first).
std::vector<double> host_vals(const Tensor& t) { return vals(t.cpu()); }

// gpu (on the GPU) holds exactly cpu's elements: same shape and dtype; floats bit for bit up to
// NaN payloads and signs (NaN where cpu has NaN: the sign of a NaN from inf * 0 differs between
// the CPU and the GPU, and PyTorch does not define it either; -0.0 where cpu has -0.0).
void expect_same(const Tensor& gpu, const Tensor& cpu, const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  const Tensor back = gpu.cpu();
  ASSERT_EQ(back.sizes(), cpu.sizes()) << what;
  ASSERT_EQ(back.dtype(), cpu.dtype()) << what;
  if (!cpu.is_floating_point()) {
    EXPECT_TRUE(equal(back, cpu)) << what << "\ngpu: " << back << "\ncpu: " << cpu;
    return;
  }
  const std::vector<double> g = vals(back), c = vals(cpu);
  for (size_t i = 0; i < g.size(); ++i) {
    const bool same = std::isnan(c[i]) ? std::isnan(g[i]) : g[i] == c[i];
    if (!same || (!std::isnan(c[i]) && std::signbit(g[i]) != std::signbit(c[i]))) {
      ADD_FAILURE() << what << ": element " << i << " is " << g[i] << " on the GPU, " << c[i]
                    << " on the CPU\ngpu: " << back << "\ncpu: " << cpu;
      return;
    }
  }
}

// a on the GPU is b on the CPU within a relative and absolute tolerance (NaN where b has NaN).
void expect_close(const Tensor& gpu, const Tensor& cpu, double tol, const std::string& what) {
  expect_matches(gpu, cpu, tol, tol, what);
}

void expect_pair(const std::tuple<Tensor, Tensor>& gpu, const std::tuple<Tensor, Tensor>& cpu,
                 const std::string& what) {
  expect_same(std::get<0>(gpu), std::get<0>(cpu), what + " (values)");
  expect_same(std::get<1>(gpu), std::get<1>(cpu), what + " (indices)");
}

// A float64 tensor of `shape` full of ties (small integers), -0.0 and +0.0, and, when `edges`,
// +-inf and NaN of both signs.
Tensor tie_values(IntArrayRef shape, bool edges) {
  Tensor x = (randn(shape, kFloat64) * 2.5).round();  // ties; round(-0.3) is -0.0
  x = where(logical_and(eq(x, 0), lt(rand(shape, kFloat64), 0.5)), 0.0, x);  // some +0.0
  if (edges) {
    const Tensor u = rand(shape, kFloat64);
    x = where(lt(u, 0.04), kNaN, x);
    x = where(logical_and(ge(u, 0.04), lt(u, 0.07)), -kNaN, x);
    x = where(logical_and(ge(u, 0.07), lt(u, 0.10)), kInf, x);
    x = where(logical_and(ge(u, 0.10), lt(u, 0.13)), -kInf, x);
  }
  return x;
}

// tie_values in dtype dt (integers: the small integers; uint8: shifted to be non-negative).
Tensor sample(IntArrayRef shape, DType dt) {
  if (dt == kBool) return gt(randn(shape, kFloat64), 0);
  if (is_floating_point(dt)) return tie_values(shape, true).to(dt);
  Tensor x = tie_values(shape, false);
  if (dt == kUInt8) x = x + 10;
  return x.to(dt);
}

std::string tag(DType dt, const Tensor& x, int64_t dim) {
  std::string s = std::string(dtype_name(dt)) + " shape [";
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d) s += ",";
    s += std::to_string(x.size(d));
  }
  return s + "] dim " + std::to_string(dim) + (x.is_contiguous() ? "" : " strided");
}

// Every op of the file on x (CPU) and its copy on the GPU, along dim.
void expect_all_ops_match(const Tensor& x, int64_t dim, const std::string& what) {
  const Tensor g = x.to(kGpu);
  for (bool desc : {false, true}) {
    const std::string w = what + (desc ? " descending" : "");
    expect_pair(g.sort(dim, desc), x.sort(dim, desc), "sort " + w);
    expect_pair(g.sort(std::optional<bool>(true), dim, desc),
                x.sort(std::optional<bool>(true), dim, desc), "sort stable " + w);
    expect_same(g.argsort(dim, desc), x.argsort(dim, desc), "argsort " + w);
  }
  const int64_t n = x.dim() == 0 ? 1 : x.size(dim);
  // (k = 0 of a 0-d input is left out: the front end cannot reshape its empty result to 0-d.)
  for (int64_t k : {int64_t{x.dim() == 0 ? 1 : 0}, int64_t{1}, std::min<int64_t>(3, n), n}) {
    for (bool largest : {true, false}) {
      expect_pair(g.topk(k, dim, largest), x.topk(k, dim, largest),
                  "topk k=" + std::to_string(k) + (largest ? " largest " : " smallest ") + what);
    }
  }
  if (x.numel() > 0) {
    expect_pair(g.mode(dim), x.mode(dim), "mode " + what);
    expect_pair(g.mode(dim, true), x.mode(dim, true), "mode keepdim " + what);
    expect_pair(g.median(dim), x.median(dim), "median(dim) " + what);
    expect_same(g.median(), x.median(), "median() " + what);
  }
  if (x.dtype() != kBool) {
    expect_same(g.cumprod(dim), x.cumprod(dim), "cumprod " + what);
  }
  if (x.is_floating_point()) {
    const double tol = x.dtype() == kFloat64 ? 1e-12 : 1e-2;
    expect_close(g.logcumsumexp(dim), x.logcumsumexp(dim), tol, "logcumsumexp " + what);
  }
}

}  // namespace

// ---- sort, argsort, topk, median, mode, cumprod, logcumsumexp: small inputs, every dtype

TEST(CudaSort, EveryOpMatchesTheCpuOnEveryDtypeAndLayout) {
  REQUIRE_GPU();
  manual_seed(3);
  for (DType dt : kAllDTypes) {
    const Tensor x = sample({3, 11, 4}, dt);
    for (const Tensor& v : {x, x.transpose(0, 2), x.narrow(1, 2, 7).permute({1, 0, 2})}) {
      for (int64_t dim : {0, 1, 2, -1}) expect_all_ops_match(v, dim, tag(dt, v, dim));
    }
    const Tensor line = sample({13}, dt);
    expect_all_ops_match(line, 0, tag(dt, line, 0));
    const Tensor every_other = line.slice(0, 0, std::nullopt, 2);  // stride 2
    expect_all_ops_match(every_other, 0, tag(dt, every_other, 0));
    const Tensor scalar = sample({1}, dt).reshape({});
    expect_all_ops_match(scalar, 0, "0-d " + std::string(dtype_name(dt)));
    expect_all_ops_match(scalar, -1, "0-d dim -1 " + std::string(dtype_name(dt)));
  }
}

TEST(CudaSort, TiesNanAndSignedZerosKeepTheCpusOrder) {
  REQUIRE_GPU();
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const Tensor x = tensor(std::vector<double>{1, 3, 1, 3, kNaN, -kNaN, 3}, dt);
    const Tensor g = x.to(kGpu);
    // Descending: the NaNs first, then the 3s, then the 1s, each group in index order.
    EXPECT_EQ(host_vals(g.argsort(0, true)), (std::vector<double>{4, 5, 1, 3, 6, 0, 2}));
    EXPECT_EQ(host_vals(g.argsort(0, false)), (std::vector<double>{0, 2, 1, 3, 6, 4, 5}));
    EXPECT_EQ(host_vals(std::get<1>(g.topk(3))), (std::vector<double>{4, 5, 1}));
    EXPECT_EQ(host_vals(std::get<1>(g.topk(3, 0, false))), (std::vector<double>{0, 2, 1}));
    // 3 is the most frequent; its last position is 6. NaNs never repeat.
    EXPECT_EQ(std::get<1>(g.mode()).item().toLong(), 6);
    // -0.0 and +0.0 are one value, kept in index order, and come back as they went in.
    const Tensor z = tensor(std::vector<double>{0.0, -0.0, 1, 0.0, -0.0, -1}, dt);
    for (bool desc : {false, true}) {
      expect_pair(z.to(kGpu).sort(0, desc), z.sort(0, desc), "signed zeros");
      expect_pair(z.to(kGpu).topk(4, 0, !desc), z.topk(4, 0, !desc), "signed zeros topk");
    }
    EXPECT_EQ(std::get<1>(z.to(kGpu).mode()).item().toLong(), 4);  // four zeros: the last
    // Every NaN is a value of its own: an all-NaN line's mode is its first NaN.
    const Tensor nans = tensor(std::vector<double>{kNaN, -kNaN, kNaN}, dt);
    expect_pair(nans.to(kGpu).mode(), nans.mode(), "all-NaN mode");
    EXPECT_EQ(std::get<1>(nans.to(kGpu).mode()).item().toLong(), 0);
    // The median skips nothing: a NaN anywhere is the median (the first NaN's index).
    const Tensor m = tensor(std::vector<double>{2, kNaN, 1, kNaN}, dt);
    expect_pair(m.to(kGpu).median(0), m.median(0), "median with NaN");
    expect_same(m.to(kGpu).median(), m.median(), "median() with NaN");
  }
  // Integers at their limits (the keys flip the sign bit).
  const Tensor i64 = tensor(std::vector<int64_t>{std::numeric_limits<int64_t>::max(), -1, 0,
                                                 std::numeric_limits<int64_t>::min(), 1, -1});
  for (bool desc : {false, true}) {
    expect_pair(i64.to(kGpu).sort(0, desc), i64.sort(0, desc), "int64 limits");
    const Tensor i32 =
        i64.clamp(std::numeric_limits<int32_t>::min(), std::numeric_limits<int32_t>::max())
            .to(kInt32);
    expect_pair(i32.to(kGpu).sort(0, desc), i32.sort(0, desc), "int32 limits");
    const Tensor u8 = tensor(std::vector<int64_t>{255, 0, 128, 127, 255, 1}).to(kUInt8);
    expect_pair(u8.to(kGpu).sort(0, desc), u8.sort(0, desc), "uint8 limits");
    expect_pair(u8.to(kGpu).mode(), u8.mode(), "uint8 255 twice");
  }
}

TEST(CudaSort, EmptyInputsAndTheFrontEndsErrors) {
  REQUIRE_GPU();
  const Tensor e = zeros({4, 0, 3});
  const Tensor g = e.to(kGpu);
  for (int64_t dim : {0, 1, 2}) {
    expect_pair(g.sort(dim), e.sort(dim), "sort empty");
    expect_same(g.argsort(dim, true), e.argsort(dim, true), "argsort empty");
    expect_same(g.cumprod(dim), e.cumprod(dim), "cumprod empty");
    expect_same(g.logcumsumexp(dim), e.logcumsumexp(dim), "logcumsumexp empty");
  }
  expect_pair(g.topk(0, 2), e.topk(0, 2), "topk k=0");
  expect_pair(g.topk(2, 2), e.topk(2, 2), "topk of no lines");
  expect_pair(g.mode(2), e.mode(2), "mode of no lines");
  expect_same(g.median(), e.median(), "median() of an empty float tensor: NaN");
  // The same errors as on the CPU.
  EXPECT_EQ(error_of([&] { (void)g.mode(1); }), error_of([&] { (void)e.mode(1); }));
  EXPECT_EQ(error_of([&] { (void)g.median(1); }), error_of([&] { (void)e.median(1); }));
  const Tensor ei = zeros({0}, kInt64);
  EXPECT_EQ(error_of([&] { (void)ei.to(kGpu).median(); }), error_of([&] { (void)ei.median(); }));
  const Tensor x = randn({2, 5});
  EXPECT_EQ(error_of([&] { (void)x.to(kGpu).topk(6); }), error_of([&] { (void)x.topk(6); }));
  EXPECT_EQ(error_of([&] { (void)x.to(kGpu).topk(-1); }), error_of([&] { (void)x.topk(-1); }));
  EXPECT_EQ(error_of([&] { (void)x.to(kGpu).sort(2); }), error_of([&] { (void)x.sort(2); }));
  const Tensor b = gt(x, 0);
  EXPECT_EQ(error_of([&] { (void)b.to(kGpu).cumprod(1, kBool); }),
            error_of([&] { (void)b.cumprod(1, kBool); }));
  // bool and integers are promoted by the front ends.
  expect_same(b.to(kGpu).cumprod(1), b.cumprod(1), "cumprod of bool (int64)");
  expect_close(b.to(kGpu).logcumsumexp(1), b.logcumsumexp(1), 1e-6, "logcumsumexp of bool");
  const Tensor i = randint(-3, 4, {3, 7});
  expect_same(i.to(kGpu).cumprod(1, kInt32), i.cumprod(1, kInt32), "cumprod dtype int32");
  expect_same(i.to(kGpu).cumprod(0, kFloat64), i.cumprod(0, kFloat64), "cumprod dtype float64");
  expect_close(i.to(kGpu).logcumsumexp(1), i.logcumsumexp(1), 1e-6, "logcumsumexp of int64");
}

// ---- sizes that take each path of the sort: one long line (the device-wide radix sort), a few
// long lines (one at a time), many lines (the segmented sort; over 500 of them: CUB partitions
// the segments by size), long lines along a strided dim

TEST(CudaSort, LargeInputsTakeEveryPathAndMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(21);
  struct Case {
    std::vector<int64_t> shape;
    int64_t dim;
  };
  const std::vector<Case> cases = {{{300000}, 0},   {{3, 100000}, 1},  {{20, 40000}, 1},
                                   {{2000, 37}, 1}, {{2000, 37}, 0},   {{5, 40000}, 0},
                                   {{70000, 3}, 1}, {{40, 3, 2000}, 1}};
  for (const Case& c : cases) {
    for (DType dt : {kFloat32, kInt64, kBFloat16}) {
      const Tensor x = sample(c.shape, dt);
      const Tensor g = x.to(kGpu);
      const std::string w = tag(dt, x, c.dim);
      for (bool desc : {false, true}) {
        expect_pair(g.sort(c.dim, desc), x.sort(c.dim, desc), "sort " + w);
      }
      const int64_t k = std::min<int64_t>(5, x.size(c.dim));
      expect_pair(g.topk(k, c.dim), x.topk(k, c.dim), "topk largest " + w);
      expect_pair(g.topk(3, c.dim, false), x.topk(3, c.dim, false), "topk 3 smallest " + w);
      expect_pair(g.mode(c.dim), x.mode(c.dim), "mode " + w);
      expect_pair(g.median(c.dim), x.median(c.dim), "median " + w);
    }
  }
  // Distinct float64 values (no ties): a plain permutation check too.
  const Tensor d = randperm(100003).to(kFloat64) - 50000.5;
  expect_pair(d.to(kGpu).sort(0, true), d.sort(0, true), "randperm descending");
  EXPECT_EQ(std::get<0>(d.to(kGpu).sort(0, true))[0].item().toDouble(), 50001.5);
}

// More items than one chunk (2^26): lines are sorted a chunk at a time, the last chunk short.
// Sorting many lines queues its work without waiting (CUB's segmented radix sort; its
// DeviceSegmentedSort reads partition sizes back to the host above a few hundred segments).
TEST(CudaSort, ManyLinesSortWithoutWaiting) {
  REQUIRE_GPU();
  const Tensor x = randn({3000, 40});
  const Tensor g = x.to(kGpu);
  cuda::synchronize();
  const int64_t before = cuda::detail::host_sync_count();
  const auto [v, i] = sort(g, 1, /*descending=*/true);
  const auto [tv, ti] = topk(g, 5, 1);
  const Tensor a = argsort(g, 0);
  EXPECT_EQ(cuda::detail::host_sync_count(), before);
  const auto [cv, ci] = sort(x, 1, true);
  EXPECT_TRUE(equal(v.cpu(), cv));
  EXPECT_TRUE(equal(i.cpu(), ci));
  EXPECT_TRUE(equal(ti.cpu(), std::get<1>(topk(x, 5, 1))));
  EXPECT_TRUE(equal(a.cpu(), argsort(x, 0)));
}

TEST(CudaSort, MoreItemsThanOneChunk) {
  REQUIRE_GPU();
  manual_seed(8);
  const Tensor x = randint(0, 10, {(int64_t{1} << 20) + 3, 64}, kUInt8);
  const Tensor g = x.to(kGpu);
  expect_same(g.argsort(1), x.argsort(1), "argsort over two chunks");
  expect_pair(g.mode(1), x.mode(1), "mode over two chunks");
}

// Lines longer than half a chunk: one line per chunk, each sorted by the device-wide radix sort.
// Checked directly (a CPU sort of 2^26 elements is slow): sorted, stable and a permutation.
TEST(CudaSort, LinesLongerThanHalfAChunkSortStably) {
  REQUIRE_GPU();
  const int64_t n = (int64_t{1} << 25) + 7;
  const Tensor pos = arange(n, kInt64);
  // line l: (3k + l) % 7 at position k.
  const Tensor x = stack({(pos * 3).remainder(7), (pos * 3 + 1).remainder(7)}).to(kUInt8);
  const auto [gv, gi] = x.to(kGpu).sort(1);
  const Tensor v = gv.cpu(), ix = gi.cpu();
  const uint8_t* xp = x.data_ptr<uint8_t>();
  const uint8_t* vp = v.data_ptr<uint8_t>();
  const int64_t* ip = ix.data_ptr<int64_t>();
  for (int64_t l = 0; l < 2; ++l) {
    std::vector<bool> seen(static_cast<size_t>(n), false);
    int64_t bad = 0;
    for (int64_t r = 0; r < n; ++r) {
      const int64_t j = l * n + r, p = ip[j];
      if (p < 0 || p >= n || seen[static_cast<size_t>(p)] || xp[l * n + p] != vp[j]) {
        ++bad;
        continue;
      }
      seen[static_cast<size_t>(p)] = true;
      if (r > 0 && (vp[j - 1] > vp[j] || (vp[j - 1] == vp[j] && ip[j - 1] >= p))) ++bad;
    }
    EXPECT_EQ(bad, 0) << "line " << l;
  }
}

// ---- mode: runs longer than a thread's slice of the line, and ties between runs

TEST(CudaSort, ModeFindsTheFirstLongestRunAcrossThreadSlices) {
  REQUIRE_GPU();
  manual_seed(13);
  const int64_t n = 100000;  // slices of 782 elements per thread
  const Tensor k = arange(n, kInt64);
  // Runs of 1000 of each value; value 37 gets 1500 more (a run over several slices), value 71
  // as many (a tie: the smaller value, 37, wins), shuffled so that the sort brings them together.
  Tensor v = (k.to(kFloat64) / 1000).floor().to(kInt64);
  v = where(logical_and(ge(k, 5000), lt(k, 6500)), 37, v);
  v = where(logical_and(ge(k, 8000), lt(k, 9500)), 71, v);
  const Tensor shuffled = v.index_select(0, randperm(n));
  for (DType dt : {kInt64, kInt32, kFloat32, kFloat64, kBFloat16}) {
    const Tensor x = stack({shuffled, v, v.flip({0})}).to(dt);
    expect_pair(x.to(kGpu).mode(1), x.mode(1), "mode " + std::string(dtype_name(dt)));
    expect_pair(x.t().to(kGpu).mode(0), x.t().mode(0), "mode strided");
    EXPECT_EQ(host_vals(std::get<0>(x.to(kGpu).mode(1))), (std::vector<double>{37, 37, 37}));
  }
  // One run of everything, and lines of one element.
  const Tensor same = full({3, 5000}, 2.5);
  expect_pair(same.to(kGpu).mode(1), same.mode(1), "one run");
  const Tensor ones_line = randn({300, 1});
  expect_pair(ones_line.to(kGpu).mode(1), ones_line.mode(1), "lines of one");
}

// ---- scans: long lines and many columns, exact products, the log-add-exp edge cases

TEST(CudaSort, ScansMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(17);
  // Products near 1 (no overflow over 20000 steps) with zeros, NaN and infinities.
  Tensor p = 1 + randn({3, 20000, 4}, kFloat64) * 1e-3;
  p.select(1, 700).fill_(0.0);
  p.select(2, 1).select(1, 900).fill_(kNaN);
  p.select(2, 2).select(1, 100).fill_(kInf);
  for (DType dt : {kFloat64, kFloat32, kBFloat16}) {
    const Tensor x = p.to(dt);
    for (int64_t dim : {0, 1, 2}) {
      expect_same(x.to(kGpu).cumprod(dim), x.cumprod(dim), "cumprod " + tag(dt, x, dim));
      expect_same(x.transpose(0, 1).to(kGpu).cumprod(dim), x.transpose(0, 1).cumprod(dim),
                  "cumprod " + tag(dt, x.transpose(0, 1), dim));
    }
  }
  const Tensor ints = randint(-2, 3, {50, 70000});  // many columns along dim 0; wraps along 1
  expect_same(ints.to(kGpu).cumprod(0), ints.cumprod(0), "cumprod int64 columns");
  expect_same(ints.to(kGpu).cumprod(1), ints.cumprod(1), "cumprod int64 rows (overflows)");
  expect_same(ints.to(kUInt8).to(kGpu).cumprod(1, kUInt8), ints.to(kUInt8).cumprod(1, kUInt8),
              "cumprod uint8 (wraps)");
  // logcumsumexp: -inf (nothing yet), +inf, NaN, and the same infinity twice.
  Tensor l = randn({4, 30000, 3}, kFloat64) * 30;
  l.select(0, 1).narrow(0, 0, 10).fill_(-kInf);
  l.select(0, 2).select(0, 50).fill_(kInf);
  l.select(0, 2).select(0, 51).fill_(kInf);
  l.select(0, 3).select(0, 7).fill_(kNaN);
  for (DType dt : {kFloat64, kFloat32, kBFloat16}) {
    const Tensor x = l.to(dt);
    const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-6 : 1e-2;
    for (int64_t dim : {0, 1, 2}) {
      expect_close(x.to(kGpu).logcumsumexp(dim), x.logcumsumexp(dim), tol,
                   "logcumsumexp " + tag(dt, x, dim));
    }
  }
  const Tensor inf_line = tensor(std::vector<double>{-kInf, -kInf, kInf, kInf, 1, -kInf});
  expect_close(inf_line.to(kGpu).logcumsumexp(0), inf_line.logcumsumexp(0), 0,
               "logcumsumexp infinities");
  expect_close(inf_line.to(kGpu).logcumsumexp(0), tensor({-kInf, -kInf, kInf, kInf, kInf, kInf}), 0,
               "logcumsumexp infinities (values)");
}

// ---- gradients in float64: the GPU's picked indices route the gradient as on the CPU

TEST(CudaSort, GradientsMatchTheCpu) {
  REQUIRE_GPU();
  manual_seed(23);
  using Fn = std::function<Tensor(const Tensor&)>;
  const std::vector<std::pair<std::string, Fn>> fns = {
      {"sort values", [](const Tensor& t) { return std::get<0>(t.sort(1, true)); }},
      {"topk", [](const Tensor& t) { return std::get<0>(t.topk(3, 0)); }},
      {"median dim", [](const Tensor& t) { return std::get<0>(t.median(2, true)); }},
      {"median", [](const Tensor& t) { return t.median(); }},
      {"mode", [](const Tensor& t) { return std::get<0>(t.mode(1)); }},
      {"cumprod", [](const Tensor& t) { return t.cumprod(1); }},
      {"logcumsumexp", [](const Tensor& t) { return t.logcumsumexp(2); }},
  };
  Tensor base = randn({4, 9, 5}, kFloat64);
  Tensor with_zeros = base.clone();
  with_zeros.select(1, 3).fill_(0.0);  // cumprod's exact gradient through zeros
  Tensor ties = (base * 2).round();    // mode and median with repeated values
  for (const Tensor& x : {base, with_zeros, ties}) {
    for (const auto& [name, f] : fns) {
      const Tensor c = x.detach().clone().requires_grad_(true);
      const Tensor g = x.to(kGpu).detach().requires_grad_(true);
      const Tensor yc = f(c), yg = f(g);
      expect_close(yg, yc.detach(), 1e-12, name + " forward");
      const Tensor w = randn(yc.sizes(), kFloat64);
      (yc * w).sum().backward();
      (yg * w.to(kGpu)).sum().backward();
      expect_close(g.grad(), c.grad(), 1e-10, name + " gradient");
    }
  }
}

// ---- the current stream: work queued on a pool stream sees its own scratch memory

TEST(CudaSort, RunsOnTheCurrentStream) {
  REQUIRE_GPU();
  manual_seed(29);
  const Tensor x = sample({600, 500}, kFloat32);
  const Tensor g = x.to(kGpu);
  cuda::synchronize();
  const cuda::Stream s = cuda::getStreamFromPool();
  std::tuple<Tensor, Tensor> sorted, top, md;
  Tensor cp;
  {
    cuda::StreamGuard guard(s);
    sorted = g.sort(1);
    top = g.topk(7, 0);
    md = g.mode(1);
    cp = g.cumprod(1);
  }
  s.synchronize();
  expect_pair(sorted, x.sort(1), "sort on a pool stream");
  expect_pair(top, x.topk(7, 0), "topk on a pool stream");
  expect_pair(md, x.mode(1), "mode on a pool stream");
  expect_same(cp, x.cumprod(1), "cumprod on a pool stream");
}
