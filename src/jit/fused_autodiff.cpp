// Backward programs: reverse-mode differentiation of a fused elementwise program into another
// program (fused_program.h, fused_backward_program), so that a fused node's backward is also one
// pass over memory, generated and compiled like its forward, instead of its ops' backward one by
// one with every intermediate value saved.
//
// The backward program for input k recomputes the forward instructions it needs (nothing is
// saved but the inputs), then walks them in reverse, each instruction adding its operands'
// contributions to their adjoints: add and sub pass the gradient on (times alpha), mul and div
// by the product rule, the activations through their backward ops (threshold_backward for relu,
// from its output, as eager relu's backward; gelu_backward, silu_backward, leaky_relu_backward,
// softplus_backward and those of ignis/activation_ops.def from the input), and the floating
// unary ops through the backward formulas of
// ignis/float_unary_ops.def, the same text that eager autograd runs, evaluated here over a
// symbolic value that emits instructions. Dropout's derivative is dropout of the gradient on the
// same random stream (the mask drawn again from the same counters); where's is the gradient
// where its condition holds (or not), and comparisons pass none. Dead instructions are dropped.

#include <cmath>

#include "core/lru_cache.h"
#include "jit/fused_program.h"

namespace ignis::jit::detail {

namespace {

using Kind = FusedOperand::Kind;

FusedOperand number(double v) { return {Kind::Number, 0, v}; }

/// The instructions being written.
struct Builder {
  std::vector<FusedInstr> code;
  FusedOperand emit(FusedOp op, FusedOperand a, FusedOperand b = {}, double param = 0,
                    double param2 = 0, double param3 = 0) {
    code.push_back({op, a, b, param, param2, param3});
    return {Kind::Value, static_cast<int>(code.size()) - 1, 0};
  }
  FusedOperand where(FusedOperand c, FusedOperand a, FusedOperand b) {
    code.push_back({FusedOp::where, c, a, 0, 0, 0, b});
    return {Kind::Value, static_cast<int>(code.size()) - 1, 0};
  }
};

thread_local Builder* tls_builder = nullptr;

}  // namespace

// A symbolic value: the operators and functions the backward formulas of float_unary_ops.def
// use, each emitting an instruction into the builder.
namespace sym {

struct Sym {
  FusedOperand o;
};

Sym emit(FusedOp op, Sym a, FusedOperand b = {}, double param = 0) {
  return {tls_builder->emit(op, a.o, b, param)};
}
Sym operator*(Sym a, Sym b) { return emit(FusedOp::mul, a, b.o); }
Sym operator*(Sym a, double b) { return emit(FusedOp::mul, a, number(b)); }
Sym operator*(double a, Sym b) { return b * a; }
Sym operator/(Sym a, Sym b) { return emit(FusedOp::div, a, b.o); }
Sym operator/(Sym a, double b) { return emit(FusedOp::div, a, number(b)); }
Sym operator+(Sym a, Sym b) { return emit(FusedOp::add, a, b.o, 1); }
Sym operator+(Sym a, double b) { return emit(FusedOp::add, a, number(b), 1); }
Sym operator+(double a, Sym b) { return b + a; }
Sym operator-(Sym a) { return emit(FusedOp::neg, a); }
Sym operator-(Sym a, Sym b) { return emit(FusedOp::sub, a, b.o, 1); }
Sym operator-(Sym a, double b) { return emit(FusedOp::sub, a, number(b), 1); }
Sym operator-(double a, Sym b) { return -b + a; }
Sym neg(Sym a) { return -a; }
Sym pow(Sym a, int e) {
  Sym r = a;
  for (int i = 1; i < e; ++i) r = r * a;
  return r;
}
Sym tanh_backward(Sym g, Sym y) { return emit(FusedOp::tanh_backward, g, y.o); }
Sym sigmoid_backward(Sym g, Sym y) { return emit(FusedOp::sigmoid_backward, g, y.o); }
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad) \
  Sym name(Sym a) { return emit(FusedOp::name, a); }
#include "ignis/float_unary_ops.def"

}  // namespace sym

