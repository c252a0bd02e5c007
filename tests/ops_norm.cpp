// Op-table entries of the normalisation and resampling ops: batch_norm and batch_norm_relu
// (training and eval),
// group_norm, local_response_norm, interpolate (nearest and bilinear). Settings that vary per
// sample (num_groups) are 0-d int64 inputs; the others are bound in the entry's name. The
// references are plain loops in float64 over row-major values.
#include <algorithm>
#include <cmath>

#include "op_table.h"

namespace ignis::testing {
namespace {

using TL = std::vector<Tensor>;
using Values = std::vector<double>;

const std::vector<DType> kFloats = {kFloat32, kFloat64, kBFloat16};

Tensor in(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2) {
  return make_input(shape, seed, lo, hi);
}
Tensor int_t(int64_t v) { return tensor(std::vector<int64_t>{v}).reshape({}); }

/// The sizes of x as a vector, and M = the elements per (n, c) pair.
int64_t inner_of(const Tensor& x) {
  int64_t m = 1;
  for (int64_t d = 2; d < x.dim(); ++d) m *= x.size(d);
  return m;
}

// ---- batch_norm

/// y = (x - mean_c) / sqrt(var_c + eps) * w_c + b_c; mean/var of each channel from the batch
/// (biased var), or given.
Tensor ref_batch_norm(const Tensor& x, const Values* mean_in, const Values* var_in, const Tensor& w,
                      const Tensor& b, double eps) {
  const int64_t n = x.size(0), c = x.size(1), m = inner_of(x);
  const Values v = values(x);
  Values mean(static_cast<size_t>(c)), var(static_cast<size_t>(c));
  for (int64_t ch = 0; ch < c; ++ch) {
    if (mean_in != nullptr) {
      mean[ch] = (*mean_in)[ch];
      var[ch] = (*var_in)[ch];
      continue;
    }
    double s = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < m; ++k) s += v[(i * c + ch) * m + k];
    }
    mean[ch] = s / static_cast<double>(n * m);
    double q = 0;
    for (int64_t i = 0; i < n; ++i) {
      for (int64_t k = 0; k < m; ++k) {
        const double d = v[(i * c + ch) * m + k] - mean[ch];
        q += d * d;
      }
    }
    var[ch] = q / static_cast<double>(n * m);
  }
  const Values wv = w.defined() ? values(w) : Values(static_cast<size_t>(c), 1.0);
  const Values bv = b.defined() ? values(b) : Values(static_cast<size_t>(c), 0.0);
  Values out(v.size());
  for (size_t k = 0; k < v.size(); ++k) {
    const int64_t ch = (static_cast<int64_t>(k) / m) % c;
    out[k] = (v[k] - mean[ch]) / std::sqrt(var[ch] + eps) * wv[ch] + bv[ch];
  }
  return from_values(out, x.sizes());
}

// Sizes cover both CPU paths: rows of M >= 16 contiguous elements, and short rows (M < 16,
// BatchNorm1d's [N, C]) that run across channels.
std::vector<OpSample> batch_norm_samples() {
  return {
      {"[4, 3, 2, 2] affine", {in({4, 3, 2, 2}, 1), in({3}, 2), in({3}, 3)}},
      {"[6, 4] (BatchNorm1d)", {in({6, 4}, 4), in({4}, 5), in({4}, 6)}},
      {"[2, 3, 5] no affine", {in({2, 3, 5}, 7), Tensor(), Tensor()}},
      {"[2, 2, 4, 5] long rows", {in({2, 2, 4, 5}, 8), in({2}, 9), in({2}, 10)}},
      {"noncontiguous [3, 2, 3, 4]",
       {make_noncontiguous({3, 2, 3, 4}, 11), in({2}, 12), in({2}, 13)}},
      {"weight only", {in({3, 2, 4}, 14), in({2}, 15), Tensor()}},
      {"channels-last [3, 2, 4, 5]",
       {in({3, 4, 5, 2}, 16).permute({0, 3, 1, 2}), in({2}, 17), in({2}, 18)}},
      {"channels-last [2, 3, 12, 12] (rows over one chunk)",
       {in({2, 12, 12, 3}, 19).permute({0, 3, 1, 2}), in({3}, 20), in({3}, 21)}},
  };
}

