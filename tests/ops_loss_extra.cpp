// Op-table entries of the margin, hinge, triplet, cosine-embedding, Poisson/Gaussian NLL and CTC
// losses (include/ignis/nn/loss_extra.h), one per loss and reduction. Label targets (+-1 floats
// or int64 class indices) and lengths are inputs that are never differentiated. The references
// are plain float64 loops over row-major values; ctc's runs the forward recursion in probability
// space (not log space, as the kernel does).
#include <algorithm>
#include <cmath>

#include "ignis/nn/loss_extra.h"
#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;
namespace F = nn::functional;
using LossFn = std::function<Tensor(const TL&, const std::string&)>;

Tensor in(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2) {
  return make_input(shape, seed, lo, hi);
}
Tensor ints(std::vector<int64_t> v, IntArrayRef shape) { return tensor(v).reshape(shape); }
Tensor floats(std::vector<double> v, IntArrayRef shape) { return from_values(v, shape); }

Tensor reduce_ref(const Tensor& l, const std::string& reduction) {
  if (reduction == "none") return l;
  const Values v = values(l);
  double s = 0;
  for (double e : v) s += e;
  if (reduction == "mean") s /= static_cast<double>(v.size());
  return from_values({s}, {});
}

/// One entry per reduction: "mean" is named after the op, the others op(reduction).
std::vector<OpInfo> entries(const std::string& op, LossFn fn, LossFn ref,
                            std::function<std::vector<OpSample>()> samples,
                            std::vector<size_t> grad_inputs, const std::string& meta_skip = "",
                            const std::string& variant = "") {
  std::vector<OpInfo> out;
  for (const std::string r : {"mean", "sum", "none"}) {
    OpInfo o;
    o.name = op;
    if (r != "mean" || !variant.empty()) {
      o.name += "(" + r + (variant.empty() ? "" : ", " + variant) + ")";
    }
    o.fn = [fn, r](const TL& x) { return fn(x, r); };
    o.ref = [ref, r](const TL& x) { return ref(x, r); };
    o.samples = samples;
    o.atol32 = 1e-4;
    o.rtol32 = 1e-4;
    o.grad_inputs = grad_inputs;
    o.ops = {op};
    o.meta_skip = meta_skip;
    out.push_back(std::move(o));
  }
  return out;
}

Tensor pm1(std::vector<double> v, IntArrayRef shape) { return floats(std::move(v), shape); }

// ---- margin_ranking_loss, hinge_embedding_loss, soft_margin_loss (elementwise)

IGNIS_OP_INFO(entries(
    "margin_ranking_loss",
    [](const TL& x, const std::string& r) {
      return F::margin_ranking_loss(x[0], x[1], x[2], 0.4, r);
    },
    [](const TL& x, const std::string& r) {
      return reduce_ref(ref_elementwise({x[0], x[1], x[2]},
                                        [](const Values& v) {
                                          return std::max(0.0, -v[2] * (v[0] - v[1]) + 0.4);
                                        }),
                        r);
    },
    [] {
      return std::vector<OpSample>{
          {"[6]", {in({6}, 1), in({6}, 2), pm1({1, -1, -1, 1, 1, -1}, {6})}},
          {"broadcast [3, 1] [1, 4]", {in({3, 1}, 3), in({1, 4}, 4), in({3, 4}, 5).sign()}},
          {"0-d", {in({}, 6), in({}, 7), pm1({-1}, {})}},
          {"noncontiguous",
           {make_noncontiguous({3, 4}, 8), make_noncontiguous({3, 4}, 9), in({3, 4}, 10).sign()}},
          {"empty", {in({0, 3}, 11), in({0, 3}, 12), in({0, 3}, 13)}},
      };
    },
    {0, 1}));

