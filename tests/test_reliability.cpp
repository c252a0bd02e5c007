// Regression tests of the reliability audit (docs/reliability.md): overflow-safe shapes from
// files and from user code, readers that check a file's claims before allocating (memory
// statistics unchanged after a failed load), strict gzip, and file strings escaped in errors.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <filesystem>
#include <fstream>
#include <mutex>
#include <thread>

#include "core/tensor_impl.h"
#include "data/cifar_buffer.h"
#include "data/idx.h"
#include "ignis/data/cifar.h"
#include "ignis/data/mnist.h"
#include "ignis/ignis.h"
#include "io/json.h"
#include "io/safetensors.h"
#include "test_util.h"

namespace ignis {
namespace {

using ::testing::HasSubstr;
using ::testing::Not;
namespace fs = std::filesystem;

void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream(path, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}

std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return s + data;
}

uint32_t crc32_of(const std::string& bytes) {
  uint32_t c = 0xffffffffu;
  for (unsigned char b : bytes) {
    c ^= b;
    for (int k = 0; k < 8; ++k) c = (c >> 1) ^ (0xedb88320u & (0u - (c & 1u)));
  }
  return c ^ 0xffffffffu;
}

void put_le32(std::string& s, uint32_t v) {
  for (int k = 0; k < 4; ++k) s.push_back(static_cast<char>((v >> (8 * k)) & 0xff));
}

// A gzip member of one stored deflate block (no zlib needed): header, block, CRC-32, length.
std::string gz_bytes(const std::string& bytes) {
  const auto n = static_cast<uint16_t>(bytes.size());
  std::string g = {'\x1f', '\x8b', 8, 0, 0, 0, 0, 0, 0, '\xff'};
  g += {1, static_cast<char>(n & 0xff), static_cast<char>(n >> 8), static_cast<char>(~n & 0xff),
        static_cast<char>((~n >> 8) & 0xff)};
  g += bytes;
  put_le32(g, crc32_of(bytes));
  put_le32(g, static_cast<uint32_t>(bytes.size()));
  return g;
}

// A safetensors file: the 8-byte length, the header, then `data`.
std::string safetensors_bytes(const std::string& header, const std::string& data) {
  std::string s;
  const uint64_t n = header.size();
  for (int i = 0; i < 8; ++i) s.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return s + header + data;
}

// The allocator's statistics are exactly as they were: nothing was allocated at all.
void expect_same_stats(const MemoryStats& before) {
  const MemoryStats now = memory_stats();
  EXPECT_EQ(now.allocated, before.allocated);
  EXPECT_EQ(now.reserved, before.reserved);
  EXPECT_EQ(now.num_allocs, before.num_allocs);
}

size_t count_of(const std::string& s, const std::string& part) {
  size_t n = 0;
  for (size_t at = s.find(part); at != std::string::npos; at = s.find(part, at + 1)) ++n;
  return n;
}

// ---- 1. overflow-safe shapes

TEST(ShapeOverflow, MakeTensorRefusesUnrepresentableStrides) {
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([] {
                empty({0, 4294967295, 4294967295}, kUInt8);
              }),
              HasSubstr("empty: shape [0, 4294967295, 4294967295] of uint8 is too large"));
  EXPECT_THAT(error_of([] {
                zeros({0, int64_t{1} << 62, 4});
              }),
              HasSubstr("empty: shape [0, 4611686018427387904, 4] of float32 is too large"));
  EXPECT_THAT(
      error_of([] {
        empty({int64_t{1} << 61, 8}, kUInt8);
      }),
      HasSubstr("empty: shape [2305843009213693952, 8] has too many elements (int64 overflow)"));
  // numel fits in int64 but the byte size does not.
  EXPECT_THAT(error_of([] { empty({int64_t{1} << 61}, kFloat64); }),
              HasSubstr("empty: shape [2305843009213693952] of float64 is too large"));
  EXPECT_THAT(
      error_of([] {
        make_tensor({2, 1, 4294967296, 4294967296}, kFloat32, kCPU, MemoryFormat::ChannelsLast);
      }),
      HasSubstr("shape [2, 1, 4294967296, 4294967296]"));
  expect_same_stats(before);
  EXPECT_EQ(empty({0, 1 << 20, 1 << 20}).numel(), 0);  // large but representable: fine
}

