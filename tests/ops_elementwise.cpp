// Op table entries of the elementwise ops: unary math, pow, clamp, maximum/minimum, activations,
// comparisons, logical ops, isnan/isinf/isfinite and where. References are plain std:: math.
#include <cmath>
#include <limits>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kBFloat16};

/// A unary entry: the standard samples with values in [lo, hi).
OpInfo unary(std::string name, std::function<Tensor(const Tensor&)> f,
             std::function<double(double)> r, double lo = -2, double hi = 2) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = [f](const Inputs& x) { return f(x[0]); };
  o.ref = [r](const Inputs& x) {
    return ref_elementwise(x, [r](const Values& v) { return r(v[0]); });
  };
  o.samples = [lo, hi] { return elementwise_samples(1, lo, hi); };
  o.dtypes = kFloatDtypes;
  return o;
}

/// A binary entry: the standard samples (same shape, broadcast, 0-d, empty, non-contiguous).
OpInfo binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f,
              std::function<double(double, double)> r, double lo = -2, double hi = 2) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = [f](const Inputs& x) { return f(x[0], x[1]); };
  o.ref = [r](const Inputs& x) {
    return ref_elementwise(x, [r](const Values& v) { return r(v[0], v[1]); });
  };
  o.samples = [lo, hi] { return elementwise_samples(2, lo, hi); };
  o.dtypes = kFloatDtypes;
  return o;
}

/// Small integer values in [-3, 2] as float64: many ties and zeros.
Tensor int_valued(IntArrayRef shape, uint64_t seed) {
  Values v = values(make_input(shape, seed, -3, 3));
  for (double& x : v) x = std::floor(x);
  return from_values(v, shape);
}

/// Binary samples with ties (equal elements) and zeros, plus the standard ones.
std::vector<OpSample> samples_with_ties() {
  std::vector<OpSample> s = elementwise_samples(2);
  s.push_back({"ties", {int_valued({3, 4}, 11), int_valued({3, 4}, 12)}});
  s.push_back({"ties broadcast", {int_valued({2, 1, 4}, 13), int_valued({3, 1}, 14)}});
  return s;
}

/// A comparison or logical op: bool output, not differentiable, ties included.
OpInfo predicate2(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f,
                  std::function<bool(double, double)> r) {
  OpInfo o = binary(std::move(name), std::move(f),
                    [r](double a, double b) { return r(a, b) ? 1.0 : 0.0; });
  o.samples = samples_with_ties;
  o.differentiable = false;
  o.twice_differentiable = false;
  return o;
}

/// A comparison with a scalar right operand (values include ties with it).
OpInfo compare_scalar(std::string name, std::function<Tensor(const Tensor&, Scalar)> f,
                      std::function<bool(double, double)> r) {
  OpInfo o = unary(
      std::move(name), [f](const Tensor& x) { return f(x, -1); },
      [r](double a) { return r(a, -1) ? 1.0 : 0.0; });
  o.samples = [] {
    std::vector<OpSample> s = elementwise_samples(1);
    s.push_back({"ties", {int_valued({3, 4}, 21)}});
    return s;
  };
  o.differentiable = false;
  o.twice_differentiable = false;
  return o;
}

/// Values with NaN, +-inf, zeros and finite numbers.
std::vector<OpSample> special_samples() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  std::vector<OpSample> s = elementwise_samples(1);
  s.push_back({"nan and inf", {from_values({nan, inf, -inf, 0, -1.5, 2, 1e30, -0.0}, {2, 4})}});
  s.push_back({"nan and inf transposed", {from_values({nan, inf, -inf, 0, -1.5, 2}, {2, 3}).t()}});
  return s;
}

OpInfo special_predicate(std::string name, std::function<Tensor(const Tensor&)> f,
                         std::function<bool(double)> r) {
  OpInfo o = unary(std::move(name), std::move(f), [r](double a) { return r(a) ? 1.0 : 0.0; });
  o.samples = special_samples;
  o.differentiable = false;
  o.twice_differentiable = false;
  return o;
}

