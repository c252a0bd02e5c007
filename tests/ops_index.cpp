// Op-table entries of the indexing and joining ops. Index tensors are int64 inputs of the samples
// (the driver keeps them as they are); a dim that varies per sample is passed as a 0-d int64
// input too. References are plain loops over multi-indices.
#include <algorithm>
#include <cmath>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Idx = std::vector<int64_t>;

const std::vector<DType> kMove = {kFloat32, kFloat64, kBFloat16, kInt64};  // exact data movement
const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};

Tensor in(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
Tensor ix(const Idx& v) { return tensor(v); }
Tensor ix(const Idx& v, IntArrayRef shape) { return tensor(v).reshape(shape); }
Tensor dim_t(int64_t d) { return tensor(Idx{d}).reshape({}); }
int64_t dim_of(const Tensor& t) { return t.item<int64_t>(); }
// The dim input wrapped into [0, nd) (for the references).
int64_t wdim(const Tensor& t, int64_t nd) { return dim_of(t) < 0 ? dim_of(t) + nd : dim_of(t); }
Tensor mask(const std::vector<bool>& v, IntArrayRef shape) { return tensor(v).reshape(shape); }

// ---- reference helpers

Idx unravel(int64_t k, IntArrayRef shape) {
  Idx i(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    i[d] = k % shape[d];
    k /= shape[d];
  }
  return i;
}
int64_t ravel(const Idx& i, IntArrayRef shape) {
  int64_t k = 0;
  for (size_t d = 0; d < i.size(); ++d) k = k * shape[d] + i[d];
  return k;
}
int64_t numel_of(IntArrayRef s) {
  int64_t n = 1;
  for (int64_t v : s) n *= v;
  return n;
}
std::vector<int64_t> ivalues(const Tensor& t) {
  std::vector<int64_t> r;
  for (double v : values(t)) r.push_back(static_cast<int64_t>(v));
  return r;
}
// A tensor of `shape` with element f(multi-index).
Tensor ref_map(IntArrayRef shape, const std::function<double(const Idx&)>& f) {
  std::vector<double> out(static_cast<size_t>(numel_of(shape)));
  for (size_t k = 0; k < out.size(); ++k) out[k] = f(unravel(static_cast<int64_t>(k), shape));
  return from_values(out, shape);
}
// Element i of x (any layout).
struct Reader {
  std::vector<double> v;
  Shape shape;
  explicit Reader(const Tensor& t) : v(values(t)), shape(t.sizes().shape()) {}
  double operator()(const Idx& i) const { return v[ravel(i, shape)]; }
};
int64_t wrap(int64_t i, int64_t n) { return i < 0 ? i + n : i; }

// ---- index_select / gather / scatter / scatter_add / index_add

Tensor ref_index_select(const TL& x) {
  const Reader r(x[0]);
  const int64_t d = wdim(x[2], x[0].dim());
  const auto idx = ivalues(x[1]);
  Shape s = x[0].sizes().shape();
  s[d] = static_cast<int64_t>(idx.size());
  return ref_map(s, [&](Idx i) {
    i[d] = idx[i[d]];
    return r(i);
  });
}

IGNIS_OP_INFO(OpInfo{
    .name = "index_select",
    .fn = [](const TL& x) { return x[0].index_select(dim_of(x[2]), x[1]); },
    .ref = ref_index_select,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"rows with duplicates", {in({4, 3}, 1), ix({3, 0, 3, 1}), dim_t(0)}},
              {"columns, negative dim", {in({3, 4}, 2), ix({2, 0}), dim_t(-1)}},
              {"noncontiguous", {make_noncontiguous({3, 4}, 3), ix({1, 1, 3}), dim_t(1)}},
              {"transposed, middle dim", {in({2, 4, 3}, 4).transpose(0, 2), ix({0, 3}), dim_t(1)}},
              {"1-d", {in({5}, 5), ix({4, 0, 2, 2}), dim_t(0)}},
              {"empty index", {in({3, 2}, 6), ix({}), dim_t(0)}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0},
    .host_params = {2}});

Tensor ref_gather(const TL& x) {
  const Reader r(x[0]);
  const int64_t d = wdim(x[2], x[0].dim());
  const Reader idx(x[1]);
  return ref_map(x[1].sizes(), [&](Idx i) {
    i[d] = static_cast<int64_t>(idx(i));
    return r(i);
  });
}

