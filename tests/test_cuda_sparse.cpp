// The CUDA kernels of the scatter reductions and sparse products (src/cuda/sparse_kernels.cu)
// against the CPU's (the oracle): the CSR of a row index exactly (rowptr and the stable perm),
// the row-pointer checks, scatter_reduce on its segment path and its general path for every
// reduction, include_self both ways and every dtype (NaN, infinities, signed zeros, empty rows,
// 0-d and strided tensors, sizes that need many blocks), sparse_mm / sparse_csr_mm / sddmm and
// their float64 gradients, segment_softmax and the pools, the GNN layers forward and backward,
// and the bad-index errors, which must name the same (first) bad index as the CPU's. Without a
// GPU every test is skipped and says why.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <string>
#include <vector>

#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "ops/scatter.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;
using ::testing::AnyOf;
using ::testing::HasSubstr;

namespace {



constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();


double rtol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-5 : 1e-12; }
double atol_of(DType t) { return t == kBFloat16 ? 1e-2 : t == kFloat32 ? 1e-5 : 1e-12; }

using On = std::function<Tensor(const Tensor&)>;
const On kOnCpu = [](const Tensor& t) { return t.detach(); };  // a new leaf
const On kOnGpu = [](const Tensor& t) { return t.to(kGpu); };

// op(on) run with its inputs on the CPU and on the GPU; the results compared.
void expect_same_on_gpu(const std::function<Tensor(const On&)>& op, DType dt,
                        const std::string& what) {
  const Tensor cpu = op(kOnCpu);
  const Tensor gpu = op(kOnGpu);
  expect_matches(gpu, cpu, rtol_of(dt), atol_of(dt), what);
}

// The message of the error that op(on) throws on the GPU, checked equal to the CPU's.
std::string same_error_on_gpu(const std::function<void(const On&)>& op) {
  const std::string cpu = error_of([&] { op(kOnCpu); });
  const std::string gpu = error_of([&] { op(kOnGpu); });
  EXPECT_EQ(gpu, cpu);
  return gpu;
}

const char* kReductions[] = {"sum", "prod", "mean", "amax", "amin"};
const DType kValueTypes[] = {kFloat32, kFloat64, kBFloat16, kInt32, kInt64, kUInt8};

std::string name_of(DType dt) { return std::string(dtype_name(dt)); }

// Values of `shape` in dtype dt: floats normal with NaN, +-inf, -0.0 and a tie sprinkled in
// (specials), integers in [-5, 5] ([0, 5] for uint8).
Tensor values(IntArrayRef shape, DType dt, uint64_t seed, bool specials = true) {
  manual_seed(seed);
  if (!is_floating_point(dt)) {
    return randint(dt == kUInt8 ? 0 : -5, 6, shape).to(dt);
  }
  std::vector<double> v = vals(randn(shape, kFloat64));
  if (specials && v.size() >= 8) {
    v[1] = kNaN;
    v[v.size() / 2] = kInf;
    v[v.size() / 3] = -kInf;
    v[v.size() - 2] = -0.0;
    v[v.size() - 1] = v[0];  // a tie
  }
  return tensor(v, kFloat64).reshape(shape).to(dt);
}

// A random graph with a skewed (power-law-like) in-degree: targets drawn as floor(n * u^3).
Tensor random_edges(int64_t n, int64_t e, uint64_t seed) {
  manual_seed(seed);
  const Tensor src = randint(0, n, {e});
  const Tensor u = rand({e}, kFloat64);
  const Tensor dst = (u * u * u * double(n)).floor().to(kInt64).clamp(0, n - 1);
  return stack({src, dst}, 0);
}

// ---- the CSR of a row index, through the stubs

struct Csr {
  BadIndex bad;
  Tensor rowptr, perm;
};

Csr coo_to_csr_on(Device d, const Tensor& index, int64_t rows) {
  const Tensor idx = index.to(d).contiguous();
  Tensor rowptr = empty({rows + 1}, TensorOptions(kInt64).device(d));
  Tensor perm = empty({idx.numel()}, TensorOptions(kInt64).device(d));
  const BadIndex b = coo_to_csr_stub[d](idx, rows, rowptr, perm);
  return {b, rowptr.cpu(), perm.cpu()};
}

void expect_same_csr(const Tensor& index, int64_t rows, const std::string& what) {
  const Csr c = coo_to_csr_on(kCPU, index, rows);
  const Csr g = coo_to_csr_on(kGpu, index, rows);
  ASSERT_FALSE(c.bad.found) << what;
  EXPECT_FALSE(g.bad.found) << what;
  EXPECT_TRUE(equal(g.rowptr, c.rowptr)) << what << ": rowptr differs";
  EXPECT_TRUE(equal(g.perm, c.perm)) << what << ": perm differs (not the stable order)";
}

}  // namespace

// ---- everywhere

TEST(CudaSparseRuntime, SkipsWithAReasonWithoutAGpu) {
  if (cuda::is_available()) GTEST_SKIP() << "a GPU is available";
  EXPECT_FALSE(cuda::unavailable_reason().empty());
  EXPECT_THAT(error_of([] { (void)ones({2}).to(kGpu); }),
              AnyOf(HasSubstr("ignis was built without a CUDA backend"),
                    HasSubstr("no GPU is available (")));
}

// ---- on a GPU