// Channels-last rows run in tiles of whole rows (1024 / 48 = 21 rows of 48 channels: one tile
// and 4 rows left over), and more than 256 channels in blocks of channels, each row a span of
// its own. Too large for a second-order gradcheck (which runs the backward written in ops, not
// these kernels).
std::vector<OpSample> batch_norm_tile_samples() {
  return {
      {"channels-last [1, 48, 5, 5] (a tile of rows and 4 more)",
       {in({1, 5, 5, 48}, 39).permute({0, 3, 1, 2}), in({48}, 40), in({48}, 41),
        in({1, 48, 5, 5}, 44)}},
      {"[4, 300] (BatchNorm1d, two channel blocks)",
       {in({4, 300}, 42), in({300}, 43), Tensor(), in({4, 300}, 45)}},
  };
}

// Training batch norm (x, weight, bias[, other]) with fresh running statistics each call: their
// update must not disturb the output.
Tensor batch_norm_train(const TL& x) {
  const TensorOptions o = TensorOptions(x[0].dtype()).device(x[0].device());
  Tensor rm = zeros({x[0].size(1)}, o), rv = ones({x[0].size(1)}, o);
  return batch_norm(x[0], rm, rv, x[1], x[2], true, 0.1, 1e-5);
}
Tensor batch_norm_train_ref(const TL& x) {
  return ref_batch_norm(x[0], nullptr, nullptr, x[1], x[2], 1e-5);
}

/// relu(y + other) over the values of y (other undefined: relu(y)).
Tensor ref_add_relu(const Tensor& y, const Tensor& other) {
  Values v = values(y);
  const Values o = other.defined() ? values(other) : Values(v.size(), 0.0);
  for (size_t k = 0; k < v.size(); ++k) v[k] = std::max(v[k] + o[k], 0.0);
  return from_values(v, y.sizes());
}

Tensor batch_norm_relu_train(const TL& x) {
  const TensorOptions o = TensorOptions(x[0].dtype()).device(x[0].device());
  Tensor rm = zeros({x[0].size(1)}, o), rv = ones({x[0].size(1)}, o);
  return batch_norm_relu(x[0], x[3], rm, rv, x[1], x[2], true, 0.1, 1e-5);
}
Tensor batch_norm_relu_train_ref(const TL& x) {
  return ref_add_relu(batch_norm_train_ref(x), x[3]);
}

// batch_norm_relu: x, weight, bias, other; the residual in x's shape (for channels-last x, also
// as a plain NCHW tensor: the op brings it to x's layout).
std::vector<OpSample> batch_norm_relu_samples() {
  Tensor cl = in({3, 4, 5, 2}, 56).permute({0, 3, 1, 2});
  return {
      {"[4, 3, 2, 2] affine, residual",
       {in({4, 3, 2, 2}, 50), in({3}, 51), in({3}, 52), in({4, 3, 2, 2}, 53)}},
      {"[6, 4] no residual", {in({6, 4}, 54), in({4}, 55), in({4}, 57), Tensor()}},
      {"[2, 2, 4, 5] long rows, no affine",
       {in({2, 2, 4, 5}, 58), Tensor(), Tensor(), in({2, 2, 4, 5}, 59)}},
      {"channels-last [3, 2, 4, 5], NCHW residual",
       {cl, in({2}, 60), in({2}, 61), in({3, 2, 4, 5}, 62)}},
      {"channels-last, channels-last residual",
       {cl, in({2}, 63), in({2}, 64), in({3, 4, 5, 2}, 65).permute({0, 3, 1, 2})}},
      {"noncontiguous [3, 2, 3, 4], no residual",
       {make_noncontiguous({3, 2, 3, 4}, 66), in({2}, 67), in({2}, 68), Tensor()}},
  };
}

// Training batch norm: statistics over the batch, so float32 and bfloat16 sums round more.
OpInfo training_tolerances(OpInfo o) {
  o.dtypes = kFloats;
  o.atol32 = o.rtol32 = 1e-4;
  o.atol_bf16 = o.rtol_bf16 = 5e-2;
  return o;
}

IGNIS_OP_INFO(training_tolerances(OpInfo{.name = "batch_norm(training)",
                                         .fn = batch_norm_train,
                                         .ref = batch_norm_train_ref,
                                         .samples = batch_norm_samples,
                                         .ops = {"batch_norm"}}));

IGNIS_OP_INFO(training_tolerances(OpInfo{
    .name = "batch_norm(training, no running stats)",
    .fn = [](const TL& x) { return batch_norm(x[0], {}, {}, x[1], x[2], true, 0.1, 1e-3); },
    .ref = [](const TL& x) { return ref_batch_norm(x[0], nullptr, nullptr, x[1], x[2], 1e-3); },
    .samples = batch_norm_samples,
    .ops = {"batch_norm"}}));

