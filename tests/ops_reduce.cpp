// Op table entries of the reductions: sum, mean, sum_to_size, prod, amax/amin, max/min,
// argmax/argmin, var/std, norm, logsumexp, softmax/log_softmax, cumsum, all/any. Each entry binds
// its dims/keepdim in the name; references are plain loops over values() in float64.
#include <algorithm>
#include <cmath>
#include <limits>
#include <numeric>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;
using Dims = std::vector<int64_t>;

const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};
const std::vector<DType> kWithInts = {kFloat32, kFloat64, kBFloat16, kInt32, kInt64};
constexpr double kNaN = std::numeric_limits<double>::quiet_NaN();
constexpr double kInf = std::numeric_limits<double>::infinity();

// ---- references

/// Folds the values of x over `dims` (empty: all) with f, one output per kept index.
Tensor ref_reduce(const Tensor& x, Dims dims, bool keepdim,
                  const std::function<double(const Values&)>& f) {
  const int64_t nd = x.dim();
  std::vector<bool> red(static_cast<size_t>(nd), dims.empty());
  for (int64_t d : dims) {
    if (nd > 0) red[(d + nd) % nd] = true;
  }
  Shape out_shape;
  for (int64_t d = 0; d < nd; ++d) {
    if (!red[d])
      out_shape.push_back(x.size(d));
    else if (keepdim)
      out_shape.push_back(1);
  }
  int64_t nout = 1;
  for (int64_t d = 0; d < nd; ++d) nout *= red[d] ? 1 : x.size(d);
  std::vector<Values> groups(static_cast<size_t>(nout));
  const Values v = values(x);
  for (int64_t i = 0; i < static_cast<int64_t>(v.size()); ++i) {
    int64_t rem = i, out = 0, mul = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t c = rem % x.size(d);
      rem /= x.size(d);
      if (!red[d]) {
        out += c * mul;
        mul *= x.size(d);
      }
    }
    groups[out].push_back(v[i]);
  }
  Values o;
  for (const Values& g : groups) o.push_back(f(g));
  return from_values(o, out_shape);
}

/// Applies f to every line of x along dim (softmax, cumsum): same shape out.
Tensor ref_along(const Tensor& x, int64_t dim, const std::function<Values(const Values&)>& f) {
  const int64_t nd = x.dim();
  if (nd == 0) return from_values(f(values(x)), {});
  const int64_t d = (dim + nd) % nd;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= x.size(k);
  for (int64_t k = d + 1; k < nd; ++k) inner *= x.size(k);
  const int64_t n = x.size(d);
  const Values v = values(x);
  Values o(v.size());
  for (int64_t a = 0; a < outer; ++a) {
    for (int64_t b = 0; b < inner; ++b) {
      Values line;
      for (int64_t k = 0; k < n; ++k) line.push_back(v[(a * n + k) * inner + b]);
      const Values r = f(line);
      for (int64_t k = 0; k < n; ++k) o[(a * n + k) * inner + b] = r[k];
    }
  }
  return from_values(o, x.sizes());
}

double r_sum(const Values& v) { return std::accumulate(v.begin(), v.end(), 0.0); }
double r_mean(const Values& v) { return r_sum(v) / static_cast<double>(v.size()); }
double r_prod(const Values& v) {
  double p = 1;
  for (double a : v) p *= a;
  return p;
}
double r_max(const Values& v) {
  double m = -kInf;
  for (double a : v) {
    if (std::isnan(a)) return kNaN;
    m = std::max(m, a);
  }
  return m;
}
double r_min(const Values& v) {
  double m = kInf;
  for (double a : v) {
    if (std::isnan(a)) return kNaN;
    m = std::min(m, a);
  }
  return m;
}
double r_argmax(const Values& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] > v[best]) best = i;
  }
  return static_cast<double>(best);
}
double r_argmin(const Values& v) {
  size_t best = 0;
  for (size_t i = 0; i < v.size(); ++i) {
    if (std::isnan(v[i])) return static_cast<double>(i);
    if (v[i] < v[best]) best = i;
  }
  return static_cast<double>(best);
}
std::function<double(const Values&)> r_var(int64_t correction, bool sqrt) {
  return [=](const Values& v) {
    const double m = r_mean(v);
    double s = 0;
    for (double a : v) s += (a - m) * (a - m);
    const double r = s / static_cast<double>(static_cast<int64_t>(v.size()) - correction);
    return sqrt ? std::sqrt(r) : r;
  };
}
std::function<double(const Values&)> r_norm(double p) {
  return [=](const Values& v) {
    if (std::isinf(p)) {
      double m = p > 0 ? 0 : kInf;
      for (double a : v) m = p > 0 ? std::max(m, std::abs(a)) : std::min(m, std::abs(a));
      return m;
    }
    double s = 0;
    for (double a : v) s += p == 0 ? (a != 0) : std::pow(std::abs(a), p);
    return p == 0 ? s : std::pow(s, 1 / p);
  };
}
double r_logsumexp(const Values& v) {
  double s = 0;
  for (double a : v) s += std::exp(a);  // small test values: no overflow
  return std::log(s);
}
Values r_softmax(const Values& v) {
  Values o;
  double s = 0;
  for (double a : v) s += std::exp(a);
  for (double a : v) o.push_back(std::exp(a) / s);
  return o;
}
Values r_log_softmax(const Values& v) {
  Values o = r_softmax(v);
  for (double& a : o) a = std::log(a);
  return o;
}
Values r_cumsum(const Values& v) {
  Values o;
  double s = 0;
  for (double a : v) o.push_back(s += a);
  return o;
}

