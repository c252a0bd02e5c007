// Indexing and joining ops: advanced-indexing semantics against hand-computed values, the
// in-place forms, autograd through indexing, the parallel index_add path, and error messages.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <numeric>

#include "ignis/ignis.h"
#include "ignis/op_registry.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;

// 0, 1, 2, ... as float64 of `shape`.
Tensor seq(IntArrayRef shape, DType dt = kFloat64) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  std::iota(v.begin(), v.end(), 0.0);
  return tensor(v, kFloat64).reshape(shape).to(dt);
}

Tensor ints(std::vector<int64_t> v) { return tensor(v); }
// An int64 matrix from rows.
Tensor mat(const std::vector<std::vector<int64_t>>& rows) {
  std::vector<int64_t> flat;
  for (const auto& r : rows) flat.insert(flat.end(), r.begin(), r.end());
  return tensor(flat).reshape({static_cast<int64_t>(rows.size()),
                               rows.empty() ? 0 : static_cast<int64_t>(rows[0].size())});
}

std::vector<int64_t> shape_of(const Tensor& t) { return t.sizes().vec(); }

using V = std::vector<double>;
using S = std::vector<int64_t>;

// ---- index_select / gather / scatter / index_add

TEST(IndexSelect, Values) {
  Tensor x = seq({3, 4});
  Tensor r = x.index_select(0, ints({2, 0, 2}));
  EXPECT_EQ(shape_of(r), (S{3, 4}));
  EXPECT_EQ(vals(r), (V{8, 9, 10, 11, 0, 1, 2, 3, 8, 9, 10, 11}));
  Tensor c = x.index_select(-1, ints({3, 1}));
  EXPECT_EQ(vals(c), (V{3, 1, 7, 5, 11, 9}));
  // int32 index, a transposed input, a 0-d index.
  Tensor t = x.t().index_select(0, tensor(std::vector<int64_t>{1}, kInt32));
  EXPECT_EQ(vals(t), (V{1, 5, 9}));
  EXPECT_EQ(shape_of(x.index_select(1, ints({2}).reshape({}))), (S{3, 1}));
  EXPECT_EQ(shape_of(x.index_select(0, ints({}))), (S{0, 4}));
}

TEST(IndexSelect, Errors) {
  Tensor x = seq({3, 4});
  EXPECT_THAT(error_of([&] { x.index_select(0, ints({1, 3})); }),
              HasSubstr("index_select: index 3 is out of bounds for dimension 0 with size 3"));
  EXPECT_THAT(error_of([&] { x.index_select(1, ints({-1})); }),
              HasSubstr("index -1 is out of bounds for dimension 1 with size 4"));
  EXPECT_THAT(error_of([&] { x.index_select(0, tensor({1.0})); }),
              HasSubstr("index_select: expected an index tensor of dtype int64 or int32, but got "
                        "float32"));
  EXPECT_THAT(error_of([&] { x.index_select(0, ints({0, 1}).reshape({1, 2})); }),
              HasSubstr("index must be a 1-D"));
  EXPECT_THAT(error_of([&] { x.index_select(2, ints({0})); }), HasSubstr("index_select"));
}

TEST(Gather, Values) {
  Tensor x = seq({2, 3});  // [[0,1,2],[3,4,5]]
  Tensor g = x.gather(1, mat({{2, 0}, {1, 1}}));
  EXPECT_EQ(vals(g), (V{2, 0, 4, 4}));
  Tensor g0 = x.gather(0, mat({{1, 0, 1}}));
  EXPECT_EQ(vals(g0), (V{3, 1, 5}));
  EXPECT_THAT(error_of([&] { x.gather(1, mat({{3}})); }),
              HasSubstr("gather: index 3 is out of bounds for dimension 1 with size 3"));
  EXPECT_THAT(error_of([&] { x.gather(1, ints({0})); }),
              HasSubstr("gather: index tensor must have the same number of dimensions as the "
                        "input tensor, but got index of shape [1] and input of shape [2, 3]"));
  EXPECT_THAT(error_of([&] { x.gather(1, mat({{0}, {0}, {0}})); }),
              HasSubstr("gather: index of shape [3, 1] is larger than the input of shape [2, 3] "
                        "at dimension 0"));
}

TEST(Scatter, ValuesAndInPlace) {
  Tensor x = zeros({2, 4}, kFloat64);
  Tensor src = seq({2, 2}) + 1;  // [[1,2],[3,4]]
  Tensor idx = mat({{3, 0}, {1, 1}});
  EXPECT_EQ(vals(x.scatter(1, idx, src)), (V{2, 0, 0, 1, 0, 4, 0, 0}));  // duplicate: last wins
  EXPECT_EQ(vals(x.scatter_add(1, idx, src)), (V{2, 0, 0, 1, 0, 7, 0, 0}));
  EXPECT_EQ(vals(x), (V(8, 0.0)));  // out of place
  x.scatter_add_(1, idx, src);
  x.scatter_add_(1, idx, src);
  EXPECT_EQ(vals(x), (V{4, 0, 0, 2, 0, 14, 0, 0}));
  x.scatter_(0, mat({{1, 0}}), src);  // src larger than index: only src[0, :2] is used
  EXPECT_EQ(vals(x), (V{4, 2, 0, 2, 1, 14, 0, 0}));
}

