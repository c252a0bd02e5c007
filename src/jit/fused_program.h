// A fused elementwise program: the body of a `fused_elementwise` node, made by the fusion pass
// from a chain of elementwise ops and run in one pass over memory — by a kernel generated as C++
// from the shared functors (src/ops/functors.h) and compiled at run time, or, without a
// compiler, by an interpreter that runs the chain tile by tile through the same functors.
//
// Text form (what the graph stores as the node's `program` attribute), one instruction per op,
// separated by ';', each defining the value v<index>; the last is the result:
//   "mul(i0,i1);add(v0,i2,1);gelu(v1)"
// Operands: i<k> (the node's k-th input), v<j> (an earlier instruction's value), and for any
// operand of an op of two or three operands a number (a Scalar argument: `sub(1,v0)` is rsub,
// 1 - v0; `where(i1,-inf,i0)` is masked_fill). Then the op's
// parameters, up to three numbers (add and sub: alpha; leaky_relu: the negative slope; pow: the
// exponent; clamp and hardtanh: min, max; softplus: beta, threshold; elu: alpha, scale,
// input_scale).
//
// One op draws random numbers: dropout(v, d, p), training dropout of v with probability p
// (0 < p < 1) on the node's random stream d (a number 0, 1, ...). A node whose program has
// dropout reserves n counters per stream from the default generator when it runs (n: the output's
// elements), in stream order, as eager dropouts in the same order would; element k of stream d
// uses counter (base + d n + k), so its mask is eager dropout's (rand >= p, scaled by 1 / (1 - p);
// ignis/counter_rng.h). Its derivative is dropout of the gradient on the same stream: a backward
// program regenerates the mask from the same counters instead of saving it.
#pragma once

#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

namespace ignis::jit::detail {

// name in programs, functor (ignis::fn::...), operands, parameters
#define IGNIS_FUSED_BASE_OPS(X)  \
  X(add, Add, 2, 1)              \
  X(sub, Sub, 2, 1)              \
  X(mul, Mul, 2, 0)              \
  X(div, Div, 2, 0)              \
  X(maximum, Maximum, 2, 0)      \
  X(minimum, Minimum, 2, 0)      \
  X(neg, Neg, 1, 0)              \
  X(abs, Abs, 1, 0)              \
  X(relu, Relu, 1, 0)            \
  X(gelu, Gelu, 1, 0)            \
  X(gelu_tanh, GeluTanh, 1, 0)   \
  X(silu, Silu, 1, 0)            \
  X(leaky_relu, LeakyRelu, 1, 1) \
  X(pow, PowScalarAsEager, 1, 1) \
  X(sign, Sign, 1, 0)            \
  X(clamp, Clamp, 1, 2)          \
  X(clamp_min, ClampMin, 1, 1)   \
  X(clamp_max, ClampMax, 1, 1)   \
  X(softplus, Softplus, 1, 2)    \
  IGNIS_FUSED_MASK_OPS(X)        \
  IGNIS_FUSED_ACTIVATION_OPS(X)  \
  IGNIS_FUSED_BACKWARD_OPS(X)

// Masks: the comparisons and logical ops give 1 or 0 (eager's true and false) in the program's
// dtype; where(c, a, b) is a where c is nonzero, else b (masked_fill(x, m, v): where(m, v, x)).
// A bool input of the node is read as 1 or 0 (codegen.h: its layout letter in upper case).
#define IGNIS_FUSED_MASK_OPS(X)    \
  X(eq, Eq, 2, 0)                  \
  X(ne, Ne, 2, 0)                  \
  X(lt, Lt, 2, 0)                  \
  X(le, Le, 2, 0)                  \
  X(gt, Gt, 2, 0)                  \
  X(ge, Ge, 2, 0)                  \
  X(logical_and, LogicalAnd, 2, 0) \
  X(logical_or, LogicalOr, 2, 0)   \
  X(logical_not, LogicalNot, 1, 0) \
  X(where, Where, 3, 0)

// The activations of ignis/activation_ops.def (their functors: src/ops/activation_functors.h);
// selu, celu and relu6 are elu and hardtanh with fixed parameters.
#define IGNIS_FUSED_ACTIVATION_OPS(X) \
  X(elu, Elu, 1, 3)                   \
  X(hardtanh, Hardtanh, 1, 2)         \
  X(hardswish, Hardswish, 1, 0)       \
  X(hardsigmoid, Hardsigmoid, 1, 0)   \
  X(mish, Mish, 1, 0)                 \
  X(log_sigmoid, LogSigmoid, 1, 0)

// The activations' backward ops (PyTorch's *_backward, ops/unary.h), (g, saved) -> the input's
// gradient: what backward programs (fused_backward_program) are made of.
#define IGNIS_FUSED_BACKWARD_OPS(X)                  \
  X(threshold_backward, ThresholdBackward, 2, 1)     \
  X(tanh_backward, TanhBackward, 2, 0)               \
  X(sigmoid_backward, SigmoidBackward, 2, 0)         \
  X(leaky_relu_backward, LeakyReluBackward, 2, 1)    \
  X(gelu_backward, GeluBackward, 2, 0)               \
  X(gelu_tanh_backward, GeluTanhBackward, 2, 0)      \
  X(silu_backward, SiluBackward, 2, 0)               \
  X(softplus_backward, SoftplusBackward, 2, 2)       \
  X(elu_backward, EluBackward, 2, 3)                 \
  X(hardtanh_backward, HardtanhBackward, 2, 2)       \
  X(hardswish_backward, HardswishBackward, 2, 0)     \
  X(hardsigmoid_backward, HardsigmoidBackward, 2, 0) \
  X(mish_backward, MishBackward, 2, 0)               \
  X(log_sigmoid_backward, LogSigmoidBackward, 2, 0)  \
  X(clamp_backward, ClampBackward, 2, 2)

enum class FusedOp : uint8_t {
#define IGNIS_X(name, F, arity, params) name,
  IGNIS_FUSED_BASE_OPS(IGNIS_X)
#undef IGNIS_X
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad) name,
#include "ignis/float_unary_ops.def"
  dropout,  // (v, stream d, p): the one random op, no functor (see above)
};

