// The nn ops of ignis/nn_ops.h (and pad's modes, interpolate's bicubic / area / nearest-exact,
// avg_pool2d's divisor_override, embedding's max_norm) against PyTorch, their LibTorch-style
// options and modules, and their error messages. tests/pytorch/gen_nn_extra_cases.py records
// PyTorch's outputs and the gradients of sum(out * w), w[k] = sin(k + 1), into
// tests/data/pytorch_nn_extra_cases.txt; each case runs here with contiguous inputs and again with
// non-contiguous (transposed-layout) ones.
#include <gmock/gmock.h>

#include <algorithm>
#include <cmath>
#include <fstream>
#include <map>
#include <sstream>

#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

namespace F = nn::functional;
using ::testing::HasSubstr;

struct TorchCase {
  std::string op;
  std::map<std::string, std::vector<std::string>> params;
  std::vector<Tensor> inputs, outputs, grads;
  std::vector<int64_t> ints(const std::string& k) const {
    std::vector<int64_t> v;
    for (const std::string& s : params.at(k)) v.push_back(std::llround(std::stod(s)));
    return v;
  }
  double num(const std::string& k) const { return std::stod(params.at(k).at(0)); }
  bool flag(const std::string& k) const { return num(k) != 0; }
  bool has(const std::string& k) const { return params.count(k) > 0; }
  std::string str(const std::string& k) const { return params.at(k).at(0); }
};

Tensor parse_tensor(std::istringstream& in) {
  std::string kind;
  int64_t nd = 0;
  in >> kind >> nd;
  std::vector<int64_t> shape(static_cast<size_t>(nd));
  for (auto& s : shape) in >> s;
  std::string colon;
  in >> colon;
  std::vector<double> v;
  std::string tok;
  while (in >> tok) v.push_back(std::strtod(tok.c_str(), nullptr));
  Tensor t = tensor(v, TensorOptions(kFloat64)).reshape(shape);
  return kind == "int" ? t.to(kInt64) : t;
}

std::vector<TorchCase> load() {
  const std::string path = std::string(IGNIS_SOURCE_DIR) + "/tests/data/pytorch_nn_extra_cases.txt";
  std::ifstream f(path);
  EXPECT_TRUE(f.good()) << "cannot read " << path;
  std::vector<TorchCase> cases;
  std::string line;
  TorchCase c;
  while (std::getline(f, line)) {
    if (line.empty() || line[0] == '#') continue;
    std::istringstream in(line);
    std::string tag;
    in >> tag;
    if (tag == "case") {
      c = TorchCase();
      in >> c.op;
    } else if (tag == "param") {
      std::string k, v;
      in >> k;
      while (in >> v) c.params[k].push_back(v);
    } else if (tag == "input") {
      c.inputs.push_back(parse_tensor(in));
    } else if (tag == "output") {
      c.outputs.push_back(parse_tensor(in));
    } else if (tag == "grad") {
      c.grads.push_back(parse_tensor(in));
    } else if (tag == "end") {
      cases.push_back(c);
    }
  }
  return cases;
}

