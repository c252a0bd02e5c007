// The driver of the op table (op_table.h): for every registered op, a forward check per dtype
// against the float64 reference, a float64 gradcheck, and a gradgradcheck. Each op gets its own
// tests (OpTable.Forward/add, OpTable.Gradcheck/add, ...) so ctest lists and runs them apart.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cctype>
#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <set>
#include <sstream>

#include "core/tensor_impl.h"
#include "ignis/op_registry.h"
#include "op_table.h"
#include "test_util.h"

namespace ignis::testing {
namespace {

struct Tolerance {
  double atol, rtol;
};

// Rank of a dtype's precision (higher = looser tolerance); integers and bool are exact.
int looseness(DType t) {
  switch (t) {
    case kBFloat16: return 2;
    case kFloat32: return 1;
    default: return 0;
  }
}

Tolerance tolerance_for(const OpInfo& op, DType tested, DType out) {
  const int l = std::max(looseness(tested), looseness(out));
  if (l == 2) return {op.atol_bf16, op.rtol_bf16};
  if (l == 1) return {op.atol32, op.rtol32};
  return {op.atol64, op.rtol64};
}

// Floating inputs converted to `dtype` (a channels-last input stays channels-last, so that the
// float32 kernels see the layout too); integer and bool inputs kept.
std::vector<Tensor> cast_inputs(const std::vector<Tensor>& in, DType dtype) {
  std::vector<Tensor> out;
  for (const Tensor& t : in) {
    if (!t.defined() || !t.is_floating_point()) {
      out.push_back(t);
      continue;
    }
    Tensor c = t.to(dtype);
    if (t.dim() == 4 && t.suggest_memory_format() == MemoryFormat::ChannelsLast) {
      c = c.contiguous(MemoryFormat::ChannelsLast);
    }
    out.push_back(c);
  }
  return out;
}

bool has_empty_input(const OpSample& s) {
  for (const Tensor& t : s.inputs) {
    if (t.defined() && t.numel() == 0) return true;
  }
  return false;
}

// Compares `got` with the float64 reference `want` element by element.
void expect_close(const Tensor& got, const Tensor& want, Tolerance tol) {
  ASSERT_TRUE(got.defined()) << "the op returned an undefined tensor";
  ASSERT_TRUE(want.defined()) << "the reference returned an undefined tensor";
  ASSERT_TRUE(got.sizes().equals(want.sizes()))
      << "shape " << got.sizes() << " but the reference has shape " << want.sizes();
  const std::vector<double> g = values(got), w = values(want);
  ASSERT_EQ(g.size(), w.size());
  int reported = 0;
  for (size_t i = 0; i < g.size(); ++i) {
    const bool ok = (std::isnan(g[i]) && std::isnan(w[i])) || g[i] == w[i] ||
                    std::abs(g[i] - w[i]) <= tol.atol + tol.rtol * std::abs(w[i]);
    if (!ok && reported++ < 5) {
      ADD_FAILURE() << "element " << i << ": got " << g[i] << " but the reference gives " << w[i]
                    << " (|difference| " << std::abs(g[i] - w[i]) << ", atol " << tol.atol
                    << ", rtol " << tol.rtol << ")";
    }
  }
}

// The inputs of a gradcheck: float64 copies of the sample's inputs (same layout), with
// requires_grad on the differentiated ones.
std::vector<Tensor> grad_inputs(const OpInfo& op, const OpSample& s) {
  std::vector<Tensor> in;
  for (size_t i = 0; i < s.inputs.size(); ++i) {
    Tensor t = s.inputs[i];
    const bool floating = t.defined() && t.is_floating_point();
    if (floating) t = t.dtype() == kFloat64 ? t.detach() : t.to(kFloat64);
    bool wanted = floating;
    if (!op.grad_inputs.empty()) {
      wanted = false;
      for (size_t g : op.grad_inputs) wanted = wanted || g == i;
    }
    if (wanted && floating) t.requires_grad_(true);
    in.push_back(t);
  }
  return in;
}

bool any_requires_grad(const std::vector<Tensor>& in) {
  for (const Tensor& t : in) {
    if (t.defined() && t.requires_grad()) return true;
  }
  return false;
}

class OpTable : public ::testing::TestWithParam<size_t> {
 protected:
  const OpInfo& op() const { return op_table()[GetParam()]; }
};

TEST_P(OpTable, Forward) {
  const OpInfo& o = op();
  for (const OpSample& s : o.samples()) {
    for (DType dt : o.dtypes) {
      SCOPED_TRACE("op " + o.name + ", sample '" + s.desc + "', dtype " +
                   std::string(ignis::dtype_name(dt)));
      std::vector<Tensor> in = cast_inputs(s.inputs, dt);
      // The reference sees the same (rounded) values, in float64: this checks the op's own
      // arithmetic, not the rounding of its inputs.
      std::vector<Tensor> ref_in = cast_inputs(in, kFloat64);
      Tensor got, want;
      try {
        got = o.fn(in);
      } catch (const std::exception& e) {
        ADD_FAILURE() << "the op threw: " << e.what();
        continue;
      }
      want = o.ref(ref_in);
      expect_close(got, want, tolerance_for(o, dt, got.defined() ? got.dtype() : dt));
    }
  }
}

TEST_P(OpTable, Gradcheck) {
  const OpInfo& o = op();
  if (!o.differentiable) GTEST_SKIP() << o.name << " is not differentiable";
  int checked = 0;
  for (const OpSample& s : o.samples()) {
    if (has_empty_input(s)) continue;
    SCOPED_TRACE("op " + o.name + ", sample '" + s.desc + "'");
    std::vector<Tensor> in = grad_inputs(o, s);
    if (!any_requires_grad(in)) continue;
    auto fn = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{o.fn(x)}; };
    try {
      EXPECT_TRUE(autograd::gradcheck(fn, in));
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << o.name << ": no sample with floating inputs to check";
}

TEST_P(OpTable, Gradgradcheck) {
  const OpInfo& o = op();
  if (!o.differentiable || !o.twice_differentiable) {
    GTEST_SKIP() << o.name << " is not twice differentiable";
  }
  int checked = 0;
  for (const OpSample& s : o.samples()) {
    if (has_empty_input(s)) continue;
    SCOPED_TRACE("op " + o.name + ", sample '" + s.desc + "'");
    std::vector<Tensor> in = grad_inputs(o, s);
    if (!any_requires_grad(in)) continue;
    auto fn = [&](const std::vector<Tensor>& x) { return std::vector<Tensor>{o.fn(x)}; };
    try {
      EXPECT_TRUE(autograd::gradgradcheck(fn, in));
    } catch (const std::exception& e) {
      ADD_FAILURE() << e.what();
    }
    ++checked;
  }
  if (checked == 0) GTEST_SKIP() << o.name << ": no sample with floating inputs to check";
}

std::vector<size_t> op_indices() {
  std::vector<size_t> idx(op_table().size());
  for (size_t i = 0; i < idx.size(); ++i) idx[i] = i;
  return idx;
}

// Test names: the op's name with anything but [A-Za-z0-9_] replaced, made unique.
std::string param_name(const ::testing::TestParamInfo<size_t>& info) {
  static std::vector<std::string> names = [] {
    std::vector<std::string> out;
    std::set<std::string> used;
    for (const OpInfo& o : op_table()) {
      std::string n;
      for (char c : o.name) n += std::isalnum(static_cast<unsigned char>(c)) ? c : '_';
      if (n.empty()) n = "op";
      std::string u = n;
      for (int k = 2; used.count(u); ++k) u = n + "_" + std::to_string(k);
      used.insert(u);
      out.push_back(u);
    }
    return out;
  }();
  return names[info.param];
}

INSTANTIATE_TEST_SUITE_P(Ops, OpTable, ::testing::ValuesIn(op_indices()), param_name);
GTEST_ALLOW_UNINSTANTIATED_PARAMETERIZED_TEST(OpTable);

}  // namespace
}  // namespace ignis::testing

namespace ignis::testing {

// Registry coverage: every registered op is tested by a table entry — one whose name is the
// op's name or full name ("add", "add.Scalar"), or that lists it in `ops` — or has a written
// exemption (IGNIS_OP_EXEMPT). The failure names every op that has neither.
TEST(OpTableCoverage, EveryRegisteredOpHasAnEntryOrAnExemption) {
  std::set<std::string> covered;
  for (const OpInfo& info : op_table()) {
    covered.insert(info.name);
    covered.insert(info.ops.begin(), info.ops.end());
  }
  for (const auto& [op, reason] : op_exemptions()) {
    EXPECT_FALSE(reason.empty()) << op;
    covered.insert(op);
  }
  std::vector<std::string> missing;
  for (const op::Record* r : op::all_records()) {
    if (!covered.count(r->schema.full_name()) && !covered.count(r->schema.name)) {
      missing.push_back(r->schema.full_name());
    }
  }
  std::string list;
  for (const std::string& m : missing) list += (list.empty() ? "" : ", ") + m;
  EXPECT_TRUE(missing.empty()) << missing.size()
                               << " registered ops have no op-table entry and no exemption: "
                               << list;
}

}  // namespace ignis::testing

namespace ignis::testing {
namespace {

/// `t` on the meta device: the same sizes, strides, storage offset and dtype, no data.
Tensor to_meta(const Tensor& t) {
  if (!t.defined()) return t;
  const int64_t elems = static_cast<int64_t>(t.impl()->storage()->nbytes / t.element_size());
  Tensor base = make_tensor({elems}, t.dtype(), kMeta);
  return make_view(base, Shape(t.sizes().begin(), t.sizes().end()),
                   Shape(t.strides().begin(), t.strides().end()), t.storage_offset());
}

}  // namespace

// The meta device: every table entry runs on meta tensors through its shape and dtype rules
// alone, and gives the sizes, strides and dtype the CPU gives. An op whose front end reads
// tensor data on the host fails here (naming itself) unless its entry says why (meta_skip).
TEST(OpTableMeta, EveryEntryGivesTheCpuMetadataOnMeta) {
  NoGradGuard no_grad;
  std::vector<std::string> failures;
  int checked = 0;
  for (const OpInfo& info : op_table()) {
    if (!info.meta_skip.empty()) continue;
    for (const OpSample& s : info.samples()) {
      std::vector<Tensor> meta;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        bool host = false;
        for (int k : info.host_params) {
          host = host || (k < 0 ? s.inputs.size() + k : static_cast<size_t>(k)) == i;
        }
        meta.push_back(host ? s.inputs[i] : to_meta(s.inputs[i]));
      }
      const std::string where = info.name + " [" + s.desc + "]";
      Tensor cpu, m;
      try {
        cpu = info.fn(s.inputs);
      } catch (const Error&) {
        continue;  // samples that are meant to fail on the CPU too
      }
      try {
        m = info.fn(meta);
      } catch (const Error& e) {
        failures.push_back(where + ": " + e.what());
        continue;
      }
      ++checked;
      if (!m.device().is_meta()) {
        failures.push_back(where + ": result on " + m.device().str());
      } else if (!m.sizes().equals(cpu.sizes()) || m.dtype() != cpu.dtype() ||
                 (cpu.numel() > 1 && !m.strides().equals(cpu.strides()))) {
        std::ostringstream os;
        os << where << ": meta gives " << m.dtype() << m.sizes() << " strides " << m.strides()
           << ", the CPU " << cpu.dtype() << cpu.sizes() << " strides " << cpu.strides();
        failures.push_back(os.str());
      }
    }
  }
  std::string list;
  for (const auto& f : failures) list += "\n  " + f;
  EXPECT_TRUE(failures.empty()) << failures.size() << " op-table samples differ on meta:" << list;
  EXPECT_GT(checked, 500);
}

namespace {
/// GPU runs of the op table: with IGNIS_OPTABLE_TRACE set, each sample is named on stderr before
/// it runs, so a sample that kills the process (an illegal address is sticky in CUDA) is named in
/// the log; IGNIS_OPTABLE_SKIP lists samples (as traced, separated by '|') not to run, so that
/// tools/gpu_check.sh can rerun past them. Returns whether to skip `where`.
bool trace_sample(const std::string& where) {
  static const bool on = std::getenv("IGNIS_OPTABLE_TRACE") != nullptr;
  static const std::string skip = [] {
    const char* s = std::getenv("IGNIS_OPTABLE_SKIP");
    return "|" + std::string(s ? s : "") + "|";
  }();
  if (skip.find("|" + where + "|") != std::string::npos) {
    std::fprintf(stderr, "optable: skipped %s\n", where.c_str());
    return true;
  }
  if (on) std::fprintf(stderr, "optable: %s\n", where.c_str());
  return false;
}

/// `t` on the GPU with the same sizes, strides and storage offset (its whole storage copied), so
/// that non-contiguous samples stay non-contiguous.
Tensor to_gpu_same_layout(const Tensor& t) {
  if (!t.defined()) return t;
  const int64_t elems = static_cast<int64_t>(t.impl()->storage()->nbytes / t.element_size());
  const Tensor all = make_view(t, {elems}, {1}, 0);
  const Tensor base = all.to(Device(DeviceType::CUDA, 0));
  return make_view(base, Shape(t.sizes().begin(), t.sizes().end()),
                   Shape(t.strides().begin(), t.strides().end()), t.storage_offset());
}
}  // namespace

// The CUDA backend (docs/cuda.md) against the CPU as the oracle: every table entry and sample
// runs on the GPU (inputs with the CPU samples' layouts; the entry's host parameters stay on
// the CPU; the same seed before each run, since the GPU draws the CPU's random numbers) and must
// give the CPU's result to the entry's float64 tolerances. Ops without a CUDA kernel yet are
// listed, not failed. Skipped without a GPU.
TEST(OpTableCuda, EveryEntryOnTheGpuMatchesTheCpu) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  NoGradGuard no_grad;
  std::vector<std::string> failures;
  std::set<std::string> unsupported;
  int checked = 0;
  for (const OpInfo& info : op_table()) {
    for (const OpSample& s : info.samples()) {
      std::vector<Tensor> gpu;
      for (size_t i = 0; i < s.inputs.size(); ++i) {
        bool host = false;
        for (int k : info.host_params) {
          host = host || (k < 0 ? s.inputs.size() + k : static_cast<size_t>(k)) == i;
        }
        gpu.push_back(host ? s.inputs[i] : to_gpu_same_layout(s.inputs[i]));
      }
      const std::string where = info.name + " [" + s.desc + "]";
      if (trace_sample(where)) {
        failures.push_back(where + ": skipped (it ended the process in an earlier run)");
        continue;
      }
      Tensor cpu, g;
      try {
        manual_seed(1234);
        cpu = info.fn(s.inputs);
      } catch (const Error&) {
        continue;  // samples that are meant to fail on the CPU too
      }
      try {
        manual_seed(1234);
        g = info.fn(gpu);
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("no kernel for device cuda") != std::string::npos) {
          unsupported.insert(info.name);
        } else {
          failures.push_back(where + ": " + msg);
        }
        continue;
      }
      ++checked;
      if (!g.device().is_cuda() && !info.host_result) {
        failures.push_back(where + ": result on " + g.device().str());
        continue;
      }
      const Tensor back = g.cpu();
      bool same = back.sizes().equals(cpu.sizes()) && back.dtype() == cpu.dtype();
      if (same && cpu.numel() > 0) {
        same = cpu.is_floating_point()
                   ? allclose(back.to(kFloat64), cpu.to(kFloat64), info.rtol64, info.atol64, true)
                   : equal(back, cpu);
      }
      if (!same) {
        std::ostringstream os;
        os << where << ": the GPU gives " << back << ", the CPU " << cpu;
        failures.push_back(os.str());
      }
    }
  }
  std::string list, ops;
  for (const auto& f : failures) list += "\n  " + f;
  for (const auto& o : unsupported) ops += " " + o;
  std::printf("op table on CUDA: %d samples checked; entries without a CUDA kernel yet:%s\n",
              checked, ops.c_str());
  EXPECT_TRUE(failures.empty()) << failures.size() << " op-table samples differ on CUDA:" << list;
  // Every op with kernels of its own has CUDA ones (docs/cuda.md): a missing one fails.
  EXPECT_TRUE(unsupported.empty()) << "entries without a CUDA kernel:" << ops;
  EXPECT_GT(checked, 500);
}

