// Random creation ops and in-place fills, all drawing from the default generator. A fill of n
// numbers reserves n counters, so a seed gives the same stream whatever the thread count.
#include "ops/random.h"

#include <cmath>
#include <limits>
#include <numeric>

#include "autograd/node.h"
#include "core/op_call.h"
#include "ignis/generator.h"
#include "ops/copy.h"
#include "ops/elementwise.h"

namespace ignis {

IGNIS_DEFINE_STUB(uniform_stub, RandomFn);
IGNIS_DEFINE_STUB(normal_stub, RandomFn);
IGNIS_DEFINE_STUB(randint_stub, RandomFn);

Generator& default_generator() {
  static Generator g;
  return g;
}

void manual_seed(uint64_t seed) { default_generator().manual_seed(seed); }

namespace {

RandomArgs draw(int64_t n) {
  Generator& g = default_generator();
  RandomArgs a;
  a.offset = g.reserve(static_cast<uint64_t>(n));
  a.seed = g.seed();
  return a;
}

// Runs the fill on t (through a contiguous buffer when t is strided).
void fill_random(const Tensor& t, const DispatchStub<RandomFn>& stub, RandomArgs args) {
  if (t.numel() == 0) return;
  const RandomArgs d = draw(t.numel());
  args.seed = d.seed;
  args.offset = d.offset;
  if (t.is_contiguous()) {
    stub[t.device()](t, args);
    return;
  }
  Tensor tmp = make_tensor(t.sizes(), t.dtype(), t.device());
  stub[t.device()](tmp, args);
  copy_into(t, tmp);
}

void check_floating(DType t, const char* op) {
  IGNIS_CHECK(is_floating_point(t), op, ": expected a floating point dtype, but got ", t);
}

Tensor finish(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad()) t.requires_grad_(true);
  return t;
}

TensorOptions like(const Tensor& t, const std::optional<TensorOptions>& opts) {
  if (!opts) return t.options();
  TensorOptions o = *opts;
  if (!o.has_dtype()) o = o.dtype(t.dtype());
  return o;
}

// After an in-place fill the tensor holds constants: drop its history, as fill_ does.
Tensor& after_fill(Tensor& self) {
  self.impl()->bump_version();
  if (AutogradMeta* m = self.autograd_meta(); m && m->grad_fn && is_grad_enabled()) {
    m->grad_fn.reset();
    m->requires_grad = false;
  }
  return self;
}

// Fills a fresh tensor with U(0, 1) or N(0, 1) numbers, in logical (not memory) order.
Tensor standard(Tensor t, const DispatchStub<RandomFn>& stub, const TensorOptions& opts) {
  RandomArgs a;
  a.a = 0;
  a.b = 1;
  fill_random(t, stub, a);
  return finish(t, opts);
}
Tensor standard_like(const Tensor& like_t, const std::optional<TensorOptions>& o,
                     const DispatchStub<RandomFn>& stub, const char* op) {
  const TensorOptions opts = like(like_t, o);
  check_floating(opts.dtype(), op);
  // Keeps a channels-last layout, as the other *_like forms do.
  return standard(make_tensor_like(like_t, like_t.sizes(), opts.dtype(), opts.device()), stub,
                  opts);
}
}  // namespace

