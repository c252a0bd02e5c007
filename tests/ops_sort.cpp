// Op table entries of sorting, selection, scans and NaN-aware reductions: sort, argsort, topk,
// median, mode, cumprod, logcumsumexp, var_mean, std_mean, nansum, nanmean. References are
// plain loops over values() in float64 (a stable sort with NaN above +inf, PyTorch's order).
// Samples with ties, NaN or inf are forward-only entries (sorting is not differentiable where
// the order changes); PyTorch's own values at the edges are in test_sort_parity.cpp.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;

constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();
const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};
const std::vector<DType> kWithInts = {kFloat32, kFloat64, kBFloat16, kInt32, kInt64};

/// Applies f to every line of x along dim; f returns m values per line, which take the line's
/// place (m = 1 and !keepdim: the dim is dropped). 0-d x is one line of one element.
Tensor ref_lines(const Tensor& x, int64_t dim, bool keepdim,
                 const std::function<Values(const Values&)>& f, int64_t m = -1) {
  const int64_t nd = x.dim();
  const int64_t d = nd == 0 ? 0 : (dim + nd) % nd;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= x.size(k);
  for (int64_t k = d + 1; k < nd; ++k) inner *= x.size(k);
  const int64_t n = nd == 0 ? 1 : x.size(d);
  if (m < 0) m = n;
  const Values v = values(x);
  Values o(static_cast<size_t>(outer * m * inner));
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      Values line;
      for (int64_t k = 0; k < n; ++k) line.push_back(v[(a * n + k) * inner + b]);
      const Values r = f(line);
      for (int64_t k = 0; k < m; ++k) o[(a * m + k) * inner + b] = r[k];
    }
  }
  Shape shape = x.sizes().shape();
  if (nd == 0) return from_values(o, {});
  shape[d] = m;
  if (m == 1 && !keepdim) shape.erase(shape.begin() + d);
  return from_values(o, shape);
}

bool before(double a, double b) {  // ascending, NaN last
  if (std::isnan(a)) return false;
  if (std::isnan(b)) return true;
  return a < b;
}
/// Positions of the line in stable sorted order.
std::vector<size_t> order(const Values& v, bool descending) {
  std::vector<size_t> idx(v.size());
  std::iota(idx.begin(), idx.end(), 0);
  std::stable_sort(idx.begin(), idx.end(), [&](size_t a, size_t b) {
    return descending ? before(v[b], v[a]) : before(v[a], v[b]);
  });
  return idx;
}
std::function<Values(const Values&)> r_sort(bool descending, bool want_indices, size_t k = 0) {
  return [=](const Values& v) {
    const std::vector<size_t> idx = order(v, descending);
    Values o;
    for (size_t i = 0; i < (k ? k : idx.size()); ++i) {
      o.push_back(want_indices ? static_cast<double>(idx[i]) : v[idx[i]]);
    }
    return o;
  };
}
std::function<Values(const Values&)> r_median(bool want_index) {
  return [=](const Values& v) {
    for (size_t i = 0; i < v.size(); ++i) {
      if (std::isnan(v[i])) return Values{want_index ? static_cast<double>(i) : kNaN};
    }
    const size_t at = order(v, false)[(v.size() - 1) / 2];
    return Values{want_index ? static_cast<double>(at) : v[at]};
  };
}
std::function<Values(const Values&)> r_mode(bool want_index) {
  return [=](const Values& v) {
    double best = kNaN;
    size_t best_count = 0, best_at = 0;
    for (size_t i = 0; i < v.size(); ++i) {
      size_t c = 0, last = i;
      for (size_t j = 0; j < v.size(); ++j) {
        if (v[j] == v[i]) {  // NaN equals nothing
          ++c;
          last = j;
        }
      }
      const bool better = c > best_count || (c == best_count && before(v[i], best));
      if (better) {
        best = v[i];
        best_count = c;
        best_at = last;
      }
    }
    return Values{want_index ? static_cast<double>(best_at) : best};
  };
}
Values r_cumprod(const Values& v) {
  Values o;
  double p = 1;
  for (double a : v) o.push_back(p *= a);
  return o;
}
Values r_logcumsumexp(const Values& v) {
  Values o;
  for (size_t k = 0; k < v.size(); ++k) {
    double m = -kInf;
    bool nan = false;
    for (size_t j = 0; j <= k; ++j) {
      nan = nan || std::isnan(v[j]);
      m = std::max(m, v[j]);
    }
    if (nan) {
      o.push_back(kNaN);
    } else if (std::isinf(m)) {
      o.push_back(m);
    } else {
      double s = 0;
      for (size_t j = 0; j <= k; ++j) s += std::exp(v[j] - m);
      o.push_back(m + std::log(s));
    }
  }
  return o;
}

