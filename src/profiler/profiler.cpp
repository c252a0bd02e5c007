// The profiler: an op-registry interposer plus hooks for backward nodes and user ranges.
#include "ignis/profiler.h"

#include <algorithm>
#include <atomic>
#include <chrono>
#include <cstdio>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>

#include "core/tensor_impl.h"
#include "ignis/allocator.h"
#include "ignis/error.h"
#include "ignis/op_registry.h"
#include "profiler/profiler_hooks.h"

namespace ignis::profiler {

namespace {

using Clock = std::chrono::steady_clock;

struct Global {
  std::mutex mu;
  std::atomic<bool> enabled{false};
  std::atomic<uint64_t> generation{0};
  Clock::time_point t0;
  std::vector<Event> events;  // guarded by mu
  std::atomic<uint64_t> next_thread{1};
  std::map<std::string, uint64_t> tracks;  // named tracks' thread numbers; guarded by mu
};
Global& global() {
  static auto* g = new Global();  // never destroyed: threads may end after main
  return *g;
}

struct Frame {
  int64_t start_ns;
  int64_t child_ns;
  int64_t bytes0;
};
struct ThreadState {
  std::vector<Frame> stack;
  uint64_t thread = 0;
  uint64_t generation = 0;
};
thread_local ThreadState tls;

int64_t now_ns() {
  return std::chrono::duration_cast<std::chrono::nanoseconds>(Clock::now() - global().t0).count();
}

ThreadState& state() {
  Global& g = global();
  if (tls.thread == 0) tls.thread = g.next_thread.fetch_add(1);
  const uint64_t gen = g.generation.load();
  if (tls.generation != gen) {  // a new profile: frames of an older one are stale
    tls.stack.clear();
    tls.generation = gen;
  }
  return tls;
}

void begin() { state().stack.push_back({now_ns(), 0, memory_stats(kCPU).allocated}); }

void end(std::string name, const char* category, std::string shapes) {
  ThreadState& t = state();
  if (t.stack.empty()) return;  // the profile changed while the interval ran
  const Frame f = t.stack.back();
  t.stack.pop_back();
  const int64_t end_ns = now_ns();
  Event e;
  e.name = std::move(name);
  e.category = category;
  e.start_ns = f.start_ns;
  e.duration_ns = end_ns - f.start_ns;
  e.self_ns = std::max<int64_t>(0, e.duration_ns - f.child_ns);
  e.bytes = memory_stats(kCPU).allocated - f.bytes0;
  e.thread = t.thread;
  e.depth = static_cast<int>(t.stack.size());
  e.input_shapes = std::move(shapes);
  if (!t.stack.empty()) t.stack.back().child_ns += e.duration_ns;
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (g.enabled.load()) g.events.push_back(std::move(e));
}

std::string shapes_of(const op::Call& call) {
  std::string s = "[";
  bool first = true;
  auto add = [&](const Tensor& t) {
    s += (first ? "" : ", ") + (t.defined() ? shape_str(t.sizes()) : std::string("[]"));
    first = false;
  };
  for (const op::IValue& v : call.args) {
    if (v.is<Tensor>()) add(v.get<Tensor>());
    if (v.is<std::vector<Tensor>>()) {
      for (const Tensor& t : v.get<std::vector<Tensor>>()) add(t);
    }
  }
  return s + "]";
}

class OpProfiler final : public op::Interposer {
 public:
  void around(op::Call& call, const std::function<void()>& next) override {
    begin();
    try {
      next();
    } catch (...) {
      end(call.op.schema.full_name(), "op", shapes_of(call));
      throw;
    }
    end(call.op.schema.full_name(), "op", shapes_of(call));
  }
};
OpProfiler& op_profiler() {
  static OpProfiler p;
  return p;
}

std::string json_escape(const std::string& s) {
  std::string out;
  for (char c : s) {
    const auto u = static_cast<unsigned char>(c);
    if (c == '"' || c == '\\') {
      out += '\\';
      out += c;
    } else if (u < 0x20) {
      char buf[8];
      std::snprintf(buf, sizeof(buf), "\\u%04x", u);
      out += buf;
    } else {
      out += c;
    }
  }
  return out;
}

std::string format_time(int64_t ns) {
  char buf[32];
  if (ns >= 1000000000)
    std::snprintf(buf, sizeof(buf), "%.3fs", ns / 1e9);
  else if (ns >= 1000000)
    std::snprintf(buf, sizeof(buf), "%.3fms", ns / 1e6);
  else
    std::snprintf(buf, sizeof(buf), "%.3fus", ns / 1e3);
  return buf;
}

std::string format_bytes(int64_t b) {
  char buf[32];
  const double a = static_cast<double>(b < 0 ? -b : b);
  if (a >= 1 << 30)
    std::snprintf(buf, sizeof(buf), "%.2f Gb", b / double(1 << 30));
  else if (a >= 1 << 20)
    std::snprintf(buf, sizeof(buf), "%.2f Mb", b / double(1 << 20));
  else if (a >= 1 << 10)
    std::snprintf(buf, sizeof(buf), "%.2f Kb", b / double(1 << 10));
  else
    std::snprintf(buf, sizeof(buf), "%lld b", static_cast<long long>(b));
  return buf;
}

std::string percent(int64_t part, int64_t whole) {
  char buf[16];
  std::snprintf(buf, sizeof(buf), "%.2f%%", whole > 0 ? 100.0 * part / whole : 0.0);
  return buf;
}

}  // namespace

namespace detail {
bool enabled() { return global().enabled.load(std::memory_order_relaxed); }
void begin_interval() { begin(); }
void end_interval(std::string name, const char* category) { end(std::move(name), category, ""); }

void record_track_interval(std::string name, const char* category, const std::string& track,
                           Clock::time_point start, Clock::time_point end_time, std::string args) {
  Global& g = global();
  std::lock_guard<std::mutex> lock(g.mu);
  if (!g.enabled.load()) return;
  auto ns = [&](Clock::time_point t) {
    return std::max<int64_t>(
        0, std::chrono::duration_cast<std::chrono::nanoseconds>(t - g.t0).count());
  };
  auto [it, added] = g.tracks.try_emplace(track, 0);
  if (added) it->second = g.next_thread.fetch_add(1);
  Event e;
  e.name = std::move(name);
  e.category = category;
  e.start_ns = ns(start);
  e.duration_ns = std::max<int64_t>(0, ns(end_time) - e.start_ns);
  e.thread = it->second;
  e.input_shapes = std::move(args);
  g.events.push_back(std::move(e));
}
}  // namespace detail

bool is_enabled() { return detail::enabled(); }

Profile::Profile() {
  Global& g = global();
  {
    std::lock_guard<std::mutex> lock(g.mu);
    IGNIS_CHECK(!g.enabled.load(), "profiler: a Profile is already recording; stop it first");
    g.events.clear();
    g.tracks.clear();
    g.t0 = Clock::now();
    g.generation.fetch_add(1);
    g.enabled.store(true);
  }
  active_ = true;
  guard_ = new op::InterposerGuard(&op_profiler());
}

Profile::~Profile() { stop(); }

void Profile::stop() {
  if (!active_) return;
  delete static_cast<op::InterposerGuard*>(guard_);
  guard_ = nullptr;
  global().enabled.store(false);
  active_ = false;
}

std::vector<Event> Profile::events() const {
  Global& g = global();
  std::vector<Event> out;
  {
    std::lock_guard<std::mutex> lock(g.mu);
    out = g.events;
  }
  std::stable_sort(out.begin(), out.end(), [](const Event& a, const Event& b) {
    return a.start_ns != b.start_ns ? a.start_ns < b.start_ns : a.depth < b.depth;
  });
  return out;
}

std::vector<Summary> Profile::key_averages() const {
  std::map<std::string, Summary> by_name;
  for (const Event& e : events()) {
    Summary& s = by_name[e.name];
    s.name = e.name;
    s.category = e.category;
    ++s.calls;
    s.self_ns += e.self_ns;
    s.total_ns += e.duration_ns;
    s.bytes += e.bytes;
  }
  std::vector<Summary> out;
  for (auto& [name, s] : by_name) out.push_back(s);
  std::stable_sort(out.begin(), out.end(),
                   [](const Summary& a, const Summary& b) { return a.total_ns > b.total_ns; });
  return out;
}

std::string Profile::table(size_t row_limit) const {
  const std::vector<Summary> rows = key_averages();
  int64_t self_total = 0;
  for (const Summary& s : rows) self_total += s.self_ns;
  const std::vector<std::string> header = {"Name",      "Self CPU %",   "Self CPU", "CPU total %",
                                           "CPU total", "CPU time avg", "CPU Mem",  "# of Calls"};
  std::vector<std::vector<std::string>> cells;
  for (size_t i = 0; i < rows.size() && (row_limit == 0 || i < row_limit); ++i) {
    const Summary& s = rows[i];
    cells.push_back({s.name, percent(s.self_ns, self_total), format_time(s.self_ns),
                     percent(s.total_ns, self_total), format_time(s.total_ns),
                     format_time(s.calls ? s.total_ns / s.calls : 0), format_bytes(s.bytes),
                     std::to_string(s.calls)});
  }
  std::vector<size_t> width(header.size());
  for (size_t c = 0; c < header.size(); ++c) {
    width[c] = header[c].size();
    for (const auto& r : cells) width[c] = std::max(width[c], r[c].size());
  }
  std::ostringstream os;
  auto rule = [&] {
    for (size_t c = 0; c < width.size(); ++c) os << std::string(width[c], '-') << "  ";
    os << "\n";
  };
  auto row = [&](const std::vector<std::string>& r) {
    for (size_t c = 0; c < r.size(); ++c) {
      if (c == 0)
        os << r[c] << std::string(width[c] - r[c].size(), ' ') << "  ";
      else
        os << std::string(width[c] - r[c].size(), ' ') << r[c] << "  ";
    }
    os << "\n";
  };
  rule();
  row(header);
  rule();
  for (const auto& r : cells) row(r);
  rule();
  os << "Self CPU time total: " << format_time(self_total) << "\n";
  return os.str();
}

std::string Profile::chrome_trace() const {
  std::ostringstream os;
  os << "{\"displayTimeUnit\": \"ms\", \"traceEvents\": [";
  bool first = true;
  {  // Named tracks (detail::record_track_interval) get their names as thread names.
    Global& g = global();
    std::lock_guard<std::mutex> lock(g.mu);
    for (const auto& [track, tid] : g.tracks) {
      os << (first ? "\n" : ",\n") << "{\"name\": \"thread_name\", \"ph\": \"M\", \"pid\": 1, "
         << "\"tid\": " << tid << ", \"args\": {\"name\": \"" << json_escape(track) << "\"}}";
      first = false;
    }
  }
  for (const Event& e : events()) {
    char ts[64];
    std::snprintf(ts, sizeof(ts), "\"ts\": %.3f, \"dur\": %.3f", e.start_ns / 1e3,
                  e.duration_ns / 1e3);
    os << (first ? "\n" : ",\n") << "{\"name\": \"" << json_escape(e.name) << "\", \"cat\": \""
       << e.category << "\", \"ph\": \"X\", " << ts << ", \"pid\": 1, \"tid\": " << e.thread
       << ", \"args\": {\"Input Dims\": \"" << json_escape(e.input_shapes)
       << "\", \"Bytes\": " << e.bytes << "}}";
    first = false;
  }
  os << "\n]}\n";
  return os.str();
}

void Profile::export_chrome_trace(const std::string& path) const {
  const std::string tmp = path + ".tmp";
  {
    std::ofstream f(tmp, std::ios::binary | std::ios::trunc);
    IGNIS_CHECK(f.good(), "export_chrome_trace: cannot open '", tmp, "' for writing");
    f << chrome_trace();
    f.flush();
    IGNIS_CHECK(f.good(), "export_chrome_trace: writing '", tmp, "' failed");
  }
  IGNIS_CHECK(std::rename(tmp.c_str(), path.c_str()) == 0, "export_chrome_trace: cannot rename '",
              tmp, "' to '", path, "'");
}

Range::Range(std::string name) : name_(std::move(name)) {
  if (!detail::enabled()) return;
  begin();
  recording_ = true;
}

Range::~Range() {
  if (!recording_) return;
  end(std::move(name_), "range", "");
}

}  // namespace ignis::profiler
