// The fusion passes: chains of elementwise ops become fused_elementwise nodes whose program
// (fused_program.h) runs in one pass over memory (fused_elementwise.cpp); a layer_norm, softmax or
// log_softmax with the elementwise ops around it becomes a fused_reduction node
// (fused_reduction.cpp).
#include <algorithm>
#include <cfloat>
#include <cmath>
#include <map>
#include <optional>

#include "ignis/error.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "jit/passes.h"
#include "ops/activation_ops.h"

namespace ignis::jit {

namespace {

using detail::FusedInstr;
using detail::FusedOp;
using detail::FusedOperand;

/// A node as a program instruction: its op, its operands (value ids, or -1 and a number: rsub's
/// first, a Scalar argument, masked_fill's value) and the parameters; `dtype`, the float dtype
/// it computes in (its output's; a comparison's operands'; kBool: any, its operands all bool).
struct Candidate {
  FusedOp op;
  int v[3] = {-1, -1, -1};
  double number[3] = {0, 0, 0};
  double param = 0, param2 = 0, param3 = 0;
  DType dtype = kFloat32;
  /// Operand k as an operand of a program whose inputs and values `value(id)` gives.
  template <class F>
  FusedOperand operand(int k, const F& value) const {
    if (v[k] >= 0) return value(v[k]);
    return {FusedOperand::Kind::Number, 0, number[k]};
  }
  /// The instruction, its tensor operands through `value`.
  template <class F>
  FusedInstr instr(const F& value) const {
    FusedInstr in{op, operand(0, value), {}, param, param2, param3};
    if (detail::fused_op_info(op).arity >= 2) in.b = operand(1, value);
    if (detail::fused_op_info(op).arity == 3) in.c = operand(2, value);
    return in;
  }
};

double scalar_attr(const Node& n, std::string_view name) {
  const op::IValue& v = n.args[static_cast<size_t>(n.op->schema.index_of(name))].attr;
  if (v.is<Scalar>()) return v.get<Scalar>().to_double();
  if (v.is<double>()) return v.get<double>();
  if (v.is<int64_t>()) return static_cast<double>(v.get<int64_t>());
  return std::nan("");
}

bool is_float(DType d) { return d == kFloat32 || d == kFloat64; }

/// Whether a fused node reading these values has one that is not a mask (its dtype's).
bool float_input(const Graph& g, const std::vector<int>& inputs) {
  for (int v : inputs)
    if (g.values[static_cast<size_t>(v)].dtype != kBool) return true;
  return false;
}

std::optional<Candidate> translate(const Graph& g, const Node& n) {
  const std::string name = n.name();
  const std::string base = n.op->schema.name;
  const std::string overload = n.op->schema.overload;
  // The tensor arguments, by position: div.Scalar_Tensor's is its second (a number over a
  // tensor), where.ScalarSelf's second is a number.
  auto tensor = [&](size_t k) {
    return k < n.args.size() && n.args[k].kind == Arg::Kind::Tensor ? n.args[k].value : -1;
  };
  if (n.outputs.size() != 1 || n.args.empty()) return {};
  const Value& out = g.values[static_cast<size_t>(n.outputs[0])];
  const bool compare = (base == "eq" || base == "ne" || base == "lt" || base == "le" ||
                        base == "gt" || base == "ge") &&
                       (overload == "Tensor" || overload == "Scalar");
  const bool logical = name == "logical_and" || name == "logical_or" || name == "logical_not";
  // Comparisons and logical ops give masks (bool, 1 or 0 in a program); the rest floats.
  if (!(is_float(out.dtype) || ((compare || logical) && out.dtype == kBool))) return {};
  Candidate c;
  c.v[0] = tensor(name == "div.Scalar_Tensor" ? 1 : 0);
  const bool binary_base = base == "add" || base == "sub" || base == "mul" || base == "div";
  if ((binary_base || compare) && (overload == "Tensor" || overload == "Scalar")) {
    FusedOp op{};
    detail::fused_op_by_name(base, op);
    c.op = op;
    if (overload == "Tensor") {
      c.v[1] = tensor(1);
      if (c.v[1] < 0) return {};
    } else {
      c.number[1] = scalar_attr(n, "other");
    }
    if (base == "add" || base == "sub") c.param = scalar_attr(n, "alpha");
  } else if (name == "logical_and" || name == "logical_or") {
    detail::fused_op_by_name(name, c.op);
    c.v[1] = tensor(1);
    if (c.v[1] < 0) return {};
  } else if (name == "where.self" || name == "where.ScalarOther" || name == "where.ScalarSelf") {
    // where(condition, self, other); a Scalar branch is a number
    c.op = FusedOp::where;
    for (size_t k = 1; k < 3; ++k) {
      c.v[k] = tensor(k);
      if (c.v[k] >= 0) continue;
      c.number[k] = scalar_attr(n, k == 1 ? "self" : "other");
      if (name == "where.self") return {};
    }
  } else if (name == "masked_fill.Scalar") {  // where(mask, value, self)
    c.op = FusedOp::where;
    c.v[0] = tensor(1);
    c.number[1] = scalar_attr(n, "value");
    c.v[2] = tensor(0);
    if (c.v[2] < 0) return {};
  } else if (name == "rsub.Scalar" || name == "div.Scalar_Tensor") {
    // other - self and self / other as eager runs them: sub and div of the number and the tensor
    c.op = name == "rsub.Scalar" ? FusedOp::sub : FusedOp::div;
    c.v[1] = c.v[0];
    c.v[0] = -1;
    c.number[0] = scalar_attr(n, name == "rsub.Scalar" ? "other" : "self");
    c.param = 1;                  // (sub's alpha)
  } else if (name == "square") {  // pow(x, 2), as its composite
    c.op = FusedOp::pow;
    c.param = 2;
  } else if (name == "pow.Tensor_Scalar") {
    // x ** e with eager's values and gradient (x ** 0, a constant, stays the op).
    c.param = scalar_attr(n, "exponent");
    if (!(c.param != 0 && std::isfinite(c.param))) return {};
    c.op = FusedOp::pow;
  } else if (name == "maximum" || name == "minimum") {
    detail::fused_op_by_name(name, c.op);
    c.v[1] = tensor(1);
    if (c.v[1] < 0) return {};
  } else if (name == "gelu") {
    const op::IValue& a = n.args[1].attr;
    if (!a.is<std::string>()) return {};
    if (a.get<std::string>() == "none")
      c.op = FusedOp::gelu;
    else if (a.get<std::string>() == "tanh")
      c.op = FusedOp::gelu_tanh;
    else
      return {};
  } else if (name == "clamp") {
    // clamp(x, min, max) with Scalar bounds (None: the other alone)
    const bool lo = !n.args[1].attr.is<std::monostate>(), hi = !n.args[2].attr.is<std::monostate>();
    if (!lo && !hi) return {};
    c.op = lo && hi ? FusedOp::clamp : lo ? FusedOp::clamp_min : FusedOp::clamp_max;
    c.param = scalar_attr(n, lo ? "min" : "max");
    if (lo && hi) c.param2 = scalar_attr(n, "max");
  } else if (name == "elu" || name == "selu" || name == "celu") {
    // selu and celu: elu with fixed or derived parameters, as their composites call it
    c.op = FusedOp::elu;
    if (name == "elu") {
      c.param = scalar_attr(n, "alpha");
      c.param2 = scalar_attr(n, "scale");
      c.param3 = scalar_attr(n, "input_scale");
    } else if (name == "selu") {
      c.param = kSeluAlpha;
      c.param2 = kSeluScale;
      c.param3 = 1;
    } else {
      c.param = scalar_attr(n, "alpha");
      if (c.param == 0) return {};  // (eager's error)
      c.param2 = 1;
      c.param3 = 1 / c.param;
    }
  } else if (name == "hardtanh" || name == "relu6") {
    c.op = FusedOp::hardtanh;
    c.param = name == "relu6" ? 0 : scalar_attr(n, "min_val");
    c.param2 = name == "relu6" ? 6 : scalar_attr(n, "max_val");
  } else if (name == "softplus") {
    c.op = FusedOp::softplus;
    c.param = scalar_attr(n, "beta");
    c.param2 = scalar_attr(n, "threshold");
  } else if (name == "leaky_relu") {
    c.op = FusedOp::leaky_relu;
    c.param = scalar_attr(n, "negative_slope");
  } else if (name == "dropout") {
    // Training dropout (eval-mode and p = 0 dropouts are removed by eliminate_identities; p = 1
    // draws nothing in eager, so it is left alone). Its stream number is given when the program
    // is built.
    const op::IValue& train = n.args[static_cast<size_t>(n.op->schema.index_of("train"))].attr;
    c.param = scalar_attr(n, "p");
    if (!train.is<bool>() || !train.get<bool>() || !(c.param > 0 && c.param < 1)) return {};
    c.op = FusedOp::dropout;
  } else {
    FusedOp op{};
    if (!detail::fused_op_by_name(name, op)) return {};
    const detail::FusedOpInfo& info = detail::fused_op_info(op);
    if (info.arity != 1 || info.params != 0 || n.args.size() != 1) return {};
    c.op = op;
  }
  const int arity = detail::fused_op_info(c.op).arity;
  if (!std::isfinite(c.param) || !std::isfinite(c.param2) || !std::isfinite(c.param3)) return {};
  // Every operand a tensor (not an undefined one) or a number (not NaN); the first a tensor but
  // for a number over a tensor (rsub, div).
  if (c.v[0] < 0 && name != "rsub.Scalar" && name != "div.Scalar_Tensor") return {};
  for (int k = 0; k < arity; ++k)
    if (c.v[k] < 0 && std::isnan(c.number[k])) return {};
  // No promotion inside a program but masks' (bool, read as 1 or 0): the float operands all of
  // the dtype it computes in; where's condition a mask.
  c.dtype = is_float(out.dtype) ? out.dtype : kBool;
  for (int k = 0; k < arity; ++k) {
    if (c.v[k] < 0) continue;
    const DType d = g.values[static_cast<size_t>(c.v[k])].dtype;
    if (c.op == FusedOp::where && k == 0) {
      if (d != kBool) return {};
    } else if (d != kBool) {
      if (!is_float(d) || (c.dtype != kBool && d != c.dtype)) return {};
      c.dtype = d;
    }
  }
  return c;
}

}  // namespace

int fuse_elementwise(Graph& g) {
  const op::Record* fused_op = op::find("fused_elementwise");
  IGNIS_CHECK(fused_op, "jit::fuse_elementwise: fused_elementwise is not registered");
  const size_t count = g.nodes.size();
  const std::vector<int> uses = g.use_counts();
  const std::vector<int> prod = detail::producers(g);
  std::vector<std::optional<Candidate>> cand(count);
  for (size_t i = 0; i < count; ++i)
    if (detail::is_pure(g.nodes[i]) || g.nodes[i].name() == "dropout")
      cand[i] = translate(g, g.nodes[i]);

  std::vector<int> group(count, -1);
  std::vector<char> dead(count, 0);
  int fused = 0;
  for (size_t r = count; r-- > 0;) {
    if (!cand[r] || group[r] >= 0) continue;
    const Value& root = g.values[static_cast<size_t>(g.nodes[r].outputs[0])];
    if (!is_float(root.dtype)) continue;  // (a mask is made inside a chain, not its result)
    // Absorb producers whose every use is inside the group, to a fixpoint (a value read twice
    // in the group, by nodes found in either order).
    std::vector<size_t> members = {r};
    group[r] = static_cast<int>(r);
    for (bool grew = true; grew;) {
      grew = false;
      std::map<int, int> inside;  // value id -> references from members
      for (size_t m : members)
        for (int v : cand[m]->v)
          if (v >= 0) ++inside[v];
      for (const auto& [v, refs] : inside) {
        const int p = prod[static_cast<size_t>(v)];
        if (p < 0 || !cand[static_cast<size_t>(p)] || group[static_cast<size_t>(p)] >= 0) continue;
        const Value& val = g.values[static_cast<size_t>(v)];
        // A mask computed from the chain's dtype, or from masks alone, joins it, of any shape
        // (recomputed per element: it has no gradient to sum and draws nothing).
        const DType d = cand[static_cast<size_t>(p)]->dtype;
        if (refs != uses[static_cast<size_t>(v)] ||
            (val.sizes != root.sizes && val.dtype != kBool) || (d != root.dtype && d != kBool))
          continue;
        group[static_cast<size_t>(p)] = static_cast<int>(r);
        members.push_back(static_cast<size_t>(p));
        grew = true;
      }
    }
    std::sort(members.begin(), members.end());
    // A group with dropouts draws their numbers when the fused node runs (at the root's place):
    // no other random node may run between its first dropout and the root, so that every draw
    // happens in eager's order and the masks are eager's.
    bool reordered = false;
    for (size_t m : members) {
      if (cand[m]->op != FusedOp::dropout) continue;
      for (size_t i = m + 1; i < r && !reordered; ++i)
        reordered = group[i] != static_cast<int>(r) && detail::is_random(g.nodes[i]);
      break;  // (members are sorted: the first dropout decides)
    }
    if (members.size() < 2 || reordered) {
      for (size_t m : members) group[m] = -1;
      continue;
    }
    std::map<size_t, int> instr_of;  // member node -> its instruction
    std::map<int, int> input_of;     // external value id -> input index
    std::vector<int> inputs;
    detail::FusedProgram program;
    auto operand = [&](int v) {
      FusedOperand o;
      const int p = prod[static_cast<size_t>(v)];
      if (p >= 0 && group[static_cast<size_t>(p)] == static_cast<int>(r)) {
        o.kind = FusedOperand::Kind::Value;
        o.index = instr_of.at(static_cast<size_t>(p));
      } else {
        auto [it, added] = input_of.emplace(v, static_cast<int>(inputs.size()));
        if (added) inputs.push_back(v);
        o.index = it->second;
      }
      return o;
    };
    int streams = 0;  // dropout's random streams, in eager's order
    for (size_t m : members) {
      FusedInstr in = cand[m]->instr(operand);
      if (in.op == FusedOp::dropout) in.b.number = streams++;
      instr_of[m] = static_cast<int>(program.code.size());
      program.code.push_back(in);
    }
    program.num_inputs = static_cast<int>(inputs.size());
    if (!float_input(g, inputs) || program.num_inputs > detail::kMaxFusedInputs ||
        program.code.size() > static_cast<size_t>(detail::kMaxFusedInstrs)) {
      for (size_t m : members) group[m] = -1;
      continue;
    }
    Node node;
    node.op = fused_op;
    Arg list;
    list.kind = Arg::Kind::TensorList;
    list.values = inputs;
    node.args = {list, Arg::attribute(program.str())};
    node.outputs = g.nodes[r].outputs;
    g.nodes[r] = std::move(node);
    for (size_t m : members)
      if (m != r) dead[m] = 1;
    ++fused;
  }
  detail::erase_nodes(g, dead);
  g.compact();
  return fused;
}

namespace {

/// A node as a program over its own inputs: a fused_elementwise node's program, or one
/// elementwise op as a one-instruction program. Training dropout (a dropout node, or a fused node
/// with dropout) is a piece too: its streams are numbered from 0 within the piece.
struct Piece {
  detail::FusedProgram program;
  std::vector<int> inputs;  // value ids, by program input index
};

std::optional<Piece> piece_of(const Graph& g, const Node& n) {
  if (detail::writes_inputs(n) || n.outputs.size() != 1) return {};
  if (detail::is_random(n) && n.name() != "dropout" && n.name() != "fused_elementwise") return {};
  Piece p;
  if (n.name() == "fused_elementwise") {
    const Arg& list = n.args[0];
    const op::IValue& text = n.args[1].attr;
    if (list.kind != Arg::Kind::TensorList || !text.is<std::string>()) return {};
    p.inputs = list.values;
    try {
      p.program =
          detail::parse_fused_program(text.get<std::string>(), static_cast<int>(p.inputs.size()));
    } catch (const Error&) {
      return {};
    }
    return p;
  }
  const std::optional<Candidate> c = translate(g, n);
  if (!c || !is_float(g.values[static_cast<size_t>(n.outputs[0])].dtype)) return {};
  // Its operands as the piece's inputs, in order (dropout's stream: the piece's stream 0).
  p.program.code.push_back(c->instr([&](int v) {
    p.inputs.push_back(v);
    return FusedOperand{FusedOperand::Kind::Input, static_cast<int>(p.inputs.size()) - 1, 0};
  }));
  p.program.num_inputs = static_cast<int>(p.inputs.size());
  if (!float_input(g, p.inputs)) return {};
  return p;
}

/// Appends p's instructions to `code`, its input k read as `input(k)`, its values renumbered,
/// its dropouts' streams shifted by `streams`; returns its result.
template <class F>
FusedOperand inline_program(const detail::FusedProgram& p, std::vector<FusedInstr>& code,
                            const F& input, int streams = 0) {
  const int base = static_cast<int>(code.size());
  auto map = [&](FusedOperand o) {
    if (o.kind == FusedOperand::Kind::Input) return input(o.index);
    if (o.kind == FusedOperand::Kind::Value) o.index += base;
    return o;
  };
  for (FusedInstr in : p.code) {
    detail::for_each_operand(in, [&](FusedOperand& o) { o = map(o); });
    if (in.op == FusedOp::dropout) in.b.number += streams;
    code.push_back(in);
  }
  return {FusedOperand::Kind::Value, static_cast<int>(code.size()) - 1, 0};
}

/// Builds the fused node's programs: external values become its inputs; the value `current`
/// (the reduction's result, then each epilogue step's) is an operand standing for the latest
/// result (`cur`).
struct Builder {
  std::vector<int> inputs;
  std::map<int, int> input_of;
  int input(int v) {
    auto [it, added] = input_of.emplace(v, static_cast<int>(inputs.size()));
    if (added) inputs.push_back(v);
    return it->second;
  }
  /// Appends `piece` to `code`; reads of `current` become `cur`; its dropout streams follow the
  /// `streams` the program has so far (counted up). Returns the result's operand.
  FusedOperand append(const Piece& piece, std::vector<FusedInstr>& code, int current,
                      FusedOperand cur, int& streams) {
    const FusedOperand r = inline_program(
        piece.program, code,
        [&](int k) {
          const int v = piece.inputs[static_cast<size_t>(k)];
          return v == current ? cur : FusedOperand{FusedOperand::Kind::Input, input(v), 0};
        },
        streams);
    streams += piece.program.random_streams();
    return r;
  }
};

/// The reduction a node computes ("" when it is not one fuse_reductions takes), the number of
/// trailing dims it reduces, eps, layer_norm's weight and bias (-1 for None), and whether a
/// statistic (sum, mean, amax, amin) keeps the reduced dims.
struct Reduction {
  std::string kind;
  int64_t dims = 1;
  double eps = 1e-5;
  int weight = -1, bias = -1;
  bool keepdim = true;
  double divisor = 1;  // var: the squared deviations' sum is divided by C - correction > 0
  double count = 1;    // var: C, the elements of a row
  /// var or std: a chain of the mean and the sum of squared deviations (below).
  bool spread() const { return kind == "var" || kind == "std"; }
  bool stat() const { return detail::is_fused_statistic(kind) || spread() || kind == "norm"; }
};

int64_t sizes_numel(const Shape& sizes) {
  int64_t n = 1;
  for (int64_t v : sizes) n *= v;
  return n;
}

/// How many trailing dims of a rank-nd tensor `dims` names (empty: every dim), or 0 when they
/// are not exactly the trailing ones.
int64_t trailing_count(const op::IValue& dims, int64_t nd) {
  if (!dims.is<std::vector<int64_t>>() || nd < 1) return 0;
  const std::vector<int64_t>& d = dims.get<std::vector<int64_t>>();
  if (d.empty()) return nd;
  std::vector<char> seen(static_cast<size_t>(nd), 0);
  for (int64_t v : d) {
    const int64_t w = v < 0 ? v + nd : v;
    if (w < 0 || w >= nd || seen[static_cast<size_t>(w)]) return 0;
    seen[static_cast<size_t>(w)] = 1;
  }
  const int64_t k = static_cast<int64_t>(d.size());
  for (int64_t w = nd - k; w < nd; ++w)
    if (!seen[static_cast<size_t>(w)]) return 0;
  return k;
}

Reduction reduction_of(const Graph& g, const Node& n) {
  Reduction r;
  if (n.outputs.size() != 1 || n.args.empty() || n.args[0].kind != Arg::Kind::Tensor ||
      n.args[0].value < 0)
    return r;
  const Value& out = g.values[static_cast<size_t>(n.outputs[0])];
  const Value& x = g.values[static_cast<size_t>(n.args[0].value)];
  if ((out.dtype != kFloat32 && out.dtype != kFloat64) || x.dtype != out.dtype) return r;
  const int64_t nd = static_cast<int64_t>(out.sizes.size());
  const std::string name = n.name();
  // norm(x, 2) over trailing dims: the sum of squares, then its square root (below).
  if (name == "norm") {
    const int64_t xd = static_cast<int64_t>(x.sizes.size());
    if (n.args.size() < 4 || !n.args[1].attr.is<double>() || n.args[1].attr.get<double>() != 2 ||
        !n.args[3].attr.is<bool>())
      return r;
    r.dims = trailing_count(n.args[2].attr, xd);
    if (r.dims < 1 || sizes_numel(x.sizes) == 0) return r;
    r.keepdim = n.args[3].attr.get<bool>();
    r.kind = "norm";
    return r;
  }
  // var and std over trailing dims: the mean, then the sum of squared deviations (a chain,
  // below).
  if (name == "var" || name == "std") {
    const int64_t xd = static_cast<int64_t>(x.sizes.size());
    if (n.args.size() < 4 || !n.args[2].attr.is<int64_t>() || !n.args[3].attr.is<bool>()) return r;
    r.dims = trailing_count(n.args[1].attr, xd);
    if (r.dims < 1) return r;
    int64_t C = 1;
    for (int64_t d = xd - r.dims; d < xd; ++d) C *= x.sizes[static_cast<size_t>(d)];
    // (C <= correction stays the op: the chain's gradient would be NaN where eager's is infinite)
    if (C == 0 || C - n.args[2].attr.get<int64_t>() <= 0) return r;
    r.keepdim = n.args[3].attr.get<bool>();
    r.divisor = static_cast<double>(C - n.args[2].attr.get<int64_t>());
    r.count = static_cast<double>(C);
    r.kind = name;
    return r;
  }
  // The statistics: sum (no dtype), mean, amax, amin over trailing dims; max() and min() over all.
  if (name == "sum" || name == "mean" || name == "amax" || name == "amin" || name == "max" ||
      name == "min") {
    const int64_t xd = static_cast<int64_t>(x.sizes.size());
    const bool whole = name == "max" || name == "min";
    if (whole) {
      r.dims = xd;
      r.keepdim = false;
    } else {
      if (n.args.size() < 3 || !n.args[2].attr.is<bool>()) return r;
      if (name == "sum" && (n.args.size() < 4 || !n.args[3].attr.is<std::monostate>())) return r;
      r.dims = trailing_count(n.args[1].attr, xd);
      r.keepdim = n.args[2].attr.get<bool>();
    }
    if (r.dims < 1) return r;
    int64_t C = 1;
    for (int64_t d = xd - r.dims; d < xd; ++d) C *= x.sizes[static_cast<size_t>(d)];
    if (C == 0) return r;  // (amax's error stays eager's; a sum of nothing is not worth a kernel)
    r.kind = whole ? (name == "max" ? "amax" : "amin") : name;
    return r;
  }
  if (name == "layer_norm") {
    const op::IValue& shape = n.args[1].attr;
    const op::IValue& eps = n.args[4].attr;
    if (!shape.is<std::vector<int64_t>>() || !eps.is<double>()) return r;
    r.dims = static_cast<int64_t>(shape.get<std::vector<int64_t>>().size());
    r.eps = eps.get<double>();
    r.weight = n.args[2].value;
    r.bias = n.args[3].value;
    for (int v : {r.weight, r.bias})
      if (v >= 0 && g.values[static_cast<size_t>(v)].dtype != out.dtype) return r;
    if (r.dims < 1 || r.dims > nd || !std::isfinite(r.eps)) return r;
    r.kind = "layer_norm";
  } else if (name == "rms_norm") {
    const op::IValue& shape = n.args[1].attr;
    const op::IValue& eps = n.args[3].attr;
    if (!shape.is<std::vector<int64_t>>()) return r;
    r.dims = static_cast<int64_t>(shape.get<std::vector<int64_t>>().size());
    // eps None: the dtype's machine epsilon (as rms_norm itself)
    if (eps.is<double>()) {
      r.eps = eps.get<double>();
    } else if (eps.is<std::monostate>()) {
      r.eps = out.dtype == kFloat64 ? 2.220446049250313e-16 : 1.1920928955078125e-07;
    } else {
      return r;
    }
    r.weight = n.args[2].value;
    if (r.weight >= 0 && g.values[static_cast<size_t>(r.weight)].dtype != out.dtype) return r;
    if (r.dims < 1 || r.dims > nd || !std::isfinite(r.eps)) return r;
    r.kind = "rms_norm";
  } else if (name == "softmax.int" || name == "log_softmax.int") {
    const op::IValue& dim = n.args[1].attr;
    if (!dim.is<int64_t>() || nd < 1) return r;
    const int64_t d = dim.get<int64_t>();
    if (d != -1 && d != nd - 1) return r;
    r.kind = name == "softmax.int" ? "softmax" : "log_softmax";
  }
  return r;
}

/// Whether fused_reduction's shape rule for a statistic with keepdim gives the epilogue's last
/// value `tail` (its rows are the inputs' broadcast shape, which must be x's; its output one
/// value per row broadcast with the inputs the epilogue reads).
bool stat_shape_agrees(const Graph& g, const std::vector<int>& inputs,
                       const std::vector<FusedInstr>& epi_code, const Value& xv, const Reduction& r,
                       int tail) {
  auto sizes = [&](int v) { return IntArrayRef(g.values[static_cast<size_t>(v)].sizes); };
  Shape rows;
  for (int v : inputs) rows = broadcast_shapes(rows, sizes(v));
  if (!IntArrayRef(rows).equals(xv.sizes)) return false;
  if (!r.keepdim) return true;  // (the walk kept one-element inputs and y's shape)
  Shape out = rows;
  for (int64_t d = 0; d < r.dims; ++d) out[out.size() - 1 - static_cast<size_t>(d)] = 1;
  detail::FusedProgram epilogue;
  epilogue.code = epi_code;
  for (size_t k = 0; k < inputs.size(); ++k)
    if (epilogue.reads_input(static_cast<int>(k))) out = broadcast_shapes(out, sizes(inputs[k]));
  return sizes(tail).equals(out);
}

/// A fused_reduction node of statistics, read from its attributes (its programs parsed, by
/// stage; none: nullopt), a sum, mean, amax or amin op over trailing dims (a statistic without
/// programs), or nullopt.
struct StatNode {
  std::vector<int> inputs;
  std::vector<std::string> stats;
  std::vector<std::optional<detail::FusedProgram>> pros;
  std::optional<detail::FusedProgram> epi;
  int64_t dims = 1;
  double eps = 1e-5;
  bool keepdim = true;
};

std::optional<StatNode> stat_node(const Graph& g, const Node& n, const op::Record* fused_op) {
  if (n.op != fused_op) {
    const Reduction r = reduction_of(g, n);
    if (!detail::is_fused_statistic(r.kind)) return {};
    StatNode s;
    s.inputs = {n.args[0].value};
    s.stats = {r.kind};
    s.pros.emplace_back();
    s.dims = r.dims;
    s.keepdim = r.keepdim;
    return s;
  }
  if (n.args.size() != 7 || n.args[0].kind != Arg::Kind::TensorList) return {};
  const op::IValue &red = n.args[1].attr, &dims = n.args[2].attr, &pro = n.args[3].attr,
                   &epi = n.args[4].attr, &eps = n.args[5].attr, &keep = n.args[6].attr;
  if (!red.is<std::string>() || !dims.is<int64_t>() || !pro.is<std::string>() ||
      !epi.is<std::string>() || !eps.is<double>() || !keep.is<bool>())
    return {};
  StatNode s;
  s.inputs = n.args[0].values;
  s.stats = detail::split_at(red.get<std::string>(), ',');
  for (const std::string& st : s.stats)
    if (!detail::is_fused_statistic(st)) return {};
  const std::vector<std::string> texts = detail::split_at(pro.get<std::string>(), '|');
  if (texts.size() != s.stats.size()) return {};
  const int n_in = static_cast<int>(s.inputs.size());
  try {
    for (size_t k = 0; k < texts.size(); ++k) {
      if (texts[k].empty())
        s.pros.emplace_back();
      else
        s.pros.emplace_back(detail::parse_fused_program(texts[k], n_in + static_cast<int>(k)));
    }
    if (!epi.get<std::string>().empty())
      s.epi = detail::parse_fused_program(epi.get<std::string>(),
                                          n_in + static_cast<int>(s.stats.size()));
  } catch (const Error&) {
    return {};
  }
  s.dims = dims.get<int64_t>();
  s.eps = eps.get<double>();
  s.keepdim = keep.get<bool>();
  return s;
}

/// Whether program p reads its input k as an operand.
bool reads_directly(const detail::FusedProgram& p, int k) {
  bool reads = false;
  for (const FusedInstr& in : p.code)
    detail::for_each_operand(in, [&](const FusedOperand& o) {
      reads = reads || (o.kind == FusedOperand::Kind::Input && o.index == k);
    });
  return reads;
}

/// A chain's stages (program k over the node's n inputs and statistics 0..k-1; an empty program
/// reads input 0) and its epilogue.
struct Stages {
  std::vector<std::string> stats;
  std::vector<detail::FusedProgram> pros;
  std::optional<detail::FusedProgram> epi;
};

/// Drops every stage equal to an earlier one (the same statistic of the same program: a layer
/// norm written with mean and var takes the mean twice), its readers reading the earlier one;
/// the last stage stays when there is no epilogue (the node's result is that statistic).
void drop_equal_stages(int n, Stages& s) {
  for (size_t k = 1; k < s.stats.size(); ++k) {
    if (!s.epi && k + 1 == s.stats.size()) break;
    size_t j = 0;
    while (j < k && (s.stats[j] != s.stats[k] || s.pros[j].str() != s.pros[k].str())) ++j;
    if (j == k) continue;
    const int dropped = n + static_cast<int>(k), kept = n + static_cast<int>(j);
    auto remap = [&](detail::FusedProgram& p) {
      for (FusedInstr& in : p.code)
        detail::for_each_operand(in, [&](FusedOperand& o) {
          if (o.kind == FusedOperand::Kind::Input && o.index >= dropped)
            o.index = o.index == dropped ? kept : o.index - 1;
        });
      --p.num_inputs;
    };
    for (size_t m = k + 1; m < s.pros.size(); ++m) remap(s.pros[m]);
    if (s.epi) remap(*s.epi);
    s.stats.erase(s.stats.begin() + static_cast<std::ptrdiff_t>(k));
    s.pros.erase(s.pros.begin() + static_cast<std::ptrdiff_t>(k));
    --k;
  }
}

/// Chains of statistics: a fused_reduction of statistics B reading, as one of its inputs d, the
/// result of another, A (keepdim, over the same rows and dims, d read by B alone; d of the rows'
/// shape, or one value per row), becomes one node: A's stages, then B's, their programs reading
/// d as A's epilogue recomputed in place, or A's last statistic (a hand-written layer norm's
/// centring mean, then its variance, or its var and its mean; a softmax's max, then its sum of
/// exponentials). Returns how many nodes merged.
int chain_statistics(Graph& g, const op::Record* fused_op) {
  const std::vector<int> uses = g.use_counts();
  const std::vector<int> prod = detail::producers(g);
  std::vector<char> dead(g.nodes.size(), 0);
  auto sizes = [&](int v) { return IntArrayRef(g.values[static_cast<size_t>(v)].sizes); };
  auto rows_of = [&](const std::vector<int>& in) {
    Shape rows;
    for (int v : in) rows = broadcast_shapes(rows, sizes(v));
    return rows;
  };
  auto in_op = [](int k) { return FusedOperand{FusedOperand::Kind::Input, k, 0}; };
  int merged = 0;
  for (size_t bi = 0; bi < g.nodes.size(); ++bi) {
    const std::optional<StatNode> B = stat_node(g, g.nodes[bi], fused_op);
    if (!B) continue;
    const Shape rows = rows_of(B->inputs);
    Shape keep = rows;  // one value per row
    for (int64_t k = 0; k < B->dims && k < static_cast<int64_t>(keep.size()); ++k)
      keep[keep.size() - 1 - static_cast<size_t>(k)] = 1;
    for (size_t jb = 0; jb < B->inputs.size(); ++jb) {
      const int d = B->inputs[jb];
      const int a = prod[static_cast<size_t>(d)];
      if (a < 0 || dead[static_cast<size_t>(a)] || uses[static_cast<size_t>(d)] != 1) continue;
      const std::optional<StatNode> A = stat_node(g, g.nodes[static_cast<size_t>(a)], fused_op);
      // d: A's result of the rows' shape, or one value per row (then A may have no epilogue).
      const bool full = sizes(d).equals(rows);
      if (!A || !A->keepdim || A->dims != B->dims || !(full || sizes(d).equals(keep)) ||
          (full && !A->epi) || !IntArrayRef(rows_of(A->inputs)).equals(rows))
        continue;
      // A's inputs must hold their values until B's place.
      bool writes = false;
      for (size_t k = static_cast<size_t>(a) + 1; k < bi && !writes; ++k)
        writes = !dead[k] && detail::writes_inputs(g.nodes[k]);
      if (writes) continue;
      // The merged node's inputs: A's, then B's but d; then the statistics, A's then B's.
      std::vector<int> inputs;
      std::map<int, int> index;
      for (const std::vector<int>* list : {&A->inputs, &B->inputs})
        for (int v : *list)
          if (v != d && index.emplace(v, static_cast<int>(inputs.size())).second)
            inputs.push_back(v);
      // A stage of B without a prologue reads B's input 0: d, to be A's epilogue, or another
      // input that stays input 0.
      bool input0_ok = true;
      for (const auto& p : B->pros)
        if (!p)
          input0_ok = input0_ok && (jb == 0 ? A->epi.has_value() : index.at(B->inputs[0]) == 0);
      if (!input0_ok) continue;
      const int n = static_cast<int>(inputs.size());
      const int KA = static_cast<int>(A->stats.size()), KB = static_cast<int>(B->stats.size());
      const int nA = static_cast<int>(A->inputs.size()), nB = static_cast<int>(B->inputs.size());
      if (n + KA + KB > detail::kMaxFusedInputs) continue;
      auto a_input = [&](int k) {  // an input of A's programs in the merged node
        return k < nA ? in_op(index.at(A->inputs[static_cast<size_t>(k)])) : in_op(n + k - nA);
      };
      // B's program over `num_inputs` (null: input 0, d): d as A's epilogue, inlined first (or,
      // without one, A's last statistic).
      auto b_program = [&](const detail::FusedProgram* p, int num_inputs) {
        detail::FusedProgram r;
        r.num_inputs = num_inputs;
        if (!p && jb != 0) return r;  // input 0, the same input in the merged node (checked)
        FusedOperand dv = a_input(nA + KA - 1);
        if (A->epi && (!p || reads_directly(*p, static_cast<int>(jb))))
          dv = inline_program(*A->epi, r.code, a_input);
        if (!p) return r;
        inline_program(*p, r.code, [&](int k) {
          if (k == static_cast<int>(jb)) return dv;
          return k < nB ? in_op(index.at(B->inputs[static_cast<size_t>(k)]))
                        : in_op(n + KA + k - nB);
        });
        return r;
      };
      Stages st;
      bool fits = true;
      for (int k = 0; k < KA + KB; ++k) {
        detail::FusedProgram p;
        if (k < KA) {
          p.num_inputs = n + k;
          if (const auto& ap = A->pros[static_cast<size_t>(k)])
            inline_program(*ap, p.code, a_input);
        } else {
          const auto& bp = B->pros[static_cast<size_t>(k - KA)];
          p = b_program(bp ? &*bp : nullptr, n + k);
        }
        fits = fits && p.code.size() <= static_cast<size_t>(detail::kMaxFusedInstrs);
        st.stats.push_back(k < KA ? A->stats[static_cast<size_t>(k)]
                                  : B->stats[static_cast<size_t>(k - KA)]);
        st.pros.push_back(std::move(p));
      }
      if (B->epi) {
        st.epi = b_program(&*B->epi, n + KA + KB);
        fits = fits && st.epi->code.size() <= static_cast<size_t>(detail::kMaxFusedInstrs);
      }
      drop_equal_stages(n, st);
      if (!fits || st.stats.size() > static_cast<size_t>(detail::kMaxStatStages)) continue;
      std::string reduction, prologue;
      for (size_t k = 0; k < st.stats.size(); ++k) {
        if (k) {
          reduction += ',';
          prologue += '|';
        }
        reduction += st.stats[k];
        prologue += st.pros[k].str();
      }
      const std::string epilogue = st.epi ? st.epi->str() : std::string();
      Node node;
      node.op = fused_op;
      Arg list;
      list.kind = Arg::Kind::TensorList;
      list.values = inputs;
      node.args = {list,
                   Arg::attribute(reduction),
                   Arg::attribute(B->dims),
                   Arg::attribute(prologue),
                   Arg::attribute(epilogue),
                   Arg::attribute(B->eps),
                   Arg::attribute(B->keepdim)};
      node.outputs = g.nodes[bi].outputs;
      g.nodes[bi] = std::move(node);
      dead[static_cast<size_t>(a)] = 1;
      ++merged;
      break;
    }
  }
  detail::erase_nodes(g, dead);
  g.compact();
  return merged;
}

}  // namespace

int fuse_reductions(Graph& g) {
  const op::Record* fused_op = op::find("fused_reduction");
  IGNIS_CHECK(fused_op, "jit::fuse_reductions: fused_reduction is not registered");
  const std::vector<int> uses = g.use_counts();
  const std::vector<int> prod = detail::producers(g);
  std::vector<char> dead(g.nodes.size(), 0);
  // The nodes reading each value.
  std::vector<std::vector<int>> readers(g.values.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int v : g.nodes[i].inputs())
      readers[static_cast<size_t>(v)].push_back(static_cast<int>(i));
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    if (dead[i]) continue;
    const Node& red = g.nodes[i];
    const Reduction r = reduction_of(g, red);
    if (r.kind.empty()) continue;
    const int x = red.args[0].value;
    const int y = red.outputs[0];
    const Value& yv = g.values[static_cast<size_t>(y)];
    std::vector<size_t> members = {i};
    Builder b;
    // The prologue: the producer of x, when nothing else reads x.
    std::optional<Piece> pro;
    const int p = prod[static_cast<size_t>(x)];
    if (p >= 0 && !dead[static_cast<size_t>(p)] && uses[static_cast<size_t>(x)] == 1) {
      pro = piece_of(g, g.nodes[static_cast<size_t>(p)]);
      if (pro && r.stat() && pro->program.random_streams() > 0) pro.reset();  // (no dropout)
      if (pro) members.push_back(static_cast<size_t>(p));
    }
    std::vector<FusedInstr> pro_code, epi_code;
    int pro_streams = 0, epi_streams = 0;
    if (pro)
      b.append(*pro, pro_code, -1, {}, pro_streams);
    else
      b.input(x);  // input 0: the reduction's input
    // The epilogue: layer_norm's or rms_norm's affine part, then each consumer reading the latest
    // result alone.
    FusedOperand cur;
    cur.kind = FusedOperand::Kind::Input;
    cur.index = -1;  // the reduction's result: input n, fixed below
    auto op_of = [](const char* name) {
      FusedOp o{};
      detail::fused_op_by_name(name, o);
      return o;
    };
    // norm(x, 2): the sum of x ** 2 (x = the prologue's value, squared at its end), the epilogue
    // starting with its square root. var and std: a chain of two statistics, the mean (input -1
    // here, n below) of x, then the sum (input -2, n + 1) of (x - mean) ** 2 (the prologue again,
    // then the deviation squared); the epilogue starts with the sum over its divisor (std: then
    // its square root).
    std::vector<FusedInstr> deviations;
    auto value = [](size_t j) {
      return FusedOperand{FusedOperand::Kind::Value, static_cast<int>(j), 0};
    };
    // Appends an epilogue instruction; cur becomes its value.
    auto emit = [&](const char* op, FusedOperand a, FusedOperand b = {}, double param = 0) {
      epi_code.push_back({op_of(op), a, b, param});
      cur = value(epi_code.size() - 1);
    };
    // sqrt(relu(v)): relu changes no sum of squares (>= 0 or NaN), and its derivative, 0 at
    // v = 0, gives eager std's and norm's subgradient there (0, not 0 * inf = NaN).
    auto square_root = [&](bool relu) {
      if (relu) emit("relu", cur);
      emit("sqrt", cur);
    };
    if (r.kind == "norm") {
      // The sum of the prologue's value squared, then its square root.
      const FusedOperand xo =
          pro ? value(pro_code.size() - 1) : FusedOperand{FusedOperand::Kind::Input, 0, 0};
      pro_code.push_back({op_of("mul"), xo, xo, 0});
      square_root(true);
    }
    // In float32 (eager accumulates var and std in double), a third statistic corrects the mean's
    // rounding: the deviations' sum (input -3, n + 2), var = (sum d ** 2 - C c ** 2) /
    // (C - correction), d = x - mean, c = sum d / C (the corrected two-pass algorithm of Chan,
    // Golub and LeVeque; d is exact where x is near the mean), as sum d ** 2 / (C - correction)
    // less c ** 2 C / (C - correction), the latter taken as 0 where the sum of squares overflowed
    // (threshold_backward as a select: inf, as eager's, not inf - inf), then its relu (rounding
    // may leave it a little under 0). float64 runs eager's two passes.
    std::vector<FusedInstr> residuals;
    const bool corrected = r.spread() && yv.dtype == kFloat32;
    if (r.spread()) {
      auto in = [](int k) { return FusedOperand{FusedOperand::Kind::Input, k, 0}; };
      auto number = [](double v) { return FusedOperand{FusedOperand::Kind::Number, 0, v}; };
      deviations = pro_code;
      const FusedOperand xo = pro ? value(deviations.size() - 1) : in(0);
      deviations.push_back({op_of("sub"), xo, in(-1), 1});
      if (corrected) residuals = deviations;
      deviations.push_back(
          {op_of("mul"), value(deviations.size() - 1), value(deviations.size() - 1), 0});
      if (corrected) {
        emit("div", in(-3), number(r.count));
        emit("mul", cur, cur);
        if (r.count != r.divisor) emit("mul", cur, number(r.count / r.divisor));
        const FusedOperand correction = cur;
        emit("div", in(-2), number(r.divisor));
        const FusedOperand squares = cur;
        emit("neg", squares);
        emit("threshold_backward", correction, cur, -static_cast<double>(FLT_MAX));
        emit("sub", squares, cur, 1);
        emit("relu", cur);
      } else {
        emit("div", in(-2), number(r.divisor));
      }
      if (r.kind == "std") square_root(!corrected);
    }
    if (r.weight >= 0) {
      FusedOperand w;
      w.index = b.input(r.weight);
      epi_code.push_back({op_of("mul"), cur, w, 0});
      cur = {FusedOperand::Kind::Value, static_cast<int>(epi_code.size()) - 1, 0};
    }
    if (r.bias >= 0) {
      FusedOperand bias;
      bias.index = b.input(r.bias);
      epi_code.push_back({op_of("add"), cur, bias, 1});
      cur = {FusedOperand::Kind::Value, static_cast<int>(epi_code.size()) - 1, 0};
    }
    int tail = y;
    size_t last = i;
    bool consumed = false;
    // A statistic's epilogue: values of one per row (y's shape), then (keepdim) of the rows'
    // shape, x's; without keepdim it reads one-element inputs only.
    const Value& xv = g.values[static_cast<size_t>(x)];
    bool full = false;
    for (;;) {
      const std::vector<int>& rd = readers[static_cast<size_t>(tail)];
      if (rd.empty() || static_cast<int>(rd.size()) != uses[static_cast<size_t>(tail)]) break;
      const int e = rd[0];
      bool one_reader = true;
      for (int k : rd) one_reader = one_reader && k == e;
      if (!one_reader || dead[static_cast<size_t>(e)]) break;
      const Node& en = g.nodes[static_cast<size_t>(e)];
      const std::optional<Piece> piece = piece_of(g, en);
      if (!piece) break;
      const Value& ev = g.values[static_cast<size_t>(en.outputs[0])];
      if (ev.dtype != yv.dtype) break;
      if (!r.stat()) {
        if (!IntArrayRef(ev.sizes).equals(yv.sizes)) break;
      } else {
        if (piece->program.random_streams() > 0) break;
        const bool row = !full && IntArrayRef(ev.sizes).equals(yv.sizes);
        full = !row && r.keepdim && IntArrayRef(ev.sizes).equals(xv.sizes);
        if (!row && !full) break;
        bool scalars = true;
        for (int v : piece->inputs)
          scalars =
              scalars && (v == tail || sizes_numel(g.values[static_cast<size_t>(v)].sizes) == 1);
        if (!r.keepdim && !scalars) break;
      }
      bool same_dtype = true;  // (or masks)
      for (int v : piece->inputs) {
        const DType d = g.values[static_cast<size_t>(v)].dtype;
        same_dtype = same_dtype && (d == yv.dtype || d == kBool);
      }
      if (!same_dtype) break;
      cur = b.append(*piece, epi_code, tail, cur, epi_streams);
      members.push_back(static_cast<size_t>(e));
      tail = en.outputs[0];
      last = static_cast<size_t>(e);
      consumed = true;
    }
    // (A normalisation alone is still fused: its composite is several ops.)
    if (r.kind != "layer_norm" && r.kind != "rms_norm" && !pro && !consumed) continue;
    if (r.stat() && consumed && !stat_shape_agrees(g, b.inputs, epi_code, xv, r, tail)) continue;
    const int n = static_cast<int>(b.inputs.size());
    if (n >= detail::kMaxFusedInputs || deviations.size() > detail::kMaxFusedInstrs ||
        pro_code.size() > detail::kMaxFusedInstrs || epi_code.size() > detail::kMaxFusedInstrs ||
        pro_streams > 256 || epi_streams > 256)
      continue;
    const size_t first = *std::min_element(members.begin(), members.end());
    // The fused node runs at the last member's place, drawing its dropouts' numbers there (the
    // prologue's, then the epilogue's, as eager drew them): no other random node may run between
    // the first random member and it, so that every draw keeps eager's order and masks.
    size_t first_random = last;
    for (size_t m : members)
      if (detail::is_random(g.nodes[m])) first_random = std::min(first_random, m);
    bool writes = false, reordered = false;
    for (size_t k = first + 1; k < last && !writes && !reordered; ++k) {
      const bool member = std::find(members.begin(), members.end(), k) != members.end();
      writes = !member && detail::writes_inputs(g.nodes[k]);
      reordered = !member && k > first_random && detail::is_random(g.nodes[k]);
    }
    if (writes || reordered) continue;
    const bool var = r.spread();
    const int stats = var ? (corrected ? 3 : 2) : 1;
    if (n + stats > detail::kMaxFusedInputs) continue;
    for (std::vector<FusedInstr>* code : {&epi_code, &deviations, &residuals})
      for (FusedInstr& in : *code)
        detail::for_each_operand(in, [&](FusedOperand& o) {
          if (o.kind == FusedOperand::Kind::Input && o.index < 0) o.index = n - 1 - o.index;
        });
    detail::FusedProgram pro_prog, epi_prog, dev_prog;
    pro_prog.code = pro_code;
    pro_prog.num_inputs = n;
    epi_prog.code = epi_code;
    epi_prog.num_inputs = n + stats;
    dev_prog.code = deviations;
    dev_prog.num_inputs = n + 1;
    detail::FusedProgram residual_prog;
    residual_prog.code = residuals;
    residual_prog.num_inputs = n + 2;
    Node node;
    node.op = fused_op;
    Arg list;
    list.kind = Arg::Kind::TensorList;
    list.values = b.inputs;
    std::string prologue = pro_code.empty() ? std::string() : pro_prog.str();
    if (var) prologue += '|' + dev_prog.str();
    if (corrected) prologue += '|' + residual_prog.str();
    node.args = {list,
                 Arg::attribute(corrected          ? std::string("mean,sum,sum")
                                : var              ? std::string("mean,sum")
                                : r.kind == "norm" ? std::string("sum")
                                                   : r.kind),
                 Arg::attribute(r.dims),
                 Arg::attribute(prologue),
                 Arg::attribute(epi_code.empty() ? std::string() : epi_prog.str()),
                 Arg::attribute(r.eps),
                 Arg::attribute(r.keepdim)};
    node.outputs = g.nodes[last].outputs;
    g.nodes[last] = std::move(node);
    for (size_t m : members)
      if (m != last) dead[m] = 1;
    ++fused;
  }
  detail::erase_nodes(g, dead);
  g.compact();
  return fused + chain_statistics(g, fused_op);
}

}  // namespace ignis::jit