IGNIS_OP_INFO(entries(
    "hinge_embedding_loss",
    [](const TL& x, const std::string& r) { return F::hinge_embedding_loss(x[0], x[1], 1.3, r); },
    [](const TL& x, const std::string& r) {
      return reduce_ref(ref_elementwise({x[0], x[1]},
                                        [](const Values& v) {
                                          const double m =
                                              v[1] != 1 ? std::max(0.0, 1.3 - v[0]) : 0;
                                          return m + (v[1] != -1 ? v[0] : 0.0);
                                        }),
                        r);
    },
    [] {
      return std::vector<OpSample>{
          {"[2, 4] with a 0 target", {in({2, 4}, 21), pm1({1, -1, 0, 1, -1, -1, 1, 1}, {2, 4})}},
          {"target broadcast [4]", {in({3, 4}, 22), pm1({-1, 1, -1, 1}, {4})}},
          {"0-d", {in({}, 23), pm1({-1}, {})}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 24), in({3, 4}, 25).sign()}},
          {"empty", {in({0, 2}, 26), in({0, 2}, 27)}},
      };
    },
    {0}));

double softplus_ref(double z) { return std::max(z, 0.0) + std::log1p(std::exp(-std::abs(z))); }

IGNIS_OP_INFO(entries(
    "soft_margin_loss",
    [](const TL& x, const std::string& r) { return F::soft_margin_loss(x[0], x[1], r); },
    [](const TL& x, const std::string& r) {
      return reduce_ref(
          ref_elementwise({x[0], x[1]}, [](const Values& v) { return softplus_ref(-v[0] * v[1]); }),
          r);
    },
    [] {
      return std::vector<OpSample>{
          {"[3, 4]", {in({3, 4}, 31), in({3, 4}, 32).sign()}},
          {"large inputs", {floats({60, -60, 95, -95, 0.5}, {5}), pm1({-1, 1, -1, -1, 1}, {5})}},
          {"0-d", {in({}, 33), pm1({1}, {})}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 34), in({3, 4}, 35).sign()}},
          {"empty", {in({0, 3}, 36), in({0, 3}, 37)}},
      };
    },
    {0}));

// ---- multilabel_soft_margin_loss

Tensor ref_mlsm(const TL& x, const std::string& r) {
  const Values v = values(x[0]), t = values(x[1]);
  const int64_t c = x[0].size(-1), n = x[0].numel() / std::max<int64_t>(c, 1);
  const Values w = x.size() > 2 ? values(x[2]) : Values(static_cast<size_t>(c), 1.0);
  Values out;
  for (int64_t i = 0; i < n; ++i) {
    double s = 0;
    for (int64_t j = 0; j < c; ++j) {
      const double xv = v[i * c + j], tv = t[i * c + j];
      s += w[j] * (tv * softplus_ref(-xv) + (1 - tv) * softplus_ref(xv));
    }
    out.push_back(s / static_cast<double>(c));
  }
  Shape shape = x[0].sizes().shape();
  shape.pop_back();
  return reduce_ref(from_values(out, shape), r);
}

IGNIS_OP_INFO(entries(
    "multilabel_soft_margin_loss",
    [](const TL& x, const std::string& r) {
      return F::multilabel_soft_margin_loss(x[0], x[1], x.size() > 2 ? x[2] : Tensor(), r);
    },
    ref_mlsm,
    [] {
      auto p = [](IntArrayRef s, uint64_t seed) { return make_input(s, seed, 0, 1); };
      return std::vector<OpSample>{
          {"[3, 5]", {in({3, 5}, 41), p({3, 5}, 42)}},
          {"[C] unbatched", {in({4}, 43), p({4}, 44)}},
          {"class weights, large inputs",
           {floats({50, -50, 0.3, -40, 45, -0.2}, {2, 3}), p({2, 3}, 45), in({3}, 46, 0.5, 2)}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 47), p({3, 4}, 48)}},
      };
    },
    {0, 1}));

// ---- poisson_nll_loss (log_input / full variants)

