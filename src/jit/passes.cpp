// Graph passes: dead code, common subexpressions, constant folding, batch-norm folding and the
// fusion of conv/linear with their bias and relu into the fused registry ops.
#include "jit/passes.h"

#include <cinttypes>
#include <cstdio>
#include <optional>
#include <unordered_map>

#include "ignis/autograd.h"
#include "ignis/error.h"
#include "ignis/jit.h"
#include "ignis/ops.h"
#include "jit/fused_program.h"

namespace ignis::jit {

namespace detail {

bool writes_inputs(const Node& n) {
  for (const std::string& r : n.op->schema.returns)
    if (r.find('!') != std::string::npos) return true;
  // batch_norm (and batch_norm_relu) in training mode updates its running statistics in place.
  if (n.op->schema.name == "batch_norm" || n.op->schema.name == "batch_norm_relu") {
    const int t = n.op->schema.index_of("training");
    return t >= 0 && n.args[static_cast<size_t>(t)].attr.is<bool>() &&
           n.args[static_cast<size_t>(t)].attr.get<bool>();
  }
  return false;
}

bool is_random(const Node& n) {
  // A fused node draws random numbers when its program has dropout.
  if (n.op->schema.name == "fused_elementwise" && n.args.size() == 2 &&
      n.args[1].attr.is<std::string>())
    return detail::fused_text_is_random(n.args[1].attr.get<std::string>());
  // A fused reduction: when its prologue or epilogue has dropout.
  if (n.op->schema.name == "fused_reduction" && n.args.size() >= 5) {
    for (size_t k : {size_t{3}, size_t{4}})
      if (n.args[k].attr.is<std::string>() &&
          detail::fused_text_is_random(n.args[k].attr.get<std::string>()))
        return true;
    return false;
  }
  if (n.op->kind != "random") return false;
  // dropout(train=False) is the identity: deterministic.
  const int t = n.op->schema.index_of("train");
  if (t >= 0) {
    const op::IValue& v = n.args[static_cast<size_t>(t)].attr;
    if (v.is<bool>() && !v.get<bool>()) return false;
  }
  return true;
}

bool is_pure(const Node& n) { return !writes_inputs(n) && !is_random(n); }

std::string attr_key(const op::IValue& v) {
  char buf[64];
  std::string s;
  auto num = [&](double d) {
    std::snprintf(buf, sizeof(buf), "%a", d);
    s += buf;
  };
  std::visit(
      [&](const auto& x) {
        using T = std::decay_t<decltype(x)>;
        if constexpr (std::is_same_v<T, std::monostate>) {
          s += "N";
        } else if constexpr (std::is_same_v<T, Tensor> || std::is_same_v<T, std::vector<Tensor>>) {
          s += "T";  // tensor slots are keyed by value id, not here
        } else if constexpr (std::is_same_v<T, int64_t>) {
          s += std::string("i") + std::to_string(x);
        } else if constexpr (std::is_same_v<T, double>) {
          s += "f";
          num(x);
        } else if constexpr (std::is_same_v<T, bool>) {
          s += x ? "b1" : "b0";
        } else if constexpr (std::is_same_v<T, std::vector<int64_t>>) {
          s += "I";
          for (int64_t e : x) s += std::to_string(e) + ",";
        } else if constexpr (std::is_same_v<T, std::vector<bool>>) {
          s += "B";
          for (bool e : x) s += e ? '1' : '0';
        } else if constexpr (std::is_same_v<T, std::vector<double>>) {
          s += "F";
          for (double e : x) {
            num(e);
            s += ",";
          }
        } else if constexpr (std::is_same_v<T, Scalar>) {
          if (x.is_floating_point()) {
            s += "sf";
            num(x.template to<double>());
          } else {
            s += x.is_integral() ? "si" : "sb";
            s += std::to_string(x.template to<int64_t>());
          }
        } else if constexpr (std::is_same_v<T, DType>) {
          s += std::string("d") + std::to_string(static_cast<int>(x));
        } else if constexpr (std::is_same_v<T, Device>) {
          s += std::string("D") + x.str();
        } else if constexpr (std::is_same_v<T, std::string>) {
          s += std::string("s") + std::to_string(x.size()) + ":" + x;
        } else if constexpr (std::is_same_v<T, MemoryFormat>) {
          s += std::string("m") + std::to_string(static_cast<int>(x));
        } else if constexpr (std::is_same_v<T, TensorOptions>) {
          s += std::string("o") +
               (x.has_dtype() ? std::to_string(static_cast<int>(x.dtype())) : "-") + "," +
               x.device().str() + (x.requires_grad() ? ",g" : "");
        }
      },
      v.storage());
  return s;
}

std::vector<Tensor> run_node(const Node& n, const Graph& g) {
  std::vector<op::IValue> args;
  for (const Arg& a : n.args) {
    if (a.kind == Arg::Kind::Tensor) {
      args.emplace_back(a.value >= 0 ? g.tensors[static_cast<size_t>(a.value)] : Tensor());
    } else if (a.kind == Arg::Kind::TensorList) {
      std::vector<Tensor> l;
      for (int v : a.values) l.push_back(v >= 0 ? g.tensors[static_cast<size_t>(v)] : Tensor());
      args.emplace_back(std::move(l));
    } else {
      args.push_back(a.attr);
    }
  }
  std::vector<Tensor> outs;
  for (op::IValue& o : n.op->boxed(op::IValueView(args), *n.op)) {
    if (o.is<Tensor>()) outs.push_back(o.get<Tensor>());
    if (o.is<std::vector<Tensor>>())
      for (const Tensor& t : o.get<std::vector<Tensor>>()) outs.push_back(t);
  }
  return outs;
}

int new_constant(Graph& g, const Tensor& t) {
  Value v;
  v.kind = ValueKind::Constant;
  v.name = "c";  // renumbered by compact()
  v.sizes = Shape(t.sizes().begin(), t.sizes().end());
  v.dtype = t.dtype();
  v.device = t.device();
  return g.add_value(std::move(v), t);
}

}  // namespace detail

namespace detail {

std::vector<int> producers(const Graph& g) {
  std::vector<int> p(g.values.size(), -1);
  for (size_t i = 0; i < g.nodes.size(); ++i)
    for (int o : g.nodes[i].outputs) p[static_cast<size_t>(o)] = static_cast<int>(i);
  return p;
}

void erase_nodes(Graph& g, const std::vector<char>& dead) {
  std::vector<Node> kept;
  kept.reserve(g.nodes.size());
  for (size_t i = 0; i < g.nodes.size(); ++i)
    if (!dead[i]) kept.push_back(std::move(g.nodes[i]));
  g.nodes = std::move(kept);
}

}  // namespace detail

using detail::erase_nodes;
using detail::is_pure;
using detail::producers;
using detail::writes_inputs;

namespace {

bool is_constant(const Graph& g, int id) {
  return id >= 0 && g.values[static_cast<size_t>(id)].kind == ValueKind::Constant;
}

// Values whose memory some node writes into: the inputs of writing nodes, and, back through
// views and in-place results (schema returns "Tensor(a)", "Tensor(a!)"), the values they alias.
std::vector<char> written_values(const Graph& g) {
  std::vector<char> w(g.values.size(), 0);
  for (const Node& n : g.nodes)
    if (writes_inputs(n))
      for (int v : n.inputs()) w[static_cast<size_t>(v)] = 1;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    bool alias_written = false;
    for (size_t k = 0; k < n.outputs.size(); ++k) {
      const auto& rets = n.op->schema.returns;
      const std::string& r = k < rets.size() ? rets[k] : rets.back();
      alias_written |= r.find("(a") != std::string::npos && w[static_cast<size_t>(n.outputs[k])];
    }
    if (!alias_written) continue;
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor && a.value >= 0) {
        w[static_cast<size_t>(a.value)] = 1;
        break;
      }
    }
  }
  return w;
}

