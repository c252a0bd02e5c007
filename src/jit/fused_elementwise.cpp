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
// - Training dropout in a program: the node reserves its counters from the default generator
//   when it runs (draw_fused_rng) and every path (kernel, interpreter, composite, backward) draws
//   the mask from them, so nothing random is saved and the masks are eager's.
#include <atomic>
#include <cmath>
#include <cstdlib>
#include <mutex>

#include "autograd/node.h"
#include "core/lru_cache.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/autograd.h"
#include "ignis/generator.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/fused_runtime.h"
#include "jit/reduction_rows.h"
#include "jit/row_layout.h"
#include "ops/activation_ops.h"
#include "ops/random.h"
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
void note_fusion_fallback(const std::string& why) {
  std::lock_guard<std::mutex> lock(g_why_mu);
  g_why = why;
}
IGNIS_DEFINE_STUB(fused_reduction_stub, FusedReductionDeviceFn);

// ---- the composite: the ops' front ends, one by one (autograd records each)

/// Training dropout's factor for stream d of `rng`, over `shape` (the node's output): eager
/// dropout's mask (rand >= p, as the dtype, times 1 / (1 - p)) drawn from the counters the fused
/// kernel uses, so the composite gives its values.
Tensor dropout_factors(const Shape& shape, DType dtype, Device device, const FusedRng& rng,
                       int d, double p) {
  NoGradGuard no_grad;
  Tensor u = make_tensor(shape, dtype, device);
  if (u.numel() > 0) {
    RandomArgs args;
    args.seed = rng.seed;
    args.offset = rng.base + static_cast<uint64_t>(d) * rng.n;
    uniform_stub[device](u, args);
  }
  return (u >= p).to(dtype) * (1.0 / (1.0 - p));
}