std::vector<OpInfo> poisson_entries(bool log_input, bool full) {
  const std::string variant =
      std::string(log_input ? "log_input" : "linear") + (full ? ", full" : "");
  return entries(
      "poisson_nll_loss",
      [=](const TL& x, const std::string& r) {
        return F::poisson_nll_loss(x[0], x[1], log_input, full, 1e-8, r);
      },
      [=](const TL& x, const std::string& r) {
        return reduce_ref(ref_elementwise({x[0], x[1]},
                                          [=](const Values& v) {
                                            const double xv = v[0], t = v[1];
                                            double l = log_input ? std::exp(xv) - t * xv
                                                                 : xv - t * std::log(xv + 1e-8);
                                            if (full && t > 1) {
                                              l += t * std::log(t) - t +
                                                   0.5 * std::log(2 * M_PI * t);
                                            }
                                            return l;
                                          }),
                          r);
      },
      [=] {
        const double lo = log_input ? -2 : 0.2;
        return std::vector<OpSample>{
            {"[2, 4], targets 0, 0.5, 1, 3, 10",
             {in({2, 4}, 51, lo, 2), floats({0, 1, 0.5, 3, 10, 2, 1.5, 0}, {2, 4})}},
            {"target broadcast", {in({3, 2}, 52, lo, 2), floats({4, 0.3}, {2})}},
            {"0-d", {in({}, 53, lo, 2), floats({2.5}, {})}},
            {"noncontiguous",
             {make_noncontiguous({3, 4}, 54, lo, 2), make_noncontiguous({3, 4}, 55, 1.5, 5)}},
            {"empty", {in({0, 2}, 56, lo, 2), in({0, 2}, 57, 0, 3)}},
        };
      },
      // Stirling's term switches on at target 1 (a jump): the target is differentiated only
      // without it.
      full ? std::vector<size_t>{0} : std::vector<size_t>{0, 1}, "", variant);
}

IGNIS_OP_INFO(poisson_entries(true, false));
IGNIS_OP_INFO(poisson_entries(true, true));
IGNIS_OP_INFO(poisson_entries(false, false));
IGNIS_OP_INFO(poisson_entries(false, true));

// ---- gaussian_nll_loss

/// clamped: samples where var is below eps, whose gradient passes the clamp straight through (as
/// PyTorch's) where the numerical one is 0: var is not differentiated there (test_loss_torch
/// checks that gradient against PyTorch's).
std::vector<OpInfo> gaussian_entries(bool full, bool clamped = false) {
  return entries(
      "gaussian_nll_loss",
      [=](const TL& x, const std::string& r) {
        return F::gaussian_nll_loss(x[0], x[1], x[2], full, 1e-3, r);
      },
      [=](const TL& x, const std::string& r) {
        Tensor var = x[2];
        if (var.dim() == x[0].dim() - 1) var = var.unsqueeze(-1);
        return reduce_ref(ref_elementwise({x[0], x[1], var},
                                          [=](const Values& v) {
                                            const double s = std::max(v[2], 1e-3);
                                            const double d = v[0] - v[1];
                                            return 0.5 * (std::log(s) + d * d / s) +
                                                   (full ? 0.5 * std::log(2 * M_PI) : 0.0);
                                          }),
                          r);
      },
      [=] {
        if (clamped) {
          return std::vector<OpSample>{
              {"var clamped", {in({4}, 70), in({4}, 71), floats({1e-6, 0, 0.5, 2}, {4})}},
          };
        }
        return std::vector<OpSample>{
            {"[3, 4]", {in({3, 4}, 61), in({3, 4}, 62), in({3, 4}, 63, 0.1, 2)}},
            {"var one dim short", {in({3, 4}, 64), in({3, 4}, 65), in({3}, 66, 0.1, 2)}},
            {"var last dim 1", {in({2, 3, 2}, 67), in({2, 3, 2}, 68), in({2, 3, 1}, 69, 0.1, 2)}},
            {"target broadcast", {in({2, 3}, 72), in({3}, 73), in({2, 3}, 74, 0.1, 2)}},
            {"noncontiguous",
             {make_noncontiguous({3, 4}, 75), make_noncontiguous({3, 4}, 76),
              make_noncontiguous({3, 4}, 77, 0.1, 2)}},
            {"empty", {in({0, 3}, 78), in({0, 3}, 79), in({0, 3}, 80, 0.1, 1)}},
        };
      },
      clamped ? std::vector<size_t>{0, 1} : std::vector<size_t>{0, 1, 2},
      "reads var on the host to check it is non-negative (a documented sync point)",
      clamped ? "var clamped"
      : full  ? "full"
              : "");
}

IGNIS_OP_INFO(gaussian_entries(false));
IGNIS_OP_INFO(gaussian_entries(true));
IGNIS_OP_INFO(gaussian_entries(false, true));

// ---- triplet_margin_loss, cosine_embedding_loss (rows of the last dim)

/// ||a - b + eps||_p along rows of length d.
double pdist(const Values& a, const Values& b, size_t off, int64_t d, double p, double eps) {
  double s = 0;
  for (int64_t k = 0; k < d; ++k) s += std::pow(std::abs(a[off + k] - b[off + k] + eps), p);
  return std::pow(s, 1 / p);
}