bool any_output_written(const Node& n, const std::vector<char>& written) {
  for (int o : n.outputs)
    if (written[static_cast<size_t>(o)]) return true;
  return false;
}

const Arg& arg(const Node& n, std::string_view name) {
  const int i = n.op->schema.index_of(name);
  IGNIS_CHECK(i >= 0, "jit: ", n.name(), " has no argument '", name, "'");
  return n.args[static_cast<size_t>(i)];
}

}  // namespace

int eliminate_dead_code(Graph& g) {
  std::vector<int> uses = g.use_counts();
  std::vector<char> dead(g.nodes.size(), 0);
  int removed = 0;
  for (size_t i = g.nodes.size(); i-- > 0;) {
    const Node& n = g.nodes[i];
    if (!is_pure(n)) continue;
    bool used = false;
    for (int o : n.outputs) used |= uses[static_cast<size_t>(o)] > 0;
    if (used) continue;
    dead[i] = 1;
    ++removed;
    for (int v : n.inputs()) --uses[static_cast<size_t>(v)];
  }
  erase_nodes(g, dead);
  g.compact();
  return removed;
}

int eliminate_common_subexpressions(Graph& g) {
  std::unordered_map<std::string, size_t> seen;
  std::vector<char> dead(g.nodes.size(), 0);
  const std::vector<char> written = written_values(g);
  int merged = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!is_pure(n)) {
      // A write into a tensor may change what an earlier, equal-looking node read.
      if (writes_inputs(n)) seen.clear();
      continue;
    }
    if (n.op->kind == "factory") continue;         // fresh tensors (a caller may write into them)
    if (any_output_written(n, written)) continue;  // two results, one of them written later
    std::string key = n.name();
    for (const Arg& a : n.args) {
      key += '|';
      if (a.kind == Arg::Kind::Tensor) {
        key += std::string("v") + std::to_string(a.value);
      } else if (a.kind == Arg::Kind::TensorList) {
        key += "L";
        for (int v : a.values) key += std::to_string(v) + ",";
      } else {
        key += detail::attr_key(a.attr);
      }
    }
    auto [it, fresh] = seen.emplace(std::move(key), i);
    if (fresh) continue;
    const Node& first = g.nodes[it->second];
    for (size_t k = 0; k < n.outputs.size(); ++k) g.replace_uses(n.outputs[k], first.outputs[k]);
    dead[i] = 1;
    ++merged;
  }
  erase_nodes(g, dead);
  g.compact();
  return merged;
}

