// The machinery the loaders share (DataLoader, GraphDataLoader): the batches of an epoch from a
// sampler's indices, and worker threads that make them ahead of the consumer into a bounded
// reorder buffer. The consumer takes batches in order, so an epoch's batches are the same
// whatever the number of workers; an exception thrown while making batch i is rethrown when the
// consumer takes batch i.
#pragma once

#include <omp.h>

#include <algorithm>
#include <condition_variable>
#include <cstdint>
#include <exception>
#include <functional>
#include <mutex>
#include <optional>
#include <thread>
#include <vector>

namespace ignis::data::detail {

/// Splits an epoch's sample indices into batches of `batch_size` (the last one shorter, or
/// dropped with drop_last).
inline std::vector<std::vector<int64_t>> split_batches(const std::vector<int64_t>& idx,
                                                       int64_t batch_size, bool drop_last) {
  std::vector<std::vector<int64_t>> out;
  const size_t b = static_cast<size_t>(batch_size);
  for (size_t i = 0; i < idx.size(); i += b) {
    const size_t e = std::min(idx.size(), i + b);
    if (e - i < b && drop_last) break;
    out.emplace_back(idx.begin() + static_cast<std::ptrdiff_t>(i),
                     idx.begin() + static_cast<std::ptrdiff_t>(e));
  }
  return out;
}

/// Makes batches 0..n-1 with `make(i)`: on `workers` threads, each running at most
/// workers * prefetch_factor batches ahead of the consumer, or on the consumer's thread when
/// workers is 0. The destructor stops and joins the workers (an abandoned epoch).
template <class T>
class Prefetcher {
 public:
  Prefetcher(int64_t n, int workers, int prefetch_factor, std::function<T(int64_t)> make)
      : n_(n),
        make_(std::move(make)),
        slots_(static_cast<size_t>(n)),
        errors_(static_cast<size_t>(n)),
        window_(int64_t{workers} * prefetch_factor) {
    for (int w = 0; w < workers; ++w) threads_.emplace_back([this] { work(); });
  }
  ~Prefetcher() {
    {
      std::lock_guard<std::mutex> g(mu_);
      stop_ = true;
    }
    space_.notify_all();
    for (auto& t : threads_) t.join();
  }
  Prefetcher(const Prefetcher&) = delete;
  Prefetcher& operator=(const Prefetcher&) = delete;

  int64_t size() const { return n_; }
  /// Batches taken so far (the next one to take is batch taken()).
  int64_t taken() const { return consumed_; }
  /// Batch `pos`, taken in increasing order; taking the last batch again returns it again.
  T& take(int64_t pos) {
    if (pos < consumed_) return current_;
    const size_t i = static_cast<size_t>(pos);
    if (threads_.empty()) {
      current_ = make_(pos);
    } else {
      std::unique_lock<std::mutex> g(mu_);
      ready_.wait(g, [&] { return slots_[i].has_value() || errors_[i] != nullptr; });
      if (errors_[i]) std::rethrow_exception(errors_[i]);  // again on every take of it
      current_ = std::move(*slots_[i]);
      slots_[i].reset();
    }
    {
      std::lock_guard<std::mutex> g(mu_);
      consumed_ = pos + 1;
    }
    space_.notify_all();
    return current_;
  }

 private:
  void work() {
    omp_set_num_threads(1);  // workers share the cores with the training loop
    for (;;) {
      int64_t i;
      {
        std::unique_lock<std::mutex> g(mu_);
        space_.wait(g, [&] { return stop_ || next_ >= n_ || next_ < consumed_ + window_; });
        if (stop_ || next_ >= n_) return;
        i = next_++;
      }
      std::optional<T> made;
      std::exception_ptr err;
      try {
        made = make_(i);
      } catch (...) {
        err = std::current_exception();
      }
      {
        std::lock_guard<std::mutex> g(mu_);
        slots_[static_cast<size_t>(i)] = std::move(made);
        errors_[static_cast<size_t>(i)] = err;
      }
      ready_.notify_all();
    }
  }

  const int64_t n_;
  std::function<T(int64_t)> make_;
  std::vector<std::optional<T>> slots_;
  std::vector<std::exception_ptr> errors_;
  T current_{};
  int64_t consumed_ = 0;  // batches handed to the consumer
  int64_t next_ = 0;      // next batch a worker claims
  const int64_t window_;  // how far ahead of the consumer workers may run
  bool stop_ = false;
  std::mutex mu_;
  std::condition_variable ready_, space_;
  std::vector<std::thread> threads_;  // last: started once everything above exists
};

}  // namespace ignis::data::detail
