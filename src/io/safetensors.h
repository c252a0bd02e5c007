// The safetensors format: an 8-byte little-endian header length N, N bytes of JSON
// ({"name": {"dtype": "F32", "shape": [..], "data_offsets": [begin, end]}, "__metadata__":
// {str: str}}), then the raw little-endian data. This header parser holds no tensors, so the
// fuzzer can drive it alone.
#pragma once

#include <cstdint>
#include <map>
#include <string>
#include <vector>

#include "ignis/dtype.h"
#include "ignis/serialize.h"

namespace ignis::safetensors {

/// Headers larger than this are refused (the format's reference reader uses 100 MB).
constexpr uint64_t kMaxHeaderBytes = 100'000'000;

struct Entry {
  std::string name;
  DType dtype;
  std::vector<int64_t> shape;
  uint64_t begin = 0, end = 0;  // byte offsets into the data section
};

struct Header {
  std::vector<Entry> entries;  // in file order
  std::map<std::string, std::string> metadata;
  uint64_t data_start = 0;     // 8 + N
};

/// Validates and parses the header of a file of `file_size` bytes whose first bytes are
/// `prefix` (at least 8 + N of them). Checks: header size bound, JSON well-formed, known
/// dtypes, non-negative shapes without overflow, dtype x shape == byte length, offsets in
/// bounds, sorted, non-overlapping and covering the whole data section. Throws ignis::Error
/// naming `path` and the fault.
Header parse_header(const uint8_t* prefix, uint64_t prefix_size, uint64_t file_size,
                    const std::string& path);

const char* dtype_code(DType t);  // "F32", ...

/// The bytes of a safetensors file holding `tensors` (what save_safetensors writes).
std::string serialize(const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata);

/// Loads a safetensors file held in memory (`size` bytes at `data`), with the checks of
/// load_safetensors; `name` is used in errors. The fuzzers' entry point.
SafetensorsFile load_buffer(const uint8_t* data, size_t size, const std::string& name);

}  // namespace ignis::safetensors