std::vector<OpInfo> triplet_entries(double p, bool swap) {
  const double eps = 1e-6, margin = 1.2;
  return entries(
      "triplet_margin_loss",
      [=](const TL& x, const std::string& r) {
        return F::triplet_margin_loss(x[0], x[1], x[2], margin, p, eps, swap, r);
      },
      [=](const TL& x, const std::string& r) {
        const Values a = values(x[0]), po = values(x[1]), ne = values(x[2]);
        const int64_t d = x[0].size(-1), n = x[0].numel() / d;
        Values out;
        for (int64_t i = 0; i < n; ++i) {
          const size_t off = static_cast<size_t>(i * d);
          const double dp = pdist(a, po, off, d, p, eps);
          double dn = pdist(a, ne, off, d, p, eps);
          if (swap) dn = std::min(dn, pdist(po, ne, off, d, p, eps));
          out.push_back(std::max(0.0, margin + dp - dn));
        }
        Shape shape = x[0].sizes().shape();
        shape.pop_back();
        return reduce_ref(from_values(out, shape), r);
      },
      [] {
        return std::vector<OpSample>{
            {"[4, 5]", {in({4, 5}, 81), in({4, 5}, 82), in({4, 5}, 83)}},
            {"[D] unbatched", {in({3}, 84), in({3}, 85), in({3}, 86)}},
            {"noncontiguous",
             {make_noncontiguous({3, 4}, 87), make_noncontiguous({3, 4}, 88),
              make_noncontiguous({3, 4}, 89)}},
        };
      },
      {0, 1, 2}, "",
      std::string("p=") +
          (p == 2   ? "2"
           : p == 1 ? "1"
                    : "3") +
          (swap ? ", swap" : ""));
}

IGNIS_OP_INFO(triplet_entries(2, false));
IGNIS_OP_INFO(triplet_entries(1, true));
IGNIS_OP_INFO(triplet_entries(3, true));

IGNIS_OP_INFO(entries(
    "cosine_embedding_loss",
    [](const TL& x, const std::string& r) {
      return F::cosine_embedding_loss(x[0], x[1], x[2], 0.1, r);
    },
    [](const TL& x, const std::string& r) {
      const Values a = values(x[0]), b = values(x[1]), t = values(x[2]);
      const int64_t d = x[0].size(-1), n = x[0].numel() / d;
      Values out;
      for (int64_t i = 0; i < n; ++i) {
        double ab = 0, aa = 0, bb = 0;
        for (int64_t k = 0; k < d; ++k) {
          ab += a[i * d + k] * b[i * d + k];
          aa += a[i * d + k] * a[i * d + k];
          bb += b[i * d + k] * b[i * d + k];
        }
        const double cos = ab / std::sqrt((aa + 1e-12) * (bb + 1e-12));
        out.push_back(t[i] == 1 ? 1 - cos : t[i] == -1 ? std::max(0.0, cos - 0.1) : 0.0);
      }
      return reduce_ref(from_values(out, x[2].sizes()), r);
    },
    [] {
      return std::vector<OpSample>{
          {"[5, 3]", {in({5, 3}, 91), in({5, 3}, 92), pm1({1, -1, -1, 1, -1}, {5})}},
          {"[D] with 0-d target", {in({4}, 93), in({4}, 94), pm1({-1}, {})}},
          {"noncontiguous",
           {make_noncontiguous({4, 3}, 95), make_noncontiguous({4, 3}, 96),
            pm1({1, -1, 1, -1}, {4})}},
      };
    },
    {0, 1}));

// ---- multi_margin_loss, multilabel_margin_loss (int64 class targets)

