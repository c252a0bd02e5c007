// The fast paths of the MLP workloads against float64 references: the small-M matrix kernels
// (1 to 4 rows; dot form for k-contiguous B, axpy form for n-contiguous B, packed A, fallback
// layouts), the linear op's own graph node (forward with the bias in the gemm, backward with
// grad_w written as g^T x), and cross-entropy with class indices (the one-pass target check and
// the weightless path next to the weighted and ignore_index ones); float32, float64 and
// bfloat16, with contiguous, transposed and strided operands.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cmath>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using autograd::gradcheck;
using autograd::gradgradcheck;
using autograd::variable_list;
using ::testing::HasSubstr;

struct ThreadGuard {
  int saved = get_num_threads();
  ~ThreadGuard() { set_num_threads(saved); }
};

// alpha * a @ b + beta * c in float64 loops, and the sum of |terms| per element (for the error
// bound of a float product).
struct Ref {
  std::vector<double> value, scale;
};
Ref reference(const Tensor& a, const Tensor& b, const Tensor& c, double alpha, double beta) {
  const std::vector<double> av = vals(a), bv = vals(b);
  const std::vector<double> cv = c.defined() ? vals(c) : std::vector<double>();
  const int64_t M = a.size(0), K = a.size(1), N = b.size(1);
  Ref r{std::vector<double>(static_cast<size_t>(M * N)), std::vector<double>(M * N)};
  for (int64_t i = 0; i < M; ++i) {
    for (int64_t j = 0; j < N; ++j) {
      double s = 0, sa = 0;
      for (int64_t k = 0; k < K; ++k) {
        s += av[i * K + k] * bv[k * N + j];
        sa += std::abs(av[i * K + k] * bv[k * N + j]);
      }
      const double cij = cv.empty() ? 0 : cv[cv.size() == static_cast<size_t>(N) ? j : i * N + j];
      r.value[i * N + j] = alpha * s + beta * cij;
      r.scale[i * N + j] = std::abs(alpha) * sa + std::abs(beta * cij);
    }
  }
  return r;
}

// |got - want| <= eps * scale (+ a tiny absolute floor) for every element.
void expect_close(const Tensor& got, const Ref& want, double eps, const std::string& what) {
  const std::vector<double> g = vals(got);
  ASSERT_EQ(g.size(), want.value.size()) << what;
  for (size_t i = 0; i < g.size(); ++i) {
    ASSERT_LE(std::abs(g[i] - want.value[i]), eps * want.scale[i] + 1e-12)
        << what << " element " << i << ": got " << g[i] << ", want " << want.value[i];
  }
}

double eps_of(DType dt) { return dt == kFloat64 ? 1e-13 : dt == kFloat32 ? 2e-6 : 2e-2; }

// The layouts an operand [r, c] can come in.
enum class Layout { kContiguous, kTransposed, kStrided };
const char* name(Layout l) {
  return l == Layout::kContiguous   ? "contiguous"
         : l == Layout::kTransposed ? "transposed"
                                    : "strided";
}
Tensor make(int64_t r, int64_t c, Layout l, DType dt) {
  switch (l) {
    case Layout::kContiguous: return randn({r, c}).to(dt);
    case Layout::kTransposed: return randn({c, r}).to(dt).t();
    default:  // every other column of a wider matrix: neither dim contiguous
      return randn({r, 2 * c}).to(dt).slice(1, 0, std::nullopt, 2);
  }
}

TEST(SmallM, AllRowCountsLayoutsAndDtypes) {
  manual_seed(11);
  const int64_t Ns[] = {1, 3, 8, 17, 64, 67, 130};
  const int64_t Ks[] = {1, 5, 16, 33, 100};
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (int64_t M : {1, 2, 3, 4, 5}) {
      for (int64_t N : Ns) {
        for (int64_t K : Ks) {
          for (Layout la : {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
            for (Layout lb : {Layout::kContiguous, Layout::kTransposed, Layout::kStrided}) {
              const Tensor a = make(M, K, la, dt), b = make(K, N, lb, dt);
              const std::string what = std::string(dtype_name(dt)) + " M=" + std::to_string(M) +
                                       " N=" + std::to_string(N) + " K=" + std::to_string(K) +
                                       " a " + name(la) + " b " + name(lb);
              expect_close(mm(a, b), reference(a, b, Tensor(), 1, 0), eps_of(dt), what);
            }
          }
        }
      }
    }
  }
}

