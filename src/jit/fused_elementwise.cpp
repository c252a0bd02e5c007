// The fused_elementwise op: a chain of elementwise ops (a fused program, see fused_program.h)
// run in one pass over memory. The fusion pass (fusion.cpp) makes these nodes; a graph file
// stores the program as the node's attribute.
//
// - Inference (no input requires grad, or grad mode off): a kernel generated as C++ from the
//   shared functors and compiled at run time (codegen.cpp), else the interpreter
//   (fused_runtime.h), which runs the program tile by tile through the same functors. Both run over
//   both cores.
// - Training: the same kernel forward, and a backward that is the program differentiated
//   (fused_autodiff.cpp), recomputing the chain from the saved inputs: on the CPU one kernel for
//   every input's gradient, with create_graph or on a GPU a program per input. A chain without
//   a derivative (maximum, minimum) runs op by op through the ops' front ends, so autograd
//   records each op's own backward.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/autograd.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/fused_runtime.h"
#include "ops/unary.h"

namespace ignis {
namespace jit {

namespace {

using detail::FusedInstr;
using detail::FusedOp;
using detail::FusedOperand;
using detail::FusedProgram;

std::atomic<int> g_backend{0};  // FusionBackend
enum FusionBackend : int { kAuto = 0, kCompiler = 1, kInterpreter = 2 };
std::mutex g_why_mu;
std::string g_why;  // why the compiler is not used (empty when it is)

}  // namespace

namespace detail {

IGNIS_DEFINE_STUB(fused_elementwise_stub, FusedDeviceFn);
int fusion_backend_mode() { return g_backend.load(); }
IGNIS_DEFINE_STUB(fused_reduction_stub, FusedReductionDeviceFn);

// ---- the composite: the ops' front ends, one by one (autograd records each)

Tensor run_fused_composite(const FusedProgram& p, const std::vector<Tensor>& in) {
  std::vector<Tensor> v;
  v.reserve(p.code.size());
  auto ref = [&](const FusedOperand& o) -> const Tensor& {
    return o.kind == FusedOperand::Kind::Input ? in[o.index] : v[o.index];
  };
  for (const FusedInstr& ins : p.code) {
    const Tensor& a = ref(ins.a);
    const bool num = ins.b.kind == FusedOperand::Kind::Number;
    auto operand_b = [&] { return num ? full_like(a, ins.b.number) : ref(ins.b); };
    Tensor r;
    switch (ins.op) {
      case FusedOp::add:
        r = num ? add(a, ins.b.number, ins.param) : add(a, ref(ins.b), ins.param);
        break;
      case FusedOp::sub:
        r = num ? sub(a, ins.b.number, ins.param) : sub(a, ref(ins.b), ins.param);
        break;
      case FusedOp::mul: r = num ? mul(a, ins.b.number) : mul(a, ref(ins.b)); break;
      case FusedOp::div: r = num ? div(a, ins.b.number) : div(a, ref(ins.b)); break;
      case FusedOp::maximum: r = maximum(a, num ? full_like(a, ins.b.number) : ref(ins.b)); break;
      case FusedOp::minimum: r = minimum(a, num ? full_like(a, ins.b.number) : ref(ins.b)); break;
      case FusedOp::neg: r = neg(a); break;
      case FusedOp::abs: r = abs(a); break;
      case FusedOp::relu: r = relu(a); break;
      case FusedOp::gelu: r = gelu(a); break;
      case FusedOp::gelu_tanh: r = gelu(a, "tanh"); break;
      case FusedOp::silu: r = silu(a); break;
      case FusedOp::leaky_relu: r = leaky_relu(a, ins.param); break;
      case FusedOp::sign: r = sign(a); break;
      // The backward ops (backward programs); a number as their second operand stands for a
      // tensor of that value.
      case FusedOp::threshold_backward: r = threshold_backward(a, operand_b(), ins.param); break;
      case FusedOp::tanh_backward: r = tanh_backward(a, operand_b()); break;
      case FusedOp::sigmoid_backward: r = sigmoid_backward(a, operand_b()); break;
      case FusedOp::leaky_relu_backward: r = leaky_relu_backward(a, operand_b(), ins.param); break;
      case FusedOp::gelu_backward: r = gelu_backward(a, operand_b(), false); break;
      case FusedOp::gelu_tanh_backward: r = gelu_backward(a, operand_b(), true); break;
      case FusedOp::silu_backward: r = silu_backward(a, operand_b()); break;
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad) \
  case FusedOp::name:                              \
    r = ignis::name(a);                            \
    break;
#include "ignis/float_unary_ops.def"
    }
    v.push_back(std::move(r));
  }
  return v.back();
}

// ---- the kernels: per key the compiled one, or none (interpreter)

namespace {

struct KernelTable {
  std::mutex mu;
  std::map<std::string, void*> kernels;
};
KernelTable& kernel_table() {
  static KernelTable* t = new KernelTable;
  return *t;
}

struct ProgramCache {
  std::mutex mu;
  std::map<std::pair<std::string, int>, std::shared_ptr<const FusedProgram>> programs;
};

}  // namespace

void* fused_kernel(const std::string& key_, const std::function<std::string()>& source,
                   const char* op) {
  const int backend = g_backend.load();
  if (backend == kInterpreter) return nullptr;
  const std::string key = jit_compiler() + "|" + key_;
  KernelTable& t = kernel_table();
  {
    std::lock_guard<std::mutex> lock(t.mu);
    if (auto it = t.kernels.find(key); it != t.kernels.end()) {
      if (it->second != nullptr || backend != kCompiler) return it->second;
    }
  }
  std::string why;
  void* fn = compiled_symbol(source(), why);
  if (fn == nullptr) {
    IGNIS_CHECK(backend != kCompiler, op, ": the compiler backend was asked for, but ", why);
    std::lock_guard<std::mutex> lock(g_why_mu);
    g_why = why;
  }
  std::lock_guard<std::mutex> lock(t.mu);
  t.kernels[key] = fn;
  return fn;
}

Shape fused_output_shape(const std::vector<Tensor>& inputs, const char* op) {
  Shape shape;
  const DType dtype = inputs[0].defined() ? inputs[0].dtype() : kFloat32;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    IGNIS_CHECK(t.defined(), op, ": input ", i, " is undefined");
    IGNIS_CHECK(t.dtype() == dtype && (dtype == kFloat32 || dtype == kFloat64), op,
                ": inputs must all be float32 or all float64; input 0 is ", dtype, ", input ", i,
                " is ", t.dtype());
    IGNIS_CHECK(t.device() == inputs[0].device(), op, ": input ", i, " is on ", t.device(),
                ", input 0 on ", inputs[0].device());
    shape = broadcast_shapes(shape, t.sizes());
  }
  return shape;
}

std::shared_ptr<const FusedProgram> parsed_program(const std::string& text, int num_inputs) {
  static ProgramCache* c = new ProgramCache;
  std::lock_guard<std::mutex> lock(c->mu);
  auto& slot = c->programs[{text, num_inputs}];
  if (!slot) slot = std::make_shared<const FusedProgram>(parse_fused_program(text, num_inputs));
  return slot;
}

}  // namespace detail