// ---- samples

Tensor in(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }

/// Distinct values (so every order is strict): 2-d, 3-d, non-contiguous, transposed, 0-d, 1-d.
std::vector<OpSample> distinct(bool empty = true, bool zero_d = true) {
  std::vector<OpSample> s = {{"3x5", {in({3, 5}, 1)}},
                             {"2x3x4", {in({2, 3, 4}, 2)}},
                             {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 3)}},
                             {"transposed 4x3", {in({3, 4}, 4).t()}},
                             {"1-d 9", {in({9}, 5)}}};
  if (zero_d) s.push_back({"0-d", {in({}, 6)}});
  if (empty) s.push_back({"empty 0x4", {in({0, 4}, 7)}});
  return s;
}
/// Ties, NaN and infinities (forward-only entries).
std::vector<OpSample> edges() {
  const Values ties = {1, 2, 2, 1, 3, 2, 1, 0, 5, 5, 4, 5, 4, 4, 5, 0};
  const Values special = {3,     kNaN,  1, kInf, -kInf, 1,    kNaN, 2,
                          -kInf, -kInf, 0, 0,    kNaN,  kNaN, kNaN, 1};
  return {{"ties 4x4", {from_values(ties, {4, 4})}},
          {"ties transposed", {from_values(ties, {4, 4}).t()}},
          {"nan and inf 4x4", {from_values(special, {4, 4})}},
          {"nan and inf transposed", {from_values(special, {4, 4}).t()}}};
}
/// Inputs holding zeros (cumprod's exact gradient), distinct otherwise.
std::vector<OpSample> with_zeros() {
  Values one = values(in({3, 5}, 8));
  one[2] = 0;           // row 0: one zero
  one[5] = one[8] = 0;  // row 1: two zeros
  one[14] = 0;          // row 2: a zero at the end
  Values first = values(in({2, 4}, 9));
  first[0] = 0;  // a zero first
  return {{"zeros 3x5", {from_values(one, {3, 5})}},
          {"zeros transposed", {from_values(one, {3, 5}).t()}},
          {"zero first 2x4", {from_values(first, {2, 4})}}};
}

OpInfo entry(std::string name, std::function<Tensor(const Tensor&)> f,
             std::function<Tensor(const Tensor&)> ref,
             std::function<std::vector<OpSample>()> samples, std::vector<DType> dtypes = kFloats) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = [f](const TL& x) { return f(x[0]); };
  o.ref = [ref](const TL& x) { return ref(x[0]); };
  o.samples = std::move(samples);
  o.dtypes = std::move(dtypes);
  return o;
}
OpInfo forward_only(OpInfo o) {
  o.differentiable = false;
  o.twice_differentiable = false;
  return o;
}

/// An entry on distinct values and a forward-only one on ties, NaN and inf.
void both(
    std::string name, std::function<Tensor(const Tensor&)> f,
    std::function<Tensor(const Tensor&)> ref, bool differentiable,
    std::vector<DType> dtypes = kWithInts, std::vector<std::string> ops = {},
    std::function<std::vector<OpSample>()> samples = [] { return distinct(); }) {
  OpInfo o = covering(entry(name, f, ref, samples, dtypes), ops);
  if (!differentiable) o = forward_only(o);
  op_table().push_back(o);
  op_table().push_back(forward_only(entry(name + " edges", f, ref, edges, {kFloat32, kFloat64})));
}

