// Op table entries of the nn ops of ignis/nn_ops.h, pad's circular mode, interpolate's bicubic /
// area / nearest-exact and avg_pool2d's divisor_override. Integer parameters travel as a trailing
// int64 tensor (host_params). References are plain float64 loops written from PyTorch's
// documented definitions (tests/test_nn_extra.cpp checks the same ops against PyTorch's values).
#include <algorithm>
#include <cmath>
#include <limits>

#include "op_table.h"

namespace ignis::testing {
namespace {

using Inputs = std::vector<Tensor>;
using Values = std::vector<double>;

Tensor n(IntArrayRef shape, uint64_t seed) { return make_input(shape, seed); }
Tensor nc(IntArrayRef shape, uint64_t seed) { return make_noncontiguous(shape, seed); }
Tensor params(std::vector<int64_t> v) { return tensor(v); }
std::vector<int64_t> ints(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::vector<int64_t>(c.data_ptr<int64_t>(), c.data_ptr<int64_t>() + c.numel());
}
std::vector<int64_t> sub(const std::vector<int64_t>& v, size_t at, size_t len) {
  return std::vector<int64_t>(v.begin() + static_cast<long>(at),
                              v.begin() + static_cast<long>(at + len));
}

// t with dim moved to the end (the others in order), and the inverse permutation.
std::vector<int64_t> to_last(int64_t nd, int64_t dim) {
  std::vector<int64_t> p;
  for (int64_t i = 0; i < nd; ++i) {
    if (i != dim) p.push_back(i);
  }
  p.push_back(dim);
  return p;
}
std::vector<int64_t> inverse(const std::vector<int64_t>& p) {
  std::vector<int64_t> r(p.size());
  for (size_t i = 0; i < p.size(); ++i) r[static_cast<size_t>(p[i])] = static_cast<int64_t>(i);
  return r;
}

OpInfo entry(std::string name, std::function<Tensor(const Inputs&)> fn,
             std::function<Tensor(const Inputs&)> ref, std::function<std::vector<OpSample>()> s,
             std::vector<std::string> ops = {}) {
  OpInfo o;
  o.name = std::move(name);
  o.fn = std::move(fn);
  o.ref = std::move(ref);
  o.samples = std::move(s);
  o.dtypes = {kFloat32, kFloat64};
  o.host_params = {-1};
  o.atol32 = 1e-4;
  o.rtol32 = 1e-4;
  o.ops = std::move(ops);
  return o;
}

// ---- convolution

// conv3d params: [sd, sh, sw, pd, ph, pw, dd, dh, dw, groups]
Tensor ref_conv3d(const Inputs& in) {
  const auto p = ints(in[3]);
  const Tensor &x = in[0], &w = in[1];
  const int64_t N = x.size(0), C = x.size(1), O = w.size(0), Cg = w.size(1), G = p[9];
  const int64_t S[3] = {x.size(2), x.size(3), x.size(4)};
  const int64_t K[3] = {w.size(2), w.size(3), w.size(4)};
  int64_t Q[3];
  for (int k = 0; k < 3; ++k) Q[k] = (S[k] + 2 * p[3 + k] - p[6 + k] * (K[k] - 1) - 1) / p[k] + 1;
  const Values xv = values(x), wv = values(w), bv = in[2].defined() ? values(in[2]) : Values(O, 0);
  Values y;
  for (int64_t b = 0; b < N; ++b)
    for (int64_t o = 0; o < O; ++o)
      for (int64_t i = 0; i < Q[0]; ++i)
        for (int64_t j = 0; j < Q[1]; ++j)
          for (int64_t l = 0; l < Q[2]; ++l) {
            double acc = bv[o];
            for (int64_t c = 0; c < Cg; ++c)
              for (int64_t a = 0; a < K[0]; ++a)
                for (int64_t e = 0; e < K[1]; ++e)
                  for (int64_t f = 0; f < K[2]; ++f) {
                    const int64_t d = i * p[0] - p[3] + a * p[6], h = j * p[1] - p[4] + e * p[7],
                                  ww = l * p[2] - p[5] + f * p[8];
                    if (d < 0 || d >= S[0] || h < 0 || h >= S[1] || ww < 0 || ww >= S[2]) continue;
                    const int64_t ch = (o / (O / G)) * Cg + c;
                    acc += xv[(((b * C + ch) * S[0] + d) * S[1] + h) * S[2] + ww] *
                           wv[(((o * Cg + c) * K[0] + a) * K[1] + e) * K[2] + f];
                  }
            y.push_back(acc);
          }
  return from_values(y, {N, O, Q[0], Q[1], Q[2]});
}

IGNIS_OP_INFO(entry(
    "conv3d",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv3d(x[0], x[1], x[2], sub(p, 0, 3), sub(p, 3, 3), sub(p, 6, 3), p[9]);
    },
    ref_conv3d,
    [] {
      return std::vector<OpSample>{
          {"3x3x2",
           {n({2, 2, 3, 4, 3}, 1), n({2, 2, 3, 3, 2}, 2), n({2}, 3),
            params({1, 1, 1, 0, 0, 0, 1, 1, 1, 1})}},
          {"batch of 1, stride, padding, odd sizes",
           {n({1, 3, 5, 3, 5}, 4), n({2, 3, 2, 1, 3}, 5), n({2}, 6),
            params({2, 1, 2, 1, 0, 1, 1, 1, 1, 1})}},
          {"dilation, groups, no bias",
           {n({1, 4, 5, 4, 4}, 7), n({2, 2, 2, 2, 1}, 8), Tensor(),
            params({1, 2, 1, 0, 1, 0, 2, 1, 1, 2})}},
          {"non-contiguous input",
           {nc({1, 2, 3, 3, 4}, 9), n({2, 2, 1, 2, 2}, 10), n({2}, 11),
            params({1, 1, 1, 1, 0, 1, 1, 1, 1, 1})}},
          {"empty batch",
           {n({0, 2, 3, 3, 3}, 12), n({2, 2, 2, 2, 2}, 13), n({2}, 14),
            params({1, 1, 1, 0, 0, 0, 1, 1, 1, 1})}},
      };
    }));

// conv_transpose1d params: [stride, padding, output_padding, groups, dilation]
Tensor ref_conv_transpose1d(const Inputs& in) {
  const auto p = ints(in[3]);
  const Tensor &x = in[0], &w = in[1];
  const int64_t N = x.size(0), Ci = x.size(1), L = x.size(2), Cog = w.size(1), K = w.size(2);
  const int64_t G = p[3], Co = Cog * G, Cig = Ci / G;
  const int64_t OL = (L - 1) * p[0] - 2 * p[1] + p[4] * (K - 1) + p[2] + 1;
  const Values xv = values(x), wv = values(w), bv = in[2].defined() ? values(in[2]) : Values(Co, 0);
  Values y(static_cast<size_t>(N * Co * OL));
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < Co; ++c)
      for (int64_t i = 0; i < OL; ++i) y[(b * Co + c) * OL + i] = bv[c];
  for (int64_t b = 0; b < N; ++b)
    for (int64_t ci = 0; ci < Ci; ++ci)
      for (int64_t l = 0; l < L; ++l)
        for (int64_t co = 0; co < Cog; ++co)
          for (int64_t k = 0; k < K; ++k) {
            const int64_t i = l * p[0] - p[1] + k * p[4];
            if (i < 0 || i >= OL) continue;
            const int64_t oc = (ci / Cig) * Cog + co;
            y[(b * Co + oc) * OL + i] += xv[(b * Ci + ci) * L + l] * wv[(ci * Cog + co) * K + k];
          }
  return from_values(y, {N, Co, OL});
}

