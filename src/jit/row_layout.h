// How a fused kernel reads its inputs against its output seen as R rows of C elements (C: the
// product of the output's trailing `dims` dims): each input is dense in its own shape, and row r
// of the output reads its row (or its one value) (r / q) % p, summed over the runs of kept
// leading dims (RowMap). That covers a full input (q 1, p R), a weight row (no run), one value
// per row, and the blocks a transformer broadcasts — a causal mask [T, T] or a position table
// [T, D] against [B, H, T, T] or [B, T, D] (q 1, p T), a padding mask [B, 1, 1, T] against
// [B, H, T, T] (q H T, p B), a mask per batch [B, 1, T, T] against [B, H, T, T] (two runs). The
// kernels (codegen.h) know four layouts, fixed over all rows; an input that repeats as a block is
// read through them a chunk of rows at a time: the rows split into chunks of `chunk` rows within
// which every input is full, a repeated row, one value per row or one value (its letter), and its
// pointer moves to the chunk's first row before the kernel runs on the chunk. Nothing is
// materialised at the output's shape. Other broadcasts (a trailing dim broadcast within the row)
// and blocks on a GPU (whose kernels run over all rows at once) are materialised.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::jit::detail {

/// Which of an input's rows (row kind) or values (value kind) row r of the output reads: the sum
/// over the runs of consecutive kept leading dims of ((r / q) % p) * s — q the output's rows
/// within one step of the run, p the run's rows, s the input's rows (values) within one step of
/// it. No run: the same row (value) for every r.
struct RowMap {
  struct Run {
    int64_t q = 1, p = 1, s = 1;
  };
  static constexpr int kMaxRuns = 4;  // more (a rank-9 output or more): materialised
  bool row = true;                    // rows of C elements; else one value per row
  int runs = 0;
  Run run[kMaxRuns];
  int64_t index(int64_t r) const {
    int64_t i = 0;
    for (int j = 0; j < runs; ++j) i += (r / run[j].q) % run[j].p * run[j].s;
    return i;
  }
  /// The element offset of row r's row or value.
  int64_t offset(int64_t r, int64_t C) const { return row ? index(r) * C : index(r); }
  /// Whether the rows (values) move one by one with r: the first run has q 1.
  bool moves() const { return runs > 0 && run[0].q == 1; }
  /// Whether the input's rows are the output's: one run over all R rows.
  bool full(int64_t R) const { return runs == 1 && run[0].q == 1 && run[0].p == R; }
  /// Whether one layout letter describes the input over all R rows (no chunks needed).
  bool native(int64_t R) const { return runs == 0 || full(R); }
};

struct RowLayout {
  std::vector<Tensor> keep;       // the dense tensors read (their elements and element sizes)
  std::vector<const void*> ptrs;  // their data
  std::string layouts;  // a letter each within a chunk (codegen.h; upper case: a bool input)
  std::vector<RowMap> maps;
  int64_t rows = 1, cols = 1;  // R, C
  int64_t chunk = 1;           // rows per chunk (R: one chunk)
  int64_t n = 0;               // R C

  /// The letter of input i as the kernel sees it over all rows when its map is native, else
  /// 'b' (an input repeated as a block: read chunk by chunk). Lower case.
  char native_letter(size_t i) const;

  /// `ptrs` (one per input, then any extra pointers, kept as they are) moved to the chunk
  /// starting at row r0, into `out`, for elements of `esize` bytes (0: each input's own).
  void at(const std::vector<const void*>& ptrs, int64_t r0, size_t esize,
          std::vector<const void*>& out) const;

  /// Splits units [b, e) (`per_row` units a row: elements C, rows 1, a statistic's parts) at
  /// the chunks' starts: f(r0, first, b', e') for each piece, with r0 the chunk's first row and
  /// first its first unit, so that b' - first and e' - first are units within the chunk.
  template <class F>
  void for_each_chunk(int64_t b, int64_t e, int64_t per_row, const F& f) const {
    const int64_t span = chunk * per_row;
    while (b < e) {
      const int64_t k = b / span, first = k * span, stop = std::min(e, first + span);
      f(k * chunk, first, b, stop);
      b = stop;
    }
  }
};

/// Lays `inputs` out against `shape` as rows of its trailing `dims` dims. `blocks`: inputs
/// repeated as blocks are read chunk by chunk (the CPU's kernels); otherwise, as every other
/// broadcast, materialised at the output's shape. `full_input`: an input read in full whatever
/// its shape (a reduction's input without a prologue; -1: none). `flat`: when no input needs
/// rows (all full or one value), one row of every element (elementwise kernels' flat loop).
RowLayout lay_out_rows(const std::vector<Tensor>& inputs, const Shape& shape, int64_t dims,
                       bool blocks, int full_input = -1, bool flat = false);

}  // namespace ignis::jit::detail
