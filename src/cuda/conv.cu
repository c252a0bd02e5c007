// Convolutions on the GPU through cuDNN (opened at first use, cuda/lazy_library.h): the forward,
// input-gradient and weight-gradient kernels of conv2d_stub and its two gradient stubs, for
// float32, float64 and bfloat16, NCHW or channels-last activations (cuDNN reads the strides),
// groups, dilation. cuDNN pads symmetrically: an asymmetric padding ("same" with an even kernel)
// runs on an input padded by hand with zeros. Float32 uses full-precision arithmetic (no TF32),
// so results match the CPU's to float32 rounding. The algorithm is cuDNN's first heuristic
// choice that fits; its workspace comes from the caching allocator. The bias and a fused ReLU
// are elementwise kernels run after the convolution on the same stream.
#include <cudnn.h>

#include <memory>
#include <mutex>

#include "core/tensor_impl.h"
#include "cuda/lazy_library.h"
#include "cuda/loops.cuh"
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
  X(cudnnGetConvolutionBackwardFilterWorkspaceSize) X(cudnnConvolutionBackwardFilter)

struct Cudnn {
  detail::LazyLibrary lib{"libcudnn.so." + std::to_string(CUDNN_MAJOR), "cuDNN"};
#define IGNIS_CUDNN_MEMBER(f) decltype(&::f) f = lib.get<decltype(&::f)>(#f);
  IGNIS_CUDNN_FUNCS(IGNIS_CUDNN_MEMBER)
#undef IGNIS_CUDNN_MEMBER
};

const Cudnn& cudnn() {
  static std::mutex mu;
  static std::unique_ptr<Cudnn> api;
  std::lock_guard<std::mutex> g(mu);
  if (!api) api = std::make_unique<Cudnn>();
  return *api;
}

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
  check(cudnn().cudnnSetStream(h, static_cast<cudaStream_t>(getCurrentCUDAStream(device).handle())),
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

// The descriptors of one convolution: x and y as strided 4-d tensors, w as an OIHW filter.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors(const Tensor& x_, const Tensor& w_, const Tensor& y_, const ConvParams& p,
              const char* op) {
    const Cudnn& c = cudnn();
    const cudnnDataType_t dt = data_type(x_.dtype(), op);
    auto tensor = [&](cudnnTensorDescriptor_t& d, const Tensor& t) {
      check(c.cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
      check(c.cudnnSetTensor4dDescriptorEx(
                d, dt, static_cast<int>(t.size(0)), static_cast<int>(t.size(1)),
                static_cast<int>(t.size(2)), static_cast<int>(t.size(3)),
                static_cast<int>(t.stride(0)), static_cast<int>(t.stride(1)),
                static_cast<int>(t.stride(2)), static_cast<int>(t.stride(3))),
            "cudnnSetTensor4dDescriptorEx");
    };
    tensor(x, x_);
    tensor(y, y_);
    check(c.cudnnCreateFilterDescriptor(&w), "cudnnCreateFilterDescriptor");
    check(c.cudnnSetFilter4dDescriptor(w, dt, CUDNN_TENSOR_NCHW, static_cast<int>(w_.size(0)),
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
    // No TF32 for float32 (full precision); bfloat16 may use the tensor cores.
    check(c.cudnnSetConvolutionMathType(
              conv, x_.dtype() == kBFloat16 ? CUDNN_DEFAULT_MATH : CUDNN_FMA_MATH),
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

Tensor workspace(size_t bytes, Device device) {
  return make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, device);
}

// The first algorithm of cuDNN's heuristic list that is supported (status success).
template <class Perf, class Get>
auto pick(const Get& get, const char* op) {
  Perf perf[16];
  int n = 0;
  get(16, &n, perf);
  for (int i = 0; i < n; ++i) {
    if (perf[i].status == CUDNN_STATUS_SUCCESS) return perf[i].algo;
  }
  IGNIS_FAIL(op, ": cuDNN has no algorithm for this convolution");
}

bool symmetric(const ConvParams& p) {
  return p.pad_l[0] == p.pad_r[0] && p.pad_l[1] == p.pad_r[1];
}

// x zero-padded by hand (the padding before and after each spatial dim), and p without padding.
Tensor pad_by_hand(const Tensor& x, const ConvParams& p) {
  const int64_t H = x.size(2), W = x.size(3);
  Tensor out = make_tensor({x.size(0), x.size(1), H + p.pad_l[0] + p.pad_r[0],
                            W + p.pad_l[1] + p.pad_r[1]},
                           x.dtype(), x.device());
  NoGradGuard ng;
  out.zero_();
  const Tensor inner = make_view(out, x.sizes().shape(), out.strides().shape(),
                                 out.storage_offset() + p.pad_l[0] * out.stride(2) +
                                     p.pad_l[1] * out.stride(3));
  copy_into(inner, x);
  return out;
}
ConvParams unpadded(ConvParams p) {
  p.pad_l[0] = p.pad_l[1] = p.pad_r[0] = p.pad_r[1] = 0;
  return p;
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
  DeviceGuard guard(x.device().index);
  const int dev = x.device().index;
  cudnnHandle_t h = handle(dev);
  const Cudnn& c = cudnn();
  Descriptors d(x, w, out, p, "conv2d");
  const auto algo = pick<cudnnConvolutionFwdAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, req, n, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7");
      },
      "conv2d");
  size_t bytes = 0;
  check(c.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, &bytes),
        "cudnnGetConvolutionForwardWorkspaceSize");
  const Tensor ws = workspace(bytes, x.device());
  const Scale one(1), zero(0);
  check(c.cudnnConvolutionForward(h, one.for_dtype(x.dtype()), d.x, x.data_ptr(), d.w,
                                  w.data_ptr(), d.conv, algo, ws.data_ptr(), bytes,
                                  zero.for_dtype(x.dtype()), d.y, out.data_ptr()),
        "cudnnConvolutionForward");
  bias_relu(out, b, relu);
}

void conv_input_grad(const Tensor& gx, const Tensor& gy, const Tensor& w, const ConvParams& p) {
  if (!symmetric(p)) {
    // The gradient of the padded input, cropped.
    Tensor padded = make_tensor({gx.size(0), gx.size(1), gx.size(2) + p.pad_l[0] + p.pad_r[0],
                                 gx.size(3) + p.pad_l[1] + p.pad_r[1]},
                                gx.dtype(), gx.device());
    conv_input_grad(padded, gy, w, unpadded(p));
    const Tensor inner = make_view(padded, gx.sizes().shape(), padded.strides().shape(),
                                   p.pad_l[0] * padded.stride(2) + p.pad_l[1] * padded.stride(3));
    copy_into(gx, inner);
    return;
  }
  DeviceGuard guard(gy.device().index);
  cudnnHandle_t h = handle(gy.device().index);
  const Cudnn& c = cudnn();
  Descriptors d(gx, w, gy, p, "conv2d backward");
  const auto algo = pick<cudnnConvolutionBwdDataAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, req, n,
                                                            perf),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      },
      "conv2d backward");
  size_t bytes = 0;
  check(c.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo, &bytes),
        "cudnnGetConvolutionBackwardDataWorkspaceSize");
  const Tensor ws = workspace(bytes, gy.device());
  const Scale one(1), zero(0);
  check(c.cudnnConvolutionBackwardData(h, one.for_dtype(gy.dtype()), d.w, w.data_ptr(), d.y,
                                       gy.data_ptr(), d.conv, algo, ws.data_ptr(), bytes,
                                       zero.for_dtype(gy.dtype()), d.x, gx.data_ptr()),
        "cudnnConvolutionBackwardData");
}

