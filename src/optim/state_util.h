// Small helpers for the schedulers' named-tensor state dicts.
#pragma once

#include <string>
#include <vector>

#include "ignis/ops.h"
#include "ignis/optim/optimizer.h"

namespace ignis::optim {

inline Tensor vec_tensor(const std::vector<double>& v) { return tensor(v, kFloat64); }

inline std::vector<double> tensor_vec(const Tensor& t) {
  Tensor c = t.to(kFloat64).contiguous();
  const double* d = c.data_ptr<double>();
  return std::vector<double>(d, d + c.numel());
}

/// The entry named `key` (nullptr when absent).
inline const Tensor* find_key(const OptimizerStateDict& sd, const std::string& key) {
  for (const auto& [k, v] : sd) {
    if (k == key) return &v;
  }
  return nullptr;
}

/// A one-value entry; throws naming the key when it is missing or not a single value.
inline double read_scalar(const std::string& op, const OptimizerStateDict& sd,
                          const std::string& key) {
  const Tensor* t = find_key(sd, key);
  IGNIS_CHECK(t && t->defined(), op, ": missing key '", key, "'");
  IGNIS_CHECK(t->numel() == 1, op, ": '", key, "' must hold one value, got shape ", t->sizes());
  return t->item().to_double();
}

/// A 1-D entry as doubles; throws naming the key when it is missing.
inline std::vector<double> read_vec(const std::string& op, const OptimizerStateDict& sd,
                                    const std::string& key) {
  const Tensor* t = find_key(sd, key);
  IGNIS_CHECK(t && t->defined(), op, ": missing key '", key, "'");
  return tensor_vec(*t);
}

}  // namespace ignis::optim