IGNIS_OP_INFO(entry(
    "conv_transpose1d",
    [](const Inputs& x) {
      const auto p = ints(x[3]);
      return conv_transpose1d(x[0], x[1], x[2], p[0], p[1], p[2], p[3], p[4]);
    },
    ref_conv_transpose1d,
    [] {
      return std::vector<OpSample>{
          {"plain", {n({2, 3, 5}, 1), n({3, 2, 3}, 2), n({2}, 3), params({1, 0, 0, 1, 1})}},
          {"batch of 1, stride 2, padding, output_padding, groups",
           {n({1, 4, 6}, 4), n({4, 3, 4}, 5), n({6}, 6), params({2, 1, 1, 2, 1})}},
          {"dilation, no bias, non-contiguous",
           {nc({2, 2, 7}, 7), n({2, 3, 3}, 8), Tensor(), params({3, 2, 1, 1, 2})}},
      };
    }));

// ---- pooling: one reference over [N, C, D, H, W]; 1-d inputs get unit D and H.

struct Pool {
  int64_t k[3], s[3], p[3], d[3];
  bool ceil = false, cip = true;
  int64_t div = 0;  // 0: none
};

int64_t pool_out(int64_t in, int64_t k, int64_t s, int64_t p, int64_t d, bool ceil) {
  const double span = static_cast<double>(in + 2 * p - d * (k - 1) - 1) / static_cast<double>(s);
  int64_t o = static_cast<int64_t>(ceil ? std::ceil(span) : std::floor(span)) + 1;
  if (ceil && (o - 1) * s >= in + p) --o;
  return o;
}

// kind: 0 max values, 1 max indices (flat in the volume), 2 average.
Tensor ref_pool3d(const Tensor& x, const Pool& q, int kind) {
  const int64_t N = x.size(0), C = x.size(1), S[3] = {x.size(2), x.size(3), x.size(4)};
  int64_t Q[3];
  for (int k = 0; k < 3; ++k) Q[k] = pool_out(S[k], q.k[k], q.s[k], q.p[k], q.d[k], q.ceil);
  const Values xv = values(x);
  Values y;
  for (int64_t pl = 0; pl < N * C; ++pl) {
    const double* xs = xv.data() + pl * S[0] * S[1] * S[2];
    for (int64_t i = 0; i < Q[0]; ++i)
      for (int64_t j = 0; j < Q[1]; ++j)
        for (int64_t l = 0; l < Q[2]; ++l) {
          const int64_t o[3] = {i, j, l};
          int64_t lo[3], hi[3], st[3];
          int64_t full = 1, valid = 1;
          for (int k = 0; k < 3; ++k) {
            st[k] = o[k] * q.s[k] - q.p[k];
            hi[k] = std::min(st[k] + q.k[k], S[k] + q.p[k]);
            full *= hi[k] - st[k];
            lo[k] = std::max<int64_t>(st[k], 0);
            valid *= std::min(hi[k], S[k]) - lo[k];
          }
          double best = -std::numeric_limits<double>::infinity(), sum = 0;
          int64_t arg = -1;
          for (int64_t a = 0; a < q.k[0]; ++a)
            for (int64_t b = 0; b < q.k[1]; ++b)
              for (int64_t c = 0; c < q.k[2]; ++c) {
                const int64_t d = st[0] + a * q.d[0], h = st[1] + b * q.d[1],
                              w = st[2] + c * q.d[2];
                if (d < 0 || d >= S[0] || h < 0 || h >= S[1] || w < 0 || w >= S[2]) continue;
                const int64_t at = (d * S[1] + h) * S[2] + w;
                sum += xs[at];
                if (xs[at] > best) {
                  best = xs[at];
                  arg = at;
                }
              }
          const double div =
              q.div ? static_cast<double>(q.div) : static_cast<double>(q.cip ? full : valid);
          y.push_back(kind == 0 ? best : kind == 1 ? static_cast<double>(arg) : sum / div);
        }
  }
  Tensor r = from_values(y, {N, C, Q[0], Q[1], Q[2]});
  return kind == 1 ? r.to(kInt64) : r;
}

