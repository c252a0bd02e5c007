// Op-table entries of the graph ops (include/ignis/scatter.h): scatter_reduce for every reduction
// with and without include_self, segment_softmax, sparse_mm (COO and CSR), sddmm, degree,
// add_self_loops and gcn_norm. Sizes passed to an op (dims, rows) are 0-d int64 host inputs.
// References are plain loops over the entries in float64.
#include <cmath>
#include <map>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Idx = std::vector<int64_t>;

const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};

Tensor in(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2) {
  return make_input(shape, seed, lo, hi);
}
Tensor ix(const Idx& v) { return tensor(v); }
Tensor ix(const Idx& v, IntArrayRef shape) { return tensor(v).reshape(shape); }
Tensor int_t(int64_t d) { return tensor(Idx{d}).reshape({}); }
int64_t int_of(const Tensor& t) { return t.item<int64_t>(); }

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
std::vector<int64_t> ivalues(const Tensor& t) {
  std::vector<int64_t> r;
  for (double v : values(t)) r.push_back(static_cast<int64_t>(v));
  return r;
}

// ---- scatter_reduce

Tensor ref_scatter_reduce(const TL& x, const std::string& reduce, bool include_self) {
  int64_t d = int_of(x[3]);
  if (d < 0) d += x[0].dim();
  std::vector<double> out = values(x[0]);
  std::vector<int64_t> cnt(out.size(), 0);
  const auto idx = values(x[1]);
  const auto src = values(x[2]);
  for (int64_t k = 0; k < x[1].numel(); ++k) {
    Idx p = unravel(k, x[1].sizes());
    const double v = src[ravel(p, x[2].sizes())];
    p[d] = static_cast<int64_t>(idx[k]);
    const int64_t q = ravel(p, x[0].sizes());
    double& o = out[q];
    if (cnt[q]++ == 0 && !include_self) {
      o = v;
    } else if (reduce == "sum" || reduce == "mean") {
      o += v;
    } else if (reduce == "prod") {
      o *= v;
    } else if (reduce == "amax") {
      o = std::max(o, v);
    } else {
      o = std::min(o, v);
    }
  }
  if (reduce == "mean") {
    for (size_t q = 0; q < out.size(); ++q) {
      if (cnt[q] > 0) out[q] /= static_cast<double>(cnt[q] + (include_self ? 1 : 0));
    }
  }
  return from_values(out, x[0].sizes());
}

std::vector<OpSample> scatter_reduce_samples() {
  return {// The message-passing idiom: one destination per row of src, broadcast over features.
          {"expanded row index (segment path)",
           {in({4, 3}, 1), ix({2, 0, 2, 2, 1, 0}).unsqueeze(1).expand({6, 3}), in({6, 3}, 2),
            int_t(0)}},
          {"expanded index, a node with no edge",
           {in({5, 2}, 3), ix({4, 0, 4, 1}).unsqueeze(1).expand({4, 2}), in({4, 2}, 4), int_t(0)}},
          {"general index along dim 1",
           {in({3, 4}, 5), ix({3, 0, 3, 1, 1, 1, 2, 0, 2}, {3, 3}), in({3, 3}, 6), int_t(1)}},
          {"dim 0, index smaller than src",
           {in({3, 2}, 7), ix({2, 0, 2, 2}, {2, 2}), in({3, 3}, 8), int_t(0)}},
          {"noncontiguous self and src, negative dim",
           {make_noncontiguous({2, 3}, 9), ix({2, 2, 0, 1, 1, 1}, {2, 3}), in({3, 2}, 10).t(),
            int_t(-1)}},
          {"1-d", {in({4}, 11), ix({3, 3, 0, 3, 1}), in({5}, 12), int_t(0)}},
          {"empty index", {in({3, 2}, 13), ix({}, {0, 2}), in({0, 2}, 14), int_t(0)}}};
}

