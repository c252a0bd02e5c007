// Op table entries of the activations with parameters (ignis/activation_ops.def and their
// composites selu, celu, relu6, softmin, glu, prelu), square and trunc, and the binary math ops
// of ignis/binary_ops.def (atan2, fmod, remainder). References are plain std:: math.
#include <cmath>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

const std::vector<DType> kFloatDtypes = {kFloat32, kFloat64, kBFloat16};

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

/// The function and its in-place form `name_` (self a non-leaf copy of the input, so that
/// autograd records the in-place write).
std::vector<OpInfo> with_inplace(std::string name, std::function<Tensor(const Tensor&)> f,
                                 std::function<void(Tensor&)> inplace,
                                 std::function<double(double)> r, double lo = -2, double hi = 2) {
  OpInfo in = unary(
      name + "_",
      [inplace](const Tensor& x) {
        Tensor self = x * 1;
        inplace(self);
        return self;
      },
      r, lo, hi);
  return {unary(std::move(name), std::move(f), r, lo, hi), std::move(in)};
}

/// Two operands: `a` in [alo, ahi), `b` in [blo, bhi) (fmod and remainder keep the divisor away
/// from 0, where they jump): same shape, broadcast, 0-d, empty, non-contiguous.
std::vector<OpSample> binary_samples(double alo, double ahi, double blo, double bhi) {
  auto a = [&](IntArrayRef s, uint64_t seed) { return make_input(s, seed, alo, ahi); };
  auto b = [&](IntArrayRef s, uint64_t seed) { return make_input(s, seed, blo, bhi); };
  return {
      {"same shape", {a({2, 3}, 1), b({2, 3}, 2)}},
      {"broadcast", {a({2, 1, 3}, 3), b({4, 1}, 4)}},
      {"0-d with 2-d", {a({}, 5), b({2, 3}, 6)}},
      {"2-d with 0-d", {a({2, 3}, 7), b({}, 8)}},
      {"empty", {a({0, 3}, 9), b({1, 3}, 10)}},
      {"noncontiguous", {make_noncontiguous({3, 4}, 11, alo, ahi), b({4, 3}, 12).t()}},
  };
}

OpInfo binary(std::string name, std::function<Tensor(const Tensor&, const Tensor&)> f,
              std::function<double(double, double)> r, std::vector<OpSample> (*samples)()) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = [f](const Inputs& x) { return f(x[0], x[1]); };
  o.ref = [r](const Inputs& x) {
    return ref_elementwise(x, [r](const Values& v) { return r(v[0], v[1]); });
  };
  o.samples = samples;
  o.dtypes = kFloatDtypes;
  return o;
}

/// The divisor positive or negative, the dividend a few times larger.
std::vector<OpSample> division_samples() {
  std::vector<OpSample> s = binary_samples(-5, 5, 0.6, 1.9);
  for (OpSample& n : binary_samples(-5, 5, -1.9, -0.6)) {
    s.push_back({n.desc + ", negative divisor", n.inputs});
  }
  return s;
}
std::vector<OpSample> atan2_samples() {
  std::vector<OpSample> s = binary_samples(-2, 2, -2, 2);
  s.push_back({"negative x", {make_input({2, 3}, 21, -2, 2), make_input({2, 3}, 22, -2, -0.5)}});
  return s;
}

/// An input to glu: its halves along `dim` in [-2, 2).
std::vector<OpSample> glu_samples() {
  return {
      {"2x4", {make_input({2, 4}, 1)}},
      {"3x5x2", {make_input({3, 5, 2}, 2)}},
      {"empty rows", {make_input({0, 4}, 3)}},
      {"noncontiguous", {make_noncontiguous({4, 6}, 4)}},
      {"transposed", {make_input({6, 2}, 5).t()}},
  };
}
/// glu's reference along the last dim: a * sigmoid(b) of the two halves.
Tensor glu_ref(const Tensor& x, int64_t dim) {
  const Tensor xc = x.contiguous();
  const int64_t d = dim < 0 ? dim + x.dim() : dim;
  const int64_t n = x.size(d) / 2;
  std::vector<int64_t> shape(x.sizes().begin(), x.sizes().end());
  shape[static_cast<size_t>(d)] = n;
  int64_t outer = 1, inner = 1;
  for (int64_t k = 0; k < d; ++k) outer *= x.size(k);
  for (int64_t k = d + 1; k < x.dim(); ++k) inner *= x.size(k);
  const Values v = values(xc);
  Values out(static_cast<size_t>(outer * n * inner));
  for (int64_t o = 0; o < outer; ++o) {
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < inner; ++k) {
        const double a = v[static_cast<size_t>((o * 2 * n + i) * inner + k)];
        const double b = v[static_cast<size_t>((o * 2 * n + n + i) * inner + k)];
        out[static_cast<size_t>((o * n + i) * inner + k)] = a / (1 + std::exp(-b));
      }
    }
  }
  return from_values(out, shape);
}

