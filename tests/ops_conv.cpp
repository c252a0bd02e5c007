// Op table entries of the convolution and pooling ops. Each sample carries the op's integer
// parameters as a trailing int64 tensor (kept as is by the driver and never differentiated), so one
// entry covers strides, paddings, dilations, groups and ceil modes. References are plain float64
// loops written from the definitions (PyTorch's documented formulas).
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

Tensor n(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
Tensor params(std::vector<int64_t> v) { return tensor(v); }
std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}

// ---- references

struct Conv {
  int64_t s[2], pl[2], d[2], groups;
  int64_t out[2];  // output spatial size
};

// y[n, o, i, j] = b[o] + sum over c in o's group, kh, kw of
//                 x[n, c, i s - p + kh d, j s - p + kw d] * w[o, c - group start, kh, kw]
Tensor ref_conv(const Tensor& x, const Tensor& w, const Tensor& b, const Conv& c) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t O = w.size(0), Cg = w.size(1), KH = w.size(2), KW = w.size(3);
  const int64_t Og = O / c.groups;
  const Values xv = values(x), wv = values(w), bv = b.defined() ? values(b) : Values(O, 0.0);
  Values y(static_cast<size_t>(N * O * c.out[0] * c.out[1]), 0.0);
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < c.out[0]; ++i)
        for (int64_t j = 0; j < c.out[1]; ++j) {
          double acc = bv[o];
          for (int64_t ci = 0; ci < Cg; ++ci)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t h = i * c.s[0] - c.pl[0] + kh * c.d[0];
                const int64_t ww = j * c.s[1] - c.pl[1] + kw * c.d[1];
                if (h < 0 || h >= H || ww < 0 || ww >= W) continue;
                const int64_t ch = (o / Og) * Cg + ci;
                acc +=
                    xv[((nn * C + ch) * H + h) * W + ww] * wv[((o * Cg + ci) * KH + kh) * KW + kw];
              }
          y[((nn * O + o) * c.out[0] + i) * c.out[1] + j] = acc;
        }
  return from_values(y, {N, O, c.out[0], c.out[1]});
}

int64_t out_size(int64_t in, int64_t k, int64_t s, int64_t pl, int64_t pr, int64_t d) {
  return (in + pl + pr - d * (k - 1) - 1) / s + 1;
}

// conv2d params: [sh, sw, ph, pw, dh, dw, groups]
Tensor ref_conv2d(const Inputs& in) {
  const auto p = ints(in[3]);
  Conv c{{p[0], p[1]}, {p[2], p[3]}, {p[4], p[5]}, p[6], {}};
  for (int k = 0; k < 2; ++k) {
    c.out[k] = out_size(in[0].size(2 + k), in[1].size(2 + k), c.s[k], c.pl[k], c.pl[k], c.d[k]);
  }
  return ref_conv(in[0], in[1], in[2], c);
}

// "same": total padding d (k - 1), the extra element after (PyTorch).
Tensor ref_conv2d_same(const Inputs& in) {
  const auto p = ints(in[3]);
  Conv c{{1, 1}, {}, {p[0], p[1]}, p[2], {in[0].size(2), in[0].size(3)}};
  for (int k = 0; k < 2; ++k) c.pl[k] = (c.d[k] * (in[1].size(2 + k) - 1)) / 2;
  return ref_conv(in[0], in[1], in[2], c);
}

// conv1d params: [s, p, d, groups]
Tensor ref_conv1d(const Inputs& in) {
  const auto p = ints(in[3]);
  Conv c{{1, p[0]}, {0, p[1]}, {1, p[2]}, p[3], {1, 0}};
  c.out[1] = out_size(in[0].size(2), in[1].size(2), p[0], p[1], p[1], p[2]);
  return ref_conv(in[0].unsqueeze(2), in[1].unsqueeze(2), in[2], c).squeeze(2);
}