IGNIS_OP_INFO(OpInfo{
    .name = "batch_norm(eval)",
    .fn = [](const TL& x) { return batch_norm(x[0], x[1], x[2], x[3], x[4], false, 0.1, 1e-5); },
    .ref =
        [](const TL& x) {
          const Values mean = values(x[1]), var = values(x[2]);
          return ref_batch_norm(x[0], &mean, &var, x[3], x[4], 1e-5);
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"[2, 3, 2, 2]",
               {in({2, 3, 2, 2}, 21), in({3}, 22), in({3}, 23, 0.5, 2), in({3}, 24), in({3}, 25)}},
              {"[5, 3] no affine",
               {in({5, 3}, 26), in({3}, 27), in({3}, 28, 0.5, 2), Tensor(), Tensor()}},
              {"[2, 2, 17] long rows",
               {in({2, 2, 17}, 29), in({2}, 30), in({2}, 31, 0.5, 2), in({2}, 32), in({2}, 33)}},
              {"empty batch",
               {in({0, 3, 2}, 34), in({3}, 35), in({3}, 36, 0.5, 2), in({3}, 37), in({3}, 38)}},
          };
        },
    .dtypes = kFloats,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .grad_inputs = {0, 3, 4},
    .ops = {"batch_norm"}});

IGNIS_OP_INFO(training_tolerances(OpInfo{.name = "batch_norm_relu(training)",
                                         .fn = batch_norm_relu_train,
                                         .ref = batch_norm_relu_train_ref,
                                         .samples = batch_norm_relu_samples,
                                         .ops = {"batch_norm_relu"}}));

IGNIS_OP_INFO(OpInfo{.name = "batch_norm(training, tiles)",
                     .fn = batch_norm_train,
                     .ref = batch_norm_train_ref,
                     .samples = batch_norm_tile_samples,
                     .atol32 = 1e-4,
                     .rtol32 = 1e-4,
                     .grad_inputs = {0, 1, 2},
                     .twice_differentiable = false,
                     .ops = {"batch_norm"}});

IGNIS_OP_INFO(OpInfo{.name = "batch_norm_relu(training, tiles)",
                     .fn = batch_norm_relu_train,
                     .ref = batch_norm_relu_train_ref,
                     .samples = batch_norm_tile_samples,
                     .atol32 = 1e-4,
                     .rtol32 = 1e-4,
                     .twice_differentiable = false,
                     .ops = {"batch_norm_relu"}});

IGNIS_OP_INFO(OpInfo{
    .name = "batch_norm_relu(eval)",
    .fn =
        [](const TL& x) {
          return batch_norm_relu(x[0], x[5], x[1], x[2], x[3], x[4], false, 0.1, 1e-5);
        },
    .ref =
        [](const TL& x) {
          const Values mean = values(x[1]), var = values(x[2]);
          return ref_add_relu(ref_batch_norm(x[0], &mean, &var, x[3], x[4], 1e-5), x[5]);
        },
    .samples =
        [] {
          return std::vector<OpSample>{
              {"[2, 3, 2, 2] residual",
               {in({2, 3, 2, 2}, 70), in({3}, 71), in({3}, 72, 0.5, 2), in({3}, 73), in({3}, 74),
                in({2, 3, 2, 2}, 75)}},
              {"[5, 3] no affine, no residual",
               {in({5, 3}, 76), in({3}, 77), in({3}, 78, 0.5, 2), Tensor(), Tensor(), Tensor()}},
              {"channels-last [2, 4, 3, 3] residual",
               {in({2, 3, 3, 4}, 79).permute({0, 3, 1, 2}), in({4}, 80), in({4}, 81, 0.5, 2),
                in({4}, 82), in({4}, 83), in({2, 4, 3, 3}, 84)}},
              {"empty batch",
               {in({0, 3, 2}, 85), in({3}, 86), in({3}, 87, 0.5, 2), in({3}, 88), in({3}, 89),
                in({0, 3, 2}, 90)}},
          };
        },
    .dtypes = kFloats,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .grad_inputs = {0, 3, 4, 5},
    .ops = {"batch_norm_relu"}});

// ---- group_norm

