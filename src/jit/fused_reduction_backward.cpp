// A fused_reduction's training backward in blocks of rows (fused_reduction_backward.h).
//
// Per block of B rows (B C about kBlockElements), inside one chunk of rows (row_layout.h: every
// input full, a repeated row, one value per row or one value there), with the inputs' pointers
// moved to the chunk and each step's buffer of the block's size, for stages k = 0 .. K-1 (K 1
// but for a chain of statistics):
//   x_k = prologue_k(inputs, s_0 .. s_k-1)    stage k's prologue kernel (none: x_k is input 0)
//   s_k = reduce_k(x_k)                       row by row (reduction_rows.h; a statistic: a value
//                                             per row; a normalisation: y, the rows' shape)
// then backward: the epilogue's multi-output kernel gives the inputs' gradients and each s_k's
// (a statistic's summed along the row), and for k = K-1 .. 0
//   gx_k = d reduce_k / d x_k given gs_k      row by row
//   stage k's prologue kernel gives the inputs' gradients and those of s_0 .. s_k-1 (added to
//   their gs), or gx_k is input 0's
// An input's gradients from several programs are added in the block.
// A kernel writes element k of its chunk at dst[k]: a buffer's pointer is moved back by the
// block's first element, so that the block's elements land in it (an address computed, never
// read outside the buffer). Gradients of inputs repeated over the rows (a weight row, a value per
// row, one value) are summed per block into partials (a row, a value) added in block order
// after the pass; a value per row's is the row's sum.
#include "jit/fused_reduction_backward.h"

#include <algorithm>
#include <cmath>
#include <cstdint>
#include <optional>

#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_runtime.h"
#include "jit/reduction_rows.h"
#include "jit/row_layout.h"

