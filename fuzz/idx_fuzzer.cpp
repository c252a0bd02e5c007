// libFuzzer target: the IDX reader on a plain file held in memory, checked against the same
// bytes gzip-compressed (the two paths must give the same tensor or the same error, up to the
// name). Build and run: make fuzz
#include <zlib.h>

#include <cstdint>
#include <cstring>
#include <string>

#include "data/idx.h"
#include "fuzz_util.h"
#include "ignis/error.h"

namespace {
std::string gzip(const uint8_t* data, size_t size) {
  z_stream z{};
  FUZZ_ASSERT(deflateInit2(&z, 6, Z_DEFLATED, 16 + MAX_WBITS, 8, Z_DEFAULT_STRATEGY) == Z_OK);
  std::string out(deflateBound(&z, size), '\0');
  z.next_in = const_cast<Bytef*>(data);
  z.avail_in = static_cast<uInt>(size);
  z.next_out = reinterpret_cast<Bytef*>(out.data());
  z.avail_out = static_cast<uInt>(out.size());
  FUZZ_ASSERT(deflate(&z, Z_FINISH) == Z_STREAM_END);
  out.resize(z.total_out);
  deflateEnd(&z);
  return out;
}

// The tensor's bytes, or the error with the input's name removed.
std::string outcome(const void* data, size_t size, const std::string& name) {
  try {
    ignis::data::idx::Reader r = ignis::data::idx::Reader::from_buffer(data, size, name);
    ignis::Tensor t = ignis::data::idx::read_uint8(r);
    int64_t n = 1;
    for (int64_t d : r.dims()) n *= d;
    FUZZ_ASSERT(t.numel() == n && t.dim() == static_cast<int64_t>(r.dims().size()));
    return "ok:" + std::string(static_cast<const char*>(t.data_ptr()), static_cast<size_t>(n));
  } catch (const ignis::Error& e) {
    std::string m = e.what();
    const size_t at = m.find(name);
    FUZZ_ASSERT(at != std::string::npos);  // every error names the file
    return "error:" + m.erase(at, name.size());
  }
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size >= 2 && data[0] == 0x1f && data[1] == 0x8b) return 0;  // the gzip target's inputs
  const std::string plain = outcome(data, size, "in.idx");
  if (plain.rfind("ok:", 0) == 0) {
    FUZZ_ASSERT(
        std::memcmp(plain.data() + 3, data + (size - (plain.size() - 3)), plain.size() - 3) == 0);
  }
  const std::string gz = gzip(data, size);
  FUZZ_ASSERT(outcome(gz.data(), gz.size(), "in.idx.gz") == plain);
  return 0;
}
