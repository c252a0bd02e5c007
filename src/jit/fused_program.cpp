// Parsing and printing fused elementwise programs (see fused_program.h).
#include "jit/fused_program.h"

#include <algorithm>
#include <cmath>
#include <cstdio>
#include <cstdlib>

#include "ignis/error.h"

namespace ignis::jit::detail {

namespace {

const FusedOpInfo kOps[] = {
#define IGNIS_X(name, F, arity, params) {#name, #F, arity, params},
    IGNIS_FUSED_BASE_OPS(IGNIS_X)
#undef IGNIS_X
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad) {#name, #F, 1, 0},
#include "ignis/float_unary_ops.def"
    {"dropout", "", 2, 1},
};
constexpr int kNumOps = static_cast<int>(sizeof(kOps) / sizeof(kOps[0]));

[[noreturn]] void fail(std::string_view text, size_t at, const std::string& what) {
  throw Error("fused_elementwise: invalid program at character " + std::to_string(at) + " of '" +
              std::string(text.substr(0, 200)) + (text.size() > 200 ? "...'" : "'") + ": " + what);
}

class Parser {
 public:
  Parser(std::string_view text, int num_inputs) : s_(text), num_inputs_(num_inputs) {}

  FusedProgram parse() {
    if (num_inputs_ < 1 || num_inputs_ > kMaxFusedInputs) {
      fail(s_, 0, "expected 1 to " + std::to_string(kMaxFusedInputs) + " inputs, got " +
                      std::to_string(num_inputs_));
    }
    FusedProgram p;
    p.num_inputs = num_inputs_;
    do {
      if (static_cast<int>(p.code.size()) == kMaxFusedInstrs) {
        fail(s_, i_, "more than " + std::to_string(kMaxFusedInstrs) + " instructions");
      }
      p.code.push_back(instr(static_cast<int>(p.code.size())));
    } while (eat(';'));
    if (i_ != s_.size()) fail(s_, i_, "expected ';' or the end");
    return p;
  }

 private:
  bool eat(char c) {
    if (i_ < s_.size() && s_[i_] == c) {
      ++i_;
      return true;
    }
    return false;
  }
  void expect(char c) {
    if (!eat(c)) fail(s_, i_, std::string("expected '") + c + "'");
  }

  FusedInstr instr(int index) {
    const size_t start = i_;
    while (i_ < s_.size() && (std::isalnum(static_cast<unsigned char>(s_[i_])) || s_[i_] == '_'))
      ++i_;
    const std::string_view name = s_.substr(start, i_ - start);
    FusedInstr in{};
    if (!fused_op_by_name(name, in.op)) fail(s_, start, "unknown op '" + std::string(name) + "'");
    const FusedOpInfo& info = fused_op_info(in.op);
    expect('(');
    // Any operand of an op of two or three may be a number (rsub: sub(1,v0), a number over a
    // tensor; masked_fill: where(i1,-inf,i0)); dropout's second is its stream.
    in.a = operand(index, info.arity >= 2 && in.op != FusedOp::dropout);
    for (int k = 1; k < info.arity; ++k) {
      expect(',');
      operand_at(in, k) = operand(index, true);
    }
    double* const params[] = {&in.param, &in.param2, &in.param3};
    for (int k = 0; k < info.params; ++k) {
      expect(',');
      *params[k] = number();
    }
    if (in.op == FusedOp::softplus && in.param == 0)
      fail(s_, start, "softplus's beta must be nonzero (eager softplus refuses 0)");
    if (in.op == FusedOp::dropout) {
      // (NaN fails the range test before the cast, which would be undefined for it.)
      if (in.b.kind != FusedOperand::Kind::Number ||
          !(in.b.number >= 0 && in.b.number < kMaxFusedInstrs) ||
          in.b.number != static_cast<int>(in.b.number)) {
        fail(s_, start, "dropout's stream must be a whole number from 0 to " +
                            std::to_string(kMaxFusedInstrs - 1));
      }
      if (!(in.param > 0 && in.param < 1)) {
        fail(s_, start, "dropout's probability must be between 0 and 1 (exclusive), got " +
                            format_number(in.param));
      }
    }
    expect(')');
    return in;
  }

  FusedOperand operand(int index, bool number_allowed) {
    FusedOperand o;
    const size_t at = i_;
    const bool ref = i_ < s_.size() && (s_[i_] == 'v' || (s_[i_] == 'i' && s_.substr(i_, 3) != "inf"));
    if (ref) {
      const bool input = s_[i_++] == 'i';
      o.kind = input ? FusedOperand::Kind::Input : FusedOperand::Kind::Value;
      o.index = integer();
      const int bound = input ? num_inputs_ : index;
      if (o.index >= bound) {
        fail(s_, at, input ? "input i" + std::to_string(o.index) + " of a node with " +
                                 std::to_string(num_inputs_) + " input(s)"
                           : "value v" + std::to_string(o.index) + " used before it is defined");
      }
      return o;
    }
    if (!number_allowed) fail(s_, at, "expected an input (i<k>) or a value (v<j>)");
    o.kind = FusedOperand::Kind::Number;
    o.number = number();
    return o;
  }

