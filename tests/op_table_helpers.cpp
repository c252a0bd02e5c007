#include <cmath>

#include "op_table.h"

namespace ignis::testing {

std::vector<OpInfo>& op_table() {
  static std::vector<OpInfo> table;
  return table;
}

std::vector<std::pair<std::string, std::string>>& op_exemptions() {
  static std::vector<std::pair<std::string, std::string>> list;
  return list;
}

namespace {
uint64_t mix(uint64_t z) {
  z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
  z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
  return z ^ (z >> 31);
}
}  // namespace

Tensor from_values(const std::vector<double>& v, IntArrayRef shape) {
  Tensor t = empty(shape, kFloat64);
  IGNIS_CHECK(static_cast<int64_t>(v.size()) == t.numel(), "from_values: size mismatch");
  std::copy(v.begin(), v.end(), t.data_ptr<double>());
  return t;
}

Tensor make_input(IntArrayRef shape, uint64_t seed, double lo, double hi) {
  int64_t n = 1;
  for (int64_t s : shape) n *= s;
  std::vector<double> v(static_cast<size_t>(n));
  for (int64_t i = 0; i < n; ++i) {
    double u = static_cast<double>(mix(seed * 1000003 + static_cast<uint64_t>(i) + 1) >> 11) *
               0x1.0p-53;
    v[i] = lo + (hi - lo) * u;
  }
  return from_values(v, shape);
}

Tensor make_noncontiguous(IntArrayRef shape, uint64_t seed, double lo, double hi) {
  Tensor c = make_input(shape, seed, lo, hi);
  if (c.dim() == 0) return c;
  // Put the values in every other column of a buffer twice as wide: a strided view.
  Shape wide = shape.shape();
  wide.back() *= 2;
  Tensor buf = zeros(wide, kFloat64);
  Tensor view = buf.slice(-1, 0, std::nullopt, 2);
  view.copy_(c);
  return view;
}

std::vector<OpSample> elementwise_samples(int arity, double lo, double hi) {
  std::vector<OpSample> s;
  auto n = [&](IntArrayRef shape, uint64_t seed) { return make_input(shape, seed, lo, hi); };
  auto push = [&](std::string d, std::vector<Tensor> in) {
    in.resize(static_cast<size_t>(arity));
    s.push_back({std::move(d), std::move(in)});
  };
  if (arity == 1) {
    push("2x3", {n({2, 3}, 1)});
    push("0-d", {n({}, 2)});
    push("empty", {n({0, 3}, 3)});
    push("noncontiguous", {make_noncontiguous({3, 4}, 4, lo, hi)});
    push("transposed", {n({4, 3}, 5).t()});
  } else if (arity == 2) {
    push("same shape", {n({2, 3}, 1), n({2, 3}, 2)});
    push("broadcast", {n({2, 1, 3}, 3), n({4, 1}, 4)});
    push("0-d with 2-d", {n({}, 5), n({2, 3}, 6)});
    push("empty", {n({0, 3}, 7), n({1, 3}, 8)});
    push("noncontiguous", {make_noncontiguous({3, 4}, 9, lo, hi), n({4, 3}, 10).t()});
  } else {
    push("same shape", {n({2, 3}, 1), n({2, 3}, 2), n({2, 3}, 3)});
    push("broadcast", {n({2, 1}, 4), n({3}, 5), n({2, 3}, 6)});
  }
  return s;
}

std::vector<double> values(const Tensor& t) {
  Tensor c = t.detach().to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

Tensor ref_elementwise(const std::vector<Tensor>& inputs,
                       const std::function<double(const std::vector<double>&)>& f) {
  Shape shape;
  for (const Tensor& t : inputs) shape = broadcast_shapes(shape, t.sizes());
  std::vector<std::vector<double>> vals;
  for (const Tensor& t : inputs) vals.push_back(values(t.detach().expand(shape).contiguous()));
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  std::vector<double> out(static_cast<size_t>(n));
  std::vector<double> args(inputs.size());
  for (int64_t i = 0; i < n; ++i) {
    for (size_t k = 0; k < inputs.size(); ++k) args[k] = vals[k][i];
    out[i] = f(args);
  }
  return from_values(out, shape);
}

}  // namespace ignis::testing
