// A thread-safe LRU map from string keys to shared values: oneDNN's primitives per shape, graph
// mode's parsed programs and their backward programs per text. Bounded, so a process that meets
// many distinct keys (shapes, loaded graphs) keeps only the most recently used.
#pragma once

#include <cstdint>
#include <list>
#include <memory>
#include <mutex>
#include <string>
#include <unordered_map>
#include <utility>

namespace ignis {

/// A thread-safe LRU map key -> shared_ptr<const V>. Values are shared, so an entry evicted while
/// another thread runs it stays alive until that thread is done.
template <class V>
class LruCache {
 public:
  explicit LruCache(size_t capacity) : capacity_(capacity) {}

  /// The value for `key`, made by `make()` (outside the lock: creation may be slow) on a miss.
  template <class Make>
  std::shared_ptr<const V> get(const std::string& key, Make&& make) {
    {
      std::lock_guard<std::mutex> lock(mu_);
      auto it = map_.find(key);
      if (it != map_.end()) {
        order_.splice(order_.begin(), order_, it->second);
        ++hits_;
        return it->second->second;
      }
    }
    auto value = std::make_shared<const V>(make());
    std::lock_guard<std::mutex> lock(mu_);
    ++misses_;
    auto it = map_.find(key);
    if (it != map_.end()) return it->second->second;  // made by another thread meanwhile
    order_.emplace_front(key, value);
    map_[key] = order_.begin();
    while (order_.size() > capacity_) {
      map_.erase(order_.back().first);
      order_.pop_back();
    }
    return value;
  }
  int64_t hits() const {
    std::lock_guard<std::mutex> lock(mu_);
    return hits_;
  }
  int64_t misses() const {
    std::lock_guard<std::mutex> lock(mu_);
    return misses_;
  }
  int64_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return static_cast<int64_t>(order_.size());
  }
  void clear() {
    std::lock_guard<std::mutex> lock(mu_);
    map_.clear();
    order_.clear();
    hits_ = misses_ = 0;
  }

 private:
  using Item = std::pair<std::string, std::shared_ptr<const V>>;
  size_t capacity_;
  mutable std::mutex mu_;
  std::list<Item> order_;  // most recently used first
  std::unordered_map<std::string, typename std::list<Item>::iterator> map_;
  int64_t hits_ = 0, misses_ = 0;
};

}  // namespace ignis
