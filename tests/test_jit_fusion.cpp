// Elementwise fusion (jit::fuse_elementwise) and the fused_elementwise op: programs parsed and
// refused, chains of every fusible op fused and run by the generated kernel and by the
// interpreter equal to eager, training through a fused node, save and load.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdlib>
#include <filesystem>
#include <functional>
#include <string>

#include "call_log.h"
#include "fusion_test_util.h"
#include "ignis/ignis.h"
#include "jit/fused_program.h"
#include "jit/fused_runtime.h"
#include "jit/passes.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

using ignis::testing::Backend;
using ignis::testing::expect_close;
using ignis::testing::uniform;

namespace {

// ---- programs

TEST(FusedProgram, RunsTheChainItSpells) {
  Tensor x = uniform({4, 5}, -2, 2), y = uniform({4, 5}, -2, 2), b = uniform({5}, -1, 1);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    Tensor out = jit::fused_elementwise({x, y, b}, "mul(i0,i1);add(v0,i2,0.5);tanh(v1);mul(v2,3)");
    expect_close(out, tanh(x * y + b * 0.5) * 3, 1e-6, backend);
  }
}

TEST(FusedProgram, RefusesMalformedProgramsNamingTheFault) {
  Tensor x = ones({2});
  auto fails = [&](const std::string& program, int inputs, const std::string& message) {
    std::vector<Tensor> in(static_cast<size_t>(inputs), x);
    EXPECT_THAT(error_of([&] { (void)jit::fused_elementwise(in, program); }), HasSubstr(message));
  };
  fails("exp(i0);frobnicate(v0)", 1, "unknown op 'frobnicate'");
  fails("exp(i1)", 1, "input i1 of a node with 1 input(s)");
  fails("exp(v0)", 1, "value v0 used before it is defined");
  fails("add(i0,i0)", 1, "expected ','");
  fails("add(i0,zebra,1)", 1, "expected a number, got 'zebra'");
  fails("add(i0,1e999,1)", 1, "expected a number, got '1e999'");
  fails("exp(2)", 1, "expected an input (i<k>) or a value (v<j>)");
  fails("dropout(2,0,0.5)", 1, "expected an input (i<k>) or a value (v<j>)");
  fails("softplus(i0,0,20)", 1, "softplus's beta must be nonzero");
  fails("exp(i0) trailing", 1, "expected ';' or the end");
  fails("exp(i0", 1, "expected ')'");
  fails("", 1, "unknown op ''");
  std::string many = "exp(i0)";
  for (int i = 0; i < 256; ++i) many += ";exp(v" + std::to_string(i) + ")";
  fails(many, 1, "more than 256 instructions");
  EXPECT_THAT(
      error_of([&] {
        (void)jit::fused_elementwise({x, ones({2}, kFloat64)}, "add(i0,i1,1)");
      }),
      HasSubstr(
          "fused_elementwise: inputs must all be float32 or all float64 (or bool masks); input 0 "
          "is float32, input 1 is float64"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_elementwise({}, "exp(i0)"); }),
              HasSubstr("fused_elementwise: expected 1 to 64 inputs, got 0"));
}

TEST(FusedProgram, NumbersAndBroadcastOperands) {
  Tensor x = uniform({3, 1}, -2, 2, kFloat64), y = uniform({1, 4}, -2, 2, kFloat64);
  Tensor s = full({}, 0.25, kFloat64);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    Tensor out = jit::fused_elementwise({x, y, s}, "sub(i0,i1,2);maximum(v0,i2);div(v1,-inf)");
    expect_close(out, maximum(x - y * 2, s) / -INFINITY, 0, backend);
  }
}

// A negative zero stays one in generated code (T(-0.0), not the integer T(-0)), and non-finite
// op parameters compile (std::numeric_limits), both ways equal to eager.
TEST(FusedProgram, SignedZerosAndNonFiniteParameters) {
  const Tensor x = tensor({-1.5f, 2.0f, 0.5f, -4.0f});
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_elementwise({x}, "abs(i0);div(v0,-0);neg(v1)"), full({4}, INFINITY), 0,
                 backend);
    expect_close(jit::fused_elementwise({x}, "leaky_relu(i0,inf)"),
                 nn::functional::leaky_relu(x, INFINITY), 0, backend);
    expect_close(jit::fused_elementwise({x}, "leaky_relu(i0,-0)"),
                 nn::functional::leaky_relu(x, -0.0), 0, backend);
    EXPECT_EQ(jit::fusion_backend(), backend) << "no fallback";
  }
}

TEST(FusedProgram, RowColumnAndGeneralBroadcastLayouts) {
  // [6, 7] with a row [7], a column [6, 1], a scalar and a [2, 6, 7] broadcast of the output.
  Tensor x = uniform({6, 7}, -2, 2), row = uniform({7}, -1, 1), col = uniform({6, 1}, -1, 1);
  Tensor s = full({1, 1}, 0.5), big = uniform({2, 6, 7}, -1, 1);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    Tensor out = jit::fused_elementwise({x, row, col, s}, "add(i0,i1,1);mul(v0,i2);sub(v1,i3,1)");
    expect_close(out, (x + row) * col - s, 1e-6, backend);
    Tensor out3 = jit::fused_elementwise({x, big}, "mul(i0,i1);silu(v0)");
    expect_close(out3, silu(x * big), 1e-6, backend);
  }
}

TEST(FusedProgram, SinAndCosOfLargeArgumentsTakeTheExactPath) {
  // float sin/cos beyond |x| = 1e5 take std::sin, as the eager kernels do (vmath's argument
  // reduction loses digits there).
  Tensor x = uniform({64}, 1e5, 1e7);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_elementwise({x}, "mul(i0,1);sin(v0)"), sin(x), 1e-6, backend);
    expect_close(jit::fused_elementwise({x}, "mul(i0,1);cos(v0)"), cos(x), 1e-6, backend);
  }
}

TEST(FusedProgram, RunsOnTheMetaDevice) {
  Tensor x = empty({3, 4}, TensorOptions(kFloat32).device(kMeta));
  Tensor b = empty({4}, TensorOptions(kFloat32).device(kMeta));
  Tensor out = jit::fused_elementwise({x, b}, "add(i0,i1,1);relu(v0)");
  EXPECT_TRUE(out.device().is_meta());
  EXPECT_TRUE(out.sizes().equals({3, 4}));
}

// ---- the pass: every fusible op in a chain, both backends, float32 and float64

// Chains f(x * y + b) for every fusible unary op f (inputs inside every op's domain).
TEST(FuseElementwise, ChainsOfEveryOpEqualEagerWithBothBackends) {
  const std::vector<std::string> unary = {
      "neg",  "abs",   "relu",  "silu",  "sigmoid", "tanh", "exp",  "exp2",   "expm1",     "log",
      "log2", "log10", "log1p", "sqrt",  "rsqrt",   "sin",  "cos",  "tan",    "asin",      "acos",
      "atan", "sinh",  "cosh",  "asinh", "atanh",   "erf",  "erfc", "erfinv", "reciprocal"};
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = uniform({6, 7}, 0.3, 0.9, dt), y = uniform({6, 7}, 0.3, 0.9, dt);
    Tensor b = uniform({7}, 0.0, 0.1, dt);
    for (const std::string& f : unary) {
      auto fn = [&](const std::vector<Tensor>& in) {
        Tensor v = in[0] * in[1] + in[2];
        return std::vector<Tensor>{op::call_boxed(f, {v})[0].get<Tensor>() * 2.0};
      };
      jit::Graph g = jit::trace(fn, {x, y, b});
      const Tensor eager = g.run({x, y, b})[0];
      EXPECT_EQ(jit::fuse_elementwise(g), 1) << f;
      ASSERT_EQ(g.nodes.size(), 1u) << f << "\n" << g.str();
      EXPECT_EQ(g.nodes[0].name(), "fused_elementwise");
      // The interpreter in both dtypes; the compiler in float32 (each program compiles in about
      // a second; float64's generated code is the same template, run by other tests).
      for (const char* backend : {"interpreter", "compiler"}) {
        if (dt == kFloat64 && std::string(backend) == "compiler") continue;
        Backend guard(backend);
        expect_close(g.run({x, y, b})[0], eager, dt == kFloat32 ? 2e-6 : 1e-13,
                     f + " " + backend + " " + std::string(dtype_name(dt)));
      }
    }
  }
}

TEST(FuseElementwise, ParametrisedOpsAndScalarsKeepTheirValues) {
  Tensor x = uniform({5, 8}, -3, 3);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor v = leaky_relu(in[0], 0.2) - in[0] * 1.5;
    v = gelu(v, "tanh") + gelu(in[0]);
    return std::vector<Tensor>{minimum(v / 3.0, in[0]).sub(0.5, 2)};
  };
  jit::Graph g = jit::trace(fn, {x});
  const Tensor eager = g.run({x})[0];
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  EXPECT_EQ(g.nodes.size(), 1u) << g.str();
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(g.run({x})[0], eager, 2e-6, backend);
  }
}