void scatter_reduce_entry(const std::string& reduce, bool include_self) {
  OpInfo o{.name = "scatter_reduce_" + reduce + (include_self ? "" : "_exclude_self"),
           .fn =
               [=](const TL& x) {
                 return scatter_reduce(x[0], int_of(x[3]), x[1], x[2], reduce, include_self);
               },
           .ref = [=](const TL& x) { return ref_scatter_reduce(x, reduce, include_self); },
           .samples =
               [reduce] {
                 auto s = scatter_reduce_samples();
                 if (reduce == "prod") {
                   // A zero in a group: its gradient is the product of the others. (Two zeros in a
                   // group: test_gnn_ops.cpp, ScatterReduce.ProdTwoZeros.)
                   std::vector<double> v = values(in({6, 2}, 15));
                   for (int k : {2, 8, 5}) v[k] = 0.0;  // (1,0), (4,0), (2,1)
                   Tensor src = from_values(v, {6, 2});
                   s.push_back({"zeros in src",
                                {in({3, 2}, 16), ix({0, 0, 1, 2, 2, 2}).unsqueeze(1).expand({6, 2}),
                                 src, int_t(0)}});
                 }
                 return s;
               },
           .dtypes = kFloats,
           .atol_bf16 = 5e-2,
           .rtol_bf16 = 5e-2,
           .grad_inputs = {0, 2},
           .ops = {"scatter_reduce"},
           .host_params = {3}};
  op_table().push_back(std::move(o));
}

const bool scatter_reduce_entries = [] {
  for (const char* r : {"sum", "mean", "prod", "amax", "amin"}) {
    scatter_reduce_entry(r, true);
    scatter_reduce_entry(r, false);
  }
  // The in-place method on a non-leaf copy of self (autograd through inplace_from).
  for (const char* r : {"sum", "amax"}) {
    OpInfo o = op_table().back();
    for (const OpInfo& e : op_table()) {
      if (e.name == std::string("scatter_reduce_") + r) o = e;
    }
    o.name = std::string("scatter_reduce_ in place ") + r;
    o.fn = [r](const TL& x) {
      Tensor y = x[0] * 1;
      y.scatter_reduce_(int_of(x[3]), x[1], x[2], r);
      return y;
    };
    o.ops = {"scatter_reduce_"};
    op_table().push_back(std::move(o));
  }
  return true;
}();

// ---- segment_softmax

IGNIS_OP_INFO(OpInfo{
    .name = "segment_softmax",
    .fn = [](const TL& x) { return segment_softmax(x[0], x[1], int_of(x[2])); },
    .ref =
        [](const TL& x) {
          const auto idx = ivalues(x[1]);
          const auto v = values(x[0]);
          const int64_t E = x[0].size(0), F = E ? x[0].numel() / E : 0;
          std::vector<double> out(v.size());
          for (int64_t f = 0; f < F; ++f) {
            std::map<int64_t, double> mx, den;
            for (int64_t e = 0; e < E; ++e) {
              const double a = v[e * F + f];
              mx[idx[e]] = mx.count(idx[e]) ? std::max(mx[idx[e]], a) : a;
            }
            for (int64_t e = 0; e < E; ++e) den[idx[e]] += std::exp(v[e * F + f] - mx[idx[e]]);
            for (int64_t e = 0; e < E; ++e) {
              out[e * F + f] = std::exp(v[e * F + f] - mx[idx[e]]) / den[idx[e]];
            }
          }
          return from_values(out, x[0].sizes());
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"edges of 3 nodes, 2 heads", {in({7, 2}, 21), ix({1, 0, 1, 2, 1, 0, 3}), int_t(5)}},
              {"1-d, large values", {in({5}, 22, -30, 30), ix({0, 0, 1, 1, 0}), int_t(2)}},
              {"3-d", {in({4, 2, 2}, 23), ix({1, 1, 0, 1}), int_t(2)}},
              {"empty", {in({0, 3}, 24), ix({}), int_t(3)}}};
        },
    .dtypes = kFloats,
    .host_params = {2}});

// ---- sparse products

// A @ dense with A given by (row, col, value) entries.
Tensor ref_spmm(const Idx& row, const Idx& col, const std::vector<double>& val, int64_t rows,
                const Tensor& dense) {
  const auto d = values(dense);
  const int64_t F = dense.size(1);
  std::vector<double> out(static_cast<size_t>(rows * F), 0.0);
  for (size_t k = 0; k < row.size(); ++k) {
    for (int64_t f = 0; f < F; ++f) out[row[k] * F + f] += val[k] * d[col[k] * F + f];
  }
  return from_values(out, {rows, F});
}