Tensor ref_group_norm(const TL& x) {
  const Tensor& t = x[0];
  const int64_t groups = x[3].item<int64_t>();
  const int64_t n = t.size(0), c = t.size(1), m = inner_of(t);
  const int64_t per = c / groups * m;  // elements of one group, contiguous
  const Values v = values(t);
  const Values wv = x[1].defined() ? values(x[1]) : Values(static_cast<size_t>(c), 1.0);
  const Values bv = x[2].defined() ? values(x[2]) : Values(static_cast<size_t>(c), 0.0);
  Values out(v.size());
  for (int64_t grp = 0; grp < n * groups; ++grp) {
    double s = 0, q = 0;
    for (int64_t k = 0; k < per; ++k) s += v[grp * per + k];
    const double mu = s / static_cast<double>(per);
    for (int64_t k = 0; k < per; ++k) q += (v[grp * per + k] - mu) * (v[grp * per + k] - mu);
    const double inv = 1 / std::sqrt(q / static_cast<double>(per) + 1e-5);
    for (int64_t k = 0; k < per; ++k) {
      const int64_t idx = grp * per + k, ch = (idx / m) % c;
      out[idx] = (v[idx] - mu) * inv * wv[ch] + bv[ch];
    }
  }
  return from_values(out, t.sizes());
}

IGNIS_OP_INFO(OpInfo{
    .name = "group_norm",
    .fn = [](const TL& x) { return group_norm(x[0], x[3].item<int64_t>(), x[1], x[2], 1e-5); },
    .ref = ref_group_norm,
    .samples =
        [] {
          return std::vector<OpSample>{
              {"[2, 4, 3] 2 groups", {in({2, 4, 3}, 41), in({4}, 42), in({4}, 43), int_t(2)}},
              {"[2, 6, 2, 2] 3 groups", {in({2, 6, 2, 2}, 44), in({6}, 45), in({6}, 46), int_t(3)}},
              {"[3, 4] 1 group, no affine", {in({3, 4}, 47), Tensor(), Tensor(), int_t(1)}},
              {"[1, 4, 3] instance norm", {in({1, 4, 3}, 48), in({4}, 49), in({4}, 50), int_t(4)}},
              {"noncontiguous",
               {make_noncontiguous({2, 4, 3}, 51), in({4}, 52), in({4}, 53), int_t(2)}},
          };
        },
    .dtypes = kFloats,
    .atol32 = 1e-4,
    .rtol32 = 1e-4,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .host_params = {3}});

// ---- local_response_norm

Tensor ref_lrn(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  const int64_t n = x.size(0), c = x.size(1), m = inner_of(x);
  const Values v = values(x);
  Values out(v.size());
  for (int64_t i = 0; i < n; ++i) {
    for (int64_t ch = 0; ch < c; ++ch) {
      for (int64_t p = 0; p < m; ++p) {
        double s = 0;
        for (int64_t j = ch - size / 2; j <= ch + (size - 1) / 2; ++j) {
          if (j >= 0 && j < c) s += v[(i * c + j) * m + p] * v[(i * c + j) * m + p];
        }
        const int64_t idx = (i * c + ch) * m + p;
        out[idx] = v[idx] / std::pow(k + alpha / static_cast<double>(size) * s, beta);
      }
    }
  }
  return from_values(out, x.sizes());
}

std::vector<OpSample> lrn_samples() {
  return {
      {"[2, 5, 3]", {in({2, 5, 3}, 61)}},
      {"[1, 4, 2, 3]", {in({1, 4, 2, 3}, 62)}},
      {"2 channels", {in({2, 2, 2}, 63)}},
      {"noncontiguous", {make_noncontiguous({2, 4, 3}, 64)}},
  };
}

IGNIS_OP_INFO(OpInfo{.name = "local_response_norm(size=3, alpha=0.6, beta=0.75, k=1)",
                     .fn = [](const TL& x) { return local_response_norm(x[0], 3, 0.6, 0.75, 1.0); },
                     .ref = [](const TL& x) { return ref_lrn(x[0], 3, 0.6, 0.75, 1.0); },
                     .samples = lrn_samples,
                     .dtypes = kFloats,
                     .ops = {"local_response_norm"}});

IGNIS_OP_INFO(OpInfo{.name = "local_response_norm(size=2, alpha=1, beta=0.5, k=2)",
                     .fn = [](const TL& x) { return local_response_norm(x[0], 2, 1.0, 0.5, 2.0); },
                     .ref = [](const TL& x) { return ref_lrn(x[0], 2, 1.0, 0.5, 2.0); },
                     .samples = lrn_samples,
                     .dtypes = kFloats,
                     .ops = {"local_response_norm"}});