TEST(Scatter, Errors) {
  Tensor x = zeros({2, 4}, kFloat64);
  EXPECT_THAT(error_of([&] { x.scatter(1, mat({{4}}), seq({1, 1})); }),
              HasSubstr("scatter: index 4 is out of bounds for dimension 1 with size 4"));
  EXPECT_THAT(error_of([&] { x.scatter_add(0, mat({{0, 1}}), seq({1, 1})); }),
              HasSubstr("scatter_add: index of shape [1, 2] is larger than src of shape [1, 1]"));
  EXPECT_THAT(error_of([&] { x.scatter(0, mat({{0}}), seq({1, 1}, kFloat32)); }),
              HasSubstr("expected self and src to have the same dtype, but got float64 and "
                        "float32"));
  EXPECT_THAT(error_of([&] { x.scatter(0, mat({{0}}), seq({1})); }),
              HasSubstr("src tensor must have the same number of dimensions"));
}

TEST(IndexAdd, ValuesAlphaDuplicates) {
  Tensor x = ones({4, 2}, kFloat64);
  Tensor src = seq({3, 2});  // rows [0,1],[2,3],[4,5]
  Tensor r = x.index_add(0, ints({3, 0, 3}), src, 2);
  EXPECT_EQ(vals(r), (V{5, 7, 1, 1, 1, 1, 9, 13}));
  Tensor c = x.index_add(1, ints({1, 1, 0}), seq({4, 3}));
  EXPECT_EQ(vals(c), (V{3, 2, 6, 8, 9, 14, 12, 20}));
  x.index_add_(0, ints({1}), seq({1, 2}), -1);
  EXPECT_EQ(vals(x), (V{1, 1, 1, 0, 1, 1, 1, 1}));
  // Integer dtypes and a non-contiguous self (the dense-copy fallback).
  Tensor xi = zeros({2, 3}, kInt64);
  xi.index_add_(1, ints({2, 2}), mat({{1, 2}, {3, 4}}));
  EXPECT_EQ(vals(xi), (V{0, 0, 3, 0, 0, 7}));
  Tensor base = zeros({3, 2, 4}, kFloat64);
  Tensor tv = base.permute({2, 0, 1});  // [4, 3, 2], non-contiguous
  tv.index_add_(1, ints({0, 2}), ones({4, 2, 2}, kFloat64));
  EXPECT_DOUBLE_EQ(base.sum().item<double>(), 16);
  EXPECT_DOUBLE_EQ(base[1].sum().item<double>(), 0);
}

TEST(IndexAdd, Errors) {
  Tensor x = zeros({4, 2}, kFloat64);
  EXPECT_THAT(error_of([&] { x.index_add(0, ints({4}), ones({1, 2}, kFloat64)); }),
              HasSubstr("index_add: index 4 is out of bounds for dimension 0 with size 4"));
  EXPECT_THAT(error_of([&] { x.index_add(0, ints({0, 1}), ones({3, 2}, kFloat64)); }),
              HasSubstr("index_add: source of shape [3, 2] does not match self of shape [4, 2] "
                        "with 2 indices along dimension 0 (expected source shape [2, 2])"));
  EXPECT_THAT(error_of([&] { x.index_add(0, ints({0}), ones({1, 2}, kFloat32)); }),
              HasSubstr("same dtype"));
  // A bad index leaves self untouched.
  EXPECT_THAT(error_of([&] { x.index_add_(0, ints({0, 9}), ones({2, 2}, kFloat64)); }),
              HasSubstr("index 9"));
  EXPECT_DOUBLE_EQ(x.sum().item<double>(), 0);
}

// The GNN message-passing shape: a large [E, F] source into [N, F] (the parallel, bucketed path),
// against a plain serial loop.
TEST(IndexAdd, LargeParallelMatchesSerial) {
  const int64_t N = 1000, E = 60000, F = 16;
  Tensor idx = randint(0, N, {E});
  Tensor src = randn({E, F}, kFloat64);
  Tensor out = zeros({N, F}, kFloat64).index_add(0, idx, src, 0.5);
  std::vector<double> want(N * F, 0.0);
  const int64_t* ip = idx.data_ptr<int64_t>();
  const double* sp = src.data_ptr<double>();
  for (int64_t e = 0; e < E; ++e) {
    for (int64_t f = 0; f < F; ++f) want[ip[e] * F + f] += 0.5 * sp[e * F + f];
  }
  const std::vector<double> got = vals(out);
  for (int64_t k = 0; k < N * F; ++k) ASSERT_NEAR(got[k], want[k], 1e-9) << k;
  // scatter_add with the expanded index (the PyG idiom) takes the same path.
  Tensor s = zeros({N, F}, kFloat64).scatter_add(0, idx.unsqueeze(1).expand({E, F}), src);
  const std::vector<double> got2 = vals(s);
  for (int64_t k = 0; k < N * F; ++k) ASSERT_NEAR(got2[k], 2 * want[k], 1e-9) << k;
  // Scalar features (F = 1, dim 0 of a 1-D tensor): node degrees.
  Tensor deg = zeros({N}, kFloat64).index_add(0, idx, ones({E}, kFloat64));
  EXPECT_DOUBLE_EQ(deg.sum().item<double>(), static_cast<double>(E));
}

