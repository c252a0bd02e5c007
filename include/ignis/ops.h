// The op set as free functions (ignis::add, ignis::matmul, ...), mirroring torch::*.
#pragma once

#include <concepts>
#include <cstdint>
#include <optional>
#include <tuple>
#include <vector>

#include "ignis/einsum.h"
#include "ignis/shape_extra.h"
#include "ignis/sort.h"
#include "ignis/tensor.h"

namespace ignis {

// ---- creation
Tensor empty(IntArrayRef size, TensorOptions opts = {});
Tensor zeros(IntArrayRef size, TensorOptions opts = {});
Tensor ones(IntArrayRef size, TensorOptions opts = {});
Tensor full(IntArrayRef size, Scalar value, TensorOptions opts = {});
Tensor scalar_tensor(Scalar value, TensorOptions opts = {});
Tensor empty_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor zeros_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor ones_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor full_like(const Tensor& t, Scalar value, std::optional<TensorOptions> opts = std::nullopt);
Tensor rand_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
Tensor randn_like(const Tensor& t, std::optional<TensorOptions> opts = std::nullopt);
/// arange(end), arange(start, end[, step]); integer arguments give int64, otherwise float32.
Tensor arange(Scalar end, TensorOptions opts = {});
Tensor arange(Scalar start, Scalar end, Scalar step = 1, TensorOptions opts = {});
Tensor linspace(double start, double end, int64_t steps, TensorOptions opts = {});
Tensor eye(int64_t n, std::optional<int64_t> m = std::nullopt, TensorOptions opts = {});
/// Uniform [0, 1), standard normal, integers in [low, high) (int64 by default), a permutation.
Tensor rand(IntArrayRef size, TensorOptions opts = {});
Tensor randn(IntArrayRef size, TensorOptions opts = {});
Tensor randint(int64_t low, int64_t high, IntArrayRef size, TensorOptions opts = kInt64);
Tensor randint(int64_t high, IntArrayRef size, TensorOptions opts = kInt64);
Tensor randperm(int64_t n, TensorOptions opts = kInt64);
/// Wraps memory the caller owns (no copy). The deleter, if given, runs when the storage dies.
Tensor from_blob(void* data, IntArrayRef sizes, TensorOptions opts = {},
                 std::function<void(void*)> deleter = nullptr);
Tensor from_blob(void* data, IntArrayRef sizes, IntArrayRef strides, TensorOptions opts = {},
                 std::function<void(void*)> deleter = nullptr);
/// Copies a vector into a new 1-D tensor (or a tensor of `shape`). Floating data gets the
/// default dtype (float32) unless opts says otherwise; integers int64; bools bool.
Tensor tensor(const std::vector<double>& values, TensorOptions opts = {});
Tensor tensor(const std::vector<float>& values, TensorOptions opts = {});
Tensor tensor(const std::vector<int64_t>& values, TensorOptions opts = kInt64);
Tensor tensor(const std::vector<int>& values, TensorOptions opts = kInt64);
Tensor tensor(const std::vector<bool>& values, TensorOptions opts = kBool);
Tensor tensor(std::initializer_list<double> values, TensorOptions opts = {});
Tensor tensor(std::initializer_list<std::initializer_list<double>> rows, TensorOptions opts = {});
Tensor tensor(std::initializer_list<float> values, TensorOptions opts = {});
Tensor tensor(std::initializer_list<std::initializer_list<float>> rows, TensorOptions opts = {});
Tensor tensor(std::initializer_list<int> values, TensorOptions opts = kInt64);
Tensor tensor(std::initializer_list<std::initializer_list<int>> rows, TensorOptions opts = kInt64);
Tensor tensor(double value, TensorOptions opts = {});
template <class T>
Tensor from_vector(const std::vector<T>& values, IntArrayRef shape, TensorOptions opts) {
  return tensor(std::vector<T>(values), opts).reshape(shape);
}

// ---- elementwise (tensor or scalar operands broadcast like PyTorch)
Tensor add(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor add(const Tensor& a, Scalar b, Scalar alpha = 1);
Tensor sub(const Tensor& a, const Tensor& b, Scalar alpha = 1);
Tensor sub(const Tensor& a, Scalar b, Scalar alpha = 1);
Tensor rsub(const Tensor& a, Scalar b);  // b - a
Tensor mul(const Tensor& a, const Tensor& b);
Tensor mul(const Tensor& a, Scalar b);
Tensor div(const Tensor& a, const Tensor& b);
Tensor div(const Tensor& a, Scalar b);
Tensor div(Scalar a, const Tensor& b);
Tensor pow(const Tensor& a, const Tensor& e);
Tensor pow(const Tensor& a, Scalar e);
Tensor pow(Scalar a, const Tensor& e);
Tensor maximum(const Tensor& a, const Tensor& b);
Tensor minimum(const Tensor& a, const Tensor& b);
Tensor neg(const Tensor& x);
Tensor abs(const Tensor& x);
// exp, exp2, expm1, log, log2, log10, log1p, sqrt, rsqrt, reciprocal, trigonometric and
// hyperbolic functions and their inverses, sigmoid, erf, erfc, erfinv: see the list.
#define IGNIS_FLOAT_UNARY_OP(name, ...) Tensor name(const Tensor& x);
#include "ignis/float_unary_ops.def"
Tensor relu(const Tensor& x);
Tensor leaky_relu(const Tensor& x, double negative_slope = 0.01);
/// approximate: "none" (erf form) or "tanh".
Tensor gelu(const Tensor& x, const std::string& approximate = "none");
Tensor silu(const Tensor& x);
Tensor softplus(const Tensor& x, double beta = 1, double threshold = 20);
// elu, hardtanh, hardswish, hardsigmoid, mish, log_sigmoid and their in-place forms name_
// (ignis/activation_ops.def); the composites selu, celu, relu6 (elu and hardtanh with fixed
// parameters), softmin, glu, prelu; square, trunc; atan2, fmod, remainder
// (ignis/binary_ops.def: fmod's sign follows the dividend, remainder's the divisor).
#define IGNIS_ACTIVATION_OP(name, Functor, dtypes, dx, ...)                     \
  Tensor name(const Tensor& x IGNIS_PARAMS_MAP(IGNIS_PARAM_DECL, __VA_ARGS__)); \
  const Tensor& name##_(const Tensor& x IGNIS_PARAMS_MAP(IGNIS_PARAM_DECL, __VA_ARGS__));
#include "ignis/activation_ops.def"
Tensor selu(const Tensor& x);
const Tensor& selu_(const Tensor& x);
Tensor celu(const Tensor& x, Scalar alpha = 1.0);
const Tensor& celu_(const Tensor& x, Scalar alpha = 1.0);
Tensor relu6(const Tensor& x);
const Tensor& relu6_(const Tensor& x);
/// softmax(-x, dim).
Tensor softmin(const Tensor& x, int64_t dim);
/// a * sigmoid(b), a and b the halves of x along dim (whose size must be even).
Tensor glu(const Tensor& x, int64_t dim = -1);
/// x where x > 0, else weight * x; weight: one slope, or one per channel (dim 1 of x).
Tensor prelu(const Tensor& x, const Tensor& weight);
Tensor square(const Tensor& x);
Tensor trunc(const Tensor& x);
#define IGNIS_BINARY_OP(name, ...) Tensor name(const Tensor& a, const Tensor& b);
#define IGNIS_BINARY_SCALAR_OP(name, ...)        \
  Tensor name(const Tensor& a, const Tensor& b); \
  Tensor name(const Tensor& a, Scalar b);
#include "ignis/binary_ops.def"
Tensor remainder(Scalar a, const Tensor& b);
Tensor clamp(const Tensor& x, std::optional<Scalar> min, std::optional<Scalar> max = std::nullopt);
Tensor sign(const Tensor& x);
Tensor floor(const Tensor& x);
Tensor ceil(const Tensor& x);
Tensor round(const Tensor& x);
Tensor where(const Tensor& cond, const Tensor& a, const Tensor& b);
Tensor where(const Tensor& cond, const Tensor& a, Scalar b);
Tensor where(const Tensor& cond, Scalar a, const Tensor& b);
Tensor eq(const Tensor& a, const Tensor& b);
Tensor ne(const Tensor& a, const Tensor& b);
Tensor lt(const Tensor& a, const Tensor& b);
Tensor le(const Tensor& a, const Tensor& b);
Tensor gt(const Tensor& a, const Tensor& b);
Tensor ge(const Tensor& a, const Tensor& b);
Tensor eq(const Tensor& a, Scalar b);
Tensor ne(const Tensor& a, Scalar b);
Tensor lt(const Tensor& a, Scalar b);
Tensor le(const Tensor& a, Scalar b);
Tensor gt(const Tensor& a, Scalar b);
Tensor ge(const Tensor& a, Scalar b);
Tensor logical_and(const Tensor& a, const Tensor& b);
Tensor logical_or(const Tensor& a, const Tensor& b);
Tensor logical_not(const Tensor& x);
bool allclose(const Tensor& a, const Tensor& b, double rtol = 1e-5, double atol = 1e-8,
              bool equal_nan = false);
bool equal(const Tensor& a, const Tensor& b);
Tensor isnan(const Tensor& x);
Tensor isinf(const Tensor& x);
Tensor isfinite(const Tensor& x);

// ---- reductions (an empty dims list reduces over all dims)
Tensor sum(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false,
           std::optional<DType> dtype = std::nullopt);
Tensor mean(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor prod(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor amax(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
Tensor amin(const Tensor& x, IntArrayRef dims = {}, bool keepdim = false);
std::tuple<Tensor, Tensor> max(const Tensor& x, int64_t dim, bool keepdim = false);
std::tuple<Tensor, Tensor> min(const Tensor& x, int64_t dim, bool keepdim = false);
Tensor argmax(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor argmin(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor var(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
Tensor std(const Tensor& x, IntArrayRef dims = {}, int64_t correction = 1, bool keepdim = false);
/// LibTorch's torch::var(x, /*unbiased=*/false): over all elements. Only a bool argument picks
/// these (`var(x, {0})` is over dim 0).
template <class B>
requires std::same_as<B, bool> Tensor var(const Tensor& x, B unbiased) {
  return var(x, {}, unbiased ? 1 : 0);
}
template <class B>
requires std::same_as<B, bool> Tensor std(const Tensor& x, B unbiased) {
  return std(x, {}, unbiased ? 1 : 0);
}
Tensor norm(const Tensor& x, double p = 2, IntArrayRef dims = {}, bool keepdim = false);
Tensor logsumexp(const Tensor& x, IntArrayRef dims, bool keepdim = false);
Tensor softmax(const Tensor& x, int64_t dim);
Tensor log_softmax(const Tensor& x, int64_t dim);
Tensor cumsum(const Tensor& x, int64_t dim);
Tensor all(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
Tensor any(const Tensor& x, std::optional<int64_t> dim = std::nullopt, bool keepdim = false);
/// Sums `x` down to `shape` (the reverse of broadcasting); used to un-broadcast gradients.
Tensor sum_to_size(const Tensor& x, IntArrayRef shape);

// ---- linear algebra (PyTorch semantics)
Tensor matmul(const Tensor& a, const Tensor& b);
Tensor mm(const Tensor& a, const Tensor& b);
Tensor bmm(const Tensor& a, const Tensor& b);
/// beta * self + alpha * (m1 @ m2)
Tensor addmm(const Tensor& self, const Tensor& m1, const Tensor& m2, Scalar beta = 1,
             Scalar alpha = 1);
Tensor dot(const Tensor& a, const Tensor& b);
Tensor outer(const Tensor& a, const Tensor& b);
/// x @ w^T + b, as torch.nn.functional.linear.
Tensor linear(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());
/// relu(linear(x, w, b)) as one op: the relu applied in place to the product's output, and one
/// graph node.
Tensor linear_relu(const Tensor& x, const Tensor& w, const Tensor& b = Tensor());

// ---- shape and views
Tensor view(const Tensor& x, IntArrayRef shape);
Tensor reshape(const Tensor& x, IntArrayRef shape);
Tensor transpose(const Tensor& x, int64_t d0, int64_t d1);
Tensor permute(const Tensor& x, IntArrayRef dims);
Tensor narrow(const Tensor& x, int64_t dim, int64_t start, int64_t length);
Tensor slice(const Tensor& x, int64_t dim, std::optional<int64_t> start = std::nullopt,
             std::optional<int64_t> end = std::nullopt, int64_t step = 1);
Tensor select(const Tensor& x, int64_t dim, int64_t index);
Tensor expand(const Tensor& x, IntArrayRef shape);
Tensor squeeze(const Tensor& x, std::optional<int64_t> dim = std::nullopt);
Tensor unsqueeze(const Tensor& x, int64_t dim);
Tensor flatten(const Tensor& x, int64_t start_dim = 0, int64_t end_dim = -1);
Tensor unflatten(const Tensor& x, int64_t dim, IntArrayRef sizes);
Tensor as_strided(const Tensor& x, IntArrayRef sizes, IntArrayRef strides,
                  std::optional<int64_t> storage_offset = std::nullopt);
Tensor contiguous(const Tensor& x);
/// The shape two shapes broadcast to; throws naming both when they do not.
Shape broadcast_shapes(IntArrayRef a, IntArrayRef b);
Tensor broadcast_to(const Tensor& x, IntArrayRef shape);

// ---- indexing and joining
Tensor index_select(const Tensor& x, int64_t dim, const Tensor& index);
Tensor gather(const Tensor& x, int64_t dim, const Tensor& index);
Tensor scatter(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
Tensor scatter_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& src);
/// out = x; out.index_select(dim, index) += alpha * source (the GNN message-passing primitive).
/// PyTorch's index.Tensor: advanced indexing with indices[d] indexing dim d (an undefined
/// tensor leaves it whole; a bool mask covers as many dims as it has). x.index({...}) with
/// TensorIndex is the general form.
Tensor index(const Tensor& self, const std::vector<Tensor>& indices);
Tensor index_add(const Tensor& x, int64_t dim, const Tensor& index, const Tensor& source,
                 Scalar alpha = 1);
Tensor masked_fill(const Tensor& x, const Tensor& mask, Scalar value);
Tensor masked_select(const Tensor& x, const Tensor& mask);
Tensor cat(const std::vector<Tensor>& tensors, int64_t dim = 0);
Tensor stack(const std::vector<Tensor>& tensors, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, int64_t split_size, int64_t dim = 0);
std::vector<Tensor> split(const Tensor& x, const std::vector<int64_t>& sizes, int64_t dim = 0);
std::vector<Tensor> chunk(const Tensor& x, int64_t chunks, int64_t dim = 0);
Tensor repeat(const Tensor& x, IntArrayRef repeats);
Tensor tril(const Tensor& x, int64_t diagonal = 0);
Tensor triu(const Tensor& x, int64_t diagonal = 0);
Tensor flip(const Tensor& x, IntArrayRef dims);
/// Pads the last dims: pad = {left, right, top, bottom, ...} as torch.nn.functional.pad.
/// mode: "constant" (value), "reflect" (pad < size), "replicate", "circular" (pad <= size).
Tensor pad(const Tensor& x, IntArrayRef pad, const std::string& mode = "constant",
           double value = 0);
Tensor one_hot(const Tensor& index, int64_t num_classes = -1);
/// Indices of nonzero elements, shape [n, dim].
Tensor nonzero(const Tensor& x);

// ---- losses used by the examples (the full set comes with nn)
Tensor binary_cross_entropy_with_logits(const Tensor& logits, const Tensor& target,
                                        const Tensor& weight = Tensor(),
                                        const Tensor& pos_weight = Tensor(),
                                        const std::string& reduction = "mean");

// ---- random numbers
/// Seeds the default generator; every random op draws from it (reproducible streams).
void manual_seed(uint64_t seed);

// ---- threads
/// Intra-op threads (one OpenMP pool shared with oneDNN).
void set_num_threads(int n);
int get_num_threads();

}  // namespace ignis
