// Op-table entries of the core ops: binary arithmetic (add, sub, mul, div), casts and copies
// (to, clone, contiguous) and views. References are plain loops over the values.
#include <cmath>
#include <numeric>

#include "op_table.h"

// Entries use designated initializers and leave the remaining fields at their defaults.
#pragma GCC diagnostic ignored "-Wmissing-field-initializers"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;

// ---- references

// Row-major multi-index of flat position k in shape.
std::vector<int64_t> unravel(int64_t k, IntArrayRef shape) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = k % shape[d];
    k /= shape[d];
  }
  return idx;
}

int64_t ravel(const std::vector<int64_t>& idx, IntArrayRef shape) {
  int64_t k = 0;
  for (size_t d = 0; d < idx.size(); ++d) k = k * shape[d] + idx[d];
  return k;
}

// A tensor of out_shape whose element at index i is x's element at src(i) (a multi-index of x).
Tensor ref_gather(const Tensor& x, const Shape& out_shape,
                  const std::function<std::vector<int64_t>(const std::vector<int64_t>&)>& src) {
  const std::vector<double> v = values(x);
  int64_t n = 1;
  for (int64_t s : out_shape) n *= s;
  std::vector<double> out(static_cast<size_t>(n));
  for (int64_t k = 0; k < n; ++k) out[k] = v[ravel(src(unravel(k, out_shape)), x.sizes())];
  return from_values(out, out_shape);
}

// The same values in row-major order, with another shape.
Tensor ref_reshape(const Tensor& x, const Shape& shape) { return from_values(values(x), shape); }

Tensor ref_permute(const Tensor& x, const std::vector<int64_t>& dims) {
  Shape s;
  for (int64_t d : dims) s.push_back(x.size(d));
  return ref_gather(x, s, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o.size());
    for (size_t k = 0; k < dims.size(); ++k) i[dims[k]] = o[k];
    return i;
  });
}

Tensor ref_transpose(const Tensor& x, int64_t a, int64_t b) {
  std::vector<int64_t> dims(x.dim());
  std::iota(dims.begin(), dims.end(), 0);
  if (x.dim() > 0) std::swap(dims[(a + x.dim()) % x.dim()], dims[(b + x.dim()) % x.dim()]);
  return ref_permute(x, dims);
}

// Elements start, start+step, ... (< end) of dim d.
Tensor ref_slice(const Tensor& x, int64_t d, int64_t start, int64_t end, int64_t step) {
  Shape s = x.sizes().shape();
  s[d] = end > start ? (end - start + step - 1) / step : 0;
  return ref_gather(x, s, [&](std::vector<int64_t> o) {
    o[d] = start + o[d] * step;
    return o;
  });
}

Tensor ref_expand(const Tensor& x, const Shape& shape) {
  const size_t lead = shape.size() - static_cast<size_t>(x.dim());
  return ref_gather(x, shape, [&](const std::vector<int64_t>& o) {
    std::vector<int64_t> i(o.begin() + static_cast<std::ptrdiff_t>(lead), o.end());
    for (size_t k = 0; k < i.size(); ++k) {
      if (x.size(static_cast<int64_t>(k)) == 1) i[k] = 0;
    }
    return i;
  });
}

Shape without(IntArrayRef s, int64_t d) {
  Shape r = s.shape();
  r.erase(r.begin() + d);
  return r;
}

// ---- samples

