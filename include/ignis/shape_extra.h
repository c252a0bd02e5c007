// Shape and indexing ops beyond ops.h: index_fill, roll, tile, unbind, repeat_interleave,
// meshgrid, with PyTorch's semantics.
#pragma once

#include <optional>
#include <string>
#include <vector>

#include "ignis/tensor.h"

namespace ignis {

/// A copy of self with the slices at `index` (int64, 0-d or 1-d, negative counts from the end)
/// along dim set to value.
Tensor index_fill(const Tensor& self, int64_t dim, const Tensor& index, Scalar value);
/// Elements shifted by shifts[i] along dims[i], wrapping around; with no dims, over the
/// flattened tensor (shape kept).
Tensor roll(const Tensor& self, IntArrayRef shifts, IntArrayRef dims = {});
/// self repeated dims[i] times along each dim; dims shorter than self's rank are padded with
/// ones in front (and self with leading size-1 dims when longer).
Tensor tile(const Tensor& self, IntArrayRef dims);
/// The slices of self along dim, as views.
std::vector<Tensor> unbind(const Tensor& self, int64_t dim = 0);
/// Each element repeated `repeats` times along dim (no dim: over the flattened tensor).
/// output_size, when given, must equal the result's size along dim.
Tensor repeat_interleave(const Tensor& self, int64_t repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
/// Element i repeated repeats[i] times (repeats: int64, one per element along dim, or one).
Tensor repeat_interleave(const Tensor& self, const Tensor& repeats,
                         std::optional<int64_t> dim = std::nullopt,
                         std::optional<int64_t> output_size = std::nullopt);
/// arange(repeats.size(0)) with element i repeated repeats[i] times.
Tensor repeat_interleave(const Tensor& repeats, std::optional<int64_t> output_size = std::nullopt);
/// Coordinate grids of 0-d or 1-d tensors (views). indexing "ij": the output's dim i runs over
/// tensors[i]; "xy": the first two dims swapped (Cartesian, as numpy's default). Without
/// indexing: "ij" (PyTorch's default, which it warns about).
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors);
std::vector<Tensor> meshgrid(const std::vector<Tensor>& tensors, const std::string& indexing);

}  // namespace ignis
