// Op table entries of the linear algebra ops (matmul in every rank combination, mm, bmm, addmm,
// dot, outer, linear) and binary_cross_entropy_with_logits. References are plain loops.
#include <algorithm>
#include <cmath>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kBFloat16};

Tensor n(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }

// ---- references

// torch.matmul by definition: 1-D operands get a unit dim (removed again at the end), batch
// dims broadcast, out[..., i, j] = sum_k a[..., i, k] * b[..., k, j].
Tensor ref_matmul(const Tensor& a0, const Tensor& b0) {
  Shape sa = a0.sizes().shape(), sb = b0.sizes().shape();
  const bool va = sa.size() == 1, vb = sb.size() == 1;
  if (va) sa.insert(sa.begin(), 1);
  if (vb) sb.push_back(1);
  const Values av = values(a0), bv = values(b0);
  const int64_t M = sa[sa.size() - 2], K = sa.back(), N = sb.back();
  const size_t nba = sa.size() - 2, nbb = sb.size() - 2, nb = std::max(nba, nbb);
  Shape batch(nb);
  for (size_t i = 0; i < nb; ++i) {
    const int64_t x = i + nba >= nb ? sa[i + nba - nb] : 1;
    const int64_t y = i + nbb >= nb ? sb[i + nbb - nb] : 1;
    batch[i] = x == 1 ? y : x;
  }
  int64_t nbatch = 1;
  for (int64_t s : batch) nbatch *= s;
  Values out(static_cast<size_t>(nbatch * M * N), 0.0);
  for (int64_t q = 0; q < nbatch; ++q) {
    // Offsets of batch q in a and b (broadcast dims index 0).
    int64_t rem = q, oa = 0, ob = 0, ma = 1, mb = 1;
    for (size_t i = nb; i-- > 0;) {
      const int64_t idx = rem % batch[i];
      rem /= batch[i];
      if (i + nba >= nb) {
        const int64_t s = sa[i + nba - nb];
        oa += (s == 1 ? 0 : idx) * ma;
        ma *= s;
      }
      if (i + nbb >= nb) {
        const int64_t s = sb[i + nbb - nb];
        ob += (s == 1 ? 0 : idx) * mb;
        mb *= s;
      }
    }
    for (int64_t i = 0; i < M; ++i) {
      for (int64_t j = 0; j < N; ++j) {
        double s = 0;
        for (int64_t k = 0; k < K; ++k) {
          s += av[(oa * M + i) * K + k] * bv[(ob * K + k) * N + j];
        }
        out[(q * M + i) * N + j] = s;
      }
    }
  }
  Shape shape = batch;
  if (!va) shape.push_back(M);
  if (!vb) shape.push_back(N);
  return from_values(out, shape);
}

Tensor ref_transpose(const Tensor& w) {
  const Values v = values(w);
  const int64_t r = w.size(0), c = w.size(1);
  Values t(v.size());
  for (int64_t i = 0; i < r; ++i) {
    for (int64_t j = 0; j < c; ++j) t[j * r + i] = v[i * c + j];
  }
  return from_values(t, {c, r});
}

// beta * self + alpha * m1 @ m2 with self broadcast.
Tensor ref_addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, double beta,
                 double alpha) {
  const Tensor p = ref_matmul(m1, m2);
  return ref_elementwise({self, p}, [=](const Values& v) { return beta * v[0] + alpha * v[1]; });
}

// softplus(-x) computed stably in float64.
double softplus_neg(double x) { return std::max(-x, 0.0) + std::log1p(std::exp(-std::abs(x))); }

// Per-element loss (1 - t) x + (1 + (pw - 1) t) softplus(-x), times w.
Tensor ref_bce(const Inputs& x, const std::string& reduction) {
  Inputs in = {x[0], x[1]};
  const bool has_w = x.size() > 2 && x[2].defined(), has_pw = x.size() > 3 && x[3].defined();
  if (has_w) in.push_back(x[2]);
  if (has_pw) in.push_back(x[3]);
  Tensor l = ref_elementwise(in, [=](const Values& v) {
    const double lw = has_pw ? 1 + (v[has_w ? 3 : 2] - 1) * v[1] : 1.0;
    const double r = (1 - v[1]) * v[0] + lw * softplus_neg(v[0]);
    return has_w ? r * v[2] : r;
  });
  if (reduction == "none") return l;
  const Values v = values(l);
  double s = 0;
  for (double e : v) s += e;
  if (reduction == "mean") s /= static_cast<double>(v.size());
  return from_values({s}, {});
}

