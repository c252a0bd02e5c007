// The profiler: an interposer on the op registry's call path that records every op (with its
// input shapes, self and total CPU time and the bytes it left allocated), every backward node
// the autograd engine runs, and user ranges, like torch.profiler:
//
//   {
//     profiler::Profile prof;
//     { profiler::Range r("forward"); loss = criterion(model->forward(x), y); }
//     loss.backward();
//     std::cout << prof.table();              // key_averages().table(), by total time
//     prof.export_chrome_trace("trace.json");  // opens in Perfetto and chrome://tracing
//   }
//
// Ops are recorded on the thread that created the Profile (the thread an ignis training loop
// and its backward run on); ranges and backward nodes on any thread while it is active. With
// no profile active the cost per op is the registry's one thread-local check.
#pragma once

#include <cstdint>
#include <string>
#include <vector>

namespace ignis::profiler {

/// One timed interval.
struct Event {
  std::string name;      // "add.Tensor", "MulBackward" (a backward node), or a range's name
  std::string category;  // "op", "backward" or "range"
  int64_t start_ns = 0;  // since the profile started
  int64_t duration_ns = 0;
  int64_t self_ns = 0;       // duration minus the events nested directly inside it
  int64_t bytes = 0;         // net bytes the interval left allocated on the CPU allocator
  uint64_t thread = 0;       // a small per-thread number (1 = the first thread seen)
  int depth = 0;             // nesting depth on its thread
  std::string input_shapes;  // "[[2, 3], [3]]" for ops
};

/// Per-name totals, as torch.profiler's key_averages().
struct Summary {
  std::string name;
  std::string category;
  int64_t calls = 0;
  int64_t self_ns = 0;
  int64_t total_ns = 0;
  int64_t bytes = 0;
};

/// Records while it lives (or until stop()). One profile at a time in a process.
class Profile {
 public:
  Profile();
  ~Profile();
  Profile(const Profile&) = delete;
  Profile& operator=(const Profile&) = delete;

  /// Stops recording (the destructor does it too); events stay readable.
  void stop();
  bool active() const { return active_; }
  /// The events in the order they started.
  std::vector<Event> events() const;
  /// Totals per name, sorted by total time, largest first.
  std::vector<Summary> key_averages() const;
  /// A table of key_averages(): name, self CPU %, self CPU, CPU total %, CPU total, CPU time
  /// avg, CPU Mem, # of Calls (row_limit 0: every row).
  std::string table(size_t row_limit = 0) const;
  /// Chrome trace-event JSON ("X" events in microseconds, one track per thread).
  std::string chrome_trace() const;
  /// Writes chrome_trace() to `path` (atomically: a temporary file renamed over it).
  void export_chrome_trace(const std::string& path) const;

 private:
  bool active_ = false;
  void* guard_ = nullptr;  // the InterposerGuard of the creating thread
};

/// A user range (torch.profiler.record_function): recorded when a profile is active.
class Range {
 public:
  explicit Range(std::string name);
  ~Range();
  Range(const Range&) = delete;
  Range& operator=(const Range&) = delete;

 private:
  std::string name_;
  bool recording_ = false;  // a profile was active at construction
};

/// True while a Profile is recording.
bool is_enabled();

}  // namespace ignis::profiler