// float64 gradchecks through the CUDA kernels: for every differentiable entry and sample, the
// gradcheck's CPU leaves go to the GPU inside the function (a differentiable copy, so the
// analytical Jacobian comes from the GPU's backward kernels and the copy's backward) and the
// result comes back, so finite differences of the GPU forward are compared with the GPU
// backward. Entries without a CUDA kernel are listed, as above. Skipped without a GPU.
TEST(OpTableCuda, EveryGradcheckThroughTheGpuPasses) {
  if (!cuda::is_available()) GTEST_SKIP() << "no GPU: " << cuda::unavailable_reason();
  const Device gpu(DeviceType::CUDA, 0);
  std::vector<std::string> failures;
  std::set<std::string> unsupported;
  int checked = 0;
  for (const OpInfo& info : op_table()) {
    if (!info.differentiable) continue;
    for (const OpSample& s : info.samples()) {
      if (has_empty_input(s)) continue;
      std::vector<Tensor> in = grad_inputs(info, s);
      if (!any_requires_grad(in)) continue;
      auto fn = [&](const std::vector<Tensor>& x) {
        std::vector<Tensor> g;
        for (size_t i = 0; i < x.size(); ++i) {
          bool host = false;
          for (int k : info.host_params) {
            host = host || (k < 0 ? x.size() + k : static_cast<size_t>(k)) == i;
          }
          g.push_back(host || !x[i].defined() ? x[i] : x[i].to(gpu));
        }
        manual_seed(1234);
        return std::vector<Tensor>{info.fn(g).to(kCPU)};
      };
      const std::string where = info.name + " [" + s.desc + "]";
      if (trace_sample("gradcheck " + where)) {
        failures.push_back(where + ": skipped (it ended the process in an earlier run)");
        continue;
      }
      try {
        manual_seed(1234);
        (void)info.fn(in);  // samples that fail on the CPU are not gradchecked there either
      } catch (const Error&) {
        continue;
      }
      try {
        if (!autograd::gradcheck(fn, in)) failures.push_back(where + ": gradcheck failed");
        ++checked;
      } catch (const Error& e) {
        const std::string msg = e.what();
        if (msg.find("no kernel for device cuda") != std::string::npos) {
          unsupported.insert(info.name);
        } else {
          failures.push_back(where + ": " + msg);
        }
      }
    }
  }
  std::string list, ops;
  for (const auto& f : failures) list += "\n  " + f;
  for (const auto& o : unsupported) ops += " " + o;
  std::printf("gradchecks through CUDA: %d samples checked; entries without a CUDA kernel yet:%s\n",
              checked, ops.c_str());
  EXPECT_TRUE(failures.empty()) << failures.size() << " gradchecks through the GPU fail:" << list;
  EXPECT_TRUE(unsupported.empty()) << "entries without a CUDA kernel:" << ops;
  EXPECT_GT(checked, 2000);  // 2,110 with kCPU in place of the GPU when this was written
}