// Entries registered from one static initialiser (the helper above pushes two each).
[[maybe_unused]] const bool registered = [] {
  // ---- sort / argsort
  both(
      "sort values", [](const Tensor& x) { return std::get<0>(sort(x)); },
      [](const Tensor& x) { return ref_lines(x, -1, true, r_sort(false, false)); }, true, kWithInts,
      {"sort"});
  both(
      "sort indices dim=0 descending", [](const Tensor& x) { return std::get<1>(x.sort(0, true)); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_sort(true, true)); }, false);
  both(
      "sort.stable values dim=-2 descending",
      [](const Tensor& x) { return std::get<0>(sort(x, true, x.dim() >= 2 ? -2 : -1, true)); },
      [](const Tensor& x) {
        return ref_lines(x, x.dim() >= 2 ? -2 : -1, true, r_sort(true, false));
      },
      true, kFloats, {"sort.stable"});
  both(
      "sort.stable indices",
      [](const Tensor& x) { return std::get<1>(x.sort(std::optional<bool>(true))); },
      [](const Tensor& x) { return ref_lines(x, -1, true, r_sort(false, true)); }, false);
  both(
      "argsort dim=0", [](const Tensor& x) { return argsort(x, 0); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_sort(false, true)); }, false, kWithInts,
      {"argsort"});
  both(
      "argsort.stable descending", [](const Tensor& x) { return x.argsort(true, -1, true); },
      [](const Tensor& x) { return ref_lines(x, -1, true, r_sort(true, true)); }, false, kWithInts,
      {"argsort.stable"});
  // ---- topk (k = 2 along the last dim; 0-d and k = 0 have their own entries)
  auto nonempty = [] { return distinct(false, false); };
  both(
      "topk values k=2", [](const Tensor& x) { return std::get<0>(topk(x, 2)); },
      [](const Tensor& x) { return ref_lines(x, -1, true, r_sort(true, false, 2), 2); }, true,
      kWithInts, {"topk"}, nonempty);
  both(
      "topk indices k=2", [](const Tensor& x) { return std::get<1>(x.topk(2)); },
      [](const Tensor& x) { return ref_lines(x, -1, true, r_sort(true, true, 2), 2); }, false,
      kWithInts, {}, nonempty);
  both(
      "topk smallest k=3 dim=0 values",
      [](const Tensor& x) { return std::get<0>(topk(x, 3, 0, false)); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_sort(false, false, 3), 3); }, true,
      kFloats, {},
      [] {
        return std::vector<OpSample>{{"4x3", {in({4, 3}, 10)}},
                                     {"transposed 5x2", {in({2, 5}, 11).t()}}};
      });
  both(
      "topk smallest k=3 dim=0 indices",
      [](const Tensor& x) { return std::get<1>(x.topk(3, 0, false, false)); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_sort(false, true, 3), 3); }, false,
      kWithInts, {},
      [] {
        return std::vector<OpSample>{{"4x3", {in({4, 3}, 10)}},
                                     {"transposed 5x2", {in({2, 5}, 11).t()}}};
      });
  op_table().push_back(entry(
      "topk 0-d and k=0",
      [](const Tensor& x) {
        return x.dim() == 0 ? std::get<0>(topk(x, 1)) : std::get<0>(topk(x, 0, 1));
      },
      [](const Tensor& x) {
        return x.dim() == 0 ? x.clone() : from_values({}, {x.size(0), 0});
      },
      [] {
        return std::vector<OpSample>{{"0-d", {in({}, 12)}}, {"k=0 of 3x4", {in({3, 4}, 13)}}};
      }));
  // ---- median / mode
  both(
      "median", [](const Tensor& x) { return median(x); },
      [](const Tensor& x) {
        if (x.numel() == 0) return from_values({kNaN}, {});
        return ref_lines(x.reshape({x.numel()}), 0, false, r_median(false), 1);
      },
      true, kFloats, {},
      [] {
        auto s = distinct(false);
        s.push_back({"even count 2x2", {in({2, 2}, 14)}});
        s.push_back({"empty", {in({0, 3}, 15)}});
        return s;
      });
  both(
      "median.dim values dim=1", [](const Tensor& x) { return std::get<0>(median(x, -1)); },
      [](const Tensor& x) { return ref_lines(x, -1, false, r_median(false), 1); }, true, kWithInts,
      {"median.dim"}, [] { return distinct(false); });
  both(
      "median.dim indices dim=0 keepdim",
      [](const Tensor& x) { return std::get<1>(x.median(0, true)); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_median(true), 1); }, false, kWithInts,
      {}, [] { return distinct(false); });
  both(
      "mode values", [](const Tensor& x) { return std::get<0>(mode(x)); },
      [](const Tensor& x) { return ref_lines(x, -1, false, r_mode(false), 1); }, true, kWithInts,
      {"mode"}, [] { return distinct(false); });
  both(
      "mode indices dim=0 keepdim", [](const Tensor& x) { return std::get<1>(x.mode(0, true)); },
      [](const Tensor& x) { return ref_lines(x, 0, true, r_mode(true), 1); }, false, kWithInts, {},
      [] { return distinct(false); });
  return true;
}();