TEST(FuseElementwise, ActivationsWithParametersEqualEagerForwardAndBackward) {
  // Every activation with a functor of its own (elu and its selu and celu, hardtanh and relu6,
  // hardswish, hardsigmoid, mish, log_sigmoid, softplus) and clamp, in a chain: one node, equal to
  // eager at the kinks (-3, 0, 3, the bounds), at NaN and infinities, with both backends; its
  // gradient (clamp's through clamp_backward, bounds included as eager's) and second derivative
  // equal eager's (those of the backward ops without a rule through the ops).
  using Fn = std::function<Tensor(const Tensor&)>;
  struct Case {
    const char* name;
    Fn f;
    const char* fused;  // the op as the program spells it
    bool fused_backward;
  };
  const Case cases[] = {
      {"elu", [](const Tensor& v) { return elu(v, 0.7, 1.2, 0.9); },
       "elu(v0,0.69999999999999996,1.2,0.90000000000000002)", true},
      {"selu", [](const Tensor& v) { return selu(v); },
       "elu(v0,1.6732632423543772,1.0507009873554805,1)", true},
      {"celu", [](const Tensor& v) { return celu(v, 0.5); }, "elu(v0,0.5,1,2)", true},
      {"hardtanh", [](const Tensor& v) { return hardtanh(v, -0.5, 2); }, "hardtanh(v0,-0.5,2)",
       true},
      {"relu6", [](const Tensor& v) { return relu6(v * 2.0); }, "hardtanh(v1,0,6)", true},
      {"hardswish", [](const Tensor& v) { return hardswish(v); }, "hardswish(v0)", true},
      {"hardsigmoid", [](const Tensor& v) { return hardsigmoid(v); }, "hardsigmoid(v0)", true},
      {"mish", [](const Tensor& v) { return mish(v); }, "mish(v0)", true},
      {"log_sigmoid", [](const Tensor& v) { return log_sigmoid(v); }, "log_sigmoid(v0)", true},
      {"softplus", [](const Tensor& v) { return softplus(v, 2, 4); }, "softplus(v0,2,4)", true},
      {"clamp", [](const Tensor& v) { return v.clamp(-0.5, 1.0); }, "clamp(v0,-0.5,1)", true},
      {"clamp_min", [](const Tensor& v) { return v.clamp_min(0.25); }, "clamp_min(v0,0.25)", true},
      {"clamp_max", [](const Tensor& v) { return v.clamp_max(0.25); }, "clamp_max(v0,0.25)", true}};
  const std::vector<double> kinks = {-3, -0.5, 0, 0.25, 1, 2, 3, 6, -4, 4, 0.125, -0.0};
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = cat({tensor(kinks, dt), uniform({20}, -5, 5, dt),
                    tensor(std::vector<double>{NAN, INFINITY, -INFINITY}, dt)})
                   .reshape({5, 7});
    const Tensor y = ones({7}, dt);  // (x * y is x: the kinks stay exact)
    for (const Case& c : cases) {
      auto fn = [&](const std::vector<Tensor>& in) {
        return std::vector<Tensor>{c.f(in[0] * in[1]) * 3.0};
      };
      NoGradGuard ng;
      jit::Graph g = jit::trace(fn, {x, y});
      const Tensor eager = fn({x, y})[0];
      EXPECT_EQ(jit::fuse_elementwise(g), 1) << c.name;
      ASSERT_EQ(g.nodes.size(), 1u) << c.name << "\n" << g.str();
      EXPECT_THAT(g.str(), HasSubstr(c.fused)) << c.name;
      for (const char* backend : {"interpreter", "compiler"}) {
        if (dt == kFloat64 && std::string(backend) == "compiler") continue;
        Backend guard(backend);
        expect_close(g.run({x, y})[0], eager, dt == kFloat32 ? 2e-6 : 1e-14,
                     std::string(c.name) + " " + backend + " " + std::string(dtype_name(dt)));
      }
    }
  }
  // Gradients (float64, finite inputs, the kinks among them: the fused backward ops are eager's,
  // so are their one-sided derivatives there).
  Tensor x = cat({tensor(kinks, kFloat64), uniform({23}, -5, 5, kFloat64)}).reshape({5, 7});
  Tensor y = ones({7}, kFloat64);
  x.requires_grad_(true);
  y.requires_grad_(true);
  const Tensor gy = uniform({5, 7}, -1, 1, kFloat64), gz = uniform({5, 7}, -1, 1, kFloat64);
  for (const Case& c : cases) {
    auto fn = [&](const std::vector<Tensor>& in) {
      return std::vector<Tensor>{c.f(in[0] * in[1]) * 3.0};
    };
    jit::Graph g = jit::trace(fn, {x, y});
    EXPECT_EQ(jit::fuse_elementwise(g), 1) << c.name;
    const Tensor eager = fn({x, y})[0];
    const std::vector<Tensor> ge =
        autograd::grad({eager}, {x, y}, {gy}, std::nullopt, /*create_graph=*/true);
    auto second = [&](const Tensor& first) {  // (none: zeros)
      const Tensor t =
          autograd::grad({first}, {x}, {gz}, std::nullopt, false, /*allow_unused=*/true)[0];
      return t.defined() ? t : zeros_like(x.detach());
    };
    const Tensor gge = second(ge[0]);
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      const std::string what = std::string(c.name) + " " + backend;
      const Tensor out = g.run({x, y})[0];
      EXPECT_EQ(out.grad_fn()->name() == "FusedElementwiseBackward0", c.fused_backward) << what;
      const std::vector<Tensor> gf =
          autograd::grad({out}, {x, y}, {gy}, std::nullopt, /*create_graph=*/true);
      expect_close(gf[0].detach(), ge[0].detach(), 1e-12, what + " d/dx");
      expect_close(gf[1].detach(), ge[1].detach(), 1e-12, what + " d/dy");
      expect_close(second(gf[0]), gge, 1e-11, what + " second derivative");
    }
  }
}

TEST(FuseElementwise, ANumberFirstAndSquareJoinTheChain) {
  // 1 - t (rsub), 2 / x (a number over a tensor) and square: sub and div with the number as
  // their first operand, pow(x, 2); eager's values and (float64) first and second derivatives,
  // through the generated kernel, the interpreter and the ops (the composite, create_graph).
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{(1.0 - in[0].sigmoid()) * (2.0 / in[0]) + in[0].square() * in[1]};
  };
  for (DType dt : {kFloat32, kFloat64}) {
    Tensor x = uniform({4, 6}, 0.5, 2, dt), w = uniform({6}, -1, 1, dt);
    NoGradGuard ng;
    jit::Graph g = jit::trace(fn, {x, w});
    const Tensor eager = fn({x, w})[0];
    EXPECT_EQ(jit::fuse_elementwise(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    for (const char* op : {"sub(1,v", "div(2,i0)", "pow(i0,2)"})
      EXPECT_THAT(g.str(), HasSubstr(op));
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      expect_close(g.run({x, w})[0], eager, dt == kFloat32 ? 2e-6 : 1e-14,
                   std::string(backend) + " " + std::string(dtype_name(dt)));
    }
  }
  Tensor x = uniform({4, 6}, 0.5, 2, kFloat64).requires_grad_(true);
  Tensor w = uniform({6}, -1, 1, kFloat64).requires_grad_(true);
  jit::Graph g = jit::trace(fn, {x, w});
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  const Tensor gy = uniform({4, 6}, -1, 1, kFloat64);
  const Tensor eager = fn({x, w})[0];
  const std::vector<Tensor> ge = autograd::grad({eager}, {x, w}, {gy}, std::nullopt, true);
  const Tensor gge = autograd::grad({ge[0].sum()}, {x})[0];
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor out = g.run({x, w})[0];
    const std::vector<Tensor> gf = autograd::grad({out}, {x, w}, {gy}, std::nullopt, true);
    expect_close(gf[0].detach(), ge[0].detach(), 1e-12, std::string(backend) + " d/dx");
    expect_close(gf[1].detach(), ge[1].detach(), 1e-12, std::string(backend) + " d/dw");
    expect_close(autograd::grad({gf[0].sum()}, {x})[0], gge, 1e-11,
                 std::string(backend) + " second derivative");
  }
  // The text round trip, and the ops one by one (maximum has no derivative rule here, so the
  // node's backward runs its ops: a number first there too).
  const std::string text = "sub(0.5,i0,1);div(3,v0);maximum(v1,i0)";
  EXPECT_EQ(jit::detail::parse_fused_program(text, 1).str(), text);
  Tensor a = uniform({5}, 1, 2, kFloat64).requires_grad_(true);
  const Tensor out = jit::fused_elementwise({a}, text);
  expect_close(out.detach(), maximum(3.0 / (0.5 - a.detach()), a.detach()), 1e-15, "composite");
  out.sum().backward();
  const Tensor ad = a.detach();
  const Tensor d = 3.0 / ((0.5 - ad) * (0.5 - ad));  // d/da of 3 / (0.5 - a)
  expect_close(a.grad(), where(3.0 / (0.5 - ad) > ad, d, ones_like(ad)), 1e-12, "its gradient");
}

TEST(FusedProgram, PowTakesEagersFormForEveryExponent) {
  // The exponents eager's kernel computes another way (x, 1, x*x, x*x*x, sqrt, 1/sqrt, 1/x) and
  // others, over negatives, signed zeros, infinities and NaN: eager's values; then gradients.
  const Tensor x = tensor({-2.5, -1.0, -0.0, 0.0, 1e-3, 0.75, 2.0, 3.5, INFINITY, -INFINITY, NAN});
  for (double e : {2.0, 3.0, 0.5, -0.5, -1.0, 1.0, 0.0, 1.7, -2.0, 4.0}) {
    const std::string program = "pow(i0," + jit::detail::format_number(e) + ")";
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      for (DType dt : {kFloat32, kFloat64}) {
        const Tensor xd = x.to(dt);
        expect_close(jit::fused_elementwise({xd}, program), pow(xd, e), 0,
                     program + " " + backend + " " + std::string(dtype_name(dt)));
      }
    }
    Tensor a = uniform({6}, 0.5, 2.0, kFloat64).requires_grad_(true);
    const Tensor ge = autograd::grad({pow(a, e).sum()}, {a})[0];
    const Tensor gf = autograd::grad({jit::fused_elementwise({a}, program).sum()}, {a})[0];
    expect_close(gf, ge, 0, program + ": gradient");
  }
}

