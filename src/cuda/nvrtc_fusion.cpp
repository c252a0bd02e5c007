// Graph mode's fused kernels on a GPU (fused_elementwise_stub, fused_reduction_stub): the source
// that jit/codegen.cpp writes from the shared functors (ops/functors.h, the code of the CPU kernels
// and of the CUDA backend's own), compiled at first use by NVRTC (opened like cuBLAS: see
// cuda/lazy_library.h) into a cubin for the device's architecture, loaded with the runtime's
// library API and kept per (architecture, source) for the life of the process. NVRTC has no
// standard library: the headers the functors include come from cuda/nvrtc_std.h.
#include <cuda_runtime.h>
#include <nvrtc.h>

#include <algorithm>
#include <functional>
#include <map>
#include <memory>
#include <mutex>
#include <string>
#include <vector>

#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "cuda/lazy_library.h"
#include "cuda/nvrtc_std.h"
#include "jit/fused_runtime.h"

namespace ignis::cuda {
namespace {

struct Nvrtc {
  detail::LazyLibrary lib{"libnvrtc.so." IGNIS_CUBLAS_MAJOR, "NVRTC"};
  template <class F>
  F get(const char* name) {
    return lib.get<F>(name);
  }
  decltype(&nvrtcCreateProgram) create = get<decltype(&nvrtcCreateProgram)>("nvrtcCreateProgram");
  decltype(&nvrtcCompileProgram) compile =
      get<decltype(&nvrtcCompileProgram)>("nvrtcCompileProgram");
  decltype(&nvrtcGetProgramLogSize) log_size =
      get<decltype(&nvrtcGetProgramLogSize)>("nvrtcGetProgramLogSize");
  decltype(&nvrtcGetProgramLog) log = get<decltype(&nvrtcGetProgramLog)>("nvrtcGetProgramLog");
  decltype(&nvrtcGetCUBINSize) cubin_size = get<decltype(&nvrtcGetCUBINSize)>("nvrtcGetCUBINSize");
  decltype(&nvrtcGetCUBIN) cubin = get<decltype(&nvrtcGetCUBIN)>("nvrtcGetCUBIN");
  decltype(&nvrtcDestroyProgram) destroy =
      get<decltype(&nvrtcDestroyProgram)>("nvrtcDestroyProgram");
  decltype(&nvrtcGetErrorString) error_string =
      get<decltype(&nvrtcGetErrorString)>("nvrtcGetErrorString");
};

const Nvrtc& nvrtc() { return detail::lazy_api<Nvrtc>(); }

void check(nvrtcResult r, const char* what) {
  if (r != NVRTC_SUCCESS) IGNIS_FAIL("NVRTC error in ", what, ": ", nvrtc().error_string(r));
}

// Compiled kernels by (architecture, key); keys that failed, with why.
struct KernelCache {
  std::mutex mu;
  std::map<std::pair<int, std::string>, cudaKernel_t> kernels;
  std::map<std::pair<int, std::string>, std::string> failed;
};
KernelCache& kernel_cache() {
  static KernelCache* c = new KernelCache;  // never destroyed: kernels may run at exit
  return *c;
}

int architecture(int device) {
  int major = 0, minor = 0;
  IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&major, cudaDevAttrComputeCapabilityMajor, device));
  IGNIS_CUDA_CHECK(cudaDeviceGetAttribute(&minor, cudaDevAttrComputeCapabilityMinor, device));
  return major * 10 + minor;
}

// The kernel `ignis_fused_kernel` of `key`'s source for `device`'s architecture, compiled and
// loaded at the first call. A source that does not compile is remembered (and thrown again)
// rather than compiled again; a failure to load it (out of memory, an earlier kernel's error)
// is thrown and tried again next time.
cudaKernel_t kernel_for(const std::string& name, const std::function<std::string()>& source,
                        int device) {
  const std::pair<int, std::string> key{architecture(device), name};
  KernelCache& c = kernel_cache();
  std::lock_guard<std::mutex> lock(c.mu);  // compiles one at a time
  if (auto it = c.kernels.find(key); it != c.kernels.end()) return it->second;
  if (auto it = c.failed.find(key); it != c.failed.end()) IGNIS_FAIL(it->second);
  std::string cubin;
  try {
    cubin = detail::nvrtc_compile(source(), key.first);
  } catch (const Error& e) {
    c.failed.emplace(key, e.what());
    throw;
  }
  {
    cudaLibrary_t lib = nullptr;
    IGNIS_CUDA_CHECK(
        cudaLibraryLoadData(&lib, cubin.data(), nullptr, nullptr, 0, nullptr, nullptr, 0));
    cudaKernel_t k = nullptr;
    IGNIS_CUDA_CHECK(cudaLibraryGetKernel(&k, lib, "ignis_fused_kernel"));
    c.kernels.emplace(key, k);  // the library stays loaded: the kernel is kept
    return k;
  }
}

// The generated kernels' IgnisFusedInputs: the inputs' pointers and dropout's stream (seed,
// base, n; see jit/fused_program.h): an elementwise program's, a reduction's prologue's (rng)
// and epilogue's (rng2).
struct FusedInputs {
  const void* p[jit::detail::kMaxFusedInputs];
  unsigned long long rng[3];
  unsigned long long rng2[3];
};

