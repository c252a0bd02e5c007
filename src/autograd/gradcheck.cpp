// gradcheck / gradgradcheck: the analytical Jacobian (one backward per output element) against
// central finite differences, in float64, with PyTorch's criterion |a - n| <= atol + rtol * |n|.
#include <cmath>
#include <sstream>

#include "core/tensor_impl.h"
#include "ignis/autograd.h"
#include "ignis/ops.h"

namespace ignis::autograd {

namespace {

using Fn = std::function<variable_list(const variable_list&)>;

// Row-major multi-index of flat element `k` of `shape`, as "[i, j]".
std::string index_str(IntArrayRef shape, int64_t k) {
  std::vector<int64_t> idx(shape.size());
  for (int64_t d = static_cast<int64_t>(shape.size()) - 1; d >= 0; --d) {
    idx[d] = shape[d] == 0 ? 0 : k % shape[d];
    k = shape[d] == 0 ? 0 : k / shape[d];
  }
  std::ostringstream os;
  os << "[";
  for (size_t i = 0; i < idx.size(); ++i) os << (i ? ", " : "") << idx[i];
  os << "]";
  return os.str();
}

// Pointer to flat element `k` (row-major over the shape) of a strided float64 tensor.
double* element_ptr(const Tensor& t, int64_t k) {
  double* p = static_cast<double*>(t.data_ptr());
  for (int64_t d = t.dim() - 1; d >= 0; --d) {
    const int64_t n = t.size(d);
    p += (k % n) * t.stride(d);
    k /= n;
  }
  return p;
}

// The values of t as doubles in row-major order (a copy: outputs may alias the inputs).
std::vector<double> flat_values(const Tensor& t) {
  NoGradGuard ng;
  Tensor c = t.detach().to(kFloat64).contiguous();
  const double* p = c.data_ptr<double>();
  return std::vector<double>(p, p + c.numel());
}

bool is_differentiable_output(const Tensor& t) { return t.defined() && t.is_floating_point(); }

// The outputs of fn at the current input values, flattened per output (empty for outputs that
// are not floating).
std::vector<std::vector<double>> eval(const Fn& fn, const variable_list& inputs) {
  variable_list outs = fn(inputs);
  std::vector<std::vector<double>> v(outs.size());
  for (size_t i = 0; i < outs.size(); ++i) {
    if (is_differentiable_output(outs[i])) v[i] = flat_values(outs[i]);
  }
  return v;
}

void check_inputs(const variable_list& inputs, const char* fn, std::vector<size_t>& diff) {
  for (size_t i = 0; i < inputs.size(); ++i) {
    const Tensor& t = inputs[i];
    if (!t.defined() || !t.requires_grad()) continue;
    IGNIS_CHECK(t.dtype() == kFloat64, fn, ": input ", i, " (shape ", t.sizes(), ") has dtype ",
                t.dtype(),
                "; finite differences need float64 inputs, convert it with "
                ".to(kFloat64) first");
    for (int64_t d = 0; d < t.dim(); ++d) {
      IGNIS_CHECK(t.stride(d) != 0 || t.size(d) <= 1, fn, ": input ", i, " (shape ", t.sizes(),
                  ", strides ", t.strides(), ") has overlapping memory (stride 0 in dim ", d,
                  "); perturbing one element would move several, call .contiguous() on it");
    }
    diff.push_back(i);
  }
  IGNIS_CHECK(!diff.empty(), fn, ": expects at least one input tensor that requires grad");
}

}  // namespace

bool gradcheck(const Fn& fn, const variable_list& inputs, GradcheckOptions opts) {
  std::vector<size_t> diff;
  check_inputs(inputs, "gradcheck", diff);
  AutoGradMode grad_on(true);

  // Analytical Jacobian: column m of output k comes from a backward with a one-hot gradient.
  variable_list outs = fn(inputs);
  const size_t nout = outs.size();
  variable_list diff_inputs;
  for (size_t i : diff) diff_inputs.push_back(inputs[i]);
  // analytical[k][j] = flat d(out_k)/d(input diff[j]), laid out [out element][in element].
  std::vector<std::vector<std::vector<double>>> analytical(nout);
  for (size_t k = 0; k < nout; ++k) {
    const Tensor& out = outs[k];
    if (!is_differentiable_output(out)) continue;
    IGNIS_CHECK(out.dtype() == kFloat64, "gradcheck: output ", k, " has dtype ", out.dtype(),
                " but every differentiable output must be float64");
    const int64_t m_out = out.numel();
    analytical[k].resize(diff.size());
    for (size_t j = 0; j < diff.size(); ++j) {
      analytical[k][j].assign(static_cast<size_t>(m_out * inputs[diff[j]].numel()), 0.0);
    }
    if (!out.requires_grad()) continue;  // does not depend on any input: zero Jacobian
    for (int64_t m = 0; m < m_out; ++m) {
      Tensor go = zeros(out.sizes(), kFloat64);
      go.data_ptr<double>()[m] = 1.0;
      variable_list g = grad({out}, diff_inputs, {go}, /*retain_graph=*/true,
                             /*create_graph=*/false, /*allow_unused=*/true);
      for (size_t j = 0; j < diff.size(); ++j) {
        if (!g[j].defined()) continue;
        const Tensor& in = inputs[diff[j]];
        IGNIS_CHECK(g[j].sizes().equals(in.sizes()), "gradcheck: the gradient of input ", diff[j],
                    " has shape ", g[j].sizes(), " but the input has shape ", in.sizes());
        std::vector<double> v = flat_values(g[j]);
        const int64_t n_in = in.numel();
        for (int64_t e = 0; e < n_in; ++e) analytical[k][j][m * n_in + e] = v[e];
      }
    }
  }

  // Numerical Jacobian: perturb each element of each differentiable input in place (through
  // its strides, so non-contiguous inputs keep their layout), and restore it.
  for (size_t j = 0; j < diff.size(); ++j) {
    const Tensor& in = inputs[diff[j]];
    const int64_t n_in = in.numel();
    for (int64_t e = 0; e < n_in; ++e) {
      double* p = element_ptr(in, e);
      const double orig = *p;
      *p = orig - opts.eps;
      std::vector<std::vector<double>> lo = eval(fn, inputs);
      *p = orig + opts.eps;
      std::vector<std::vector<double>> hi = eval(fn, inputs);
      *p = orig;
      IGNIS_CHECK(lo.size() == nout && hi.size() == nout, "gradcheck: fn returned ", nout,
                  " outputs first, then ", lo.size());
      for (size_t k = 0; k < nout; ++k) {
        if (analytical[k].empty()) continue;
        const std::vector<double>& a = analytical[k][j];
        const int64_t m_out = static_cast<int64_t>(a.size()) / std::max<int64_t>(n_in, 1);
        IGNIS_CHECK(static_cast<int64_t>(lo[k].size()) == m_out &&
                        static_cast<int64_t>(hi[k].size()) == m_out,
                    "gradcheck: output ", k,
                    " changed its number of elements under "
                    "perturbation");
        for (int64_t m = 0; m < m_out; ++m) {
          const double num = (hi[k][m] - lo[k][m]) / (2 * opts.eps);
          const double ana = a[m * n_in + e];
          const bool ok = std::abs(ana - num) <= opts.atol + opts.rtol * std::abs(num) ||
                          (std::isnan(ana) && std::isnan(num));
          if (ok) continue;
          if (!opts.raise_exception) return false;
          IGNIS_FAIL("gradcheck: Jacobian mismatch for output ", k, " (shape ", outs[k].sizes(),
                     ") with respect to input ", diff[j], " (shape ", in.sizes(), "): d out",
                     index_str(outs[k].sizes(), m), " / d in", index_str(in.sizes(), e),
                     " is numerical ", num, " but analytical ", ana, " (|difference| ",
                     std::abs(ana - num), " > atol ", opts.atol, " + rtol ", opts.rtol,
                     " * |numerical|)");
        }
      }
    }
  }
  return true;
}

bool gradgradcheck(const Fn& fn, const variable_list& inputs, GradcheckOptions opts) {
  std::vector<size_t> diff;
  check_inputs(inputs, "gradgradcheck", diff);
  AutoGradMode grad_on(true);
  // Seeded grad_outputs (independent of ignis's generator), themselves differentiated too.
  variable_list outs = fn(inputs);
  variable_list grad_outs(outs.size());
  uint64_t state = 0x9E3779B97F4A7C15ull;
  for (size_t k = 0; k < outs.size(); ++k) {
    if (!is_differentiable_output(outs[k])) continue;
    Tensor g = empty(outs[k].sizes(), kFloat64);
    double* p = g.data_ptr<double>();
    for (int64_t e = 0; e < g.numel(); ++e) {
      state += 0x9E3779B97F4A7C15ull;
      uint64_t z = state;
      z = (z ^ (z >> 30)) * 0xBF58476D1CE4E5B9ull;
      z = (z ^ (z >> 27)) * 0x94D049BB133111EBull;
      z ^= z >> 31;
      p[e] = static_cast<double>(z >> 11) * 0x1.0p-53 * 2.0 - 1.0;
    }
    g.requires_grad_(true);
    grad_outs[k] = g;
  }
  const size_t n = inputs.size();
  // The function checked: (inputs..., grad_outputs...) -> vjp(fn at inputs, grad_outputs).
  Fn vjp = [&](const variable_list& all) {
    variable_list in(all.begin(), all.begin() + static_cast<std::ptrdiff_t>(n));
    variable_list o = fn(in);
    variable_list roots, gos, wrt;
    for (size_t k = 0; k < o.size(); ++k) {
      if (!grad_outs[k].defined() || !o[k].requires_grad()) continue;
      roots.push_back(o[k]);
      gos.push_back(all[n + k]);
    }
    for (size_t i : diff) wrt.push_back(in[i]);
    variable_list r;
    if (roots.empty()) {
      for (size_t i : diff) r.push_back(zeros(in[i].sizes(), kFloat64));
      return r;
    }
    r = grad(roots, wrt, gos, /*retain_graph=*/true, /*create_graph=*/true,
             /*allow_unused=*/true);
    for (size_t j = 0; j < r.size(); ++j) {
      if (!r[j].defined()) r[j] = zeros(wrt[j].sizes(), kFloat64);
    }
    return r;
  };
  variable_list all = inputs;
  for (size_t k = 0; k < outs.size(); ++k) all.push_back(grad_outs[k]);
  return gradcheck(vjp, all, opts);
}

}  // namespace ignis::autograd
