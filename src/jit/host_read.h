// A hook on host reads of tensor data (Tensor::item, Tensor::data_ptr), installed by the graph
// tracer on its thread: a traced function that reads a tensor on the host would freeze the value
// it read into the graph, so the tracer refuses it. When no hook is set the check is one load
// from the thread's static TLS block (initial-exec, a trivial pointer: no TLS wrapper call), as
// the dispatcher's own flag (core/op_call.h).
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

extern thread_local constinit HostReadHook* tls_host_read_hook
    __attribute__((tls_model("initial-exec")));

inline void notify_host_read(const Tensor& t, const char* what) {
  if (__builtin_expect(tls_host_read_hook != nullptr, 0)) tls_host_read_hook->on_host_read(t, what);
}

}  // namespace jit::detail
}  // namespace ignis
