// Inputs that repeat as blocks of rows in graph mode's fused kernels (jit/row_layout.h): a
// position table [T, D] against [B, T, D], a causal mask [T, T], a padding mask [B, 1, 1, T]
// and a mask per batch [B, 1, T, T] against attention scores [B, H, T, T], a gate per batch
// [B, 1, 1]. The CPU's kernels read them
// a chunk of rows at a time instead of materialising them at the output's shape; the results are
// eager's, and bit for bit those of the same inputs materialised by the caller (dropout included).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>
#include <vector>

#include "fusion_test_util.h"
#include "ignis/ignis.h"
#include "jit/passes.h"
#include "jit/row_layout.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

using ignis::testing::Backend;
using ignis::testing::expect_close;
using ignis::testing::kBackends;
using ignis::testing::uniform;

namespace {

/// The elements of each dense input the kernel reads.
std::vector<int64_t> lens(const jit::detail::RowLayout& l) {
  std::vector<int64_t> n;
  for (const Tensor& t : l.keep) n.push_back(t.numel());
  return n;
}

TEST(RowLayout, BlocksAreReadAChunkOfRowsAtATime) {
  using jit::detail::lay_out_rows;
  const int64_t B = 2, H = 3, T = 32;
  const Tensor s = zeros({B, H, T, T});
  const Tensor causal = zeros({T, T}, kBool), padding = zeros({B, 1, 1, T}, kBool);
  const Tensor scale = zeros({});
  // Rows (b, h, i) of T: the causal mask's row is i (q 1, p T), the padding's b (q H T, p B).
  auto l = lay_out_rows({s, causal, padding, scale}, {B, H, T, T}, 1, true);
  EXPECT_EQ(l.rows, B * H * T);
  EXPECT_EQ(l.cols, T);
  EXPECT_EQ(l.chunk, T);
  EXPECT_EQ(l.layouts, "fFRs");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(B * H * T * T, T * T, B * T, 1));
  ASSERT_EQ(l.maps[2].runs, 1);
  EXPECT_EQ(l.maps[2].run[0].q, H * T);
  EXPECT_EQ(l.maps[2].run[0].p, B);
  EXPECT_EQ(std::string() + l.native_letter(0) + l.native_letter(1) + l.native_letter(3), "fbs");
  // The chunk from row 2 T: batch 0, head 2 (padding row 0); from row 5 T: batch 1, head 2.
  std::vector<const void*> at;
  l.at(l.ptrs, 2 * T, 0, at);
  EXPECT_EQ(at[0], static_cast<const void*>(s.data_ptr<float>() + 2 * T * T));
  EXPECT_EQ(at[1], l.ptrs[1]);
  EXPECT_EQ(at[2], l.ptrs[2]);
  EXPECT_EQ(at[3], l.ptrs[3]);
  l.at(l.ptrs, 5 * T, 0, at);
  EXPECT_EQ(at[1], l.ptrs[1]);
  EXPECT_EQ(at[2], static_cast<const void*>(static_cast<const char*>(l.ptrs[2]) + T));
  l.at(l.ptrs, 5 * T, sizeof(double), at);  // the interpreter's copies, as T
  EXPECT_EQ(at[2], static_cast<const void*>(static_cast<const char*>(l.ptrs[2]) + T * 8));
  // Pieces of [T / 2, 3 T + 3) elements split at the chunks' starts.
  std::vector<std::vector<int64_t>> pieces;
  l.for_each_chunk(T / 2, 3 * T + 3, 1, [&](int64_t r0, int64_t first, int64_t b, int64_t e) {
    pieces.push_back({r0, first, b, e});
  });
  EXPECT_EQ(pieces, (std::vector<std::vector<int64_t>>{{0, 0, T / 2, T},
                                                       {T, T, T, 2 * T},
                                                       {2 * T, 2 * T, 2 * T, 3 * T},
                                                       {3 * T, 3 * T, 3 * T, 3 * T + 3}}));

