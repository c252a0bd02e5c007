// IDX files: a raw byte source (file or memory), an optional gzip layer, and the header and
// length checks that run before any tensor is allocated.
#include "data/idx.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>
#include <zlib.h>

#include <algorithm>
#include <cerrno>
#include <climits>
#include <cstring>

#include "ignis/ops.h"

namespace ignis::data::idx {

namespace {
constexpr uint64_t kMaxIdxBytes = uint64_t{1} << 31;  // 2 GiB: far above any IDX data set
constexpr size_t kChunk = size_t{1} << 16;

// Raw bytes: a regular file or a memory buffer, read front to back, rewindable.
class Bytes {
 public:
  virtual ~Bytes() = default;
  /// Up to n bytes; fewer only at the end.
  virtual size_t read(void* dst, size_t n) = 0;
  virtual void rewind() = 0;
  virtual uint64_t size() const = 0;
};

class FileBytes final : public Bytes {
 public:
  explicit FileBytes(const std::string& path) : path_(path) {
    fd_ = ::open(path.c_str(), O_RDONLY | O_CLOEXEC);
    IGNIS_CHECK(fd_ >= 0, "read_idx: cannot open ", path, ": ", std::strerror(errno));
    struct stat st {};
    if (::fstat(fd_, &st) != 0 || !S_ISREG(st.st_mode)) {
      ::close(fd_);
      IGNIS_FAIL("read_idx: ", path, ": not a regular file");
    }
    size_ = static_cast<uint64_t>(st.st_size);
  }
  ~FileBytes() override { ::close(fd_); }
  size_t read(void* dst, size_t n) override {
    size_t got = 0;
    while (got < n) {
      const ssize_t r = ::read(fd_, static_cast<char*>(dst) + got, n - got);
      if (r < 0 && errno == EINTR) continue;
      IGNIS_CHECK(r >= 0, "read_idx: ", path_, ": read error: ", std::strerror(errno));
      if (r == 0) break;
      got += static_cast<size_t>(r);
    }
    return got;
  }
  void rewind() override {
    IGNIS_CHECK(::lseek(fd_, 0, SEEK_SET) == 0, "read_idx: ", path_,
                ": cannot seek: ", std::strerror(errno));
  }
  uint64_t size() const override { return size_; }

 private:
  std::string path_;
  int fd_ = -1;
  uint64_t size_ = 0;
};

class MemoryBytes final : public Bytes {
 public:
  MemoryBytes(const void* p, size_t n) : p_(static_cast<const uint8_t*>(p)), n_(n) {}
  size_t read(void* dst, size_t n) override {
    const size_t k = std::min(n, n_ - at_);
    if (k > 0) std::memcpy(dst, p_ + at_, k);
    at_ += k;
    return k;
  }
  void rewind() override { at_ = 0; }
  uint64_t size() const override { return n_; }

 private:
  const uint8_t* p_;
  size_t n_, at_ = 0;
};

// The file's content: its bytes, or their gzip decompression. Strict gzip: every member must
// end with its verified CRC-32/size trailer, and nothing but further gzip members may follow.
class Stream {
 public:
  Stream(std::unique_ptr<Bytes> src, std::string name) : src_(std::move(src)), name_(name) {
    uint8_t magic[2] = {0, 0};
    gzip_ = src_->read(magic, 2) == 2 && magic[0] == 0x1f && magic[1] == 0x8b;
    src_->rewind();
    if (gzip_) {
      in_.resize(kChunk);
      IGNIS_CHECK(inflateInit2(&z_, 16 + MAX_WBITS) == Z_OK, "read_idx: ", name_,
                  ": cannot initialise zlib");
    }
  }
  ~Stream() {
    if (gzip_) inflateEnd(&z_);
  }
  Stream(const Stream&) = delete;
  Stream& operator=(const Stream&) = delete;

  bool gzip() const { return gzip_; }
  uint64_t raw_size() const { return src_->size(); }
  const std::string& name() const { return name_; }

  void rewind() {
    src_->rewind();
    if (!gzip_) return;
    inflateReset(&z_);
    z_.avail_in = 0;
    ended_ = false;
  }

