// fused_reduction's statistics on the CPU (see fused_stat.h). Rows are split into parts of
// kStatChunk elements: pass 0 takes each part's statistic in parallel (the prologue's values
// computed a tile at a time, into 16 lanes), the parts of a row are folded in order, and pass 1
// applies the epilogue to every element (or once per row).
#include "jit/fused_stat.h"

#include <algorithm>
#include <limits>

#include "cpu/parallel.h"
#include "jit/codegen.h"
#include "jit/fused_runtime.h"
#include "jit/row_reduce.h"

namespace ignis::jit::detail {

namespace {
IGNIS_JIT_COMBINE_CODE
IGNIS_JIT_LANES_CODE

/// The inputs' pointers into row r, and their layouts there: a per-row value ('c') becomes one
/// value ('s'); full and repeated rows keep theirs.
template <class T>
void row_pointers(const std::vector<const void*>& ptrs, const std::string& layouts, int64_t r,
                  int64_t C, std::vector<const T*>& row, std::string& row_layouts) {
  row_layouts = layouts;
  for (size_t i = 0; i < ptrs.size(); ++i) {
    const T* p = static_cast<const T*>(ptrs[i]);
    row[i] = layouts[i] == 'f' ? p + r * C : layouts[i] == 'c' ? p + r : p;
    if (layouts[i] == 'c') row_layouts[i] = 's';
  }
}

template <class T, class F>
void run_typed(const FusedProgram* pro, const FusedProgram* epi, const std::string& reduction,
               const std::vector<const void*>& ptrs, const std::string& layouts, const Tensor& out,
               int64_t R, int64_t C, bool full, FusedStatFn fn, const F& f) {
  const T identity = reduction == "amax"   ? -std::numeric_limits<T>::infinity()
                     : reduction == "amin" ? std::numeric_limits<T>::infinity()
                                           : T(0);
  const int64_t nc = (C + kStatChunk - 1) / kStatChunk, parts = R * nc;
  const size_t n = ptrs.size();
  std::vector<T> partial(static_cast<size_t>(parts)), stat(static_cast<size_t>(R));
  T* dst = out.data_ptr<T>();
  const int64_t part_grain = std::max<int64_t>(kGrainSize / std::min(C, kStatChunk), 1);
  // Pass 0: each part's statistic.
  parallel_for(0, parts, part_grain, [&](int64_t b, int64_t e) {
    if (fn != nullptr) {
      fn(ptrs.data(), dst, b, e, C, kStatChunk, partial.data(), 0);
      return;
    }
    std::vector<const T*> row(n), tile(n);
    std::string row_layouts, tile_layouts;
    std::vector<T> buf(static_cast<size_t>(kStatTile));
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / nc, c0 = (it - r * nc) * kStatChunk;
      const int64_t c1 = std::min(c0 + kStatChunk, C);
      row_pointers<T>(ptrs, layouts, r, C, row, row_layouts);
      T acc[16];
      std::fill(acc, acc + 16, identity);
      if (pro == nullptr) {
        ignis_lanes_add(acc, row[0] + c0, c1 - c0, f);
      } else {
        // A tile as a row of its own: full and repeated inputs read from its first element.
        tile_layouts = row_layouts;
        for (size_t i = 0; i < n; ++i)
          if (tile_layouts[i] == 'r') tile_layouts[i] = 'f';
        for (int64_t t0 = c0; t0 < c1; t0 += kStatTile) {
          const int64_t len = std::min(kStatTile, c1 - t0);
          for (size_t i = 0; i < n; ++i) tile[i] = tile_layouts[i] == 'f' ? row[i] + t0 : row[i];
          interpret<T>(*pro, tile, tile_layouts, buf.data(), 0, len, len);
          ignis_lanes_add(acc, buf.data(), len, f);
        }
      }
      partial[static_cast<size_t>(it)] = ignis_lanes_total(acc, f);
    }
  });
  // The parts of each row in order; mean divides.
  for (int64_t r = 0; r < R; ++r) {
    T v = partial[static_cast<size_t>(r * nc)];
    for (int64_t k = 1; k < nc; ++k) v = f(v, partial[static_cast<size_t>(r * nc + k)]);
    stat[static_cast<size_t>(r)] = reduction == "mean" ? v / static_cast<T>(C) : v;
  }
  if (epi == nullptr) {
    std::copy(stat.begin(), stat.end(), dst);
    return;
  }
  // Pass 1: the epilogue, the row's statistic as its last input (one value).
  const int64_t items = full ? parts : R;
  const int64_t grain = full ? part_grain : std::max<int64_t>(kGrainSize / 16, 1);
  parallel_for(0, items, grain, [&](int64_t b, int64_t e) {
    if (fn != nullptr) {
      fn(ptrs.data(), dst, b, e, C, kStatChunk, stat.data(), 1);
      return;
    }
    std::vector<const T*> row(n + 1);
    std::string row_layouts;
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = full ? it / nc : it;
      row_pointers<T>(ptrs, layouts, r, C, row, row_layouts);
      row[n] = stat.data() + r;
      if (full) {
        const int64_t c0 = (it - r * nc) * kStatChunk, c1 = std::min(c0 + kStatChunk, C);
        interpret<T>(*epi, row, row_layouts + 's', dst + r * C, c0, c1, C);
      } else {
        interpret<T>(*epi, row, row_layouts + 's', dst + r, 0, 1, 1);
      }
    }
  });
}

}  // namespace

void run_fused_stat(const FusedProgram* prologue, const FusedProgram* epilogue,
                    const std::string& reduction, const std::vector<const void*>& ptrs,
                    const std::string& layouts, const Tensor& out, int64_t R, int64_t C, bool full,
                    const std::string& key) {
  const DType dtype = out.dtype();
  auto fn = reinterpret_cast<FusedStatFn>(fused_kernel(
      key,
      [&] {
        return fused_stat_source(prologue, reduction, epilogue, static_cast<int>(ptrs.size()),
                                 dtype, layouts, full);
      },
      "fused_reduction"));
  auto run = [&]<class T>() {
    if (reduction == "amax")
      run_typed<T>(prologue, epilogue, reduction, ptrs, layouts, out, R, C, full, fn,
                   IgnisMaxNan{});
    else if (reduction == "amin")
      run_typed<T>(prologue, epilogue, reduction, ptrs, layouts, out, R, C, full, fn,
                   IgnisMinNan{});
    else
      run_typed<T>(prologue, epilogue, reduction, ptrs, layouts, out, R, C, full, fn, IgnisAdd{});
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
}

}  // namespace ignis::jit::detail