Tensor in(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
// [2, 3, 4] values laid out with a stride on dim 0 (every other block of a [4, 3, 4] buffer).
Tensor strided_dim0(uint64_t seed) {
  Tensor buf = zeros({4, 3, 4}, kFloat64);
  Tensor v = buf.slice(0, 0, std::nullopt, 2);
  v.copy_(make_input({2, 3, 4}, seed));
  return v;
}

std::vector<OpSample> samples_3d() {
  return {{"2x3x4", {in({2, 3, 4}, 11)}},
          {"noncontiguous", {make_noncontiguous({2, 3, 4}, 12)}},
          {"permuted", {in({4, 2, 3}, 13).permute({1, 2, 0})}},
          {"empty", {in({0, 3, 4}, 14)}}};
}

std::vector<OpSample> samples_2d() {
  return {{"3x4", {in({3, 4}, 21)}},
          {"noncontiguous", {make_noncontiguous({3, 4}, 22)}},
          {"transposed", {in({4, 3}, 23).t()}},
          {"1x1", {in({1, 1}, 24)}},
          {"empty", {in({0, 4}, 25)}}};
}

std::vector<OpSample> samples_any() {
  auto s = samples_3d();
  s.push_back({"0-d", {in({}, 31)}});
  s.push_back({"1-d", {in({5}, 32)}});
  return s;
}

// Denominators away from zero.
std::vector<OpSample> div_samples() { return elementwise_samples(2, 0.5, 2.5); }

const std::vector<DType> kAllArith = {kFloat32, kFloat64, kBFloat16, kInt64};
const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};

// ---- binary arithmetic

IGNIS_OP_INFO(OpInfo{
    .name = "add",
    .fn = [](const TL& x) { return add(x[0], x[1]); },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] + v[1]; }); },
    .samples = [] { return elementwise_samples(2); },
    .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{
    .name = "add_alpha",
    .fn = [](const TL& x) { return add(x[0], x[1], 2.5); },
    .ref =
        [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] + 2.5 * v[1]; }); },
    .samples = [] { return elementwise_samples(2); },
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{
    .name = "add_scalar",
    .fn = [](const TL& x) { return x[0] + 1.5; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] + 1.5; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats,
    .ops = {"add.Scalar"}});

// An int64 tensor promoted against a float one; only the float input is differentiated.
IGNIS_OP_INFO(OpInfo{
    .name = "add_int_float",
    .fn = [](const TL& x) { return x[0] + x[1]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] + v[1]; }); },
    .samples =
        [] {
          Tensor ints = tensor({3, -1, 4, 1, -5, 9}).reshape({2, 3});
          return std::vector<OpSample>{{"float + int64", {in({2, 3}, 41), ints}},
                                       {"float + int64 broadcast", {in({4, 1, 3}, 42), ints}}};
        },
    .grad_inputs = {0}});

IGNIS_OP_INFO(OpInfo{
    .name = "sub",
    .fn = [](const TL& x) { return x[0] - x[1]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] - v[1]; }); },
    .samples = [] { return elementwise_samples(2); },
    .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{
    .name = "sub_alpha",
    .fn = [](const TL& x) { return sub(x[0], x[1], -0.5); },
    .ref =
        [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] + 0.5 * v[1]; }); },
    .samples = [] { return elementwise_samples(2); },
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{
    .name = "rsub",
    .fn = [](const TL& x) { return 3.0 - x[0]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return 3.0 - v[0]; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats,
    .ops = {"rsub.Scalar"}});

IGNIS_OP_INFO(OpInfo{
    .name = "mul",
    .fn = [](const TL& x) { return x[0] * x[1]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] * v[1]; }); },
    .samples = [] { return elementwise_samples(2); },
    .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{
    .name = "mul_scalar",
    .fn = [](const TL& x) { return x[0] * -2.5; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] * -2.5; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats,
    .ops = {"mul.Scalar"}});

// The same tensor on both sides: gradients from two uses accumulate.
IGNIS_OP_INFO(OpInfo{
    .name = "mul_self",
    .fn = [](const TL& x) { return x[0] * x[0]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] * v[0]; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{
    .name = "div",
    .fn = [](const TL& x) { return x[0] / x[1]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] / v[1]; }); },
    .samples = div_samples,
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{
    .name = "div_scalar_by_tensor",
    .fn = [](const TL& x) { return 2.0 / x[0]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return 2.0 / v[0]; }); },
    .samples = [] { return elementwise_samples(1, 0.5, 2.5); },
    .dtypes = kFloats,
    .ops = {"div.Scalar_Tensor"}});

// Integer division is true division into float32.
IGNIS_OP_INFO(OpInfo{
    .name = "div_int",
    .fn = [](const TL& x) { return x[0] / x[1]; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] / v[1]; }); },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"int64 / int64", {tensor({7, -7, 9, 1}), tensor({2, 2, -4, 3})}}};
        },
    .dtypes = {kFloat32},
    .differentiable = false});

