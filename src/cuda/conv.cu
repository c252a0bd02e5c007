// Convolutions on the GPU through cuDNN (opened at first use, cuda/lazy_library.h): the forward,
// input-gradient and weight-gradient kernels of conv2d_stub and its two gradient stubs, for
// float32, float64 and bfloat16, groups, dilation. A channels-last float32 or bfloat16 activation
// runs in NHWC (with the filter copied to OHWI), everything else in dense NCHW (layout_for()).
// cuDNN pads symmetrically: an asymmetric
// padding ("same" with an even kernel; conv_transpose2d's output_padding, a negative right
// padding) runs on an input cropped and zero-padded by hand. Float32 uses full-precision
// arithmetic (no TF32), so results match the CPU's to float32 rounding. Each convolution runs
// through cuDNN's graph API (cuda/cudnn_graph.cpp) when cuda::cudnn_graph_api() is on and it has
// a plan for the problem, else through the legacy API: there the algorithm is cuDNN's first
// heuristic choice whose workspace (from the caching allocator) fits, cached per problem
// (cuda/plan_cache.h). The bias and a fused ReLU run in the graph API's plan where an engine
// fuses them, else as elementwise kernels after the convolution on the same stream.
#include <cudnn.h>

#include <atomic>
#include <climits>
#include <cstdlib>
#include <memory>
#include <mutex>
#include <optional>
#include <string>

#include "core/tensor_impl.h"
#include "cuda/cudnn_graph.h"
#include "cuda/lazy_library.h"
#include "cuda/loops.cuh"
#include "cuda/plan_cache.h"
#include "ignis/autograd.h"
#include "ops/conv.h"
#include "ops/copy.h"
#include "ops/functors.h"

#pragma GCC diagnostic ignored "-Wdeprecated-declarations"

