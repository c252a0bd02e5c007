// CIFAR-10 binary batches.
#include "ignis/data/cifar.h"

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "ignis/ops.h"

namespace ignis::data {

namespace {
constexpr int64_t kPixels = 3 * 32 * 32;

std::vector<uint8_t> read_file(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  IGNIS_CHECK(f.good(), "CIFAR10: cannot open ", path, ": ", std::strerror(errno));
  f.seekg(0, std::ios::end);
  const std::streamoff size = f.tellg();
  IGNIS_CHECK(size >= 0, "CIFAR10: cannot read the size of ", path);
  // Far above the 30 MB of a real batch: refuse before allocating for an unrelated large file.
  IGNIS_CHECK(size <= (int64_t{1} << 31), "CIFAR10: ", path, " is ", size,
              " bytes, far too large for a CIFAR-10 batch file");
  f.seekg(0, std::ios::beg);
  std::vector<uint8_t> bytes(static_cast<size_t>(size));
  if (size > 0) f.read(reinterpret_cast<char*>(bytes.data()), size);
  IGNIS_CHECK(f.good() || (size == 0 && !f.bad()), "CIFAR10: error reading ", path);
  return bytes;
}
}  // namespace

namespace {
// Checks the file at `path` and decodes its records into img (n * 3072 floats) and lab (n).
void decode_batch(const std::string& path, int64_t expected_records, float* img, int64_t* lab) {
  const std::vector<uint8_t> bytes = read_file(path);
  const auto size = static_cast<int64_t>(bytes.size());
  IGNIS_CHECK(size % kCifarRecordBytes == 0, "CIFAR10: ", path, ": size ", size,
              " bytes is not a multiple of the record size ", kCifarRecordBytes,
              " (1 label byte + 3072 pixel bytes): truncated or not a CIFAR-10 batch file");
  const int64_t n = size / kCifarRecordBytes;
  IGNIS_CHECK(n == expected_records, "CIFAR10: ", path, ": ", n, " records, expected ",
              expected_records, n < expected_records ? " (truncated file?)" : "");
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes.data() + r * kCifarRecordBytes;
    IGNIS_CHECK(rec[0] <= 9, "CIFAR10: ", path, ": record ", r, " has label ", int(rec[0]),
                " (expected 0 to 9)");
    lab[r] = rec[0];
    float* out = img + r * kPixels;
    for (int64_t i = 0; i < kPixels; ++i) out[i] = static_cast<float>(rec[1 + i]) / 255.0f;
  }
}
}  // namespace

Example read_cifar10_batch(const std::string& path, int64_t expected_records) {
  IGNIS_CHECK(expected_records > 0, "read_cifar10_batch: expected_records must be positive, got ",
              expected_records);
  Tensor images = empty({expected_records, 3, 32, 32}, kFloat32);
  Tensor labels = empty({expected_records}, kInt64);
  decode_batch(path, expected_records, images.data_ptr<float>(), labels.data_ptr<int64_t>());
  return {images, labels};
}

std::string CIFAR10::file_path(const std::string& root, const std::string& name) {
  for (const std::string& cand : {root + "/" + name, root + "/cifar-10-batches-bin/" + name}) {
    if (std::filesystem::exists(cand)) return cand;
  }
  IGNIS_FAIL("CIFAR10: ", root, "/", name, " not found (nor ", root, "/cifar-10-batches-bin/", name,
             "); download the binary version (cifar-10-binary.tar.gz) from "
             "https://www.cs.toronto.edu/~kriz/cifar.html and extract it into ",
             root,
             ", or point --data at the directory holding data_batch_1.bin ... test_batch.bin");
}

namespace {
TensorDataset load_cifar10(const std::string& root, bool train) {
  std::vector<std::string> names;
  if (train) {
    for (int i = 1; i <= 5; ++i) names.push_back("data_batch_" + std::to_string(i) + ".bin");
  } else {
    names.push_back("test_batch.bin");
  }
  // Resolve every path first, so that a missing file is reported before reading 150 MB.
  std::vector<std::string> paths;
  for (const auto& name : names) paths.push_back(CIFAR10::file_path(root, name));
  // Decode straight into the final tensors: no per-file copies to concatenate.
  const auto files = static_cast<int64_t>(paths.size());
  Tensor images = empty({files * kCifarRecordsPerFile, 3, 32, 32}, kFloat32);
  Tensor labels = empty({files * kCifarRecordsPerFile}, kInt64);
  for (int64_t f = 0; f < files; ++f) {
    decode_batch(paths[static_cast<size_t>(f)], kCifarRecordsPerFile,
                 images.data_ptr<float>() + f * kCifarRecordsPerFile * kPixels,
                 labels.data_ptr<int64_t>() + f * kCifarRecordsPerFile);
  }
  return TensorDataset(images, labels);
}
}  // namespace

CIFAR10::CIFAR10(const std::string& root, bool train) : TensorDataset(load_cifar10(root, train)) {}

}  // namespace ignis::data
