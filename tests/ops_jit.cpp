// Op table entries of the fused ops that graph mode's passes produce (src/jit/fused_conv.cpp,
// fused_elementwise.cpp, fused_linear.cpp, fused_reduction.cpp), and graph mode checked against
// eager over every entry of the table.
// The float32 samples of the same shape run the fused oneDNN kernel; float64 (gradchecks),
// bfloat16, broadcast, grouped and meta samples run the composite.
#include <gtest/gtest.h>

#include <algorithm>
#include <cmath>
#include <map>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;

Tensor n(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
Tensor params(std::vector<int64_t> v) { return tensor(v); }
std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}
IntArrayRef two(const std::vector<int64_t>& p, size_t i) { return IntArrayRef(p.data() + i, 2); }

// The activations of linear_pointwise and conv2d_pointwise, by index.
const char* const kActivations[] = {"none", "relu", "gelu", "gelu_tanh", "silu"};

double activate(int act, double v) {
  switch (act) {
    case 1: return std::max(v, 0.0);
    case 2: return 0.5 * v * (1 + std::erf(v / std::sqrt(2.0)));
    case 3: {
      const double k = std::sqrt(2.0 / M_PI);
      return 0.5 * v * (1 + std::tanh(k * (v + 0.044715 * v * v * v)));
    }
    case 4: return v / (1 + std::exp(-v));
    default: return v;
  }
}

// act(c + other) (add_first) or act(c) + other, c = b[o] + sum_{c, kh, kw} x[n, c, i s - p + kh d,
// j s - p + kw d] w[o, c, kh, kw], other (or none) broadcast to the output.
// params: [sh, sw, ph, pw, dh, dw, groups]
Tensor ref_conv_pointwise(const Inputs& in, int act, bool add_first) {
  const auto p = ints(in[4]);
  const Tensor &x = in[0], &w = in[1], &b = in[2];
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3), G = p[6];
  const int64_t OH = (H + 2 * p[2] - p[4] * (KH - 1) - 1) / p[0] + 1;
  const int64_t OW = (W + 2 * p[3] - p[5] * (KW - 1) - 1) / p[1] + 1;
  const std::vector<double> xv = values(x), wv = values(w);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(O, 0.0);
  const std::vector<double> ov =
      in[3].defined() ? values(in[3].expand({N, O, OH, OW}).contiguous())
                      : std::vector<double>(static_cast<size_t>(N * O * OH * OW), 0.0);
  std::vector<double> y(static_cast<size_t>(N * O * OH * OW));
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < OH; ++i)
        for (int64_t j = 0; j < OW; ++j) {
          double acc = bv[o];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t h = i * p[0] - p[2] + kh * p[4], ww = j * p[1] - p[3] + kw * p[5];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const int64_t ch = (o / (O / G)) * Cg + ci;
                acc +=
                    xv[((nn * C + ch) * H + h) * W + ww] * wv[((o * Cg + ci) * KH + kh) * KW + kw];
              }
          const size_t at = static_cast<size_t>(((nn * O + o) * OH + i) * OW + j);
          y[at] = add_first ? activate(act, acc + ov[at]) : activate(act, acc) + ov[at];
        }
  return from_values(y, {N, O, OH, OW});
}

Tensor ref_conv_add_relu(const Inputs& in) { return ref_conv_pointwise(in, 1, true); }

/// The fused convolutions' dtypes and tolerances (the last arguments are host parameters).
OpInfo conv_tolerances(OpInfo o) {
  o.dtypes = {kFloat32, kFloat64, kBFloat16};
  o.host_params = {-1};
  o.atol32 = 1e-4;
  o.rtol32 = 1e-4;
  o.atol_bf16 = 8e-2;
  return o;
}

