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
#include "ignis/dtype.h"

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

/// True when this CPU multiplies bfloat16 natively (AVX512-BF16 or AMX, as oneDNN reports it) and
/// the native path is enabled: bfloat16 products and convolutions then run oneDNN's bfloat16
/// primitives (float32 accumulation, rounded once to bfloat16), at about twice float32's rate.
/// Elsewhere, and where oneDNN offers only its reference code for a case, they compute on float32
/// copies, as they always did.
bool native_bf16();
/// Turns the native bfloat16 path off (tests compare it with the float32 copies); returns the
/// previous setting. It stays off on CPUs without native bfloat16.
bool set_native_bf16_enabled(bool enabled);
/// Whether the matmul and convolution primitives run `dt` here: float32, and bfloat16 where the
/// CPU has it natively.
inline bool runs_dtype(DType dt) { return dt == kFloat32 || (dt == kBFloat16 && native_bf16()); }
/// oneDNN's data type for float32 or bfloat16.
inline dnnl::memory::data_type data_type(DType dt) {
  return dt == kBFloat16 ? dnnl::memory::data_type::bf16 : dnnl::memory::data_type::f32;
}
/// True when a primitive descriptor got oneDNN's reference (unoptimised, scalar) implementation:
/// the bfloat16 paths then take the float32 copies instead.
inline bool is_reference_impl(const char* impl_info) {
  return std::strstr(impl_info, "ref") != nullptr;
}

/// bfloat16 `c[b] = alpha * a[b] @ b[b] + beta * c[b]` for b in [0, batch) through oneDNN's
/// matmul (float32 accumulation): a[b] is M x K with element (i, k) at a + b * sa + i * rsa +
/// k * csa (sa = 0: one matrix for every b), likewise b; c is contiguous [batch, M, N]. False,
/// with nothing written, when the path is off or oneDNN has only its reference code for it.
bool gemm_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const void* a,
               int64_t sa, int64_t rsa, int64_t csa, const void* b, int64_t sb, int64_t rsb,
               int64_t csb, float beta, void* c);
/// How many bfloat16 matmul primitives gemm_bf16 has made (cache misses; tests).
int64_t gemm_bf16_primitives_made();

}  // namespace ignis::cpu::onednn