TEST(SmallM, AlphaBetaAndBias) {
  manual_seed(12);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    for (int64_t M : {1, 2, 4}) {
      const Tensor a = randn({M, 37}).to(dt), b = randn({29, 37}).to(dt).t();
      const Tensor c = randn({M, 29}).to(dt), row = randn({29}).to(dt);
      expect_close(addmm(c, a, b, 0.5, -2.0), reference(a, b, c, -2.0, 0.5), eps_of(dt),
                   "addmm " + std::string(dtype_name(dt)));
      expect_close(addmm(row, a, b), reference(a, b, row, 1, 1), eps_of(dt),
                   "addmm bias row " + std::string(dtype_name(dt)));
    }
  }
}

TEST(SmallM, ParallelColumnsMatchOneThread) {
  // Products large enough to split their columns over threads give the same bits as one thread:
  // float32 one row (the dot kernel), float64 three rows (dot and axpy kernels).
  ThreadGuard tg;
  manual_seed(13);
  const Tensor x = randn({1, 1024}), w = randn({700, 1024}), bias = randn({700});
  const Tensor x64 = randn({3, 1024}, kFloat64), w64 = randn({700, 1024}, kFloat64);
  const Tensor w64_kn = w64.t().contiguous();
  set_num_threads(1);
  const std::vector<double> one = vals(linear(x, w, bias));
  const std::vector<double> dot64 = vals(mm(x64, w64.t())), axpy64 = vals(mm(x64, w64_kn));
  set_num_threads(2);
  EXPECT_EQ(vals(linear(x, w, bias)), one);
  EXPECT_EQ(vals(mm(x64, w64.t())), dot64);
  EXPECT_EQ(vals(mm(x64, w64_kn)), axpy64);
  expect_close(linear(x, w, bias), reference(x, w.t(), bias, 1, 1), 2e-6, "parallel linear");
  expect_close(mm(x64, w64_kn), reference(x64, w64_kn, Tensor(), 1, 0), 1e-13, "parallel axpy");
}

TEST(SmallM, ExpandedAndBatched) {
  manual_seed(14);
  // Stride-0 rows and a batch of small products.
  const Tensor row = randn({1, 9}).expand({3, 9}), b = randn({9, 20});
  expect_close(mm(row, b), reference(row, b, Tensor(), 1, 0), 2e-6, "expanded rows");
  const Tensor a3 = randn({6, 2, 9}), b3 = randn({6, 20, 9}).transpose(1, 2);
  const Tensor r = bmm(a3, b3);
  for (int64_t i = 0; i < 6; ++i) {
    expect_close(r[i], reference(a3[i], b3[i], Tensor(), 1, 0), 2e-6, "bmm batch");
  }
}

// ---- linear: its own graph node

// Gradients of sum(linear(x, w, b) * gy) computed by hand in float64.
struct LinearGrads {
  std::vector<double> gx, gw, gb;
};
LinearGrads linear_grads(const Tensor& x2, const Tensor& w, const Tensor& gy2) {
  const std::vector<double> xv = vals(x2), wv = vals(w), gv = vals(gy2);
  const int64_t R = x2.size(0), I = x2.size(1), O = w.size(0);
  LinearGrads g{std::vector<double>(R * I), std::vector<double>(O * I), std::vector<double>(O)};
  for (int64_t r = 0; r < R; ++r) {
    for (int64_t o = 0; o < O; ++o) {
      const double gy = gv[r * O + o];
      g.gb[o] += gy;
      for (int64_t i = 0; i < I; ++i) {
        g.gx[r * I + i] += gy * wv[o * I + i];
        g.gw[o * I + i] += gy * xv[r * I + i];
      }
    }
  }
  return g;
}