TEST(CudaSparse, CooToCsrIsTheCpusExactly) {
  REQUIRE_GPU();
  for (DType it : {kInt64, kInt32}) {
    SCOPED_TRACE(name_of(it));
    // Duplicates, empty rows (1 and 4, and the last), entries in no particular order.
    const Tensor small = tensor(std::vector<int64_t>{3, 0, 3, 5, 2, 0, 3, 2, 5, 0}).to(it);
    expect_same_csr(small, 7, "small");
    expect_same_csr(small, 6, "small, no trailing empty row");
    expect_same_csr(tensor(std::vector<int64_t>{}).to(it), 5, "no entries");
    expect_same_csr(tensor(std::vector<int64_t>{}).to(it), 0, "no entries, no rows");
    expect_same_csr(zeros({1000}, kInt64).to(it), 1, "one row");
    expect_same_csr(zeros({1000}, kInt64).to(it), 2, "one full row, one empty");
    expect_same_csr(tensor(std::vector<int64_t>{1, 1, 1}).to(it), 2, "the first row empty");
    // Many blocks and several radix passes: a skewed index over 3000 rows, a uniform one over
    // 300k rows (19 key bits), and one whose rows need 31 bits.
    expect_same_csr(random_edges(3000, 200000, 1)[1].to(it), 3000, "power law");
    manual_seed(2);
    expect_same_csr(randint(0, 300000, {250000}).to(it), 300000, "uniform over 300k rows");
    manual_seed(3);
    expect_same_csr(randint(0, 70, {500000}).to(it), 70, "few rows, many entries each");
  }
  // 20M rows (25 key bits), few of them used.
  manual_seed(4);
  const int64_t rows = 20000000;
  const Tensor far = randint(0, 8, {20000}) * (rows / 8) + randint(0, 3, {20000});
  const Csr c = coo_to_csr_on(kCPU, far, rows);
  const Csr g = coo_to_csr_on(kGpu, far, rows);
  EXPECT_FALSE(g.bad.found);
  EXPECT_TRUE(equal(g.rowptr, c.rowptr));
  EXPECT_TRUE(equal(g.perm, c.perm));
}

TEST(CudaSparse, CooToCsrReportsTheFirstBadIndex) {
  REQUIRE_GPU();
  for (DType it : {kInt64, kInt32}) {
    SCOPED_TRACE(name_of(it));
    for (const auto& [v, rows] : std::vector<std::pair<std::vector<int64_t>, int64_t>>{
             {{2, 9, -1, 4}, 5}, {{2, -1, 9, 4}, 5}, {{0, 0, 3}, 3}, {{0}, 0}, {{7, 1}, 1}}) {
      const Tensor idx = tensor(v).to(it);
      const Csr c = coo_to_csr_on(kCPU, idx, rows);
      const Csr g = coo_to_csr_on(kGpu, idx, rows);
      ASSERT_TRUE(c.bad.found);
      EXPECT_TRUE(g.bad.found);
      EXPECT_EQ(g.bad.value, c.bad.value);
    }
    // Bad entries deep in a large index, in different blocks: the first one is reported.
    std::vector<int64_t> big(300000, 3);
    big[150001] = 12345;
    big[170000] = -7;
    big[299999] = 99;
    const Tensor idx = tensor(big).to(it);
    const Csr g = coo_to_csr_on(kGpu, idx, 100);
    EXPECT_TRUE(g.bad.found);
    EXPECT_EQ(g.bad.value, 12345);
    EXPECT_EQ(coo_to_csr_on(kCPU, idx, 100).bad.value, 12345);
  }
}

TEST(CudaSparse, CsrCheckAndRowsMatchTheCpu) {
  REQUIRE_GPU();
  const std::vector<std::pair<std::vector<int64_t>, int64_t>> cases = {
      {{0, 2, 2, 5}, 5},     // valid, an empty row
      {{0}, 0},              // valid, no rows
      {{0, 0, 0}, 0},        // valid, no entries
      {{}, 0},               // no row pointer at all: position 0
      {{1, 2}, 2},           // does not start at 0
      {{0, 3, 2, 5}, 5},     // decreases at 2
      {{0, 6, 6}, 5},        // beyond nnz at 1
      {{0, 2, 4}, 5},        // ends below nnz: the last position
      {{0}, 1},              // one entry, no rows
      {{0, 2, 1, 9}, 3},     // decreases at 2 before exceeding nnz at 3
      {{0, 4, 4, 4, 3}, 3},  // exceeds nnz at 1 before decreasing at 4
  };
  for (const auto& [rp, nnz] : cases) {
    const Tensor t = tensor(rp);
    const BadIndex c = csr_check_stub[kCPU](t, nnz);
    const BadIndex g = csr_check_stub[kGpu](t.to(kGpu), nnz);
    EXPECT_EQ(g.found, c.found) << t;
    EXPECT_EQ(g.value, c.value) << t;
    if (!c.found) {
      Tensor rc = empty({nnz}, kInt64), rg = empty({nnz}, TensorOptions(kInt64).device(kGpu));
      csr_rows_stub[kCPU](t, rc);
      csr_rows_stub[kGpu](t.to(kGpu), rg);
      expect_matches(rg, rc, 0, 0, "csr_rows");
    }
  }
  // A large valid row pointer (many empty rows), then broken deep inside.
  const Csr big = coo_to_csr_on(kCPU, random_edges(50000, 300000, 5)[1], 50000);
  const BadIndex ok = csr_check_stub[kGpu](big.rowptr.to(kGpu), 300000);
  EXPECT_FALSE(ok.found);
  Tensor rc = empty({300000}, kInt64), rg = empty({300000}, TensorOptions(kInt64).device(kGpu));
  csr_rows_stub[kCPU](big.rowptr, rc);
  csr_rows_stub[kGpu](big.rowptr.to(kGpu), rg);
  expect_matches(rg, rc, 0, 0, "csr_rows, large");
  std::vector<int64_t> broken(big.rowptr.data_ptr<int64_t>(),
                              big.rowptr.data_ptr<int64_t>() + big.rowptr.numel());
  broken[40000] = broken[39999] - 1;
  broken[45000] = 400000;
  const BadIndex c = csr_check_stub[kCPU](tensor(broken), 300000);
  const BadIndex g = csr_check_stub[kGpu](tensor(broken).to(kGpu), 300000);
  EXPECT_TRUE(g.found);
  EXPECT_EQ(g.value, c.value);
  EXPECT_EQ(g.value, 40000);
}