IGNIS_OP_INFO(OpInfo{
    .name = "sub.Scalar",
    .fn = [](const TL& x) { return sub(x[0], 1.5, 2); },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] - 3.0; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{
    .name = "div.Scalar",
    .fn = [](const TL& x) { return x[0] / 4; },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return v[0] / 4; }); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats});

// ---- in place: self (a non-leaf copy of input 0) takes op(self, other); other broadcasts to
// self's shape, so the samples keep self's shape the broadcast result.
std::vector<OpSample> inplace_samples(double lo = -2, double hi = 2) {
  return {{"same shape", {make_input({3, 4}, 51, lo, hi), make_input({3, 4}, 52, lo, hi)}},
          {"other broadcast", {make_input({2, 3, 4}, 53, lo, hi), make_input({4}, 54, lo, hi)}},
          {"other 0-d", {make_input({3, 2}, 55, lo, hi), make_input({}, 56, lo, hi)}},
          {"empty", {make_input({0, 3}, 57, lo, hi), make_input({3}, 58, lo, hi)}},
          {"noncontiguous",
           {make_noncontiguous({3, 4}, 59, lo, hi), make_noncontiguous({3, 4}, 60, lo, hi)}}};
}

OpInfo inplace(std::string name, std::function<void(Tensor&, const Tensor&)> f,
               std::function<double(double, double)> r, double lo = -2, double hi = 2) {
  return OpInfo{
      .name = std::move(name),
      .fn =
          [f](const TL& x) {
            Tensor self = x[0] * 1;  // a non-leaf: in-place writes are recorded
            f(self, x[1]);
            return self;
          },
      .ref =
          [r](const TL& x) { return ref_elementwise(x, [r](auto& v) { return r(v[0], v[1]); }); },
      .samples = [lo, hi] { return inplace_samples(lo, hi); },
      .dtypes = kFloats};
}

IGNIS_OP_INFO(inplace(
    "add_.Tensor", [](Tensor& a, const Tensor& b) { a.add_(b, 2); },
    [](double a, double b) { return a + 2 * b; }));
IGNIS_OP_INFO(inplace(
    "sub_.Tensor", [](Tensor& a, const Tensor& b) { a.sub_(b, 0.5); },
    [](double a, double b) { return a - 0.5 * b; }));
IGNIS_OP_INFO(inplace(
    "mul_.Tensor", [](Tensor& a, const Tensor& b) { a.mul_(b); },
    [](double a, double b) { return a * b; }));
IGNIS_OP_INFO(inplace(
    "div_.Tensor", [](Tensor& a, const Tensor& b) { a.div_(b); },
    [](double a, double b) { return a / b; }, 0.5, 2.5));
IGNIS_OP_INFO(inplace(
    "add_.Scalar", [](Tensor& a, const Tensor&) { a.add_(1.5, 2); },
    [](double a, double) { return a + 3; }));
IGNIS_OP_INFO(inplace(
    "sub_.Scalar", [](Tensor& a, const Tensor&) { a.sub_(1.5); },
    [](double a, double) { return a - 1.5; }));
IGNIS_OP_INFO(inplace(
    "mul_.Scalar", [](Tensor& a, const Tensor&) { a.mul_(-2.5); },
    [](double a, double) { return a * -2.5; }));
IGNIS_OP_INFO(inplace(
    "div_.Scalar", [](Tensor& a, const Tensor&) { a.div_(4); },
    [](double a, double) { return a / 4; }));

// ---- casts and copies

IGNIS_OP_INFO(OpInfo{.name = "to_float64",
                     .fn = [](const TL& x) { return x[0].to(kFloat64); },
                     .ref = [](const TL& x) { return x[0].detach().clone(); },
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = kFloats,
                     .ops = {"to.dtype"}});

IGNIS_OP_INFO(OpInfo{.name = "to_copy",
                     .fn = [](const TL& x) { return x[0].to(x[0].dtype(), /*non_blocking=*/false, /*copy=*/true); },
                     .ref = [](const TL& x) { return x[0].detach().clone(); },
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = kFloats});

