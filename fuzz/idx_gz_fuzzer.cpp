// libFuzzer target: the IDX reader on arbitrary gzip bytes (header, deflate blocks, CRC/size
// trailer, further members, trailing garbage). Seeds are gzip-compressed IDX files. Build and
// run: make fuzz
#include <cstdint>

#include "data/idx.h"
#include "fuzz_util.h"
#include "ignis/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  try {
    ignis::data::idx::Reader r = ignis::data::idx::Reader::from_buffer(data, size, "in.idx.gz");
    ignis::Tensor t = ignis::data::idx::read_uint8(r);
    int64_t n = 1;
    for (int64_t d : r.dims()) n *= d;
    FUZZ_ASSERT(t.numel() == n);
  } catch (const ignis::Error&) {
  }
  return 0;
}