/// where(cond, a, b): cond is bool (a comparison of a third random tensor).
std::vector<OpSample> where_samples() {
  auto cond = [](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed) > 0; };
  return {
      {"same shape", {cond({2, 3}, 1), make_input({2, 3}, 2), make_input({2, 3}, 3)}},
      {"broadcast", {cond({2, 1, 3}, 4), make_input({4, 1}, 5), make_input({3}, 6)}},
      {"broadcast cond", {cond({3}, 7), make_input({2, 3}, 8), make_input({2, 3}, 9)}},
      {"0-d", {cond({}, 10), make_input({2, 3}, 11), make_input({}, 12)}},
      {"empty", {cond({0, 3}, 13), make_input({0, 3}, 14), make_input({1, 3}, 15)}},
      {"noncontiguous",
       {cond({4, 3}, 16).t(), make_noncontiguous({3, 4}, 17), make_input({4, 3}, 18).t()}},
  };
}

OpInfo with_ties(OpInfo o) {
  o.samples = samples_with_ties;
  return o;
}

OpInfo where_entry() {
  OpInfo o;
  o.name = "where";
  o.fn = [](const Inputs& x) { return where(x[0], x[1], x[2]); };
  o.ref = [](const Inputs& x) {
    return ref_elementwise(x, [](const Values& v) { return v[0] != 0 ? v[1] : v[2]; });
  };
  o.samples = where_samples;
  o.dtypes = kFloatDtypes;
  o.grad_inputs = {1, 2};
  return o;
}

/// An in-place unary op: self is a non-leaf copy of the input (so that autograd records the
/// in-place write), the reference the out-of-place function.
OpInfo inplace_unary(std::string name, std::function<void(Tensor&)> f,
                     std::function<double(double)> r, double lo = -2, double hi = 2) {
  return unary(
      std::move(name),
      [f](const Tensor& x) {
        Tensor self = x * 1;
        f(self);
        return self;
      },
      std::move(r), lo, hi);
}

/// An op of ignis/float_unary_ops.def: entries for the function and for its in-place method.
std::vector<OpInfo> float_unary(std::string name, Tensor (*f)(const Tensor&),
                                Tensor& (Tensor::*inplace)() const, std::function<double(double)> r,
                                double lo = -2, double hi = 2) {
  return {unary(name, f, r, lo, hi),
          inplace_unary(
              name + "_", [inplace](Tensor& x) { (x.*inplace)(); }, r, lo, hi)};
}

/// erfinv's reference: erf inverted by bisection (independent of the kernel's approximation).
double erfinv_ref(double y) {
  if (y <= -1) return y == -1 ? -INFINITY : NAN;
  if (y >= 1) return y == 1 ? INFINITY : NAN;
  double lo = -6, hi = 6;
  for (int i = 0; i < 200; ++i) {
    const double mid = (lo + hi) / 2;
    (std::erf(mid) < y ? lo : hi) = mid;
  }
  return (lo + hi) / 2;
}

/// A whole-tensor predicate (allclose, equal) as a 0-d bool tensor.
Tensor as_tensor(bool b) { return tensor(std::vector<bool>{b}).reshape({}); }
Tensor ref_as_tensor(bool b) { return from_values({b ? 1.0 : 0.0}, {}); }

/// Pairs for allclose and equal: equal, close, far apart, NaN, +-inf, broadcast, empty and
/// non-contiguous. Values of b are computed from a's in float64.
std::vector<OpSample> predicate_pair_samples() {
  const double nan = std::numeric_limits<double>::quiet_NaN();
  const double inf = std::numeric_limits<double>::infinity();
  auto shifted = [](const Tensor& a, double rel, double abs_) {
    Values v = values(a);
    for (double& x : v) x = x * (1 + rel) + abs_;
    return from_values(v, a.sizes());
  };
  const Tensor a = make_input({3, 4}, 31);
  Values one_off = values(a);
  one_off[5] += 0.5;
  const Tensor nc = make_noncontiguous({3, 4}, 32);
  return {
      {"equal", {a, a.clone()}},
      {"close (relative)", {a, shifted(a, 1e-7, 0)}},
      {"far apart", {a, shifted(a, 0, 1e-2)}},
      {"one element off", {a, from_values(one_off, {3, 4})}},
      {"nan", {from_values({1, nan, 2}, {3}), from_values({1, nan, 2}, {3})}},
      {"inf", {from_values({1, inf, -inf}, {3}), from_values({1, inf, -inf}, {3})}},
      {"inf sign differs", {from_values({1, inf}, {2}), from_values({1, -inf}, {2})}},
      {"broadcast", {make_input({2, 3}, 33), make_input({3}, 34)}},
      {"broadcast equal rows", {from_values({1, 2, 1, 2}, {2, 2}), from_values({1, 2}, {2})}},
      {"0-d", {make_input({}, 35), make_input({}, 35)}},
      {"empty", {make_input({0, 3}, 36), make_input({0, 3}, 37)}},
      {"noncontiguous", {nc, nc.contiguous()}},
  };
}

