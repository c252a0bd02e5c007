// Keras's losses and metrics, the names compile() knows, and the Logs/KerasHistory records.
#include <algorithm>
#include <cctype>
#include <cstdio>
#include <sstream>

#include "ignis/autograd.h"
#include "ignis/keras.h"
#include "ignis/nn/loss.h"
#include "ignis/ops.h"
#include "train/keras_internal.h"

namespace ignis::train {

namespace detail {

std::string lower(std::string s) {
  std::transform(s.begin(), s.end(), s.begin(),
                 [](unsigned char c) { return static_cast<char>(std::tolower(c)); });
  return s;
}

std::string join(const std::vector<std::string>& v) {
  std::string out;
  for (const auto& s : v) out += (out.empty() ? "" : ", ") + s;
  return out;
}

}  // namespace detail

namespace {

using detail::join;

// Keras's squeeze_or_expand_to_same_rank for a target: [N] against an output [N, 1] becomes
// [N, 1] (and [N, 1] against [N] becomes [N]); then the shapes must be equal.
Tensor same_shape_target(const char* fn, const Tensor& output, const Tensor& target) {
  IGNIS_CHECK(output.defined() && target.defined(), fn, ": output and target must be defined");
  Tensor t = target;
  if (t.dim() + 1 == output.dim() && output.size(-1) == 1) {
    t = t.unsqueeze(-1);
  } else if (t.dim() == output.dim() + 1 && t.size(-1) == 1) {
    t = t.squeeze(-1);
  }
  IGNIS_CHECK(t.sizes().equals(output.sizes()), fn, ": target of shape ", target.sizes(),
              " does not match the output's shape ", output.sizes());
  return t.dtype() == output.dtype() ? t : t.to(output.dtype());
}

// The class indices of a sparse target for an output [..., C]: target [...] or [..., 1], int or
// float (cast, as Keras), each checked to lie in [0, C).
Tensor sparse_labels(const char* fn, const Tensor& output, const Tensor& target) {
  IGNIS_CHECK(output.defined() && target.defined(), fn, ": output and target must be defined");
  IGNIS_CHECK(output.dim() >= 1, fn, ": the output needs a class dim, got shape ", output.sizes());
  Tensor labels = target;
  if (labels.dim() == output.dim() && labels.size(-1) == 1) labels = labels.squeeze(-1);
  IGNIS_CHECK(labels.dim() + 1 == output.dim() &&
                  labels.sizes().equals(
                      IntArrayRef(output.sizes().data(), static_cast<size_t>(output.dim() - 1))),
              fn, ": integer labels of shape ", target.sizes(), " do not match the output's shape ",
              output.sizes(), " (expected the output's shape without its last dim)");
  if (labels.dtype() != kInt64) labels = labels.to(kInt64);
  const int64_t classes = output.size(-1);
  if (labels.numel() > 0 && !labels.device().is_meta()) {
    NoGradGuard ng;
    const int64_t lo = amin(labels).item<int64_t>(), hi = amax(labels).item<int64_t>();
    IGNIS_CHECK(lo >= 0 && hi < classes, fn, ": label ", lo < 0 ? lo : hi,
                " out of range for an output of ", classes, " classes (shape ", output.sizes(),
                ")");
  }
  return labels;
}

}  // namespace

namespace losses {

Tensor sparse_categorical_crossentropy(const Tensor& output, const Tensor& target,
                                       bool from_logits) {
  const char* fn = "sparse_categorical_crossentropy";
  Tensor labels = sparse_labels(fn, output, target);
  // From probabilities, TensorFlow's Keras: log of the clipped probabilities, then softmax
  // cross-entropy over them (which divides by the clipped row's sum).
  Tensor logp = from_logits ? log_softmax(output, -1)
                            : log_softmax(log(clamp(output, kEpsilon, 1 - kEpsilon)), -1);
  return -gather(logp, -1, labels.unsqueeze(-1)).mean();
}

Tensor categorical_crossentropy(const Tensor& output, const Tensor& target, bool from_logits) {
  const char* fn = "categorical_crossentropy";
  IGNIS_CHECK(output.defined() && output.dim() >= 1, fn,
              ": the output needs a class dim, got shape ",
              output.defined() ? output.sizes() : IntArrayRef());
  Tensor t = same_shape_target(fn, output, target);
  Tensor logp;
  if (from_logits) {
    logp = log_softmax(output, -1);
  } else {
    Tensor p = output / sum(output, {-1}, /*keepdim=*/true);
    logp = log(clamp(p, kEpsilon, 1 - kEpsilon));
  }
  return -sum(t * logp, {-1}).mean();
}

Tensor binary_crossentropy(const Tensor& output, const Tensor& target, bool from_logits) {
  Tensor t = same_shape_target("binary_crossentropy", output, target);
  if (from_logits) return ignis::binary_cross_entropy_with_logits(output, t);
  Tensor p = clamp(output, kEpsilon, 1 - kEpsilon);
  return -(t * log(p) + (1 - t) * log(1 - p)).mean();
}

Tensor mean_squared_error(const Tensor& output, const Tensor& target) {
  return square(output - same_shape_target("mean_squared_error", output, target)).mean();
}

Tensor mean_absolute_error(const Tensor& output, const Tensor& target) {
  return abs(output - same_shape_target("mean_absolute_error", output, target)).mean();
}

Tensor huber(const Tensor& output, const Tensor& target) {
  return nn::functional::huber_loss(output, same_shape_target("huber", output, target), "mean",
                                    1.0);
}

}  // namespace losses

namespace detail {

// ---- names

const std::vector<std::pair<std::string, std::string>>& loss_aliases() {
  static const std::vector<std::pair<std::string, std::string>> a = {
      {"sparse_categorical_crossentropy", "sparse_categorical_crossentropy"},
      {"categorical_crossentropy", "categorical_crossentropy"},
      {"binary_crossentropy", "binary_crossentropy"},
      {"mean_squared_error", "mean_squared_error"},
      {"mse", "mean_squared_error"},
      {"mean_absolute_error", "mean_absolute_error"},
      {"mae", "mean_absolute_error"},
      {"huber", "huber"}};
  return a;
}

std::string canonical_loss(const std::string& name) {
  const std::string l = lower(name);
  for (const auto& [alias, canon] : loss_aliases()) {
    if (l == alias) return canon;
  }
  IGNIS_FAIL("compile: unknown loss '", name, "' (known: ", join(LossSpec::names()),
             "; or pass a function (output, target) -> Tensor)");
}

LossFn named_loss(const std::string& canon, bool from_logits) {
  using namespace losses;
  if (canon == "sparse_categorical_crossentropy") {
    return [from_logits](const Tensor& o, const Tensor& t) {
      return sparse_categorical_crossentropy(o, t, from_logits);
    };
  }
  if (canon == "categorical_crossentropy") {
    return [from_logits](const Tensor& o, const Tensor& t) {
      return categorical_crossentropy(o, t, from_logits);
    };
  }
  if (canon == "binary_crossentropy") {
    return [from_logits](const Tensor& o, const Tensor& t) {
      return binary_crossentropy(o, t, from_logits);
    };
  }
  IGNIS_CHECK(!from_logits, "compile: from_logits applies to the cross-entropies, not to '", canon,
              "'");
  if (canon == "mean_squared_error") return mean_squared_error;
  if (canon == "mean_absolute_error") return mean_absolute_error;
  if (canon == "huber") return huber;
  IGNIS_FAIL("compile: unknown loss '", canon, "'");
}

// ---- metrics

namespace {

double sparse_accuracy(const Tensor& output, const Tensor& target) {
  Tensor labels = target;
  if (labels.dim() == output.dim() && labels.size(-1) == 1) labels = labels.squeeze(-1);
  IGNIS_CHECK(labels.dim() + 1 == output.dim(), "sparse_categorical_accuracy: labels of shape ",
              target.sizes(), " do not match the output's shape ", output.sizes());
  return eq(argmax(output, -1), labels.to(kInt64)).to(kFloat64).mean().item<double>();
}

double categorical_accuracy(const Tensor& output, const Tensor& target) {
  IGNIS_CHECK(target.sizes().equals(output.sizes()), "categorical_accuracy: target of shape ",
              target.sizes(), " does not match the output's shape ", output.sizes());
  return eq(argmax(output, -1), argmax(target, -1)).to(kFloat64).mean().item<double>();
}

double binary_accuracy(const Tensor& output, const Tensor& target, double threshold) {
  Tensor t = same_shape_target("binary_accuracy", output, target);
  return eq(gt(output, threshold).to(t.dtype()), t).to(kFloat64).mean().item<double>();
}

// Keras 3's rule for "accuracy" when the loss does not say: binary when the output has one
// column, sparse when the target has a lower rank (or one column against several), else
// categorical.
double shape_accuracy(const Tensor& output, const Tensor& target) {
  const int64_t last = output.dim() > 0 ? output.size(-1) : 1;
  if (last == 1 || output.dim() <= 1) return binary_accuracy(output, target, 0.5);
  const bool sparse = target.dim() < output.dim() || (target.size(-1) == 1 && last > 1);
  return sparse ? sparse_accuracy(output, target) : categorical_accuracy(output, target);
}

}  // namespace

Metric named_metric(const std::string& name, const LossSpec& loss) {
  const std::string l = lower(name);
  using Fn = std::function<double(const Tensor&, const Tensor&)>;
  auto make = [&](Fn f) { return Metric{name, std::move(f)}; };
  const double threshold = loss.from_logits() ? 0.0 : 0.5;  // a logit of 0 is probability 0.5
  if (l == "accuracy" || l == "acc") {
    const std::string& canon = loss.custom() ? std::string() : loss.name();
    if (canon == "sparse_categorical_crossentropy") return make(sparse_accuracy);
    if (canon == "categorical_crossentropy") return make(categorical_accuracy);
    if (canon == "binary_crossentropy") {
      return make([threshold](const Tensor& o, const Tensor& t) {
        return binary_accuracy(o, t, threshold);
      });
    }
    return make(shape_accuracy);
  }
  if (l == "sparse_categorical_accuracy") return make(sparse_accuracy);
  if (l == "categorical_accuracy") return make(categorical_accuracy);
  if (l == "binary_accuracy") {
    return make(
        [threshold](const Tensor& o, const Tensor& t) { return binary_accuracy(o, t, threshold); });
  }
  if (l == "mse" || l == "mean_squared_error") {
    return make([](const Tensor& o, const Tensor& t) {
      return losses::mean_squared_error(o, t).item<double>();
    });
  }
  if (l == "mae" || l == "mean_absolute_error") {
    return make([](const Tensor& o, const Tensor& t) {
      return losses::mean_absolute_error(o, t).item<double>();
    });
  }
  IGNIS_FAIL("compile: unknown metric '", name, "' (known: ", join(MetricSpec::names()),
             "; or pass a train::Metric{name, fn})");
}

}  // namespace detail

std::vector<std::string> LossSpec::names() {
  std::vector<std::string> out;
  for (const auto& [alias, canon] : detail::loss_aliases()) out.push_back(alias);
  return out;
}

std::vector<std::string> MetricSpec::names() {
  return {"accuracy",           "acc", "sparse_categorical_accuracy", "categorical_accuracy",
          "binary_accuracy",    "mse", "mean_squared_error",          "mae",
          "mean_absolute_error"};
}

// ---- Logs and KerasHistory

double Logs::at(const std::string& name) const {
  for (const auto& [n, v] : items_) {
    if (n == name) return v;
  }
  std::vector<std::string> names;
  for (const auto& [n, v] : items_) names.push_back(n);
  IGNIS_FAIL("Logs: no value named '", name, "' (there are: ", detail::join(names), ")");
}

bool Logs::contains(const std::string& name) const {
  return std::any_of(items_.begin(), items_.end(), [&](const auto& p) { return p.first == name; });
}

void Logs::set(const std::string& name, double value) {
  for (auto& [n, v] : items_) {
    if (n == name) {
      v = value;
      return;
    }
  }
  items_.emplace_back(name, value);
}

std::string Logs::str() const {
  std::string out;
  char buf[64];
  for (const auto& [n, v] : items_) {
    std::snprintf(buf, sizeof(buf), "%.4f", v);
    out += (out.empty() ? "" : " - ") + n + ": " + buf;
  }
  return out;
}

const std::vector<double>& KerasHistory::operator[](const std::string& name) const {
  for (const auto& [n, v] : history) {
    if (n == name) return v;
  }
  std::vector<std::string> names;
  for (const auto& [n, v] : history) names.push_back(n);
  IGNIS_FAIL("KerasHistory: no values named '", name, "' (there are: ", detail::join(names), ")");
}

bool KerasHistory::contains(const std::string& name) const {
  return std::any_of(history.begin(), history.end(),
                     [&](const auto& p) { return p.first == name; });
}

}  // namespace ignis::train
