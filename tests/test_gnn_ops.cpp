// The graph ops beyond the op table: error messages, determinism over thread counts on graphs
// large enough for the parallel kernels, agreement with index_add / dense products, and the
// prod reduction's double-backward guard.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <algorithm>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

// A random graph with a skewed (power-law-like) in-degree: targets drawn as floor(n * u^3).
Tensor random_edges(int64_t n, int64_t e, uint64_t seed) {
  manual_seed(seed);
  Tensor src = randint(0, n, {e});
  Tensor u = rand({e}, kFloat64);
  Tensor dst = (u * u * u * double(n)).floor().to(kInt64).clamp(0, n - 1);
  return stack({src, dst}, 0);
}

struct Threads {
  int old = get_num_threads();
  explicit Threads(int n) { set_num_threads(n); }
  ~Threads() { set_num_threads(old); }
};

TEST(ScatterReduce, ErrorsNameTheOpAndTheFault) {
  Tensor self = zeros({3, 2});
  Tensor idx = tensor({0, 2}).unsqueeze(1).expand({2, 2});
  Tensor src = ones({2, 2});
  EXPECT_THAT(error_of([&] { scatter_reduce(self, 0, idx, src, "max"); }),
              HasSubstr("scatter_reduce: reduce must be one of 'sum', 'prod', 'mean', 'amax', "
                        "'amin', but got 'max'"));
  EXPECT_THAT(error_of([&] { scatter_reduce(self, 0, idx.to(kFloat32), src, "sum"); }),
              HasSubstr("scatter_reduce: expected an index tensor of dtype int64 or int32, but "
                        "got float32"));
  EXPECT_THAT(error_of([&] { scatter_reduce(self, 0, idx, src.to(kFloat64), "sum"); }),
              HasSubstr("scatter_reduce: expected self and src to have the same dtype, but got "
                        "float32 and float64"));
  EXPECT_THAT(error_of([&] {
                scatter_reduce(self, 0, tensor({0, 1}), src, "sum");
              }),
              HasSubstr("scatter_reduce: index and src must have as many dims as self, but got "
                        "self of shape [3, 2], index of shape [2]"));
  EXPECT_THAT(error_of([&] {
                scatter_reduce(self, 0, idx, ones({2, 1}), "sum");
              }),
              HasSubstr("scatter_reduce: index of shape [2, 2] is larger than src of shape [2, 1] "
                        "at dim 1"));
  EXPECT_THAT(error_of([&] {
                scatter_reduce(self, 1, tensor({0, 1, 0, 0, 0, 0, 0, 0}).reshape({4, 2}),
                               ones({4, 2}), "sum");
              }),
              HasSubstr("scatter_reduce: index of shape [4, 2] is larger than self of shape "
                        "[3, 2] at dim 0 (only dim 1 may be larger)"));
  // Out-of-range index values, on the segment path and on the general path.
  Tensor bad = tensor({0, 3}).unsqueeze(1).expand({2, 2});
  EXPECT_THAT(error_of([&] { scatter_reduce(self, 0, bad, src, "amax"); }),
              HasSubstr("scatter_reduce: index 3 is out of bounds for dimension 0 with size 3"));
  EXPECT_THAT(error_of([&] {
                scatter_reduce(self, 1, tensor({0, 1, -1, 0}).reshape({2, 2}), src, "mean");
              }),
              HasSubstr("scatter_reduce: index -1 is out of bounds for dimension 1 with size 2"));
  EXPECT_THAT(error_of([&] { scatter_reduce(self, 2, idx, src, "sum"); }),
              HasSubstr("scatter_reduce"));
}