// Transposed: each input element scatters x[n, ci, h, w] * w[ci, co, kh, kw] to out[n, g Cog + co,
// h s - p + kh d, w s - p + kw d]. params: [sh, sw, ph, pw, oph, opw, dh, dw, groups]
Tensor ref_conv_transpose2d(const Inputs& in) {
  const auto p = ints(in[3]);
  const Tensor &x = in[0], &w = in[1];
  const int64_t N = x.size(0), Ci = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t Cog = w.size(1), KH = w.size(2), KW = w.size(3), G = p[8], Cig = Ci / G;
  const int64_t Co = Cog * G;
  const int64_t OH = (H - 1) * p[0] - 2 * p[2] + p[6] * (KH - 1) + p[4] + 1;
  const int64_t OW = (W - 1) * p[1] - 2 * p[3] + p[7] * (KW - 1) + p[5] + 1;
  const Values xv = values(x), wv = values(w);
  const Values bv = in[2].defined() ? values(in[2]) : Values(Co, 0.0);
  Values y(static_cast<size_t>(N * Co * OH * OW), 0.0);
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t co = 0; co < Co; ++co)
      for (int64_t i = 0; i < OH * OW; ++i) y[(nn * Co + co) * OH * OW + i] = bv[co];
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t ci = 0; ci < Ci; ++ci)
      for (int64_t h = 0; h < H; ++h)
        for (int64_t ww = 0; ww < W; ++ww)
          for (int64_t co = 0; co < Cog; ++co)
            for (int64_t kh = 0; kh < KH; ++kh)
              for (int64_t kw = 0; kw < KW; ++kw) {
                const int64_t i = h * p[0] - p[2] + kh * p[6], j = ww * p[1] - p[3] + kw * p[7];
                if (i < 0 || i >= OH || j < 0 || j >= OW) continue;
                const int64_t oc = (ci / Cig) * Cog + co;
                y[((nn * Co + oc) * OH + i) * OW + j] += xv[((nn * Ci + ci) * H + h) * W + ww] *
                                                         wv[((ci * Cog + co) * KH + kh) * KW + kw];
              }
  return from_values(y, {N, Co, OH, OW});
}

Tensor ref_relu(const Tensor& t) {
  return ref_elementwise({t}, [](const Values& v) { return std::max(v[0], 0.0); });
}

// PyTorch's pooling output size, ceil_mode included.
int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// A window pooling over every plane: f(plane values, H, W, oh, ow) -> value.
template <class F>
Tensor ref_pool(const Tensor& x, int64_t OH, int64_t OW, F f) {
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Values xv = values(x);
  Values y;
  for (int64_t pl = 0; pl < N * C; ++pl) {
    const double* xs = xv.data() + pl * H * W;
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) y.push_back(f(xs, H, W, i, j));
  }
  return from_values(y, {N, C, OH, OW});
}

// max pool params: [kh, kw, sh, sw, ph, pw, dh, dw, ceil]. Returns values or flat indices.
Tensor ref_max_pool(const Inputs& in, bool indices) {
  const auto p = ints(in[1]);
  const Tensor& x = in[0];
  const int64_t OH = pool_out(x.size(2), p[0], p[2], p[4], p[6], p[8]);
  const int64_t OW = pool_out(x.size(3), p[1], p[3], p[5], p[7], p[8]);
  Tensor r = ref_pool(x, OH, OW, [&](const double* xs, int64_t H, int64_t W, int64_t i, int64_t j) {
    double best = -std::numeric_limits<double>::infinity();
    int64_t arg = -1;
    for (int64_t a = 0; a < p[0]; ++a)
      for (int64_t b = 0; b < p[1]; ++b) {
        const int64_t h = i * p[2] - p[4] + a * p[6], w = j * p[3] - p[5] + b * p[7];
        if (h < 0 || h >= H || w < 0 || w >= W) continue;
        if (xs[h * W + w] > best) {
          best = xs[h * W + w];
          arg = h * W + w;
        }
      }
    return indices ? static_cast<double>(arg) : best;
  });
  return indices ? r.to(kInt64) : r;
}

// avg pool params: [kh, kw, sh, sw, ph, pw, ceil, count_include_pad]
Tensor ref_avg_pool(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor& x = in[0];
  const int64_t OH = pool_out(x.size(2), p[0], p[2], p[4], 1, p[6]);
  const int64_t OW = pool_out(x.size(3), p[1], p[3], p[5], 1, p[6]);
  return ref_pool(x, OH, OW, [&](const double* xs, int64_t H, int64_t W, int64_t i, int64_t j) {
    const int64_t h0 = i * p[2] - p[4], w0 = j * p[3] - p[5];
    const int64_t h1 = std::min(h0 + p[0], H + p[4]), w1 = std::min(w0 + p[1], W + p[5]);
    double sum = 0;
    int64_t valid = 0;
    for (int64_t h = std::max<int64_t>(h0, 0); h < std::min(h1, H); ++h)
      for (int64_t w = std::max<int64_t>(w0, 0); w < std::min(w1, W); ++w) {
        sum += xs[h * W + w];
        ++valid;
      }
    return sum / static_cast<double>(p[7] ? (h1 - h0) * (w1 - w0) : valid);
  });
}

