// libFuzzer target: the CIFAR-10 batch reader on a file held in memory. The first input byte
// picks the expected record count (1 to 3); the rest is the file. Build and run: make fuzz
#include <cstdint>

#include "data/cifar_buffer.h"
#include "fuzz_util.h"
#include "ignis/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size < 1) return 0;
  const int64_t expected = 1 + data[0] % 3;
  try {
    ignis::data::Example e =
        ignis::data::read_cifar10_buffer(data + 1, size - 1, "in.bin", expected);
    FUZZ_ASSERT(e.data.numel() == expected * 3072 && e.target.numel() == expected);
    const float* img = e.data.data_ptr<float>();
    for (int64_t i = 0; i < e.data.numel(); ++i) FUZZ_ASSERT(img[i] >= 0.0f && img[i] <= 1.0f);
    const int64_t* lab = e.target.data_ptr<int64_t>();
    for (int64_t i = 0; i < expected; ++i) FUZZ_ASSERT(lab[i] >= 0 && lab[i] <= 9);
  } catch (const ignis::Error&) {
  }
  return 0;
}
