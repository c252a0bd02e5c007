// The IDX reader and the MNIST dataset on files generated here: plain and gzip files read back
// exactly, and every kind of bad file gives an ignis::Error naming the file and the fault.
#include <sys/stat.h>

#include <cstdlib>
#include <filesystem>

#include "training_test_util.h"

using namespace ignis;
using ignis::testing_util::error_of;
using ignis::testing_util::read_file;
using ignis::testing_util::write_file;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

void put_be32(std::string& s, uint32_t v) {
  for (int i = 3; i >= 0; --i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}
void put_le32(std::string& s, uint32_t v) {
  for (int i = 0; i < 4; ++i) s.push_back(static_cast<char>((v >> (8 * i)) & 0xff));
}

// An IDX file: magic 0 0 <type> <ndim>, big-endian uint32 dims, then the data bytes.
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data,
                      uint8_t type = 0x08) {
  std::string s = {0, 0, static_cast<char>(type), static_cast<char>(dims.size())};
  for (uint32_t d : dims) put_be32(s, d);
  return s + data;
}

std::string pattern(size_t n, uint32_t seed) {
  std::string s;
  uint32_t x = seed;
  for (size_t i = 0; i < n; ++i) {
    x = x * 1664525u + 1013904223u;
    s.push_back(static_cast<char>(x >> 24));
  }
  return s;
}

uint32_t crc32(const std::string& data) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : data) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

// A gzip stream (RFC 1952) whose deflate data are stored blocks (RFC 1951, BTYPE 00) of at most
// `block` bytes, built byte by byte.
std::string gzip_stored(const std::string& data, size_t block = 65535) {
  std::string s = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, '\xff'};
  size_t pos = 0;
  do {
    const size_t n = std::min(block, data.size() - pos);
    const bool last = pos + n == data.size();
    s.push_back(last ? 1 : 0);
    s.push_back(static_cast<char>(n & 0xff));
    s.push_back(static_cast<char>(n >> 8));
    s.push_back(static_cast<char>(~n & 0xff));
    s.push_back(static_cast<char>((~n >> 8) & 0xff));
    s += data.substr(pos, n);
    pos += n;
  } while (pos < data.size());
  put_le32(s, crc32(data));
  put_le32(s, static_cast<uint32_t>(data.size()));
  return s;
}

std::string bytes_of(const Tensor& t) {
  Tensor c = t.contiguous();
  return std::string(static_cast<const char*>(c.data_ptr()), static_cast<size_t>(c.numel()));
}

bool have_gzip_tool() { return std::system("command -v gzip >/dev/null 2>&1") == 0; }

}  // namespace

TEST(ReadIdx, PlainFilesReadBackExactly) {
  TempDir dir("ignis-mnist");
  const std::string data = pattern(3 * 4 * 5, 1);
  write_file(dir.file("a.idx"), idx_bytes({3, 4, 5}, data));
  Tensor t = data::read_idx(dir.file("a.idx"));
  EXPECT_EQ(t.dtype(), kUInt8);
  EXPECT_EQ(t.sizes().shape(), Shape({3, 4, 5}));
  EXPECT_EQ(bytes_of(t), data);
  EXPECT_EQ(t[2][3][4].item<int64_t>(), static_cast<uint8_t>(data[59]));
  // 1-d (labels) and 4-d files; an empty first dim.
  write_file(dir.file("l.idx"), idx_bytes({7}, std::string("\x00\x01\x02\x09\xff\x05\x03", 7)));
  Tensor l = data::read_idx(dir.file("l.idx"));
  EXPECT_EQ(l.sizes().shape(), Shape({7}));
  EXPECT_EQ(l[4].item<int64_t>(), 255);
  EXPECT_EQ(l[3].item<int64_t>(), 9);
  write_file(dir.file("4d.idx"), idx_bytes({2, 1, 3, 2}, pattern(12, 2)));
  EXPECT_EQ(bytes_of(data::read_idx(dir.file("4d.idx"))), pattern(12, 2));
  write_file(dir.file("empty.idx"), idx_bytes({0, 28, 28}, ""));
  EXPECT_EQ(data::read_idx(dir.file("empty.idx")).sizes().shape(), Shape({0, 28, 28}));
}