// ---- samples

Tensor in(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
/// A [2, 3, 4] tensor laid out as a permutation of a contiguous [4, 2, 3] one.
Tensor permuted3(uint64_t seed) { return in({4, 2, 3}, seed).permute({1, 2, 0}); }

/// 2-d samples (dims 0, 1, -1 and all are valid); `empty` adds [0, 4] and [3, 0].
std::vector<OpSample> samples2(bool empty = true) {
  std::vector<OpSample> s = {{"3x4", {in({3, 4}, 1)}},
                             {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 2)}},
                             {"transposed 3x4", {in({4, 3}, 3).t()}},
                             {"1x5", {in({1, 5}, 4)}}};
  if (empty) {
    s.push_back({"empty 0x4", {in({0, 4}, 5)}});
    s.push_back({"empty 3x0", {in({3, 0}, 6)}});
  }
  return s;
}
/// 3-d samples (any dims valid).
std::vector<OpSample> samples3(bool empty = true) {
  std::vector<OpSample> s = {{"2x3x4", {in({2, 3, 4}, 7)}},
                             {"permuted 2x3x4", {permuted3(8)}},
                             {"noncontiguous 2x3x4", {make_noncontiguous({2, 3, 4}, 9)}}};
  if (empty) s.push_back({"empty 2x0x4", {in({2, 0, 4}, 10)}});
  return s;
}
/// Samples of a reduction over all dims: 2-d, 3-d, 0-d, 1-d, empty.
std::vector<OpSample> samples_all(bool empty = true) {
  std::vector<OpSample> s = samples2(empty);
  for (auto& t : samples3(empty)) s.push_back(t);
  s.push_back({"0-d", {in({}, 11)}});
  s.push_back({"1-d 7", {in({7}, 12)}});
  return s;
}
/// 2-d samples holding zeros (prod's backward cases), no empties.
std::vector<OpSample> samples_zeros() {
  std::vector<OpSample> s = samples2(false);
  Values one = values(in({3, 4}, 13));
  one[6] = 0;  // [1, 2]
  Values two = values(in({3, 4}, 14));
  two[1] = two[3] = two[9] = 0;  // [0, 1], [0, 3], [2, 1]
  s.push_back({"one zero", {from_values(one, {3, 4})}});
  s.push_back({"two zeros in row 0", {from_values(two, {3, 4})}});
  return s;
}
/// Samples with values spread over [-3, 3] and many exact zeros (all/any, norm p=0).
std::vector<OpSample> samples_bools() {
  Values v = values(make_input({3, 4}, 15, -1, 1));
  for (size_t i = 0; i < v.size(); ++i) v[i] = (i % 3 == 0) ? 0 : v[i];
  Values r = {0, 0, 0, 0, 1, 0, 2, 0, 1, 1, 1, 1};  // an all-zero row, an all-nonzero row
  std::vector<OpSample> s = {{"zeros 3x4", {from_values(v, {3, 4})}},
                             {"rows 3x4", {from_values(r, {3, 4})}},
                             {"transposed rows", {from_values(r, {3, 4}).t()}},
                             {"empty 0x4", {in({0, 4}, 16)}},
                             {"bool", {tensor({1, 0, 1, 1, 0, 0}).reshape({2, 3}).to(kBool)}},
                             {"int32", {tensor({3, 0, -1, 0, 0, 0}).reshape({2, 3}).to(kInt32)}}};
  return s;
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
/// A reduction with reference fold r over `dims` (empty: all).
OpInfo reduction(std::string name, std::function<Tensor(const Tensor&)> f,
                 std::function<double(const Values&)> r, Dims dims, bool keepdim,
                 std::function<std::vector<OpSample>()> samples,
                 std::vector<DType> dtypes = kFloats) {
  return entry(
      std::move(name), std::move(f),
      [r, dims, keepdim](const Tensor& x) { return ref_reduce(x, dims, keepdim, r); },
      std::move(samples), std::move(dtypes));
}
OpInfo not_differentiable(OpInfo o) {
  o.differentiable = false;
  o.twice_differentiable = false;
  return o;
}

auto s2 = [] { return samples2(); };
auto s2ne = [] { return samples2(false); };
auto s3 = [] { return samples3(); };
auto s3ne = [] { return samples3(false); };
auto sall = [] { return samples_all(); };
auto sallne = [] { return samples_all(false); };

// ---- sum, mean, sum_to_size
IGNIS_OP_INFO(reduction(
    "sum", [](const Tensor& x) { return x.sum(); }, r_sum, {}, false, sall, kWithInts));
IGNIS_OP_INFO(reduction(
    "sum dim=0", [](const Tensor& x) { return sum(x, 0); }, r_sum, {0}, false, s2, kWithInts));
IGNIS_OP_INFO(reduction(
    "sum dim=1 keepdim", [](const Tensor& x) { return x.sum(1, true); }, r_sum, {1}, true, s2,
    kWithInts));
IGNIS_OP_INFO(reduction(
    "sum dim=-1", [](const Tensor& x) { return sum(x, -1); }, r_sum, {-1}, false, s3, kWithInts));
IGNIS_OP_INFO(reduction(
    "sum dims=0,2",
    [](const Tensor& x) {
      return sum(x, {0, 2});
    },
    r_sum, {0, 2}, false, s3, kWithInts));
IGNIS_OP_INFO(reduction(
    "sum dims=2,0 keepdim",
    [](const Tensor& x) {
      return sum(x, {2, 0}, true);
    },
    r_sum, {0, 2}, true, s3));
IGNIS_OP_INFO(reduction(
    "sum dims=0,1 of 3-d",
    [](const Tensor& x) {
      return sum(x, {0, 1});
    },
    r_sum, {0, 1}, false, s3));
IGNIS_OP_INFO(reduction(
    "sum dtype=float64", [](const Tensor& x) { return x.sum(1, false, kFloat64); }, r_sum, {1},
    false, s2));
IGNIS_OP_INFO(reduction(
    "mean", [](const Tensor& x) { return x.mean(); }, r_mean, {}, false, sallne));
IGNIS_OP_INFO(reduction(
    "mean dim=1", [](const Tensor& x) { return mean(x, 1); }, r_mean, {1}, false, s2ne));
IGNIS_OP_INFO(reduction(
    "mean dims=0,2 keepdim",
    [](const Tensor& x) {
      return x.mean({0, 2}, true);
    },
    r_mean, {0, 2}, true, s3ne));
IGNIS_OP_INFO(covering(reduction(
                           "sum_to_size 3x4 to 1x4",
                           [](const Tensor& x) {
                             return x.sum_to_size({1, x.size(1)});
                           },
                           r_sum, {0}, true, s2),
                       {"sum_to_size"}));
IGNIS_OP_INFO(entry(
    "sum_to_size 2x3x4 to 3x1",
    [](const Tensor& x) {
      return sum_to_size(x, {x.size(1), 1});
    },
    [](const Tensor& x) {
      return ref_reduce(x, {0, 2}, false, r_sum).reshape({x.size(1), 1});
    },
    s3));
IGNIS_OP_INFO(entry(
    "sum_to_size same shape", [](const Tensor& x) { return sum_to_size(x, x.sizes()); },
    [](const Tensor& x) { return x.clone(); }, s2));

// ---- prod: zeros exercise the backward's zero handling (prod is smooth, so gradcheck holds)
IGNIS_OP_INFO(reduction(
    "prod", [](const Tensor& x) { return x.prod(); }, r_prod, {}, false,
    [] {
      auto s = samples_zeros();
      s.push_back({"0-d", {in({}, 20)}});
      s.push_back({"empty", {in({0, 3}, 21)}});
      return s;
    },
    kWithInts));
IGNIS_OP_INFO(reduction(
    "prod dim=1", [](const Tensor& x) { return prod(x, 1); }, r_prod, {1}, false, samples_zeros,
    kWithInts));
IGNIS_OP_INFO(reduction(
    "prod dim=0 keepdim", [](const Tensor& x) { return x.prod(0, true); }, r_prod, {0}, true,
    samples_zeros));
IGNIS_OP_INFO(reduction(
    "prod dim=1 of 3-d", [](const Tensor& x) { return prod(x, 1); }, r_prod, {1}, false, s3));

// ---- amax / amin / max() / min() (random inputs: no ties; ties are in test_reduce.cpp)
IGNIS_OP_INFO(reduction(
    "amax", [](const Tensor& x) { return amax(x); }, r_max, {}, false, sallne, kWithInts));
IGNIS_OP_INFO(reduction(
    "amax dim=1", [](const Tensor& x) { return x.amax(1); }, r_max, {1}, false,
    [] {
      auto s = samples2(false);
      s.push_back({"empty 0x4", {in({0, 4}, 22)}});
      return s;
    },
    kWithInts));
IGNIS_OP_INFO(reduction(
    "amax dims=0,2 keepdim",
    [](const Tensor& x) {
      return amax(x, {0, 2}, true);
    },
    r_max, {0, 2}, true, s3ne));
IGNIS_OP_INFO(reduction(
    "amin", [](const Tensor& x) { return x.amin(); }, r_min, {}, false, sallne, kWithInts));
IGNIS_OP_INFO(reduction(
    "amin dim=0", [](const Tensor& x) { return amin(x, 0); }, r_min, {0}, false, s2ne, kWithInts));
IGNIS_OP_INFO(reduction(
    "amin dims=1,2",
    [](const Tensor& x) {
      return amin(x, {1, 2});
    },
    r_min, {1, 2}, false, s3ne));
IGNIS_OP_INFO(reduction(
    "max", [](const Tensor& x) { return x.max(); }, r_max, {}, false, sallne, kWithInts));
IGNIS_OP_INFO(reduction(
    "min", [](const Tensor& x) { return x.min(); }, r_min, {}, false, sallne, kWithInts));

// ---- max(dim) / min(dim): values (gradient to the index) and indices
IGNIS_OP_INFO(covering(reduction(
                           "max dim=1 values",
                           [](const Tensor& x) { return std::get<0>(max(x, 1)); }, r_max, {1},
                           false, s2ne, kWithInts),
                       {"max.dim"}));
IGNIS_OP_INFO(reduction(
    "max dim=0 keepdim values", [](const Tensor& x) { return std::get<0>(x.max(0, true)); }, r_max,
    {0}, true, s2ne));
IGNIS_OP_INFO(reduction(
    "max dim=1 of 3-d values", [](const Tensor& x) { return std::get<0>(max(x, 1)); }, r_max, {1},
    false, s3ne));
IGNIS_OP_INFO(covering(reduction(
                           "min dim=-1 values",
                           [](const Tensor& x) { return std::get<0>(min(x, -1)); }, r_min, {-1},
                           false, s3ne, kWithInts),
                       {"min.dim"}));
IGNIS_OP_INFO(reduction(
    "max 0-d dim=0 values", [](const Tensor& x) { return std::get<0>(max(x, 0)); }, r_max, {},
    false,
    [] {
      return std::vector<OpSample>{{"0-d", {in({}, 23)}}};
    }));
IGNIS_OP_INFO(not_differentiable(reduction(
    "max dim=1 indices", [](const Tensor& x) { return std::get<1>(max(x, 1)); }, r_argmax, {1},
    false, s2ne, kWithInts)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "max dim=0 keepdim indices", [](const Tensor& x) { return std::get<1>(x.max(0, true)); },
    r_argmax, {0}, true, s2ne)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "min dim=1 of 3-d indices", [](const Tensor& x) { return std::get<1>(x.min(1)); }, r_argmin,
    {1}, false, s3ne, kWithInts)));

