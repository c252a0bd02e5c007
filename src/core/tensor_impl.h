// TensorImpl, StorageImpl and AutogradMeta: what a Tensor handle points to. Private to src/.
#pragma once

#include <atomic>
#include <functional>
#include <memory>
#include <vector>

#include "ignis/detail/object_pool.h"
#include "ignis/allocator.h"
#include "ignis/tensor.h"

namespace ignis {

/// Typed-agnostic bytes on a device. Views share one StorageImpl; its version counter is bumped
/// by every in-place write, so autograd can detect saved tensors modified after being saved.
struct StorageImpl {
  void* data = nullptr;
  size_t nbytes = 0;
  Device device;
  Allocator* allocator = nullptr;              // owns data when set
  std::function<void(void*)> deleter;          // from_blob's deleter
  std::atomic<uint32_t> version{0};

  StorageImpl(size_t n, Device d);             // allocates from the device's allocator
  StorageImpl(void* p, size_t n, Device d, std::function<void(void*)> del);  // wraps memory
  ~StorageImpl();
  StorageImpl(const StorageImpl&) = delete;
  StorageImpl& operator=(const StorageImpl&) = delete;
};

namespace detail {
/// Where CPU storages of more than kHookMinBytes made on this thread allocate: graph mode's
/// planned arena (src/jit/planned_arena.h) sets it around each node it runs, with the node's
/// index; the arena numbers the node's allocations in `seq`. Null: the device's allocator.
struct StorageHook {
  Allocator* allocator;
  int node;
  int seq;
};
constexpr size_t kHookMinBytes = 4096;  // smaller blocks stay in the allocator's per-thread cache
extern thread_local constinit StorageHook tls_storage_hook
    __attribute__((tls_model("initial-exec")));
}  // namespace detail

namespace autograd {
class Node;
}

/// Autograd state of a tensor, allocated only for tensors that take part in autograd.
struct AutogradMeta : pool::Pooled {
  bool requires_grad = false;
  bool retains_grad = false;
  Tensor grad;
  std::shared_ptr<autograd::Node> grad_fn;  // null for leaves
  // Leaves: the AccumulateGrad node, created on first use and kept (it refers back to the leaf
  // weakly), so that recording an op on a leaf does not create and free one every time.
  std::shared_ptr<autograd::Node> grad_accumulator;
  uint32_t output_nr = 0;
  std::vector<std::pair<size_t, GradHook>> hooks;  // leaf hooks (non-leaf hooks live on grad_fn)
  bool is_view = false;  // a view of a tensor that requires grad (in-place ops on it are refused)
};

class TensorImpl {
 public:
  TensorImpl(std::shared_ptr<StorageImpl> storage, Shape sizes, Shape strides, int64_t offset,
             DType dtype);
  /// A new contiguous tensor of `numel` elements (make_tensor): row-major strides, no scan.
  struct Contiguous {};
  TensorImpl(Contiguous, std::shared_ptr<StorageImpl> storage, IntArrayRef sizes, int64_t numel,
             DType dtype);

  IntArrayRef sizes() const { return sizes_; }
  IntArrayRef strides() const { return strides_; }
  int64_t dim() const { return static_cast<int64_t>(sizes_.size()); }
  int64_t numel() const { return numel_; }
  int64_t offset() const { return offset_; }
  DType dtype() const { return dtype_; }
  Device device() const { return storage_->device; }
  const std::shared_ptr<StorageImpl>& storage() const { return storage_; }
  bool is_contiguous() const { return contiguous_; }
  char* data() const {
    return static_cast<char*>(storage_->data) + offset_ * static_cast<int64_t>(element_size(dtype_));
  }
  void bump_version() { storage_->version.fetch_add(1, std::memory_order_relaxed); }
  uint32_t version() const { return storage_->version.load(std::memory_order_relaxed); }

  /// Points this tensor at other storage (Tensor::set_data).
  void set_data(std::shared_ptr<StorageImpl> storage, Shape sizes, Shape strides, int64_t offset,
                DType dtype) {
    storage_ = std::move(storage);
    dtype_ = dtype;
    set_geometry(std::move(sizes), std::move(strides), offset);
  }
  /// Replaces the view geometry (used by in-place view ops such as detach_ and squeeze_).
  void set_geometry(Shape sizes, Shape strides, int64_t offset);

  AutogradMeta* autograd() const { return autograd_.get(); }
  AutogradMeta& ensure_autograd() {
    if (!autograd_) autograd_ = std::make_unique<AutogradMeta>();
    return *autograd_;
  }
  void reset_autograd() { autograd_.reset(); }

 private:
  void refresh();
  std::shared_ptr<StorageImpl> storage_;
  Shape sizes_, strides_;
  int64_t offset_ = 0;
  int64_t numel_ = 1;
  DType dtype_;
  bool contiguous_ = true;
  std::unique_ptr<AutogradMeta> autograd_;
};

// ---- helpers shared by the op implementations

/// Row-major strides of a shape.
Shape contiguous_strides(IntArrayRef sizes);
/// Product of sizes (checks overflow).
int64_t shape_numel(IntArrayRef sizes, const char* op = "tensor");
/// Wraps a possibly negative dim into [0, ndim); throws naming the op otherwise.
int64_t wrap_dim(int64_t dim, int64_t ndim, const char* op);
/// A new contiguous tensor with uninitialised data.
Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device = kCPU);
/// A new tensor with uninitialised data in `format` (ChannelsLast: 4-d, NHWC in memory).
Tensor make_tensor(IntArrayRef sizes, DType dtype, Device device, MemoryFormat format);
/// True when t is channels-last and not also contiguous (size-1 dims can make it both): the
/// tensors that NHWC kernels must read as NHWC and results must stay laid out as.
bool is_channels_last(const Tensor& t);
/// A new tensor of `sizes` laid out like `layout` when that is a channels-last tensor of the
/// same sizes (elementwise results keep their inputs' layout), else contiguous.
Tensor make_tensor_like(const Tensor& layout, IntArrayRef sizes, DType dtype, Device device);
/// The strides of a channels-last (NHWC in memory) tensor of NCHW sizes.
Shape channels_last_strides(IntArrayRef sizes);
/// A view of `base` with another geometry (shares storage; no autograd).
Tensor make_view(const Tensor& base, Shape sizes, Shape strides, int64_t offset);
/// True when x requires grad and grad mode is on.
bool needs_grad(const Tensor& x);
std::string shape_str(IntArrayRef s);

}  // namespace ignis