  // On a GPU (no chunks) the blocks are materialised at the output's shape.
  l = lay_out_rows({s, causal, padding, scale}, {B, H, T, T}, 1, false);
  EXPECT_EQ(l.chunk, l.rows);
  EXPECT_EQ(l.layouts, "fFFs");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(B * H * T * T, B * H * T * T, B * H * T * T, 1));

  // A value per row repeated as a block ([T, 1] against [B, T, D]) and a gate per batch.
  l = lay_out_rows({zeros({4, T, 16}), zeros({T, 1}), zeros({4, 1, 1})}, {4, T, 16}, 1, true);
  EXPECT_EQ(l.layouts, "fcs");
  EXPECT_EQ(l.chunk, T);
  EXPECT_THAT(lens(l), ::testing::ElementsAre(4 * T * 16, T, 4));

  // Chunks under 256 elements: materialised ([4, 6] blocks of 24 elements).
  l = lay_out_rows({zeros({50, 4, 6}), zeros({4, 6})}, {50, 4, 6}, 1, true);
  EXPECT_EQ(l.chunk, l.rows);
  EXPECT_EQ(l.layouts, "ff");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(1200, 1200));

  // Kept dims that are not consecutive: a mask per batch [B, 1, T, T] against [B, H, T, T]
  // (rows (b, h, i) read row b T + i: two runs, chunks of T rows), and the like with a value
  // per row ([B, 1, T, 1] against [B, H, T, D]).
  const Tensor per_batch = zeros({B, 1, T, T}, kBool);
  l = lay_out_rows({s, per_batch}, {B, H, T, T}, 1, true);
  EXPECT_EQ(l.chunk, T);
  EXPECT_EQ(l.layouts, "fF");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(B * H * T * T, B * T * T));
  ASSERT_EQ(l.maps[1].runs, 2);
  EXPECT_EQ(l.maps[1].run[1].q, H * T);
  EXPECT_EQ(l.maps[1].run[1].s, T);
  l.at(l.ptrs, (1 * H + 2) * T, 0, at);  // batch 1, head 2: the mask's rows from T
  EXPECT_EQ(at[1], static_cast<const void*>(per_batch.data_ptr<bool>() + T * T));
  l = lay_out_rows({zeros({B, 1, T, 16}), zeros({B, 1, T, 1})}, {B, H, T, 16}, 1, true);
  EXPECT_EQ(l.layouts, "fc");
  EXPECT_EQ(l.chunk, T);
  EXPECT_THAT(lens(l), ::testing::ElementsAre(B * T * 16, B * T));
  // More than four runs (every other dim of a rank-9 output kept): materialised.
  l = lay_out_rows({zeros({2, 1, 2, 1, 2, 1, 2, 1, 2, 256})}, {2, 2, 2, 2, 2, 2, 2, 2, 2, 256}, 1,
                   true);
  EXPECT_EQ(l.layouts, "f");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(512 * 256));
  l = lay_out_rows({zeros({2, 1, 2, 1, 2, 1, 2, 1, 256})}, {2, 2, 2, 2, 2, 2, 2, 2, 256}, 1, true);
  EXPECT_EQ(l.maps[0].runs, 4);
  EXPECT_EQ(l.chunk, 2);
  EXPECT_THAT(lens(l), ::testing::ElementsAre(16 * 256));

  // Nothing repeated along rows: one row of everything (the flat loop).
  l = lay_out_rows({zeros({8, 16}), zeros({1, 1})}, {8, 16}, 1, true, -1, true);
  EXPECT_EQ(l.rows, 1);
  EXPECT_EQ(l.cols, 128);
  EXPECT_EQ(l.layouts, "fs");

  // Rows of two trailing dims; a reduction's input 0 without a prologue is read in full.
  l = lay_out_rows({zeros({T, 16}), zeros({5, T, 16})}, {5, T, 16}, 2, true, 0);
  EXPECT_EQ(l.rows, 5);
  EXPECT_EQ(l.cols, T * 16);
  EXPECT_EQ(l.layouts, "ff");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(5 * T * 16, 5 * T * 16));
  l = lay_out_rows({zeros({5, T, 16}), zeros({T, 16})}, {5, T, 16}, 2, true, 0);
  EXPECT_EQ(l.layouts, "fr");

  // Expanded views are read as what they expand (no copy at the rows' shape): a value per row,
  // a repeated row, one value; but not input 0 when a reduction reads it in full.
  const Tensor per_row = arange(5.0).reshape({5, 1}), row = arange(16.0), one = tensor({2.0});
  l = lay_out_rows(
      {zeros({5, 16}), per_row.expand({5, 16}), row.expand({5, 16}), one.expand({5, 16})}, {5, 16},
      1, true);
  EXPECT_EQ(l.layouts, "fcrs");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(80, 5, 16, 1));
  EXPECT_EQ(l.ptrs[1], per_row.data_ptr());
  EXPECT_EQ(l.ptrs[2], row.data_ptr());
  l = lay_out_rows({per_row.expand({5, 16})}, {5, 16}, 1, true, 0);
  EXPECT_EQ(l.layouts, "f");
  EXPECT_THAT(lens(l), ::testing::ElementsAre(80));
  // A fused chain over them equals eager, with the interpreter and the generated kernel.
  const Tensor x = uniform({5, 16}, -1, 1);
  for (const char* backend : {"interpreter", "compiler"}) {
    Backend guard(backend);
    expect_close(jit::fused_elementwise({x, per_row.expand({5, 16}), row.expand({5, 16})},
                                        "mul(i0,i1);add(v0,i2,1)"),
                 x * per_row + row, 1e-6, backend);
  }
}