IGNIS_OP_INFO(OpInfo{.name = "local_response_norm(size=7 > channels)",
                     .fn = [](const TL& x) { return local_response_norm(x[0], 7, 0.3, 0.75, 1.0); },
                     .ref = [](const TL& x) { return ref_lrn(x[0], 7, 0.3, 0.75, 1.0); },
                     .samples = lrn_samples,
                     .dtypes = kFloats,
                     .ops = {"local_response_norm"}});

// ---- dropout, feature_dropout (dropout2d)

// Random ops: the mask is drawn after manual_seed, so every call (gradcheck's too) draws the same
// one. With p = 0.5 the result y + 2 x (1 - kept), kept = 1 where y is nonzero (per element, or
// per channel for feature_dropout), equals 2 x exactly when every kept value is x / (1 - p) and
// every dropped one (a whole channel for feature_dropout) is 0.
Tensor dropout_identity(const Tensor& x, const Tensor& y, bool per_channel) {
  Tensor kept;
  {
    NoGradGuard ng;
    Tensor nz = (y != 0).to(y.dtype());
    if (per_channel) {
      std::vector<int64_t> dims;
      for (int64_t d = 2; d < y.dim(); ++d) dims.push_back(d);
      nz = (nz.sum(dims, true) > 0).to(y.dtype());
    }
    kept = nz;
  }
  return y + x * 2 * (1 - kept);
}

Tensor ref_twice(const TL& x) {
  return ref_elementwise({x[0]}, [](const Values& v) { return 2 * v[0]; });
}

IGNIS_OP_INFO(OpInfo{.name = "dropout",
                     .fn =
                         [](const TL& x) {
                           manual_seed(11);
                           return dropout_identity(x[0], nn::functional::dropout(x[0], 0.5), false);
                         },
                     .ref = ref_twice,
                     .samples = [] { return elementwise_samples(1); },
                     .dtypes = {kFloat32, kFloat64}});

IGNIS_OP_INFO(OpInfo{.name = "feature_dropout",
                     .fn =
                         [](const TL& x) {
                           manual_seed(12);
                           return dropout_identity(x[0], dropout2d(x[0], 0.5), true);
                         },
                     .ref = ref_twice,
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"[4, 5, 3]", {in({4, 5, 3}, 71)}},
                               {"[3, 4, 2, 3]", {in({3, 4, 2, 3}, 72)}},
                               {"noncontiguous", {make_noncontiguous({2, 6, 2, 2}, 73)}},
                               {"empty batch", {in({0, 3, 2}, 74)}},
                           };
                         },
                     .dtypes = {kFloat32, kFloat64}});

// ---- embedding

// Rows of the weight at the indices (a padding row too: PyTorch returns the weight's row).
Tensor ref_embedding(const TL& x) {
  const Tensor idx = x[0].to(kInt64).contiguous();
  const int64_t dim = x[1].size(1);
  const Values w = values(x[1]);
  Values out;
  for (int64_t i = 0; i < idx.numel(); ++i) {
    const int64_t r = idx.data_ptr<int64_t>()[i];
    for (int64_t j = 0; j < dim; ++j) out.push_back(w[r * dim + j]);
  }
  Shape shape = idx.sizes().shape();
  shape.push_back(dim);
  return from_values(out, shape);
}

std::vector<OpSample> embedding_samples() {
  return {
      {"[2, 3] indices",
       {tensor(std::vector<int64_t>{0, 4, 1, 1, 3, 2}).reshape({2, 3}), in({5, 4}, 81)}},
      {"0-d index", {tensor(std::vector<int64_t>{2}).reshape({}), in({3, 2}, 82)}},
      {"int32 indices", {tensor(std::vector<int64_t>{1, 0, 1}, kInt32), in({2, 3}, 83)}},
      {"noncontiguous weight",
       {tensor(std::vector<int64_t>{2, 0, 1, 2}), make_noncontiguous({3, 4}, 84)}},
      {"empty indices", {tensor(std::vector<int64_t>{}), in({4, 3}, 85)}},
  };
}

IGNIS_OP_INFO(OpInfo{.name = "embedding",
                     .fn = [](const TL& x) { return nn::functional::embedding(x[0], x[1]); },
                     .ref = [](const TL& x) { return ref_embedding(x); },
                     .samples = embedding_samples,
                     .dtypes = kFloats});