// ---- cumprod: zeros anywhere in the line (PyTorch's exact gradient), twice differentiable
auto cumprod_samples = [] {
  auto s = distinct();
  for (auto& z : with_zeros()) s.push_back(z);
  return s;
};
IGNIS_OP_INFO(covering(entry(
                           "cumprod dim=-1", [](const Tensor& x) { return cumprod(x, -1); },
                           [](const Tensor& x) { return ref_lines(x, -1, true, r_cumprod); },
                           cumprod_samples, kWithInts),
                       {"cumprod"}));
IGNIS_OP_INFO(entry(
    "cumprod dim=0", [](const Tensor& x) { return x.cumprod(0); },
    [](const Tensor& x) { return ref_lines(x, 0, true, r_cumprod); }, cumprod_samples));
IGNIS_OP_INFO(forward_only(entry(
    "cumprod dtype=float64", [](const Tensor& x) { return cumprod(x.to(kInt64), 1, kFloat64); },
    [](const Tensor& x) {
      Values v = values(x);
      for (double& a : v) a = std::trunc(a);
      return ref_lines(from_values(v, x.sizes()), 1, true, r_cumprod);
    },
    [] {
      return std::vector<OpSample>{{"3x5", {make_input({3, 5}, 16, -4, 4)}}};
    })));
IGNIS_OP_INFO(forward_only(entry(
    "cumprod edges", [](const Tensor& x) { return cumprod(x, 1); },
    [](const Tensor& x) { return ref_lines(x, 1, true, r_cumprod); }, edges,
    {kFloat32, kFloat64})));

// ---- logcumsumexp: -inf (adds nothing), +inf, NaN in the edge entry
IGNIS_OP_INFO(covering(entry(
                           "logcumsumexp dim=-1",
                           [](const Tensor& x) { return logcumsumexp(x, -1); },
                           [](const Tensor& x) { return ref_lines(x, -1, true, r_logcumsumexp); },
                           [] {
                             auto s = distinct();
                             s.push_back({"wide 2x40", {make_input({2, 40}, 17, -30, 30)}});
                             return s;
                           }),
                       {"logcumsumexp"}));
IGNIS_OP_INFO(entry(
    "logcumsumexp dim=0", [](const Tensor& x) { return x.logcumsumexp(0); },
    [](const Tensor& x) { return ref_lines(x, 0, true, r_logcumsumexp); },
    [] { return distinct(); }));
IGNIS_OP_INFO(forward_only(entry(
    "logcumsumexp edges", [](const Tensor& x) { return logcumsumexp(x, 1); },
    [](const Tensor& x) { return ref_lines(x, 1, true, r_logcumsumexp); }, edges,
    {kFloat32, kFloat64})));

// ---- var_mean / std_mean (each output checked)
double r_mean(const Values& v) {
  return std::accumulate(v.begin(), v.end(), 0.0) / static_cast<double>(v.size());
}
std::function<Values(const Values&)> r_var(int64_t correction, bool take_sqrt) {
  return [=](const Values& v) {
    const double m = r_mean(v);
    double s = 0;
    for (double a : v) s += (a - m) * (a - m);
    const double r = s / static_cast<double>(static_cast<int64_t>(v.size()) - correction);
    return Values{take_sqrt ? std::sqrt(r) : r};
  };
}
auto two_d = [] {
  return std::vector<OpSample>{{"3x5", {in({3, 5}, 18)}},
                               {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 19)}},
                               {"transposed 4x3", {in({3, 4}, 20).t()}}};
};
IGNIS_OP_INFO(covering(
    entry(
        "var_mean var dim=1", [](const Tensor& x) { return std::get<0>(var_mean(x, {1})); },
        [](const Tensor& x) { return ref_lines(x, 1, false, r_var(1, false), 1); }, two_d),
    {"var_mean"}));
IGNIS_OP_INFO(entry(
    "var_mean mean dim=0 correction=0 keepdim",
    [](const Tensor& x) { return std::get<1>(var_mean(x, {0}, 0, true)); },
    [](const Tensor& x) {
      return ref_lines(
          x, 0, true, [](const Values& v) { return Values{r_mean(v)}; }, 1);
    },
    two_d));
