// The ops of ignis/sort.h, einsum.h and shape_extra.h against PyTorch's own results, and their
// error messages. tests/pytorch/gen_sort_shape_cases.py records torch's outputs and gradients
// at the edges (NaN above +inf, ties, zeros in cumprod, -inf in logcumsumexp, empty and 0-d
// tensors, non-contiguous inputs) into tests/data/pytorch_sort_shape_cases.txt; each case is
// called here by its registry name through op::call_boxed. torch is not needed at run time.
#include <gmock/gmock.h>

#include <cmath>
#include <fstream>
#include <sstream>

#include "ignis/ignis.h"
#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

using ::testing::HasSubstr;

std::vector<std::string> split(const std::string& s, const std::string& sep) {
  std::vector<std::string> parts;
  for (size_t start = 0;;) {
    const size_t at = s.find(sep, start);
    parts.push_back(s.substr(start, at == std::string::npos ? at : at - start));
    if (at == std::string::npos) return parts;
    start = at + sep.size();
  }
}

DType dtype_of(const std::string& name) {
  for (DType t : {kFloat32, kFloat64, kInt64, kInt32, kBool}) {
    if (dtype_name(t) == name) return t;
  }
  ADD_FAILURE() << "unknown dtype " << name;
  return kFloat64;
}

/// "T dtype [shape] values..."
Tensor parse_tensor(const std::string& text) {
  std::istringstream in(text);
  std::string tag, dtype, shape_text, tok;
  in >> tag >> dtype >> shape_text;
  EXPECT_EQ(tag, "T") << text;
  Shape shape;
  for (const std::string& s : split(shape_text.substr(1, shape_text.size() - 2), ",")) {
    if (!s.empty()) shape.push_back(std::stoll(s));
  }
  std::vector<double> v;
  while (in >> tok) v.push_back(std::strtod(tok.c_str(), nullptr));  // nan, inf, -inf
  return tensor(v, kFloat64).reshape(shape).to(dtype_of(dtype));
}

op::IValue parse_arg(const std::string& text) {
  const char kind = text.empty() ? 'n' : text[0];
  const std::string rest = text.size() > 2 ? text.substr(2) : "";
  switch (kind) {
    case 'T': return parse_tensor(text);
    case 'L': {
      std::vector<Tensor> list;
      for (const std::string& t : split(rest, " & ")) list.push_back(parse_tensor(t));
      return list;
    }
    case 'i': return static_cast<int64_t>(std::stoll(rest));
    case 'b': return rest == "1";
    case 'f': return std::strtod(rest.c_str(), nullptr);
    case 'S': return Scalar(std::strtod(rest.c_str(), nullptr));
    case 's': return rest;
    case 'd': return dtype_of(rest);
    case 'I': {
      std::vector<int64_t> v;
      std::istringstream in(rest);
      int64_t x;
      while (in >> x) v.push_back(x);
      return v;
    }
    default: return op::IValue();
  }
}

/// "" when got matches want: shape, dtype, and values (NaN for NaN, the same infinities, finite
/// values within the dtype's tolerance; integers exactly).
std::string mismatch(const Tensor& got, const Tensor& want) {
  std::ostringstream os;
  if (!got.defined()) return "undefined result";
  if (!got.sizes().equals(want.sizes()) || got.dtype() != want.dtype()) {
    os << "got " << got.dtype() << got.sizes() << ", torch " << want.dtype() << want.sizes();
    return os.str();
  }
  const double rtol = want.dtype() == kFloat32 ? 1e-5 : 1e-10;
  const double atol = want.dtype() == kFloat32 ? 1e-6 : 1e-12;
  const Tensor g = got.to(kFloat64).contiguous(), w = want.to(kFloat64).contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    const double a = gp[i], b = wp[i];
    const bool ok = std::isnan(b) ? std::isnan(a)
                    : std::isinf(b) || !is_floating_point(want.dtype())
                        ? a == b
                        : std::abs(a - b) <= atol + rtol * std::abs(b);
    if (!ok) {
      os << "element " << i << ": got " << a << ", torch " << b;
      return os.str();
    }
  }
  return "";
}

struct Case {
  std::string line, op;
  std::vector<op::IValue> args;
  std::vector<std::string> outputs;
  std::string grad;
};

