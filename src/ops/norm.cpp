// batch_norm (and batch_norm_relu, its fusion with a residual add and a ReLU), group_norm,
// local_response_norm and dropout2d.
// batch_norm runs fused kernels (training: each channel's statistics and normalisation in one
// kernel; a one-kernel backward giving grad_input, grad_weight and grad_bias). When a graph of
// the backward is being built (create_graph) the backward is written in ignis ops instead,
// recomputing the statistics from x so that second derivatives flow through them. group_norm
// and local_response_norm are composites of differentiable ops; dropout2d multiplies by a
// per-channel mask.
#include "ops/norm.h"

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"
#include "ops/elementwise.h"
#include "ops/unary.h"

namespace ignis {

using autograd::BackwardCtx;
using autograd::SavedVariable;

IGNIS_DEFINE_STUB(batch_norm_train_stub, BatchNormTrainFn);
IGNIS_DEFINE_STUB(channel_affine_stub, ChannelAffineFn);
IGNIS_DEFINE_STUB(batch_norm_backward_stub, BatchNormBackwardFn);
IGNIS_DEFINE_STUB(batch_norm_relu_train_stub, BatchNormReluTrainFn);
IGNIS_DEFINE_STUB(channel_affine_relu_stub, ChannelAffineReluFn);
IGNIS_DEFINE_STUB(batch_norm_relu_backward_stub, BatchNormReluBackwardFn);

namespace {

/// Checks that an optional per-channel tensor is a [C] vector on x's device.
void check_channel_vector(const Tensor& t, const char* op, const char* name, const Tensor& x,
                          int64_t channels) {
  if (!t.defined()) return;
  IGNIS_CHECK(t.dim() == 1 && t.size(0) == channels, op, ": ", name, " must have shape [", channels,
              "] to match the ", channels, " channels of input of shape ", x.sizes(),
              ", but got shape ", t.sizes());
  IGNIS_CHECK(t.is_floating_point(), op, ": ", name, " must be floating point, but got ",
              t.dtype());
  IGNIS_CHECK(t.device() == x.device(), op, ": ", name, " is on ", t.device().str(),
              " but the input is on ", x.device().str());
}

/// [1, C, 1, ...] for x of rank nd: a per-channel vector broadcast over x.
Shape channel_shape(int64_t channels, int64_t nd) {
  Shape s(static_cast<size_t>(nd), 1);
  s[1] = channels;
  return s;
}

/// Every dim of x except the channel dim 1.
Shape non_channel_dims(int64_t nd) {
  Shape d;
  for (int64_t i = 0; i < nd; ++i) {
    if (i != 1) d.push_back(i);
  }
  return d;
}

/// The backward of batch norm written in ignis ops (differentiable again). With batch statistics
/// they are recomputed from x, so their dependence on x is part of the graph.
TensorList batch_norm_backward_composite(const Tensor& g, const Tensor& x, const Tensor& w,
                                         const Tensor& mean, const Tensor& invstd, bool batch_stats,
                                         double eps) {
  const Shape cs = channel_shape(x.size(1), x.dim());
  const Shape dims = non_channel_dims(x.dim());
  Tensor inv, xhat;
  if (batch_stats) {
    Tensor xc = x - x.mean(dims, true);
    inv = rsqrt((xc * xc).mean(dims, true) + eps);
    xhat = xc * inv;
  } else {
    inv = invstd.view(cs);
    xhat = (x - mean.view(cs)) * inv;
  }
  Tensor gxhat = w.defined() ? g * w.view(cs) : g;
  Tensor gx = batch_stats
                  ? inv * (gxhat - gxhat.mean(dims, true) - xhat * (gxhat * xhat).mean(dims, true))
                  : gxhat * inv;
  return {gx, (g * xhat).sum(dims), g.sum(dims)};
}

/// r = (1 - momentum) * r + momentum * stat, in place (no history).
void update_running(Tensor& r, const Tensor& stat, double momentum) {
  NoGradGuard ng;
  r.mul_(1 - momentum).add_(cast(stat, r.dtype()), momentum);
}

// The [n, channels, inner] view the kernels take of a dense tensor: NCHW as [N, C, H*W],
// channels-last as [N*H*W, C, 1] (the same per-channel statistics over other rows).
Tensor ncm_view(const Tensor& t, bool cl) {
  if (cl) return t.permute({0, 2, 3, 1}).view({-1, t.size(1), 1});
  const int64_t n = t.size(0), ch = t.size(1);
  return t.view({n, ch, n * ch == 0 ? 0 : t.numel() / (n * ch)});
}

}  // namespace

IGNIS_OP(batch_norm,
         "batch_norm(Tensor input, Tensor(a!)? running_mean, Tensor(b!)? running_var, "
         "Tensor? weight, Tensor? bias, bool training, float momentum, float eps) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&, bool,
                double, double),
         batch_norm,
         {.differentiable = true,
          .stubs = {&batch_norm_train_stub, &channel_affine_stub, &batch_norm_backward_stub}});
