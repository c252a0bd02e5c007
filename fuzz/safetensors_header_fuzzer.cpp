// libFuzzer target: the safetensors header parser alone (no tensors, so it builds without the
// library and runs fastest). The input is a whole file. Build and run: make fuzz
#include <cstdint>
#include <cstring>

#include "ignis/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Parse, then check the invariants the loader relies on.
  try {
    auto h = ignis::safetensors::parse_header(data, size, size, "fuzz");
    for (const auto& e : h.entries) {
      if (e.begin > e.end || h.data_start + e.end > size) __builtin_trap();
    }
  } catch (const ignis::Error&) {
  }
  return 0;
}