Tensor run_fused_composite(const FusedProgram& p, const std::vector<Tensor>& in,
                           const FusedRng& rng) {
  std::vector<Tensor> v;
  v.reserve(p.code.size());
  const Shape shape = p.random_streams() > 0 ? fused_output_shape(in, "fused_elementwise") : Shape();
  // Every value in the program's dtype: a number as a 0-d tensor of it (as eager's rsub and
  // Scalar / Tensor wrap it), a bool input and a comparison's result as 1 or 0.
  const TensorOptions options = TensorOptions(fused_dtype(in)).device(in[0].device());
  auto number = [&](double x) { return full({}, x, options); };
  std::vector<Tensor> masks(in.size());  // bool inputs as the dtype, made on first use
  auto ref = [&](const FusedOperand& o) -> const Tensor& {
    if (o.kind == FusedOperand::Kind::Value) return v[o.index];
    const Tensor& t = in[o.index];
    if (t.dtype() != kBool) return t;
    Tensor& m = masks[static_cast<size_t>(o.index)];
    if (!m.defined()) m = t.to(options.dtype());
    return m;
  };
  auto tensor = [&](const FusedOperand& o) {
    return o.kind == FusedOperand::Kind::Number ? number(o.number) : ref(o);
  };
  for (const FusedInstr& ins : p.code) {
    Tensor number_a;
    if (ins.a.kind == FusedOperand::Kind::Number) number_a = number(ins.a.number);
    const Tensor& a = number_a.defined() ? number_a : ref(ins.a);
    const bool num = ins.b.kind == FusedOperand::Kind::Number;
    auto operand_b = [&] { return num ? full_like(a, ins.b.number) : ref(ins.b); };
    auto as_dtype = [&](const Tensor& t) { return t.to(options.dtype()); };
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
      case FusedOp::pow: r = pow(a, ins.param); break;
      case FusedOp::sign: r = sign(a); break;
      case FusedOp::clamp: r = clamp(a, ins.param, ins.param2); break;
      case FusedOp::clamp_min: r = clamp(a, ins.param, std::nullopt); break;
      case FusedOp::clamp_max: r = clamp(a, std::nullopt, ins.param); break;
      case FusedOp::softplus: r = softplus(a, ins.param, ins.param2); break;
      case FusedOp::elu: r = elu(a, ins.param, ins.param2, ins.param3); break;
      case FusedOp::hardtanh: r = hardtanh(a, ins.param, ins.param2); break;
      case FusedOp::hardswish: r = hardswish(a); break;
      case FusedOp::hardsigmoid: r = hardsigmoid(a); break;
      case FusedOp::mish: r = mish(a); break;
      case FusedOp::log_sigmoid: r = log_sigmoid(a); break;
      case FusedOp::eq: r = as_dtype(num ? eq(a, ins.b.number) : eq(a, ref(ins.b))); break;
      case FusedOp::ne: r = as_dtype(num ? ne(a, ins.b.number) : ne(a, ref(ins.b))); break;
      case FusedOp::lt: r = as_dtype(num ? lt(a, ins.b.number) : lt(a, ref(ins.b))); break;
      case FusedOp::le: r = as_dtype(num ? le(a, ins.b.number) : le(a, ref(ins.b))); break;
      case FusedOp::gt: r = as_dtype(num ? gt(a, ins.b.number) : gt(a, ref(ins.b))); break;
      case FusedOp::ge: r = as_dtype(num ? ge(a, ins.b.number) : ge(a, ref(ins.b))); break;
      case FusedOp::logical_and: r = as_dtype(logical_and(a, tensor(ins.b))); break;
      case FusedOp::logical_or: r = as_dtype(logical_or(a, tensor(ins.b))); break;
      case FusedOp::logical_not: r = as_dtype(logical_not(a)); break;
      case FusedOp::where: r = where(ne(a, 0), tensor(ins.b), tensor(ins.c)); break;
      case FusedOp::dropout:
        r = a * dropout_factors(shape, a.dtype(), a.device(), rng,
                                static_cast<int>(ins.b.number), ins.param);
        break;
      // The backward ops (backward programs); a number as their second operand stands for a
      // tensor of that value.
      case FusedOp::threshold_backward: r = threshold_backward(a, operand_b(), ins.param); break;
      case FusedOp::tanh_backward: r = tanh_backward(a, operand_b()); break;
      case FusedOp::sigmoid_backward: r = sigmoid_backward(a, operand_b()); break;
      case FusedOp::leaky_relu_backward: r = leaky_relu_backward(a, operand_b(), ins.param); break;
      case FusedOp::gelu_backward: r = gelu_backward(a, operand_b(), false); break;
      case FusedOp::gelu_tanh_backward: r = gelu_backward(a, operand_b(), true); break;
      case FusedOp::silu_backward: r = silu_backward(a, operand_b()); break;
      case FusedOp::softplus_backward:
        r = softplus_backward(a, operand_b(), ins.param, ins.param2);
        break;
      case FusedOp::elu_backward:
        r = elu_backward(a, operand_b(), ins.param, ins.param2, ins.param3);
        break;
      case FusedOp::hardtanh_backward:
        r = hardtanh_backward(a, operand_b(), ins.param, ins.param2);
        break;
      case FusedOp::hardswish_backward: r = hardswish_backward(a, operand_b()); break;
      case FusedOp::hardsigmoid_backward: r = hardsigmoid_backward(a, operand_b()); break;
      case FusedOp::mish_backward: r = mish_backward(a, operand_b()); break;
      case FusedOp::log_sigmoid_backward: r = log_sigmoid_backward(a, operand_b()); break;
      case FusedOp::clamp_backward:
        r = clamp_backward(a, operand_b(), ins.param, ins.param2);
        break;
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
    note_fusion_fallback(why);
  }
  std::lock_guard<std::mutex> lock(t.mu);
  t.kernels[key] = fn;
  return fn;
}

DType fused_dtype(const std::vector<Tensor>& inputs) {
  for (const Tensor& t : inputs)
    if (t.defined() && t.dtype() != kBool) return t.dtype();
  return kBool;
}

