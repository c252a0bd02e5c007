// mv, baddbmm and einsum: compositions of matmul records. einsum parses the equation, takes the
// diagonals of repeated subscripts, sums out each subscript as soon as no later operand and not
// the output needs it, and contracts the operands left to right, each pair as one bmm
// (permute + reshape into [batch, rows, k] @ [batch, k, cols]): no elementwise loop over the
// contracted subscripts.
#include <algorithm>
#include <array>
#include <sstream>

#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "ignis/ops.h"

namespace ignis {

IGNIS_OP(mv, "mv(Tensor self, Tensor vec) -> Tensor", Tensor(const Tensor&, const Tensor&), mv,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(baddbmm,
         "baddbmm(Tensor self, Tensor batch1, Tensor batch2, *, Scalar beta=1, Scalar alpha=1) -> "
         "Tensor",
         Tensor(const Tensor&, const Tensor&, const Tensor&, Scalar, Scalar), baddbmm,
         {.differentiable = true, .kind = "composite"});
IGNIS_OP(einsum, "einsum(str equation, Tensor[] tensors) -> Tensor",
         Tensor(const std::string&, const std::vector<Tensor>&), einsum,
         {.differentiable = true, .kind = "composite"});

Tensor mv(const Tensor& self, const Tensor& vec) {
  IGNIS_DISPATCH(mv, mv, self, vec);
  IGNIS_CHECK(self.defined() && vec.defined(), "mv: called with an undefined tensor");
  IGNIS_CHECK(self.dim() == 2 && vec.dim() == 1,
              "mv: expected a 2-d matrix and a 1-d vector, but got shapes ", self.sizes(), " and ",
              vec.sizes());
  IGNIS_CHECK(self.size(1) == vec.size(0), "mv: shapes ", self.sizes(), " and ", vec.sizes(),
              " cannot be multiplied (", self.size(1), " != ", vec.size(0), ")");
  return mm(self, vec.unsqueeze(1)).squeeze(1);
}

Tensor baddbmm(const Tensor& self, const Tensor& batch1, const Tensor& batch2, Scalar beta,
               Scalar alpha) {
  IGNIS_DISPATCH(baddbmm, baddbmm, self, batch1, batch2, beta, alpha);
  IGNIS_CHECK(self.defined() && batch1.defined() && batch2.defined(),
              "baddbmm: called with an undefined tensor");
  IGNIS_CHECK(batch1.dim() == 3 && batch2.dim() == 3,
              "baddbmm: batch1 and batch2 must be 3-d, but got shapes ", batch1.sizes(), " and ",
              batch2.sizes());
  IGNIS_CHECK(batch1.size(0) == batch2.size(0) && batch1.size(2) == batch2.size(1),
              "baddbmm: batch1 of shape ", batch1.sizes(), " and batch2 of shape ", batch2.sizes(),
              " cannot be multiplied");
  const Shape out_shape = {batch1.size(0), batch1.size(1), batch2.size(2)};
  bool fits = self.dim() <= 3;
  for (int64_t i = 1; fits && i <= self.dim(); ++i) {
    const int64_t s = self.size(self.dim() - i);
    fits = s == 1 || s == out_shape[3 - i];
  }
  IGNIS_CHECK(fits, "baddbmm: self of shape ", self.sizes(), " cannot be broadcast to ",
              IntArrayRef(out_shape));
  IGNIS_CHECK(self.dtype() == batch1.dtype(), "baddbmm: self is ", self.dtype(),
              " but batch1 and batch2 are ", batch1.dtype());
  Tensor prod = bmm(batch1, batch2);
  if (alpha.to_double() != 1) prod = prod * alpha;
  // beta = 0 ignores self entirely (its NaN and inf do not propagate), as PyTorch does.
  if (beta.to_double() == 0) return prod;
  return (beta.to_double() == 1 ? self : self * beta) + prod;
}

namespace {

constexpr int kLetters = 52;  // a-z, A-Z; ellipsis dims get the labels after these

int letter_label(char c) {
  if (c >= 'a' && c <= 'z') return c - 'a';
  if (c >= 'A' && c <= 'Z') return 26 + (c - 'A');
  return -1;
}
char label_char(int l) {
  return l < 26 ? static_cast<char>('a' + l) : static_cast<char>('A' + l - 26);
}

/// One term of the equation: its letter labels, and where "..." stands among them (-1: none).
struct Term {
  std::vector<int> letters;
  int ellipsis_at = -1;
};

/// A tensor with a label per dim.
struct Labeled {
  Tensor t;
  std::vector<int> labels;
};

Term parse_term(const std::string& eq, size_t begin, size_t end, const std::string& what) {
  Term term;
  for (size_t i = begin; i < end; ++i) {
    const char c = eq[i];
    if (c == ' ') continue;
    if (c == '.') {
      IGNIS_CHECK(term.ellipsis_at < 0, "einsum: found '.' for ", what,
                  " after an ellipsis was already found, in the equation '", eq, "'");
      IGNIS_CHECK(i + 2 < end && eq[i + 1] == '.' && eq[i + 2] == '.', "einsum: found '.' for ",
                  what, " that is not part of any ellipsis, in the equation '", eq, "'");
      term.ellipsis_at = static_cast<int>(term.letters.size());
      i += 2;
      continue;
    }
    const int l = letter_label(c);
    IGNIS_CHECK(l >= 0, "einsum: invalid subscript '", std::string(1, c), "' at index ", i,
                " of the equation '", eq, "' (subscripts must be in [a-zA-Z])");
    term.letters.push_back(l);
  }
  return term;
}

/// Sums x over the dims whose label `drop` says so, removing them from the labels.
Labeled sum_out(Labeled x, const std::function<bool(int)>& drop) {
  Shape dims;
  std::vector<int> kept;
  for (size_t i = 0; i < x.labels.size(); ++i) {
    if (drop(x.labels[i])) {
      dims.push_back(static_cast<int64_t>(i));
    } else {
      kept.push_back(x.labels[i]);
    }
  }
  if (dims.empty()) return x;
  return {sum(x.t, dims), kept};
}

int index_of(const std::vector<int>& v, int l) {
  auto it = std::find(v.begin(), v.end(), l);
  return it == v.end() ? -1 : static_cast<int>(it - v.begin());
}

/// Contracts a and b over the labels in both that `keep` does not ask for, as one bmm:
/// a [batch, a-only, contracted] @ b [batch, contracted, b-only].
Labeled contract(Labeled a, Labeled b, const std::function<bool(int)>& keep) {
  std::vector<int> batch, contracted, a_only, b_only;
  for (int l : a.labels) {
    const int j = index_of(b.labels, l);
    if (j < 0) {
      a_only.push_back(l);
      continue;
    }
    const int i = index_of(a.labels, l);
    const int64_t sa = a.t.size(i), sb = b.t.size(j);
    if (keep(l)) {
      batch.push_back(l);
      // A broadcast (size 1) side is expanded to the other's size.
      if (sa != sb && sa == 1) {
        Shape s = a.t.sizes().shape();
        s[i] = sb;
        a.t = a.t.expand(s);
      } else if (sa != sb && sb == 1) {
        Shape s = b.t.sizes().shape();
        s[j] = sa;
        b.t = b.t.expand(s);
      }
    } else {
      // A broadcast side is constant along l: the other side is summed over it first.
      if (sa != sb && sa == 1) b.t = sum(b.t, {j}, true);
      if (sa != sb && sb == 1) a.t = sum(a.t, {i}, true);
      contracted.push_back(l);
    }
  }
  for (int l : b.labels) {
    if (index_of(a.labels, l) < 0) b_only.push_back(l);
  }
  auto arrange = [](const Labeled& x, const std::vector<std::vector<int>*>& groups,
                    std::vector<int64_t>& sizes) {
    Shape perm;
    std::vector<int64_t> group_sizes;
    for (const auto* g : groups) {
      int64_t n = 1;
      for (int l : *g) {
        const int i = index_of(x.labels, l);
        perm.push_back(i);
        n *= x.t.size(i);
      }
      group_sizes.push_back(n);
    }
    sizes = group_sizes;
    return x.t.permute(perm).reshape(IntArrayRef(group_sizes));
  };
  std::vector<int64_t> as, bs;
  const Tensor a3 = arrange(a, {&batch, &a_only, &contracted}, as);
  const Tensor b3 = arrange(b, {&batch, &contracted, &b_only}, bs);
  const Tensor prod = bmm(a3, b3);
  Shape shape;
  std::vector<int> labels;
  for (int l : batch) {
    shape.push_back(a.t.size(index_of(a.labels, l)));
    labels.push_back(l);
  }
  for (int l : a_only) {
    shape.push_back(a.t.size(index_of(a.labels, l)));
    labels.push_back(l);
  }
  for (int l : b_only) {
    shape.push_back(b.t.size(index_of(b.labels, l)));
    labels.push_back(l);
  }
  return {prod.reshape(shape), labels};
}

}  // namespace

Tensor einsum(const std::string& equation, const std::vector<Tensor>& tensors) {
  IGNIS_DISPATCH(einsum, einsum, equation, tensors);
  const std::string& eq = equation;
  IGNIS_CHECK(!tensors.empty(), "einsum: expected at least one operand, for the equation '", eq,
              "'");
  const size_t arrow = eq.find("->");
  const size_t lhs_end = arrow == std::string::npos ? eq.size() : arrow;
  std::vector<Term> terms;
  for (size_t start = 0;;) {
    const size_t comma = std::min(eq.find(',', start), lhs_end);
    terms.push_back(parse_term(eq, start, comma, "operand " + std::to_string(terms.size())));
    if (comma >= lhs_end) break;
    start = comma + 1;
  }
  IGNIS_CHECK(terms.size() == tensors.size(), "einsum: the equation '", eq, "' has ", terms.size(),
              " operand(s) but ", tensors.size(), " tensor(s) were given");
  // The operands' dims: letters, and the ellipsis dims right-aligned across operands.
  int64_t ell_ndim = 0;
  for (size_t k = 0; k < terms.size(); ++k) {
    const Tensor& t = tensors[k];
    IGNIS_CHECK(t.defined(), "einsum: operand ", k, " is undefined");
    IGNIS_CHECK(t.dtype() == tensors[0].dtype(), "einsum: operand ", k, " is ", t.dtype(),
                " but operand 0 is ", tensors[0].dtype(), " (all operands need one dtype)");
    const int64_t nl = static_cast<int64_t>(terms[k].letters.size());
    if (terms[k].ellipsis_at < 0) {
      IGNIS_CHECK(nl == t.dim(), "einsum: the equation '", eq, "' gives operand ", k, " ", nl,
                  " subscript(s) but it has ", t.dim(), " dimension(s) (shape ", t.sizes(),
                  ") and no ellipsis");
    } else {
      IGNIS_CHECK(nl <= t.dim(), "einsum: the equation '", eq, "' gives operand ", k, " ", nl,
                  " subscript(s) besides its ellipsis but it has only ", t.dim(),
                  " dimension(s) (shape ", t.sizes(), ")");
      ell_ndim = std::max(ell_ndim, t.dim() - nl);
    }
  }
  std::vector<Labeled> ops;
  const int nlabels = kLetters + static_cast<int>(ell_ndim);
  std::vector<int64_t> size_of(static_cast<size_t>(nlabels), -1);
  std::vector<int> count(static_cast<size_t>(nlabels), 0);  // operands using each label
  std::vector<int> written(kLetters, 0);                    // occurrences in the equation
  for (const Term& t : terms) {
    for (int l : t.letters) ++written[l];
  }
  for (size_t k = 0; k < terms.size(); ++k) {
    const Term& term = terms[k];
    Labeled x{tensors[k], {}};
    const int64_t ne = term.ellipsis_at < 0 ? 0 : x.t.dim() - int64_t(term.letters.size());
    for (int i = 0; i < static_cast<int>(term.letters.size()); ++i) {
      if (i == term.ellipsis_at) {
        for (int64_t e = 0; e < ne; ++e) x.labels.push_back(kLetters + int(ell_ndim - ne + e));
      }
      x.labels.push_back(term.letters[i]);
    }
    if (term.ellipsis_at == static_cast<int>(term.letters.size())) {
      for (int64_t e = 0; e < ne; ++e) x.labels.push_back(kLetters + int(ell_ndim - ne + e));
    }
    // Repeated subscripts: the diagonal (a mask and a sum: differentiable, and twice).
    for (size_t i = 0; i < x.labels.size(); ++i) {
      for (size_t j = i + 1; j < x.labels.size();) {
        if (x.labels[j] != x.labels[i]) {
          ++j;
          continue;
        }
        const int64_t n = x.t.size(int64_t(i)), m = x.t.size(int64_t(j));
        IGNIS_CHECK(n == m, "einsum: subscript ", std::string(1, label_char(x.labels[i])),
                    " is repeated for operand ", k, " but the sizes don't match, ", n, " != ", m,
                    " (equation '", eq, "')");
        Shape at(x.labels.size(), 1), at2(x.labels.size(), 1);
        at[i] = n;
        at2[j] = n;
        const Tensor pos = arange(n, TensorOptions(kInt64).device(x.t.device()));
        const Tensor mask = ignis::eq(pos.view(at), pos.view(at2));
        x.t = sum(where(mask, x.t, 0), {int64_t(j)});
        x.labels.erase(x.labels.begin() + int64_t(j));
      }
    }
    for (size_t i = 0; i < x.labels.size(); ++i) {
      const int l = x.labels[i];
      const int64_t s = x.t.size(int64_t(i));
      if (size_of[l] < 0 || size_of[l] == 1) {
        size_of[l] = size_of[l] < 0 || s != 1 ? s : size_of[l];
      } else {
        IGNIS_CHECK(s == 1 || s == size_of[l], "einsum: subscript ",
                    l < kLetters ? std::string(1, label_char(l)) : std::string("..."), " has size ",
                    s, " for operand ", k, " which does not broadcast with the size ", size_of[l],
                    " seen before (equation '", eq, "')");
      }
      ++count[l];
    }
    ops.push_back(std::move(x));
  }
  // The output's labels: as written, or the ellipsis dims then the letters used once, sorted.
  std::vector<int> out;
  if (arrow != std::string::npos) {
    const Term t = parse_term(eq, arrow + 2, eq.size(), "the output");
    for (int i = 0; i <= static_cast<int>(t.letters.size()); ++i) {
      if (i == t.ellipsis_at) {
        for (int64_t e = 0; e < ell_ndim; ++e) out.push_back(kLetters + int(e));
      }
      if (i == static_cast<int>(t.letters.size())) break;
      const int l = t.letters[i];
      IGNIS_CHECK(index_of(out, l) < 0, "einsum: output subscript ", std::string(1, label_char(l)),
                  " appears more than once in the output of '", eq, "'");
      IGNIS_CHECK(count[l] > 0, "einsum: output subscript ", std::string(1, label_char(l)),
                  " does not appear in the inputs of '", eq, "'");
      out.push_back(l);
    }
  } else {
    for (int64_t e = 0; e < ell_ndim; ++e) out.push_back(kLetters + int(e));
    for (char c = 'A'; c <= 'Z'; ++c) {
      if (written[letter_label(c)] == 1) out.push_back(letter_label(c));
    }
    for (char c = 'a'; c <= 'z'; ++c) {
      if (written[letter_label(c)] == 1) out.push_back(letter_label(c));
    }
  }
  auto in_out = [&](int l) { return index_of(out, l) >= 0; };
  // Left to right: a label is summed out of an operand once neither the output nor another
  // remaining operand has it; a pair is contracted over the labels only they share.
  std::vector<int> remaining = count;  // uses by the operands not yet folded in
  Labeled acc = ops[0];
  for (int l : acc.labels) --remaining[l];
  acc = sum_out(acc, [&](int l) { return !in_out(l) && remaining[l] == 0; });
  for (size_t k = 1; k < ops.size(); ++k) {
    Labeled b = ops[k];
    for (int l : b.labels) --remaining[l];
    b = sum_out(
        b, [&](int l) { return !in_out(l) && remaining[l] == 0 && index_of(acc.labels, l) < 0; });
    acc = contract(acc, b, [&](int l) { return in_out(l) || remaining[l] > 0; });
  }
  acc = sum_out(acc, [&](int l) { return !in_out(l); });
  // Every output label is left (the ellipsis labels come from the widest operand): order them.
  Shape perm;
  for (int l : out) {
    const int i = index_of(acc.labels, l);
    if (i >= 0) perm.push_back(i);
  }
  Tensor r = acc.t.permute(perm);
  return r;
}

Tensor Tensor::mv(const Tensor& vec) const { return ignis::mv(*this, vec); }
Tensor Tensor::baddbmm(const Tensor& batch1, const Tensor& batch2, Scalar beta,
                       Scalar alpha) const {
  return ignis::baddbmm(*this, batch1, batch2, beta, alpha);
}

}  // namespace ignis