// 1-d params: [k, s, p, d, ceil, count_include_pad]
Pool pool1d(const std::vector<int64_t>& p) {
  return Pool{{1, 1, p[0]}, {1, 1, p[1]}, {0, 0, p[2]}, {1, 1, p[3]}, p[4] != 0, p[5] != 0, 0};
}
Tensor ref_pool1d(const Inputs& in, int kind) {
  return ref_pool3d(in[0].unsqueeze(2).unsqueeze(2), pool1d(ints(in[1])), kind)
      .squeeze(2)
      .squeeze(2);
}
std::vector<OpSample> pool1d_samples() {
  return {
      {"k3 s2 p1", {n({2, 3, 9}, 1), params({3, 2, 1, 1, 0, 1})}},
      {"batch of 1, ceil, dilation", {n({1, 2, 10}, 2), params({4, 3, 2, 2, 1, 0})}},
      {"ceil, no padding, non-contiguous", {nc({2, 3, 7}, 3), params({2, 2, 0, 1, 1, 1})}},
      {"unit kernel", {n({1, 1, 5}, 4), params({1, 1, 0, 1, 0, 1})}},
  };
}

IGNIS_OP_INFO(entry(
    "max_pool1d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return max_pool1d(x[0], p[0], p[1], p[2], p[3], p[4] != 0);
    },
    [](const Inputs& x) { return ref_pool1d(x, 0); }, pool1d_samples));
IGNIS_OP_INFO(entry(
    "max_pool1d_with_indices",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return std::get<0>(max_pool1d_with_indices(x[0], p[0], p[1], p[2], p[3], p[4] != 0));
    },
    [](const Inputs& x) { return ref_pool1d(x, 0); }, pool1d_samples));
IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "max_pool1d_with_indices(indices)",
      [](const Inputs& x) {
        const auto p = ints(x[1]);
        return std::get<1>(max_pool1d_with_indices(x[0], p[0], p[1], p[2], p[3], p[4] != 0));
      },
      [](const Inputs& x) { return ref_pool1d(x, 1); }, pool1d_samples);
  o.differentiable = false;
  return o;
}());
IGNIS_OP_INFO(entry(
    "avg_pool1d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return avg_pool1d(x[0], p[0], p[1], p[2], p[4] != 0, p[5] != 0);
    },
    [](const Inputs& x) {
      auto p = ints(x[1]);
      p[3] = 1;  // no dilation
      Pool q = pool1d(p);
      return ref_pool3d(x[0].unsqueeze(2).unsqueeze(2), q, 2).squeeze(2).squeeze(2);
    },
    [] {
      std::vector<OpSample> s = pool1d_samples();
      for (OpSample& c : s) {
        auto p = ints(c.inputs[1]);
        p[3] = 1;
        c.inputs[1] = params(p);
      }
      return s;
    }));

// 3-d params: [k x3, s x3, p x3, d x3, ceil, count_include_pad, divisor (0: none)]
Pool pool3d(const std::vector<int64_t>& p) {
  return Pool{{p[0], p[1], p[2]},
              {p[3], p[4], p[5]},
              {p[6], p[7], p[8]},
              {p[9], p[10], p[11]},
              p[12] != 0,
              p[13] != 0,
              p[14]};
}
std::vector<OpSample> pool3d_samples() {
  return {
      {"k3 s2 p1", {n({2, 2, 5, 4, 5}, 1), params({3, 3, 3, 2, 2, 2, 1, 1, 1, 1, 1, 1, 0, 1, 0})}},
      {"batch of 1, ceil, dilation, mixed sizes",
       {n({1, 3, 6, 5, 4}, 2), params({2, 3, 2, 1, 2, 2, 1, 0, 1, 2, 1, 1, 1, 0, 0})}},
      {"non-contiguous, k2 s2",
       {nc({2, 1, 4, 4, 4}, 3), params({2, 2, 2, 2, 2, 2, 0, 0, 0, 1, 1, 1, 0, 1, 0})}},
      {"unbatched", {n({2, 3, 3, 5}, 4), params({2, 2, 3, 1, 1, 2, 1, 0, 1, 1, 1, 1, 1, 1, 0})}},
  };
}
Tensor ref_pool3d_any(const Inputs& x, int kind) {
  const Tensor x5 = x[0].dim() == 4 ? x[0].unsqueeze(0) : x[0];
  Tensor r = ref_pool3d(x5, pool3d(ints(x[1])), kind);
  return x[0].dim() == 4 ? r.squeeze(0) : r;
}
std::vector<OpSample> avg_pool3d_samples() {
  std::vector<OpSample> s;
  for (OpSample& c : pool3d_samples()) {
    auto p = ints(c.inputs[1]);
    p[9] = p[10] = p[11] = 1;  // no dilation
    c.inputs[1] = params(p);
    s.push_back(c);
    p[13] = 0;  // count_include_pad off
    s.push_back({c.desc + ", count_include_pad=false", {c.inputs[0], params(p)}});
    p[14] = 5;  // divisor_override
    s.push_back({c.desc + ", divisor_override=5", {c.inputs[0], params(p)}});
  }
  return s;
}

