// Generated elementwise kernels: C++ emitted for a fused program from the shared functors,
// compiled by the system compiler into a shared object kept in an on-disk cache keyed by the
// source and the flags, and loaded with dlopen.
#pragma once

#include <cstdint>
#include <string>

#include "ignis/dtype.h"
#include "jit/fused_program.h"

namespace ignis::jit::detail {

/// How an input is laid out against the output, seen as rows of C elements (C: the output's
/// last dim, or all of it when no input needs rows): 'f' full (element k), 'r' a row repeated
/// for every row (element k % C), 'c' one value per row (element k / C), 's' one value.
/// A generated kernel computes out[k] = program(inputs) for k in [begin, end).
using FusedKernelFn = void (*)(const void* const* in, void* out, int64_t begin, int64_t end,
                               int64_t cols);

/// The C++ source of the kernel for `p` on `dtype` (float32 or float64) with these input
/// layouts (one letter per input, see above): the embedded functors, then the loop over row
/// segments, vectorisable along the row.
std::string fused_kernel_source(const FusedProgram& p, DType dtype, const std::string& layouts);

/// The compiled kernel for `source`: from this process's table, else from the on-disk cache,
/// else compiled now. Null when there is no working compiler; `why` then says what failed.
FusedKernelFn compiled_kernel(const std::string& source, std::string& why);

/// The compiler command graph mode runs ($IGNIS_JIT_CXX, else c++) and the cache directory
/// ($IGNIS_JIT_CACHE, else $XDG_CACHE_HOME/ignis/jit, else ~/.cache/ignis/jit).
std::string jit_compiler();
std::string jit_cache_dir();

}  // namespace ignis::jit::detail
