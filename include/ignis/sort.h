// Sorting, selection, scans and NaN-aware reductions, as torch::sort, topk, median, mode,
// cumprod, logcumsumexp, var_mean, std_mean, nansum, nanmean. Every function is an op record;
// the differentiable ones have their backward in ignis ops.
//
// Order: NaN is greater than +inf (sorted last ascending, first descending; topk's largest
// values start with the NaNs), as in PyTorch. sort is always stable.
#pragma once

#include <optional>
#include <tuple>

#include "ignis/tensor.h"

namespace ignis {

/// x sorted along dim, and the positions the values came from. Stable: equal elements keep
/// their order (so the stable flag of the second form changes nothing).
std::tuple<Tensor, Tensor> sort(const Tensor& self, int64_t dim = -1, bool descending = false);
std::tuple<Tensor, Tensor> sort(const Tensor& self, std::optional<bool> stable, int64_t dim = -1,
                                bool descending = false);
/// The indices of sort. (The stable form takes dim without a default, so that argsort(x, 1)
/// is not ambiguous.)
Tensor argsort(const Tensor& self, int64_t dim = -1, bool descending = false);
Tensor argsort(const Tensor& self, bool stable, int64_t dim, bool descending = false);
/// The k largest (smallest) elements along dim, in sorted order, and their indices. Equal values
/// come in index order (PyTorch leaves the order of ties unspecified).
std::tuple<Tensor, Tensor> topk(const Tensor& self, int64_t k, int64_t dim = -1,
                                bool largest = true, bool sorted = true);
/// The median of all elements: the lower of the two middle values for an even count, NaN when
/// any element is NaN (and for an empty tensor).
Tensor median(const Tensor& self);
/// The median along dim and its index (of the first NaN when the line has one).
std::tuple<Tensor, Tensor> median(const Tensor& self, int64_t dim, bool keepdim = false);
/// The most frequent value along dim (ties: the smallest) and the index of its last occurrence.
std::tuple<Tensor, Tensor> mode(const Tensor& self, int64_t dim = -1, bool keepdim = false);

/// Cumulative product along dim (integers and bool promote to int64, or to dtype when given).
/// The gradient is exact with zeros in the input.
Tensor cumprod(const Tensor& self, int64_t dim, std::optional<DType> dtype = std::nullopt);
/// log(cumsum(exp(x))) along dim, computed stably (-inf inputs add nothing; integers promote to
/// the default float dtype).
Tensor logcumsumexp(const Tensor& self, int64_t dim);

/// (var, mean) and (std, mean) over dims (empty: all), dividing the variance by n - correction
/// (correction 1: PyTorch's unbiased=true, 0: unbiased=false).
std::tuple<Tensor, Tensor> var_mean(const Tensor& self, IntArrayRef dim = {},
                                    int64_t correction = 1, bool keepdim = false);
std::tuple<Tensor, Tensor> std_mean(const Tensor& self, IntArrayRef dim = {},
                                    int64_t correction = 1, bool keepdim = false);
/// sum and mean treating NaN as absent (nansum: as 0; nanmean: left out of the count, NaN when
/// every element is NaN). nanmean needs a floating tensor.
Tensor nansum(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false,
              std::optional<DType> dtype = std::nullopt);
Tensor nanmean(const Tensor& self, IntArrayRef dim = {}, bool keepdim = false,
               std::optional<DType> dtype = std::nullopt);

}  // namespace ignis
