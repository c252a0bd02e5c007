// LibTorch's torch::save / torch::load spellings, for tensors, tensor lists, modules and
// optimizers. The file format is safetensors (readable by PyTorch's safetensors package), not
// LibTorch's TorchScript archive; files are written atomically and read as untrusted input.
#pragma once

#include <memory>
#include <string>
#include <type_traits>
#include <vector>

#include "ignis/nn/module.h"
#include "ignis/optim/optimizer.h"
#include "ignis/tensor.h"

namespace ignis {

/// One tensor, under the name "tensor". `load` replaces `t` (shape, dtype and data).
void save(const Tensor& t, const std::string& path);
void load(Tensor& t, const std::string& path);
/// A list of tensors, named "0", "1", ... `load` replaces the list.
void save(const std::vector<Tensor>& ts, const std::string& path);
void load(std::vector<Tensor>& ts, const std::string& path);
/// A module's state_dict (parameters and buffers by dotted name). `load` is strict: every key
/// must match, with its shape, and a failing load leaves the module unchanged.
void save(const nn::Module& m, const std::string& path);
void load(nn::Module& m, const std::string& path);
template <class M>
requires std::is_base_of_v<nn::Module, M>
void save(const std::shared_ptr<M>& m, const std::string& path) {
  IGNIS_CHECK(m != nullptr, "save: the module is null");
  save(static_cast<const nn::Module&>(*m), path);
}
template <class M>
requires std::is_base_of_v<nn::Module, M>
void load(const std::shared_ptr<M>& m, const std::string& path) {
  IGNIS_CHECK(m != nullptr, "load: the module is null");
  load(static_cast<nn::Module&>(*m), path);
}
/// An optimizer's state_dict (hyperparameters per group and per-parameter state); `load` needs
/// an optimizer of the same type over parameters of the same shapes.
void save(const optim::Optimizer& o, const std::string& path);
void load(optim::Optimizer& o, const std::string& path);

}  // namespace ignis