/// An op returning a host bool (as a 0-d tensor), checked on the pair samples; not
/// differentiable, and not run on meta (it reads both tensors).
OpInfo host_bool_entry(std::string name, std::function<Tensor(const Inputs&)> fn,
                       std::function<Tensor(const Inputs&)> ref) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = std::move(fn);
  o.ref = std::move(ref);
  o.samples = predicate_pair_samples;
  o.dtypes = kFloatDtypes;
  o.differentiable = false;
  o.twice_differentiable = false;
  o.meta_skip = "returns a host bool: it reads both tensors";
  o.host_result = true;
  return o;
}

/// allclose by its definition: |a - b| <= atol + rtol |b| elementwise (broadcast), infinities
/// equal only to themselves, NaN equal only with equal_nan.
OpInfo allclose_entry(std::string name, double rtol, double atol, bool equal_nan) {
  auto fn = [=](const Inputs& x) { return as_tensor(allclose(x[0], x[1], rtol, atol, equal_nan)); };
  auto ref = [=](const Inputs& x) {
    const Tensor close = ref_elementwise(x, [=](const Values& v) {
      const double a = v[0], b = v[1];
      if (std::isnan(a) || std::isnan(b))
        return equal_nan && std::isnan(a) && std::isnan(b) ? 1.0 : 0.0;
      if (std::isinf(a) || std::isinf(b)) return a == b ? 1.0 : 0.0;
      return std::fabs(a - b) <= atol + rtol * std::fabs(b) ? 1.0 : 0.0;
    });
    bool all = true;
    for (double c : values(close)) all = all && c != 0;
    return ref_as_tensor(all);
  };
  return host_bool_entry(std::move(name), fn, ref);
}

/// equal: same shape and every element equal (no broadcasting; NaN is unequal to itself).
OpInfo equal_entry() {
  auto fn = [](const Inputs& x) { return as_tensor(equal(x[0], x[1])); };
  auto ref = [](const Inputs& x) {
    if (!x[0].sizes().equals(x[1].sizes())) return ref_as_tensor(false);
    const Values a = values(x[0]), b = values(x[1]);
    bool all = true;
    for (size_t i = 0; i < a.size(); ++i) all = all && a[i] == b[i];
    return ref_as_tensor(all);
  };
  return host_bool_entry("equal", fn, ref);
}

double sigmoid_ref(double x) { return 1 / (1 + std::exp(-x)); }
double gelu_tanh_ref(double x) {
  const double k = std::sqrt(2 / M_PI);
  return 0.5 * x * (1 + std::tanh(k * (x + 0.044715 * x * x * x)));
}
double softplus_ref(double x, double beta, double threshold) {
  return beta * x > threshold ? x : std::log(1 + std::exp(beta * x)) / beta;
}

}  // namespace

// The entries are one-liners; clang-format would split them into unreadable lambdas.
// clang-format off

// ---- unary math
IGNIS_OP_INFO(unary("neg", [](const Tensor& x) { return neg(x); },
                    [](double x) { return -x; }));
IGNIS_OP_INFO(unary("neg_operator", [](const Tensor& x) { return -x; },
                    [](double x) { return -x; }));
IGNIS_OP_INFO(unary("abs", [](const Tensor& x) { return abs(x); },
                    [](double x) { return std::fabs(x); }));
IGNIS_OP_INFO(unary("sign", [](const Tensor& x) { return sign(x); },
                    [](double x) { return static_cast<double>((x > 0) - (x < 0)); }));
IGNIS_OP_INFO(unary("floor", [](const Tensor& x) { return floor(x); },
                    [](double x) { return std::floor(x); }, -3, 3));
