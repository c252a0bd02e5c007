// Writes the fuzzers' seed inputs into the directory given as argument: <dir>/<target>/...
// Built and run by `make fuzz`, so the seeds follow the formats as the library writes them.
#include <zlib.h>

#include <filesystem>
#include <fstream>
#include <string>
#include <vector>

#include "ignis/ignis.h"
#include "io/safetensors.h"

using namespace ignis;
namespace fs = std::filesystem;

namespace {
std::string idx_bytes(const std::vector<uint32_t>& dims, const std::string& data) {
  std::string s = {0, 0, 0x08, static_cast<char>(dims.size())};
  for (uint32_t d : dims) {
    for (int shift : {24, 16, 8, 0}) s.push_back(static_cast<char>((d >> shift) & 0xff));
  }
  return s + data;
}

std::string gzip(const std::string& in) {
  z_stream z{};
  deflateInit2(&z, 9, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY);
  std::string out(deflateBound(&z, in.size()), '\0');
  z.next_in = reinterpret_cast<Bytef*>(const_cast<char*>(in.data()));
  z.avail_in = static_cast<uInt>(in.size());
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  deflate(&z, Z_FINISH);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

void put(const fs::path& dir, const std::string& name, const std::string& bytes) {
  fs::create_directories(dir);
  std::ofstream(dir / name, std::ios::binary)
      .write(bytes.data(), static_cast<std::streamsize>(bytes.size()));
}
}  // namespace

int main(int argc, char** argv) {
  if (argc != 2) return 2;
  const fs::path root = argv[1];
  std::string pixels;
  for (int i = 0; i < 2 * 4 * 4; ++i) pixels.push_back(static_cast<char>(i * 7));
  const std::vector<std::string> idx = {idx_bytes({3}, "\1\2\3"), idx_bytes({2, 4, 4}, pixels),
                                        idx_bytes({2, 2, 2, 2}, pixels.substr(0, 16)),
                                        idx_bytes({0, 5}, "")};
  for (size_t i = 0; i < idx.size(); ++i) {
    put(root / "idx", "seed" + std::to_string(i), idx[i]);
    put(root / "idx_gz", "seed" + std::to_string(i), gzip(idx[i]));
  }
  put(root / "idx_gz", "members", gzip(idx[1].substr(0, 9)) + gzip(idx[1].substr(9)));
  std::string rec(3073, '\0');
  for (size_t i = 0; i < rec.size(); ++i) rec[i] = static_cast<char>(i % 251);
  rec[0] = 3;
  put(root / "cifar", "one", std::string(1, '\0') + rec);
  put(root / "cifar", "two", std::string(1, '\1') + rec + rec);
  default_generator().manual_seed(0);
  const NamedTensorList tensors = {{"w", randn({2, 3})},
                                   {"h", ones({2}, kBFloat16)},
                                   {"b", ones({3}, kBool)},
                                   {"i", arange(4, kInt64)},
                                   {"e", empty({0, 2}, kUInt8)}};
  put(root / "safetensors", "mixed", safetensors::serialize(tensors, {{"format", "x"}}));
  put(root / "safetensors", "empty", safetensors::serialize({}, {}));
  // A Python 2 pickle (protocol 2) of numpy.array([1, -2], dtype='<i4'), as in the Planetoid
  // files (the pickle target also starts from the fixtures in fuzz/seeds/pickle).
  static const char kArray[] =
      "\x80\x02" "cnumpy.core.multiarray\n_reconstruct\nq\x00" "cnumpy\nndarray\nq\x01"
      "K\x00\x85q\x02U\x01" "b\x87q\x03Rq\x04(K\x01K\x02\x85q\x05" "cnumpy\ndtype\nq\x06"
      "U\x02i4K\x00K\x01\x87Rq\x07(K\x03U\x01<NNNJ\xff\xff\xff\xffJ\xff\xff\xff\xffK\x00tb"
      "\x89U\x08\x01\x00\x00\x00\xfe\xff\xff\xfftb.";
  put(root / "pickle", "array", std::string(kArray, sizeof(kArray) - 1));
  // TU files joined by NUL bytes (tu_fuzzer.cpp): A, graph_indicator, graph_labels,
  // node_labels, edge_attributes.
  const std::string nul(1, '\0');
  put(root / "tu", "toy",
      "1, 2\n2, 1\n3, 4\n4, 5\n5, 3\n" + nul + "1\n1\n2\n2\n2\n" + nul + "1\n-1\n" + nul +
          "0\n2\n1\n1\n0\n" + nul + "0.5\n0.5\n1\n2\n3\n");
  put(root / "tu", "plain", "1, 2\n" + nul + "1\n1\n" + nul + "0\n");
  // The checkpoint fuzzer's setup: Linear(3, 2), SGD with momentum, StepLR(2).
  auto model = std::make_shared<nn::Sequential>(nn::Linear(3, 2));
  optim::SGD opt(model->parameters(), optim::SGDOptions(0.1).momentum(0.9));
  optim::StepLR sched(opt, 2);
  const fs::path ck = root / "checkpoint";
  fs::create_directories(ck);
  train::save_checkpoint((ck / "fresh").string(), *model, opt, &sched, {});
  model->forward(ones({4, 3})).sum().backward();
  opt.step();
  sched.step();
  train::save_checkpoint((ck / "stepped").string(), *model, opt, &sched, {1, 1});
  return 0;
}
