// Element types, bfloat16, and PyTorch's type promotion.
#pragma once

#include <cstdint>
#include <cstring>
#include <ostream>
#include <string_view>

#ifndef IGNIS_HD
#if defined(__CUDACC__)
#define IGNIS_HD __host__ __device__
#else
#define IGNIS_HD
#endif
#endif

namespace ignis {

/// bfloat16: the upper 16 bits of a float32. Converts with round-to-nearest-even; math on it is
/// done in float32.
struct BFloat16 {
  uint16_t bits = 0;
  BFloat16() = default;
  IGNIS_HD BFloat16(float f) {  // NOLINT: implicit, like a numeric type
    uint32_t u;
    std::memcpy(&u, &f, 4);
    if ((u & 0x7fffffffu) > 0x7f800000u) {
      bits = static_cast<uint16_t>((u >> 16) | 0x40u);  // quiet NaN
    } else {
      u += 0x7fffu + ((u >> 16) & 1u);
      bits = static_cast<uint16_t>(u >> 16);
    }
  }
  IGNIS_HD operator float() const {
    uint32_t u = static_cast<uint32_t>(bits) << 16;
    float f;
    std::memcpy(&f, &u, 4);
    return f;
  }
};

/// The element types of a tensor, in promotion order (bool < uint8 < int32 < int64 < bfloat16 <
/// float32 < float64).
enum class DType : uint8_t { Bool, UInt8, Int32, Int64, BFloat16, Float32, Float64 };
constexpr int kNumDTypes = 7;

constexpr DType kBool = DType::Bool;
constexpr DType kUInt8 = DType::UInt8;
constexpr DType kInt32 = DType::Int32;
constexpr DType kInt64 = DType::Int64;
constexpr DType kBFloat16 = DType::BFloat16;
constexpr DType kFloat32 = DType::Float32;
constexpr DType kFloat64 = DType::Float64;
constexpr DType kFloat = DType::Float32;
constexpr DType kDouble = DType::Float64;
constexpr DType kLong = DType::Int64;
constexpr DType kInt = DType::Int32;

constexpr size_t element_size(DType t) {
  switch (t) {
    case DType::Bool:
    case DType::UInt8: return 1;
    case DType::BFloat16: return 2;
    case DType::Int32:
    case DType::Float32: return 4;
    case DType::Int64:
    case DType::Float64: return 8;
  }
  return 0;
}
constexpr bool is_floating_point(DType t) {
  return t == DType::BFloat16 || t == DType::Float32 || t == DType::Float64;
}
constexpr bool is_integral(DType t, bool include_bool = false) {
  return t == DType::UInt8 || t == DType::Int32 || t == DType::Int64 ||
         (include_bool && t == DType::Bool);
}
constexpr std::string_view dtype_name(DType t) {
  switch (t) {
    case DType::Bool: return "bool";
    case DType::UInt8: return "uint8";
    case DType::Int32: return "int32";
    case DType::Int64: return "int64";
    case DType::BFloat16: return "bfloat16";
    case DType::Float32: return "float32";
    case DType::Float64: return "float64";
  }
  return "?";
}
inline std::ostream& operator<<(std::ostream& os, DType t) { return os << dtype_name(t); }

/// The dtype two tensors promote to (torch.promote_types).
constexpr DType promote_types(DType a, DType b) { return a > b ? a : b; }

/// 0 = bool, 1 = integral, 2 = floating: the category that decides how 0-d tensors and scalars
/// take part in promotion.
constexpr int dtype_category(DType t) {
  return t == DType::Bool ? 0 : is_floating_point(t) ? 2 : 1;
}

/// The default floating dtype (float32), used for float scalars, rand, true division of ints.
constexpr DType default_dtype() { return DType::Float32; }

/// Maps C++ types to dtypes.
template <class T>
struct dtype_of;
template <> struct dtype_of<bool> { static constexpr DType value = DType::Bool; };
template <> struct dtype_of<uint8_t> { static constexpr DType value = DType::UInt8; };
template <> struct dtype_of<int32_t> { static constexpr DType value = DType::Int32; };
template <> struct dtype_of<int64_t> { static constexpr DType value = DType::Int64; };
template <> struct dtype_of<BFloat16> { static constexpr DType value = DType::BFloat16; };
template <> struct dtype_of<float> { static constexpr DType value = DType::Float32; };
template <> struct dtype_of<double> { static constexpr DType value = DType::Float64; };
template <class T>
constexpr DType dtype_of_v = dtype_of<T>::value;

}  // namespace ignis