// ---- scatter_reduce

TEST(CudaSparse, ScatterReduceOnTheSegmentPathMatchesTheCpu) {
  REQUIRE_GPU();
  // Rows 4 (and, along dim 1 below, 6) receive nothing; 3 receives three entries.
  const std::vector<int64_t> dst = {3, 0, 3, 5, 1, 0, 3, 2, 5};
  const int64_t E = static_cast<int64_t>(dst.size());
  for (DType dt : kValueTypes) {
    for (DType it : {kInt64, kInt32}) {
      const Tensor v = tensor(dst).to(it);
      const Tensor self = values({6, 3}, dt, 1), src = values({E, 3}, dt, 2);
      const Tensor self3 = values({2, 7, 4}, dt, 3), src3 = values({2, E, 4}, dt, 4);
      for (const char* r : kReductions) {
        for (bool inc : {true, false}) {
          const std::string what =
              name_of(dt) + "/" + name_of(it) + " " + r + (inc ? " include_self" : " exclude_self");
          // Along dim 0 of [N, F]: the message-passing idiom.
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(self), 0, on(v).unsqueeze(1).expand({E, 3}), on(src), r,
                                      inc);
              },
              dt, what + ", dim 0");
          // Along the middle dim of a 3-d tensor (outer and inner dims).
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(self3), 1, on(v).reshape({1, E, 1}).expand({2, E, 4}),
                                      on(src3), r, inc);
              },
              dt, what + ", dim 1 of 3");
          // Strided self and src: transposed views made on the device.
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(self.t().contiguous()).t(), 0,
                                      on(v).unsqueeze(1).expand({E, 3}),
                                      on(src.t().contiguous()).t(), r, inc);
              },
              dt, what + ", strided");
        }
      }
    }
  }
}

TEST(CudaSparse, ScatterReduceOnTheSegmentPathAtScale) {
  REQUIRE_GPU();
  // Many blocks, a skewed in-degree, and (the last) more elements than one grid covers, so the
  // grid-stride loops take several turns.
  const int64_t n = 3000, e = 200000, f = 16;
  const Tensor dst = random_edges(n, e, 6)[1];
  for (DType dt : {kFloat32, kFloat64, kInt64}) {
    const Tensor src = values({e, f}, dt, 7, false), self = values({n, f}, dt, 8, false);
    for (const char* r : kReductions) {
      if (std::string(r) == "prod") continue;  // overflows (tested on small inputs)
      for (bool inc : {true, false}) {
        expect_same_on_gpu(
            [&](const On& on) {
              return scatter_reduce(on(self), 0, on(dst).unsqueeze(1).expand({e, f}), on(src), r,
                                    inc);
            },
            dt, name_of(dt) + " " + r + (inc ? " include_self" : " exclude_self") + ", large");
      }
    }
  }
  const int64_t big_n = 70000, big_f = 256, big_e = 100000;
  const Tensor d2 = random_edges(big_n, big_e, 9)[1];
  const Tensor s2 = values({big_e, big_f}, kFloat32, 10, false);
  expect_same_on_gpu(
      [&](const On& on) {
        return scatter_reduce(on(zeros({big_n, big_f})), 0,
                              on(d2).unsqueeze(1).expand({big_e, big_f}), on(s2), "mean", true);
      },
      kFloat32, "17.9M outputs");
  // The same call twice on the GPU gives the same bits.
  const Tensor g1 = scatter_reduce(zeros({n, f}, TensorOptions().device(kGpu)), 0,
                                   dst.to(kGpu).unsqueeze(1).expand({e, f}),
                                   values({e, f}, kFloat32, 7, false).to(kGpu), "sum");
  const Tensor g2 = scatter_reduce(zeros({n, f}, TensorOptions().device(kGpu)), 0,
                                   dst.to(kGpu).unsqueeze(1).expand({e, f}),
                                   values({e, f}, kFloat32, 7, false).to(kGpu), "sum");
  EXPECT_TRUE(equal(g1.cpu(), g2.cpu())) << "the GPU sum depends on the run";
}

