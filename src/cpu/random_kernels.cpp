// CPU kernels of the random fills: the draws of ops/random_functors.h (shared with the CUDA
// kernels) over both cores. Element i draws counter offset + i (see ignis/generator.h), so a
// fill gives the same values on any number of threads.
#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ops/random_functors.h"

namespace ignis::cpu {
namespace {

constexpr int64_t kRandomGrain = 16384;

// out[i] = f(i) over the contiguous output, in parallel.
struct Fill {
  const Tensor& out;
  template <class T, class F>
  void operator()(const F& f) const {
    T* p = static_cast<T*>(out.data_ptr());
    parallel_for(0, out.numel(), kRandomGrain, [&](int64_t b, int64_t e) {
      for (int64_t i = b; i < e; ++i) p[i] = f(static_cast<uint64_t>(i));
    });
  }
};

void uniform_kernel(const Tensor& out, const RandomArgs& r) {
  fn::uniform_fill(out.dtype(), r, Fill{out});
}
void normal_kernel(const Tensor& out, const RandomArgs& r) {
  fn::normal_fill(out.dtype(), r, Fill{out});
}
void randint_kernel(const Tensor& out, const RandomArgs& r) {
  fn::randint_fill(out.dtype(), r, Fill{out});
}

}  // namespace

IGNIS_REGISTER_KERNEL(uniform_stub, CPU, &uniform_kernel);
IGNIS_REGISTER_KERNEL(normal_stub, CPU, &normal_kernel);
IGNIS_REGISTER_KERNEL(randint_stub, CPU, &randint_kernel);

}  // namespace ignis::cpu