Shape fused_output_shape(const std::vector<Tensor>& inputs, const char* op) {
  for (size_t i = 0; i < inputs.size(); ++i)
    IGNIS_CHECK(inputs[i].defined(), op, ": input ", i, " is undefined");
  size_t first = 0;  // the input giving the dtype (fused_dtype's)
  while (first < inputs.size() && inputs[first].dtype() == kBool) ++first;
  IGNIS_CHECK(first < inputs.size(), op,
              ": every input is bool; a program needs a float32 or float64 one");
  const DType dtype = inputs[first].dtype();
  Shape shape;
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    IGNIS_CHECK(
        (t.dtype() == dtype || t.dtype() == kBool) && (dtype == kFloat32 || dtype == kFloat64), op,
        ": inputs must all be float32 or all float64 (or bool masks); input ", first, " is ", dtype,
        ", input ", i, " is ", t.dtype());
    IGNIS_CHECK(t.device() == inputs[0].device(), op, ": input ", i, " is on ", t.device(),
                ", input 0 on ", inputs[0].device());
    shape = broadcast_shapes(shape, t.sizes());
  }
  return shape;
}

std::shared_ptr<const FusedProgram> parsed_program(const std::string& text, int num_inputs) {
  // Bounded: a process loading many graphs keeps the most recently used programs.
  static auto* cache = new LruCache<FusedProgram>(kProgramCacheSize);
  return cache->get(std::to_string(num_inputs) + "|" + text,
                    [&] { return parse_fused_program(text, num_inputs); });
}

}  // namespace detail