IGNIS_OP_INFO(unary("ceil", [](const Tensor& x) { return ceil(x); },
                    [](double x) { return std::ceil(x); }, -3, 3));
IGNIS_OP_INFO(unary("round", [](const Tensor& x) { return round(x); },
                    [](double x) { return std::nearbyint(x); }, -3, 3));

// ---- the floating unary ops of ignis/float_unary_ops.def, each with its in-place form
#define FLOAT_UNARY(name, ...) IGNIS_OP_INFO(float_unary(#name, name, &Tensor::name##_, __VA_ARGS__))
FLOAT_UNARY(exp, [](double x) { return std::exp(x); });
FLOAT_UNARY(exp2, [](double x) { return std::exp2(x); });
FLOAT_UNARY(expm1, [](double x) { return std::expm1(x); });
FLOAT_UNARY(log, [](double x) { return std::log(x); }, 0.1, 3);
FLOAT_UNARY(log2, [](double x) { return std::log2(x); }, 0.1, 3);
FLOAT_UNARY(log10, [](double x) { return std::log10(x); }, 0.1, 3);
FLOAT_UNARY(log1p, [](double x) { return std::log1p(x); }, -0.9, 3);
FLOAT_UNARY(sqrt, [](double x) { return std::sqrt(x); }, 0.1, 3);
FLOAT_UNARY(rsqrt, [](double x) { return 1 / std::sqrt(x); }, 0.1, 3);
FLOAT_UNARY(reciprocal, [](double x) { return 1 / x; }, 0.3, 2);
FLOAT_UNARY(sin, [](double x) { return std::sin(x); }, -4, 4);
FLOAT_UNARY(cos, [](double x) { return std::cos(x); }, -4, 4);
FLOAT_UNARY(tan, [](double x) { return std::tan(x); }, -1.2, 1.2);
FLOAT_UNARY(asin, [](double x) { return std::asin(x); }, -0.9, 0.9);
FLOAT_UNARY(acos, [](double x) { return std::acos(x); }, -0.9, 0.9);
FLOAT_UNARY(atan, [](double x) { return std::atan(x); }, -3, 3);
FLOAT_UNARY(sinh, [](double x) { return std::sinh(x); });
FLOAT_UNARY(cosh, [](double x) { return std::cosh(x); });
FLOAT_UNARY(tanh, [](double x) { return std::tanh(x); }, -5, 5);
FLOAT_UNARY(asinh, [](double x) { return std::asinh(x); }, -3, 3);
FLOAT_UNARY(acosh, [](double x) { return std::acosh(x); }, 1.2, 3);
FLOAT_UNARY(atanh, [](double x) { return std::atanh(x); }, -0.9, 0.9);
FLOAT_UNARY(sigmoid, sigmoid_ref, -8, 8);
FLOAT_UNARY(erf, [](double x) { return std::erf(x); }, -3, 3);
FLOAT_UNARY(erfc, [](double x) { return std::erfc(x); }, -3, 3);
FLOAT_UNARY(erfinv, erfinv_ref, -0.95, 0.95);
#undef FLOAT_UNARY
IGNIS_OP_INFO(unary("exp_wide", [](const Tensor& x) { return x.exp(); },
                    [](double x) { return std::exp(x); }, -20, 20));

// ---- pow (positive bases where the exponent is not an integer)
IGNIS_OP_INFO(binary("pow", [](const Tensor& a, const Tensor& b) { return pow(a, b); },
                     [](double a, double b) { return std::pow(a, b); }, 0.25, 2.5));
IGNIS_OP_INFO(unary("pow_scalar_2", [](const Tensor& x) { return pow(x, 2); },
                    [](double x) { return x * x; }));
IGNIS_OP_INFO(unary("pow_scalar_3", [](const Tensor& x) { return x.pow(3); },
                    [](double x) { return x * x * x; }));
IGNIS_OP_INFO(unary("pow_scalar_0.5", [](const Tensor& x) { return pow(x, 0.5); },
                    [](double x) { return std::sqrt(x); }, 0.1, 3));
IGNIS_OP_INFO(unary("pow_scalar_-0.5", [](const Tensor& x) { return pow(x, -0.5); },
                    [](double x) { return 1 / std::sqrt(x); }, 0.1, 3));