OpInfo conv_add_relu_entry() {
  OpInfo o;
  o.name = "conv2d_add_relu";
  o.fn = [](const Inputs& x) {
    const auto p = ints(x[4]);
    return conv2d_add_relu(x[0], x[1], x[2], x[3], two(p, 0), two(p, 2), two(p, 4), p[6]);
  };
  o.ref = ref_conv_add_relu;
  o.samples = [] {
    const Tensor none;
    return std::vector<OpSample>{
        {"batch 2, padding 1",
         {n({2, 2, 4, 4}, 1), n({3, 2, 3, 3}, 2), n({3}, 3), n({2, 3, 4, 4}, 4),
          params({1, 1, 1, 1, 1, 1, 1})}},
        {"stride 2, no bias",
         {n({1, 2, 5, 6}, 5), n({2, 2, 3, 3}, 6), none, n({1, 2, 2, 2}, 7),
          params({2, 2, 0, 0, 1, 1, 1})}},
        {"channels-last",
         {n({1, 5, 4, 3}, 8).permute({0, 3, 1, 2}), n({2, 3, 3, 3}, 9), n({2}, 10),
          n({1, 3, 2, 2}, 11).permute({0, 3, 1, 2}), params({2, 2, 1, 1, 1, 1, 1})}},
        {"other non-contiguous",
         {n({1, 2, 4, 4}, 12), n({2, 2, 1, 1}, 13), n({2}, 14),
          make_noncontiguous({1, 2, 4, 4}, 15), params({1, 1, 0, 0, 1, 1, 1})}},
        {"other broadcast",
         {n({1, 2, 4, 4}, 16), n({3, 2, 3, 3}, 17), n({3}, 18), n({3, 1, 1}, 19),
          params({1, 1, 1, 1, 1, 1, 1})}},
        {"groups 2, dilation 2",
         {n({1, 4, 6, 6}, 20), n({4, 2, 3, 3}, 21), n({4}, 22), n({1, 4, 2, 2}, 23),
          params({1, 1, 0, 0, 2, 2, 2})}},
        {"empty batch",
         {n({0, 2, 5, 5}, 24), n({3, 2, 3, 3}, 25), n({3}, 26), n({0, 3, 3, 3}, 27),
          params({1, 1, 0, 0, 1, 1, 1})}},
    };
  };
  return conv_tolerances(o);
}

IGNIS_OP_INFO(conv_add_relu_entry());

// conv2d_pointwise (fuse_conv_pointwise's node): act(conv + other) with add_first, else
// act(conv) + other. params: conv_add_relu's, then the activation's index and add_first.
OpInfo conv_pointwise_entry() {
  OpInfo o;
  o.name = "conv2d_pointwise";
  o.fn = [](const Inputs& x) {
    const auto p = ints(x[4]);
    return jit::conv2d_pointwise(x[0], x[1], x[2], x[3], two(p, 0), two(p, 2), two(p, 4), p[6],
                                 kActivations[p[7]], p[8] != 0);
  };
  o.ref = [](const Inputs& x) {
    const auto p = ints(x[4]);
    return ref_conv_pointwise(x, static_cast<int>(p[7]), p[8] != 0);
  };
  o.samples = [] {
    const Tensor none;
    return std::vector<OpSample>{
        {"silu, residual first, padding 1",
         {n({2, 2, 4, 4}, 61), n({3, 2, 3, 3}, 62), n({3}, 63), n({2, 3, 4, 4}, 64),
          params({1, 1, 1, 1, 1, 1, 1, 4, 1})}},
        {"gelu, no residual, stride 2, no bias",
         {n({1, 2, 5, 6}, 65), n({2, 2, 3, 3}, 66), none, none,
          params({2, 2, 0, 0, 1, 1, 1, 2, 0})}},
        {"gelu_tanh, residual last, channels-last",
         {n({1, 5, 4, 3}, 67).permute({0, 3, 1, 2}), n({2, 3, 3, 3}, 68), n({2}, 69),
          n({1, 3, 2, 2}, 70).permute({0, 3, 1, 2}), params({2, 2, 1, 1, 1, 1, 1, 3, 0})}},
        {"relu, residual last non-contiguous",
         {n({1, 2, 4, 4}, 71), n({2, 2, 1, 1}, 72), n({2}, 73),
          make_noncontiguous({1, 2, 4, 4}, 74), params({1, 1, 0, 0, 1, 1, 1, 1, 0})}},
        {"no activation, residual broadcast",
         {n({1, 2, 4, 4}, 75), n({3, 2, 3, 3}, 76), n({3}, 77), n({3, 1, 1}, 78),
          params({1, 1, 1, 1, 1, 1, 1, 0, 0})}},
        {"silu first, groups 2, dilation 2",
         {n({1, 4, 6, 6}, 79), n({4, 2, 3, 3}, 80), n({4}, 81), n({1, 4, 2, 2}, 82),
          params({1, 1, 0, 0, 2, 2, 2, 4, 1})}},
        {"empty batch",
         {n({0, 2, 5, 5}, 83), n({3, 2, 3, 3}, 84), n({3}, 85), n({0, 3, 3, 3}, 86),
          params({1, 1, 0, 0, 1, 1, 1, 2, 1})}},
    };
  };
  return conv_tolerances(o);
}