// Narrowing casts: forward only (finite differences need float64 outputs).
IGNIS_OP_INFO(OpInfo{.name = "to_float32",
                     .fn = [](const TL& x) { return x[0].to(kFloat32); },
                     .ref = [](const TL& x) { return x[0].detach().clone(); },
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = kFloats,
                     .differentiable = false});

IGNIS_OP_INFO(OpInfo{.name = "to_bfloat16",
                     .fn = [](const TL& x) { return x[0].to(kBFloat16); },
                     .ref = [](const TL& x) { return x[0].detach().clone(); },
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = kFloats,
                     .differentiable = false});

IGNIS_OP_INFO(OpInfo{
    .name = "to_int64",
    .fn = [](const TL& x) { return x[0].to(kInt64); },
    .ref = [](const TL& x) { return ref_elementwise(x, [](auto& v) { return std::trunc(v[0]); }); },
    .samples = [] { return elementwise_samples(1, -5, 5); },
    .dtypes = {kFloat32, kFloat64},
    .differentiable = false});

IGNIS_OP_INFO(OpInfo{.name = "clone",
                     .fn = [](const TL& x) { return x[0].clone(); },
                     .ref = [](const TL& x) { return from_values(values(x[0]), x[0].sizes()); },
                     .samples = samples_any,
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "contiguous",
                     .fn = [](const TL& x) { return x[0].contiguous(); },
                     .ref = [](const TL& x) { return from_values(values(x[0]), x[0].sizes()); },
                     .samples = samples_any,
                     .dtypes = kAllArith});

// ---- views

IGNIS_OP_INFO(OpInfo{.name = "view",
                     .fn =
                         [](const TL& x) {
                           return x[0].view({x[0].size(0), x[0].size(1) * x[0].size(2)});
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_reshape(x[0], {x[0].size(0), x[0].size(1) * x[0].size(2)});
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{{"2x3x4", {in({2, 3, 4}, 51)}},
                                                        {"strided dim 0", {strided_dim0(52)}},
                                                        {"1x1x1", {in({1, 1, 1}, 53)}},
                                                        {"empty", {in({0, 3, 4}, 54)}}};
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "view_infer",
                     .fn =
                         [](const TL& x) {
                           return x[0].view({-1, 2});
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_reshape(x[0], {x[0].numel() / 2, 2});
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{{"2x3x4", {in({2, 3, 4}, 55)}}};
                         }});

IGNIS_OP_INFO(OpInfo{.name = "reshape",
                     .fn = [](const TL& x) { return x[0].reshape({-1}); },
                     .ref = [](const TL& x) { return ref_reshape(x[0], {x[0].numel()}); },
                     .samples = samples_any,
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "transpose",
                     .fn = [](const TL& x) { return x[0].transpose(0, -1); },
                     .ref = [](const TL& x) { return ref_transpose(x[0], 0, -1); },
                     .samples =
                         [] {
                           auto s = samples_3d();
                           s.push_back({"1-d", {in({5}, 61)}});
                           return s;
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "permute",
                     .fn =
                         [](const TL& x) {
                           return x[0].permute({2, 0, 1});
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_permute(x[0], {2, 0, 1});
                         },
                     .samples = samples_3d,
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "t",
                     .fn = [](const TL& x) { return x[0].t(); },
                     .ref =
                         [](const TL& x) {
                           return x[0].dim() < 2 ? x[0].detach().clone()
                                                 : ref_transpose(x[0], 0, 1);
                         },
                     .samples =
                         [] {
                           auto s = samples_2d();
                           s.push_back({"1-d", {in({5}, 62)}});
                           s.push_back({"0-d", {in({}, 63)}});
                           return s;
                         }});

IGNIS_OP_INFO(OpInfo{.name = "mT",
                     .fn = [](const TL& x) { return x[0].mT(); },
                     .ref = [](const TL& x) { return ref_transpose(x[0], -2, -1); },
                     .samples =
                         [] {
                           auto s = samples_3d();
                           for (auto& x : samples_2d()) s.push_back(x);
                           return s;
                         }});

IGNIS_OP_INFO(OpInfo{
    .name = "expand",
    .fn =
        [](const TL& x) {
          return x[0].dim() == 0 ? x[0].expand({2, 3}) : x[0].expand({2, x[0].size(0), 4});
        },
    .ref =
        [](const TL& x) {
          return ref_expand(x[0], x[0].dim() == 0 ? Shape{2, 3} : Shape{2, x[0].size(0), 4});
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"3x1", {in({3, 1}, 71)}},
                                       {"1x4", {in({1, 4}, 72)}},
                                       {"3x4 noncontiguous", {make_noncontiguous({3, 4}, 73)}},
                                       {"0-d", {in({}, 74)}},
                                       {"empty", {in({0, 1}, 75)}}};
        },
    .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "squeeze",
                     .fn = [](const TL& x) { return x[0].squeeze(); },
                     .ref =
                         [](const TL& x) {
                           Shape s;
                           for (int64_t v : x[0].sizes()) {
                             if (v != 1) s.push_back(v);
                           }
                           return ref_reshape(x[0], s);
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"1x3x1x2", {in({1, 3, 1, 2}, 81)}},
                               {"1x1 to 0-d", {in({1, 1}, 82)}},
                               {"noncontiguous 3x1x4", {make_noncontiguous({3, 1, 4}, 83)}},
                               {"0-d", {in({}, 84)}}};
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "squeeze_dim",
                     .fn = [](const TL& x) { return x[0].squeeze(1); },
                     .ref =
                         [](const TL& x) {
                           return x[0].size(1) == 1 ? ref_reshape(x[0], without(x[0].sizes(), 1))
                                                    : x[0].detach().clone();
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"3x1x2", {in({3, 1, 2}, 85)}},
                               {"3x2 (not 1)", {in({3, 2}, 86)}},
                               {"noncontiguous", {make_noncontiguous({3, 1, 4}, 87)}}};
                         },
                     .ops = {"squeeze.dim"}});

