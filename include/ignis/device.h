// Devices: where a tensor's storage lives.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ignis {

/// Meta: tensors with sizes, strides and a dtype but no storage; every op runs on them through
/// its shape and dtype rules alone (PyTorch's device='meta').
enum class DeviceType : uint8_t { CPU = 0, CUDA = 1, Meta = 2 };
constexpr int kNumDeviceTypes = 3;

/// A device: CPU, CUDA with an index (`Device(DeviceType::CUDA, 1)`, `Device("cuda:1")`), or
/// meta (`Device("meta")`, `kMeta`).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit
  explicit Device(const std::string& spec);  // "cpu", "cuda", "cuda:1"
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool is_meta() const { return type == DeviceType::Meta; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};
constexpr Device kCPU{DeviceType::CPU, 0};
constexpr DeviceType kCUDA = DeviceType::CUDA;
constexpr Device kMeta{DeviceType::Meta, 0};

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

/// True when this build of ignis has a CUDA backend and a GPU is visible.
bool cuda_is_available();

}  // namespace ignis
