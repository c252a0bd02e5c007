// Random image transforms: RandomCrop and RandomHorizontalFlip, drawn per sample.
#include <atomic>
#include <cstring>
#include <memory>

#include "ignis/autograd.h"
#include "ignis/data.h"
#include "ignis/generator.h"
#include "ignis/ops.h"

namespace ignis::data {

namespace {

// The random stream of one transform: sample k of all calls draws from (seed, k).
struct Stream {
  uint64_t seed;
  std::atomic<uint64_t> next{0};
  explicit Stream(std::optional<uint64_t> s) {
    if (s) {
      seed = *s;
    } else {
      Generator& g = default_generator();
      seed = Generator::bits(g.seed(), g.reserve(1));
    }
  }
  // Reserves n consecutive draws and returns the first.
  uint64_t reserve(uint64_t n) { return next.fetch_add(n); }
};

// Views x as a batch [N, C, H, W] (contiguous); `batched` tells whether x had the N dim.
Tensor as_batch(const Tensor& x, const char* op, bool& batched) {
  IGNIS_CHECK(x.defined() && (x.dim() == 3 || x.dim() == 4), op,
              ": expected an image "
              "[C, H, W] or a batch [N, C, H, W], got shape ",
              x.defined() ? x.sizes() : IntArrayRef());
  batched = x.dim() == 4;
  return (batched ? x : x.unsqueeze(0)).contiguous();
}

}  // namespace

Transform transforms::RandomCrop(int64_t size, int64_t padding, std::optional<uint64_t> seed) {
  IGNIS_CHECK(size > 0, "RandomCrop: size must be positive, got ", size);
  IGNIS_CHECK(padding >= 0, "RandomCrop: padding must be >= 0, got ", padding);
  auto stream = std::make_shared<Stream>(seed);
  return [size, padding, stream](const Tensor& input) {
    NoGradGuard ng;
    bool batched = false;
    const Tensor x = as_batch(input, "RandomCrop", batched);
    const int64_t n = x.size(0), c = x.size(1), h = x.size(2), w = x.size(3);
    const int64_t hp = h + 2 * padding, wp = w + 2 * padding;
    IGNIS_CHECK(size <= hp && size <= wp, "RandomCrop: crop size ", size,
                " is larger than the "
                "padded image ",
                hp, "x", wp, " (input shape ", input.sizes(), ", padding ", padding, ")");
    Tensor out = zeros({n, c, size, size}, x.dtype());
    const size_t es = x.element_size();
    const auto* src = static_cast<const char*>(x.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    const uint64_t base = stream->reserve(static_cast<uint64_t>(n));
    for (int64_t i = 0; i < n; ++i) {
      const uint64_t k = base + static_cast<uint64_t>(i);
      // Top-left corner of the window in padded coordinates.
      const auto top = static_cast<int64_t>(Generator::bits(stream->seed, 2 * k) %
                                            static_cast<uint64_t>(hp - size + 1));
      const auto left = static_cast<int64_t>(Generator::bits(stream->seed, 2 * k + 1) %
                                             static_cast<uint64_t>(wp - size + 1));
      // The window's columns that fall inside the image: [x0, x1) in image coordinates.
      const int64_t x0 = std::max<int64_t>(left - padding, 0);
      const int64_t x1 = std::min<int64_t>(left - padding + size, w);
      if (x1 <= x0) continue;  // the window lies in the padding: all zeros
      for (int64_t ch = 0; ch < c; ++ch) {
        for (int64_t r = 0; r < size; ++r) {
          const int64_t y = top - padding + r;
          if (y < 0 || y >= h) continue;
          const char* s = src + (((i * c + ch) * h + y) * w + x0) * es;
          char* d = dst + (((i * c + ch) * size + r) * size + (x0 - (left - padding))) * es;
          std::memcpy(d, s, static_cast<size_t>(x1 - x0) * es);
        }
      }
    }
    return batched ? out : out.squeeze(0);
  };
}

Transform transforms::RandomHorizontalFlip(double p, std::optional<uint64_t> seed) {
  IGNIS_CHECK(p >= 0 && p <= 1, "RandomHorizontalFlip: p must be in [0, 1], got ", p);
  auto stream = std::make_shared<Stream>(seed);
  return [p, stream](const Tensor& input) {
    NoGradGuard ng;
    bool batched = false;
    const Tensor x = as_batch(input, "RandomHorizontalFlip", batched);
    const int64_t n = x.size(0), rows = x.size(1) * x.size(2), w = x.size(3);
    Tensor out = empty_like(x);
    const size_t es = x.element_size();
    const auto* src = static_cast<const char*>(x.data_ptr());
    auto* dst = static_cast<char*>(out.data_ptr());
    const uint64_t base = stream->reserve(static_cast<uint64_t>(n));
    const size_t sample_bytes = static_cast<size_t>(rows * w) * es;
    for (int64_t i = 0; i < n; ++i) {
      const char* s = src + static_cast<size_t>(i) * sample_bytes;
      char* d = dst + static_cast<size_t>(i) * sample_bytes;
      if (Generator::uniform(stream->seed, base + static_cast<uint64_t>(i)) >= p) {
        std::memcpy(d, s, sample_bytes);
        continue;
      }
      for (int64_t r = 0; r < rows; ++r) {
        for (int64_t j = 0; j < w; ++j) {
          std::memcpy(d + static_cast<size_t>(r * w + j) * es,
                      s + static_cast<size_t>(r * w + (w - 1 - j)) * es, es);
        }
      }
    }
    return batched ? out : out.squeeze(0);
  };
}

}  // namespace ignis::data