IGNIS_OP_INFO(OpInfo{.name = "unsqueeze",
                     .fn = [](const TL& x) { return x[0].unsqueeze(-1).unsqueeze(0); },
                     .ref =
                         [](const TL& x) {
                           Shape s = x[0].sizes().shape();
                           s.push_back(1);
                           s.insert(s.begin(), 1);
                           return ref_reshape(x[0], s);
                         },
                     .samples = samples_any,
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "flatten",
                     .fn = [](const TL& x) { return x[0].flatten(); },
                     .ref = [](const TL& x) { return ref_reshape(x[0], {x[0].numel()}); },
                     .samples = samples_any});

IGNIS_OP_INFO(OpInfo{.name = "flatten_1_2",
                     .fn = [](const TL& x) { return x[0].flatten(1, 2); },
                     .ref =
                         [](const TL& x) {
                           return ref_reshape(x[0], {x[0].size(0), x[0].size(1) * x[0].size(2)});
                         },
                     .samples = samples_3d});

IGNIS_OP_INFO(OpInfo{.name = "narrow",
                     .fn = [](const TL& x) { return x[0].narrow(1, 1, 2); },
                     .ref = [](const TL& x) { return ref_slice(x[0], 1, 1, 3, 1); },
                     .samples =
                         [] {
                           auto s = samples_3d();
                           s.push_back({"noncontiguous 3x4", {make_noncontiguous({3, 4}, 91)}});
                           return s;
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "slice_step",
                     .fn = [](const TL& x) { return x[0].slice(-1, 1, std::nullopt, 2); },
                     .ref =
                         [](const TL& x) {
                           const int64_t d = x[0].dim() - 1;
                           return ref_slice(x[0], d, std::min<int64_t>(1, x[0].size(d)),
                                            x[0].size(d), 2);
                         },
                     .samples =
                         [] {
                           auto s = samples_3d();
                           for (auto& x : samples_2d()) s.push_back(x);
                           return s;
                         },
                     .dtypes = kAllArith,
                     .ops = {"slice.Tensor"}});

IGNIS_OP_INFO(OpInfo{
    .name = "slice_negative",
    .fn = [](const TL& x) { return x[0].slice(0, -3, -1); },
    .ref = [](const TL& x) { return ref_slice(x[0], 0, x[0].size(0) - 3, x[0].size(0) - 1, 1); },
    .samples =
        [] {
          return std::vector<OpSample>{{"5x2", {in({5, 2}, 92)}},
                                       {"noncontiguous 4x3", {make_noncontiguous({4, 3}, 93)}}};
        }});

IGNIS_OP_INFO(OpInfo{.name = "select",
                     .fn = [](const TL& x) { return x[0].select(1, -1); },
                     .ref =
                         [](const TL& x) {
                           const int64_t last = x[0].size(1) - 1;
                           return ref_reshape(ref_slice(x[0], 1, last, last + 1, 1),
                                              without(x[0].sizes(), 1));
                         },
                     .samples =
                         [] {
                           auto s = samples_3d();
                           s.push_back({"noncontiguous 3x4", {make_noncontiguous({3, 4}, 94)}});
                           s.push_back({"1-d from 2-d", {in({4, 1}, 95)}});
                           return s;
                         },
                     .dtypes = kAllArith});

// A chain of views over one buffer, then arithmetic on it: the gradients flow back through all.
IGNIS_OP_INFO(OpInfo{
    .name = "view_chain",
    .fn =
        [](const TL& x) {
          return x[0].t().unsqueeze(0).expand({2, 4, 3}).select(1, 1) * x[0].select(1, 0);
        },
    .ref =
        [](const TL& x) {
          // out[i][j] = x[j][1] * x[j][0]
          std::vector<double> v = values(x[0]);
          std::vector<double> out;
          for (int i = 0; i < 2; ++i) {
            for (int j = 0; j < 3; ++j) out.push_back(v[j * 4 + 1] * v[j * 4]);
          }
          return from_values(out, {2, 3});
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"3x4", {in({3, 4}, 96)}},
                                       {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 97)}}};
        }});