/// softmin along `dim` of a 2-d input: exp(-x) / sum(exp(-x)) with the row's min subtracted.
Tensor softmin_ref(const Tensor& x, int64_t dim) {
  if (x.dim() == 0) return from_values({1.0}, {});
  const Tensor xt = (dim == 0 ? x.t() : x).contiguous();  // rows along the softmin dim
  const int64_t rows = xt.size(0), n = xt.size(1);
  const Values v = values(xt);
  Values out(v.size());
  for (int64_t r = 0; r < rows; ++r) {
    double mn = INFINITY, sum = 0;
    for (int64_t k = 0; k < n; ++k) mn = std::min(mn, v[static_cast<size_t>(r * n + k)]);
    for (int64_t k = 0; k < n; ++k) sum += std::exp(mn - v[static_cast<size_t>(r * n + k)]);
    for (int64_t k = 0; k < n; ++k) {
      out[static_cast<size_t>(r * n + k)] = std::exp(mn - v[static_cast<size_t>(r * n + k)]) / sum;
    }
  }
  const Tensor t = from_values(out, xt.sizes());
  return dim == 0 ? t.t().contiguous() : t;
}
std::vector<OpSample> softmin_samples() {
  return {
      {"3x4", {make_input({3, 4}, 1)}},
      {"large values", {make_input({2, 5}, 2, 500, 600)}},
      {"empty", {make_input({0, 4}, 3)}},
      {"noncontiguous", {make_noncontiguous({3, 4}, 4)}},
  };
}

/// prelu(x, weight): per-channel slopes (dim 1), or one.
std::vector<OpSample> prelu_samples() {
  return {
      {"NCHW, per channel", {make_input({2, 3, 2, 2}, 1), make_input({3}, 2, 0.1, 0.5)}},
      {"NC, per channel", {make_input({4, 3}, 3), make_input({3}, 4, -0.5, 0.5)}},
      {"one slope", {make_input({2, 3, 4}, 5), make_input({1}, 6, 0.1, 0.5)}},
      {"0-d slope, 1-d input", {make_input({5}, 7), make_input({}, 8, 0.1, 0.5)}},
      {"0-d input", {make_input({}, 9), make_input({1}, 10, 0.1, 0.5)}},
      {"empty", {make_input({0, 3}, 11), make_input({3}, 12, 0.1, 0.5)}},
      {"noncontiguous", {make_noncontiguous({3, 4}, 13), make_input({4}, 14, 0.1, 0.5)}},
  };
}
Tensor prelu_ref(const Inputs& x) {
  const Values v = values(x[0]), w = values(x[1]);
  const int64_t c = x[0].dim() >= 2 ? x[0].size(1) : 1;
  int64_t inner = 1;
  for (int64_t k = 2; k < x[0].dim(); ++k) inner *= x[0].size(k);
  Values out(v.size());
  for (size_t i = 0; i < v.size(); ++i) {
    const double slope = w.size() == 1 ? w[0] : w[(i / static_cast<size_t>(inner)) % c];
    out[i] = v[i] > 0 ? v[i] : slope * v[i];
  }
  return from_values(out, x[0].sizes());
}

double elu_ref(double x, double alpha, double scale, double input_scale) {
  return x > 0 ? scale * x : alpha * scale * std::expm1(x * input_scale);
}
double hardtanh_ref(double x, double lo, double hi) { return std::min(std::max(x, lo), hi); }
double softplus_ref(double x) { return x > 20 ? x : std::log1p(std::exp(x)); }
constexpr double kSeluAlpha = 1.6732632423543772848170429916717;
constexpr double kSeluScale = 1.0507009873554804934193349852946;

}  // namespace

// clang-format off

