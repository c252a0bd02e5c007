// What the fused ops (fused_elementwise, fused_reduction) share at run time: the composite (a
// program's ops one by one through their front ends, for autograd), the interpreter (a program
// tile by tile through the functors, when no compiler is present), the parsed-program cache and
// the choice between the generated kernel and the interpreter.
#pragma once

#include <algorithm>
#include <cstdint>
#include <functional>
#include <memory>
#include <string>
#include <utility>
#include <vector>

#include "core/dispatch.h"
#include "ignis/counter_rng.h"
#include "ignis/tensor.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/row_reduce.h"
#include "ops/activation_functors.h"
#include "ops/functors.h"

namespace ignis::jit::detail {

/// The program's ops one by one through their front ends (autograd records each); `in` are the
/// program's inputs i0, i1, ...; `rng`: where its dropouts draw (programs with dropout).
Tensor run_fused_composite(const FusedProgram& p, const std::vector<Tensor>& in,
                           const FusedRng& rng = {});

/// The gradients of a fused elementwise program's inputs `want` (indices into its inputs):
/// `in` is the program's inputs followed by the gradient of its result; element k of the result
/// is input k's gradient in the result's shape (the engine sums it down to the input's), undefined
/// for inputs not in `want` or that the result does not depend on. On the CPU one multi-output
/// kernel (fused_backward); with history to record (create_graph) or on a GPU one backward
/// program per input, differentiable in turn. Throws when the program has no backward.
/// `addends` (indexed by input; undefined or absent: none): added to those inputs' gradients —
/// inside the CPU kernel where it writes the gradient at the output's shape and the addend has
/// that shape (one pass fewer), else by an add.
std::vector<Tensor> fused_input_grads(const FusedProgram& p, const std::vector<Tensor>& in,
                                      const std::vector<int>& want, const FusedRng& rng = {},
                                      const std::vector<Tensor>& addends = {});

/// Where a program's dropouts draw when it runs over `shape`: n = its elements counters per
/// stream, reserved from the default generator (as its eager dropouts, in order, would);
/// nothing for a program without dropout.
FusedRng draw_fused_rng(const FusedProgram& p, const Shape& shape);

/// fused_elementwise's value without autograd, its dropouts drawing from `rng` (the generated
/// kernel on the CPU or a GPU, the interpreter, or on other devices the composite).
Tensor run_fused_program(const FusedProgram& p, const std::string& text,
                         const std::vector<Tensor>& inputs, const Shape& shape,
                         const FusedRng& rng);

/// The broadcast shape of a fused op's inputs, after checking that they are defined, all float32
/// or all float64 but for bool masks (at least one not bool), and on one device (errors name
/// `op`, the input and what is wrong).
Shape fused_output_shape(const std::vector<Tensor>& inputs, const char* op);
/// The dtype a fused op computes in: its first input that is not a bool mask's (kBool if none).
DType fused_dtype(const std::vector<Tensor>& inputs);

/// The parsed program `text` over `num_inputs` inputs, from a process-wide cache (parsing
/// validates it; errors are thrown as by parse_fused_program).
std::shared_ptr<const FusedProgram> parsed_program(const std::string& text, int num_inputs);

/// The compiled kernel for `key` (its source made by `source()` on the first call), or null when
/// the interpreter is to run: the backend is "interpreter", or it is "auto" and compiling failed
/// (fusion_backend() then says why). With the "compiler" backend a failure is an error naming
/// `op`. The kernel's symbol is `ignis_fused_kernel`; its signature is the caller's business.
void* fused_kernel(const std::string& key, const std::function<std::string()>& source,
                   const char* op);

/// The name of a CPU kernel of `p` in fused_kernel's table: its one result (`outputs` empty) or
/// the values `outputs` (a multi-output kernel), on `dtype`, its inputs laid out as `layouts`.
std::string program_kernel_key(const FusedProgram& p, const std::vector<int>& outputs, DType dtype,
                               const std::string& layouts);

/// The fusion backend set by jit::set_fusion_backend, read without building its description:
/// 0 auto, 1 compiler, 2 interpreter.
int fusion_backend_mode();
/// Records why a fused kernel fell back to the interpreter or the ops under "auto" (what
/// jit::fusion_backend() reports).
void note_fusion_fallback(const std::string& why);

/// fused_elementwise on an accelerator: out[k] = the program over `inputs` (the data pointers of
/// contiguous tensors on out's device, laid out as codegen.h describes against rows of `cols`),
/// by the kernel of `source()` (fused_cuda_kernel_source), compiled at the first use of `key`
/// (the program, dtype and layouts) on the device's architecture; `rng`: where its dropouts draw
/// (passed in the kernel's argument). Throws when it cannot be compiled or loaded
/// (fused_elementwise then runs the program's ops).
using FusedDeviceFn = void (*)(const Tensor& out, const std::vector<const void*>& inputs,
                               int64_t cols, const std::string& key,
                               const std::function<std::string()>& source, const FusedRng& rng);
IGNIS_DECLARE_STUB(fused_elementwise_stub, FusedDeviceFn);

/// fused_reduction on an accelerator: each of the `rows` rows of `cols` elements of out (on its
/// device) by the kernel of `source()` (fused_cuda_reduction_source), compiled at the first use
/// of `key`; `scratch`: the kernel needs a row of scratch per block (a prologue's values);
/// `pro_rng`, `epi_rng`: where the prologue's and the epilogue's dropouts draw (the kernel's
/// argument carries both). Throws when it cannot be compiled or loaded (fused_reduction then
/// runs the ops).
using FusedReductionDeviceFn = void (*)(const Tensor& out, const std::vector<const void*>& inputs,
                                        int64_t rows, int64_t cols, double eps, bool scratch,
                                        const std::string& key,
                                        const std::function<std::string()>& source,
                                        const FusedRng& pro_rng, const FusedRng& epi_rng);
IGNIS_DECLARE_STUB(fused_reduction_stub, FusedReductionDeviceFn);

// ---- the interpreter: a program over tiles of a row segment, each op through its functor

constexpr int64_t kInterpTile = 512;

template <class T>
struct InterpOperand {
  const T* p;
  int64_t stride;  // 1, or 0: one element for the whole tile
};

// ignis_value<T>: a functor's result as T, a mask (a comparison's bool) as 1 or 0.
IGNIS_JIT_VALUE_CODE

// Each operand is contiguous (stride 1) or one value (stride 0); the loops take the strides as
// template arguments, so that each combination is a loop of its own, which the compiler
// vectorises (a runtime stride keeps it from doing so).
template <int SA, class T, class F>
void interp_loop1(const F& f, const T* __restrict a, T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ignis_value<T>(f(a[i * SA]));
}
template <class T, class F>
void interp_apply1(const F& f, InterpOperand<T> a, T* __restrict out, int64_t n) {
  if constexpr (std::is_same_v<F, fn::PowScalarAsEager>) {
    // The form of x^e picked once for the tile, not per element (as a generated kernel's
    // constant exponent lets the compiler do): the branches kept the loop from vectorising.
    fn::with_pow_form<true>(f.p, [&](auto g) { interp_apply1<T>(g, a, out, n); });
  } else if constexpr (requires(T x) { f.needs_exact(x); }) {
    for (int64_t i = 0; i < n; ++i) {
      const T x = a.p[i * a.stride];
      out[i] = f.needs_exact(x) ? f.exact(x) : f(x);
    }
  } else if (a.stride == 1) {
    interp_loop1<1>(f, a.p, out, n);
  } else {
    interp_loop1<0>(f, a.p, out, n);
  }
}
template <int SA, int SB, class T, class F>
void interp_loop2(const F& f, const T* __restrict a, const T* __restrict b, T* __restrict out,
                  int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = ignis_value<T>(f(a[i * SA], b[i * SB]));
}
template <class T, class F>
void interp_apply2(const F& f, InterpOperand<T> a, InterpOperand<T> b, T* __restrict out,
                   int64_t n) {
  switch (a.stride * 2 + b.stride) {
    case 3: return interp_loop2<1, 1>(f, a.p, b.p, out, n);
    case 2: return interp_loop2<1, 0>(f, a.p, b.p, out, n);
    case 1: return interp_loop2<0, 1>(f, a.p, b.p, out, n);
    default: return interp_loop2<0, 0>(f, a.p, b.p, out, n);
  }
}
template <int SA, int SB, int SC, class T, class F>
void interp_loop3(const F& f, const T* __restrict a, const T* __restrict b, const T* __restrict c,
                  T* __restrict out, int64_t n) {
  for (int64_t i = 0; i < n; ++i) out[i] = f(a[i * SA], b[i * SB], c[i * SC]);
}
template <class T, class F>
void interp_apply3(const F& f, InterpOperand<T> a, InterpOperand<T> b, InterpOperand<T> c,
                   T* __restrict out, int64_t n) {
  switch (a.stride * 4 + b.stride * 2 + c.stride) {
    case 7: return interp_loop3<1, 1, 1>(f, a.p, b.p, c.p, out, n);
    case 6: return interp_loop3<1, 1, 0>(f, a.p, b.p, c.p, out, n);
    case 5: return interp_loop3<1, 0, 1>(f, a.p, b.p, c.p, out, n);
    case 4: return interp_loop3<1, 0, 0>(f, a.p, b.p, c.p, out, n);
    case 3: return interp_loop3<0, 1, 1>(f, a.p, b.p, c.p, out, n);
    case 2: return interp_loop3<0, 1, 0>(f, a.p, b.p, c.p, out, n);
    case 1: return interp_loop3<0, 0, 1>(f, a.p, b.p, c.p, out, n);
    default: return interp_loop3<0, 0, 0>(f, a.p, b.p, c.p, out, n);
  }
}

/// What a fused kernel's inputs are for the interpreter, which reads every input as T: with
/// `interpreting`, each bool input (a layout letter in upper case, codegen.h) copied as 1 or 0
/// (the elements of `dense[i]`, the tensor it points into), its pointer then to the copy and its
/// letter in lower case; otherwise the pointers and layouts as given.
template <class T>
struct InterpreterInputs {
  std::vector<const void*> ptrs;
  std::string layouts;
  std::vector<std::vector<T>> copies;
  InterpreterInputs(std::vector<const void*> p, std::string l, const std::vector<Tensor>& dense,
                    bool interpreting)
      : ptrs(std::move(p)), layouts(std::move(l)) {
    for (size_t i = 0; i < layouts.size() && interpreting; ++i) {
      if (!is_bool_layout(layouts[i])) continue;
      const auto* m = static_cast<const unsigned char*>(ptrs[i]);
      const int64_t len = dense[i].numel();
      std::vector<T>& v = copies.emplace_back(static_cast<size_t>(len));
      for (int64_t k = 0; k < len; ++k) v[static_cast<size_t>(k)] = static_cast<T>(m[k] != 0);
      ptrs[i] = v.data();
      layouts[i] = float_layout(layouts[i]);
    }
  }
};

/// Runs the program over out[begin, end) (rows of `cols`), inputs laid out as `layouts` says
/// (codegen.h: 'f' full, 'r' a repeated row, 'c' one value per row, 's' one value). With
/// `outputs` (a multi-output kernel's), outs[j] receives the value outputs[j] instead. `rng`:
/// where dropouts draw (element k of stream d: counter rng.base + d rng.n + k).
/// A segment lies within one row, so an instruction whose operands are all one value there
/// (numbers, one value per row or in all, values computed from those: a norm's 1 / sqrt(var +
/// eps)) is computed once for the segment, as a generated kernel's compiler hoists it out of
/// its loop; the same functor on the same operands, so the same values.
template <class T>
void interpret(const FusedProgram& p, const std::vector<const T*>& in, const std::string& layouts,
               T* out, int64_t begin, int64_t end, int64_t cols,
               const std::vector<int>& outputs = {}, const std::vector<T*>& outs = {},
               const FusedRng& rng = {}) {
  const size_t m = p.code.size();
  // The values' tiles and the numbers, kept per thread (a fused reduction calls this per row);
  // `single[j]`: value j is one element for the segment (stride 0).
  thread_local std::vector<T> vals, numbers;
  thread_local std::vector<char> single;
  vals.resize(m * kInterpTile);
  numbers.resize(m * 3);
  single.resize(m);
  for (int64_t k = begin; k < end;) {
    const int64_t r = k / cols, c0 = k - r * cols;
    const int64_t seg = std::min({kInterpTile, end - k, cols - c0});
    for (size_t j = 0; j < m; ++j) {
      const FusedInstr& ins = p.code[j];
      auto operand = [&](const FusedOperand& o, size_t slot) -> InterpOperand<T> {
        switch (o.kind) {
          case FusedOperand::Kind::Input:
            switch (layouts[static_cast<size_t>(o.index)]) {
              case 'f': return {in[o.index] + k, 1};
              case 'r': return {in[o.index] + c0, 1};
              case 'c': return {in[o.index] + r, 0};
              default: return {in[o.index], 0};
            }
          case FusedOperand::Kind::Value:
            return {vals.data() + o.index * kInterpTile,
                    single[static_cast<size_t>(o.index)] ? 0 : 1};
          case FusedOperand::Kind::Number:
            numbers[j * 3 + slot] = static_cast<T>(o.number);
            return {numbers.data() + j * 3 + slot, 0};
        }
        return {nullptr, 0};
      };
      const int arity = fused_op_info(ins.op).arity;
      bool one = ins.op != FusedOp::dropout;  // dropout draws per element
      if (one) one = operand(ins.a, 0).stride == 0;
      if (one && arity >= 2) one = operand(operand_at(ins, 1), 1).stride == 0;
      if (one && arity >= 3) one = operand(operand_at(ins, 2), 2).stride == 0;
      single[j] = one;
      const int64_t len = one ? 1 : seg;
      const bool last = j + 1 == m && outputs.empty();
      T* dst = last && !one ? out + k : vals.data() + j * kInterpTile;
      const OpArgs args{ins.param, ins.param2, ins.param3};
      switch (ins.op) {
        case FusedOp::dropout: {
          const InterpOperand<T> a = operand(ins.a, 0);
          const uint64_t c0 =
              rng.base + static_cast<uint64_t>(ins.b.number) * rng.n + static_cast<uint64_t>(k);
          const T pr = static_cast<T>(ins.param), scale = static_cast<T>(1.0 / (1.0 - ins.param));
          for (int64_t i = 0; i < len; ++i) {
            dst[i] = a.p[i * a.stride] *
                     dropout_factor<T>(rng.seed, c0 + static_cast<uint64_t>(i), pr, scale);
          }
          break;
        }
#define IGNIS_X(name, F, arity, params)                                                           \
  case FusedOp::name:                                                                             \
    if constexpr (arity == 3) {                                                                   \
      interp_apply3<T>(fn::F{args}, operand(ins.a, 0), operand(ins.b, 1), operand(ins.c, 2), dst, \
                       len);                                                                      \
    } else if constexpr (arity == 2) {                                                            \
      interp_apply2<T>(fn::F{args}, operand(ins.a, 0), operand(ins.b, 1), dst, len);              \
    } else {                                                                                      \
      interp_apply1<T>(fn::F{args}, operand(ins.a, 0), dst, len);                                 \
    }                                                                                             \
    break;
          IGNIS_FUSED_BASE_OPS(IGNIS_X)
#undef IGNIS_X
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad)              \
  case FusedOp::name:                                           \
    interp_apply1<T>(fn::F{args}, operand(ins.a, 0), dst, len); \
    break;
#include "ignis/float_unary_ops.def"
      }
      if (last && one) std::fill(out + k, out + k + seg, dst[0]);
    }
    for (size_t j = 0; j < outputs.size(); ++j) {
      const size_t v = static_cast<size_t>(outputs[j]);
      const T* vp = vals.data() + v * kInterpTile;
      if (single[v])
        std::fill(outs[j] + k, outs[j] + k + seg, vp[0]);
      else
        std::copy(vp, vp + seg, outs[j] + k);
    }
    k += seg;
  }
}

