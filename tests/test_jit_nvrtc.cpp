// Graph mode's fused elementwise kernels for GPUs (src/cuda/nvrtc_fusion.cpp): the CUDA source
// generated from the shared functors compiles with NVRTC for an H100 (sm_90). Compiling needs
// libnvrtc, not a GPU, so this runs wherever the CUDA toolkit is installed (CI's machines); the
// kernels' values are checked on a GPU by Cuda.CompiledGraphsRunOnTheGpu (test_cuda.cpp).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <string>

#include "cuda/backend.h"
#include "ignis/cuda.h"
#include "jit/codegen.h"
#include "jit/fused_program.h"
#include "test_util.h"

using namespace ignis;
using namespace ignis::jit::detail;
using ::testing::HasSubstr;

namespace {

// Every op fused programs know (jit/fused_program.h), in the order of the FusedOp enum.
constexpr int kFusedOps = 0
#define IGNIS_X(name, F, arity, params) +1
    IGNIS_FUSED_BASE_OPS(IGNIS_X)
#undef IGNIS_X
#define IGNIS_FLOAT_UNARY_OP(name, F, saves, grad) +1
#include "ignis/float_unary_ops.def"
#undef IGNIS_FLOAT_UNARY_OP
    ;

// One program chaining every op: v_j = op_j(v_{j-1} [, input j % 4]), parameters 0.5.
FusedProgram every_op() {
  FusedProgram p;
  p.num_inputs = 4;
  for (int j = 0; j < kFusedOps; ++j) {
    FusedInstr in;
    in.op = static_cast<FusedOp>(j);
    in.a = j == 0 ? FusedOperand{FusedOperand::Kind::Input, 0, 0}
                  : FusedOperand{FusedOperand::Kind::Value, j - 1, 0};
    const FusedOpInfo& info = fused_op_info(in.op);
    if (info.arity >= 2) in.b = FusedOperand{FusedOperand::Kind::Input, j % 4, 0};
    if (info.arity == 3) in.c = FusedOperand{FusedOperand::Kind::Input, (j + 1) % 4, 0};
    if (info.params > 0) in.param = 0.5;
    p.code.push_back(in);
  }
  // A number operand, infinities included (spelled as builtins in the source).
  FusedInstr last;
  last.op = FusedOp::maximum;
  last.a = FusedOperand{FusedOperand::Kind::Value, kFusedOps - 1, 0};
  last.b = FusedOperand{FusedOperand::Kind::Number, 0, -std::numeric_limits<double>::infinity()};
  p.code.push_back(last);
  return p;
}

// Skips when libnvrtc cannot be opened (a build without the CUDA backend, or no toolkit).
std::string compile_or_skip(const std::string& source, int sm, bool& skipped) {
  try {
    skipped = false;
    return cuda::detail::nvrtc_compile(source, sm);
  } catch (const Error& e) {
    const std::string msg = e.what();
    if (msg.find("could not be loaded") != std::string::npos ||
        msg.find("without a CUDA backend") != std::string::npos) {
      skipped = true;
      return msg;
    }
    throw;
  }
}

// Compiles `source` for sm_90 and expects a cubin (an ELF file); a compile error fails the test,
// naming `what`. False when NVRTC is not there (the caller skips).
bool expect_cubin(const std::string& source, std::string_view what) {
  bool skipped = false;
  std::string cubin;
  try {
    cubin = compile_or_skip(source, 90, skipped);
  } catch (const Error& e) {
    ADD_FAILURE() << what << ": " << e.what();
    return true;
  }
  if (skipped) return false;
  EXPECT_EQ(cubin.substr(0, 4), std::string("\x7f" "ELF")) << what << ": not a cubin";
  return true;
}

}  // namespace

