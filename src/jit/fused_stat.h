// fused_reduction's statistics (sum, mean, amax, amin over trailing dims, alone or as a chain of
// up to kMaxStatStages, each stage's prologue reading the statistics before it) on the CPU: the
// generated kernel (codegen.h: fused_stat_source) or, without a compiler, the interpreter over
// the same parts and lanes, so both give the same bits whatever the number of threads.
#pragma once

#include <string>
#include <vector>

#include "ignis/tensor.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/row_layout.h"

namespace ignis::jit::detail {

/// s_k = stats[k].reduction of stats[k].prologue(inputs, s_0 .. s_{k-1}) per row (a null
/// prologue: input 0), then out = epilogue(inputs, s_0 .. s_{K-1}) (null: s_{K-1}), over R rows
/// of C >= 1 elements: `lay` holds the inputs laid out against those rows (row_layout.h: its
/// rows R and cols C, read a chunk of rows at a time); out is contiguous, with R elements (not
/// `full`: one per row) or R * C (`full`). `key` names the kernel in the cache (it must tell
/// apart everything the source depends on).
void run_fused_stat(const std::vector<FusedStatStage>& stats, const FusedProgram* epilogue,
                    const RowLayout& lay, const Tensor& out, bool full, const std::string& key);

}  // namespace ignis::jit::detail