TEST(CudaSparse, ScatterReduceWithAGeneralIndexMatchesTheCpu) {
  REQUIRE_GPU();
  for (DType dt : kValueTypes) {
    for (DType it : {kInt64, kInt32}) {
      manual_seed(11);
      const Tensor i0 = randint(0, 5, {6, 4}).to(it);         // into [5, 4] along dim 0
      const Tensor i1 = randint(0, 5, {4, 7}).to(it);         // into [4, 5] along dim 1
      const Tensor i_small = randint(0, 5, {3, 2}).to(it);    // covers part of [5, 4]
      const Tensor i_strided = randint(0, 4, {3, 2}).to(it);  // into [4, 5] along dim 0
      const Tensor i3 = randint(0, 3, {2, 5, 3}).to(it);      // into [2, 3, 3] along dim 1
      const Tensor s0 = values({5, 4}, dt, 12), x0 = values({6, 4}, dt, 13);
      const Tensor s1 = values({4, 5}, dt, 14), x1 = values({4, 7}, dt, 15);
      const Tensor x_big = values({7, 5}, dt, 16);  // larger than the index: only part is used
      const Tensor s3 = values({2, 3, 3}, dt, 17), x3 = values({2, 5, 3}, dt, 18);
      const Tensor s_0d = values({}, dt, 19), x_0d = values({}, dt, 20);
      for (const char* r : kReductions) {
        for (bool inc : {true, false}) {
          const std::string what =
              name_of(dt) + "/" + name_of(it) + " " + r + (inc ? " include_self" : " exclude_self");
          expect_same_on_gpu(
              [&](const On& on) { return scatter_reduce(on(s0), 0, on(i0), on(x0), r, inc); }, dt,
              what + ", dim 0");
          expect_same_on_gpu(
              [&](const On& on) { return scatter_reduce(on(s1), 1, on(i1), on(x1), r, inc); }, dt,
              what + ", dim 1");
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(s0), 0, on(i_small), on(x_big), r, inc);
              },
              dt, what + ", a smaller index, a larger src");
          expect_same_on_gpu(
              [&](const On& on) { return scatter_reduce(on(s3), 1, on(i3), on(x3), r, inc); }, dt,
              what + ", 3-d");
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(s1.t().contiguous()).t(), 0,
                                      on(i_strided.t().contiguous()).t(), on(x1.t()), r, inc);
              },
              dt, what + ", strided");
          expect_same_on_gpu(
              [&](const On& on) {
                return scatter_reduce(on(s_0d), 0, on(zeros({}, it)), on(x_0d), r, inc);
              },
              dt, what + ", 0-d");
        }
      }
    }
  }
  // Many lines (a thread each), long lines with many duplicates.
  manual_seed(21);
  const Tensor idx = randint(0, 64, {300, 3000});
  const Tensor self = values({64, 3000}, kFloat32, 22, false);
  const Tensor src = values({300, 3000}, kFloat32, 23, false);
  for (const char* r : kReductions) {
    for (bool inc : {true, false}) {
      expect_same_on_gpu(
          [&](const On& on) { return scatter_reduce(on(self), 0, on(idx), on(src), r, inc); },
          kFloat32, std::string(r) + ", 3000 lines of 300");
    }
  }
}

TEST(CudaSparse, ScatterReduceGradientsInFloat64MatchTheCpu) {
  REQUIRE_GPU();
  const std::vector<int64_t> dst = {3, 0, 3, 5, 1, 0, 3, 2, 5};
  const int64_t E = static_cast<int64_t>(dst.size());
  manual_seed(31);
  const Tensor general = randint(0, 6, {E, 3});
  const Tensor self = values({6, 3}, kFloat64, 32, false);
  // prod: one zero in src (a position with a single zero factor).
  std::vector<double> sv = vals(values({E, 3}, kFloat64, 33, false));
  sv[2 * 3 + 1] = 0.0;
  const Tensor src = tensor(sv, kFloat64).reshape({E, 3});
  const Tensor grad = values({6, 3}, kFloat64, 34, false);
  for (const char* r : kReductions) {
    for (bool inc : {true, false}) {
      for (bool segment : {true, false}) {
        const std::string what = std::string(r) + (inc ? " include_self" : " exclude_self") +
                                 (segment ? ", segment path" : ", general index");
        auto run = [&](const On& on) {
          const Tensor s = on(self).requires_grad_(true), x = on(src).requires_grad_(true);
          const Tensor idx = segment ? on(tensor(dst)).unsqueeze(1).expand({E, 3}) : on(general);
          const Tensor out = scatter_reduce(s, 0, idx, x, r, inc);
          (out * on(grad)).sum().backward();
          return std::make_tuple(out, s.grad(), x.grad());
        };
        const auto [oc, gsc, gxc] = run(kOnCpu);
        const auto [og, gsg, gxg] = run(kOnGpu);
        expect_matches(og, oc, 1e-12, 1e-12, what + ": forward");
        expect_matches(gsg, gsc, 1e-10, 1e-12, what + ": grad of self");
        expect_matches(gxg, gxc, 1e-10, 1e-12, what + ": grad of src");
      }
    }
  }
}

