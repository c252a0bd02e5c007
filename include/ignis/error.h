// ignis::Error and the checking macros used throughout the library.
#pragma once

#include <sstream>
#include <stdexcept>
#include <string>

namespace ignis {

/// The one exception type ignis throws. Messages name the op and the offending shapes, dtypes or
/// values, e.g. `matmul: shapes [2, 3] and [4, 5] cannot be multiplied (3 != 4)`.
class Error : public std::runtime_error {
 public:
  explicit Error(const std::string& what) : std::runtime_error(what) {}
};

namespace detail {
template <class... Args>
[[noreturn]] void throw_error(const Args&... args) {
  std::ostringstream os;
  (os << ... << args);
  throw Error(os.str());
}
}  // namespace detail

}  // namespace ignis

/// IGNIS_CHECK(cond, "op: ", a, " and ", b, ...) throws ignis::Error with the concatenated message.
#define IGNIS_CHECK(cond, ...)                                      \
  do {                                                              \
    if (__builtin_expect(!(cond), 0)) ::ignis::detail::throw_error(__VA_ARGS__); \
  } while (0)

#define IGNIS_FAIL(...) ::ignis::detail::throw_error(__VA_ARGS__)
