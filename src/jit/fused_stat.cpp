// fused_reduction's statistics on the CPU (see fused_stat.h). Rows are split into parts of
// kStatChunk elements: pass 0 takes each part's statistic in parallel (the prologue's values
// folded into 16 lanes: the generated kernel a tile at a time, the interpreter a part at a
// time, element i of a part in lane i % 16 both ways), the parts of a row are folded in order,
// and pass 1 applies the epilogue to every element (or once per row).
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
    std::vector<const T*> row(n), part(n);
    std::string row_layouts, part_layouts;
    std::vector<T> buf(pro ? static_cast<size_t>(std::min(C, kStatChunk)) : 0);
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / nc, c0 = (it - r * nc) * kStatChunk;
      const int64_t c1 = std::min(c0 + kStatChunk, C);
      row_pointers<T>(ptrs, layouts, r, C, row, row_layouts);
      T acc[16];
      std::fill(acc, acc + 16, identity);
      if (pro == nullptr) {
        ignis_lanes_add(acc, row[0] + c0, c1 - c0, f);
      } else {
        // The part as a row of its own (full and repeated inputs read from its first element),
        // its prologue's values into buf, then into the lanes: element i of the part goes to
        // lane i % 16 as in the generated kernel's tiles (a multiple of 16 long).
        part_layouts = row_layouts;
        for (size_t i = 0; i < n; ++i) {
          if (part_layouts[i] == 'r') part_layouts[i] = 'f';
          part[i] = part_layouts[i] == 'f' ? row[i] + c0 : row[i];
        }
        interpret<T>(*pro, part, part_layouts, buf.data(), 0, c1 - c0, c1 - c0);
        ignis_lanes_add(acc, buf.data(), c1 - c0, f);
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
    if (!full) {
      // Rows [b, e) as elements 0 .. e - b: a value per row and the statistic are full, one
      // value stays one. A full input the epilogue reads holds one value per row (input 0
      // without a prologue, of shape [R, 1] before the reduction expanded it; any, in rows of
      // one element): its first element in each row, gathered. (It reads no repeated row.)
      const int64_t len = e - b;
      std::vector<std::vector<T>> gathered;
      gathered.reserve(n);
      for (size_t i = 0; i < n; ++i) {
        const T* p = static_cast<const T*>(ptrs[i]);
        const int k = static_cast<int>(i);
        if (layouts[i] == 'c') {
          row[i] = p + b;
          row_layouts += 'f';
        } else if (layouts[i] == 'f' && epi->reads_input(k)) {
          std::vector<T>& g = gathered.emplace_back(static_cast<size_t>(len));
          for (int64_t r = 0; r < len; ++r) g[static_cast<size_t>(r)] = p[(b + r) * C];
          row[i] = g.data();
          row_layouts += 'f';
        } else {
          row[i] = p;
          row_layouts += 's';
        }
      }
      row[n] = stat.data() + b;
      interpret<T>(*epi, row, row_layouts + 'f', dst + b, 0, len, len);  // (one row of len)
      return;
    }
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / nc;
      row_pointers<T>(ptrs, layouts, r, C, row, row_layouts);
      row[n] = stat.data() + r;
      const int64_t c0 = (it - r * nc) * kStatChunk, c1 = std::min(c0 + kStatChunk, C);
      interpret<T>(*epi, row, row_layouts + 's', dst + r * C, c0, c1, C);
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
