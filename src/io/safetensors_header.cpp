#include <algorithm>

#include "ignis/error.h"
#include "ignis/small_vector.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace ignis::safetensors {

namespace {
struct Code {
  const char* code;
  DType dtype;
};
constexpr Code kCodes[] = {{"F32", kFloat32}, {"F64", kFloat64}, {"BF16", kBFloat16},
                           {"I64", kInt64},   {"I32", kInt32},   {"U8", kUInt8},
                           {"BOOL", kBool}};
}  // namespace

const char* dtype_code(DType t) {
  for (const auto& c : kCodes) {
    if (c.dtype == t) return c.code;
  }
  return "?";
}

Header parse_header(const uint8_t* prefix, uint64_t prefix_size, uint64_t file_size,
                    const std::string& path) {
  const std::string where = "safetensors: " + path;
  IGNIS_CHECK(file_size >= 8 && prefix_size >= 8, where, ": file is ", file_size,
              " bytes, too short for the 8-byte header length");
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | prefix[i];
  IGNIS_CHECK(n <= kMaxHeaderBytes, where, ": header length ", n, " exceeds the limit of ",
              kMaxHeaderBytes, " bytes");
  IGNIS_CHECK(n <= file_size - 8, where, ": header length ", n, " runs past the end of the ",
              file_size, "-byte file");
  IGNIS_CHECK(prefix_size >= 8 + n, where, ": header truncated");
  Header h;
  h.data_start = 8 + n;
  const uint64_t data_size = file_size - h.data_start;
  std::string_view text(reinterpret_cast<const char*>(prefix + 8), n);
  json::Value root = json::parse(text, where.c_str(), 8);
  IGNIS_CHECK(root.kind == json::Value::Kind::Object, where, ": header is not a JSON object");
  for (const auto& [raw_name, v] : *root.obj) {
    // Names and strings come from the file: escaped before they reach an error message.
    const std::string name = json::printable(raw_name);
    if (raw_name == "__metadata__") {
      IGNIS_CHECK(v.kind == json::Value::Kind::Object, where, ": __metadata__ must be an object");
      for (const auto& [k, s] : *v.obj) {
        IGNIS_CHECK(s.kind == json::Value::Kind::String, where, ": metadata value of '",
                    json::printable(k), "' is not a string");
        h.metadata[k] = s.str;
      }
      continue;
    }
    IGNIS_CHECK(v.kind == json::Value::Kind::Object, where, ": entry '", name,
                "' is not an object");
    for (const auto& prev : h.entries) {
      IGNIS_CHECK(prev.name != raw_name, where, ": duplicate entry '", name, "'");
    }
    Entry e;
    e.name = raw_name;
    const json::Value* dt = v.find("dtype");
    IGNIS_CHECK(dt && dt->kind == json::Value::Kind::String, where, ": entry '", name,
                "' has no dtype string");
    bool known = false;
    for (const auto& c : kCodes) {
      if (dt->str == c.code) {
        e.dtype = c.dtype;
        known = true;
      }
    }
    IGNIS_CHECK(known, where, ": entry '", name, "' has unsupported dtype '",
                json::printable(dt->str), "'");
    const json::Value* shape = v.find("shape");
    IGNIS_CHECK(shape && shape->kind == json::Value::Kind::Array, where, ": entry '", name,
                "' has no shape array");
    for (const auto& d : *shape->arr) {
      IGNIS_CHECK(d.kind == json::Value::Kind::Number && d.is_integer && d.integer >= 0, where,
                  ": entry '", name, "' has an invalid dimension in its shape");
      e.shape.push_back(d.integer);
    }
    // Every product the tensor will need fits in int64: the element count, the byte size and
    // the strides (empty dims count as 1 there, so [0, 2^62, 4] is refused though it is empty).
    int64_t count = 1, strides = 1, bytes = 0;
    bool fits = true;
    for (int64_t d : e.shape) {
      fits = fits && !__builtin_mul_overflow(count, d, &count) &&
             !__builtin_mul_overflow(strides, std::max<int64_t>(d, 1), &strides);
    }
    fits =
        fits && !__builtin_mul_overflow(count, static_cast<int64_t>(element_size(e.dtype)), &bytes);
    IGNIS_CHECK(fits, where, ": entry '", name, "' has shape ", IntArrayRef(e.shape),
                " whose size overflows int64");
    const json::Value* off = v.find("data_offsets");
    IGNIS_CHECK(off && off->kind == json::Value::Kind::Array && off->arr->size() == 2, where,
                ": entry '", name, "' needs data_offsets [begin, end]");
    for (const auto& o : *off->arr) {
      IGNIS_CHECK(o.kind == json::Value::Kind::Number && o.is_integer && o.integer >= 0, where,
                  ": entry '", name, "' has invalid data_offsets");
    }
    e.begin = static_cast<uint64_t>((*off->arr)[0].integer);
    e.end = static_cast<uint64_t>((*off->arr)[1].integer);
    IGNIS_CHECK(e.begin <= e.end, where, ": entry '", name, "' data_offsets [", e.begin, ", ",
                e.end, "] are reversed (begin > end)");
    IGNIS_CHECK(e.end <= data_size, where, ": entry '", name, "' data_offsets [", e.begin, ", ",
                e.end, "] are out of bounds of the ", data_size, "-byte data section");
    IGNIS_CHECK(e.end - e.begin == static_cast<uint64_t>(bytes), where, ": entry '", name,
                "' of dtype ", dt->str, " and shape ", IntArrayRef(e.shape), " needs ", bytes,
                " bytes but its offsets span ", e.end - e.begin);
    h.entries.push_back(std::move(e));
  }
  // The data section must be covered exactly: sorted by offset, no gaps, no overlaps.
  std::vector<const Entry*> sorted;
  for (const auto& e : h.entries) sorted.push_back(&e);
  std::sort(sorted.begin(), sorted.end(), [](const Entry* a, const Entry* b) {
    return a->begin != b->begin ? a->begin < b->begin : a->end < b->end;
  });
  uint64_t at = 0;
  for (const Entry* e : sorted) {
    IGNIS_CHECK(e->begin == at, where, ": entry '", json::printable(e->name), "' starts at byte ",
                e->begin, " but the previous data ends at ", at, " (overlap or gap)");
    at = e->end;
  }
  IGNIS_CHECK(at == data_size, where, ": the tensors cover ", at, " bytes but the data section "
              "has ", data_size);
  return h;
}

}  // namespace ignis::safetensors
