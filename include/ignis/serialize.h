// Saving and loading tensors in the safetensors format, readable by the Python safetensors /
// PyTorch ecosystem. Saves are atomic: a crash mid-save leaves the previous file intact.
#pragma once

#include <map>
#include <string>
#include <utility>
#include <vector>

#include "ignis/tensor.h"

namespace ignis {

using NamedTensorList = std::vector<std::pair<std::string, Tensor>>;

struct SafetensorsFile {
  NamedTensorList tensors;                      // in file order
  std::map<std::string, std::string> metadata;  // the "__metadata__" strings
  /// The tensor named `name`; throws listing the names when absent.
  const Tensor& at(const std::string& name) const;
};

/// Writes CPU tensors (any strides; stored contiguous, little-endian) to `path` atomically:
/// a temporary file in the same directory, fsync, rename over `path`, fsync the directory.
void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata = {});

/// Reads a safetensors file. The file is untrusted: every size, offset and dtype is checked,
/// and a bad file gives an ignis::Error naming the file and the fault.
SafetensorsFile load_safetensors(const std::string& path);

/// Writes `bytes` to `path` atomically (temporary file, fsync, rename, fsync directory).
void atomic_write(const std::string& path, const std::string& bytes);

}  // namespace ignis