std::vector<OpInfo> multi_margin_entries(int64_t p) {
  const double margin = 0.9;
  return entries(
      "multi_margin_loss",
      [=](const TL& x, const std::string& r) {
        return F::multi_margin_loss(x[0], x[1], p, margin, x.size() > 2 ? x[2] : Tensor(), r);
      },
      [=](const TL& x, const std::string& r) {
        const Values v = values(x[0]);
        const int64_t c = x[0].size(-1), n = x[0].numel() / c;
        const Tensor t = x[1].contiguous();
        const Values w = x.size() > 2 ? values(x[2]) : Values(static_cast<size_t>(c), 1.0);
        Values out;
        for (int64_t i = 0; i < n; ++i) {
          const int64_t y = t.data_ptr<int64_t>()[i];
          double s = 0;
          for (int64_t k = 0; k < c; ++k) {
            if (k == y) continue;
            const double z = std::max(0.0, margin - v[i * c + y] + v[i * c + k]);
            s += w[y] * (p == 2 ? z * z : z);
          }
          out.push_back(s / static_cast<double>(c));
        }
        return reduce_ref(from_values(out, x[1].sizes()), r);
      },
      [] {
        return std::vector<OpSample>{
            {"[4, 5]", {in({4, 5}, 101), ints({0, 4, 2, 2}, {4})}},
            {"[C] with 0-d target", {in({5}, 102), ints({3}, {})}},
            {"class weights", {in({3, 4}, 103), ints({1, 3, 0}, {3}), in({4}, 104, 0.5, 2)}},
            {"noncontiguous", {make_noncontiguous({4, 3}, 105), ints({2, 0, 1, 1}, {4})}},
        };
      },
      {0}, "reads the targets on the host to check their range (a documented sync point)",
      p == 2 ? "p=2" : "");
}

IGNIS_OP_INFO(multi_margin_entries(1));
IGNIS_OP_INFO(multi_margin_entries(2));

Tensor ref_mlm(const TL& x, const std::string& r) {
  const Values v = values(x[0]);
  const int64_t c = x[0].size(-1), n = x[0].numel() / c;
  const Tensor t = x[1].contiguous();
  const int64_t* tp = t.data_ptr<int64_t>();
  Values out;
  for (int64_t i = 0; i < n; ++i) {
    std::vector<bool> is_t(static_cast<size_t>(c), false);
    int64_t len = 0;
    while (len < c && tp[i * c + len] >= 0) is_t[tp[i * c + len++]] = true;
    double s = 0;
    for (int64_t j = 0; j < len; ++j) {
      const double xt = v[i * c + tp[i * c + j]];
      for (int64_t k = 0; k < c; ++k) {
        if (!is_t[k]) s += std::max(0.0, 1 - xt + v[i * c + k]);
      }
    }
    out.push_back(s / static_cast<double>(c));
  }
  return reduce_ref(from_values(out, x[0].dim() == 2 ? Shape{n} : Shape{}), r);
}

IGNIS_OP_INFO(entries(
    "multilabel_margin_loss",
    [](const TL& x, const std::string& r) { return F::multilabel_margin_loss(x[0], x[1], r); },
    ref_mlm,
    [] {
      return std::vector<OpSample>{
          {"[4, 5]: rows ended by -1, empty, full, repeated",
           {in({4, 5}, 111),
            ints({3, 0, -1, 1, 2, 1, 4, 2, 0, 3, -1, 1, 2, 0, 0, 2, 2, -1, 0, 0}, {4, 5})}},
          {"[C] unbatched", {in({4}, 112), ints({2, 0, -1, 3}, {4})}},
          {"noncontiguous",
           {make_noncontiguous({3, 4}, 113), ints({1, -1, 0, 0, 3, 2, 0, 1, -1, 0, 0, 0}, {3, 4})}},
      };
    },
    {0}, "reads the targets on the host to find each row's labels (a documented sync point)"));

// ---- ctc_loss: fn takes raw scores x [T, N, C] and runs ctc_loss(log_softmax(x)), the usual
// input, on which PyTorch's gradient formula is the exact one.

