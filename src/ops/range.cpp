// Range creation: arange, linspace, eye. Values are computed on the CPU in float64 (int64 for
// integer aranges) and rounded once to the requested dtype.
#include <cmath>
#include <cstring>
#include <limits>

#include "core/dispatch.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"

namespace ignis {

namespace {

Tensor finish(Tensor t, const TensorOptions& opts) {
  if (!opts.device().is_cpu()) t = t.to(opts.device());
  if (opts.requires_grad()) t.requires_grad_(true);
  return t;
}

// out[i] = f(i) for a contiguous CPU tensor, f returning double or int64.
template <class F>
void fill_index(const Tensor& out, const char* op, const F& f) {
  dispatch_dtype(out.dtype(), op, [&]<class T>() {
    T* p = static_cast<T*>(out.data_ptr());
    const int64_t n = out.numel();
    for (int64_t i = 0; i < n; ++i) {
      if constexpr (std::is_same_v<T, BFloat16>) {
        p[i] = BFloat16(static_cast<float>(f(i)));
      } else {
        p[i] = static_cast<T>(f(i));
      }
    }
  });
}

}  // namespace

#define FACTORY_OP \
  { .kind = "factory" }
IGNIS_OP(arange, "arange(Scalar end, TensorOptions options={}) -> Tensor",
         Tensor(Scalar, TensorOptions), arange, FACTORY_OP);
IGNIS_OP(arange_start_step,
         "arange.start_step(Scalar start, Scalar end, Scalar step=1, TensorOptions options={}) "
         "-> Tensor",
         Tensor(Scalar, Scalar, Scalar, TensorOptions), arange, FACTORY_OP);
IGNIS_OP(linspace,
         "linspace(float start, float end, int steps, TensorOptions options={}) -> Tensor",
         Tensor(double, double, int64_t, TensorOptions), linspace, FACTORY_OP);
IGNIS_OP(eye, "eye(int n, int? m=None, TensorOptions options={}) -> Tensor",
         Tensor(int64_t, std::optional<int64_t>, TensorOptions), eye, FACTORY_OP);
#undef FACTORY_OP

Tensor arange(Scalar end, TensorOptions opts) {
  IGNIS_DISPATCH(arange, arange, end, opts);
  return arange(0, end, 1, opts);
}

Tensor arange(Scalar start, Scalar end, Scalar step, TensorOptions opts) {
  IGNIS_DISPATCH(arange_start_step, arange, start, end, step, opts);
  const bool integral =
      !start.is_floating_point() && !end.is_floating_point() && !step.is_floating_point();
  const DType dt = opts.has_dtype() ? opts.dtype() : integral ? kInt64 : default_dtype();
  IGNIS_CHECK(dt != kBool, "arange: not implemented for bool");
  const double s = start.to_double(), e = end.to_double(), st = step.to_double();
  IGNIS_CHECK(std::isfinite(s) && std::isfinite(e), "arange: unsupported range: ", s, " -> ", e);
  IGNIS_CHECK(std::isfinite(st) && st != 0, "arange: step must be nonzero and finite, but got ",
              st);
  IGNIS_CHECK((st > 0 && e >= s) || (st < 0 && e <= s),
              "arange: upper bound and lower bound "
              "inconsistent with step sign (start=",
              s, ", end=", e, ", step=", st, ")");
  Tensor out;
  if (integral && is_integral(dt)) {
    // Exact integer arithmetic (a float64 size would round for ranges beyond 2^53).
    const int64_t a = start.to_int(), b = end.to_int(), c = step.to_int();
    const __int128 span = static_cast<__int128>(b) - a;
    const __int128 n = c > 0 ? (span + c - 1) / c : (span + c + 1) / c;
    IGNIS_CHECK(n <= std::numeric_limits<int64_t>::max(), "arange: range too large");
    out = make_tensor({static_cast<int64_t>(n)}, dt);
    fill_index(out, "arange", [a, c](int64_t i) { return a + i * c; });
  } else {
    const double n = std::ceil((e - s) / st);
    IGNIS_CHECK(n >= 0 && n < 9.2e18, "arange: invalid size ", n, " for start=", s, ", end=", e,
                ", step=", st);
    out = make_tensor({static_cast<int64_t>(n)}, dt);
    fill_index(out, "arange", [s, st](int64_t i) { return s + static_cast<double>(i) * st; });
  }
  return finish(out, opts);
}

Tensor linspace(double start, double end, int64_t steps, TensorOptions opts) {
  IGNIS_DISPATCH(linspace, linspace, start, end, steps, opts);
  IGNIS_CHECK(steps >= 0, "linspace: number of steps must be non-negative, but got ", steps);
  IGNIS_CHECK(opts.dtype() != kBool, "linspace: not implemented for bool");
  Tensor out = make_tensor({steps}, opts.dtype());
  const double step = steps > 1 ? (end - start) / static_cast<double>(steps - 1) : 0;
  const int64_t half = steps / 2;
  // Both halves step from their own end, so that the last value is exactly `end`.
  fill_index(out, "linspace", [=](int64_t i) {
    if (i < half || steps == 1) return start + step * static_cast<double>(i);
    return end - step * static_cast<double>(steps - 1 - i);
  });
  return finish(out, opts);
}

Tensor eye(int64_t n, std::optional<int64_t> m, TensorOptions opts) {
  IGNIS_DISPATCH(eye, eye, n, m, opts);
  const int64_t cols = m.value_or(n);
  IGNIS_CHECK(n >= 0, "eye: n must be greater or equal to 0, but got ", n);
  IGNIS_CHECK(cols >= 0, "eye: m must be greater or equal to 0, but got ", cols);
  Tensor out = make_tensor({n, cols}, opts.dtype());
  if (out.nbytes()) std::memset(out.data_ptr(), 0, out.nbytes());
  dispatch_dtype(out.dtype(), "eye", [&]<class T>() {
    T* p = static_cast<T*>(out.data_ptr());
    for (int64_t i = 0; i < std::min(n, cols); ++i) p[i * cols + i] = static_cast<T>(1.0f);
  });
  return finish(out, opts);
}

}  // namespace ignis