namespace {

/// The reverse sweep; false when an instruction has no derivative here.
bool differentiate(const FusedProgram& p, Builder& b,
                   std::vector<std::optional<FusedOperand>>& adj_in) {
  const size_t m = p.code.size();
  std::vector<std::optional<FusedOperand>> adj(m);
  adj[m - 1] = FusedOperand{Kind::Input, p.num_inputs, 0};  // the result's gradient
  auto add_to = [&](const FusedOperand& o, FusedOperand c) {
    if (o.kind == Kind::Number) return;
    std::optional<FusedOperand>& slot = o.kind == Kind::Input ? adj_in[static_cast<size_t>(o.index)]
                                                              : adj[static_cast<size_t>(o.index)];
    slot = slot ? b.emit(FusedOp::add, *slot, c, 1) : c;
  };
  for (size_t j = m; j-- > 0;) {
    if (!adj[j]) continue;
    const FusedInstr ins = p.code[j];
    const FusedOperand g = *adj[j], y{Kind::Value, static_cast<int>(j), 0};
    const bool tensor_b = ins.b.kind != Kind::Number;
    switch (ins.op) {
      case FusedOp::add:
      case FusedOp::sub:
        add_to(ins.a, g);
        if (tensor_b) {
          const double alpha = ins.op == FusedOp::add ? ins.param : -ins.param;
          add_to(ins.b, alpha == 1 ? g : b.emit(FusedOp::mul, g, number(alpha)));
        }
        break;
      case FusedOp::mul:
        add_to(ins.a, b.emit(FusedOp::mul, g, ins.b));
        if (tensor_b) add_to(ins.b, b.emit(FusedOp::mul, g, ins.a));
        break;
      case FusedOp::div:  // d/da = g / b, d/db = -(g a) / (b b)
        add_to(ins.a, b.emit(FusedOp::div, g, ins.b));
        if (tensor_b) {
          const FusedOperand ga = b.emit(FusedOp::mul, g, ins.a);
          const FusedOperand bb = b.emit(FusedOp::mul, ins.b, ins.b);
          add_to(ins.b, b.emit(FusedOp::neg, b.emit(FusedOp::div, ga, bb)));
        }
        break;
      case FusedOp::neg: add_to(ins.a, b.emit(FusedOp::neg, g)); break;
      case FusedOp::abs:
        add_to(ins.a, b.emit(FusedOp::mul, g, b.emit(FusedOp::sign, ins.a)));
        break;
      case FusedOp::sign: break;  // zero almost everywhere, as eager's
      case FusedOp::relu: add_to(ins.a, b.emit(FusedOp::threshold_backward, g, y, 0)); break;
      case FusedOp::gelu: add_to(ins.a, b.emit(FusedOp::gelu_backward, g, ins.a)); break;
      case FusedOp::gelu_tanh: add_to(ins.a, b.emit(FusedOp::gelu_tanh_backward, g, ins.a)); break;
      case FusedOp::silu: add_to(ins.a, b.emit(FusedOp::silu_backward, g, ins.a)); break;
      case FusedOp::leaky_relu:
        add_to(ins.a, b.emit(FusedOp::leaky_relu_backward, g, ins.a, ins.param));
        break;
      // The activations with a backward op of their own (ops/activation_ops.h): from the input.
      case FusedOp::softplus:
        add_to(ins.a, b.emit(FusedOp::softplus_backward, g, ins.a, ins.param, ins.param2));
        break;
      case FusedOp::elu:
        add_to(ins.a, b.emit(FusedOp::elu_backward, g, ins.a, ins.param, ins.param2, ins.param3));
        break;
      case FusedOp::hardtanh:
        add_to(ins.a, b.emit(FusedOp::hardtanh_backward, g, ins.a, ins.param, ins.param2));
        break;
      case FusedOp::hardswish: add_to(ins.a, b.emit(FusedOp::hardswish_backward, g, ins.a)); break;
      case FusedOp::hardsigmoid:
        add_to(ins.a, b.emit(FusedOp::hardsigmoid_backward, g, ins.a));
        break;
      case FusedOp::mish: add_to(ins.a, b.emit(FusedOp::mish_backward, g, ins.a)); break;
      case FusedOp::log_sigmoid:
        add_to(ins.a, b.emit(FusedOp::log_sigmoid_backward, g, ins.a));
        break;
      // clamp: g where min <= x <= max, as eager's (a missing bound is an infinite one)
      case FusedOp::clamp:
        add_to(ins.a, b.emit(FusedOp::clamp_backward, g, ins.a, ins.param, ins.param2));
        break;
      case FusedOp::clamp_min:
        add_to(ins.a, b.emit(FusedOp::clamp_backward, g, ins.a, ins.param, INFINITY));
        break;
      case FusedOp::clamp_max:
        add_to(ins.a, b.emit(FusedOp::clamp_backward, g, ins.a, -INFINITY, ins.param));
        break;
      case FusedOp::pow:  // g (x^(e-1) e), as eager's; nothing for e = 0 (a constant)
        if (ins.param != 0) {
          // x^1 is x (x ** 2's derivative reads x itself: no instruction that copies it)
          const FusedOperand d =
              ins.param == 2 ? ins.a : b.emit(FusedOp::pow, ins.a, {}, ins.param - 1);
          add_to(ins.a, b.emit(FusedOp::mul, g, b.emit(FusedOp::mul, d, number(ins.param))));
        }
        break;
      // The backward ops, for double backward: linear in their gradient operand.
      case FusedOp::threshold_backward:  // g' where y' > t: nothing flows to y'
        add_to(ins.a, b.emit(FusedOp::threshold_backward, g, ins.b, ins.param));
        break;
      case FusedOp::leaky_relu_backward:
        add_to(ins.a, b.emit(FusedOp::leaky_relu_backward, g, ins.b, ins.param));
        break;
      case FusedOp::hardtanh_backward:  // piecewise constant in x'
      case FusedOp::hardsigmoid_backward:
      case FusedOp::clamp_backward:
        add_to(ins.a, b.emit(ins.op, g, ins.b, ins.param, ins.param2));
        break;
      case FusedOp::hardswish_backward:  // d/dx' = g' / 3 strictly inside (-3, 3)
        add_to(ins.a, b.emit(FusedOp::hardswish_backward, g, ins.b));
        if (tensor_b) {
          const FusedOperand gg = b.emit(FusedOp::mul, g, ins.a);
          add_to(ins.b,
                 b.emit(FusedOp::hardsigmoid_backward, b.emit(FusedOp::mul, gg, number(2)), ins.b));
        }
        break;
      case FusedOp::tanh_backward:  // g' (1 - y'^2): d/dy' = -2 g' y'
        add_to(ins.a, b.emit(FusedOp::tanh_backward, g, ins.b));
        if (tensor_b) {
          const FusedOperand gy = b.emit(FusedOp::mul, b.emit(FusedOp::mul, g, ins.a), ins.b);
          add_to(ins.b, b.emit(FusedOp::mul, gy, number(-2)));
        }
        break;
      case FusedOp::sigmoid_backward:  // g' (1 - y') y': d/dy' = g' (1 - 2 y')
        add_to(ins.a, b.emit(FusedOp::sigmoid_backward, g, ins.b));
        if (tensor_b) {
          const FusedOperand t =
              b.emit(FusedOp::add, b.emit(FusedOp::mul, ins.b, number(-2)), number(1), 1);
          add_to(ins.b, b.emit(FusedOp::mul, b.emit(FusedOp::mul, g, ins.a), t));
        }
        break;
      // where(c, a, b): g to a where c holds, to b elsewhere; nothing to c (as eager's).
      case FusedOp::where:
        if (ins.b.kind != Kind::Number) add_to(ins.b, b.where(ins.a, g, number(0)));
        if (ins.c.kind != Kind::Number) add_to(ins.c, b.where(ins.a, number(0), g));
        break;
      // Comparisons and logical ops: no gradient (eager's are not differentiable).
      case FusedOp::eq:
      case FusedOp::ne:
      case FusedOp::lt:
      case FusedOp::le:
      case FusedOp::gt:
      case FusedOp::ge:
      case FusedOp::logical_and:
      case FusedOp::logical_or:
      case FusedOp::logical_not: break;
      // Linear in its operand: the same mask (stream and counters) on the gradient.
      case FusedOp::dropout: add_to(ins.a, b.emit(FusedOp::dropout, g, ins.b, ins.param)); break;
      case FusedOp::maximum:
      case FusedOp::minimum:
      case FusedOp::softplus_backward:
      case FusedOp::elu_backward:
      case FusedOp::mish_backward:
      case FusedOp::log_sigmoid_backward:
      case FusedOp::gelu_backward:
      case FusedOp::gelu_tanh_backward:
      case FusedOp::silu_backward:
        return false;
        // The formula of the .def over symbolic g (the gradient), x (the input), y (the output).
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad)                                           \
  case FusedOp::name:                                                                        \
    add_to(ins.a, [](sym::Sym g, [[maybe_unused]] sym::Sym x, [[maybe_unused]] sym::Sym y) { \
      return (grad).o;                                                                       \
    }(sym::Sym{g}, sym::Sym{ins.a}, sym::Sym{y}));                                           \
    break;
#include "ignis/float_unary_ops.def"
    }
  }
  return true;
}

