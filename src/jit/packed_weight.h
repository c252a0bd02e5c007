// A frozen graph's weight reordered into the layout a oneDNN primitive wants, kept by the graph
// executor per node (src/jit/fused_conv.cpp, fused_linear.cpp, direct.cpp), and what lets the
// executor give up the plain copy of the weight once nothing else can reach it.
#pragma once

#include <cstdint>
#include <functional>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>

#include "ignis/tensor.h"

namespace ignis::jit::detail {

/// Valid while the primitive (its key), the plain weight's data and its version are those it was
/// packed for. With `released`, the executor has dropped the plain weight (nothing else held it,
/// so nothing can write into it): the packed bytes are then the weight, `sizes` and `dtype` its
/// geometry, and `unpack()` rebuilds it exactly (a reorder back) when a caller needs it plain.
struct PackedWeight {
  std::string key;
  const void* data = nullptr;
  uint32_t version = 0;
  Tensor weight;      // the packed bytes
  int64_t packs = 0;  // how many times the weight was reordered
  Shape sizes;        // the plain weight's
  DType dtype = kFloat32;
  std::function<Tensor()> unpack;  // a new plain weight from the packed bytes
  bool released = false;
  bool keep_plain = false;  // rebuilt once: not released again (a profiled run, autograd)

  /// Whether the packed bytes are those of `w` as it is now.
  bool packs_plain(const Tensor& w) const {
    return weight.defined() && w.defined() && data == w.data_ptr() && version == w._version();
  }

  /// Packs `w` (laid out as `plain`) into fresh bytes laid out as `inner`, for the primitive `key`,
  /// and records what unpack() needs to rebuild it.
  void pack(const std::string& k, const Tensor& w, const dnnl::memory::desc& plain,
            const dnnl::memory::desc& inner);
};

}  // namespace ignis::jit::detail