IGNIS_OP_INFO(conv_pointwise_entry());

// fused_elementwise (the elementwise fusion pass's node): a program over broadcasting inputs.
// Float32 and float64 run the generated kernel (or the interpreter without a compiler);
// gradchecks and gradgradchecks its backward programs.
IGNIS_OP_INFO(OpInfo{
    .name = "fused_elementwise",
    .fn =
        [](const Inputs& in) {
          return jit::fused_elementwise(in,
                                        "mul(i0,i1);add(v0,i2,0.5);tanh(v1);sub(v2,i0,2);"
                                        "mul(v3,1.5);sigmoid(v4)");
        },
    .ref =
        [](const Inputs& in) {
          return ref_elementwise(in, [](const std::vector<double>& v) {
            return 1 / (1 + std::exp(-1.5 * (std::tanh(v[0] * v[1] + 0.5 * v[2]) - 2 * v[0])));
          });
        },
    .samples = [] { return elementwise_samples(3); },
});

// fused_elementwise through the activations with functors of their own and parameters: the
// forward ops, their backward ops in the backward programs (gradcheck), and the second
// derivatives (gradgradcheck: the backward ops of hardtanh, hardswish and clamp have rules, the
// others fall back to the ops).
IGNIS_OP_INFO(OpInfo{
    .name = "fused_elementwise activations",
    .fn =
        [](const Inputs& in) {
          return jit::fused_elementwise(
              in,
              "mul(i0,i1);elu(v0,0.69999999999999996,1.2,0.90000000000000002);add(v1,i0,1);"
              "hardswish(v2);softplus(v3,2,4);sub(v4,i1,1);mish(v5);log_sigmoid(v6);add(v7,i0,1);"
              "hardsigmoid(v8);mul(v9,4);hardtanh(v10,-0.5,1.5);clamp_min(v11,-0.25)");
        },
    .ref =
        [](const Inputs& in) {
          return ref_elementwise(in, [](const std::vector<double>& v) {
            auto clamp = [](double x, double lo, double hi) {
              return std::min(std::max(x, lo), hi);
            };
            const double a = v[0] * v[1];
            double t = a > 0 ? 1.2 * a : 0.7 * 1.2 * std::expm1(0.9 * a);
            t += v[0];
            t = t * clamp(t + 3, 0, 6) / 6;
            t = 2 * t > 4 ? t : std::log1p(std::exp(2 * t)) / 2;
            t -= v[1];
            t = t * std::tanh(std::log1p(std::exp(t)));
            t = std::min(t, 0.0) - std::log1p(std::exp(-std::abs(t)));
            t += v[0];
            t = clamp(t + 3, 0, 6) / 6 * 4;
            return std::max(clamp(t, -0.5, 1.5), -0.25);
          });
        },
    .samples = [] { return elementwise_samples(2); },
});

