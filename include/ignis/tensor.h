// Tensor: a strided view of typed storage on a device, with an optional autograd history.
#pragma once

#include <concepts>
#include <functional>
#include <memory>
#include <optional>
#include <ostream>
#include <string>
#include <type_traits>
#include <vector>

#include "ignis/device.h"
#include "ignis/dtype.h"
#include "ignis/error.h"
#include "ignis/scalar.h"
#include "ignis/small_vector.h"

namespace ignis {

class TensorImpl;
class Tensor;
using TensorList = std::vector<Tensor>;

namespace cuda {
class Stream;
}
namespace autograd {
class Node;
}

/// How to create a tensor: dtype, device and requires_grad, chained like LibTorch's options:
/// `zeros({2, 2}, TensorOptions().dtype(kFloat64).requires_grad(true))` or `zeros({2}, kInt64)`.
class TensorOptions {
 public:
  TensorOptions() = default;
  TensorOptions(DType d) : dtype_(d) {}    // NOLINT: implicit
  TensorOptions(Device d) : device_(d) {}  // NOLINT: implicit
  TensorOptions dtype(DType d) const {
    auto o = *this;
    o.dtype_ = d;
    return o;
  }
  TensorOptions device(Device d) const {
    auto o = *this;
    o.device_ = d;
    return o;
  }
  TensorOptions requires_grad(bool r) const {
    auto o = *this;
    o.requires_grad_ = r;
    return o;
  }
  DType dtype() const { return dtype_.value_or(default_dtype()); }
  bool has_dtype() const { return dtype_.has_value(); }
  Device device() const { return device_; }
  bool requires_grad() const { return requires_grad_; }

 private:
  std::optional<DType> dtype_;
  Device device_ = kCPU;
  bool requires_grad_ = false;
};

/// LibTorch's option factories: `ones({2}, dtype(kFloat64).requires_grad(true))`,
/// `ones({2}, requires_grad())`.
inline TensorOptions dtype(DType d) { return TensorOptions(d); }
inline TensorOptions device(Device d) { return TensorOptions(d); }
inline TensorOptions requires_grad(bool r = true) { return TensorOptions().requires_grad(r); }

/// A hook on a tensor's gradient: may return a replacement gradient, or an undefined Tensor to
/// keep it.
using GradHook = std::function<Tensor(const Tensor&)>;

/// Elements of `x.index({...})`: an integer, a Slice, None (new axis), Ellipsis, or an integer or
/// boolean Tensor.
struct NoneIndex {};
struct EllipsisIndex {};
constexpr NoneIndex None{};
constexpr EllipsisIndex Ellipsis{};
/// A bound of a Slice: an integer, or None / std::nullopt for "from the start" / "to the end",
/// so that LibTorch's `Slice(None, 2)` and `Slice(1)` both read as in LibTorch.
struct SliceBound {
  std::optional<int64_t> value;
  SliceBound() = default;
  SliceBound(int64_t v) : value(v) {}                 // NOLINT: implicit
  SliceBound(int v) : value(v) {}                     // NOLINT: implicit
  SliceBound(std::optional<int64_t> v) : value(v) {}  // NOLINT: implicit
  SliceBound(std::nullopt_t) {}                       // NOLINT: implicit
  SliceBound(NoneIndex) {}                            // NOLINT: implicit
};
struct Slice {
  std::optional<int64_t> start, stop;
  int64_t step = 1;
  Slice(SliceBound start_ = {}, SliceBound stop_ = {}, int64_t step_ = 1)
      : start(start_.value), stop(stop_.value), step(step_) {}
};
class TensorIndex;

/// How a 4-d [N, C, H, W] tensor lies in memory, as PyTorch's torch.memory_format: Contiguous
/// (row-major NCHW) or ChannelsLast (NHWC: strides C*H*W, 1, W*C, C). The logical shape is NCHW
/// either way; convolutions and pooling keep channels-last inputs channels-last (oneDNN's
/// kernels then need no layout reorders), and elementwise ops keep their input's layout.
enum class MemoryFormat { Contiguous, ChannelsLast };

/// The tensor handle. Copies share the same tensor (like LibTorch's at::Tensor); views share
/// storage. Every op is also a free function in `ignis/ops.h`.
class Tensor {
 public:
  Tensor() = default;
  explicit Tensor(std::shared_ptr<TensorImpl> impl) : impl_(std::move(impl)) {}