// With padding_idx the padding row's gradient is zero by definition, not its derivative: the
// entry masks that row of the weight to zero first, so that gradcheck compares zero with zero.
Tensor zero_row_1(const Tensor& w) {
  if (w.size(0) < 2) return w;
  Tensor keep = ones({w.size(0), 1}, w.options());
  keep.index_put_({1}, 0.0);
  return w * keep;
}
IGNIS_OP_INFO(OpInfo{.name = "embedding(padding_idx=1)",
                     .fn =
                         [](const TL& x) {
                           return nn::functional::embedding(x[0], zero_row_1(x[1]), 1);
                         },
                     .ref = [](const TL& x) { return ref_embedding({x[0], zero_row_1(x[1])}); },
                     .samples = embedding_samples,
                     .dtypes = kFloats,
                     .ops = {"embedding"}});

// ---- layer_norm

// Normalises each row of the trailing `m` elements (biased variance), then w * y + b.
Tensor ref_layer_norm(const TL& x) {
  const Values v = values(x[0]);
  const int64_t m = x[3].numel() == 0 ? 1 : [&] {
    int64_t p = 1;
    for (int64_t d : values(x[3])) p *= d;
    return p;
  }();
  const Values w = x[1].defined() ? values(x[1]) : Values(static_cast<size_t>(m), 1.0);
  const Values b = x[2].defined() ? values(x[2]) : Values(static_cast<size_t>(m), 0.0);
  Values out(v.size());
  for (size_t r = 0; r * m < v.size(); ++r) {
    double s = 0, q = 0;
    for (int64_t k = 0; k < m; ++k) s += v[r * m + k];
    const double mu = s / static_cast<double>(m);
    for (int64_t k = 0; k < m; ++k) q += (v[r * m + k] - mu) * (v[r * m + k] - mu);
    const double inv = 1 / std::sqrt(q / static_cast<double>(m) + 1e-5);
    for (int64_t k = 0; k < m; ++k) out[r * m + k] = (v[r * m + k] - mu) * inv * w[k] + b[k];
  }
  return from_values(out, x[0].sizes());
}

// Inputs: x, weight, bias, normalized_shape (int64).
IGNIS_OP_INFO(OpInfo{
    .name = "layer_norm",
    .fn =
        [](const TL& x) {
          const Tensor s = x[3].contiguous();
          const std::vector<int64_t> shape(s.data_ptr<int64_t>(),
                                           s.data_ptr<int64_t>() + s.numel());
          return nn::functional::layer_norm(x[0], shape, x[1], x[2]);
        },
    .ref = ref_layer_norm,
    .samples =
        [] {
          auto shape = [](std::vector<int64_t> v) { return tensor(v); };
          return std::vector<OpSample>{
              {"[3, 5] over [5]", {in({3, 5}, 91), in({5}, 92), in({5}, 93), shape({5})}},
              {"[2, 3, 4] over [3, 4]",
               {in({2, 3, 4}, 94), in({3, 4}, 95), in({3, 4}, 96), shape({3, 4})}},
              {"no affine", {in({4, 6}, 97), Tensor(), Tensor(), shape({6})}},
              {"noncontiguous, no bias",
               {make_noncontiguous({4, 3}, 98), in({3}, 99), Tensor(), shape({3})}},
              {"empty rows", {in({0, 4}, 100), in({4}, 101), in({4}, 102), shape({4})}},
          };
        },
    .dtypes = kFloats,
    .atol32 = 1e-4,
    .rtol32 = 1e-4,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .host_params = {3}});

// ---- rms_norm

// Each row of the trailing `m` elements over its root mean square (eps 1e-6), then times w.
Tensor ref_rms_norm(const TL& x) {
  const Values v = values(x[0]);
  int64_t m = 1;
  for (int64_t d : values(x[2])) m *= d;
  const Values w = x[1].defined() ? values(x[1]) : Values(static_cast<size_t>(m), 1.0);
  Values out(v.size());
  for (size_t r = 0; r * m < v.size(); ++r) {
    double q = 0;
    for (int64_t k = 0; k < m; ++k) q += v[r * m + k] * v[r * m + k];
    const double inv = 1 / std::sqrt(q / static_cast<double>(m) + 1e-6);
    for (int64_t k = 0; k < m; ++k) out[r * m + k] = v[r * m + k] * inv * w[k];
  }
  return from_values(out, x[0].sizes());
}