// Runs a case's op in ignis; returns its outputs (the first is differentiated).
std::vector<Tensor> run(const TorchCase& c, const std::vector<Tensor>& in) {
  const std::string& op = c.op;
  if (op == "conv3d") {
    return {conv3d(in[0], in[1], in[2], c.ints("stride"), c.ints("padding"), c.ints("dilation"),
                   c.ints("groups")[0])};
  }
  if (op == "conv_transpose1d") {
    return {conv_transpose1d(in[0], in[1], in[2], c.ints("stride"), c.ints("padding"),
                             c.ints("output_padding"), c.ints("groups")[0], c.ints("dilation"))};
  }
  if (op == "max_pool1d" || op == "max_pool3d") {
    auto f = op == "max_pool1d" ? &max_pool1d_with_indices : &max_pool3d_with_indices;
    auto [y, i] = f(in[0], c.ints("kernel"), c.ints("stride"), c.ints("padding"),
                    c.ints("dilation"), c.flag("ceil_mode"));
    return {y, i};
  }
  if (op == "avg_pool1d") {
    return {avg_pool1d(in[0], c.ints("kernel"), c.ints("stride"), c.ints("padding"),
                       c.flag("ceil_mode"), c.flag("count_include_pad"))};
  }
  std::optional<int64_t> div;
  if (c.has("divisor_override")) div = c.ints("divisor_override")[0];
  if (op == "avg_pool3d") {
    return {avg_pool3d(in[0], c.ints("kernel"), c.ints("stride"), c.ints("padding"),
                       c.flag("ceil_mode"), c.flag("count_include_pad"), div)};
  }
  if (op == "avg_pool2d") {
    return {avg_pool2d(in[0], c.ints("kernel"), c.ints("stride"), c.ints("padding"),
                       c.flag("ceil_mode"), true, div)};
  }
  if (op == "instance_norm") {
    const Tensor rm = in[3].detach().clone(), rv = in[4].detach().clone();
    const Tensor y = instance_norm(in[0], rm, rv, in[1], in[2], c.flag("use_input_stats"),
                                   c.num("momentum"), c.num("eps"));
    if (c.flag("use_input_stats")) return {y, rm, rv};
    return {y};
  }
  if (op == "normalize") return {normalize(in[0], c.num("p"), c.ints("dim")[0], c.num("eps"))};
  if (op == "cosine_similarity") {
    return {cosine_similarity(in[0], in[1], c.ints("dim")[0], c.num("eps"))};
  }
  if (op == "pairwise_distance") {
    return {pairwise_distance(in[0], in[1], c.num("p"), c.num("eps"), c.flag("keepdim"))};
  }
  if (op == "pixel_shuffle") return {pixel_shuffle(in[0], c.ints("factor")[0])};
  if (op == "pixel_unshuffle") return {pixel_unshuffle(in[0], c.ints("factor")[0])};
  if (op == "unfold") {
    return {
        im2col(in[0], c.ints("kernel"), c.ints("dilation"), c.ints("padding"), c.ints("stride"))};
  }
  if (op == "fold") {
    return {col2im(in[0], c.ints("output_size"), c.ints("kernel"), c.ints("dilation"),
                   c.ints("padding"), c.ints("stride"))};
  }
  if (op == "pad") return {pad(in[0], c.ints("pad"), c.str("mode"))};
  if (op == "interpolate") {
    std::optional<bool> ac;
    if (c.has("align_corners")) ac = c.flag("align_corners");
    if (c.has("size")) return {interpolate(in[0], IntArrayRef(c.ints("size")), c.str("mode"), ac)};
    std::vector<double> sf;
    for (const std::string& s : c.params.at("scale_factor")) sf.push_back(std::stod(s));
    return {interpolate(in[0], sf, c.str("mode"), ac)};
  }
  if (op == "embedding") {
    const Tensor w = in[0].detach().clone();
    const Tensor y = F::embedding(
        in[1], w,
        F::EmbeddingFuncOptions().max_norm(c.num("max_norm")).norm_type(c.num("norm_type")));
    return {y, w};
  }
  ADD_FAILURE() << "no runner for op " << op;
  return {};
}

// The same values in a transposed layout (non-contiguous when the tensor has 2+ dims of size > 1).
Tensor transposed_layout(const Tensor& t) {
  if (t.dim() < 2) return t;
  return t.transpose(0, -1).contiguous().transpose(0, -1);
}

void expect_close(const Tensor& got, const Tensor& want, const std::string& what) {
  ASSERT_TRUE(got.defined()) << what;
  ASSERT_EQ(got.sizes().vec(), want.sizes().vec()) << what;
  const Tensor g = got.to(kFloat64).contiguous(), w = want.to(kFloat64).contiguous();
  const double* gp = g.data_ptr<double>();
  const double* wp = w.data_ptr<double>();
  for (int64_t i = 0; i < g.numel(); ++i) {
    ASSERT_NEAR(gp[i], wp[i], 1e-9 + 1e-8 * std::abs(wp[i])) << what << " at flat index " << i;
  }
}