namespace {

/// The inputs as a kernel reads them (row_layout.h): rows of the output's last dim when an input
/// repeats along them (a bias row, a value per row, a block of rows); otherwise one row of
/// everything, so that the loop is one flat vectorised pass. `blocks`: the CPU reads blocks a
/// chunk at a time (a GPU's kernel gets them materialised).
detail::RowLayout lay_out(const std::vector<Tensor>& inputs, const Shape& shape, bool blocks) {
  return detail::lay_out_rows(inputs, shape, 1, blocks, -1, true);
}

/// The program over the CPU's cores into `outs` (contiguous): its result into outs[0] (`outputs`
/// empty), or its values `outputs[j]` into outs[j]; by the generated kernel of `key`, else the
/// interpreter. `sums` (a multi-output kernel's; empty: all 'f') says per out what it receives:
/// 'f' the values (the output's shape), or their sums (sum_outputs): 'r' over the rows (one
/// row of `lay.cols`), 'c' along each row (one value per row), 's' over everything (one value).
void run_on_cpu(const FusedProgram& p, const std::vector<int>& outputs,
                const detail::RowLayout& lay, const std::string& key,
                const std::vector<Tensor>& outs, const detail::FusedRng& rng = {},
                const std::string& sums = "");

/// run_on_cpu's multi-output kernel with some outputs summed (`sums`, as run_on_cpu's): blocks
/// (of whole rows when a sum is per row or per column), each run by `block(b, e, dst)` with the
/// summed outputs' values in a scratch of the block's size, then summed — per block into a
/// partial row or value, the partials added in block order; a row's sum within its block — so
/// the result does not depend on the number of threads. `n` elements in rows of `cols`.
template <class T, class F>
void sum_outputs(const std::vector<Tensor>& outs, const std::string& sums, int64_t n, int64_t cols,
                 const F& block) {
  const bool rows = sums.find_first_of("rc") != std::string::npos;
  const int64_t span = rows ? std::max<int64_t>(kGrainSize / 4 / cols, 1) * cols
                            : std::max<int64_t>(kGrainSize / 4, 1);
  const int64_t blocks = (n + span - 1) / span;
  std::vector<size_t> sum_at(outs.size(), 0);  // index among the summed outputs
  size_t ns = 0;
  for (size_t j = 0; j < outs.size(); ++j)
    if (sums[j] != 'f') sum_at[j] = ns++;
  // Per summed output and block: a partial row ('r') or value ('s'); 'c' adds its rows' sums.
  // Scratch and partials come from the caching allocator (tensors), so a training loop's steps
  // reuse them instead of faulting in fresh pages.
  auto width = [&](size_t j) -> int64_t { return sums[j] == 'r' ? cols : sums[j] == 's'; };
  std::vector<int64_t> part_at(outs.size(), 0);
  int64_t part_len = 0;
  for (size_t j = 0; j < outs.size(); ++j) {
    part_at[j] = part_len;
    if (sums[j] != 'f') part_len += blocks * width(j);
  }
  const DType dtype = outs[0].dtype();
  const Tensor partial_t = make_tensor({std::max<int64_t>(part_len, 1)}, dtype);
  T* const partial = partial_t.data_ptr<T>();
  std::fill(partial, partial + part_len, T(0));
  for (size_t j = 0; j < outs.size(); ++j)  // a row's sum is added to its value
    if (sums[j] == 'c') std::fill_n(outs[j].data_ptr<T>(), outs[j].numel(), T(0));
  parallel_for(0, blocks, 1, [&](int64_t b0, int64_t b1) {
    const Tensor scratch_t = make_tensor({static_cast<int64_t>(ns) * span}, dtype);
    T* const scratch = scratch_t.data_ptr<T>();
    std::vector<void*> dst(outs.size());
    for (int64_t blk = b0; blk < b1; ++blk) {
      const int64_t b = blk * span, e = std::min(n, b + span);
      for (size_t j = 0; j < outs.size(); ++j) {
        // A summed output's values go to the scratch, moved back by b (detail::moved_by).
        dst[j] =
            sums[j] != 'f' ? detail::moved_by(scratch + sum_at[j] * span, -b) : outs[j].data_ptr();
      }
      block(b, e, dst);
      for (size_t j = 0; j < outs.size(); ++j) {
        if (sums[j] == 'f') continue;
        // 'r' and 'c': whole rows (b and e multiples of cols).
        T* part = sums[j] == 'c' ? outs[j].data_ptr<T>() + b / cols
                                 : partial + part_at[j] + blk * width(j);
        detail::add_block_sums(sums[j], scratch + sum_at[j] * span, e - b, cols, part);
      }
    }
  });
  for (size_t j = 0; j < outs.size(); ++j) {
    if (sums[j] != 'r' && sums[j] != 's') continue;
    const int64_t w = width(j);
    T* o = outs[j].data_ptr<T>();
    std::fill(o, o + w, T(0));
    for (int64_t blk = 0; blk < blocks; ++blk)
      for (int64_t c = 0; c < w; ++c) o[c] += partial[part_at[j] + blk * w + c];
  }
}

void run_on_cpu(const FusedProgram& p, const std::vector<int>& outputs,
                const detail::RowLayout& lay, const std::string& key,
                const std::vector<Tensor>& outs, const detail::FusedRng& rng,
                const std::string& sums_) {
  const int64_t n = lay.n;
  const std::string sums = sums_.empty() ? std::string(outs.size(), 'f') : sums_;
  const bool any_summed = sums.find_first_not_of('f') != std::string::npos;
  IGNIS_CHECK(!any_summed || !outputs.empty(),
              "fused_elementwise: summed outputs need a multi-output kernel");
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
  if (fn != nullptr && outputs.empty() && lay.chunk >= lay.rows) {
    // The common case, one kernel call per part: no chunks (nor their pointers) to prepare.
    const uint64_t words[3] = {rng.seed, rng.base, rng.n};
    std::vector<const void*> ptrs = lay.ptrs;
    if (p.random_streams() > 0) ptrs.push_back(words);
    auto k = reinterpret_cast<detail::FusedKernelFn>(fn);
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) { k(ptrs.data(), dst[0], b, e, cols); });
    return;
  }
  auto run = [&]<class T>() {
    const detail::InterpreterInputs<T> interp(lay.ptrs, lay.layouts, lay.keep, fn == nullptr);
    const detail::ChunkProgram cp{&p, outputs, interp.layouts, fn, rng};
    // The program over elements [b, e) into d (element k at d[j][k]): a chunk of rows at a time
    // (row_layout.h; one piece when the inputs need no chunks), the inputs' pointers and d moved
    // to the chunk.
    auto block = [&](int64_t b, int64_t e, const std::vector<void*>& d) {
      std::vector<const void*> in;
      std::vector<T*> dc(d.size());
      lay.for_each_chunk(b, e, cols, [&](int64_t r0, int64_t first, int64_t cb, int64_t ce) {
        lay.at(interp.ptrs, r0, fn != nullptr ? 0 : sizeof(T), in);
        for (size_t j = 0; j < d.size(); ++j)
          dc[j] = detail::moved_by(static_cast<T*>(d[j]), first);
        detail::run_chunk<T>(cp, in, dc, cb - first, ce - first, cols, first);
      });
    };
    if (any_summed) {
      sum_outputs<T>(outs, sums, n, cols, block);
      return;
    }
    parallel_for(0, n, grain, [&](int64_t b, int64_t e) { block(b, e, dst); });
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
}