IGNIS_OP_INFO(unary("pow_scalar_-1", [](const Tensor& x) { return pow(x, -1); },
                    [](double x) { return 1 / x; }, 0.2, 3));
IGNIS_OP_INFO(unary("pow_scalar_2.7", [](const Tensor& x) { return pow(x, 2.7); },
                    [](double x) { return std::pow(x, 2.7); }, 0.1, 3));
IGNIS_OP_INFO(unary("pow_scalar_1", [](const Tensor& x) { return pow(x, 1); },
                    [](double x) { return x; }));
IGNIS_OP_INFO(unary("pow_scalar_0", [](const Tensor& x) { return pow(x, 0); },
                    [](double) { return 1.0; }));
IGNIS_OP_INFO(unary("pow_scalar_base", [](const Tensor& x) { return pow(1.7, x); },
                    [](double x) { return std::pow(1.7, x); }));

// ---- clamp, maximum, minimum
IGNIS_OP_INFO(unary("clamp", [](const Tensor& x) { return clamp(x, -0.5, 0.8); },
                    [](double x) { return std::min(std::max(x, -0.5), 0.8); }));
IGNIS_OP_INFO(unary("clamp_min", [](const Tensor& x) { return x.clamp_min(-0.3); },
                    [](double x) { return std::max(x, -0.3); }));
IGNIS_OP_INFO(unary("clamp_max", [](const Tensor& x) { return x.clamp_max(0.4); },
                    [](double x) { return std::min(x, 0.4); }));
IGNIS_OP_INFO(with_ties(binary("maximum",
                               [](const Tensor& a, const Tensor& b) { return maximum(a, b); },
                               [](double a, double b) { return std::max(a, b); })));
IGNIS_OP_INFO(with_ties(binary("minimum",
                               [](const Tensor& a, const Tensor& b) { return a.minimum(b); },
                               [](double a, double b) { return std::min(a, b); })));

// ---- activations
IGNIS_OP_INFO(unary("relu", [](const Tensor& x) { return relu(x); },
                    [](double x) { return x > 0 ? x : 0.0; }));
IGNIS_OP_INFO(unary("leaky_relu", [](const Tensor& x) { return leaky_relu(x, 0.2); },
                    [](double x) { return x > 0 ? x : 0.2 * x; }));
IGNIS_OP_INFO(unary("gelu", [](const Tensor& x) { return gelu(x); },
                    [](double x) { return 0.5 * x * (1 + std::erf(x / std::sqrt(2.0))); }, -4, 4));
IGNIS_OP_INFO(unary("gelu_tanh", [](const Tensor& x) { return gelu(x, "tanh"); },
                    gelu_tanh_ref, -4, 4));
IGNIS_OP_INFO(unary("silu", [](const Tensor& x) { return silu(x); },
                    [](double x) { return x * sigmoid_ref(x); }, -6, 6));
IGNIS_OP_INFO(unary("softplus", [](const Tensor& x) { return softplus(x); },
                    [](double x) { return softplus_ref(x, 1, 20); }, -5, 5));
IGNIS_OP_INFO(unary("softplus_beta_threshold", [](const Tensor& x) { return softplus(x, 2, 3); },
                    [](double x) { return softplus_ref(x, 2, 3); }, -3, 3));

// ---- comparisons and logic
IGNIS_OP_INFO(predicate2("eq", [](const Tensor& a, const Tensor& b) { return eq(a, b); },
                         [](double a, double b) { return a == b; }));
IGNIS_OP_INFO(predicate2("ne", [](const Tensor& a, const Tensor& b) { return a != b; },
                         [](double a, double b) { return a != b; }));
IGNIS_OP_INFO(predicate2("lt", [](const Tensor& a, const Tensor& b) { return lt(a, b); },
                         [](double a, double b) { return a < b; }));
IGNIS_OP_INFO(predicate2("le", [](const Tensor& a, const Tensor& b) { return a <= b; },
                         [](double a, double b) { return a <= b; }));
IGNIS_OP_INFO(predicate2("gt", [](const Tensor& a, const Tensor& b) { return a.gt(b); },
                         [](double a, double b) { return a > b; }));