TEST(FusedProgram, ValuesOnePerRowAreComputedOnceAndGiveTheSameResults) {
  // The interpreter computes an instruction whose operands are one value in a row segment (a
  // number, a value per row, values made of those) once per segment: results equal the
  // generated kernel's and the ops', with rows longer than a tile (512), a per-row chain feeding
  // full values, and a result that is itself one value per row (broadcast to the output).
  const Tensor x = uniform({3, 700}, -2, 2, kFloat64), v = uniform({3, 1}, 0.5, 2, kFloat64);
  const Tensor r = rsqrt(v + 1e-5), w = v * v + 1;
  const std::pair<const char*, Tensor> cases[] = {
      {"add(i1,1e-05,1);rsqrt(v0);mul(i0,v1);mul(v2,v1)", x * r * r},
      {"mul(i1,3);sqrt(v0);neg(v1)", (-sqrt(v * 3)).expand({3, 700})},
      {"pow(i1,2);add(v0,1,1);lt(i0,v1);where(v2,v1,i0)", where(x < w, w, x)}};
  for (const auto& [program, want] : cases) {
    for (const char* backend : {"interpreter", "compiler"}) {
      Backend guard(backend);
      // (the generated kernel may contract a product and a sum into one fma)
      expect_close(jit::fused_elementwise({x, v}, program), want,
                   std::string(backend) == "compiler" ? 1e-15 : 0,
                   std::string(program) + " " + backend);
    }
  }
  // Through a reduction's epilogue (an RMS norm: 1 / sqrt(mean + eps) once per row) and the
  // backward programs (gradients of x and of the per-row input).
  const Tensor xg = x.clone().requires_grad_(true), vg = v.clone().requires_grad_(true);
  std::vector<Tensor> got[2];
  for (int b = 0; b < 2; ++b) {
    Backend guard(b == 0 ? "interpreter" : "compiler");
    const Tensor out = jit::fused_reduction({xg, vg}, "mean", 1, "mul(i0,i0)",
                                            "add(i2,1e-06,1);rsqrt(v0);mul(i0,v1);mul(v2,i1)");
    got[b] = autograd::grad({(out * out).sum()}, {xg, vg});
    got[b].push_back(out.detach());
  }
  expect_close(got[0][2], got[1][2], 1e-14, "rms norm: interpreter against the compiler");
  expect_close(got[0][0], got[1][0], 1e-12, "its gradient of x");
  expect_close(got[0][1], got[1][1], 1e-12, "its gradient of the per-row input");
}

TEST(FusedProgram, AddendsJoinTheBackwardKernelOrAreAdded) {
  // fused_input_grads adds an addend to an input's gradient: inside the multi-output kernel for
  // a gradient written at the output's shape (x's), after it for one summed to the input's shape
  // (w's, a repeated row) and when the gradients need history (one program per input).
  const auto p = jit::detail::parsed_program("mul(i0,i1);sin(v0)", 2);
  const Tensor x = uniform({6, 700}, -1, 1, kFloat64), w = uniform({700}, -1, 1, kFloat64);
  const Tensor g = uniform({6, 700}, -1, 1, kFloat64);
  const Tensor ax = uniform({6, 700}, -1, 1, kFloat64), aw = uniform({700}, -1, 1, kFloat64);
  const Tensor c = cos(x * w) * g;
  const Tensor want_x = c * w + ax, want_w = (c * x).sum({0}) + aw;
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const std::vector<Tensor> r =
        jit::detail::fused_input_grads(*p, {x, w, g}, {0, 1}, {}, {ax, aw});
    expect_close(r[0], want_x, 1e-12, std::string("x, in the kernel: ") + backend);
    expect_close(r[1], want_w, 1e-12, std::string("w, summed then added: ") + backend);
  }
  const Tensor xg = x.clone().requires_grad_(true);
  const std::vector<Tensor> h = jit::detail::fused_input_grads(*p, {xg, w, g}, {0}, {}, {ax});
  EXPECT_TRUE(h[0].requires_grad());
  expect_close(h[0].detach(), want_x, 1e-12, "x, with history");
}

TEST(FusedProgram, AZeroDerivativeGivesZerosAsEager) {
  // The result depends on x only through sign (derivative 0): zeros, as eager's backward gives,
  // not "x was not used". Likewise the second derivative of x ** 1 (its backward program holds
  // pow(x, 0)).
  Tensor x = uniform({5}, -2, 2, kFloat64).requires_grad_(true);
  const Tensor zero = zeros({5}, kFloat64);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor g =
        autograd::grad({jit::fused_elementwise({x}, "sign(i0);mul(v0,2)").sum()}, {x})[0];
    expect_close(g, zero, 0, std::string("sign, ") + backend);
    const Tensor g1 = autograd::grad({jit::fused_elementwise({x}, "pow(i0,1)").sum()}, {x}, {},
                                     std::nullopt, /*create_graph=*/true)[0];
    expect_close(g1.detach(), ones({5}, kFloat64), 0, std::string("d/dx x ** 1, ") + backend);
    const Tensor g2 = autograd::grad({g1.sum()}, {x})[0];
    expect_close(g2, zero, 0, std::string("d2/dx2 x ** 1, ") + backend);
  }
  // An input read only by an instruction the result does not use is not used.
  EXPECT_FALSE(jit::detail::parse_fused_program("exp(i1);mul(i0,2)", 2).reads_input(1));
  EXPECT_TRUE(jit::detail::parse_fused_program("exp(i1);mul(i0,2)", 2).reads_input(0));
}

TEST(FuseElementwise, AHandWrittenTanhGeluIsOneNode) {
  // GPT-2's gelu as PyTorch code writes it: 0.5 x (1 + tanh(sqrt(2 / pi) (x + 0.044715 x^3))).
  Tensor x = uniform({16, 64}, -4, 4, kFloat64).requires_grad_(true);
  auto fn = [](const std::vector<Tensor>& in) {
    const Tensor& v = in[0];
    return std::vector<Tensor>{0.5 * v *
                               (1.0 + tanh(std::sqrt(2.0 / M_PI) * (v + 0.044715 * pow(v, 3.0))))};
  };
  jit::Graph g = jit::trace(fn, {x});
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_THAT(g.str(), HasSubstr("pow(i0,3)"));
  const Tensor eager = fn({x})[0];
  const Tensor ge = autograd::grad({(eager * eager).sum()}, {x})[0];
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const Tensor out = g.run({x})[0];
    expect_close(out, eager.detach(), 1e-14, backend);
    expect_close(autograd::grad({(out * out).sum()}, {x})[0], ge, 1e-12, backend);
  }
  expect_close(eager.detach(), gelu(x.detach(), "tanh"), 1e-12, "gelu(x, 'tanh')");
}

TEST(FuseElementwise, KeepsValuesReadOutsideTheChainAndStopsAtOtherOps) {
  Tensor x = uniform({4, 4}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor a = exp(in[0]);              // read twice below: by the chain and by matmul
    Tensor b = sigmoid(a * 2.0) + 1.0;  // a chain of three
    Tensor m = matmul(a, b);            // not elementwise: ends the chain
    return std::vector<Tensor>{relu(m) * 0.5, a};
  };
  jit::Graph g = jit::trace(fn, {x});
  const std::vector<Tensor> eager = g.run({x});
  EXPECT_EQ(jit::fuse_elementwise(g), 2);  // sigmoid(a*2)+1, and relu(m)*0.5
  EXPECT_EQ(g.count("exp"), 1);            // a is a graph output: not folded into the chain
  EXPECT_EQ(g.count("matmul"), 1);
  EXPECT_EQ(g.count("fused_elementwise"), 2);
  const std::vector<Tensor> fused = g.run({x});
  expect_close(fused[0], eager[0], 2e-6, "relu(m) * 0.5");
  expect_close(fused[1], eager[1], 0, "a");
}

TEST(FuseElementwise, NonContiguousInputs) {
  Tensor x = uniform({8, 6}, -1, 1).t(), y = uniform({6, 8}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{tanh(in[0] + in[1]) * in[1]};
  };
  jit::Graph g = jit::trace(fn, {x, y});
  const Tensor eager = g.run({x, y})[0];
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  expect_close(g.run({x, y})[0], eager, 2e-6, "transposed input");
}

TEST(FuseElementwise, TrainingThroughAFusedNodeGivesEagerGradients) {
  Tensor x = uniform({3, 5}, -1, 1, kFloat64).requires_grad_(true);
  Tensor w = uniform({5}, -1, 1, kFloat64).requires_grad_(true);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{sigmoid(in[0] * in[1] + 0.5) * tanh(in[0])};
  };
  jit::Graph g = jit::trace(fn, {x, w});
  fn({x, w})[0].sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone();
  Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  g.run({x2, w2})[0].sum().backward();
  expect_close(x2.grad(), gx, 1e-14, "d/dx");
  expect_close(w2.grad(), gw, 1e-14, "d/dw");
}

// ---- backward programs (jit/fused_autodiff.cpp)

namespace {

std::optional<std::string> backward_of(const std::string& program, int inputs, int k) {
  return jit::detail::fused_backward_program(jit::detail::parse_fused_program(program, inputs), k);
}

using ignis::testing::CallLog;

}  // namespace