int freeze_parameters(Graph& g) {
  int n = 0;
  for (size_t id = 0; id < g.values.size(); ++id) {
    Value& v = g.values[id];
    if (v.kind != ValueKind::Parameter && v.kind != ValueKind::Buffer) continue;
    v.kind = ValueKind::Constant;
    g.tensors[id] = g.tensors[id].detach();
    ++n;
  }
  return n;
}

int fold_constants(Graph& g) {
  // A constant that some node writes into is not a constant of the run; nor is a result that is
  // written later (each run must compute it afresh).
  std::vector<char> written = written_values(g);
  NoGradGuard no_grad;
  std::vector<char> dead(g.nodes.size(), 0);
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    Node& n = g.nodes[i];
    if (!is_pure(n) || n.op->kind == "random" || any_output_written(n, written)) continue;
    bool all_const = true;
    for (int v : n.inputs()) all_const &= is_constant(g, v) && !written[static_cast<size_t>(v)];
    if (!all_const) continue;
    if (n.inputs().empty() && n.op->kind != "factory") continue;
    std::vector<Tensor> outs = detail::run_node(n, g);
    if (outs.size() != n.outputs.size()) continue;
    for (size_t k = 0; k < outs.size(); ++k) {
      const int c = detail::new_constant(g, outs[k]);
      written.push_back(0);
      g.replace_uses(n.outputs[k], c);
    }
    dead[i] = 1;
    ++folded;
  }
  erase_nodes(g, dead);
  g.compact();
  return folded;
}

