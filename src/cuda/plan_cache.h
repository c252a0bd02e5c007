// A cache of the choices that CUDA libraries make per problem shape: cuDNN's convolution
// algorithm (cuda/conv.cu) and cuBLASLt's matmul algorithm (cuda/blaslt.cpp). Their heuristics
// cost milliseconds per call in cuDNN 9 and tens of microseconds in cuBLASLt, more than the
// kernels themselves for most layers, so they run once per distinct problem (as PyTorch's
// cudnn algorithm cache and cuBLASLt's own matmul plans do). The key is a list of integers that
// the caller builds from everything the choice depends on (device, dtype, layout, sizes, strides,
// alignments, options); values are copied in and out under a lock, so any thread may share them.
#pragma once

#include <cstdint>
#include <map>
#include <mutex>
#include <optional>
#include <vector>

namespace ignis::cuda::detail {

template <class Value>
class PlanCache {
 public:
  using Key = std::vector<int64_t>;

  std::optional<Value> find(const Key& key) const {
    std::lock_guard<std::mutex> lock(mu_);
    const auto it = map_.find(key);
    if (it == map_.end()) return std::nullopt;
    return it->second;
  }

  void put(const Key& key, const Value& value) {
    std::lock_guard<std::mutex> lock(mu_);
    // A bound on memory for programs that see endless new shapes: start again when full.
    if (map_.size() >= kMaxEntries) map_.clear();
    map_[key] = value;
  }

  size_t size() const {
    std::lock_guard<std::mutex> lock(mu_);
    return map_.size();
  }

 private:
  static constexpr size_t kMaxEntries = 8192;
  mutable std::mutex mu_;
  std::map<Key, Value> map_;
};

}  // namespace ignis::cuda::detail
