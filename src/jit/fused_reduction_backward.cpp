// A fused_reduction's training backward in blocks of rows (fused_reduction_backward.h).
//
// Per block of B rows (B C about kBlockElements), inside one chunk of rows (row_layout.h: every
// input full, a repeated row, one value per row or one value there), with the inputs' pointers
// moved to the chunk and each step's buffer of the block's size:
//   x   = prologue(inputs)                    the prologue's kernel (none: x is input 0)
//   y   = reduce(x)                           row by row (reduction_rows.h; a statistic's value)
//   gy  = d epilogue / d y, and the epilogue's gradients of the inputs (one multi-output kernel)
//   gx  = d reduce / d x given gy             row by row
//   the prologue's gradients of the inputs given gx (one multi-output kernel), the epilogue's
//   gradient of the same input added in the block
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
/// Longer rows: the passes of fused_reduction.cpp (a block is at least a row).
constexpr int64_t kMaxCols = 65536;

enum class Stat { none, sum, mean, amax, amin };

Stat stat_of(const std::string& reduction) {
  return reduction == "sum"    ? Stat::sum
         : reduction == "mean" ? Stat::mean
         : reduction == "amax" ? Stat::amax
         : reduction == "amin" ? Stat::amin
                               : Stat::none;
}

/// `p` moved back by `elements` elements of T, as an address (see above).
template <class T>
T* moved_back(T* p, int64_t elements) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) -
                              static_cast<uintptr_t>(elements) * sizeof(T));
}

/// One program's kernel over the blocks: its result (`outputs` empty) or its values `outputs`,
/// compiled (fn) or interpreted.
struct BlockProgram {
  const FusedProgram* p = nullptr;
  std::vector<int> outputs;
  std::string layouts;  // its inputs within a chunk (the interpreter's: lower case)
  void* fn = nullptr;
  FusedRng rng;
};

/// Runs `bp` over elements [b, e) of the chunk whose first element is `first` (its dropouts'
/// counters start there), reading `in` (moved to the chunk) and writing outs[j][k].
template <class T>
void run_block(const BlockProgram& bp, const std::vector<const void*>& in,
               const std::vector<T*>& outs, int64_t b, int64_t e, int64_t C, int64_t first) {
  FusedRng rng = bp.rng;
  rng.base += static_cast<uint64_t>(first);
  if (bp.fn == nullptr) {
    std::vector<const T*> tin;
    for (const void* q : in) tin.push_back(static_cast<const T*>(q));
    interpret<T>(*bp.p, tin, bp.layouts, outs[0], b, e, C, bp.outputs, outs, rng);
    return;
  }
  std::vector<const void*> ptrs = in;
  const uint64_t words[3] = {rng.seed, rng.base, rng.n};
  if (bp.p->random_streams() > 0) ptrs.push_back(words);
  if (bp.outputs.empty()) {
    reinterpret_cast<FusedKernelFn>(bp.fn)(ptrs.data(), outs[0], b, e, C);
  } else {
    std::vector<void*> o(outs.begin(), outs.end());
    reinterpret_cast<FusedMultiKernelFn>(bp.fn)(ptrs.data(), o.data(), b, e, C);
  }
}

/// Where an input's gradient goes: `out` at the rows' shape (written per block by the prologue's
/// kernel, or the epilogue's when only it has one, or x's gradient without a prologue), or at the
/// input's shape summed ('r' over the rows, 'c' along each row, 's' over everything).
struct Target {
  int k = 0;
  char sum = 'f';
  Tensor out;
  int epi_out = -1, pro_out = -1;      // the index among that kernel's outputs, -1: none
  bool from_x = false;                 // x's gradient itself (no prologue, input 0)
  int64_t part_at = 0;                 // its partials (per block: 'r' a row, 's' a value)
  int64_t epi_buf = -1, pro_buf = -1;  // its block buffers (summed, or the epilogue's addend)
};

}  // namespace

