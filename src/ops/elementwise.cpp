#include "ops/elementwise.h"

#include "autograd/node.h"
#include "ops/copy.h"

namespace ignis {

DType result_type(const Tensor& a, const Tensor& b) {
  const TensorImpl* ia = a.impl();
  const TensorImpl* ib = b.impl();
  if (ia == nullptr || ib == nullptr) {  // the checked accessors name the problem
    (void)a.dtype();
    (void)b.dtype();
  }
  const bool a0 = ia->dim() == 0, b0 = ib->dim() == 0;
  const DType at = ia->dtype(), bt = ib->dtype();
  if (a0 == b0) return at == bt ? at : promote_types(at, bt);
  const DType dim_t = a0 ? bt : at;
  const DType zero_t = a0 ? at : bt;
  return dtype_category(zero_t) > dtype_category(dim_t) ? promote_types(dim_t, zero_t) : dim_t;
}

DType result_type(const Tensor& a, Scalar b) {
  const DType t = a.dtype();
  const DType s = b.is_floating_point() ? default_dtype() : b.is_integral() ? kInt64 : kBool;
  return dtype_category(s) > dtype_category(t) ? promote_types(t, s) : t;
}

Tensor wrap_scalar(Scalar s, DType dtype, Device device) {
  Tensor t = make_tensor({}, dtype, device);
  if (device.is_cpu()) {
    dispatch_dtype(dtype, "scalar", [&]<class T>() {
      *static_cast<T*>(t.data_ptr()) = static_cast<T>(s.to<acc_t<T>>());
    });
  } else if (!device.is_meta()) {  // a meta tensor has no value to set
    fill_stub[device](t, s);  // queued: no host copy waiting for the device's stream
  }
  return t;
}

Tensor to_operand_device(const Tensor& x, Device device) {
  if (x.device() == device || !x.device().is_cpu() || x.dim() != 0) return x;
  // A CPU 0-d tensor is a scalar operand (PyTorch's rule): its value, read on the host, goes
  // with the op to the other operand's device.
  if (device.is_meta()) return make_tensor({}, x.dtype(), device);
  return wrap_scalar(x.item(), x.dtype(), device);
}

Tensor cast(const Tensor& x, DType dtype) { return x.dtype() == dtype ? x : x.to(dtype); }

Tensor binary_op(const DispatchStub<ElementwiseFn>& stub, const Tensor& a, const Tensor& b,
                 DType compute, DType out_dtype, OpArgs args) {
  // Fast path, the common case of small ops: same shape, contiguous, already of the compute
  // dtype, one device. Reads the geometry straight from the impls (no checked accessor calls)
  // and iterates as one flat row.
  if (const TensorImpl* ia = a.impl(), *ib = b.impl();
      ia != nullptr && ib != nullptr && ia->dtype() == compute && ib->dtype() == compute &&
      ia->is_contiguous() && ib->is_contiguous() && ia->sizes().equals(ib->sizes()) &&
      ia->device() == ib->device()) {
    Tensor out = make_tensor(ia->sizes(), out_dtype, ia->device());
    const TensorIter it = TensorIter::flat(*out.impl(), *ia, *ib);
    stub[ia->device()](it, compute, args);
    return out;
  }
  if (a.device() != b.device()) {
    if (a.dim() == 0 && a.device().is_cpu()) {
      return binary_op(stub, to_operand_device(a, b.device()), b, compute, out_dtype, args);
    }
    if (b.dim() == 0 && b.device().is_cpu()) {
      return binary_op(stub, a, to_operand_device(b, a.device()), compute, out_dtype, args);
    }
  }
  IGNIS_CHECK(a.device() == b.device(), stub.op,
              ": expected both tensors on the same device, "
              "but got ",
              a.device().str(), " and ", b.device().str());
  // Cast only operands that need it (no handle copies on the common path).
  Tensor ta, tb;
  const Tensor* pa = &a;
  const Tensor* pb = &b;
  if (a.dtype() != compute) pa = &(ta = a.to(compute));
  if (b.dtype() != compute) pb = &(tb = b.to(compute));
  Tensor out;
  if (a.sizes().equals(b.sizes())) {
    // Laid out like a channels-last operand (an expanded or transposed one does not count).
    out = make_tensor_like(is_channels_last(a) ? a : b, a.sizes(), out_dtype, a.device());
  } else {
    Shape s;
    try {
      s = broadcast_shapes(a.sizes(), b.sizes());
    } catch (const Error&) {
      IGNIS_FAIL(stub.op, ": shapes ", a.sizes(), " and ", b.sizes(), " cannot be broadcast");
    }
    out = make_tensor_like(a.sizes().equals(s) ? a : b, s, out_dtype, a.device());
  }
  TensorIter it = TensorIter::build(out, {pa, pb});
  stub[a.device()](it, compute, args);
  return out;
}

Tensor unary_op(const DispatchStub<ElementwiseFn>& stub, const Tensor& x, DType compute,
                DType out_dtype, OpArgs args) {
  const Tensor cx = cast(x, compute);
  Tensor out = make_tensor_like(x, x.sizes(), out_dtype, x.device());
  TensorIter it = TensorIter::build(out, {&cx});
  stub[x.device()](it, compute, args);
  return out;
}

void inplace_op(const DispatchStub<ElementwiseFn>& stub, Tensor& self, const Tensor& other,
                DType compute, OpArgs args) {
  // PyTorch's can_cast: no float -> integer, no number -> bool.
  IGNIS_CHECK(dtype_category(compute) <= dtype_category(self.dtype()), stub.op, "_: result type ",
              compute, " can't be cast to the desired output type ", self.dtype());
  Tensor cs = self;
  if (compute != self.dtype()) cs = cast(self, compute);
  if (other.defined() && other.device() != self.device() && other.dim() == 0) {
    inplace_op(stub, self, to_operand_device(other, self.device()), compute, args);
    return;
  }
  if (other.defined()) {
    IGNIS_CHECK(other.device() == self.device(), stub.op,
                "_: expected both tensors on the same "
                "device, but got ",
                self.device().str(), " and ", other.device().str());
    Shape s;
    try {
      s = broadcast_shapes(self.sizes(), other.sizes());
    } catch (const Error&) {
      IGNIS_FAIL(stub.op, "_: shapes ", self.sizes(), " and ", other.sizes(),
                 " cannot be broadcast");
    }
    IGNIS_CHECK(IntArrayRef(s).equals(self.sizes()), stub.op, "_: output with shape ", self.sizes(),
                " doesn't match the broadcast shape ", s);
  }
  const Tensor co = other.defined() ? cast(other, compute) : Tensor();
  if (compute == self.dtype()) {
    TensorIter it =
        other.defined() ? TensorIter::build(self, {&cs, &co}) : TensorIter::build(self, {&cs});
    stub[self.device()](it, compute, args);
  } else {
    Tensor tmp = make_tensor_like(self, self.sizes(), compute, self.device());
    TensorIter it =
        other.defined() ? TensorIter::build(tmp, {&cs, &co}) : TensorIter::build(tmp, {&cs});
    stub[self.device()](it, compute, args);
    copy_into(self, tmp);
  }
  self.impl()->bump_version();
}

void check_inplace(const Tensor& self, const char* op) {
  AutogradMeta* m = self.autograd_meta();
  if (m == nullptr || !is_grad_enabled()) return;
  IGNIS_CHECK(!(m->requires_grad && !m->grad_fn), op,
              ": a leaf tensor that requires grad is "
              "being used in an in-place operation; wrap it in NoGradGuard or use an "
              "out-of-place op");
  IGNIS_CHECK(!m->is_view, op,
              ": in-place operation on a view of a tensor that requires grad "
              "is not supported; clone() the view first");
}

Tensor& inplace_from(Tensor& self, const Tensor& result, const char* op) {
  check_inplace(self, op);
  IGNIS_CHECK(result.sizes().equals(self.sizes()), op, ": output with shape ", self.sizes(),
              " doesn't match the broadcast shape ", result.sizes());
  {
    NoGradGuard ng;
    copy_into(self, result);
  }
  self.impl()->bump_version();
  if (AutogradMeta* rm = result.autograd_meta(); rm && rm->grad_fn) {
    auto& m = self.impl()->ensure_autograd();
    m.requires_grad = true;
    m.grad_fn = rm->grad_fn;
    m.output_nr = rm->output_nr;
  }
  return self;
}

}  // namespace ignis