IGNIS_OP(batch_norm_relu,
         "batch_norm_relu(Tensor input, Tensor? other, Tensor(a!)? running_mean, "
         "Tensor(b!)? running_var, Tensor? weight, Tensor? bias, bool training, float momentum, "
         "float eps) -> Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, const Tensor&, const Tensor&,
                const Tensor&, bool, double, double),
         batch_norm_relu,
         {.differentiable = true,
          .stubs = {&batch_norm_relu_train_stub, &channel_affine_relu_stub,
                    &batch_norm_relu_backward_stub}});
IGNIS_OP(group_norm,
         "group_norm(Tensor input, int num_groups, Tensor? weight=None, Tensor? bias=None, "
         "float eps=1e-05) -> Tensor",
         Tensor(const Tensor&, int64_t, const Tensor&, const Tensor&, double), group_norm,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(local_response_norm,
         "local_response_norm(Tensor input, int size, float alpha=0.0001, float beta=0.75, "
         "float k=1.0) -> Tensor",
         Tensor(const Tensor&, int64_t, double, double, double), local_response_norm,
         {.differentiable = true, .kind = "composite"});
// PyTorch's op behind F.dropout2d is feature_dropout.
IGNIS_OP(feature_dropout, "feature_dropout(Tensor input, float p=0.5, bool train=True) -> Tensor",
         Tensor(const Tensor&, double, bool), dropout2d,
         {.differentiable = true, .kind = "random"});

namespace {

/// batch_norm_relu's residual: x's shape, dtype and device (no broadcasting, on any device).
void check_residual(const Tensor& x, const Tensor& other) {
  if (!other.defined()) return;
  IGNIS_CHECK(other.sizes() == x.sizes() && other.dtype() == x.dtype(),
              "batch_norm_relu: other must have the input's shape and dtype ", x.dtype(), x.sizes(),
              ", but got ", other.dtype(), other.sizes());
  IGNIS_CHECK(other.device() == x.device(), "batch_norm_relu: other is on ", other.device().str(),
              " but the input is on ", x.device().str());
}

/// batch_norm, and with relu set batch_norm_relu: relu(batch_norm(x) + other), other optional
/// (checked by check_residual).
Tensor batch_norm_impl(const Tensor& x, const Tensor& other, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       bool training, double momentum, double eps, bool relu) {
  const char* op = relu ? "batch_norm_relu" : "batch_norm";
  IGNIS_CHECK(x.dim() >= 2, op, ": expected an input of at least 2 dims [N, C, *], but got shape ",
              x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  const int64_t channels = x.size(1);
  check_channel_vector(weight, op, "weight", x, channels);
  check_channel_vector(bias, op, "bias", x, channels);
  check_channel_vector(running_mean, op, "running_mean", x, channels);
  check_channel_vector(running_var, op, "running_var", x, channels);
  IGNIS_CHECK(running_mean.defined() == running_var.defined(), op,
              ": running_mean and running_var must both be defined or both undefined");
  IGNIS_CHECK(training || running_mean.defined(), op,
              ": running_mean and running_var are required in evaluation mode "
              "(training=false)");
  IGNIS_CHECK(eps >= 0, op, ": eps must be non-negative, but got ", eps);
  const int64_t count = channels == 0 ? 0 : x.numel() / channels;  // values per channel
  IGNIS_CHECK(!training || count > 1, op,
              ": expected more than 1 value per channel when training, but got "
              "input of shape ",
              x.sizes());

  const DType sd = norm_stat_dtype(x.dtype());
  const bool cl = is_channels_last(x);  // kept channels-last
  const MemoryFormat fmt = cl ? MemoryFormat::ChannelsLast : MemoryFormat::Contiguous;
  const Tensor x3 = ncm_view(x.contiguous(fmt), cl);
  const Tensor other3 = other.defined() ? ncm_view(other.contiguous(fmt), cl) : Tensor();
  Tensor out = make_tensor(x.sizes(), x.dtype(), x.device(), fmt);
  const Tensor out3 = ncm_view(out, cl);
  Tensor mean, invstd;
  {
    NoGradGuard ng;
    // Per-channel vectors in the statistics dtype, contiguous, for the kernels.
    auto stat_vector = [&](const Tensor& t) { return t.defined() ? cast(t, sd).contiguous() : t; };
    if (training) {
      mean = make_tensor({channels}, sd, x.device());
      Tensor var = make_tensor({channels}, sd, x.device());
      invstd = make_tensor({channels}, sd, x.device());
      if (relu) {
        batch_norm_relu_train_stub[x.device()](out3, mean, var, invstd, x3, stat_vector(weight),
                                               stat_vector(bias), eps, other3);
      } else {
        batch_norm_train_stub[x.device()](out3, mean, var, invstd, x3, stat_vector(weight),
                                          stat_vector(bias), eps);
      }
      if (running_mean.defined()) {
        Tensor rm = running_mean, rv = running_var;
        update_running(rm, mean, momentum);
        update_running(rv, var * (static_cast<double>(count) / static_cast<double>(count - 1)),
                       momentum);
      }
    } else {
      mean = running_mean.to(sd, /*non_blocking=*/false,
                             /*copy=*/true);  // a snapshot: the buffer may change later
      invstd = rsqrt(cast(running_var, sd) + eps);
      const Tensor scale = weight.defined() ? invstd * cast(weight, sd) : invstd;
      const Tensor shift = bias.defined() ? cast(bias, sd) - mean * scale : -(mean * scale);
      if (relu) {
        channel_affine_relu_stub[x.device()](out3, x3, scale, shift, other3);
      } else {
        channel_affine_stub[x.device()](out3, x3, scale, shift);
      }
    }
  }

  if (autograd::any_needs_grad({&x, &weight, &bias, &other})) {
    const bool has_other = other.defined();
    auto backward = [sx = SavedVariable(x, false), sw = SavedVariable(weight, false),
                     sm = SavedVariable(mean, false), si = SavedVariable(invstd, false),
                     so = relu ? save_output(out) : SavedVariable(), training, eps, cl, fmt, relu,
                     has_other](BackwardCtx& c, const TensorList& g) -> TensorList {
      const Tensor xs = c.unpack(sx);
      const Tensor w = c.unpack(sw);
      const Tensor mean = c.unpack(sm), invstd = c.unpack(si);
      if (is_grad_enabled()) {
        // The ReLU's backward, then batch norm's, in ops (differentiable again).
        const Tensor gy = relu ? threshold_backward(g[0], c.unpack(so), 0) : g[0];
        TensorList r = batch_norm_backward_composite(gy, xs, w, mean, invstd, training, eps);
        if (relu) r.push_back(has_other ? gy : Tensor());
        return r;
      }
      const int64_t ch = xs.size(1);
      const DType sdt = norm_stat_dtype(xs.dtype());
      const Device dev = xs.device();
      Tensor gx, gw, gb, go;
      if (c.needs_input_grad(0)) gx = make_tensor(xs.sizes(), xs.dtype(), dev, fmt);
      if (c.needs_input_grad(1)) gw = make_tensor({ch}, sdt, dev);
      if (c.needs_input_grad(2)) gb = make_tensor({ch}, sdt, dev);
      if (has_other && c.needs_input_grad(3)) go = make_tensor(xs.sizes(), xs.dtype(), dev, fmt);
      const Tensor g3 = ncm_view(cast(g[0], xs.dtype()).contiguous(fmt), cl);
      const Tensor gx3 = gx.defined() ? ncm_view(gx, cl) : gx;
      const Tensor x3 = ncm_view(xs.contiguous(fmt), cl);
      const Tensor wv = w.defined() ? cast(w, sdt).contiguous() : w;
      if (!relu) {
        batch_norm_backward_stub[dev](gx3, gw, gb, g3, x3, mean, invstd, wv, training);
        return {gx, gw, gb};
      }
      const Tensor y3 = ncm_view(c.unpack(so).contiguous(fmt), cl);
      batch_norm_relu_backward_stub[dev](gx3, gw, gb, go.defined() ? ncm_view(go, cl) : go, g3, y3,
                                         x3, mean, invstd, wv, training);
      return {gx, gw, gb, go};
    };
    if (relu) {
      autograd::record(op, {&x, &weight, &bias, &other}, {&out}, std::move(backward));
    } else {
      autograd::record(op, {&x, &weight, &bias}, {&out}, std::move(backward));
    }
  }
  return out;
}

}  // namespace

Tensor batch_norm(const Tensor& x, const Tensor& running_mean, const Tensor& running_var,
                  const Tensor& weight, const Tensor& bias, bool training, double momentum,
                  double eps) {
  IGNIS_DISPATCH(batch_norm, batch_norm, x, running_mean, running_var, weight, bias, training,
                 momentum, eps);
  return batch_norm_impl(x, Tensor(), running_mean, running_var, weight, bias, training, momentum,
                         eps, false);
}

Tensor batch_norm_relu(const Tensor& x, const Tensor& other, const Tensor& running_mean,
                       const Tensor& running_var, const Tensor& weight, const Tensor& bias,
                       bool training, double momentum, double eps) {
  IGNIS_DISPATCH(batch_norm_relu, batch_norm_relu, x, other, running_mean, running_var, weight,
                 bias, training, momentum, eps);
  IGNIS_CHECK(x.defined(), "batch_norm_relu: the input is undefined");
  check_residual(x, other);
  if (!batch_norm_relu_train_stub.has_kernel(x.device().type)) {
    // No fused kernels on this device: the three ops.
    Tensor y = batch_norm(x, running_mean, running_var, weight, bias, training, momentum, eps);
    return relu(other.defined() ? add(y, other) : y);
  }
  return batch_norm_impl(x, other, running_mean, running_var, weight, bias, training, momentum, eps,
                         true);
}

Tensor group_norm(const Tensor& x, int64_t num_groups, const Tensor& weight, const Tensor& bias,
                  double eps) {
  IGNIS_DISPATCH(group_norm, group_norm, x, num_groups, weight, bias, eps);
  const char* op = "group_norm";
  IGNIS_CHECK(x.dim() >= 2, op, ": expected an input of at least 2 dims [N, C, *], but got shape ",
              x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  const int64_t channels = x.size(1);
  IGNIS_CHECK(num_groups > 0 && channels % num_groups == 0, op, ": num_groups ", num_groups,
              " must be positive and divide the ", channels, " channels of input of shape ",
              x.sizes());
  check_channel_vector(weight, op, "weight", x, channels);
  check_channel_vector(bias, op, "bias", x, channels);
  IGNIS_CHECK(eps >= 0, op, ": eps must be non-negative, but got ", eps);
  const int64_t n = x.size(0);
  const int64_t per_group = n * num_groups == 0 ? 0 : x.numel() / (n * num_groups);
  Tensor xg = x.reshape({n, num_groups, per_group});
  Tensor xc = xg - xg.mean({2}, true);
  Tensor y = (xc * rsqrt((xc * xc).mean({2}, true) + eps)).reshape(x.sizes());
  const Shape cs = channel_shape(channels, x.dim());
  if (weight.defined()) y = y * weight.view(cs);
  if (bias.defined()) y = y + bias.view(cs);
  return y;
}

Tensor local_response_norm(const Tensor& x, int64_t size, double alpha, double beta, double k) {
  IGNIS_DISPATCH(local_response_norm, local_response_norm, x, size, alpha, beta, k);
  const char* op = "local_response_norm";
  IGNIS_CHECK(x.dim() >= 3, op, ": expected an input of at least 3 dims [N, C, *], but got shape ",
              x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  IGNIS_CHECK(size > 0, op, ": size must be positive, but got ", size);
  const int64_t n = x.size(0), channels = x.size(1);
  const int64_t inner = n * channels == 0 ? 0 : x.numel() / (n * channels);
  // The window sum of squares over channels c - size/2 .. c + (size-1)/2, zero padded: the sum of
  // `size` shifted views of the padded squares (exact, unlike a difference of cumsums).
  Tensor sq = pad((x * x).reshape({n, channels, inner}), {0, 0, size / 2, (size - 1) / 2});
  Tensor win = sq.narrow(1, 0, channels);
  for (int64_t j = 1; j < size; ++j) win = win + sq.narrow(1, j, channels);
  Tensor div = (win * (alpha / static_cast<double>(size)) + k).pow(beta).reshape(x.sizes());
  return x / div;
}

Tensor dropout2d(const Tensor& x, double p, bool training) {
  IGNIS_DISPATCH(feature_dropout, dropout2d, x, p, training);
  const char* op = "dropout2d";
  IGNIS_CHECK(p >= 0 && p <= 1, op, ": probability has to be between 0 and 1, but got ", p);
  IGNIS_CHECK(x.dim() == 3 || x.dim() == 4, op,
              ": expected a 3-D [N, C, L] or 4-D [N, C, H, W] input, but got shape ", x.sizes());
  IGNIS_CHECK(x.is_floating_point(), op, ": expected a floating point input, but got ", x.dtype());
  if (!training || p == 0) return x;
  if (p == 1) return x * 0;
  Shape mask_shape(static_cast<size_t>(x.dim()), 1);
  mask_shape[0] = x.size(0);
  mask_shape[1] = x.size(1);
  const TensorOptions opts = TensorOptions(norm_stat_dtype(x.dtype())).device(x.device());
  Tensor keep = (rand(mask_shape, opts) >= p).to(x.dtype());
  return x * (keep * (1.0 / (1.0 - p)));
}

}  // namespace ignis