// Inputs: x, weight, normalized_shape (int64).
IGNIS_OP_INFO(OpInfo{
    .name = "rms_norm",
    .fn =
        [](const TL& x) {
          const Tensor s = x[2].contiguous();
          const std::vector<int64_t> shape(s.data_ptr<int64_t>(),
                                           s.data_ptr<int64_t>() + s.numel());
          return nn::functional::rms_norm(x[0], shape, x[1], 1e-6);
        },
    .ref = ref_rms_norm,
    .samples =
        [] {
          auto shape = [](std::vector<int64_t> v) { return tensor(v); };
          return std::vector<OpSample>{
              {"[3, 5] over [5]", {in({3, 5}, 111), in({5}, 112), shape({5})}},
              {"[2, 3, 4] over [3, 4]", {in({2, 3, 4}, 113), in({3, 4}, 114), shape({3, 4})}},
              {"no weight", {in({4, 6}, 115), Tensor(), shape({6})}},
              {"noncontiguous", {make_noncontiguous({4, 3}, 116), in({3}, 117), shape({3})}},
              {"empty rows", {in({0, 4}, 118), in({4}, 119), shape({4})}},
          };
        },
    .dtypes = kFloats,
    .atol32 = 1e-4,
    .rtol32 = 1e-4,
    .atol_bf16 = 5e-2,
    .rtol_bf16 = 5e-2,
    .host_params = {2}});

// ---- interpolate

/// The exact floor(dst * in / out) (PyTorch's "nearest" for sizes), clamped to the input.
int64_t ref_nearest(int64_t dst, int64_t num, int64_t den, int64_t in) {
  return std::min(dst * num / den, in - 1);
}

/// Source coordinate of a bilinear output index (PyTorch's rules).
struct Lerp {
  int64_t i0, i1;
  double lam;
};
Lerp ref_lerp(int64_t dst, int64_t in, int64_t out, double scale, bool align_corners) {
  double src = align_corners ? (out > 1 ? static_cast<double>(in - 1) / (out - 1) * dst : 0.0)
                             : std::max((dst + 0.5) * scale - 0.5, 0.0);
  const auto i0 = std::min(static_cast<int64_t>(src), in - 1);
  return {i0, std::min(i0 + 1, in - 1), std::min(src - static_cast<double>(i0), 1.0)};
}

/// Nearest resampling of the last dims of x to `out` with source index floor(dst * num/den).
Tensor ref_interp_nearest(const Tensor& x, const std::vector<int64_t>& out,
                          const std::vector<std::pair<int64_t, int64_t>>& ratio) {
  const int64_t n = x.size(0) * x.size(1);
  const Values v = values(x);
  if (x.dim() == 3) {
    const int64_t l = x.size(2);
    Values o;
    for (int64_t p = 0; p < n; ++p) {
      for (int64_t j = 0; j < out[0]; ++j) {
        o.push_back(v[p * l + ref_nearest(j, ratio[0].first, ratio[0].second, l)]);
      }
    }
    return from_values(o, {x.size(0), x.size(1), out[0]});
  }
  const int64_t h = x.size(2), w = x.size(3);
  Values o;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < out[0]; ++i) {
      for (int64_t j = 0; j < out[1]; ++j) {
        const int64_t si = ref_nearest(i, ratio[0].first, ratio[0].second, h);
        const int64_t sj = ref_nearest(j, ratio[1].first, ratio[1].second, w);
        o.push_back(v[(p * h + si) * w + sj]);
      }
    }
  }
  return from_values(o, {x.size(0), x.size(1), out[0], out[1]});
}

Tensor ref_interp_bilinear(const Tensor& x, int64_t oh, int64_t ow, double sh, double sw,
                           bool align_corners) {
  const int64_t n = x.size(0) * x.size(1), h = x.size(2), w = x.size(3);
  const Values v = values(x);
  Values o;
  for (int64_t p = 0; p < n; ++p) {
    for (int64_t i = 0; i < oh; ++i) {
      const Lerp a = ref_lerp(i, h, oh, sh, align_corners);
      for (int64_t j = 0; j < ow; ++j) {
        const Lerp b = ref_lerp(j, w, ow, sw, align_corners);
        auto at = [&](int64_t r, int64_t c) { return v[(p * h + r) * w + c]; };
        o.push_back((1 - a.lam) * ((1 - b.lam) * at(a.i0, b.i0) + b.lam * at(a.i0, b.i1)) +
                    a.lam * ((1 - b.lam) * at(a.i1, b.i0) + b.lam * at(a.i1, b.i1)));
      }
    }
  }
  return from_values(o, {x.size(0), x.size(1), oh, ow});
}

