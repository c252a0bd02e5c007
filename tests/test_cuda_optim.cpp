// The fused multi-tensor CUDA steps of RMSprop and Adagrad (cuda/optim_kernels.cu) against the
// CPU (the oracle: its fused kernels share the per-element arithmetic, optim/fused_math.h), in
// every option combination, float32 and float64 (and bfloat16, in float32), over several steps
// and more tensors than one launch takes; plus the routing (what goes to the kernel, what takes
// the generic path). Without a GPU the tests are skipped, and say why.
#include <gtest/gtest.h>

#include <cmath>
#include <functional>
#include <limits>
#include <memory>
#include <sstream>
#include <string>
#include <vector>

#include "ignis/cuda.h"
#include "ignis/ignis.h"
#include "ignis/profiler.h"
#include "cuda_test_util.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::testing;

namespace {



using Make = std::function<std::unique_ptr<optim::Optimizer>(std::vector<Tensor>)>;

// A new leaf parameter holding t's values in `dt` on `dev` (never t itself, which to() returns
// when nothing changes).
Tensor leaf(const Tensor& t, DType dt, Device dev) {
  return t.to(dt).to(dev).clone().requires_grad_(true);
}

// gpu (on the GPU) and cpu hold the same values: same shape and dtype, each element within
// atol + rtol * |cpu| (NaNs and infinities in the same places); the first mismatch is reported.
void expect_close(const Tensor& gpu, const Tensor& cpu, double rtol, double atol,
                  const std::string& what) {
  ASSERT_TRUE(gpu.device().is_cuda()) << what;
  ASSERT_TRUE(cpu.device().is_cpu()) << what;
  ASSERT_EQ(gpu.sizes(), cpu.sizes()) << what;
  ASSERT_EQ(gpu.dtype(), cpu.dtype()) << what;
  const Tensor a = gpu.detach().cpu().to(kFloat64).contiguous();
  const Tensor b = cpu.detach().to(kFloat64).contiguous();
  const double* x = a.data_ptr<double>();
  const double* y = b.data_ptr<double>();
  for (int64_t i = 0; i < a.numel(); ++i) {
    const bool same = x[i] == y[i] || (std::isnan(x[i]) && std::isnan(y[i])) ||
                      std::abs(x[i] - y[i]) <= atol + rtol * std::abs(y[i]);
    if (!same) {
      ADD_FAILURE() << what << ": element " << i << " of " << a.numel() << ": gpu " << x[i]
                    << ", cpu " << y[i];
      return;
    }
  }
}

double rtol_of(DType t) { return t == kFloat32 ? 2e-5 : 1e-12; }
double atol_of(DType t) { return t == kFloat32 ? 2e-6 : 1e-12; }

// The parameters and their gradients, made once on the CPU in float64.
struct Fixture {
  std::vector<Tensor> init;
  std::vector<std::vector<Tensor>> grads;  // [step][param]; undefined: no gradient that step
};

constexpr int kSteps = 4;

Fixture make_fixture() {
  manual_seed(29);
  Fixture f;
  // Sizes: one element (1-d and 0-d), empty, a few odd ones, one larger than a launch's 1024
  // blocks of 256 threads cover (the grid-stride loop), and more tensors than one launch's 16.
  std::vector<std::vector<int64_t>> shapes = {{7},    {300}, {1},       {},       {0},
                                              {4096}, {2, 3, 5}, {300001}, {1, 1}};
  for (int k = 0; k < 14; ++k) shapes.push_back({3, 5 + k});
  for (const auto& s : shapes) f.init.push_back(randn(s, kFloat64));
  for (int step = 0; step < kSteps; ++step) {
    std::vector<Tensor> g;
    for (const auto& s : shapes) g.push_back(randn(s, kFloat64));
    f.grads.push_back(std::move(g));
  }
  // Non-finite gradients: a NaN and both infinities, in one tensor at the second step.
  double* g1 = f.grads[1][1].data_ptr<double>();
  g1[5] = std::numeric_limits<double>::quiet_NaN();
  g1[6] = std::numeric_limits<double>::infinity();
  g1[7] = -std::numeric_limits<double>::infinity();
  // Some tensors skip steps, so the step counts (and Adagrad's decayed lr) differ per tensor
  // within a launch.
  f.grads[1][0] = Tensor();
  f.grads[2][0] = Tensor();
  f.grads[2][12] = Tensor();
  f.grads[1][20] = Tensor();
  return f;
}

const Fixture& fixture() {
  static const Fixture f = make_fixture();
  return f;
}

// The parameters and every state tensor after kSteps steps on `dev` in `dt`.
struct Result {
  std::vector<Tensor> params;
  std::vector<std::vector<std::pair<std::string, Tensor>>> states;
};

Result run(Device dev, DType dt, const Make& make) {
  const Fixture& f = fixture();
  Result r;
  for (const Tensor& t : f.init) r.params.push_back(leaf(t, dt, dev));
  auto opt = make(r.params);
  for (int step = 0; step < kSteps; ++step) {
    for (size_t k = 0; k < r.params.size(); ++k) {
      const Tensor& g = f.grads[step][k];
      r.params[k].mutable_grad() = g.defined() ? g.to(dt).to(dev) : Tensor();
    }
    opt->step();
  }
  for (Tensor& p : r.params) {
    std::vector<std::pair<std::string, Tensor>> s;
    for (auto& [name, t] : opt->state(p)->tensors()) {
      if (t->defined()) s.emplace_back(name, t->detach());
    }
    r.states.push_back(std::move(s));
  }
  return r;
}

// Runs `make` on the GPU and on the CPU in float64 and float32 and compares the parameters and
// the states.
void expect_gpu_matches_cpu(const Make& make, const std::string& name) {
  for (DType dt : {kFloat64, kFloat32}) {
    const Result c = run(kCPU, dt, make), g = run(kGpu, dt, make);
    const std::string what = name + (dt == kFloat32 ? " [float32]" : " [float64]");
    for (size_t k = 0; k < c.params.size(); ++k) {
      const std::string param = what + ": parameter " + std::to_string(k);
      expect_close(g.params[k], c.params[k], rtol_of(dt), atol_of(dt), param);
      ASSERT_EQ(g.states[k].size(), c.states[k].size()) << param;
      for (size_t s = 0; s < c.states[k].size(); ++s) {
        ASSERT_EQ(g.states[k][s].first, c.states[k][s].first) << param;
        expect_close(g.states[k][s].second, c.states[k][s].second, rtol_of(dt), atol_of(dt),
                     param + " state " + c.states[k][s].first);
      }
    }
  }
}

// The names of the ops one step() runs (the profiler records each op call).
std::vector<std::string> ops_of_step(optim::Optimizer& opt) {
  profiler::Profile prof;
  opt.step();
  prof.stop();
  std::vector<std::string> names;
  for (const profiler::Event& e : prof.events()) {
    if (e.category == "op") names.push_back(e.name);
  }
  return names;
}

std::string joined(const std::vector<std::string>& v) {
  std::ostringstream s;
  for (const std::string& x : v) s << x << " ";
  return s.str();
}

}  // namespace