TEST(FusedBlocks, ElementwiseChainsEqualEagerAndTheMaterialisedInputs) {
  // where(m, 0, gelu(x + pos) * g) with pos [T, D] (a block of rows), g [B, 1, 1] (one value
  // per batch) and m a bool [T, 1] (a value per row, repeated): float32 and float64, both
  // backends; bit for bit what the same program gives with the inputs expanded by the caller.
  const int64_t B = 4, T = 24, D = 16;
  const std::string prog = "add(i0,i1,1);gelu(v0);mul(v1,i2);where(i3,0,v2)";
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor x = uniform({B, T, D}, -2, 2, dt), pos = uniform({T, D}, -1, 1, dt);
    const Tensor g = uniform({B, 1, 1}, 0.5, 2, dt), m = rand({T, 1}, kFloat64) < 0.3;
    const Tensor eager = where(m, 0.0, gelu(x + pos) * g);
    const Shape shape{B, T, D};
    for (const char* backend : kBackends) {
      Backend guard(backend);
      const std::string what = std::string(backend) + " " + std::string(dtype_name(dt));
      const Tensor out = jit::fused_elementwise({x, pos, g, m}, prog);
      expect_close(out, eager, dt == kFloat32 ? 1e-6 : 1e-14, what);
      const Tensor full =
          jit::fused_elementwise({x, pos.expand(shape).contiguous(), g.expand(shape).contiguous(),
                                  m.expand(shape).contiguous()},
                                 prog);
      expect_close(out, full, 0, what + " against the materialised inputs");
      // A transposed block (not contiguous) reads as its values.
      const Tensor post = pos.t().contiguous().t();
      expect_close(jit::fused_elementwise({x, post, g, m}, prog), out, 0, what + " transposed");
    }
  }
}