void expect_near_all(const std::vector<double>& got, const std::vector<double>& want, double tol,
                     const std::string& what) {
  ASSERT_EQ(got.size(), want.size()) << what;
  for (size_t i = 0; i < got.size(); ++i) {
    ASSERT_NEAR(got[i], want[i], tol * (1 + std::abs(want[i]))) << what << " element " << i;
  }
}

TEST(Linear, ForwardAndBackwardAgainstFloat64) {
  manual_seed(21);
  for (DType dt : {kFloat32, kFloat64, kBFloat16}) {
    const double tol = dt == kFloat64 ? 1e-12 : dt == kFloat32 ? 1e-5 : 5e-2;
    for (int64_t rows : {1, 3, 128}) {
      for (bool transposed_x : {false, true}) {
        Tensor x = transposed_x ? randn({20, rows}).to(dt).t() : randn({rows, 20}).to(dt);
        x = x.detach().requires_grad_(true);
        const Tensor w = (randn({7, 20}) * 0.3).to(dt).requires_grad_(true);
        const Tensor b = randn({7}).to(dt).requires_grad_(true);
        const Tensor gy = randn({rows, 7}).to(dt);
        const Tensor y = linear(x, w, b);
        const std::string what = std::string(dtype_name(dt)) + " rows=" + std::to_string(rows) +
                                 (transposed_x ? " x^T" : "");
        expect_close(y, reference(x, w.t(), b, 1, 1), eps_of(dt), what);
        (y * gy).sum().backward();
        const LinearGrads want = linear_grads(x, w, gy);
        expect_near_all(vals(x.grad()), want.gx, tol, what + " grad x");
        expect_near_all(vals(w.grad()), want.gw, tol, what + " grad w");
        expect_near_all(vals(b.grad()), want.gb, tol * 10, what + " grad b");
        // The weight's gradient comes out contiguous [out, in], as the optimizers want it.
        EXPECT_TRUE(w.grad().is_contiguous()) << what;
        EXPECT_EQ(w.grad().sizes().vec(), (std::vector<int64_t>{7, 20})) << what;
      }
    }
  }
}

TEST(Linear, BatchedInputScalarBiasAndNoBias) {
  manual_seed(22);
  const Tensor x = randn({2, 3, 5}, kFloat64).requires_grad_(true);
  const Tensor w = randn({4, 5}, kFloat64).requires_grad_(true);
  const Tensor b1 = randn({1}, kFloat64).requires_grad_(true);
  const Tensor gy = randn({2, 3, 4}, kFloat64);
  const Tensor y = linear(x, w, b1);
  ASSERT_EQ(y.sizes().vec(), (std::vector<int64_t>{2, 3, 4}));
  (y * gy).sum().backward();
  const Tensor x2 = x.detach().reshape({6, 5}), g2 = gy.reshape({6, 4});
  const LinearGrads want = linear_grads(x2, w.detach(), g2);
  double gsum = 0;
  for (double v : want.gb) gsum += v;
  expect_near_all(vals(x.grad()), want.gx, 1e-12, "grad x");
  expect_near_all(vals(w.grad()), want.gw, 1e-12, "grad w");
  ASSERT_EQ(b1.grad().sizes().vec(), (std::vector<int64_t>{1}));
  EXPECT_NEAR(b1.grad().item<double>(), gsum, 1e-12);
  // A 0-d bias and a strided (non-contiguous) bias row.
  const Tensor b0 = full({}, 0.25, TensorOptions(kFloat64).requires_grad(true));
  linear(x, w, b0).sum().backward();
  EXPECT_EQ(b0.grad().dim(), 0);
  EXPECT_NEAR(b0.grad().item<double>(), 2 * 3 * 4, 1e-12);
  const Tensor bs = randn({8}, kFloat64).slice(0, 0, std::nullopt, 2);  // [4], stride 2
  ASSERT_FALSE(bs.is_contiguous());
  const Tensor ys = linear(x.detach(), w.detach(), bs);
  const std::vector<double> yv = vals(ys), y0 = vals(linear(x.detach(), w.detach())),
                            bv = vals(bs);
  for (size_t i = 0; i < yv.size(); ++i) EXPECT_NEAR(yv[i], y0[i] + bv[i % 4], 1e-12);
  // No bias; only the weight needs a gradient (x is not saved for nothing).
  const Tensor xc = randn({3, 5}, kFloat64);
  const Tensor w2 = randn({4, 5}, kFloat64).requires_grad_(true);
  linear(xc, w2).sum().backward();
  const LinearGrads want2 = linear_grads(xc, w2.detach(), ones({3, 4}, kFloat64));
  expect_near_all(vals(w2.grad()), want2.gw, 1e-12, "grad w, no bias");
}

