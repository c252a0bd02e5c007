#include "distributed/reduce.h"

#include <algorithm>

#include "core/dispatch.h"

namespace ignis::distributed::detail {
namespace {

template <class T, class F>
void apply(T* acc, const T* in, int64_t n, F f) {
  for (int64_t i = 0; i < n; ++i) acc[i] = f(acc[i], in[i]);
}

}  // namespace

void reduce_into(void* acc_v, const void* in_v, int64_t n, DType dtype, ReduceOp op) {
  if (dtype == DType::Bool) {
    auto* acc = static_cast<uint8_t*>(acc_v);
    const auto* in = static_cast<const uint8_t*>(in_v);
    if (op == ReduceOp::PRODUCT || op == ReduceOp::MIN) {
      apply(acc, in, n, [](uint8_t a, uint8_t b) -> uint8_t { return a && b; });
    } else {
      apply(acc, in, n, [](uint8_t a, uint8_t b) -> uint8_t { return a || b; });
    }
    return;
  }
  dispatch_dtype(dtype, "reduce", [&]<class T>() {
    auto* acc = static_cast<T*>(acc_v);
    const auto* in = static_cast<const T*>(in_v);
    using A = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;
    switch (op) {
      case ReduceOp::SUM:
      case ReduceOp::AVG: apply(acc, in, n, [](T a, T b) { return T(A(a) + A(b)); }); break;
      case ReduceOp::PRODUCT: apply(acc, in, n, [](T a, T b) { return T(A(a) * A(b)); }); break;
      case ReduceOp::MIN: apply(acc, in, n, [](T a, T b) { return A(b) < A(a) ? b : a; }); break;
      case ReduceOp::MAX: apply(acc, in, n, [](T a, T b) { return A(b) > A(a) ? b : a; }); break;
    }
  });
}

void divide_inplace(void* x, int64_t n, DType dtype, int64_t divisor) {
  dispatch_floating(dtype, "all_reduce", [&]<class T>() {
    auto* p = static_cast<T*>(x);
    using A = std::conditional_t<std::is_same_v<T, BFloat16>, float, T>;
    const A d = static_cast<A>(divisor);
    for (int64_t i = 0; i < n; ++i) p[i] = T(A(p[i]) / d);
  });
}

void check_reduce_op(const char* op, DType dtype, ReduceOp reduce_op) {
  IGNIS_CHECK(reduce_op != ReduceOp::AVG || is_floating_point(dtype), op,
              ": ReduceOp.AVG needs a floating dtype, got ", dtype);
}

}  // namespace ignis::distributed::detail