IGNIS_OP_INFO(predicate2("ge", [](const Tensor& a, const Tensor& b) { return ge(a, b); },
                         [](double a, double b) { return a >= b; }));
IGNIS_OP_INFO(compare_scalar("eq_scalar", [](const Tensor& a, Scalar b) { return a == b; },
                             [](double a, double b) { return a == b; }));
IGNIS_OP_INFO(compare_scalar("ne_scalar", [](const Tensor& a, Scalar b) { return ne(a, b); },
                             [](double a, double b) { return a != b; }));
IGNIS_OP_INFO(compare_scalar("lt_scalar", [](const Tensor& a, Scalar b) { return a < b; },
                             [](double a, double b) { return a < b; }));
IGNIS_OP_INFO(compare_scalar("le_scalar", [](const Tensor& a, Scalar b) { return le(a, b); },
                             [](double a, double b) { return a <= b; }));
IGNIS_OP_INFO(compare_scalar("gt_scalar", [](const Tensor& a, Scalar b) { return a > b; },
                             [](double a, double b) { return a > b; }));
IGNIS_OP_INFO(compare_scalar("ge_scalar", [](const Tensor& a, Scalar b) { return a.ge(b); },
                             [](double a, double b) { return a >= b; }));
IGNIS_OP_INFO(predicate2("logical_and",
                         [](const Tensor& a, const Tensor& b) { return logical_and(a, b); },
                         [](double a, double b) { return a != 0 && b != 0; }));
IGNIS_OP_INFO(predicate2("logical_or", [](const Tensor& a, const Tensor& b) { return a || b; },
                         [](double a, double b) { return a != 0 || b != 0; }));
IGNIS_OP_INFO(compare_scalar("logical_not", [](const Tensor& a, Scalar) { return logical_not(a); },
                             [](double a, double) { return a == 0; }));
IGNIS_OP_INFO(special_predicate("isnan", [](const Tensor& x) { return isnan(x); },
                                [](double x) { return std::isnan(x); }));
IGNIS_OP_INFO(special_predicate("isinf", [](const Tensor& x) { return isinf(x); },
                                [](double x) { return std::isinf(x); }));
IGNIS_OP_INFO(special_predicate("isfinite", [](const Tensor& x) { return isfinite(x); },
                                [](double x) { return std::isfinite(x); }));

// ---- where
IGNIS_OP_INFO(where_entry());
IGNIS_OP_INFO(unary("where_scalar_other", [](const Tensor& x) { return where(x > 0.5, x, -1.5); },
                    [](double x) { return x > 0.5 ? x : -1.5; }));
IGNIS_OP_INFO(unary("where_scalar_self", [](const Tensor& x) { return where(x > 0.5, 2, x); },
                    [](double x) { return x > 0.5 ? 2.0 : x; }));

// ---- in place (self a non-leaf copy of the input)
IGNIS_OP_INFO(inplace_unary("neg_", [](Tensor& x) { x.neg_(); },
                            [](double x) { return -x; }));
IGNIS_OP_INFO(inplace_unary("pow_", [](Tensor& x) { x.pow_(2.5); },
                            [](double x) { return std::pow(x, 2.5); }, 0.2, 2.5));
IGNIS_OP_INFO(inplace_unary("clamp_", [](Tensor& x) { x.clamp_(-0.5, 0.8); },
                            [](double x) { return std::min(std::max(x, -0.5), 0.8); }));
IGNIS_OP_INFO(inplace_unary("clamp_ min only", [](Tensor& x) { x.clamp_(-0.3); },
                            [](double x) { return std::max(x, -0.3); }));
IGNIS_OP_INFO(inplace_unary("relu_", [](Tensor& x) { x.relu_(); },
                            [](double x) { return x > 0 ? x : 0.0; }));

// ---- whole-tensor predicates (a 0-d bool result)
IGNIS_OP_INFO(allclose_entry("allclose", 1e-5, 1e-8, false));
IGNIS_OP_INFO(covering(allclose_entry("allclose rtol=1e-2 atol=1e-3 equal_nan", 1e-2, 1e-3, true),
                       {"allclose"}));
IGNIS_OP_INFO(equal_entry());

// clang-format on

}  // namespace ignis::testing