IGNIS_OP_INFO(OpInfo{.name = "unflatten.int",
                     .fn =
                         [](const TL& x) {
                           return x[0].unflatten(-1, {3, -1});
                         },
                     .ref =
                         [](const TL& x) {
                           Shape s = x[0].sizes().shape();
                           s.back() /= 3;
                           s.insert(s.end() - 1, 3);
                           return ref_reshape(x[0], s);
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"2x6", {in({2, 6}, 101)}},
                               {"noncontiguous 4x6", {make_noncontiguous({4, 6}, 102)}},
                               {"1-d", {in({3}, 103)}},
                               {"empty", {in({0, 6}, 104)}}};
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{.name = "broadcast_to",
                     .fn =
                         [](const TL& x) {
                           return broadcast_to(x[0], {2, 3, 4});
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_expand(x[0], {2, 3, 4});
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"3x1", {in({3, 1}, 105)}},
                               {"4", {in({4}, 106)}},
                               {"noncontiguous 3x4", {make_noncontiguous({3, 4}, 107)}},
                               {"0-d", {in({}, 108)}}};
                         },
                     .dtypes = kAllArith});

// as_strided reads the storage: the samples are fresh contiguous tensors (offset 0), so storage
// element k is the k-th value in row-major order. Not differentiable (it refuses autograd).
IGNIS_OP_INFO(OpInfo{
    .name = "as_strided",
    .fn =
        [](const TL& x) {
          return x[0].as_strided({x[0].numel() ? 4 : 0, 3}, {2, 1}, x[0].numel() ? 1 : 0);
        },
    .ref =
        [](const TL& x) {
          const std::vector<double> v = values(x[0]);
          std::vector<double> out;
          for (int64_t i = 0; i < (v.empty() ? 0 : 4); ++i) {
            for (int64_t j = 0; j < 3; ++j) out.push_back(v[1 + 2 * i + j]);  // overlapping rows
          }
          return from_values(out, {v.empty() ? 0 : 4, 3});
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"3x4", {in({3, 4}, 109)}}, {"12", {in({12}, 110)}}, {"empty", {in({0, 3}, 111)}}};
        },
    .dtypes = kAllArith,
    .differentiable = false});

// ---- to(device), to(options), contiguous(memory_format), copy_ and fills

