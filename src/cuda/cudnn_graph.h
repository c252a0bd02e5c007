// Convolutions through cuDNN's graph API (the "backend" API that PyTorch reaches through the
// cuDNN frontend): each problem becomes an operation graph of one convolution node, cuDNN's
// heuristics rank the engines that can run it, and the first whose numerics ignis accepts and
// whose execution plan builds is kept for the problem. The legacy API (cudnnConvolutionForward
// and its gradients, cuda/conv.cu) offers a fixed list of algorithms; the graph API reaches
// cuDNN 9's newer engines too. Where the graph API has no plan for a problem, or a plan fails,
// the caller falls back to the legacy API (counted, with the reason, in cudnn_graph_stats()).
#pragma once

#include <cudnn.h>

#include "ignis/tensor.h"
#include "ops/conv.h"

namespace ignis::cuda::cudnn_graph {

enum class Direction { Forward = 0, BackwardData = 1, BackwardFilter = 2 };

/// What a forward may fuse after the convolution: y = relu(conv(x, w) + bias) (either part
/// optional; bias [O], of x's dtype).
struct Epilogue {
  Tensor bias;
  bool relu = false;
};

/// One convolution of x [N, C, H, W] with the filter w [O, C/groups, kh, kw] giving y [N, O, Ho,
/// Wo], in `dir`: Forward writes y, BackwardData writes x (the input gradient, y holding the
/// output gradient), BackwardFilter writes w (the weight gradient). x, w and y are dense in one
/// layout: NHWC activations with an OHWI filter when `nhwc`, else NCHW and OIHW. Float32 runs in
/// full precision (no engine that converts to TF32 or a narrower type is taken); bfloat16 on the
/// tensor cores, accumulating in float32. With `benchmark`, the candidates are timed on this
/// call's tensors and the fastest kept (as torch.backends.cudnn.benchmark). A forward with an
/// epilogue runs it in the same graph (cuDNN's runtime-fused engines: the sum and the ReLU in
/// float32, y rounded once); false when no engine fuses it (the caller then runs the plain
/// convolution and the epilogue apart; this is not counted as a fallback). Returns false when
/// the graph API has no plan for the problem or its plan failed (remembered: the next call
/// returns false at once); the caller then computes the result another way.
bool convolution(Direction dir, cudnnHandle_t handle, const Tensor& x, const Tensor& w,
                 const Tensor& y, const ConvParams& p, bool nhwc, bool benchmark,
                 const Epilogue& epilogue = {});

}  // namespace ignis::cuda::cudnn_graph
