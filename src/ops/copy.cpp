// Copies, casts, clone/contiguous, fill: the ops that move data without arithmetic.
#include "ops/copy.h"

#include "autograd/node.h"
#include "core/op_call.h"
#include "cuda/backend.h"

namespace ignis {

IGNIS_DEFINE_STUB(copy_stub, CopyFn);
IGNIS_DEFINE_STUB(fill_stub, FillFn);

void copy_into(const Tensor& dst, const Tensor& src, bool non_blocking) {
  if (dst.device() != src.device()) {
    // Into a meta tensor there is nothing to copy; out of one there is nothing to read.
    if (dst.device().is_meta()) return;
    IGNIS_CHECK(!src.device().is_meta(), "copy_: cannot copy out of a meta tensor (shape ",
                src.sizes(), ", ", src.dtype(), "): it has no data");
    if (dst.numel() == 0) return;  // (as on one device: nothing moves, nothing waits)
    // A broadcast source (a 0-d CPU scalar filling a GPU tensor, say) travels as its own
    // elements, then is broadcast on the destination's device (after the copy, in stream order).
    if (src.sizes() != dst.sizes()) {
      const Tensor moved = make_tensor(src.sizes(), src.dtype(), dst.device());
      copy_into(moved, src, non_blocking);
      return copy_into(dst, moved);
    }
    cuda::detail::copy_across_devices(dst, src, non_blocking);
    return;
  }
  if (dst.numel() == 0) return;
  TensorIter it = TensorIter::build(dst, {&src});
  copy_stub[dst.device()](it, dst.dtype(), src.dtype());
}

// LibTorch's positional signatures: to(dtype, non_blocking, copy), to(device, dtype,
// non_blocking, copy), to(options, non_blocking, copy). non_blocking matters for copies between
// pinned host memory and a GPU (cuda/copy.cpp); other copies complete before to() returns.
IGNIS_OP_METHOD(to_dtype,
                "to.dtype(Tensor(a) self, ScalarType dtype, bool non_blocking=False, "
                "bool copy=False) -> Tensor(a)",
                Tensor(DType, bool, bool) const, to,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(to_device,
                "to.device(Tensor(a) self, Device device, ScalarType dtype, "
                "bool non_blocking=False, bool copy=False) -> Tensor(a)",
                Tensor(Device, DType, bool, bool) const, to,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(to_dtype_layout,
                "to.dtype_layout(Tensor(a) self, TensorOptions options, bool non_blocking=False, "
                "bool copy=False) -> Tensor(a)",
                Tensor(const TensorOptions&, bool, bool) const, to,
                {.differentiable = true, .kind = "composite"});

// clone() and to() keep a channels-last layout (PyTorch's preserve_format); any other strided
// input gives a contiguous result.
Tensor Tensor::to(DType dtype, bool non_blocking, bool copy) const {
  IGNIS_DISPATCH_METHOD(to_dtype, to, dtype, non_blocking, copy);
  if (dtype == this->dtype() && !copy) return *this;
  Tensor out = make_tensor_like(*this, sizes(), dtype, device());
  copy_into(out, *this);
  if (autograd::any_needs_grad({this}) && ignis::is_floating_point(dtype)) {
    // The engine casts the gradient back to the input's dtype.
    autograd::record("to", {this}, {&out},
                     [](autograd::BackwardCtx&, const TensorList& g) { return TensorList{g[0]}; });
  }
  return out;
}

Tensor Tensor::to(Device device, DType dtype, bool non_blocking, bool copy) const {
  IGNIS_DISPATCH_METHOD(to_device, to, device, dtype, non_blocking, copy);
  if (device == this->device()) return to(dtype, non_blocking, copy);
  Tensor out = make_tensor_like(*this, sizes(), this->dtype(), device);  // throws if no backend
  copy_into(out, *this, non_blocking);
  if (autograd::any_needs_grad({this})) {
    // The gradient goes back to the input's device (a copy the other way).
    autograd::record("to", {this}, {&out},
                     [from = this->device()](autograd::BackwardCtx&, const TensorList& g) {
                       return TensorList{g[0].to(from)};
                     });
  }
  return dtype == out.dtype() ? out : out.to(dtype, non_blocking);
}

Tensor Tensor::to(const TensorOptions& opts, bool non_blocking, bool copy) const {
  IGNIS_DISPATCH_METHOD(to_dtype_layout, to, opts, non_blocking, copy);
  return to(opts.device(), opts.has_dtype() ? opts.dtype() : dtype(), non_blocking, copy);
}

namespace {
// Records out = x for autograd: the gradient passes through unchanged.
Tensor pass_through(const Tensor& x, Tensor out, const char* op) {
  if (autograd::any_needs_grad({&x})) {
    autograd::record(op, {&x}, {&out},
                     [](autograd::BackwardCtx&, const TensorList& g) { return TensorList{g[0]}; });
  }
  return out;
}
// A differentiable copy of x into `out` (same shape, dtype and device).
Tensor copy_as(const Tensor& x, Tensor out, const char* op) {
  copy_into(out, x);
  return pass_through(x, std::move(out), op);
}
}  // namespace

IGNIS_OP_METHOD(clone, "clone(Tensor self) -> Tensor", Tensor() const, clone,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(contiguous, "contiguous(Tensor(a) self) -> Tensor(a)", Tensor() const, contiguous,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(contiguous_memory_format,
                "contiguous.memory_format(Tensor(a) self, MemoryFormat memory_format) -> Tensor(a)",
                Tensor(MemoryFormat) const, contiguous,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(copy_, "copy_(Tensor(a!) self, Tensor src, bool non_blocking=False) -> Tensor(a!)",
                Tensor&(const Tensor&, bool) const, copy_,
                {.differentiable = true, .stubs = {&copy_stub}});
IGNIS_OP_METHOD(fill_, "fill_(Tensor(a!) self, Scalar value) -> Tensor(a!)", Tensor&(Scalar) const,
                fill_, {.stubs = {&copy_stub}});
IGNIS_OP_METHOD(zero_, "zero_(Tensor(a!) self) -> Tensor(a!)", Tensor&() const, zero_,
                {.kind = "composite"});

Tensor Tensor::clone() const {
  IGNIS_DISPATCH_METHOD(clone, clone);
  return copy_as(*this, make_tensor_like(*this, sizes(), dtype(), device()), "clone");
}

Tensor Tensor::contiguous() const {
  IGNIS_DISPATCH_METHOD(contiguous, contiguous);
  return is_contiguous() ? *this
                         : copy_as(*this, make_tensor(sizes(), dtype(), device()), "contiguous");
}

Tensor Tensor::contiguous(MemoryFormat format) const {
  IGNIS_DISPATCH_METHOD(contiguous_memory_format, contiguous, format);
  if (format == MemoryFormat::Contiguous) return contiguous();
  IGNIS_CHECK(dim() == 4,
              "contiguous: channels_last needs a 4-d tensor [N, C, H, W], but got "
              "shape ",
              sizes());
  if (suggest_memory_format() == MemoryFormat::ChannelsLast) return *this;
  if (is_contiguous(format)) {  // dense NHWC already (size-1 dims): restride, no copy
    return restride_channels_last(*this);
  }
  return copy_as(*this, make_tensor(sizes(), dtype(), device(), format), "contiguous");
}
Tensor contiguous(const Tensor& x) { return x.contiguous(); }

Tensor& Tensor::copy_(const Tensor& src) const { return copy_(src, false); }

// Only a copy between devices can be left running (non_blocking); with autograd it is recorded.
Tensor& Tensor::copy_(const Tensor& src, bool non_blocking) const {
  IGNIS_DISPATCH_METHOD(copy_, copy_, src, non_blocking);
  IGNIS_CHECK(defined() && src.defined(), "copy_: undefined tensor");
  if (autograd::any_needs_grad({this, &src})) {
    Tensor r = src.expand(sizes()).to(dtype(), false, true);
    return inplace_from(mut(), r, "copy_");
  }
  Shape s = broadcast_shapes(sizes(), src.sizes());
  IGNIS_CHECK(IntArrayRef(s).equals(sizes()), "copy_: source of shape ", src.sizes(),
              " can't be broadcast to the destination's shape ", sizes());
  copy_into(mut(), src, /*non_blocking=*/non_blocking && src.device() != device());
  impl()->bump_version();
  return mut();
}

Tensor& Tensor::fill_(Scalar v) const {
  IGNIS_DISPATCH_METHOD(fill_, fill_, v);
  check_inplace(mut(), "fill_");
  if (is_cuda() && is_contiguous()) {
    if (numel() > 0) fill_stub[device()](mut(), v);
  } else {
    copy_into(mut(), wrap_scalar(v, dtype(), device()));
  }
  impl()->bump_version();
  if (AutogradMeta* m = autograd_meta(); m && m->grad_fn && is_grad_enabled()) {
    m->grad_fn.reset();  // a constant now: no history
    m->requires_grad = false;
  }
  return mut();
}

Tensor& Tensor::zero_() const {
  IGNIS_DISPATCH_METHOD(zero_, zero_);
  return fill_(0);
}

}  // namespace ignis
