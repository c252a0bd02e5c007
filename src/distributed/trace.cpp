#include "distributed/trace.h"

#include <chrono>
#include <cstdlib>
#include <fstream>
#include <mutex>
#include <vector>

namespace ignis::distributed::trace {
namespace {

struct Event {
  std::string name;
  int tid;
  double start, end;
};

std::mutex g_mu;
std::vector<Event> g_events;

const char* prefix() {
  static const char* p = std::getenv("IGNIS_DDP_TRACE");
  return p;
}

}  // namespace

bool enabled() { return prefix() != nullptr && *prefix() != '\0'; }

double now_us() {
  using namespace std::chrono;
  return duration<double, std::micro>(steady_clock::now().time_since_epoch()).count();
}

void record(const std::string& name, int tid, double start_us, double end_us) {
  std::lock_guard<std::mutex> lock(g_mu);
  g_events.push_back({name, tid, start_us, end_us});
}

void write(int rank) {
  if (!enabled()) return;
  std::lock_guard<std::mutex> lock(g_mu);
  std::ofstream out(std::string(prefix()) + ".rank" + std::to_string(rank) + ".json");
  out << "{\"traceEvents\": [\n";
  out << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << rank
      << ", \"tid\": 1, \"args\": {\"name\": \"compute\"}},\n";
  out << "{\"ph\": \"M\", \"name\": \"thread_name\", \"pid\": " << rank
      << ", \"tid\": 2, \"args\": {\"name\": \"communication\"}}";
  for (const Event& e : g_events) {
    out << ",\n{\"ph\": \"X\", \"name\": \"" << e.name << "\", \"pid\": " << rank
        << ", \"tid\": " << e.tid << ", \"ts\": " << static_cast<long long>(e.start)
        << ", \"dur\": " << static_cast<long long>(e.end - e.start) << "}";
  }
  out << "\n]}\n";
  g_events.clear();
}

}  // namespace ignis::distributed::trace
