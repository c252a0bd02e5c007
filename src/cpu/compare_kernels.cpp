// CPU kernels of comparisons, logical ops, isnan/isinf/isfinite (bool outputs) and where.
#include "cpu/loops.h"
#include "ops/unary.h"

namespace ignis::cpu {
namespace {

// bool loads block GCC's vectoriser, so bool operands are read as the bytes (0 or 1) they are.
template <class T>
using load_t = std::conditional_t<std::is_same_v<T, bool>, uint8_t, T>;

/// bool out = F(a, b), a and b of dtype `dt`.
template <class F>
void compare_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "compare",
                 [&]<class T>() { cpu_kernel<bool, load_t<T>, load_t<T>>(it, F{args}); });
}
/// bool out = F(x), x of dtype `dt`.
template <class F>
void predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "predicate", [&]<class T>() { cpu_kernel<bool, load_t<T>>(it, F{args}); });
}
/// Same, floating x only.
template <class F>
void float_predicate_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_floating(dt, "predicate", [&]<class T>() { cpu_kernel<bool, T>(it, F{args}); });
}

// where(c, a, scalar) or where(c, scalar, a) over a flat range: the scalar is hoisted out of the
// loop (the generic loop would read the stride-0 operand element by element).
template <class L>
bool where_flat_scalar(const TensorIter& it) {
  if (it.ndim != 1) return false;
  const int64_t e = sizeof(L);
  const auto& s = it.strides;
  if (s[0][0] != e || s[1][0] != 1) return false;
  const bool b_scalar = s[2][0] == e && s[3][0] == 0;
  const bool a_scalar = s[2][0] == 0 && s[3][0] == e;
  if (!a_scalar && !b_scalar) return false;
  const int64_t n = it.numel;
  char* const od = it.data[0];
  const char* const cd = it.data[1];
  const char* const td = it.data[b_scalar ? 2 : 3];  // the tensor operand
  const L v = load<L>(it.data[b_scalar ? 3 : 2]);    // the scalar
  parallel_for(0, n, kGrainSize, [&](int64_t begin, int64_t end) {
    L* __restrict o = reinterpret_cast<L*>(od);
    const uint8_t* c = reinterpret_cast<const uint8_t*>(cd);
    const L* t = reinterpret_cast<const L*>(td);
    const L sv = v;  // a local copy: o may not alias it
    if (b_scalar) {
      for (int64_t k = begin; k < end; ++k) o[k] = c[k] ? t[k] : sv;
    } else {
      for (int64_t k = begin; k < end; ++k) o[k] = c[k] ? sv : t[k];
    }
  });
  return true;
}

void where_kernel(const TensorIter& it, DType dt, OpArgs args) {
  dispatch_dtype(dt, "where", [&]<class T>() {
    using L = load_t<T>;
    if (where_flat_scalar<L>(it)) return;
    cpu_kernel<L, uint8_t, L, L>(it, fn::Where{args});
  });
}

}  // namespace

IGNIS_REGISTER_KERNEL(eq_stub, CPU, &compare_kernel<fn::Eq>);
IGNIS_REGISTER_KERNEL(ne_stub, CPU, &compare_kernel<fn::Ne>);
IGNIS_REGISTER_KERNEL(lt_stub, CPU, &compare_kernel<fn::Lt>);
IGNIS_REGISTER_KERNEL(le_stub, CPU, &compare_kernel<fn::Le>);
IGNIS_REGISTER_KERNEL(gt_stub, CPU, &compare_kernel<fn::Gt>);
IGNIS_REGISTER_KERNEL(ge_stub, CPU, &compare_kernel<fn::Ge>);
IGNIS_REGISTER_KERNEL(logical_and_stub, CPU, &compare_kernel<fn::LogicalAnd>);
IGNIS_REGISTER_KERNEL(logical_or_stub, CPU, &compare_kernel<fn::LogicalOr>);
IGNIS_REGISTER_KERNEL(logical_not_stub, CPU, &predicate_kernel<fn::LogicalNot>);
IGNIS_REGISTER_KERNEL(isnan_stub, CPU, &float_predicate_kernel<fn::IsNan>);
IGNIS_REGISTER_KERNEL(isinf_stub, CPU, &float_predicate_kernel<fn::IsInf>);
IGNIS_REGISTER_KERNEL(isfinite_stub, CPU, &float_predicate_kernel<fn::IsFinite>);
IGNIS_REGISTER_KERNEL(where_stub, CPU, &where_kernel);

}  // namespace ignis::cpu