IGNIS_OP_INFO(entry(
    "var_mean all correction=0", [](const Tensor& x) { return std::get<0>(var_mean(x, {}, 0)); },
    [](const Tensor& x) { return ref_lines(x.reshape({x.numel()}), 0, false, r_var(0, false), 1); },
    two_d));
IGNIS_OP_INFO(
    covering(entry(
                 "std_mean std dim=-1 keepdim",
                 [](const Tensor& x) { return std::get<0>(std_mean(x, {-1}, 1, true)); },
                 [](const Tensor& x) { return ref_lines(x, -1, true, r_var(1, true), 1); }, two_d),
             {"std_mean"}));
IGNIS_OP_INFO(entry(
    "std_mean mean", [](const Tensor& x) { return std::get<1>(std_mean(x)); },
    [](const Tensor& x) {
      return ref_lines(
          x.reshape({x.numel()}), 0, false, [](const Values& v) { return Values{r_mean(v)}; }, 1);
    },
    two_d));

// ---- nansum / nanmean: NaN counts as absent (gradient 0 there)
std::vector<OpSample> with_nans() {
  Values v = values(in({3, 4}, 21));
  v[1] = v[6] = kNaN;  // row 0 one NaN, row 1 one NaN
  Values all = values(in({2, 3}, 22));
  all[0] = all[1] = all[2] = kNaN;  // row 0 all NaN
  return {{"nan 3x4", {from_values(v, {3, 4})}},
          {"nan transposed", {from_values(v, {3, 4}).t()}},
          {"all-nan row 2x3", {from_values(all, {2, 3})}},
          {"plain 2x3x4", {in({2, 3, 4}, 23)}},
          {"0-d", {in({}, 24)}},
          {"empty 0x3", {in({0, 3}, 25)}}};
}
Values r_nansum(const Values& v) {
  double s = 0;
  for (double a : v) s += std::isnan(a) ? 0 : a;
  return {s};
}
Values r_nanmean(const Values& v) {
  double s = 0, n = 0;
  for (double a : v) {
    if (!std::isnan(a)) {
      s += a;
      n += 1;
    }
  }
  return {s / n};
}
// NaN inputs make finite differences NaN: the differentiable entries use plain samples, the
// NaN ones are forward-only.
std::vector<OpSample> plain() {
  return {{"2x3x4", {in({2, 3, 4}, 26)}},
          {"transposed 4x3", {in({3, 4}, 27).t()}},
          {"0-d", {in({}, 28)}},
          {"empty 0x3", {in({0, 3}, 29)}}};
}
IGNIS_OP_INFO(covering(entry(
                           "nansum", [](const Tensor& x) { return nansum(x); },
                           [](const Tensor& x) {
                             return ref_lines(x.reshape({x.numel()}), 0, false, r_nansum, 1);
                           },
                           plain, kWithInts),
                       {"nansum"}));
IGNIS_OP_INFO(forward_only(entry(
    "nansum dim=-1 nan", [](const Tensor& x) { return x.nansum({-1}); },
    [](const Tensor& x) { return ref_lines(x, -1, false, r_nansum, 1); }, with_nans)));
IGNIS_OP_INFO(forward_only(entry(
    "nansum dim=0 keepdim dtype=float64 nan",
    [](const Tensor& x) { return nansum(x, {0}, true, kFloat64); },
    [](const Tensor& x) { return ref_lines(x, 0, true, r_nansum, 1); }, with_nans)));
IGNIS_OP_INFO(covering(entry(
                           "nanmean dim=1", [](const Tensor& x) { return nanmean(x, {1}); },
                           [](const Tensor& x) { return ref_lines(x, 1, false, r_nanmean, 1); },
                           [] {
                             return std::vector<OpSample>{{"2x3x4", {in({2, 3, 4}, 30)}},
                                                          {"transposed", {in({3, 4}, 31).t()}}};
                           }),
                       {"nanmean"}));
IGNIS_OP_INFO(forward_only(entry(
    "nanmean nan", [](const Tensor& x) { return x.nanmean({-1}, true); },
    [](const Tensor& x) { return ref_lines(x, -1, true, r_nanmean, 1); }, with_nans)));

}  // namespace
}  // namespace ignis::testing
