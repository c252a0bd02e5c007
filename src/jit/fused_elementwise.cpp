// The fused_elementwise op: a chain of elementwise ops (a fused program, see fused_program.h)
// run in one pass over memory. The fusion pass (fusion.cpp) makes these nodes; a graph file
// stores the program as the node's attribute.
//
// - Inference (no input requires grad, or grad mode off): a kernel generated as C++ from the
//   shared functors and compiled at run time (codegen.cpp), else the interpreter
//   (fused_runtime.h), which runs the program tile by tile through the same functors. Both run over
//   both cores.
// - Training: the chain runs op by op through the ops' front ends, so autograd records each
//   op's own backward: a fused node's backward is its composite's.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/autograd.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/fused_runtime.h"

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
  if ((needs_grad && is_grad_enabled()) || !(device.is_cpu() || on_device)) {
    if (device.is_meta()) return make_tensor(shape, dtype, device);
    return detail::run_fused_composite(*p, inputs);
  }
  Tensor out = make_tensor(shape, dtype, device);
  const int64_t n = out.numel();
  if (n == 0) return out;
  // Rows of the output's last dim when an input repeats along them (a bias row, a per-row
  // value); otherwise one row of everything, so that the loop is one flat vectorised pass.
  const int64_t last = shape.empty() ? 1 : shape.back();
  std::vector<Tensor> keep;
  std::string layouts;
  std::vector<const void*> ptrs;
  bool rows = false;
  for (const Tensor& t : inputs) {
    char l = 'f';
    Tensor c;
    if (t.numel() == 1) {
      l = 's';
      c = t.reshape({1}).contiguous();
    } else if (t.sizes().equals(out.sizes())) {
      c = t.contiguous();
    } else if (t.numel() == last && t.dim() >= 1 && t.size(-1) == last) {
      l = 'r';  // [..., 1, C]: the same row for every row
      c = t.reshape({last}).contiguous();
    } else if (t.dim() == static_cast<int64_t>(shape.size()) && t.size(-1) == 1 &&
               t.numel() * last == n) {
      l = 'c';  // [..., 1] against [..., C] with the same leading dims: one value per row
      c = t.reshape({n / last}).contiguous();
    } else {
      c = t.expand(shape).contiguous();  // any other broadcast: materialised
    }
    rows = rows || l == 'r' || l == 'c';
    layouts += l;
    ptrs.push_back(c.data_ptr());
    keep.push_back(std::move(c));
  }
  const int64_t cols = rows ? last : n;
  const std::string key =
      "fused_elementwise|" + program + "|" + std::string(dtype_name(dtype)) + "|" + layouts;
  if (on_device) {
    try {
      detail::fused_elementwise_stub[device](out, ptrs, cols, key, [&] {
        return detail::fused_cuda_kernel_source(*p, dtype, layouts);
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
  const int64_t grain = std::max<int64_t>(kGrainSize / 4, 1);
  if (auto fn = reinterpret_cast<detail::FusedKernelFn>(detail::fused_kernel(
          key, [&] { return detail::fused_kernel_source(*p, dtype, layouts); },
          "fused_elementwise"))) {
    void* dst = out.data_ptr();
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) { fn(ptrs.data(), dst, b, e, cols); });
    return out;
  }
  auto run = [&]<class T>() {
    std::vector<const T*> in;
    for (const void* q : ptrs) in.push_back(static_cast<const T*>(q));
    T* dst = out.data_ptr<T>();
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) {
      detail::interpret<T>(*p, in, layouts, dst, b, e, cols);
    });
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
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