namespace {

/// The inputs as a kernel reads them (codegen.h): the data pointers of dense tensors, one layout
/// letter each, and the row length.
struct Layout {
  std::vector<Tensor> keep;
  std::vector<const void*> ptrs;
  std::string layouts;
  int64_t cols = 1;
};

Layout lay_out(const std::vector<Tensor>& inputs, const Shape& shape) {
  Layout l;
  int64_t n = 1;
  for (int64_t d : shape) n *= d;
  // Rows of the output's last dim when an input repeats along them (a bias row, a per-row
  // value); otherwise one row of everything, so that the loop is one flat vectorised pass.
  const int64_t last = shape.empty() ? 1 : shape.back();
  bool rows = false;
  // (No op call for an input already dense: a profiler sees the fused op alone.)
  auto dense = [](const Tensor& t) { return t.is_contiguous() ? t : t.contiguous(); };
  for (const Tensor& t : inputs) {
    char c = 'f';
    Tensor d;
    if (t.numel() == 1) {
      c = 's';
      d = t;  // its data pointer is the element, whatever its strides
    } else if (t.sizes().equals(shape)) {
      d = dense(t);
    } else if (t.numel() == last && t.dim() >= 1 && t.size(-1) == last) {
      c = 'r';  // [..., 1, C]: the same row for every row
      d = dense(t);
    } else if (t.dim() == static_cast<int64_t>(shape.size()) && t.size(-1) == 1 &&
               t.numel() * last == n) {
      c = 'c';  // [..., 1] against [..., C] with the same leading dims: one value per row
      d = dense(t);
    } else {
      d = t.expand(shape).contiguous();  // any other broadcast: materialised
    }
    rows = rows || c == 'r' || c == 'c';
    l.layouts += c;
    l.ptrs.push_back(d.data_ptr());
    l.keep.push_back(std::move(d));
  }
  l.cols = rows ? last : n;
  return l;
}

/// The program over the CPU's cores into `outs` (contiguous, the output's shape): its result into
/// outs[0] (`outputs` empty), or its values `outputs[j]` into outs[j]; by the generated kernel of
/// `key`, else the interpreter.
void run_on_cpu(const FusedProgram& p, const std::vector<int>& outputs, const Layout& lay,
                const std::string& key, const std::vector<Tensor>& outs) {
  const int64_t n = outs[0].numel();
  const DType dtype = outs[0].dtype();
  const int64_t grain = std::max<int64_t>(kGrainSize / 4, 1);
  const int64_t cols = lay.cols;
  std::vector<void*> dst;
  for (const Tensor& t : outs) dst.push_back(t.data_ptr());
  void* fn = detail::fused_kernel(
      key,
      [&] {
        return outputs.empty() ? detail::fused_kernel_source(p, dtype, lay.layouts)
                               : detail::fused_multi_kernel_source(p, outputs, dtype, lay.layouts);
      },
      "fused_elementwise");
  if (fn != nullptr && outputs.empty()) {
    auto k = reinterpret_cast<detail::FusedKernelFn>(fn);
    parallel_for(0, n, grain,
                 [&](int64_t b, int64_t e) { k(lay.ptrs.data(), dst[0], b, e, cols); });
    return;
  }
  if (fn != nullptr) {
    auto k = reinterpret_cast<detail::FusedMultiKernelFn>(fn);
    parallel_for(0, n, grain,
                 [&](int64_t b, int64_t e) { k(lay.ptrs.data(), dst.data(), b, e, cols); });
    return;
  }
  auto run = [&]<class T>() {
    std::vector<const T*> in;
    for (const void* q : lay.ptrs) in.push_back(static_cast<const T*>(q));
    std::vector<T*> o;
    for (void* q : dst) o.push_back(static_cast<T*>(q));
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      detail::interpret<T>(p, in, lay.layouts, o[0], b, e, cols, outputs, o);
    });
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
}

