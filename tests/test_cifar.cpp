// CIFAR-10 binary batches (generated files written into a temp dir) and the image transforms.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cmath>
#include <filesystem>
#include <fstream>
#include <set>

#include "ignis/data/cifar.h"
#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;
namespace fs = std::filesystem;

namespace {

// The pixel byte i of record r of file `file` in the generated data, and its label.
uint8_t pixel(int64_t file, int64_t r, int64_t i) {
  return static_cast<uint8_t>((file * 31 + r * 7 + i * 13) % 256);
}
uint8_t label(int64_t file, int64_t r) { return static_cast<uint8_t>((file + r) % 10); }

std::string record_bytes(int64_t file, int64_t r) {
  std::string rec(3073, '\0');
  rec[0] = static_cast<char>(label(file, r));
  for (int64_t i = 0; i < 3072; ++i) rec[1 + i] = static_cast<char>(pixel(file, r, i));
  return rec;
}

void write_batch(const std::string& path, int64_t file, int64_t records) {
  std::ofstream f(path, std::ios::binary);
  for (int64_t r = 0; r < records; ++r) f << record_bytes(file, r);
}

void write_bytes(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f << bytes;
}

float at4(const Tensor& t, int64_t n, int64_t c, int64_t y, int64_t x) {
  return t[n][c][y][x].item<float>();
}
}  // namespace

TEST(Cifar10, SmallBatchReadsBackExactly) {
  TempDir dir("ignis-cifar");
  write_batch(dir.file("b.bin"), 0, 3);
  data::Example e = data::read_cifar10_batch(dir.file("b.bin"), 3);
  ASSERT_TRUE(e.data.sizes().equals({3, 3, 32, 32}));
  ASSERT_EQ(e.data.dtype(), kFloat32);
  ASSERT_EQ(e.target.dtype(), kInt64);
  const Tensor flat = e.data.reshape({3, 3072}).contiguous();
  const float* p = flat.data_ptr<float>();
  for (int64_t r = 0; r < 3; ++r) {
    EXPECT_EQ(e.target[r].item<int64_t>(), label(0, r));
    for (int64_t i = 0; i < 3072; ++i) {
      ASSERT_EQ(p[r * 3072 + i], static_cast<float>(pixel(0, r, i)) / 255.0f) << r << " " << i;
    }
  }
  // CHW order: byte 1 + c*1024 + y*32 + x is pixel (c, y, x).
  EXPECT_EQ(at4(e.data, 1, 2, 5, 7), pixel(0, 1, 2 * 1024 + 5 * 32 + 7) / 255.0f);
}

TEST(Cifar10, TestSplitFromGeneratedFile) {
  TempDir dir("ignis-cifar");
  write_batch(dir.file("test_batch.bin"), 5, 10000);
  data::CIFAR10 test(dir.str(), false);
  ASSERT_EQ(test.size(), 10000);
  ASSERT_TRUE(test.data().sizes().equals({10000, 3, 32, 32}));
  for (int64_t r : {0, 1, 4321, 9999}) {
    EXPECT_EQ(test.targets()[r].item<int64_t>(), label(5, r));
    for (int64_t i : {0, 1, 1023, 1024, 3071}) {
      EXPECT_EQ(at4(test.data(), r, i / 1024, (i % 1024) / 32, i % 32), pixel(5, r, i) / 255.0f);
    }
  }
  EXPECT_EQ(test.data().min().item<float>(), 0.0f);
  EXPECT_EQ(test.data().max().item<float>(), 1.0f);
}

TEST(Cifar10, TarballSubdirectoryIsFound) {
  TempDir dir("ignis-cifar");
  fs::create_directories(dir.path / "cifar-10-batches-bin");
  write_batch(dir.file("cifar-10-batches-bin/test_batch.bin"), 2, 10000);
  data::CIFAR10 test(dir.str(), false);
  EXPECT_EQ(test.targets()[3].item<int64_t>(), label(2, 3));
}

