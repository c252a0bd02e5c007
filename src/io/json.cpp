#include "io/json.h"

#include <cmath>
#include <cerrno>
#include <cstdio>
#include <cstdlib>

#include "ignis/error.h"

namespace ignis::json {

namespace {
constexpr int kMaxDepth = 64;

class Parser {
 public:
  Parser(std::string_view t, const char* what, size_t base) : t_(t), what_(what), base_(base) {}
  Value run() {
    Value v = value(0);
    ws();
    if (p_ != t_.size()) fail("trailing characters");
    return v;
  }

 private:
  [[noreturn]] void fail(const char* msg) const {
    IGNIS_FAIL(what_, ": invalid JSON at byte ", base_ + p_, ": ", msg);
  }
  void ws() {
    while (p_ < t_.size() && (t_[p_] == ' ' || t_[p_] == '\n' || t_[p_] == '\r' || t_[p_] == '\t'))
      ++p_;
  }
  char peek() {
    ws();
    if (p_ >= t_.size()) fail("unexpected end");
    return t_[p_];
  }
  void expect(char c) {
    if (peek() != c) fail(c == ':' ? "expected ':'" : c == '"' ? "expected '\"'" : "unexpected character");
    ++p_;
  }
  bool literal(std::string_view w) {
    if (t_.substr(p_, w.size()) == w) {
      p_ += w.size();
      return true;
    }
    return false;
  }
  Value value(int depth) {
    if (depth > kMaxDepth) fail("nesting too deep");
    Value v;
    char c = peek();
    if (c == '{') {
      ++p_;
      v.kind = Value::Kind::Object;
      v.obj = std::make_shared<Object>();
      if (peek() == '}') {
        ++p_;
        return v;
      }
      for (;;) {
        if (peek() != '"') fail("expected a string key");
        std::string k = string();
        expect(':');
        v.obj->emplace_back(std::move(k), value(depth + 1));
        c = peek();
        ++p_;
        if (c == '}') return v;
        if (c != ',') fail("expected ',' or '}'");
      }
    }
    if (c == '[') {
      ++p_;
      v.kind = Value::Kind::Array;
      v.arr = std::make_shared<Array>();
      if (peek() == ']') {
        ++p_;
        return v;
      }
      for (;;) {
        v.arr->push_back(value(depth + 1));
        c = peek();
        ++p_;
        if (c == ']') return v;
        if (c != ',') fail("expected ',' or ']'");
      }
    }
    if (c == '"') {
      v.kind = Value::Kind::String;
      v.str = string();
      return v;
    }
    if (literal("true")) {
      v.kind = Value::Kind::Bool;
      v.b = true;
      return v;
    }
    if (literal("false")) {
      v.kind = Value::Kind::Bool;
      return v;
    }
    if (literal("null")) return v;
    return number();
  }
  std::string string() {
    expect('"');
    std::string s;
    for (;;) {
      if (p_ >= t_.size()) fail("unterminated string");
      char c = t_[p_++];
      if (c == '"') return s;
      if (static_cast<unsigned char>(c) < 0x20) fail("control character in string");
      if (c != '\\') {
        s.push_back(c);
        continue;
      }
      if (p_ >= t_.size()) fail("unterminated escape");
      char e = t_[p_++];
      switch (e) {
        case '"': s.push_back('"'); break;
        case '\\': s.push_back('\\'); break;
        case '/': s.push_back('/'); break;
        case 'b': s.push_back('\b'); break;
        case 'f': s.push_back('\f'); break;
        case 'n': s.push_back('\n'); break;
        case 'r': s.push_back('\r'); break;
        case 't': s.push_back('\t'); break;
        case 'u': {
          uint32_t cp = hex4();
          if (cp >= 0xD800 && cp < 0xDC00) {  // surrogate pair
            if (!(literal("\\u"))) fail("unpaired surrogate");
            uint32_t lo = hex4();
            if (lo < 0xDC00 || lo >= 0xE000) fail("invalid low surrogate");
            cp = 0x10000 + ((cp - 0xD800) << 10) + (lo - 0xDC00);
          } else if (cp >= 0xDC00 && cp < 0xE000) {
            fail("unpaired surrogate");
          }
          utf8(s, cp);
          break;
        }
        default: fail("invalid escape");
      }
    }
  }
  uint32_t hex4() {
    if (p_ + 4 > t_.size()) fail("truncated \\u escape");
    uint32_t v = 0;
    for (int i = 0; i < 4; ++i) {
      char c = t_[p_++];
      v <<= 4;
      if (c >= '0' && c <= '9') v |= static_cast<uint32_t>(c - '0');
      else if (c >= 'a' && c <= 'f') v |= static_cast<uint32_t>(c - 'a' + 10);
      else if (c >= 'A' && c <= 'F') v |= static_cast<uint32_t>(c - 'A' + 10);
      else fail("invalid hex digit");
    }
    return v;
  }
  static void utf8(std::string& s, uint32_t cp) {
    if (cp < 0x80) {
      s.push_back(static_cast<char>(cp));
    } else if (cp < 0x800) {
      s.push_back(static_cast<char>(0xC0 | (cp >> 6)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else if (cp < 0x10000) {
      s.push_back(static_cast<char>(0xE0 | (cp >> 12)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    } else {
      s.push_back(static_cast<char>(0xF0 | (cp >> 18)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3F)));
      s.push_back(static_cast<char>(0x80 | (cp & 0x3F)));
    }
  }
  Value number() {
    const size_t start = p_;
    bool integer = true;
    if (p_ < t_.size() && t_[p_] == '-') ++p_;
    const size_t digits = p_;
    while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
    if (p_ == digits) fail("expected a value");
    if (t_[digits] == '0' && p_ - digits > 1) fail("leading zero");
    if (p_ < t_.size() && t_[p_] == '.') {
      integer = false;
      ++p_;
      const size_t f = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      if (p_ == f) fail("expected digits after '.'");
    }
    if (p_ < t_.size() && (t_[p_] == 'e' || t_[p_] == 'E')) {
      integer = false;
      ++p_;
      if (p_ < t_.size() && (t_[p_] == '+' || t_[p_] == '-')) ++p_;
      const size_t e = p_;
      while (p_ < t_.size() && t_[p_] >= '0' && t_[p_] <= '9') ++p_;
      if (p_ == e) fail("expected exponent digits");
    }
    std::string text(t_.substr(start, p_ - start));
    Value v;
    v.kind = Value::Kind::Number;
    v.number = std::strtod(text.c_str(), nullptr);
    if (integer) {
      errno = 0;
      char* end = nullptr;
      long long i = std::strtoll(text.c_str(), &end, 10);
      if (errno == 0 && end == text.c_str() + text.size()) {
        v.is_integer = true;
        v.integer = i;
      }
    }
    return v;
  }
  std::string_view t_;
  const char* what_;
  size_t base_;
  size_t p_ = 0;
};
}  // namespace

const Value* Value::find(std::string_view key) const {
  if (kind != Kind::Object) return nullptr;
  for (const auto& [k, v] : *obj) {
    if (k == key) return &v;
  }
  return nullptr;
}

Value parse(std::string_view text, const char* what, size_t base) {
  return Parser(text, what, base).run();
}

namespace {
// The length of the valid UTF-8 sequence at s[i] (2 to 4), or 0.
size_t utf8_length(std::string_view s, size_t i) {
  const auto b = [&](size_t k) { return static_cast<unsigned char>(s[i + k]); };
  const unsigned char c = b(0);
  const size_t n = c >= 0xF0 && c <= 0xF4 ? 4 : c >= 0xE0 ? 3 : c >= 0xC2 && c < 0xE0 ? 2 : 0;
  if (n == 0 || i + n > s.size()) return 0;
  for (size_t k = 1; k < n; ++k) {
    if ((b(k) & 0xC0) != 0x80) return 0;
  }
  if (n == 3 && ((c == 0xE0 && b(1) < 0xA0) || (c == 0xED && b(1) >= 0xA0))) return 0;
  if (n == 4 && ((c == 0xF0 && b(1) < 0x90) || (c == 0xF4 && b(1) >= 0x90))) return 0;
  return n;
}
}  // namespace

std::string printable(std::string_view s) {
  std::string out;
  out.reserve(s.size());
  char buf[8];
  for (size_t i = 0; i < s.size();) {
    const auto c = static_cast<unsigned char>(s[i]);
    if (c == '\\') {
      out += "\\\\";
      ++i;
    } else if (c >= 0x20 && c < 0x7f) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if (c < 0x80) {
      std::snprintf(buf, sizeof buf, "\\u%04x", c);
      out += buf;
      ++i;
    } else if (const size_t n = utf8_length(s, i);
               n > 0 && !(c == 0xC2 && static_cast<unsigned char>(s[i + 1]) < 0xA0)) {
      out.append(s.substr(i, n));  // valid UTF-8, not a C1 control (U+0080..U+009F)
      i += n;
    } else if (n == 2) {
      std::snprintf(buf, sizeof buf, "\\u%04x", static_cast<unsigned char>(s[i + 1]));
      out += buf;
      i += 2;
    } else {
      std::snprintf(buf, sizeof buf, "\\x%02x", c);
      out += buf;
      ++i;
    }
  }
  return out;
}

std::string quote(std::string_view s) {
  std::string out = "\"";
  for (char c : s) {
    switch (c) {
      case '"': out += "\\\""; break;
      case '\\': out += "\\\\"; break;
      case '\n': out += "\\n"; break;
      case '\r': out += "\\r"; break;
      case '\t': out += "\\t"; break;
      default:
        if (static_cast<unsigned char>(c) < 0x20) {
          char buf[8];
          std::snprintf(buf, sizeof buf, "\\u%04x", c);
          out += buf;
        } else {
          out.push_back(c);
        }
    }
  }
  return out + "\"";
}

}  // namespace ignis::json