IGNIS_OP_INFO(OpInfo{
    .name = "gather",
    .fn = [](const TL& x) { return x[0].gather(dim_of(x[2]), x[1]); },
    .ref = ref_gather,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"dim 1", {in({3, 4}, 11), ix({3, 0, 0, 1, 2, 2}, {3, 2}), dim_t(1)}},
              {"dim 0, smaller index", {in({3, 4}, 12), ix({2, 0, 1, 1, 0, 2}, {2, 3}), dim_t(0)}},
              {"noncontiguous", {make_noncontiguous({2, 5}, 13), ix({4, 4, 0}, {1, 3}), dim_t(1)}},
              {"3-d", {in({2, 3, 2}, 14), ix({1, 0, 2, 2, 0, 1, 1, 0}, {2, 2, 2}), dim_t(1)}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0},
    .host_params = {2}});

// self with src written (or added) at self[p with dim = index[p]] for every p of index.
Tensor ref_scatter(const TL& x, bool add) {
  const int64_t d = wdim(x[3], x[0].dim());
  std::vector<double> out = values(x[0]);
  const Reader idx(x[1]), src(x[2]);
  const int64_t n = x[1].numel();
  for (int64_t k = 0; k < n; ++k) {
    Idx p = unravel(k, x[1].sizes());
    const double v = src(p);
    p[d] = static_cast<int64_t>(idx(p));
    double& o = out[ravel(p, x[0].sizes())];
    o = add ? o + v : v;
  }
  return from_values(out, x[0].sizes());
}

// Unique targets per line: scatter's result (and gradient) is then well defined.
std::vector<OpSample> scatter_samples() {
  return {
      {"dim 1, src larger",
       {in({3, 4}, 21), ix({3, 0, 1, 2, 0, 3}, {3, 2}), in({3, 3}, 22), dim_t(1)}},
      {"dim 0", {in({3, 2}, 23), ix({2, 0, 0, 1}, {2, 2}), in({2, 2}, 24), dim_t(0)}},
      {"noncontiguous",
       {make_noncontiguous({2, 3}, 25), ix({2, 1, 0, 2}, {2, 2}), in({3, 2}, 26).t(), dim_t(-1)}}};
}

IGNIS_OP_INFO(OpInfo{.name = "scatter",
                     .fn = [](const TL& x) { return x[0].scatter(dim_of(x[3]), x[1], x[2]); },
                     .ref = [](const TL& x) { return ref_scatter(x, false); },
                     .samples = scatter_samples,
                     .dtypes = kMove,
                     .grad_inputs = {0, 2},
                     .host_params = {3}});

IGNIS_OP_INFO(OpInfo{
    .name = "scatter_add",
    .fn = [](const TL& x) { return x[0].scatter_add(dim_of(x[3]), x[1], x[2]); },
    .ref = [](const TL& x) { return ref_scatter(x, true); },
    .samples =
        [] {
          std::vector<OpSample> s = scatter_samples();
          s.push_back({"duplicates",
                       {in({2, 3}, 27), ix({1, 1, 1, 0, 1, 0}, {2, 3}), in({2, 3}, 28), dim_t(0)}});
          // The message-passing idiom: a vector index expanded over the feature dim.
          s.push_back({"expanded index",
                       {in({3, 4}, 29), ix({2, 0, 2, 2, 1}).unsqueeze(1).expand({5, 4}),
                        in({5, 4}, 30), dim_t(0)}});
          return s;
        },
    .dtypes = kFloats,
    .grad_inputs = {0, 2},
    .host_params = {3}});

Tensor ref_index_add(const TL& x, double alpha) {
  const int64_t d = wdim(x[3], x[0].dim());
  std::vector<double> out = values(x[0]);
  const auto idx = ivalues(x[1]);
  const Reader src(x[2]);
  for (int64_t k = 0; k < x[2].numel(); ++k) {
    Idx p = unravel(k, x[2].sizes());
    const double v = src(p);
    p[d] = idx[p[d]];
    out[ravel(p, x[0].sizes())] += alpha * v;
  }
  return from_values(out, x[0].sizes());
}