int fold_batch_norm(Graph& g) {
  std::vector<int> uses = g.use_counts();
  std::vector<int> prod = producers(g);
  std::vector<char> dead(g.nodes.size(), 0);
  NoGradGuard no_grad;
  int folded = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& bn = g.nodes[i];
    if (bn.name() != "batch_norm" || writes_inputs(bn)) continue;
    const int x = arg(bn, "input").value;
    const int p = prod[static_cast<size_t>(x)];
    if (p < 0 || uses[static_cast<size_t>(x)] != 1) continue;
    Node& conv = g.nodes[static_cast<size_t>(p)];
    if (conv.name() != "conv2d" && conv.name() != "conv2d.int_padding") continue;
    const int w = arg(conv, "weight").value, b = arg(conv, "bias").value;
    const int rm = arg(bn, "running_mean").value, rv = arg(bn, "running_var").value;
    const int gamma = arg(bn, "weight").value, beta = arg(bn, "bias").value;
    if (!is_constant(g, w) || !is_constant(g, rm) || !is_constant(g, rv)) continue;
    if ((b >= 0 && !is_constant(g, b)) || (gamma >= 0 && !is_constant(g, gamma)) ||
        (beta >= 0 && !is_constant(g, beta)))
      continue;
    const double eps = arg(bn, "eps").attr.get<double>();
    auto t = [&](int id) { return g.tensors[static_cast<size_t>(id)]; };
    const Tensor W = t(w);
    // In float64, then back to the weight's dtype.
    Tensor scale = (t(rv).to(kFloat64) + eps).rsqrt();
    if (gamma >= 0) scale = scale * t(gamma).to(kFloat64);
    Tensor nb = (b >= 0 ? t(b).to(kFloat64) : zeros_like(scale)) - t(rm).to(kFloat64);
    nb = nb * scale;
    if (beta >= 0) nb = nb + t(beta).to(kFloat64);
    Tensor nw = (W.to(kFloat64) * scale.view({-1, 1, 1, 1})).to(W.dtype());
    if (W.suggest_memory_format() == MemoryFormat::ChannelsLast)
      nw = nw.contiguous(MemoryFormat::ChannelsLast);
    nb = nb.to(W.dtype());
    conv.args[static_cast<size_t>(conv.op->schema.index_of("weight"))] =
        Arg::tensor(detail::new_constant(g, nw));
    conv.args[static_cast<size_t>(conv.op->schema.index_of("bias"))] =
        Arg::tensor(detail::new_constant(g, nb));
    g.replace_uses(bn.outputs[0], x);
    dead[i] = 1;
    ++folded;
  }
  erase_nodes(g, dead);
  g.compact();
  return folded;
}