TEST(Cifar10, MissingFilesAreNamedWithAHint) {
  TempDir dir("ignis-cifar");
  const std::string msg = error_of([&] { data::CIFAR10(dir.str(), false); });
  EXPECT_THAT(msg, HasSubstr("test_batch.bin not found"));
  EXPECT_THAT(msg, HasSubstr("cifar-10-binary.tar.gz"));
  // Train: the first missing batch is named, before any file is read.
  write_batch(dir.file("data_batch_1.bin"), 0, 1);
  write_batch(dir.file("data_batch_2.bin"), 1, 1);
  const std::string msg2 = error_of([&] { data::CIFAR10(dir.str(), true); });
  EXPECT_THAT(msg2, HasSubstr("data_batch_3.bin not found"));
}

TEST(Cifar10, CorruptedFilesAreRejected) {
  TempDir dir("ignis-cifar");
  // Truncated: the last record is cut short.
  const std::string trunc = dir.file("trunc.bin");
  write_bytes(trunc, record_bytes(0, 0) + record_bytes(0, 1).substr(0, 1000));
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(trunc, 2); }),
              HasSubstr(trunc + ": size 4073 bytes is not a multiple of the record size 3073"));
  // Whole records, but not as many as a batch has.
  const std::string few = dir.file("test_batch.bin");
  write_batch(few, 0, 2);
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(few, 3); }),
              HasSubstr(few + ": 2 records, expected 3 (truncated file?)"));
  EXPECT_THAT(error_of([&] { data::CIFAR10(dir.str(), false); }),
              HasSubstr("test_batch.bin: 2 records, expected 10000"));
  // Too many records.
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(few, 1); }),
              HasSubstr("2 records, expected 1"));
  // A label out of range.
  std::string bad = record_bytes(0, 0) + record_bytes(0, 1);
  bad[3073] = 10;
  const std::string badp = dir.file("bad.bin");
  write_bytes(badp, bad);
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(badp, 2); }),
              HasSubstr(badp + ": record 1 has label 10 (expected 0 to 9)"));
  // Empty file and a file that is not there.
  write_bytes(dir.file("empty.bin"), "");
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(dir.file("empty.bin"), 1); }),
              HasSubstr("0 records, expected 1"));
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(dir.file("nope.bin")); }),
              HasSubstr("cannot open " + dir.file("nope.bin")));
}

// ---- transforms

namespace {
// A [N, C, H, W] float tensor with value n*1000 + c*100 + y*10 + x + 1 (never 0).
Tensor coded_images(int64_t n, int64_t c, int64_t h, int64_t w) {
  std::vector<float> v;
  for (int64_t i = 0; i < n; ++i)
    for (int64_t ch = 0; ch < c; ++ch)
      for (int64_t y = 0; y < h; ++y)
        for (int64_t x = 0; x < w; ++x)
          v.push_back(static_cast<float>(i * 1000 + ch * 100 + y * 10 + x + 1));
  return tensor(v).reshape({n, c, h, w});
}

// The (top, left) window of the zero-padded sample `s` of x that equals crop `o`, or (-1, -1).
std::pair<int64_t, int64_t> find_window(const Tensor& x, const Tensor& o, int64_t s, int64_t pad) {
  const int64_t c = x.size(1), h = x.size(2), w = x.size(3), size = o.size(2);
  for (int64_t top = 0; top <= h + 2 * pad - size; ++top) {
    for (int64_t left = 0; left <= w + 2 * pad - size; ++left) {
      bool ok = true;
      for (int64_t ch = 0; ch < c && ok; ++ch)
        for (int64_t r = 0; r < size && ok; ++r)
          for (int64_t q = 0; q < size && ok; ++q) {
            const int64_t y = top + r - pad, xx = left + q - pad;
            const float want = (y < 0 || y >= h || xx < 0 || xx >= w) ? 0.0f : at4(x, s, ch, y, xx);
            ok = at4(o, s, ch, r, q) == want;
          }
      if (ok) return {top, left};
    }
  }
  return {-1, -1};
}
}  // namespace