// fused_elementwise with masks: comparisons and logical ops made in the program, a bool input
// (a mask, read as 1 or 0), where with tensor and number branches (masked_fill's form). Inputs
// x, y (float) and m (bool): t = x > y ? 1.5 x : y, then -2.5 where m, then t where y < 0.25
// and not m, else 0.75, squared (for a second derivative); gradchecks differentiate x and y.
IGNIS_OP_INFO(OpInfo{
    .name = "fused_elementwise masks",
    .fn =
        [](const Inputs& in) {
          return jit::fused_elementwise(in,
                                        "gt(i0,i1);mul(i0,1.5);where(v0,v1,i1);where(i2,-2.5,v2);"
                                        "lt(i1,0.25);logical_not(i2);logical_and(v4,v5);"
                                        "where(v6,v3,0.75);mul(v7,v7)");
        },
    .ref =
        [](const Inputs& in) {
          return ref_elementwise(in, [](const std::vector<double>& v) {
            const double x = v[0], y = v[1];
            const bool m = v[2] != 0;
            double t = x > y ? 1.5 * x : y;
            if (m) t = -2.5;
            const double u = y < 0.25 && !m ? t : 0.75;
            return u * u;
          });
        },
    .samples =
        [] {
          auto mask = [](IntArrayRef shape, uint64_t seed) {
            return make_input(shape, seed, -1, 1) > 0.3;
          };
          return std::vector<OpSample>{
              {"same shape", {n({3, 5}, 91), n({3, 5}, 92), mask({3, 5}, 93)}},
              {"mask broadcast over rows", {n({4, 6}, 94), n({4, 6}, 95), mask({6}, 96)}},
              {"mask per row", {n({4, 6}, 97), n({1, 6}, 98), mask({4, 1}, 99)}},
              {"0-d mask, 0-d y", {n({2, 3}, 100), n({}, 101), mask({}, 102)}},
              {"general broadcast", {n({2, 1, 4}, 103), n({3, 1}, 104), mask({2, 3, 1}, 105)}},
              {"non-contiguous",
               {make_noncontiguous({3, 4}, 106), n({4, 3}, 107).t(), mask({4, 3}, 108).t()}},
              {"empty", {n({0, 4}, 109), n({1, 4}, 110), mask({0, 4}, 111)}},
          };
        },
    .grad_inputs = {0, 1},
});

// linear_pointwise (fuse_linear_pointwise's node): activation(x w^T + b) + other, or
// activation(x w^T + b + other). Inputs: x, w, b (or none), other (or none), and the host
// parameters: the activation's index (none, relu, gelu, gelu_tanh, silu) and add_first (0 when
// left out). Float32 samples of 8 rows or more with `other` of the output's shape
// (or none) run one oneDNN matmul with post-ops (bfloat16 ones too, on CPUs with native
// bfloat16); float64, gradchecks, fewer rows and broadcast residuals the ops one by one.
Tensor ref_linear_pointwise(const Inputs& in) {
  const Tensor &x = in[0], &w = in[1], &b = in[2], &other = in[3];
  const auto p = ints(in[4]);
  const int act = static_cast<int>(p[0]);
  const bool add_first = p.size() > 1 && p[1] != 0;
  const int64_t K = w.size(1), N = w.size(0), M = x.numel() / K;
  Shape out_shape(x.sizes().begin(), x.sizes().end() - 1);
  out_shape.push_back(N);
  const std::vector<double> xv = values(x), wv = values(w);
  const std::vector<double> bv = b.defined() ? values(b) : std::vector<double>(N, 0.0);
  const std::vector<double> ov = other.defined() ? values(other.expand(out_shape).contiguous())
                                                 : std::vector<double>(M * N, 0.0);
  std::vector<double> y(static_cast<size_t>(M * N));
  for (int64_t m = 0; m < M; ++m)
    for (int64_t n = 0; n < N; ++n) {
      double acc = bv[n];
      for (int64_t k = 0; k < K; ++k) acc += xv[m * K + k] * wv[n * K + k];
      y[m * N + n] =
          add_first ? activate(act, acc + ov[m * N + n]) : activate(act, acc) + ov[m * N + n];
    }
  return from_values(y, out_shape);
}