TEST(ShapeOverflow, FromBlobRefusesOverflowingGeometry) {
  float x = 0;
  EXPECT_THAT(error_of([&] {
                from_blob(&x, {4294967296, 2}, {int64_t{1} << 40, 1});
              }),
              HasSubstr("from_blob: sizes [4294967296, 2] with strides [1099511627776, 1] span "
                        "more bytes than int64 holds"));
  EXPECT_THAT(error_of([&] {
                from_blob(&x, {4294967296, 4294967296}, {0, 0});
              }),
              HasSubstr("tensor: shape [4294967296, 4294967296] has too many elements"));
  EXPECT_THAT(error_of([&] {
                from_blob(&x, {0, int64_t{1} << 62, 4});
              }),
              HasSubstr("shape [0, 4611686018427387904, 4] is too large"));
}

TEST(ShapeOverflow, ViewAndExpandRefuseOverflowingShapes) {
  Tensor e = empty({0});
  EXPECT_THAT(error_of([&] {
                e.view({0, int64_t{1} << 62, 4});
              }),
              HasSubstr("shape [0, 4611686018427387904, 4] is too large"));
  Tensor x = ones({4});
  EXPECT_THAT(error_of([&] {
                x.view({4294967296, 4294967296, 4});
              }),
              HasSubstr("view: shape [4294967296, 4294967296, 4] has too many elements"));
  EXPECT_THAT(error_of([&] {
                x.reshape({4294967296, 4294967296, -1});
              }),
              HasSubstr("reshape: shape [4294967296, 4294967296, -1] has too many elements"));
  Tensor one = ones({1, 1});
  EXPECT_THAT(error_of([&] {
                one.expand({int64_t{1} << 40, int64_t{1} << 40});
              }),
              HasSubstr("shape [1099511627776, 1099511627776] has too many elements"));
}

TEST(ShapeOverflow, IdxFileWithAnEmptyDimAndHugeOnes) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("huge.idx");
  const std::string bytes = idx_bytes({0, 4294967295u, 4294967295u}, "");
  ASSERT_EQ(bytes.size(), 16u);
  write_file(p, bytes + "1234");  // 20 bytes, as found by the fuzzer
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("read_idx: " + p +
                        ": dimensions are too large: [0, 4294967295, "
                        "4294967295] (a size or stride above 2147483648 elements)"));
  expect_same_stats(before);
}

TEST(ShapeOverflow, SafetensorsEntryWithAnEmptyDimAndHugeOnes) {
  const std::string file = safetensors_bytes(
      R"({"a":{"dtype":"F32","shape":[0,4611686018427387904,4],"data_offsets":[0,0]}})", "");
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] {
                safetensors::load_buffer(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                         "mem.safetensors");
              }),
              HasSubstr("safetensors: mem.safetensors: entry 'a' has shape [0, "
                        "4611686018427387904, 4] whose size overflows int64"));
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("huge.safetensors");
  write_file(p, file);
  EXPECT_THAT(error_of([&] { load_safetensors(p); }),
              HasSubstr("safetensors: " + p +
                        ": entry 'a' has shape [0, 4611686018427387904, 4] "
                        "whose size overflows int64"));
  expect_same_stats(before);
}

// ---- 2. check before allocating

TEST(CheckBeforeAllocate, IdxClaimingGigabytesInNineBytes) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("claim.idx");
  write_file(p, idx_bytes({1900000000u}, "x"));
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("read_idx: " + p +
                        ": truncated: dimensions [1900000000] need 1900000000 "
                        "bytes of data but the file has 1"));
  expect_same_stats(before);
  // The same claim compressed: the stream is checked, with a bound, before any allocation.
  write_file(p + ".gz", gz_bytes(idx_bytes({1900000000u}, "x")));
  EXPECT_THAT(error_of([&] { data::read_idx(p + ".gz"); }),
              HasSubstr("read_idx: " + p +
                        ".gz: truncated: dimensions [1900000000] need "
                        "1900000000 bytes of data but the file has 1"));
  expect_same_stats(before);
}

TEST(CheckBeforeAllocate, MnistImagesFileClaimingEightGigabytes) {
  TempDir dir("ignis-reliability");
  write_file(dir.file("train-labels-idx1-ubyte"), idx_bytes({32768}, std::string(32768, '\1')));
  write_file(dir.file("train-images-idx3-ubyte"), idx_bytes({32768, 256, 256}, ""));
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { data::MNIST(dir.path.string(), true); }),
              HasSubstr("train-images-idx3-ubyte: truncated: dimensions [32768, 256, 256] need "
                        "2147483648 bytes of data but the file has 0"));
  expect_same_stats(before);
}