std::vector<double> entry_values(const Tensor& v, size_t nnz) {
  return v.defined() ? values(v) : std::vector<double>(nnz, 1.0);
}

IGNIS_OP_INFO(OpInfo{
    .name = "sparse_mm",
    .fn = [](const TL& x) { return sparse_mm(x[0], x[1], x[2], int_of(x[3])); },
    .ref =
        [](const TL& x) {
          const auto idx = ivalues(x[0]);
          const size_t nnz = idx.size() / 2;
          Idx row(idx.begin(), idx.begin() + nnz), col(idx.begin() + nnz, idx.end());
          return ref_spmm(row, col, entry_values(x[1], nnz), int_of(x[3]), x[2]);
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"duplicates and an empty row",
               {ix({2, 0, 2, 3, 0, 2, 1, 0, 1, 2, 1, 1}, {2, 6}), in({6}, 31), in({3, 4}, 32),
                int_t(4)}},
              {"no values (ones)",
               {ix({0, 1, 1, 1, 0, 2}, {2, 3}), Tensor(), in({3, 2}, 33), int_t(2)}},
              {"transposed dense",
               {ix({1, 0, 0, 2, 1, 1}, {2, 3}), in({3}, 34), in({2, 3}, 35).t(), int_t(3)}},
              {"no entries", {ix({}, {2, 0}), in({0}, 36), in({2, 3}, 37), int_t(2)}}};
        },
    .dtypes = kFloats,
    .grad_inputs = {1, 2},
    .host_params = {3}});

IGNIS_OP_INFO(OpInfo{
    .name = "sparse_csr_mm",
    .fn = [](const TL& x) { return sparse_csr_mm(x[0], x[1], x[2], x[3]); },
    .ref =
        [](const TL& x) {
          const auto rp = ivalues(x[0]);
          const auto col = ivalues(x[1]);
          Idx row;
          for (size_t r = 0; r + 1 < rp.size(); ++r) {
            for (int64_t k = rp[r]; k < rp[r + 1]; ++k) row.push_back(static_cast<int64_t>(r));
          }
          return ref_spmm(row, col, entry_values(x[2], col.size()),
                          static_cast<int64_t>(rp.size()) - 1, x[3]);
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"4 rows, one empty",
               {ix({0, 2, 2, 5, 6}), ix({1, 0, 2, 2, 0, 1}), in({6}, 41), in({3, 3}, 42)}},
              {"no values", {ix({0, 1, 3}), ix({2, 0, 2}), Tensor(), in({3, 2}, 43)}}};
        },
    .dtypes = kFloats,
    .grad_inputs = {2, 3}});

IGNIS_OP_INFO(OpInfo{
    .name = "sddmm",
    .fn = [](const TL& x) { return sddmm(x[0], x[1], x[2]); },
    .ref =
        [](const TL& x) {
          const auto idx = ivalues(x[0]);
          const size_t nnz = idx.size() / 2;
          const auto a = values(x[1]), b = values(x[2]);
          const int64_t F = x[1].size(1);
          std::vector<double> out(nnz, 0.0);
          for (size_t e = 0; e < nnz; ++e) {
            for (int64_t f = 0; f < F; ++f) out[e] += a[idx[e] * F + f] * b[idx[nnz + e] * F + f];
          }
          return from_values(out, {static_cast<int64_t>(nnz)});
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"rectangular",
               {ix({2, 0, 2, 1, 0, 1, 1, 3}, {2, 4}), in({3, 5}, 51), in({4, 5}, 52)}},
              {"noncontiguous",
               {ix({0, 1, 1, 0}, {2, 2}), make_noncontiguous({2, 3}, 53), in({3, 2}, 54).t()}}};
        },
    .dtypes = kFloats,
    .grad_inputs = {1, 2}});

// ---- graph utilities

IGNIS_OP_INFO(OpInfo{.name = "degree",
                     .fn = [](const TL& x) { return degree(x[0], int_of(x[1])); },
                     .ref =
                         [](const TL& x) {
                           std::vector<double> out(static_cast<size_t>(int_of(x[1])), 0.0);
                           for (int64_t i : ivalues(x[0])) out[i] += 1;
                           return from_values(out, {int_of(x[1])});
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"in-degrees", {ix({3, 0, 3, 3, 1}), int_t(5)}},
                               {"no edges", {ix({}), int_t(2)}}};
                         },
                     .differentiable = false,
                     .host_params = {1}});