IGNIS_OP_INFO(entry(
    "max_pool3d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return max_pool3d(x[0], sub(p, 0, 3), sub(p, 3, 3), sub(p, 6, 3), sub(p, 9, 3), p[12] != 0);
    },
    [](const Inputs& x) { return ref_pool3d_any(x, 0); }, pool3d_samples));
IGNIS_OP_INFO(entry(
    "max_pool3d_with_indices",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return std::get<0>(max_pool3d_with_indices(x[0], sub(p, 0, 3), sub(p, 3, 3), sub(p, 6, 3),
                                                 sub(p, 9, 3), p[12] != 0));
    },
    [](const Inputs& x) { return ref_pool3d_any(x, 0); }, pool3d_samples));
IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "max_pool3d_with_indices(indices)",
      [](const Inputs& x) {
        const auto p = ints(x[1]);
        return std::get<1>(max_pool3d_with_indices(x[0], sub(p, 0, 3), sub(p, 3, 3), sub(p, 6, 3),
                                                   sub(p, 9, 3), p[12] != 0));
      },
      [](const Inputs& x) { return ref_pool3d_any(x, 1); }, pool3d_samples);
  o.differentiable = false;
  return o;
}());
IGNIS_OP_INFO(entry(
    "avg_pool3d",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      std::optional<int64_t> div;
      if (p[14]) div = p[14];
      return avg_pool3d(x[0], sub(p, 0, 3), sub(p, 3, 3), sub(p, 6, 3), p[12] != 0, p[13] != 0,
                        div);
    },
    [](const Inputs& x) { return ref_pool3d_any(x, 2); }, avg_pool3d_samples));

// avg_pool2d with divisor_override: params [kh, kw, sh, sw, ph, pw, ceil, divisor]
IGNIS_OP_INFO(entry(
    "avg_pool2d(divisor_override)",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return avg_pool2d(x[0], sub(p, 0, 2), sub(p, 2, 2), sub(p, 4, 2), p[6] != 0, true, p[7]);
    },
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      const Pool q{
          {1, p[0], p[1]}, {1, p[2], p[3]}, {0, p[4], p[5]}, {1, 1, 1}, p[6] != 0, true, p[7]};
      return ref_pool3d(x[0].unsqueeze(2), q, 2).squeeze(2);
    },
    [] {
      return std::vector<OpSample>{
          {"k3x2 ceil padding", {n({2, 3, 7, 6}, 1), params({3, 2, 2, 2, 1, 1, 1, 4})}},
          {"batch of 1, overlapping", {n({1, 1, 5, 5}, 2), params({2, 2, 1, 1, 0, 0, 0, 3})}},
          {"channels-last",
           {n({2, 5, 6, 3}, 3).permute({0, 3, 1, 2}), params({2, 3, 2, 1, 1, 1, 0, 7})}},
      };
    },
    {"avg_pool2d"}));

// ---- normalisation and distances

// instance_norm params: [use_input_stats]; inputs x, weight, bias, running_mean, running_var.
Tensor ref_instance_norm(const Inputs& in) {
  const bool stats = ints(in[5])[0] != 0;
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), S = x.numel() / std::max<int64_t>(N * C, 1);
  const Values xv = values(x), wv = values(in[1]), bv = values(in[2]), rm = values(in[3]),
               rv = values(in[4]);
  Values y(xv.size());
  for (int64_t b = 0; b < N; ++b)
    for (int64_t c = 0; c < C; ++c) {
      const double* xs = xv.data() + (b * C + c) * S;
      double mean = rm[c], var = rv[c];
      if (stats) {
        mean = 0;
        for (int64_t i = 0; i < S; ++i) mean += xs[i];
        mean /= static_cast<double>(S);
        var = 0;
        for (int64_t i = 0; i < S; ++i) var += (xs[i] - mean) * (xs[i] - mean);
        var /= static_cast<double>(S);
      }
      for (int64_t i = 0; i < S; ++i) {
        y[(b * C + c) * S + i] = (xs[i] - mean) / std::sqrt(var + 1e-5) * wv[c] + bv[c];
      }
    }
  return from_values(y, x.sizes());
}

IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "instance_norm",
      [](const Inputs& x) {
        // Copies of the running statistics: their update must not change the output.
        return instance_norm(x[0], x[3].detach().clone(), x[4].detach().clone(), x[1], x[2],
                             ints(x[5])[0] != 0, 0.1, 1e-5);
      },
      ref_instance_norm,
      [] {
        std::vector<OpSample> s;
        const std::vector<std::pair<std::string, Tensor>> xs = {
            {"[2, 3, 5]", n({2, 3, 5}, 1)},
            {"batch of 1 [1, 2, 3, 4]", n({1, 2, 3, 4}, 2)},
            {"non-contiguous [2, 2, 3, 2, 3]", nc({2, 2, 3, 2, 3}, 3)},
            {"channels-last [2, 3, 3, 4]", n({2, 3, 4, 3}, 4).permute({0, 3, 1, 2})},
        };
        for (const auto& [d, x] : xs) {
          const int64_t c = x.size(1);
          for (int64_t stats : {1, 0}) {
            s.push_back({d + (stats ? ", instance stats" : ", running stats"),
                         {x, n({c}, 5), n({c}, 6), n({c}, 7), make_input({c}, 8, 0.5, 2),
                          params({stats})}});
          }
        }
        return s;
      });
  o.grad_inputs = {0, 1, 2};
  return o;
}());