namespace ignis::cuda {
namespace {

#define IGNIS_CUDNN_FUNCS(X)                                                          \
  X(cudnnCreate) X(cudnnSetStream) X(cudnnGetErrorString) X(cudnnCreateTensorDescriptor) \
  X(cudnnSetTensor4dDescriptorEx) X(cudnnDestroyTensorDescriptor)                      \
  X(cudnnCreateFilterDescriptor) X(cudnnSetFilter4dDescriptor)                         \
  X(cudnnDestroyFilterDescriptor) X(cudnnCreateConvolutionDescriptor)                  \
  X(cudnnSetConvolution2dDescriptor) X(cudnnSetConvolutionGroupCount)                  \
  X(cudnnSetConvolutionMathType) X(cudnnDestroyConvolutionDescriptor)                  \
  X(cudnnGetConvolutionForwardAlgorithm_v7) X(cudnnGetConvolutionForwardWorkspaceSize) \
  X(cudnnConvolutionForward) X(cudnnGetConvolutionBackwardDataAlgorithm_v7)            \
  X(cudnnGetConvolutionBackwardDataWorkspaceSize) X(cudnnConvolutionBackwardData)      \
  X(cudnnGetConvolutionBackwardFilterAlgorithm_v7)                                     \
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)       \
  X(cudnnFindConvolutionForwardAlgorithmEx) X(cudnnFindConvolutionBackwardDataAlgorithmEx)   \
  X(cudnnFindConvolutionBackwardFilterAlgorithmEx)

struct Cudnn {
  detail::LazyLibrary lib{"libcudnn.so." + std::to_string(CUDNN_MAJOR), "cuDNN"};
#define IGNIS_CUDNN_MEMBER(f) decltype(&::f) f = lib.get<decltype(&::f)>(#f);
  IGNIS_CUDNN_FUNCS(IGNIS_CUDNN_MEMBER)
#undef IGNIS_CUDNN_MEMBER
};

const Cudnn& cudnn() { return detail::lazy_api<Cudnn>(); }

void check(cudnnStatus_t st, const char* what) {
  if (st == CUDNN_STATUS_SUCCESS) return;
  IGNIS_FAIL("cuDNN error in ", what, ": ", cudnn().cudnnGetErrorString(st));
}

// One handle per (thread, device), on the device's current stream at each call.
cudnnHandle_t handle(int device) {
  thread_local std::vector<cudnnHandle_t> handles;
  if (handles.empty()) handles.resize(static_cast<size_t>(device_count()), nullptr);
  cudnnHandle_t& h = handles[static_cast<size_t>(device)];
  if (h == nullptr) check(cudnn().cudnnCreate(&h), "cudnnCreate");
  check(cudnn().cudnnSetStream(h, current_stream(Device(kCUDA, device))),
        "cudnnSetStream");
  return h;
}

cudnnDataType_t data_type(DType t, const char* op) {
  switch (t) {
    case DType::Float32: return CUDNN_DATA_FLOAT;
    case DType::Float64: return CUDNN_DATA_DOUBLE;
    case DType::BFloat16: return CUDNN_DATA_BFLOAT16;
    default: IGNIS_FAIL(op, ": on CUDA, float32, float64 and bfloat16 are supported, not ", t);
  }
}

enum class Layout { NCHW, NHWC };

// The descriptors of one convolution: x and y as strided 4-d tensors, w as an OIHW filter.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors(const Tensor& x_, const Tensor& w_, const Tensor& y_, const ConvParams& p,
              Layout layout, const char* op) {
    const Cudnn& c = cudnn();
    const cudnnDataType_t dt = data_type(x_.dtype(), op);
    const bool nhwc = layout == Layout::NHWC;
    // Every tensor here is dense in `layout` (see in_layout()): strides from the sizes, so that
    // size-1 dims never carry odd strides into cuDNN.
    auto tensor = [&](cudnnTensorDescriptor_t& d, const Tensor& t) {
      IGNIS_CHECK(t.numel() <= INT_MAX, op, ": tensors of 2^31 elements or more are not supported "
                  "on CUDA (shape ", t.sizes(), ")");
      const int n = static_cast<int>(t.size(0)), ch = static_cast<int>(t.size(1)),
                h = static_cast<int>(t.size(2)), w = static_cast<int>(t.size(3));
      check(c.cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
      check(nhwc ? c.cudnnSetTensor4dDescriptorEx(d, dt, n, ch, h, w, ch * h * w, 1, w * ch, ch)
                 : c.cudnnSetTensor4dDescriptorEx(d, dt, n, ch, h, w, ch * h * w, h * w, w, 1),
            "cudnnSetTensor4dDescriptorEx");
    };
    tensor(x, x_);
    tensor(y, y_);
    check(c.cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(c.cudnnSetFilter4dDescriptor(w, dt, nhwc ? CUDNN_TENSOR_NHWC : CUDNN_TENSOR_NCHW,
                                       static_cast<int>(w_.size(0)),
                                       static_cast<int>(w_.size(1)), static_cast<int>(w_.size(2)),
                                       static_cast<int>(w_.size(3))),
          "cudnnSetFilter4dDescriptor");
    check(c.cudnnCreateConvolutionDescriptor(&conv), "cudnnCreateConvolutionDescriptor");
    check(c.cudnnSetConvolution2dDescriptor(
              conv, static_cast<int>(p.pad_l[0]), static_cast<int>(p.pad_l[1]),
              static_cast<int>(p.stride[0]), static_cast<int>(p.stride[1]),
              static_cast<int>(p.dilation[0]), static_cast<int>(p.dilation[1]),
              CUDNN_CROSS_CORRELATION,
              x_.dtype() == kFloat64 ? CUDNN_DATA_DOUBLE : CUDNN_DATA_FLOAT),
          "cudnnSetConvolution2dDescriptor");
    check(c.cudnnSetConvolutionGroupCount(conv, static_cast<int>(p.groups)),
          "cudnnSetConvolutionGroupCount");
    // No TF32 for float32 (full precision); bfloat16 on the tensor cores (as PyTorch).
    check(c.cudnnSetConvolutionMathType(
              conv, x_.dtype() == kBFloat16 ? CUDNN_TENSOR_OP_MATH : CUDNN_FMA_MATH),
          "cudnnSetConvolutionMathType");
  }
  ~Descriptors() {
    const Cudnn& c = cudnn();
    if (x) c.cudnnDestroyTensorDescriptor(x);
    if (y) c.cudnnDestroyTensorDescriptor(y);
    if (w) c.cudnnDestroyFilterDescriptor(w);
    if (conv) c.cudnnDestroyConvolutionDescriptor(conv);
  }
  Descriptors(const Descriptors&) = delete;
  Descriptors& operator=(const Descriptors&) = delete;
};

// The scaling factors: double for float64 data, float otherwise.
struct Scale {
  double d;
  float f;
  explicit Scale(double v) : d(v), f(static_cast<float>(v)) {}
  const void* for_dtype(DType t) const { return t == kFloat64 ? static_cast<const void*>(&d) : &f; }
};

// The algorithm chosen for one convolution problem, and its workspace size.
struct Choice {
  int algo = 0;
  size_t bytes = 0;
};

std::atomic<bool> benchmark_flag{false};

// On unless the environment says IGNIS_CUDNN_GRAPH_API=0.
std::atomic<bool> graph_api_flag{[] {
  const char* v = std::getenv("IGNIS_CUDNN_GRAPH_API");
  return v == nullptr || std::string(v) != "0";
}()};

// Runs the convolution through cuDNN's graph API when it is on and has a plan for the problem
// (a forward's bias and ReLU fused into it when `epi` has them and an engine fuses them).
bool try_graph(cudnn_graph::Direction dir, cudnnHandle_t h, const Tensor& x, const Tensor& w,
               const Tensor& y, const ConvParams& p, Layout l,
               const cudnn_graph::Epilogue& epi = {}) {
  return graph_api_flag.load(std::memory_order_relaxed) &&
         cudnn_graph::convolution(dir, h, x, w, y, p, l == Layout::NHWC, benchmark_flag.load(),
                                  epi);
}

// The problem's key for the algorithm cache: how it is chosen (heuristic or timed), direction,
// device, dtype, layout, the three tensors' sizes and the convolution's parameters.
detail::PlanCache<Choice>::Key problem_key(int direction, const Tensor& x, const Tensor& w,
                                           const Tensor& y, const ConvParams& p, Layout l) {
  detail::PlanCache<Choice>::Key k = {benchmark_flag.load(), direction, x.device().index,
                                      static_cast<int64_t>(x.dtype()), static_cast<int64_t>(l)};
  for (const Tensor* t : {&x, &w, &y}) k.insert(k.end(), t->sizes().begin(), t->sizes().end());
  k.insert(k.end(), {p.pad_l[0], p.pad_l[1], p.stride[0], p.stride[1], p.dilation[0],
                     p.dilation[1], p.groups});
  return k;
}

// The workspace cuDNN may use while timing algorithms (cudnn_benchmark()): the largest of 1 GiB,
// 256 MiB and 32 MiB that the caching allocator can give.
Tensor benchmark_workspace(Device device) {
  for (const int64_t mib : {1024, 256, 32}) {
    try {
      return make_tensor({mib << 20}, kUInt8, device);
    } catch (const Error&) {
    }
  }
  return make_tensor({1}, kUInt8, device);
}

// Runs the first algorithm of cuDNN's list that is supported and whose workspace (from the
// caching allocator) can be had: run(algo, workspace, bytes) with bytes from size(algo). An
// algorithm whose workspace does not fit is skipped, as PyTorch does. The list is cuDNN's
// heuristic ranking (get), or with cudnn_benchmark() its measured ranking (find(n, &found, perf,
// workspace, bytes), which times each algorithm on the call's own tensors). The choice is cached
// per problem (cuDNN 9's heuristic query alone costs milliseconds); a cached choice whose
// workspace cannot be had now is chosen again.
template <class Perf, class Get, class Find, class Size, class Run>
void run_first_fitting(const detail::PlanCache<Choice>::Key& key, const Get& get, const Find& find,
                       const Size& size, const Run& run, Device device, const char* op) {
  static detail::PlanCache<Choice> cache;
  using Algo = decltype(Perf{}.algo);
  auto workspace = [&](size_t bytes) {
    return make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, device);
  };
  if (const std::optional<Choice> hit = cache.find(key)) {
    Tensor ws;
    try {
      ws = workspace(hit->bytes);
    } catch (const Error&) {  // out of memory now: choose again below
    }
    if (ws.defined()) return run(static_cast<Algo>(hit->algo), ws.data_ptr(), hit->bytes);
  }
  Perf perf[16];
  int n = 0;
  if (key[0] != 0) {  // timed: cuDNN synchronises while it measures
    detail::count_host_sync();
    const Tensor ws = benchmark_workspace(device);
    find(16, &n, perf, ws.data_ptr(), static_cast<size_t>(ws.numel()));
  } else {
    get(16, &n, perf);
  }
  std::string last;
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    const size_t bytes = size(perf[i].algo);
    Tensor ws;
    try {
      ws = workspace(bytes);
    } catch (const Error& e) {  // out of memory: the next algorithm may need less
      last = e.what();
      continue;
    }
    cache.put(key, Choice{static_cast<int>(perf[i].algo), bytes});
    return run(perf[i].algo, ws.data_ptr(), bytes);
  }
  IGNIS_FAIL(op, ": cuDNN has no algorithm for this convolution",
             last.empty() ? std::string() : " whose workspace fits (" + last + ")");
}

