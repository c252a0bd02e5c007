// The executor's direct calls: for the ops that dominate inference graphs, a node calls the op's
// C++ front end with its arguments unboxed once per call from the node (no boxed argument frame,
// no vector of boxed results). The front end's dispatcher entry still runs, so interposers
// (profiler, tracer) see these calls as they see eager ones. Every other op is called boxed.
#include "jit/direct.h"

#include <string>
#include <unordered_map>

#include "core/op_call.h"
#include "ignis/conv.h"
#include "ignis/jit.h"
#include "ignis/norm.h"
#include "ignis/ops.h"
#include "jit/fused_conv.h"
#include "jit/fused_linear.h"

namespace ignis::jit::detail {

namespace {

const Tensor& in(const Node& n, const std::vector<Tensor>& env, size_t k) {
  static const Tensor none;
  const int v = n.args[k].value;
  return v < 0 ? none : env[static_cast<size_t>(v)];
}
IntArrayRef ints(const Node& n, size_t k) {
  return IntArrayRef(n.args[k].attr.get<std::vector<int64_t>>());
}
int64_t integer(const Node& n, size_t k) { return n.args[k].attr.get<int64_t>(); }

Tensor d_linear(const Node& n, const std::vector<Tensor>& e, void*) {
  return linear(in(n, e, 0), in(n, e, 1), in(n, e, 2));
}
Tensor d_linear_relu(const Node& n, const std::vector<Tensor>& e, void*) {
  return linear_relu(in(n, e, 0), in(n, e, 1), in(n, e, 2));
}
Tensor d_relu(const Node& n, const std::vector<Tensor>& e, void*) { return relu(in(n, e, 0)); }
// A frozen convolution keeps its weight in oneDNN's layout between runs (the state), unless an
// interposer is installed: then the op's front end runs, so that profilers and tracers see it.
// `other_at`: the residual's argument (0: none); the stride and what follows come after it.
Tensor packed_conv(const Node& n, const std::vector<Tensor>& e, void* state, Activation act,
                   size_t other_at, bool add_first) {
  if (state == nullptr || op::detail::tls_state.interposing) return Tensor();
  const size_t a = other_at != 0 ? other_at + 1 : 3;
  return conv_forward_onednn(in(n, e, 0), in(n, e, 1), in(n, e, 2),
                             other_at != 0 ? in(n, e, other_at) : Tensor(), ints(n, a),
                             ints(n, a + 1), ints(n, a + 2), integer(n, a + 3), act, add_first,
                             static_cast<PackedConvWeight*>(state));
}
// A released weight (jit/packed_weight.h) serves only its packed path: where that cannot run, the
// direct call returns nothing and the executor rebuilds the weight and calls again.
bool released(void* state) {
  return state != nullptr && static_cast<PackedWeight*>(state)->released;
}

Tensor d_conv2d(const Node& n, const std::vector<Tensor>& e, void* state) {
  if (Tensor r = packed_conv(n, e, state, Activation::none, 0, false); r.defined()) return r;
  if (released(state)) return Tensor();
  return conv2d(in(n, e, 0), in(n, e, 1), in(n, e, 2), ints(n, 3), ints(n, 4), ints(n, 5),
                integer(n, 6));
}
Tensor d_conv2d_relu(const Node& n, const std::vector<Tensor>& e, void* state) {
  if (Tensor r = packed_conv(n, e, state, Activation::relu, 0, false); r.defined()) return r;
  if (released(state)) return Tensor();
  return conv2d_relu(in(n, e, 0), in(n, e, 1), in(n, e, 2), ints(n, 3), ints(n, 4), ints(n, 5),
                     integer(n, 6));
}
Tensor d_conv2d_add_relu(const Node& n, const std::vector<Tensor>& e, void* state) {
  if (Tensor r = packed_conv(n, e, state, Activation::relu, 3, true); r.defined()) return r;
  if (released(state)) return Tensor();
  return conv2d_add_relu(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), ints(n, 4), ints(n, 5),
                         ints(n, 6), integer(n, 7));
}
Tensor d_conv2d_pointwise(const Node& n, const std::vector<Tensor>& e, void* state) {
  const std::string& act = n.args[8].attr.get<std::string>();
  const bool add_first = n.args[9].attr.get<bool>();
  if (Tensor r = packed_conv(n, e, state, activation_named("conv2d_pointwise", act), 3, add_first);
      r.defined())
    return r;
  if (released(state)) return Tensor();
  return conv2d_pointwise(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), ints(n, 4),
                          ints(n, 5), ints(n, 6), integer(n, 7), act, add_first);
}
// A frozen linear_pointwise keeps its weight in the layout oneDNN's matmul picks, as convolutions
// do (not with an interposer installed).
Tensor d_linear_pointwise(const Node& n, const std::vector<Tensor>& e, void* state) {
  const std::string& act = n.args[4].attr.get<std::string>();
  const bool add_first = n.args[5].attr.get<bool>();
  if (state != nullptr && !op::detail::tls_state.interposing) {
    Tensor r = linear_pointwise_onednn(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), act,
                                       add_first, static_cast<PackedLinearWeight*>(state));
    if (r.defined()) return r;
  }
  if (released(state)) return Tensor();
  return linear_pointwise(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), act, add_first);
}
Tensor d_add(const Node& n, const std::vector<Tensor>& e, void*) {
  return add(in(n, e, 0), in(n, e, 1), n.args[2].attr.get<Scalar>());
}
Tensor d_flatten(const Node& n, const std::vector<Tensor>& e, void*) {
  return flatten(in(n, e, 0), integer(n, 1), integer(n, 2));
}
Tensor d_batch_norm(const Node& n, const std::vector<Tensor>& e, void*) {
  return batch_norm(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), in(n, e, 4),
                    n.args[5].attr.get<bool>(), n.args[6].attr.get<double>(),
                    n.args[7].attr.get<double>());
}
Tensor d_batch_norm_relu(const Node& n, const std::vector<Tensor>& e, void*) {
  return batch_norm_relu(in(n, e, 0), in(n, e, 1), in(n, e, 2), in(n, e, 3), in(n, e, 4),
                         in(n, e, 5), n.args[6].attr.get<bool>(), n.args[7].attr.get<double>(),
                         n.args[8].attr.get<double>());
}
Tensor d_max_pool2d(const Node& n, const std::vector<Tensor>& e, void*) {
  return max_pool2d(in(n, e, 0), ints(n, 1), ints(n, 2), ints(n, 3), ints(n, 4),
                    n.args[5].attr.get<bool>());
}
Tensor d_adaptive_avg_pool2d(const Node& n, const std::vector<Tensor>& e, void*) {
  return adaptive_avg_pool2d(in(n, e, 0), ints(n, 1));
}

}  // namespace