  bool defined() const { return impl_ != nullptr; }
  TensorImpl* impl() const { return impl_.get(); }
  const std::shared_ptr<TensorImpl>& impl_ptr() const { return impl_; }
  bool is_same(const Tensor& o) const { return impl_ == o.impl_; }

  // ---- metadata
  int64_t dim() const;
  int64_t ndimension() const { return dim(); }
  IntArrayRef sizes() const;
  IntArrayRef strides() const;
  int64_t size(int64_t d) const;
  int64_t stride(int64_t d) const;
  int64_t numel() const;
  int64_t storage_offset() const;
  DType dtype() const;
  DType scalar_type() const { return dtype(); }
  Device device() const;
  size_t element_size() const { return ignis::element_size(dtype()); }
  size_t nbytes() const { return static_cast<size_t>(numel()) * element_size(); }
  bool is_contiguous() const;
  /// Dense in `format`'s order (size-1 dims' strides ignored). ChannelsLast needs 4 dims.
  bool is_contiguous(MemoryFormat format) const;
  /// The layout this tensor's strides follow: ChannelsLast for a 4-d tensor dense in NHWC order
  /// whose channel stride is below its row stride, else Contiguous.
  MemoryFormat suggest_memory_format() const;
  bool is_floating_point() const { return ignis::is_floating_point(dtype()); }
  TensorOptions options() const { return TensorOptions(dtype()).device(device()); }
  /// Pointer to the first element. The typed form checks the dtype.
  void* data_ptr() const;
  template <class T>
  T* data_ptr() const {
    IGNIS_CHECK(dtype_of_v<T> == dtype(), "data_ptr: tensor has dtype ", dtype(),
                " but the requested element type is ", dtype_of_v<T>);
    return static_cast<T*>(data_ptr());
  }
  /// The value of a one-element tensor.
  Scalar item() const;
  template <class T>
  T item() const {
    return item().to<T>();
  }
  /// Storage version, bumped by every in-place write (autograd checks it on saved tensors).
  uint32_t _version() const;

  // ---- autograd
  bool requires_grad() const;
  Tensor& requires_grad_(bool r = true) const;
  Tensor& set_requires_grad(bool r) const { return requires_grad_(r); }
  bool is_leaf() const;
  /// The gradient accumulated by backward (undefined until then).
  const Tensor& grad() const;
  Tensor& mutable_grad() const;
  void set_grad(const Tensor& g) const;
  std::shared_ptr<autograd::Node> grad_fn() const;
  int64_t output_nr() const;
  void retain_grad() const;
  bool retains_grad() const;
  /// With create_graph, each leaf's .grad() is a graph that may save the leaf itself (a reference
  /// cycle, as in PyTorch): reset the leaves' grads (mutable_grad() = Tensor()) when done, or
  /// prefer autograd::grad, which leaves .grad() alone.
  void backward(const Tensor& gradient = Tensor(), std::optional<bool> retain_graph = std::nullopt,
                bool create_graph = false) const;
  /// Registers a hook called with this tensor's gradient during backward; returns its handle.
  size_t register_hook(GradHook hook) const;
  /// Any callable taking the gradient: returning a Tensor replaces it, returning void observes.
  template <class F>
  size_t register_hook(F&& hook) const {
    if constexpr (std::is_void_v<std::invoke_result_t<F&, const Tensor&>>) {
      return register_hook(GradHook([f = std::forward<F>(hook)](const Tensor& g) mutable {
        f(g);
        return Tensor();
      }));
    } else {
      return register_hook(GradHook(std::forward<F>(hook)));
    }
  }
  /// Registers a hook called with this leaf after its gradient was accumulated into .grad()
  /// (PyTorch's register_post_accumulate_grad_hook); returns a handle for remove_hook.
  size_t register_post_accumulate_grad_hook(std::function<void(const Tensor&)> hook) const;
  void remove_hook(size_t handle) const;
  Tensor detach() const;
  Tensor& detach_() const;
  /// Makes this tensor use new_data's storage, shape and dtype, keeping its identity and autograd
  /// flags (what Module::to and optimizers rely on; PyTorch's `param.data = ...`).
  void set_data(const Tensor& new_data) const;
  /// Internal: the autograd record of this tensor (nullptr when it has none).
  struct AutogradMeta* autograd_meta() const;