// normalize: params [p (1, 2 or 3), dim]; x / max(||x||_p, 1e-12) along dim.
Tensor ref_normalize(const Inputs& in, double eps) {
  const auto p = ints(in[1]);
  const int64_t dim = p[1] < 0 ? p[1] + in[0].dim() : p[1];
  const auto perm = to_last(in[0].dim(), dim);
  const Tensor xt = in[0].permute(perm).contiguous();
  const int64_t L = xt.size(-1), R = xt.numel() / std::max<int64_t>(L, 1);
  const Values xv = values(xt);
  Values y(xv.size());
  for (int64_t r = 0; r < R; ++r) {
    double acc = 0;
    for (int64_t i = 0; i < L; ++i) acc += std::pow(std::abs(xv[r * L + i]), p[0]);
    const double norm = std::max(std::pow(acc, 1.0 / p[0]), eps);
    for (int64_t i = 0; i < L; ++i) y[r * L + i] = xv[r * L + i] / norm;
  }
  return from_values(y, xt.sizes()).permute(inverse(perm)).contiguous();
}

IGNIS_OP_INFO(entry(
    "normalize",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return normalize(x[0], static_cast<double>(p[0]), p[1]);
    },
    [](const Inputs& x) { return ref_normalize(x, 1e-12); },
    // (A zero vector is checked against PyTorch in test_nn_extra: its gradient is that of
    // x / eps, which finite differences cannot follow across the clamp's kink at 0.)
    [] {
      return std::vector<OpSample>{
          {"p=2 dim=1", {n({3, 4, 5}, 2), params({2, 1})}},
          {"p=1 dim=-1, batch of 1", {n({1, 7}, 3), params({1, -1})}},
          {"p=3 dim=0, non-contiguous", {nc({3, 5}, 4), params({3, 0})}},
      };
    }));

// cosine_similarity params: [dim]; eps 1e-8; inputs broadcast.
Tensor ref_cosine(const Inputs& in) {
  const int64_t d = ints(in[2])[0];
  const Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes());
  const int64_t dim = d < 0 ? d + static_cast<int64_t>(s.size()) : d;
  const auto perm = to_last(static_cast<int64_t>(s.size()), dim);
  const Tensor a = in[0].expand(s).permute(perm).contiguous();
  const Tensor b = in[1].expand(s).permute(perm).contiguous();
  const int64_t L = a.size(-1), R = a.numel() / std::max<int64_t>(L, 1);
  const Values av = values(a), bv = values(b);
  Values y;
  for (int64_t r = 0; r < R; ++r) {
    double ab = 0, aa = 0, bb = 0;
    for (int64_t i = 0; i < L; ++i) {
      ab += av[r * L + i] * bv[r * L + i];
      aa += av[r * L + i] * av[r * L + i];
      bb += bv[r * L + i] * bv[r * L + i];
    }
    y.push_back(ab / (std::max(std::sqrt(aa), 1e-8) * std::max(std::sqrt(bb), 1e-8)));
  }
  Shape os = a.sizes().shape();
  os.pop_back();
  return from_values(y, os);
}

IGNIS_OP_INFO(entry(
    "cosine_similarity",
    [](const Inputs& x) { return cosine_similarity(x[0], x[1], ints(x[2])[0]); }, ref_cosine,
    [] {
      return std::vector<OpSample>{
          {"[4, 5] dim 1", {n({4, 5}, 1), n({4, 5}, 2), params({1})}},
          {"broadcast, dim -1", {n({3, 1, 6}, 3), n({1, 4, 6}, 4), params({-1})}},
          {"non-contiguous, dim 0", {nc({3, 4}, 5), n({3, 4}, 6), params({0})}},
          {"batch of 1", {n({1, 3}, 7), n({1, 3}, 8), params({1})}},
      };
    }));

// pairwise_distance params: [p, keepdim]; eps 1e-6; ||x1 - x2 + eps||_p along the last dim.
Tensor ref_pairwise(const Inputs& in) {
  const auto p = ints(in[2]);
  const Shape s = broadcast_shapes(in[0].sizes(), in[1].sizes());
  const Tensor a = in[0].expand(s).contiguous(), b = in[1].expand(s).contiguous();
  const int64_t L = a.size(-1), R = a.numel() / std::max<int64_t>(L, 1);
  const Values av = values(a), bv = values(b);
  Values y;
  for (int64_t r = 0; r < R; ++r) {
    double acc = 0;
    for (int64_t i = 0; i < L; ++i)
      acc += std::pow(std::abs(av[r * L + i] - bv[r * L + i] + 1e-6), p[0]);
    y.push_back(std::pow(acc, 1.0 / p[0]));
  }
  Shape os = s;
  if (p[1]) {
    os.back() = 1;
  } else {
    os.pop_back();
  }
  return from_values(y, os);
}

IGNIS_OP_INFO(entry(
    "pairwise_distance",
    [](const Inputs& x) {
      const auto p = ints(x[2]);
      return pairwise_distance(x[0], x[1], static_cast<double>(p[0]), 1e-6, p[1] != 0);
    },
    ref_pairwise,
    [] {
      return std::vector<OpSample>{
          {"p=2", {n({4, 5}, 1), n({4, 5}, 2), params({2, 0})}},
          {"p=1, broadcast, keepdim", {n({3, 6}, 3), n({1, 6}, 4), params({1, 1})}},
          {"p=3, non-contiguous, 3-d", {nc({2, 3, 4}, 5), n({2, 3, 4}, 6), params({3, 0})}},
          {"1-d", {n({5}, 7), n({5}, 8), params({2, 0})}},
      };
    }));

// ---- rearrangement