TEST(ImageTransforms, RandomCropHandValues) {
  // One 1x2x2 image [[1, 2], [3, 4]] padded by 1 and cropped to 2x2: 9 possible windows.
  const Tensor img = tensor({1.0, 2.0, 3.0, 4.0}).reshape({1, 2, 2});
  auto crop = data::transforms::RandomCrop(2, 1, 7);
  std::set<std::vector<float>> seen;
  for (int k = 0; k < 200; ++k) {
    const Tensor o = crop(img);
    ASSERT_TRUE(o.sizes().equals({1, 2, 2}));
    const float* p = o.contiguous().data_ptr<float>();
    seen.insert({p[0], p[1], p[2], p[3]});
  }
  const std::set<std::vector<float>> windows = {{0, 0, 0, 1}, {0, 0, 1, 2}, {0, 0, 2, 0},
                                                {0, 1, 0, 3}, {1, 2, 3, 4}, {2, 0, 4, 0},
                                                {0, 3, 0, 0}, {3, 4, 0, 0}, {4, 0, 0, 0}};
  EXPECT_EQ(seen, windows);  // every window, and nothing else, over 200 draws
  // Without padding and the full size, the crop is the identity.
  const Tensor x = coded_images(2, 3, 4, 5);
  EXPECT_THROW(data::transforms::RandomCrop(5, 0, 1)(x), Error);  // 5 > H = 4
  const Tensor same = data::transforms::RandomCrop(4, 0, 1)(x.narrow(3, 0, 4));
  EXPECT_TRUE(equal(same, x.narrow(3, 0, 4).contiguous()));
}

TEST(ImageTransforms, RandomCropIsPerSampleWindows) {
  const Tensor x = coded_images(16, 3, 8, 8);
  const Tensor o = data::transforms::RandomCrop(6, 2, 3)(x);
  ASSERT_TRUE(o.sizes().equals({16, 3, 6, 6}));
  std::set<std::pair<int64_t, int64_t>> offsets;
  for (int64_t s = 0; s < 16; ++s) {
    const auto w = find_window(x, o, s, 2);
    ASSERT_GE(w.first, 0) << "sample " << s << " is not a window of its padded image";
    offsets.insert(w);
  }
  EXPECT_GT(offsets.size(), 4u);  // drawn independently per sample
}

TEST(ImageTransforms, RandomHorizontalFlip) {
  const Tensor x = coded_images(3, 2, 2, 3);
  const Tensor all = data::transforms::RandomHorizontalFlip(1.0, 0)(x);
  // Hand values: sample 1, channel 1, row 0 is 1101 1102 1103 -> 1103 1102 1101.
  EXPECT_EQ(at4(all, 1, 1, 0, 0), 1103.0f);
  EXPECT_EQ(at4(all, 1, 1, 0, 1), 1102.0f);
  EXPECT_EQ(at4(all, 1, 1, 0, 2), 1101.0f);
  EXPECT_TRUE(equal(all, flip(x, {3})));
  EXPECT_TRUE(equal(data::transforms::RandomHorizontalFlip(0.0, 0)(x), x));
  // p = 0.5: each sample is either itself or its mirror, about half of them mirrored.
  const Tensor many = coded_images(400, 1, 1, 2);
  const Tensor o = data::transforms::RandomHorizontalFlip(0.5, 11)(many);
  int flipped = 0;
  for (int64_t s = 0; s < 400; ++s) {
    const float a = at4(o, s, 0, 0, 0), b = at4(o, s, 0, 0, 1);
    const float x0 = at4(many, s, 0, 0, 0), x1 = at4(many, s, 0, 0, 1);
    ASSERT_TRUE((a == x0 && b == x1) || (a == x1 && b == x0));
    flipped += a == x1;
  }
  EXPECT_GT(flipped, 150);
  EXPECT_LT(flipped, 250);
  // Integer images (uint8) keep their dtype.
  const Tensor u8 = tensor({1, 2, 3, 4, 5, 6}).to(kUInt8).reshape({1, 2, 3});
  const Tensor fu = data::transforms::RandomHorizontalFlip(1.0, 0)(u8);
  EXPECT_EQ(fu.dtype(), kUInt8);
  EXPECT_EQ(fu[0][1][0].item<int64_t>(), 6);
}

