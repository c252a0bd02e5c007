// Creation ops: empty, zeros, ones, full, the *_like forms, tensor(...) from C++ data.
#include <cstring>

#include "autograd/node.h"
#include "core/op_call.h"
#include "ops/elementwise.h"

namespace ignis {

namespace {
Tensor finish(Tensor t, const TensorOptions& opts) {
  if (opts.requires_grad()) t.requires_grad_(true);
  return t;
}
TensorOptions like(const Tensor& t, const std::optional<TensorOptions>& opts) {
  if (!opts) return t.options();
  TensorOptions o = *opts;
  if (!o.has_dtype()) o = o.dtype(t.dtype());
  return o;
}
template <class T>
Tensor from_data(const T* data, size_t n, Shape shape, TensorOptions opts) {
  Tensor src = make_tensor(shape, dtype_of_v<T>);
  if (n) std::memcpy(src.data_ptr(), data, n * sizeof(T));
  return finish(src.to(opts.dtype()).to(opts.device()), opts);
}
// `t` is freshly allocated and dense (contiguous or channels-last), so one memset zeroes it.
Tensor zeroed(Tensor t, const TensorOptions& opts) {
  if (opts.device().is_cpu()) {
    if (t.nbytes()) std::memset(t.data_ptr(), 0, t.nbytes());
  } else {
    t.fill_(0);
  }
  return finish(t, opts);
}
// The *_like forms keep a channels-last layout (PyTorch's preserve_format).
Tensor alloc_like(const Tensor& t, const TensorOptions& opts) {
  return make_tensor_like(t, t.sizes(), opts.dtype(), opts.device());
}
}  // namespace

#define FACTORY_OP \
  { .kind = "factory" }
IGNIS_OP(empty, "empty(int[] size, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, TensorOptions), empty, FACTORY_OP);
IGNIS_OP(full, "full(int[] size, Scalar fill_value, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, Scalar, TensorOptions), full, FACTORY_OP);
IGNIS_OP(zeros, "zeros(int[] size, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, TensorOptions), zeros, FACTORY_OP);
IGNIS_OP(ones, "ones(int[] size, TensorOptions options={}) -> Tensor",
         Tensor(IntArrayRef, TensorOptions), ones, FACTORY_OP);
IGNIS_OP(scalar_tensor, "scalar_tensor(Scalar s, TensorOptions options={}) -> Tensor",
         Tensor(Scalar, TensorOptions), scalar_tensor, FACTORY_OP);
IGNIS_OP(empty_like, "empty_like(Tensor self, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, std::optional<TensorOptions>), empty_like, FACTORY_OP);
IGNIS_OP(zeros_like, "zeros_like(Tensor self, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, std::optional<TensorOptions>), zeros_like, FACTORY_OP);
IGNIS_OP(full_like,
         "full_like(Tensor self, Scalar fill_value, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, Scalar, std::optional<TensorOptions>), full_like, FACTORY_OP);
IGNIS_OP(ones_like, "ones_like(Tensor self, TensorOptions? options=None) -> Tensor",
         Tensor(const Tensor&, std::optional<TensorOptions>), ones_like, FACTORY_OP);
#undef FACTORY_OP
// tensor(std::vector / initializer_list ...) and from_blob take host data or a deleter callback,
// which cannot be boxed: they have no record (see their IGNIS_OP_EXEMPT in tests/ops_core.cpp).

Tensor empty(IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(empty, empty, size, opts);
  return finish(make_tensor(size, opts.dtype(), opts.device()), opts);
}
Tensor full(IntArrayRef size, Scalar value, TensorOptions opts) {
  IGNIS_DISPATCH(full, full, size, value, opts);
  Tensor t = make_tensor(size, opts.dtype(), opts.device());
  t.fill_(value);
  return finish(t, opts);
}
Tensor zeros(IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(zeros, zeros, size, opts);
  return zeroed(make_tensor(size, opts.dtype(), opts.device()), opts);
}
Tensor ones(IntArrayRef size, TensorOptions opts) {
  IGNIS_DISPATCH(ones, ones, size, opts);
  return full(size, 1, opts);
}
Tensor scalar_tensor(Scalar value, TensorOptions opts) {
  IGNIS_DISPATCH(scalar_tensor, scalar_tensor, value, opts);
  return full({}, value, opts);
}

Tensor empty_like(const Tensor& t, std::optional<TensorOptions> o) {
  IGNIS_DISPATCH(empty_like, empty_like, t, o);
  const TensorOptions opts = like(t, o);
  return finish(alloc_like(t, opts), opts);
}
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> o) {
  IGNIS_DISPATCH(zeros_like, zeros_like, t, o);
  const TensorOptions opts = like(t, o);
  return zeroed(alloc_like(t, opts), opts);
}
Tensor full_like(const Tensor& t, Scalar v, std::optional<TensorOptions> o) {
  IGNIS_DISPATCH(full_like, full_like, t, v, o);
  const TensorOptions opts = like(t, o);
  Tensor out = alloc_like(t, opts);
  out.fill_(v);
  return finish(out, opts);
}
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> o) {
  IGNIS_DISPATCH(ones_like, ones_like, t, o);
  return full_like(t, 1, o);
}

Tensor tensor(const std::vector<double>& v, TensorOptions opts) {
  return from_data(v.data(), v.size(), {static_cast<int64_t>(v.size())}, opts);
}
Tensor tensor(const std::vector<float>& v, TensorOptions opts) {
  return from_data(v.data(), v.size(), {static_cast<int64_t>(v.size())}, opts);
}
Tensor tensor(const std::vector<int64_t>& v, TensorOptions opts) {
  return from_data(v.data(), v.size(), {static_cast<int64_t>(v.size())}, opts);
}
Tensor tensor(const std::vector<int>& v, TensorOptions opts) {
  std::vector<int64_t> w(v.begin(), v.end());
  return tensor(w, opts);
}
Tensor tensor(const std::vector<bool>& v, TensorOptions opts) {
  std::vector<uint8_t> w(v.begin(), v.end());
  Tensor t = make_tensor({static_cast<int64_t>(v.size())}, kBool);
  if (!w.empty()) std::memcpy(t.data_ptr(), w.data(), w.size());
  return finish(t.to(opts.dtype()).to(opts.device()), opts);
}
Tensor tensor(std::initializer_list<double> v, TensorOptions opts) {
  return tensor(std::vector<double>(v), opts);
}
Tensor tensor(std::initializer_list<int> v, TensorOptions opts) {
  return tensor(std::vector<int>(v), opts);
}
namespace {
// Rows of equal length, flattened into T (float64 for floating lists, int64 for integers).
template <class T, class R>
Tensor tensor_from_rows(std::initializer_list<std::initializer_list<R>> rows, TensorOptions opts) {
  std::vector<T> flat;
  const size_t cols = rows.size() ? rows.begin()->size() : 0;
  for (const auto& r : rows) {
    IGNIS_CHECK(r.size() == cols, "tensor: rows have different lengths (", cols, " and ", r.size(),
                ")");
    flat.insert(flat.end(), r.begin(), r.end());
  }
  return from_data(flat.data(), flat.size(),
                   {static_cast<int64_t>(rows.size()), static_cast<int64_t>(cols)}, opts);
}
}  // namespace

Tensor tensor(std::initializer_list<float> v, TensorOptions opts) {
  return tensor(std::vector<double>(v.begin(), v.end()), opts);
}
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts) {
  return tensor_from_rows<double>(rows, opts);
}
Tensor tensor(std::initializer_list<std::initializer_list<float>> rows, TensorOptions opts) {
  return tensor_from_rows<double>(rows, opts);
}
Tensor tensor(std::initializer_list<std::initializer_list<int>> rows, TensorOptions opts) {
  return tensor_from_rows<int64_t>(rows, opts);
}
Tensor tensor(double value, TensorOptions opts) { return scalar_tensor(value, opts); }

Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions opts,
                 std::function<void(void*)> deleter) {
  IGNIS_CHECK(sizes.size() == strides.size(), "from_blob: got ", sizes.size(), " sizes but ",
              strides.size(), " strides");
  int64_t span = 1;
  for (size_t i = 0; i < sizes.size(); ++i) {
    IGNIS_CHECK(sizes[i] >= 0 && strides[i] >= 0, "from_blob: negative size or stride");
    if (sizes[i] == 0) span = 0;
  }
  int64_t nbytes = 0;
  bool fits = true;
  for (size_t i = 0; span != 0 && i < sizes.size(); ++i) {
    int64_t reach;
    fits = fits && !__builtin_mul_overflow(sizes[i] - 1, strides[i], &reach) &&
           !__builtin_add_overflow(span, reach, &span);
  }
  fits = fits &&
         !__builtin_mul_overflow(span, static_cast<int64_t>(element_size(opts.dtype())), &nbytes);
  IGNIS_CHECK(fits, "from_blob: sizes ", sizes, " with strides ", strides,
              " span more bytes than int64 holds");
  auto storage = std::make_shared<StorageImpl>(data, static_cast<size_t>(nbytes), opts.device(),
                                               std::move(deleter));
  Tensor t(std::make_shared<TensorImpl>(std::move(storage), sizes.shape(), strides.shape(), 0,
                                        opts.dtype()));
  return finish(t, opts);
}

Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions opts,
                 std::function<void(void*)> deleter) {
  return from_blob(data, sizes, contiguous_strides(sizes), opts, std::move(deleter));
}

}  // namespace ignis
