// ignis::data: datasets, samplers, transforms and a threaded DataLoader.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <optional>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::data {

/// One sample, or a batch of them (data stacked along a new first dim).
struct Example {
  Tensor data;
  Tensor target;
};

/// A map-style dataset: size() samples, get(i) returns sample i.
class Dataset {
 public:
  virtual ~Dataset() = default;
  virtual int64_t size() const = 0;
  virtual Example get(int64_t index) const = 0;
  /// The samples at `indices` stacked into a batch. The default stacks get(i); datasets that
  /// hold whole tensors override it with one gather.
  virtual Example get_batch(const std::vector<int64_t>& indices) const;
};

/// Samples are rows of `data` and `targets` (first dims must agree).
class TensorDataset : public Dataset {
 public:
  TensorDataset(Tensor data, Tensor targets);
  int64_t size() const override { return data_.size(0); }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;
  const Tensor& data() const { return data_; }
  const Tensor& targets() const { return targets_; }

 private:
  Tensor data_, targets_;
};

/// A view of another dataset restricted to some indices.
class Subset : public Dataset {
 public:
  Subset(std::shared_ptr<Dataset> base, std::vector<int64_t> indices);
  int64_t size() const override { return static_cast<int64_t>(indices_.size()); }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<Dataset> base_;
  std::vector<int64_t> indices_;
};

/// A function applied to each batch's data (or each sample's, on a MapDataset).
using Transform = std::function<Tensor(const Tensor&)>;
namespace transforms {
/// (x - mean) / std, per channel when mean/std have several entries (channel dim 1 of a batch).
Transform Normalize(std::vector<double> mean, std::vector<double> std);
/// Any function of the data.
Transform Lambda(std::function<Tensor(const Tensor&)> fn);
/// Applies transforms in order.
Transform Compose(std::vector<Transform> ts);
/// Image transforms (src/data/transforms_image.cpp) take an image [C, H, W] or a batch
/// [N, C, H, W] of any dtype and draw independently for each sample. Draw k of a transform is a
/// pure function of (seed, k), counting samples over all calls: the same seed and the same
/// sequence of inputs give the same outputs (a DataLoader with at most one worker calls them in
/// batch order). Without a seed, one is taken from the default generator (manual_seed).
/// Zero-pads each side by `padding` and crops a random size x size window.
Transform RandomCrop(int64_t size, int64_t padding = 0, std::optional<uint64_t> seed = {});
/// Mirrors each sample left-right (reverses W) with probability p.
Transform RandomHorizontalFlip(double p = 0.5, std::optional<uint64_t> seed = {});
}  // namespace transforms

/// A dataset whose data passes through a transform (applied per batch in get_batch).
class MapDataset : public Dataset {
 public:
  MapDataset(std::shared_ptr<Dataset> base, Transform t)
      : base_(std::move(base)), transform_(std::move(t)) {}
  int64_t size() const override { return base_->size(); }
  Example get(int64_t index) const override;
  Example get_batch(const std::vector<int64_t>& indices) const override;

 private:
  std::shared_ptr<Dataset> base_;
  Transform transform_;
};

/// The order in which an epoch visits the samples.
class Sampler {
 public:
  virtual ~Sampler() = default;
  /// The indices of epoch `epoch` (samplers that shuffle reseed from (seed, epoch)).
  virtual std::vector<int64_t> indices(int64_t epoch) const = 0;
  virtual int64_t size() const = 0;
};

class SequentialSampler : public Sampler {
 public:
  explicit SequentialSampler(int64_t n) : n_(n) {}
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
};

/// A permutation of [0, n) per epoch, a pure function of (seed, epoch).
class RandomSampler : public Sampler {
 public:
  RandomSampler(int64_t n, uint64_t seed) : n_(n), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return n_; }

 private:
  int64_t n_;
  uint64_t seed_;
};

/// Visits only the given indices (shuffled per epoch when seed is set).
class SubsetRandomSampler : public Sampler {
 public:
  SubsetRandomSampler(std::vector<int64_t> indices, std::optional<uint64_t> seed = std::nullopt)
      : idx_(std::move(indices)), seed_(seed) {}
  std::vector<int64_t> indices(int64_t epoch) const override;
  int64_t size() const override { return static_cast<int64_t>(idx_.size()); }

 private:
  std::vector<int64_t> idx_;
  std::optional<uint64_t> seed_;
};

struct DataLoaderOptions {
  int64_t batch_size = 1;
  bool shuffle = false;
  bool drop_last = false;
  /// Worker threads that prefetch batches; 0 loads on the calling thread.
  int num_workers = 0;
  /// Batches each worker may have ready ahead of the consumer.
  int prefetch_factor = 2;
  /// Seed of the shuffle (epoch e uses (seed, e)); the same batches whatever num_workers is.
  uint64_t seed = 0;
  /// Batches come in page-locked memory (Tensor::pin_memory, done by the workers), so that
  /// `batch.data.to(Device(kCUDA), true)` returns before its copy ends. Needs a GPU.
  bool pin_memory = false;
  DataLoaderOptions& batch(int64_t b) { batch_size = b; return *this; }
};

/// Iterates a dataset in batches. Each `for (auto& batch : loader)` is one epoch; the epoch
/// counter advances per pass (set_epoch sets it, e.g. when resuming).
class DataLoader {
 public:
  DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
             std::shared_ptr<Sampler> sampler = nullptr);
  ~DataLoader();
  DataLoader(const DataLoader&) = delete;
  DataLoader& operator=(const DataLoader&) = delete;

  class Iterator;
  Iterator begin();
  Iterator end();
  /// Batches per epoch.
  int64_t size() const;
  int64_t epoch() const { return epoch_; }
  void set_epoch(int64_t e) { epoch_ = e; }
  const DataLoaderOptions& options() const { return opts_; }
  const Dataset& dataset() const { return *dataset_; }
  /// The sample indices of each batch of epoch `epoch` (what the iteration will load).
  std::vector<std::vector<int64_t>> batches(int64_t epoch) const;

  class Iterator {
   public:
    Example& operator*();
    Example* operator->() { return &**this; }
    Iterator& operator++();
    bool operator!=(const Iterator& o) const { return pos_ != o.pos_; }
    bool operator==(const Iterator& o) const { return pos_ == o.pos_; }

   private:
    friend class DataLoader;
    Iterator(DataLoader* l, int64_t pos) : loader_(l), pos_(pos) {}
    DataLoader* loader_;
    int64_t pos_;
  };

 private:
  struct Epoch;  // the state of one pass: batch list, workers, reorder buffer
  Example& fetch(int64_t pos);
  void finish_epoch();
  std::shared_ptr<Dataset> dataset_;
  DataLoaderOptions opts_;
  std::shared_ptr<Sampler> sampler_;
  int64_t epoch_ = 0;
  std::unique_ptr<Epoch> current_;
};

}  // namespace ignis::data
