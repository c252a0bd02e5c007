// cat on the GPU: each input is one strided 2-D copy into the output (cudaMemcpy2DAsync on the
// current stream). The output seen as [outer, row] bytes holds input i's block of bytes at
// column offset prefix[i] of every row.
#include "core/tensor_impl.h"
#include "cuda/backend.h"
#include "cuda/cuda_check.h"
#include "ops/index.h"

namespace ignis::cuda {
namespace {

// cudaMemcpy2DAsync's pitches must stay below this (cudaDevAttrMaxPitch on current GPUs).
constexpr int64_t kMaxPitch = (int64_t{1} << 31) - 1;

void cat_kernel(const Tensor& out, const std::vector<Tensor>& inputs, int64_t dim) {
  const int64_t es = static_cast<int64_t>(out.element_size());
  int64_t outer = 1;
  for (int64_t d = 0; d < dim; ++d) outer *= out.sizes()[d];
  if (out.numel() == 0 || outer == 0) return;
  const int64_t row = out.numel() / outer * es;  // bytes of one output row
  DeviceGuard guard(out.device().index);
  const cudaStream_t stream = detail::current_stream(out.device());
  char* dst = static_cast<char*>(out.data_ptr());
  int64_t offset = 0;
  for (const Tensor& in : inputs) {
    const int64_t block = in.numel() / outer * es;  // bytes of the input in one output row
    const char* src = static_cast<const char*>(in.data_ptr());
    if (block == 0) {
    } else if (outer == 1) {  // one block: a plain copy
      IGNIS_CUDA_CHECK(cudaMemcpyAsync(dst + offset, src, static_cast<size_t>(block),
                                       cudaMemcpyDeviceToDevice, stream));
    } else if (row < kMaxPitch) {
      IGNIS_CUDA_CHECK(cudaMemcpy2DAsync(dst + offset, static_cast<size_t>(row), src,
                                         static_cast<size_t>(block), static_cast<size_t>(block),
                                         static_cast<size_t>(outer), cudaMemcpyDeviceToDevice,
                                         stream));
    } else {  // rows beyond the 2-D copy's pitch limit: a copy per row
      for (int64_t o = 0; o < outer; ++o) {
        IGNIS_CUDA_CHECK(cudaMemcpyAsync(dst + o * row + offset, src + o * block,
                                         static_cast<size_t>(block), cudaMemcpyDeviceToDevice,
                                         stream));
      }
    }
    offset += block;
  }
}

}  // namespace

IGNIS_REGISTER_KERNEL(cat_stub, CUDA, &cat_kernel);

}  // namespace ignis::cuda