namespace {

// The convolution's arguments with conv2d's list padding (conv2d.int_padding spells it as an int).
bool list_padding_args(const Node& conv, std::vector<Arg>& args) {
  args = conv.args;
  if (conv.name() == "conv2d") return true;
  const size_t pi = static_cast<size_t>(conv.op->schema.index_of("padding"));
  const op::IValue& pad = args[pi].attr;
  if (!pad.is<int64_t>()) return false;
  args[pi] = Arg::attribute(std::vector<int64_t>{pad.get<int64_t>(), pad.get<int64_t>()});
  return true;
}

/// relu(p(...) + other) -> one fused node at the relu's place (the residual may be computed after
/// p, as a ResNet block's downsample branch is): the add has alpha 1, p's output is used only
/// there, `other` has its shape and dtype (the fused kernels do not broadcast), and
/// fused_args(p's node index, other) gives the fused node's arguments (nullopt: p does not fuse).
template <class F>
bool fuse_residual(Graph& g, size_t relu_i, size_t add_i, const std::vector<int>& uses,
                   const std::vector<int>& prod, std::vector<char>& dead,
                   const op::Record* fused_op, const F& fused_args) {
  const Node& add = g.nodes[add_i];
  const op::IValue& alpha = arg(add, "alpha").attr;
  if (!alpha.is<Scalar>() || alpha.get<Scalar>().to<double>() != 1.0) return false;
  for (int side = 0; side < 2; ++side) {
    const int c = add.args[static_cast<size_t>(side)].value;
    const int other = add.args[static_cast<size_t>(1 - side)].value;
    const int cp = c >= 0 ? prod[static_cast<size_t>(c)] : -1;
    if (cp < 0 || dead[static_cast<size_t>(cp)] || uses[static_cast<size_t>(c)] != 1 || other < 0)
      continue;
    const Value& ov = g.values[static_cast<size_t>(other)];
    const Value& cv = g.values[static_cast<size_t>(c)];
    if (!IntArrayRef(ov.sizes).equals(cv.sizes) || ov.dtype != cv.dtype) continue;
    std::optional<std::vector<Arg>> args = fused_args(static_cast<size_t>(cp), other);
    if (!args) continue;
    Node fused;
    fused.op = fused_op;
    fused.args = std::move(*args);
    fused.outputs = g.nodes[relu_i].outputs;
    g.nodes[relu_i] = std::move(fused);
    dead[add_i] = 1;
    dead[static_cast<size_t>(cp)] = 1;
    return true;
  }
  return false;
}

/// batch_norm's arguments as batch_norm_relu's, with `other` (a value id, or -1 for none).
std::vector<Arg> batch_norm_relu_args(const Node& bn, int other) {
  std::vector<Arg> args = bn.args;
  args.insert(args.begin() + 1, Arg::tensor(other));  // -1: None
  return args;
}

/// Can batch norm node `bi` run at `to` instead (later)? Its running statistics (which it
/// updates in training) must be read by nothing else, and a node between that writes into a
/// tensor may write only module buffers the batch norm does not read: another batch norm's
/// statistics, or the counter of batches (`num_batches_tracked.add_(1)`) the BatchNorm modules
/// update in training.
bool can_move_batch_norm(const Graph& g, size_t bi, size_t to, const std::vector<int>& uses,
                         const std::vector<char>& dead) {
  const Node& bn = g.nodes[bi];
  for (const char* stat : {"running_mean", "running_var"}) {
    const int v = arg(bn, stat).value;
    if (v >= 0 && uses[static_cast<size_t>(v)] != 1) return false;
  }
  auto foreign_buffer = [&](int v) {
    if (v < 0) return true;
    if (g.values[static_cast<size_t>(v)].kind != ValueKind::Buffer) return false;
    for (const Arg& a : bn.args)
      if (a.kind == Arg::Kind::Tensor && a.value == v) return false;
    return true;
  };
  for (size_t k = bi + 1; k < to; ++k) {
    const Node& n = g.nodes[k];
    if (dead[k] || !writes_inputs(n)) continue;
    const std::string name = n.name();
    if (name == "batch_norm" || name == "batch_norm_relu") {
      // It writes its running statistics only.
      if (!foreign_buffer(arg(n, "running_mean").value) ||
          !foreign_buffer(arg(n, "running_var").value))
        return false;
      continue;
    }
    // Any tensor it reads may be what it writes.
    for (const Arg& a : n.args) {
      if (a.kind == Arg::Kind::Tensor && !foreign_buffer(a.value)) return false;
      if (a.kind == Arg::Kind::TensorList)
        for (int v : a.values)
          if (!foreign_buffer(v)) return false;
    }
  }
  return true;
}

}  // namespace

