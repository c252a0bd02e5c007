// A CIFAR-10 batch held in memory: the fuzzer's entry point to the reader. Private to src/.
#pragma once

#include <cstdint>
#include <string>

#include "ignis/data/cifar.h"

namespace ignis::data {

/// As read_cifar10_batch, from `size` bytes at `data`; `name` is used in errors.
Example read_cifar10_buffer(const uint8_t* data, size_t size, const std::string& name,
                            int64_t expected_records);

}  // namespace ignis::data