// adaptive params: [oh, ow]; windows [floor(i H / OH), ceil((i + 1) H / OH)).
Tensor ref_adaptive(const Inputs& in, bool max) {
  const auto p = ints(in[1]);
  return ref_pool(in[0], p[0], p[1],
                  [&](const double* xs, int64_t H, int64_t W, int64_t i, int64_t j) {
                    const auto lo = [](int64_t o, int64_t n, int64_t on) {
                      return static_cast<int64_t>(std::floor(static_cast<double>(o * n) / on));
                    };
                    const auto hi = [](int64_t o, int64_t n, int64_t on) {
                      return static_cast<int64_t>(std::ceil(static_cast<double>((o + 1) * n) / on));
                    };
                    double acc = max ? -std::numeric_limits<double>::infinity() : 0.0;
                    int64_t cnt = 0;
                    for (int64_t h = lo(i, H, p[0]); h < hi(i, H, p[0]); ++h)
                      for (int64_t w = lo(j, W, p[1]); w < hi(j, W, p[1]); ++w) {
                        acc = max ? std::max(acc, xs[h * W + w]) : acc + xs[h * W + w];
                        ++cnt;
                      }
                    return max ? acc : acc / static_cast<double>(cnt);
                  });
}

OpInfo entry(std::string name, std::function<Tensor(const Inputs&)> fn,
             std::function<Tensor(const Inputs&)> ref, std::function<std::vector<OpSample>()> s) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = std::move(fn);
  o.ref = std::move(ref);
  o.samples = std::move(s);
  o.dtypes = {kFloat32, kFloat64, kBFloat16};
  o.host_params = {-1};  // the params() tensor: strides, padding, kernel sizes
  // Sums of up to ~50 products of values in [-2, 2].
  o.atol32 = 1e-4;
  o.rtol32 = 1e-4;
  o.atol_bf16 = 8e-2;
  return o;
}

IntArrayRef two(const std::vector<int64_t>& p, size_t i) { return IntArrayRef(p.data() + i, 2); }

// ---- convolutions

std::vector<OpSample> conv2d_samples() {
  const Tensor none;
  return {
      {"batch 1",
       {n({1, 2, 5, 5}, 1), n({3, 2, 3, 3}, 2), n({3}, 3), params({1, 1, 0, 0, 1, 1, 1})}},
      {"batch 3, stride 2, padding 1",
       {n({3, 2, 6, 7}, 4), n({4, 2, 3, 3}, 5), n({4}, 6), params({2, 2, 1, 1, 1, 1, 1})}},
      {"per-dim stride and padding, no bias",
       {n({2, 3, 5, 6}, 7), n({2, 3, 2, 3}, 8), none, params({1, 2, 2, 0, 1, 1, 1})}},
      {"dilation",
       {n({2, 2, 7, 6}, 9), n({3, 2, 3, 2}, 10), n({3}, 11), params({1, 1, 1, 0, 2, 3, 1})}},
      {"groups 2",
       {n({2, 4, 5, 5}, 12), n({6, 2, 3, 3}, 13), n({6}, 14), params({1, 1, 1, 1, 1, 1, 2})}},
      {"depthwise, stride 2",
       {n({1, 3, 5, 5}, 15), n({3, 1, 3, 3}, 16), n({3}, 17), params({2, 2, 1, 1, 1, 1, 3})}},
      {"1x1 kernel",
       {n({2, 3, 4, 4}, 18), n({5, 3, 1, 1}, 19), n({5}, 20), params({1, 1, 0, 0, 1, 1, 1})}},
      {"stride leaves input unused",
       {n({1, 2, 6, 6}, 21), n({2, 2, 2, 2}, 22), n({2}, 23), params({3, 3, 0, 0, 1, 1, 1})}},
      {"noncontiguous",
       {make_noncontiguous({2, 2, 5, 4}, 24), make_noncontiguous({3, 2, 3, 3}, 25), n({3}, 26),
        params({1, 1, 1, 1, 1, 1, 1})}},
      {"channels-last input",
       {n({2, 4, 4, 3}, 27).permute({0, 3, 1, 2}), n({2, 3, 2, 2}, 28), n({2}, 29),
        params({1, 1, 0, 0, 1, 1, 1})}},
      {"channels-last, stride 2, padding 1",
       {n({2, 5, 6, 4}, 33).permute({0, 3, 1, 2}), n({3, 4, 3, 3}, 34), n({3}, 35),
        params({2, 2, 1, 1, 1, 1, 1})}},
      {"empty batch",
       {n({0, 2, 5, 5}, 30), n({3, 2, 3, 3}, 31), n({3}, 32), params({1, 1, 0, 0, 1, 1, 1})}},
  };
}