IGNIS_OP_INFO(OpInfo{
    .name = "index_add",
    .fn = [](const TL& x) { return x[0].index_add(dim_of(x[3]), x[1], x[2], 1.5); },
    .ref = [](const TL& x) { return ref_index_add(x, 1.5); },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"rows with duplicates", {in({4, 3}, 31), ix({3, 0, 3}), in({3, 3}, 32), dim_t(0)}},
              {"columns", {in({2, 4}, 33), ix({1, 1, 2, 0, 1}), in({2, 5}, 34), dim_t(1)}},
              {"noncontiguous",
               {make_noncontiguous({3, 4}, 35), ix({0, 2}), in({4, 2}, 36).t(), dim_t(0)}},
              {"1-d", {in({3}, 37), ix({2, 2, 0, 1}), in({4}, 38), dim_t(0)}}};
        },
    .dtypes = kFloats,
    .grad_inputs = {0, 2},
    .host_params = {3}});

// ---- masks

std::vector<OpSample> mask_samples() {
  return {{"same shape", {in({2, 3}, 41), mask({true, false, true, false, false, true}, {2, 3})}},
          {"broadcast mask", {in({2, 3}, 42), mask({false, true, true}, {3})}},
          {"mask broadcasts the input", {in({3}, 43), mask({true, false}, {2, 1})}},
          {"0-d", {in({}, 44), mask({true}, {})}},
          {"noncontiguous",
           {make_noncontiguous({3, 2}, 45), mask({true, true, false, false, true, false}, {3, 2})}},
          {"empty", {in({0, 2}, 46), mask({true, false}, {2})}}};
}

IGNIS_OP_INFO(OpInfo{.name = "masked_fill",
                     .fn = [](const TL& x) { return x[0].masked_fill(x[1], -1.0); },
                     .ref =
                         [](const TL& x) {
                           return ref_elementwise({x[0], x[1].to(kFloat64)},
                                                  [](auto& v) { return v[1] != 0 ? -1.0 : v[0]; });
                         },
                     .samples = mask_samples,
                     .dtypes = kMove,
                     .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{.name = "masked_select",
                     .fn = [](const TL& x) { return x[0].masked_select(x[1]); },
                     .ref =
                         [](const TL& x) {
                           Shape s = broadcast_shapes(x[0].sizes(), x[1].sizes());
                           const auto v = values(x[0].expand(s)), m = values(x[1].expand(s));
                           std::vector<double> out;
                           for (size_t k = 0; k < v.size(); ++k) {
                             if (m[k] != 0) out.push_back(v[k]);
                           }
                           return from_values(out, {static_cast<int64_t>(out.size())});
                         },
                     .samples = mask_samples,
                     .dtypes = kMove,
                     .grad_inputs = {0},
                     .meta_skip = "its output shape depends on the input values"});

// ---- advanced indexing

IGNIS_OP_INFO(OpInfo{.name = "index_tensor",  // x[idx] with a 2-d index: its shape replaces dim 0
                     .fn = [](const TL& x) { return x[0].index({x[1]}); },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0]);
                           const Reader idx(x[1]);
                           Shape s = x[1].sizes().shape();
                           for (int64_t d = 1; d < x[0].dim(); ++d) s.push_back(x[0].size(d));
                           const int64_t k = x[1].dim();
                           return ref_map(s, [&](const Idx& o) {
                             Idx ii(o.begin(), o.begin() + k);
                             Idx p{wrap(static_cast<int64_t>(idx(ii)), x[0].size(0))};
                             p.insert(p.end(), o.begin() + k, o.end());
                             return r(p);
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"2-d index with duplicates and negatives",
                                {in({4, 3}, 51), ix({3, -1, 0, 3}, {2, 2})}},
                               {"1-d input", {in({5}, 52), ix({4, 1, 1})}},
                               {"noncontiguous", {make_noncontiguous({3, 4}, 53), ix({2, 0})}}};
                         },
                     .dtypes = kMove,
                     .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{
    .name = "index_two_tensors",  // x[:, i, j]: i [2, 1] and j [3] broadcast to [2, 3]
    .fn =
        [](const TL& x) {
          return x[0].index({Slice(), x[1], x[2]});
        },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          const auto i = ivalues(x[1]), j = ivalues(x[2]);
          return ref_map({x[0].size(0), 2, 3, x[0].size(3)}, [&](const Idx& o) {
            return r({o[0], i[o[1]], j[o[2]], o[3]});
          });
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"broadcast", {in({2, 3, 4, 2}, 54), ix({2, 0}, {2, 1}), ix({3, 1, 0})}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{.name = "index_nonadjacent",  // x[i, :, j]: the index dims go first
                     .fn =
                         [](const TL& x) {
                           return x[0].index({x[1], Slice(), x[2]});
                         },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0]);
                           const auto i = ivalues(x[1]), j = ivalues(x[2]);
                           const auto n = static_cast<int64_t>(i.size());
                           return ref_map({n, x[0].size(1), x[0].size(3)}, [&](const Idx& o) {
                             return r({i[o[0]], o[1], j[o[0]], o[2]});
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"pairs", {in({3, 2, 4, 2}, 55), ix({2, 0, 2}), ix({3, 3, 1})}}};
                         },
                     .dtypes = kMove,
                     .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{
    .name = "index_mixed",  // x[1:, None, idx, ::2]
    .fn =
        [](const TL& x) {
          return x[0].index({Slice(1), None, x[1], Slice(0, std::nullopt, 2)});
        },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          const auto i = ivalues(x[1]);
          const int64_t w = (x[0].size(2) + 1) / 2;
          return ref_map({x[0].size(0) - 1, 1, static_cast<int64_t>(i.size()), w},
                         [&](const Idx& o) {
                           return r({o[0] + 1, i[o[2]], 2 * o[3]});
                         });
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"3-d", {in({3, 4, 5}, 56), ix({3, 0, 3})}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{
    .name = "index_mask",  // x[mask] over the first two dims
    .fn = [](const TL& x) { return x[0].index({x[1]}); },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          const auto m = values(x[1]);
          std::vector<Idx> rows;
          for (size_t k = 0; k < m.size(); ++k) {
            if (m[k] != 0) rows.push_back(unravel(static_cast<int64_t>(k), x[1].sizes()));
          }
          return ref_map({static_cast<int64_t>(rows.size()), x[0].size(2)}, [&](const Idx& o) {
            return r({rows[o[0]][0], rows[o[0]][1], o[1]});
          });
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"2-d mask",
               {in({2, 3, 2}, 57), mask({true, false, true, true, false, false}, {2, 3})}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0},
    .meta_skip = "a boolean mask index: its output shape depends on the mask's values"});