IGNIS_OP_INFO(OpInfo{.name = "to.device",  // a copy to the same device (copy=true)
                     .fn = [](const TL& x) { return x[0].to(x[0].device(), /*non_blocking=*/false, /*copy=*/true); },
                     .ref = [](const TL& x) { return x[0].detach().clone(); },
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(OpInfo{
    .name = "to.dtype_layout",
    .fn = [](const TL& x) { return x[0].to(TensorOptions(kFloat64).device(x[0].device())); },
    .ref = [](const TL& x) { return x[0].detach().clone(); },
    .samples = [] { return elementwise_samples(1); },
    .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{.name = "contiguous.memory_format",
                     .fn = [](const TL& x) { return x[0].contiguous(MemoryFormat::ChannelsLast); },
                     .ref = [](const TL& x) { return from_values(values(x[0]), x[0].sizes()); },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"2x3x4x5", {in({2, 3, 4, 5}, 112)}},
                               {"channels-last already",
                                {in({2, 3, 2, 2}, 113).contiguous(MemoryFormat::ChannelsLast)}},
                               {"permuted", {in({2, 4, 5, 3}, 114).permute({0, 3, 2, 1})}},
                               {"1x3x1x1 (restride)", {in({1, 3, 1, 1}, 115)}},
                               {"empty", {in({0, 3, 2, 2}, 116)}}};
                         },
                     .dtypes = kAllArith});

IGNIS_OP_INFO(inplace(
    "copy_", [](Tensor& a, const Tensor& b) { a.copy_(b); }, [](double, double b) { return b; }));

// A fill leaves constants (no history): forward only.
OpInfo forward_only(OpInfo o) {
  o.differentiable = false;
  return o;
}
IGNIS_OP_INFO(forward_only(inplace(
    "fill_", [](Tensor& a, const Tensor&) { a.fill_(-1.5); },
    [](double, double) { return -1.5; })));
IGNIS_OP_INFO(forward_only(inplace(
    "zero_", [](Tensor& a, const Tensor&) { a.zero_(); }, [](double, double) { return 0.0; })));

// ---- factories: input 0 gives the shape and dtype (values are not read)

std::vector<OpSample> factory_samples() {
  return {{"2x3", {in({2, 3}, 121)}}, {"0-d", {in({}, 122)}}, {"empty", {in({0, 3}, 123)}}};
}
Tensor ref_constant(const Tensor& like, double v) {
  return from_values(std::vector<double>(static_cast<size_t>(like.numel()), v), like.sizes());
}
OpInfo factory(std::string name, std::function<Tensor(const Tensor&)> f, double value) {
  return OpInfo{.name = std::move(name),
                .fn = [f](const TL& x) { return f(x[0]); },
                .ref = [value](const TL& x) { return ref_constant(x[0], value); },
                .samples = factory_samples,
                .dtypes = kAllArith,
                .differentiable = false};
}

IGNIS_OP_INFO(factory(
    "zeros", [](const Tensor& t) { return zeros(t.sizes(), t.options()); }, 0));
IGNIS_OP_INFO(factory(
    "ones", [](const Tensor& t) { return ones(t.sizes(), t.options()); }, 1));
IGNIS_OP_INFO(factory(
    "full", [](const Tensor& t) { return full(t.sizes(), -3, t.options()); }, -3));
IGNIS_OP_INFO(factory(
    "zeros_like", [](const Tensor& t) { return zeros_like(t); }, 0));
IGNIS_OP_INFO(factory(
    "ones_like", [](const Tensor& t) { return ones_like(t); }, 1));
IGNIS_OP_INFO(factory(
    "full_like", [](const Tensor& t) { return full_like(t, 7); }, 7));
IGNIS_OP_INFO(OpInfo{.name = "scalar_tensor",
                     .fn = [](const TL& x) { return scalar_tensor(-2, x[0].options()); },
                     .ref = [](const TL&) { return from_values({-2}, {}); },
                     .samples = factory_samples,
                     .dtypes = kAllArith,
                     .differentiable = false});