TEST(CudaSparse, SegmentSoftmaxAndPoolingMatchTheCpu) {
  REQUIRE_GPU();
  const Tensor ei = random_edges(500, 6000, 41);
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor logits = values({6000, 4}, dt, 42, false);
    expect_same_on_gpu([&](const On& on) { return segment_softmax(on(logits), on(ei[1]), 500); },
                       dt, "segment_softmax " + name_of(dt));
    const Tensor x = values({500, 8}, dt, 43, false);
    std::vector<int64_t> bv(500);
    for (int64_t i = 0; i < 500; ++i) bv[i] = i * 7 / 500;  // sorted; graph 7 has no node
    const Tensor batch = tensor(bv);
    expect_same_on_gpu([&](const On& on) { return nn::global_add_pool(on(x), on(batch), 8); }, dt,
                       "add pool");
    expect_same_on_gpu([&](const On& on) { return nn::global_mean_pool(on(x), on(batch), 8); }, dt,
                       "mean pool");
    expect_same_on_gpu([&](const On& on) { return nn::global_max_pool(on(x), on(batch), 8); }, dt,
                       "max pool");
  }
  // Backward in float64.
  const Tensor logits = values({6000, 2}, kFloat64, 45, false);
  const Tensor w = values({6000, 2}, kFloat64, 46, false);
  auto run = [&](const On& on) {
    const Tensor l = on(logits).requires_grad_(true);
    (segment_softmax(l, on(ei[1]), 500) * on(w)).sum().backward();
    return l.grad();
  };
  expect_matches(run(kOnGpu), run(kOnCpu), 1e-10, 1e-12, "segment_softmax backward");
}

// ---- sparse products

TEST(CudaSparse, SparseProductsMatchTheCpu) {
  REQUIRE_GPU();
  // A small matrix with duplicate entries, an empty row (2) and an unused column.
  const Tensor small = tensor(std::vector<int64_t>{0, 3, 1, 0, 3, 1, 4,  //
                                                   1, 0, 2, 1, 3, 2, 0})
                           .reshape({2, 7});
  const Tensor large = random_edges(3000, 200000, 51);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (DType it : {kInt64, kInt32}) {
      const std::string what = name_of(dt) + "/" + name_of(it);
      const Tensor ix = small.to(it);
      const Tensor w = values({7}, dt, 52, false), x = values({4, 5}, dt, 53, false);
      for (int64_t f : {1, 5, 40}) {
        const Tensor xf = values({4, f}, dt, 54, false);
        expect_same_on_gpu([&](const On& on) { return sparse_mm(on(ix), on(w), on(xf)); }, dt,
                           what + " sparse_mm F=" + std::to_string(f));
        expect_same_on_gpu([&](const On& on) { return sparse_mm(on(ix), Tensor(), on(xf), 8); }, dt,
                           what + " sparse_mm, no values, 8 rows");
      }
      // Specials in the dense operand travel as on the CPU.
      expect_same_on_gpu(
          [&](const On& on) {
            return sparse_mm(on(ix), on(w), on(values({4, 9}, dt, 55)));
          },
          dt, what + " sparse_mm with NaN and inf");
      // No columns, no entries.
      expect_same_on_gpu(
          [&](const On& on) {
            return sparse_mm(on(ix), on(w), on(values({4, 0}, dt, 56)));
          },
          dt, what + " sparse_mm F=0");
      expect_same_on_gpu(
          [&](const On& on) {
            return sparse_mm(on(zeros({2, 0}, it)), Tensor(), on(x), 3);
          },
          dt, what + " sparse_mm nnz=0");
      // The CSR form, with the row pointer of the same matrix (entries sorted stably by row).
      const Csr csr = coo_to_csr_on(kCPU, small[0], 5);
      const Tensor col = small[1].index_select(0, csr.perm).to(it);
      const Tensor wc = w.index_select(0, csr.perm);
      expect_same_on_gpu(
          [&](const On& on) { return sparse_csr_mm(on(csr.rowptr), on(col), on(wc), on(x)); }, dt,
          what + " sparse_csr_mm");
      expect_same_on_gpu(
          [&](const On& on) { return sparse_csr_mm(on(csr.rowptr), on(col), Tensor(), on(x)); }, dt,
          what + " sparse_csr_mm, no values");
      const Tensor a = values({5, 6}, dt, 57, false), b = values({4, 6}, dt, 58, false);
      expect_same_on_gpu([&](const On& on) { return sddmm(on(ix), on(a), on(b)); }, dt,
                         what + " sddmm");
      expect_same_on_gpu(
          [&](const On& on) {
            return sddmm(on(ix), on(values({5, 0}, dt, 59)), on(b.narrow(1, 0, 0)));
          },
          dt, what + " sddmm F=0");
      // Many blocks, a skewed row degree.
      const Tensor lx = large.to(it);
      const Tensor lw = values({200000}, dt, 60, false), ld = values({3000, 32}, dt, 61, false);
      expect_same_on_gpu([&](const On& on) { return sparse_mm(on(lx), on(lw), on(ld), 3000); }, dt,
                         what + " sparse_mm, large");
      expect_same_on_gpu([&](const On& on) { return sddmm(on(lx), on(ld), on(ld)); }, dt,
                         what + " sddmm, large");
    }
  }
  // More outputs than one grid covers (the grid-stride loop turns).
  const Tensor ei = random_edges(70000, 100000, 62);
  const Tensor dense = values({70000, 256}, kFloat32, 63, false);
  expect_same_on_gpu([&](const On& on) { return sparse_mm(on(ei), Tensor(), on(dense), 70000); },
                     kFloat32, "17.9M outputs");
}