IGNIS_OP_INFO(OpInfo{
    .name = "linear_pointwise",
    .fn =
        [](const Inputs& x) {
          const auto p = ints(x[4]);
          return jit::linear_pointwise(x[0], x[1], x[2], x[3], kActivations[p[0]],
                                       p.size() > 1 && p[1] != 0);
        },
    .ref = ref_linear_pointwise,
    .samples =
        [] {
          const Tensor none;
          return std::vector<OpSample>{
              {"gelu, residual",
               {n({9, 4}, 31), n({5, 4}, 32), n({5}, 33), n({9, 5}, 34), params({2})}},
              {"silu, 3-d input, no bias",
               {n({2, 5, 4}, 35), n({5, 4}, 36), none, none, params({4})}},
              {"relu, residual",
               {n({12, 3}, 37), n({2, 3}, 38), n({2}, 39), n({12, 2}, 40), params({1})}},
              {"gelu_tanh, 2 rows (the composite)",
               {n({2, 6}, 41), n({3, 6}, 42), n({3}, 43), none, params({3})}},
              {"no activation, residual non-contiguous",
               {n({8, 4}, 44), n({2, 4}, 45), n({2}, 46), make_noncontiguous({8, 2}, 47),
                params({0})}},
              {"residual broadcast", {n({3, 4}, 48), n({2, 4}, 49), none, n({2}, 50), params({2})}},
              {"empty rows", {n({0, 4}, 51), n({3, 4}, 52), n({3}, 53), none, params({4})}},
              {"gelu of the sum (add first)",
               {n({10, 4}, 54), n({5, 4}, 55), n({5}, 56), n({10, 5}, 57), params({2, 1})}},
              {"relu of the sum, broadcast residual, no bias",
               {n({3, 4}, 58), n({2, 4}, 59), none, n({2}, 60), params({1, 1})}},
          };
        },
    .dtypes = {kFloat32, kFloat64, kBFloat16},
    .atol32 = 1e-4,
    .rtol32 = 1e-4,
    .atol_bf16 = 5e-2,
    .host_params = {-1},
});

// fused_reduction (fuse_reductions' node): over rows of the last dim, t = tanh(x * s), the
// reduction of t (a host parameter: layer_norm, softmax, log_softmax, rms_norm), then y * s + r.
const char* const kReductions[] = {"layer_norm", "softmax", "log_softmax", "rms_norm"};

Tensor ref_fused_reduction(const Inputs& in) {
  const Tensor &x = in[0], &s = in[1], &r = in[2];
  const int kind = static_cast<int>(ints(in[3])[0]);
  const Shape shape = x.sizes().shape();
  const int64_t C = shape.empty() ? 1 : shape.back(), R = C == 0 ? 0 : x.numel() / C;
  const std::vector<double> xv = values(x), sv = values(s.expand(shape).contiguous()),
                            rv = values(r.expand(shape).contiguous());
  std::vector<double> out(xv.size()), t(static_cast<size_t>(C));
  for (int64_t i = 0; i < R; ++i) {
    const size_t o = static_cast<size_t>(i * C);
    double mean = 0, var = 0, mx = -INFINITY, sum = 0, ms = 0;
    for (int64_t c = 0; c < C; ++c) {
      t[c] = std::tanh(xv[o + c] * sv[o + c]);
      mean += t[c] / C;
      ms += t[c] * t[c] / C;
      mx = std::max(mx, t[c]);
    }
    for (int64_t c = 0; c < C; ++c) {
      var += (t[c] - mean) * (t[c] - mean) / C;
      sum += std::exp(t[c] - mx);
    }
    for (int64_t c = 0; c < C; ++c) {
      const double y = kind == 0   ? (t[c] - mean) / std::sqrt(var + 1e-5)
                       : kind == 1 ? std::exp(t[c] - mx) / sum
                       : kind == 2 ? t[c] - mx - std::log(sum)
                                   : t[c] / std::sqrt(ms + 1e-5);
      out[o + c] = y * sv[o + c] + rv[o + c];
    }
  }
  return from_values(out, shape);
}

IGNIS_OP_INFO(OpInfo{
    .name = "fused_reduction",
    .fn =
        [](const Inputs& x) {
          return jit::fused_reduction({x[0], x[1], x[2]}, kReductions[ints(x[3])[0]], 1,
                                      "mul(i0,i1);tanh(v0)", "mul(i3,i1);add(v0,i2,1)");
        },
    .ref = ref_fused_reduction,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"layer_norm [4, 7]", {n({4, 7}, 61), n({7}, 62), n({4, 7}, 63), params({0})}},
              {"softmax [4, 7]", {n({4, 7}, 64), n({7}, 65), n({4, 7}, 66), params({1})}},
              {"log_softmax [4, 7]", {n({4, 7}, 67), n({7}, 68), n({4, 7}, 69), params({2})}},
              {"layer_norm 3-d, per-row residual",
               {n({2, 3, 20}, 70), n({20}, 71), n({2, 3, 1}, 72), params({0})}},
              {"softmax, non-contiguous input",
               {make_noncontiguous({5, 6}, 73), n({6}, 74), n({1}, 75), params({1})}},
              {"log_softmax, rows of 1", {n({3, 1}, 76), n({1}, 77), n({3, 1}, 78), params({2})}},
              {"empty rows", {n({0, 5}, 79), n({5}, 80), n({0, 5}, 81), params({0})}},
              {"rms_norm [4, 7]", {n({4, 7}, 82), n({7}, 83), n({4, 7}, 84), params({3})}},
              {"rms_norm 3-d, per-row residual",
               {n({2, 3, 20}, 85), n({20}, 86), n({2, 3, 1}, 87), params({3})}},
          };
        },
    .dtypes = {kFloat32, kFloat64},
    .atol32 = 1e-5,
    .rtol32 = 1e-4,
    .host_params = {-1},
});