struct FusedOpInfo {
  const char* name;
  const char* functor;  // ignis::fn::<functor>
  int arity;            // operands: 1, 2 or 3 (where); those of 2 or 3 may be numbers
  int params;           // numeric parameters after the operands
};
const FusedOpInfo& fused_op_info(FusedOp op);
/// The op called `name`, or false.
bool fused_op_by_name(std::string_view name, FusedOp& op);

struct FusedOperand {
  enum class Kind : uint8_t { Input, Value, Number };
  Kind kind = Kind::Input;
  int index = 0;      // Input: k; Value: j
  double number = 0;  // Number
};

struct FusedInstr {
  FusedOp op;
  FusedOperand a, b;  // b unused for unary ops (dropout's: its stream number)
  double param = 0;   // alpha, negative slope, exponent, min, ...: the first parameter
  double param2 = 0, param3 = 0;  // the second and third (clamp's max, elu's scale, ...)
  FusedOperand c = {};            // the third operand (where's b), unused by other ops
};

/// How many of an instruction's a, b, c are operands (dropout's b is its stream, not one).
int operand_count(const FusedInstr& in);
/// Operand k of an instruction: a, b, c for k = 0, 1, 2.
inline FusedOperand& operand_at(FusedInstr& in, int k) {
  return k == 0 ? in.a : k == 1 ? in.b : in.c;
}
inline const FusedOperand& operand_at(const FusedInstr& in, int k) {
  return k == 0 ? in.a : k == 1 ? in.b : in.c;
}
/// Calls f on each of the instruction's operands (FusedOperand&, const for a const one).
template <class Instr, class F>
void for_each_operand(Instr& in, const F& f) {
  for (int k = 0; k < operand_count(in); ++k) f(operand_at(in, k));
}

/// A parsed, validated program reading `num_inputs` tensors.
struct FusedProgram {
  std::vector<FusedInstr> code;
  int num_inputs = 0;
  /// The canonical text form (numbers printed exactly).
  std::string str() const;
  /// The random streams its dropouts use: 1 + the largest stream number, 0 without dropout.
  int random_streams() const;
  /// Whether the result depends on input k: an instruction it depends on reads it as an operand
  /// (even where the derivative is zero, as sign's).
  bool reads_input(int k) const;
};

/// Where a running program's dropouts draw: stream d's element k uses counter base + d n + k of
/// the generator seeded `seed`. A kernel reads it through the pointer after its inputs'.
struct FusedRng {
  uint64_t seed = 0, base = 0, n = 0;
};

/// Whether a program's text uses dropout (without parsing it).
bool fused_text_is_random(std::string_view text);

/// At most this many instructions and inputs (the text is untrusted when a graph is loaded).
constexpr int kMaxFusedInstrs = 256;
/// How many parsed programs, and how many backward derivations, the process keeps (least
/// recently used dropped first).
constexpr size_t kProgramCacheSize = 4096;
constexpr int kMaxFusedInputs = 64;

/// Parses and validates `text`: every op known, operand counts and kinds right, inputs below
/// num_inputs, values defined before use; throws ignis::Error naming the fault.
FusedProgram parse_fused_program(std::string_view text, int num_inputs);

/// The backward program of `p` for its input k: a program over p's inputs and the gradient of
/// p's result (input p.num_inputs) whose result is the gradient of input k (of the result's
/// broadcast shape; the autograd engine sums it to the input's), made by reverse-mode
/// differentiation of the instructions, with p's instructions first (recomputed, nothing saved)
/// and only those it needs. "" when the result does not depend on input k; nullopt when an
/// instruction has no derivative here (maximum, minimum; the backward ops of GELU, SiLU,
/// softplus, ELU, Mish and log-sigmoid, for their input) or the program would exceed the
/// limits. Cached per program and k.
std::optional<std::string> fused_backward_program(const FusedProgram& p, int k);

/// The backward of several inputs at once: one program (over p's inputs and the result's
/// gradient) whose values `outputs[j]` are the gradients of inputs ks[j] (-1: no dependence),
/// run by one multi-output kernel. nullopt as fused_backward_program. Cached.
struct FusedBackward {
  FusedProgram program;
  std::vector<int> outputs;
};
std::optional<FusedBackward> fused_backward(const FusedProgram& p, const std::vector<int>& ks);

/// `text` cut at every `sep` ("" gives one empty part): fused_reduction's chains of statistics
/// ("amax,sum") and their prologues (separated by '|').
std::vector<std::string> split_at(std::string_view text, char sep);
/// Whether `name` is one of fused_reduction's statistics: sum, mean, amax, amin.
bool is_fused_statistic(std::string_view name);

/// A number as C++ and as program text: exact ("%.17g"), inf and nan spelled out.
std::string format_number(double v);

}  // namespace ignis::jit::detail