TEST(CudaSparse, SparseProductGradientsInFloat64MatchTheCpu) {
  REQUIRE_GPU();
  const Tensor ei = random_edges(300, 4000, 71);
  const Tensor w = values({4000}, kFloat64, 72, false);
  const Tensor x = values({300, 6}, kFloat64, 73, false);
  const Tensor g = values({300, 6}, kFloat64, 74, false);
  auto run_coo = [&](const On& on) {
    const Tensor wv = on(w).requires_grad_(true), xv = on(x).requires_grad_(true);
    (sparse_mm(on(ei), wv, xv, 300) * on(g)).sum().backward();
    return std::make_pair(wv.grad(), xv.grad());
  };
  const auto [wc, xc] = run_coo(kOnCpu);
  const auto [wg, xg] = run_coo(kOnGpu);
  expect_matches(wg, wc, 1e-10, 1e-12, "sparse_mm: grad of values");
  expect_matches(xg, xc, 1e-10, 1e-12, "sparse_mm: grad of dense");
  // CSR.
  const Csr csr = coo_to_csr_on(kCPU, ei[0], 300);
  const Tensor col = ei[1].index_select(0, csr.perm);
  const Tensor wcsr = w.index_select(0, csr.perm);
  auto run_csr = [&](const On& on) {
    const Tensor wv = on(wcsr).requires_grad_(true), xv = on(x).requires_grad_(true);
    (sparse_csr_mm(on(csr.rowptr), on(col), wv, xv) * on(g)).sum().backward();
    return std::make_pair(wv.grad(), xv.grad());
  };
  const auto [cwc, cxc] = run_csr(kOnCpu);
  const auto [cwg, cxg] = run_csr(kOnGpu);
  expect_matches(cwg, cwc, 1e-10, 1e-12, "sparse_csr_mm: grad of values");
  expect_matches(cxg, cxc, 1e-10, 1e-12, "sparse_csr_mm: grad of dense");
  // sddmm.
  const Tensor a = values({300, 5}, kFloat64, 75, false), b = values({300, 5}, kFloat64, 76, false);
  const Tensor ge = values({4000}, kFloat64, 77, false);
  auto run_sddmm = [&](const On& on) {
    const Tensor av = on(a).requires_grad_(true), bv = on(b).requires_grad_(true);
    (sddmm(on(ei), av, bv) * on(ge)).sum().backward();
    return std::make_pair(av.grad(), bv.grad());
  };
  const auto [ac, bc] = run_sddmm(kOnCpu);
  const auto [ag, bg] = run_sddmm(kOnGpu);
  expect_matches(ag, ac, 1e-10, 1e-12, "sddmm: grad of a");
  expect_matches(bg, bc, 1e-10, 1e-12, "sddmm: grad of b");
}

// ---- the GNN layers

namespace {

// The small graph of test_gnn_layers.cpp (a duplicate edge, a self-loop, a node without
// in-edges) with explicit self-loops for GAT, and a larger random one.
Tensor small_graph() {
  return tensor(std::vector<int64_t>{0, 1, 2, 3, 4, 5, 1, 2, 3, 0, 0, 2, 6, 2,  //
                                     1, 0, 1, 2, 3, 4, 2, 3, 0, 5, 5, 2, 0, 4})
      .reshape({2, 14});
}

// Builds the layer twice with the same parameters, one on the GPU; compares the forward pass in
// float32, then in float64 the forward pass and the gradients of a weighted sum of the output
// with respect to x and every parameter.
template <class L>
void expect_layer_matches(const std::function<std::shared_ptr<L>()>& make,
                          const std::function<Tensor(L&, const Tensor&, const Tensor&)>& forward,
                          const Tensor& ei, int64_t nodes, int64_t in, const std::string& what) {
  for (DType dt : {kFloat32, kFloat64}) {
    SCOPED_TRACE(what + " " + name_of(dt));
    manual_seed(81);
    auto cpu = make();
    auto gpu = make();
    gpu->load_state_dict(cpu->state_dict());
    cpu->to(dt);
    gpu->to(dt);
    gpu->to(kGpu);
    cpu->eval();
    gpu->eval();
    const bool grads = dt == kFloat64;
    const Tensor x = values({nodes, in}, dt, 82, false);
    const Tensor xc = x.clone().requires_grad_(grads);
    const Tensor xg = x.to(kGpu).requires_grad_(grads);
    const Tensor oc = forward(*cpu, xc, ei);
    const Tensor og = forward(*gpu, xg, ei.to(kGpu));
    expect_matches(og, oc, grads ? 1e-10 : 1e-4, grads ? 1e-12 : 1e-5, "forward");
    if (!grads) continue;
    const Tensor w = values(oc.sizes(), kFloat64, 83, false);
    (oc * w).sum().backward();
    (og * w.to(kGpu)).sum().backward();
    expect_matches(xg.grad(), xc.grad(), 1e-9, 1e-11, "grad of x");
    const auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
    ASSERT_EQ(pc.size(), pg.size());
    for (size_t k = 0; k < pc.size(); ++k) {
      expect_matches(pg[k].second.grad(), pc[k].second.grad(), 1e-9, 1e-11,
                     "grad of " + pc[k].first);
    }
  }
}

}  // namespace