// ---- activations of ignis/activation_ops.def, each with its in-place form
IGNIS_OP_INFO(with_inplace("elu", [](const Tensor& x) { return elu(x); },
                           [](Tensor& x) { elu_(x); },
                           [](double x) { return elu_ref(x, 1, 1, 1); }, -3, 3));
IGNIS_OP_INFO(covering(unary("elu alpha=0.5 scale=1.5 input_scale=2", [](const Tensor& x) { return elu(x, 0.5, 1.5, 2); },
                             [](double x) { return elu_ref(x, 0.5, 1.5, 2); }, -3, 3), {"elu"}));
IGNIS_OP_INFO(with_inplace("hardtanh", [](const Tensor& x) { return hardtanh(x); },
                           [](Tensor& x) { hardtanh_(x); },
                           [](double x) { return hardtanh_ref(x, -1, 1); }));
IGNIS_OP_INFO(covering(unary("hardtanh -0.5 0.8", [](const Tensor& x) { return hardtanh(x, -0.5, 0.8); },
                             [](double x) { return hardtanh_ref(x, -0.5, 0.8); }), {"hardtanh"}));
IGNIS_OP_INFO(with_inplace("hardswish", [](const Tensor& x) { return hardswish(x); },
                           [](Tensor& x) { hardswish_(x); },
                           [](double x) { return x * hardtanh_ref(x + 3, 0, 6) / 6; }, -5, 5));
IGNIS_OP_INFO(with_inplace("hardsigmoid", [](const Tensor& x) { return hardsigmoid(x); },
                           [](Tensor& x) { hardsigmoid_(x); },
                           [](double x) { return hardtanh_ref(x + 3, 0, 6) / 6; }, -5, 5));
IGNIS_OP_INFO(with_inplace("mish", [](const Tensor& x) { return mish(x); },
                           [](Tensor& x) { mish_(x); },
                           [](double x) { return x * std::tanh(softplus_ref(x)); }, -5, 5));
IGNIS_OP_INFO(with_inplace("log_sigmoid", [](const Tensor& x) { return log_sigmoid(x); },
                           [](Tensor& x) { log_sigmoid_(x); },
                           [](double x) { return -softplus_ref(-x); }, -6, 6));
IGNIS_OP_INFO(covering(unary("log_sigmoid large", [](const Tensor& x) { return log_sigmoid(x); },
                             [](double x) { return x < 0 ? x - std::log1p(std::exp(x)) : -std::log1p(std::exp(-x)); }, -60, 60),
                       {"log_sigmoid"}));

// ---- composites
IGNIS_OP_INFO(with_inplace("selu", [](const Tensor& x) { return selu(x); },
                           [](Tensor& x) { selu_(x); },
                           [](double x) { return elu_ref(x, kSeluAlpha, kSeluScale, 1); }, -3, 3));
IGNIS_OP_INFO(with_inplace("celu", [](const Tensor& x) { return celu(x, 0.7); },
                           [](Tensor& x) { celu_(x, 0.7); },
                           [](double x) { return std::max(0.0, x) + std::min(0.0, 0.7 * std::expm1(x / 0.7)); }, -3, 3));
IGNIS_OP_INFO(with_inplace("relu6", [](const Tensor& x) { return relu6(x); },
                           [](Tensor& x) { relu6_(x); },
                           [](double x) { return hardtanh_ref(x, 0, 6); }, -2, 8));
IGNIS_OP_INFO([] {
  OpInfo o;
  o.name = "softmin";
  o.fn = [](const Inputs& x) { return softmin(x[0], 1); };
  o.ref = [](const Inputs& x) { return softmin_ref(x[0], 1); };
  o.samples = softmin_samples;
  o.dtypes = {kFloat32, kFloat64};
  return o;
}());
IGNIS_OP_INFO(covering([] {
  OpInfo o;
  o.name = "softmin dim=0";
  o.fn = [](const Inputs& x) { return softmin(x[0], 0); };
  o.ref = [](const Inputs& x) { return softmin_ref(x[0], 0); };
  o.samples = softmin_samples;
  o.dtypes = {kFloat32, kFloat64};
  return o;
}(), {"softmin"}));
IGNIS_OP_INFO([] {
  OpInfo o;
  o.name = "glu";
  o.fn = [](const Inputs& x) { return glu(x[0]); };
  o.ref = [](const Inputs& x) { return glu_ref(x[0], -1); };
  o.samples = glu_samples;
  o.dtypes = kFloatDtypes;
  return o;
}());
IGNIS_OP_INFO(covering([] {
  OpInfo o;
  o.name = "glu dim=0";
  o.fn = [](const Inputs& x) { return glu(x[0], 0); };
  o.ref = [](const Inputs& x) { return glu_ref(x[0], 0); };
  o.samples = [] {
    return std::vector<OpSample>{{"4x3", {make_input({4, 3}, 1)}},
                                 {"2x3x2", {make_input({2, 3, 2}, 2)}},
                                 {"transposed", {make_input({3, 4}, 3).t()}}};
  };
  o.dtypes = kFloatDtypes;
  return o;
}(), {"glu"}));
IGNIS_OP_INFO([] {
  OpInfo o;
  o.name = "prelu";
  o.fn = [](const Inputs& x) { return prelu(x[0], x[1]); };
  o.ref = prelu_ref;
  o.samples = prelu_samples;
  o.dtypes = kFloatDtypes;
  return o;
}());