bool reduction_backward_in_blocks(const ReductionBackwardSpec& s, const std::vector<Tensor>& in,
                                  const Tensor& g, const Shape& shape, const std::vector<int>& want,
                                  TensorList& r) {
  const Stat stat = stat_of(s.reduction);
  const bool is_stat = stat != Stat::none;
  if (in.empty() || !in[0].device().is_cpu() || (is_stat && s.epi && !s.full)) return false;
  const DType dtype = fused_dtype(in);
  if ((dtype != kFloat32 && dtype != kFloat64) || g.dtype() != dtype || !g.device().is_cpu())
    return false;
  const int64_t nd = static_cast<int64_t>(shape.size()), dims = std::min(s.dims, nd);
  int64_t C = 1;
  for (int64_t d = nd - dims; d < nd; ++d) C *= shape[static_cast<size_t>(d)];
  const int64_t N = shape_numel(shape), R = C == 0 ? 0 : N / C;
  if (C < 1 || C > kMaxCols || R < 1) return false;
  const bool per_row_g = is_stat && !s.epi;  // g: one value per row
  if (g.numel() != (per_row_g ? R : N)) return false;
  const int n = static_cast<int>(in.size());
  std::optional<FusedBackward> epi_b, pro_b;
  if (s.epi) {
    std::vector<int> ew = want;
    ew.push_back(n);  // y
    epi_b = fused_backward(*s.epi, ew);
    if (!epi_b) return false;
  }
  if (s.pro) {
    pro_b = fused_backward(*s.pro, want);
    if (!pro_b) return false;
  }
  // Through y: the epilogue reads it (else the gradients are the epilogue's alone).
  const bool through_y = !s.epi || epi_b->outputs.back() >= 0;
  const bool need_y = through_y && (!is_stat || stat == Stat::amax || stat == Stat::amin ||
                                    (s.epi && epi_b->outputs.back() >= 0));
  std::vector<Tensor> all = in;
  Shape keep(shape.begin(), shape.end());
  for (int64_t d = nd - dims; d < nd; ++d) keep[static_cast<size_t>(d)] = 1;
  all.push_back(per_row_g ? g.reshape(keep) : g);
  const RowLayout lay = lay_out_rows(all, shape, dims, true, s.pro ? -1 : 0);
  if (lay.rows != R || lay.cols != C) return false;

  // The targets, and the kernels' outputs.
  std::vector<Target> targets;
  std::vector<int> epi_values, pro_values;
  for (size_t j = 0; j < want.size(); ++j) {
    Target t;
    t.k = want[j];
    const size_t ku = static_cast<size_t>(t.k);
    const int ev = epi_b ? epi_b->outputs[j] : -1;
    const int pv = through_y && pro_b ? pro_b->outputs[j] : -1;
    t.from_x = through_y && !s.pro && t.k == 0;
    if (ev < 0 && pv < 0 && !t.from_x) {
      if ((s.epi && s.epi->reads_input(t.k)) || (through_y && s.pro && s.pro->reads_input(t.k)))
        r[ku] = zeros(in[ku].sizes(), TensorOptions(dtype));  // a derivative of zero
      continue;
    }
    const char l = lay.native_letter(ku);
    const bool summed = (l == 'r' || l == 'c' || l == 's') && in[ku].numel() < N &&
                        lay.keep[ku].numel() == in[ku].numel();
    t.sum = summed ? l : 'f';
    t.out = make_tensor(summed ? in[ku].sizes().shape() : shape, dtype);
    if (ev >= 0) {
      t.epi_out = static_cast<int>(epi_values.size());
      epi_values.push_back(ev);
    }
    if (pv >= 0) {
      t.pro_out = static_cast<int>(pro_values.size());
      pro_values.push_back(pv);
    }
    targets.push_back(std::move(t));
  }
  if (targets.empty()) return true;
  const int y_out = through_y && s.epi ? static_cast<int>(epi_values.size()) : -1;
  if (y_out >= 0) epi_values.push_back(epi_b->outputs.back());

  // Block buffers (each B C elements): x, y, gy, gx (a statistic's y and gy: a value per row,
  // its sum's and mean's gx too), the epilogue's y gradient before its rows are summed (a
  // statistic), and per target its summed gradients or the epilogue's addend.
  const int64_t B = std::max<int64_t>(1, std::min(R, kBlockElements / C)), BC = B * C;
  const int64_t blocks = (R + B - 1) / B;
  int64_t nbuf = 4 + (y_out >= 0 && is_stat ? 1 : 0);
  const int64_t xb = 0, yb = 1, gyb = 2, gxb = 3, ysum = 4;
  int64_t part_len = 0;
  for (Target& t : targets) {
    const bool addend = t.sum == 'f' && t.epi_out >= 0 && (t.pro_out >= 0 || t.from_x);
    if (t.epi_out >= 0 && (t.sum != 'f' || addend)) t.epi_buf = nbuf++;
    if (t.pro_out >= 0 && t.sum != 'f') t.pro_buf = nbuf++;
    t.part_at = part_len;
    part_len += t.sum == 'r' ? blocks * C : t.sum == 's' ? blocks : 0;
  }
  const Tensor partial_t = make_tensor({std::max<int64_t>(part_len, 1)}, dtype);

  const std::string layouts_in = lay.layouts.substr(0, static_cast<size_t>(n));
  const char g_letter = float_layout(lay.layouts[static_cast<size_t>(n)]);
  const char y_letter = is_stat ? 'c' : 'f';
  const char gx_letter = stat == Stat::sum || stat == Stat::mean ? 'c' : 'f';
  BlockProgram pro_f, epi_k, pro_k;
  auto kernel = [&](BlockProgram& bp, const FusedProgram* p, std::vector<int> outputs,
                    const std::string& layouts) {
    bp.p = p;
    bp.outputs = std::move(outputs);
    bp.layouts = layouts;
    bp.fn = fused_kernel(
        program_kernel_key(*p, bp.outputs, dtype, layouts),
        [&] {
          return bp.outputs.empty() ? fused_kernel_source(*p, dtype, layouts)
                                    : fused_multi_kernel_source(*p, bp.outputs, dtype, layouts);
        },
        "fused_reduction");
  };
  if (s.pro && need_y) kernel(pro_f, s.pro, {}, layouts_in);
  if (s.epi) kernel(epi_k, &epi_b->program, epi_values, layouts_in + y_letter + g_letter);
  if (s.pro && !pro_values.empty())
    kernel(pro_k, &pro_b->program, pro_values, layouts_in + gx_letter);
  pro_f.rng = pro_k.rng = s.pro_rng;
  epi_k.rng = s.epi_rng;
  // Without a compiler every program is interpreted (its bool inputs read as copies in T).
  const bool interpreting =
      (pro_f.p && !pro_f.fn) || (epi_k.p && !epi_k.fn) || (pro_k.p && !pro_k.fn);
  if (interpreting) {
    for (BlockProgram* bp : {&pro_f, &epi_k, &pro_k}) {
      bp->fn = nullptr;
      for (char& c : bp->layouts) c = float_layout(c);
    }
  }
  const RowKind kind = row_kind(s.reduction);

  auto run = [&]<class T>() {
    const InterpreterInputs<T> interp(lay.ptrs, lay.layouts, lay.keep, interpreting);
    T* const partial = partial_t.data_ptr<T>();
    std::fill_n(partial, part_len, T(0));
    for (const Target& t : targets)  // a row's sum is added to by both programs
      if (t.sum == 'c') std::fill_n(t.out.data_ptr<T>(), R, T(0));
    const T eps = static_cast<T>(s.eps);
    parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
      const Tensor buf_t = make_tensor({nbuf * BC}, dtype);
      T* const buf0 = buf_t.data_ptr<T>();
      auto buf = [&](int64_t i) { return buf0 + i * BC; };
      std::vector<const void*> at, kin;
      std::vector<T*> kout;
      for (int64_t blk = b0; blk < b1; ++blk) {
        const int64_t rb = blk * B, re = std::min(R, rb + B);
        lay.for_each_chunk(rb, re, 1, [&](int64_t r0, int64_t, int64_t cb, int64_t ce) {
          lay.at(interp.ptrs, r0, interpreting ? sizeof(T) : 0, at);
          const int64_t rows = ce - cb, eb = (cb - r0) * C, ee = (ce - r0) * C, first = r0 * C;
          auto inputs = [&](const void* extra, const void* extra2) {
            kin.assign(at.begin(), at.begin() + n);
            kin.push_back(extra);
            if (extra2 != nullptr) kin.push_back(extra2);
          };
          // x, y
          const T* x = s.pro || !need_y ? nullptr : static_cast<const T*>(at[0]) + eb;
          if (s.pro && need_y) {
            kin.assign(at.begin(), at.begin() + n);
            kout.assign(1, moved_back(buf(xb), eb));
            run_block<T>(pro_f, kin, kout, eb, ee, C, first);
            x = buf(xb);
          }
          T* const y = buf(yb);
          for (int64_t i = 0; i < rows && need_y; ++i) {
            const T* xr = x + i * C;
            if (!is_stat) {
              normalize_row<T>(kind, xr, y + i * C, C, eps);
            } else if (stat == Stat::sum || stat == Stat::mean) {
              const T sum = ignis_row_sum(xr, C);
              y[i] = stat == Stat::sum ? sum : sum / static_cast<T>(C);
            } else {
              T m = xr[0];  // NaN propagates, as amax and amin
              for (int64_t c = 1; c < C && !std::isnan(m); ++c) {
                const T v = xr[c];
                if (std::isnan(v) || (stat == Stat::amax ? v > m : v < m)) m = v;
              }
              y[i] = m;
            }
          }
          // gy, and the epilogue's gradients of the inputs
          const T* gy = nullptr;
          T* const gyw = buf(gyb);
          const T* const gp = static_cast<const T*>(at[static_cast<size_t>(n)]);
          if (s.epi) {
            inputs(is_stat ? static_cast<const void*>(moved_back(y, cb - r0))
                           : static_cast<const void*>(moved_back(y, eb)),
                   gp);
            kout.assign(epi_values.size(), nullptr);
            for (const Target& t : targets) {
              if (t.epi_out < 0) continue;
              kout[static_cast<size_t>(t.epi_out)] =
                  t.epi_buf >= 0 ? moved_back(buf(t.epi_buf), eb) : t.out.data_ptr<T>() + first;
            }
            if (y_out >= 0)
              kout[static_cast<size_t>(y_out)] = moved_back(is_stat ? buf(ysum) : gyw, eb);
            run_block<T>(epi_k, kin, kout, eb, ee, C, first);
            if (y_out >= 0 && is_stat)
              for (int64_t i = 0; i < rows; ++i) gyw[i] = ignis_row_sum(buf(ysum) + i * C, C);
            gy = gyw;
          } else if (!is_stat && g_letter == 'f') {
            gy = gp + eb;
          } else {  // g repeated within the block: written out (a row's gradient, per row)
            const int64_t len = is_stat ? rows : rows * C;
            for (int64_t i = 0; i < len; ++i) {
              const int64_t k = (is_stat ? i * C : i) + eb;  // the element in the chunk
              gyw[i] = g_letter == 'f'   ? gp[k]
                       : g_letter == 'r' ? gp[k % C]
                       : g_letter == 'c' ? gp[k / C]
                                         : gp[0];
            }
            gy = gyw;
          }
          // gx
          T* const gx = buf(gxb);
          const T* gxr = gx;  // x's gradient: rows, or a value per row (a sum's, a mean's)
          if (through_y) {
            for (int64_t i = 0; i < rows; ++i) {
              if (!is_stat) {
                reduce_backward_row<T>(kind, x + i * C, y + i * C, gy + i * C, gx + i * C, C, eps);
              } else if (stat == Stat::sum) {
                gxr = gy;
              } else if (stat == Stat::mean) {
                gx[i] = gy[i] / static_cast<T>(C);
              } else {  // split evenly among the row's extremes (NaN: among its NaNs)
                const T* xr = x + i * C;
                const T m = y[i];
                const bool nan = std::isnan(m);
                int64_t count = 0;
                for (int64_t c = 0; c < C; ++c) count += xr[c] == m || (nan && std::isnan(xr[c]));
                const T share = gy[i] / static_cast<T>(count);
                for (int64_t c = 0; c < C; ++c)
                  gx[i * C + c] = xr[c] == m || (nan && std::isnan(xr[c])) ? share : T(0);
              }
            }
          }
          // the prologue's gradients of the inputs
          if (s.pro && !pro_values.empty()) {
            inputs(gx_letter == 'c' ? static_cast<const void*>(moved_back(gxr, cb - r0))
                                    : static_cast<const void*>(moved_back(gxr, eb)),
                   nullptr);
            kout.assign(pro_values.size(), nullptr);
            for (const Target& t : targets) {
              if (t.pro_out < 0) continue;
              kout[static_cast<size_t>(t.pro_out)] =
                  t.pro_buf >= 0 ? moved_back(buf(t.pro_buf), eb) : t.out.data_ptr<T>() + first;
            }
            run_block<T>(pro_k, kin, kout, eb, ee, C, first);
          }
          // x's gradient as input 0's; the epilogue's addends; the sums
          for (const Target& t : targets) {
            T* const o = t.out.data_ptr<T>();
            if (t.sum == 'f') {
              T* __restrict dst = o + cb * C;
              const int64_t len = rows * C;
              if (t.from_x) {
                if (gx_letter == 'c') {
                  for (int64_t i = 0; i < rows; ++i) std::fill_n(dst + i * C, C, gxr[i]);
                } else {
                  std::copy_n(gxr, len, dst);
                }
              }
              if (t.epi_buf >= 0) {
                const T* __restrict a = buf(t.epi_buf);
                for (int64_t i = 0; i < len; ++i) dst[i] += a[i];
              }
              continue;
            }
            for (const int64_t bi : {t.epi_buf, t.pro_buf}) {
              if (bi < 0) continue;
              const T* v = buf(bi);
              if (t.sum == 'r') {
                T* __restrict part = partial + t.part_at + blk * C;
                for (int64_t i = 0; i < rows; ++i) {
                  const T* __restrict row = v + i * C;
                  for (int64_t c = 0; c < C; ++c) part[c] += row[c];
                }
              } else if (t.sum == 'c') {
                for (int64_t i = 0; i < rows; ++i) o[cb + i] += ignis_row_sum(v + i * C, C);
              } else {
                T acc = 0;
                for (int64_t i = 0; i < rows; ++i) acc += ignis_row_sum(v + i * C, C);
                partial[t.part_at + blk] += acc;
              }
            }
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