TEST(CudaSparse, GnnLayersForwardAndBackwardMatchTheCpu) {
  REQUIRE_GPU();
  std::vector<std::pair<std::string, std::pair<Tensor, int64_t>>> graphs = {
      {"small graph", {small_graph(), 7}}, {"random graph", {random_edges(400, 5000, 84), 400}}};
  for (const auto& [gname, graph] : graphs) {
    const auto& [ei, n] = graph;
    expect_layer_matches<nn::GCNConv>(
        [] { return std::make_shared<nn::GCNConv>(5, 4); },
        [](nn::GCNConv& l, const Tensor& x, const Tensor& e) { return l.forward(x, e); }, ei, n, 5,
        "GCNConv on the " + gname);
    expect_layer_matches<nn::GCNConv>(
        [] { return std::make_shared<nn::GCNConv>(5, 4, false, false); },
        [](nn::GCNConv& l, const Tensor& x, const Tensor& e) { return l.forward(x, e); }, ei, n, 5,
        "GCNConv without self-loops or normalisation on the " + gname);
    expect_layer_matches<nn::GCNConv>(
        [] { return std::make_shared<nn::GCNConv>(5, 4, true, true, true, true); },
        [](nn::GCNConv& l, const Tensor& x, const Tensor& e) {
          (void)l.forward(x, e);
          return l.forward(x, e);  // the cached graph
        },
        ei, n, 5, "cached GCNConv on the " + gname);
    const Tensor ew = values({ei.size(1)}, kFloat32, 85, false).abs() + 0.1;
    expect_layer_matches<nn::GCNConv>([] { return std::make_shared<nn::GCNConv>(5, 4); },
                                      [ew](nn::GCNConv& l, const Tensor& x, const Tensor& e) {
                                        return l.forward(x, e, ew.to(x.device(), x.dtype()));
                                      },
                                      ei, n, 5, "GCNConv with edge weights on the " + gname);
    for (const char* aggr : {"mean", "sum", "max"}) {
      expect_layer_matches<nn::SAGEConv>(
          [aggr] { return std::make_shared<nn::SAGEConv>(5, 3, aggr); },
          [](nn::SAGEConv& l, const Tensor& x, const Tensor& e) { return l.forward(x, e); }, ei, n,
          5, std::string("SAGEConv ") + aggr + " on the " + gname);
    }
    expect_layer_matches<nn::GINConv>(
        [] {
          return std::make_shared<nn::GINConv>(std::make_shared<nn::Linear>(5, 3), 0.25, true);
        },
        [](nn::GINConv& l, const Tensor& x, const Tensor& e) { return l.forward(x, e); }, ei, n, 5,
        "GINConv on the " + gname);
    // GAT with its self-loops given in the graph (add_self_loops would need nonzero).
    const Tensor loops = arange(n, kInt64).unsqueeze(0).expand({2, n});
    const Tensor ei_loops = cat({ei, loops}, 1);
    for (bool concat : {true, false}) {
      expect_layer_matches<nn::GATConv>(
          [concat] { return std::make_shared<nn::GATConv>(5, 3, 2, concat, 0.2, 0.0, false); },
          [](nn::GATConv& l, const Tensor& x, const Tensor& e) { return l.forward(x, e); },
          ei_loops, n, 5,
          std::string("GATConv ") + (concat ? "concat" : "mean") + " on the " + gname);
    }
  }
}

TEST(CudaSparse, GraphLevelGnnModelsMatchTheCpu) {
  REQUIRE_GPU();
  // Three graphs batched as one disjoint graph.
  const Tensor ei = tensor(std::vector<int64_t>{0, 1, 2, 1, 4, 5, 6, 5, 7, 3,  //
                                                1, 2, 0, 0, 5, 6, 7, 4, 4, 3})
                        .reshape({2, 10});
  const Tensor batch = tensor(std::vector<int64_t>{0, 0, 0, 1, 2, 2, 2, 2});
  for (const char* kind : {"gcn", "sage", "gin"}) {
    for (const char* pool : {"add", "mean", "max"}) {
      SCOPED_TRACE(std::string(kind) + " " + pool);
      manual_seed(91);
      const nn::GNNOptions opts{.kind = kind,
                                .in_channels = 4,
                                .hidden = 8,
                                .out_channels = 3,
                                .layers = 2,
                                .dropout = 0.0,
                                .heads = 2,
                                .pool = pool};
      auto cpu = std::make_shared<nn::GNN>(opts);
      auto gpu = std::make_shared<nn::GNN>(opts);
      gpu->load_state_dict(cpu->state_dict());
      cpu->to(kFloat64);
      gpu->to(kFloat64);
      gpu->to(kGpu);
      cpu->eval();
      gpu->eval();
      const Tensor x = values({8, 4}, kFloat64, 92, false);
      const Tensor oc = cpu->forward(x, ei, batch, 3);
      const Tensor og = gpu->forward(x.to(kGpu), ei.to(kGpu), batch.to(kGpu), 3);
      expect_matches(og, oc, 1e-10, 1e-12, "forward");
      oc.sum().backward();
      og.sum().backward();
      const auto pc = cpu->named_parameters(), pg = gpu->named_parameters();
      for (size_t k = 0; k < pc.size(); ++k) {
        expect_matches(pg[k].second.grad(), pc[k].second.grad(), 1e-9, 1e-11,
                       "grad of " + pc[k].first);
      }
    }
  }
}