// pixel_shuffle / unshuffle params: [factor]
Tensor ref_pixel_shuffle(const Tensor& x, int64_t r, bool up) {
  const int64_t nd = x.dim(), C = x.size(-3), H = x.size(-2), W = x.size(-1);
  const int64_t B = x.numel() / std::max<int64_t>(C * H * W, 1);
  const int64_t OC = up ? C / (r * r) : C * r * r, OH = up ? H * r : H / r, OW = up ? W * r : W / r;
  const Values xv = values(x);
  Values y(xv.size());
  for (int64_t b = 0; b < B; ++b)
    for (int64_t c = 0; c < OC; ++c)
      for (int64_t h = 0; h < OH; ++h)
        for (int64_t w = 0; w < OW; ++w) {
          int64_t ic, ih, iw;
          if (up) {  // out[c, h, w] = in[c r^2 + (h % r) r + w % r, h / r, w / r]
            ic = c * r * r + (h % r) * r + w % r;
            ih = h / r;
            iw = w / r;
          } else {  // out[c r^2 + i r + j, h, w] = in[c, h r + i, w r + j]
            const int64_t base = c / (r * r), i = (c % (r * r)) / r, j = c % r;
            ic = base;
            ih = h * r + i;
            iw = w * r + j;
          }
          y[((b * OC + c) * OH + h) * OW + w] = xv[((b * C + ic) * H + ih) * W + iw];
        }
  Shape s = x.sizes().shape();
  s[nd - 3] = OC;
  s[nd - 2] = OH;
  s[nd - 1] = OW;
  return from_values(y, s);
}

IGNIS_OP_INFO(entry(
    "pixel_shuffle", [](const Inputs& x) { return pixel_shuffle(x[0], ints(x[1])[0]); },
    [](const Inputs& x) { return ref_pixel_shuffle(x[0], ints(x[1])[0], true); },
    [] {
      return std::vector<OpSample>{
          {"r=2", {n({2, 8, 3, 5}, 1), params({2})}},
          {"r=3, batch of 1", {n({1, 9, 2, 2}, 2), params({3})}},
          {"unbatched, non-contiguous", {nc({4, 3, 3}, 3), params({2})}},
          {"two batch dims", {n({2, 2, 4, 1, 2}, 4), params({2})}},
      };
    }));
IGNIS_OP_INFO(entry(
    "pixel_unshuffle", [](const Inputs& x) { return pixel_unshuffle(x[0], ints(x[1])[0]); },
    [](const Inputs& x) { return ref_pixel_shuffle(x[0], ints(x[1])[0], false); },
    [] {
      return std::vector<OpSample>{
          {"r=2", {n({2, 2, 6, 4}, 1), params({2})}},
          {"r=3, batch of 1", {n({1, 1, 9, 3}, 2), params({3})}},
          {"unbatched, non-contiguous", {nc({3, 4, 2}, 3), params({2})}},
      };
    }));

// im2col / col2im params: [kh, kw, dh, dw, ph, pw, sh, sw] (+ [oh, ow] first for col2im)
struct Blocks {
  int64_t k[2], d[2], p[2], s[2], L[2];
};
Blocks blocks(const std::vector<int64_t>& p, int64_t h, int64_t w) {
  Blocks b{{p[0], p[1]}, {p[2], p[3]}, {p[4], p[5]}, {p[6], p[7]}, {}};
  const int64_t in[2] = {h, w};
  for (int i = 0; i < 2; ++i)
    b.L[i] = (in[i] + 2 * b.p[i] - b.d[i] * (b.k[i] - 1) - 1) / b.s[i] + 1;
  return b;
}

// cols[n, (c kh + i) kw + j, bh Lw + bw] = x[n, c, bh sh - ph + i dh, bw sw - pw + j dw] (0
// outside)
Tensor ref_im2col(const Inputs& in) {
  const Tensor x = in[0].dim() == 3 ? in[0].unsqueeze(0) : in[0];
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const Blocks b = blocks(ints(in[1]), H, W);
  const int64_t rows = C * b.k[0] * b.k[1], L = b.L[0] * b.L[1];
  const Values xv = values(x);
  Values y(static_cast<size_t>(N * rows * L), 0.0);
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < b.k[0]; ++i)
        for (int64_t j = 0; j < b.k[1]; ++j)
          for (int64_t bh = 0; bh < b.L[0]; ++bh)
            for (int64_t bw = 0; bw < b.L[1]; ++bw) {
              const int64_t h = bh * b.s[0] - b.p[0] + i * b.d[0];
              const int64_t w = bw * b.s[1] - b.p[1] + j * b.d[1];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              y[(nn * rows + (c * b.k[0] + i) * b.k[1] + j) * L + bh * b.L[1] + bw] =
                  xv[((nn * C + c) * H + h) * W + w];
            }
  Tensor r = from_values(y, {N, rows, L});
  return in[0].dim() == 3 ? r.squeeze(0) : r;
}

// The transpose: every column entry adds into its output position.
Tensor ref_col2im(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor x = in[0].dim() == 2 ? in[0].unsqueeze(0) : in[0];
  const int64_t H = p[0], W = p[1];
  const Blocks b = blocks(sub(p, 2, 8), H, W);
  const int64_t N = x.size(0), C = x.size(1) / (b.k[0] * b.k[1]), L = b.L[0] * b.L[1];
  const int64_t rows = x.size(1);
  const Values xv = values(x);
  Values y(static_cast<size_t>(N * C * H * W), 0.0);
  for (int64_t nn = 0; nn < N; ++nn)
    for (int64_t c = 0; c < C; ++c)
      for (int64_t i = 0; i < b.k[0]; ++i)
        for (int64_t j = 0; j < b.k[1]; ++j)
          for (int64_t bh = 0; bh < b.L[0]; ++bh)
            for (int64_t bw = 0; bw < b.L[1]; ++bw) {
              const int64_t h = bh * b.s[0] - b.p[0] + i * b.d[0];
              const int64_t w = bw * b.s[1] - b.p[1] + j * b.d[1];
              if (h < 0 || h >= H || w < 0 || w >= W) continue;
              y[((nn * C + c) * H + h) * W + w] +=
                  xv[(nn * rows + (c * b.k[0] + i) * b.k[1] + j) * L + bh * b.L[1] + bw];
            }
  Tensor r = from_values(y, {N, C, H, W});
  return in[0].dim() == 2 ? r.squeeze(0) : r;
}