TEST(NnExtraTorch, MatchesPyTorch) {
  const std::vector<TorchCase> cases = load();
  ASSERT_GE(cases.size(), 80u);
  std::map<std::string, int> seen;
  for (const TorchCase& c : cases) {
    for (bool noncontig : {false, true}) {
      const std::string what = c.op + " case " + std::to_string(seen[c.op]) +
                               (noncontig ? " (non-contiguous inputs)" : "");
      std::vector<Tensor> in;
      for (const Tensor& t : c.inputs) {
        Tensor x = noncontig ? transposed_layout(t) : t;
        if (x.is_floating_point() && !c.grads.empty()) x = x.detach().requires_grad_(true);
        in.push_back(x);
      }
      std::vector<Tensor> out;
      try {
        out = run(c, in);
      } catch (const std::exception& e) {
        ADD_FAILURE() << what << " threw: " << e.what();
        continue;
      }
      ASSERT_EQ(out.size(), c.outputs.size()) << what;
      for (size_t k = 0; k < out.size(); ++k) {
        expect_close(out[k], c.outputs[k], what + ", output " + std::to_string(k));
      }
      if (c.grads.empty()) continue;
      std::vector<double> wv(static_cast<size_t>(out[0].numel()));
      for (size_t k = 0; k < wv.size(); ++k) wv[k] = std::sin(static_cast<double>(k) + 1);
      const Tensor w = tensor(wv, TensorOptions(kFloat64)).reshape(out[0].sizes());
      std::vector<Tensor> diff;
      for (const Tensor& t : in) {
        if (t.defined() && t.requires_grad()) diff.push_back(t);
      }
      const auto g = autograd::grad({(out[0] * w).sum()}, diff, {}, std::nullopt, false,
                                    /*allow_unused=*/true);
      ASSERT_EQ(g.size(), c.grads.size()) << what;
      for (size_t k = 0; k < g.size(); ++k) {
        const Tensor gk = g[k].defined() ? g[k] : zeros_like(c.grads[k]);
        expect_close(gk, c.grads[k], what + ", gradient of input " + std::to_string(k));
      }
    }
    ++seen[c.op];
  }
  for (const char* op :
       {"conv3d", "conv_transpose1d", "max_pool1d", "max_pool3d", "avg_pool1d", "avg_pool3d",
        "avg_pool2d", "instance_norm", "normalize", "cosine_similarity", "pairwise_distance",
        "pixel_shuffle", "pixel_unshuffle", "unfold", "fold", "pad", "interpolate", "embedding"}) {
    EXPECT_GT(seen[op], 0) << "no PyTorch case for " << op;
  }
}

// ---- options and modules

Tensor seeded(IntArrayRef shape, uint64_t seed) {
  manual_seed(seed);
  return randn(shape, TensorOptions(kFloat64));
}

void expect_same(const Tensor& a, const Tensor& b, double tol = 1e-12) {
  ASSERT_EQ(a.sizes().vec(), b.sizes().vec());
  EXPECT_LE((a - b).abs().max().item<double>(), tol);
}