TEST(ReadIdx, GzipFilesReadBackExactly) {
  TempDir dir("ignis-mnist");
  // 84 KB of data: one gzip stream of two stored blocks (at most 64 KiB each).
  const std::string data = pattern(70 * 30 * 40, 3);
  const std::string file = idx_bytes({70, 30, 40}, data);
  write_file(dir.file("a.idx.gz"), gzip_stored(file));
  Tensor t = data::read_idx(dir.file("a.idx.gz"));
  EXPECT_EQ(t.sizes().shape(), Shape({70, 30, 40}));
  EXPECT_EQ(bytes_of(t), data);
  // Small blocks, and a .gz file found by content rather than by name.
  write_file(dir.file("b.bin"), gzip_stored(file, 1000));
  EXPECT_EQ(bytes_of(data::read_idx(dir.file("b.bin"))), data);
  // Really compressed by the gzip tool (Debian's gzip is essential, but skip politely).
  if (!have_gzip_tool()) GTEST_SKIP() << "no gzip program to compress with";
  // Mostly-zero data, like MNIST's background, so that the compressed file is smaller.
  std::string sparse = data;
  for (size_t i = 0; i < sparse.size(); ++i) {
    if (i % 5 != 0) sparse[i] = 0;
  }
  const std::string sparse_file = idx_bytes({70, 30, 40}, sparse);
  write_file(dir.file("c.idx"), sparse_file);
  ASSERT_EQ(std::system(("gzip -9n " + (dir.file("c.idx"))).c_str()), 0);
  ASSERT_LT(fs::file_size(dir.file("c.idx.gz")), sparse_file.size() / 2);
  EXPECT_EQ(bytes_of(data::read_idx(dir.file("c.idx.gz"))), sparse);
}

TEST(ReadIdx, BadFilesGiveErrorsNamingTheFileAndTheFault) {
  TempDir dir("ignis-mnist");
  const std::string p = dir.file("bad.idx");
  auto err = [&](const std::string& bytes) {
    write_file(p, bytes);
    return error_of([&] { data::read_idx(p); });
  };
  const std::string good = idx_bytes({3, 4, 5}, pattern(60, 4));
  // Truncated data, header, and magic.
  EXPECT_THAT(err(good.substr(0, good.size() - 1)),
              HasSubstr("read_idx: " + p +
                        ": truncated: dimensions [3, 4, 5] need 60 bytes of "
                        "data but the file has 59"));
  EXPECT_THAT(err(good.substr(0, 10)),
              HasSubstr("read_idx: " + p + ": truncated header (10 bytes, need 16)"));
  EXPECT_THAT(err(good.substr(0, 3)),
              HasSubstr("read_idx: " + p + ": file is 3 bytes, too short for the magic number"));
  EXPECT_THAT(err(""), HasSubstr("file is 0 bytes, too short"));
  // Wrong magic, element type, number of dimensions.
  std::string bad_magic = good;
  bad_magic[0] = 0x1f;
  EXPECT_THAT(err(bad_magic), HasSubstr("read_idx: " + p +
                                        ": bad magic number (first bytes 31 0, "
                                        "expected 0 0): not an IDX file"));
  EXPECT_THAT(err(idx_bytes({3, 4, 5}, pattern(240, 4), 0x0D)),
              HasSubstr("read_idx: " + p + ": element type 0xd is not unsigned byte (0x08)"));
  EXPECT_THAT(err(idx_bytes({3}, "abc", 0x0B)), HasSubstr("element type 0xb is not unsigned byte"));
  EXPECT_THAT(err(idx_bytes({}, "")),
              HasSubstr("read_idx: " + p + ": 0 dimensions (expected 1 to 4)"));
  EXPECT_THAT(err(idx_bytes({1, 1, 1, 1, 1}, "x")), HasSubstr("5 dimensions (expected 1 to 4)"));
  // Dimensions that do not match the file size: too small for the data that follows.
  EXPECT_THAT(err(idx_bytes({3, 4, 4}, pattern(60, 4))),
              HasSubstr("read_idx: " + p + ": 12 unexpected trailing bytes after the data"));
  // Huge dimensions: the product overflows 64 bits, or is far beyond any IDX data set; neither
  // may allocate.
  EXPECT_THAT(err(idx_bytes({0xffffffffu, 0xffffffffu, 0xffffffffu}, "abc")),
              HasSubstr("read_idx: " + p + ": dimensions are too large"));
  EXPECT_THAT(err(idx_bytes({65536, 65536}, "abc")), HasSubstr("dimensions are too large"));
  EXPECT_THAT(err(idx_bytes({60000, 28, 28}, pattern(100, 5))),
              HasSubstr("need 47040000 bytes of data but the file has 100"));
  // A missing file, and a directory.
  EXPECT_THAT(
      error_of([&] { data::read_idx(dir.file("nope.idx")); }),
      HasSubstr("read_idx: cannot open " + (dir.file("nope.idx")) + ": No such file or directory"));
  EXPECT_THAT(error_of([&] { data::read_idx(dir.str()); }), HasSubstr(dir.str()));
}