// fused_reduction's statistics: over rows of the last dim, t = tanh(x * s), its sum, mean, amax or
// amin (host parameter 0), then (host parameter 1) 0: y * s + r, of the rows' shape; 1: y * r,
// one value per row (keepdim); 2: y alone, without keepdim.
const char* const kStatistics[] = {"sum", "mean", "amax", "amin"};
const char* const kStatEpilogues[] = {"mul(i3,i1);add(v0,i2,1)", "mul(i3,i2)", ""};

Tensor ref_fused_statistic(const Inputs& in) {
  const Tensor &x = in[0], &s = in[1], &r = in[2];
  const std::vector<int64_t> p = ints(in[3]);
  const Shape shape = broadcast_shapes(broadcast_shapes(x.sizes(), s.sizes()), r.sizes());
  const int64_t C = shape.back();
  int64_t R = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) R *= shape[d];
  Shape row_shape = shape;
  row_shape.back() = 1;
  const std::vector<double> xv = values(x.expand(shape).contiguous()),
                            sv = values(s.expand(shape).contiguous());
  const std::vector<double> rv =
      values(p[1] == 0 ? r.expand(shape).contiguous() : r.expand(row_shape).contiguous());
  std::vector<double> out(static_cast<size_t>(p[1] == 0 ? R * C : R));
  for (int64_t i = 0; i < R; ++i) {
    double y = p[0] == 2 ? -INFINITY : p[0] == 3 ? INFINITY : 0;
    for (int64_t c = 0; c < C; ++c) {
      const double t = std::tanh(xv[i * C + c] * sv[i * C + c]);
      y = p[0] == 2 ? std::max(y, t) : p[0] == 3 ? std::min(y, t) : y + t;
    }
    if (p[0] == 1) y /= static_cast<double>(C);
    if (p[1] == 0) {
      for (int64_t c = 0; c < C; ++c) out[i * C + c] = y * sv[i * C + c] + rv[i * C + c];
    } else {
      out[i] = p[1] == 1 ? y * rv[i] : y;
    }
  }
  Shape out_shape = p[1] == 0 ? shape : row_shape;
  if (p[1] == 2) out_shape.pop_back();
  return from_values(out, out_shape);
}

IGNIS_OP_INFO(OpInfo{
    .name = "fused_reduction statistics",
    .fn =
        [](const Inputs& x) {
          const std::vector<int64_t> p = ints(x[3]);
          return jit::fused_reduction({x[0], x[1], x[2]}, kStatistics[p[0]], 1,
                                      "mul(i0,i1);tanh(v0)", kStatEpilogues[p[1]], 1e-5, p[1] != 2);
        },
    .ref = ref_fused_statistic,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"sum [4, 7], rows' shape",
               {n({4, 7}, 88), n({7}, 89), n({4, 7}, 90), params({0, 0})}},
              {"mean 3-d, per-row residual",
               {n({2, 3, 20}, 91), n({20}, 92), n({2, 3, 1}, 93), params({1, 0})}},
              {"amax [4, 7], rows' shape",
               {n({4, 7}, 94), n({7}, 95), n({4, 7}, 96), params({2, 0})}},
              {"amin, non-contiguous, one per row",
               {make_noncontiguous({5, 6}, 97), n({6}, 98), n({5, 1}, 99), params({3, 1})}},
              {"sum, one per row, scalar factor",
               {n({3, 9}, 100), n({9}, 101), n({1}, 102), params({0, 1})}},
              {"mean without keepdim", {n({4, 7}, 103), n({7}, 104), n({1}, 105), params({1, 2})}},
              {"amax without keepdim, 3-d",
               {n({2, 3, 5}, 106), n({5}, 107), n({1}, 108), params({2, 2})}},
              {"sum, empty rows", {n({0, 5}, 109), n({5}, 110), n({0, 5}, 111), params({0, 0})}},
              {"sum of rows of nothing",
               {n({3, 0}, 112), n({0}, 113), n({3, 1}, 114), params({0, 1})}},
          };
        },
    .dtypes = {kFloat32, kFloat64},
    .atol32 = 1e-5,
    .rtol32 = 1e-4,
    .ops = {"fused_reduction"},
    .host_params = {-1},
});