TEST(FusedBlocks, GradientsOfBlocksEqualEager) {
  // tanh(x * pos + v) * g with pos [T, D] (a block), v [B, 1, T, 1] (one value per row,
  // materialised as such) and g [B, 1, 1, 1]: every input's gradient in one fused backward, the
  // blocks' summed down by the engine; float64, both backends.
  const int64_t B = 2, H = 3, T = 16, D = 24;
  const std::string prog = "mul(i0,i1);add(v0,i2,1);tanh(v1);mul(v2,i3)";
  for (const char* backend : kBackends) {
    Backend guard(backend);
    std::vector<Tensor> in = {
        uniform({B, H, T, D}, -1, 1, kFloat64), uniform({T, D}, -1, 1, kFloat64),
        uniform({B, 1, T, 1}, -1, 1, kFloat64), uniform({B, 1, 1, 1}, 0.5, 2, kFloat64)};
    for (Tensor& t : in) t.requires_grad_(true);
    const Tensor gy = uniform({B, H, T, D}, -1, 1, kFloat64);
    const Tensor out = jit::fused_elementwise(in, prog);
    const Tensor eager = tanh(in[0] * in[1] + in[2]) * in[3];
    expect_close(out.detach(), eager.detach(), 1e-15, backend);
    const std::vector<Tensor> gf = autograd::grad({out}, in, {gy});
    const std::vector<Tensor> ge = autograd::grad({eager}, in, {gy});
    for (size_t i = 0; i < in.size(); ++i)
      expect_close(gf[i], ge[i], 1e-12, std::string(backend) + " input " + std::to_string(i));
  }
}

TEST(FusedBlocks, DropoutDrawsEachElementsCounterWhateverTheChunks) {
  // A chunk's kernel call starts its dropout counters at the chunk's first element: the mask is
  // that of the same program over materialised inputs, and the backward's is the forward's.
  const int64_t B = 3, T = 20, D = 16;
  const std::string prog = "add(i0,i1,1);dropout(v0,0,0.4);mul(v1,i2)";
  const Tensor x = uniform({B, T, D}, -1, 1, kFloat64), pos = uniform({T, D}, -1, 1, kFloat64);
  const Tensor w = uniform({D}, 0.5, 1.5, kFloat64);
  for (const char* backend : kBackends) {
    Backend guard(backend);
    manual_seed(7);
    const Tensor out = jit::fused_elementwise({x, pos, w}, prog);
    manual_seed(7);
    const Tensor full = jit::fused_elementwise({x, pos.expand({B, T, D}).contiguous(), w}, prog);
    expect_close(out, full, 0, backend);
    const double dropped = (out == 0).to(kFloat64).mean().item<double>();
    EXPECT_GT(dropped, 0.3) << backend;
    EXPECT_LT(dropped, 0.5) << backend;
    // Gradients: of pos summed over the batch by the engine, zero where dropped.
    Tensor p = pos.clone().requires_grad_(true), xg = x.clone().requires_grad_(true);
    manual_seed(7);
    const Tensor y = jit::fused_elementwise({xg, p, w}, prog);
    expect_close(y.detach(), out, 0, std::string(backend) + " with grad");
    const std::vector<Tensor> gr = autograd::grad({y.sum()}, {xg, p});
    const Tensor expect_x = (out != 0).to(kFloat64) * w / 0.6;
    expect_close(gr[0], expect_x, 1e-15, std::string(backend) + " d/dx");
    expect_close(gr[1], expect_x.sum(0), 1e-14, std::string(backend) + " d/dpos");
  }
}

