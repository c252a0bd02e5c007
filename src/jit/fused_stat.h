// fused_reduction's statistics (sum, mean, amax, amin over trailing dims) on the CPU: the
// generated two-pass kernel (codegen.h: fused_stat_source) or, without a compiler, the interpreter
// over the same parts and lanes, so both give the same bits whatever the number of threads.
#pragma once

#include <string>
#include <vector>

#include "ignis/tensor.h"
#include "jit/fused_program.h"

namespace ignis::jit::detail {

/// out = epilogue(inputs, stat(prologue(inputs))) over R rows of C >= 1 elements: `ptrs` are the
/// inputs' data laid out as `layouts` against those rows (codegen.h); out is contiguous, with R
/// elements (not `full`: one per row) or R * C (`full`); a null program is none. `key` names the
/// kernel in the cache (it must tell apart everything the source depends on).
void run_fused_stat(const FusedProgram* prologue, const FusedProgram* epilogue,
                    const std::string& reduction, const std::vector<const void*>& ptrs,
                    const std::string& layouts, const Tensor& out, int64_t R, int64_t C, bool full,
                    const std::string& key);

}  // namespace ignis::jit::detail