/// x with columns idx (x[1]) replaced by the values x[2] broadcast to [rows, len(idx)].
Tensor ref_put_columns(const TL& x) {
  std::vector<double> out = values(x[0]);
  const auto i = ivalues(x[1]);
  const Reader v(x[2].expand({x[0].size(0), static_cast<int64_t>(i.size())}));
  for (int64_t r = 0; r < x[0].size(0); ++r) {
    for (size_t k = 0; k < i.size(); ++k) {
      out[ravel({r, wrap(i[k], x[0].size(1))}, x[0].sizes())] = v({r, static_cast<int64_t>(k)});
    }
  }
  return from_values(out, x[0].sizes());
}

// index_put_ on a copy of x: y[:, idx] = v (v broadcast), differentiable in x and v.
IGNIS_OP_INFO(OpInfo{
    .name = "index_put",
    .fn =
        [](const TL& x) {
          Tensor y = x[0].clone();
          y.index_put_({Slice(), x[1]}, x[2]);
          return y;
        },
    .ref =
        ref_put_columns,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"broadcast value", {in({3, 4}, 58), ix({3, 0}), in({2}, 59)}},
              {"full value, negative index", {in({2, 3}, 60), ix({-1}), in({2, 1}, 61)}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0, 2}});

// The registry ops under indexing, called with Tensor?[] (an undefined entry: the whole dim).
IGNIS_OP_INFO(OpInfo{
    .name = "index.Tensor",  // index(x, {None, i}) == x[:, i]
    .fn = [](const TL& x) { return index(x[0], {Tensor(), x[1]}); },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          const auto i = ivalues(x[1]);
          return ref_map({x[0].size(0), static_cast<int64_t>(i.size()), x[0].size(2)},
                         [&](const Idx& o) { return r({o[0], wrap(i[o[1]], x[0].size(1)), o[2]}); });
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"middle dim, duplicates and negatives", {in({2, 4, 3}, 62), ix({3, -1, 3, 0})}},
              {"noncontiguous", {make_noncontiguous({3, 4, 2}, 63), ix({1})}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0}});

