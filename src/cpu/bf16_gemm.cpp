// bfloat16 products on CPUs that multiply bfloat16 natively (AVX512-BF16, AMX): oneDNN's matmul
// on the operands as they lie in memory (strided, transposed, a batch broadcast), accumulating in
// float32 and rounding once, as the float32-copies path does. Each primitive is made once per
// shape, strides and scales (an LRU cache, as the convolutions').
#include <atomic>
#include <bit>

#include "cpu/onednn_util.h"

namespace ignis::cpu::onednn {

namespace {

std::atomic<bool> enabled{true};

bool cpu_has_bf16() {
  static const bool has = [] {
    const auto isa = static_cast<unsigned>(dnnl::get_effective_cpu_isa());
    const auto bf16 = static_cast<unsigned>(dnnl::cpu_isa::avx512_core_bf16);
    return (isa & bf16) == bf16;
  }();
  return has;
}

struct GemmPrim {
  bool ok = false;
  dnnl::matmul prim;
  dnnl::memory::desc a, b, c;
};

LruCache<GemmPrim>& cache() {
  static LruCache<GemmPrim> c(128);
  return c;
}

// A batch of matrices as a 3-D desc: a batch stride of 0 (one matrix for all) is a batch of one,
// which the matmul broadcasts.
dnnl::memory::desc operand(int64_t batch, int64_t rows, int64_t cols, int64_t s, int64_t rs,
                           int64_t cs) {
  const bool one = s == 0 || batch == 1;
  return dnnl::memory::desc({one ? 1 : batch, rows, cols}, dnnl::memory::data_type::bf16,
                            {one ? rows * cols : s, rs, cs});
}

}  // namespace

bool native_bf16() { return cpu_has_bf16() && enabled.load(std::memory_order_relaxed); }

bool set_native_bf16_enabled(bool on) { return enabled.exchange(on); }

int64_t gemm_bf16_primitives_made() { return cache().misses(); }

bool gemm_bf16(int64_t batch, int64_t M, int64_t N, int64_t K, float alpha, const void* a,
               int64_t sa, int64_t rsa, int64_t csa, const void* b, int64_t sb, int64_t rsb,
               int64_t csb, float beta, void* c) {
  if (!native_bf16() || K == 0) return false;
  const std::string key =
      make_key({batch, M, N, K, batch == 1 ? 0 : sa, rsa, csa, batch == 1 ? 0 : sb, rsb, csb,
                std::bit_cast<int32_t>(alpha), std::bit_cast<int32_t>(beta)});
  auto prim = cache().get(key, [&] {
    GemmPrim r;
    try {
      r.a = operand(batch, M, K, sa, rsa, csa);
      r.b = operand(batch, K, N, sb, rsb, csb);
      r.c = dnnl::memory::desc({batch, M, N}, dnnl::memory::data_type::bf16,
                               dnnl::memory::format_tag::abc);
      dnnl::primitive_attr attr;
      if (alpha != 1.f) attr.set_output_scales(0, {alpha});
      if (beta != 0.f) {
        dnnl::post_ops ops;
        ops.append_sum(beta);
        attr.set_post_ops(ops);
      }
      dnnl::matmul::primitive_desc pd(dnnl::matmul::desc(r.a, r.b, r.c), attr, engine());
      if (is_reference_impl(pd.impl_info_str())) return GemmPrim();
      r.prim = dnnl::matmul(pd);
      r.ok = true;
    } catch (const dnnl::error&) {
      r = GemmPrim();  // no implementation for these strides: the float32 copies
    }
    return r;
  });
  if (!prim->ok) return false;
  auto& eng = engine();
  auto& s = stream();
  prim->prim.execute(s, {{DNNL_ARG_SRC, dnnl::memory(prim->a, eng, const_cast<void*>(a))},
                         {DNNL_ARG_WEIGHTS, dnnl::memory(prim->b, eng, const_cast<void*>(b))},
                         {DNNL_ARG_DST, dnnl::memory(prim->c, eng, c)}});
  s.wait();
  return true;
}

}  // namespace ignis::cpu::onednn