OpInfo entry(std::string name, std::function<Tensor(const Inputs&)> fn,
             std::function<Tensor(const Inputs&)> ref, std::function<std::vector<OpSample>()> s) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = std::move(fn);
  o.ref = std::move(ref);
  o.samples = std::move(s);
  o.dtypes = kFloatDtypes;
  // Sums of products: float32 errors grow with the reduction length.
  o.atol32 = 1e-4;
  o.rtol32 = 1e-4;
  o.atol_bf16 = 5e-2;
  return o;
}

// ---- matrix products

IGNIS_OP_INFO(entry(
    "matmul", [](const Inputs& x) { return matmul(x[0], x[1]); },
    [](const Inputs& x) { return ref_matmul(x[0], x[1]); },
    [] {
      return std::vector<OpSample>{
          {"1-D . 1-D", {n({4}, 1), n({4}, 2)}},
          {"2-D @ 2-D", {n({3, 4}, 3), n({4, 5}, 4)}},
          {"1-D @ 2-D", {n({4}, 5), n({4, 5}, 6)}},
          {"2-D @ 1-D", {n({3, 4}, 7), n({4}, 8)}},
          {"3-D @ 3-D", {n({2, 3, 4}, 9), n({2, 4, 5}, 10)}},
          {"3-D @ 2-D (folded)", {n({2, 3, 4}, 11), n({4, 5}, 12)}},
          {"3-D @ 1-D", {n({2, 3, 4}, 13), n({4}, 14)}},
          {"2-D @ 3-D", {n({3, 4}, 15), n({2, 4, 5}, 16)}},
          {"1-D @ 3-D", {n({4}, 17), n({2, 4, 5}, 18)}},
          {"broadcast batch", {n({2, 1, 3, 4}, 19), n({3, 4, 2}, 20)}},
          {"broadcast batch both", {n({2, 1, 3, 4}, 21), n({1, 2, 4, 2}, 22)}},
          {"transposed", {n({4, 3}, 23).t(), n({5, 4}, 24).t()}},
          {"transposed batch (not foldable)", {n({2, 4, 3}, 25).mT(), n({4, 5}, 26)}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 27), make_noncontiguous({4, 2}, 28)}},
          {"skinny rows (1 x K @ K x N)", {n({1, 20}, 29), n({20, 70}, 30)}},
          {"skinny rows, transposed weight", {n({2, 17}, 31), n({9, 17}, 32).t()}},
          {"skinny columns (matrix-vector)", {n({9, 17}, 33), n({17}, 34)}},
          {"general", {n({9, 20}, 35), n({20, 7}, 36)}},
          {"empty rows", {n({0, 4}, 37), n({4, 3}, 38)}},
          {"empty inner dim", {n({3, 0}, 39), n({0, 2}, 40)}},
          {"empty batch", {n({0, 2, 3}, 41), n({3, 2}, 42)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "mm", [](const Inputs& x) { return mm(x[0], x[1]); },
    [](const Inputs& x) { return ref_matmul(x[0], x[1]); },
    [] {
      return std::vector<OpSample>{
          {"3x4 @ 4x5", {n({3, 4}, 1), n({4, 5}, 2)}},
          {"transposed", {n({4, 3}, 3).t(), n({5, 4}, 4).t()}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 5), make_noncontiguous({4, 6}, 6)}},
          {"1 x K", {n({1, 6}, 7), n({6, 5}, 8)}},
          {"N = 1", {n({5, 6}, 9), n({6, 1}, 10)}},
          {"empty", {n({0, 4}, 11), n({4, 3}, 12)}},
          {"inner dim 0", {n({3, 0}, 13), n({0, 2}, 14)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "bmm", [](const Inputs& x) { return bmm(x[0], x[1]); },
    [](const Inputs& x) { return ref_matmul(x[0], x[1]); },
    [] {
      return std::vector<OpSample>{
          {"2x3x4 @ 2x4x5", {n({2, 3, 4}, 1), n({2, 4, 5}, 2)}},
          {"transposed", {n({2, 4, 3}, 3).mT(), n({2, 5, 4}, 4).mT()}},
          {"batch-major strides", {n({3, 2, 4}, 5).transpose(0, 1), n({2, 4, 2}, 6)}},
          {"skinny", {n({3, 1, 6}, 7), n({3, 6, 9}, 8)}},
          {"empty batch", {n({0, 3, 4}, 9), n({0, 4, 5}, 10)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "addmm", [](const Inputs& x) { return addmm(x[0], x[1], x[2]); },
    [](const Inputs& x) { return ref_addmm(x[0], x[1], x[2], 1, 1); },
    [] {
      return std::vector<OpSample>{
          {"full self", {n({3, 5}, 1), n({3, 4}, 2), n({4, 5}, 3)}},
          {"bias row", {n({5}, 4), n({3, 4}, 5), n({4, 5}, 6)}},
          {"column self", {n({3, 1}, 7), n({3, 4}, 8), n({4, 5}, 9)}},
          {"0-d self", {n({}, 10), n({3, 4}, 11), n({4, 5}, 12)}},
          {"transposed", {n({5}, 13), n({4, 3}, 14).t(), n({5, 4}, 15).t()}},
          {"skinny", {n({6}, 16), n({1, 7}, 17), n({6, 7}, 18).t()}},
      };
    }));

IGNIS_OP_INFO(entry(
    "addmm_beta_alpha", [](const Inputs& x) { return addmm(x[0], x[1], x[2], 0.5, -2.0); },
    [](const Inputs& x) { return ref_addmm(x[0], x[1], x[2], 0.5, -2.0); },
    [] {
      return std::vector<OpSample>{
          {"full self", {n({3, 5}, 1), n({3, 4}, 2), n({4, 5}, 3)}},
          {"bias row", {n({5}, 4), n({2, 4}, 5), n({4, 5}, 6)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "dot", [](const Inputs& x) { return dot(x[0], x[1]); },
    [](const Inputs& x) { return ref_matmul(x[0], x[1]); },
    [] {
      return std::vector<OpSample>{
          {"5 . 5", {n({5}, 1), n({5}, 2)}},
          {"long", {n({37}, 3), n({37}, 4)}},
          {"noncontiguous", {make_noncontiguous({6}, 5), make_noncontiguous({6}, 6)}},
          {"empty", {n({0}, 7), n({0}, 8)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "outer", [](const Inputs& x) { return outer(x[0], x[1]); },
    [](const Inputs& x) {
      return ref_matmul(x[0].reshape({-1, 1}), x[1].reshape({1, -1}));
    },
    [] {
      return std::vector<OpSample>{
          {"3 x 4", {n({3}, 1), n({4}, 2)}},
          {"noncontiguous", {make_noncontiguous({3}, 3), n({2}, 4)}},
          {"empty", {n({0}, 5), n({4}, 6)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "linear", [](const Inputs& x) { return linear(x[0], x[1], x[2]); },
    [](const Inputs& x) {
      const Tensor p = ref_matmul(x[0], ref_transpose(x[1]));
      return ref_elementwise({p, x[2]}, [](const Values& v) { return v[0] + v[1]; });
    },
    [] {
      return std::vector<OpSample>{
          {"2-D input", {n({3, 4}, 1), n({5, 4}, 2), n({5}, 3)}},
          {"3-D input", {n({2, 3, 4}, 4), n({5, 4}, 5), n({5}, 6)}},
          {"1-D input", {n({4}, 7), n({5, 4}, 8), n({5}, 9)}},
          {"one row (inference)", {n({1, 17}, 10), n({9, 17}, 11), n({9}, 12)}},
          {"transposed 3-D input", {n({2, 4, 3}, 13).mT(), n({5, 4}, 14), n({5}, 15)}},
          {"noncontiguous weight", {n({3, 4}, 16), make_noncontiguous({5, 4}, 17), n({5}, 18)}},
          {"empty batch", {n({0, 4}, 19), n({5, 4}, 20), n({5}, 21)}},
          {"8 rows", {n({8, 6}, 22), n({5, 6}, 23), n({5}, 24)}},
      };
    }));

// Outputs are kept away from relu's kink at 0 by the random draws (the gradcheck's central
// differences would straddle it otherwise).
IGNIS_OP_INFO(entry(
    "linear_relu", [](const Inputs& x) { return linear_relu(x[0], x[1], x[2]); },
    [](const Inputs& x) {
      const Tensor p = ref_matmul(x[0], ref_transpose(x[1]));
      return ref_elementwise({p, x[2]}, [](const Values& v) {
        const double y = v[0] + v[1];
        return y > 0 ? y : 0.0;
      });
    },
    [] {
      return std::vector<OpSample>{
          {"2-D input", {n({3, 4}, 31), n({5, 4}, 32), n({5}, 33)}},
          {"3-D input", {n({2, 3, 4}, 34), n({5, 4}, 35), n({5}, 36)}},
          {"1-D input", {n({4}, 37), n({5, 4}, 38), n({5}, 39)}},
          {"8 rows", {n({8, 6}, 40), n({5, 6}, 41), n({5}, 42)}},
          {"8 rows, strided input", {n({6, 8}, 43).t(), n({5, 6}, 44), n({5}, 45)}},
          {"noncontiguous weight", {n({8, 4}, 46), make_noncontiguous({5, 4}, 47), n({5}, 48)}},
          {"empty batch", {n({0, 4}, 49), n({5, 4}, 50), n({5}, 51)}},
      };
    }));

IGNIS_OP_INFO(entry(
    "linear_no_bias", [](const Inputs& x) { return linear(x[0], x[1]); },
    [](const Inputs& x) { return ref_matmul(x[0], ref_transpose(x[1])); },
    [] {
      return std::vector<OpSample>{
          {"2-D input", {n({3, 4}, 1), n({5, 4}, 2)}},
          {"3-D input", {n({2, 3, 4}, 3), n({5, 4}, 4)}},
          {"1-D input", {n({4}, 5), n({5, 4}, 6)}},
          {"transposed 3-D input", {n({2, 4, 3}, 7).mT(), n({5, 4}, 8)}},
      };
    }));

// ---- binary_cross_entropy_with_logits

// Logits include exact zeros (where relu/abs have kinks) and large magnitudes.
std::vector<OpSample> bce_samples(bool weighted) {
  auto t = [](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed, 0, 1); };
  Values edge = {0.0, -0.0, 30.0, -30.0, 0.5, -1.5};
  std::vector<OpSample> s = {
      {"2x3", {n({2, 3}, 1), t({2, 3}, 2)}},
      {"zeros and large logits", {from_values(edge, {6}), t({6}, 3)}},
      {"0-d", {n({}, 4), t({}, 5)}},
      {"noncontiguous", {n({4, 3}, 6).t(), make_noncontiguous({3, 4}, 7, 0, 1)}},
      {"empty", {n({0, 3}, 8), t({0, 3}, 9)}},
  };
  if (weighted) {
    for (OpSample& x : s) {
      const int64_t c = x.inputs[0].dim() ? x.inputs[0].size(-1) : 1;
      x.inputs.push_back(make_input({c}, 20, 0.5, 2));  // weight, broadcast along rows
      x.inputs.push_back(make_input({c}, 21, 0.5, 3));  // pos_weight, per class
    }
  }
  return s;
}

OpInfo bce_entry(const std::string& reduction, bool weighted) {
  OpInfo o = entry(
      "binary_cross_entropy_with_logits_" + reduction + (weighted ? "_weighted" : ""),
      [reduction](const Inputs& x) {
        return x.size() > 2
                   ? binary_cross_entropy_with_logits(x[0], x[1], x[2], x[3], reduction)
                   : binary_cross_entropy_with_logits(x[0], x[1], Tensor(), Tensor(), reduction);
      },
      [reduction](const Inputs& x) { return ref_bce(x, reduction); },
      [weighted] { return bce_samples(weighted); });
  o.atol32 = 1e-5;
  return o;
}

IGNIS_OP_INFO(bce_entry("none", false));
IGNIS_OP_INFO(bce_entry("mean", false));
IGNIS_OP_INFO(bce_entry("sum", false));
IGNIS_OP_INFO(bce_entry("none", true));
IGNIS_OP_INFO(bce_entry("mean", true));
IGNIS_OP_INFO(bce_entry("sum", true));

}  // namespace
}  // namespace ignis::testing