/// `p` moved by `elements` elements of T (negative: back), computed as an address: a kernel writes
/// element k of its range at dst[k], so a buffer holding elements [b, e) alone is passed moved
/// back by b (the kernel never touches outside [b, e)).
template <class T>
T* moved_by(T* p, int64_t elements) {
  return reinterpret_cast<T*>(reinterpret_cast<uintptr_t>(p) +
                              static_cast<uintptr_t>(elements) * sizeof(T));
}

/// A program's CPU kernel over ranges of a chunk of rows (row_layout.h): its result (`outputs`
/// empty) or its values `outputs`; compiled (`fn`), or interpreted (`fn` null: `layouts` in
/// lower case, bool inputs read as copies in T: InterpreterInputs); its dropouts draw from
/// `rng`.
struct ChunkProgram {
  const FusedProgram* p = nullptr;
  std::vector<int> outputs;
  std::string layouts;
  void* fn = nullptr;
  FusedRng rng;
};

/// Runs `cp` over elements [b, e) of the chunk whose first element is `first` (its dropouts'
/// counters start there), reading `in` (the inputs' pointers moved to the chunk) and writing
/// element k of value j at outs[j][k].
template <class T>
void run_chunk(const ChunkProgram& cp, const std::vector<const void*>& in,
               const std::vector<T*>& outs, int64_t b, int64_t e, int64_t cols, int64_t first) {
  FusedRng rng = cp.rng;
  rng.base += static_cast<uint64_t>(first);
  if (cp.fn == nullptr) {
    thread_local std::vector<const T*> tin;
    tin.clear();
    for (const void* q : in) tin.push_back(static_cast<const T*>(q));
    interpret<T>(*cp.p, tin, cp.layouts, outs[0], b, e, cols, cp.outputs, outs, rng);
    return;
  }
  // A program with dropout reads its stream's (seed, base, n) through the pointer after the
  // inputs' (codegen.h).
  thread_local std::vector<const void*> ptrs;
  ptrs.assign(in.begin(), in.end());
  const uint64_t words[3] = {rng.seed, rng.base, rng.n};
  if (cp.p->random_streams() > 0) ptrs.push_back(words);
  if (cp.outputs.empty()) {
    reinterpret_cast<FusedKernelFn>(cp.fn)(ptrs.data(), outs[0], b, e, cols);
  } else {
    thread_local std::vector<void*> o;
    o.assign(outs.begin(), outs.end());
    reinterpret_cast<FusedMultiKernelFn>(cp.fn)(ptrs.data(), o.data(), b, e, cols);
  }
}

}  // namespace ignis::jit::detail