TEST(FusedBackward, ProgramsAreTheReverseSweepOfTheChain) {
  // relu from its output (as eager relu's backward), the product rule, only what is needed.
  EXPECT_EQ(backward_of("mul(i0,i1);relu(v0)", 2, 0),
            "mul(i0,i1);relu(v0);threshold_backward(i2,v1,0);mul(v2,i1)");
  EXPECT_EQ(backward_of("mul(i0,i1);relu(v0)", 2, 1),
            "mul(i0,i1);relu(v0);threshold_backward(i2,v1,0);mul(v2,i0)");
  // The floating unary ops through float_unary_ops.def's formulas; alpha scales the gradient.
  EXPECT_EQ(backward_of("tanh(i0)", 1, 0), "tanh(i0);tanh_backward(i1,v0)");
  EXPECT_EQ(backward_of("sub(i0,i1,2);log(v0)", 2, 1), "sub(i0,i1,2);div(i2,v0);mul(v1,-2)");
  // An input used twice sums its two contributions.
  EXPECT_EQ(backward_of("mul(i0,i0)", 1, 0), "mul(i1,i0);mul(i1,i0);add(v0,v1,1)");
  // The result's gradient itself: an instruction of its own.
  EXPECT_EQ(backward_of("add(i0,i1,1)", 2, 0), "mul(i2,1)");
  EXPECT_EQ(backward_of("exp(i0)", 2, 1), "");                   // no dependence: no gradient
  EXPECT_EQ(backward_of("maximum(i0,i1)", 2, 0), std::nullopt);  // no derivative here
  EXPECT_EQ(backward_of("gelu_backward(i0,i1)", 2, 0), std::nullopt);
  // Every backward program parses back (inputs + 1) and round-trips.
  for (const char* prog : {"add(i0,i1,0.5);gelu(v0);mul(v1,i0);silu(v2);div(v3,i1)",
                           "abs(i0);leaky_relu(v0,0.1);gelu_tanh(v1);rsqrt(v2);erf(v3);mul(v4,i1)",
                           "tanh(i0);tanh_backward(i1,v0);sigmoid(v1);sigmoid_backward(v2,i0)"}) {
    for (int k = 0; k < 2; ++k) {
      const std::optional<std::string> b = backward_of(prog, 2, k);
      ASSERT_TRUE(b.has_value()) << prog << " " << k;
      if (!b->empty()) {
        EXPECT_EQ(jit::detail::parse_fused_program(*b, 3).str(), *b);
      }
    }
  }
}

TEST(FusedBackward, TrainingRunsForwardAndBackwardAsFusedKernelsWithEagersGradients) {
  // x [4, 6], a bias b [6] (broadcast: the engine sums its gradient over the rows), c [4, 1].
  const std::string prog =
      "add(i0,i1,1);gelu(v0);mul(v1,i0);silu(v2);div(v3,i2);sub(v4,i1,0.5);abs(v5);"
      "leaky_relu(v6,0.1);tanh(v7);exp(v8)";
  auto eager = [](const Tensor& x, const Tensor& b, const Tensor& c) {
    Tensor v = silu(gelu(x + b) * x) / c - b * 0.5;
    return exp(tanh(leaky_relu(abs(v), 0.1)));
  };
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      SCOPED_TRACE(std::string(backend) + " " + std::string(dtype_name(dt)));
      manual_seed(21);
      Tensor x = uniform({4, 6}, -1, 1, dt).requires_grad_(true);
      Tensor b = uniform({6}, -1, 1, dt).requires_grad_(true);
      Tensor c = uniform({4, 1}, 1, 2, dt).requires_grad_(true);
      Tensor gy = uniform({4, 6}, -1, 1, dt);
      Tensor y = jit::fused_elementwise({x, b, c}, prog);
      ASSERT_TRUE(y.requires_grad());
      EXPECT_EQ(y.grad_fn()->name(), "FusedElementwiseBackward0");
      CallLog log;
      {
        op::InterposerGuard guard(&log);
        y.backward(gy);
      }
      // The backward is one kernel computing the three gradients in one pass: no op call but the
      // engine's sums and reshapes that un-broadcast b and c (none of the chain's backward ops).
      for (const std::string& n : log.names)
        EXPECT_TRUE(n.rfind("sum", 0) == 0 || n == "reshape") << n;
      Tensor x2 = x.detach().requires_grad_(true), b2 = b.detach().requires_grad_(true),
             c2 = c.detach().requires_grad_(true);
      Tensor y2 = eager(x2, b2, c2);
      const double tol = dt == kFloat64 ? 1e-12 : 2e-5;
      expect_close(y.detach(), y2.detach(), tol, "forward");
      y2.backward(gy);
      expect_close(x.grad(), x2.grad(), tol, "d/dx");
      expect_close(b.grad(), b2.grad(), tol, "d/db");
      expect_close(c.grad(), c2.grad(), tol, "d/dc");
    }
  }
}

TEST(FusedBackward, GeneralBroadcastsNonContiguousAndEmptyInputs) {
  // [1, 3, 1] against [2, 3, 4] (materialised for the kernel; the engine sums its gradient back),
  // a transposed input, and an empty batch.
  const std::string prog = "mul(i0,i1);sub(v0,i2,1);tanh(v1);mul(v2,i0)";
  auto eager = [](const Tensor& a, const Tensor& b, const Tensor& c) {
    return tanh(a * b - c) * a;
  };
  for (int64_t n : {2, 0}) {
    Tensor a = uniform({n, 3, 4}, -1, 1, kFloat64).requires_grad_(true);
    Tensor b = uniform({1, 3, 1}, -1, 1, kFloat64).requires_grad_(true);
    Tensor c = uniform({n, 4, 3}, -1, 1, kFloat64).transpose(1, 2).detach().requires_grad_(true);
    Tensor y = jit::fused_elementwise({a, b, c}, prog);
    ASSERT_EQ(y.grad_fn()->name(), "FusedElementwiseBackward0");
    const std::vector<Tensor> g = autograd::grad({y.sum()}, {a, b, c});
    Tensor a2 = a.detach().requires_grad_(true), b2 = b.detach().requires_grad_(true),
           c2 = c.detach().requires_grad_(true);
    const std::vector<Tensor> e = autograd::grad({eager(a2, b2, c2).sum()}, {a2, b2, c2});
    for (size_t k = 0; k < 3; ++k) expect_close(g[k], e[k], 1e-14, "n=" + std::to_string(n));
  }
}

TEST(FusedBackward, RepeatedInputsGradientsAreSummedInTheKernel) {
  // w [33] and b [1, 33] repeat along the rows of x [1000, 33], c [1000, 1] along each row, s
  // (0-d) everywhere: the backward kernel sums their gradients itself (blocks of whole rows,
  // partials added in block order), so the engine sums nothing, and the result is the same bits
  // with one thread or two. Then a scalar alone (no rows: blocks of elements).
  const int threads = get_num_threads();
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    SCOPED_TRACE(backend);
    manual_seed(5);
    Tensor x = uniform({1000, 33}, -1, 1, kFloat64).requires_grad_(true);
    Tensor w = uniform({33}, -1, 1, kFloat64).requires_grad_(true);
    Tensor b = uniform({1, 33}, -1, 1, kFloat64).requires_grad_(true);
    Tensor sc = full({}, 0.7, kFloat64).requires_grad_(true);
    Tensor c = uniform({1000, 1}, -1, 1, kFloat64).requires_grad_(true);
    const Tensor gy = uniform({1000, 33}, -1, 1, kFloat64);
    const std::vector<Tensor> in{x, w, b, sc, c};
    const std::string prog = "mul(i0,i1);add(v0,i2,1);mul(v1,i3);add(v2,i4,1);tanh(v3)";
    std::vector<Tensor> g;
    CallLog log;
    {
      Tensor y = jit::fused_elementwise(in, prog);
      op::InterposerGuard guard(&log);
      g = autograd::grad({y}, in, {gy});
    }
    EXPECT_TRUE(log.names.empty()) << log.names.front();
    for (size_t k = 0; k < in.size(); ++k) EXPECT_TRUE(g[k].sizes().equals(in[k].sizes())) << k;
    std::vector<Tensor> e;
    for (const Tensor& t : in) e.push_back(t.detach().requires_grad_(true));
    const std::vector<Tensor> ge =
        autograd::grad({tanh((e[0] * e[1] + e[2]) * e[3] + e[4])}, e, {gy});
    for (size_t k = 0; k < in.size(); ++k)
      expect_close(g[k], ge[k], 1e-12, "input " + std::to_string(k));
    set_num_threads(1);
    const std::vector<Tensor> one = autograd::grad({jit::fused_elementwise(in, prog)}, in, {gy});
    set_num_threads(threads);
    for (size_t k = 1; k < in.size(); ++k) EXPECT_TRUE(equal(one[k], g[k])) << k;
    // A scalar alone: no rows, blocks of elements.
    const std::vector<Tensor> gs =
        autograd::grad({jit::fused_elementwise({x, sc}, "mul(i0,i1);sin(v0)")}, {x, sc}, {gy});
    const std::vector<Tensor> gse = autograd::grad({sin(e[0] * e[3])}, {e[0], e[3]}, {gy});
    expect_close(gs[0], gse[0], 1e-12, "x, with a scalar");
    expect_close(gs[1], gse[1], 1e-10, "the scalar");
  }
}

TEST(FusedBackward, DoubleBackwardAndOpsWithoutADerivativeFallBackToTheOps) {
  // Double backward: the backward programs are differentiated in turn (tanh_backward here).
  Tensor x = uniform({5}, -1, 1, kFloat64).requires_grad_(true);
  Tensor y = jit::fused_elementwise({x}, "tanh(i0);mul(v0,3)");
  Tensor gx = autograd::grad({y.sum()}, {x}, {}, /*retain_graph=*/true, /*create_graph=*/true)[0];
  Tensor ggx = autograd::grad({gx.sum()}, {x})[0];
  const Tensor t = tanh(x.detach());
  expect_close(gx.detach(), (1 - t * t) * 3, 1e-14, "first");
  expect_close(ggx, (1 - t * t) * t * -6, 1e-14, "second");
  // autograd::grad for some of the inputs: the backward kernel computes only those.
  Tensor u = uniform({4, 3}, -1, 1, kFloat64).requires_grad_(true);
  Tensor w = uniform({3}, -1, 1, kFloat64).requires_grad_(true);
  Tensor z = jit::fused_elementwise({u, w}, "mul(i0,i1);sigmoid(v0)");
  const Tensor s = sigmoid(u.detach() * w.detach());
  expect_close(autograd::grad({z.sum()}, {u})[0], s * (1 - s) * w.detach(), 1e-14, "d/du alone");
  // maximum has no derivative rule: the ops run one by one and record their own backward.
  Tensor a = uniform({3}, -1, 1, kFloat64).requires_grad_(true);
  Tensor m = jit::fused_elementwise({a, x.detach().narrow(0, 0, 3)}, "maximum(i0,i1);exp(v0)");
  EXPECT_NE(m.grad_fn()->name(), "FusedElementwiseBackward0");
  m.sum().backward();
  const Tensor mx = maximum(a.detach(), x.detach().narrow(0, 0, 3));
  expect_close(a.grad(), exp(mx) * (a.detach() > x.detach().narrow(0, 0, 3)).to(kFloat64), 1e-14,
               "through maximum");
}