IGNIS_OP(rand, "rand(int[] size, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, TensorOptions), rand, {.kind = "random", .stubs = {&uniform_stub}});
IGNIS_OP(randn, "randn(int[] size, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, TensorOptions), randn, {.kind = "random", .stubs = {&normal_stub}});
IGNIS_OP(rand_like, "rand_like(Tensor self, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, std::optional<TensorOptions>), rand_like,
         {.kind = "random", .stubs = {&uniform_stub}});
IGNIS_OP(randn_like, "randn_like(Tensor self, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, std::optional<TensorOptions>), randn_like,
         {.kind = "random", .stubs = {&normal_stub}});
// randint and randperm default to int64 options (kInt64), which a schema default cannot spell
// (a TensorOptions default reads as TensorOptions()): their options have no default here.
IGNIS_OP(randint_low,
         "randint.low(int low, int high, int[] size, TensorOptions options=int64) -> Tensor",
         Tensor(int64_t, int64_t, IntArrayRef, TensorOptions), randint,
         {.kind = "random", .stubs = {&randint_stub}});
IGNIS_OP(randint, "randint(int high, int[] size, TensorOptions options=int64) -> Tensor",
         Tensor(int64_t, IntArrayRef, TensorOptions), randint,
         {.kind = "random", .stubs = {&randint_stub}});
IGNIS_OP(randperm, "randperm(int n, TensorOptions options=int64) -> Tensor",
         Tensor(int64_t, TensorOptions), randperm, {.kind = "random"});
IGNIS_OP_METHOD(uniform_, "uniform_(Tensor(a!) self, float from=0, float to=1) -> Tensor(a!)",
                Tensor&(double, double) const, uniform_,
                {.kind = "random", .stubs = {&uniform_stub}});
IGNIS_OP_METHOD(normal_, "normal_(Tensor(a!) self, float mean=0, float std=1) -> Tensor(a!)",
                Tensor&(double, double) const, normal_,
                {.kind = "random", .stubs = {&normal_stub}});

Tensor rand(IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(rand, rand, size, opts);
  check_floating(opts.dtype(), "rand");
  return standard(make_tensor(size, opts.dtype(), opts.device()), uniform_stub, opts);
}

Tensor randn(IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(randn, randn, size, opts);
  check_floating(opts.dtype(), "randn");
  return standard(make_tensor(size, opts.dtype(), opts.device()), normal_stub, opts);
}

Tensor rand_like(const Tensor& t, std::optional<TensorOptions> opts) {
  IGNIS_DISPATCH(rand_like, rand_like, t, opts);
  return standard_like(t, opts, uniform_stub, "rand_like");
}
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> opts) {
  IGNIS_DISPATCH(randn_like, randn_like, t, opts);
  return standard_like(t, opts, normal_stub, "randn_like");
}

Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(randint_low, randint, low, high, size, opts);
  IGNIS_CHECK(low < high, "randint: expected low < high, but got low=", low, " and high=", high);
  const DType dt = opts.dtype();
  if (is_integral(dt, true)) {
    int64_t lo = 0, hi = 0;
    switch (dt) {
      case DType::Bool: hi = 1; break;
      case DType::UInt8: hi = 255; break;
      case DType::Int32:
        lo = std::numeric_limits<int32_t>::min();
        hi = std::numeric_limits<int32_t>::max();
        break;
      default: lo = std::numeric_limits<int64_t>::min(); hi = std::numeric_limits<int64_t>::max();
    }
    IGNIS_CHECK(low >= lo && high - 1 <= hi, "randint: the range [", low, ", ", high,
                ") does not fit in dtype ", dt);
  }
  IGNIS_CHECK(!opts.requires_grad() || is_floating_point(dt),
              "randint: only tensors of floating "
              "point dtype can require gradients, but the dtype is ",
              dt);
  Tensor t = make_tensor(size, dt, opts.device());
  RandomArgs a;
  a.low = low;
  a.range = static_cast<uint64_t>(high) - static_cast<uint64_t>(low);
  fill_random(t, randint_stub, a);
  return finish(t, opts);
}

Tensor randint(int64_t high, IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(randint, randint, high, size, opts);
  return randint(0, high, size, opts);
}

Tensor randperm(int64_t n, TensorOptions opts) {
  IGNIS_DISPATCH(randperm, randperm, n, opts);
  IGNIS_CHECK(n >= 0, "randperm: n must be non-negative, but got n=", n);
  const DType dt = opts.dtype();
  IGNIS_CHECK(dt != kBool || n <= 2, "randperm: n=", n, " is too large for dtype bool");
  IGNIS_CHECK(dt != kUInt8 || n <= 256, "randperm: n=", n, " is too large for dtype uint8");
  IGNIS_CHECK(dt != kBFloat16 || n <= 257, "randperm: n=", n,
              " is too large for dtype "
              "bfloat16 (integers above 256 are not exact)");
  IGNIS_CHECK(dt != kInt32 || n <= (int64_t{1} << 31), "randperm: n=", n,
              " is too large for dtype int32");
  Tensor p = make_tensor({n}, kInt64);
  int64_t* v = p.data_ptr<int64_t>();
  std::iota(v, v + n, int64_t{0});
  if (n > 1) {
    // Fisher-Yates from the back: position i swaps with a uniform j in [0, i], drawn from
    // counter offset + i.
    const RandomArgs a = draw(n);
    for (int64_t i = n - 1; i > 0; --i) {
      const uint64_t z = Generator::bits(a.seed, a.offset + static_cast<uint64_t>(i));
      const auto j = static_cast<int64_t>(
          (static_cast<unsigned __int128>(z) * static_cast<uint64_t>(i + 1)) >> 64);
      std::swap(v[i], v[j]);
    }
  }
  Tensor out = p.to(dt).to(opts.device());
  return finish(out, opts);
}

Tensor& Tensor::uniform_(double from, double to) const {
  IGNIS_DISPATCH_METHOD(uniform_, uniform_, from, to);
  check_floating(dtype(), "uniform_");
  IGNIS_CHECK(std::isfinite(from) && std::isfinite(to),
              "uniform_: expected finite bounds, but "
              "got from=",
              from, " and to=", to);
  IGNIS_CHECK(from <= to, "uniform_: expected from <= to, but got from=", from, " > to=", to);
  check_inplace(mut(), "uniform_");
  RandomArgs a;
  a.a = from;
  a.b = to;
  fill_random(mut(), uniform_stub, a);
  return after_fill(mut());
}

Tensor& Tensor::normal_(double mean, double std) const {
  IGNIS_DISPATCH_METHOD(normal_, normal_, mean, std);
  check_floating(dtype(), "normal_");
  IGNIS_CHECK(std >= 0, "normal_: expected std >= 0, but got std=", std);
  check_inplace(mut(), "normal_");
  RandomArgs a;
  a.a = mean;
  a.b = std;
  fill_random(mut(), normal_stub, a);
  return after_fill(mut());
}

}  // namespace ignis
