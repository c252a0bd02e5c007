// Generated elementwise kernels: C++ emitted for a fused program from the shared functors,
// compiled by the system compiler into a shared object kept in an on-disk cache keyed by the
// source and the flags, and loaded with dlopen.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

#include "ignis/dtype.h"
#include "jit/fused_program.h"

namespace ignis::jit::detail {

/// How an input is laid out against the output, seen as rows of C elements (C: the output's
/// last dim, or all of it when no input needs rows): 'f' full (element k), 'r' a row repeated
/// for every row (element k % C), 'c' one value per row (element k / C), 's' one value.
/// The letter in upper case ('F', 'R', 'C', 'S'): the same layout of a bool input (a mask),
/// read as 1 or 0 in the kernel's dtype.
inline bool is_bool_layout(char l) { return l >= 'A' && l <= 'Z'; }
/// The layout's letter for a float input ('F' -> 'f').
inline char float_layout(char l) {
  return is_bool_layout(l) ? static_cast<char>(l - 'A' + 'a') : l;
}
/// The letter of layout `l` (lower case) for an input of dtype `d`.
inline char layout_letter(char l, DType d) {
  return d == kBool ? static_cast<char>(l - 'a' + 'A') : l;
}

/// A generated kernel computes out[k] = program(inputs) for k in [begin, end).
using FusedKernelFn = void (*)(const void* const* in, void* out, int64_t begin, int64_t end,
                               int64_t cols);

/// The C++ source of the kernel for `p` on `dtype` (float32 or float64) with these input
/// layouts (one letter per input, see above): the embedded functors, then the loop over row
/// segments, vectorisable along the row.
std::string fused_kernel_source(const FusedProgram& p, DType dtype, const std::string& layouts);

/// A kernel with several results (a fused backward, fused_program.h): outs[j][k] = the value
/// `outputs[j]` of the program at element k, for k in [begin, end).
using FusedMultiKernelFn = void (*)(const void* const* in, void* const* outs, int64_t begin,
                                    int64_t end, int64_t cols);
/// Its C++ source (as fused_kernel_source's, storing each of the values `outputs`).
std::string fused_multi_kernel_source(const FusedProgram& p, const std::vector<int>& outputs,
                                      DType dtype, const std::string& layouts);

/// The CUDA C++ source of the same kernel for a GPU (compiled by NVRTC in the CUDA backend:
/// cuda/nvrtc_fusion.cpp), from the same functors: `extern "C" __global__ void
/// ignis_fused_kernel(IgnisFusedInputs in, void* out, long long n, long long cols)`, a thread
/// per output element in a grid-stride loop; IgnisFusedInputs holds kMaxFusedInputs pointers.
std::string fused_cuda_kernel_source(const FusedProgram& p, DType dtype, const std::string& layouts);

/// The CUDA C++ source of a fused reduction for a GPU (NVRTC, cuda/nvrtc_fusion.cpp):
/// `extern "C" __global__ void ignis_fused_kernel(IgnisFusedInputs in, void* out, long long rows,
/// long long cols, double eps, void* scratch)`, a block of 256 threads per row (grid-stride over
/// the rows), the row's statistics by tree reductions in shared memory; `scratch` holds
/// gridDim.x * cols elements for the prologue's values, a row per block (unused without one).
/// A program's dropouts read their stream from the argument: the prologue's `rng`, the
/// epilogue's `rng2`.
std::string fused_cuda_reduction_source(const FusedProgram* prologue, const std::string& reduction,
                                        const FusedProgram* epilogue, int num_inputs, DType dtype,
                                        const std::string& layouts);

/// A generated row-wise reduction kernel (fused_reduction): for each row r in [row_begin,
/// row_end) of `cols` elements, x = prologue(inputs) (or input 0), the reduction of x along the
/// row (layer_norm: (x - mean) * rsqrt(var + eps); softmax; log_softmax), then
/// out = epilogue(inputs, that) (or that). `scratch` holds 2 * `cols` elements: the prologue's
/// values, for rows of up to 2048 a row ahead (row r + 1's half written before row r is
/// reduced). A program with dropout reads its stream (seed, base, n) through the pointer after
/// the inputs' (the prologue's first, then the epilogue's); element (r, c) draws as element
/// r * cols + c.
using FusedReductionFn = void (*)(const void* const* in, void* out, int64_t row_begin,
                                  int64_t row_end, int64_t cols, double eps, void* scratch);

/// The C++ source of the kernel for a fused reduction (`prologue`, `epilogue` may be null: none)
/// over `num_inputs` inputs laid out as `layouts` (one letter each, against rows of `cols`; the
/// epilogue's extra input, the reduction's result, is full).
std::string fused_reduction_source(const FusedProgram* prologue, const std::string& reduction,
                                   const FusedProgram* epilogue, int num_inputs, DType dtype,
                                   const std::string& layouts);

/// One stage of fused_reduction's statistics: "sum", "mean", "amax" or "amin" of its prologue's
/// values over each row (a null prologue: input 0). Stage k's prologue reads the node's n inputs
/// and the rows' statistics of the stages before it, as inputs i<n> .. i<n+k-1> (one value per
/// row); the epilogue reads the n inputs and every stage's statistic.
struct FusedStatStage {
  const FusedProgram* prologue = nullptr;
  std::string reduction;
};
/// At most this many stages in one fused_reduction (a hand-written layer norm or softmax: two).
constexpr int kMaxStatStages = 4;

/// A generated kernel for fused_reduction's statistics over rows of `cols`, in passes the caller
/// runs in parallel over parts of rows, K stages then the epilogue. Pass k < K: for each part
/// `it` in [begin, end) — row r = it / nc, columns [j chunk, (j + 1) chunk) with j = it % nc and
/// nc = ceil(cols / chunk) — partial[it] = stage k's statistic of its prologue over the part (sum,
/// max or min: mean's division is the caller's, as is folding the parts of a row, row_reduce.h),
/// reading the row's earlier statistics stats[r K + 0 .. r K + k - 1]. Pass K: the epilogue at
/// every element of parts [begin, end) into out (`full`: out has the rows' shape), or once per
/// row r in [begin, end) into out[r] (not `full`: one value per row).
using FusedStatFn = void (*)(const void* const* in, void* out, int64_t begin, int64_t end,
                             int64_t cols, int64_t chunk, void* partial, const void* stats,
                             int pass);
std::string fused_stat_source(const std::vector<FusedStatStage>& stats,
                              const FusedProgram* epilogue, int num_inputs, DType dtype,
                              const std::string& layouts, bool full);
/// The same for a GPU, with fused_cuda_reduction_source's signature (no scratch): a block per
/// row folds each stage's prologue values as it computes them, then applies the epilogue (every
/// element when `full`, else thread 0 once into out[r]).
std::string fused_cuda_stat_source(const std::vector<FusedStatStage>& stats,
                                   const FusedProgram* epilogue, int num_inputs, DType dtype,
                                   const std::string& layouts, bool full);

/// The symbol ignis_fused_kernel of the compiled `source`: from this process's table, else from
/// the on-disk cache, else compiled now. Null when there is no working compiler; `why` then says
/// what failed.
void* compiled_symbol(const std::string& source, std::string& why);

/// The compiler command graph mode runs ($IGNIS_JIT_CXX, else c++) and the cache directory
/// ($IGNIS_JIT_CACHE, else $XDG_CACHE_HOME/ignis/jit, else ~/.cache/ignis/jit).
std::string jit_compiler();
std::string jit_cache_dir();

}  // namespace ignis::jit::detail