TEST(FuseElementwise, SavedAndLoadedGraphsKeepTheProgramAndRefuseHostileOnes) {
  Tensor x = uniform({2, 3}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{relu(in[0] * 2.0 + 1.0)};
  };
  jit::Graph g = jit::trace(fn, {x});
  jit::fuse_elementwise(g);
  const std::string json = jit::graph_to_json(g);
  ASSERT_NE(json.find("mul(i0,2);add(v0,1,1);relu(v1)"), std::string::npos) << json;
  jit::Graph back = jit::graph_from_json(json, {});
  expect_close(back.run({x})[0], g.run({x})[0], 0, "reloaded");
  std::string hostile = json;
  hostile.replace(hostile.find("relu(v1)"), 8, "relu(v9)");
  EXPECT_THAT(error_of([&] { (void)jit::graph_from_json(hostile, {}); }),
              HasSubstr("value v9 used before it is defined"));
}

// ---- training dropout inside fused programs

namespace {
Tensor eager_dropout(const Tensor& x, double p) { return nn::functional::dropout(x, p, true); }

/// The next number the default generator gives: equal when two runs drew the same counters.
double next_draw() { return rand({1}, kFloat64).item<double>(); }
}  // namespace

TEST(FusedProgram, TheParsedProgramsAreCachedWithABound) {
  // The same text gives the same parsed program until kProgramCacheSize other programs have
  // been parsed since; then it is parsed again (a process loading many graphs stays bounded).
  const std::string text = "exp(i0);mul(v0,0.125)";
  const auto first = jit::detail::parsed_program(text, 1);
  EXPECT_EQ(jit::detail::parsed_program(text, 1).get(), first.get());
  for (size_t k = 0; k < jit::detail::kProgramCacheSize; ++k)
    (void)jit::detail::parsed_program("mul(i0," + std::to_string(k) + ")", 1);
  const auto again = jit::detail::parsed_program(text, 1);
  EXPECT_NE(again.get(), first.get());
  EXPECT_EQ(again->str(), first->str());
}

TEST(FusedDropout, DrawsEagersMaskAndAdvancesTheGeneratorAsEagerDoes) {
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      SCOPED_TRACE(std::string(backend) + " " + std::string(dtype_name(dt)));
      manual_seed(3);
      const Tensor x = uniform({37, 29}, -2, 2, dt), y = uniform({29}, 0.5, 1.5, dt);
      // Two dropouts on two streams around a product with a broadcast row.
      const std::string prog = "dropout(i0,0,0.3);mul(v0,i1);relu(v1);dropout(v2,1,0.5)";
      manual_seed(11);
      const Tensor fused = jit::fused_elementwise({x, y}, prog);
      const double after_fused = next_draw();
      manual_seed(11);
      const Tensor eager = eager_dropout(relu(eager_dropout(x, 0.3) * y), 0.5);
      const double after_eager = next_draw();
      expect_close(fused, eager, 0, "values");  // bit for bit
      EXPECT_EQ(after_fused, after_eager) << "the generator moved on as far as eager's";
      // Both masks at work: about 0.3 then 0.5 of the elements dropped.
      const double zeros = (fused == 0).to(kFloat64).mean().item<double>();
      EXPECT_GT(zeros, 0.55);
      EXPECT_LT(zeros, 0.85);
    }
  }
}

TEST(FusedDropout, BackwardRegeneratesTheMaskAndGivesEagersGradients) {
  const std::string prog = "mul(i0,i1);dropout(v0,0,0.25);gelu(v1)";
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    SCOPED_TRACE(backend);
    manual_seed(4);
    Tensor x = uniform({16, 33}, -1, 1, kFloat64).requires_grad_(true);
    Tensor w = uniform({33}, -1, 1, kFloat64).requires_grad_(true);
    const Tensor gy = uniform({16, 33}, -1, 1, kFloat64);
    manual_seed(8);
    Tensor y = jit::fused_elementwise({x, w}, prog);
    CallLog log;
    {
      op::InterposerGuard guard(&log);
      y.backward(gy);
    }
    // One fused backward kernel: no dropout, rand or mul among the ops called.
    for (const std::string& n : log.names)
      EXPECT_TRUE(n.rfind("sum", 0) == 0 || n == "reshape") << n;
    Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
    manual_seed(8);
    Tensor y2 = gelu(eager_dropout(x2 * w2, 0.25));
    y2.backward(gy);
    expect_close(y.detach(), y2.detach(), 1e-15, "forward");
    expect_close(x.grad(), x2.grad(), 1e-14, "d/dx");
    expect_close(w.grad(), w2.grad(), 1e-14, "d/dw");
    // Double backward (create_graph: the backward programs' ops, on the same counters).
    Tensor x3 = x.detach().requires_grad_(true);
    manual_seed(8);
    Tensor g1 = autograd::grad({jit::fused_elementwise({x3, w.detach()}, prog).sum()}, {x3}, {},
                               std::nullopt, /*create_graph=*/true)[0];
    Tensor x4 = x.detach().requires_grad_(true);
    manual_seed(8);
    Tensor g2 = autograd::grad({gelu(eager_dropout(x4 * w.detach(), 0.25)).sum()}, {x4}, {},
                               std::nullopt, /*create_graph=*/true)[0];
    expect_close(g1.detach(), g2.detach(), 1e-14, "first derivative with create_graph");
    expect_close(autograd::grad({g1.sum()}, {x3})[0], autograd::grad({g2.sum()}, {x4})[0], 1e-12,
                 "second derivative");
  }
}

TEST(FusedDropout, ProgramsRefuseBadStreamsAndProbabilities) {
  Tensor x = ones({2});
  auto fails = [&](const std::string& program, const std::string& message) {
    EXPECT_THAT(error_of([&] { (void)jit::fused_elementwise({x}, program); }), HasSubstr(message));
  };
  fails("dropout(i0,i0,0.5)", "dropout's stream must be a whole number from 0 to 255");
  fails("dropout(i0,0.5,0.5)", "dropout's stream must be a whole number");
  fails("dropout(i0,256,0.5)", "dropout's stream must be a whole number");
  fails("dropout(i0,nan,0.5)", "dropout's stream must be a whole number");  // (found by make fuzz)
  fails("dropout(i0,-inf,0.5)", "dropout's stream must be a whole number");
  fails("dropout(i0,0,1)", "dropout's probability must be between 0 and 1 (exclusive), got 1");
  fails("dropout(i0,0,0)", "dropout's probability must be between 0 and 1 (exclusive), got 0");
  fails("dropout(i0,0)", "expected ','");
  EXPECT_EQ(jit::detail::parse_fused_program("relu(i0);dropout(v0,2,0.125)", 1).random_streams(),
            3);
}