std::vector<Case> load_cases() {
  const std::string path =
      std::string(IGNIS_SOURCE_DIR) + "/tests/data/pytorch_sort_shape_cases.txt";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<Case> cases;
  std::string line;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    const std::vector<std::string> parts = split(line, " | ");
    EXPECT_EQ(parts.size(), 4u) << line;
    if (parts.size() != 4) continue;
    Case c{line, parts[0], {}, split(parts[2], " ; "), parts[3]};
    for (const std::string& a : split(parts[1], " ; ")) c.args.push_back(parse_arg(a));
    cases.push_back(std::move(c));
  }
  return cases;
}

/// Replaces the first tensor argument (or the first tensor of the first list) by a leaf that
/// requires grad, and returns it.
Tensor make_leaf(std::vector<op::IValue>& args) {
  for (op::IValue& a : args) {
    if (a.is<Tensor>()) {
      Tensor leaf = a.get<Tensor>().detach().clone().requires_grad_(true);
      a = op::IValue(leaf);
      return leaf;
    }
    if (a.is<std::vector<Tensor>>()) {
      std::vector<Tensor> list = a.get<std::vector<Tensor>>();
      list[0] = list[0].detach().clone().requires_grad_(true);
      a = op::IValue(list);
      return list[0];
    }
  }
  return Tensor();
}

TEST(SortShapeParity, OutputsAndGradientsMatchPyTorch) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GT(cases.size(), 200u);
  int grads = 0;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.line.substr(0, 300));
    std::vector<op::IValue> out;
    try {
      out = op::call_boxed(c.op, c.args);
    } catch (const std::exception& e) {
      ADD_FAILURE() << "threw " << e.what();
      continue;
    }
    // A Tensor[] result is one list value; compare element by element.
    std::vector<Tensor> got;
    for (const op::IValue& v : out) {
      if (v.is<Tensor>()) got.push_back(v.get<Tensor>());
      if (v.is<std::vector<Tensor>>()) {
        for (const Tensor& t : v.get<std::vector<Tensor>>()) got.push_back(t);
      }
    }
    std::vector<std::string> want_text;
    for (const std::string& o : c.outputs) {
      if (o.rfind("L ", 0) == 0) {
        for (const std::string& t : split(o.substr(2), " & ")) want_text.push_back(t);
      } else {
        want_text.push_back(o);
      }
    }
    ASSERT_EQ(got.size(), want_text.size());
    for (size_t i = 0; i < got.size(); ++i) {
      if (want_text[i] == "X") continue;
      EXPECT_EQ(mismatch(got[i], parse_tensor(want_text[i])), "") << "output " << i;
    }
    if (c.grad == "-") continue;
    // The gradient of sum(out0 * w), w[i] = (i % 3) - 0.5, with respect to the first tensor.
    std::vector<op::IValue> args = c.args;
    const Tensor leaf = make_leaf(args);
    ASSERT_TRUE(leaf.defined());
    const std::vector<op::IValue> res = op::call_boxed(c.op, args);
    const Tensor o0 =
        res[0].is<Tensor>() ? res[0].get<Tensor>() : res[0].get<std::vector<Tensor>>()[0];
    std::vector<double> wv(static_cast<size_t>(o0.numel()));
    for (size_t i = 0; i < wv.size(); ++i) wv[i] = static_cast<double>(i % 3) - 0.5;
    const Tensor w = tensor(wv, kFloat64).reshape(o0.sizes()).to(o0.dtype());
    if (o0.numel() > 0 && o0.requires_grad()) (o0 * w).sum().backward();
    const Tensor g = leaf.grad().defined() ? leaf.grad() : zeros_like(leaf);
    EXPECT_EQ(mismatch(g, parse_tensor(c.grad)), "") << "gradient";
    ++grads;
  }
  EXPECT_GT(grads, 0);
}

}  // namespace
}  // namespace ignis

