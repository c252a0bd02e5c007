// IDX files (the MNIST format), plain or gzip-compressed, from a file or from memory. Private to
// src/: the MNIST dataset and the fuzzers use it; the public entry point is data::read_idx.
#pragma once

#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis::data::idx {

/// An IDX file, validated in full when opened -- magic, element type, dimensions, the exact data
/// length, and for gzip the CRC/size trailer and the absence of trailing bytes -- before anyone
/// allocates a tensor for it. A plain file is compared with its size, then streamed by read();
/// a gzip file is decompressed when opened into a buffer that grows only as data arrives (never
/// beyond the claimed size), which read() then hands out.
class Reader {
 public:
  /// A file; gzip is recognised by its magic number, whatever the file's name.
  static Reader open(const std::string& path);
  /// `size` bytes at `data` (not copied: they must outlive the reader); `name` is used in errors.
  static Reader from_buffer(const void* data, size_t size, const std::string& name);
  Reader(Reader&&) noexcept;
  ~Reader();

  const std::vector<int64_t>& dims() const;
  const std::string& name() const;
  /// Streams the data bytes, in order, through sink(bytes, n, offset).
  void read(const std::function<void(const uint8_t*, size_t, uint64_t)>& sink);

 private:
  struct State;
  explicit Reader(std::unique_ptr<State> s);
  std::unique_ptr<State> s_;
};

/// The data of `r` as a uint8 tensor of its dimensions.
Tensor read_uint8(Reader& r);

}  // namespace ignis::data::idx