int fuse_ops(Graph& g) {
  const op::Record* conv_relu = op::find("conv2d_relu");
  const op::Record* linear_relu = op::find("linear_relu");
  const op::Record* conv_add_relu = op::find("conv2d_add_relu");
  const op::Record* bn_relu = op::find("batch_norm_relu");
  IGNIS_CHECK(conv_relu && linear_relu && conv_add_relu && bn_relu,
              "jit::fuse_ops: the fused ops are not registered");
  std::vector<int> uses = g.use_counts();
  std::vector<int> prod = producers(g);
  std::vector<char> dead(g.nodes.size(), 0);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string name = n.name();
    const bool relu = name == "relu" || name == "relu_";
    const bool add = name == "add.Tensor";
    if (!relu && !add) continue;
    const int x = n.args[0].value;
    const int p = x >= 0 ? prod[static_cast<size_t>(x)] : -1;
    if (p < 0 || dead[static_cast<size_t>(p)] || uses[static_cast<size_t>(x)] != 1) continue;
    Node& prev = g.nodes[static_cast<size_t>(p)];
    const std::string pname = prev.name();
    if (relu && pname == "add.Tensor") {
      // relu(conv2d(...) + other) -> conv2d_add_relu, at the relu's place (other may be
      // computed after the convolution, as a ResNet block's downsample branch is).
      auto conv_args = [&](size_t cp, int other) -> std::optional<std::vector<Arg>> {
        const Node& conv = g.nodes[cp];
        std::vector<Arg> a;
        if (conv.name() != "conv2d" && conv.name() != "conv2d.int_padding") return std::nullopt;
        if (!list_padding_args(conv, a)) return std::nullopt;
        return std::vector<Arg>{a[0], a[1], a[2], Arg::tensor(other), a[3], a[4], a[5], a[6]};
      };
      // relu(batch_norm(x) + other) -> batch_norm_relu(x, other, ...), the batch norm moved.
      auto bn_args = [&](size_t bp, int other) -> std::optional<std::vector<Arg>> {
        if (g.nodes[bp].name() != "batch_norm" || !can_move_batch_norm(g, bp, i, uses, dead))
          return std::nullopt;
        return batch_norm_relu_args(g.nodes[bp], other);
      };
      const size_t add_i = static_cast<size_t>(p);
      if (fuse_residual(g, i, add_i, uses, prod, dead, conv_add_relu, conv_args) ||
          fuse_residual(g, i, add_i, uses, prod, dead, bn_relu, bn_args))
        ++fused;
      continue;
    }
    if (relu && pname == "batch_norm") {
      // relu(batch_norm(x)) -> batch_norm_relu(x, None, ...) at the batch norm's place.
      prev.args = batch_norm_relu_args(prev, -1);
      prev.op = bn_relu;
    } else if (relu && (pname == "conv2d" || pname == "linear")) {
      // Same schema: the fused record takes the producer's arguments as they are.
      prev.op = pname == "conv2d" ? conv_relu : linear_relu;
    } else if (relu && pname == "conv2d.int_padding") {
      // conv2d_relu spells the padding as a list.
      std::vector<Arg> args;
      if (!list_padding_args(prev, args)) continue;
      prev.args = std::move(args);
      prev.op = conv_relu;
    } else if (add && pname == "linear" && arg(prev, "bias").value < 0) {
      // linear(x, w) + b, b a constant vector of the output's width and dtype, alpha 1.
      const int b = n.args[1].value;
      const Value& out = g.values[static_cast<size_t>(x)];
      if (!is_constant(g, b)) continue;
      const Value& bv = g.values[static_cast<size_t>(b)];
      const op::IValue& alpha = arg(n, "alpha").attr;
      const bool alpha_one = alpha.is<Scalar>() && alpha.get<Scalar>().to<double>() == 1.0;
      if (!alpha_one || bv.sizes.size() != 1 || out.sizes.empty() ||
          bv.sizes[0] != out.sizes[out.sizes.size() - 1] || bv.dtype != out.dtype)
        continue;
      prev.args[static_cast<size_t>(prev.op->schema.index_of("bias"))] = Arg::tensor(b);
    } else {
      continue;
    }
    g.replace_uses(n.outputs[0], x);
    dead[i] = 1;
    ++fused;
  }
  erase_nodes(g, dead);
  g.compact();
  return fused;
}