TEST(CudaOptim, RMSpropEveryOptionMatchesTheCpu) {
  REQUIRE_GPU();
  for (int mask = 0; mask < 32; ++mask) {
    const bool wd = mask & 1, centered = mask & 2, momentum = mask & 4, maximize = mask & 8;
    // alpha 0.99: the lerp of the centered average from its start; 0.3: from its end.
    const double alpha = (mask & 16) ? 0.3 : 0.99;
    const std::string name = "RMSprop weight_decay=" + std::to_string(wd) +
                             " centered=" + std::to_string(centered) +
                             " momentum=" + std::to_string(momentum) +
                             " maximize=" + std::to_string(maximize) +
                             " alpha=" + std::to_string(alpha);
    expect_gpu_matches_cpu(
        [=](std::vector<Tensor> p) {
          return std::make_unique<optim::RMSprop>(p, optim::RMSpropOptions(0.01)
                                                         .alpha(alpha)
                                                         .eps(1e-6)
                                                         .weight_decay(wd ? 0.1 : 0.0)
                                                         .momentum(momentum ? 0.9 : 0.0)
                                                         .centered(centered)
                                                         .maximize(maximize));
        },
        name);
  }
}

TEST(CudaOptim, AdagradEveryOptionMatchesTheCpu) {
  REQUIRE_GPU();
  for (int mask = 0; mask < 16; ++mask) {
    const bool wd = mask & 1, lr_decay = mask & 2, init = mask & 4, maximize = mask & 8;
    const std::string name = "Adagrad weight_decay=" + std::to_string(wd) +
                             " lr_decay=" + std::to_string(lr_decay) +
                             " initial_accumulator_value=" + std::to_string(init) +
                             " maximize=" + std::to_string(maximize);
    expect_gpu_matches_cpu(
        [=](std::vector<Tensor> p) {
          return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions(0.1)
                                                         .lr_decay(lr_decay ? 0.3 : 0.0)
                                                         .weight_decay(wd ? 0.1 : 0.0)
                                                         .initial_accumulator_value(init ? 0.2
                                                                                         : 0.0)
                                                         .eps(1e-8)
                                                         .maximize(maximize));
        },
        name);
  }
}