// x.index_put({i}, v, accumulate=true): duplicates add up; differentiable in x and v.
IGNIS_OP_INFO(OpInfo{
    .name = "index_put accumulate",
    .fn = [](const TL& x) { return x[0].index_put({x[1]}, x[2], true); },
    .ref =
        [](const TL& x) {
          std::vector<double> out = values(x[0]);
          const auto i = ivalues(x[1]);
          const int64_t row = x[0].numel() / x[0].size(0);
          const Reader v(x[2].expand({static_cast<int64_t>(i.size()), row}));
          for (size_t k = 0; k < i.size(); ++k) {
            for (int64_t c = 0; c < row; ++c) {
              out[static_cast<size_t>(wrap(i[k], x[0].size(0)) * row + c)] +=
                  v({static_cast<int64_t>(k), c});
            }
          }
          return from_values(out, x[0].sizes());
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"duplicates", {in({4, 3}, 64), ix({1, 3, 1, -1}), in({4, 3}, 65)}},
              {"broadcast value", {in({3, 2}, 66), ix({0, 0}), in({2}, 67)}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0, 2},
    .ops = {"index_put"}});

// y.index_put_({None, i}, v) on a copy of x (no accumulate; distinct indices).
IGNIS_OP_INFO(OpInfo{
    .name = "index_put_",
    .fn =
        [](const TL& x) {
          Tensor y = x[0] * 1;
          y.index_put_({Tensor(), x[1]}, x[2], false);
          return y;
        },
    .ref =
        ref_put_columns,
    .samples =
        [] {
          return std::vector<OpSample>{{"broadcast value", {in({3, 4}, 68), ix({2, -1}), in({2}, 69)}}};
        },
    .dtypes = kMove,
    .grad_inputs = {0, 2}});

// ---- joining

Tensor ref_cat(const TL& parts, int64_t d) {
  Shape s = parts[0].sizes().shape();
  s[d] = 0;
  for (const Tensor& t : parts) s[d] += t.size(d);
  std::vector<Reader> rs;
  for (const Tensor& t : parts) rs.emplace_back(t);
  return ref_map(s, [&](Idx i) {
    size_t k = 0;
    while (i[d] >= parts[k].size(d)) i[d] -= parts[k++].size(d);
    return rs[k](i);
  });
}

IGNIS_OP_INFO(OpInfo{
    .name = "cat",
    .fn =
        [](const TL& x) {
          return cat({x[0], x[1], x[2]}, dim_of(x[3]));
        },
    .ref =
        [](const TL& x) {
          return ref_cat({x[0], x[1], x[2]}, wdim(x[3], x[0].dim()));
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"dim 0", {in({2, 3}, 71), in({1, 3}, 72), in({3, 3}, 73), dim_t(0)}},
              {"dim 1, noncontiguous",
               {in({2, 2}, 74), make_noncontiguous({2, 3}, 75), in({2, 2}, 76).t(), dim_t(-1)}},
              {"with an empty part",
               {in({2, 2, 1}, 77), in({2, 2, 0}, 78), in({2, 2, 3}, 79), dim_t(2)}}};
        },
    .dtypes = kMove,
    .host_params = {3}});

IGNIS_OP_INFO(OpInfo{.name = "stack",
                     .fn =
                         [](const TL& x) {
                           return stack({x[0], x[1]}, dim_of(x[2]));
                         },
                     .ref =
                         [](const TL& x) {
                           const int64_t d =
                               dim_of(x[2]) < 0 ? dim_of(x[2]) + x[0].dim() + 1 : dim_of(x[2]);
                           return ref_cat({x[0].unsqueeze(d), x[1].unsqueeze(d)}, d);
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"dim 0", {in({2, 3}, 81), in({2, 3}, 82), dim_t(0)}},
                               {"last dim", {in({2, 3}, 83), in({3, 2}, 84).t(), dim_t(-1)}},
                               {"0-d", {in({}, 85), in({}, 86), dim_t(0)}}};
                         },
                     .dtypes = kMove,
                     .host_params = {2}});

IGNIS_OP_INFO(OpInfo{
    .name = "split_chunks",  // the last, shorter chunk of split(x, 2, 1), and the middle one
    .fn =
        [](const TL& x) {
          auto p = x[0].split(2, 1);
          return cat({p.back(), p[1]}, 1);
        },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          const int64_t n = x[0].size(1);
          return ref_map({x[0].size(0), n - 4 + 2}, [&](const Idx& o) {
            return o[1] < n - 4 ? r({o[0], 4 + o[1]}) : r({o[0], 2 + o[1] - (n - 4)});
          });
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"5 columns", {in({3, 5}, 91)}}};
        },
    .dtypes = kMove,
    .ops = {"split.Tensor"}});

