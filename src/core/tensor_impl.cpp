// TensorImpl and StorageImpl, plus the geometry helpers shared by ops.
#include "core/tensor_impl.h"

#include <sstream>

#include "ignis/autograd.h"

namespace ignis {

namespace detail {
thread_local constinit StorageHook tls_storage_hook __attribute__((tls_model("initial-exec"))) = {};
}

StorageImpl::StorageImpl(size_t n, Device d) : nbytes(n), device(d) {
  Allocator* hook = detail::tls_storage_hook.allocator;
  allocator = hook != nullptr && n > detail::kHookMinBytes && d.is_cpu() ? hook : &allocator_for(d);
  data = allocator->allocate(n, d);
}

StorageImpl::StorageImpl(void* p, size_t n, Device d, std::function<void(void*)> del)
    : data(p), nbytes(n), device(d), deleter(std::move(del)) {}

StorageImpl::~StorageImpl() {
  if (allocator != nullptr) {
    allocator->deallocate(data, nbytes, device);
  } else if (deleter) {
    deleter(data);
  }
}

namespace {
// Row-major strides into `st`; false when they do not fit in int64. Empty dims count as 1, so
// a shape such as [0, 2^32 - 1, 2^32 - 1] (no elements) still has unrepresentable strides.
bool checked_contiguous_strides(IntArrayRef sizes, Shape& st) {
  st.resize(sizes.size());
  int64_t acc = 1;
  for (size_t i = sizes.size(); i-- > 0;) {
    st[i] = acc;
    if (__builtin_mul_overflow(acc, std::max<int64_t>(sizes[i], 1), &acc)) return false;
  }
  return true;
}

// The product of max(size, 1) over the dims fits in int64: the same condition, without strides.
bool strides_fit(IntArrayRef sizes) {
  int64_t acc = 1;
  for (int64_t s : sizes) {
    if (__builtin_mul_overflow(acc, std::max<int64_t>(s, 1), &acc)) return false;
  }
  return true;
}
}  // namespace

TensorImpl::TensorImpl(std::shared_ptr<StorageImpl> storage, Shape sizes, Shape strides,
                       int64_t offset, DType dtype)
    : storage_(std::move(storage)),
      sizes_(std::move(sizes)),
      strides_(std::move(strides)),
      offset_(offset),
      dtype_(dtype) {
  refresh();
}

TensorImpl::TensorImpl(Contiguous, std::shared_ptr<StorageImpl> storage, IntArrayRef sizes,
                       int64_t numel, DType dtype)
    : storage_(std::move(storage)), sizes_(sizes.begin(), sizes.end()), numel_(numel),
      dtype_(dtype) {
  checked_contiguous_strides(sizes, strides_);  // make_tensor checked that they fit
}

void TensorImpl::set_geometry(Shape sizes, Shape strides, int64_t offset) {
  sizes_ = std::move(sizes);
  strides_ = std::move(strides);
  offset_ = offset;
  refresh();
}

void TensorImpl::refresh() {
  numel_ = 1;
  for (int64_t s : sizes_) {
    // A view's sizes come from an op that checked them; an overflow here is still an error,
    // never undefined behaviour.
    IGNIS_CHECK(!__builtin_mul_overflow(numel_, s, &numel_), "tensor: shape ", sizes_,
                " has too many elements (int64 overflow)");
  }
  contiguous_ = true;
  int64_t expected = 1;
  for (size_t i = sizes_.size(); i-- > 0;) {
    if (sizes_[i] == 1) continue;
    if (strides_[i] != expected) {
      contiguous_ = false;
      break;
    }
    expected *= sizes_[i];
  }
  if (numel_ == 0) contiguous_ = true;
}

Shape contiguous_strides(IntArrayRef sizes) {
  Shape st;
  IGNIS_CHECK(checked_contiguous_strides(sizes, st), "tensor: shape ", sizes,
              " is too large: its contiguous strides overflow int64");
  return st;
}

int64_t shape_numel(IntArrayRef sizes, const char* op) {
  int64_t n = 1;
  for (int64_t s : sizes) {
    IGNIS_CHECK(s >= 0, op, ": negative dimension in shape ", sizes);
    IGNIS_CHECK(!__builtin_mul_overflow(n, s, &n), op, ": shape ", sizes,
                " has too many elements (int64 overflow)");
  }
  return n;
}

int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op) {
  int64_t n = std::max<int64_t>(ndim, 1);  // a 0-d tensor accepts dim 0 and -1
  IGNIS_CHECK(dim >= -n && dim < n, op, ": dimension ", dim, " out of range for a ", ndim,
              "-d tensor (expected to be in [", -n, ", ", n - 1, "])");
  return dim < 0 ? dim + n : dim;
}

Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device) {
  int64_t n = shape_numel(sizes, "empty");
  // Checked before allocating: the byte size must fit in int64 (the allocator rounds it up)
  // and the strides must be representable, even for a shape with no elements.
  int64_t bytes;
  IGNIS_CHECK(!__builtin_mul_overflow(n, static_cast<int64_t>(element_size(dtype)), &bytes) &&
                  strides_fit(sizes),
              "empty: shape ", sizes, " of ", dtype, " is too large (", n,
              " elements; its byte size or strides overflow int64)");
  // Both objects, each with its shared_ptr control block, come from the thread's object pool.
  auto storage = std::allocate_shared<StorageImpl>(pool::Allocator<StorageImpl>(),
                                                   static_cast<size_t>(bytes), device);
  return Tensor(std::allocate_shared<TensorImpl>(pool::Allocator<TensorImpl>(),
                                                 TensorImpl::Contiguous{}, std::move(storage),
                                                 sizes, n, dtype));
}

