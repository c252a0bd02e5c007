// Shared oneDNN plumbing for the CPU kernels: the engine, a stream per thread, and a small LRU
// cache of primitives keyed by shapes and parameters (core/lru_cache.h), so that a primitive
// (whose creation JITs code and costs 0.1-1 ms) is created once per shape and reused by every
// later call.
#pragma once

#include <cstdint>
#include <cstring>
#include <memory>
#include <oneapi/dnnl/dnnl.hpp>
#include <string>
#include <utility>
#include <vector>

#include "core/lru_cache.h"

namespace ignis::cpu::onednn {

inline dnnl::engine& engine() {
  static dnnl::engine e(dnnl::engine::kind::cpu, 0);
  return e;
}

/// In-order CPU streams are cheap, but one per thread avoids sharing one between threads.
inline dnnl::stream& stream() {
  thread_local dnnl::stream s(engine());
  return s;
}

/// A cache key: a list of integers (dims, strides, flags) packed into bytes.
inline std::string make_key(std::initializer_list<int64_t> v) {
  std::string k(v.size() * sizeof(int64_t), '\0');
  std::memcpy(k.data(), v.begin(), k.size());
  return k;
}
inline std::string make_key(const std::vector<int64_t>& v) {
  std::string k(v.size() * sizeof(int64_t), '\0');
  std::memcpy(k.data(), v.data(), k.size());
  return k;
}

/// The primitives' cache (core/lru_cache.h).
using ignis::LruCache;

}  // namespace ignis::cpu::onednn