// fused_reduction's chains of statistics over rows of the last dim of t = x * s (host parameter):
// 0: softmax(t) + r ("amax,sum"); 1: (t - mean) / sqrt(var + 1e-5) + r ("mean,mean"); 2:
// logsumexp(t) without keepdim ("amax,sum", r not read).
const char* const kChains[] = {"amax,sum", "mean,mean", "amax,sum"};
const char* const kChainPrologues[] = {"mul(i0,i1)|mul(i0,i1);sub(v0,i3,1);exp(v1)",
                                       "mul(i0,i1)|mul(i0,i1);sub(v0,i3,1);mul(v1,v1)",
                                       "mul(i0,i1)|mul(i0,i1);sub(v0,i3,1);exp(v1)"};
const char* const kChainEpilogues[] = {
    "mul(i0,i1);sub(v0,i3,1);exp(v1);div(v2,i4);add(v3,i2,1)",
    "mul(i0,i1);sub(v0,i3,1);add(i4,1e-05,1);rsqrt(v2);mul(v1,v3);add(v4,i2,1)",
    "log(i4);add(v0,i3,1)"};

Tensor ref_fused_chain(const Inputs& in) {
  const Tensor &x = in[0], &s = in[1], &r = in[2];
  const int64_t form = ints(in[3])[0];
  const Shape shape = broadcast_shapes(broadcast_shapes(x.sizes(), s.sizes()), r.sizes());
  const int64_t C = shape.back();
  int64_t R = 1;
  for (size_t d = 0; d + 1 < shape.size(); ++d) R *= shape[d];
  const std::vector<double> xv = values(x.expand(shape).contiguous()),
                            sv = values(s.expand(shape).contiguous()),
                            rv = values(r.expand(shape).contiguous());
  std::vector<double> out(static_cast<size_t>(form == 2 ? R : R * C));
  for (int64_t i = 0; i < R; ++i) {
    std::vector<double> t(static_cast<size_t>(C));
    for (int64_t c = 0; c < C; ++c) t[c] = xv[i * C + c] * sv[i * C + c];
    double a = form == 1 ? 0 : -INFINITY, b = 0;
    for (double v : t) a = form == 1 ? a + v : std::max(a, v);
    if (form == 1) a /= static_cast<double>(C);
    for (double v : t) b += form == 1 ? (v - a) * (v - a) : std::exp(v - a);
    if (form == 1) b /= static_cast<double>(C);
    if (form == 2) {
      out[i] = std::log(b) + a;
      continue;
    }
    for (int64_t c = 0; c < C; ++c) {
      const double y = form == 0 ? std::exp(t[c] - a) / b : (t[c] - a) / std::sqrt(b + 1e-5);
      out[i * C + c] = y + rv[i * C + c];
    }
  }
  Shape out_shape = shape;
  if (form == 2) out_shape.pop_back();
  return from_values(out, out_shape);
}

