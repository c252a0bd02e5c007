// CIFAR-10 binary batches.
#include "ignis/data/cifar.h"

#include <sys/stat.h>

#include <cerrno>
#include <cstring>
#include <filesystem>
#include <fstream>
#include <vector>

#include "data/cifar_buffer.h"
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
// The size check, on a file's or a buffer's size, before anything is read or allocated.
void check_size(const std::string& name, int64_t size, int64_t expected_records) {
  IGNIS_CHECK(size % kCifarRecordBytes == 0, "CIFAR10: ", name, ": size ", size,
              " bytes is not a multiple of the record size ", kCifarRecordBytes,
              " (1 label byte + 3072 pixel bytes): truncated or not a CIFAR-10 batch file");
  const int64_t n = size / kCifarRecordBytes;
  IGNIS_CHECK(n == expected_records, "CIFAR10: ", name, ": ", n, " records, expected ",
              expected_records, n < expected_records ? " (truncated file?)" : "");
}

int64_t file_size(const std::string& path) {
  struct stat st {};
  IGNIS_CHECK(::stat(path.c_str(), &st) == 0, "CIFAR10: cannot open ", path, ": ",
              std::strerror(errno));
  return static_cast<int64_t>(st.st_size);
}

// Checks n records at `bytes`; with img and lab, decodes them into img (n * 3072 floats) and
// lab (n). Called once without outputs, so that a bad label fails before any allocation.
void decode(const uint8_t* bytes, int64_t n, const std::string& name, float* img, int64_t* lab) {
  for (int64_t r = 0; r < n; ++r) {
    const uint8_t* rec = bytes + r * kCifarRecordBytes;
    IGNIS_CHECK(rec[0] <= 9, "CIFAR10: ", name, ": record ", r, " has label ", int(rec[0]),
                " (expected 0 to 9)");
    if (img == nullptr) continue;
    lab[r] = rec[0];
    float* out = img + r * kPixels;
    for (int64_t i = 0; i < kPixels; ++i) out[i] = static_cast<float>(rec[1 + i]) / 255.0f;
  }
}

void check_expected(int64_t expected_records) {
  IGNIS_CHECK(expected_records > 0 && expected_records <= (int64_t{1} << 31) / kCifarRecordBytes,
              "read_cifar10_batch: expected_records must be in [1, ",
              (int64_t{1} << 31) / kCifarRecordBytes, "], got ", expected_records);
}

Example decode_buffer(const uint8_t* data, int64_t size, const std::string& name,
                      int64_t expected_records) {
  check_size(name, size, expected_records);
  decode(data, expected_records, name, nullptr, nullptr);
  Tensor images = empty({expected_records, 3, 32, 32}, kFloat32);
  Tensor labels = empty({expected_records}, kInt64);
  decode(data, expected_records, name, images.data_ptr<float>(), labels.data_ptr<int64_t>());
  return {images, labels};
}
}  // namespace

Example read_cifar10_buffer(const uint8_t* data, size_t size, const std::string& name,
                            int64_t expected_records) {
  check_expected(expected_records);
  return decode_buffer(data, static_cast<int64_t>(size), name, expected_records);
}

Example read_cifar10_batch(const std::string& path, int64_t expected_records) {
  check_expected(expected_records);
  check_size(path, file_size(path), expected_records);
  const std::vector<uint8_t> bytes = read_file(path);
  return decode_buffer(bytes.data(), static_cast<int64_t>(bytes.size()), path, expected_records);
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
  // Every file's size and labels are checked before the tensors are allocated, so a bad file
  // costs no memory; then each is decoded straight into them (no copies to concatenate).
  for (const auto& path : paths) check_size(path, file_size(path), kCifarRecordsPerFile);
  for (const auto& path : paths) {
    const std::vector<uint8_t> bytes = read_file(path);
    check_size(path, static_cast<int64_t>(bytes.size()), kCifarRecordsPerFile);
    decode(bytes.data(), kCifarRecordsPerFile, path, nullptr, nullptr);
  }
  const auto files = static_cast<int64_t>(paths.size());
  Tensor images = empty({files * kCifarRecordsPerFile, 3, 32, 32}, kFloat32);
  Tensor labels = empty({files * kCifarRecordsPerFile}, kInt64);
  for (int64_t f = 0; f < files; ++f) {
    const std::string& path = paths[static_cast<size_t>(f)];
    const std::vector<uint8_t> bytes = read_file(path);
    check_size(path, static_cast<int64_t>(bytes.size()), kCifarRecordsPerFile);
    decode(bytes.data(), kCifarRecordsPerFile, path,
           images.data_ptr<float>() + f * kCifarRecordsPerFile * kPixels,
           labels.data_ptr<int64_t>() + f * kCifarRecordsPerFile);
  }
  return TensorDataset(images, labels);
}
}  // namespace

CIFAR10::CIFAR10(const std::string& root, bool train) : TensorDataset(load_cifar10(root, train)) {}

}  // namespace ignis::data