IGNIS_OP_INFO(OpInfo{
    .name = "split_sizes",
    .fn =
        [](const TL& x) {
          return split(x[0], Idx{1, 0, 2}, 0)[2];
        },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);
          return ref_map({2, x[0].size(1)}, [&](const Idx& o) { return r({o[0] + 1, o[1]}); });
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"3 rows", {in({3, 2}, 92)}}};
        },
    .dtypes = kMove,
    .ops = {"split.sizes"}});

IGNIS_OP_INFO(OpInfo{
    .name = "chunk",
    .fn = [](const TL& x) { return x[0].chunk(3, -1)[2]; },
    .ref =
        [](const TL& x) {
          const Reader r(x[0]);  // 7 columns in chunks of 3: the last holds column 6
          return ref_map({x[0].size(0), 1}, [&](const Idx& o) { return r({o[0], 6}); });
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"7 columns", {in({2, 7}, 93)}}};
        },
    .dtypes = kMove});

IGNIS_OP_INFO(OpInfo{.name = "repeat",
                     .fn =
                         [](const TL& x) {
                           return x[0].repeat({2, 1, 3});
                         },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0].reshape({1, x[0].size(0), x[0].size(1)}));
                           return ref_map({2, x[0].size(0), 3 * x[0].size(1)}, [&](const Idx& o) {
                             return r({0, o[1], o[2] % x[0].size(1)});
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{{"2-d", {in({2, 3}, 94)}},
                                                        {"transposed", {in({3, 2}, 95).t()}}};
                         },
                     .dtypes = kMove});

Tensor ref_tri(const Tensor& x, int64_t k, bool lower) {
  const Reader r(x);
  return ref_map(x.sizes(), [&](const Idx& o) {
    const int64_t i = o[o.size() - 2], j = o[o.size() - 1];
    return (lower ? j - i <= k : j - i >= k) ? r(o) : 0.0;
  });
}

std::vector<OpSample> tri_samples() {
  return {{"square", {in({4, 4}, 101)}},
          {"wide batch", {in({2, 3, 5}, 102)}},
          {"transposed", {in({5, 3}, 103).t()}}};
}

IGNIS_OP_INFO(OpInfo{.name = "tril",
                     .fn = [](const TL& x) { return x[0].tril(); },
                     .ref = [](const TL& x) { return ref_tri(x[0], 0, true); },
                     .samples = tri_samples,
                     .dtypes = kMove});
IGNIS_OP_INFO(OpInfo{.name = "tril_diagonal",
                     .fn = [](const TL& x) { return x[0].tril(-1); },
                     .ref = [](const TL& x) { return ref_tri(x[0], -1, true); },
                     .samples = tri_samples,
                     .dtypes = kMove});
IGNIS_OP_INFO(OpInfo{.name = "triu",
                     .fn = [](const TL& x) { return x[0].triu(); },
                     .ref = [](const TL& x) { return ref_tri(x[0], 0, false); },
                     .samples = tri_samples,
                     .dtypes = kMove});
IGNIS_OP_INFO(OpInfo{.name = "triu_diagonal",
                     .fn = [](const TL& x) { return x[0].triu(2); },
                     .ref = [](const TL& x) { return ref_tri(x[0], 2, false); },
                     .samples = tri_samples,
                     .dtypes = kMove});

IGNIS_OP_INFO(OpInfo{.name = "flip",
                     .fn =
                         [](const TL& x) {
                           return x[0].flip({0, -1});
                         },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0]);
                           return ref_map(x[0].sizes(), [&](Idx o) {
                             o.front() = x[0].size(0) - 1 - o.front();
                             o.back() = x[0].size(-1) - 1 - o.back();
                             return r(o);
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"2-d", {in({3, 4}, 111)}},
                               {"3-d", {in({2, 3, 2}, 112)}},
                               {"noncontiguous", {make_noncontiguous({2, 3}, 113)}}};
                         },
                     .dtypes = kMove});

IGNIS_OP_INFO(OpInfo{.name = "flip_last",
                     .fn = [](const TL& x) { return x[0].flip({-1}); },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0]);
                           return ref_map(x[0].sizes(), [&](Idx o) {
                             if (!o.empty()) o.back() = x[0].size(-1) - 1 - o.back();
                             return r(o);
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{{"1-d", {in({5}, 114)}},
                                                        {"0-d", {in({}, 115)}},
                                                        {"transposed", {in({4, 3}, 116).t()}}};
                         },
                     .dtypes = kMove});