bool symmetric(const ConvParams& p) {
  return p.pad_l[0] == p.pad_r[0] && p.pad_l[1] == p.pad_r[1];
}

// An asymmetric padding as zeros added (pad) and rows/columns removed (crop, for the negative
// right padding of conv_transpose2d's output_padding), per dim and side, all >= 0.
struct Border {
  int64_t pad[2][2] = {}, crop[2][2] = {};
  explicit Border(const ConvParams& p) {
    for (int d = 0; d < 2; ++d) {
      const int64_t v[2] = {p.pad_l[d], p.pad_r[d]};
      for (int e = 0; e < 2; ++e) {
        pad[d][e] = std::max<int64_t>(v[e], 0);
        crop[d][e] = std::max<int64_t>(-v[e], 0);
      }
    }
  }
  // x's size along spatial dim d after cropping, and after padding too.
  int64_t cropped(const Tensor& x, int d) const { return x.size(2 + d) - crop[d][0] - crop[d][1]; }
  int64_t padded(const Tensor& x, int d) const { return cropped(x, d) + pad[d][0] + pad[d][1]; }
};

// x cropped and zero-padded by hand (dense NCHW); the convolution then runs without padding.
Tensor pad_by_hand(const Tensor& x, const ConvParams& p) {
  const Border b(p);
  NoGradGuard ng;
  const Tensor xc = x.narrow(2, b.crop[0][0], b.cropped(x, 0)).narrow(3, b.crop[1][0], b.cropped(x, 1));
  Tensor out = make_tensor({x.size(0), x.size(1), b.padded(x, 0), b.padded(x, 1)}, x.dtype(),
                           x.device());
  out.zero_();
  copy_into(out.narrow(2, b.pad[0][0], xc.size(2)).narrow(3, b.pad[1][0], xc.size(3)), xc);
  return out;
}
ConvParams unpadded(ConvParams p) {
  p.pad_l[0] = p.pad_l[1] = p.pad_r[0] = p.pad_r[1] = 0;
  return p;
}