TEST(Linear, GradcheckAndGradgradcheck) {
  manual_seed(23);
  const Tensor x = randn({3, 4}, kFloat64).requires_grad_(true);
  const Tensor w = randn({5, 4}, kFloat64).requires_grad_(true);
  const Tensor b = randn({5}, kFloat64).requires_grad_(true);
  auto f = [](const variable_list& in) { return variable_list{linear(in[0], in[1], in[2])}; };
  EXPECT_TRUE(gradcheck(f, {x, w, b}));
  EXPECT_TRUE(gradgradcheck(f, {x, w, b}));
  // Batched input through the same node.
  const Tensor x3 = randn({2, 2, 4}, kFloat64).requires_grad_(true);
  EXPECT_TRUE(gradcheck(f, {x3, w, b}));
}

TEST(Linear, Errors) {
  EXPECT_THAT(error_of([] {
                linear(ones({2, 3}), ones({4, 3}), ones({4}, kFloat64));
              }),
              HasSubstr("linear: expected the bias to have the dtype and device of the input "
                        "(float32, cpu), but got float64, cpu"));
  EXPECT_THAT(error_of([] {
                linear(ones({2, 3}), ones({4, 3}, kFloat64));
              }),
              HasSubstr("linear: expected both tensors to have the same dtype, but got float32 "
                        "and float64"));
}

// ---- cross_entropy with class indices

// Per-sample -w[t] * log_softmax(x)[t] in float64 loops, and the weights (0 where ignored).
struct CeRef {
  std::vector<double> loss, weight;
};
CeRef ce_reference(const Tensor& x, const std::vector<int64_t>& t, const std::vector<double>& w,
                   int64_t ignore) {
  const std::vector<double> xv = vals(x);
  const int64_t N = x.size(0), C = x.size(1);
  CeRef r;
  for (int64_t i = 0; i < N; ++i) {
    if (t[i] == ignore) {
      r.loss.push_back(0);
      r.weight.push_back(0);
      continue;
    }
    double m = -1e300, s = 0;
    for (int64_t c = 0; c < C; ++c) m = std::max(m, xv[i * C + c]);
    for (int64_t c = 0; c < C; ++c) s += std::exp(xv[i * C + c] - m);
    const double wi = w.empty() ? 1.0 : w[t[i]];
    r.loss.push_back(-wi * (xv[i * C + t[i]] - m - std::log(s)));
    r.weight.push_back(wi);
  }
  return r;
}