// pad over the last two dims of a [2, 3, 4] input with `p` = {left, right, top, bottom}.
Tensor ref_pad(const Tensor& x, const Idx& p, const std::string& mode, double value) {
  const Reader r(x);
  const int64_t H = x.size(1), W = x.size(2);
  return ref_map({x.size(0), H + p[2] + p[3], W + p[0] + p[1]}, [&](const Idx& o) {
    int64_t i = o[1] - p[2], j = o[2] - p[0];
    if (mode == "constant") {
      return i >= 0 && i < H && j >= 0 && j < W ? r({o[0], i, j}) : value;
    }
    auto fix = [&](int64_t v, int64_t n) {
      if (mode == "reflect") return v < 0 ? -v : v >= n ? 2 * (n - 1) - v : v;
      return std::clamp<int64_t>(v, 0, n - 1);
    };
    return r({o[0], fix(i, H), fix(j, W)});
  });
}

std::vector<OpSample> pad_samples() {
  return {{"2x3x4", {in({2, 3, 4}, 121)}}, {"noncontiguous", {make_noncontiguous({2, 3, 4}, 122)}}};
}

IGNIS_OP_INFO(OpInfo{.name = "pad_constant",
                     .fn =
                         [](const TL& x) {
                           return pad(x[0], {1, 2, 0, 1}, "constant", 0.5);
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_pad(x[0], {1, 2, 0, 1}, "constant", 0.5);
                         },
                     .samples = pad_samples,
                     .dtypes = kFloats,
                     .ops = {"pad"}});
IGNIS_OP_INFO(OpInfo{.name = "pad_negative",  // crops the left column and the top row
                     .fn =
                         [](const TL& x) {
                           return pad(x[0], {-1, 1, -1, 0});
                         },
                     .ref =
                         [](const TL& x) {
                           const Reader r(x[0]);
                           return ref_map({2, 2, 4}, [&](const Idx& o) {
                             return o[2] < 3 ? r({o[0], o[1] + 1, o[2] + 1}) : 0.0;
                           });
                         },
                     .samples = pad_samples,
                     .dtypes = kFloats});
IGNIS_OP_INFO(OpInfo{.name = "pad_reflect",
                     .fn =
                         [](const TL& x) {
                           return pad(x[0], {3, 1, 2, 2}, "reflect");
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_pad(x[0], {3, 1, 2, 2}, "reflect", 0);
                         },
                     .samples = pad_samples,
                     .dtypes = kFloats});
IGNIS_OP_INFO(OpInfo{.name = "pad_replicate",
                     .fn =
                         [](const TL& x) {
                           return pad(x[0], {2, 0, 1, 3}, "replicate");
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_pad(x[0], {2, 0, 1, 3}, "replicate", 0);
                         },
                     .samples = pad_samples,
                     .dtypes = kFloats});

// ---- integer-valued outputs (not differentiable)

IGNIS_OP_INFO(OpInfo{.name = "one_hot",
                     .fn = [](const TL& x) { return one_hot(x[0], dim_of(x[1])); },
                     .ref =
                         [](const TL& x) {
                           const auto v = ivalues(x[0]);
                           int64_t c = dim_of(x[1]);
                           if (c < 0) c = *std::max_element(v.begin(), v.end()) + 1;
                           Shape s = x[0].sizes().shape();
                           s.push_back(c);
                           return ref_map(s, [&](const Idx& o) {
                             Idx p(o.begin(), o.end() - 1);
                             return v[ravel(p, x[0].sizes())] == o.back() ? 1.0 : 0.0;
                           });
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"inferred classes", {ix({2, 0, 1, 2}, {2, 2}), dim_t(-1)}},
                               {"given classes", {ix({1, 0, 3}), dim_t(5)}}};
                         },
                     .dtypes = {kFloat64},
                     .differentiable = false,
                     .meta_skip = "num_classes=-1 reads the largest index on the host",
                     .host_params = {1}});

