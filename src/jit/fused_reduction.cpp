// The fused_reduction op: a row-wise reduction (layer_norm or rms_norm without its affine part,
// softmax, log_softmax over the trailing `dims` dims; or statistics — sum, mean, amax, amin, alone
// or chained, "amax,sum": fused_stat.h) with an elementwise prologue and epilogue, in one pass
// over memory. The fusion pass (fuse_reductions in fusion.cpp) makes these nodes from a
// layer_norm / softmax / log_softmax node, the elementwise ops computing its input and those
// consuming its result (layer_norm's weight and bias become the epilogue's first two ops).
//
// Per row of C elements (the trailing dims' product): x = prologue(inputs) (without a prologue,
// input 0) is kept in a row buffer; the row's statistics (layer_norm: mean and 1/sqrt(var + eps);
// rms_norm: 1/sqrt(mean(x^2) + eps);
// softmax: the max and the sum of exponentials, kept in a second buffer) are taken from it; then
// out = epilogue(inputs, y), y the reduction's result (the epilogue's input i<n>, n the number of
// inputs; without an epilogue, out = y). A row of 1024 floats stays in the L1 cache: the inputs
// are read once and the output written once.
//
// - Inference: a kernel generated as C++ from the shared functors and the row reductions of
//   row_reduce.h, compiled at run time (codegen.cpp); without a compiler, the interpreter runs the
//   prologue and epilogue tile by tile through the functors and the same row reductions.
// - Training (an input requires grad) on the CPU or a GPU: the same kernel forward, and one node
//   whose backward recomputes the prologue and the reduction, differentiates the epilogue and
//   the prologue as programs (fused_autodiff.cpp) and the reduction with ops
//   (reduction_with_backward); on the CPU without create_graph, all of it in one pass over
//   blocks of rows (fused_reduction_backward.h).
// - Other devices, and programs without a backward: the composite — the prologue's ops, the
//   reduction's own op (layer_norm, softmax, log_softmax), the epilogue's ops, through their
//   front ends, so autograd records each: the fused node's backward is its composite's.
#include <cmath>
#include <limits>

#include "autograd/node.h"
#include "core/op_call.h"
#include "core/tensor_impl.h"
#include "cpu/parallel.h"
#include "ignis/autograd.h"
#include "ignis/jit.h"
#include "ignis/nn/functional.h"
#include "ignis/ops.h"
#include "jit/codegen.h"
#include "jit/fused_reduction_backward.h"
#include "jit/fused_runtime.h"
#include "jit/fused_stat.h"
#include "jit/reduction_rows.h"
#include "jit/row_layout.h"
#include "ops/reduce.h"