TEST(NnExtraModules, Conv3dAndConvTranspose1d) {
  nn::Conv3d conv(nn::Conv3dOptions(2, 4, {3, 2, 1})
                      .stride(2)
                      .padding(std::vector<int64_t>{1, 0, 0})
                      .bias(false));
  EXPECT_EQ(conv.weight.sizes().vec(), (std::vector<int64_t>{4, 2, 3, 2, 1}));
  EXPECT_FALSE(conv.bias.defined());
  EXPECT_EQ(conv.named_parameters().size(), 1u);
  const Tensor x = seeded({1, 2, 5, 6, 3}, 1).to(kFloat32);
  const Tensor y = conv.forward(x);
  EXPECT_EQ(y.sizes().vec(), (std::vector<int64_t>{1, 4, 3, 3, 2}));
  expect_same(y, F::conv3d(x, conv.weight, F::Conv3dFuncOptions().stride(2).padding({1, 0, 0})));
  EXPECT_EQ(conv.extra_repr(),
            "2, 4, kernel_size=(3, 2, 1), stride=(2, 2, 2), padding=(1, 0, 0), "
            "bias=False");

  nn::ConvTranspose1d up(nn::ConvTranspose1dOptions(3, 2, 4).stride(2).padding(1));
  EXPECT_EQ(up.weight.sizes().vec(), (std::vector<int64_t>{3, 2, 4}));
  const Tensor z = up.forward(seeded({2, 3, 5}, 2).to(kFloat32));
  EXPECT_EQ(z.sizes().vec(), (std::vector<int64_t>{2, 2, 10}));  // (5 - 1) 2 - 2 + 3 + 1
  expect_same(
      z, F::conv_transpose1d(seeded({2, 3, 5}, 2).to(kFloat32), up.weight,
                             F::ConvTranspose1dFuncOptions().bias(up.bias).stride(2).padding(1)));
}

TEST(NnExtraModules, ConvPaddingModes) {
  const Tensor x = seeded({2, 2, 5, 6}, 3);
  for (const char* mode : {"reflect", "replicate", "circular"}) {
    nn::Conv2d conv(
        nn::Conv2dOptions(2, 3, 3).padding(std::vector<int64_t>{1, 2}).padding_mode(mode));
    conv.to(kFloat64);
    const Tensor want = conv2d(pad(x, {2, 2, 1, 1}, mode), conv.weight, conv.bias);
    expect_same(conv.forward(x), want);
    EXPECT_THAT(conv.extra_repr(), HasSubstr(std::string("padding_mode=") + mode));
  }
  nn::Conv1d c1(nn::Conv1dOptions(2, 2, 3).padding("same").padding_mode("circular"));
  c1.to(kFloat64);
  const Tensor x1 = seeded({1, 2, 7}, 4);
  expect_same(c1.forward(x1), conv1d(pad(x1, {1, 1}, "circular"), c1.weight, c1.bias));
  nn::Conv3d c3(nn::Conv3dOptions(1, 1, 3).padding(1).padding_mode("reflect"));
  c3.to(kFloat64);
  const Tensor x3 = seeded({1, 1, 4, 4, 4}, 5);
  expect_same(c3.forward(x3), conv3d(pad(x3, {1, 1, 1, 1, 1, 1}, "reflect"), c3.weight, c3.bias));
  EXPECT_THAT(error_of([] { nn::Conv2d(nn::Conv2dOptions(1, 1, 3).padding_mode("mirror")); }),
              HasSubstr("Conv2d: padding_mode must be 'zeros', 'reflect', 'replicate' or "
                        "'circular', but got 'mirror'"));
  EXPECT_THAT(error_of([] {
                nn::ConvTranspose1d(nn::ConvTranspose1dOptions(1, 1, 3).padding_mode("reflect"));
              }),
              HasSubstr("ConvTranspose1d: only 'zeros' padding_mode is supported, but got "
                        "'reflect'"));
}

