// Dtype dispatch for kernels that only move bytes or read indices, shared by the CPU and CUDA
// indexing and joining kernels.
#pragma once

#include <cstdint>

#include "ignis/dtype.h"

namespace ignis {

/// Calls f.template operator()<U>() with an unsigned type of dt's element size.
template <class F>
decltype(auto) dispatch_size(DType dt, F&& f) {
  switch (element_size(dt)) {
    case 1: return f.template operator()<uint8_t>();
    case 2: return f.template operator()<uint16_t>();
    case 4: return f.template operator()<uint32_t>();
    default: return f.template operator()<uint64_t>();
  }
}

/// Calls f.template operator()<I>() with the index type of dt (int32, else int64).
template <class F>
decltype(auto) dispatch_index(DType dt, F&& f) {
  if (dt == kInt32) return f.template operator()<int32_t>();
  return f.template operator()<int64_t>();
}

}  // namespace ignis