IGNIS_OP_INFO(entry(
    "im2col",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return im2col(x[0], sub(p, 0, 2), sub(p, 2, 2), sub(p, 4, 2), sub(p, 6, 2));
    },
    ref_im2col,
    [] {
      return std::vector<OpSample>{
          {"2x3 kernel", {n({2, 3, 5, 6}, 1), params({2, 3, 1, 1, 0, 0, 1, 1})}},
          {"batch of 1, dilation, padding, stride",
           {n({1, 2, 7, 7}, 2), params({3, 3, 2, 1, 1, 2, 2, 3})}},
          {"unbatched, non-contiguous", {nc({3, 5, 4}, 3), params({2, 2, 1, 1, 1, 1, 1, 1})}},
          {"channels-last",
           {n({2, 5, 4, 2}, 4).permute({0, 3, 1, 2}), params({2, 2, 1, 1, 0, 0, 2, 1})}},
      };
    }));

IGNIS_OP_INFO(entry(
    "col2im",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return col2im(x[0], sub(p, 0, 2), sub(p, 2, 2), sub(p, 4, 2), sub(p, 6, 2), sub(p, 8, 2));
    },
    ref_col2im,
    [] {
      return std::vector<OpSample>{
          {"overlapping 2x2 blocks", {n({2, 12, 12}, 1), params({4, 5, 2, 2, 1, 1, 0, 0, 1, 1})}},
          {"batch of 1, dilation, padding, stride",
           {n({1, 12, 12}, 2), params({7, 6, 3, 2, 2, 1, 1, 1, 2, 2})}},
          {"unbatched, non-contiguous", {nc({4, 4}, 3), params({3, 3, 2, 2, 1, 1, 0, 0, 1, 1})}},
      };
    }));

// ---- pad's circular mode: params = the pad widths (last dim first)
Tensor ref_circular(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor& x = in[0];
  const int64_t nd = x.dim(), np = static_cast<int64_t>(p.size() / 2);
  Shape os = x.sizes().shape();
  for (int64_t j = 0; j < np; ++j) os[nd - 1 - j] += p[2 * j] + p[2 * j + 1];
  const Values xv = values(x);
  Values y;
  std::vector<int64_t> idx(static_cast<size_t>(nd), 0);
  int64_t total = 1;
  for (int64_t s : os) total *= s;
  for (int64_t flat = 0; flat < total; ++flat) {
    int64_t rem = flat, src = 0, stride = 1;
    for (int64_t d = nd - 1; d >= 0; --d) {
      idx[d] = rem % os[d];
      rem /= os[d];
    }
    for (int64_t d = nd - 1; d >= 0; --d) {
      const int64_t j = nd - 1 - d, s = x.size(d);
      int64_t i = idx[d] - (j < np ? p[2 * j] : 0);
      i = ((i % s) + s) % s;
      src += i * stride;
      stride *= s;
    }
    y.push_back(xv[src]);
  }
  return from_values(y, os);
}

IGNIS_OP_INFO(entry(
    "pad(circular)", [](const Inputs& x) { return pad(x[0], ints(x[1]), "circular"); },
    ref_circular,
    [] {
      return std::vector<OpSample>{
          {"1-d at the full width", {n({2, 3, 5}, 1), params({5, 5})}},
          {"2-d, batch of 1", {n({1, 2, 4, 5}, 2), params({5, 2, 4, 1})}},
          {"3-d, non-contiguous", {nc({1, 2, 3, 3, 4}, 3), params({1, 2, 3, 0, 1, 1})}},
          {"one side only", {n({2, 4}, 4), params({0, 3})}},
      };
    },
    {"pad"}));

// ---- interpolate: bicubic (params [oh, ow, align_corners]), area and nearest-exact ([oh, ow])

double cubic_w(double t, int k) {
  const double A = -0.75;
  const double x = std::abs(t - (k - 1));  // distance of tap k (offsets -1, 0, 1, 2) from t
  if (x <= 1) return ((A + 2) * x - (A + 3)) * x * x + 1;
  if (x < 2) return ((A * x - 5 * A) * x + 8 * A) * x - 4 * A;
  return 0;
}

Tensor ref_bicubic(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor& x = in[0];
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3), OH = p[0], OW = p[1];
  const bool ac = p[2] != 0;
  auto src = [&](int64_t o, int64_t in_, int64_t out) {
    if (ac) return out > 1 ? static_cast<double>(in_ - 1) / (out - 1) * o : 0.0;
    return static_cast<double>(in_) / out * (o + 0.5) - 0.5;
  };
  const Values xv = values(x);
  Values y;
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        const double sh = src(i, H, OH), sw = src(j, W, OW);
        const double fh = std::floor(sh), fw = std::floor(sw);
        double acc = 0;
        for (int a = 0; a < 4; ++a)
          for (int b = 0; b < 4; ++b) {
            const int64_t h = std::clamp<int64_t>(static_cast<int64_t>(fh) - 1 + a, 0, H - 1);
            const int64_t w = std::clamp<int64_t>(static_cast<int64_t>(fw) - 1 + b, 0, W - 1);
            acc += cubic_w(sh - fh, a) * cubic_w(sw - fw, b) * xv[(pl * H + h) * W + w];
          }
        y.push_back(acc);
      }
  return from_values(y, {N, C, OH, OW});
}

