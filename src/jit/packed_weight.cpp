// PackedWeight::pack (jit/packed_weight.h).
#include "jit/packed_weight.h"

#include "core/tensor_impl.h"
#include "cpu/onednn_util.h"

namespace ignis::jit::detail {

void PackedWeight::pack(const std::string& k, const Tensor& w, const dnnl::memory::desc& plain,
                        const dnnl::memory::desc& inner) {
  auto& eng = cpu::onednn::engine();
  auto& s = cpu::onednn::stream();
  Tensor bytes = make_tensor({static_cast<int64_t>((inner.get_size() + 3) / 4)}, kFloat32);
  dnnl::memory user(plain, eng, const_cast<void*>(w.data_ptr()));
  dnnl::memory packed(inner, eng, bytes.data_ptr());
  dnnl::reorder(user, packed).execute(s, user, packed);
  s.wait();
  key = k;
  data = w.data_ptr();
  version = w._version();
  weight = bytes;
  ++packs;
  sizes = w.sizes().shape();
  dtype = w.dtype();
  unpack = [plain, inner, bytes, shape = sizes, dt = dtype] {
    auto& e = cpu::onednn::engine();
    auto& st = cpu::onednn::stream();
    Tensor w2 = make_tensor(shape, dt);
    dnnl::memory from(inner, e, bytes.data_ptr()), to(plain, e, w2.data_ptr());
    dnnl::reorder(from, to).execute(st, from, to);
    st.wait();
    return w2;
  };
}

}  // namespace ignis::jit::detail
