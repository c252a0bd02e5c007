// What the autograd engine (and later the data-parallel reducer) calls to put its own intervals
// into an active profile: a backward node, a bucket's all-reduce.
#pragma once

#include <string>

namespace ignis::profiler::detail {

/// True while a Profile records (one relaxed atomic load).
bool enabled();
void begin_interval();
void end_interval(std::string name, const char* category);

/// An interval for its scope when a profile is active: `Scope s(enabled(), node->name(), ...)`.
class Scope {
 public:
  template <class NameFn>
  Scope(const char* category, NameFn&& name) : category_(category) {
    if (enabled()) {
      name_ = name();
      begin_interval();
      on_ = true;
    }
  }
  ~Scope() {
    if (on_) end_interval(std::move(name_), category_);
  }
  Scope(const Scope&) = delete;
  Scope& operator=(const Scope&) = delete;

 private:
  const char* category_;
  std::string name_;
  bool on_ = false;
};

}  // namespace ignis::profiler::detail