TEST(ImageTransforms, ReproducibleUnderASeed) {
  const Tensor x = coded_images(8, 3, 8, 8);
  auto run = [&](uint64_t seed) {
    auto t = data::transforms::Compose({data::transforms::RandomCrop(8, 4, seed),
                                        data::transforms::RandomHorizontalFlip(0.5, seed + 1)});
    std::vector<Tensor> outs;
    for (int call = 0; call < 3; ++call) outs.push_back(t(x));
    return outs;
  };
  const auto a = run(42), b = run(42), c = run(43);
  bool differs = false;
  for (size_t i = 0; i < a.size(); ++i) {
    EXPECT_TRUE(equal(a[i], b[i])) << "call " << i;
    differs = differs || !equal(a[i], c[i]);
  }
  EXPECT_TRUE(differs);
  EXPECT_FALSE(equal(a[0], a[1]));  // successive calls draw new windows
  // Draws count samples: one batch of 8 equals 8 single-image calls.
  auto crop_b = data::transforms::RandomCrop(6, 2, 9);
  auto crop_s = data::transforms::RandomCrop(6, 2, 9);
  const Tensor batch = crop_b(x);
  for (int64_t s = 0; s < 8; ++s) EXPECT_TRUE(equal(crop_s(x[s]), batch[s])) << s;
  // Without a seed, the default generator's seed decides.
  manual_seed(5);
  const Tensor u = data::transforms::RandomCrop(6, 2)(x);
  manual_seed(5);
  EXPECT_TRUE(equal(data::transforms::RandomCrop(6, 2)(x), u));
}

TEST(ImageTransforms, PerChannelNormalize) {
  const Tensor x = full({2, 3, 2, 2}, 0.5);
  const Tensor o = data::transforms::Normalize(data::kCifar10Mean, data::kCifar10Std)(x);
  for (int64_t c = 0; c < 3; ++c) {
    const double want = (0.5 - data::kCifar10Mean[c]) / data::kCifar10Std[c];
    EXPECT_NEAR(at4(o, 1, c, 1, 0), want, 1e-6);
  }
  EXPECT_NEAR(at4(o, 0, 0, 0, 0), (0.5 - 0.4914) / 0.2470, 1e-6);
}

TEST(ImageTransforms, Errors) {
  const Tensor x = zeros({2, 3, 4, 4});
  EXPECT_THAT(error_of([&] { data::transforms::RandomCrop(9, 2, 0)(x); }),
              HasSubstr("RandomCrop: crop size 9 is larger than the padded image 8x8 "
                        "(input shape [2, 3, 4, 4], padding 2)"));
  EXPECT_THAT(error_of([&] {
                data::transforms::RandomCrop(2, 0, 0)(zeros({4, 4}));
              }),
              HasSubstr("RandomCrop: expected an image [C, H, W] or a batch [N, C, H, W], got "
                        "shape [4, 4]"));
  EXPECT_THAT(error_of([&] { data::transforms::RandomCrop(0, 0, 0); }),
              HasSubstr("RandomCrop: size must be positive, got 0"));
  EXPECT_THAT(error_of([&] { data::transforms::RandomCrop(2, -1, 0); }),
              HasSubstr("RandomCrop: padding must be >= 0, got -1"));
  EXPECT_THAT(error_of([&] { data::transforms::RandomHorizontalFlip(1.5, 0); }),
              HasSubstr("RandomHorizontalFlip: p must be in [0, 1], got 1.5"));
  EXPECT_THAT(error_of([&] { data::transforms::RandomHorizontalFlip(0.5, 0)(zeros({5})); }),
              HasSubstr("RandomHorizontalFlip: expected an image [C, H, W] or a batch"));
}
