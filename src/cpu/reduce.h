// CPU reduction driver: brings the reduced dims of x together and runs a reducer over them.
// A reducer is a struct with
//   using acc_type;  acc_type identity() const;
//   acc_type step(acc_type acc, acc_t<T> v) const;   // fold one element (vectorisable)
//   acc_type merge(acc_type a, acc_type b) const;    // combine partial results
//   Out finish(acc_type a, int64_t n) const;         // the output value from n elements
#pragma once

#include <algorithm>

#include "autograd/node.h"
#include "core/dispatch.h"
#include "cpu/parallel.h"
#include "ops/reduce.h"

namespace ignis::cpu {

/// Rows of length n at `p`: fold with kLanes independent accumulators so that the compiler can
/// vectorise without reassociating floating point adds.
template <class T, class R>
typename R::acc_type reduce_row(const T* p, int64_t n, const R& r) {
  using A = typename R::acc_type;
  constexpr int kLanes = 16;
  A acc[kLanes];
  for (auto& a : acc) a = r.identity();
  int64_t i = 0;
  for (; i + kLanes <= n; i += kLanes) {
    for (int j = 0; j < kLanes; ++j) acc[j] = r.step(acc[j], static_cast<acc_t<T>>(p[i + j]));
  }
  for (; i < n; ++i) acc[0] = r.step(acc[0], static_cast<acc_t<T>>(p[i]));
  for (int w = kLanes / 2; w > 0; w /= 2) {
    for (int j = 0; j < w; ++j) acc[j] = r.merge(acc[j], acc[j + w]);
  }
  return acc[0];
}

/// Reduces x over plan.reduced into out (contiguous, of dtype Out).
template <class T, class Out, class R>
void run_reduction(const Tensor& out, const Tensor& x, const ReducePlan& plan, const R& r) {
  using A = typename R::acc_type;
  Out* o = static_cast<Out*>(out.data_ptr());
  const int64_t nout = out.numel();
  const int64_t n = plan.reduced_numel;
  if (nout == 0) return;
  if (n == 0) {
    for (int64_t k = 0; k < nout; ++k) o[k] = r.finish(r.identity(), 0);
    return;
  }
  const int64_t nd = x.dim();
  // Reduced dims all leading and x contiguous: a column reduction over [n, nout], vectorised
  // across the output.
  int64_t leading = 0;
  while (leading < nd && plan.reduced[leading]) ++leading;
  bool only_leading = true;
  for (int64_t d = leading; d < nd; ++d) only_leading = only_leading && !plan.reduced[d];
  if (only_leading && leading > 0 && x.is_contiguous() && nout > 1) {
    const T* p = static_cast<const T*>(x.data_ptr());
    std::vector<A> acc(nout, r.identity());
    parallel_for(0, nout, std::max<int64_t>(kGrainSize / std::max<int64_t>(n, 1), 16),
                 [&](int64_t b, int64_t e) {
                   for (int64_t i = 0; i < n; ++i) {
                     const T* row = p + i * nout;
                     for (int64_t k = b; k < e; ++k)
                       acc[k] = r.step(acc[k], static_cast<acc_t<T>>(row[k]));
                   }
                   for (int64_t k = b; k < e; ++k) o[k] = r.finish(acc[k], n);
                 });
    return;
  }
  // General case: permute reduced dims last, make contiguous, reduce rows.
  Shape perm;
  for (int64_t d = 0; d < nd; ++d) if (!plan.reduced[d]) perm.push_back(d);
  for (int64_t d = 0; d < nd; ++d) if (plan.reduced[d]) perm.push_back(d);
  Tensor xp;
  {
    NoGradGuard ng;
    xp = x.detach().permute(perm).contiguous();
  }
  const T* p = static_cast<const T*>(xp.data_ptr());
  if (nout == 1) {
    // One long row: split it across threads, merge the partials.
    const int nt = n > kGrainSize ? std::max(1, omp_get_max_threads()) : 1;
    std::vector<A> part(nt, r.identity());
    parallel_for(0, n, kGrainSize, [&](int64_t b, int64_t e) {
      part[nt > 1 ? omp_get_thread_num() : 0] = reduce_row(p + b, e - b, r);
    });
    A total = part[0];
    for (int t = 1; t < nt; ++t) total = r.merge(total, part[t]);
    o[0] = r.finish(total, n);
    return;
  }
  parallel_for(0, nout, std::max<int64_t>(kGrainSize / n, 1), [&](int64_t b, int64_t e) {
    for (int64_t k = b; k < e; ++k) o[k] = r.finish(reduce_row(p + k * n, n, r), n);
  });
}

}  // namespace ignis::cpu
