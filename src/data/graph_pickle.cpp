// The pickle reader of the Planetoid files (graph_pickle.h). A stack machine over the opcodes of
// protocols 0-4; nothing is imported or called. Limits keep hostile input bounded: every length
// is checked against the bytes left, the memo and the stack are bounded by the input size.
#include "data/graph_pickle.h"

#include <algorithm>
#include <cctype>
#include <cerrno>
#include <cmath>
#include <cstring>
#include <fstream>
#include <iterator>
#include <map>

#include "ignis/ops.h"

namespace ignis::data::pickle {

namespace {

ValuePtr make(Value::Kind k) {
  auto v = std::make_shared<Value>();
  v->kind = k;
  return v;
}
ValuePtr make_int(int64_t i) {
  auto v = make(Value::Int);
  v->i = i;
  return v;
}
ValuePtr make_str(Value::Kind k, std::string s) {
  auto v = make(k);
  v->s = std::move(s);
  return v;
}

// UTF-8 code points < 256 back to bytes (what _codecs.encode(u, 'latin1') does).
bool latin1_bytes(const std::string& utf8, std::string& out) {
  out.clear();
  for (size_t i = 0; i < utf8.size();) {
    const auto c = static_cast<unsigned char>(utf8[i]);
    if (c < 0x80) {
      out.push_back(static_cast<char>(c));
      ++i;
    } else if ((c & 0xe0) == 0xc0 && i + 1 < utf8.size()) {
      const unsigned cp = ((c & 0x1fu) << 6) | (static_cast<unsigned char>(utf8[i + 1]) & 0x3fu);
      if (cp > 0xff) return false;
      out.push_back(static_cast<char>(cp));
      i += 2;
    } else {
      return false;
    }
  }
  return true;
}

void append_utf8(std::string& out, unsigned cp) {
  if (cp < 0x80) {
    out.push_back(static_cast<char>(cp));
  } else if (cp < 0x800) {
    out.push_back(static_cast<char>(0xc0 | (cp >> 6)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else if (cp < 0x10000) {
    out.push_back(static_cast<char>(0xe0 | (cp >> 12)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  } else {
    out.push_back(static_cast<char>(0xf0 | (cp >> 18)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 12) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | ((cp >> 6) & 0x3f)));
    out.push_back(static_cast<char>(0x80 | (cp & 0x3f)));
  }
}

class Machine {
 public:
  Machine(const uint8_t* d, size_t n, std::string what) : d_(d), n_(n), what_(std::move(what)) {}

  ValuePtr run() {
    while (true) {
      const size_t at = pos_;
      const uint8_t op = byte();
      switch (op) {
        case 0x80: byte(); break;    // PROTO
        case 0x95: bytes(8); break;  // FRAME
        case '.':                    // STOP
          IGNIS_CHECK(stack_.size() == 1 && marks_.empty(), what_, ": pickle ends (STOP at byte ",
                      at, ") with ", stack_.size(), " values on the stack");
          return stack_.back();
        case '(': marks_.push_back(stack_.size()); break;
        case '0': pop(at); break;
        case '1': pop_mark(at); break;
        case '2': push(top(at)); break;
        case 'N': push(make(Value::None)); break;
        case 0x88:
        case 0x89: {
          auto v = make(Value::Bool);
          v->i = op == 0x88;
          push(v);
          break;
        }
        case 'I': {  // INT (text); "01"/"00" are True/False
          const std::string l = line();
          if (l == "01" || l == "00") {
            auto v = make(Value::Bool);
            v->i = l == "01";
            push(v);
          } else {
            push(make_int(parse_int(l, at)));
          }
          break;
        }
        case 'L': {
          std::string l = line();
          if (!l.empty() && l.back() == 'L') l.pop_back();
          push(make_int(parse_int(l, at)));
          break;
        }
        case 'J': push(make_int(static_cast<int32_t>(le(4)))); break;
        case 'K': push(make_int(static_cast<int64_t>(le(1)))); break;
        case 'M': push(make_int(static_cast<int64_t>(le(2)))); break;
        case 0x8a:
        case 0x8b: {  // LONG1 / LONG4: little-endian two's complement
          const uint64_t len = le(op == 0x8a ? 1 : 4);
          IGNIS_CHECK(len <= 8, what_, ": integer of ", len, " bytes at byte ", at,
                      " does not fit in 64 bits");
          const std::string b = bytes(len);
          uint64_t u = 0;
          for (size_t k = 0; k < len; ++k) u |= uint64_t(static_cast<uint8_t>(b[k])) << (8 * k);
          if (len > 0 && len < 8 && (static_cast<uint8_t>(b[len - 1]) & 0x80)) {
            u |= ~uint64_t(0) << (8 * len);
          }
          push(make_int(static_cast<int64_t>(u)));
          break;
        }
        case 'F': {
          const std::string l = line();
          char* end = nullptr;
          const double f = std::strtod(l.c_str(), &end);
          IGNIS_CHECK(end != l.c_str(), what_, ": bad float '", l, "' at byte ", at);
          auto v = make(Value::Float);
          v->f = f;
          push(v);
          break;
        }
        case 'G': {
          const std::string b = bytes(8);
          uint64_t u = 0;
          for (int k = 0; k < 8; ++k) u = (u << 8) | static_cast<uint8_t>(b[k]);
          auto v = make(Value::Float);
          std::memcpy(&v->f, &u, 8);
          push(v);
          break;
        }
        case 'S': push(make_str(Value::Bytes, unquote(line(), at))); break;
        case 'T': push(make_str(Value::Bytes, bytes(le(4)))); break;
        case 'U': push(make_str(Value::Bytes, bytes(le(1)))); break;
        case 'B': push(make_str(Value::Bytes, bytes(le(4)))); break;
        case 'C': push(make_str(Value::Bytes, bytes(le(1)))); break;
        case 0x8e:
        case 0x96: push(make_str(Value::Bytes, bytes(le(8)))); break;
        case 'V': push(make_str(Value::Str, raw_unicode(line(), at))); break;
        case 'X': push(make_str(Value::Str, bytes(le(4)))); break;
        case 0x8c: push(make_str(Value::Str, bytes(le(1)))); break;
        case 0x8d: push(make_str(Value::Str, bytes(le(8)))); break;
        case ')': push(make(Value::Tuple)); break;
        case ']': push(make(Value::List)); break;
        case '}': push(make(Value::Dict)); break;
        case 't':
        case 'l': {
          auto v = make(op == 't' ? Value::Tuple : Value::List);
          v->items = pop_mark(at);
          adopt_all(v, v->items);
          push(v);
          break;
        }
        case 0x85:
        case 0x86:
        case 0x87: {
          const size_t k = op - 0x84;
          need(k, at);
          auto v = make(Value::Tuple);
          v->items.assign(stack_.end() - static_cast<std::ptrdiff_t>(k), stack_.end());
          stack_.resize(stack_.size() - k);
          adopt_all(v, v->items);
          push(v);
          break;
        }
        case 'd': {
          auto items = pop_mark(at);
          IGNIS_CHECK(items.size() % 2 == 0, what_, ": odd number of dict items at byte ", at);
          auto v = make(Value::Dict);
          for (size_t k = 0; k < items.size(); k += 2)
            v->entries.emplace_back(items[k], items[k + 1]);
          adopt_all(v, items);
          push(v);
          break;
        }
        case 'a': {
          ValuePtr x = pop(at);
          add_items(top(at), {x}, at);
          break;
        }
        case 'e': {
          auto items = pop_mark(at);
          add_items(top(at), items, at);
          break;
        }
        case 's':
        case 'u': {
          std::vector<ValuePtr> items;
          if (op == 's') {
            need(2, at);
            items.assign(stack_.end() - 2, stack_.end());
            stack_.resize(stack_.size() - 2);
          } else {
            items = pop_mark(at);
          }
          IGNIS_CHECK(items.size() % 2 == 0, what_, ": odd number of dict items at byte ", at);
          ValuePtr d = top(at);
          IGNIS_CHECK(d->kind == Value::Dict || d->kind == Value::Object, what_,
                      ": SETITEM on a value that is not a dict at byte ", at);
          mutable_check(d, at);
          adopt_all(d, items);
          for (size_t k = 0; k < items.size(); k += 2)
            d->entries.emplace_back(items[k], items[k + 1]);
          break;
        }
        case 'c': {
          const std::string mod = line(), name = line();
          push(make_str(Value::Global, mod + "." + name));
          break;
        }
        case 0x93: {
          ValuePtr name = pop(at), mod = pop(at);
          IGNIS_CHECK(name->kind == Value::Str && mod->kind == Value::Str, what_,
                      ": STACK_GLOBAL needs two strings at byte ", at);
          push(make_str(Value::Global, mod->s + "." + name->s));
          break;
        }
        case 'R':
        case 0x81: {  // REDUCE / NEWOBJ: callable(*args), kept as an Object
          ValuePtr args = pop(at), fn = pop(at);
          IGNIS_CHECK(args->kind == Value::Tuple, what_, ": ", op == 'R' ? "REDUCE" : "NEWOBJ",
                      " arguments are not a tuple at byte ", at);
          push(call(fn, args->items, at));
          break;
        }
        case 0x92: {  // NEWOBJ_EX: cls, args, kwargs
          pop(at);
          ValuePtr args = pop(at), fn = pop(at);
          IGNIS_CHECK(args->kind == Value::Tuple, what_, ": NEWOBJ_EX arguments are not a tuple");
          push(call(fn, args->items, at));
          break;
        }
        case 'o': {  // OBJ: mark, cls, args...
          auto items = pop_mark(at);
          IGNIS_CHECK(!items.empty(), what_, ": OBJ without a class at byte ", at);
          ValuePtr fn = items[0];
          items.erase(items.begin());
          push(call(fn, items, at));
          break;
        }
        case 'i': {  // INST: module, name, then mark args
          const std::string mod = line(), name = line();
          auto items = pop_mark(at);
          push(call(make_str(Value::Global, mod + "." + name), items, at));
          break;
        }
        case 'b': {
          ValuePtr st = pop(at);
          ValuePtr obj = top(at);
          IGNIS_CHECK(obj->kind == Value::Object, what_,
                      ": BUILD on a value that is not an object at byte ", at);
          mutable_check(obj, at);
          adopt(obj, st);
          obj->state = st;
          break;
        }
        case 'p': memo_put(static_cast<uint64_t>(parse_int(line(), at)), at); break;
        case 'q': memo_put(le(1), at); break;
        case 'r': memo_put(le(4), at); break;
        case 0x94: memo_put(memo_.size(), at); break;
        case 'g': push(memo_get(static_cast<uint64_t>(parse_int(line(), at)), at)); break;
        case 'h': push(memo_get(le(1), at)); break;
        case 'j': push(memo_get(le(4), at)); break;
        default: IGNIS_FAIL(what_, ": unsupported pickle opcode 0x", hex(op), " at byte ", at);
      }
    }
  }

 private:
  static std::string hex(uint8_t b) {
    const char* h = "0123456789abcdef";
    return {h[b >> 4], h[b & 15]};
  }
  uint8_t byte() {
    IGNIS_CHECK(pos_ < n_, what_, ": the pickle ends early (at byte ", pos_, ", no STOP)");
    return d_[pos_++];
  }
  std::string bytes(uint64_t k) {
    IGNIS_CHECK(k <= n_ - pos_, what_, ": a length of ", k, " at byte ", pos_,
                " runs past the end (", n_ - pos_, " bytes left)");
    std::string s(reinterpret_cast<const char*>(d_ + pos_), static_cast<size_t>(k));
    pos_ += static_cast<size_t>(k);
    return s;
  }
  uint64_t le(int k) {
    const std::string b = bytes(static_cast<uint64_t>(k));
    uint64_t u = 0;
    for (int j = k - 1; j >= 0; --j) u = (u << 8) | static_cast<uint8_t>(b[j]);
    return u;
  }
  std::string line() {
    const size_t start = pos_;
    while (pos_ < n_ && d_[pos_] != '\n') ++pos_;
    IGNIS_CHECK(pos_ < n_, what_, ": a text argument at byte ", start, " has no end of line");
    std::string s(reinterpret_cast<const char*>(d_ + start), pos_ - start);
    ++pos_;
    return s;
  }
  int64_t parse_int(const std::string& s, size_t at) {
    char* end = nullptr;
    errno = 0;
    const long long v = std::strtoll(s.c_str(), &end, 10);
    IGNIS_CHECK(!s.empty() && end == s.c_str() + s.size() && errno == 0, what_, ": bad integer '",
                s, "' at byte ", at);
    return v;
  }
  // A protocol-0 STRING argument: a Python repr, quoted, with backslash escapes.
  std::string unquote(const std::string& s, size_t at) {
    IGNIS_CHECK(s.size() >= 2 && (s[0] == '\'' || s[0] == '"') && s.back() == s[0], what_,
                ": bad string literal at byte ", at);
    std::string out;
    for (size_t k = 1; k + 1 < s.size(); ++k) {
      if (s[k] != '\\') {
        out.push_back(s[k]);
        continue;
      }
      IGNIS_CHECK(k + 2 < s.size(), what_, ": bad escape in a string at byte ", at);
      const char e = s[++k];
      switch (e) {
        case 'n': out.push_back('\n'); break;
        case 't': out.push_back('\t'); break;
        case 'r': out.push_back('\r'); break;
        case '\\':
        case '\'':
        case '"': out.push_back(e); break;
        case 'x': {
          IGNIS_CHECK(k + 3 < s.size() + 0 && std::isxdigit(static_cast<unsigned char>(s[k + 1])) &&
                          std::isxdigit(static_cast<unsigned char>(s[k + 2])),
                      what_, ": bad \\x escape in a string at byte ", at);
          out.push_back(static_cast<char>(std::stoi(s.substr(k + 1, 2), nullptr, 16)));
          k += 2;
          break;
        }
        default: IGNIS_FAIL(what_, ": unsupported escape \\", e, " in a string at byte ", at);
      }
    }
    return out;
  }
  // A protocol-0 UNICODE argument: raw-unicode-escape (\uXXXX, \UXXXXXXXX; other bytes latin-1).
  std::string raw_unicode(const std::string& s, size_t at) {
    std::string out;
    for (size_t k = 0; k < s.size(); ++k) {
      if (s[k] == '\\' && k + 1 < s.size() && (s[k + 1] == 'u' || s[k + 1] == 'U')) {
        const size_t len = s[k + 1] == 'u' ? 4 : 8;
        IGNIS_CHECK(k + 2 + len <= s.size(), what_, ": bad \\u escape at byte ", at);
        unsigned cp = 0;
        for (size_t j = 0; j < len; ++j) {
          const char h = s[k + 2 + j];
          IGNIS_CHECK(std::isxdigit(static_cast<unsigned char>(h)), what_,
                      ": bad \\u escape at byte ", at);
          cp = cp * 16 + static_cast<unsigned>(std::isdigit(static_cast<unsigned char>(h))
                                                   ? h - '0'
                                                   : (std::tolower(h) - 'a' + 10));
        }
        IGNIS_CHECK(cp <= 0x10ffff, what_, ": bad code point at byte ", at);
        append_utf8(out, cp);
        k += 1 + len;
      } else {
        append_utf8(out, static_cast<unsigned char>(s[k]));
      }
    }
    return out;
  }
  // Makes c a child of p. A value already inside another is never modified again, so no value
  // can become its own descendant (no reference cycles), and depth stays exact and bounded.
  void adopt(const ValuePtr& p, const ValuePtr& c) {
    IGNIS_CHECK(c != p, what_, ": a value stored inside itself near byte ", pos_);
    c->contained = true;
    p->depth = std::max(p->depth, c->depth + 1);
    IGNIS_CHECK(p->depth <= 200, what_, ": values nested more than 200 deep at byte ", pos_);
  }
  void adopt_all(const ValuePtr& p, const std::vector<ValuePtr>& cs) {
    for (const auto& c : cs) adopt(p, c);
  }
  void mutable_check(const ValuePtr& v, size_t at) {
    IGNIS_CHECK(!v->contained, what_, ": the opcode at byte ", at,
                " modifies a value already stored inside another one");
  }
  void push(ValuePtr v) {
    IGNIS_CHECK(stack_.size() < n_ + 16, what_, ": stack overflow");
    stack_.push_back(std::move(v));
  }
  void need(size_t k, size_t at) {
    const size_t floor = marks_.empty() ? 0 : marks_.back();
    IGNIS_CHECK(stack_.size() >= floor + k, what_, ": stack underflow at byte ", at);
  }
  ValuePtr pop(size_t at) {
    need(1, at);
    ValuePtr v = stack_.back();
    stack_.pop_back();
    return v;
  }
  ValuePtr top(size_t at) {
    need(1, at);
    return stack_.back();
  }
  std::vector<ValuePtr> pop_mark(size_t at) {
    IGNIS_CHECK(!marks_.empty(), what_, ": no MARK for the opcode at byte ", at);
    const size_t m = marks_.back();
    marks_.pop_back();
    std::vector<ValuePtr> items(stack_.begin() + static_cast<std::ptrdiff_t>(m), stack_.end());
    stack_.resize(m);
    return items;
  }
  void add_items(const ValuePtr& to, const std::vector<ValuePtr>& items, size_t at) {
    mutable_check(to, at);
    adopt_all(to, items);
    if (to->kind == Value::List) {
      to->items.insert(to->items.end(), items.begin(), items.end());
    } else if (to->kind == Value::Object) {
      to->appended.insert(to->appended.end(), items.begin(), items.end());
    } else {
      IGNIS_FAIL(what_, ": APPEND to a value that is not a list at byte ", at);
    }
  }
  ValuePtr call(const ValuePtr& fn, std::vector<ValuePtr> args, size_t at) {
    IGNIS_CHECK(fn->kind == Value::Global || fn->kind == Value::Object, what_,
                ": a call of a value that is not a class or function at byte ", at);
    // _codecs.encode(u, 'latin1'): how Python 3 pickles bytes with protocols 0-2.
    if (fn->kind == Value::Global && fn->s == "_codecs.encode" && !args.empty() &&
        args[0]->kind == Value::Str) {
      std::string b;
      IGNIS_CHECK(latin1_bytes(args[0]->s, b), what_,
                  ": _codecs.encode of a non-latin-1 string at byte ", at);
      return make_str(Value::Bytes, std::move(b));
    }
    auto v = make(Value::Object);
    adopt(v, fn);
    adopt_all(v, args);
    v->callable = fn;
    v->items = std::move(args);
    return v;
  }
  void memo_put(uint64_t k, size_t at) {
    IGNIS_CHECK(k <= n_, what_, ": memo index ", k, " at byte ", at, " is out of range");
    memo_[k] = top(at);
  }
  ValuePtr memo_get(uint64_t k, size_t at) {
    auto it = memo_.find(k);
    IGNIS_CHECK(it != memo_.end(), what_, ": memo index ", k, " at byte ", at, " was never stored");
    return it->second;
  }

  const uint8_t* d_;
  size_t n_;
  size_t pos_ = 0;
  std::string what_;
  std::vector<ValuePtr> stack_;
  std::vector<size_t> marks_;
  std::map<uint64_t, ValuePtr> memo_;
};

bool ends_with(const std::string& s, const std::string& suffix) {
  return s.size() >= suffix.size() &&
         s.compare(s.size() - suffix.size(), suffix.size(), suffix) == 0;
}

// The value of a dict entry (str or bytes key), or null.
ValuePtr dict_get(const ValuePtr& d, const std::string& key) {
  if (!d) return nullptr;
  for (const auto& [k, v] : d->entries) {
    if ((k->kind == Value::Str || k->kind == Value::Bytes) && k->s == key) return v;
  }
  return nullptr;
}

int64_t as_int(const ValuePtr& v, const std::string& what, const char* field) {
  IGNIS_CHECK(v && (v->kind == Value::Int || v->kind == Value::Bool), what, ": ", field,
              " is not an integer");
  return v->i;
}

}  // namespace

ValuePtr load(const uint8_t* data, size_t size, const std::string& what) {
  return Machine(data, size, what).run();
}

ValuePtr load_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  IGNIS_CHECK(f.good(), "load_planetoid: cannot open ", path);
  const std::string bytes((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return load(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), path);
}

Tensor to_array(const ValuePtr& v, const std::string& what) {
  IGNIS_CHECK(v && v->kind == Value::Object && v->callable && v->callable->kind == Value::Global &&
                  ends_with(v->callable->s, "multiarray._reconstruct") && v->state &&
                  v->state->kind == Value::Tuple && v->state->items.size() == 5,
              what, ": expected a NumPy array");
  const auto& st = v->state->items;
  // (version, shape, dtype, is_fortran, raw data)
  const ValuePtr shape = st[1], dtype = st[2], fortran = st[3], raw = st[4];
  IGNIS_CHECK(shape->kind == Value::Tuple, what, ": the array's shape is not a tuple");
  Shape dims;
  int64_t numel = 1;
  for (const auto& d : shape->items) {
    const int64_t s = as_int(d, what, "an array dimension");
    IGNIS_CHECK(s >= 0 && s < (int64_t(1) << 40), what, ": array dimension ", s,
                " is out of range");
    dims.push_back(s);
    IGNIS_CHECK(numel <= (int64_t(1) << 40) / std::max<int64_t>(s, 1), what,
                ": the array is too large");
    numel *= s;
  }
  IGNIS_CHECK(fortran->kind == Value::Bool || fortran->kind == Value::Int, what,
              ": the array's order flag is not a bool");
  IGNIS_CHECK(dtype->kind == Value::Object && !dtype->items.empty() &&
                  (dtype->items[0]->kind == Value::Str || dtype->items[0]->kind == Value::Bytes),
              what, ": the array's dtype is not a numpy.dtype");
  const std::string code = dtype->items[0]->s;  // "f8", "i4", "b1", ...
  char order = '<';
  if (dtype->state && dtype->state->kind == Value::Tuple && dtype->state->items.size() > 1 &&
      (dtype->state->items[1]->kind == Value::Str ||
       dtype->state->items[1]->kind == Value::Bytes) &&
      !dtype->state->items[1]->s.empty()) {
    order = dtype->state->items[1]->s[0];
  }
  IGNIS_CHECK(code.size() >= 2 && std::isdigit(static_cast<unsigned char>(code[1])), what,
              ": unsupported array dtype '", code, "'");
  const char kind = code[0];
  const int width = std::atoi(code.c_str() + 1);
  IGNIS_CHECK((kind == 'f' && (width == 4 || width == 8)) ||
                  ((kind == 'i' || kind == 'u') &&
                   (width == 1 || width == 2 || width == 4 || width == 8)) ||
                  (kind == 'b' && width == 1),
              what, ": unsupported array dtype '", code, "'");
  IGNIS_CHECK(raw->kind == Value::Bytes || raw->kind == Value::Str, what,
              ": the array's data is not a byte string");
  IGNIS_CHECK(static_cast<int64_t>(raw->s.size()) == numel * width, what, ": the array of shape ",
              IntArrayRef(dims), " and dtype ", code, " needs ", numel * width, " bytes, but has ",
              raw->s.size());
  const bool swap = order == '>' && width > 1;
  const bool is_float = kind == 'f';
  Tensor out = empty({numel}, is_float ? kFloat64 : kInt64);
  for (int64_t k = 0; k < numel; ++k) {
    unsigned char b[8];
    std::memcpy(b, raw->s.data() + k * width, static_cast<size_t>(width));
    if (swap) {
      for (int i = 0, j = width - 1; i < j && j < 8; ++i, --j) std::swap(b[i], b[j]);
    }
    if (is_float) {
      double v;
      if (width == 4) {
        float f;
        std::memcpy(&f, b, 4);
        v = f;
      } else {
        std::memcpy(&v, b, 8);
      }
      out.data_ptr<double>()[k] = v;
    } else {
      int64_t v = 0;
      if (kind == 'u' || kind == 'b') {
        uint64_t u = 0;
        std::memcpy(&u, b, static_cast<size_t>(width));
        v = static_cast<int64_t>(u);
      } else {
        switch (width) {
          case 1: v = static_cast<int8_t>(b[0]); break;
          case 2: {
            int16_t t;
            std::memcpy(&t, b, 2);
            v = t;
            break;
          }
          case 4: {
            int32_t t;
            std::memcpy(&t, b, 4);
            v = t;
            break;
          }
          default: std::memcpy(&v, b, 8);
        }
      }
      out.data_ptr<int64_t>()[k] = v;
    }
  }
  const bool f_order = fortran->i != 0;
  if (f_order && dims.size() > 1) {
    Shape rev;
    std::vector<int64_t> perm;
    for (int64_t d = static_cast<int64_t>(dims.size()) - 1; d >= 0; --d) {
      rev.push_back(dims[d]);
      perm.push_back(d);
    }
    return out.reshape(rev).permute(perm).contiguous();
  }
  return out.reshape(dims);
}

Tensor csr_to_dense(const ValuePtr& v, const std::string& what) {
  // Protocol 2: NEWOBJ(csr_matrix); protocols 0-1: copy_reg._reconstructor(csr_matrix, ...).
  IGNIS_CHECK(v && v->kind == Value::Object && v->callable && v->callable->kind == Value::Global,
              what, ": expected a SciPy csr_matrix");
  ValuePtr cls = v->callable;
  if (ends_with(cls->s, "._reconstructor") && !v->items.empty()) cls = v->items[0];
  IGNIS_CHECK(cls->kind == Value::Global && ends_with(cls->s, "csr_matrix"), what,
              ": expected a SciPy csr_matrix, but got an object of ", cls->s);
  // NEWOBJ keeps the dict in the BUILD state; copy_reg._reconstructor(cls, object, None) too.
  ValuePtr st = v->state;
  if (st && st->kind == Value::Tuple && st->items.size() == 2) st = st->items[0];
  IGNIS_CHECK(st && st->kind == Value::Dict, what, ": the csr_matrix has no attribute dict");
  const ValuePtr shape = dict_get(st, "_shape");
  IGNIS_CHECK(shape && shape->kind == Value::Tuple && shape->items.size() == 2, what,
              ": the csr_matrix has no 2-d _shape");
  const int64_t rows = as_int(shape->items[0], what, "_shape[0]");
  const int64_t cols = as_int(shape->items[1], what, "_shape[1]");
  // Bounded before anything is allocated (PubMed, the largest Planetoid set, is 19717 x 500).
  IGNIS_CHECK(rows >= 0 && cols >= 0 && rows <= (int64_t(1) << 24) && cols <= (int64_t(1) << 24) &&
                  rows * cols <= (int64_t(1) << 28),
              what, ": the csr_matrix shape (", rows, ", ", cols,
              ") is out of range (at most 2^28 elements)");
  const ValuePtr data_v = dict_get(st, "data"), ind_v = dict_get(st, "indices"),
                 ptr_v = dict_get(st, "indptr");
  IGNIS_CHECK(data_v && ind_v && ptr_v, what, ": the csr_matrix lacks data, indices or indptr");
  const Tensor data = to_array(data_v, what + " (data)").to(kFloat64).reshape({-1});
  const Tensor ind = to_array(ind_v, what + " (indices)").to(kInt64).reshape({-1});
  const Tensor ptr = to_array(ptr_v, what + " (indptr)").to(kInt64).reshape({-1});
  const int64_t nnz = data.numel();
  IGNIS_CHECK(ind.numel() == nnz && ptr.numel() == rows + 1, what, ": the csr_matrix has ", nnz,
              " values, ", ind.numel(), " column indices and ", ptr.numel(), " row pointers for ",
              rows, " rows");
  const int64_t* p = ptr.data_ptr<int64_t>();
  const int64_t* c = ind.data_ptr<int64_t>();
  const double* d = data.data_ptr<double>();
  Tensor out = zeros({rows, cols}, kFloat32);
  float* o = out.data_ptr<float>();
  IGNIS_CHECK(rows == 0 || (p[0] == 0 && p[rows] == nnz), what,
              ": the csr_matrix row pointer must go from 0 to ", nnz);
  for (int64_t r = 0; r < rows; ++r) {
    IGNIS_CHECK(p[r] <= p[r + 1], what, ": the csr_matrix row pointer decreases at row ", r);
    for (int64_t k = p[r]; k < p[r + 1]; ++k) {
      IGNIS_CHECK(c[k] >= 0 && c[k] < cols, what, ": column index ", c[k], " in row ", r,
                  " is out of range for ", cols, " columns");
      o[r * cols + c[k]] += static_cast<float>(d[k]);
    }
  }
  return out;
}

std::vector<std::pair<int64_t, int64_t>> adjacency_dict(const ValuePtr& v,
                                                        const std::string& what) {
  IGNIS_CHECK(v && (v->kind == Value::Dict || (v->kind == Value::Object && v->callable &&
                                               ends_with(v->callable->s, "defaultdict"))),
              what, ": expected a dict of adjacency lists");
  std::vector<std::pair<int64_t, int64_t>> edges;
  for (const auto& [k, list] : v->entries) {
    const int64_t a = as_int(k, what, "a node id");
    IGNIS_CHECK(list->kind == Value::List || list->kind == Value::Tuple, what,
                ": the neighbours of node ", a, " are not a list");
    for (const auto& b : list->items) edges.emplace_back(a, as_int(b, what, "a neighbour id"));
  }
  return edges;
}

}  // namespace ignis::data::pickle