bool runs_on_device(Device device) {
  // A GPU runs the generated CUDA kernel unless the interpreter is asked for (it is CPU code).
  return device.is_cuda() && detail::fused_elementwise_stub.has_kernel(device.type) &&
         g_backend.load() != kInterpreter;
}

// The program's value without autograd: the generated kernel (CPU or GPU), the interpreter, or
// on other devices the composite.
Tensor run_program(const FusedProgram& p, const std::string& program,
                   const std::vector<Tensor>& inputs, const Shape& shape,
                   const detail::FusedRng& rng) {
  constexpr const char* op = "fused_elementwise";
  const DType dtype = detail::fused_dtype(inputs);
  const Device device = inputs[0].device();
  const bool on_device = runs_on_device(device);
  if (!(device.is_cpu() || on_device)) {
    if (device.is_meta()) return make_tensor(shape, dtype, device);
    NoGradGuard no_grad;
    return detail::run_fused_composite(p, inputs, rng);
  }
  Tensor out = make_tensor(shape, dtype, device);
  if (out.numel() == 0) return out;
  const detail::RowLayout lay = lay_out(inputs, shape, !on_device);
  const std::string key =
      "fused_elementwise|" + program + "|" + std::string(dtype_name(dtype)) + "|" + lay.layouts;
  if (on_device) {
    try {
      detail::fused_elementwise_stub[device](
          out, lay.ptrs, lay.cols, key,
          [&] { return detail::fused_cuda_kernel_source(p, dtype, lay.layouts); }, rng);
      return out;
    } catch (const Error& e) {
      IGNIS_CHECK(g_backend.load() != kCompiler, op, ": the compiler backend was asked for, but ",
                  e.what());
      detail::note_fusion_fallback(e.what());
      NoGradGuard no_grad;
      return detail::run_fused_composite(p, inputs, rng);
    }
  }
  run_on_cpu(p, {}, lay, key, {out}, rng);
  return out;
}

// A backward program over `in` (the forward's inputs and the result's gradient), differentiable
// (with create_graph): through fused_elementwise; a program with dropout, whose mask must be the
// forward's, draws from the forward's counters: the fused kernel (`graph` false) or its ops one by
// one.
Tensor run_backward_program(const std::string& text, const std::vector<Tensor>& in,
                            const detail::FusedRng& rng, bool graph) {
  if (!detail::fused_text_is_random(text)) return fused_elementwise(in, text);
  const std::shared_ptr<const FusedProgram> b =
      detail::parsed_program(text, static_cast<int>(in.size()));
  if (graph) return detail::run_fused_composite(*b, in, rng);
  return run_program(*b, text, in, detail::fused_output_shape(in, "fused_elementwise"), rng);
}

}  // namespace

