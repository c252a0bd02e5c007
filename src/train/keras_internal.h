// Shared between keras.cpp and keras_losses.cpp: the names compile() resolves.
#pragma once

#include <string>
#include <utility>
#include <vector>

#include "ignis/keras.h"

namespace ignis::train::detail {

std::string lower(std::string s);
std::string join(const std::vector<std::string>& v);
/// (alias, canonical name) of every loss name compile() knows.
const std::vector<std::pair<std::string, std::string>>& loss_aliases();
/// The canonical name of a loss ("mse" -> "mean_squared_error"); throws listing the known names.
std::string canonical_loss(const std::string& name);
LossFn named_loss(const std::string& canonical_name, bool from_logits);
/// A metric by name; "accuracy" resolved for `loss` as Keras does. Throws listing the names.
Metric named_metric(const std::string& name, const LossSpec& loss);

}  // namespace ignis::train::detail