Shape channels_last_strides(IntArrayRef sizes) {
  IGNIS_CHECK(sizes.size() == 4, "channels_last: expected a 4-d shape [N, C, H, W], but got ",
              sizes);
  const int64_t c = std::max<int64_t>(sizes[1], 1), w = std::max<int64_t>(sizes[3], 1);
  const int64_t h = std::max<int64_t>(sizes[2], 1), n = std::max<int64_t>(sizes[0], 1);
  int64_t wc, hwc, nhwc;
  IGNIS_CHECK(!__builtin_mul_overflow(w, c, &wc) && !__builtin_mul_overflow(h, wc, &hwc) &&
                  !__builtin_mul_overflow(n, hwc, &nhwc),
              "channels_last: shape ", sizes, " is too large: its strides overflow int64");
  return Shape{hwc, 1, wc, c};
}

Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device, MemoryFormat format) {
  if (format == MemoryFormat::Contiguous) return make_tensor(sizes, dtype, device);
  Shape strides = channels_last_strides(sizes);
  Tensor t = make_tensor({shape_numel(sizes, "empty")}, dtype, device);
  return make_view(t, Shape(sizes.begin(), sizes.end()), std::move(strides), 0);
}

bool is_channels_last(const Tensor& t) {
  const TensorImpl* i = t.impl();
  return i != nullptr && !i->is_contiguous() && i->dim() == 4 &&
         t.suggest_memory_format() == MemoryFormat::ChannelsLast;
}

Tensor make_tensor_like(const Tensor& layout, IntArrayRef sizes, DType dtype, Device device) {
  if (is_channels_last(layout) && layout.sizes().equals(sizes)) {
    return make_tensor(sizes, dtype, device, MemoryFormat::ChannelsLast);
  }
  return make_tensor(sizes, dtype, device);
}

Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset) {
  return Tensor(std::allocate_shared<TensorImpl>(pool::Allocator<TensorImpl>(),
                                                 base.impl()->storage(), std::move(sizes),
                                                 std::move(strides), offset, base.dtype()));
}

bool needs_grad(const Tensor& x) {
  return x.defined() && x.requires_grad() && is_grad_enabled();
}

std::string shape_str(IntArrayRef s) {
  std::ostringstream os;
  os << s;
  return os.str();
}

Device::Device(const std::string& spec) {
  if (spec == "cpu") {
    type = DeviceType::CPU;
    index = 0;
    return;
  }
  if (spec == "meta") {
    type = DeviceType::Meta;
    index = 0;
    return;
  }
  if (spec.rfind("cuda", 0) == 0) {
    type = DeviceType::CUDA;
    index = 0;
    if (spec.size() > 4) {
      IGNIS_CHECK(spec[4] == ':' && spec.size() > 5, "Device: invalid device string '", spec, "'");
      try {
        size_t used = 0;
        index = std::stoi(spec.substr(5), &used);
        IGNIS_CHECK(used == spec.size() - 5 && index >= 0, "Device: invalid device string '",
                    spec, "'");
      } catch (const std::logic_error&) {
        IGNIS_FAIL("Device: invalid device string '", spec, "'");
      }
    }
    return;
  }
  IGNIS_FAIL("Device: invalid device string '", spec, "' (expected cpu, cuda, cuda:N or meta)");
}

std::string Device::str() const {
  if (is_meta()) return "meta";
  return is_cpu() ? "cpu" : "cuda:" + std::to_string(index);
}


}  // namespace ignis