IGNIS_OP_INFO(OpInfo{.name = "arange",
                     .fn = [](const TL& x) { return arange(5, x[0].options()); },
                     .ref =
                         [](const TL&) {
                           return from_values({0, 1, 2, 3, 4}, {5});
                         },
                     .samples = factory_samples,
                     .dtypes = kAllArith,
                     .differentiable = false});
IGNIS_OP_INFO(OpInfo{.name = "arange.start_step",
                     .fn = [](const TL& x) { return arange(-1.5, 2, 0.5, x[0].options()); },
                     .ref =
                         [](const TL&) {
                           std::vector<double> v;
                           for (int i = 0; i < 7; ++i) v.push_back(-1.5 + 0.5 * i);
                           return from_values(v, {7});
                         },
                     .samples = factory_samples,
                     .dtypes = kFloats,
                     .differentiable = false});
IGNIS_OP_INFO(OpInfo{.name = "linspace",
                     .fn = [](const TL& x) { return linspace(-1, 2, 7, x[0].options()); },
                     .ref =
                         [](const TL&) {
                           std::vector<double> v;
                           for (int i = 0; i < 7; ++i) v.push_back(-1 + 0.5 * i);
                           return from_values(v, {7});
                         },
                     .samples = factory_samples,
                     .dtypes = kFloats,
                     .differentiable = false});
// eye(rows of input 0, columns of input 0).
IGNIS_OP_INFO(OpInfo{
    .name = "eye",
    .fn = [](const TL& x) { return eye(x[0].size(0), x[0].size(1), x[0].options()); },
    .ref =
        [](const TL& x) {
          const int64_t n = x[0].size(0), m = x[0].size(1);
          std::vector<double> v;
          for (int64_t i = 0; i < n; ++i) {
            for (int64_t j = 0; j < m; ++j) v.push_back(i == j ? 1 : 0);
          }
          return from_values(v, {n, m});
        },
    .samples =
        [] {
          return std::vector<OpSample>{{"3x4", {in({3, 4}, 124)}},
                                       {"2x2", {in({2, 2}, 125)}},
                                       {"4x1", {in({4, 1}, 126)}},
                                       {"empty", {in({0, 3}, 127)}}};
        },
    .dtypes = kAllArith,
    .differentiable = false});

IGNIS_OP_EXEMPT("empty",
                "uninitialised values: nothing to compare (its shape and dtype are "
                "those every factory entry above checks)");
IGNIS_OP_EXEMPT("empty_like",
                "uninitialised values: nothing to compare; its layout is tested in "
                "tests/test_memory_format.cpp (CopiesAndLikeFormsKeepChannelsLast)");
IGNIS_OP_EXEMPT("from_blob",
                "no record: wraps caller memory with a deleter callback, which "
                "cannot be boxed (the datasets use it, src/data/dataset.cpp)");
IGNIS_OP_EXEMPT("tensor",
                "no record: tensor(std::vector / initializer_list) takes host data, "
                "which cannot be boxed; every table entry builds its indices with it");

// Random ops draw from the generator: no reference values. tests/test_random.cpp checks seeds,
// streams, moments, ranges, permutations, the *_like forms and the in-place fills.
IGNIS_OP_EXEMPT("rand", "random values; tested in tests/test_random.cpp (UniformMoments)");
IGNIS_OP_EXEMPT("randn", "random values; tested in tests/test_random.cpp (NormalMoments)");
IGNIS_OP_EXEMPT("rand_like", "random values; tested in tests/test_random.cpp (LikeAndOptions)");
IGNIS_OP_EXEMPT("randn_like", "random values; tested in tests/test_random.cpp (LikeAndOptions)");
IGNIS_OP_EXEMPT("randint",
                "random values; tested in tests/test_random.cpp "
                "(RandintRangeAndUniformity); covers randint.low too");
IGNIS_OP_EXEMPT("randperm",
                "random values; tested in tests/test_random.cpp "
                "(RandpermIsAPermutation)");
IGNIS_OP_EXEMPT("uniform_", "random values; tested in tests/test_random.cpp (InPlaceFills)");
IGNIS_OP_EXEMPT("normal_", "random values; tested in tests/test_random.cpp (InPlaceFills)");

}  // namespace
}  // namespace ignis::testing