IGNIS_OP_INFO(entry(
    "conv2d",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv2d(x[0], x[1], x[2], two(p, 0), two(p, 2), two(p, 4), p[6]);
    },
    ref_conv2d, conv2d_samples));

IGNIS_OP_INFO(entry(
    "conv2d_relu",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv2d_relu(x[0], x[1], x[2], two(p, 0), two(p, 2), two(p, 4), p[6]);
    },
    [](const Inputs& x) { return ref_relu(ref_conv2d(x)); }, conv2d_samples));

// An integer padding (conv2d.int_padding): samples with equal paddings in both dims.
IGNIS_OP_INFO(entry(
    "conv2d.int_padding",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv2d(x[0], x[1], x[2], two(p, 0), p[2], two(p, 4), p[6]);
    },
    ref_conv2d,
    [] {
      std::vector<OpSample> s;
      for (OpSample& c : conv2d_samples()) {
        const auto p = ints(c.inputs[3]);
        if (p[2] == p[3]) s.push_back(std::move(c));
      }
      return s;
    }));

// params: [dh, dw, groups]
IGNIS_OP_INFO(covering(entry(
    "conv2d_same",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv2d(x[0], x[1], x[2], {1}, "same", two(p, 0), p[2]);
    },
    ref_conv2d_same,
    [] {
      return std::vector<OpSample>{
          {"odd kernel", {n({2, 2, 5, 5}, 1), n({3, 2, 3, 3}, 2), n({3}, 3), params({1, 1, 1})}},
          {"even kernel", {n({2, 2, 5, 6}, 4), n({3, 2, 4, 2}, 5), n({3}, 6), params({1, 1, 1})}},
          {"even kernel, dilation",
           {n({1, 2, 7, 6}, 7), n({2, 2, 2, 4}, 8), Tensor(), params({3, 1, 1})}},
          {"groups", {n({1, 4, 4, 4}, 9), n({4, 2, 2, 3}, 10), n({4}, 11), params({1, 2, 2})}},
      };
    }),
    {"conv2d.padding"}));

// conv1d with padding by name. params: [same (0: "valid", 1: "same"), dilation, groups]; odd
// kernels, so that "same" pads d (k - 1) / 2 on both sides.
IGNIS_OP_INFO(covering(
    entry(
        "conv1d_padding_by_name",
        [](const Inputs& x) {
          const auto p = ints(x[3]);
          return conv1d(x[0], x[1], x[2], {1}, p[0] ? "same" : "valid", {p[1]}, p[2]);
        },
        [](const Inputs& x) {
          const auto p = ints(x[3]);
          const int64_t pad = p[0] ? p[1] * (x[1].size(2) - 1) / 2 : 0;
          return ref_conv1d({x[0], x[1], x[2], params({1, pad, p[1], p[2]})});
        },
        [] {
          return std::vector<OpSample>{
              {"valid", {n({2, 2, 7}, 1), n({3, 2, 3}, 2), n({3}, 3), params({0, 1, 1})}},
              {"same", {n({1, 2, 6}, 4), n({4, 2, 5}, 5), n({4}, 6), params({1, 1, 1})}},
              {"same, dilation, groups",
               {n({2, 4, 8}, 7), n({2, 2, 3}, 8), Tensor(), params({1, 2, 2})}},
          };
        }),
    {"conv1d.padding"}));