std::vector<OpSample> image_samples() {
  return {
      {"[1, 2, 3, 4]", {in({1, 2, 3, 4}, 71)}},
      {"[2, 1, 2, 3]", {in({2, 1, 2, 3}, 72)}},
      {"noncontiguous", {make_noncontiguous({1, 2, 3, 4}, 73)}},
  };
}
const std::vector<DType> kMove = {kFloat32, kFloat64, kBFloat16, kInt64};

IGNIS_OP_INFO(OpInfo{
    .name = "interpolate(nearest, size [5, 7])",
    .fn =
        [](const TL& x) {
          return interpolate(x[0], {5, 7}, "nearest");
        },
    .ref =
        [](const TL& x) {
          return ref_interp_nearest(x[0], {5, 7}, {{x[0].size(2), 5}, {x[0].size(3), 7}});
        },
    .samples = image_samples,
    .dtypes = kMove,
    .ops = {"interpolate.size"}});

IGNIS_OP_INFO(OpInfo{
    .name = "interpolate(nearest, scale 2 and 0.5)",
    .fn =
        [](const TL& x) {
          return interpolate(x[0], {2.0, 0.5}, "nearest");
        },
    .ref =
        [](const TL& x) {
          return ref_interp_nearest(x[0], {x[0].size(2) * 2, x[0].size(3) / 2}, {{1, 2}, {2, 1}});
        },
    .samples = image_samples,
    .dtypes = kMove,
    .ops = {"interpolate.scale_factor"}});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(nearest 1-d, scale 2.5)",
                     .fn = [](const TL& x) { return interpolate(x[0], {2.5}, "nearest"); },
                     .ref =
                         [](const TL& x) {
                           const auto out = static_cast<int64_t>(std::floor(x[0].size(2) * 2.5));
                           return ref_interp_nearest(x[0], {out}, {{2, 5}});
                         },
                     .samples =
                         [] {
                           return std::vector<OpSample>{
                               {"[2, 3, 4]", {in({2, 3, 4}, 74)}},
                               {"[1, 2, 5] noncontiguous", {make_noncontiguous({1, 2, 5}, 75)}}};
                         },
                     .dtypes = kMove});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(bilinear, size [5, 7])",
                     .fn =
                         [](const TL& x) {
                           return interpolate(x[0], {5, 7}, "bilinear");
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_interp_bilinear(x[0], 5, 7, x[0].size(2) / 5.0,
                                                      x[0].size(3) / 7.0, false);
                         },
                     .samples = image_samples,
                     .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(bilinear, align_corners, size [4, 6])",
                     .fn =
                         [](const TL& x) {
                           return interpolate(x[0], {4, 6}, "bilinear", true);
                         },
                     .ref = [](const TL& x) { return ref_interp_bilinear(x[0], 4, 6, 0, 0, true); },
                     .samples = image_samples,
                     .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(bilinear, downsample [2, 2])",
                     .fn =
                         [](const TL& x) {
                           return interpolate(x[0], {2, 2}, "bilinear");
                         },
                     .ref =
                         [](const TL& x) {
                           return ref_interp_bilinear(x[0], 2, 2, x[0].size(2) / 2.0,
                                                      x[0].size(3) / 2.0, false);
                         },
                     .samples = image_samples,
                     .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(bilinear, scale 1.5, align_corners)",
                     .fn =
                         [](const TL& x) {
                           return interpolate(x[0], {1.5, 1.5}, "bilinear", true);
                         },
                     .ref =
                         [](const TL& x) {
                           const auto oh = static_cast<int64_t>(x[0].size(2) * 1.5);
                           const auto ow = static_cast<int64_t>(x[0].size(3) * 1.5);
                           return ref_interp_bilinear(x[0], oh, ow, 0, 0, true);
                         },
                     .samples = image_samples,
                     .dtypes = kFloats});

IGNIS_OP_INFO(OpInfo{.name = "interpolate(bilinear, scale 1.5)",
                     .fn =
                         [](const TL& x) {
                           return interpolate(x[0], {1.5, 1.5}, "bilinear");
                         },
                     .ref =
                         [](const TL& x) {
                           const auto oh = static_cast<int64_t>(x[0].size(2) * 1.5);
                           const auto ow = static_cast<int64_t>(x[0].size(3) * 1.5);
                           return ref_interp_bilinear(x[0], oh, ow, 1 / 1.5, 1 / 1.5, false);
                         },
                     .samples = image_samples,
                     .dtypes = kFloats});

}  // namespace
}  // namespace ignis::testing
