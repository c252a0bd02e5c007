// ignis's graph ops against PyTorch (Debian's python3-torch): tests/pytorch/gnn_reference.py
// writes random cases with torch's results and gradients (scatter_reduce in every mode, a
// segment softmax, a sparse-dense product with duplicate entries, GCN's normalisation); ignis
// runs the same cases and must agree to 1e-12. Skipped (with a message) without python3-torch;
// $IGNIS_PYTHON picks the interpreter.
#include <gtest/gtest.h>
#include <sys/wait.h>

#include <cstdio>
#include <cstdlib>
#include <map>

#include "ignis/ignis.h"
#include "test_util.h"

#ifndef IGNIS_SOURCE_DIR
#define IGNIS_SOURCE_DIR "."
#endif

namespace ignis {
namespace {

const std::string kPython = [] {
  const char* env = std::getenv("IGNIS_PYTHON");
  return std::string(env != nullptr && *env != '\0' ? env : "/usr/bin/python3");
}();

std::pair<int, std::string> run(const std::string& cmd) { return run_command(cmd); }

class GnnTorch : public ::testing::Test {
 protected:
  static void SetUpTestSuite() {
    if (std::system(("test -x " + kPython).c_str()) != 0) {
      skip_ = kPython + " not found";
      return;
    }
    if (run(kPython + " -c 'import importlib.util, sys; "
                      "sys.exit(importlib.util.find_spec(\"torch\") is None)'")
            .first != 0) {
      skip_ = kPython + " has no torch module (python3-torch)";
      return;
    }
    dir_ = std::make_unique<TempDir>("ignis-gnn-torch");
    const std::string path = dir_->file("ref.safetensors");
    auto [rc, out] =
        run(kPython + " " + IGNIS_SOURCE_DIR + "/tests/pytorch/gnn_reference.py " + path);
    ASSERT_EQ(rc, 0) << out;
    for (auto& [name, t] : load_safetensors(path).tensors) ref_[name] = t;
  }
  static void TearDownTestSuite() { dir_.reset(); }
  void SetUp() override {
    if (!skip_.empty()) GTEST_SKIP() << "PyTorch comparison skipped: " << skip_;
  }
  static const Tensor& ref(const std::string& name) {
    auto it = ref_.find(name);
    EXPECT_TRUE(it != ref_.end()) << "missing " << name;
    return it->second;
  }
  // Checks out against <name>.out and the gradients of sum(out * g) against <name>.gradK.
  static void check(const std::string& name, const Tensor& out, const std::vector<Tensor>& inputs) {
    SCOPED_TRACE(name);
    ASSERT_TRUE(out.sizes().equals(ref(name + ".out").sizes()));
    EXPECT_TRUE(allclose(out, ref(name + ".out"), 1e-12, 1e-12)) << out << ref(name + ".out");
    const auto g =
        autograd::grad({(out * ref(name + ".g")).sum()}, inputs, {}, std::nullopt, false, true);
    for (size_t k = 0; k < inputs.size(); ++k) {
      const Tensor want = ref(name + ".grad" + std::to_string(k));
      const Tensor got = g[k].defined() ? g[k] : zeros_like(want);
      EXPECT_TRUE(allclose(got, want, 1e-12, 1e-12)) << "gradient " << k << "\n" << got << want;
    }
  }
  static inline std::string skip_;
  static inline std::unique_ptr<TempDir> dir_;
  static inline std::map<std::string, Tensor> ref_;
};

TEST_F(GnnTorch, ScatterReduceEveryModeAndGradients) {
  EXPECT_EQ(ref_.size(), 177u);
  // The comparison can fail: amax's answer is not sum's.
  const std::string amax = "sr.vector.amax.1";
  EXPECT_FALSE(allclose(
      scatter_reduce(ref(amax + ".self"), 0, ref(amax + ".index"), ref(amax + ".src"), "sum"),
      ref(amax + ".out"), 1e-12, 1e-12));
  for (const char* c : {"vector", "general"}) {
    for (const char* r : {"sum", "prod", "mean", "amax", "amin"}) {
      for (int inc : {1, 0}) {
        const std::string name = std::string("sr.") + c + "." + r + "." + std::to_string(inc);
        Tensor self = ref(name + ".self").clone().requires_grad_(true);
        Tensor src = ref(name + ".src").clone().requires_grad_(true);
        const int64_t dim = ref(name + ".dim").item<int64_t>();
        check(name, scatter_reduce(self, dim, ref(name + ".index"), src, r, inc == 1), {self, src});
      }
    }
  }
}

TEST_F(GnnTorch, SegmentSoftmax) {
  Tensor src = ref("ss.src").clone().requires_grad_(true);
  check("ss", segment_softmax(src, ref("ss.index"), 5), {src});
}

TEST_F(GnnTorch, SparseMMWithDuplicates) {
  Tensor v = ref("sp.values").clone().requires_grad_(true);
  Tensor d = ref("sp.dense").clone().requires_grad_(true);
  check("sp", sparse_mm(ref("sp.indices"), v, d, 8), {v, d});
}

TEST_F(GnnTorch, GcnNorm) {
  Tensor w = ref("gn.weight").clone().requires_grad_(true);
  check("gn", std::get<1>(gcn_norm(ref("gn.edge_index"), w, 7)), {w});
}

}  // namespace
}  // namespace ignis