TEST(FuseElementwise, TrainingDropoutJoinsTheChainAndKeepsEagersMasks) {
  Tensor x = uniform({8, 12}, -1, 1), b = uniform({12}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{eager_dropout(relu(in[0] * 2.0 + in[1]), 0.3) * 0.5};
  };
  jit::Graph g = jit::trace(fn, {x, b});
  EXPECT_EQ(jit::fuse_elementwise(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  const std::string json = jit::graph_to_json(g);
  EXPECT_NE(json.find("dropout(v2,0,0.29999999999999999)"), std::string::npos) << json;
  // A fused node that draws random numbers is not pure: no pass may merge or drop it.
  EXPECT_FALSE(jit::detail::is_pure(g.nodes[0]));
  for (int run = 0; run < 2; ++run) {
    manual_seed(30 + run);
    const Tensor fused = g.run({x, b})[0];
    manual_seed(30 + run);
    expect_close(fused, fn({x, b})[0], 0, "values");
  }
  // Saved and loaded, it draws the same mask.
  jit::Graph back = jit::graph_from_json(json, {});
  manual_seed(9);
  const Tensor a = back.run({x, b})[0];
  manual_seed(9);
  expect_close(a, g.run({x, b})[0], 0, "reloaded");
  // Eval-mode dropout is the identity: removed, not fused as a random op.
  auto eval_fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{nn::functional::dropout(relu(in[0] * 2.0), 0.3, false) + 1.0};
  };
  jit::Graph e = jit::trace(eval_fn, {x});
  jit::eliminate_identities(e);
  jit::fuse_elementwise(e);
  EXPECT_EQ(jit::graph_to_json(e).find("dropout"), std::string::npos);
}

TEST(FuseElementwise, DropoutIsNotFusedPastAnotherRandomOp) {
  // randn_like between the dropout and the chain's end: fusing the dropout into the end would
  // draw its mask after randn_like's numbers, not before as eager does.
  Tensor x = uniform({6, 7}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    Tensor a = eager_dropout(in[0], 0.4);
    Tensor n = randn_like(in[0]);
    return std::vector<Tensor>{relu(a) * 2.0 + n};
  };
  jit::Graph g = jit::trace(fn, {x});
  jit::fuse_elementwise(g);
  manual_seed(12);
  const Tensor fused = g.run({x})[0];
  manual_seed(12);
  expect_close(fused, fn({x})[0], 0, "values, draws in eager's order");
  for (const jit::Node& n : g.nodes) {
    if (n.name() != "fused_elementwise") continue;
    const std::string prog = n.args[1].attr.get<std::string>();
    if (prog.find("dropout") != std::string::npos) {
      EXPECT_EQ(prog.find("add"), std::string::npos) << "fused past randn_like: " << prog;
    }
  }
}

// ---- fused_reduction: a row reduction with a prologue and an epilogue

// The reduction of fused_reduction as the unfused ops.
Tensor reference_reduction(const std::string& kind, const Tensor& x, int64_t dims) {
  if (kind == "softmax") return softmax(x, -1);
  if (kind == "log_softmax") return log_softmax(x, -1);
  std::vector<int64_t> shape(x.sizes().end() - dims, x.sizes().end());
  if (kind == "rms_norm") return nn::functional::rms_norm(x, shape, Tensor(), 1e-5);
  return nn::functional::layer_norm(x, shape);
}

TEST(FusedReduction, EveryReductionWithPrologueAndEpilogueEqualsTheOps) {
  // Rows of 37 (not a multiple of the 16 partial sums) and of 1024; a weight row, a per-row
  // column, a scalar and a full residual.
  for (int64_t cols : {37, 1024}) {
    for (DType dt : {kFloat32, kFloat64}) {
      Tensor x = uniform({6, cols}, -3, 3, dt), s = uniform({cols}, 0.5, 1.5, dt);
      Tensor col = uniform({6, 1}, -1, 1, dt), r = uniform({6, cols}, -1, 1, dt);
      Tensor half = full({}, 0.5, dt);
      for (const std::string kind : {"layer_norm", "softmax", "log_softmax", "rms_norm"}) {
        const Tensor y = reference_reduction(kind, gelu(x * s + col), 1);
        const Tensor expected = y * s + half + r;
        for (const char* backend : {"interpreter", "compiler"}) {
          Backend guard(backend);
          // inputs: x, s, col, half, r; the reduction's result is i5.
          Tensor out = jit::fused_reduction({x, s, col, half, r}, kind, 1,
                                            "mul(i0,i1);add(v0,i2,1);gelu(v1)",
                                            "mul(i5,i1);add(v0,i3,1);add(v1,i4,1)");
          expect_close(out, expected, dt == kFloat32 ? 1e-5 : 1e-12,
                       kind + " " + backend + " " + std::string(dtype_name(dt)) + " cols " +
                           std::to_string(cols));
        }
      }
    }
  }
}

TEST(FusedReduction, WithoutProgramsOverSeveralTrailingDimsAndBroadcastInputs) {
  Tensor x = uniform({3, 4, 5}, -2, 2);
  Tensor big = uniform({2, 3, 4, 5}, -1, 1);  // broadcasts the output to [2, 3, 4, 5]
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_reduction({x}, "layer_norm", 2, "", ""),
                 nn::functional::layer_norm(x, {4, 5}), 1e-5, std::string("dims 2 ") + backend);
    expect_close(jit::fused_reduction({x}, "softmax", 1, "", ""), softmax(x, -1), 1e-6,
                 std::string("bare softmax ") + backend);
    expect_close(jit::fused_reduction({x}, "rms_norm", 2, "", "", 1e-6),
                 nn::functional::rms_norm(x, {4, 5}, Tensor(), 1e-6), 1e-5,
                 std::string("rms_norm dims 2 ") + backend);
    // Input 0 without a prologue is the reduction's input, expanded to the output's shape.
    expect_close(jit::fused_reduction({x, big}, "log_softmax", 1, "", "sub(i2,i1,1)"),
                 log_softmax(x.expand({2, 3, 4, 5}), -1) - big, 1e-5,
                 std::string("broadcast ") + backend);
  }
}

TEST(FusedReduction, TrainingIsOneNodeWithTheOpsGradients) {
  // x, s (a weight row), col (one value per row), r (a residual): the prologue reads x, s and
  // col, the epilogue s, the reduction's result and r, so s gets gradient from both programs.
  const std::string pro = "mul(i0,i1);add(v0,i2,1);gelu(v1)", epi = "mul(i4,i1);add(v0,i3,1)";
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    for (DType dt : {kFloat32, kFloat64}) {
      for (const std::string kind : {"layer_norm", "softmax", "log_softmax", "rms_norm"}) {
        SCOPED_TRACE(kind + " " + backend + " " + std::string(dtype_name(dt)));
        manual_seed(31);
        Tensor x = uniform({5, 37}, -2, 2, dt).requires_grad_(true);
        Tensor s = uniform({37}, 0.5, 1.5, dt).requires_grad_(true);
        Tensor col = uniform({5, 1}, -1, 1, dt).requires_grad_(true);
        Tensor r = uniform({5, 37}, -1, 1, dt).requires_grad_(true);
        const Tensor gy = uniform({5, 37}, -1, 1, dt);
        Tensor y = jit::fused_reduction({x, s, col, r}, kind, 1, pro, epi);
        EXPECT_EQ(y.grad_fn()->name(), "FusedReductionBackward0");
        const std::vector<Tensor> g = autograd::grad({(y * gy).sum()}, {x, s, col, r});
        std::vector<Tensor> e;
        for (const Tensor& t : {x, s, col, r}) e.push_back(t.detach().requires_grad_(true));
        const Tensor y2 = reference_reduction(kind, gelu(e[0] * e[1] + e[2]), 1) * e[1] + e[3];
        const std::vector<Tensor> ge = autograd::grad({(y2 * gy).sum()}, e);
        const double tol = dt == kFloat64 ? 1e-10 : 2e-4;
        expect_close(y.detach(), y2.detach(), tol, "forward");
        const char* names[] = {"d/dx", "d/ds", "d/dcol", "d/dr"};
        for (size_t k = 0; k < 4; ++k) expect_close(g[k], ge[k], tol, names[k]);
      }
    }
  }
}

TEST(FusedReduction, TrainingWithoutProgramsOverSeveralDimsAndDoubleBackward) {
  // Input 0 broadcast to the output (its gradient summed back by the engine), two trailing dims.
  Tensor x = uniform({3, 4, 5}, -2, 2, kFloat64).requires_grad_(true);
  Tensor big = uniform({2, 3, 4, 5}, -1, 1, kFloat64).requires_grad_(true);
  Tensor y = jit::fused_reduction({x, big}, "layer_norm", 2, "", "mul(i2,i1)");
  EXPECT_EQ(y.grad_fn()->name(), "FusedReductionBackward0");
  const std::vector<Tensor> g = autograd::grad({y.sum()}, {x, big});
  Tensor x2 = x.detach().requires_grad_(true), big2 = big.detach().requires_grad_(true);
  const Tensor y2 = nn::functional::layer_norm(x2.expand({2, 3, 4, 5}), {4, 5}) * big2;
  const std::vector<Tensor> ge = autograd::grad({y2.sum()}, {x2, big2});
  expect_close(g[0], ge[0], 1e-10, "d/dx");
  expect_close(g[1], ge[1], 1e-10, "d/dbig");
  // create_graph: the backward's ops record, so a second derivative exists and equals the ops'.
  Tensor z = uniform({4, 6}, -1, 1, kFloat64).requires_grad_(true);
  Tensor w = jit::fused_reduction({z}, "softmax", 1, "tanh(i0)", "");
  Tensor gz = autograd::grad({(w * w).sum()}, {z}, {}, true, true)[0];
  Tensor z2 = z.detach().requires_grad_(true);
  Tensor w2 = softmax(tanh(z2), -1);
  Tensor gz2 = autograd::grad({(w2 * w2).sum()}, {z2}, {}, true, true)[0];
  expect_close(gz.detach(), gz2.detach(), 1e-12, "first");
  expect_close(autograd::grad({gz.sum()}, {z})[0], autograd::grad({gz2.sum()}, {z2})[0], 1e-10,
               "second");
}

TEST(FusedReduction, DropoutInThePrologueAndEpilogueDrawsEagersMasks) {
  // BERT's layer_norm(x * w, dropped) and attention's dropout(softmax(...)): a dropout in each
  // program, drawing as eager's dropouts in the same order would (the prologue's first), in
  // inference (the kernel, the interpreter) and in training (the node's backward regenerates
  // both masks), with eager's gradients.
  const std::string pro = "mul(i0,i1);dropout(v0,0,0.2)", epi = "dropout(i3,0,0.3);add(v0,i2,1)";
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend use(backend);
    for (const std::string kind : {"layer_norm", "softmax", "log_softmax", "rms_norm"}) {
      SCOPED_TRACE(kind + " " + backend);
      manual_seed(41);
      Tensor x = uniform({6, 40}, -2, 2, kFloat64).requires_grad_(true);
      Tensor w = uniform({40}, 0.5, 1.5, kFloat64).requires_grad_(true);
      const Tensor r = uniform({6, 40}, -1, 1, kFloat64), gy = uniform({6, 40}, -1, 1, kFloat64);
      auto eager = [&](const Tensor& xe, const Tensor& we) {
        return eager_dropout(reference_reduction(kind, eager_dropout(xe * we, 0.2), 1), 0.3) + r;
      };
      {
        NoGradGuard ng;
        manual_seed(7);
        const Tensor fused = jit::fused_reduction({x, w, r}, kind, 1, pro, epi);
        const double after_fused = next_draw();
        manual_seed(7);
        const Tensor expected = eager(x, w);
        EXPECT_EQ(after_fused, next_draw()) << "the generator moved on as far as eager's";
        expect_close(fused, expected, 1e-12, "inference");
      }
      manual_seed(8);
      Tensor y = jit::fused_reduction({x, w, r}, kind, 1, pro, epi);
      EXPECT_EQ(y.grad_fn()->name(), "FusedReductionBackward0");
      const std::vector<Tensor> g = autograd::grad({y}, {x, w}, {gy});
      Tensor x2 = x.detach().requires_grad_(true), w2 = w.detach().requires_grad_(true);
      manual_seed(8);
      const Tensor y2 = eager(x2, w2);
      const std::vector<Tensor> ge = autograd::grad({y2}, {x2, w2}, {gy});
      expect_close(y.detach(), y2.detach(), 1e-12, "training forward");
      expect_close(g[0], ge[0], 1e-10, "d/dx");
      expect_close(g[1], ge[1], 1e-10, "d/dw");
    }
  }
}