// Training: the fused kernel forward, and a node whose backward differentiates the program
// (fused_autodiff.cpp): on the CPU one kernel computing every input's gradient in one pass,
// recomputing the chain from the saved inputs; with create_graph or on a GPU one backward
// program per input through fused_elementwise (differentiable in turn). An undefined tensor when
// the program has no backward (the caller then runs the ops one by one, each recording its own).
Tensor fused_with_backward(const FusedProgram& p, const std::string& program,
                           const std::vector<Tensor>& inputs) {
  std::vector<int> ks;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].requires_grad()) ks.push_back(static_cast<int>(k));
  std::optional<detail::FusedBackward> both = detail::fused_backward(p, ks);
  if (!both) return Tensor();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = fused_elementwise(inputs, program);
  }
  std::vector<autograd::SavedVariable> saved;
  for (const Tensor& t : inputs) saved.emplace_back(t, false);
  auto fn = [saved = std::move(saved), ks, back = std::move(*both),
             p = std::make_shared<const FusedProgram>(p)](autograd::BackwardCtx& c,
                                                          const TensorList& g) {
    TensorList r(saved.size());
    if (!g[0].defined()) return r;
    std::vector<Tensor> in;
    for (const autograd::SavedVariable& s : saved) in.push_back(c.unpack(s));
    in.push_back(g[0]);
    bool graph = false;  // create_graph: the gradients need history
    for (const Tensor& t : in) graph = graph || (t.requires_grad() && is_grad_enabled());
    if (graph || !in[0].device().is_cpu()) {
      for (int k : ks) {
        const std::optional<std::string> b = detail::fused_backward_program(*p, k);
        if (c.needs_input_grad(static_cast<size_t>(k)) && b && !b->empty())
          r[static_cast<size_t>(k)] = fused_elementwise(in, *b);
      }
      return r;
    }
    // The inputs this backward wants (autograd::grad may ask for fewer than require grad).
    std::vector<int> want;
    for (int k : ks)
      if (c.needs_input_grad(static_cast<size_t>(k))) want.push_back(k);
    std::optional<detail::FusedBackward> fewer;
    if (want.size() != ks.size()) {
      fewer = detail::fused_backward(*p, want);
      if (!fewer) want = ks;  // (cannot happen: a subset differentiates as the whole does)
    }
    const detail::FusedBackward& b = fewer ? *fewer : back;
    const Shape shape = detail::fused_output_shape(in, "fused_elementwise");
    const Layout lay = lay_out(in, shape);
    std::vector<Tensor> outs;
    std::vector<int> values;
    std::vector<size_t> which;
    for (size_t j = 0; j < want.size(); ++j) {
      if (b.outputs[j] < 0) continue;  // the result does not depend on this input
      outs.push_back(make_tensor(shape, in[0].dtype()));
      values.push_back(b.outputs[j]);
      which.push_back(static_cast<size_t>(want[j]));
    }
    if (outs.empty() || outs[0].numel() == 0) {
      for (size_t j = 0; j < outs.size(); ++j) r[which[j]] = outs[j];
      return r;
    }
    std::string key = "fused_backward|" + b.program.str() + "|";
    for (int v : values) key += std::to_string(v) + ",";
    key += "|" + std::string(dtype_name(in[0].dtype())) + "|" + lay.layouts;
    run_on_cpu(b.program, values, lay, key, outs);
    for (size_t j = 0; j < outs.size(); ++j) r[which[j]] = outs[j];
    return r;
  };
  auto node =
      std::make_shared<autograd::LambdaNode<decltype(fn)>>("fused_elementwise", std::move(fn));
  TensorList outs{out};
  autograd::connect(node, inputs, outs);
  return out;
}

}  // namespace