TEST(ReadIdx, CorruptedGzipFilesAreErrors) {
  TempDir dir("ignis-mnist");
  const std::string p = dir.file("bad.idx.gz");
  auto err = [&](const std::string& bytes) {
    write_file(p, bytes);
    return error_of([&] { data::read_idx(p); });
  };
  const std::string file = idx_bytes({10, 10}, pattern(100, 6));
  const std::string gz = gzip_stored(file);
  // A wrong checksum in the trailer.
  std::string bad_crc = gz;
  bad_crc[bad_crc.size() - 6] ^= 0x55;
  EXPECT_THAT(err(bad_crc), HasSubstr("read_idx: " + p + ": corrupted compressed data"));
  // An invalid deflate block type (BTYPE 11).
  std::string bad_block = gz;
  bad_block[10] = 0x07;
  EXPECT_THAT(err(bad_block), HasSubstr("read_idx: " + p + ": corrupted compressed data"));
  // A stream cut in the middle of the data: the IDX size check catches it.
  EXPECT_THAT(err(gz.substr(0, 10 + 5 + 50)), HasSubstr("read_idx: " + p + ": truncated"));
}

namespace {
// Writes MNIST-format files for `prefix` with n images of h x w and n_labels labels.
void write_mnist(const TempDir& dir, const std::string& prefix, uint32_t n, uint32_t n_labels,
                 bool gz, uint32_t seed) {
  const std::string images = idx_bytes({n, 28, 28}, pattern(size_t{n} * 784, seed));
  std::string labels_data;
  for (uint32_t i = 0; i < n_labels; ++i) labels_data.push_back(static_cast<char>((i * 3) % 10));
  const std::string labels = idx_bytes({n_labels}, labels_data);
  const std::string suffix = gz ? ".gz" : "";
  write_file(dir.file(prefix + "-images-idx3-ubyte" + suffix), gz ? gzip_stored(images) : images);
  write_file(dir.file(prefix + "-labels-idx1-ubyte" + suffix), gz ? gzip_stored(labels) : labels);
}
}  // namespace