TEST(CrossEntropy, ReductionsIgnoreIndexAndWeights) {
  manual_seed(31);
  namespace F = nn::functional;
  for (DType dt : {kFloat32, kFloat64}) {
    const double tol = dt == kFloat64 ? 1e-12 : 1e-5;
    const Tensor x = (randn({6, 5}) * 3).to(dt);
    const std::vector<int64_t> tv = {4, 0, 2, 2, 1, 3};
    const Tensor t = tensor(tv);
    CeRef r = ce_reference(x, tv, {}, -100);
    double sum = 0;
    for (double v : r.loss) sum += v;
    EXPECT_NEAR(F::cross_entropy(x, t).item<double>(), sum / 6, tol);
    EXPECT_NEAR(F::cross_entropy(x, t, Tensor(), -100, "sum").item<double>(), sum, tol * 6);
    expect_near_all(vals(F::cross_entropy(x, t, Tensor(), -100, "none")), r.loss, tol, "none");
    EXPECT_NEAR(F::nll_loss(log_softmax(x, 1), t).item<double>(), sum / 6, tol);
    // An ignored target: excluded from the sum and the count.
    const std::vector<int64_t> ti = {4, -100, 2, 2, -100, 3};
    r = ce_reference(x, ti, {}, -100);
    sum = 0;
    for (double v : r.loss) sum += v;
    EXPECT_NEAR(F::cross_entropy(x, tensor(ti)).item<double>(), sum / 4, tol);
    // Class weights: the mean divides by the weights of the targets.
    const std::vector<double> w = {0.5, 1, 2, 1.5, 3};
    r = ce_reference(x, tv, w, -100);
    double wsum = 0;
    sum = 0;
    for (size_t i = 0; i < r.loss.size(); ++i) {
      sum += r.loss[i];
      wsum += r.weight[i];
    }
    EXPECT_NEAR(F::cross_entropy(x, t, tensor(w, dt)).item<double>(), sum / wsum, tol);
  }
  // Unbatched input: one sample of C logits, a 0-d target.
  const Tensor x1 = tensor(std::vector<double>{1.0, -2.0, 0.5}, kFloat64);
  const double lse = std::log(std::exp(1.0) + std::exp(-2.0) + std::exp(0.5));
  EXPECT_NEAR(F::cross_entropy(x1, tensor(std::vector<int64_t>{2}).reshape({})).item<double>(),
              lse - 0.5, 1e-12);
}

TEST(CrossEntropy, GradientsAndSpatialTargets) {
  manual_seed(32);
  namespace F = nn::functional;
  const Tensor x = randn({4, 3}, kFloat64).requires_grad_(true);
  const Tensor t = tensor(std::vector<int64_t>{2, 0, 1, 2});
  F::cross_entropy(x, t).backward();
  // d/dx mean(-log_softmax(x)[t]) = (softmax(x) - onehot(t)) / N.
  const std::vector<double> xv = vals(x), g = vals(x.grad());
  for (int64_t i = 0; i < 4; ++i) {
    double s = 0;
    for (int64_t c = 0; c < 3; ++c) s += std::exp(xv[i * 3 + c]);
    for (int64_t c = 0; c < 3; ++c) {
      const double want = (std::exp(xv[i * 3 + c]) / s - (c == t[i].item<int64_t>())) / 4;
      EXPECT_NEAR(g[i * 3 + c], want, 1e-12) << i << "," << c;
    }
  }
  auto f = [t](const variable_list& in) { return variable_list{F::cross_entropy(in[0], t)}; };
  EXPECT_TRUE(gradcheck(f, {x}));
  EXPECT_TRUE(gradgradcheck(f, {x}));
  // [N, C, d] logits with [N, d] targets: the same as moving C last.
  const Tensor x3 = randn({2, 3, 4}, kFloat64);
  const Tensor t3 = tensor(std::vector<int64_t>{0, 1, 2, 1, 2, 2, 0, 0}).reshape({2, 4});
  const Tensor flat = x3.permute({0, 2, 1}).reshape({8, 3});
  EXPECT_NEAR(F::cross_entropy(x3, t3).item<double>(),
              F::cross_entropy(flat, t3.reshape({8})).item<double>(), 1e-12);
}

TEST(CrossEntropy, Errors) {
  namespace F = nn::functional;
  EXPECT_THAT(error_of([] {
                F::cross_entropy(ones({2, 3}), tensor(std::vector<int64_t>{1, 3}));
              }),
              HasSubstr("cross_entropy: target 3 is out of bounds for 3 classes"));
  EXPECT_THAT(error_of([] {
                F::cross_entropy(ones({2, 3}), tensor(std::vector<int64_t>{-1, 0}));
              }),
              HasSubstr("cross_entropy: target -1 is out of bounds for 3 classes"));
  EXPECT_THAT(error_of([] {
                F::nll_loss(ones({2, 3}), tensor(std::vector<int64_t>{0, 5}));
              }),
              HasSubstr("nll_loss: target 5 is out of bounds for 3 classes"));
  EXPECT_THAT(error_of([] {
                F::cross_entropy(ones({2, 3}), tensor(std::vector<int64_t>{0}));
              }),
              HasSubstr("cross_entropy: target of shape [1] does not match input of shape [2, 3]"));
}

}  // namespace
}  // namespace ignis
