// Scalar: a number passed to an op (the `2` in `x * 2`).
#pragma once

#include <cstdint>
#include <ostream>
#include <type_traits>

#include "ignis/dtype.h"

namespace ignis {

/// A bool, integer or floating number; its kind decides promotion like a Python number in PyTorch.
class Scalar {
 public:
  Scalar() = default;
  template <class T, std::enable_if_t<std::is_arithmetic_v<T>, int> = 0>
  Scalar(T v) {  // NOLINT: implicit, like c10::Scalar
    if constexpr (std::is_same_v<T, bool>) {
      kind_ = DType::Bool;
      i_ = v;
    } else if constexpr (std::is_integral_v<T>) {
      kind_ = DType::Int64;
      i_ = static_cast<int64_t>(v);
    } else {
      kind_ = DType::Float64;
      d_ = static_cast<double>(v);
    }
  }
  Scalar(BFloat16 v) : kind_(DType::Float64), d_(static_cast<float>(v)) {}  // NOLINT

  /// Bool, Int64 or Float64.
  DType kind() const { return kind_; }
  bool is_floating_point() const { return kind_ == DType::Float64; }
  bool is_integral() const { return kind_ == DType::Int64; }
  bool is_bool() const { return kind_ == DType::Bool; }
  double to_double() const { return kind_ == DType::Float64 ? d_ : static_cast<double>(i_); }
  int64_t to_int() const { return kind_ == DType::Float64 ? static_cast<int64_t>(d_) : i_; }
  /// LibTorch's accessors: `loss.item().toFloat()`.
  double toDouble() const { return to_double(); }
  float toFloat() const { return static_cast<float>(to_double()); }
  int64_t toLong() const { return to_int(); }
  int toInt() const { return static_cast<int>(to_int()); }
  bool toBool() const { return to_double() != 0; }
  template <class T>
  T to() const {
    if constexpr (std::is_same_v<T, bool>) return to_double() != 0;
    else if constexpr (std::is_integral_v<T>) return static_cast<T>(to_int());
    else return static_cast<T>(to_double());
  }

 private:
  DType kind_ = DType::Int64;
  int64_t i_ = 0;
  double d_ = 0;
};

/// Prints the value (`std::cout << loss.item()`): an integer, a floating value, or true/false.
inline std::ostream& operator<<(std::ostream& os, const Scalar& s) {
  if (s.is_bool()) return os << (s.to<bool>() ? "true" : "false");
  if (s.is_integral()) return os << s.to_int();
  return os << s.to_double();
}

}  // namespace ignis