/// Keeps the instructions the `results` depend on, in order, renumbered; `results` become the
/// new indices (-1 stays -1).
FusedProgram prune(const std::vector<FusedInstr>& code, std::vector<int>& results, int num_inputs) {
  std::vector<char> live(code.size(), 0);
  for (int r : results)
    if (r >= 0) live[static_cast<size_t>(r)] = 1;
  for (size_t j = code.size(); j-- > 0;) {
    if (!live[j]) continue;
    for_each_operand(code[j], [&](const FusedOperand& o) {
      if (o.kind == Kind::Value) live[static_cast<size_t>(o.index)] = 1;
    });
  }
  std::vector<int> renum(code.size(), -1);
  FusedProgram out;
  out.num_inputs = num_inputs;
  for (size_t j = 0; j < code.size(); ++j) {
    if (!live[j]) continue;
    FusedInstr ins = code[j];
    for_each_operand(ins, [&](FusedOperand& o) {
      if (o.kind == Kind::Value) o.index = renum[static_cast<size_t>(o.index)];
    });
    renum[j] = static_cast<int>(out.code.size());
    out.code.push_back(ins);
  }
  for (int& r : results)
    if (r >= 0) r = renum[static_cast<size_t>(r)];
  return out;
}

std::optional<FusedBackward> make_backward(const FusedProgram& p, const std::vector<int>& ks) {
  if (p.code.empty() || p.num_inputs + 1 > kMaxFusedInputs) return std::nullopt;
  for (int k : ks)
    if (k < 0 || k >= p.num_inputs) return std::nullopt;
  Builder b;
  b.code = p.code;
  Builder* const saved = tls_builder;
  tls_builder = &b;
  std::vector<std::optional<FusedOperand>> adj_in(static_cast<size_t>(p.num_inputs));
  const bool ok = differentiate(p, b, adj_in);
  tls_builder = saved;
  if (!ok) return std::nullopt;
  FusedBackward r;
  for (int k : ks) {
    const std::optional<FusedOperand>& a = adj_in[static_cast<size_t>(k)];
    if (!a) {
      r.outputs.push_back(-1);
      continue;
    }
    // The gradient as an instruction of its own when it is an input (the result's gradient).
    const FusedOperand v = a->kind == Kind::Value ? *a : b.emit(FusedOp::mul, *a, number(1));
    r.outputs.push_back(v.index);
  }
  r.program = prune(b.code, r.outputs, p.num_inputs + 1);
  if (r.program.code.size() > static_cast<size_t>(kMaxFusedInstrs)) return std::nullopt;
  return r;
}

}  // namespace

std::optional<FusedBackward> fused_backward(const FusedProgram& p, const std::vector<int>& ks) {
  // Bounded as the parsed programs are (fused_runtime.h).
  static auto* cache = new LruCache<std::optional<FusedBackward>>(kProgramCacheSize);
  std::string key = std::to_string(p.num_inputs) + "|";
  for (int k : ks) key += std::to_string(k) + ",";
  key += '|';
  key += p.str();
  return *cache->get(key, [&] { return make_backward(p, ks); });
}

std::optional<std::string> fused_backward_program(const FusedProgram& p, int k) {
  const std::optional<FusedBackward> b = fused_backward(p, {k});
  if (!b) return std::nullopt;
  // One root: the program ends with it (the text form's result is its last value).
  return b->outputs[0] < 0 ? std::string() : b->program.str();
}

}  // namespace ignis::jit::detail