  // ---- conversion and copies
  // LibTorch's signatures: `non_blocking` before `copy`. A copy is made when the dtype or device
  // changes, or when `copy` is true; otherwise the result is this tensor. Differentiable (the
  // gradient goes back to this tensor's dtype and device). non_blocking: with the CPU and meta
  // devices every copy has completed when to() returns.
  Tensor to(DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, DType dtype, bool non_blocking = false, bool copy = false) const;
  Tensor to(Device device, bool non_blocking = false, bool copy = false) const {
    return to(device, dtype(), non_blocking, copy);
  }
  Tensor to(const TensorOptions& opts, bool non_blocking = false, bool copy = false) const;
  /// To `other`'s dtype and device.
  Tensor to(const Tensor& other, bool non_blocking = false, bool copy = false) const {
    return to(other.device(), other.dtype(), non_blocking, copy);
  }
  Tensor cpu() const { return to(kCPU); }
  Tensor cuda() const { return to(Device(DeviceType::CUDA, 0)); }
  bool is_cpu() const { return device().is_cpu(); }
  bool is_cuda() const { return device().is_cuda(); }
  bool is_meta() const { return device().is_meta(); }
  /// A copy in page-locked host memory (this tensor when it already is one), from which
  /// `to(Device(kCUDA), non_blocking = true)` returns before the copy ends. Needs a GPU.
  Tensor pin_memory() const;
  /// True when this CPU tensor's storage is page-locked (pin_memory()).
  bool is_pinned() const;
  /// Tells the CUDA caching allocator that work queued on `stream` uses this tensor's memory:
  /// when the tensor dies, its block is reused only after that work has finished.
  void record_stream(const cuda::Stream& stream) const;
  Tensor clone() const;
  Tensor contiguous() const;
  /// This tensor when already dense in `format`, else a copy laid out so (differentiable).
  Tensor contiguous(MemoryFormat format) const;
  Tensor& copy_(const Tensor& src) const;
  /// Between pinned host memory and a GPU, non_blocking = true returns before the copy ends
  /// (synchronize, or an event, before reading the destination or reusing the source).
  Tensor& copy_(const Tensor& src, bool non_blocking) const;

  // ---- views (zero-copy)
  Tensor view(IntArrayRef shape) const;
  Tensor reshape(IntArrayRef shape) const;
  Tensor view_as(const Tensor& o) const { return view(o.sizes()); }
  Tensor reshape_as(const Tensor& o) const { return reshape(o.sizes()); }
  Tensor transpose(int64_t d0, int64_t d1) const;
  Tensor permute(IntArrayRef dims) const;
  Tensor t() const;
  Tensor mT() const;
  Tensor narrow(int64_t dim, int64_t start, int64_t length) const;
  Tensor slice(int64_t dim, std::optional<int64_t> start = std::nullopt,
               std::optional<int64_t> end = std::nullopt, int64_t step = 1) const;
  Tensor select(int64_t dim, int64_t index) const;
  Tensor operator[](int64_t index) const { return select(0, index); }
  Tensor expand(IntArrayRef shape) const;
  Tensor expand_as(const Tensor& o) const { return expand(o.sizes()); }
  Tensor squeeze() const;
  Tensor squeeze(int64_t dim) const;
  Tensor unsqueeze(int64_t dim) const;
  Tensor flatten(int64_t start_dim = 0, int64_t end_dim = -1) const;
  Tensor unflatten(int64_t dim, IntArrayRef sizes) const;
  Tensor as_strided(IntArrayRef sizes, IntArrayRef strides,
                    std::optional<int64_t> storage_offset = std::nullopt) const;