  /// Up to n bytes of content; fewer only at its end.
  size_t read(void* dst, size_t n) {
    if (!gzip_) return src_->read(dst, n);
    size_t got = 0;
    while (got < n && !ended_) {
      // At the end of the input, inflate may still hold output; Z_BUF_ERROR says it holds none.
      const bool have_input = refill();
      z_.next_out = static_cast<Bytef*>(dst) + got;
      z_.avail_out = static_cast<uInt>(std::min<size_t>(n - got, UINT_MAX));
      const uInt before = z_.avail_out;
      const int r = inflate(&z_, Z_NO_FLUSH);
      got += before - z_.avail_out;
      if (r == Z_STREAM_END) {
        next_member();
      } else if (r == Z_BUF_ERROR && !have_input) {
        IGNIS_FAIL("read_idx: ", name_,
                   ": truncated gzip stream (the compressed data or its "
                   "8-byte CRC/size trailer is missing)");
      } else if (r != Z_OK) {
        IGNIS_FAIL("read_idx: ", name_, ": corrupted compressed data (",
                   z_.msg != nullptr ? z_.msg : zError(r), ")");
      }
    }
    return got;
  }

 private:
  // Makes compressed input available; false at the end of the raw bytes.
  bool refill() {
    if (z_.avail_in > 0) return true;
    const size_t k = src_->read(in_.data(), in_.size());
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(k);
    return k > 0;
  }
  // After a member's verified trailer: the end of the file, another member, or garbage.
  void next_member() {
    if (z_.avail_in == 0 && !refill()) {
      ended_ = true;
      return;
    }
    if (z_.avail_in < 2) refill_two();
    if (z_.avail_in >= 2 && z_.next_in[0] == 0x1f && z_.next_in[1] == 0x8b) {
      inflateReset(&z_);
      return;
    }
    uint64_t extra = z_.avail_in;
    for (size_t k; (k = src_->read(in_.data(), in_.size())) > 0;) extra += k;
    IGNIS_FAIL("read_idx: ", name_, ": ", extra,
               " bytes of trailing garbage after the gzip stream");
  }
  // One byte of input left: move it to the front and append what follows.
  void refill_two() {
    const uint8_t first = z_.next_in[0];
    in_[0] = first;
    const size_t k = src_->read(in_.data() + 1, in_.size() - 1);
    z_.next_in = in_.data();
    z_.avail_in = static_cast<uInt>(1 + k);
  }