// The bucketed parallel path adds each destination's rows in edge order, so any thread count
// gives the serial result bit for bit.
TEST(IndexAdd, DeterministicAcrossThreadCounts) {
  const int64_t N = 300, E = 50000, F = 8;
  Tensor idx = randint(0, N, {E});
  Tensor src = randn({E, F});
  const int before = get_num_threads();
  set_num_threads(1);
  Tensor serial = zeros({N, F}).index_add(0, idx, src, 0.25);
  for (int t : {2, 3, 5, 8}) {
    set_num_threads(t);
    Tensor par = zeros({N, F}).index_add(0, idx, src, 0.25);
    EXPECT_TRUE(equal(par, serial)) << t << " threads";
    // dim 1 of a [F, N] destination: outer = F rows, the same bucketing per row.
    Tensor par1 = zeros({F, N}).index_add(1, idx, src.t(), 0.25);
    EXPECT_TRUE(equal(par1, serial.t())) << t << " threads, dim 1";
  }
  set_num_threads(before);
}

TEST(IndexAdd, Autograd) {
  Tensor x = ones({3, 2}, TensorOptions(kFloat64).requires_grad(true));
  Tensor src = seq({2, 2}).requires_grad_(true);
  Tensor y = x.index_add(0, ints({2, 2}), src, 3);
  (y * seq({3, 2})).sum().backward();
  EXPECT_EQ(vals(x.grad()), (V{0, 1, 2, 3, 4, 5}));
  EXPECT_EQ(vals(src.grad()), (V{12, 15, 12, 15}));
}

// ---- masks

TEST(MaskedFill, ValuesBroadcastInPlace) {
  Tensor x = seq({2, 3});
  Tensor m = tensor(std::vector<bool>{true, false, true});
  EXPECT_EQ(vals(x.masked_fill(m, -1)), (V{-1, 1, -1, -1, 4, -1}));
  Tensor mu8 = mat({{1}, {0}}).to(kUInt8);
  EXPECT_EQ(vals(x.masked_fill(mu8, 7.5)), (V{7.5, 7.5, 7.5, 3, 4, 5}));
  x.masked_fill_(m, 0);
  EXPECT_EQ(vals(x), (V{0, 1, 0, 0, 4, 0}));
  EXPECT_THAT(error_of([&] { x.masked_fill(tensor({1.0, 0.0, 1.0}), 0); }),
              HasSubstr("masked_fill: expected a mask of dtype bool (or uint8), but got float32"));
  EXPECT_THAT(error_of([&] { x.masked_fill_(tensor(std::vector<bool>{true, false}), 0); }),
              HasSubstr("masked_fill_: the mask of shape [2] cannot be broadcast"));
}

TEST(MaskedSelect, ValuesAndGrad) {
  Tensor x = seq({2, 3}).requires_grad_(true);
  Tensor m = mat({{0}, {1}}).to(kBool);
  Tensor r = x.masked_select(m);
  EXPECT_EQ(vals(r), (V{3, 4, 5}));
  (r * tensor({1.0, 2.0, 3.0}, kFloat64)).sum().backward();
  EXPECT_EQ(vals(x.grad()), (V{0, 0, 0, 1, 2, 3}));
  // The mask broadcasts the input too.
  Tensor b = seq({3}).masked_select(tensor(std::vector<bool>{true, false, true, true, true, false})
                                        .reshape({2, 3}));
  EXPECT_EQ(vals(b), (V{0, 2, 0, 1}));
}

TEST(Nonzero, Values) {
  Tensor x = tensor({{0.0, 1.5, 0.0}, {2.0, 0.0, -1.0}});
  Tensor nz = nonzero(x);
  EXPECT_EQ(nz.dtype(), kInt64);
  EXPECT_EQ(shape_of(nz), (S{3, 2}));
  EXPECT_EQ(vals(nz), (V{0, 1, 1, 0, 1, 2}));
  EXPECT_EQ(shape_of(nonzero(zeros({0, 2}))), (S{0, 2}));
  // Large enough for the chunked parallel path.
  Tensor big = (randn({300000}) > 0);
  Tensor nzb = nonzero(big);
  EXPECT_EQ(nzb.size(0), big.sum().item<int64_t>());
  const int64_t* p = nzb.data_ptr<int64_t>();
  for (int64_t i = 1; i < nzb.size(0); ++i) ASSERT_LT(p[i - 1], p[i]);
}

// ---- Tensor::index

TEST(Index, BasicIsAView) {
  Tensor x = seq({3, 4, 5});
  EXPECT_EQ(shape_of(x.index({1})), (S{4, 5}));
  EXPECT_EQ(x.index({-1, 2, 3}).item<double>(), 2 * 20 + 2 * 5 + 3);
  Tensor s = x.index({Slice(1, std::nullopt), Slice(std::nullopt, std::nullopt, 2), 0});
  EXPECT_EQ(shape_of(s), (S{2, 2}));
  EXPECT_EQ(vals(s), (V{20, 30, 40, 50}));
  EXPECT_EQ(shape_of(x.index({None, Ellipsis, None})), (S{1, 3, 4, 5, 1}));
  EXPECT_EQ(shape_of(x.index({Ellipsis, 1})), (S{3, 4}));
  EXPECT_EQ(shape_of(x.index({0, Ellipsis, 1})), (S{4}));
  EXPECT_EQ(shape_of(x.index({})), (S{3, 4, 5}));
  // Bool scalars add a dim of size 1 (true) or 0 (false).
  EXPECT_EQ(shape_of(x.index({Slice(), true})), (S{3, 1, 4, 5}));
  EXPECT_EQ(shape_of(x.index({false})), (S{0, 3, 4, 5}));
  EXPECT_EQ(shape_of(x.index({Slice(), true, Slice(), 0})), (S{3, 1, 4}));
  // A view: writing through it changes x.
  Tensor v = x.index({0, Slice(0, 2)});
  v.fill_(-1);
  EXPECT_DOUBLE_EQ(x.index({0, 1, 4}).item<double>(), -1);
  EXPECT_DOUBLE_EQ(x.index({0, 2, 0}).item<double>(), 10);
}