IGNIS_OP_INFO(OpInfo{
    .name = "nonzero",
    .fn = [](const TL& x) { return nonzero(x[0]); },
    .ref =
        [](const TL& x) {
          const auto v = values(x[0]);
          std::vector<double> out;
          for (size_t k = 0; k < v.size(); ++k) {
            if (v[k] == 0) continue;
            for (int64_t i : unravel(static_cast<int64_t>(k), x[0].sizes())) out.push_back(i);
          }
          const int64_t nd = x[0].dim();
          return from_values(out, {nd ? static_cast<int64_t>(out.size()) / nd : 0, nd});
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"2-d", {from_values({0, 1.5, 0, -2, 0, 3}, {2, 3})}},
              {"transposed", {from_values({0, 1.5, 0, -2, 0, 3}, {3, 2}).t()}},
              {"1-d", {from_values({0, 0, 7}, {3})}}};
        },
    .dtypes = kMove,
    .differentiable = false,
    .meta_skip = "its output shape depends on the input values"});

// ---- in place: self is a non-leaf copy of input 0 (so that autograd records the write), then
// the method writes into it; the references are those of the out-of-place ops.

OpInfo inplace_entry(std::string name, std::function<void(Tensor&, const TL&)> f,
                     std::function<Tensor(const TL&)> ref,
                     std::function<std::vector<OpSample>()> samples, std::vector<DType> dtypes,
                     std::vector<size_t> grad_inputs) {
  return OpInfo{.name = std::move(name),
                .fn =
                    [f](const TL& x) {
                      Tensor self = x[0] * 1;
                      f(self, x);
                      return self;
                    },
                .ref = std::move(ref),
                .samples = std::move(samples),
                .dtypes = std::move(dtypes),
                .grad_inputs = std::move(grad_inputs),
                .host_params = {3}};
}

IGNIS_OP_INFO(inplace_entry(
    "scatter_.src", [](Tensor& s, const TL& x) { s.scatter_(dim_of(x[3]), x[1], x[2]); },
    [](const TL& x) { return ref_scatter(x, false); }, scatter_samples, kMove, {0, 2}));

IGNIS_OP_INFO(inplace_entry(
    "scatter_add_", [](Tensor& s, const TL& x) { s.scatter_add_(dim_of(x[3]), x[1], x[2]); },
    [](const TL& x) { return ref_scatter(x, true); },
    [] {
      std::vector<OpSample> s = scatter_samples();
      s.push_back({"duplicates",
                   {in({2, 3}, 131), ix({1, 1, 1, 0, 1, 0}, {2, 3}), in({2, 3}, 132), dim_t(0)}});
      s.push_back({"expanded index",
                   {in({3, 4}, 133), ix({2, 0, 2, 2, 1}).unsqueeze(1).expand({5, 4}),
                    in({5, 4}, 134), dim_t(0)}});
      return s;
    },
    kFloats, {0, 2}));

IGNIS_OP_INFO(inplace_entry(
    "index_add_", [](Tensor& s, const TL& x) { s.index_add_(dim_of(x[3]), x[1], x[2], -0.5); },
    [](const TL& x) { return ref_index_add(x, -0.5); },
    [] {
      return std::vector<OpSample>{
          {"rows with duplicates", {in({4, 3}, 135), ix({3, 0, 3}), in({3, 3}, 136), dim_t(0)}},
          {"columns", {in({2, 4}, 137), ix({1, 1, 2, 0, 1}), in({2, 5}, 138), dim_t(-1)}},
          {"noncontiguous source", {in({3, 4}, 139), ix({0, 2}), in({4, 2}, 140).t(), dim_t(0)}},
          {"0-d index", {in({3}, 141), ix({2}, {}), in({1}, 142), dim_t(0)}},
          {"empty index", {in({3, 2}, 143), ix({}), in({0, 2}, 144), dim_t(0)}}};
    },
    kFloats, {0, 2}));

IGNIS_OP_INFO(inplace_entry(
    "masked_fill_.Scalar", [](Tensor& s, const TL& x) { s.masked_fill_(x[1], 3); },
    [](const TL& x) {
      return ref_elementwise({x[0], x[1].to(kFloat64)},
                             [](auto& v) { return v[1] != 0 ? 3.0 : v[0]; });
    },
    [] {
      // The mask broadcasts to self's shape (not the other way: self cannot grow in place).
      std::vector<OpSample> s;
      for (OpSample& m : mask_samples()) {
        if (m.desc != "mask broadcasts the input") s.push_back(std::move(m));
      }
      return s;
    },
    kMove, {0}));

}  // namespace
}  // namespace ignis::testing
