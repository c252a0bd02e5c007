// The margin, hinge, triplet, cosine-embedding, Poisson/Gaussian NLL and CTC losses against
// PyTorch: tests/data/pytorch_loss_cases.txt holds torch 1.13's losses and gradients (float64)
// for each case, written by tests/pytorch/gen_loss_cases.py, so this test needs no torch. Each
// case runs through the nn::functional form with its Options, in the case's dtype.
#include <gtest/gtest.h>

#include <cmath>
#include <fstream>
#include <functional>
#include <map>
#include <sstream>

#include "ignis/ignis.h"
#include "ignis/nn/loss_extra.h"

namespace ignis {
namespace {

namespace F = nn::functional;

struct Case {
  std::string name, op, dtype;
  std::map<std::string, std::string> params;
  std::vector<std::pair<std::string, Tensor>> inputs;  // float64 or int64, as written
  std::vector<int64_t> out_shape;
  std::vector<double> out;
  std::map<std::string, std::vector<double>> grads;
};

double parse_double(const std::string& s) { return std::strtod(s.c_str(), nullptr); }

/// "RANK DIMS... VALUES..." from the stream.
std::pair<std::vector<int64_t>, std::vector<double>> read_tensor(std::istringstream& in) {
  int64_t rank = 0;
  in >> rank;
  std::vector<int64_t> dims(static_cast<size_t>(rank));
  int64_t n = 1;
  for (auto& d : dims) {
    in >> d;
    n *= d;
  }
  std::vector<double> v;
  std::string w;
  for (int64_t i = 0; i < n && in >> w; ++i) v.push_back(parse_double(w));
  return {dims, v};
}

std::vector<Case> load_cases() {
  std::ifstream f(std::string(IGNIS_SOURCE_DIR) + "/tests/data/pytorch_loss_cases.txt");
  EXPECT_TRUE(f.good()) << "missing tests/data/pytorch_loss_cases.txt";
  std::vector<Case> cases;
  std::string line;
  Case c;
  while (std::getline(f, line)) {
    std::istringstream in(line);
    std::string key;
    in >> key;
    if (key == "case") {
      c = Case();
      in >> c.name;
    } else if (key == "op") {
      in >> c.op;
    } else if (key == "dtype") {
      in >> c.dtype;
    } else if (key == "param") {
      std::string k, v;
      in >> k >> v;
      c.params[k] = v;
    } else if (key == "input") {
      std::string name, dt;
      in >> name >> dt;
      auto [dims, v] = read_tensor(in);
      Tensor t = tensor(v, kFloat64).reshape(dims);
      if (dt == "int64") t = t.to(kInt64);
      c.inputs.emplace_back(name, t);
    } else if (key == "output") {
      std::tie(c.out_shape, c.out) = read_tensor(in);
    } else if (key == "grad") {
      std::string name, w;
      in >> name;
      while (in >> w) c.grads[name].push_back(parse_double(w));
    } else if (key == "end") {
      cases.push_back(c);
    }
  }
  return cases;
}

bool truth(const std::string& v) { return v == "true"; }

/// The loss of a case through nn::functional's Options form.
Tensor run_case(const Case& c, const std::map<std::string, Tensor>& x) {
  auto p = [&](const char* k) { return c.params.at(k); };
  auto d = [&](const char* k) { return parse_double(c.params.at(k)); };
  auto opt = [&](const char* k) { return x.count(k) ? x.at(k) : Tensor(); };
  const std::string r = p("reduction");
  if (c.op == "margin_ranking_loss") {
    return F::margin_ranking_loss(
        x.at("input1"), x.at("input2"), x.at("target"),
        F::MarginRankingLossFuncOptions().margin(d("margin")).reduction(r));
  }
  if (c.op == "multi_margin_loss") {
    return F::multi_margin_loss(x.at("input"), x.at("target"),
                                F::MultiMarginLossFuncOptions()
                                    .p(std::stoll(p("p")))
                                    .margin(d("margin"))
                                    .weight(opt("weight"))
                                    .reduction(r));
  }
  if (c.op == "multilabel_margin_loss") {
    return F::multilabel_margin_loss(x.at("input"), x.at("target"), r);
  }
  if (c.op == "soft_margin_loss") return F::soft_margin_loss(x.at("input"), x.at("target"), r);
  if (c.op == "multilabel_soft_margin_loss") {
    return F::multilabel_soft_margin_loss(
        x.at("input"), x.at("target"),
        F::MultilabelSoftMarginLossFuncOptions().weight(opt("weight")).reduction(r));
  }
  if (c.op == "hinge_embedding_loss") {
    return F::hinge_embedding_loss(
        x.at("input"), x.at("target"),
        F::HingeEmbeddingLossFuncOptions().margin(d("margin")).reduction(r));
  }
  if (c.op == "triplet_margin_loss") {
    return F::triplet_margin_loss(x.at("anchor"), x.at("positive"), x.at("negative"),
                                  F::TripletMarginLossFuncOptions()
                                      .margin(d("margin"))
                                      .p(d("p"))
                                      .eps(d("eps"))
                                      .swap(truth(p("swap")))
                                      .reduction(r));
  }
  if (c.op == "cosine_embedding_loss") {
    return F::cosine_embedding_loss(
        x.at("input1"), x.at("input2"), x.at("target"),
        F::CosineEmbeddingLossFuncOptions().margin(d("margin")).reduction(r));
  }
  if (c.op == "poisson_nll_loss") {
    return F::poisson_nll_loss(x.at("input"), x.at("target"),
                               F::PoissonNLLLossFuncOptions()
                                   .log_input(truth(p("log_input")))
                                   .full(truth(p("full")))
                                   .eps(d("eps"))
                                   .reduction(r));
  }
  if (c.op == "gaussian_nll_loss") {
    return F::gaussian_nll_loss(
        x.at("input"), x.at("target"), x.at("var"),
        F::GaussianNLLLossFuncOptions().full(truth(p("full"))).eps(d("eps")).reduction(r));
  }
  if (c.op == "ctc_loss") {
    return F::ctc_loss(x.at("log_probs"), x.at("targets"), x.at("input_lengths"),
                       x.at("target_lengths"),
                       F::CTCLossFuncOptions()
                           .blank(std::stoll(p("blank")))
                           .reduction(r)
                           .zero_infinity(truth(p("zero_infinity"))));
  }
  ADD_FAILURE() << "unknown op " << c.op;
  return Tensor();
}

/// NaN where torch has NaN, the same infinities, finite values within atol + rtol |want|.
void expect_close(const std::vector<double>& got, const std::vector<double>& want, double atol,
                  double rtol, const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    const double g = got[i], w = want[i];
    if (std::isnan(w)) {
      EXPECT_TRUE(std::isnan(g)) << what << "[" << i << "]: " << g << ", torch nan";
    } else if (std::isinf(w)) {
      EXPECT_EQ(g, w) << what << "[" << i << "]";
    } else {
      EXPECT_NEAR(g, w, atol + rtol * std::abs(w)) << what << "[" << i << "]";
    }
  }
}

std::vector<double> to_values(const Tensor& t) {
  const Tensor c = t.to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

TEST(LossTorch, CasesMatchPyTorch) {
  const std::vector<Case> cases = load_cases();
  ASSERT_GE(cases.size(), 60u);
  std::map<std::string, int> per_op;
  for (const Case& c : cases) {
    SCOPED_TRACE(c.name);
    const DType dt = c.dtype == "float32" ? kFloat32 : kFloat64;
    std::map<std::string, Tensor> x;
    std::vector<std::string> diff;
    for (const auto& [name, t] : c.inputs) {
      if (t.is_floating_point()) {
        x[name] = t.to(dt).requires_grad_(c.grads.count(name) > 0);
        if (c.grads.count(name)) diff.push_back(name);
      } else {
        x[name] = t;
      }
    }
    Tensor out = run_case(c, x);
    ASSERT_TRUE(out.defined());
    EXPECT_EQ(out.dtype(), dt);
    EXPECT_TRUE(out.sizes().equals(IntArrayRef(c.out_shape)))
        << "shape " << out.sizes() << ", torch " << IntArrayRef(c.out_shape);
    const double atol = dt == kFloat64 ? 1e-10 : 2e-5, rtol = dt == kFloat64 ? 1e-9 : 2e-5;
    expect_close(to_values(out), c.out, atol, rtol, c.name + " output");
    std::vector<Tensor> leaves;
    for (const auto& n : diff) leaves.push_back(x[n]);
    if (!leaves.empty()) {
      const std::vector<Tensor> g = autograd::grad({out.sum()}, leaves);
      for (size_t i = 0; i < diff.size(); ++i) {
        expect_close(to_values(g[i]), c.grads.at(diff[i]), atol * 10, rtol * 10,
                     c.name + " grad " + diff[i]);
      }
    }
    ++per_op[c.op];
  }
  EXPECT_EQ(per_op.size(), 11u);  // every loss has cases
}

}  // namespace
}  // namespace ignis