TEST(FusedBlocks, AttentionSoftmaxWithCausalAndPaddingMasksEqualsEager) {
  // softmax(masked_fill(masked_fill(s * scale, causal, -inf), padding, -inf)) on [B, H, T, T]
  // with T = 32: the causal mask a block of T rows, the padding one row per batch; a fully
  // padded batch gives NaN rows as eager. Forward with both backends, then gradients.
  const int64_t B = 2, H = 3, T = 32;
  const Tensor causal = arange(T).unsqueeze(1) < arange(T).unsqueeze(0);
  const Tensor padding =
      cat({(arange(T) >= 20).reshape({1, 1, 1, T}), ones({1, 1, 1, T}, kBool)}, 0);
  auto fn = [&](const std::vector<Tensor>& in) {
    return std::vector<Tensor>{
        softmax((in[0] * 0.25).masked_fill(in[1], -INFINITY).masked_fill(in[2], -INFINITY), -1)};
  };
  for (DType dt : {kFloat32, kFloat64}) {
    const Tensor s = uniform({B, H, T, T}, -4, 4, dt);
    NoGradGuard ng;
    jit::Graph g = jit::trace(fn, {s, causal, padding});
    jit::fuse_elementwise(g);
    EXPECT_EQ(jit::fuse_reductions(g), 1);
    ASSERT_EQ(g.nodes.size(), 1u) << g.str();
    const Tensor eager = fn({s, causal, padding})[0];
    for (const char* backend : kBackends) {
      Backend guard(backend);
      expect_close(g.run({s, causal, padding})[0], eager, dt == kFloat32 ? 1e-6 : 1e-15,
                   std::string(backend) + " " + std::string(dtype_name(dt)));
    }
  }
  Tensor s = uniform({1, H, T, T}, -4, 4, kFloat64).requires_grad_(true);
  const Tensor pad0 = padding.narrow(0, 0, 1);
  jit::Graph g = jit::trace(fn, {s, causal, pad0});
  jit::fuse_elementwise(g);
  EXPECT_EQ(jit::fuse_reductions(g), 1);
  const Tensor gy = uniform({1, H, T, T}, -1, 1, kFloat64);
  const Tensor ge = autograd::grad({fn({s, causal, pad0})[0]}, {s}, {gy})[0];
  for (const char* backend : kBackends) {
    Backend guard(backend);
    const Tensor gf = autograd::grad({g.run({s, causal, pad0})[0]}, {s}, {gy})[0];
    expect_close(gf, ge, 1e-13, std::string(backend) + " gradient");
  }
}

TEST(FusedBlocks, MasksPerBatchReadInPlaceEqualEager) {
  // Kept dims that are not consecutive: an additive mask per batch [B, 1, T, T] (the extended
  // attention mask of BERT-style models) and a bool one, against scores [B, H, T, T]; a value
  // per row [B, 1, T, 1] and a table [B, 1, T, D] against [B, H, T, D]. Bit for bit the same
  // nodes over caller-materialised inputs; gradients of the blocks (float64) equal eager's.
  const int64_t B = 2, H = 3, T = 32, D = 16;
  const Shape scores{B, H, T, T}, rows{B, H, T, D};
  for (const char* backend : kBackends) {
    Backend guard(backend);
    const Tensor s = uniform(scores, -4, 4, kFloat64),
                 bias = uniform({B, 1, T, T}, -3, 0, kFloat64);
    const Tensor m = rand({B, 1, T, T}, kFloat64) < 0.2;
    const std::string pro = "mul(i0,0.25);add(v0,i1,1);where(i2,-inf,v1)";
    const Tensor out = jit::fused_reduction({s, bias, m}, "softmax", 1, pro, "");
    expect_close(out, softmax((s * 0.25 + bias).masked_fill(m, -INFINITY), -1), 1e-15,
                 std::string(backend) + " softmax");
    const Tensor full =
        jit::fused_reduction({s, bias.expand(scores).contiguous(), m.expand(scores).contiguous()},
                             "softmax", 1, pro, "");
    expect_close(out, full, 0, std::string(backend) + " softmax against the materialised masks");

    const Tensor x = uniform(rows, -2, 2, kFloat64), tab = uniform({B, 1, T, D}, -1, 1, kFloat64);
    const Tensor v = uniform({B, 1, T, 1}, -1, 1, kFloat64);
    const std::string prog = "mul(i0,i1);add(v0,i2,1);tanh(v1)";
    const Tensor y = jit::fused_elementwise({x, tab, v}, prog);
    expect_close(y, tanh(x * tab + v), 1e-15, std::string(backend) + " elementwise");
    expect_close(y,
                 jit::fused_elementwise(
                     {x, tab.expand(rows).contiguous(), v.expand(rows).contiguous()}, prog),
                 0, std::string(backend) + " elementwise against the materialised inputs");

    std::vector<Tensor> in = {x.clone(), tab.clone(), v.clone()};
    for (Tensor& t : in) t.requires_grad_(true);
    const Tensor gy = uniform(rows, -1, 1, kFloat64);
    const std::vector<Tensor> gf = autograd::grad({jit::fused_elementwise(in, prog)}, in, {gy});
    const std::vector<Tensor> ge = autograd::grad({tanh(in[0] * in[1] + in[2])}, in, {gy});
    for (size_t i = 0; i < in.size(); ++i)
      expect_close(gf[i], ge[i], 1e-13, std::string(backend) + " gradient " + std::to_string(i));
    Tensor bg = bias.clone().requires_grad_(true);
    const Tensor gs = uniform(scores, -1, 1, kFloat64);
    const Tensor gb =
        autograd::grad({jit::fused_reduction({s, bg, m}, "softmax", 1, pro, "")}, {bg}, {gs})[0];
    const Tensor gbe =
        autograd::grad({softmax((s * 0.25 + bg).masked_fill(m, -INFINITY), -1)}, {bg}, {gs})[0];
    expect_close(gb, gbe, 1e-13, std::string(backend) + " gradient of the additive mask");
  }
}

