// SHA-256 (FIPS 180-4), for verifying downloaded data.
#pragma once

#include <cstdint>
#include <string>

namespace ignis {

class Sha256 {
 public:
  Sha256();
  void update(const void* data, size_t n);
  /// The digest as 64 lowercase hex characters (finishes the hash).
  std::string hex();

 private:
  void block(const uint8_t* p);
  uint32_t h_[8];
  uint8_t buf_[64];
  size_t buf_len_ = 0;
  uint64_t total_ = 0;
};

/// The hex SHA-256 of a file's contents.
std::string sha256_file(const std::string& path);

}  // namespace ignis
