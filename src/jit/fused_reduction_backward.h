// A fused_reduction's training backward on the CPU in one pass over the rows: blocks of rows,
// each taken through every step of the backward while it is in the cache (fused_reduction.cpp
// falls back to a pass per step where this does not apply).
#pragma once

#include <string>
#include <vector>

#include "ignis/tensor.h"
#include "jit/fused_program.h"

namespace ignis::jit::detail {

/// What the backward of one fused_reduction call needs of it: its stages — one reduction
/// (layer_norm, rms_norm, softmax, log_softmax, or a statistic: sum, mean, amax, amin), or a
/// chain of statistics — each with its prologue (null: it reduces input 0; stage k's reads the
/// inputs and the statistics before it), its epilogue (null: none), the trailing `dims` dims
/// reduced, and where the programs' dropouts drew in the forward (stage 0's prologue, the
/// epilogue).
struct ReductionBackwardSpec {
  struct Stage {
    const FusedProgram* pro = nullptr;
    std::string reduction;
  };
  std::vector<Stage> stages;
  const FusedProgram* epi = nullptr;
  int64_t dims = 1;
  double eps = 1e-5;
  bool full = true;  // a statistic's output has the rows' shape (its epilogue runs over them)
  FusedRng pro_rng, epi_rng;
};

/// Rows longer than this take the backward's steps one pass each (a block is at least a row).
constexpr int64_t kMaxBlockedCols = 65536;

/// The gradients of the inputs `want` (indices into `in`, the node's inputs) of the fused
/// reduction over rows of `shape`, given its output's gradient g, into r (r[k] as
/// fused_input_grads gives them: at the input's shape where the input is a row, a value per row
/// or one value repeated over the rows, else at the rows' shape for the engine to sum). Blocks
/// of rows (fixed by the row length, not the threads: the same sums whatever the number of
/// threads) each go through x = prologue(inputs), y = reduce(x) (per stage), the epilogue's
/// gradients (one multi-output kernel: the inputs' and y's), x's by the row math
/// (reduction_rows.h) and the prologue's (one multi-output kernel; per stage, the last first),
/// the intermediates in per-thread buffers of a block: the inputs and g are read from memory
/// once and each gradient written once. The generated kernels, or the interpreter without them.
/// False, with nothing computed, where it does not apply: not the CPU, a statistic's epilogue
/// over one value per row, rows longer than kMaxBlockedCols elements, programs without a
/// backward.
bool reduction_backward_in_blocks(const ReductionBackwardSpec& s, const std::vector<Tensor>& in,
                                  const Tensor& g, const Shape& shape, const std::vector<int>& want,
                                  TensorList& r);

}  // namespace ignis::jit::detail