// The inputs packed for `op`'s generated kernel (compiled for `key` on out's device at the first
// call), which is then launched with `args` after them: grid-stride blocks of 256 threads.
void launch_fused(const char* op, const Tensor& out, const std::vector<const void*>& inputs,
                  const std::string& key, const std::function<std::string()>& source,
                  unsigned blocks, std::vector<void*> args, const jit::detail::FusedRng& rng = {},
                  const jit::detail::FusedRng& rng2 = {}) {
  IGNIS_CHECK(inputs.size() <= static_cast<size_t>(jit::detail::kMaxFusedInputs), op, ": ",
              inputs.size(), " inputs, a CUDA kernel takes at most ", jit::detail::kMaxFusedInputs);
  DeviceGuard guard(out.device().index);
  const cudaKernel_t k = kernel_for(key, source, out.device().index);
  FusedInputs in{};
  std::copy(inputs.begin(), inputs.end(), in.p);
  in.rng[0] = rng.seed;
  in.rng[1] = rng.base;
  in.rng[2] = rng.n;
  in.rng2[0] = rng2.seed;
  in.rng2[1] = rng2.base;
  in.rng2[2] = rng2.n;
  args.insert(args.begin(), &in);
  IGNIS_CUDA_CHECK(cudaLaunchKernel(reinterpret_cast<const void*>(k), dim3(std::max(blocks, 1u)),
                                    dim3(256), args.data(), 0,
                                    detail::current_stream(out.device())));
}

void fused_elementwise_cuda(const Tensor& out, const std::vector<const void*>& inputs, int64_t cols,
                            const std::string& key, const std::function<std::string()>& source,
                            const jit::detail::FusedRng& rng) {
  const int64_t n = out.numel();
  if (n == 0) return;
  void* dst = out.data_ptr();
  long long count = n, row = cols;
  launch_fused("fused_elementwise", out, inputs, key, source,
               static_cast<unsigned>(std::min<int64_t>((n + 255) / 256, 65536)),
               {&dst, &count, &row}, rng);
}

void fused_reduction_cuda(const Tensor& out, const std::vector<const void*>& inputs, int64_t rows,
                          int64_t cols, double eps, bool scratch, const std::string& key,
                          const std::function<std::string()>& source,
                          const jit::detail::FusedRng& pro_rng,
                          const jit::detail::FusedRng& epi_rng) {
  if (out.numel() == 0) return;
  // The prologue's values, a row per block: from the caching allocator, reused only by later
  // work on this stream.
  const int64_t blocks = std::min<int64_t>(rows, 65536);
  const Tensor buf = scratch ? make_tensor({blocks * cols}, out.dtype(), out.device()) : Tensor();
  void* dst = out.data_ptr();
  void* tmp = buf.defined() ? buf.data_ptr() : nullptr;
  long long r = rows, c = cols;
  double e = eps;
  // A block per row (the kernel's shared tree holds 256 values).
  launch_fused("fused_reduction", out, inputs, key, source, static_cast<unsigned>(blocks),
               {&dst, &r, &c, &e, &tmp}, pro_rng, epi_rng);
}

}  // namespace

namespace detail {

std::string nvrtc_compile(const std::string& source, int sm) {
  const Nvrtc& api = nvrtc();
  std::vector<const char*> names, texts;
  for (const NvrtcHeader& h : kNvrtcStdHeaders) {
    names.push_back(h.name);
    texts.push_back(h.text);
  }
  nvrtcProgram prog = nullptr;
  check(api.create(&prog, source.c_str(), "ignis_fused.cu", static_cast<int>(names.size()),
                   texts.data(), names.data()),
        "nvrtcCreateProgram");
  std::unique_ptr<nvrtcProgram, void (*)(nvrtcProgram*)> hold(
      &prog, [](nvrtcProgram* p) { (void)nvrtc().destroy(p); });
  const std::string arch = "-arch=sm_" + std::to_string(sm);
  const char* opts[] = {"--std=c++20", arch.c_str(), "--device-as-default-execution-space", "-w"};
  const nvrtcResult r = api.compile(prog, 4, opts);
  if (r != NVRTC_SUCCESS) {
    size_t n = 0;
    (void)api.log_size(prog, &n);
    std::string log(n, '\0');
    if (n > 0) (void)api.log(prog, log.data());
    if (log.size() > 4000) log = log.substr(0, 4000) + "...";
    IGNIS_FAIL("NVRTC could not compile a fused kernel for sm_", sm, " (", api.error_string(r),
               "):\n", log);
  }
  size_t bytes = 0;
  check(api.cubin_size(prog, &bytes), "nvrtcGetCUBINSize");
  std::string cubin(bytes, '\0');
  check(api.cubin(prog, cubin.data()), "nvrtcGetCUBIN");
  return cubin;
}

}  // namespace detail

using jit::detail::fused_elementwise_stub;
using jit::detail::fused_reduction_stub;
IGNIS_REGISTER_KERNEL(fused_elementwise_stub, CUDA, &fused_elementwise_cuda);
IGNIS_REGISTER_KERNEL(fused_reduction_stub, CUDA, &fused_reduction_cuda);

}  // namespace ignis::cuda
