// IGNIS_WARN_ONCE("op: ", a, ...): raises the warning the first time this line runs in the
// process (like PyTorch's TORCH_WARN_ONCE and Python's default warning filter).
#pragma once

#include <atomic>
#include <sstream>

#include "ignis/warning.h"

#define IGNIS_WARN_ONCE(...)                                                     \
  do {                                                                           \
    static std::atomic<bool> ignis_warned_{false};                               \
    if (!ignis_warned_.exchange(true, std::memory_order_relaxed)) {              \
      std::ostringstream ignis_warn_os_;                                         \
      ::ignis::detail::append_all(ignis_warn_os_, __VA_ARGS__);                  \
      ::ignis::warn(ignis_warn_os_.str());                                       \
    }                                                                            \
  } while (0)

namespace ignis::detail {
template <class... Args>
void append_all(std::ostringstream& os, const Args&... args) {
  (os << ... << args);
}
/// Raises `message` the first time `key` is given in the process (a warning shared by several
/// ops, raised once per op).
void warn_once_per_key(const std::string& key, const std::string& message);
}  // namespace ignis::detail
