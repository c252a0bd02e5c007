// fused_reduction's statistics on the CPU (see fused_stat.h). Rows are split into parts of
// kStatChunk elements: pass k takes each part's statistic of stage k in parallel (the prologue's
// values folded into 16 lanes: the generated kernel a tile at a time, the interpreter a part at a
// time, element i of a part in lane i % 16 both ways), the parts of a row are folded in order,
// and the last pass applies the epilogue to every element (or once per row). Rows of one part
// run every pass a block of rows at a time, so that the block's inputs are read from memory once
// and from the cache again.
#include "jit/fused_stat.h"

#include <algorithm>
#include <limits>

#include "cpu/parallel.h"
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

enum class Combine { add, max, min };

Combine combine_of(const std::string& reduction) {
  return reduction == "amax" ? Combine::max : reduction == "amin" ? Combine::min : Combine::add;
}

/// f(combine) with the combining step as a functor (what the lanes are compiled with).
template <class F>
void with_combiner(Combine c, const F& f) {
  if (c == Combine::max)
    f(IgnisMaxNan{});
  else if (c == Combine::min)
    f(IgnisMinNan{});
  else
    f(IgnisAdd{});
}

template <class T>
T identity_of(Combine c) {
  return c == Combine::max   ? -std::numeric_limits<T>::infinity()
         : c == Combine::min ? std::numeric_limits<T>::infinity()
                             : T(0);
}

template <class T>
class StatRunner {
 public:
  /// `ptrs` and `layouts`: the inputs as the kernel reads them (`lay`'s) or, for the interpreter,
  /// as T.
  StatRunner(const std::vector<FusedStatStage>& stats, const FusedProgram* epi,
             const RowLayout& lay, const std::vector<const void*>& ptrs, const std::string& layouts,
             T* dst, bool full, FusedStatFn fn)
      : stats_(stats),
        epi_(epi),
        lay_(lay),
        ptrs_(ptrs),
        layouts_(layouts),
        dst_(dst),
        R_(lay.rows),
        C_(lay.cols),
        K_(static_cast<int64_t>(stats.size())),
        nc_((C_ + kStatChunk - 1) / kStatChunk),
        full_(full),
        fn_(fn),
        partial_(static_cast<size_t>(R_ * nc_)),
        st_(static_cast<size_t>(R_ * K_)) {}

  void run() {
    const int64_t parts = R_ * nc_;
    const int64_t part_grain = std::max<int64_t>(kGrainSize / std::min(C_, kStatChunk), 1);
    if (nc_ == 1) {
      // A row is one part: every pass over a block of rows (about 64 KiB of each input) before
      // the next block, each thread its own rows.
      const int64_t block = std::max<int64_t>(16384 / C_, 1);
      parallel_for(0, R_, part_grain, [&](int64_t b, int64_t e) {
        for (int64_t b0 = b; b0 < e; b0 += block) {
          const int64_t b1 = std::min(b0 + block, e);
          for (int64_t k = 0; k < K_; ++k) {
            stage(k, b0, b1);
            fold(k, b0, b1);
          }
          if (epi_ != nullptr) epilogue(b0, b1);
        }
      });
    } else {
      for (int64_t k = 0; k < K_; ++k) {
        parallel_for(0, parts, part_grain, [&](int64_t b, int64_t e) { stage(k, b, e); });
        fold(k, 0, R_);
      }
      if (epi_ != nullptr) {
        const int64_t items = full_ ? parts : R_;
        const int64_t grain = full_ ? part_grain : std::max<int64_t>(kGrainSize / 16, 1);
        parallel_for(0, items, grain, [&](int64_t b, int64_t e) { epilogue(b, e); });
      }
    }
    if (epi_ == nullptr)  // the last statistic
      for (int64_t r = 0; r < R_; ++r) dst_[r] = st_[static_cast<size_t>(r * K_ + K_ - 1)];
  }

 private:
  /// Runs f(in, r0, b', e') over units [b, e) (`per_row` a row) a chunk of rows at a time
  /// (row_layout.h): `in` the inputs' pointers at the chunk's first row r0, b' and e' within it.
  template <class F>
  void by_chunk(int64_t b, int64_t e, int64_t per_row, const F& f) const {
    std::vector<const void*> in;
    lay_.for_each_chunk(b, e, per_row, [&](int64_t r0, int64_t first, int64_t cb, int64_t ce) {
      lay_.at(ptrs_, r0, fn_ != nullptr ? 0 : sizeof(T), in);
      f(in, r0, cb - first, ce - first);
    });
  }

