// Tensor's metadata and autograd accessors. Op methods forward to the free functions
// (core/tensor_methods.cpp).
#include <algorithm>

#include "autograd/accumulate_grad.h"
#include "autograd/node.h"
#include "core/tensor_impl.h"
#include "core/warn_once.h"
#include "cuda/backend.h"
#include "ignis/ops.h"
#include "jit/host_read.h"

namespace ignis {

namespace {
const Tensor& undefined_tensor() {
  static const Tensor t;
  return t;
}
void check_defined(const Tensor& t, const char* what) {
  IGNIS_CHECK(t.defined(), what, ": called on an undefined tensor");
}
}  // namespace

int64_t Tensor::dim() const {
  check_defined(*this, "dim");
  return impl_->dim();
}
IntArrayRef Tensor::sizes() const {
  check_defined(*this, "sizes");
  return impl_->sizes();
}
IntArrayRef Tensor::strides() const {
  check_defined(*this, "strides");
  return impl_->strides();
}
int64_t Tensor::size(int64_t d) const { return sizes()[wrap_dim(d, dim(), "size")]; }
int64_t Tensor::stride(int64_t d) const { return strides()[wrap_dim(d, dim(), "stride")]; }
int64_t Tensor::numel() const {
  check_defined(*this, "numel");
  return impl_->numel();
}
int64_t Tensor::storage_offset() const { return impl_->offset(); }
DType Tensor::dtype() const {
  check_defined(*this, "dtype");
  return impl_->dtype();
}
Device Tensor::device() const {
  check_defined(*this, "device");
  return impl_->device();
}
bool Tensor::is_contiguous() const {
  check_defined(*this, "is_contiguous");
  return impl_->is_contiguous();
}
bool Tensor::is_contiguous(MemoryFormat format) const {
  check_defined(*this, "is_contiguous");
  if (format == MemoryFormat::Contiguous) return impl_->is_contiguous();
  if (impl_->dim() != 4) return false;
  const IntArrayRef sz = impl_->sizes(), st = impl_->strides();
  int64_t expected = 1;
  for (int64_t d : {1, 3, 2, 0}) {
    if (sz[d] == 1) continue;
    if (st[d] != expected) return numel() == 0;
    expected *= sz[d];
  }
  return true;
}

MemoryFormat Tensor::suggest_memory_format() const {
  check_defined(*this, "suggest_memory_format");
  if (impl_->dim() == 4 && is_contiguous(MemoryFormat::ChannelsLast) &&
      (!impl_->is_contiguous() || impl_->strides()[1] < impl_->strides()[2])) {
    return MemoryFormat::ChannelsLast;
  }
  return MemoryFormat::Contiguous;
}

void* Tensor::data_ptr() const {
  check_defined(*this, "data_ptr");
  IGNIS_CHECK(!device().is_meta(), "data_ptr: a meta tensor (shape ", sizes(), ", ", dtype(),
              ") has no data to read or write");
  jit::detail::notify_host_read(*this, "data_ptr");
  return impl_->data();
}
uint32_t Tensor::_version() const { return impl_->version(); }
AutogradMeta* Tensor::autograd_meta() const { return impl_ ? impl_->autograd() : nullptr; }

Scalar Tensor::item() const {
  check_defined(*this, "item");
  IGNIS_CHECK(numel() == 1, "item: a tensor with ", numel(), " elements (shape ", sizes(),
              ") cannot be converted to a scalar");
  IGNIS_CHECK(!device().is_meta(), "item: a meta tensor has no value to read (shape ", sizes(),
              ", ", dtype(), ")");
  jit::detail::notify_host_read(*this, "item");
  if (device().is_cuda()) return detach().to(kCPU).item();  // waits for the value
  const char* p = impl_->data();
  switch (dtype()) {
    case DType::Bool: return Scalar(*reinterpret_cast<const bool*>(p));
    case DType::UInt8: return Scalar(static_cast<int64_t>(*reinterpret_cast<const uint8_t*>(p)));
    case DType::Int32: return Scalar(static_cast<int64_t>(*reinterpret_cast<const int32_t*>(p)));
    case DType::Int64: return Scalar(*reinterpret_cast<const int64_t*>(p));
    case DType::BFloat16: return Scalar(static_cast<double>(*reinterpret_cast<const BFloat16*>(p)));
    case DType::Float32: return Scalar(static_cast<double>(*reinterpret_cast<const float*>(p)));
    case DType::Float64: return Scalar(*reinterpret_cast<const double*>(p));
  }
  return Scalar();
}

Tensor Tensor::pin_memory() const {
  check_defined(*this, "pin_memory");
  IGNIS_CHECK(device().is_cpu(), "pin_memory: only CPU tensors can be pinned, got a tensor on ",
              device().str());
  return is_pinned() ? *this : cuda::detail::pin_memory(*this);
}
bool Tensor::is_pinned() const {
  return defined() && device().is_cpu() && cuda::detail::is_pinned(*this);
}
void Tensor::record_stream(const cuda::Stream& stream) const {
  check_defined(*this, "record_stream");
  IGNIS_CHECK(device().is_cuda() && device() == stream.device(), "record_stream: the tensor is on ",
              device().str(), " but the stream on ", stream.device().str());
  cuda::detail::record_stream(*this, stream);
}

// ---- autograd accessors

bool Tensor::requires_grad() const {
  AutogradMeta* m = autograd_meta();
  return m != nullptr && m->requires_grad;
}

Tensor& Tensor::requires_grad_(bool r) const {
  check_defined(mut(), "requires_grad_");
  AutogradMeta* m = autograd_meta();
  if (m && m->grad_fn) {
    IGNIS_CHECK(r,
                "requires_grad_: you can only change requires_grad flags of leaf tensors; "
                "use detach() to get a tensor that does not require grad");
    return mut();
  }
  IGNIS_CHECK(!r || is_floating_point(),
              "requires_grad_: only tensors of floating point dtype "
              "can require gradients, but this tensor has dtype ",
              dtype());
  if (r || m) impl_->ensure_autograd().requires_grad = r;
  return mut();
}

bool Tensor::is_leaf() const {
  AutogradMeta* m = autograd_meta();
  return m == nullptr || !m->grad_fn;
}

const Tensor& Tensor::grad() const {
  AutogradMeta* m = autograd_meta();
  if (m == nullptr) return undefined_tensor();
  if (m->grad_fn && !m->retains_grad && !m->grad.defined()) {
    IGNIS_WARN_ONCE("grad: reading .grad() of a tensor that is not a leaf (it has a grad_fn, ",
                    m->grad_fn->name(),
                    "); backward() does not fill it. Call retain_grad() on "
                    "it before backward() to keep its gradient, or read a leaf's .grad().");
  }
  return m->grad;
}

Tensor& Tensor::mutable_grad() const { return impl_->ensure_autograd().grad; }

void Tensor::set_grad(const Tensor& g) const {
  if (g.defined()) {
    IGNIS_CHECK(g.sizes().equals(sizes()), "set_grad: gradient of shape ", g.sizes(),
                " does not match the tensor's shape ", sizes());
    IGNIS_CHECK(g.dtype() == dtype(), "set_grad: gradient of dtype ", g.dtype(),
                " does not match the tensor's dtype ", dtype());
  }
  impl_->ensure_autograd().grad = g;
}

std::shared_ptr<autograd::Node> Tensor::grad_fn() const {
  AutogradMeta* m = autograd_meta();
  return m ? m->grad_fn : nullptr;
}

int64_t Tensor::output_nr() const {
  AutogradMeta* m = autograd_meta();
  return m ? m->output_nr : 0;
}

void Tensor::retain_grad() const {
  IGNIS_CHECK(requires_grad(),
              "retain_grad: can't retain_grad on a tensor that has "
              "requires_grad=false");
  if (is_leaf()) return;  // leaves keep their gradient anyway
  AutogradMeta* m = autograd_meta();
  if (m->retains_grad) return;
  m->retains_grad = true;
  m->grad_fn->retained.emplace_back(m->output_nr, impl_);
}

bool Tensor::retains_grad() const {
  AutogradMeta* m = autograd_meta();
  return m != nullptr && m->retains_grad;
}

void Tensor::backward(const Tensor& gradient, std::optional<bool> retain_graph,
                      bool create_graph) const {
  autograd::backward({*this}, gradient.defined() ? TensorList{gradient} : TensorList{},
                     retain_graph, create_graph);
}

namespace {
size_t next_hook_handle() {
  static std::atomic<size_t> h{1};
  return h++;
}
}  // namespace

size_t Tensor::register_hook(GradHook hook) const {
  IGNIS_CHECK(requires_grad(),
              "register_hook: cannot register a hook on a tensor that doesn't "
              "require gradient");
  size_t h = next_hook_handle();
  AutogradMeta* m = autograd_meta();
  if (m->grad_fn) {
    m->grad_fn->pre_hooks.push_back({h, m->output_nr, std::move(hook)});
  } else {
    m->hooks.emplace_back(h, std::move(hook));
  }
  return h;
}

size_t Tensor::register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const {
  IGNIS_CHECK(requires_grad() && is_leaf(),
              "register_post_accumulate_grad_hook: post accumulate "
              "grad hooks can only be registered on leaf tensors that require grad");
  autograd::Edge e = autograd::gradient_edge(*this);  // the leaf's AccumulateGrad, kept by it
  size_t h = next_hook_handle();
  static_cast<autograd::AccumulateGrad*>(e.fn.get())->post_hooks.emplace_back(h, std::move(hook));
  return h;
}

void Tensor::remove_hook(size_t handle) const {
  AutogradMeta* m = autograd_meta();
  if (m == nullptr) return;
  if (m->grad_accumulator) {
    auto& post = static_cast<autograd::AccumulateGrad*>(m->grad_accumulator.get())->post_hooks;
    std::erase_if(post, [&](const auto& p) { return p.first == handle; });
  }
  auto& leaf = m->hooks;
  leaf.erase(
      std::remove_if(leaf.begin(), leaf.end(), [&](const auto& p) { return p.first == handle; }),
      leaf.end());
  if (m->grad_fn) {
    auto& pre = m->grad_fn->pre_hooks;
    pre.erase(
        std::remove_if(pre.begin(), pre.end(), [&](const auto& p) { return p.handle == handle; }),
        pre.end());
  }
}

Tensor Tensor::detach() const {
  check_defined(*this, "detach");
  return make_view(*this, impl_->sizes().shape(), impl_->strides().shape(), impl_->offset());
}

void Tensor::set_data(const Tensor& d) const {
  check_defined(*this, "set_data");
  check_defined(d, "set_data");
  TensorImpl* src = d.impl();
  impl_->set_data(src->storage(), src->sizes().shape(), src->strides().shape(), src->offset(),
                  src->dtype());
}

Tensor& Tensor::detach_() const {
  AutogradMeta* m = autograd_meta();
  IGNIS_CHECK(m == nullptr || !m->is_view, "detach_: can't detach a view in place; use detach()");
  impl_->reset_autograd();
  return mut();
}

}  // namespace ignis