TEST(JitNvrtc, EveryFusedOpCompilesForTheGpuInBothDtypesAndEveryLayout) {
  const FusedProgram p = every_op();
  ASSERT_GT(kFusedOps, 30);
  for (DType dt : {kFloat32, kFloat64}) {
    // Full, repeated row, per-row column, and scalar inputs; float, then bool (masks).
    for (const char* layouts : {"frcs", "FRCS"}) {
      const std::string source = fused_cuda_kernel_source(p, dt, layouts);
      EXPECT_THAT(source, HasSubstr("extern \"C\" __global__ void ignis_fused_kernel("));
      if (layouts[0] == 'F') {
        EXPECT_THAT(source, HasSubstr("const unsigned char* __restrict in0 = static_cast<const "
                                      "unsigned char*>(in.p[0]);"));
      }
      if (!expect_cubin(source, std::string(dtype_name(dt)) + " " + layouts))
        GTEST_SKIP() << "no NVRTC here";
    }
  }
}

TEST(JitNvrtc, TrainingDropoutCompilesForTheGpu) {
  // Dropout reads its stream from the kernel's argument (rng) and draws with ignis/counter_rng.h,
  // part of the prelude NVRTC compiles.
  const FusedProgram p = parse_fused_program("dropout(i0,0,0.25);mul(v0,i1);dropout(v1,1,0.5)", 2);
  for (DType dt : {kFloat32, kFloat64}) {
    const std::string source = fused_cuda_kernel_source(p, dt, "fr");
    EXPECT_THAT(source, HasSubstr("const unsigned long long* rng_ = in.rng;"));
    EXPECT_THAT(source, HasSubstr("ignis::dropout_factor<T>(rng_[0], rng_[1] + 1ull * rng_[2]"));
    if (!expect_cubin(source, dtype_name(dt))) GTEST_SKIP() << "no NVRTC here";
  }
}

TEST(JitNvrtc, FusedReductionsCompileForTheGpu) {
  // layer_norm's affine epilogue over (x, weight row, bias row, the normalised value), a
  // prologue adding a residual, and rms_norm, softmax and log_softmax with and without them.
  const FusedProgram prologue = parse_fused_program("add(i0,i3,1)", 4);
  const FusedProgram epilogue = parse_fused_program("mul(i4,i1);add(v0,i2,1)", 5);
  for (const char* reduction : {"layer_norm", "rms_norm", "softmax", "log_softmax"}) {
    for (DType dt : {kFloat32, kFloat64}) {
      for (bool with : {false, true}) {
        const std::string source = fused_cuda_reduction_source(
            with ? &prologue : nullptr, reduction, with ? &epilogue : nullptr, 4, dt, "frrf");
        const std::string what = std::string(reduction) + " " + std::string(dtype_name(dt)) +
                                 (with ? " with" : " without") + " prologue and epilogue";
        if (!expect_cubin(source, what)) GTEST_SKIP() << "no NVRTC here";
      }
    }
  }
}

TEST(JitNvrtc, FusedStatisticsCompileForTheGpu) {
  // sum, mean, amax and amin with a prologue, and an epilogue giving one value per row or the
  // rows' shape (reading input 0, full), and alone.
  const FusedProgram prologue = parse_fused_program("sub(i0,i1,1);mul(v0,v0)", 2);
  const FusedProgram row = parse_fused_program("sqrt(i2)", 3);
  const FusedProgram rows = parse_fused_program("add(i2,1e-06,1);rsqrt(v0);mul(i0,v1)", 3);
  for (const char* reduction : {"sum", "mean", "amax", "amin"}) {
    for (DType dt : {kFloat32, kFloat64}) {
      for (int form = 0; form < 3; ++form) {
        const std::string source =
            fused_cuda_stat_source({{form == 2 ? nullptr : &prologue, reduction}},
                                   form == 0   ? &row
                                   : form == 1 ? &rows
                                               : nullptr,
                                   2, dt, "fr", form == 1);
        EXPECT_THAT(source, HasSubstr(form == 1 ? "out[r * cols + c] =" : "out[r] ="));
        const std::string what = std::string(reduction) + " " + std::string(dtype_name(dt)) +
                                 " form " + std::to_string(form);
        if (!expect_cubin(source, what)) GTEST_SKIP() << "no NVRTC here";
      }
    }
  }
}