IGNIS_OP_INFO(entry(
    "interpolate(bicubic)",
    [](const Inputs& x) {
      const auto p = ints(x[1]);
      return interpolate(x[0], sub(p, 0, 2), "bicubic", p[2] != 0);
    },
    ref_bicubic,
    [] {
      return std::vector<OpSample>{
          {"upsample", {n({2, 3, 5, 6}, 1), params({9, 11, 0})}},
          {"upsample, align_corners", {n({2, 3, 5, 6}, 1), params({9, 11, 1})}},
          {"downsample, batch of 1", {n({1, 2, 7, 6}, 2), params({3, 4, 0})}},
          {"downsample, align_corners, non-contiguous", {nc({1, 2, 7, 6}, 3), params({3, 4, 1})}},
          {"to 1 x 1", {n({1, 1, 4, 5}, 4), params({1, 1, 0})}},
      };
    },
    {"interpolate.size"}));

Tensor ref_area(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor x = in[0].dim() == 3 ? in[0].unsqueeze(2) : in[0];
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = in[0].dim() == 3 ? 1 : p[0], OW = in[0].dim() == 3 ? p[0] : p[1];
  const Values xv = values(x);
  Values y;
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j) {
        const int64_t h0 = i * H / OH, h1 = ((i + 1) * H + OH - 1) / OH;
        const int64_t w0 = j * W / OW, w1 = ((j + 1) * W + OW - 1) / OW;
        double acc = 0;
        for (int64_t h = h0; h < h1; ++h)
          for (int64_t w = w0; w < w1; ++w) acc += xv[(pl * H + h) * W + w];
        y.push_back(acc / static_cast<double>((h1 - h0) * (w1 - w0)));
      }
  Tensor r = from_values(y, {N, C, OH, OW});
  return in[0].dim() == 3 ? r.squeeze(2) : r;
}

Tensor ref_nearest_exact(const Inputs& in) {
  const auto p = ints(in[1]);
  const Tensor x = in[0].dim() == 3 ? in[0].unsqueeze(2) : in[0];
  const int64_t N = x.size(0), C = x.size(1), H = x.size(2), W = x.size(3);
  const int64_t OH = in[0].dim() == 3 ? 1 : p[0], OW = in[0].dim() == 3 ? p[0] : p[1];
  auto src = [](int64_t o, int64_t in_, int64_t out) {
    return std::min<int64_t>(static_cast<int64_t>(std::floor((o + 0.5) * in_ / out)), in_ - 1);
  };
  const Values xv = values(x);
  Values y;
  for (int64_t pl = 0; pl < N * C; ++pl)
    for (int64_t i = 0; i < OH; ++i)
      for (int64_t j = 0; j < OW; ++j)
        y.push_back(xv[(pl * H + src(i, H, OH)) * W + src(j, W, OW)]);
  Tensor r = from_values(y, {N, C, OH, OW});
  return in[0].dim() == 3 ? r.squeeze(2) : r;
}

std::vector<OpSample> resize_samples() {
  return {
      {"downsample 7x9 -> 3x4", {n({2, 3, 7, 9}, 1), params({3, 4})}},
      {"upsample 5x5 -> 7x8, batch of 1", {n({1, 2, 5, 5}, 2), params({7, 8})}},
      {"1-d 10 -> 4, non-contiguous", {nc({2, 2, 10}, 3), params({4})}},
  };
}

IGNIS_OP_INFO(entry("interpolate(area)",
                    [](const Inputs& x) { return interpolate(x[0], ints(x[1]), "area"); }, ref_area,
                    resize_samples, {"interpolate.size"}));
IGNIS_OP_INFO(entry("interpolate(nearest-exact)",
                    [](const Inputs& x) { return interpolate(x[0], ints(x[1]), "nearest-exact"); },
                    ref_nearest_exact, resize_samples, {"interpolate.size"}));

// ---- embedding_renorm_: params [rows picked...]; max_norm 1, norm_type 2
IGNIS_OP_INFO([] {
  OpInfo o = entry(
      "embedding_renorm_",
      [](const Inputs& x) {
        Tensor w = x[0].detach().clone();
        embedding_renorm_(w, x[1], 1.0, 2.0);
        return w;
      },
      [](const Inputs& x) {
        const Tensor& w = x[0];
        const int64_t R = w.size(0), D = w.size(1);
        Values v = values(w);
        std::vector<bool> picked(static_cast<size_t>(R), false);
        for (int64_t i : ints(x[1])) picked[static_cast<size_t>(i)] = true;
        for (int64_t r = 0; r < R; ++r) {
          if (!picked[r]) continue;
          double acc = 0;
          for (int64_t d = 0; d < D; ++d) acc += v[r * D + d] * v[r * D + d];
          const double norm = std::sqrt(acc);
          if (norm > 1.0) {
            for (int64_t d = 0; d < D; ++d) v[r * D + d] *= 1.0 / (norm + 1e-7);
          }
        }
        return from_values(v, w.sizes());
      },
      [] {
        return std::vector<OpSample>{
            {"repeated rows", {n({6, 4}, 1), params({0, 2, 2, 5, 0, 3})}},
            {"non-contiguous weight, one row", {nc({5, 3}, 2), params({4})}},
            {"small rows stay", {make_input({4, 3}, 3, -0.2, 0.2), params({0, 1, 2, 3})}},
        };
      });
  o.differentiable = false;
  return o;
}());

}  // namespace
}  // namespace ignis::testing