TEST(CheckBeforeAllocate, CifarBatchSmallerThanExpected) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("tiny.bin");
  write_file(p, std::string(static_cast<size_t>(data::kCifarRecordBytes), '\0'));
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(p, 100000); }),
              HasSubstr("CIFAR10: " + p + ": 1 records, expected 100000 (truncated file?)"));
  std::string bad(2 * static_cast<size_t>(data::kCifarRecordBytes), '\0');
  bad[static_cast<size_t>(data::kCifarRecordBytes)] = 10;
  EXPECT_THAT(error_of([&] {
                data::read_cifar10_buffer(reinterpret_cast<const uint8_t*>(bad.data()), bad.size(),
                                          "mem.bin", 2);
              }),
              HasSubstr("CIFAR10: mem.bin: record 1 has label 10 (expected 0 to 9)"));
  EXPECT_THAT(error_of([&] { data::read_cifar10_batch(p, int64_t{1} << 40); }),
              HasSubstr("read_cifar10_batch: expected_records must be in [1, 698823], got "
                        "1099511627776"));
  expect_same_stats(before);
}

TEST(CheckBeforeAllocate, SafetensorsClaimingGigabytesInATinyFile) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("claim.safetensors");
  write_file(p, safetensors_bytes(
                    R"({"a":{"dtype":"F32","shape":[1000000000],"data_offsets":[0,4000000000]}})",
                    "1234"));
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { load_safetensors(p); }),
              HasSubstr("safetensors: " + p +
                        ": entry 'a' data_offsets [0, 4000000000] are out "
                        "of bounds of the 4-byte data section"));
  expect_same_stats(before);
}

TEST(CheckBeforeAllocate, SafetensorsWithABadBoolAfterALargeTensor) {
  const std::string file =
      safetensors_bytes(R"({"w":{"dtype":"F32","shape":[65536],"data_offsets":[0,262144]},)"
                        R"("b":{"dtype":"BOOL","shape":[2],"data_offsets":[262144,262146]}})",
                        std::string(262144, '\0') + "\1\2");
  const MemoryStats before = memory_stats();
  EXPECT_THAT(
      error_of([&] {
        safetensors::load_buffer(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "m");
      }),
      HasSubstr("load_safetensors: m: tensor 'b' holds a bool byte that is neither 0 nor 1"));
  expect_same_stats(before);
}

// ---- 3. gzip strictness

TEST(Gzip, TrailingGarbageIsAnError) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("labels.gz");
  const std::string gz = gz_bytes(idx_bytes({3}, "\1\2\3"));
  write_file(p, gz + "junk");
  const MemoryStats before = memory_stats();
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("read_idx: " + p + ": 4 bytes of trailing garbage after the gzip stream"));
  expect_same_stats(before);
  // Concatenated members are one valid gzip file.
  const std::string whole = idx_bytes({3}, "\1\2\3");
  write_file(p, gz_bytes(whole.substr(0, 5)) + gz_bytes(whole.substr(5)));
  EXPECT_EQ(data::read_idx(p)[2].item<int64_t>(), 3);
}

TEST(Gzip, MissingTrailerIsAnError) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("labels.gz");
  const std::string gz = gz_bytes(idx_bytes({3}, "\1\2\3"));
  write_file(p, gz.substr(0, gz.size() - 8));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }),
              HasSubstr("read_idx: " + p +
                        ": truncated gzip stream (the compressed data or its "
                        "8-byte CRC/size trailer is missing)"));
  write_file(p, gz.substr(0, gz.size() - 3));
  EXPECT_THAT(error_of([&] { data::read_idx(p); }), HasSubstr("truncated gzip stream"));
}