// The edge list of a result and its weights in one tensor (index values are small integers,
// exact in every dtype).
Tensor flat_graph(const std::tuple<Tensor, Tensor>& r) {
  const auto& [ei, w] = r;
  return cat({ei.to(w.dtype()).reshape({-1}), w});
}

IGNIS_OP_INFO(OpInfo{
    .name = "add_self_loops",
    .fn = [](const TL& x) { return flat_graph(add_self_loops(x[0], x[1], 0.5, int_of(x[2]))); },
    .ref =
        [](const TL& x) {
          auto idx = ivalues(x[0]);
          const size_t E = idx.size() / 2;
          const int64_t n = int_of(x[2]);
          std::vector<double> src(idx.begin(), idx.begin() + E), dst(idx.begin() + E, idx.end());
          std::vector<double> w = values(x[1]);
          for (int64_t i = 0; i < n; ++i) {
            src.push_back(i);
            dst.push_back(i);
            w.push_back(0.5);
          }
          std::vector<double> out = src;
          out.insert(out.end(), dst.begin(), dst.end());
          out.insert(out.end(), w.begin(), w.end());
          return from_values(out, {static_cast<int64_t>(out.size())});
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"3 edges, 4 nodes", {ix({0, 1, 3, 1, 2, 0}, {2, 3}), in({3}, 61), int_t(4)}},
              {"no edges", {ix({}, {2, 0}), in({0}, 62), int_t(2)}}};
        },
    .dtypes = kFloats,
    .grad_inputs = {1},
    .host_params = {2}});

Tensor ref_gcn_norm(const TL& x, bool loops) {
  auto idx = ivalues(x[0]);
  const size_t E = idx.size() / 2;
  const int64_t n = int_of(x[2]);
  Idx src(idx.begin(), idx.begin() + E), dst(idx.begin() + E, idx.end());
  std::vector<double> w = values(x[1]);
  if (loops) {
    for (int64_t i = 0; i < n; ++i) {
      src.push_back(i);
      dst.push_back(i);
      w.push_back(1.0);
    }
  }
  std::vector<double> deg(static_cast<size_t>(n), 0.0);
  for (size_t e = 0; e < dst.size(); ++e) deg[dst[e]] += w[e];
  auto dis = [&](int64_t i) { return deg[i] > 0 ? 1.0 / std::sqrt(deg[i]) : 0.0; };
  std::vector<double> out;
  for (int64_t s : src) out.push_back(static_cast<double>(s));
  for (int64_t d : dst) out.push_back(static_cast<double>(d));
  for (size_t e = 0; e < dst.size(); ++e) out.push_back(dis(src[e]) * w[e] * dis(dst[e]));
  return from_values(out, {static_cast<int64_t>(out.size())});
}

std::vector<OpSample> gcn_norm_samples() {
  return {{"weighted, an isolated node",
           {ix({0, 1, 1, 2, 2, 0, 1, 0, 2, 1}, {2, 5}), in({5}, 71, 0.5, 2), int_t(4)}},
          {"no edges", {ix({}, {2, 0}), in({0}, 72), int_t(2)}}};
}

IGNIS_OP_INFO(OpInfo{
    .name = "gcn_norm",
    .fn = [](const TL& x) { return flat_graph(gcn_norm(x[0], x[1], int_of(x[2]), true)); },
    .ref = [](const TL& x) { return ref_gcn_norm(x, true); },
    .samples = gcn_norm_samples,
    .dtypes = kFloats,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .grad_inputs = {1},
    .host_params = {2}});

IGNIS_OP_INFO(OpInfo{
    .name = "gcn_norm_no_self_loops",
    .fn = [](const TL& x) { return flat_graph(gcn_norm(x[0], x[1], int_of(x[2]), false)); },
    .ref = [](const TL& x) { return ref_gcn_norm(x, false); },
    .samples = gcn_norm_samples,
    .dtypes = kFloats,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .grad_inputs = {1},
    .ops = {"gcn_norm"},
    .host_params = {2}});

}  // namespace
}  // namespace ignis::testing