TEST(MNIST, LoadsTrainAndTestSplitsScaledToUnitInterval) {
  TempDir dir("ignis-mnist");
  write_mnist(dir, "train", 6, 6, /*gz=*/false, 7);
  write_mnist(dir, "t10k", 4, 4, /*gz=*/true, 8);
  data::MNIST train(dir.str(), true);
  ASSERT_EQ(train.size(), 6);
  EXPECT_EQ(train.data().dtype(), kFloat32);
  EXPECT_EQ(train.data().sizes().shape(), Shape({6, 1, 28, 28}));
  EXPECT_EQ(train.targets().dtype(), kInt64);
  const std::string raw = pattern(6 * 784, 7);
  const Tensor flat = train.data().reshape({-1}).contiguous();
  const float* px = flat.data_ptr<float>();
  for (size_t i = 0; i < raw.size(); ++i) {
    ASSERT_FLOAT_EQ(px[i], static_cast<float>(static_cast<uint8_t>(raw[i])) / 255.0f) << i;
  }
  for (int64_t i = 0; i < 6; ++i) EXPECT_EQ(train.targets()[i].item<int64_t>(), (i * 3) % 10);
  data::Example ex = train.get(5);
  EXPECT_EQ(ex.data.sizes().shape(), Shape({1, 28, 28}));
  EXPECT_EQ(ex.target.item<int64_t>(), 5);

  data::MNIST test(dir.str(), false);  // found through the .gz names
  ASSERT_EQ(test.size(), 4);
  const Tensor tflat = test.data().reshape({-1}).contiguous();
  const std::string traw = pattern(4 * 784, 8);
  EXPECT_FLOAT_EQ(tflat.data_ptr<float>()[1000], static_cast<uint8_t>(traw[1000]) / 255.0f);
  EXPECT_EQ(data::MNIST::file_path(dir.str(), "t10k-labels-idx1-ubyte"),
            dir.file("t10k-labels-idx1-ubyte.gz"));
  // The plain file wins when both exist.
  write_file(dir.file("train-labels-idx1-ubyte.gz"), "not read");
  EXPECT_EQ(data::MNIST::file_path(dir.str(), "train-labels-idx1-ubyte"),
            dir.file("train-labels-idx1-ubyte"));
}

TEST(MNIST, InconsistentOrMissingFilesAreErrors) {
  TempDir dir("ignis-mnist");
  write_mnist(dir, "train", 5, 4, false, 9);
  EXPECT_THAT(error_of([&] { data::MNIST(dir.str(), true); }),
              HasSubstr("MNIST: " + (dir.file("train-images-idx3-ubyte")) + " has 5 images but " +
                        (dir.file("train-labels-idx1-ubyte")) + " has 4 labels"));
  // Labels with the wrong rank, images with the wrong rank.
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5, 1}, "abcde"));
  EXPECT_THAT(error_of([&] { data::MNIST(dir.str(), true); }),
              HasSubstr("MNIST: " + (dir.file("train-labels-idx1-ubyte")) +
                        ": expected 1 dimension, got shape [5, 1]"));
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({5}, std::string("\1\2\3\4\5", 5)));
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({5, 784}, pattern(5 * 784, 1)));
  EXPECT_THAT(error_of([&] { data::MNIST(dir.str(), true); }),
              HasSubstr("MNIST: " + (dir.file("train-images-idx3-ubyte")) +
                        ": expected 3 dimensions, got shape [5, 784]"));
  // A damaged file inside the dataset names that file.
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({5, 28, 28}, pattern(100, 1)));
  EXPECT_THAT(error_of([&] { data::MNIST(dir.str(), true); }),
              HasSubstr("read_idx: " + (dir.file("train-images-idx3-ubyte")) + ": truncated"));
  // Missing split.
  EXPECT_THAT(error_of([&] { data::MNIST(dir.str(), false); }),
              HasSubstr("MNIST: " + (dir.file("t10k-images-idx3-ubyte")) +
                        " not found (nor t10k-images-idx3-ubyte.gz)"));
  EXPECT_THAT(error_of([&] { data::MNIST("/nonexistent/mnist", true); }),
              HasSubstr("MNIST: /nonexistent/mnist/train-images-idx3-ubyte not found"));
}

TEST(MNIST, BatchesThroughTheDataLoader) {
  TempDir dir("ignis-mnist");
  write_mnist(dir, "train", 10, 10, false, 11);
  auto ds = std::make_shared<data::MNIST>(dir.str(), true);
  data::DataLoader loader(ds, {.batch_size = 4});
  std::vector<int64_t> sizes, targets;
  for (auto& b : loader) {
    EXPECT_EQ(b.data.sizes().shape(), Shape({b.data.size(0), 1, 28, 28}));
    sizes.push_back(b.data.size(0));
    for (int64_t i = 0; i < b.target.size(0); ++i) targets.push_back(b.target[i].item<int64_t>());
  }
  EXPECT_EQ(sizes, (std::vector<int64_t>{4, 4, 2}));
  EXPECT_EQ(targets, (std::vector<int64_t>{0, 3, 6, 9, 2, 5, 8, 1, 4, 7}));
}