TEST(JitNvrtc, MaskedReductionsCompileForTheGpu) {
  // An attention softmax's prologue filling a bool mask (full, or one value per row) with -inf,
  // and a masked sum (a statistic with a mask repeated along the rows).
  const FusedProgram fill = parse_fused_program("mul(i0,0.125);where(i1,-inf,v0)", 2);
  const FusedProgram keep = parse_fused_program("where(i1,0,i0)", 2);
  for (DType dt : {kFloat32, kFloat64}) {
    for (const char* layouts : {"fF", "fC"}) {
      const std::string softmax =
          fused_cuda_reduction_source(&fill, "softmax", nullptr, 2, dt, layouts);
      EXPECT_THAT(softmax, HasSubstr("static_cast<const unsigned char*>(in.p[1])"));
      if (!expect_cubin(softmax, std::string("masked softmax ") + layouts))
        GTEST_SKIP() << "no NVRTC here";
    }
    const std::string sum = fused_cuda_stat_source({{&keep, "sum"}}, nullptr, 2, dt, "fR", false);
    if (!expect_cubin(sum, "masked sum")) GTEST_SKIP() << "no NVRTC here";
  }
}

TEST(JitNvrtc, ChainsOfStatisticsCompileForTheGpu) {
  // A hand-written softmax as one node: the max, then the sum of exponentials reading it (i1),
  // then the epilogue reading both (i1, i2); and a layer norm's mean then variance, per row.
  const FusedProgram shifted = parse_fused_program("sub(i0,i1,1);exp(v0)", 2);
  const FusedProgram divide = parse_fused_program("sub(i0,i1,1);exp(v0);div(v1,i2)", 3);
  const FusedProgram centred = parse_fused_program("sub(i0,i1,1);mul(v0,v0)", 2);
  const FusedProgram rstd = parse_fused_program("add(i2,1e-05,1);rsqrt(v0)", 3);
  for (DType dt : {kFloat32, kFloat64}) {
    const std::string softmax =
        fused_cuda_stat_source({{nullptr, "amax"}, {&shifted, "sum"}}, &divide, 1, dt, "f", true);
    EXPECT_THAT(softmax, HasSubstr("st[1] = ignis_block_fold(part, sh, f1);"));
    if (!expect_cubin(softmax, "softmax chain")) GTEST_SKIP() << "no NVRTC here";
    const std::string norm =
        fused_cuda_stat_source({{nullptr, "mean"}, {&centred, "mean"}}, &rstd, 1, dt, "f", false);
    EXPECT_THAT(norm, HasSubstr("out[r] ="));
    EXPECT_TRUE(expect_cubin(norm, "variance chain"));
  }
}

TEST(JitNvrtc, FusedReductionsWithDropoutCompileForTheGpu) {
  // The prologue's dropout draws from the argument's rng, the epilogue's from rng2.
  const FusedProgram prologue = parse_fused_program("add(i0,i1,1);dropout(v0,0,0.1)", 2);
  const FusedProgram epilogue = parse_fused_program("dropout(i2,0,0.2);dropout(v0,1,0.3)", 3);
  for (const char* reduction : {"layer_norm", "softmax"}) {
    for (DType dt : {kFloat32, kFloat64}) {
      const std::string source =
          fused_cuda_reduction_source(&prologue, reduction, &epilogue, 2, dt, "ff");
      EXPECT_THAT(source, HasSubstr("const unsigned long long* rng_pro_ = in.rng;"));
      EXPECT_THAT(source, HasSubstr("const unsigned long long* rng_epi_ = in.rng2;"));
      EXPECT_THAT(source, HasSubstr("unsigned long long rng2[3];"));
      const std::string what = std::string(reduction) + " " + std::string(dtype_name(dt));
      if (!expect_cubin(source, what)) GTEST_SKIP() << "no NVRTC here";
    }
  }
}

TEST(JitNvrtc, CompileErrorsComeBackWithNvrtcsLog) {
  bool skipped = false;
  try {
    const std::string r = compile_or_skip("__global__ void k() { undeclared_name(); }", 90, skipped);
    if (skipped) GTEST_SKIP() << "no NVRTC here: " << r;
    FAIL() << "a broken source compiled";
  } catch (const Error& e) {
    EXPECT_THAT(e.what(), HasSubstr("NVRTC could not compile a fused kernel for sm_90"));
    EXPECT_THAT(e.what(), HasSubstr("undeclared_name"));
  }
}
