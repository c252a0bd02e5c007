// Convolutions on the GPU through cuDNN (opened at first use, cuda/lazy_library.h): the forward,
// input-gradient and weight-gradient kernels of conv2d_stub and its two gradient stubs, for
// float32, float64 and bfloat16, groups, dilation. cuDNN gets dense NCHW activations (a
// channels-last one is copied) with the NCHW filter. cuDNN pads symmetrically: an asymmetric
// padding ("same" with an even kernel; conv_transpose2d's output_padding, a negative right
// padding) runs on an input cropped and zero-padded by hand. Float32 uses full-precision
// arithmetic (no TF32), so results match the CPU's to float32 rounding. The algorithm is cuDNN's
// first heuristic choice whose workspace (from the caching allocator) fits. The bias and a fused
// ReLU are elementwise kernels run after the convolution on the same stream.
#include <cudnn.h>

#include <climits>
#include <memory>
#include <mutex>
#include <string>

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

// The descriptors of one convolution: x and y as strided 4-d tensors, w as an OIHW filter.
struct Descriptors {
  cudnnTensorDescriptor_t x = nullptr, y = nullptr;
  cudnnFilterDescriptor_t w = nullptr;
  cudnnConvolutionDescriptor_t conv = nullptr;
  Descriptors(const Tensor& x_, const Tensor& w_, const Tensor& y_, const ConvParams& p,
              const char* op) {
    const Cudnn& c = cudnn();
    const cudnnDataType_t dt = data_type(x_.dtype(), op);
    // Every tensor here is dense NCHW (see nchw()): strides from the sizes, so that size-1 dims
    // never carry odd strides into cuDNN.
    auto tensor = [&](cudnnTensorDescriptor_t& d, const Tensor& t) {
      IGNIS_CHECK(t.numel() <= INT_MAX, op, ": tensors of 2^31 elements or more are not supported "
                  "on CUDA (shape ", t.sizes(), ")");
      const int n = static_cast<int>(t.size(0)), ch = static_cast<int>(t.size(1)),
                h = static_cast<int>(t.size(2)), w = static_cast<int>(t.size(3));
      check(c.cudnnCreateTensorDescriptor(&d), "cudnnCreateTensorDescriptor");
      check(c.cudnnSetTensor4dDescriptorEx(d, dt, n, ch, h, w, ch * h * w, h * w, w, 1),
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

// Runs the first algorithm of cuDNN's heuristic list that is supported and whose workspace
// (from the caching allocator) can be had: run(algo, workspace, bytes) with bytes from
// size(algo). An algorithm whose workspace does not fit is skipped, as PyTorch does.
template <class Perf, class Get, class Size, class Run>
void run_first_fitting(const Get& get, const Size& size, const Run& run, Device device,
                       const char* op) {
  Perf perf[16];
  int n = 0;
  get(16, &n, perf);
  std::string last;
  for (int i = 0; i < n; ++i) {
    if (perf[i].status != CUDNN_STATUS_SUCCESS) continue;
    const size_t bytes = size(perf[i].algo);
    Tensor ws;
    try {
      ws = make_tensor({static_cast<int64_t>(std::max<size_t>(bytes, 1))}, kUInt8, device);
    } catch (const Error& e) {  // out of memory: the next algorithm may need less
      last = e.what();
      continue;
    }
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

// t as dense NCHW: cuDNN gets NCHW activations with the NCHW filter (a channels-last tensor is
// copied; cuDNN's NHWC kernels want NHWC filters, which ignis's weights are not).
Tensor nchw(const Tensor& t) {
  if (t.is_contiguous()) return t;
  Tensor c = make_tensor(t.sizes(), t.dtype(), t.device());
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
  if (!x.is_contiguous() || !out.is_contiguous()) {
    const Tensor y = make_tensor(out.sizes(), out.dtype(), out.device());
    conv_forward(y, nchw(x), w, b, p, relu);
    copy_into(out, y);
    return;
  }
  DeviceGuard guard(x.device().index);
  const int dev = x.device().index;
  cudnnHandle_t h = handle(dev);
  const Cudnn& c = cudnn();
  Descriptors d(x, w, out, p, "conv2d");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionFwdAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionFwdAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionForwardAlgorithm_v7(h, d.x, d.w, d.conv, d.y, req, n, perf),
              "cudnnGetConvolutionForwardAlgorithm_v7");
      },
      [&](cudnnConvolutionFwdAlgo_t algo) {
        size_t bytes = 0;
        check(c.cudnnGetConvolutionForwardWorkspaceSize(h, d.x, d.w, d.conv, d.y, algo, &bytes),
              "cudnnGetConvolutionForwardWorkspaceSize");
        return bytes;
      },
      [&](cudnnConvolutionFwdAlgo_t algo, void* ws, size_t bytes) {
        check(c.cudnnConvolutionForward(h, one.for_dtype(x.dtype()), d.x, x.data_ptr(), d.w,
                                        w.data_ptr(), d.conv, algo, ws, bytes,
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
  if (!gx.is_contiguous() || !gy.is_contiguous()) {
    const Tensor g = make_tensor(gx.sizes(), gx.dtype(), gx.device());
    conv_input_grad(g, nchw(gy), w, p);
    copy_into(gx, g);
    return;
  }
  DeviceGuard guard(gy.device().index);
  cudnnHandle_t h = handle(gy.device().index);
  const Cudnn& c = cudnn();
  Descriptors d(gx, w, gy, p, "conv2d backward");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionBwdDataAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionBwdDataAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardDataAlgorithm_v7(h, d.w, d.y, d.conv, d.x, req, n,
                                                            perf),
              "cudnnGetConvolutionBackwardDataAlgorithm_v7");
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo) {
        size_t bytes = 0;
        check(c.cudnnGetConvolutionBackwardDataWorkspaceSize(h, d.w, d.y, d.conv, d.x, algo,
                                                             &bytes),
              "cudnnGetConvolutionBackwardDataWorkspaceSize");
        return bytes;
      },
      [&](cudnnConvolutionBwdDataAlgo_t algo, void* ws, size_t bytes) {
        check(c.cudnnConvolutionBackwardData(h, one.for_dtype(gy.dtype()), d.w, w.data_ptr(), d.y,
                                             gy.data_ptr(), d.conv, algo, ws, bytes,
                                             zero.for_dtype(gy.dtype()), d.x, gx.data_ptr()),
              "cudnnConvolutionBackwardData");
      },
      gy.device(), "conv2d backward");
}

void conv_weight_grad(const Tensor& gw, const Tensor& x, const Tensor& gy, const ConvParams& p) {
  if (!symmetric(p)) return conv_weight_grad(gw, pad_by_hand(x, p), gy, unpadded(p));
  if (!x.is_contiguous() || !gy.is_contiguous()) {
    return conv_weight_grad(gw, nchw(x), nchw(gy), p);
  }
  DeviceGuard guard(x.device().index);
  cudnnHandle_t h = handle(x.device().index);
  const Cudnn& c = cudnn();
  Descriptors d(x, gw, gy, p, "conv2d backward");
  const Scale one(1), zero(0);
  run_first_fitting<cudnnConvolutionBwdFilterAlgoPerf_t>(
      [&](int req, int* n, cudnnConvolutionBwdFilterAlgoPerf_t* perf) {
        check(c.cudnnGetConvolutionBackwardFilterAlgorithm_v7(h, d.x, d.y, d.conv, d.w, req, n,
                                                              perf),
              "cudnnGetConvolutionBackwardFilterAlgorithm_v7");
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

IGNIS_REGISTER_KERNEL(conv2d_stub, CUDA, &conv_forward);
IGNIS_REGISTER_KERNEL(conv2d_input_grad_stub, CUDA, &conv_input_grad);
IGNIS_REGISTER_KERNEL(conv2d_weight_grad_stub, CUDA, &conv_weight_grad);

}  // namespace ignis::cuda