TEST(OpTableMeta, HostReadsOfMetaTensorsFailNamingTheRead) {
  Tensor m = make_tensor({2, 3}, kFloat32, kMeta);
  EXPECT_THAT(error_of([&] { m.sum().item(); }),
              ::testing::HasSubstr("item: a meta tensor has no value to read"));
  EXPECT_THAT(error_of([&] { m.data_ptr(); }),
              ::testing::HasSubstr("data_ptr: a meta tensor (shape [2, 3], float32) has no data"));
  EXPECT_THAT(
      error_of([&] { m.to(kCPU); }),
      ::testing::HasSubstr("copy_: cannot copy out of a meta tensor (shape [2, 3], float32)"));
  EXPECT_THAT(error_of([&] { nonzero(m); }),
              ::testing::HasSubstr("nonzero: no kernel for device meta (its output depends on"));
  // What needs no data works: shapes, dtypes, printing, scalars from any device.
  Tensor r = (m * 2 + ones({3}).to(kMeta)).sum(1);
  EXPECT_TRUE(r.device().is_meta());
  EXPECT_EQ(r.dim(), 1);
  EXPECT_EQ(r.size(0), 2);
  EXPECT_EQ(m.toString(), "tensor(..., size=(2, 3), device='meta')");
  Tensor cpu_scalar = tensor(2.5);
  EXPECT_TRUE((m * cpu_scalar.reshape({})).device().is_meta());
  EXPECT_EQ(memory_stats(kMeta).allocated > 0, true);
}

}  // namespace ignis::testing
