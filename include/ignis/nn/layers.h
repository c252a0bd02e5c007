// The basic layers: Linear, activations, Dropout, Embedding, LayerNorm, and the containers
// Sequential, ModuleList, ModuleDict.
#pragma once

#include <map>
#include <memory>
#include <optional>
#include <string>
#include <type_traits>
#include <vector>

#include "ignis/nn/functional.h"
#include "ignis/nn/functional_ops.h"
#include "ignis/nn/module.h"

namespace ignis::nn {

/// y = x W^T + b. Weight [out, in] and bias [out] initialised like PyTorch (kaiming-uniform
/// with a = sqrt(5), i.e. U(-1/sqrt(in), 1/sqrt(in)) for both).
class Linear : public Module {
 public:
  Linear(int64_t in_features, int64_t out_features, bool bias = true);
  std::string type_name() const override { return "Linear"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  /// relu(forward(x)) as one linear_relu.
  Tensor forward_relu(const Tensor& x);
  void reset_parameters();
  Tensor weight, bias;
  int64_t in_features, out_features;
};

class Identity : public Module {
 public:
  std::string type_name() const override { return "Identity"; }
  Tensor forward(const Tensor& x) override { return x; }
};

/// Flattens dims start_dim..end_dim (default: all but the batch dim).
class Flatten : public Module {
 public:
  explicit Flatten(int64_t start_dim = 1, int64_t end_dim = -1)
      : start_(start_dim), end_(end_dim) {}
  std::string type_name() const override { return "Flatten"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return x.flatten(start_, end_); }

 private:
  int64_t start_, end_;
};

class Unflatten : public Module {
 public:
  Unflatten(int64_t dim, std::vector<int64_t> sizes) : dim_(dim), sizes_(std::move(sizes)) {}
  std::string type_name() const override { return "Unflatten"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return x.unflatten(dim_, sizes_); }

 private:
  int64_t dim_;
  std::vector<int64_t> sizes_;
};

/// An activation module wrapping a function of one tensor.
#define IGNIS_ACTIVATION(Name, expr)                          \
  class Name : public Module {                                \
   public:                                                    \
    std::string type_name() const override { return #Name; }  \
    Tensor forward(const Tensor& x) override { return expr; } \
  };
IGNIS_ACTIVATION(SiLU, ignis::silu(x))
IGNIS_ACTIVATION(Sigmoid, ignis::sigmoid(x))
IGNIS_ACTIVATION(Tanh, ignis::tanh(x))
#undef IGNIS_ACTIVATION

class LeakyReLU : public Module {
 public:
  explicit LeakyReLU(double negative_slope = 0.01) : slope_(negative_slope) {}
  std::string type_name() const override { return "LeakyReLU"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return ignis::leaky_relu(x, slope_); }

 private:
  double slope_;
};

class GELU : public Module {
 public:
  explicit GELU(std::string approximate = "none") : approximate_(std::move(approximate)) {}
  std::string type_name() const override { return "GELU"; }
  std::string extra_repr() const override { return "approximate='" + approximate_ + "'"; }
  Tensor forward(const Tensor& x) override { return ignis::gelu(x, approximate_); }

 private:
  std::string approximate_;
};

class Softmax : public Module {
 public:
  explicit Softmax(int64_t dim) : dim_(dim) {}
  std::string type_name() const override { return "Softmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim_); }
  Tensor forward(const Tensor& x) override { return ignis::softmax(x, dim_); }
  int64_t dim() const { return dim_; }

 private:
  int64_t dim_;
};

class LogSoftmax : public Module {
 public:
  explicit LogSoftmax(int64_t dim) : dim_(dim) {}
  std::string type_name() const override { return "LogSoftmax"; }
  std::string extra_repr() const override { return "dim=" + std::to_string(dim_); }
  Tensor forward(const Tensor& x) override { return ignis::log_softmax(x, dim_); }