// The layout a convolution runs in, from its activation (x forward, gy backward): NHWC for a
// channels-last float32 or bfloat16 tensor (cuDNN's tensor-core kernels are NHWC: an NCHW call
// transposes inside, and a channels-last model would pay two copies per convolution), else NCHW.
// Every tensor of the call is then dense in that layout, the filter too (OHWI for NHWC: ignis's
// weights are OIHW, so they are copied, which is small beside the activations, as PyTorch does).
Layout layout_for(const Tensor& activation) {
  return is_channels_last(activation) && activation.dtype() != kFloat64 ? Layout::NHWC
                                                                       : Layout::NCHW;
}

bool in_layout(const Tensor& t, Layout l) {
  return l == Layout::NHWC ? t.is_contiguous(MemoryFormat::ChannelsLast) : t.is_contiguous();
}

// A new tensor like t (sizes, dtype, device), dense in layout l.
Tensor empty_in(const Tensor& t, Layout l) {
  return make_tensor(t.sizes(), t.dtype(), t.device(),
                     l == Layout::NHWC ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous);
}

// t itself when dense in layout l, else a copy that is.
Tensor to_layout(const Tensor& t, Layout l) {
  if (in_layout(t, l)) return t;
  Tensor c = empty_in(t, l);
  copy_into(c, t);
  return c;
}

