// libFuzzer target: a whole safetensors file loaded from memory (header and data), then saved
// and loaded again: the round trip must give the same names, dtypes, shapes, bytes and
// metadata. Build and run: make fuzz
#include <cstdint>
#include <cstring>

#include "fuzz_util.h"
#include "ignis/error.h"
#include "io/safetensors.h"

namespace {
bool same(const ignis::Tensor& a, const ignis::Tensor& b) {
  return a.dtype() == b.dtype() && a.sizes().equals(b.sizes()) && a.nbytes() == b.nbytes() &&
         (a.nbytes() == 0 || std::memcmp(a.data_ptr(), b.data_ptr(), a.nbytes()) == 0);
}
}  // namespace

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  ignis::SafetensorsFile f;
  try {
    f = ignis::safetensors::load_buffer(data, size, "in.safetensors");
  } catch (const ignis::Error&) {
    return 0;
  }
  const std::string bytes = ignis::safetensors::serialize(f.tensors, f.metadata);
  const ignis::SafetensorsFile g = ignis::safetensors::load_buffer(
      reinterpret_cast<const uint8_t*>(bytes.data()), bytes.size(), "round-trip");
  FUZZ_ASSERT(g.tensors.size() == f.tensors.size() && g.metadata == f.metadata);
  for (size_t i = 0; i < f.tensors.size(); ++i) {
    FUZZ_ASSERT(g.tensors[i].first == f.tensors[i].first);
    FUZZ_ASSERT(same(g.tensors[i].second, f.tensors[i].second));
  }
  return 0;
}