// ---- argmax / argmin
IGNIS_OP_INFO(not_differentiable(reduction(
    "argmax", [](const Tensor& x) { return argmax(x); }, r_argmax, {}, false, sallne, kWithInts)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "argmax dim=1", [](const Tensor& x) { return x.argmax(1); }, r_argmax, {1}, false, s2ne,
    kWithInts)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "argmax dim=0 keepdim", [](const Tensor& x) { return argmax(x, 0, true); }, r_argmax, {0}, true,
    s3ne)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "argmin", [](const Tensor& x) { return x.argmin(); }, r_argmin, {}, false, sallne, kWithInts)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "argmin dim=2", [](const Tensor& x) { return argmin(x, 2); }, r_argmin, {2}, false, s3ne)));
IGNIS_OP_INFO(not_differentiable(entry(
    "argmax keepdim all dims", [](const Tensor& x) { return argmax(x, std::nullopt, true); },
    [](const Tensor& x) { return ref_reduce(x, {}, false, r_argmax).reshape(Shape(x.dim(), 1)); },
    s3ne)));

// ---- var / std
IGNIS_OP_INFO(reduction(
    "var", [](const Tensor& x) { return x.var(); }, r_var(1, false), {}, false,
    [] {
      auto s = samples2(false);
      for (auto& t : samples3(false)) s.push_back(t);
      return s;
    }));
