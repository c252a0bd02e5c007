// The elementwise fusion pass: chains of elementwise ops become fused_elementwise nodes whose
// program (fused_program.h) runs in one pass over memory (fused_elementwise.cpp).
#include <algorithm>
#include <cmath>
#include <map>
#include <optional>

#include "ignis/error.h"
#include "ignis/jit.h"
#include "jit/fused_program.h"
#include "jit/passes.h"

namespace ignis::jit {

namespace {

using detail::FusedInstr;
using detail::FusedOp;
using detail::FusedOperand;

/// A node as a program instruction: its op, its tensor operands (value ids; b -1 when the
/// second operand is a number or the op is unary), the number and the parameter.
struct Candidate {
  FusedOp op;
  int a = -1, b = -1;
  double number = 0;
  double param = 0;
};

double scalar_attr(const Node& n, std::string_view name) {
  const op::IValue& v = n.args[static_cast<size_t>(n.op->schema.index_of(name))].attr;
  if (v.is<Scalar>()) return v.get<Scalar>().to_double();
  if (v.is<double>()) return v.get<double>();
  if (v.is<int64_t>()) return static_cast<double>(v.get<int64_t>());
  return std::nan("");
}

std::optional<Candidate> translate(const Graph& g, const Node& n) {
  if (n.outputs.size() != 1 || n.args.empty() || n.args[0].kind != Arg::Kind::Tensor) return {};
  const Value& out = g.values[static_cast<size_t>(n.outputs[0])];
  if (out.dtype != kFloat32 && out.dtype != kFloat64) return {};
  Candidate c;
  c.a = n.args[0].value;
  const std::string name = n.name();
  const std::string base = n.op->schema.name;
  const std::string overload = n.op->schema.overload;
  const bool binary_base = base == "add" || base == "sub" || base == "mul" || base == "div";
  if (binary_base && (overload == "Tensor" || overload == "Scalar")) {
    FusedOp op{};
    detail::fused_op_by_name(base, op);
    c.op = op;
    if (overload == "Tensor") {
      if (n.args[1].kind != Arg::Kind::Tensor) return {};
      c.b = n.args[1].value;
    } else {
      c.number = scalar_attr(n, "other");
    }
    if (base == "add" || base == "sub") c.param = scalar_attr(n, "alpha");
  } else if (name == "maximum" || name == "minimum") {
    detail::fused_op_by_name(name, c.op);
    if (n.args[1].kind != Arg::Kind::Tensor) return {};
    c.b = n.args[1].value;
  } else if (name == "gelu") {
    const op::IValue& a = n.args[1].attr;
    if (!a.is<std::string>()) return {};
    if (a.get<std::string>() == "none") c.op = FusedOp::gelu;
    else if (a.get<std::string>() == "tanh") c.op = FusedOp::gelu_tanh;
    else return {};
  } else if (name == "leaky_relu") {
    c.op = FusedOp::leaky_relu;
    c.param = scalar_attr(n, "negative_slope");
  } else {
    FusedOp op{};
    if (!detail::fused_op_by_name(name, op)) return {};
    const detail::FusedOpInfo& info = detail::fused_op_info(op);
    if (info.arity != 1 || info.params != 0 || n.args.size() != 1) return {};
    c.op = op;
  }
  if (!std::isfinite(c.param) || std::isnan(c.number)) return {};
  if (c.a < 0) return {};  // an undefined (None) operand
  for (int v : {c.a, c.b})  // no promotion inside a program
    if (v >= 0 && g.values[static_cast<size_t>(v)].dtype != out.dtype) return {};
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
    if (detail::is_pure(g.nodes[i])) cand[i] = translate(g, g.nodes[i]);

  std::vector<int> group(count, -1);
  std::vector<char> dead(count, 0);
  int fused = 0;
  for (size_t r = count; r-- > 0;) {
    if (!cand[r] || group[r] >= 0) continue;
    const Value& root = g.values[static_cast<size_t>(g.nodes[r].outputs[0])];
    // Absorb producers whose every use is inside the group, to a fixpoint (a value read twice
    // in the group, by nodes found in either order).
    std::vector<size_t> members = {r};
    group[r] = static_cast<int>(r);
    for (bool grew = true; grew;) {
      grew = false;
      std::map<int, int> inside;  // value id -> references from members
      for (size_t m : members)
        for (int v : {cand[m]->a, cand[m]->b})
          if (v >= 0) ++inside[v];
      for (const auto& [v, refs] : inside) {
        const int p = prod[static_cast<size_t>(v)];
        if (p < 0 || !cand[static_cast<size_t>(p)] || group[static_cast<size_t>(p)] >= 0) continue;
        const Value& val = g.values[static_cast<size_t>(v)];
        if (refs != uses[static_cast<size_t>(v)] || val.sizes != root.sizes ||
            val.dtype != root.dtype)
          continue;
        group[static_cast<size_t>(p)] = static_cast<int>(r);
        members.push_back(static_cast<size_t>(p));
        grew = true;
      }
    }
    if (members.size() < 2) {
      group[r] = -1;
      continue;
    }
    std::sort(members.begin(), members.end());
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
    for (size_t m : members) {
      const Candidate& c = *cand[m];
      FusedInstr in{c.op, operand(c.a), {}, c.param};
      if (detail::fused_op_info(c.op).arity == 2) {
        if (c.b >= 0) {
          in.b = operand(c.b);
        } else {
          in.b.kind = FusedOperand::Kind::Number;
          in.b.number = c.number;
        }
      }
      instr_of[m] = static_cast<int>(program.code.size());
      program.code.push_back(in);
    }
    program.num_inputs = static_cast<int>(inputs.size());
    if (program.num_inputs > detail::kMaxFusedInputs ||
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

}  // namespace ignis::jit