TEST(Index, IntegerTensors) {
  Tensor x = seq({3, 4});
  Tensor r = x.index({ints({2, -3, 2})});
  EXPECT_EQ(shape_of(r), (S{3, 4}));
  EXPECT_EQ(vals(r.index({Slice(), 0})), (V{8, 0, 8}));
  // A 2-D index tensor: its shape replaces the dim.
  Tensor r2 = x.index({Slice(), mat({{0, 3}, {1, 1}})});
  EXPECT_EQ(shape_of(r2), (S{3, 2, 2}));
  EXPECT_EQ(vals(r2.index({1})), (V{4, 7, 5, 5}));
  // Two index tensors broadcast together: [2, 1] with [3] -> [2, 3].
  Tensor r3 = x.index({mat({{0}, {2}}), ints({0, 1, 3})});
  EXPECT_EQ(shape_of(r3), (S{2, 3}));
  EXPECT_EQ(vals(r3), (V{0, 1, 3, 8, 9, 11}));
  // Pointwise pairs, int32 index tensors.
  Tensor r4 = x.index({ints({0, 1, 2}).to(kInt32), ints({3, 2, 1})});
  EXPECT_EQ(vals(r4), (V{3, 6, 9}));
  // A 0-d index tensor drops the dim, like an integer (but copies).
  Tensor r5 = x.index({Slice(), ints({2}).reshape({})});
  EXPECT_EQ(vals(r5), (V{2, 6, 10}));
}

TEST(Index, AdjacentAndNonAdjacentPlacement) {
  Tensor x = seq({2, 3, 4, 5});
  Tensor i = ints({0, 2, 1});
  // Adjacent advanced indices keep their place.
  EXPECT_EQ(shape_of(x.index({Slice(), i})), (S{2, 3, 4, 5}));
  EXPECT_EQ(shape_of(x.index({Slice(), i, ints({1, 1, 3})})), (S{2, 3, 5}));
  EXPECT_EQ(shape_of(x.index({Slice(), Slice(), mat({{0, 1}})})), (S{2, 3, 1, 2, 5}));
  // Separated by a slice: the broadcast index dims go first.
  Tensor r = x.index({ints({1, 0, 1}), Slice(), i});
  EXPECT_EQ(shape_of(r), (S{3, 3, 5}));
  // r[k, j, l] = x[i0[k], j, i2[k], l]
  EXPECT_DOUBLE_EQ(r.index({0, 2, 4}).item<double>(), x.index({1, 2, 0, 4}).item<double>());
  EXPECT_DOUBLE_EQ(r.index({2, 1, 3}).item<double>(), x.index({1, 1, 1, 3}).item<double>());
  // Integers apply first (as in PyTorch), so x[:, i, :, 0]-style indices stay adjacent.
  EXPECT_EQ(shape_of(x.index({Slice(), ints({0}), Slice(), 0})), (S{2, 1, 4}));
  EXPECT_EQ(shape_of(x.index({0, Slice(), ints({0, 1})})), (S{3, 2, 5}));
  EXPECT_EQ(shape_of(x.index({ints({0, 1}), Slice(), Slice(), ints({0, 1})})), (S{2, 3, 4}));
  // None between advanced indices separates them.
  EXPECT_EQ(shape_of(x.index({Slice(), i, None, i})), (S{3, 2, 1, 5}));
}

TEST(Index, BoolMasks) {
  Tensor x = seq({3, 4});
  Tensor m = x.index({Slice(), 0}) > 3;  // rows 1, 2
  Tensor r = x.index({m});
  EXPECT_EQ(shape_of(r), (S{2, 4}));
  EXPECT_EQ(vals(r.index({Slice(), 0})), (V{4, 8}));
  Tensor full = (x > 6).logical_and(x < 10);
  EXPECT_EQ(vals(x.index({full})), (V{7, 8, 9}));
  Tensor cm = tensor(std::vector<bool>{false, true, false, true});
  EXPECT_EQ(vals(x.index({Slice(), cm})), (V{1, 3, 5, 7, 9, 11}));
  EXPECT_EQ(vals(x.index({1, cm})), (V{5, 7}));
  // A mask combined with an integer tensor broadcasts against its nonzero indices.
  EXPECT_EQ(vals(x.index({m, ints({3, 0})})), (V{7, 8}));
  EXPECT_EQ(shape_of(x.index({tensor(std::vector<bool>{true}).reshape({})})), (S{1, 3, 4}));
}