IGNIS_OP(fused_elementwise, "fused_elementwise(Tensor[] inputs, str program) -> Tensor",
         Tensor(const std::vector<Tensor>&, const std::string&), fused_elementwise,
         {.differentiable = true, .kind = "kernel", .stubs = {&detail::fused_elementwise_stub}});

Tensor fused_elementwise(const std::vector<Tensor>& inputs, const std::string& program) {
  IGNIS_DISPATCH(fused_elementwise, fused_elementwise, inputs, program);
  constexpr const char* op = "fused_elementwise";
  IGNIS_CHECK(!inputs.empty() && inputs.size() <= static_cast<size_t>(detail::kMaxFusedInputs), op,
              ": expected 1 to ", detail::kMaxFusedInputs, " inputs, got ", inputs.size());
  const std::shared_ptr<const FusedProgram> p =
      detail::parsed_program(program, static_cast<int>(inputs.size()));
  const Shape shape = detail::fused_output_shape(inputs, op);
  const DType dtype = inputs[0].dtype();
  // Training: the ops one by one, so that each records its own backward.
  bool needs_grad = false;
  for (const Tensor& t : inputs) needs_grad = needs_grad || t.requires_grad();
  const Device device = inputs[0].device();
  // A GPU runs the generated CUDA kernel unless the interpreter is asked for (it is CPU code).
  const bool on_device = device.is_cuda() &&
                         detail::fused_elementwise_stub.has_kernel(device.type) &&
                         g_backend.load() != kInterpreter;
  if (!(device.is_cpu() || on_device)) {
    if (device.is_meta()) return make_tensor(shape, dtype, device);
    return detail::run_fused_composite(*p, inputs);
  }
  if (needs_grad && is_grad_enabled()) {
    if (Tensor out = fused_with_backward(*p, program, inputs); out.defined()) return out;
    return detail::run_fused_composite(*p, inputs);
  }
  Tensor out = make_tensor(shape, dtype, device);
  if (out.numel() == 0) return out;
  const Layout lay = lay_out(inputs, shape);
  const std::string key =
      "fused_elementwise|" + program + "|" + std::string(dtype_name(dtype)) + "|" + lay.layouts;
  if (on_device) {
    try {
      detail::fused_elementwise_stub[device](out, lay.ptrs, lay.cols, key, [&] {
        return detail::fused_cuda_kernel_source(*p, dtype, lay.layouts);
      });
      return out;
    } catch (const Error& e) {
      IGNIS_CHECK(g_backend.load() != kCompiler, op, ": the compiler backend was asked for, but ",
                  e.what());
      {
        std::lock_guard<std::mutex> lock(g_why_mu);
        g_why = e.what();
      }
      return detail::run_fused_composite(*p, inputs);
    }
  }
  run_on_cpu(*p, {}, lay, key, {out});
  return out;
}

void set_fusion_backend(const std::string& backend) {
  if (backend == "auto")
    g_backend = kAuto;
  else if (backend == "compiler")
    g_backend = kCompiler;
  else if (backend == "interpreter")
    g_backend = kInterpreter;
  else
    throw Error("jit::set_fusion_backend: unknown backend '" + backend +
                "' (expected auto, compiler or interpreter)");
}

std::string fusion_backend() {
  switch (g_backend.load()) {
    case kCompiler: return "compiler";
    case kInterpreter: return "interpreter";
    default: break;
  }
  std::lock_guard<std::mutex> lock(g_why_mu);
  return g_why.empty() ? "auto" : "auto (interpreter: " + g_why + ")";
}

}  // namespace jit
}  // namespace ignis