TEST(NnExtraModules, Pooling) {
  const Tensor x1 = seeded({2, 3, 9}, 6), x3 = seeded({1, 2, 5, 6, 4}, 7);
  nn::MaxPool1d m1(nn::MaxPool1dOptions(3).stride(2).padding(1));
  expect_same(m1.forward(x1), max_pool1d(x1, 3, 2, 1));
  EXPECT_EQ(m1.forward(x1).sizes().vec(), (std::vector<int64_t>{2, 3, 5}));
  EXPECT_EQ(m1.extra_repr(), "kernel_size=3, stride=2, padding=1, dilation=1, ceil_mode=False");
  nn::MaxPool3d m3(nn::MaxPool3dOptions({2, 3, 2}).ceil_mode(true));
  expect_same(m3.forward(x3), max_pool3d(x3, {2, 3, 2}, {}, {0}, {1}, true));
  EXPECT_EQ(m3.forward(x3).sizes().vec(), (std::vector<int64_t>{1, 2, 3, 2, 2}));
  nn::AvgPool1d a1(nn::AvgPool1dOptions(4).stride(1).count_include_pad(false).padding(2));
  expect_same(a1.forward(x1), avg_pool1d(x1, 4, 1, 2, false, false));
  nn::AvgPool3d a3(nn::AvgPool3dOptions(2).divisor_override(3));
  // With a divisor of 3, each output is the sum of its 2 x 2 x 2 window over 3.
  expect_same(a3.forward(x3), avg_pool3d(x3, 2) * (8.0 / 3.0), 1e-12);
  nn::AvgPool2d a2(2, 2, 0, false, true, 3);
  const Tensor x2 = seeded({1, 1, 4, 4}, 8);
  expect_same(a2.forward(x2), avg_pool2d(x2, 2) * (4.0 / 3.0), 1e-12);
  EXPECT_EQ(a2.extra_repr(), "kernel_size=2, stride=2, padding=0, divisor_override=3");
  // The indices of max_pool3d address the input volume.
  auto [v, i] = F::max_pool3d_with_indices(x3, F::MaxPool3dFuncOptions(2));
  expect_same(v, x3.flatten(2).gather(2, i.flatten(2)).view(v.sizes()));
}

TEST(NnExtraModules, InstanceNorm) {
  nn::InstanceNorm2d plain(3);
  EXPECT_TRUE(plain.named_parameters().empty());
  EXPECT_TRUE(plain.named_buffers().empty());
  nn::InstanceNorm2d m(
      nn::InstanceNorm2dOptions(3).affine(true).track_running_stats(true).momentum(0.5));
  m.to(kFloat64);
  std::vector<std::string> names;
  for (const auto& [k, t] : m.named_buffers()) names.push_back(k);
  std::sort(names.begin(), names.end());
  EXPECT_EQ(names,
            (std::vector<std::string>{"num_batches_tracked", "running_mean", "running_var"}));
  EXPECT_EQ(m.extra_repr(), "3, eps=1e-05, momentum=0.5, affine=True, track_running_stats=True");
  const Tensor x = seeded({2, 3, 4, 5}, 9) * 3 + 1;
  const Tensor y = m.forward(x);
  // Training: each instance normalised by its own statistics.
  const Tensor mean = x.mean({2, 3}, true), var = x.var({2, 3}, 0, true);
  expect_same(y, (x - mean) / (var + 1e-5).sqrt(), 1e-10);
  // Running statistics: the batch average of the instance mean and unbiased variance, momentum 0.5.
  expect_same(m.running_mean, mean.view({2, 3}).mean({0}) * 0.5, 1e-12);
  expect_same(m.running_var, (x.var({2, 3}, 1).mean({0}) + 1) * 0.5, 1e-12);
  EXPECT_EQ(m.num_batches_tracked.item<int64_t>(), 1);
  m.eval();
  const Tensor e = m.forward(x);
  expect_same(
      e, (x - m.running_mean.view({1, 3, 1, 1})) / (m.running_var.view({1, 3, 1, 1}) + 1e-5).sqrt(),
      1e-10);
  // Unbatched input and the functional form.
  nn::InstanceNorm1d m1(4);
  const Tensor u = seeded({4, 6}, 10);
  expect_same(m1.forward(u), F::instance_norm(u.unsqueeze(0)).squeeze(0), 1e-12);
  EXPECT_THAT(error_of([&] {
                m1.forward(seeded({2, 4, 3, 3}, 1));
              }),
              HasSubstr("InstanceNorm1d: expected a 2-D (unbatched) or 3-D (batched) input, but "
                        "got shape [2, 4, 3, 3]"));
}