IGNIS_OP_INFO(reduction(
    "var dim=1", [](const Tensor& x) { return var(x, {1}); }, r_var(1, false), {1}, false, s2ne));
IGNIS_OP_INFO(reduction(
    "var dims=0,2 correction=0 keepdim",
    [](const Tensor& x) {
      return var(x, {0, 2}, 0, true);
    },
    r_var(0, false), {0, 2}, true, s3ne));
IGNIS_OP_INFO(reduction(
    "var correction=2 dim=0", [](const Tensor& x) { return x.var({0}, 2); }, r_var(2, false), {0},
    false,
    [] {
      return std::vector<OpSample>{{"5x3", {in({5, 3}, 24)}}, {"transposed", {in({3, 5}, 25).t()}}};
    }));
IGNIS_OP_INFO(reduction(
    "std", [](const Tensor& x) { return x.std(); }, r_var(1, true), {}, false, s3ne));
IGNIS_OP_INFO(reduction(
    "std dim=0", [](const Tensor& x) { return ignis::std(x, {0}); }, r_var(1, true), {0}, false,
    [] {
      std::vector<OpSample> s = samples2(false);
      s.pop_back();  // 1x5 has one element per column
      return s;
    }));
IGNIS_OP_INFO(reduction(
    "std dim=-1 correction=0 keepdim", [](const Tensor& x) { return x.std({-1}, 0, true); },
    r_var(0, true), {-1}, true, s3ne));