TEST(Gzip, CorruptStreamNamesItsPathOnce) {
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("labels.gz");
  std::string gz = gz_bytes(idx_bytes({3}, "\1\2\3"));
  gz[gz.size() - 8] ^= 1;  // the CRC
  write_file(p, gz);
  const std::string msg = error_of([&] { data::read_idx(p); });
  EXPECT_THAT(msg,
              HasSubstr("read_idx: " + p + ": corrupted compressed data (incorrect data check)"));
  EXPECT_EQ(count_of(msg, p), 1u) << msg;
  gz = gz_bytes(idx_bytes({3}, "\1\2\3"));
  gz[10] = 7;  // an invalid deflate block type
  write_file(p, gz);
  const std::string msg2 = error_of([&] { data::read_idx(p); });
  EXPECT_THAT(msg2,
              HasSubstr("read_idx: " + p + ": corrupted compressed data (invalid block type)"));
  EXPECT_EQ(count_of(msg2, p), 1u) << msg2;
}

TEST(Idx, BufferEntryPointReadsPlainAndGzip) {
  const std::string plain = idx_bytes({2, 2}, "\1\2\3\4");
  const std::string gz = gz_bytes(plain);
  for (const std::string* b : {&plain, &gz}) {
    data::idx::Reader r = data::idx::Reader::from_buffer(b->data(), b->size(), "mem");
    Tensor t = data::idx::read_uint8(r);
    EXPECT_TRUE(t.sizes().equals({2, 2}));
    EXPECT_EQ(t[1][1].item<int64_t>(), 4);
  }
}

// ---- 4. messages

TEST(Messages, PrintableEscapesWhatATerminalWouldInterpret) {
  EXPECT_EQ(json::printable("plain.name_1"), "plain.name_1");
  EXPECT_EQ(json::printable("a\x1b[31mb"), "a\\u001b[31mb");
  EXPECT_EQ(json::printable("tab\there\x7f"), "tab\\u0009here\\u007f");
  EXPECT_EQ(json::printable("back\\slash"), "back\\\\slash");
  EXPECT_EQ(json::printable("caf\xc3\xa9 \xe2\x82\xac"), "caf\xc3\xa9 \xe2\x82\xac");  // UTF-8
  EXPECT_EQ(json::printable("c1 \xc2\x9b"), "c1 \\u009b");  // CSI as a C1 control
  EXPECT_EQ(json::printable("bad \xff\xc3"), "bad \\xff\\xc3");
  EXPECT_EQ(json::printable("\xed\xa0\x80"), "\\xed\\xa0\\x80");  // a UTF-16 surrogate
}

TEST(Messages, TensorNamesFromFilesAreEscaped) {
  const std::string file =
      safetensors_bytes(R"({"a\u001b[2J":{"dtype":"Q8","shape":[1],"data_offsets":[0,1]}})", "x");
  const std::string msg = error_of([&] {
    safetensors::load_buffer(reinterpret_cast<const uint8_t*>(file.data()), file.size(), "m");
  });
  EXPECT_THAT(msg, HasSubstr("safetensors: m: entry 'a\\u001b[2J' has unsupported dtype 'Q8'"));
  EXPECT_THAT(msg, Not(HasSubstr("\x1b")));
  const std::string ok =
      safetensors_bytes(R"({"a\u001b[2J":{"dtype":"U8","shape":[1],"data_offsets":[0,1]}})", "x");
  SafetensorsFile f =
      safetensors::load_buffer(reinterpret_cast<const uint8_t*>(ok.data()), ok.size(), "m");
  const std::string msg2 = error_of([&] { f.at("b\x1b"); });
  EXPECT_THAT(msg2, HasSubstr("no tensor named 'b\\u001b' (the file has: a\\u001b[2J)"));
  EXPECT_THAT(msg2, Not(HasSubstr("\x1b")));
  // A checkpoint refuses such a name before the state-dict checks could print it.
  TempDir dir("ignis-reliability");
  const std::string p = dir.file("ckpt.safetensors");
  write_file(p, ok);
  auto model = std::make_shared<nn::Sequential>(nn::Linear(2, 2));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1));
  const std::string msg3 = error_of([&] { train::load_checkpoint(p, *model, opt, nullptr); });
  EXPECT_THAT(msg3, HasSubstr("load_checkpoint: " + p +
                              ": tensor name 'a\\u001b[2J' has "
                              "control characters or invalid UTF-8"));
  EXPECT_THAT(msg3, Not(HasSubstr("\x1b")));
}

TEST(Messages, ReversedOffsetsAreReportedAsReversed) {
  const std::string file =
      safetensors_bytes(R"({"a":{"dtype":"U8","shape":[1],"data_offsets":[1,0]}})", "x");
  EXPECT_THAT(error_of([&] {
                safetensors::load_buffer(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                         "m");
              }),
              HasSubstr("safetensors: m: entry 'a' data_offsets [1, 0] are reversed (begin > "
                        "end)"));
}