  /// Stage k's statistic of parts [b, e).
  void stage(int64_t k, int64_t b, int64_t e) {
    by_chunk(b, e, nc_,
             [&](const std::vector<const void*>& in, int64_t r0, int64_t lb, int64_t le) {
               if (fn_ != nullptr) {
                 fn_(in.data(), dst_, lb, le, C_, kStatChunk, partial_.data() + r0 * nc_,
                     st_.data() + r0 * K_, static_cast<int>(k));
               } else {
                 interpret_stage(k, in, r0, lb, le);
               }
             });
  }

  /// The interpreter's stage k over parts [b, e) of the chunk of rows from r0 (`in` there).
  void interpret_stage(int64_t k, const std::vector<const void*>& in, int64_t r0, int64_t b,
                       int64_t e) {
    const FusedProgram* pro = stats_[static_cast<size_t>(k)].prologue;
    const Combine comb = combine_of(stats_[static_cast<size_t>(k)].reduction);
    const size_t n = in.size();
    std::vector<const T*> row(n + static_cast<size_t>(k)), part(row.size());
    std::string row_layouts, part_layouts;
    std::vector<T> buf(pro ? static_cast<size_t>(std::min(C_, kStatChunk)) : 0);
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / nc_, c0 = (it - r * nc_) * kStatChunk;
      const int64_t c1 = std::min(c0 + kStatChunk, C_);
      row_pointers<T>(in, layouts_, r, C_, row, row_layouts);
      T acc[16];
      std::fill(acc, acc + 16, identity_of<T>(comb));
      with_combiner(comb, [&](const auto& f) {
        if (pro == nullptr) {
          ignis_lanes_add(acc, row[0] + c0, c1 - c0, f);
        } else {
          // The part as a row of its own (full and repeated inputs read from its first element;
          // the earlier statistics one value each), its prologue's values into buf, then into
          // the lanes: element i of the part goes to lane i % 16 as in the generated kernel's
          // tiles (a multiple of 16 long).
          part_layouts = row_layouts + std::string(static_cast<size_t>(k), 's');
          for (size_t i = 0; i < n; ++i) {
            if (part_layouts[i] == 'r') part_layouts[i] = 'f';
            part[i] = part_layouts[i] == 'f' ? row[i] + c0 : row[i];
          }
          for (int64_t j = 0; j < k; ++j) part[n + static_cast<size_t>(j)] = stat(r0 + r, j);
          interpret<T>(*pro, part, part_layouts, buf.data(), 0, c1 - c0, c1 - c0);
          ignis_lanes_add(acc, buf.data(), c1 - c0, f);
        }
        partial_[static_cast<size_t>(r0 * nc_ + it)] = ignis_lanes_total(acc, f);
      });
    }
  }

  /// Rows [r0, r1)'s statistic of stage k: their parts folded in order; mean divides.
  void fold(int64_t k, int64_t r0, int64_t r1) {
    const std::string& reduction = stats_[static_cast<size_t>(k)].reduction;
    with_combiner(combine_of(reduction), [&](const auto& f) {
      for (int64_t r = r0; r < r1; ++r) {
        T v = partial_[static_cast<size_t>(r * nc_)];
        for (int64_t j = 1; j < nc_; ++j) v = f(v, partial_[static_cast<size_t>(r * nc_ + j)]);
        st_[static_cast<size_t>(r * K_ + k)] = reduction == "mean" ? v / static_cast<T>(C_) : v;
      }
    });
  }

  const T* stat(int64_t r, int64_t k) const { return st_.data() + r * K_ + k; }

  /// The epilogue over parts [b, e) (`full`) or rows [b, e), the row's statistics as its last
  /// inputs (one value each).
  void epilogue(int64_t b, int64_t e) {
    by_chunk(b, e, full_ ? nc_ : 1,
             [&](const std::vector<const void*>& in, int64_t r0, int64_t lb, int64_t le) {
               if (fn_ != nullptr) {
                 fn_(in.data(), dst_ + (full_ ? r0 * C_ : r0), lb, le, C_, kStatChunk,
                     partial_.data() + r0 * nc_, st_.data() + r0 * K_, static_cast<int>(K_));
               } else {
                 interpret_epilogue(in, r0, lb, le);
               }
             });
  }

  /// The interpreter's epilogue over parts (`full`) or rows [b, e) of the chunk of rows from r0
  /// (`in` there).
  void interpret_epilogue(const std::vector<const void*>& in, int64_t r0, int64_t b, int64_t e) {
    const size_t n = in.size(), K = static_cast<size_t>(K_);
    std::vector<const T*> row(n + K);
    std::string row_layouts;
    if (!full_) {
      // Rows [b, e) as elements 0 .. e - b: a value per row and the statistics are full, one
      // value stays one. A full input the epilogue reads holds one value per row (input 0
      // without a prologue, of shape [R, 1] before the reduction expanded it; any, in rows of
      // one element): its first element in each row, gathered. (It reads no repeated row.)
      const int64_t len = e - b;
      std::vector<std::vector<T>> gathered;
      gathered.reserve(n + K);
      for (size_t i = 0; i < n; ++i) {
        const T* p = static_cast<const T*>(in[i]);
        if (layouts_[i] == 'c') {
          row[i] = p + b;
          row_layouts += 'f';
        } else if (layouts_[i] == 'f' && epi_->reads_input(static_cast<int>(i))) {
          std::vector<T>& g = gathered.emplace_back(static_cast<size_t>(len));
          for (int64_t r = 0; r < len; ++r) g[static_cast<size_t>(r)] = p[(b + r) * C_];
          row[i] = g.data();
          row_layouts += 'f';
        } else {
          row[i] = p;
          row_layouts += 's';
        }
      }
      for (size_t j = 0; j < K; ++j) {
        std::vector<T>& g = gathered.emplace_back(static_cast<size_t>(len));
        for (int64_t r = 0; r < len; ++r) g[static_cast<size_t>(r)] = *stat(r0 + b + r, j);
        row[n + j] = g.data();
        row_layouts += 'f';
      }
      interpret<T>(*epi_, row, row_layouts, dst_ + r0 + b, 0, len, len);  // (one row of len)
      return;
    }
    for (int64_t it = b; it < e; ++it) {
      const int64_t r = it / nc_;
      row_pointers<T>(in, layouts_, r, C_, row, row_layouts);
      for (size_t j = 0; j < K; ++j) row[n + j] = stat(r0 + r, static_cast<int64_t>(j));
      const int64_t c0 = (it - r * nc_) * kStatChunk, c1 = std::min(c0 + kStatChunk, C_);
      interpret<T>(*epi_, row, row_layouts + std::string(K, 's'), dst_ + (r0 + r) * C_, c0, c1, C_);
    }
  }

  const std::vector<FusedStatStage>& stats_;
  const FusedProgram* epi_;
  const RowLayout& lay_;
  const std::vector<const void*>& ptrs_;
  const std::string& layouts_;
  T* dst_;
  const int64_t R_, C_, K_, nc_;
  const bool full_;
  const FusedStatFn fn_;
  std::vector<T> partial_;  // each part's statistic of the stage being taken
  std::vector<T> st_;       // [R, K]: each row's statistics
};

}  // namespace

void run_fused_stat(const std::vector<FusedStatStage>& stats, const FusedProgram* epilogue,
                    const RowLayout& lay, const Tensor& out, bool full, const std::string& key) {
  const DType dtype = out.dtype();
  auto fn = reinterpret_cast<FusedStatFn>(fused_kernel(
      key,
      [&] {
        return fused_stat_source(stats, epilogue, static_cast<int>(lay.ptrs.size()), dtype,
                                 lay.layouts, full);
      },
      "fused_reduction"));
  auto run = [&]<class T>() {
    const InterpreterInputs<T> interp(lay.ptrs, lay.layouts, lay.keep, fn == nullptr);
    StatRunner<T>(stats, epilogue, lay, interp.ptrs, interp.layouts, out.data_ptr<T>(), full, fn)
        .run();
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
}

}  // namespace ignis::jit::detail