// ---- norm
IGNIS_OP_INFO(reduction(
    "norm", [](const Tensor& x) { return x.norm(); }, r_norm(2), {}, false, sall));
IGNIS_OP_INFO(reduction(
    "norm p=2 dim=1", [](const Tensor& x) { return norm(x, 2, {1}); }, r_norm(2), {1}, false, s2));
IGNIS_OP_INFO(reduction(
    "norm p=1 dim=0", [](const Tensor& x) { return norm(x, 1, {0}); }, r_norm(1), {0}, false, s2));
IGNIS_OP_INFO(reduction(
    "norm p=inf dim=1", [](const Tensor& x) { return x.norm(kInf, {1}); }, r_norm(kInf), {1}, false,
    s2ne));
IGNIS_OP_INFO(reduction(
    "norm p=-inf", [](const Tensor& x) { return x.norm(-kInf); }, r_norm(-kInf), {}, false, s3ne));
IGNIS_OP_INFO(reduction(
    "norm p=3 dims=0,2 keepdim",
    [](const Tensor& x) {
      return norm(x, 3, {0, 2}, true);
    },
    r_norm(3), {0, 2}, true, s3));
IGNIS_OP_INFO(reduction(
    "norm p=1.5 dim=1", [](const Tensor& x) { return norm(x, 1.5, {1}); }, r_norm(1.5), {1}, false,
    s2));
IGNIS_OP_INFO(reduction(
    "norm p=0.5", [](const Tensor& x) { return norm(x, 0.5); }, r_norm(0.5), {}, false, s2));
IGNIS_OP_INFO(reduction(
    "norm p=0 dim=1", [](const Tensor& x) { return norm(x, 0, {1}); }, r_norm(0), {1}, false,
    [] {
      auto s = samples_bools();
      s.resize(4);  // the floating samples
      return s;
    }));

// ---- logsumexp
IGNIS_OP_INFO(covering(reduction(
                           "logsumexp dim=1", [](const Tensor& x) { return logsumexp(x, {1}); },
                           r_logsumexp, {1}, false, s2),
                       {"logsumexp"}));
