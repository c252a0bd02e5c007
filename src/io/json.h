// A small strict JSON reader/writer for file headers (safetensors, logs). The reader treats
// its input as untrusted: bounded depth, checked numbers, no recursion past kMaxDepth.
#pragma once

#include <cstdint>
#include <map>
#include <memory>
#include <string>
#include <string_view>
#include <variant>
#include <vector>

namespace ignis::json {

struct Value;
using Object = std::vector<std::pair<std::string, Value>>;  // in file order
using Array = std::vector<Value>;

struct Value {
  enum class Kind { Null, Bool, Number, String, Array, Object } kind = Kind::Null;
  bool b = false;
  double number = 0;
  bool is_integer = false;  // written without fraction or exponent, fits int64
  int64_t integer = 0;
  std::string str;
  std::shared_ptr<Array> arr;
  std::shared_ptr<Object> obj;
  /// The member `key` of an object, or nullptr.
  const Value* find(std::string_view key) const;
};

/// Parses exactly one JSON value (surrounded by optional whitespace). Throws ignis::Error
/// "<what>: invalid JSON at byte N: ..." on any error, N counted from `base` (the offset of
/// `text` in its file, so that N is a position in the file).
Value parse(std::string_view text, const char* what, size_t base = 0);

/// `s` made safe to print in an error message: control characters, DEL, C1 controls and
/// invalid UTF-8 are escaped (\u001b, \x9b), as is a backslash; valid UTF-8 is kept. Strings
/// from files (tensor names, metadata) go through it, so a file cannot write raw terminal
/// escape sequences to the user's screen.
std::string printable(std::string_view s);

/// Escapes a string as a JSON string literal (with quotes).
std::string quote(std::string_view s);

}  // namespace ignis::json