TEST(FusedReduction, RefusesWhatItCannotRunNamingTheFault) {
  Tensor x = ones({2, 3});
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "variance", 1, "", ""); }),
              HasSubstr("fused_reduction: unknown reduction 'variance' (expected layer_norm, "
                        "rms_norm, softmax, log_softmax, or sum, mean, amax, amin alone or as a "
                        "chain separated by commas, such as 'amax,sum')"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "softmax", 2, "", ""); }),
              HasSubstr("fused_reduction: softmax over 2 trailing dims of an output of shape "
                        "[2, 3] (layer_norm, rms_norm and the statistics take 1 to 2, softmax and "
                        "log_softmax 1)"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "layer_norm", 3, "", ""); }),
              HasSubstr("fused_reduction: layer_norm over 3 trailing dims"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "layer_norm", 1, "", "exp(i2)"); }),
              HasSubstr("input i2 of a node with 2 input(s)"));
  EXPECT_THAT(error_of([&] { (void)jit::fused_reduction({x}, "layer_norm", 1, "exp(i1)", ""); }),
              HasSubstr("input i1 of a node with 1 input(s)"));
  EXPECT_THAT(error_of([&] {
                (void)jit::fused_reduction({x, ones({3}, kFloat64)}, "softmax", 1, "", "");
              }),
              HasSubstr("fused_reduction: inputs must all be float32 or all float64"));
  Tensor m = empty({4, 5}, TensorOptions(kFloat32).device(kMeta));
  Tensor out = jit::fused_reduction({m}, "layer_norm", 1, "exp(i0)", "mul(i1,2)");
  EXPECT_TRUE(out.device().is_meta());
  EXPECT_TRUE(out.sizes().equals({4, 5}));
}

TEST(FuseReductions, LayerNormWithItsProloguesEpilogueAndResidualBecomesOneNode) {
  // A transformer block's tail: layer_norm(gelu(h * a + c)) * 2 + residual; fuse_elementwise
  // first makes the prologue one node, then fuse_reductions takes it, the layer norm (with its
  // weight and bias) and the epilogue.
  manual_seed(21);
  Tensor h = uniform({8, 64}, -2, 2), res = uniform({8, 64}, -1, 1);
  Tensor a = uniform({64}, 0.5, 1.5), c = uniform({64}, -0.5, 0.5);
  Tensor gamma = uniform({64}, 0.5, 1.5), beta = uniform({64}, -0.5, 0.5);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor t = gelu(in[0] * a + c);
    Tensor y = nn::functional::layer_norm(t, {64}, gamma, beta, 1e-6);
    return std::vector<Tensor>{y * 2.0 + in[1]};
  };
  jit::Graph g = jit::trace(fn, {h, res}, {{"a", a}, {"c", c}, {"gamma", gamma}, {"beta", beta}});
  NoGradGuard ng;
  const Tensor eager = fn({h, res})[0];
  EXPECT_EQ(jit::fuse_elementwise(g), 2);  // the prologue chain and the epilogue chain
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_EQ(g.nodes[0].name(), "fused_reduction");
  EXPECT_THAT(g.str(), HasSubstr("reduction='layer_norm', dims=1, prologue='mul(i0,i1);"
                                 "add(v0,i2,1);gelu(v1)', epilogue='mul(i6,i3);add(v0,i4,1);"
                                 "mul(v1,2);add(v2,i5,1)', eps=1e-06"));
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(g.run({h, res})[0], eager, 1e-5, backend);
  }
  EXPECT_EQ(jit::fuse_reductions(g), 0);
}

TEST(FuseReductions, RmsNormWithItsWeightAndResidualBecomesOneNode) {
  // rms_norm(x + res, [32], w) * 2 + res, eps left out (float32's epsilon): one fused node whose
  // epilogue holds the weight, the scale and the residual; equal to eager with both backends.
  Tensor x = uniform({6, 32}, -2, 2), res = uniform({6, 32}, -1, 1), w = uniform({32}, 0.5, 1.5);
  auto fn = [&](const std::vector<Tensor>& in) {
    const Tensor h = in[0] + in[1];
    return std::vector<Tensor>{nn::functional::rms_norm(h, {32}, w) * 2.0 + in[1]};
  };
  jit::Graph g = jit::trace(fn, {x, res}, {{"w", w}});
  const Tensor expected = fn({x, res})[0];
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  ASSERT_EQ(g.nodes.size(), 1u) << g.str();
  EXPECT_THAT(g.str(), HasSubstr("reduction='rms_norm', dims=1, prologue='add(i0,i1,1)'"));
  EXPECT_THAT(g.str(), HasSubstr("eps=1.19209e-07"));  // (printed to 6 digits)
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(g.run({x, res})[0], expected, 1e-5, backend);
  }
  // Training through the node: the ops' gradients (its composite).
  Tensor xg = x.detach().requires_grad_(true);
  g.run({xg, res})[0].sum().backward();
  Tensor xe = x.detach().requires_grad_(true);
  fn({xe, res})[0].sum().backward();
  expect_close(xg.grad(), xe.grad(), 1e-5, "d/dx");
}

TEST(FuseReductions, SingleOpsAroundASoftmaxWithoutFuseElementwise) {
  // Attention scores: softmax(s * scale + mask) * v-like gate; single ops on both sides.
  Tensor s = uniform({4, 3, 10}, -3, 3), mask = uniform({10}, -1, 0);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor p = softmax(in[0] + mask, -1);
    return std::vector<Tensor>{log_softmax(exp(p), 2), softmax(in[0], -1)};
  };
  jit::Graph g = jit::trace(fn, {s}, {{"mask", mask}});
  NoGradGuard ng;
  const std::vector<Tensor> eager = fn({s});
  // softmax(add) takes the add as its prologue and exp as its epilogue; log_softmax (dim 2, the
  // last) then reads the fused node, and has no epilogue (a graph output): it stays, as does the
  // bare softmax.
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  EXPECT_EQ(g.count("fused_reduction"), 1);
  EXPECT_EQ(g.count("log_softmax.int"), 1);
  EXPECT_EQ(g.count("softmax.int"), 1);
  EXPECT_THAT(g.str(), HasSubstr("reduction='softmax', dims=1, prologue='add(i0,i1,1)', "
                                 "epilogue='exp(i2)'"));
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    const std::vector<Tensor> out = g.run({s});
    expect_close(out[0], eager[0], 1e-6, backend);
    expect_close(out[1], eager[1], 0, backend);
  }
}

TEST(FuseReductions, StopsWhereValuesAreReadElsewhere) {
  Tensor x = uniform({5, 16}, -1, 1);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor t = tanh(in[0]);                          // read twice: not a prologue
    Tensor y = nn::functional::layer_norm(t, {16});  // a graph output: no epilogue
    Tensor z = softmax(in[0] * 2.0, 0);              // not over the last dim: kept
    return std::vector<Tensor>{y, relu(y) + t, z};
  };
  jit::Graph g = jit::trace(fn, {x});
  NoGradGuard ng;
  const std::vector<Tensor> eager = fn({x});
  EXPECT_EQ(jit::fuse_reductions(g), 1);  // the layer norm alone (its composite is many passes)
  EXPECT_EQ(g.count("tanh"), 1);
  EXPECT_EQ(g.count("relu"), 1);
  EXPECT_EQ(g.count("softmax.int"), 1);
  EXPECT_THAT(g.str(), HasSubstr("reduction='layer_norm', dims=1, prologue='', epilogue=''"));
  const std::vector<Tensor> out = g.run({x});
  for (size_t i = 0; i < out.size(); ++i) expect_close(out[i], eager[i], 1e-5, std::to_string(i));
}

TEST(FuseReductions, TrainingThroughAFusedNodeGivesEagerGradients) {
  Tensor x = uniform({4, 9}, -1, 1, kFloat64).requires_grad_(true);
  Tensor w = uniform({9}, 0.5, 1.5, kFloat64).requires_grad_(true);
  Tensor b = uniform({9}, -0.5, 0.5, kFloat64).requires_grad_(true);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor y = nn::functional::layer_norm(sigmoid(in[0]), {9}, w, b);
    return std::vector<Tensor>{log_softmax(y * in[0], -1) + in[0]};
  };
  jit::Graph g = jit::trace(fn, {x}, {{"w", w}, {"b", b}});
  Tensor out = fn({x})[0];
  (out * out).sum().backward();
  const Tensor gx = x.grad().clone(), gw = w.grad().clone(), gb = b.grad().clone();
  x.grad().zero_();
  w.grad().zero_();
  b.grad().zero_();
  // layer_norm(sigmoid(x)) * w + b, then * x: its epilogue; log_softmax stays (its input is the
  // fused node's output, not an elementwise op), then takes + x as its own epilogue.
  EXPECT_EQ(jit::fuse_reductions(g), 2);
  EXPECT_EQ(g.count("fused_reduction"), 2) << g.str();
  Tensor fused = g.run({x})[0];
  (fused * fused).sum().backward();
  expect_close(x.grad(), gx, 1e-13, "d/dx");
  expect_close(w.grad(), gw, 1e-13, "d/dw");
  expect_close(b.grad(), gb, 1e-13, "d/db");
}