// ---- square and trunc, with their in-place methods
IGNIS_OP_INFO(with_inplace("square", [](const Tensor& x) { return square(x); },
                           [](Tensor& x) { x.square_(); },
                           [](double x) { return x * x; }));
IGNIS_OP_INFO(with_inplace("trunc", [](const Tensor& x) { return x.trunc(); },
                           [](Tensor& x) { x.trunc_(); },
                           [](double x) { return std::trunc(x); }, -4, 4));

// ---- binary math of ignis/binary_ops.def: tensor and scalar other, in place
IGNIS_OP_INFO(binary("atan2", [](const Tensor& a, const Tensor& b) { return atan2(a, b); },
                     [](double a, double b) { return std::atan2(a, b); }, atan2_samples));
IGNIS_OP_INFO(binary("atan2_", [](const Tensor& a, const Tensor& b) { Tensor s = a.expand(broadcast_shapes(a.sizes(), b.sizes())) * 1; s.atan2_(b); return s; },
                     [](double a, double b) { return std::atan2(a, b); }, atan2_samples));
IGNIS_OP_INFO(binary("fmod.Tensor", [](const Tensor& a, const Tensor& b) { return fmod(a, b); },
                     [](double a, double b) { return std::fmod(a, b); }, division_samples));
IGNIS_OP_INFO(binary("fmod_.Tensor", [](const Tensor& a, const Tensor& b) { Tensor s = a.expand(broadcast_shapes(a.sizes(), b.sizes())) * 1; s.fmod_(b); return s; },
                     [](double a, double b) { return std::fmod(a, b); }, division_samples));
IGNIS_OP_INFO(unary("fmod.Scalar", [](const Tensor& x) { return x.fmod(-1.5); },
                    [](double x) { return std::fmod(x, -1.5); }, -5, 5));
IGNIS_OP_INFO(unary("fmod_.Scalar", [](const Tensor& x) { Tensor s = x * 1; s.fmod_(1.25); return s; },
                    [](double x) { return std::fmod(x, 1.25); }, -5, 5));
IGNIS_OP_INFO(binary("remainder.Tensor", [](const Tensor& a, const Tensor& b) { return remainder(a, b); },
                     [](double a, double b) { return a - b * std::floor(a / b); }, division_samples));
IGNIS_OP_INFO(binary("remainder_.Tensor", [](const Tensor& a, const Tensor& b) { Tensor s = a.expand(broadcast_shapes(a.sizes(), b.sizes())) * 1; s.remainder_(b); return s; },
                     [](double a, double b) { return a - b * std::floor(a / b); }, division_samples));
IGNIS_OP_INFO(unary("remainder.Scalar", [](const Tensor& x) { return remainder(x, -1.5); },
                    [](double x) { return x + 1.5 * std::floor(x / -1.5); }, -5, 5));
IGNIS_OP_INFO(unary("remainder_.Scalar", [](const Tensor& x) { Tensor s = x * 1; s.remainder_(1.25); return s; },
                    [](double x) { return x - 1.25 * std::floor(x / 1.25); }, -5, 5));
IGNIS_OP_INFO(unary("remainder.Scalar_Tensor", [](const Tensor& x) { return remainder(2.5, x); },
                    [](double x) { return 2.5 - x * std::floor(2.5 / x); }, 0.6, 1.9));

// clang-format on

}  // namespace ignis::testing