namespace ignis::jit::detail {

namespace {

/// A block's elements: 16 rows of 1024 floats (64 KiB a buffer; the block's buffers and its rows
/// of the inputs stay in a core's L2 cache).
constexpr int64_t kBlockElements = 16384;

enum class Stat { none, sum, mean, amax, amin };

Stat stat_of(const std::string& reduction) {
  return reduction == "sum"    ? Stat::sum
         : reduction == "mean" ? Stat::mean
         : reduction == "amax" ? Stat::amax
         : reduction == "amin" ? Stat::amin
                               : Stat::none;
}

/// One gradient of an input from one program: stage k's prologue (its kernel's output `out`),
/// or x_k itself (`out` -1: a stage without prologue reduces input 0), or the epilogue's (stage
/// K); into a block buffer `buf`, or (-1) straight into the input's gradient.
struct Contribution {
  int stage = 0, out = -1;
  int64_t buf = -1;
};

/// Where an input's gradient goes: `out` at the rows' shape (written per block by its last
/// contribution, the others' buffers added), or at the input's shape summed ('r' over the rows,
/// 'c' along each row, 's' over everything: each contribution's buffer summed).
struct Target {
  int k = 0;
  char sum = 'f';
  Tensor out;
  std::vector<Contribution> from;  // in the order they run: the epilogue's, stage K-1's, ...
  int64_t part_at = 0;             // its partials (per block: 'r' a row, 's' a value)
};

/// A backward kernel's outputs: an input's gradient (target `t`, contribution `c`), or that of
/// statistic `value` (a buffer whose rows are summed into its gradient).
struct KernelOut {
  int v = 0;  // the value of the kernel's program
  int t = -1, c = -1, value = -1;
  int64_t buf = -1;
};

}  // namespace

bool reduction_backward_in_blocks(const ReductionBackwardSpec& s, const std::vector<Tensor>& in,
                                  const Tensor& g, const Shape& shape, const std::vector<int>& want,
                                  TensorList& r) {
  const int K = static_cast<int>(s.stages.size());
  if (K < 1 || in.empty() || !in[0].device().is_cpu()) return false;
  std::vector<Stat> stat(static_cast<size_t>(K));
  for (int k = 0; k < K; ++k) {
    stat[static_cast<size_t>(k)] = stat_of(s.stages[static_cast<size_t>(k)].reduction);
    if (stat[static_cast<size_t>(k)] == Stat::none && K > 1) return false;
  }
  const bool is_stat = stat[0] != Stat::none;
  if (is_stat && s.epi && !s.full) return false;
  const DType dtype = fused_dtype(in);
  if ((dtype != kFloat32 && dtype != kFloat64) || g.dtype() != dtype || !g.device().is_cpu())
    return false;
  const int64_t nd = static_cast<int64_t>(shape.size()), dims = std::min(s.dims, nd);
  int64_t C = 1;
  for (int64_t d = nd - dims; d < nd; ++d) C *= shape[static_cast<size_t>(d)];
  const int64_t N = shape_numel(shape), R = C == 0 ? 0 : N / C;
  if (C < 1 || C > kMaxBlockedCols || R < 1) return false;
  const bool per_row_g = is_stat && !s.epi;  // g: one value per row
  if (g.numel() != (per_row_g ? R : N)) return false;
  const int n = static_cast<int>(in.size());
  const size_t nw = want.size();
  // The backward programs: the epilogue's over (inputs, s_0 .. s_K-1, g), stage k's prologue's
  // over (inputs, s_0 .. s_k-1, gx_k); each gives the inputs' gradients `want` and the
  // statistics'.
  std::optional<FusedBackward> epi_b;
  std::vector<std::optional<FusedBackward>> pro_b(static_cast<size_t>(K));
  auto with_values = [&](int k) {
    std::vector<int> w = want;
    for (int j = 0; j < k; ++j) w.push_back(n + j);
    return w;
  };
  if (s.epi) {
    epi_b = fused_backward(*s.epi, with_values(K));
    if (!epi_b) return false;
  }
  for (int k = 0; k < K; ++k) {
    if (const FusedProgram* p = s.stages[static_cast<size_t>(k)].pro) {
      pro_b[static_cast<size_t>(k)] = fused_backward(*p, with_values(k));
      if (!pro_b[static_cast<size_t>(k)]) return false;
    }
  }
  // Through the statistics: the epilogue reads one (else the gradients are the epilogue's
  // alone). The last statistic's value is taken when something reads it: the epilogue, or its
  // own backward (a normalisation's, amax's and amin's); the others always (the next stages').
  bool through = !s.epi;
  for (int k = 0; k < K && s.epi; ++k) through = through || epi_b->outputs[nw + k] >= 0;
  const Stat last = stat[static_cast<size_t>(K - 1)];
  const bool need_last = !is_stat || last == Stat::amax || last == Stat::amin ||
                         (s.epi && epi_b->outputs[nw + K - 1] >= 0);
  auto needs_value = [&](int k) { return through && (k < K - 1 || need_last); };
  bool input0_full = false;
  for (const auto& st : s.stages) input0_full = input0_full || st.pro == nullptr;
  std::vector<Tensor> all = in;
  Shape keep(shape.begin(), shape.end());
  for (int64_t d = nd - dims; d < nd; ++d) keep[static_cast<size_t>(d)] = 1;
  all.push_back(per_row_g ? g.reshape(keep) : g);
  const RowLayout lay = lay_out_rows(all, shape, dims, true, input0_full ? 0 : -1);
  if (lay.rows != R || lay.cols != C) return false;

  // Block buffers (B C elements each): per stage x_k, s_k (a statistic's: a value per row), gs_k
  // (its gradient) and gx_k (a sum's and mean's: a value per row); per statistic a kernel's
  // gradient of it before its rows are summed; then the contributions' buffers.
  const int64_t B = std::max<int64_t>(1, std::min(R, kBlockElements / C)), BC = B * C;
  const int64_t blocks = (R + B - 1) / B;
  auto xb = [](int k) { return int64_t{4} * k; };
  auto sb = [](int k) { return int64_t{4} * k + 1; };
  auto gsb = [](int k) { return int64_t{4} * k + 2; };
  auto gxb = [](int k) { return int64_t{4} * k + 3; };
  auto vgb = [K](int j) { return int64_t{4} * K + j; };
  int64_t nbuf = 5 * int64_t{K};

  // The targets, their contributions (in the order they run) and the kernels' outputs.
  std::vector<Target> targets;
  std::vector<KernelOut> epi_outs;
  std::vector<std::vector<KernelOut>> pro_outs(static_cast<size_t>(K));
  for (size_t j = 0; j < nw; ++j) {
    Target t;
    t.k = want[j];
    const size_t ku = static_cast<size_t>(t.k);
    if (epi_b && epi_b->outputs[j] >= 0) t.from.push_back({K, epi_b->outputs[j]});
    for (int k = K - 1; k >= 0 && through; --k) {
      const auto& b = pro_b[static_cast<size_t>(k)];
      if (b && b->outputs[j] >= 0) t.from.push_back({k, b->outputs[j]});
      if (!s.stages[static_cast<size_t>(k)].pro && t.k == 0) t.from.push_back({k, -1});
    }
    if (t.from.empty()) {
      bool reads = s.epi && s.epi->reads_input(t.k);
      for (const auto& st : s.stages)
        reads = reads || (through && st.pro && st.pro->reads_input(t.k));
      if (reads) r[ku] = zeros(in[ku].sizes(), TensorOptions(dtype));  // a derivative of zero
      continue;
    }
    const char l = lay.native_letter(ku);
    const bool summed = (l == 'r' || l == 'c' || l == 's') && in[ku].numel() < N &&
                        lay.keep[ku].numel() == in[ku].numel();
    t.sum = summed ? l : 'f';
    t.out = make_tensor(summed ? in[ku].sizes().shape() : shape, dtype);
    for (size_t c = 0; c < t.from.size(); ++c) {
      Contribution& f = t.from[c];
      // The last one writes a gradient of the rows' shape itself; x_k has a buffer of its own.
      if ((summed || c + 1 < t.from.size()) && f.out >= 0) f.buf = nbuf++;
      if (f.out < 0) continue;
      auto& outs = f.stage == K ? epi_outs : pro_outs[static_cast<size_t>(f.stage)];
      outs.push_back({f.out, static_cast<int>(targets.size()), static_cast<int>(c), -1, f.buf});
    }
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return true;
  int64_t part_len = 0;
  for (Target& t : targets) {
    t.part_at = part_len;
    part_len += t.sum == 'r' ? blocks * C : t.sum == 's' ? blocks : 0;
  }
  // The statistics' gradients: the epilogue's of s_k (a normalisation's gy straight into gs_0),
  // stage k's prologue's of s_j, j < k.
  for (int k = 0; k < K && epi_b && through; ++k)
    if (const int v = epi_b->outputs[nw + k]; v >= 0)
      epi_outs.push_back({v, -1, -1, k, is_stat ? vgb(k) : gsb(0)});
  for (int k = 0; k < K && through; ++k)
    for (int j = 0; j < k; ++j)
      if (const auto& b = pro_b[static_cast<size_t>(k)]; b && b->outputs[nw + j] >= 0)
        pro_outs[static_cast<size_t>(k)].push_back({b->outputs[nw + j], -1, -1, j, vgb(j)});
  const Tensor partial_t = make_tensor({std::max<int64_t>(part_len, 1)}, dtype);

  // The kernels: stage k's prologue forward and backward, the epilogue's backward.
  const std::string layouts_in = lay.layouts.substr(0, static_cast<size_t>(n));
  const char g_letter = float_layout(lay.layouts[static_cast<size_t>(n)]);
  const std::string values(static_cast<size_t>(K), is_stat ? 'c' : 'f');
  auto gx_letter = [&](int k) {
    const Stat st = stat[static_cast<size_t>(k)];
    return st == Stat::sum || st == Stat::mean ? 'c' : 'f';
  };
  auto kernel = [&](ChunkProgram& bp, const FusedProgram* p, const std::vector<KernelOut>* outs,
                    const std::string& layouts, const FusedRng& rng) {
    bp.p = p;
    bp.outputs.clear();
    if (outs != nullptr)
      for (const KernelOut& o : *outs) bp.outputs.push_back(o.v);
    bp.layouts = layouts;
    bp.rng = rng;
    bp.fn = fused_kernel(
        program_kernel_key(*p, bp.outputs, dtype, layouts),
        [&] {
          return bp.outputs.empty() ? fused_kernel_source(*p, dtype, layouts)
                                    : fused_multi_kernel_source(*p, bp.outputs, dtype, layouts);
        },
        "fused_reduction");
  };
  std::vector<ChunkProgram> pro_f(static_cast<size_t>(K)), pro_k(static_cast<size_t>(K));
  ChunkProgram epi_k;
  for (int k = 0; k < K; ++k) {
    const FusedProgram* p = s.stages[static_cast<size_t>(k)].pro;
    if (p == nullptr) continue;
    const std::string lk = layouts_in + values.substr(0, static_cast<size_t>(k));
    const FusedRng rng = k == 0 ? s.pro_rng : FusedRng{};
    if (needs_value(k)) kernel(pro_f[static_cast<size_t>(k)], p, nullptr, lk, rng);
    if (!pro_outs[static_cast<size_t>(k)].empty())
      kernel(pro_k[static_cast<size_t>(k)], &pro_b[static_cast<size_t>(k)]->program,
             &pro_outs[static_cast<size_t>(k)], lk + gx_letter(k), rng);
  }
  if (s.epi && !epi_outs.empty())
    kernel(epi_k, &epi_b->program, &epi_outs, layouts_in + values + g_letter, s.epi_rng);
  // Without a compiler every program is interpreted (its bool inputs read as copies in T).
  bool interpreting = epi_k.p && !epi_k.fn;
  for (int k = 0; k < K; ++k) {
    for (const ChunkProgram* bp : {&pro_f[static_cast<size_t>(k)], &pro_k[static_cast<size_t>(k)]})
      interpreting = interpreting || (bp->p && !bp->fn);
  }
  if (interpreting) {
    auto lower = [](ChunkProgram& bp) {
      bp.fn = nullptr;
      for (char& c : bp.layouts) c = float_layout(c);
    };
    lower(epi_k);
    for (int k = 0; k < K; ++k) {
      lower(pro_f[static_cast<size_t>(k)]);
      lower(pro_k[static_cast<size_t>(k)]);
    }
  }
  const RowKind kind = row_kind(s.stages[0].reduction);
  nbuf = std::max<int64_t>(nbuf, 1);

  auto run = [&]<class T>() {
    const InterpreterInputs<T> interp(lay.ptrs, lay.layouts, lay.keep, interpreting);
    T* const partial = partial_t.data_ptr<T>();
    std::fill_n(partial, part_len, T(0));
    for (const Target& t : targets)  // a row's sum is added to by every contribution
      if (t.sum == 'c') std::fill_n(t.out.data_ptr<T>(), R, T(0));
    const T eps = static_cast<T>(s.eps);
    parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      const Tensor buf_t = make_tensor({nbuf * BC}, dtype);
      T* const buf0 = buf_t.data_ptr<T>();
      auto buf = [&](int64_t i) { return buf0 + i * BC; };
      std::vector<const void*> at, kin;
      std::vector<T*> kout;
      std::vector<const T*> x(static_cast<size_t>(K)), gx(static_cast<size_t>(K));
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t rb = blk * B, re = std::min(R, rb + B);
        lay.for_each_chunk(rb, re, 1, [&](int64_t r0, int64_t, int64_t cb, int64_t ce) {
          lay.at(interp.ptrs, r0, interpreting ? sizeof(T) : 0, at);
          const int64_t rows = ce - cb, eb = (cb - r0) * C, ee = (ce - r0) * C, first = r0 * C;
          // A kernel's inputs: the node's, then the statistics s_0 .. s_{k-1}, then `last`.
          auto inputs = [&](int k, const void* last) {
            kin.assign(at.begin(), at.begin() + n);
            for (int j = 0; j < k; ++j)
              kin.push_back(is_stat ? moved_by(buf(sb(j)), -(cb - r0)) : moved_by(buf(sb(j)), -eb));
            if (last != nullptr) kin.push_back(last);
          };
          // A backward kernel's outputs, then the statistics' gradients summed along the rows.
          auto run_backward = [&](const ChunkProgram& bp, const std::vector<KernelOut>& outs) {
            kout.assign(outs.size(), nullptr);
            for (size_t o = 0; o < outs.size(); ++o) {
              const KernelOut& ko = outs[o];
              kout[o] = ko.buf >= 0 ? moved_by(buf(ko.buf), -eb)
                                    : targets[static_cast<size_t>(ko.t)].out.data_ptr<T>() + first;
            }
            run_chunk<T>(bp, kin, kout, eb, ee, C, first);
            for (const KernelOut& ko : outs) {
              if (ko.value < 0 || !is_stat) continue;
              T* const gs = buf(gsb(ko.value));
              for (int64_t i = 0; i < rows; ++i) gs[i] += ignis_row_sum(buf(ko.buf) + i * C, C);
            }
          };
          // Forward: x_k and s_k.
          for (int k = 0; k < K && needs_value(k); ++k) {
            const size_t ku = static_cast<size_t>(k);
            if (s.stages[ku].pro) {
              inputs(k, nullptr);
              kout.assign(1, moved_by(buf(xb(k)), -eb));
              run_chunk<T>(pro_f[ku], kin, kout, eb, ee, C, first);
              x[ku] = buf(xb(k));
            } else {
              x[ku] = static_cast<const T*>(at[0]) + eb;
            }
            T* const v = buf(sb(k));
            for (int64_t i = 0; i < rows; ++i) {
              const T* xr = x[ku] + i * C;
              const Stat st = stat[ku];
              if (st == Stat::none) {
                normalize_row<T>(kind, xr, v + i * C, C, eps);
              } else if (st == Stat::sum || st == Stat::mean) {
                const T sum = ignis_row_sum(xr, C);
                v[i] = st == Stat::sum ? sum : sum / static_cast<T>(C);
              } else {
                T m = xr[0];  // NaN propagates, as amax and amin
                for (int64_t c = 1; c < C && !std::isnan(m); ++c) {
                  const T e = xr[c];
                  if (std::isnan(e) || (st == Stat::amax ? e > m : e < m)) m = e;
                }
                v[i] = m;
              }
            }
          }
          // The statistics' gradients start at 0 (a statistic's) or are g (the last one's,
          // without an epilogue: a value per row, or the rows' shape for a normalisation).
          const T* const gp = static_cast<const T*>(at[static_cast<size_t>(n)]);
          for (int k = 0; k < K && is_stat; ++k) std::fill_n(buf(gsb(k)), rows, T(0));
          const T* gy = buf(gsb(0));  // a normalisation's gradient of y
          if (!s.epi) {
            T* const gl = buf(gsb(K - 1));
            if (!is_stat && g_letter == 'f') {
              gy = gp + eb;
            } else {  // g repeated within the block: written out
              const int64_t len = is_stat ? rows : rows * C;
              for (int64_t i = 0; i < len; ++i) {
                const int64_t e = (is_stat ? i * C : i) + eb;  // the element in the chunk
                gl[i] = g_letter == 'f'   ? gp[e]
                        : g_letter == 'r' ? gp[e % C]
                        : g_letter == 'c' ? gp[e / C]
                                          : gp[0];
              }
            }
          } else if (epi_k.p) {
            inputs(K, nullptr);
            kin.push_back(gp);
            run_backward(epi_k, epi_outs);
          }
          // Backward through the stages, the last first.
          for (int k = K - 1; k >= 0 && through; --k) {
            const size_t ku = static_cast<size_t>(k);
            const Stat st = stat[ku];
            T* const gxw = buf(gxb(k));
            const T* const gs = st == Stat::none ? gy : buf(gsb(k));
            gx[ku] = gxw;
            for (int64_t i = 0; i < rows; ++i) {
              if (st == Stat::none) {
                reduce_backward_row<T>(kind, x[ku] + i * C, buf(sb(k)) + i * C, gs + i * C,
                                       gxw + i * C, C, eps);
              } else if (st == Stat::sum) {
                gx[ku] = gs;
              } else if (st == Stat::mean) {
                gxw[i] = gs[i] / static_cast<T>(C);
              } else {  // split evenly among the row's extremes (NaN: among its NaNs)
                const T* xr = x[ku] + i * C;
                const T m = buf(sb(k))[i];
                const bool nan = std::isnan(m);
                int64_t count = 0;
                for (int64_t c = 0; c < C; ++c) count += xr[c] == m || (nan && std::isnan(xr[c]));
                const T share = gs[i] / static_cast<T>(count);
                for (int64_t c = 0; c < C; ++c)
                  gxw[i * C + c] = xr[c] == m || (nan && std::isnan(xr[c])) ? share : T(0);
              }
            }
            if (pro_k[ku].p) {
              inputs(k, gx_letter(k) == 'c' ? moved_by(gx[ku], -(cb - r0)) : moved_by(gx[ku], -eb));
              run_backward(pro_k[ku], pro_outs[ku]);
            }
          }
          // Each target: its contributions added (x_k's too), or summed.
          for (const Target& t : targets) {
            T* const o = t.out.data_ptr<T>();
            auto values_of = [&](const Contribution& f) -> const T* {
              return f.out >= 0 ? buf(f.buf) : gx[static_cast<size_t>(f.stage)];
            };
            if (t.sum == 'f') {
              T* __restrict dst = o + cb * C;
              const int64_t len = rows * C;
              const Contribution& lastc = t.from.back();
              if (lastc.out < 0) {  // x_k written last: a sum's or mean's a value per row
                const T* v = values_of(lastc);
                if (gx_letter(lastc.stage) == 'c') {
                  for (int64_t i = 0; i < rows; ++i) std::fill_n(dst + i * C, C, v[i]);
                } else {
                  std::copy_n(v, len, dst);
                }
              }
              for (size_t c = 0; c + 1 < t.from.size(); ++c) {
                const Contribution& f = t.from[c];
                const T* __restrict v = values_of(f);
                if (f.out < 0 && gx_letter(f.stage) == 'c') {
                  for (int64_t i = 0; i < rows; ++i)
                    for (int64_t e = 0; e < C; ++e) dst[i * C + e] += v[i];
                } else {
                  for (int64_t e = 0; e < len; ++e) dst[e] += v[e];
                }
              }
              continue;
            }
            T* const part = t.sum == 'c'   ? o + cb
                            : t.sum == 'r' ? partial + t.part_at + blk * C
                                           : partial + t.part_at + blk;
            for (const Contribution& f : t.from)
              add_block_sums(t.sum, buf(f.buf), rows * C, C, part);
          }
        });
      }
    });
    for (const Target& t : targets) {  // the partials, in block order
      if (t.sum != 'r' && t.sum != 's') continue;
      const int64_t w = t.sum == 'r' ? C : 1;
      T* o = t.out.data_ptr<T>();
      std::fill_n(o, w, T(0));
      for (int64_t blk = 0; blk < blocks; ++blk)
        for (int64_t c = 0; c < w; ++c) o[c] += partial[t.part_at + blk * w + c];
    }
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
  for (Target& t : targets) r[static_cast<size_t>(t.k)] = std::move(t.out);
  return true;
}

}  // namespace ignis::jit::detail