// After the first step (which creates the state), a step of contiguous float32/float64 GPU
// parameters runs no tensor op: the whole group is the fused kernel's. A strided parameter takes
// the generic path (ops), and still gives the CPU's result; parameters of another dtype than
// the first's get their own launches.
TEST(CudaOptim, FusedStepRunsNoOpsAndOthersTakeTheGenericPath) {
  REQUIRE_GPU();
  const std::vector<Make> makes = {
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::RMSprop>(
            p, optim::RMSpropOptions(0.01).centered(true).momentum(0.5).weight_decay(0.1));
      },
      [](std::vector<Tensor> p) {
        return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions(0.1).lr_decay(0.1));
      },
  };
  for (size_t which = 0; which < makes.size(); ++which) {
    const std::string name = which == 0 ? "RMSprop" : "Adagrad";
    manual_seed(5);
    const Tensor a = randn({64}, kFloat64), b = randn({3, 4}, kFloat64);
    const Tensor ga = randn({64}, kFloat64), gb = randn({3, 4}, kFloat64);
    // All fused: no ops after the first step.
    {
      std::vector<Tensor> params = {leaf(a, kFloat64, kGpu), leaf(b, kFloat64, kGpu)};
      auto opt = makes[which](params);
      params[0].mutable_grad() = ga.to(kGpu);
      params[1].mutable_grad() = gb.to(kGpu);
      opt->step();
      const uint32_t v = params[0]._version();
      const void* data = params[0].data_ptr();
      EXPECT_EQ(joined(ops_of_step(*opt)), "") << name;
      EXPECT_GT(params[0]._version(), v) << name << ": the step bumps the version";
      EXPECT_EQ(params[0].data_ptr(), data) << name;
      for (auto& [state, t] : opt->state(params[0])->tensors()) {
        if (t->defined()) {
          EXPECT_TRUE(t->device().is_cuda()) << name << " " << state;
        }
      }
    }
    // A float32 first, then a float64 (fused, its own launches), a strided float32 GPU view
    // (generic) and a float32 CPU parameter (the CPU fused kernel), against the same on the CPU.
    auto make_params = [&](Device dev) {
      Tensor base = zeros({3, 8}, TensorOptions(kFloat32).device(dev));
      Tensor strided = base.slice(1, 0, std::nullopt, 2);  // 3 x 4, non-contiguous
      strided.copy_(b.to(kFloat32).to(dev));
      return std::vector<Tensor>{leaf(a, kFloat32, dev), leaf(a, kFloat64, dev),
                                 strided.requires_grad_(true), leaf(b, kFloat32, kCPU)};
    };
    auto step_twice = [&](std::vector<Tensor>& params) {
      auto opt = makes[which](params);
      for (int step = 0; step < 2; ++step) {
        const double scale = step + 1;
        params[0].mutable_grad() = (ga * scale).to(kFloat32).to(params[0].device());
        params[1].mutable_grad() = (ga * scale).to(params[1].device());
        params[2].mutable_grad() = (gb * scale).to(kFloat32).to(params[2].device());
        params[3].mutable_grad() = (gb * scale).to(kFloat32);
        opt->step();
      }
    };
    std::vector<Tensor> gpu = make_params(kGpu), cpu = make_params(kCPU);
    ASSERT_FALSE(gpu[2].is_contiguous());
    step_twice(gpu);
    step_twice(cpu);
    expect_close(gpu[0], cpu[0], 2e-5, 2e-6, name + " mixed: float32 (fused)");
    expect_close(gpu[1], cpu[1], 1e-12, 1e-12, name + " mixed: float64 (fused)");
    expect_close(gpu[2], cpu[2], 2e-5, 2e-6, name + " mixed: strided float32 (generic)");
    EXPECT_TRUE(gpu[3].device().is_cpu());
    EXPECT_TRUE(equal(gpu[3].detach(), cpu[3].detach())) << name << " mixed: CPU parameter";
  }
}