namespace detail {

std::string program_kernel_key(const FusedProgram& p, const std::vector<int>& outputs, DType dtype,
                               const std::string& layouts) {
  std::string key = outputs.empty() ? "fused_elementwise|" + p.str() : "fused_backward|" + p.str();
  key += '|';
  for (int v : outputs) key += std::to_string(v) + ",";
  key += '|';
  key += dtype_name(dtype);
  key += '|';
  key += layouts;
  return key;
}

FusedRng draw_fused_rng(const FusedProgram& p, const Shape& shape) {
  FusedRng rng;
  const int streams = p.random_streams();
  if (streams == 0) return rng;
  Generator& g = default_generator();
  rng.n = static_cast<uint64_t>(shape_numel(shape, "fused_elementwise"));
  rng.base = g.reserve(rng.n * static_cast<uint64_t>(streams));
  rng.seed = g.seed();
  return rng;
}

Tensor run_fused_program(const FusedProgram& p, const std::string& text,
                         const std::vector<Tensor>& inputs, const Shape& shape,
                         const FusedRng& rng) {
  return run_program(p, text, inputs, shape, rng);
}

namespace {
/// `addends` (one per input, undefined for none): tensors the kernel adds to those inputs'
/// gradients where it writes them at the output's shape; `added[k]` says which it added.
TensorList input_grads(const FusedProgram& p, const std::vector<Tensor>& in,
                       const std::vector<int>& want, const FusedRng& rng,
                       const std::vector<Tensor>& addends, std::vector<char>& added) {
  TensorList r(in.size() - 1);
  bool graph = false;  // create_graph: the gradients need history
  for (const Tensor& t : in) graph = graph || (t.requires_grad() && is_grad_enabled());
  if (graph || !in[0].device().is_cpu()) {
    for (int k : want) {
      const std::optional<std::string> b = fused_backward_program(p, k);
      if (b && !b->empty()) r[static_cast<size_t>(k)] = run_backward_program(*b, in, rng, graph);
    }
    return r;
  }
  const std::optional<FusedBackward> b = fused_backward(p, want);
  IGNIS_CHECK(b.has_value(), "fused_elementwise: the program has no backward");
  const Shape shape = fused_output_shape(in, "fused_elementwise");
  // An addend of the output's shape, for an input of that shape (whose gradient the kernel
  // writes at the output's shape), joins the kernel as an input added to that gradient (a fused
  // reduction's two gradients of one input: one pass fewer over the rows).
  FusedProgram prog = b->program;
  std::vector<Tensor> kin = in;
  std::vector<int> addend_at(in.size(), -1);  // per input: its addend's input index
  for (size_t j = 0; j < want.size(); ++j) {
    const size_t k = static_cast<size_t>(want[j]);
    if (b->outputs[j] >= 0 && k < addends.size() && addends[k].defined() &&
        in[k].sizes().equals(shape) && addends[k].sizes().equals(shape) &&
        addends[k].dtype() == fused_dtype(in) && addends[k].device().is_cpu() &&
        prog.code.size() < static_cast<size_t>(kMaxFusedInstrs)) {
      addend_at[k] = static_cast<int>(kin.size());
      kin.push_back(addends[k]);
      prog.code.push_back({FusedOp::add,
                           {FusedOperand::Kind::Value, b->outputs[j], 0},
                           {FusedOperand::Kind::Input, addend_at[k], 0},
                           1});
      added[k] = 1;
    }
  }
  prog.num_inputs = static_cast<int>(kin.size());
  const detail::RowLayout lay = lay_out(kin, shape, true);
  std::vector<Tensor> outs;
  std::vector<int> values;
  std::vector<size_t> which;
  std::string sums;
  int appended = static_cast<int>(b->program.code.size());  // the adds, in order
  for (size_t j = 0; j < want.size(); ++j) {
    if (b->outputs[j] < 0) continue;  // the result does not depend on this input
    const size_t k = static_cast<size_t>(want[j]);
    // An input repeated along the output as it is (a weight or bias row 'r', a value per row
    // 'c', one value 's') gets its gradient summed by the kernel's caller, at its own size;
    // every other input (a block, a broadcast materialised) at the output's: the engine sums it.
    const char l = lay.native_letter(k);
    const bool summed = (l == 'r' || l == 'c' || l == 's') && in[k].numel() < lay.n &&
                        lay.keep[k].numel() == in[k].numel();
    outs.push_back(make_tensor(summed ? in[k].sizes().shape() : shape, fused_dtype(in)));
    sums += summed ? l : 'f';
    values.push_back(addend_at[k] >= 0 ? appended++ : b->outputs[j]);
    which.push_back(k);
  }
  if (!outs.empty() && lay.n > 0) {
    run_on_cpu(prog, values, lay, program_kernel_key(prog, values, fused_dtype(in), lay.layouts),
               outs, rng, sums);
  } else {
    for (Tensor& t : outs) t.zero_();  // no elements: a summed gradient sums nothing
  }
  for (size_t j = 0; j < outs.size(); ++j) r[which[j]] = outs[j];
  return r;
}
}  // namespace

TensorList fused_input_grads(const FusedProgram& p, const std::vector<Tensor>& in,
                             const std::vector<int>& want, const FusedRng& rng,
                             const std::vector<Tensor>& addends) {
  std::vector<char> added(in.size(), 0);
  TensorList r = input_grads(p, in, want, rng, addends, added);
  // An input the result depends on only through ops of zero derivative (sign, x ** 0 in a
  // second derivative) gets zeros, as eager's backward gives: undefined would mean "not used".
  for (int k : want) {
    Tensor& g = r[static_cast<size_t>(k)];
    const Tensor& x = in[static_cast<size_t>(k)];
    if (!g.defined() && p.reads_input(k))
      g = zeros(x.sizes(), TensorOptions(x.dtype()).device(x.device()));
    // The addends the kernel did not take (history to record, a GPU, a gradient summed to the
    // input's shape): added here.
    const size_t ku = static_cast<size_t>(k);
    if (ku < addends.size() && addends[ku].defined() && !added[ku])
      g = g.defined() ? g + addends[ku] : addends[ku];
  }
  return r;
}

}  // namespace detail

