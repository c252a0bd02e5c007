// What the autograd engine (and later the data-parallel reducer) calls to put its own intervals
// into an active profile: a backward node, a bucket's all-reduce.
#pragma once

#include <chrono>
#include <string>

namespace ignis::profiler::detail {

/// True while a Profile records (one relaxed atomic load).
bool enabled();
void begin_interval();
void end_interval(std::string name, const char* category);

/// Records a finished interval [start, end) on a named track of its own (a row of the Chrome
/// trace, e.g. "communication"), from any thread: for work that starts on one thread and ends on
/// another, such as a collective from its post to its completion. Intervals that began before the
/// profile started are clipped to its start. Not counted as CPU time in the table (self 0).
void record_track_interval(std::string name, const char* category, const std::string& track,
                           std::chrono::steady_clock::time_point start,
                           std::chrono::steady_clock::time_point end, std::string args = "");

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