IGNIS_OP_INFO(reduction(
    "logsumexp all", [](const Tensor& x) { return x.logsumexp({}); }, r_logsumexp, {}, false,
    sall));
IGNIS_OP_INFO(reduction(
    "logsumexp dims=0,2 keepdim",
    [](const Tensor& x) {
      return logsumexp(x, {0, 2}, true);
    },
    r_logsumexp, {0, 2}, true, s3));

// ---- softmax / log_softmax (dim -1: rows; dim 0 and 1 of 3-d: inner > 1)
std::vector<OpSample> softmax_samples() {
  std::vector<OpSample> s = samples2();
  for (auto& t : samples3()) s.push_back(t);
  s.push_back({"0-d", {in({}, 26)}});
  s.push_back({"wide 2x40", {make_input({2, 40}, 27, -5, 5)}});
  return s;
}
IGNIS_OP_INFO(covering(entry(
                           "softmax dim=-1", [](const Tensor& x) { return softmax(x, -1); },
                           [](const Tensor& x) { return ref_along(x, -1, r_softmax); },
                           softmax_samples),
                       {"softmax.int"}));
IGNIS_OP_INFO(entry(
    "softmax dim=0", [](const Tensor& x) { return x.softmax(0); },
    [](const Tensor& x) { return ref_along(x, 0, r_softmax); }, softmax_samples));
IGNIS_OP_INFO(entry(
    "softmax dim=1 of 3-d", [](const Tensor& x) { return softmax(x, 1); },
    [](const Tensor& x) { return ref_along(x, 1, r_softmax); }, s3));
IGNIS_OP_INFO(covering(entry(
                           "log_softmax dim=-1", [](const Tensor& x) { return log_softmax(x, -1); },
                           [](const Tensor& x) { return ref_along(x, -1, r_log_softmax); },
                           softmax_samples),
                       {"log_softmax.int"}));
IGNIS_OP_INFO(entry(
    "log_softmax dim=0", [](const Tensor& x) { return x.log_softmax(0); },
    [](const Tensor& x) { return ref_along(x, 0, r_log_softmax); }, softmax_samples));
IGNIS_OP_INFO(entry(
    "log_softmax dim=1 of 3-d", [](const Tensor& x) { return log_softmax(x, 1); },
    [](const Tensor& x) { return ref_along(x, 1, r_log_softmax); }, s3));

// ---- cumsum
IGNIS_OP_INFO(covering(entry(
                           "cumsum dim=0", [](const Tensor& x) { return cumsum(x, 0); },
                           [](const Tensor& x) { return ref_along(x, 0, r_cumsum); }, s2,
                           kWithInts),
                       {"cumsum"}));
IGNIS_OP_INFO(entry(
    "cumsum dim=-1", [](const Tensor& x) { return x.cumsum(-1); },
    [](const Tensor& x) { return ref_along(x, -1, r_cumsum); },
    [] {
      auto s = samples2();
      s.push_back({"0-d", {in({}, 28)}});
      s.push_back({"long 1-d", {in({300}, 29)}});
      return s;
    },
    kWithInts));
IGNIS_OP_INFO(entry(
    "cumsum dim=1 of 3-d", [](const Tensor& x) { return cumsum(x, 1); },
    [](const Tensor& x) { return ref_along(x, 1, r_cumsum); }, s3));

// ---- all / any (bool outputs; inputs of any dtype)
double r_all(const Values& v) {
  for (double a : v) {
    if (a == 0) return 0;
  }
  return 1;
}
double r_any(const Values& v) {
  for (double a : v) {
    if (a != 0) return 1;
  }
  return 0;
}
const std::vector<DType> kLogicalDtypes = {kFloat32, kFloat64, kInt64};
IGNIS_OP_INFO(not_differentiable(reduction(
    "all", [](const Tensor& x) { return x.all(); }, r_all, {}, false, samples_bools,
    kLogicalDtypes)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "all dim=1", [](const Tensor& x) { return all(x, 1); }, r_all, {1}, false, samples_bools,
    kLogicalDtypes)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "any", [](const Tensor& x) { return any(x); }, r_any, {}, false, samples_bools,
    kLogicalDtypes)));
IGNIS_OP_INFO(not_differentiable(reduction(
    "any dim=0 keepdim", [](const Tensor& x) { return x.any(0, true); }, r_any, {0}, true,
    samples_bools, kLogicalDtypes)));

}  // namespace
}  // namespace ignis::testing