DirectFn find_direct(const op::Record& rec) {
  static const std::unordered_map<std::string, DirectFn> table = {
      {"linear", &d_linear},
      {"linear_relu", &d_linear_relu},
      {"linear_pointwise", &d_linear_pointwise},
      {"relu", &d_relu},
      {"conv2d", &d_conv2d},
      {"conv2d_relu", &d_conv2d_relu},
      {"conv2d_add_relu", &d_conv2d_add_relu},
      {"conv2d_pointwise", &d_conv2d_pointwise},
      {"add.Tensor", &d_add},
      {"flatten.using_ints", &d_flatten},
      {"batch_norm", &d_batch_norm},
      {"batch_norm_relu", &d_batch_norm_relu},
      {"max_pool2d", &d_max_pool2d},
      {"adaptive_avg_pool2d", &d_adaptive_avg_pool2d},
  };
  auto it = table.find(rec.schema.full_name());
  return it == table.end() ? nullptr : it->second;
}

std::shared_ptr<PackedWeight> make_direct_state(const Graph& g, const Node& n) {
  const std::string name = n.name();
  if (name == "linear_pointwise") {
    const int w = n.args[1].value;
    if (w < 0 || g.values[static_cast<size_t>(w)].kind != ValueKind::Constant) return nullptr;
    return std::make_shared<PackedWeight>();
  }
  if (name != "conv2d" && name != "conv2d_relu" && name != "conv2d_add_relu" &&
      name != "conv2d_pointwise")
    return nullptr;
  const int w = n.args[1].value;
  if (w < 0 || g.values[static_cast<size_t>(w)].kind != ValueKind::Constant) return nullptr;
  return std::make_shared<PackedWeight>();
}

}  // namespace ignis::jit::detail