// out += b (broadcast over N, H, W), then relu: elementwise kernels on the same stream.
void bias_relu(const Tensor& out, const Tensor& b, bool relu) {
  dispatch_floating(out.dtype(), "conv2d", [&]<class T>() {
    if (b.defined()) {
      const Tensor bv = make_view(b, {1, b.numel(), 1, 1}, {0, b.stride(0), 0, 0},
                                  b.storage_offset());
      gpu_kernel<T, T, T>(TensorIter::build(out, {&out, &bv}), fn::Add{OpArgs{1}});
    }
    if (relu) gpu_kernel<T, T>(TensorIter::build(out, {&out}), fn::Relu{});
  });
}

void conv_forward(const Tensor& out, const Tensor& x, const Tensor& w, const Tensor& b,
                  const ConvParams& p, bool relu) {
  if (!symmetric(p)) return conv_forward(out, pad_by_hand(x, p), w, b, unpadded(p), relu);
  const Layout l = layout_for(x);
  if (!in_layout(x, l) || !in_layout(out, l)) {
    const Tensor y = empty_in(out, l);
    conv_forward(y, to_layout(x, l), w, b, p, relu);
    copy_into(out, y);
    return;
  }
  const Tensor wl = to_layout(w, l);
  DeviceGuard guard(x.device().index);
  const int dev = x.device().index;
  cudnnHandle_t h = handle(dev);
  // The bias and ReLU fused into the convolution's graph where an engine takes them (its
  // intermediates are float32: never for float64).
  const bool fusable = (b.defined() || relu) && x.dtype() != kFloat64 &&
                       (!b.defined() || b.dtype() == x.dtype());
  if (fusable && try_graph(cudnn_graph::Direction::Forward, h, x, wl, out, p, l,
                           {b.defined() ? b.contiguous() : Tensor(), relu})) {
    return;
  }
  if (try_graph(cudnn_graph::Direction::Forward, h, x, wl, out, p, l)) return bias_relu(out, b, relu);
  const Cudnn& c = cudnn();
  Descriptors d(x, wl, out, p, l, "conv2d");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionFwdAlgoPerf_t>(
      problem_key(0, x, wl, out, p, l),
      [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, req, n, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7");
      },
      [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf, void* ws, size_t bytes) {
        check(c.cudnnFindConvolutionForwardAlgorithmEx(h, d.x, x.data_ptr(), d.w, wl.data_ptr(),
                                                       d.conv, d.y, out.data_ptr(), req, n, perf,
                                                       ws, bytes),
              "cudnnFindConvolutionForwardAlgorithmEx");
      },
      [&](cudnnConvolutionFwdAlgo_t algo) {
        size_t bytes = 0;
        check(c.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, &bytes),
              "cudnnGetConvolutionForwardWorkspaceSize");
        return bytes;
      },
      [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
        check(c.cudnnConvolutionForward(h, one.for_dtype(x.dtype()), d.x, x.data_ptr(), d.w,
                                        wl.data_ptr(), d.conv, algo, ws, bytes,
                                        zero.for_dtype(x.dtype()), d.y, out.data_ptr()),
              "cudnnConvolutionForward");
      },
      x.device(), "conv2d");
  bias_relu(out, b, relu);
}

