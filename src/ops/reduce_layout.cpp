// The layout analysis of the reduction drivers (ops/reduce_layout.h): device-generic, it looks
// at sizes and strides only, and copies with tensor ops when the input is not one dense block.
#include "ops/reduce_layout.h"

#include <algorithm>

namespace ignis {

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

}  // namespace ignis