TEST(Index, Errors) {
  Tensor x = seq({3, 4});
  EXPECT_THAT(error_of([&] { x.index({3}); }),
              HasSubstr("index: index 3 is out of bounds for dimension 0 with size 3"));
  EXPECT_THAT(error_of([&] { x.index({Slice(), ints({0, 4})}); }),
              HasSubstr("index: index 4 is out of bounds for dimension 1 with size 4"));
  EXPECT_THAT(error_of([&] { x.index({ints({0}), ints({0, -5})}); }),
              HasSubstr("index -5 is out of bounds for dimension 1 with size 4"));
  EXPECT_THAT(error_of([&] { x.index({0, 0, 0}); }),
              HasSubstr("index: too many indices for a tensor of dimension 2 (got 3)"));
  EXPECT_THAT(error_of([&] { x.index({Ellipsis, Ellipsis}); }),
              HasSubstr("an index can only have a single ellipsis"));
  EXPECT_THAT(error_of([&] { x.index({tensor({0.0})}); }),
              HasSubstr("tensors used as indices must be int64, int32, bool or uint8, but got "
                        "float32"));
  EXPECT_THAT(error_of([&] { x.index({ints({0, 1}), ints({0, 1, 2})}); }),
              HasSubstr("shape mismatch: indexing tensors could not be broadcast together with "
                        "shapes [2], [3]"));
  EXPECT_THAT(error_of([&] { x.index({tensor(std::vector<bool>{true, false})}); }),
              HasSubstr("the shape of the mask [2] at index 0 does not match the shape of the "
                        "indexed tensor [3, 4] at dimension 0"));
  EXPECT_THAT(error_of([&] { x.index({Slice(0, 2, 0)}); }),
              HasSubstr("slice step must be positive"));
}

TEST(Index, AutogradAccumulatesDuplicates) {
  Tensor x = seq({3, 2}).requires_grad_(true);
  Tensor r = x.index({ints({2, 0, 2})});
  (r * seq({3, 2})).sum().backward();
  EXPECT_EQ(vals(x.grad()), (V{2, 3, 0, 0, 4, 6}));  // rows 0 and 2 of the weights summed
  Tensor y = seq({3, 4}).requires_grad_(true);
  Tensor s = y.index({ints({0, 0, 2}), ints({1, 1, 3})}).sum();
  s.backward();
  EXPECT_EQ(vals(y.grad()), (V{0, 2, 0, 0, 0, 0, 0, 0, 0, 0, 0, 1}));
  // Through basic indexing too, and a mask.
  Tensor z = seq({2, 3}).requires_grad_(true);
  z.index({1, z.index({1}).detach() > 3}).sum().backward();
  EXPECT_EQ(vals(z.grad()), (V{0, 0, 0, 0, 1, 1}));
  // Double backward: d/dx of sum(grad(sum(x[i]^2))) = 2 * count(i).
  Tensor w = seq({3}).requires_grad_(true);
  Tensor q = w.index({ints({0, 0, 1})});
  Tensor g = autograd::grad({(q * q).sum()}, {w}, {}, std::nullopt, true)[0];
  EXPECT_EQ(vals(g), (V{0, 2, 0}));  // 2*0 + 2*0 at index 0, 2*1 at index 1
  g.sum().backward();
  EXPECT_EQ(vals(w.grad()), (V{4, 2, 0}));
}

// ---- index_put_

TEST(IndexPut, TensorAndScalarValues) {
  Tensor x = zeros({3, 4}, kFloat64);
  x.index_put_({ints({0, 2})}, tensor({1.0, 2.0, 3.0, 4.0}, kFloat64));  // broadcast rows
  EXPECT_EQ(vals(x.index({2})), (V{1, 2, 3, 4}));
  x.index_put_({Slice(), ints({1})}, -1.0);
  EXPECT_EQ(vals(x.index({Slice(), 1})), (V{-1, -1, -1}));
  x.index_put_({ints({1, 2}), ints({0, 3})}, tensor({5.0, 6.0}, kFloat64));
  EXPECT_DOUBLE_EQ(x.index({1, 0}).item<double>(), 5);
  EXPECT_DOUBLE_EQ(x.index({2, 3}).item<double>(), 6);
  x.index_put_({x > 4}, 0.5);  // a mask
  EXPECT_DOUBLE_EQ(x.index({1, 0}).item<double>(), 0.5);
  EXPECT_DOUBLE_EQ(x.index({2, 3}).item<double>(), 0.5);
  x.index_put_({0, Slice(1, 3)}, 9);  // basic indexing only
  EXPECT_EQ(vals(x.index({0})), (V{1, 9, 9, 4}));
  x.index_put_({Ellipsis, -1}, tensor({7.0, 8.0, 9.0}, kFloat64));
  EXPECT_EQ(vals(x.index({Slice(), 3})), (V{7, 8, 9}));
  // A float value into an int tensor is cast; negative indices wrap.
  Tensor xi = zeros({3}, kInt64);
  xi.index_put_({ints({-1})}, 2.7);
  EXPECT_EQ(vals(xi), (V{0, 0, 2}));
  uint32_t v0 = x._version();
  x.index_put_({ints({0})}, 1.0);
  EXPECT_GT(x._version(), v0);
}

TEST(IndexPut, Errors) {
  Tensor x = zeros({3, 4}, kFloat64);
  EXPECT_THAT(error_of([&] { x.index_put_({ints({0, 1})}, ones({3}, kFloat64)); }),
              HasSubstr("index_put_: shape mismatch: value tensor of shape [3] cannot be "
                        "broadcast to indexing result of shape [2, 4]"));
  EXPECT_THAT(error_of([&] { x.index_put_({ints({5})}, 1.0); }),
              HasSubstr("index_put_: index 5 is out of bounds for dimension 0 with size 3"));
  Tensor leaf = zeros({3}, TensorOptions(kFloat64).requires_grad(true));
  EXPECT_THAT(error_of([&] { leaf.index_put_({ints({0})}, 1.0); }),
              HasSubstr("a leaf tensor that requires grad"));
}