// params: [stride, padding, dilation, groups]
IGNIS_OP_INFO(entry(
    "conv1d",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv1d(x[0], x[1], x[2], p[0], p[1], p[2], p[3]);
    },
    ref_conv1d,
    [] {
      return std::vector<OpSample>{
          {"batch 1", {n({1, 2, 7}, 1), n({3, 2, 3}, 2), n({3}, 3), params({1, 0, 1, 1})}},
          {"stride 2, padding 2",
           {n({3, 2, 9}, 4), n({4, 2, 4}, 5), n({4}, 6), params({2, 2, 1, 1})}},
          {"dilation, groups", {n({2, 4, 8}, 7), n({2, 2, 3}, 8), Tensor(), params({1, 1, 2, 2})}},
          {"noncontiguous",
           {make_noncontiguous({2, 3, 6}, 9), n({2, 3, 2}, 10), n({2}, 11), params({1, 0, 1, 1})}},
          {"empty batch", {n({0, 2, 7}, 12), n({3, 2, 3}, 13), n({3}, 14), params({1, 0, 1, 1})}},
      };
    }));

// params: [sh, sw, ph, pw, oph, opw, dh, dw, groups]
IGNIS_OP_INFO(entry(
    "conv_transpose2d",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv_transpose2d(x[0], x[1], x[2], two(p, 0), two(p, 2), two(p, 4), p[8], two(p, 6));
    },
    ref_conv_transpose2d,
    [] {
      return std::vector<OpSample>{
          {"batch 1",
           {n({1, 3, 4, 4}, 1), n({3, 2, 3, 3}, 2), n({2}, 3),
            params({1, 1, 0, 0, 0, 0, 1, 1, 1})}},
          {"stride 2, padding 1, output_padding 1",
           {n({2, 2, 3, 4}, 4), n({2, 3, 3, 3}, 5), n({3}, 6),
            params({2, 2, 1, 1, 1, 1, 1, 1, 1})}},
          {"per-dim, no bias",
           {n({2, 2, 4, 3}, 7), n({2, 2, 2, 3}, 8), Tensor(), params({3, 1, 0, 1, 2, 0, 1, 1, 1})}},
          {"dilation, groups",
           {n({1, 4, 3, 3}, 9), n({4, 1, 2, 2}, 10), n({2}, 11),
            params({1, 2, 0, 0, 0, 1, 2, 1, 2})}},
          {"noncontiguous",
           {make_noncontiguous({2, 2, 3, 3}, 12), make_noncontiguous({2, 2, 2, 2}, 13), n({2}, 14),
            params({2, 2, 0, 0, 0, 0, 1, 1, 1})}},
          {"empty batch",
           {n({0, 3, 4, 4}, 15), n({3, 2, 3, 3}, 16), n({2}, 17),
            params({1, 1, 0, 0, 0, 0, 1, 1, 1})}},
      };
    }));

// ---- pooling

std::vector<OpSample> max_pool_samples() {
  return {
      {"2x2", {n({1, 2, 4, 6}, 1), params({2, 2, 2, 2, 0, 0, 1, 1, 0})}},
      {"3x3 stride 2 padding 1", {n({2, 3, 7, 6}, 2), params({3, 3, 2, 2, 1, 1, 1, 1, 0})}},
      {"ceil mode", {n({2, 2, 6, 7}, 3), params({3, 2, 2, 2, 1, 0, 1, 1, 1})}},
      {"dilation", {n({1, 2, 7, 7}, 4), params({2, 3, 1, 2, 1, 0, 2, 2, 0})}},
      {"noncontiguous", {make_noncontiguous({2, 2, 5, 4}, 5), params({2, 2, 1, 1, 0, 0, 1, 1, 0})}},
      {"channels-last 2x2",
       {n({2, 4, 6, 3}, 7).permute({0, 3, 1, 2}), params({2, 2, 2, 2, 0, 0, 1, 1, 0})}},
      {"channels-last 3x3 stride 2 padding 1",
       {n({2, 7, 6, 5}, 8).permute({0, 3, 1, 2}), params({3, 3, 2, 2, 1, 1, 1, 1, 0})}},
      {"empty batch", {n({0, 2, 4, 4}, 6), params({2, 2, 2, 2, 0, 0, 1, 1, 0})}},
  };
}

Tensor max_pool_fn(const Inputs& x, bool indices) {
  const auto p = ints(x[1]);
  auto r = max_pool2d_with_indices(x[0], two(p, 0), two(p, 2), two(p, 4), two(p, 6), p[8]);
  return indices ? std::get<1>(r) : std::get<0>(r);
}

IGNIS_OP_INFO(entry(
    "max_pool2d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return max_pool2d(x[0], two(p, 0), two(p, 2), two(p, 4), two(p, 6), p[8]);
    },
    [](const Inputs& x) { return ref_max_pool(x, false); }, max_pool_samples));

IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "max_pool2d_indices", [](const Inputs& x) { return max_pool_fn(x, true); },
      [](const Inputs& x) { return ref_max_pool(x, true); }, max_pool_samples);
  o.dtypes = {kFloat32, kFloat64};  // bfloat16 rounding makes ties
  o.differentiable = false;
  o.ops = {"max_pool2d_with_indices"};
  return o;
}());

IGNIS_OP_INFO(entry(
    "avg_pool2d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return avg_pool2d(x[0], two(p, 0), two(p, 2), two(p, 4), p[6], p[7]);
    },
    ref_avg_pool,
    [] {
      return std::vector<OpSample>{
          {"2x2", {n({1, 2, 4, 6}, 1), params({2, 2, 2, 2, 0, 0, 0, 1})}},
          {"3x3 stride 2 padding 1", {n({2, 3, 7, 6}, 2), params({3, 3, 2, 2, 1, 1, 0, 1})}},
          {"exclude padding", {n({2, 2, 5, 5}, 3), params({3, 3, 2, 2, 1, 1, 0, 0})}},
          {"ceil mode", {n({1, 2, 6, 7}, 4), params({3, 2, 2, 2, 1, 1, 1, 1})}},
          {"ceil mode, exclude padding", {n({1, 2, 6, 7}, 5), params({3, 2, 2, 2, 1, 1, 1, 0})}},
          {"noncontiguous",
           {make_noncontiguous({2, 2, 5, 4}, 6), params({2, 3, 1, 1, 0, 1, 0, 1})}},
          {"empty batch", {n({0, 2, 4, 4}, 7), params({2, 2, 2, 2, 0, 0, 0, 1})}},
      };
    }));

std::vector<OpSample> adaptive_samples() {
  return {
      {"divisible", {n({2, 3, 6, 4}, 1), params({3, 2})}},
      {"overlapping windows", {n({1, 2, 7, 5}, 2), params({3, 4})}},
      {"global", {n({2, 2, 5, 3}, 3), params({1, 1})}},
      {"upsampling", {n({1, 2, 2, 3}, 4), params({4, 5})}},
      {"noncontiguous", {make_noncontiguous({2, 2, 5, 4}, 5), params({2, 3})}},
      {"empty batch", {n({0, 2, 4, 4}, 6), params({2, 2})}},
  };
}

IGNIS_OP_INFO(entry(
    "adaptive_avg_pool2d",
    [](const Inputs& x) { return adaptive_avg_pool2d(x[0], two(ints(x[1]), 0)); },
    [](const Inputs& x) { return ref_adaptive(x, false); }, adaptive_samples));

IGNIS_OP_INFO(entry(
    "adaptive_max_pool2d",
    [](const Inputs& x) { return adaptive_max_pool2d(x[0], two(ints(x[1]), 0)); },
    [](const Inputs& x) { return ref_adaptive(x, true); }, adaptive_samples));

// The flat index (h * W + w) of each window's maximum.
Tensor ref_adaptive_max_indices(const Inputs& in) {
  const auto p = ints(in[1]);
  return ref_pool(in[0], p[0], p[1],
                  [&](const double* xs, int64_t H, int64_t W, int64_t i, int64_t j) {
                    const auto lo = [](int64_t o, int64_t n, int64_t on) { return o * n / on; };
                    const auto hi = [](int64_t o, int64_t n, int64_t on) {
                      return ((o + 1) * n + on - 1) / on;
                    };
                    double best = -std::numeric_limits<double>::infinity();
                    int64_t arg = -1;
                    for (int64_t h = lo(i, H, p[0]); h < hi(i, H, p[0]); ++h)
                      for (int64_t w = lo(j, W, p[1]); w < hi(j, W, p[1]); ++w) {
                        if (xs[h * W + w] > best) {
                          best = xs[h * W + w];
                          arg = h * W + w;
                        }
                      }
                    return static_cast<double>(arg);
                  })
      .to(kInt64);
}

IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "adaptive_max_pool2d_with_indices",
      [](const Inputs& x) {
        return std::get<1>(adaptive_max_pool2d_with_indices(x[0], two(ints(x[1]), 0)));
      },
      ref_adaptive_max_indices, adaptive_samples);
  o.dtypes = {kFloat32, kFloat64};  // bfloat16 rounding makes ties
  o.differentiable = false;
  return o;
}());

}  // namespace
}  // namespace ignis::testing