IGNIS_OP_INFO(OpInfo{
    .name = "fused_reduction chains",
    .fn =
        [](const Inputs& x) {
          const int64_t form = ints(x[3])[0];
          return jit::fused_reduction({x[0], x[1], x[2]}, kChains[form], 1, kChainPrologues[form],
                                      kChainEpilogues[form], 1e-5, form != 2);
        },
    .ref = ref_fused_chain,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"softmax [4, 7]", {n({4, 7}, 115), n({7}, 116), n({4, 7}, 117), params({0})}},
              {"layer norm 3-d, per-row residual",
               {n({2, 3, 20}, 118), n({20}, 119), n({2, 3, 1}, 120), params({1})}},
              {"logsumexp without keepdim",
               {n({4, 7}, 121), n({7}, 122), n({4, 7}, 123), params({2})}},
              {"layer norm, non-contiguous",
               {make_noncontiguous({5, 6}, 124), n({6}, 125), n({1}, 126), params({1})}},
              {"softmax, rows of 1", {n({3, 1}, 127), n({1}, 128), n({3, 1}, 129), params({0})}},
              {"softmax, empty rows", {n({0, 5}, 130), n({5}, 131), n({0, 5}, 132), params({0})}},
          };
        },
    .dtypes = {kFloat32, kFloat64},
    .atol32 = 1e-5,
    .rtol32 = 1e-4,
    .ops = {"fused_reduction"},
    .host_params = {-1},
});

}  // namespace

// Graph mode over the whole op table: each entry's call, on each sample, traced into a graph
// (the sample's tensors as graph inputs, the host parameters kept out) and run by the graph
// executor, gives what the eager call gives, bit for bit. Entries that read tensor data on the
// host (meta_skip) cannot be traced and are left out; random ops draw the same numbers from the
// same seed.
TEST(JitOpTable, EveryEntryTracedAndRunAsAGraphEqualsEager) {
  // Entries whose C++ entry points work outside the registry: tracing must refuse them (an
  // ignis::Error), never record a graph that silently differs. None today: indexing with
  // TensorIndex lists and conv2d's padding by name became records.
  const std::map<std::string, std::string> untraceable = {};
  NoGradGuard no_grad;
  std::vector<std::string> failures;
  int checked = 0, refused = 0;
  for (const OpInfo& info : op_table()) {
    if (!info.meta_skip.empty()) continue;
    const bool expect_refusal = untraceable.count(info.name) > 0;
    for (const OpSample& s : info.samples()) {
      const std::string where = info.name + " [" + s.desc + "]";
      auto fresh = [&] {  // the entry may write into its inputs
        std::vector<Tensor> c;
        for (const Tensor& t : s.inputs) c.push_back(t.defined() ? t.clone() : Tensor());
        return c;
      };
      std::vector<size_t> graph_pos;  // which inputs are graph inputs
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        bool host = false;
        for (int k : info.host_params)
          host = host || (k < 0 ? s.inputs.size() + k : static_cast<size_t>(k)) == i;
        if (!host && s.inputs[i].defined()) graph_pos.push_back(i);
      }
      Tensor eager;
      try {
        manual_seed(0);
        eager = info.fn(fresh());
      } catch (const Error&) {
        continue;  // samples that are meant to fail
      }
      const std::vector<Tensor> base = fresh();
      auto fn = [&](const std::vector<Tensor>& gin) {
        std::vector<Tensor> all = base;
        for (size_t k = 0; k < graph_pos.size(); ++k) all[graph_pos[k]] = gin[k];
        return std::vector<Tensor>{info.fn(all)};
      };
      auto graph_inputs = [&] {
        std::vector<Tensor> gin;
        std::vector<Tensor> f = fresh();
        for (size_t p : graph_pos) gin.push_back(f[p]);
        return gin;
      };
      if (expect_refusal) {
        try {
          jit::trace(fn, graph_inputs());
          failures.push_back(where + ": traced, but " + untraceable.at(info.name));
        } catch (const Error&) {
          ++refused;
        }
        continue;
      }
      try {
        manual_seed(0);
        jit::Graph g = jit::trace(fn, graph_inputs());
        manual_seed(0);
        Tensor r = g.run(graph_inputs())[0];
        ++checked;
        if (!r.sizes().equals(eager.sizes()) || r.dtype() != eager.dtype() ||
            !allclose(r.to(kFloat64), eager.to(kFloat64), 0, 0, /*equal_nan=*/true)) {
          failures.push_back(where + ": the graph's result differs from eager");
        }
      } catch (const Error& e) {
        failures.push_back(where + ": " + e.what());
      }
    }
  }
  std::string list;
  for (const auto& f : failures) list += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " of " << checked + failures.size()
                                << " samples:" << list;
  EXPECT_GT(checked, 1500);
  EXPECT_EQ(refused, 0);
}

}  // namespace ignis::testing
