// libFuzzer target for the safetensors header parser (the untrusted-input part of the loader).
// Build and run (ASan + UBSan): make fuzz
#include <cstdint>
#include <cstring>

#include "ignis/error.h"
#include "io/safetensors.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  // Treat the input as a whole file: parse, then check the invariants the loader relies on.
  try {
    auto h = ignis::safetensors::parse_header(data, size, size, "fuzz");
    for (const auto& e : h.entries) {
      if (e.begin > e.end || h.data_start + e.end > size) __builtin_trap();
    }
  } catch (const ignis::Error&) {
  }
  return 0;
}