TEST(ScatterReduce, MatchesIndexAddAndIsDeterministicOverThreads) {
  const int64_t n = 3000, e = 100000, f = 16;  // enough entries for the parallel sort
  Tensor ei = random_edges(n, e, 1);
  Tensor x = randn({e, f});
  Tensor dst = ei[1];
  Tensor idx = dst.unsqueeze(1).expand({e, f});
  Tensor one, two;
  {
    Threads t(1);
    one = scatter_reduce(zeros({n, f}), 0, idx, x, "sum");
  }
  {
    Threads t(2);
    two = scatter_reduce(zeros({n, f}), 0, idx, x, "sum");
  }
  EXPECT_TRUE(equal(one, two)) << "the result depends on the thread count";
  EXPECT_TRUE(allclose(one, zeros({n, f}).index_add(0, dst, x), 1e-5, 1e-4));
  // amax with include_self=false against a loop.
  Tensor mx = scatter_reduce(zeros({n, f}), 0, idx, x, "amax", false);
  std::vector<double> want(n * f, 0.0);
  std::vector<bool> seen(n, false);
  const auto xv = vals(x), dv = vals(dst);
  for (int64_t k = 0; k < e; ++k) {
    const auto d = static_cast<int64_t>(dv[k]);
    for (int64_t j = 0; j < f; ++j) {
      double& w = want[d * f + j];
      w = seen[d] ? std::max(w, xv[k * f + j]) : xv[k * f + j];
    }
    seen[d] = true;
  }
  EXPECT_EQ(vals(mx), want);
}

TEST(ScatterReduce, IntegerMeanFloorsLikePyTorch) {
  Tensor self = tensor({0, 0});
  Tensor r = scatter_reduce(self, 0, tensor({0, 0, 1}), tensor({-3, -4, 5}), "mean", false);
  EXPECT_EQ(vals(r), (std::vector<double>{-4, 5}));  // floor(-7 / 2) = -4
}

// uint8 sums and counts wrap at 256, and a count that wraps to 0 divides by 1 (PyTorch 1.13
// gives [0, 0] and [1, 0] here): no division by zero.
TEST(ScatterReduce, Uint8MeanOfManyEntriesWrapsLikePyTorch) {
  const Tensor self = zeros({2}, kUInt8);
  for (auto [n, want] : {std::pair<int64_t, double>{256, 0}, {300, 1}}) {
    const Tensor src = full({n}, 7, kUInt8), idx = zeros({n}, kInt64);
    for (const Tensor& r : {scatter_reduce(self, 0, idx, src, "mean", false),
                            scatter_reduce(self.unsqueeze(1), 0, idx.unsqueeze(1),
                                           src.unsqueeze(1), "mean", false).squeeze(1)}) {
      EXPECT_EQ(vals(r), (std::vector<double>{want, 0})) << n << " entries";
    }
  }
}

TEST(ScatterReduce, ProdTwoZerosFirstOrderGradientAndDoubleBackwardError) {
  Tensor self = tensor({2.0, 3.0}, kFloat64).requires_grad_(true);
  Tensor src = tensor({0.0, 0.0, 5.0, 4.0}, kFloat64).requires_grad_(true);
  Tensor idx = tensor({0, 0, 0, 1});
  Tensor out = scatter_reduce(self, 0, idx, src, "prod");
  auto g = autograd::grad({out.sum()}, {src}, {}, std::nullopt, true);
  // Position 0 is 2 * 0 * 0 * 5: every partial derivative there includes a zero factor.
  EXPECT_EQ(vals(g[0]), (std::vector<double>{0, 0, 0, 3}));
  EXPECT_THAT(error_of([&] { g[0].sum().backward(); }),
              HasSubstr("scatter_reduce: double backward of reduce='prod' is not supported when "
                        "two or more zeros of src reach the same position"));
}

TEST(SparseMM, ErrorsNameTheOpAndTheFault) {
  Tensor x = ones({3, 2});
  Tensor ei = tensor({0, 1, 1, 2}).reshape({2, 2});
  EXPECT_THAT(error_of([&] { sparse_mm(ei.reshape({4}), Tensor(), x); }),
              HasSubstr("sparse_mm: expected indices of shape [2, nnz], but got [4]"));
  EXPECT_THAT(error_of([&] { sparse_mm(ei, ones({3}), x); }),
              HasSubstr("sparse_mm: expected values of shape [2] (one per entry), but got [3]"));
  EXPECT_THAT(error_of([&] { sparse_mm(ei, ones({2}, kFloat64), x); }),
              HasSubstr("sparse_mm: expected values and dense to have the same dtype, but got "
                        "float64 and float32"));
  EXPECT_THAT(error_of([&] { sparse_mm(ei, Tensor(), ones({3})); }),
              HasSubstr("sparse_mm: expected a 2-D dense matrix, but got shape [3]"));
  EXPECT_THAT(error_of([&] { sparse_mm(ei, Tensor(), x, 1); }),
              HasSubstr("sparse_mm: row index 1 is out of bounds for a sparse matrix with 1 rows"));
  EXPECT_THAT(error_of([&] {
                sparse_mm(tensor({0, 1, 1, 3}).reshape({2, 2}), Tensor(), x);
              }),
              HasSubstr("sparse_mm: column index 3 is out of bounds for dense of shape [3, 2] "
                        "(valid columns are [0, 3))"));
  EXPECT_THAT(error_of([&] {
                sparse_csr_mm(tensor({0, 2, 1}), tensor({0, 1}), Tensor(), x);
              }),
              HasSubstr("sparse_csr_mm: crow_indices is not a valid row pointer for 2 entries at "
                        "position 2"));
  EXPECT_THAT(
      error_of([&] {
        sparse_csr_mm(tensor({0, 1, 2}), tensor({0, 7}), Tensor(), x);
      }),
      HasSubstr("sparse_csr_mm: column index 7 is out of bounds for dense of shape [3, 2]"));
  EXPECT_THAT(error_of([&] {
                sddmm(tensor({0, 5, 0, 1}).reshape({2, 2}), x, x);
              }),
              HasSubstr("sddmm: row index 5 is out of bounds for a of shape [3, 2]"));
  EXPECT_THAT(error_of([&] {
                sddmm(ei, x, ones({3, 4}));
              }),
              HasSubstr("sddmm: a and b must have the same dtype and number of columns"));
}