namespace ignis {
namespace {

using ::testing::HasSubstr;

Tensor m34() { return arange(12, kFloat32).reshape({3, 4}); }

TEST(SortShape, TopkOfA0dTensorGivesItsElementForKZeroOrOne) {
  // PyTorch: torch.topk(torch.tensor(3.), 0) and (…, 1) are (tensor(3.), tensor(0)).
  const Tensor x = full({}, 3.0);
  for (int64_t k : {0, 1}) {
    auto [v, i] = topk(x, k);
    EXPECT_EQ(v.dim(), 0) << k;
    EXPECT_EQ(v.item<float>(), 3.0f) << k;
    EXPECT_EQ(i.item<int64_t>(), 0) << k;
  }
  EXPECT_THAT(error_of([&] { topk(x, 2); }),
              HasSubstr("topk: k = 2 is out of range for dimension 0 of size 1"));
}

TEST(SortShapeErrors, SortingAndScansNameTheOpAndTheShape) {
  EXPECT_THAT(error_of([] { sort(m34(), 2); }),
              HasSubstr("sort: dimension 2 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] { argsort(m34(), -3); }),
              HasSubstr("argsort: dimension -3 out of range for a 2-d tensor"));
  EXPECT_THAT(
      error_of([] { topk(m34(), 5); }),
      HasSubstr("topk: k = 5 is out of range for dimension 1 of size 4 (input shape [3, 4])"));
  EXPECT_THAT(error_of([] { topk(m34(), -1, 0); }),
              HasSubstr("topk: k = -1 is out of range for dimension 0 of size 3"));
  EXPECT_THAT(error_of([] {
                median(zeros({2, 0}), 1);
              }),
              HasSubstr("median: cannot reduce dimension 1 of size 0 (input shape [2, 0])"));
  EXPECT_THAT(error_of([] { median(zeros({0}, kInt64)); }),
              HasSubstr("median: cannot take the median of an empty int64 tensor (shape [0])"));
  EXPECT_THAT(error_of([] {
                mode(zeros({0, 3}), 0);
              }),
              HasSubstr("mode: cannot reduce dimension 0 of size 0 (input shape [0, 3])"));
  EXPECT_THAT(error_of([] { cumprod(m34(), 2); }),
              HasSubstr("cumprod: dimension 2 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] { cumprod(m34(), 0, kBool); }),
              HasSubstr("cumprod: bool is not a valid result dtype"));
  EXPECT_THAT(error_of([] { logcumsumexp(m34(), -3); }),
              HasSubstr("logcumsumexp: dimension -3 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] { var_mean(m34().to(kInt64)); }),
              HasSubstr("var_mean: expected a floating point tensor, but got int64"));
  EXPECT_THAT(error_of([] { std_mean(m34().to(kInt32), {0}); }),
              HasSubstr("std_mean: expected a floating point tensor, but got int32"));
  EXPECT_THAT(error_of([] { nanmean(m34().to(kInt64)); }),
              HasSubstr("nanmean: expected a floating point tensor, but got int64"));
}

TEST(SortShapeErrors, ProductsNameTheShapes) {
  EXPECT_THAT(
      error_of([] {
        mv(zeros({2, 3}), zeros({3, 1}));
      }),
      HasSubstr("mv: expected a 2-d matrix and a 1-d vector, but got shapes [2, 3] and [3, 1]"));
  EXPECT_THAT(error_of([] {
                mv(zeros({2, 3}), zeros({4}));
              }),
              HasSubstr("mv: shapes [2, 3] and [4] cannot be multiplied (3 != 4)"));
  EXPECT_THAT(
      error_of([] {
        baddbmm(zeros({2, 3, 5}), zeros({3, 4}), zeros({2, 4, 5}));
      }),
      HasSubstr("baddbmm: batch1 and batch2 must be 3-d, but got shapes [3, 4] and [2, 4, 5]"));
  EXPECT_THAT(
      error_of([] {
        baddbmm(zeros({2, 3, 5}), zeros({2, 3, 4}), zeros({2, 3, 5}));
      }),
      HasSubstr("baddbmm: batch1 of shape [2, 3, 4] and batch2 of shape [2, 3, 5] cannot be "
                "multiplied"));
  EXPECT_THAT(error_of([] {
                baddbmm(zeros({4, 5}), zeros({2, 3, 4}), zeros({2, 4, 5}));
              }),
              HasSubstr("baddbmm: self of shape [4, 5] cannot be broadcast to [2, 3, 5]"));
  EXPECT_THAT(error_of([] {
                baddbmm(zeros({5}, kFloat64), zeros({2, 3, 4}), zeros({2, 4, 5}));
              }),
              HasSubstr("baddbmm: self is float64 but batch1 and batch2 are float32"));
}

TEST(SortShapeErrors, EinsumNamesTheEquation) {
  const Tensor a = zeros({2, 3}), b = zeros({3, 4});
  EXPECT_THAT(error_of([&] {
                einsum("ij,jk->ik->", {a, b});
              }),
              HasSubstr("einsum: invalid subscript '-' at index 9 of the equation 'ij,jk->ik->' "
                        "(subscripts must be in [a-zA-Z])"));
  EXPECT_THAT(error_of([&] { einsum("i1", {a}); }),
              HasSubstr("einsum: invalid subscript '1' at index 1 of the equation 'i1'"));
  EXPECT_THAT(error_of([&] { einsum("i..j", {a}); }),
              HasSubstr("einsum: found '.' for operand 0 that is not part of any ellipsis, in "
                        "the equation 'i..j'"));
  EXPECT_THAT(error_of([&] { einsum("...i...", {a}); }),
              HasSubstr("einsum: found '.' for operand 0 after an ellipsis was already found, in "
                        "the equation '...i...'"));
  EXPECT_THAT(error_of([&] {
                einsum("ij,jk,kl", {a, b});
              }),
              HasSubstr("einsum: the equation 'ij,jk,kl' has 3 operand(s) but 2 tensor(s) were "
                        "given"));
  EXPECT_THAT(error_of([&] { einsum("ijk", {a}); }),
              HasSubstr("einsum: the equation 'ijk' gives operand 0 3 subscript(s) but it has 2 "
                        "dimension(s) (shape [2, 3]) and no ellipsis"));
  EXPECT_THAT(error_of([&] { einsum("ijk...", {a}); }),
              HasSubstr("einsum: the equation 'ijk...' gives operand 0 3 subscript(s) besides its "
                        "ellipsis but it has only 2 dimension(s) (shape [2, 3])"));
  EXPECT_THAT(error_of([&] { einsum("ii", {a}); }),
              HasSubstr("einsum: subscript i is repeated for operand 0 but the sizes don't match, "
                        "2 != 3 (equation 'ii')"));
  EXPECT_THAT(error_of([&] {
                einsum("ij,jk", {a, zeros({2, 4})});
              }),
              HasSubstr("einsum: subscript j has size 2 for operand 1 which does not broadcast "
                        "with the size 3 seen before (equation 'ij,jk')"));
  EXPECT_THAT(error_of([&] {
                einsum("ij,jk->ii", {a, b});
              }),
              HasSubstr("einsum: output subscript i appears more than once in the output of "
                        "'ij,jk->ii'"));
  EXPECT_THAT(error_of([&] { einsum("ij->k", {a}); }),
              HasSubstr("einsum: output subscript k does not appear in the inputs of 'ij->k'"));
  EXPECT_THAT(error_of([&] {
                einsum("ij,jk", {a, b.to(kFloat64)});
              }),
              HasSubstr("einsum: operand 1 is float64 but operand 0 is float32"));
  EXPECT_THAT(error_of([&] { einsum("ij", {}); }),
              HasSubstr("einsum: expected at least one operand, for the equation 'ij'"));
}

TEST(SortShapeErrors, ShapeOpsNameTheArgumentAtFault) {
  EXPECT_THAT(error_of([] { index_fill(m34(), 1, tensor({1}).to(kInt32), 0); }),
              HasSubstr("index_fill: index must be an int64 tensor, but got int32"));
  EXPECT_THAT(error_of([] {
                index_fill(m34(), 1, zeros({1, 1}, kInt64), 0);
              }),
              HasSubstr("index_fill: index must be 0-d or 1-d, but got shape [1, 1]"));
  EXPECT_THAT(error_of([] {
                index_fill(m34(), 1, tensor({0, 4}), 0);
              }),
              HasSubstr("index_fill: index 4 is out of range for dimension 1 of size 4 (self "
                        "shape [3, 4])"));
  EXPECT_THAT(error_of([] { index_fill(m34(), 0, tensor({-4}), 0); }),
              HasSubstr("index_fill: index -4 is out of range for dimension 0 of size 3"));
  EXPECT_THAT(error_of([] { m34().index_fill_(2, tensor({0}), 0); }),
              HasSubstr("index_fill_: dimension 2 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] {
                Tensor leaf = zeros({2, 2}).requires_grad_(true);
                leaf.index_fill_(0, tensor({0}), 1);
              }),
              HasSubstr("index_fill_"));
  EXPECT_THAT(error_of([] {
                roll(m34(), {1, 2}, {0});
              }),
              HasSubstr("roll: shifts [1, 2] and dims [0] must have the same length"));
  EXPECT_THAT(error_of([] {
                roll(m34(), {1, 2});
              }),
              HasSubstr("roll: with no dims, shifts must hold one value, but got [1, 2]"));
  EXPECT_THAT(error_of([] { roll(m34(), {1}, {2}); }),
              HasSubstr("roll: dimension 2 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] { unbind(tensor(1.0).reshape({})); }),
              HasSubstr("unbind: cannot unbind a 0-d tensor"));
  EXPECT_THAT(error_of([] { m34().unbind(2); }),
              HasSubstr("unbind: dimension 2 out of range for a 2-d tensor"));
  EXPECT_THAT(error_of([] { repeat_interleave(m34(), -1, 0); }),
              HasSubstr("repeat_interleave: repeats must be non-negative, but got -1"));
  EXPECT_THAT(error_of([] { repeat_interleave(m34(), 2, 0, 5); }),
              HasSubstr("repeat_interleave: output_size 5 does not match the result's size 6 "
                        "along dim 0"));
  EXPECT_THAT(error_of([] {
                repeat_interleave(m34(), tensor({1, 2}), 0);
              }),
              HasSubstr("repeat_interleave: repeats of shape [2] must have one value per element "
                        "along dim 0 (size 3, input shape [3, 4])"));
  EXPECT_THAT(error_of([] { repeat_interleave(m34(), tensor({1.5}), 0); }),
              HasSubstr("repeat_interleave: repeats must be an integer tensor, but got float32"));
  EXPECT_THAT(error_of([] {
                repeat_interleave(tensor({1, -2}));
              }),
              HasSubstr("repeat_interleave: repeats must be non-negative, but repeats[1] is -2"));
  EXPECT_THAT(error_of([] {
                repeat_interleave(zeros({2, 2}, kInt64));
              }),
              HasSubstr("repeat_interleave: repeats must be a 1-d tensor, but got shape [2, 2]"));
  EXPECT_THAT(error_of([] {
                repeat_interleave(tensor({1, 2}), std::optional<int64_t>(4));
              }),
              HasSubstr("repeat_interleave: output_size 4 does not match the sum of repeats 3"));
  EXPECT_THAT(error_of([] { meshgrid({zeros({2})}, "ji"); }),
              HasSubstr("meshgrid: indexing must be \"ij\" or \"xy\", but got \"ji\""));
  EXPECT_THAT(error_of([] {
                meshgrid({zeros({2}), zeros({2, 2})});
              }),
              HasSubstr("meshgrid: expected 0-d or 1-d tensors, but tensor 1 has shape [2, 2]"));
  EXPECT_THAT(error_of([] { meshgrid({}, "ij"); }),
              HasSubstr("meshgrid: expected at least one tensor"));
  EXPECT_THAT(error_of([] {
                meshgrid({zeros({2}), zeros({2}, kFloat64)}, "xy");
              }),
              HasSubstr("meshgrid: all tensors must have the same dtype and device, but tensor 1 "
                        "is float64 on cpu and tensor 0 float32 on cpu"));
}

TEST(SortShapeSemantics, InPlaceIndexFillWritesSelfAndSortIsStable) {
  Tensor x = zeros({2, 3});
  const uint32_t v0 = x._version();
  Tensor& r = x.index_fill_(1, tensor({-1}), 7);
  EXPECT_TRUE(r.is_same(x));
  EXPECT_GT(x._version(), v0);
  EXPECT_EQ(x[0][2].item<float>(), 7);
  EXPECT_EQ(x[1][1].item<float>(), 0);
  // Equal keys keep their order, ascending and descending (PyTorch's stable sort).
  const Tensor keys = tensor({1.0, 0.0, 1.0, 0.0, 1.0});
  EXPECT_TRUE(equal(argsort(keys, true, 0), tensor({1, 3, 0, 2, 4})));
  EXPECT_TRUE(equal(argsort(keys, true, 0, true), tensor({0, 2, 4, 1, 3})));
  // The node names PyTorch's users see.
  Tensor y = tensor({3.0, 1.0, 2.0}).requires_grad_(true);
  EXPECT_TRUE(std::get<0>(y.sort()).grad_fn() != nullptr);
}

}  // namespace
}  // namespace ignis
