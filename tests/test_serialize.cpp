// safetensors: round trips, a file built byte by byte, and corrupted files.
#include <gmock/gmock.h>
#include <gtest/gtest.h>
#include <unistd.h>

#include <cstdio>
#include <fstream>

#include "ignis/ignis.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {
std::string tmp_path(const std::string& name) {
  return "/tmp/ignis_test_" + std::to_string(::getpid()) + "_" + name;
}
void write_file(const std::string& path, const std::string& bytes) {
  std::ofstream f(path, std::ios::binary);
  f.write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
std::string file_with_header(const std::string& json, size_t data_bytes) {
  std::string b;
  const uint64_t n = json.size();
  for (int i = 0; i < 8; ++i) b.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  return b + json + std::string(data_bytes, '\0');
}
}  // namespace

TEST(Safetensors, RoundTripEveryDtype) {
  const std::string path = tmp_path("rt.safetensors");
  NamedTensorList in = {{"f32", tensor({{1.5, -2.0}, {3.25, 4.0}})},
                        {"f64", tensor({1.0, 2.0, 3.0}, kFloat64)},
                        {"bf16", tensor({0.5, -8.0}).to(kBFloat16)},
                        {"i64", tensor({1, -2, 3})},
                        {"i32", tensor({7, 8}).to(kInt32)},
                        {"u8", tensor({255, 0}).to(kUInt8)},
                        {"b", tensor(std::vector<bool>{true, false, true})},
                        {"strided", tensor({{1.0, 2.0}, {3.0, 4.0}}).t()},
                        {"empty", zeros({0, 3})},
                        {"scalar", scalar_tensor(2.5)}};
  save_safetensors(path, in, {{"note", "hello \"world\""}});
  SafetensorsFile out = load_safetensors(path);
  ASSERT_EQ(out.tensors.size(), in.size());
  EXPECT_EQ(out.metadata.at("note"), "hello \"world\"");
  for (size_t i = 0; i < in.size(); ++i) {
    EXPECT_EQ(out.tensors[i].first, in[i].first);
    EXPECT_EQ(out.tensors[i].second.dtype(), in[i].second.dtype());
    EXPECT_TRUE(out.tensors[i].second.sizes().equals(in[i].second.sizes()));
    EXPECT_TRUE(equal(out.tensors[i].second, in[i].second)) << in[i].first;
  }
  std::remove(path.c_str());
}

TEST(Safetensors, ReadsAFileBuiltByteByByte) {
  // {"a": F32 [2] = {1, 2}, "b": I64 [1] = {5}} laid out by hand.
  const std::string json =
      R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,8]},)"
      R"("b":{"dtype":"I64","shape":[1],"data_offsets":[8,16]}})";
  std::string bytes = file_with_header(json, 0);
  const float a[2] = {1.0f, 2.0f};
  const int64_t b = 5;
  bytes.append(reinterpret_cast<const char*>(a), 8);
  bytes.append(reinterpret_cast<const char*>(&b), 8);
  const std::string path = tmp_path("manual.safetensors");
  write_file(path, bytes);
  SafetensorsFile f = load_safetensors(path);
  EXPECT_FLOAT_EQ(f.at("a")[1].item<float>(), 2.0f);
  EXPECT_EQ(f.at("b")[0].item<int64_t>(), 5);
  EXPECT_THAT(error_of([&] { f.at("c"); }), HasSubstr("no tensor named 'c'"));
  std::remove(path.c_str());
}

TEST(Safetensors, RejectsCorruptedFiles) {
  const std::string path = tmp_path("bad.safetensors");
  auto check = [&](const std::string& bytes, const std::string& expect) {
    write_file(path, bytes);
    EXPECT_THAT(error_of([&] { load_safetensors(path); }), HasSubstr(expect));
  };
  check("abc", "too short");
  check(std::string("\xff\xff\xff\xff\xff\xff\xff\x7f", 8), "exceeds the limit");
  check(file_with_header("{", 0), "invalid JSON");
  check(file_with_header(R"({"a":{"dtype":"F99","shape":[1],"data_offsets":[0,4]}})", 4),
        "unsupported dtype");
  check(file_with_header(R"({"a":{"dtype":"F32","shape":[2],"data_offsets":[0,4]}})", 4),
        "needs 8 bytes");
  check(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 2),
        "out of bounds");
  check(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]},)"
                         R"("b":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})",
                         4),
        "overlap");
  check(file_with_header(R"({"a":{"dtype":"F32","shape":[1],"data_offsets":[0,4]}})", 8),
        "cover 4 bytes");
  check(file_with_header(
            R"({"a":{"dtype":"F32","shape":[4611686018427387904,4],"data_offsets":[0,4]}})", 4),
        "overflow");
  check(file_with_header(R"({"a":{"dtype":"F32","shape":[-1],"data_offsets":[0,4]}})", 4),
        "invalid dimension");
  std::remove(path.c_str());
}

TEST(Safetensors, SaveIsAtomicAndLeavesNoTemporary) {
  const std::string path = tmp_path("atomic.safetensors");
  save_safetensors(path, {{"x", ones({3})}});
  save_safetensors(path, {{"x", zeros({3})}});
  EXPECT_TRUE(equal(load_safetensors(path).at("x"), zeros({3})));
  EXPECT_NE(access((path + ".tmp." + std::to_string(::getpid())).c_str(), F_OK), 0);
  EXPECT_THAT(error_of([&] { save_safetensors("/nonexistent-dir/x.safetensors", {}); }),
              HasSubstr("cannot create"));
  std::remove(path.c_str());
}
