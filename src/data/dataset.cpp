// Datasets, transforms and samplers.
#include <algorithm>
#include <numeric>

#include "ignis/autograd.h"
#include "ignis/data.h"
#include "ignis/generator.h"
#include "ignis/ops.h"

namespace ignis::data {

Example Dataset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<Tensor> xs, ys;
  xs.reserve(indices.size());
  ys.reserve(indices.size());
  for (int64_t i : indices) {
    Example e = get(i);
    xs.push_back(e.data);
    if (e.target.defined()) ys.push_back(e.target);
  }
  IGNIS_CHECK(ys.empty() || ys.size() == xs.size(), "get_batch: some samples have targets and "
              "some do not");
  return {stack(xs), ys.empty() ? Tensor() : stack(ys)};
}

namespace {
void check_index(int64_t i, int64_t n, const char* who) {
  IGNIS_CHECK(i >= 0 && i < n, who, ": index ", i, " is out of range for a dataset of size ", n);
}
Tensor index_tensor(const std::vector<int64_t>& idx) {
  return from_blob(const_cast<int64_t*>(idx.data()), {static_cast<int64_t>(idx.size())}, kInt64);
}
}  // namespace

TensorDataset::TensorDataset(Tensor data, Tensor targets)
    : data_(std::move(data)), targets_(std::move(targets)) {
  IGNIS_CHECK(data_.defined() && data_.dim() >= 1, "TensorDataset: data must have at least one "
              "dimension");
  IGNIS_CHECK(!targets_.defined() || (targets_.dim() >= 1 && targets_.size(0) == data_.size(0)),
              "TensorDataset: data has ", data_.size(0), " samples but targets have shape ",
              targets_.defined() ? targets_.sizes() : IntArrayRef());
}

Example TensorDataset::get(int64_t i) const {
  check_index(i, size(), "TensorDataset");
  return {data_[i], targets_.defined() ? targets_[i] : Tensor()};
}

Example TensorDataset::get_batch(const std::vector<int64_t>& indices) const {
  for (int64_t i : indices) check_index(i, size(), "TensorDataset");
  NoGradGuard ng;
  Tensor idx = index_tensor(indices);
  return {index_select(data_, 0, idx),
          targets_.defined() ? index_select(targets_, 0, idx) : Tensor()};
}

Subset::Subset(std::shared_ptr<Dataset> base, std::vector<int64_t> indices)
    : base_(std::move(base)), indices_(std::move(indices)) {
  for (int64_t i : indices_) check_index(i, base_->size(), "Subset");
}

Example Subset::get(int64_t i) const {
  check_index(i, size(), "Subset");
  return base_->get(indices_[i]);
}

Example Subset::get_batch(const std::vector<int64_t>& indices) const {
  std::vector<int64_t> mapped;
  mapped.reserve(indices.size());
  for (int64_t i : indices) {
    check_index(i, size(), "Subset");
    mapped.push_back(indices_[i]);
  }
  return base_->get_batch(mapped);
}

Example MapDataset::get(int64_t i) const {
  Example e = base_->get(i);
  e.data = transform_(e.data);
  return e;
}

Example MapDataset::get_batch(const std::vector<int64_t>& indices) const {
  Example e = base_->get_batch(indices);
  e.data = transform_(e.data);
  return e;
}

Transform transforms::Normalize(std::vector<double> mean, std::vector<double> std) {
  IGNIS_CHECK(!mean.empty() && mean.size() == std.size(), "Normalize: mean and std must have the "
              "same, non-zero length (got ", mean.size(), " and ", std.size(), ")");
  for (double s : std) IGNIS_CHECK(s != 0, "Normalize: std must be non-zero");
  return [mean = std::move(mean), std = std::move(std)](const Tensor& x) {
    Tensor xf = x.is_floating_point() ? x : x.to(kFloat32);
    if (mean.size() == 1) return (xf - mean[0]) / std[0];
    // Per channel: images [C, H, W] / [N, C, H, W] use dim -3, features [C] / [N, C] dim -1.
    const int64_t c = static_cast<int64_t>(mean.size());
    const int64_t cdim = xf.dim() >= 3 ? xf.dim() - 3 : xf.dim() - 1;
    IGNIS_CHECK(cdim >= 0 && xf.size(cdim) == c, "Normalize: ", c, " channels but input "
                "of shape ", xf.sizes());
    Shape shape(static_cast<size_t>(xf.dim()), 1);
    shape[cdim] = c;
    Tensor m = tensor(mean, xf.dtype()).reshape(shape);
    Tensor s = tensor(std, xf.dtype()).reshape(shape);
    return (xf - m) / s;
  };
}

Transform transforms::Lambda(std::function<Tensor(const Tensor&)> fn) { return fn; }

Transform transforms::Compose(std::vector<Transform> ts) {
  return [ts = std::move(ts)](const Tensor& x) {
    Tensor y = x;
    for (const auto& t : ts) y = t(y);
    return y;
  };
}

std::vector<int64_t> SequentialSampler::indices(int64_t) const {
  std::vector<int64_t> v(static_cast<size_t>(n_));
  std::iota(v.begin(), v.end(), 0);
  return v;
}

namespace {
// Fisher-Yates driven by the counter-based generator: a pure function of (seed, epoch).
void shuffle(std::vector<int64_t>& v, uint64_t seed, int64_t epoch) {
  const uint64_t s = Generator::bits(seed, static_cast<uint64_t>(epoch) * 0x9E3779B97F4A7C15ull);
  for (size_t i = v.size(); i > 1; --i) {
    const uint64_t r = Generator::bits(s, i);
    std::swap(v[i - 1], v[static_cast<size_t>(r % i)]);
  }
}
}  // namespace

std::vector<int64_t> RandomSampler::indices(int64_t epoch) const {
  std::vector<int64_t> v(static_cast<size_t>(n_));
  std::iota(v.begin(), v.end(), 0);
  shuffle(v, seed_, epoch);
  return v;
}

std::vector<int64_t> SubsetRandomSampler::indices(int64_t epoch) const {
  std::vector<int64_t> v = idx_;
  if (seed_) shuffle(v, *seed_, epoch);
  return v;
}

}  // namespace ignis::data
