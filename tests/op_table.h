// The op test table (after PyTorch's OpInfo): one entry per op lists sample inputs (broadcast,
// 0-d, empty, non-contiguous), a float64 reference and tolerances. test_op_table.cpp derives
// from it forward checks per dtype, float64 gradchecks, and gradgradchecks.
// Entries are registered from tests/ops_<family>.cpp with IGNIS_OP_INFO.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ignis/ignis.h"

namespace ignis::testing {

/// One call of the op: its tensor inputs (float64 unless the op needs integer/bool inputs).
struct OpSample {
  std::string desc;
  std::vector<Tensor> inputs;
};

struct OpInfo {
  std::string name;
  /// The op under test. Inputs arrive converted to the dtype under test.
  std::function<Tensor(const std::vector<Tensor>&)> fn;
  /// An independent float64 reference (plain loops, std:: math), given float64 inputs.
  std::function<Tensor(const std::vector<Tensor>&)> ref;
  std::function<std::vector<OpSample>()> samples;
  /// Dtypes the forward check runs in (floating inputs are cast to them; others kept).
  std::vector<DType> dtypes = {kFloat32, kFloat64};
  double atol32 = 1e-5, rtol32 = 1e-4;  // float32 vs reference
  double atol_bf16 = 2e-2, rtol_bf16 = 2e-2;
  double atol64 = 1e-10, rtol64 = 1e-8;
  /// Which inputs are differentiated by gradcheck (default: every floating input).
  std::vector<size_t> grad_inputs = {};
  bool differentiable = true;
  bool twice_differentiable = true;
  /// Registry records this entry tests besides the one named `name` (full names such as
  /// "add.Scalar", or bare names covering every overload). See test_op_coverage.
  std::vector<std::string> ops = {};
  /// Why the op cannot run on the meta device (its output's shape depends on input values, or
  /// it is a documented host read); empty: the meta test runs it.
  std::string meta_skip = {};
  /// Inputs that the entry's fn reads on the host as parameters (dims, sizes, strides passed
  /// as int64 tensors; -1 is the last input): the meta test keeps them on the CPU.
  std::vector<int> host_params = {};
  /// The op returns a host value (allclose, equal: a bool), which fn wraps in a CPU tensor: the
  /// CUDA test accepts that result on the CPU.
  bool host_result = false;
};

std::vector<OpInfo>& op_table();

/// Registry ops with no entry in the table, each with the reason (see IGNIS_OP_EXEMPT).
std::vector<std::pair<std::string, std::string>>& op_exemptions();
struct OpExemptionRegistrar {
  OpExemptionRegistrar(std::string op, std::string reason) {
    op_exemptions().emplace_back(std::move(op), std::move(reason));
  }
};

struct OpInfoRegistrar {
  explicit OpInfoRegistrar(OpInfo info) { op_table().push_back(std::move(info)); }
  explicit OpInfoRegistrar(std::vector<OpInfo> infos) {
    for (OpInfo& info : infos) op_table().push_back(std::move(info));
  }
};
#define IGNIS_OP_INFO_CAT2(a, b) a##b
#define IGNIS_OP_INFO_CAT(a, b) IGNIS_OP_INFO_CAT2(a, b)
/// IGNIS_OP_INFO(OpInfo{...}); at namespace scope in a tests/ops_<family>.cpp file.
#define IGNIS_OP_INFO(...) \
  static ::ignis::testing::OpInfoRegistrar IGNIS_OP_INFO_CAT(op_info_, __LINE__)(__VA_ARGS__)

/// IGNIS_OP_EXEMPT("from_blob", "wraps caller memory: ..."); a registry op the table does not
/// test, and why (it is tested elsewhere, or it has no values to compare).
#define IGNIS_OP_EXEMPT(op, reason) \
  static ::ignis::testing::OpExemptionRegistrar IGNIS_OP_INFO_CAT(op_exempt_, __LINE__)(op, reason)

// ---- helpers for writing entries

/// `o`, also covering the registry records `ops` (see OpInfo::ops).
inline OpInfo covering(OpInfo o, std::vector<std::string> ops) {
  o.ops = std::move(ops);
  return o;
}

/// Deterministic float64 values uniform in [lo, hi) (seeded; independent of ignis's RNG).
Tensor make_input(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2);
/// The same values laid out non-contiguously (a transposed or strided view of a larger buffer).
Tensor make_noncontiguous(IntArrayRef shape, uint64_t seed, double lo = -2, double hi = 2);
/// The standard samples of an elementwise op with `arity` inputs: same shape, broadcast,
/// 0-d with 2-d, empty, non-contiguous. Values in [lo, hi).
std::vector<OpSample> elementwise_samples(int arity, double lo = -2, double hi = 2);
/// A float64 reference for elementwise ops: broadcasts the inputs and applies f per element.
Tensor ref_elementwise(const std::vector<Tensor>& inputs,
                       const std::function<double(const std::vector<double>&)>& f);
/// The values of a tensor as doubles, in row-major order of its shape.
std::vector<double> values(const Tensor& t);
/// A float64 tensor of `shape` with these values.
Tensor from_values(const std::vector<double>& v, IntArrayRef shape);

}  // namespace ignis::testing