namespace ignis {
namespace jit {

namespace {

using detail::FusedProgram;

/// A statistic of each row (one value per row: sum, mean, amax, amin), not a normalisation.
bool is_stat(const std::string& reduction) { return detail::is_fused_statistic(reduction); }

/// The trailing `dims` dims: -1, -2, ...
Shape trailing_dims(int64_t dims) {
  Shape d;
  for (int64_t i = 0; i < dims; ++i) d.push_back(-1 - i);
  return d;
}

/// `shape` with its trailing `dims` dims as 1: a row's statistic's shape with keepdim.
Shape one_per_row(IntArrayRef shape, int64_t dims) {
  Shape r(shape.begin(), shape.end());
  for (size_t d = 0; d < static_cast<size_t>(dims); ++d) r[r.size() - 1 - d] = 1;
  return r;
}

/// The reduction itself through its op (autograd records it): x normalised or soft-maxed, or the
/// rows' statistic (kept as dims of 1 with `keepdim`).
Tensor reduce(const std::string& reduction, int64_t dims, double eps, const Tensor& x,
              bool keepdim = true) {
  if (is_stat(reduction)) {
    const Shape d = trailing_dims(dims);
    if (reduction == "sum") return x.sum(d, keepdim);
    if (reduction == "mean") return x.mean(d, keepdim);
    return reduction == "amax" ? amax(x, d, keepdim) : amin(x, d, keepdim);
  }
  const Shape norm(x.sizes().end() - dims, x.sizes().end());
  if (reduction == "layer_norm")
    return nn::functional::layer_norm(x, norm, Tensor(), Tensor(), eps);
  if (reduction == "rms_norm") return nn::functional::rms_norm(x, norm, Tensor(), eps);
  if (reduction == "softmax") return softmax(x, -1);
  return log_softmax(x, -1);
}

/// reduce_backward on the CPU with no history to record: one pass per row (a row of x, y and gy
/// stays in the cache) instead of one per op. x, y, gy of one shape; rows of the trailing dims.
Tensor reduce_backward_rows(const std::string& reduction, int64_t dims, double eps, const Tensor& x,
                            const Tensor& y, const Tensor& gy) {
  const detail::RowKind kind = detail::row_kind(reduction);
  const Tensor xc = x.contiguous(), yc = y.contiguous(), gc = gy.expand(y.sizes()).contiguous();
  Tensor gx = make_tensor(y.sizes(), y.dtype(), y.device());
  int64_t C = 1;
  for (int64_t d = y.dim() - dims; d < y.dim(); ++d) C *= y.size(d);
  const int64_t R = y.numel() / C;
  auto run = [&]<class T>() {
    const T *xp = xc.data_ptr<T>(), *yp = yc.data_ptr<T>(), *gp = gc.data_ptr<T>();
    T* op = gx.data_ptr<T>();
    parallel_for(0, R, std::max<int64_t>(kGrainSize / 4 / C, 1), [&](int64_t b, int64_t e) {
      for (int64_t r = b; r < e; ++r)
        detail::reduce_backward_row<T>(kind, xp + r * C, yp + r * C, gp + r * C, op + r * C, C,
                                       static_cast<T>(eps));
    });
  };
  if (y.dtype() == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
  return gx;
}

/// The gradient of reduce(x) = y given gy, as ignis ops (so differentiable again): softmax
/// y (gy - sum(gy y)); log_softmax gy - exp(y) sum(gy); layer_norm rstd (gy - mean(gy) -
/// y mean(gy y)); rms_norm rstd (gy - y mean(gy y)), the sums and means over the reduced dims.
/// Without history to record (`graph` false) on the CPU, the row kernel above.
Tensor reduce_backward(const std::string& reduction, int64_t dims, double eps, const Tensor& x,
                       const Tensor& y, const Tensor& gy, bool graph) {
  if (is_stat(reduction)) {  // x of the rows' shape; y and gy one value per row
    const Shape keep = one_per_row(x.sizes(), dims);
    if (reduction == "sum") return gy.reshape(keep).expand(x.sizes());
    if (reduction == "mean") {
      const double C = static_cast<double>(x.numel()) / static_cast<double>(shape_numel(keep));
      return (gy.reshape(keep) / C).expand(x.sizes());
    }
    return evenly_distribute(gy, x, y, keep, trailing_dims(dims));
  }
  if (!graph && x.device().is_cpu() && x.numel() > 0)
    return reduce_backward_rows(reduction, dims, eps, x, y, gy);
  if (reduction == "softmax") return y * (gy - (gy * y).sum({-1}, true));
  if (reduction == "log_softmax") return gy - y.exp() * gy.sum({-1}, true);
  const Shape d = trailing_dims(dims);
  const bool ln = reduction == "layer_norm";
  const Tensor rstd = rsqrt((ln ? x.var(d, 0, true) : (x * x).mean(d, true)) + eps);
  const Tensor proj = y * (gy * y).mean(d, true);
  return rstd * (ln ? gy - gy.mean(d, true) - proj : gy - proj);
}

/// What one fused_reduction call runs: its programs (parsed, null for none) and their text, the
/// reduction, and where the programs' dropouts draw (drawn once per call, before anything runs:
/// the prologue's streams, then the epilogue's, as their eager dropouts would).
struct Spec {
  std::shared_ptr<const FusedProgram> pro, epi;  // pro: stage 0's prologue for statistics
  std::string prologue, epilogue, reduction;
  // Statistics: each stage's statistic and prologue (null: input 0), pros[0] == pro; empty for
  // a normalisation.
  std::vector<std::string> stats;
  std::vector<std::shared_ptr<const FusedProgram>> pros;
  int64_t dims = 1;
  double eps = 1e-5;
  bool keepdim = true;
  bool full = true;  // the output has the rows' shape (a statistic's: one value per row otherwise)
  Shape out;         // the output's shape
  detail::FusedRng pro_rng, epi_rng;
};

/// A chain of statistics through ops: each stage's prologue and statistic (kept as dims of 1, for
/// the next stages), then the epilogue reading them (without keepdim, their dims dropped).
Tensor stat_composite(const Spec& s, const std::vector<Tensor>& inputs, const Shape& shape) {
  std::vector<Tensor> in = inputs;
  for (size_t k = 0; k < s.stats.size(); ++k) {
    const FusedProgram* p = s.pros[k].get();
    Tensor x = p ? detail::run_fused_composite(*p, in, k == 0 ? s.pro_rng : detail::FusedRng{})
                 : inputs[0];
    if (!x.sizes().equals(shape)) x = x.expand(shape);
    in.push_back(reduce(s.stats[k], s.dims, s.eps, x));
  }
  if (!s.keepdim)
    for (size_t k = inputs.size(); k < in.size(); ++k) in[k] = in[k].reshape(s.out);
  return s.epi ? detail::run_fused_composite(*s.epi, in, s.epi_rng) : in.back();
}

Tensor composite(const Spec& s, const std::vector<Tensor>& inputs, const Shape& shape) {
  if (s.stats.size() > 1) return stat_composite(s, inputs, shape);
  Tensor x = s.pro ? detail::run_fused_composite(*s.pro, inputs, s.pro_rng) : inputs[0];
  if (!x.sizes().equals(shape)) x = x.expand(shape);
  const Tensor r = reduce(s.reduction, s.dims, s.eps, x, s.keepdim);
  if (!s.epi) return r;
  std::vector<Tensor> in = inputs;
  in.push_back(r);
  return detail::run_fused_composite(*s.epi, in, s.epi_rng);
}

/// The stages of a chain of statistics, for the kernels.
std::vector<detail::FusedStatStage> stages(const Spec& s) {
  std::vector<detail::FusedStatStage> st;
  for (size_t k = 0; k < s.stats.size(); ++k) st.push_back({s.pros[k].get(), s.stats[k]});
  return st;
}

/// `rng` for one row of C elements: the row's elements are r C .. r C + C - 1.
detail::FusedRng row_rng(const detail::FusedRng& rng, int64_t r, int64_t C) {
  detail::FusedRng shifted = rng;
  shifted.base += static_cast<uint64_t>(r) * static_cast<uint64_t>(C);
  return shifted;
}

/// The interpreter: rows [r0, r1) one by one (the rows `first` on: the dropouts' counters).
template <class T>
void interpret_rows(const Spec& s, const std::vector<const void*>& ptrs, const std::string& layouts,
                    T* out, int64_t r0, int64_t r1, int64_t C, int64_t first) {
  const size_t n = ptrs.size();
  std::vector<T> xb(static_cast<size_t>(C)), xe(static_cast<size_t>(C));
  // The inputs at row r, then the reduction's values (the epilogue's); the inputs alone (the
  // prologue's).
  std::vector<const T*> row(n + 1), in(n);
  std::string row_layouts(layouts);
  for (size_t i = 0; i < n; ++i)
    if (row_layouts[i] == 'c') row_layouts[i] = 's';  // one value for the whole row
  const std::string epi_layouts = row_layouts + 'f';
  const T eps = static_cast<T>(s.eps);
  const detail::RowKind kind = detail::row_kind(s.reduction);
  for (int64_t r = r0; r < r1; ++r) {
    for (size_t i = 0; i < n; ++i) {
      const T* p = static_cast<const T*>(ptrs[i]);
      row[i] = layouts[i] == 'f' ? p + r * C : layouts[i] == 'c' ? p + r : p;
    }
    row[n] = xe.data();
    const T* x = row[0];
    if (s.pro) {
      std::copy(row.begin(), row.begin() + static_cast<int64_t>(n), in.begin());
      detail::interpret<T>(*s.pro, in, row_layouts, xb.data(), 0, C, C, {}, {},
                           row_rng(s.pro_rng, first + r, C));
      x = xb.data();
    }
    // The reduction's values: into the output row when no epilogue reads them.
    T* o = out + r * C;
    T* e = s.epi ? xe.data() : o;
    detail::normalize_row<T>(kind, x, e, C, eps);
    if (s.epi)
      detail::interpret<T>(*s.epi, row, epi_layouts, o, 0, C, C, {}, {},
                           row_rng(s.epi_rng, first + r, C));
  }
}

/// The value without autograd: the generated kernel (the CPU; a GPU when `on_device`), the
/// interpreter, or on other devices (and where the GPU's kernel fails) the composite.
Tensor run_fused(const Spec& s, const std::vector<Tensor>& inputs, const Shape& shape,
                 bool on_device) {
  constexpr const char* op = "fused_reduction";
  const DType dtype = detail::fused_dtype(inputs);
  const Device device = inputs[0].device();
  if (!(device.is_cpu() || on_device)) {
    if (device.is_meta()) return make_tensor(s.out, dtype, device);
    NoGradGuard no_grad;
    return composite(s, inputs, shape);
  }
  if (shape_numel(s.out) == 0) return make_tensor(s.out, dtype, device);
  const int64_t nd = static_cast<int64_t>(shape.size()), dims = s.dims;
  int64_t C = 1;
  for (int64_t d = nd - dims; d < nd; ++d) C *= shape[static_cast<size_t>(d)];
  const int64_t R = C == 0 ? 0 : shape_numel(shape) / C;
  const bool stat = !s.stats.empty();
  // A statistic of empty rows (sum 0, mean NaN) has no elements to fuse over; the GPU's
  // statistic kernel takes a block per row, so a few long rows (a whole-tensor mean) would leave
  // the GPU idle but for a few blocks: the ops run (their reductions split rows).
  if (C == 0 || (on_device && stat && R < 128 && C > 65536)) {
    NoGradGuard no_grad;
    return composite(s, inputs, shape);
  }
  Tensor out = make_tensor(s.out, dtype, device);
  // Each input against rows of C (row_layout.h): full, a row repeated for every row (a weight),
  // one value per row, one value, or on the CPU a block of rows (a causal mask) read a chunk of
  // rows at a time; any other broadcast is materialised. Input 0 is read in full by a reduction
  // or a stage without a prologue.
  const int n = static_cast<int>(inputs.size());
  bool input0_full = !s.pro;
  for (const auto& p : s.pros) input0_full = input0_full || !p;
  const detail::RowLayout lay =
      detail::lay_out_rows(inputs, shape, dims, !on_device, input0_full ? 0 : -1);
  const std::string& layouts = lay.layouts;
  const std::vector<const void*>& ptrs = lay.ptrs;
  const std::string key = std::string(op) + "|" + s.reduction + "|" + s.prologue + "|" +
                          s.epilogue + "|" + std::string(dtype_name(dtype)) + "|" + layouts +
                          (stat ? (s.full ? "|full" : "|row") : "");
  if (on_device) {
    try {
      detail::fused_reduction_stub[device](
          out, ptrs, R, C, s.eps, s.pro != nullptr && !stat, key,
          [&] {
            return stat ? detail::fused_cuda_stat_source(stages(s), s.epi.get(), n, dtype, layouts,
                                                         s.full)
                        : detail::fused_cuda_reduction_source(s.pro.get(), s.reduction, s.epi.get(),
                                                              n, dtype, layouts);
          },
          s.pro_rng, s.epi_rng);
      return out;
    } catch (const Error& e) {
      IGNIS_CHECK(detail::fusion_backend_mode() != 1, op,
                  ": the compiler backend was asked for, but ", e.what());
      detail::note_fusion_fallback(e.what());
      NoGradGuard no_grad;
      return composite(s, inputs, shape);
    }
  }
  if (stat) {
    detail::run_fused_stat(stages(s), s.epi.get(), lay, out, s.full, key);
    return out;
  }
  const int64_t grain = std::max<int64_t>(kGrainSize / 4 / C, 1);
  auto fn = reinterpret_cast<detail::FusedReductionFn>(detail::fused_kernel(
      key,
      [&] {
        return detail::fused_reduction_source(s.pro.get(), s.reduction, s.epi.get(), n, dtype,
                                              layouts);
      },
      op));
  auto run = [&]<class T>() {
    T* dst = out.data_ptr<T>();
    const detail::InterpreterInputs<T> interp(ptrs, layouts, lay.keep, fn == nullptr);
    parallel_for(0, R, grain, [&](int64_t b, int64_t e) {
      // The kernel reads the programs' dropout streams (seed, base, n) through the pointers
      // after the inputs': the prologue's, then the epilogue's (codegen.h).
      uint64_t pro_words[3] = {s.pro_rng.seed, s.pro_rng.base, s.pro_rng.n};
      uint64_t epi_words[3] = {s.epi_rng.seed, s.epi_rng.base, s.epi_rng.n};
      std::vector<const void*> base = fn != nullptr ? ptrs : interp.ptrs, in;
      if (fn != nullptr && s.pro && s.pro->random_streams() > 0) base.push_back(pro_words);
      if (fn != nullptr && s.epi && s.epi->random_streams() > 0) base.push_back(epi_words);
      std::vector<T> scratch(fn != nullptr ? static_cast<size_t>(2 * C) : 0);
      // A chunk of rows at a time (row_layout.h), the inputs, the output and the dropouts'
      // counters moved to its first row r0.
      lay.for_each_chunk(b, e, 1, [&](int64_t r0, int64_t, int64_t cb, int64_t ce) {
        lay.at(base, r0, fn != nullptr ? 0 : sizeof(T), in);
        pro_words[1] = s.pro_rng.base + static_cast<uint64_t>(r0 * C);
        epi_words[1] = s.epi_rng.base + static_cast<uint64_t>(r0 * C);
        if (fn != nullptr) {
          fn(in.data(), dst + r0 * C, cb - r0, ce - r0, C, s.eps, scratch.data());
        } else {
          interpret_rows<T>(s, in, interp.layouts, dst + r0 * C, cb - r0, ce - r0, C, r0);
        }
      });
    });
  };
  if (dtype == kFloat64)
    run.template operator()<double>();
  else
    run.template operator()<float>();
  return out;
}

/// Training through a chain of statistics: each stage a fused_reduction of its own (one value per
/// row, with its own backward node) reading the inputs and the stages before it, the last one
/// with the epilogue (which reads the inputs and the statistics as that node's inputs and its
/// own statistic); without keepdim (the earlier statistics are not one-element inputs there),
/// the epilogue as a fused_elementwise over the inputs and the statistics (inputs it does not
/// read as zeros of one element, so they do not widen its shape). K passes over the rows (K + 1
/// without keepdim) instead of one, each differentiated by its fused backward.
Tensor chain_with_backward(const Spec& s, const std::vector<Tensor>& inputs) {
  const std::vector<std::string> pro = detail::split_at(s.prologue, '|');
  std::vector<Tensor> in = inputs;
  const size_t K = s.stats.size();
  for (size_t k = 0; k + 1 < K; ++k)
    in.push_back(fused_reduction(in, s.stats[k], s.dims, pro[k], "", s.eps, true));
  if (s.keepdim)
    return fused_reduction(in, s.stats[K - 1], s.dims, pro[K - 1], s.epilogue, s.eps, true);
  in.push_back(fused_reduction(in, s.stats[K - 1], s.dims, pro[K - 1], "", s.eps, true));
  const size_t n = inputs.size();
  for (size_t k = n; k < in.size(); ++k) in[k] = in[k].reshape(s.out);
  if (!s.epi) return in.back();
  if (!s.full) {
    for (size_t i = 0; i < n; ++i)
      if (!s.epi->reads_input(static_cast<int>(i)))
        in[i] = zeros({}, TensorOptions(detail::fused_dtype(inputs)).device(inputs[0].device()));
  }
  return fused_elementwise(in, s.epilogue);
}

/// Training where the fused kernel runs (the CPU, a GPU): the kernel forward, saving only the
/// inputs, and one node whose backward recomputes x = prologue(inputs) and y = reduce(x) (fused
/// and row-wise again), takes the epilogue's gradients (one multi-output kernel on the CPU:
/// every input's and y's), then y's through the reduction (reduce_backward) and the prologue's
/// for x's — not the ops' backwards one by one, nor their saved intermediates. Dropouts use the
/// forward's streams again, so their masks are the forward's. An undefined tensor when a
/// program has no backward (the caller then runs the composite).
Tensor reduction_with_backward(const Spec& s, const std::vector<Tensor>& inputs, const Shape& shape,
                               bool on_device) {
  const int n = static_cast<int>(inputs.size());
  const int K = static_cast<int>(std::max<size_t>(s.stats.size(), 1));
  std::vector<int> ks;
  for (int k = 0; k < n; ++k)
    if (inputs[static_cast<size_t>(k)].requires_grad()) ks.push_back(k);
  // Every program differentiable for the inputs that need gradients and the statistics it
  // reads (stage k's prologue: those before it; the epilogue: all).
  auto with_stats = [&](int k) {
    std::vector<int> w = ks;
    for (int j = 0; j < k; ++j) w.push_back(n + j);
    return w;
  };
  bool differentiable = !s.epi || detail::fused_backward(*s.epi, with_stats(K)).has_value();
  for (int k = 0; k < K && differentiable; ++k) {
    const FusedProgram* p = K > 1 ? s.pros[static_cast<size_t>(k)].get() : s.pro.get();
    differentiable = !p || detail::fused_backward(*p, with_stats(k)).has_value();
  }
  // A chain of statistics is one node where its backward runs in one pass over blocks of rows
  // (the CPU; rows of at most kMaxBlockedCols; an epilogue over the rows), else a node per stage.
  if (K > 1) {
    int64_t C = 1;
    for (size_t d = shape.size() - static_cast<size_t>(s.dims); d < shape.size(); ++d)
      C *= shape[d];
    if (on_device || !differentiable || C > detail::kMaxBlockedCols || (s.epi && !s.full))
      return chain_with_backward(s, inputs);
  }
  if (!differentiable) return Tensor();
  Tensor out;
  {
    NoGradGuard no_grad;
    out = run_fused(s, inputs, shape, on_device);
  }
  std::vector<autograd::SavedVariable> saved;
  for (const Tensor& t : inputs) saved.emplace_back(t, false);
  auto fn = [saved = std::move(saved), ks, s, shape, n, K](autograd::BackwardCtx& c,
                                                           const TensorList& g) {
    TensorList r(saved.size());
    if (!g[0].defined()) return r;
    std::vector<Tensor> in;
    for (const autograd::SavedVariable& sv : saved) in.push_back(c.unpack(sv));
    std::vector<int> want;
    for (int k : ks)
      if (c.needs_input_grad(static_cast<size_t>(k))) want.push_back(k);
    bool graph = false;  // create_graph: the gradients need history
    for (const Tensor& t : in) graph = graph || (t.requires_grad() && is_grad_enabled());
    if (!graph) {  // on the CPU, in one pass over the rows where it applies
      NoGradGuard no_grad;
      detail::ReductionBackwardSpec rs;
      if (K > 1) {
        for (int k = 0; k < K; ++k)
          rs.stages.push_back(
              {s.pros[static_cast<size_t>(k)].get(), s.stats[static_cast<size_t>(k)]});
      } else {
        rs.stages.push_back({s.pro.get(), s.reduction});
      }
      rs.epi = s.epi.get();
      rs.dims = s.dims;
      rs.eps = s.eps;
      rs.full = s.full;
      rs.pro_rng = s.pro_rng;
      rs.epi_rng = s.epi_rng;
      if (detail::reduction_backward_in_blocks(rs, in, g[0], shape, want, r)) return r;
    }
    if (K > 1) {
      // A chain with create_graph (or where the one pass did not apply): its stages as nodes
      // over the saved inputs, differentiated with history (second derivatives exist).
      AutoGradMode grad_mode(true);
      // Each wanted input through a view of its own, so that an input given twice gets each
      // slot's gradient (the engine adds them), not the sum in both.
      std::vector<Tensor> slots = in, wanted;
      for (int k : want) {
        Tensor& t = slots[static_cast<size_t>(k)];
        t = t.expand(t.sizes());
        wanted.push_back(t);
      }
      const Tensor y = chain_with_backward(s, slots);
      const TensorList gs = autograd::grad({y}, wanted, {g[0]}, graph, graph, true);
      for (size_t j = 0; j < want.size(); ++j) r[static_cast<size_t>(want[j])] = gs[j];
      return r;
    }
    const bool stat = is_stat(s.reduction);
    Tensor x = in[0], y;
    if (!graph && s.pro && (s.reduction == "sum" || s.reduction == "mean")) {
      // A sum's or mean's backward needs only the shape of the prologue's values: y again by
      // one pass over the inputs (the programs of statistics draw no dropout), the values not
      // written out and read back.
      NoGradGuard no_grad;
      y = fused_reduction(in, s.reduction, s.dims, s.prologue, "", s.eps, s.keepdim);
      x = zeros({}, TensorOptions(y.dtype()).device(y.device())).expand(shape);
    } else {
      if (s.pro) {
        x = graph ? detail::run_fused_composite(*s.pro, in, s.pro_rng)
                  : detail::run_fused_program(*s.pro, s.prologue, in, shape, s.pro_rng);
      }
      if (!x.sizes().equals(shape)) x = x.expand(shape);
      // Without history, y by the row kernel (one pass; the ops make several).
      y = graph ? reduce(s.reduction, s.dims, s.eps, x, s.keepdim)
                : fused_reduction({x}, s.reduction, s.dims, "", "", s.eps, s.keepdim);
    }
    // A statistic's epilogue gives gradients in the output's shape: each input's is summed to
    // its shape (to add the prologue's), y's to one value per row.
    Tensor gy = g[0];
    if (s.epi) {
      std::vector<Tensor> ein = in;
      if (stat) {  // inputs the epilogue does not read must not widen its gradients' shape
        for (int k = 0; k < n; ++k)
          if (!s.epi->reads_input(k))
            ein[static_cast<size_t>(k)] = zeros({}, TensorOptions(y.dtype()).device(y.device()));
      }
      ein.push_back(y);
      ein.push_back(g[0]);
      std::vector<int> ew = want;
      ew.push_back(n);
      TensorList eg = detail::fused_input_grads(*s.epi, ein, ew, s.epi_rng);
      for (int k : want) {
        const Tensor& e = eg[static_cast<size_t>(k)];
        r[static_cast<size_t>(k)] =
            stat && e.defined() ? e.sum_to_size(in[static_cast<size_t>(k)].sizes()) : e;
      }
      gy = eg[static_cast<size_t>(n)];
      if (!gy.defined()) return r;  // the epilogue does not read y
      if (stat) gy = gy.sum_to_size(y.sizes());
    }
    const Tensor gx = reduce_backward(s.reduction, s.dims, s.eps, x, y, gy, graph);
    // A statistic's epilogue gradients are already summed to the inputs' shapes, the prologue's
    // may be in the rows' shape (for the engine to sum): of different shapes, both are summed
    // to the input's before adding (a broadcast sum would count the smaller one once per row).
    auto add_to = [&](int k, const Tensor& t) {
      if (!t.defined()) return;
      Tensor& slot = r[static_cast<size_t>(k)];
      if (!slot.defined() || slot.sizes().equals(t.sizes())) {
        slot = slot.defined() ? slot + t : t;
        return;
      }
      const IntArrayRef shape = in[static_cast<size_t>(k)].sizes();
      auto fit = [&](const Tensor& v) {
        return v.sizes().equals(shape) ? v : v.sum_to_size(shape);
      };
      slot = fit(slot) + fit(t);
    };
    if (s.pro) {
      std::vector<Tensor> pin = in;
      pin.push_back(gx);
      // The epilogue's gradient of an input of the rows' shape is added by the prologue's
      // backward kernel as it writes its own (no pass of its own over the rows).
      std::vector<Tensor> addends(static_cast<size_t>(n));
      for (int k : want) {
        const size_t ku = static_cast<size_t>(k);
        if (r[ku].defined() && r[ku].sizes().equals(shape) && in[ku].sizes().equals(shape))
          std::swap(addends[ku], r[ku]);
      }
      const TensorList pg = detail::fused_input_grads(*s.pro, pin, want, s.pro_rng, addends);
      for (int k : want) add_to(k, pg[static_cast<size_t>(k)]);
    } else if (c.needs_input_grad(0)) {
      add_to(0, gx);
    }
    return r;
  };
  auto node =
      std::make_shared<autograd::LambdaNode<decltype(fn)>>("fused_reduction", std::move(fn));
  TensorList outs{out};
  autograd::connect(node, inputs, outs);
  return out;
}

/// A statistic's output shape (s.out, s.full) for rows of `shape`, checking what it needs.
void stat_output(Spec& s, const std::vector<Tensor>& inputs, const Shape& shape) {
  constexpr const char* op = "fused_reduction";
  const int n = static_cast<int>(inputs.size());
  std::vector<const FusedProgram*> programs = {s.epi.get()};
  for (const auto& p : s.pros) programs.push_back(p.get());
  for (const FusedProgram* p : programs)
    IGNIS_CHECK(!p || p->random_streams() == 0, op, ": ", s.reduction,
                " takes programs without dropout");
  const Shape keep = one_per_row(shape, s.dims);
  for (const std::string& st : s.stats)
    IGNIS_CHECK(shape_numel(shape) > 0 || shape_numel(keep) == 0 || st == "sum" || st == "mean", op,
                ": ", st, " over ", s.dims, " trailing dims of shape ", shape,
                " reduces empty rows (it has no identity)");
  std::vector<int> read;
  for (int i = 0; i < n && s.epi; ++i)
    if (s.epi->reads_input(i)) read.push_back(i);
  s.full = false;
  if (!s.keepdim) {
    s.out = Shape(shape.begin(), shape.end() - s.dims);
    for (int i : read) {
      const Tensor& t = inputs[static_cast<size_t>(i)];
      IGNIS_CHECK(t.numel() == 1 && t.dim() <= static_cast<int64_t>(s.out.size()), op, ": ",
                  s.reduction,
                  " without keepdim: the epilogue may read only one-element inputs "
                  "of at most ",
                  s.out.size(), " dims, but input ", i, " has shape ", t.sizes());
    }
    return;
  }
  Shape out = keep;
  for (int i : read) out = broadcast_shapes(out, inputs[static_cast<size_t>(i)].sizes());
  IGNIS_CHECK(out == keep || out == shape, op, ": the epilogue of ", s.reduction, " gives shape ",
              out, "; expected one value per row, ", keep, ", or the rows' shape ", shape);
  s.full = out != keep;
  s.out = out;
}

}  // namespace

IGNIS_OP(fused_reduction,
         "fused_reduction(Tensor[] inputs, str reduction, int dims, str prologue, str epilogue, "
         "float eps=1e-05, bool keepdim=True) -> Tensor",
         Tensor(const std::vector<Tensor>&, const std::string&, int64_t, const std::string&,
                const std::string&, double, bool),
         fused_reduction,
         {.differentiable = true, .kind = "kernel", .stubs = {&detail::fused_reduction_stub}});

Tensor fused_reduction(const std::vector<Tensor>& inputs, const std::string& reduction,
                       int64_t dims, const std::string& prologue, const std::string& epilogue,
                       double eps, bool keepdim) {
  IGNIS_DISPATCH(fused_reduction, fused_reduction, inputs, reduction, dims, prologue, epilogue, eps,
                 keepdim);
  constexpr const char* op = "fused_reduction";
  // The epilogue reads one more input than the node: the reduction's result.
  IGNIS_CHECK(!inputs.empty() && inputs.size() < static_cast<size_t>(detail::kMaxFusedInputs), op,
              ": expected 1 to ", detail::kMaxFusedInputs - 1, " inputs, got ", inputs.size());
  const bool norm = reduction == "layer_norm" || reduction == "rms_norm";
  Spec s;
  // Statistics: one, or a chain separated by commas ("amax,sum"), with one prologue per stage
  // separated by '|' (each may be empty: input 0).
  s.stats = detail::split_at(reduction, ',');
  for (const std::string& st : s.stats)
    if (!is_stat(st)) s.stats.clear();
  const bool stat = !s.stats.empty();
  IGNIS_CHECK(norm || stat || reduction == "softmax" || reduction == "log_softmax", op,
              ": unknown reduction '", reduction.substr(0, 64),
              "' (expected layer_norm, rms_norm, softmax, log_softmax, or sum, mean, amax, amin "
              "alone or as a chain separated by commas, such as 'amax,sum')");
  const int K = stat ? static_cast<int>(s.stats.size()) : 1;
  IGNIS_CHECK(K <= detail::kMaxStatStages, op, ": a chain of at most ", detail::kMaxStatStages,
              " statistics, got ", K, " ('", reduction.substr(0, 64), "')");
  IGNIS_CHECK(
      inputs.size() + static_cast<size_t>(K) <= static_cast<size_t>(detail::kMaxFusedInputs), op,
      ": ", inputs.size(), " inputs and ", K, " statistics are more than the epilogue's ",
      detail::kMaxFusedInputs, " inputs");
  IGNIS_CHECK(keepdim || stat, op, ": ", reduction,
              " keeps the input's shape (keepdim=False is for sum, mean, amax and amin)");
  const int n = static_cast<int>(inputs.size());
  s.prologue = prologue;
  s.epilogue = epilogue;
  s.reduction = reduction;
  s.dims = dims;
  s.eps = eps;
  s.keepdim = keepdim;
  const std::vector<std::string> pro_texts =
      stat ? detail::split_at(prologue, '|') : std::vector<std::string>{prologue};
  IGNIS_CHECK(static_cast<int>(pro_texts.size()) == K, op, ": ", reduction,
              " takes one prologue per statistic, separated by '|' (empty for input 0): expected ",
              K, ", got ", pro_texts.size());
  int stage = 0;  // (the program being parsed: a prologue's stage, K for the epilogue)
  try {
    for (; stage < K; ++stage) {
      const std::string& t = pro_texts[static_cast<size_t>(stage)];
      s.pros.push_back(t.empty() ? nullptr : detail::parsed_program(t, n + stage));
    }
    s.pro = s.pros[0];
    if (!stat) s.pros.clear();
    if (!epilogue.empty()) s.epi = detail::parsed_program(epilogue, n + K);
  } catch (const Error& e) {
    IGNIS_FAIL(op, ": the ",
               stage == K ? std::string("epilogue")
               : K == 1   ? std::string("prologue")
                          : "prologue of stage " + std::to_string(stage) + " (" +
                              s.stats[static_cast<size_t>(stage)] + ")",
               ": ", e.what());
  }
  const Shape shape = detail::fused_output_shape(inputs, op);
  bool reads_input0 = !s.pro;  // a reduction or a stage without a prologue reduces input 0
  for (const auto& p : s.pros) reads_input0 = reads_input0 || !p;
  IGNIS_CHECK(!reads_input0 || inputs[0].dtype() != kBool, op, ": ", reduction,
              " without a prologue reduces input 0, which is bool (a mask); it must be ",
              detail::fused_dtype(inputs));
  const int64_t nd = static_cast<int64_t>(shape.size());
  IGNIS_CHECK(dims >= 1 && dims <= nd && (dims == 1 || norm || stat), op, ": ", reduction, " over ",
              dims, " trailing dims of an output of shape ", shape,
              " (layer_norm, rms_norm and the statistics take 1 to ", nd,
              ", softmax and log_softmax 1)");
  IGNIS_CHECK(std::isfinite(eps), op, ": eps must be finite, got ", eps);
  s.out = shape;
  if (stat) stat_output(s, inputs, shape);
  const Device device = inputs[0].device();
  if (!device.is_meta()) {  // (a meta tensor draws nothing)
    if (s.pro) s.pro_rng = detail::draw_fused_rng(*s.pro, shape);
    if (s.epi) s.epi_rng = detail::draw_fused_rng(*s.epi, shape);
  }
  bool needs_grad = false;
  for (const Tensor& t : inputs) needs_grad = needs_grad || t.requires_grad();
  // A GPU runs the generated CUDA kernel unless the interpreter is asked for (it is CPU code).
  const bool on_device = device.is_cuda() && detail::fused_reduction_stub.has_kernel(device.type) &&
                         detail::fusion_backend_mode() != 2;
  if (needs_grad && is_grad_enabled() && !device.is_meta()) {
    if (device.is_cpu() || on_device) {
      if (Tensor out = reduction_with_backward(s, inputs, shape, on_device); out.defined())
        return out;
    }
    return composite(s, inputs, shape);
  }
  return run_fused(s, inputs, shape, on_device);
}

}  // namespace jit
}  // namespace ignis