// bfloat16 GPU parameters take the fused kernel too: computed in float32 and rounded once per
// step (PyTorch's foreach kernels), so a step equals the CPU's float32 step on the same
// (bfloat16) values, rounded to bfloat16, within a bfloat16 rounding (the GPU may contract a
// multiply-add the CPU rounds twice); states likewise. A step runs no tensor op, for a list of
// float32, float64 and bfloat16 parameters too (a launch series per dtype).
TEST(CudaOptim, BFloat16IsFusedInFloat32) {
  REQUIRE_GPU();
  manual_seed(8);
  const Tensor init = randn({50}, kFloat64), g = randn({50}, kFloat64);
  const std::vector<std::pair<std::string, Make>> makes = {
      {"RMSprop",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::RMSprop>(
             p, optim::RMSpropOptions(0.01).centered(true).momentum(0.5));
       }},
      {"Adagrad",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adagrad>(p, optim::AdagradOptions(0.1));
       }},
      {"SGD",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::SGD>(
             p, optim::SGDOptions(0.1).momentum(0.9).weight_decay(0.01));
       }},
      {"Adam",
       [](std::vector<Tensor> p) {
         return std::make_unique<optim::Adam>(p, optim::AdamOptions(0.01).amsgrad(true));
       }},
  };
  for (const auto& [name, make] : makes) {
    // The GPU in bfloat16, the CPU in float32 on the same values; two steps.
    auto run_on = [&](Device dev, DType dt) {
      std::vector<Tensor> params = {leaf(init.to(kBFloat16), dt, dev)};
      auto opt = make(params);
      for (int step = 0; step < 2; ++step) {
        params[0].mutable_grad() = (g * (step + 1)).to(kBFloat16).to(dt).to(dev);
        opt->step();
      }
      std::vector<Tensor> out = {params[0].detach()};
      for (auto& [state, t] : opt->state(params[0])->tensors()) {
        if (t->defined() && t->numel() == params[0].numel()) out.push_back(t->detach());
      }
      return out;
    };
    const std::vector<Tensor> gp = run_on(kGpu, kBFloat16), c = run_on(kCPU, kFloat32);
    ASSERT_EQ(gp.size(), c.size()) << name;
    for (size_t k = 0; k < c.size(); ++k) {
      EXPECT_EQ(gp[k].dtype(), kBFloat16) << name;
      expect_close(gp[k], c[k].to(kBFloat16), 8e-3, 1e-6,
                   name + (k == 0 ? ": parameter" : ": state " + std::to_string(k)));
    }
    // Mixed dtypes: after the first step, no op runs.
    std::vector<Tensor> params = {leaf(init, kFloat32, kGpu), leaf(init, kFloat64, kGpu),
                                  leaf(init, kBFloat16, kGpu)};
    auto opt = make(params);
    for (Tensor& p : params) p.mutable_grad() = g.to(p.dtype()).to(kGpu);
    opt->step();
    EXPECT_EQ(joined(ops_of_step(*opt)), "") << name << ": float32, float64 and bfloat16";
  }
}