  int integer() {
    const size_t start = i_;
    long v = 0;
    while (i_ < s_.size() && std::isdigit(static_cast<unsigned char>(s_[i_])) && i_ - start < 6) {
      v = v * 10 + (s_[i_] - '0');
      ++i_;
    }
    if (i_ == start) fail(s_, start, "expected an index");
    return static_cast<int>(v);
  }

  double number() {
    const size_t start = i_;
    while (i_ < s_.size() && s_[i_] != ',' && s_[i_] != ')' && s_[i_] != ';' && i_ - start < 40)
      ++i_;
    const std::string tok(s_.substr(start, i_ - start));
    if (tok == "inf") return INFINITY;
    if (tok == "-inf") return -INFINITY;
    if (tok == "nan") return NAN;
    char* end = nullptr;
    const double v = tok.empty() ? 0 : std::strtod(tok.c_str(), &end);
    if (tok.empty() || end != tok.c_str() + tok.size() || !std::isfinite(v)) {
      fail(s_, start, "expected a number, got '" + tok + "'");
    }
    return v;
  }

  std::string_view s_;
  int num_inputs_;
  size_t i_ = 0;
};

std::string operand_str(const FusedOperand& o) {
  switch (o.kind) {
    case FusedOperand::Kind::Input:
    case FusedOperand::Kind::Value: {
      std::string name(1, o.kind == FusedOperand::Kind::Input ? 'i' : 'v');
      return name += std::to_string(o.index);  // (not "i" + ...: GCC 12's -Wrestrict)
    }
    case FusedOperand::Kind::Number: return format_number(o.number);
  }
  return "";
}

}  // namespace

const FusedOpInfo& fused_op_info(FusedOp op) { return kOps[static_cast<int>(op)]; }

int operand_count(const FusedInstr& in) {
  return in.op == FusedOp::dropout ? 1 : fused_op_info(in.op).arity;
}

bool fused_op_by_name(std::string_view name, FusedOp& op) {
  for (int i = 0; i < kNumOps; ++i) {
    if (name == kOps[i].name) {
      op = static_cast<FusedOp>(i);
      return true;
    }
  }
  return false;
}

std::string format_number(double v) {
  if (std::isnan(v)) return "nan";
  if (std::isinf(v)) return v > 0 ? "inf" : "-inf";
  char buf[40];
  std::snprintf(buf, sizeof buf, "%.17g", v);
  return buf;
}

std::vector<std::string> split_at(std::string_view text, char sep) {
  std::vector<std::string> parts(1);
  for (char ch : text) {
    if (ch == sep)
      parts.emplace_back();
    else
      parts.back() += ch;
  }
  return parts;
}

bool is_fused_statistic(std::string_view name) {
  return name == "sum" || name == "mean" || name == "amax" || name == "amin";
}

std::string FusedProgram::str() const {
  std::string s;
  for (const FusedInstr& in : code) {
    if (!s.empty()) s += ';';
    const FusedOpInfo& info = fused_op_info(in.op);
    s += info.name;
    s += '(' + operand_str(in.a);
    for (int k = 1; k < info.arity; ++k) s += ',' + operand_str(operand_at(in, k));
    const double params[] = {in.param, in.param2, in.param3};
    for (int k = 0; k < info.params; ++k) s += ',' + format_number(params[k]);
    s += ')';
  }
  return s;
}

int FusedProgram::random_streams() const {
  int n = 0;
  for (const FusedInstr& in : code)
    if (in.op == FusedOp::dropout) n = std::max(n, static_cast<int>(in.b.number) + 1);
  return n;
}

bool FusedProgram::reads_input(int k) const {
  // Back from the result: the instructions it depends on; does one of them read input k?
  std::vector<char> live(code.size(), 0);
  if (!code.empty()) live.back() = 1;
  for (size_t j = code.size(); j-- > 0;) {
    if (!live[j]) continue;
    bool reads = false;
    for_each_operand(code[j], [&](const FusedOperand& o) {
      reads = reads || (o.kind == FusedOperand::Kind::Input && o.index == k);
      if (o.kind == FusedOperand::Kind::Value) live[static_cast<size_t>(o.index)] = 1;
    });
    if (reads) return true;
  }
  return false;
}

bool fused_text_is_random(std::string_view text) {
  return text.find("dropout(") != std::string_view::npos;
}

FusedProgram parse_fused_program(std::string_view text, int num_inputs) {
  return Parser(text, num_inputs).parse();
}

}  // namespace ignis::jit::detail