  std::unique_ptr<Bytes> src_;
  std::string name_;
  bool gzip_ = false, ended_ = false;
  std::vector<Bytef> in_;
  z_stream z_{};
};

struct Header {
  std::vector<int64_t> dims;
  uint64_t header_bytes = 0;
  uint64_t count = 1;  // data bytes
};

Header read_header(Stream& s) {
  const std::string& name = s.name();
  uint8_t p[4 + 4 * 4];
  const size_t got = s.read(p, 4);
  IGNIS_CHECK(got >= 4, "read_idx: ", name, ": file is ", got,
              " bytes, too short for the magic number");
  IGNIS_CHECK(p[0] == 0 && p[1] == 0, "read_idx: ", name, ": bad magic number (first bytes ",
              int(p[0]), " ", int(p[1]), ", expected 0 0): not an IDX file");
  IGNIS_CHECK(p[2] == 0x08, "read_idx: ", name, ": element type 0x", std::hex, int(p[2]), std::dec,
              " is not unsigned byte (0x08)");
  const int ndim = p[3];
  IGNIS_CHECK(ndim >= 1 && ndim <= 4, "read_idx: ", name, ": ", ndim,
              " dimensions (expected 1 to 4)");
  Header h;
  h.header_bytes = 4 + 4 * static_cast<uint64_t>(ndim);
  const size_t got_dims = s.read(p + 4, 4 * static_cast<size_t>(ndim));
  IGNIS_CHECK(4 + got_dims >= h.header_bytes, "read_idx: ", name, ": truncated header (",
              4 + got_dims, " bytes, need ", h.header_bytes, ")");
  for (int d = 0; d < ndim; ++d) {
    const uint8_t* q = p + 4 + 4 * d;
    h.dims.push_back((int64_t{q[0]} << 24) | (int64_t{q[1]} << 16) | (int64_t{q[2]} << 8) | q[3]);
  }
  // Every product the tensor will need: the element count, and the strides (empty dims count
  // as 1 there, so [0, 4294967295, 4294967295] is refused although it holds no elements).
  uint64_t strides = 1;
  for (int64_t v : h.dims) {
    const auto u = static_cast<uint64_t>(v);
    IGNIS_CHECK(!__builtin_mul_overflow(h.count, u, &h.count) && h.count <= kMaxIdxBytes &&
                    !__builtin_mul_overflow(strides, std::max<uint64_t>(u, 1), &strides) &&
                    strides <= kMaxIdxBytes,
                "read_idx: ", name, ": dimensions are too large: ", IntArrayRef(h.dims),
                " (a size or stride above ", kMaxIdxBytes, " elements)");
  }
  return h;
}

// Reads exactly h.count data bytes through sink, then checks that nothing follows.
template <class Sink>
void read_data(Stream& s, const Header& h, const Sink& sink) {
  std::vector<uint8_t> buf(kChunk);
  uint64_t done = 0;
  while (done < h.count) {
    const size_t want = static_cast<size_t>(std::min<uint64_t>(buf.size(), h.count - done));
    const size_t got = s.read(buf.data(), want);
    if (got > 0) sink(buf.data(), got, done);
    done += got;
    if (got < want) break;
  }
  IGNIS_CHECK(done == h.count, "read_idx: ", s.name(), ": truncated: dimensions ",
              IntArrayRef(h.dims), " need ", h.count, " bytes of data but the file has ", done);
  uint64_t extra = 0;
  for (size_t got; extra <= kMaxIdxBytes && (got = s.read(buf.data(), buf.size())) > 0;) {
    extra += got;
  }
  IGNIS_CHECK(extra == 0, "read_idx: ", s.name(), ": ", extra,
              " unexpected trailing bytes after the data");
}
}  // namespace

struct Reader::State {
  Stream stream;
  Header header;
  State(std::unique_ptr<Bytes> src, const std::string& name) : stream(std::move(src), name) {
    header = read_header(stream);
    if (!stream.gzip()) {
      // The file's size is known: compare it with the claim, reading nothing more.
      const uint64_t have = stream.raw_size() - header.header_bytes;
      IGNIS_CHECK(have >= header.count, "read_idx: ", name, ": truncated: dimensions ",
                  IntArrayRef(header.dims), " need ", header.count,
                  " bytes of data but the file has ", have);
      IGNIS_CHECK(have == header.count, "read_idx: ", name, ": ", have - header.count,
                  " unexpected trailing bytes after the data");
    } else {
      // Decompressed into a plain buffer that grows only as data arrives (bounded by the claim),
      // so that the claim is checked against what is there before a tensor exists.
      read_data(stream, header, [&](const uint8_t* b, size_t n, uint64_t) {
        inflated.insert(inflated.end(), b, b + n);
      });
    }
  }
  std::vector<uint8_t> inflated;  // gzip: the data bytes
};

Reader::Reader(std::unique_ptr<State> s) : s_(std::move(s)) {}
Reader::Reader(Reader&&) noexcept = default;
Reader::~Reader() = default;

Reader Reader::open(const std::string& path) {
  return Reader(std::make_unique<State>(std::make_unique<FileBytes>(path), path));
}

Reader Reader::from_buffer(const void* data, size_t size, const std::string& name) {
  return Reader(std::make_unique<State>(std::make_unique<MemoryBytes>(data, size), name));
}

const std::vector<int64_t>& Reader::dims() const { return s_->header.dims; }
const std::string& Reader::name() const { return s_->stream.name(); }

void Reader::read(const std::function<void(const uint8_t*, size_t, uint64_t)>& sink) {
  Stream& s = s_->stream;
  if (s.gzip()) {
    if (!s_->inflated.empty()) sink(s_->inflated.data(), s_->inflated.size(), 0);
    return;
  }
  s.rewind();
  Header h = read_header(s);
  IGNIS_CHECK(h.dims == s_->header.dims, "read_idx: ", s.name(), ": changed while being read");
  read_data(s, h, sink);
}

Tensor read_uint8(Reader& r) {
  Tensor t = empty(r.dims(), kUInt8);
  auto* dst = static_cast<uint8_t*>(t.data_ptr());
  r.read([&](const uint8_t* b, size_t n, uint64_t off) { std::memcpy(dst + off, b, n); });
  return t;
}

}  // namespace ignis::data::idx