TEST(NnExtraModules, DistancesShuffleFold) {
  const Tensor a = seeded({4, 5}, 11), b = seeded({4, 5}, 12);
  nn::CosineSimilarity cos(nn::CosineSimilarityOptions().dim(1));
  expect_same(cos.forward(a, b), (a * b).sum({1}) / (a.norm(2, {1}) * b.norm(2, {1})), 1e-12);
  EXPECT_THAT(error_of([&] { cos.forward(a); }),
              HasSubstr("CosineSimilarity: forward takes two inputs"));
  nn::PairwiseDistance pd(nn::PairwiseDistanceOptions().p(1).keepdim(true));
  expect_same(pd.forward(a, b), (a - b + 1e-6).abs().sum({1}, true), 1e-12);
  // normalize with options, and of a zero vector: zero, and (as PyTorch) the gradient of x / eps.
  const Tensor z = zeros({2, 3}, TensorOptions(kFloat64)).requires_grad_(true);
  const Tensor nz = F::normalize(z, F::NormalizeFuncOptions().dim(1));
  EXPECT_EQ(nz.abs().sum().item<double>(), 0.0);
  const Tensor gw = seeded({2, 3}, 13);
  (nz * gw).sum().backward();
  expect_same(z.grad(), gw / 1e-12, 1e-3);
  const Tensor nx = F::normalize(a, F::NormalizeFuncOptions().p(1).dim(-1));
  expect_same(nx.abs().sum({1}), ones({4}, TensorOptions(kFloat64)), 1e-12);

  nn::PixelShuffle ps(2);
  nn::PixelUnshuffle pu(2);
  const Tensor x = seeded({2, 8, 3, 5}, 14);
  EXPECT_EQ(ps.forward(x).sizes().vec(), (std::vector<int64_t>{2, 2, 6, 10}));
  expect_same(pu.forward(ps.forward(x)), x);
  EXPECT_EQ(ps.extra_repr(), "upscale_factor=2");

  // fold(unfold(x)) multiplies each element by the number of blocks that cover it.
  nn::Unfold unfold(nn::UnfoldOptions({2, 3}).padding(1).stride({1, 2}));
  nn::Fold fold(nn::FoldOptions({4, 5}, {2, 3}).padding(1).stride({1, 2}));
  const Tensor img = seeded({1, 2, 4, 5}, 15);
  const Tensor count = fold.forward(unfold.forward(ones_like(img)));
  expect_same(fold.forward(unfold.forward(img)), img * count, 1e-12);
  EXPECT_EQ(count.max().item<double>(), 4.0);  // 2 rows x 2 of the stride-2 column blocks
  EXPECT_EQ(unfold.extra_repr(), "kernel_size=(2, 3), dilation=1, padding=1, stride=(1, 2)");
}

TEST(NnExtraModules, PadInterpolateEmbeddingOptions) {
  const Tensor x = seeded({1, 2, 3, 4}, 16);
  expect_same(F::pad(x, F::PadFuncOptions({4, 4}).mode("circular")).narrow(3, 0, 4), x);
  expect_same(F::pad(x, F::PadFuncOptions({1, 1}).mode("constant").value(2)).select(3, 0),
              full({1, 2, 3}, 2.0, TensorOptions(kFloat64)));
  expect_same(F::interpolate(x, F::InterpolateFuncOptions()
                                    .size(std::vector<int64_t>{6, 8})
                                    .mode("bicubic")
                                    .align_corners(true)),
              interpolate(x, {6, 8}, "bicubic", true));
  expect_same(F::interpolate(x, F::InterpolateFuncOptions()
                                    .scale_factor(std::vector<double>{2, 2})
                                    .mode("nearest-exact")),
              interpolate(x, {2.0, 2.0}, "nearest-exact"));
  EXPECT_THAT(error_of([&] { F::interpolate(x, F::InterpolateFuncOptions()); }),
              HasSubstr("interpolate: exactly one of size and scale_factor must be set"));

  nn::Embedding emb(nn::EmbeddingOptions(5, 3).max_norm(1.0));
  {
    NoGradGuard ng;
    emb.weight.copy_(seeded({5, 3}, 17) * 3);
  }
  const Tensor before = emb.weight.detach().clone();
  const Tensor idx = tensor(std::vector<int64_t>{1, 3, 3});
  const Tensor y = emb.forward(idx);
  const Tensor norms = emb.weight.detach().norm(2, {1});
  EXPECT_LE(norms[1].item<double>(), 1.0 + 1e-6);
  EXPECT_LE(norms[3].item<double>(), 1.0 + 1e-6);
  expect_same(emb.weight.detach()[0], before[0]);  // rows not looked up stay
  expect_same(y[0], emb.weight.detach()[1]);
  EXPECT_THAT(emb.extra_repr(), HasSubstr("max_norm=1"));
}