// ---- bad indices

TEST(CudaSparse, BadIndicesGiveTheCpusErrorsOnTheGpu) {
  REQUIRE_GPU();
  const Tensor self = zeros({4, 2}), src = ones({4, 2});
  for (DType it : {kInt64, kInt32}) {
    SCOPED_TRACE(name_of(it));
    // The segment path: the first bad index in order (5, not -1 or 4).
    const Tensor v = tensor(std::vector<int64_t>{0, 5, -1, 4}).to(it);
    EXPECT_THAT(
        same_error_on_gpu([&](const On& on) {
          (void)scatter_reduce(on(self), 0, on(v).unsqueeze(1).expand({4, 2}), on(src), "amax");
        }),
        HasSubstr("scatter_reduce: index 5 is out of bounds for dimension 0 with size 4"));
    // The general path: lines are columns here; column 0's bad index (9, at its end) comes
    // before column 1's (7, earlier in its line).
    const Tensor g = tensor(std::vector<int64_t>{0, 1, 1, 7, 9, 0}).reshape({3, 2}).to(it);
    EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                  (void)scatter_reduce(on(self), 0, on(g), on(src), "mean", false);
                }),
                HasSubstr("scatter_reduce: index 9 is out of bounds for dimension 0 with size 4"));
    const Tensor neg = tensor(std::vector<int64_t>{0, 1, 0, -1}).reshape({2, 2}).to(it);
    EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                  (void)scatter_reduce(on(self), 1, on(neg), on(src), "sum");
                }),
                HasSubstr("scatter_reduce: index -1 is out of bounds for dimension 1 with size 2"));
    // sparse_mm: rows, then columns (the first bad column in order: 9).
    const Tensor x = ones({3, 2});
    EXPECT_THAT(
        same_error_on_gpu([&](const On& on) {
          (void)sparse_mm(on(tensor(std::vector<int64_t>{0, 3, 1, 2}).reshape({2, 2}).to(it)),
                          Tensor(), on(x), 2);
        }),
        HasSubstr("sparse_mm: row index 3 is out of bounds for a sparse matrix with 2 rows"));
    EXPECT_THAT(
        same_error_on_gpu([&](const On& on) {
          (void)sparse_mm(on(tensor(std::vector<int64_t>{0, 1, 1, 0, 9, 7}).reshape({2, 3}).to(it)),
                          Tensor(), on(x));
        }),
        HasSubstr("sparse_mm: column index 9 is out of bounds for dense of shape [3, 2] (valid "
                  "columns are [0, 3))"));
    EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                  (void)sparse_csr_mm(on(tensor(std::vector<int64_t>{0, 1, 2})),
                                      on(tensor(std::vector<int64_t>{0, 7}).to(it)), Tensor(),
                                      on(x));
                }),
                HasSubstr("sparse_csr_mm: column index 7 is out of bounds for dense of shape "
                          "[3, 2]"));
    // sddmm: a bad row wins over an earlier bad column.
    EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                  (void)sddmm(
                      on(tensor(std::vector<int64_t>{0, 0, 5, 4, 1, 0}).reshape({2, 3}).to(it)),
                      on(x), on(x));
                }),
                HasSubstr("sddmm: row index 5 is out of bounds for a of shape [3, 2]"));
    EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                  (void)sddmm(
                      on(tensor(std::vector<int64_t>{0, 1, 2, 1, -2, 8}).reshape({2, 3}).to(it)),
                      on(x), on(x));
                }),
                HasSubstr("sddmm: column index -2 is out of bounds for b of shape [3, 2]"));
  }
  EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                (void)sparse_csr_mm(on(tensor(std::vector<int64_t>{0, 2, 1})),
                                    on(tensor(std::vector<int64_t>{0, 1})), Tensor(),
                                    on(ones({3, 2})));
              }),
              HasSubstr("sparse_csr_mm: crow_indices is not a valid row pointer for 2 entries at "
                        "position 2"));
  // Deep in a large index, in different blocks: the first bad one in order.
  std::vector<int64_t> big(200000, 1);
  big[120000] = 777;
  big[190000] = -3;
  const Tensor bi = tensor(big);
  EXPECT_THAT(same_error_on_gpu([&](const On& on) {
                (void)scatter_reduce(on(zeros({5, 3})), 0, on(bi).unsqueeze(1).expand({200000, 3}),
                                     on(ones({200000, 3})), "sum");
              }),
              HasSubstr("index 777 is out of bounds"));
  EXPECT_THAT(
      same_error_on_gpu([&](const On& on) {
        (void)sparse_mm(on(stack({zeros({200000}, kInt64), bi}, 0)), Tensor(), on(ones({5, 3})), 1);
      }),
      HasSubstr("column index 777 is out of bounds"));
  // The GPU still works after the errors (nothing sticky).
  expect_same_on_gpu(
      [&](const On& on) {
        return scatter_reduce(
            on(self), 0, on(tensor(std::vector<int64_t>{0, 3, 3, 1})).unsqueeze(1).expand({4, 2}),
            on(src), "sum");
      },
      kFloat32, "after the errors");
}