TEST(Messages, InvalidJsonByteCountsFromTheStartOfTheFile) {
  const std::string file = safetensors_bytes(R"({"a":x})", "");
  // 'x' is at byte 5 of the header, which starts after the 8-byte length: byte 13 of the file.
  EXPECT_THAT(error_of([&] {
                safetensors::load_buffer(reinterpret_cast<const uint8_t*>(file.data()), file.size(),
                                         "m");
              }),
              HasSubstr("safetensors: m: invalid JSON at byte 13: expected a value"));
}

TEST(Safetensors, BufferRoundTrip) {
  NamedTensorList in = {{"w", arange(6, kFloat32).view({2, 3})},
                        {"e", empty({0, 3}, kInt64)},
                        {"b", ones({2}, kBool)}};
  const std::string bytes = safetensors::serialize(in, {{"k", "v"}});
  SafetensorsFile f =
      safetensors::load_buffer(reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "m");
  ASSERT_EQ(f.tensors.size(), 3u);
  EXPECT_TRUE(equal(f.at("w"), in[0].second));
  EXPECT_TRUE(f.at("e").sizes().equals({0, 3}));
  EXPECT_TRUE(equal(f.at("b"), in[2].second));
  EXPECT_EQ(f.metadata.at("k"), "v");
}

// ---- the caching allocator from several threads (run under ThreadSanitizer by make tsan)

TEST(Allocator, ThreadsAllocateAndFreeEachOthersBlocks) {
  const MemoryStats before = memory_stats();
  constexpr int kThreads = 4;
  std::mutex mu;
  std::vector<Tensor> handoff(kThreads);  // a block allocated by one thread, freed by another
  std::vector<std::thread> threads;
  for (int t = 0; t < kThreads; ++t) {
    threads.emplace_back([&, t] {
      for (int i = 0; i < 500; ++i) {
        Tensor small = ones({(i % 7 + 1) * 100 + t});   // <= 4 KiB: the thread's cache
        Tensor large = ones({(i % 5 + 1) * 4096 + t});  // the shared cache
        Tensor sum = small.sum() + large.sum();
        EXPECT_EQ(sum.item<float>(), static_cast<float>(small.numel() + large.numel()));
        std::lock_guard<std::mutex> g(mu);
        std::swap(handoff[static_cast<size_t>((t + i) % kThreads)], large);
      }
    });
  }
  for (auto& th : threads) th.join();
  handoff.clear();
  const MemoryStats after = memory_stats();
  EXPECT_EQ(after.allocated, before.allocated);
  EXPECT_GE(after.num_allocs, before.num_allocs + kThreads * 500 * 2);
}

// ---- the OpenMP kernels (run under ThreadSanitizer by make tsan): each op, on tensors large
// enough to be split over threads, gives the same result with 4 threads as with 1.

TEST(Threads, ParallelKernelsMatchOneThread) {
  const int saved = get_num_threads();
  default_generator().manual_seed(1);
  const Tensor a = randn({64, 3, 32, 32}), b = randn({64, 3, 32, 32});
  const Tensor w = randn({8, 3, 3, 3}), m = randn({512, 384}), v = randn({384, 256});
  const Tensor cl = a.contiguous(MemoryFormat::ChannelsLast);
  auto run = [&](int threads) {
    set_num_threads(threads);
    std::vector<Tensor> r = {a + b * 2,
                             (a * b).sum(),
                             a.sum({0, 2, 3}),
                             softmax(a.view({64, -1}), 1),
                             cumsum(a.view({64, -1}), 1),
                             matmul(m, v),
                             conv2d(a, w),
                             max_pool2d(cl, {2, 2}),
                             relu(cl) + 1,
                             batch_norm(a, {}, {}, {}, {}, true, 0.1, 1e-5),
                             batch_norm(cl, {}, {}, {}, {}, true, 0.1, 1e-5)};
    return r;
  };
  const std::vector<Tensor> one = run(1), four = run(4);
  set_num_threads(saved);
  for (size_t i = 0; i < one.size(); ++i) {
    EXPECT_TRUE(allclose(one[i], four[i], 1e-4, 1e-4)) << "result " << i;
  }
}

}  // namespace
}  // namespace ignis