/// -log p(target | x) in probability space: x -> softmax, then the alpha recursion.
double ctc_ref_one(const Values& v, int64_t t_max, int64_t n, int64_t c, int64_t b,
                   const std::vector<int64_t>& label, int64_t len, int64_t blank) {
  auto prob = [&](int64_t t, int64_t k) {
    double mx = -INFINITY, s = 0;
    for (int64_t j = 0; j < c; ++j) mx = std::max(mx, v[(t * n + b) * c + j]);
    for (int64_t j = 0; j < c; ++j) s += std::exp(v[(t * n + b) * c + j] - mx);
    return std::exp(v[(t * n + b) * c + k] - mx) / s;
  };
  std::vector<int64_t> ext = {blank};
  for (int64_t l : label) {
    ext.push_back(l);
    ext.push_back(blank);
  }
  const size_t s_len = ext.size();
  if (len == 0) return label.empty() ? 0.0 : INFINITY;
  std::vector<double> alpha(s_len, 0.0);
  alpha[0] = prob(0, blank);
  if (s_len > 1) alpha[1] = prob(0, ext[1]);
  for (int64_t t = 1; t < len; ++t) {
    std::vector<double> next(s_len, 0.0);
    for (size_t s = 0; s < s_len; ++s) {
      double a = alpha[s] + (s > 0 ? alpha[s - 1] : 0.0);
      if (s > 1 && ext[s] != ext[s - 2]) a += alpha[s - 2];
      next[s] = a * prob(t, ext[s]);
    }
    alpha = next;
  }
  const double p = alpha[s_len - 1] + (s_len > 1 ? alpha[s_len - 2] : 0.0);
  return -std::log(p);
}

/// Inputs: scores [T, N, C], targets (padded [N, S] or concatenated), input_lengths,
/// target_lengths.
Tensor ctc_ref(const TL& x, const std::string& r, bool zero_infinity) {
  const Values v = values(x[0]);
  const int64_t t_max = x[0].size(0), n = x[0].size(1), c = x[0].size(2);
  const Tensor tg = x[1].contiguous(), il = x[2].contiguous(), tl = x[3].contiguous();
  Values out;
  double mean = 0;
  int64_t off = 0;
  for (int64_t b = 0; b < n; ++b) {
    const int64_t len = tl.data_ptr<int64_t>()[b];
    const int64_t start = x[1].dim() == 2 ? b * x[1].size(1) : off;
    off += len;
    std::vector<int64_t> label(tg.data_ptr<int64_t>() + start,
                               tg.data_ptr<int64_t>() + start + len);
    double l = ctc_ref_one(v, t_max, n, c, b, label, il.data_ptr<int64_t>()[b], 0);
    if (zero_infinity && std::isinf(l)) l = 0;
    out.push_back(l);
    mean += l / static_cast<double>(std::max<int64_t>(len, 1));
  }
  if (r == "mean") return from_values({mean / static_cast<double>(n)}, {});
  return reduce_ref(from_values(out, {n}), r);
}

std::vector<OpInfo> ctc_entries(bool zero_infinity) {
  std::vector<OpInfo> es = entries(
      "ctc_loss",
      [=](const TL& x, const std::string& r) {
        return F::ctc_loss(log_softmax(x[0], 2), x[1], x[2], x[3], 0, r, zero_infinity);
      },
      [=](const TL& x, const std::string& r) { return ctc_ref(x, r, zero_infinity); },
      [=] {
        std::vector<OpSample> s = {
            {"padded, repeated labels, input_lengths < T",
             {in({6, 3, 4}, 121), ints({1, 2, 2, 3, 3, 0, 2, 0, 0}, {3, 3}), ints({6, 5, 4}, {3}),
              ints({3, 2, 1}, {3})}},
            {"concatenated, an empty target",
             {in({5, 3, 3}, 122), ints({1, 2, 2, 1}, {4}), ints({5, 5, 3}, {3}),
              ints({2, 0, 2}, {3})}},
            {"noncontiguous scores",
             {in({4, 5, 2}, 123).permute({0, 2, 1}), ints({1, 3, 2, 2}, {2, 2}), ints({4, 3}, {2}),
              ints({2, 2}, {2})}},
        };
        if (zero_infinity) {
          s.push_back({"an impossible alignment",
                       {in({4, 2, 3}, 124), ints({1, 1, 1, 2, 1, 0}, {2, 3}), ints({4, 4}, {2}),
                        ints({3, 2}, {2})}});
        }
        return s;
      },
      {0}, "reads the targets and lengths on the host (a documented sync point)",
      zero_infinity ? "zero_infinity" : "");
  for (OpInfo& o : es) {
    o.twice_differentiable = false;  // the backward kernel is not itself differentiable
    o.ops = {"ctc_loss", "_ctc_loss"};
    o.host_params = {1, 2, 3};
  }
  return es;
}

IGNIS_OP_INFO(ctc_entries(false));
IGNIS_OP_INFO(ctc_entries(true));

}  // namespace
}  // namespace ignis::testing
