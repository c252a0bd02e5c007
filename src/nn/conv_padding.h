// Convolution modules' padding_mode (private): "zeros" pads inside the convolution; "reflect",
// "replicate" and "circular" pad the input with F::pad first and convolve with no padding, as
// PyTorch's _ConvNd does.
#pragma once

#include <string>
#include <vector>

#include "ignis/error.h"
#include "ignis/nn/conv.h"
#include "ignis/ops.h"

namespace ignis::nn::detail {

/// Throws naming the module unless mode is one of PyTorch's four (only "zeros" when transposed).
inline void check_padding_mode(const char* m, const std::string& mode, bool transposed) {
  IGNIS_CHECK(mode == "zeros" || mode == "reflect" || mode == "replicate" || mode == "circular", m,
              ": padding_mode must be 'zeros', 'reflect', 'replicate' or 'circular', but got '",
              mode, "'");
  IGNIS_CHECK(!transposed || mode == "zeros", m,
              ": only 'zeros' padding_mode is supported, but got '", mode, "'");
}

/// x padded by F::pad in the module's padding_mode (left / right widths per spatial dim, last
/// dim first: integer padding on both sides, "same" with the extra element after).
template <int D>
Tensor mode_pad(const Tensor& x, const ConvOptions<D>& o) {
  std::vector<int64_t> p;
  for (int i = D - 1; i >= 0; --i) {
    int64_t l = o.padding()[i], r = o.padding()[i];
    if (o.padding_mode_str() == "valid") l = r = 0;
    if (o.padding_mode_str() == "same") {
      const int64_t total = o.dilation()[i] * (o.kernel_size()[i] - 1);
      l = total / 2;
      r = total - l;
    }
    p.push_back(l);
    p.push_back(r);
  }
  return pad(x, p, o.padding_mode());
}

}  // namespace ignis::nn::detail
