// Warnings through a settable handler (ignis/warning.h).
#include "ignis/warning.h"

#include <cstdio>
#include <mutex>
#include <set>

#include "core/warn_once.h"

namespace ignis {
namespace {
std::mutex& handler_mutex() {
  static std::mutex m;
  return m;
}
WarningHandler& handler() {
  static WarningHandler h;
  return h;
}
}  // namespace

WarningHandler set_warning_handler(WarningHandler h) {
  std::lock_guard<std::mutex> lock(handler_mutex());
  WarningHandler old = std::move(handler());
  handler() = std::move(h);
  return old;
}

void warn(const std::string& message) {
  WarningHandler h;
  {
    std::lock_guard<std::mutex> lock(handler_mutex());
    h = handler();
  }
  if (h) {
    h(message);
  } else {
    std::fprintf(stderr, "ignis warning: %s\n", message.c_str());
  }
}

namespace detail {
void warn_once_per_key(const std::string& key, const std::string& message) {
  static std::mutex m;
  static std::set<std::string> seen;
  {
    std::lock_guard<std::mutex> lock(m);
    if (!seen.insert(key).second) return;
  }
  warn(message);
}
}  // namespace detail

}  // namespace ignis
