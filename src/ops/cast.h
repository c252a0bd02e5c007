// The cast of one element between dtypes, shared by the CPU and CUDA copy kernels: to bool is
// "not zero"; anything else is a C++ conversion in the types' arithmetic types.
#pragma once

#include <type_traits>

#include "core/dispatch.h"
#include "ignis/dtype.h"

namespace ignis::fn {

template <class D, class S>
struct Cast {
  IGNIS_HD auto operator()(acc_t<S> v) const {
    if constexpr (std::is_same_v<D, bool>) return v != acc_t<S>(0);
    else return static_cast<acc_t<D>>(v);
  }
};

}  // namespace ignis::fn