void conv_input_grad(const Tensor& gx, const Tensor& gy, const Tensor& w, const ConvParams& p) {
  if (!symmetric(p)) {
    // The gradient of the cropped and padded input (pad_by_hand), put back in place: the padding
    // is dropped, and the cropped border gets no gradient.
    const Border b(p);
    const int64_t hh = b.cropped(gx, 0), ww = b.cropped(gx, 1);
    const Tensor padded = make_tensor({gx.size(0), gx.size(1), b.padded(gx, 0), b.padded(gx, 1)},
                                      gx.dtype(), gx.device());
    conv_input_grad(padded, gy, w, unpadded(p));
    NoGradGuard ng;
    gx.zero_();
    copy_into(gx.narrow(2, b.crop[0][0], hh).narrow(3, b.crop[1][0], ww),
              padded.narrow(2, b.pad[0][0], hh).narrow(3, b.pad[1][0], ww));
    return;
  }
  const Layout l = layout_for(gy);
  if (!in_layout(gx, l) || !in_layout(gy, l)) {
    const Tensor g = empty_in(gx, l);
    conv_input_grad(g, to_layout(gy, l), w, p);
    copy_into(gx, g);
    return;
  }
  const Tensor wl = to_layout(w, l);
  DeviceGuard guard(gy.device().index);
  cudnnHandle_t h = handle(gy.device().index);
  if (try_graph(cudnn_graph::Direction::BackwardData, h, gx, wl, gy, p, l)) return;
  const Cudnn& c = cudnn();
  Descriptors d(gx, wl, gy, p, l, "conv2d backward");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionBwdDataAlgoPerf_t>(
      problem_key(1, gx, wl, gy, p, l),
      [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, req, n,
                                                            perf),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      },
      [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf, void* ws, size_t bytes) {
        check(c.cudnnFindConvolutionBackwardDataAlgorithmEx(h, d.w, wl.data_ptr(), d.y,
                                                            gy.data_ptr(), d.conv, d.x,
                                                            gx.data_ptr(), req, n, perf, ws, bytes),
              "cudnnFindConvolutionBackwardDataAlgorithmEx");
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo) {
        size_t bytes = 0;
        check(c.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo,
                                                             &bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize");
        return bytes;
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
        check(c.cudnnConvolutionBackwardData(h, one.for_dtype(gy.dtype()), d.w, wl.data_ptr(), d.y,
                                             gy.data_ptr(), d.conv, algo, ws, bytes,
                                             zero.for_dtype(gy.dtype()), d.x, gx.data_ptr()),
              "cudnnConvolutionBackwardData");
      },
      gy.device(), "conv2d backward");
}

void conv_weight_grad(const Tensor& gw, const Tensor& x, const Tensor& gy, const ConvParams& p) {
  if (!symmetric(p)) return conv_weight_grad(gw, pad_by_hand(x, p), gy, unpadded(p));
  const Layout l = layout_for(x);
  if (!in_layout(x, l) || !in_layout(gy, l) || !in_layout(gw, l)) {
    const Tensor g = in_layout(gw, l) ? gw : empty_in(gw, l);
    conv_weight_grad(g, to_layout(x, l), to_layout(gy, l), p);
    if (!g.is_same(gw)) copy_into(gw, g);
    return;
  }
  DeviceGuard guard(x.device().index);
  cudnnHandle_t h = handle(x.device().index);
  if (try_graph(cudnn_graph::Direction::BackwardFilter, h, x, gw, gy, p, l)) return;
  const Cudnn& c = cudnn();
  Descriptors d(x, gw, gy, p, l, "conv2d backward");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionBwdFilterAlgoPerf_t>(
      problem_key(2, x, gw, gy, p, l),
      [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, req, n,
                                                              perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      },
      [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf, void* ws, size_t bytes) {
        check(c.cudnnFindConvolutionBackwardFilterAlgorithmEx(h, d.x, x.data_ptr(), d.y,
                                                              gy.data_ptr(), d.conv, d.w,
                                                              gw.data_ptr(), req, n, perf, ws,
                                                              bytes),
              "cudnnFindConvolutionBackwardFilterAlgorithmEx");
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo) {
        size_t bytes = 0;
        check(c.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo,
                                                               &bytes),
              "cudnnGetConvolutionBackwardFilterWorkspaceSize");
        return bytes;
      },
      [&](cudnnConvolutionBwdFilterAlgo_t algo, void* ws, size_t bytes) {
        check(c.cudnnConvolutionBackwardFilter(h, one.for_dtype(x.dtype()), d.x, x.data_ptr(),
                                               d.y, gy.data_ptr(), d.conv, algo, ws, bytes,
                                               zero.for_dtype(x.dtype()), d.w, gw.data_ptr()),
              "cudnnConvolutionBackwardFilter");
      },
      x.device(), "conv2d backward");
}

}  // namespace

void set_cudnn_benchmark(bool on) { benchmark_flag = on; }
bool cudnn_benchmark() { return benchmark_flag; }
void set_cudnn_graph_api(bool on) { graph_api_flag = on; }
bool cudnn_graph_api() { return graph_api_flag; }

IGNIS_REGISTER_KERNEL(conv2d_stub, CUDA, &conv_forward);
IGNIS_REGISTER_KERNEL(conv2d_input_grad_stub, CUDA, &conv_input_grad);
IGNIS_REGISTER_KERNEL(conv2d_weight_grad_stub, CUDA, &conv_weight_grad);

}  // namespace ignis::cuda