TEST(SparseMM, MatchesDenseProductAndIsDeterministicOverThreads) {
  const int64_t n = 2000, e = 100000, f = 32;
  Tensor ei = random_edges(n, e, 2);
  Tensor w = rand({e});
  Tensor x = randn({n, f});
  Tensor one, two;
  {
    Threads t(1);
    one = sparse_mm(ei, w, x, n);
  }
  {
    Threads t(2);
    two = sparse_mm(ei, w, x, n);
  }
  EXPECT_TRUE(equal(one, two));
  // The same as gathering the columns and adding at the rows.
  Tensor want = zeros({n, f}).index_add(0, ei[0], x.index_select(0, ei[1]) * w.unsqueeze(1));
  EXPECT_TRUE(allclose(one, want, 1e-4, 1e-4));
  // The CSR form of the same matrix (entries stably sorted by row) gives the same bits.
  const auto rv = vals(ei[0]), cv = vals(ei[1]), wv = vals(w);
  std::vector<int64_t> crow(n + 1, 0), col;
  std::vector<float> cw;
  for (double r : rv) ++crow[static_cast<int64_t>(r) + 1];
  for (int64_t r = 0; r < n; ++r) crow[r + 1] += crow[r];
  std::vector<int64_t> order(e);
  for (int64_t k = 0; k < e; ++k) order[k] = k;
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return rv[a] < rv[b]; });
  for (int64_t k : order) {
    col.push_back(static_cast<int64_t>(cv[k]));
    cw.push_back(static_cast<float>(wv[k]));
  }
  EXPECT_TRUE(equal(sparse_csr_mm(tensor(crow), tensor(col), tensor(cw), x), one));
}

TEST(GraphUtils, ErrorsNameTheOpAndTheFault) {
  EXPECT_THAT(
      error_of([&] {
        add_self_loops(tensor({0, 1, 2}));
      }),
      HasSubstr("add_self_loops: expected edge_index of shape [2, num_edges], but got [3]"));
  EXPECT_THAT(
      error_of([&] {
        gcn_norm(tensor({0, 1, 1, 0}).reshape({2, 2}), ones({3}));
      }),
      HasSubstr("gcn_norm: expected floating edge_weight of shape [2], but got float32[3]"));
  EXPECT_THAT(error_of([&] {
                gcn_norm(tensor({0, 5, 1, 0}).reshape({2, 2}), Tensor(), 3);
              }),
              HasSubstr("gcn_norm: edge_index does not fit num_nodes = 3: index_select: index 5 "
                        "is out of bounds for dimension 0 with size 3"));
  EXPECT_THAT(error_of([&] {
                degree(tensor({0, 4}), 3);
              }),
              HasSubstr("degree: index_add: index 4 is out of bounds for dimension 0 with size 3 "
                        "(num_nodes = 3)"));
  EXPECT_THAT(error_of([&] {
                degree(tensor({0, -1}));
              }),
              HasSubstr("degree: indices must be non-negative, but got -1"));
  EXPECT_THAT(error_of([&] {
                segment_softmax(ones({3, 2}), tensor({0, 1}));
              }),
              HasSubstr("segment_softmax: expected index of shape [E] and src of shape [E, ...], "
                        "but got index of shape [2] and src of shape [3, 2]"));
}