namespace {

// Training: the fused kernel forward, and a node whose backward differentiates the program
// (fused_autodiff.cpp, detail::fused_input_grads): on the CPU one kernel computing every input's
// gradient in one pass, recomputing the chain from the saved inputs; with create_graph or on a
// GPU one backward program per input (differentiable in turn). Dropout's mask is not saved: the
// backward draws it again from the forward's counters (`rng`). An undefined tensor when the
// program has no backward (the caller then runs the ops one by one, each recording its own).
Tensor fused_with_backward(const FusedProgram& p, const std::string& program,
                           const std::vector<Tensor>& inputs, const Shape& shape,
                           const detail::FusedRng& rng) {
  std::vector<int> ks;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (inputs[k].requires_grad()) ks.push_back(static_cast<int>(k));
  if (!detail::fused_backward(p, ks)) return Tensor();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = run_program(p, program, inputs, shape, rng);
  }
  std::vector<autograd::SavedVariable> saved;
  for (const Tensor& t : inputs) saved.emplace_back(t, false);
  auto fn = [saved = std::move(saved), ks, rng, p = std::make_shared<const FusedProgram>(p)](
                autograd::BackwardCtx& c, const TensorList& g) {
    if (!g[0].defined()) return TensorList(saved.size());
    std::vector<Tensor> in;
    for (const autograd::SavedVariable& s : saved) in.push_back(c.unpack(s));
    in.push_back(g[0]);
    // The inputs this backward wants (autograd::grad may ask for fewer than require grad).
    std::vector<int> want;
    for (int k : ks)
      if (c.needs_input_grad(static_cast<size_t>(k))) want.push_back(k);
    return detail::fused_input_grads(*p, in, want, rng);
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
  const Device device = inputs[0].device();
  // Dropout's counters, reserved before anything runs (a meta tensor draws none).
  const detail::FusedRng rng =
      device.is_meta() ? detail::FusedRng{} : detail::draw_fused_rng(*p, shape);
  bool needs_grad = false;
  for (const Tensor& t : inputs) needs_grad = needs_grad || t.requires_grad();
  if (needs_grad && is_grad_enabled() && !device.is_meta()) {
    // Training: the ops one by one (each recording its own backward) where there is no fused
    // backward, or on devices without fused kernels.
    if (device.is_cpu() || runs_on_device(device)) {
      if (Tensor out = fused_with_backward(*p, program, inputs, shape, rng); out.defined())
        return out;
    }
    return detail::run_fused_composite(*p, inputs, rng);
  }
  return run_program(*p, program, inputs, shape, rng);
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
