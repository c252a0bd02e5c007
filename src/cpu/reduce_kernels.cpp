// CPU kernels of the one-pass reductions (sum, prod, amax, amin, all, any) and the layout
// analysis of the reduction driver.
#include "cpu/reduce.h"

namespace ignis::cpu {

ReduceLayout reduce_layout(const Tensor& x, const ReducePlan& plan) {
  ReduceLayout L;
  const int64_t nd = x.dim();
  const IntArrayRef sz = x.sizes(), st = x.strides();
  // The dims that matter (size > 1) in memory order, largest stride first.
  Shape order;
  for (int64_t d = 0; d < nd; ++d) {
    if (sz[d] != 1) order.push_back(d);
  }
  std::stable_sort(order.begin(), order.end(), [&](int64_t a, int64_t b) { return st[a] > st[b]; });
  bool ok = true;
  int64_t expect = 1;
  for (size_t k = order.size(); k-- > 0;) {
    ok = ok && st[order[k]] == expect;
    expect *= sz[order[k]];
  }
  // Dense: it works in place if the reduced dims are one block and the kept dims keep their order.
  int state = 0;  // 0: before the reduced block, 1: in it, 2: after it
  int64_t last_kept = -1, outer = 1, n = 1, inner = 1;
  for (int64_t d : order) {
    if (plan.is_reduced(d)) {
      ok = ok && state != 2;
      state = 1;
      n *= sz[d];
    } else {
      ok = ok && d > last_kept;
      last_kept = d;
      if (state == 0) {
        outer *= sz[d];
      } else {
        state = 2;
        inner *= sz[d];
      }
    }
  }
  if (ok) {
    L.data = x.data_ptr();
    L.outer = outer;
    L.n = n;
    L.inner = inner;
    return L;
  }
  Shape perm;
  for (int64_t d = 0; d < nd; ++d) {
    if (!plan.is_reduced(d)) perm.push_back(d);
  }
  for (int64_t d = 0; d < nd; ++d) {
    if (plan.is_reduced(d)) perm.push_back(d);
  }
  {
    NoGradGuard ng;
    L.hold = x.detach().permute(perm).contiguous();
  }
  L.data = L.hold.data_ptr();
  L.n = plan.reduced_numel;
  L.outer = L.n == 0 ? 0 : x.numel() / L.n;
  return L;
}

ReduceLayout dim_layout(const Tensor& x, int64_t dim) {
  ReduceLayout L;
  if (x.is_contiguous()) {
    L.data = x.data_ptr();
  } else {
    NoGradGuard ng;
    L.hold = x.detach().contiguous();
    L.data = L.hold.data_ptr();
  }
  const IntArrayRef sz = x.sizes();
  for (int64_t d = 0; d < x.dim(); ++d) {
    if (d < dim) L.outer *= sz[d];
    if (d == dim) L.n = sz[d];
    if (d > dim) L.inner *= sz[d];
  }
  return L;
}

namespace {

/// Folds with an int64 accumulator for integer and bool inputs (sum, prod promote them to int64).
template <template <class> class R>
void int64_or_same_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan,
                          const char* op) {
  dispatch_dtype(x.dtype(), op, [&]<class T>() {
    if constexpr (std::is_integral_v<T>) {
      IGNIS_CHECK(out.dtype() == kInt64 || out.dtype() == x.dtype(), op, ": output dtype ",
                  out.dtype(), " for ", x.dtype(), " input");
      if (out.dtype() == kInt64) {
        run_reduction<T, int64_t>(out, x, plan, R<int64_t>{});
      } else {
        run_reduction<T, T>(out, x, plan, R<int64_t>{});
      }
    } else {
      run_reduction<T, T>(out, x, plan, R<acc_t<T>>{});
    }
  });
}

template <class A>
struct ProdReducer {
  using acc_type = A;
  A identity() const { return A(1); }
  A step(A a, A v) const { return a * v; }
  A merge(A a, A b) const { return a * b; }
  A finish(A a, int64_t) const { return a; }
};

template <bool IsAll>
struct AllAnyReducer {
  using acc_type = bool;
  bool identity() const { return IsAll; }
  template <class V>
  bool step(bool a, V v) const {
    return IsAll ? (a & (v != V(0))) : (a | (v != V(0)));
  }
  bool merge(bool a, bool b) const { return IsAll ? (a & b) : (a | b); }
  bool finish(bool a, int64_t) const { return a; }
};

void sum_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<SumReducer>(out, x, plan, "sum");
}

void mean_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_floating(x.dtype(), "mean",
                    [&]<class T>() { run_reduction<T, T>(out, x, plan, MeanReducer<acc_t<T>>{}); });
}

void prod_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  int64_or_same_kernel<ProdReducer>(out, x, plan, "prod");
}

template <bool IsMax>
void minmax_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsMax ? "amax" : "amin", [&]<class T>() {
    run_reduction<T, T>(out, x, plan, MinMaxReducer<acc_t<T>, IsMax>{});
  });
}

template <bool IsAll>
void all_any_kernel(const Tensor& out, const Tensor& x, const ReducePlan& plan) {
  dispatch_dtype(x.dtype(), IsAll ? "all" : "any",
                 [&]<class T>() { run_reduction<T, bool>(out, x, plan, AllAnyReducer<IsAll>{}); });
}

}  // namespace
IGNIS_REGISTER_KERNEL(sum_stub, CPU, &sum_kernel);
IGNIS_REGISTER_KERNEL(mean_stub, CPU, &mean_kernel);
IGNIS_REGISTER_KERNEL(prod_stub, CPU, &prod_kernel);
IGNIS_REGISTER_KERNEL(amax_stub, CPU, &minmax_kernel<true>);
IGNIS_REGISTER_KERNEL(amin_stub, CPU, &minmax_kernel<false>);
IGNIS_REGISTER_KERNEL(all_stub, CPU, &all_any_kernel<true>);
IGNIS_REGISTER_KERNEL(any_stub, CPU, &all_any_kernel<false>);
}  // namespace ignis::cpu