TEST(IndexPut, Autograd) {
  Tensor a = seq({3, 2}).requires_grad_(true);
  Tensor v = tensor({10.0, 20.0}, TensorOptions(kFloat64).requires_grad(true));
  Tensor x = a * 1;
  x.index_put_({ints({1})}, v);
  EXPECT_EQ(vals(x), (V{0, 1, 10, 20, 4, 5}));
  (x * seq({3, 2})).sum().backward();
  EXPECT_EQ(vals(a.grad()), (V{0, 1, 0, 0, 4, 5}));  // overwritten row gets none
  EXPECT_EQ(vals(v.grad()), (V{2, 3}));
  // A scalar value, with a mask and a slice mixed.
  Tensor b = seq({2, 3}).requires_grad_(true);
  Tensor y = b * 2;
  y.index_put_({Slice(), tensor(std::vector<bool>{true, false, true})}, 0.0);
  EXPECT_EQ(vals(y), (V{0, 2, 0, 0, 8, 0}));
  y.sum().backward();
  EXPECT_EQ(vals(b.grad()), (V{0, 2, 0, 0, 2, 0}));
}

// ---- joining

TEST(Cat, ValuesPromotionAndLayouts) {
  Tensor a = seq({2, 2}), b = seq({2, 3}) + 10;
  Tensor c = cat({a, b}, 1);
  EXPECT_EQ(shape_of(c), (S{2, 5}));
  EXPECT_EQ(vals(c), (V{0, 1, 10, 11, 12, 2, 3, 13, 14, 15}));
  Tensor d = cat({a, a.t(), zeros({0, 2}, kFloat64)}, 0);  // transposed and empty inputs
  EXPECT_EQ(vals(d), (V{0, 1, 2, 3, 0, 2, 1, 3}));
  Tensor e = cat({ones({2}, kInt64), tensor({0.5f})});  // int64 + float32 -> float32
  EXPECT_EQ(e.dtype(), kFloat32);
  EXPECT_EQ(vals(e), (V{1, 1, 0.5}));
  EXPECT_EQ(shape_of(cat({a, zeros({0}, kFloat64)}, 0)), (S{2, 2}));  // legacy 1-D empty
  Tensor big = randn({64, 3000});  // the parallel block copy
  Tensor parts = cat({big.narrow(1, 0, 1000).contiguous(), big.narrow(1, 1000, 2000).contiguous()},
                     1);
  EXPECT_TRUE(equal(parts, big));
}

TEST(Cat, Errors) {
  EXPECT_THAT(error_of([] { cat({}); }), HasSubstr("cat: expected a non-empty list of tensors"));
  EXPECT_THAT(error_of([] { cat({zeros({2, 3}), zeros({2, 4})}, 0); }),
              HasSubstr("cat: sizes of tensors must match except in dimension 0: expected size 3 "
                        "but got size 4 in dimension 1 for tensor 1 (shapes [2, 3] and [2, 4])"));
  EXPECT_THAT(error_of([] { cat({zeros({2, 3}), zeros({2, 3, 1})}); }),
              HasSubstr("cat: tensors must have the same number of dimensions: got 2 and 3"));
  EXPECT_THAT(error_of([] { cat({zeros({}), zeros({})}); }),
              HasSubstr("zero-dimensional tensor (at position 0) cannot be concatenated"));
  EXPECT_THAT(error_of([] { cat({zeros({2})}, 1); }), HasSubstr("cat: dimension 1 out of range"));
}

TEST(Cat, Autograd) {
  Tensor a = seq({2, 1}).requires_grad_(true), b = seq({2, 2}).requires_grad_(true);
  Tensor c = cat({a, b.to(kFloat32)}, 1);  // a float32 input gets its gradient cast back
  (c * seq({2, 3}, kFloat64)).sum().backward();
  EXPECT_EQ(vals(a.grad()), (V{0, 3}));
  EXPECT_EQ(vals(b.grad()), (V{1, 2, 4, 5}));
}

TEST(Stack, ValuesAndErrors) {
  Tensor a = seq({2}), b = seq({2}) + 5;
  EXPECT_EQ(vals(stack({a, b})), (V{0, 1, 5, 6}));
  Tensor s1 = stack({a, b}, 1);
  EXPECT_EQ(shape_of(s1), (S{2, 2}));
  EXPECT_EQ(vals(s1), (V{0, 5, 1, 6}));
  EXPECT_EQ(shape_of(stack({seq({}), seq({})})), (S{2}));
  EXPECT_THAT(error_of([] { stack({}); }), HasSubstr("stack: expected a non-empty list"));
  EXPECT_THAT(error_of([&] { stack({a, seq({3})}); }),
              HasSubstr("stack: expects each tensor to be of equal size, but got [2] at entry 0 "
                        "and [3] at entry 1"));
}

TEST(SplitChunk, SizesAndViews) {
  Tensor x = seq({5, 2});
  auto p = x.split(2);
  ASSERT_EQ(p.size(), 3u);
  EXPECT_EQ(shape_of(p[2]), (S{1, 2}));
  EXPECT_EQ(vals(p[1]), (V{4, 5, 6, 7}));
  auto q = split(x, std::vector<int64_t>{1, 4}, 0);
  EXPECT_EQ(shape_of(q[1]), (S{4, 2}));
  auto c = x.chunk(2, 1);
  ASSERT_EQ(c.size(), 2u);
  EXPECT_EQ(vals(c[1]), (V{1, 3, 5, 7, 9}));
  EXPECT_EQ(x.chunk(3).size(), 3u);  // 5 rows in chunks of 2
  EXPECT_EQ(x.chunk(10).size(), 5u);
  p[0].fill_(-1);  // views
  EXPECT_DOUBLE_EQ(x.index({1, 1}).item<double>(), -1);
  EXPECT_THAT(error_of([&] { x.split(0); }), HasSubstr("split: split_size must be positive, "
                                                        "but got 0"));
  EXPECT_THAT(error_of([&] { split(x, std::vector<int64_t>{2, 2}); }),
              HasSubstr("split: split sizes [2, 2] do not sum to 5"));
  EXPECT_THAT(error_of([&] { x.chunk(0); }),
              HasSubstr("chunk: number of chunks must be positive, but got 0"));
}