 private:
  int64_t dim_;
};

/// Zeroes inputs with probability p while training (scaling the rest by 1/(1-p)).
class Dropout : public Module {
 public:
  explicit Dropout(double p = 0.5);
  std::string type_name() const override { return "Dropout"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override { return functional::dropout(x, p_, is_training()); }

 private:
  double p_;
};

/// A lookup table of num_embeddings vectors of size embedding_dim (initialised N(0, 1)).
class Embedding : public Module {
 public:
  Embedding(int64_t num_embeddings, int64_t embedding_dim,
            std::optional<int64_t> padding_idx = std::nullopt);
  /// LibTorch's form; with max_norm, forward renormalises the looked-up rows in place first.
  explicit Embedding(const EmbeddingOptions& options);
  std::string type_name() const override { return "Embedding"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& indices) override;
  Tensor weight;

 private:
  int64_t num_, dim_;
  std::optional<int64_t> padding_idx_;
  std::optional<double> max_norm_;
  double norm_type_ = 2;
};

class LayerNorm : public Module {
 public:
  explicit LayerNorm(std::vector<int64_t> normalized_shape, double eps = 1e-5,
                     bool elementwise_affine = true);
  std::string type_name() const override { return "LayerNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor weight, bias;

 private:
  std::vector<int64_t> shape_;
  double eps_;
};

/// Root-mean-square normalisation over the trailing dims (torch.nn.RMSNorm): weight (ones) when
/// elementwise_affine; eps nullopt: the input dtype's machine epsilon.
class RMSNorm : public Module {
 public:
  explicit RMSNorm(std::vector<int64_t> normalized_shape, std::optional<double> eps = std::nullopt,
                   bool elementwise_affine = true);
  std::string type_name() const override { return "RMSNorm"; }
  std::string extra_repr() const override;
  Tensor forward(const Tensor& x) override;
  Tensor weight;

 private:
  std::vector<int64_t> shape_;
  std::optional<double> eps_;
};

namespace detail {
template <class M>
std::shared_ptr<Module> to_module_ptr(M&& m) {
  if constexpr (std::is_convertible_v<std::decay_t<M>, std::shared_ptr<Module>>) {
    return std::forward<M>(m);
  } else {
    static_assert(std::is_base_of_v<Module, std::decay_t<M>>, "Sequential takes nn modules");
    return std::make_shared<std::decay_t<M>>(std::forward<M>(m));
  }
}
}  // namespace detail

/// Runs its modules in order: `Sequential(Flatten(), Linear(784, 512), ReLU(), ...)`; modules
/// may be given by value or as shared_ptrs. Children are named "0", "1", ... Each module runs as
/// its own forward says, one after the other; fusing a layer with its activation is graph mode's
/// work (jit::compile, docs/graph-mode.md).
class Sequential : public Module {
 public:
  Sequential() = default;
  template <class... M>
  explicit Sequential(M&&... modules) {
    (push_back(detail::to_module_ptr(std::forward<M>(modules))), ...);
  }
  std::string type_name() const override { return "Sequential"; }
  Tensor forward(const Tensor& x) override;
  void push_back(std::shared_ptr<Module> m);
  /// Named children, like PyTorch's Sequential(OrderedDict(...)).
  void push_back(const std::string& name, std::shared_ptr<Module> m);
  size_t size() const { return mods_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  template <class M>
  std::shared_ptr<M> at(size_t i) const {
    auto p = std::dynamic_pointer_cast<M>((*this)[i]);
    IGNIS_CHECK(p != nullptr, "Sequential::at: module ", i, " is a ", (*this)[i]->type_name());
    return p;
  }

 private:
  std::vector<std::shared_ptr<Module>> mods_;
};

/// Holds submodules in a list (named "0", "1", ...) without defining forward.
class ModuleList : public Module {
 public:
  ModuleList() = default;
  std::string type_name() const override { return "ModuleList"; }
  void push_back(std::shared_ptr<Module> m);
  size_t size() const { return mods_.size(); }
  std::shared_ptr<Module> operator[](size_t i) const;
  auto begin() const { return mods_.begin(); }
  auto end() const { return mods_.end(); }

 private:
  std::vector<std::shared_ptr<Module>> mods_;
};

/// Holds submodules by name, in insertion order.
class ModuleDict : public Module {
 public:
  ModuleDict() = default;
  std::string type_name() const override { return "ModuleDict"; }
  void insert(const std::string& name, std::shared_ptr<Module> m);
  std::shared_ptr<Module> operator[](const std::string& name) const { return child(name); }
  bool contains(const std::string& name) const;
  size_t size() const { return named_children().size(); }
};

}  // namespace ignis::nn