void conv_weight_grad(const Tensor& gw, const Tensor& x, const Tensor& gy, const ConvParams& p) {
  if (!symmetric(p)) return conv_weight_grad(gw, pad_by_hand(x, p), gy, unpadded(p));
  DeviceGuard guard(x.device().index);
  cudnnHandle_t h = handle(x.device().index);
  const Cudnn& c = cudnn();
  Descriptors d(x, gw, gy, p, "conv2d backward");
  const auto algo = pick<cudnnConvolutionBwdFilterAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, req, n,
                                                              perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
      },
      "conv2d backward");
  size_t bytes = 0;
  check(c.cudnnGetConvolutionBackwardFilterWorkspaceSize(h, d.x, d.y, d.conv, d.w, algo, &bytes),
        "cudnnGetConvolutionBackwardFilterWorkspaceSize");
  const Tensor ws = workspace(bytes, x.device());
  const Scale one(1), zero(0);
  check(c.cudnnConvolutionBackwardFilter(h, one.for_dtype(x.dtype()), d.x, x.data_ptr(), d.y,
                                         gy.data_ptr(), d.conv, algo, ws.data_ptr(), bytes,
                                         zero.for_dtype(x.dtype()), d.w, gw.data_ptr()),
        "cudnnConvolutionBackwardFilter");
}

}  // namespace

IGNIS_REGISTER_KERNEL(conv2d_stub, CUDA, &conv_forward);
IGNIS_REGISTER_KERNEL(conv2d_input_grad_stub, CUDA, &conv_input_grad);
IGNIS_REGISTER_KERNEL(conv2d_weight_grad_stub, CUDA, &conv_weight_grad);

}  // namespace ignis::cuda