TEST(Repeat, Values) {
  Tensor x = seq({2});
  Tensor r = x.repeat({2, 3});
  EXPECT_EQ(shape_of(r), (S{2, 6}));
  EXPECT_EQ(vals(r), (V{0, 1, 0, 1, 0, 1, 0, 1, 0, 1, 0, 1}));
  Tensor y = seq({2, 1}).repeat({1, 2});
  EXPECT_EQ(vals(y), (V{0, 0, 1, 1}));
  Tensor same = x.repeat({1});  // always a copy
  same.fill_(5);
  EXPECT_EQ(vals(x), (V{0, 1}));
  EXPECT_THAT(error_of([&] { seq({2, 2}).repeat({2}); }),
              HasSubstr("repeat: number of repeat dims (1) can not be smaller than the number of "
                        "dimensions of the tensor (2"));
  Tensor g = seq({2}).requires_grad_(true);
  g.repeat({3}).sum().backward();
  EXPECT_EQ(vals(g.grad()), (V{3, 3}));
}

TEST(TrilTriu, Values) {
  Tensor x = seq({3, 3}) + 1;
  EXPECT_EQ(vals(x.tril()), (V{1, 0, 0, 4, 5, 0, 7, 8, 9}));
  EXPECT_EQ(vals(x.triu(1)), (V{0, 2, 3, 0, 0, 6, 0, 0, 0}));
  EXPECT_EQ(vals(x.tril(-1)), (V{0, 0, 0, 4, 0, 0, 7, 8, 0}));
  EXPECT_EQ(vals(seq({2, 2, 3}).triu()), (V{0, 1, 2, 0, 4, 5, 6, 7, 8, 0, 10, 11}));
  EXPECT_EQ(vals(x.t().tril()), (V{1, 0, 0, 2, 5, 0, 3, 6, 9}));
  EXPECT_THAT(error_of([] { seq({3}).tril(); }),
              HasSubstr("tril: expected a tensor with at least 2 dimensions, but got shape [3]"));
}

TEST(Flip, Values) {
  Tensor x = seq({2, 3});
  EXPECT_EQ(vals(x.flip({1})), (V{2, 1, 0, 5, 4, 3}));
  EXPECT_EQ(vals(x.flip({0})), (V{3, 4, 5, 0, 1, 2}));
  EXPECT_EQ(vals(x.flip({0, -1})), (V{5, 4, 3, 2, 1, 0}));
  EXPECT_EQ(vals(x.t().flip({1})), (V{3, 0, 4, 1, 5, 2}));
  EXPECT_THAT(error_of([&] { x.flip({1, -1}); }), HasSubstr("flip: dim 1 appears multiple times"));
}

TEST(Pad, Modes) {
  Tensor x = seq({1, 3}) + 1;  // [[1, 2, 3]]
  EXPECT_EQ(vals(pad(x, {1, 2})), (V{0, 1, 2, 3, 0, 0}));
  EXPECT_EQ(vals(pad(x, {0, 0, 1, 0}, "constant", -1)), (V{-1, -1, -1, 1, 2, 3}));
  EXPECT_EQ(vals(pad(x, {-1, 1})), (V{2, 3, 0}));  // negative padding crops
  EXPECT_EQ(vals(pad(x, {2, 2}, "reflect")), (V{3, 2, 1, 2, 3, 2, 1}));
  EXPECT_EQ(vals(pad(x, {2, 1}, "replicate")), (V{1, 1, 1, 2, 3, 3}));
  Tensor y = seq({2, 2});
  EXPECT_EQ(vals(pad(y, {1, 0, 0, 1}, "replicate")), (V{0, 0, 1, 2, 2, 3, 2, 2, 3}));
  EXPECT_THAT(error_of([&] { pad(x, {3, 0}, "reflect"); }),
              HasSubstr("pad: reflect padding (3, 0) must be smaller than the size 3"));
  EXPECT_THAT(error_of([&] { pad(x, {1}); }),
              HasSubstr("pad: padding length must be divisible by 2"));
  EXPECT_THAT(error_of([&] { pad(x, {1, 1}, "mirror"); }), HasSubstr("pad: unknown mode"));
  EXPECT_EQ(vals(pad(x, {2, 1}, "circular")), (V{2, 3, 1, 2, 3, 1}));
  EXPECT_THAT(error_of([&] { pad(x, {1, 1, 1, 1, 1, 1}); }), HasSubstr("pads 3 dimensions"));
  // Gradients: reflect accumulates the mirrored positions.
  Tensor g = (seq({3}) + 1).requires_grad_(true);
  pad(g, {2, 2}, "reflect").sum().backward();
  EXPECT_EQ(vals(g.grad()), (V{2, 3, 2}));
}