TEST(GraphUtils, GcnNormIsTheDenseSymmetricNormalisation) {
  // A path 0 - 1 - 2 plus an isolated node 3, both directions.
  Tensor ei = tensor({0, 1, 1, 2, 1, 0, 2, 1}).reshape({2, 4});
  auto [e2, w] = gcn_norm(ei, Tensor(), 4);
  Tensor a = eye(4);
  a.index_put_({ei[1], ei[0]}, ones({4}));
  a = a + zeros({4, 4});
  Tensor d = a.sum({1}).pow(-0.5);
  Tensor want = d.unsqueeze(1) * a * d.unsqueeze(0);
  Tensor got = sparse_mm(stack({e2[1], e2[0]}), w, eye(4), 4);
  EXPECT_TRUE(allclose(got, want, 1e-6, 1e-6));
  EXPECT_EQ(vals(degree(ei[1], 4)), (std::vector<double>{1, 2, 1, 0}));
}

}  // namespace
}  // namespace ignis

namespace ignis {
namespace {

// Every graph op, forward and backward, gives the same bits with 1 and 2 threads on a
// power-law-like graph large enough for the parallel kernels: each reduction of scatter_reduce
// (with and without self; a vector index along the rows, as message passing uses it, and a
// general index along dim 1), segment_softmax, sparse_mm (gradients to the dense operand and
// to the edge values), sddmm, degree and gcn_norm.
TEST(GraphOps, ForwardAndBackwardAreDeterministicOverThreads) {
  const int64_t n = 2000, e = 70000, f = 4;  // e > 2 * 32768: the parallel counting sort
  const Tensor ei = random_edges(n, e, 7);
  manual_seed(8);
  const Tensor x0 = randn({e, f}), w0 = rand({e}) + 0.5, d0 = randn({n, f}), s0 = randn({e, 4});
  const Tensor general_index = randint(0, f, {n, 3 * f});
  const Tensor general_src0 = randn({n, 3 * f});
  // Runs everything on `threads` threads; returns every output and gradient.
  auto run = [&](int threads) {
    Threads t(threads);
    std::vector<Tensor> out;
    const Tensor idx = ei[1].unsqueeze(1).expand({e, f});
    for (const char* reduce : {"sum", "mean", "amax", "amin", "prod"}) {
      for (bool include_self : {true, false}) {
        Tensor src = (x0 * 0.5 + (std::string(reduce) == "prod" ? 1.0 : 0.0)).requires_grad_();
        Tensor self = d0.clone().requires_grad_();
        Tensor r = scatter_reduce(self, 0, idx, src, reduce, include_self);
        r.backward(ones_like(r));
        out.insert(out.end(), {r.detach(), src.grad(), self.grad()});
      }
      Tensor gsrc = general_src0.clone().requires_grad_();
      Tensor g = scatter_reduce(zeros({n, f}), 1, general_index, gsrc, reduce, false);
      g.backward(ones_like(g));
      out.insert(out.end(), {g.detach(), gsrc.grad()});
    }
    Tensor s = s0.clone().requires_grad_();
    Tensor sm = segment_softmax(s, ei[1], n);
    (sm * s0).sum().backward();
    out.insert(out.end(), {sm.detach(), s.grad()});
    Tensor w = w0.clone().requires_grad_(), d = d0.clone().requires_grad_();
    Tensor p = sparse_mm(ei, w, d, n);
    (p * d0).sum().backward();
    out.insert(out.end(), {p.detach(), w.grad(), d.grad()});
    out.push_back(sddmm(ei, d0, d0));
    out.push_back(degree(ei[1], n));
    auto [gi, gw] = gcn_norm(ei, w0, n, true);
    out.insert(out.end(), {gi, gw});
    return out;
  };
  const std::vector<Tensor> one = run(1), two = run(2);
  ASSERT_EQ(one.size(), two.size());
  for (size_t i = 0; i < one.size(); ++i) {
    ASSERT_TRUE(one[i].defined() && two[i].defined()) << "result " << i;
    EXPECT_TRUE(equal(one[i], two[i])) << "result " << i << " depends on the thread count";
  }
}

}  // namespace
}  // namespace ignis
