// A hook on host reads of tensor data (Tensor::item, Tensor::data_ptr), installed by the graph
// tracer on its thread: a traced function that reads a tensor on the host would freeze the value
// it read into the graph, so the tracer refuses it. One thread-local load when none is set.
#pragma once

namespace ignis {
class Tensor;
namespace jit::detail {

class HostReadHook {
 public:
  virtual ~HostReadHook() = default;
  /// `what` is the method reading the data ("item", "data_ptr").
  virtual void on_host_read(const Tensor& t, const char* what) = 0;
};

HostReadHook*& host_read_hook();

inline void notify_host_read(const Tensor& t, const char* what) {
  if (HostReadHook* h = host_read_hook()) h->on_host_read(t, what);
}

}  // namespace jit::detail
}  // namespace ignis