  // ---- indexing
  Tensor index(const std::vector<TensorIndex>& indices) const;
  Tensor& index_put_(const std::vector<TensorIndex>& indices, const Tensor& value) const;
  Tensor& index_put_(const std::vector<TensorIndex>& indices, Scalar value) const;
  /// PyTorch's index_put_ / index_put (the registry ops under the two above): indices[d] indexes
  /// dim d (an undefined tensor leaves it whole; a bool mask covers as many dims as it has);
  /// `accumulate` adds the values, duplicates included, instead of writing them.
  Tensor& index_put_(const std::vector<Tensor>& indices, const Tensor& values,
                     bool accumulate) const;
  Tensor index_put(const std::vector<Tensor>& indices, const Tensor& values,
                   bool accumulate = false) const;
  Tensor index_select(int64_t dim, const Tensor& index) const;
  Tensor gather(int64_t dim, const Tensor& index) const;
  Tensor scatter(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor scatter_add(int64_t dim, const Tensor& index, const Tensor& src) const;
  /// reduce: "sum", "prod", "mean", "amax", "amin" (ignis/scatter.h).
  Tensor scatter_reduce(int64_t dim, const Tensor& index, const Tensor& src,
                        const std::string& reduce, bool include_self = true) const;
  Tensor index_add(int64_t dim, const Tensor& index, const Tensor& source, Scalar alpha = 1) const;
  Tensor masked_fill(const Tensor& mask, Scalar value) const;
  Tensor masked_select(const Tensor& mask) const;
  Tensor& masked_fill_(const Tensor& mask, Scalar value) const;
  Tensor& index_add_(int64_t dim, const Tensor& index, const Tensor& source,
                     Scalar alpha = 1) const;
  Tensor& scatter_(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_add_(int64_t dim, const Tensor& index, const Tensor& src) const;
  Tensor& scatter_reduce_(int64_t dim, const Tensor& index, const Tensor& src,
                          const std::string& reduce, bool include_self = true) const;
  Tensor repeat(IntArrayRef repeats) const;
  Tensor flip(IntArrayRef dims) const;
  Tensor tril(int64_t diagonal = 0) const;
  Tensor triu(int64_t diagonal = 0) const;
  std::vector<Tensor> split(int64_t split_size, int64_t dim = 0) const;
  std::vector<Tensor> chunk(int64_t chunks, int64_t dim = 0) const;

  // ---- elementwise
  Tensor add(const Tensor& o, Scalar alpha = 1) const;
  Tensor add(Scalar o, Scalar alpha = 1) const;
  Tensor sub(const Tensor& o, Scalar alpha = 1) const;
  Tensor sub(Scalar o, Scalar alpha = 1) const;
  Tensor mul(const Tensor& o) const;
  Tensor mul(Scalar o) const;
  Tensor div(const Tensor& o) const;
  Tensor div(Scalar o) const;
  Tensor pow(const Tensor& e) const;
  Tensor pow(Scalar e) const;
  Tensor neg() const;
  Tensor abs() const;
  Tensor relu() const;
  Tensor sign() const;
  Tensor floor() const;
  Tensor ceil() const;
  Tensor round() const;
  Tensor clamp(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor clamp_min(Scalar min) const { return clamp(min, std::nullopt); }
  Tensor clamp_max(Scalar max) const { return clamp(std::nullopt, max); }
  Tensor maximum(const Tensor& o) const;
  Tensor minimum(const Tensor& o) const;
  Tensor eq(const Tensor& o) const;
  Tensor eq(Scalar o) const;
  Tensor ne(const Tensor& o) const;
  Tensor ne(Scalar o) const;
  Tensor lt(const Tensor& o) const;
  Tensor lt(Scalar o) const;
  Tensor le(const Tensor& o) const;
  Tensor le(Scalar o) const;
  Tensor gt(const Tensor& o) const;
  Tensor gt(Scalar o) const;
  Tensor ge(const Tensor& o) const;
  Tensor ge(Scalar o) const;
  Tensor logical_and(const Tensor& o) const;
  Tensor logical_or(const Tensor& o) const;
  Tensor logical_not() const;
  // The floating unary ops (exp, log, sin, tanh, sigmoid, erf, ...) and their in-place forms.
#define IGNIS_FLOAT_UNARY_OP(name, ...) \
  Tensor name() const;                  \
  Tensor& name##_() const;
#include "ignis/float_unary_ops.def"
  // square, trunc, prelu, and atan2, fmod, remainder (ignis/binary_ops.def) with their
  // in-place forms.
  Tensor square() const;
  Tensor& square_() const;
  Tensor trunc() const;
  Tensor& trunc_() const;
  Tensor prelu(const Tensor& weight) const;
#define IGNIS_BINARY_OP(name, ...)        \
  Tensor name(const Tensor& other) const; \
  Tensor& name##_(const Tensor& other) const;
#define IGNIS_BINARY_SCALAR_OP(name, ...) \
  IGNIS_BINARY_OP(name)                   \
  Tensor name(Scalar other) const;        \
  Tensor& name##_(Scalar other) const;
#include "ignis/binary_ops.def"

  // ---- in place (each bumps the version counter)
  Tensor& add_(const Tensor& o, Scalar alpha = 1) const;
  Tensor& add_(Scalar o, Scalar alpha = 1) const;
  Tensor& sub_(const Tensor& o, Scalar alpha = 1) const;
  Tensor& sub_(Scalar o, Scalar alpha = 1) const;
  Tensor& mul_(const Tensor& o) const;
  Tensor& mul_(Scalar o) const;
  Tensor& div_(const Tensor& o) const;
  Tensor& div_(Scalar o) const;
  Tensor& pow_(Scalar e) const;
  Tensor& neg_() const;
  Tensor& relu_() const;
  Tensor& clamp_(std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt) const;
  Tensor& zero_() const;
  Tensor& fill_(Scalar v) const;
  Tensor& uniform_(double from = 0, double to = 1) const;
  Tensor& normal_(double mean = 0, double std = 1) const;

  // ---- reductions (an empty dims list means all dims)
  Tensor sum(std::optional<DType> dtype = std::nullopt) const;
  Tensor sum(IntArrayRef dims, bool keepdim = false,
             std::optional<DType> dtype = std::nullopt) const;
  Tensor mean() const;
  Tensor mean(IntArrayRef dims, bool keepdim = false) const;
  Tensor prod() const;
  Tensor prod(int64_t dim, bool keepdim = false) const;
  Tensor max() const;
  std::tuple<Tensor, Tensor> max(int64_t dim, bool keepdim = false) const;
  Tensor min() const;
  std::tuple<Tensor, Tensor> min(int64_t dim, bool keepdim = false) const;
  Tensor amax(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor amin(IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor argmax(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor argmin(std::optional<int64_t> dim = std::nullopt, bool keepdim = false) const;
  Tensor var(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  Tensor std(IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false) const;
  /// LibTorch's `x.var(/*unbiased=*/false)`: over all elements, correction 1 or 0. (Without
  /// these a bool would convert to a one-dim list and mean "dim 0".) Only a bool argument picks
  /// them: `x.var({0})` and `x.var(1)` stay reductions over that dim.
  template <class B>
  requires std::same_as<B, bool> Tensor var(B unbiased)
  const { return var_all(unbiased); }
  template <class B>
  requires std::same_as<B, bool> Tensor std(B unbiased)
  const { return std_all(unbiased); }
  Tensor norm(double p = 2, IntArrayRef dims = {}, bool keepdim = false) const;
  Tensor logsumexp(IntArrayRef dims, bool keepdim = false) const;
  Tensor softmax(int64_t dim) const;
  Tensor log_softmax(int64_t dim) const;
  Tensor cumsum(int64_t dim) const;
  Tensor all() const;
  Tensor all(int64_t dim, bool keepdim = false) const;
  Tensor any() const;
  Tensor any(int64_t dim, bool keepdim = false) const;
  Tensor sum_to_size(IntArrayRef shape) const;

  // ---- linear algebra
  Tensor matmul(const Tensor& o) const;
  Tensor mm(const Tensor& o) const;
  Tensor bmm(const Tensor& o) const;
  Tensor dot(const Tensor& o) const;
  Tensor outer(const Tensor& o) const;

  // ---- sorting, scans, products and shape ops (ignis/sort.h, einsum.h, shape_extra.h)
  std::tuple<Tensor, Tensor> sort(int64_t dim = -1, bool descending = false) const;
  std::tuple<Tensor, Tensor> sort(std::optional<bool> stable, int64_t dim = -1,
                                  bool descending = false) const;
  Tensor argsort(int64_t dim = -1, bool descending = false) const;
  Tensor argsort(bool stable, int64_t dim, bool descending = false) const;
  std::tuple<Tensor, Tensor> topk(int64_t k, int64_t dim = -1, bool largest = true,
                                  bool sorted = true) const;
  Tensor median() const;
  std::tuple<Tensor, Tensor> median(int64_t dim, bool keepdim = false) const;
  std::tuple<Tensor, Tensor> mode(int64_t dim = -1, bool keepdim = false) const;
  Tensor cumprod(int64_t dim, std::optional<DType> dtype = std::nullopt) const;
  Tensor logcumsumexp(int64_t dim) const;
  Tensor nansum(IntArrayRef dims = {}, bool keepdim = false,
                std::optional<DType> dtype = std::nullopt) const;
  Tensor nanmean(IntArrayRef dims = {}, bool keepdim = false,
                 std::optional<DType> dtype = std::nullopt) const;
  Tensor mv(const Tensor& vec) const;
  Tensor baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta = 1,
                 Scalar alpha = 1) const;
  Tensor index_fill(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor& index_fill_(int64_t dim, const Tensor& index, Scalar value) const;
  Tensor roll(IntArrayRef shifts, IntArrayRef dims = {}) const;
  Tensor tile(IntArrayRef dims) const;
  std::vector<Tensor> unbind(int64_t dim = 0) const;
  Tensor repeat_interleave(int64_t repeats, std::optional<int64_t> dim = std::nullopt,
                           std::optional<int64_t> output_size = std::nullopt) const;
  Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> dim = std::nullopt,
                           std::optional<int64_t> output_size = std::nullopt) const;

  // ---- operators (also free operators below)
  Tensor operator-() const { return neg(); }
  Tensor& operator+=(const Tensor& o) const { return add_(o); }
  Tensor& operator+=(Scalar o) const { return add_(o); }
  Tensor& operator-=(const Tensor& o) const { return sub_(o); }
  Tensor& operator-=(Scalar o) const { return sub_(o); }
  Tensor& operator*=(const Tensor& o) const { return mul_(o); }
  Tensor& operator*=(Scalar o) const { return mul_(o); }
  Tensor& operator/=(const Tensor& o) const { return div_(o); }
  Tensor& operator/=(Scalar o) const { return div_(o); }

  std::string toString() const;

 private:
  // In-place methods are const, as in LibTorch: a Tensor is a handle, and writing through it
  // does not change the handle. They return the handle by non-const reference, so chaining
  // (`t.zero_().add_(1)`) and `Tensor& r = t.add_(1)` read as in LibTorch.
  Tensor& mut() const { return const_cast<Tensor&>(*this); }
  Tensor var_all(bool unbiased) const;
  Tensor std_all(bool unbiased) const;

  std::shared_ptr<TensorImpl> impl_;
};

/// One element of `Tensor::index`.
class TensorIndex {
 public:
  enum class Kind { Integer, Slice, None, Ellipsis, Tensor, Bool };
  TensorIndex(int64_t i) : kind_(Kind::Integer), integer_(i) {}          // NOLINT: implicit
  TensorIndex(int i) : kind_(Kind::Integer), integer_(i) {}              // NOLINT: implicit
  TensorIndex(bool b) : kind_(Kind::Bool), integer_(b) {}                // NOLINT: implicit
  TensorIndex(Slice s) : kind_(Kind::Slice), slice_(s) {}                // NOLINT: implicit
  TensorIndex(NoneIndex) : kind_(Kind::None) {}                          // NOLINT: implicit
  TensorIndex(EllipsisIndex) : kind_(Kind::Ellipsis) {}                  // NOLINT: implicit
  TensorIndex(Tensor t) : kind_(Kind::Tensor), tensor_(std::move(t)) {}  // NOLINT: implicit
  Kind kind() const { return kind_; }
  int64_t integer() const { return integer_; }
  const Slice& slice() const { return slice_; }
  const Tensor& tensor() const { return tensor_; }

 private:
  Kind kind_;
  int64_t integer_ = 0;
  Slice slice_;
  Tensor tensor_;
};

Tensor operator+(const Tensor& a, const Tensor& b);
Tensor operator+(const Tensor& a, Scalar b);
Tensor operator+(Scalar a, const Tensor& b);
Tensor operator-(const Tensor& a, const Tensor& b);
Tensor operator-(const Tensor& a, Scalar b);
Tensor operator-(Scalar a, const Tensor& b);
Tensor operator*(const Tensor& a, const Tensor& b);
Tensor operator*(const Tensor& a, Scalar b);
Tensor operator*(Scalar a, const Tensor& b);
Tensor operator/(const Tensor& a, const Tensor& b);
Tensor operator/(const Tensor& a, Scalar b);
Tensor operator/(Scalar a, const Tensor& b);
Tensor operator==(const Tensor& a, const Tensor& b);
Tensor operator==(const Tensor& a, Scalar b);
Tensor operator!=(const Tensor& a, const Tensor& b);
Tensor operator!=(const Tensor& a, Scalar b);
Tensor operator<(const Tensor& a, const Tensor& b);
Tensor operator<(const Tensor& a, Scalar b);
Tensor operator<=(const Tensor& a, const Tensor& b);
Tensor operator<=(const Tensor& a, Scalar b);
Tensor operator>(const Tensor& a, const Tensor& b);
Tensor operator>(const Tensor& a, Scalar b);
Tensor operator>=(const Tensor& a, const Tensor& b);
Tensor operator>=(const Tensor& a, Scalar b);
Tensor operator&&(const Tensor& a, const Tensor& b);
Tensor operator||(const Tensor& a, const Tensor& b);
Tensor operator!(const Tensor& a);

/// Prints like PyTorch: `tensor([[1., 2.], [3., 4.]], dtype=float64, requires_grad=True)`.
std::ostream& operator<<(std::ostream& os, const Tensor& t);

/// `using namespace ignis::indexing;` brings Slice, None and Ellipsis, as torch::indexing does.
namespace indexing {
using ignis::Ellipsis;
using ignis::EllipsisIndex;
using ignis::None;
using ignis::NoneIndex;
using ignis::Slice;
using ignis::TensorIndex;
}  // namespace indexing

}  // namespace ignis