TEST(FuseReductions, TrainingDropoutJoinsThePrologueAndEpilogueWithEagersMasks) {
  // A post-LN transformer's layer_norm(x + dropout(h)) and attention's dropout(softmax(s)):
  // each one fused_reduction drawing eager's masks, in eager's order, forward and backward.
  Tensor h = uniform({4, 16}, -1, 1, kFloat64).requires_grad_(true);
  Tensor x = uniform({4, 16}, -1, 1, kFloat64).requires_grad_(true);
  Tensor s = uniform({4, 16}, -2, 2, kFloat64).requires_grad_(true);
  Tensor w = uniform({16}, 0.5, 1.5, kFloat64).requires_grad_(true);
  auto fn = [&](const std::vector<Tensor>& in) {
    Tensor a = nn::functional::layer_norm(in[1] + nn::functional::dropout(in[0], 0.1, true), {16},
                                          w, Tensor());
    Tensor p = nn::functional::dropout(softmax(in[2], -1), 0.2, true);
    return std::vector<Tensor>{a, p};
  };
  jit::Graph g = jit::trace(fn, {h, x, s}, {{"w", w}});
  jit::fuse_elementwise(g);
  EXPECT_EQ(jit::fuse_reductions(g), 2);
  EXPECT_EQ(g.count("fused_reduction"), 2) << g.str();
  EXPECT_EQ(g.count("dropout"), 0) << g.str();
  EXPECT_TRUE(jit::detail::is_random(g.nodes[0]) && jit::detail::is_random(g.nodes[1])) << g.str();
  EXPECT_EQ(jit::eliminate_common_subexpressions(g), 0);  // random nodes are never merged
  const Tensor ga = uniform({4, 16}, -1, 1, kFloat64), gp = uniform({4, 16}, -1, 1, kFloat64);
  std::vector<Tensor> ge, gf;
  for (bool fused : {false, true}) {
    manual_seed(12);
    const std::vector<Tensor> out = fused ? g.run({h, x, s}) : fn({h, x, s});
    (fused ? gf : ge) = autograd::grad(out, {h, x, s, w}, {ga, gp});
    if (fused) {
      manual_seed(12);
      const std::vector<Tensor> eager = fn({h, x, s});
      expect_close(out[0].detach(), eager[0].detach(), 1e-13, "layer_norm forward");
      expect_close(out[1].detach(), eager[1].detach(), 1e-13, "softmax forward");
    }
  }
  for (size_t k = 0; k < 4; ++k) expect_close(gf[k], ge[k], 1e-12, "grad " + std::to_string(k));
  {  // saved and loaded, the nodes draw the same masks
    const jit::Graph back = jit::graph_from_json(jit::graph_to_json(g), {{"w", w}});
    NoGradGuard ng;
    manual_seed(13);
    const std::vector<Tensor> a = g.run({h, x, s});
    manual_seed(13);
    const std::vector<Tensor> b = back.run({h, x, s});
    expect_close(a[0], b[0], 0, "reloaded layer_norm");
    expect_close(a[1], b[1], 0, "reloaded softmax");
  }
  // Another random op between the dropout (the prologue) and the node's place (the epilogue's
  // add): fused, the dropout would draw after it.
  auto between = [&](const std::vector<Tensor>& in) {
    Tensor d = nn::functional::dropout(in[0], 0.1, true);
    Tensor noise = rand_like(in[1]);
    return std::vector<Tensor>{nn::functional::layer_norm(d, {16}) + noise};
  };
  jit::Graph g2 = jit::trace(between, {h, x});
  EXPECT_EQ(jit::fuse_reductions(g2), 0) << g2.str();
  // Without the dropout the same graph fuses.
  auto plain = [&](const std::vector<Tensor>& in) {
    Tensor noise = rand_like(in[1]);
    return std::vector<Tensor>{nn::functional::layer_norm(in[0] * 2.0, {16}) + noise};
  };
  jit::Graph g3 = jit::trace(plain, {h, x});
  EXPECT_EQ(jit::fuse_reductions(g3), 1) << g3.str();
}

TEST(FuseReductions, SavedAndLoadedGraphsKeepTheProgramsAndRefuseHostileOnes) {
  Tensor x = uniform({3, 8}, -1, 1);
  auto fn = [](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{softmax(in[0] * 3.0, -1) * 2.0};
  };
  jit::Graph g = jit::trace(fn, {x});
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  const std::string json = jit::graph_to_json(g);
  ASSERT_NE(json.find("\"mul(i1,2)\""), std::string::npos) << json;
  jit::Graph back = jit::graph_from_json(json, {});
  NoGradGuard ng;
  expect_close(back.run({x})[0], g.run({x})[0], 0, "reloaded");
  std::string hostile = json;
  hostile.replace(hostile.find("\"mul(i1,2)\""), 11, "\"mul(i7,2)\"");
  EXPECT_THAT(error_of([&] { (void)jit::graph_from_json(hostile, {}); }),
              HasSubstr("input i7 of a node with 2 input(s)"));
}

TEST(FuseReductions, WithoutACompilerTheInterpreterRunsTheFusedNode) {
  setenv("IGNIS_JIT_CXX", "/nonexistent/ignis-no-such-compiler", 1);
  Tensor x = uniform({4, 33}, -2, 2), r = uniform({4, 33}, -1, 1);
  // A program no other test compiles, so that this process tries the (missing) compiler now.
  const std::string epilogue = "add(i2,i1,0.375)";
  {
    Backend guard("compiler");
    EXPECT_THAT(error_of([&] {
                  (void)jit::fused_reduction({x, r}, "layer_norm", 1, "", epilogue, 1e-3);
                }),
                HasSubstr("fused_reduction: the compiler backend was asked for, but compiling a "
                          "fused kernel with '/nonexistent/ignis-no-such-compiler' failed"));
  }
  Tensor out = jit::fused_reduction({x, r}, "layer_norm", 1, "", epilogue, 1e-3);
  unsetenv("IGNIS_JIT_CXX");
  expect_close(out, nn::functional::layer_norm(x, {33}, Tensor(), Tensor(), 1e-3) + r * 0.375, 1e-5,
               "interpreted");
}

TEST(FuseReductions, FrozenLinearGeluLayerNormResidualBlockIsTwoNodesEqualToEager) {
  // The block of `ignis bench jit_block`, at 32 rows: freeze makes it linear_pointwise (oneDNN's
  // matmul with a GELU post-op) and one fused_reduction (layer norm, affine part, residual).
  manual_seed(31);
  const int64_t cols = 64;
  Tensor x = uniform({32, cols}, -1, 1), w = uniform({cols, cols}, -0.125, 0.125);
  Tensor b = uniform({cols}, -0.1, 0.1), gamma = uniform({cols}, 0.5, 1.5);
  Tensor beta = uniform({cols}, -0.5, 0.5);
  auto block = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        nn::functional::layer_norm(gelu(linear(in[0], w, b)), {cols}, gamma, beta) + in[0]};
  };
  NoGradGuard ng;
  jit::Graph g = jit::trace(block, {x}, {{"w", w}, {"b", b}, {"gamma", gamma}, {"beta", beta}});
  const Tensor eager = block({x})[0];
  jit::freeze(g);
  ASSERT_EQ(g.nodes.size(), 2u) << g.str();
  EXPECT_EQ(g.nodes[0].name(), "linear_pointwise");
  EXPECT_EQ(g.nodes[1].name(), "fused_reduction");
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(g.run({x})[0], eager, 1e-5, backend);
  }
}

// ---- the compiler: cache on disk, failures

TEST(FusionCompiler, KernelsAreCachedOnDiskByTheirSource) {
  const std::filesystem::path dir =
      std::filesystem::temp_directory_path() / ("ignis-jit-test-" + std::to_string(getpid()));
  std::filesystem::remove_all(dir);
  setenv("IGNIS_JIT_CACHE", dir.c_str(), 1);
  {
    Backend guard("compiler");
    Tensor x = uniform({3}, -1, 1);
    // A program no other test uses, so that this process compiles it now.
    Tensor out = jit::fused_elementwise({x}, "mul(i0,1.125);exp(v0);add(v1,0.0625,1)");
    expect_close(out, exp(x * 1.125) + 0.0625, 1e-6, "compiled");
  }
  unsetenv("IGNIS_JIT_CACHE");
  int objects = 0;
  for (const auto& e : std::filesystem::directory_iterator(dir)) {
    EXPECT_EQ(e.path().extension(), ".so") << e.path();  // no sources or logs left behind
    ++objects;
  }
  EXPECT_EQ(objects, 1);
  std::filesystem::remove_all(dir);
}

TEST(FusionCompiler, WithoutACompilerAutoInterpretsAndCompilerFails) {
  setenv("IGNIS_JIT_CXX", "/nonexistent/ignis-no-such-compiler", 1);
  Tensor x = uniform({4}, -1, 1);
  const std::string program = "mul(i0,0.75);sigmoid(v0);neg(v1)";
  {
    Backend guard("compiler");
    EXPECT_THAT(error_of([&] { (void)jit::fused_elementwise({x}, program); }),
                HasSubstr("fused_elementwise: the compiler backend was asked for, but compiling "
                          "a fused kernel with '/nonexistent/ignis-no-such-compiler' failed"));
  }
  Tensor out = jit::fused_elementwise({x}, program);  // auto: the interpreter
  expect_close(out, -sigmoid(x * 0.75), 1e-6, "interpreted");
  EXPECT_NE(jit::fusion_backend().find("auto (interpreter: compiling a fused kernel with"),
            std::string::npos)
      << jit::fusion_backend();
  unsetenv("IGNIS_JIT_CXX");
  EXPECT_THAT(error_of([&] { (void)jit::set_fusion_backend("gpu"); }),
              HasSubstr("jit::set_fusion_backend: unknown backend 'gpu' (expected auto, "
                        "compiler or interpreter)"));
}

}  // namespace