TEST(OneHot, ValuesAndErrors) {
  Tensor r = one_hot(ints({2, 0, 1}));
  EXPECT_EQ(r.dtype(), kInt64);
  EXPECT_EQ(shape_of(r), (S{3, 3}));
  EXPECT_EQ(vals(r), (V{0, 0, 1, 1, 0, 0, 0, 1, 0}));
  EXPECT_EQ(shape_of(one_hot(mat({{1}, {0}}), 4)), (S{2, 1, 4}));
  EXPECT_THAT(error_of([] { one_hot(ints({3}), 3); }),
              HasSubstr("one_hot: class value 3 is out of range for num_classes 3"));
  EXPECT_THAT(error_of([] { one_hot(ints({-1, 0})); }),
              HasSubstr("one_hot: class values must be non-negative"));
  EXPECT_THAT(error_of([] { one_hot(ints({})); }),
              HasSubstr("one_hot: cannot infer the number of classes from an empty tensor"));
  EXPECT_THAT(error_of([] { one_hot(tensor({1.0})); }), HasSubstr("int64 or int32"));
}

// The registry ops under indexing: index.Tensor, index_put_ and index_put take the advanced
// part as Tensor?[] (PyTorch's schemas); x.index({...}) hands its advanced part to them.
TEST(IndexRecords, TensorOptionalListForms) {
  const Tensor x = seq({2, 3, 2});
  const Tensor i = ints({2, 0, 2});
  EXPECT_EQ(vals(index(x, {Tensor(), i})), vals(x.index({Slice(), i})));
  EXPECT_EQ(index(x, {Tensor(), i}).sizes().vec(), (std::vector<int64_t>{2, 3, 2}));
  // A bool mask covers as many dims as it has.
  const Tensor m = tensor(std::vector<bool>{true, false, false, false, true, true}).reshape({2, 3});
  EXPECT_EQ(vals(index(x, {m})), vals(x.index({m})));
  // accumulate adds duplicates; without it the values are written.
  Tensor y = zeros({3});
  y.index_put_({ints({0, 2, 0})}, tensor({1.0, 2.0, 3.0}), true);
  EXPECT_EQ(vals(y), (std::vector<double>{4, 0, 2}));
  EXPECT_EQ(vals(zeros({3}).index_put({ints({1})}, tensor({5.0}))), (std::vector<double>{0, 5, 0}));
  // Through the registry by name, as a replay or Python binding calls it.
  const auto out = op::call_boxed("index.Tensor", {x, std::vector<Tensor>{Tensor(), i}});
  EXPECT_EQ(vals(out[0].get<Tensor>()), vals(x.index({Slice(), i})));
}

TEST(IndexRecords, ErrorsNameTheIndexAndTheShapes) {
  const Tensor x = seq({2, 3});
  EXPECT_THAT(error_of([&] { index(x, {Tensor(), Tensor(), ints({0})}); }),
              HasSubstr("index: too many indices for a tensor of dimension 2 (index 2 reaches "
                        "dimension 2)"));
  EXPECT_THAT(error_of([&] { index(x, {x}); }),
              HasSubstr("index: tensors used as indices must be int64, int32, bool or uint8, but "
                        "got float64"));
  EXPECT_THAT(error_of([&] { index(x, {tensor(std::vector<bool>{true}).reshape({})}); }),
              HasSubstr("index: a 0-d mask at index 0 adds a dimension; use Tensor::index"));
  EXPECT_THAT(error_of([&] { index(x, {tensor(std::vector<bool>{true, false, true})}); }),
              HasSubstr("index: the shape of the mask [3] at index 0 does not match the shape of "
                        "the indexed tensor [2, 3] at dimension 0 (3 vs 2)"));
  EXPECT_THAT(error_of([&] { index(x, {ints({0}).to(kMeta)}); }),
              HasSubstr("index: index tensor on meta for a tensor on cpu"));
  Tensor y = zeros({3});
  EXPECT_THAT(error_of([&] { y.index_put_({ints({0})}, ones({1}).to(kMeta), false); }),
              HasSubstr("index_put_: values on meta for a tensor on cpu"));
  EXPECT_THAT(error_of([&] { y.index_put_({ints({0})}, Tensor(), false); }),
              HasSubstr("index_put_: undefined tensor"));
  Tensor w = zeros({3}).requires_grad_(true) * 1;
  EXPECT_THAT(error_of([&] { w.index_put_({ints({0, 1})}, ones({3}), false); }),
              HasSubstr("index_put_: shape mismatch: value tensor of shape [3] cannot be "
                        "broadcast to indexing result of shape [2]"));
}

// Padding by name is a record too (conv2d.padding / conv1d.padding, str padding).
TEST(IndexRecords, ConvPaddingByNameIsARecord) {
  const Tensor x = ones({1, 1, 4, 4}), w = ones({1, 1, 3, 3});
  const auto out = op::call_boxed("conv2d.padding",
                                  {x, w, Tensor(), std::vector<int64_t>{1}, std::string("same")});
  EXPECT_EQ(out[0].get<Tensor>().sizes().vec(), (std::vector<int64_t>{1, 1, 4, 4}));
  EXPECT_EQ(vals(out[0].get<Tensor>()), vals(conv2d(x, w, {}, {1}, "same")));
  const auto v = op::call_boxed("conv1d.padding", {ones({1, 1, 5}), ones({1, 1, 3}), Tensor(),
                                                   std::vector<int64_t>{1}, std::string("valid")});
  EXPECT_EQ(v[0].get<Tensor>().sizes().vec(), (std::vector<int64_t>{1, 1, 3}));
}

}  // namespace
}  // namespace ignis