TEST(FusedBlocks, NormsAndStatisticsReadBlocksEqualEager) {
  // layer_norm(x + pos) * w + b with its dropout drawn as over materialised inputs; a masked
  // row sum (x * m, m a [T, D] block) and a mean over rows of two dims with a [T, 1, D] block.
  const int64_t B = 3, T = 20, D = 32;
  for (const char* backend : kBackends) {
    Backend guard(backend);
    const Tensor x = uniform({B, T, D}, -2, 2, kFloat64), pos = uniform({T, D}, -1, 1, kFloat64);
    const Tensor w = uniform({D}, 0.5, 1.5, kFloat64), b = uniform({D}, -1, 1, kFloat64);
    const Tensor ln = jit::fused_reduction({x, pos, w, b}, "layer_norm", 1, "add(i0,i1,1)",
                                           "mul(i4,i2);add(v0,i3,1)");
    expect_close(ln, nn::functional::layer_norm(x + pos, {D}, w, b), 1e-13,
                 std::string(backend) + " layer_norm");
    manual_seed(11);
    const Tensor dl = jit::fused_reduction({x, pos, w, b}, "layer_norm", 1,
                                           "add(i0,i1,1);dropout(v0,0,0.3)", "mul(i4,i2)");
    manual_seed(11);
    const Tensor dl_full =
        jit::fused_reduction({x, pos.expand({B, T, D}).contiguous(), w, b}, "layer_norm", 1,
                             "add(i0,i1,1);dropout(v0,0,0.3)", "mul(i4,i2)");
    expect_close(dl, dl_full, 0, std::string(backend) + " dropout in the prologue");

    const Tensor m = uniform({T, D}, 0, 1, kFloat64);
    expect_close(jit::fused_reduction({x, m}, "sum", 1, "mul(i0,i1)", "", 1e-5, false),
                 (x * m).sum(-1), 1e-13, std::string(backend) + " masked sum");
    // Rows of two dims (4, D): r [T, 4, D] a block of T rows, g one value per batch.
    const Tensor x4 = uniform({B, T, 4, D}, -1, 1, kFloat64);
    const Tensor r = uniform({T, 4, D}, -1, 1, kFloat64), g = uniform({B, 1, 1, 1}, 1, 2, kFloat64);
    expect_close(jit::fused_reduction({x4, r, g}, "mean", 2, "mul(i0,i1)", "mul(i3,i2)"),
                 (x4 * r).mean({-2, -1}, true) * g, 1e-14, std::string(backend) + " mean");
    // A masked softmax's denominator as a chain of two statistics reading a causal mask.
    const Tensor causal = arange(T).unsqueeze(1) < arange(T).unsqueeze(0);
    const Tensor s = uniform({B, T, T}, -1, 1, kFloat64);
    const Tensor t = s.masked_fill(causal, -INFINITY);
    expect_close(
        jit::fused_reduction({s, causal}, "amax,sum", 1,
                             "where(i1,-inf,i0)|where(i1,-inf,i0);sub(v0,i2,1);exp(v1)", ""),
        (t - t.amax(-1, true)).exp().sum(-1, true), 1e-14,
        std::string(backend) + " masked exp-sum");
  }
}

}  // namespace