namespace {

/// The activation name linear_pointwise takes for a unary node, or "".
std::string pointwise_activation(const Node& n) {
  const std::string name = n.name();
  if (name == "relu" || name == "relu_") return "relu";  // relu_ on a product used only there
  if (name == "silu") return "silu";
  if (name == "gelu" && n.args[1].attr.is<std::string>()) {
    const std::string& a = n.args[1].attr.get<std::string>();
    if (a == "none") return "gelu";
    if (a == "tanh") return "gelu_tanh";
  }
  return "";
}

/// Does a node in (first, last) write into a tensor? (Moving a read past it would change it.)
bool writes_between(const Graph& g, size_t first, size_t last) {
  for (size_t k = first + 1; k < last; ++k)
    if (detail::writes_inputs(g.nodes[k])) return true;
  return false;
}

}  // namespace

namespace {

enum class Family { linear, conv };

/// A linear or convolution node unpacked as the base of a pointwise tail: the product's own
/// arguments (linear: input, weight, bias; conv: input, weight, bias, stride, padding as a list,
/// dilation, groups) and the tail it already has.
struct PointwiseBase {
  std::vector<Arg> args;
  int other = -1;
  std::string act = "none";
  bool add_first = false;
};

std::optional<PointwiseBase> pointwise_base(const Node& n, Family f) {
  const std::string name = n.name();
  PointwiseBase b;
  auto tail = [&](size_t other_at, size_t act_at) {
    b.other = n.args[other_at].value;
    if (!n.args[act_at].attr.is<std::string>() || !n.args[act_at + 1].attr.is<bool>()) return false;
    b.act = n.args[act_at].attr.get<std::string>();
    b.add_first = n.args[act_at + 1].attr.get<bool>();
    return true;
  };
  if (f == Family::linear) {
    if (name != "linear" && name != "linear_relu" && name != "linear_pointwise") return {};
    b.args.assign(n.args.begin(), n.args.begin() + 3);
    if (name == "linear_relu") b.act = "relu";
    if (name == "linear_pointwise" && !tail(3, 4)) return {};
    return b;
  }
  if (name == "conv2d_pointwise") {
    b.args = {n.args[0], n.args[1], n.args[2], n.args[4], n.args[5], n.args[6], n.args[7]};
    if (!tail(3, 8)) return {};
    return b;
  }
  if (name == "conv2d_relu") {  // conv2d's schema, with relu
    b.args = n.args;
    b.act = "relu";
    return b;
  }
  if (name != "conv2d" && name != "conv2d.int_padding") return {};
  if (!list_padding_args(n, b.args)) return {};
  return b;
}

Node pointwise_node(const op::Record* op, Family f, const PointwiseBase& b) {
  Node n;
  n.op = op;
  n.args = {b.args[0], b.args[1], b.args[2], Arg::tensor(b.other)};
  if (f == Family::conv) n.args.insert(n.args.end(), b.args.begin() + 3, b.args.end());
  n.args.push_back(Arg::attribute(b.act));
  n.args.push_back(Arg::attribute(b.add_first));
  return n;
}

/// fuse_linear_pointwise and fuse_conv_pointwise: an activation, or an add of a tensor of the
/// same shape and dtype, joins the product that is its input's only producer.
int fuse_pointwise(Graph& g, Family f, const char* fused_name) {
  const op::Record* fused_op = op::find(fused_name);
  IGNIS_CHECK(fused_op, "jit::fuse_pointwise: ", fused_name, " is not registered");
  std::vector<int> uses = g.use_counts();
  const std::vector<int> prod = producers(g);
  std::vector<char> dead(g.nodes.size(), 0);
  int fused = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    const std::string act = pointwise_activation(n);
    const bool add = n.name() == "add.Tensor";
    if (act.empty() && !add) continue;
    if (!act.empty()) {
      // product (+ other) -> activation: the product node takes the activation, after the
      // residual when it has one.
      const int v = n.args[0].value;
      const int p = v >= 0 ? prod[static_cast<size_t>(v)] : -1;
      if (p < 0 || dead[static_cast<size_t>(p)] || uses[static_cast<size_t>(v)] != 1) continue;
      Node& base_node = g.nodes[static_cast<size_t>(p)];
      std::optional<PointwiseBase> b = pointwise_base(base_node, f);
      if (!b || b->act != "none") continue;
      b->act = act;
      b->add_first = b->other >= 0;
      Node node = pointwise_node(fused_op, f, *b);
      node.outputs = base_node.outputs;
      base_node = std::move(node);
      uses[static_cast<size_t>(v)] = uses[static_cast<size_t>(n.outputs[0])];
      g.replace_uses(n.outputs[0], v);
      dead[i] = 1;
      ++fused;
      continue;
    }
    // product (-> activation) -> add(., other): the fused node with `other`, at the add's place
    // (other may be computed after the product).
    const op::IValue& alpha = arg(n, "alpha").attr;
    if (!alpha.is<Scalar>() || alpha.get<Scalar>().to<double>() != 1.0) continue;
    for (int side = 0; side < 2; ++side) {
      const int c = n.args[static_cast<size_t>(side)].value;
      const int other = n.args[static_cast<size_t>(1 - side)].value;
      const int p = c >= 0 ? prod[static_cast<size_t>(c)] : -1;
      if (p < 0 || other < 0 || other == c || dead[static_cast<size_t>(p)] ||
          uses[static_cast<size_t>(c)] != 1)
        continue;
      std::optional<PointwiseBase> b = pointwise_base(g.nodes[static_cast<size_t>(p)], f);
      if (!b || b->other >= 0) continue;
      const Value& ov = g.values[static_cast<size_t>(other)];
      const Value& cv = g.values[static_cast<size_t>(c)];
      if (!IntArrayRef(ov.sizes).equals(cv.sizes) || ov.dtype != cv.dtype) continue;
      if (writes_between(g, static_cast<size_t>(p), i)) continue;
      b->other = other;
      b->add_first = false;
      Node node = pointwise_node(fused_op, f, *b);
      node.outputs = n.outputs;
      g.nodes[i] = std::move(node);
      dead[static_cast<size_t>(p)] = 1;
      ++fused;
      break;
    }
  }
  erase_nodes(g, dead);
  g.compact();
  return fused;
}

}  // namespace

