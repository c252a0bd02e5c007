#include "ignis/serialize.h"

#include <fcntl.h>
#include <sys/stat.h>
#include <unistd.h>

#include <cerrno>
#include <cstring>
#include <fstream>
#include <sstream>

#include "ignis/ops.h"
#include "io/json.h"
#include "io/safetensors.h"

namespace ignis {

namespace {
[[noreturn]] void sys_fail(const char* what, const std::string& path) {
  IGNIS_FAIL(what, ": ", path, ": ", std::strerror(errno));
}

void write_all(int fd, const char* p, size_t n, const std::string& path) {
  while (n > 0) {
    ssize_t w = ::write(fd, p, n);
    if (w < 0) {
      if (errno == EINTR) continue;
      sys_fail("save", path);
    }
    p += w;
    n -= static_cast<size_t>(w);
  }
}

std::string dir_of(const std::string& path) {
  const size_t slash = path.find_last_of('/');
  return slash == std::string::npos ? "." : slash == 0 ? "/" : path.substr(0, slash);
}
}  // namespace

void atomic_write(const std::string& path, const std::string& bytes) {
  const std::string tmp = path + ".tmp." + std::to_string(::getpid());
  int fd = ::open(tmp.c_str(), O_WRONLY | O_CREAT | O_TRUNC | O_CLOEXEC, 0644);
  if (fd < 0) sys_fail("save: cannot create", tmp);
  try {
    write_all(fd, bytes.data(), bytes.size(), tmp);
    if (::fsync(fd) != 0) sys_fail("save: fsync", tmp);
  } catch (...) {
    ::close(fd);
    ::unlink(tmp.c_str());
    throw;
  }
  if (::close(fd) != 0) {
    ::unlink(tmp.c_str());
    sys_fail("save: close", tmp);
  }
  if (::rename(tmp.c_str(), path.c_str()) != 0) {
    ::unlink(tmp.c_str());
    sys_fail("save: rename to", path);
  }
  // Persist the rename itself.
  int dfd = ::open(dir_of(path).c_str(), O_RDONLY | O_DIRECTORY | O_CLOEXEC);
  if (dfd >= 0) {
    ::fsync(dfd);
    ::close(dfd);
  }
}

namespace safetensors {
namespace {
// The tensors of a parsed header: every size and offset was checked by parse_header against
// the file's real size, so each allocation is backed by bytes that exist. read_at(at, dst, n)
// copies n bytes at offset `at` of the file.
template <class ReadAt>
SafetensorsFile read_tensors(const Header& h, const std::string& path, const ReadAt& read_at) {
  auto read = [&](const Entry& e, void* dst) {
    IGNIS_CHECK(read_at(h.data_start + e.begin, dst, e.end - e.begin), "load_safetensors: ", path,
                ": read error in the data of '", json::printable(e.name), "'");
  };
  // Bool bytes are checked first, through a plain buffer, so that no tensor is allocated for a
  // file that fails: memory is as it was after a failed load.
  for (const auto& e : h.entries) {
    if (e.dtype != kBool) continue;
    std::vector<uint8_t> b(e.end - e.begin);
    read(e, b.data());
    for (uint8_t v : b) {
      IGNIS_CHECK(v <= 1, "load_safetensors: ", path, ": tensor '", json::printable(e.name),
                  "' holds a bool byte that is neither 0 nor 1");
    }
  }
  SafetensorsFile out;
  out.metadata = h.metadata;
  for (const auto& e : h.entries) {
    Tensor t = empty(e.shape, e.dtype);
    read(e, t.data_ptr());
    out.tensors.emplace_back(e.name, std::move(t));
  }
  return out;
}
}  // namespace

std::string serialize(const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata) {
  std::ostringstream header;
  header << "{";
  bool first = true;
  if (!metadata.empty()) {
    header << "\"__metadata__\":{";
    for (auto it = metadata.begin(); it != metadata.end(); ++it) {
      header << (it == metadata.begin() ? "" : ",") << json::quote(it->first) << ":"
             << json::quote(it->second);
    }
    header << "}";
    first = false;
  }
  std::vector<Tensor> data;
  uint64_t offset = 0;
  for (size_t i = 0; i < tensors.size(); ++i) {
    const auto& [name, t] = tensors[i];
    IGNIS_CHECK(t.defined(), "save_safetensors: tensor '", name, "' is undefined");
    // A GPU tensor's bytes are copied to the CPU (as safetensors' own writer does); a meta
    // tensor has none.
    IGNIS_CHECK(!t.device().is_meta(), "save_safetensors: tensor '", name, "' is on ",
                t.device().str(), " and has no data to save");
    IGNIS_CHECK(name != "__metadata__", "save_safetensors: '__metadata__' is a reserved name");
    for (size_t j = 0; j < i; ++j) {
      IGNIS_CHECK(tensors[j].first != name, "save_safetensors: duplicate name '", name, "'");
    }
    Tensor c = t.detach().to(kCPU).contiguous();
    header << (first ? "" : ",") << json::quote(name) << ":{\"dtype\":\""
           << safetensors::dtype_code(c.dtype()) << "\",\"shape\":[";
    for (int64_t d = 0; d < c.dim(); ++d) header << (d ? "," : "") << c.size(d);
    header << "],\"data_offsets\":[" << offset << "," << offset + c.nbytes() << "]}";
    offset += c.nbytes();
    first = false;
    data.push_back(std::move(c));
  }
  header << "}";
  std::string h = header.str();
  // Pad the header with spaces to a multiple of 8 so the data is aligned (as the reference
  // writer does).
  while ((8 + h.size()) % 8 != 0) h.push_back(' ');
  std::string bytes;
  bytes.reserve(8 + h.size() + offset);
  const uint64_t n = h.size();
  for (int i = 0; i < 8; ++i) bytes.push_back(static_cast<char>((n >> (8 * i)) & 0xff));
  bytes += h;
  for (const Tensor& c : data) {
    bytes.append(static_cast<const char*>(c.data_ptr()), c.nbytes());  // x86-64: little-endian
  }
  return bytes;
}

SafetensorsFile load_buffer(const uint8_t* data, size_t size, const std::string& name) {
  const Header h = parse_header(data, size, size, name);
  return read_tensors(h, name, [&](uint64_t at, void* dst, uint64_t n) {
    if (n > 0) std::memcpy(dst, data + at, n);
    return true;
  });
}

}  // namespace safetensors

void save_safetensors(const std::string& path, const NamedTensorList& tensors,
                      const std::map<std::string, std::string>& metadata) {
  atomic_write(path, safetensors::serialize(tensors, metadata));
}

SafetensorsFile load_safetensors(const std::string& path) {
  std::ifstream f(path, std::ios::binary);
  IGNIS_CHECK(f.good(), "load_safetensors: cannot open ", path, ": ", std::strerror(errno));
  f.seekg(0, std::ios::end);
  const auto end = f.tellg();
  IGNIS_CHECK(end >= 0, "load_safetensors: cannot read the size of ", path);
  const uint64_t size = static_cast<uint64_t>(end);
  f.seekg(0);
  uint8_t len[8] = {0};
  f.read(reinterpret_cast<char*>(len), std::min<uint64_t>(8, size));
  uint64_t n = 0;
  for (int i = 7; i >= 0; --i) n = (n << 8) | len[i];
  // Read only as much header as the (bounded) length claims; parse_header re-checks everything.
  std::string prefix(reinterpret_cast<char*>(len), 8);
  if (size >= 8 && n <= safetensors::kMaxHeaderBytes && n <= size - 8) {
    prefix.resize(8 + n);
    f.read(prefix.data() + 8, static_cast<std::streamsize>(n));
    IGNIS_CHECK(f.good(), "load_safetensors: ", path, ": read error in the header");
  }
  const safetensors::Header h = safetensors::parse_header(
      reinterpret_cast<const uint8_t*>(prefix.data()), prefix.size(), size, path);
  return safetensors::read_tensors(h, path, [&](uint64_t at, void* dst, uint64_t n) {
    f.seekg(static_cast<std::streamoff>(at));
    f.read(static_cast<char*>(dst), static_cast<std::streamsize>(n));
    return f.good();
  });
}

const Tensor& SafetensorsFile::at(const std::string& name) const {
  for (const auto& [n, t] : tensors) {
    if (n == name) return t;
  }
  std::ostringstream names;
  for (const auto& [n, t] : tensors) names << " " << json::printable(n);
  IGNIS_FAIL("safetensors: no tensor named '", json::printable(name),
             "' (the file has:", names.str(), ")");
}

}  // namespace ignis