// ---- error messages

TEST(NnExtraErrors, NameTheOpAndShapes) {
  const Tensor x5 = randn({1, 2, 4, 4, 4}), w5 = randn({3, 2, 2, 2, 2});
  EXPECT_THAT(error_of([&] {
                conv3d(randn({2, 4, 4}), w5);
              }),
              HasSubstr("conv3d: expected a 4-d (unbatched) or 5-d (batched) input, but got input "
                        "of shape [2, 4, 4]"));
  EXPECT_THAT(error_of([&] {
                conv3d(x5, randn({3, 3, 2, 2, 2}));
              }),
              HasSubstr("conv3d: expected input of shape [1, 2, 4, 4, 4] to have 3 channels"));
  EXPECT_THAT(error_of([&] {
                conv3d(x5, randn({3, 2, 6, 1, 1}));
              }),
              HasSubstr("conv3d: the (dilated) kernel size 6 in spatial dim 0 is larger than the "
                        "padded input size 4"));
  EXPECT_THAT(error_of([&] {
                conv3d(x5, w5, {}, {1, 1});
              }),
              HasSubstr("conv3d: stride must have 1 or 3 values, but got 2 values [1, 1]"));
  EXPECT_THAT(error_of([&] {
                conv_transpose1d(randn({1, 3, 5}), randn({2, 2, 3}));
              }),
              HasSubstr("conv_transpose1d: expected input of shape [1, 3, 5] to have 2 channels"));
  EXPECT_THAT(error_of([&] {
                conv_transpose1d(randn({1, 2, 5}), randn({2, 2, 3}), {}, 1, 0, 1);
              }),
              HasSubstr("conv_transpose1d: output_padding 1 must be non-negative and smaller than "
                        "either stride 1 or dilation 1"));
  EXPECT_THAT(error_of([&] { max_pool3d(x5, 2, {}, 2); }),
              HasSubstr("max_pool3d: padding must be non-negative and at most half of the kernel "
                        "size, but got padding 2 with kernel size 2"));
  EXPECT_THAT(error_of([&] {
                max_pool1d(randn({1, 2, 3}), 5);
              }),
              HasSubstr("max_pool1d: the (dilated) kernel size 5 is larger than the padded input "
                        "size 3 (input of shape [1, 2, 3])"));
  EXPECT_THAT(error_of([&] {
                avg_pool1d(randn({2, 3, 4, 5}), 2);
              }),
              HasSubstr("avg_pool1d: expected a 2-d (unbatched) or 3-d (batched) input, but got "
                        "input of shape [2, 3, 4, 5]"));
  EXPECT_THAT(error_of([&] { avg_pool3d(x5, 2, {}, 0, false, true, 0); }),
              HasSubstr("avg_pool3d: divisor_override must be non-zero, but got 0"));
  EXPECT_THAT(error_of([&] {
                avg_pool2d(randn({1, 1, 4, 4}), 2, {}, 0, false, true, 0);
              }),
              HasSubstr("avg_pool2d: divisor_override must be non-zero, but got 0"));
  EXPECT_THAT(error_of([&] {
                instance_norm(randn({2, 3, 1, 1}));
              }),
              HasSubstr("instance_norm: expected more than 1 spatial element when training, but "
                        "got input of shape [2, 3, 1, 1]"));
  EXPECT_THAT(
      error_of([&] {
        instance_norm(randn({2, 3, 4}), {}, {}, randn({4}));
      }),
      HasSubstr("instance_norm: expected running statistics, weight and bias of shape [3]"));
  EXPECT_THAT(error_of([&] {
                instance_norm(randn({2, 3, 4}), {}, {}, {}, {}, false);
              }),
              HasSubstr("instance_norm: use_input_stats=false needs running_mean and running_var"));
  EXPECT_THAT(error_of([&] {
                normalize(tensor(std::vector<int64_t>{1, 2}));
              }),
              HasSubstr("normalize: expected a floating point input, but got int64"));
  EXPECT_THAT(error_of([&] {
                pixel_shuffle(randn({1, 6, 2, 2}), 2);
              }),
              HasSubstr("pixel_shuffle: the channels 6 of the input of shape [1, 6, 2, 2] must be "
                        "divisible by upscale_factor^2 = 4"));
  EXPECT_THAT(error_of([&] {
                pixel_unshuffle(randn({1, 1, 5, 4}), 2);
              }),
              HasSubstr("pixel_unshuffle: the height 5 and width 4 of the input of shape "
                        "[1, 1, 5, 4] must be divisible by downscale_factor 2"));
  EXPECT_THAT(error_of([&] {
                im2col(randn({1, 1, 3, 3}), 4);
              }),
              HasSubstr("unfold: the (dilated) kernel size 4 is larger than the padded spatial "
                        "size 3"));
  EXPECT_THAT(error_of([&] {
                col2im(randn({1, 4, 5}), {3, 3}, 2);
              }),
              HasSubstr("fold: expected size(2) of the input of shape [1, 4, 5] to match the 4 "
                        "sliding blocks (2 x 2)"));
  EXPECT_THAT(error_of([&] {
                col2im(randn({1, 3, 4}), {3, 3}, 2);
              }),
              HasSubstr("fold: expected size(1) of the input of shape [1, 3, 4] to be a non-zero "
                        "multiple of kernel_size[0] * kernel_size[1] = 4"));
  EXPECT_THAT(error_of([&] {
                pad(randn({1, 2, 3}), {4, 0}, "circular");
              }),
              HasSubstr("pad: circular padding (4, 0) must be at most the size 3 of dimension 2"));
  EXPECT_THAT(error_of([&] {
                pad(randn({1, 2, 3}), {3, 0}, "reflect");
              }),
              HasSubstr("pad: reflect padding (3, 0) must be smaller than the size 3"));
  EXPECT_THAT(error_of([&] {
                pad(randn({1, 2, 3}), {1, 1}, "mirror");
              }),
              HasSubstr("pad: unknown mode 'mirror' (expected constant, reflect, replicate or "
                        "circular)"));
  EXPECT_THAT(error_of([&] {
                interpolate(randn({1, 2, 3}), {6}, "bicubic");
              }),
              HasSubstr("interpolate: mode 'bicubic' expects a 4-D input [N, C, H, W], but got "
                        "shape [1, 2, 3]"));
  EXPECT_THAT(error_of([&] {
                interpolate(randn({1, 2, 3}), {6}, "area", true);
              }),
              HasSubstr("interpolate: align_corners can only be set with modes 'bilinear' and "
                        "'bicubic', not 'area'"));
  EXPECT_THAT(error_of([&] {
                interpolate(randn({1, 2, 3}), {6}, "trilinear");
              }),
              HasSubstr("interpolate: unsupported mode 'trilinear'"));
  EXPECT_THAT(error_of([&] {
                embedding_renorm_(randn({3, 2}), tensor(std::vector<int64_t>{3}), 1);
              }),
              HasSubstr("embedding_renorm_: index 3 is out of range for a weight of shape [3, 2]"));
}

}  // namespace
}  // namespace ignis