int fuse_linear_pointwise(Graph& g) {
  return fuse_pointwise(g, Family::linear, "linear_pointwise");
}

int fuse_conv_pointwise(Graph& g) { return fuse_pointwise(g, Family::conv, "conv2d_pointwise"); }

int eliminate_identities(Graph& g) {
  std::vector<char> dead(g.nodes.size(), 0);
  int removed = 0;
  for (size_t i = 0; i < g.nodes.size(); ++i) {
    const Node& n = g.nodes[i];
    if (n.name() != "dropout" || n.outputs.size() != 1 || n.args[0].value < 0) continue;
    // dropout(x, p, train=False) and dropout(x, 0, ...) return x itself (eager returns the same
    // tensor), so its readers may read x.
    const op::IValue& train = arg(n, "train").attr;
    const op::IValue& p = arg(n, "p").attr;
    const bool identity =
        (train.is<bool>() && !train.get<bool>()) || (p.is<double>() && p.get<double>() == 0.0);
    if (!identity) continue;
    g.replace_uses(n.outputs[0], n.args[0].value);
    dead[i] = 1;
    ++removed;
  }
  erase_nodes(g, dead);
  g.compact();
  return removed;
}

void optimize(Graph& g) {
  eliminate_identities(g);
  eliminate_common_subexpressions(g);
  fuse_ops(g);
  fuse_linear_pointwise(g);
  fuse_conv_pointwise(g);
  fuse_elementwise(g);
  fuse_reductions(g);
  eliminate_dead_code(g);
}

void freeze(Graph& g) {
  eliminate_identities(g);
  freeze_parameters(g);
  fold_batch_norm(g);
  fold_constants(g);
  fuse_ops(g);
  fuse_linear_pointwise(g);
  fuse_conv_pointwise(g);
  eliminate_common_subexpressions(g);
  fuse_elementwise(g);
  fuse_reductions(g);
  eliminate_dead_code(g);
}

}  // namespace ignis::jit
