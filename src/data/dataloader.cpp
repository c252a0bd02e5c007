// The DataLoader: batches from a sampler; worker threads prefetch them into a bounded reorder
// buffer, and the consumer takes them in order, so the batches are the same whatever
// num_workers is.
#include "data/prefetch.h"
#include "ignis/cuda.h"
#include "ignis/data.h"

namespace ignis::data {

struct DataLoader::Epoch {
  std::vector<std::vector<int64_t>> batches;
  std::unique_ptr<detail::Prefetcher<Example>> prefetch;  // destroyed first: joins the workers
};

DataLoader::DataLoader(std::shared_ptr<Dataset> dataset, DataLoaderOptions options,
                       std::shared_ptr<Sampler> sampler)
    : dataset_(std::move(dataset)), opts_(options), sampler_(std::move(sampler)) {
  IGNIS_CHECK(dataset_ != nullptr, "DataLoader: dataset is null");
  IGNIS_CHECK(opts_.batch_size > 0, "DataLoader: batch_size must be positive, got ",
              opts_.batch_size);
  IGNIS_CHECK(opts_.num_workers >= 0, "DataLoader: num_workers must be >= 0, got ",
              opts_.num_workers);
  IGNIS_CHECK(opts_.prefetch_factor > 0, "DataLoader: prefetch_factor must be positive");
  IGNIS_CHECK(!opts_.pin_memory || cuda::is_available(),
              "DataLoader: pin_memory needs a GPU: ", cuda::unavailable_reason());
  IGNIS_CHECK(!(sampler_ && opts_.shuffle), "DataLoader: sampler option is mutually exclusive "
              "with shuffle");
  if (!sampler_) {
    if (opts_.shuffle) {
      sampler_ = std::make_shared<RandomSampler>(dataset_->size(), opts_.seed);
    } else {
      sampler_ = std::make_shared<SequentialSampler>(dataset_->size());
    }
  }
}

DataLoader::~DataLoader() = default;

int64_t DataLoader::size() const {
  const int64_t n = sampler_->size();
  return opts_.drop_last ? n / opts_.batch_size : (n + opts_.batch_size - 1) / opts_.batch_size;
}

std::vector<std::vector<int64_t>> DataLoader::batches(int64_t epoch) const {
  return detail::split_batches(sampler_->indices(epoch), opts_.batch_size, opts_.drop_last);
}

DataLoader::Iterator DataLoader::begin() {
  current_.reset();  // joins the workers of an abandoned epoch
  auto ep = std::make_unique<Epoch>();
  ep->batches = batches(epoch_++);
  const int64_t n = static_cast<int64_t>(ep->batches.size());
  const Epoch* e = ep.get();
  ep->prefetch = std::make_unique<detail::Prefetcher<Example>>(
      n, opts_.num_workers, opts_.prefetch_factor,
      [this, e](int64_t i) {
        Example b = dataset_->get_batch(e->batches[static_cast<size_t>(i)]);
        if (opts_.pin_memory) {
          if (b.data.defined()) b.data = b.data.pin_memory();
          if (b.target.defined()) b.target = b.target.pin_memory();
        }
        return b;
      });
  current_ = std::move(ep);
  return Iterator(this, n == 0 ? -1 : 0);
}

DataLoader::Iterator DataLoader::end() { return Iterator(this, -1); }

Example& DataLoader::fetch(int64_t pos) { return current_->prefetch->take(pos); }

Example& DataLoader::Iterator::operator*() {
  IGNIS_CHECK(pos_ >= 0, "DataLoader: dereferencing the end iterator");
  return loader_->fetch(pos_);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (pos_ < 0) return *this;
  if (loader_->current_->prefetch->taken() <= pos_) loader_->fetch(pos_);  // skipped unread
  ++pos_;
  if (pos_ >= static_cast<int64_t>(loader_->current_->batches.size())) {
    pos_ = -1;
    loader_->current_.reset();
  }
  return *this;
}

}  // namespace ignis::data
