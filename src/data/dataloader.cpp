// The DataLoader: batches from a sampler; worker threads prefetch them into a bounded reorder
// buffer, and the consumer takes them in order, so the batches are the same whatever
// num_workers is.
#include <omp.h>

#include <condition_variable>
#include <exception>
#include <mutex>
#include <optional>
#include <thread>

#include "ignis/data.h"

namespace ignis::data {

struct DataLoader::Epoch {
  std::vector<std::vector<int64_t>> batches;
  std::vector<std::optional<Example>> slots;
  std::vector<std::exception_ptr> errors;
  Example current;
  int64_t consumed = 0;   // batches handed to the consumer
  int64_t next = 0;       // next batch a worker claims
  int64_t window = 1;     // how far ahead of the consumer workers may run
  bool stop = false;
  std::mutex mu;
  std::condition_variable ready, space;
  std::vector<std::thread> workers;

  ~Epoch() {
    {
      std::lock_guard<std::mutex> g(mu);
      stop = true;
    }
    space.notify_all();
    for (auto& t : workers) t.join();
  }
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
  std::vector<int64_t> idx = sampler_->indices(epoch);
  std::vector<std::vector<int64_t>> out;
  const size_t b = static_cast<size_t>(opts_.batch_size);
  for (size_t i = 0; i < idx.size(); i += b) {
    const size_t e = std::min(idx.size(), i + b);
    if (e - i < b && opts_.drop_last) break;
    out.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(i),
                     idx.begin() + static_cast<std::ptrdiff_t>(e));
  }
  return out;
}

DataLoader::Iterator DataLoader::begin() {
  current_.reset();  // joins the workers of an abandoned epoch
  auto ep = std::make_unique<Epoch>();
  ep->batches = batches(epoch_++);
  const int64_t n = static_cast<int64_t>(ep->batches.size());
  ep->slots.resize(static_cast<size_t>(n));
  ep->errors.resize(static_cast<size_t>(n));
  ep->window = static_cast<int64_t>(opts_.num_workers) * opts_.prefetch_factor;
  Epoch* e = ep.get();
  for (int w = 0; w < opts_.num_workers; ++w) {
    e->workers.emplace_back([this, e, n] {
      omp_set_num_threads(1);  // workers share the cores with the training loop
      for (;;) {
        int64_t i;
        {
          std::unique_lock<std::mutex> g(e->mu);
          e->space.wait(g, [&] { return e->stop || e->next >= n || e->next < e->consumed + e->window; });
          if (e->stop || e->next >= n) return;
          i = e->next++;
        }
        std::optional<Example> ex;
        std::exception_ptr err;
        try {
          ex = dataset_->get_batch(e->batches[static_cast<size_t>(i)]);
        } catch (...) {
          err = std::current_exception();
        }
        {
          std::lock_guard<std::mutex> g(e->mu);
          e->slots[static_cast<size_t>(i)] = std::move(ex);
          e->errors[static_cast<size_t>(i)] = err;
        }
        e->ready.notify_all();
      }
    });
  }
  current_ = std::move(ep);
  return Iterator(this, n == 0 ? -1 : 0);
}

DataLoader::Iterator DataLoader::end() { return Iterator(this, -1); }

Example& DataLoader::fetch(int64_t pos) {
  Epoch& e = *current_;
  if (pos < e.consumed) return e.current;  // already fetched
  const size_t i = static_cast<size_t>(pos);
  if (opts_.num_workers == 0) {
    e.current = dataset_->get_batch(e.batches[i]);
  } else {
    std::unique_lock<std::mutex> g(e.mu);
    e.ready.wait(g, [&] { return e.slots[i].has_value() || e.errors[i] != nullptr; });
    if (e.errors[i]) std::rethrow_exception(e.errors[i]);
    e.current = std::move(*e.slots[i]);
    e.slots[i].reset();
  }
  {
    std::lock_guard<std::mutex> g(e.mu);
    e.consumed = pos + 1;
  }
  e.space.notify_all();
  return e.current;
}

Example& DataLoader::Iterator::operator*() {
  IGNIS_CHECK(pos_ >= 0, "DataLoader: dereferencing the end iterator");
  return loader_->fetch(pos_);
}

DataLoader::Iterator& DataLoader::Iterator::operator++() {
  if (pos_ < 0) return *this;
  if (loader_->current_->consumed <= pos_) loader_->fetch(pos_);  // skipped without reading
  ++pos_;
  if (pos_ >= static_cast<int64_t>(loader_->current_->batches.size())) {
    pos_ = -1;
    loader_->current_.reset();
  }
  return *this;
}

}  // namespace ignis::data
