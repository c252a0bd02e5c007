// Devices: where a tensor's storage lives.
#pragma once

#include <cstdint>
#include <ostream>
#include <string>

namespace ignis {

enum class DeviceType : uint8_t { CPU = 0, CUDA = 1 };
constexpr int kNumDeviceTypes = 2;

/// A device: CPU, or CUDA with an index (`Device(DeviceType::CUDA, 1)`, `Device("cuda:1")`).
struct Device {
  DeviceType type = DeviceType::CPU;
  int index = 0;
  constexpr Device() = default;
  constexpr Device(DeviceType t, int i = 0) : type(t), index(i) {}  // NOLINT: implicit
  explicit Device(const std::string& spec);  // "cpu", "cuda", "cuda:1"
  bool is_cpu() const { return type == DeviceType::CPU; }
  bool is_cuda() const { return type == DeviceType::CUDA; }
  bool operator==(const Device& o) const { return type == o.type && index == o.index; }
  bool operator!=(const Device& o) const { return !(*this == o); }
  std::string str() const;
};
constexpr Device kCPU{DeviceType::CPU, 0};
constexpr DeviceType kCUDA = DeviceType::CUDA;

inline std::ostream& operator<<(std::ostream& os, const Device& d) { return os << d.str(); }

/// True when this build of ignis has a CUDA backend and a GPU is visible.
bool cuda_is_available();

}  // namespace ignis
