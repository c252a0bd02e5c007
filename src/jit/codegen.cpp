// Generated elementwise kernels (see codegen.h).
#include "jit/codegen.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cmath>
#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

#include "ignis/error.h"
#include "jit/row_reduce.h"

extern char** environ;

namespace ignis::jit::detail {

extern const char* const kPrelude;  // the functors' headers (generated: jit_prelude.cpp)

namespace {

std::vector<std::string> compile_flags() {
  std::vector<std::string> f = {"-std=c++20", "-O3", "-fno-math-errno", "-fPIC", "-shared", "-w"};
#ifdef IGNIS_JIT_NATIVE
  f.emplace_back("-march=native");  // as the library's own kernels (see CMakeLists.txt)
  f.emplace_back("-mtune=generic");
#endif
  return f;
}

uint64_t fnv1a(const std::string& s, uint64_t h = 1469598103934665603ull) {
  for (unsigned char c : s) {
    h ^= c;
    h *= 1099511628211ull;
  }
  return h;
}

std::string hex(uint64_t v) {
  char buf[17];
  std::snprintf(buf, sizeof buf, "%016llx", static_cast<unsigned long long>(v));
  return buf;
}

bool make_dirs(const std::string& path) {
  std::string cur;
  std::stringstream ss(path);
  std::string part;
  if (!path.empty() && path[0] == '/') cur += '/';
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part;
    cur += '/';
    if (mkdir(cur.c_str(), 0700) != 0 && errno != EEXIST) return false;
  }
  return true;
}

std::string read_head(const std::string& path, size_t n) {
  std::ifstream f(path);
  std::string s((std::istreambuf_iterator<char>(f)), std::istreambuf_iterator<char>());
  return s.size() > n ? s.substr(0, n) + "..." : s;
}

/// Runs argv (no shell), stdout and stderr into `log`; its exit status, or -1.
int run(const std::vector<std::string>& argv, const std::string& log) {
  std::vector<char*> args;
  for (const std::string& a : argv) args.push_back(const_cast<char*>(a.c_str()));
  args.push_back(nullptr);
  posix_spawn_file_actions_t fa;
  posix_spawn_file_actions_init(&fa);
  posix_spawn_file_actions_addopen(&fa, 1, log.c_str(), O_WRONLY | O_CREAT | O_TRUNC, 0600);
  posix_spawn_file_actions_adddup2(&fa, 1, 2);
  pid_t pid = 0;
  const int rc = posix_spawnp(&pid, args[0], &fa, nullptr, args.data(), environ);
  posix_spawn_file_actions_destroy(&fa);
  if (rc != 0) return -1;
  int status = 0;
  while (waitpid(pid, &status, 0) < 0) {
    if (errno != EINTR) return -1;
  }
  return WIFEXITED(status) ? WEXITSTATUS(status) : -1;
}

struct Cache {
  std::mutex mu;
  std::map<uint64_t, void*> kernels;
  std::map<std::string, std::string> broken;  // per compiler: why it cannot run (no more tries)
  std::map<uint64_t, std::string> failed;     // per source: why it did not compile
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may run during static destruction
  return *c;
}

std::string c_type(DType d) { return d == kFloat64 ? "double" : "float"; }

// v as a C++ double expression: a floating literal (never an integer one: -0 must stay -0.0),
// or std::numeric_limits for the non-finite values (NVRTC has no compiler builtins for them).
std::string double_literal(double v) {
  if (std::isnan(v)) return "std::numeric_limits<double>::quiet_NaN()";
  if (std::isinf(v))
    return v > 0 ? "std::numeric_limits<double>::infinity()"
                 : "(-std::numeric_limits<double>::infinity())";
  std::string n = format_number(v);
  if (n.find_first_of(".en") == std::string::npos) n += ".0";
  return n;
}

// v as a value of the kernel's type T.
std::string literal(double v) { return "T(" + double_literal(v) + ")"; }

std::string operand(const FusedOperand& o) {
  switch (o.kind) {
    case FusedOperand::Kind::Input:
    case FusedOperand::Kind::Value: {
      std::string name(1, o.kind == FusedOperand::Kind::Input ? 'a' : 'v');
      return name += std::to_string(o.index);  // (not "a" + ...: GCC 12's -Wrestrict)
    }
    case FusedOperand::Kind::Number: return literal(o.number);
  }
  return "";
}

}  // namespace

std::string jit_compiler() {
  const char* e = std::getenv("IGNIS_JIT_CXX");
  return e && *e ? e : "c++";
}

std::string jit_cache_dir() {
  if (const char* e = std::getenv("IGNIS_JIT_CACHE"); e && *e) return e;
  if (const char* x = std::getenv("XDG_CACHE_HOME"); x && *x) return std::string(x) + "/ignis/jit";
  if (const char* h = std::getenv("HOME"); h && *h) return std::string(h) + "/.cache/ignis/jit";
  return "/tmp/ignis-jit-" + std::to_string(getuid());
}

namespace {

const char* const kApply =
    // A mask (a comparison's bool) becomes 1 or 0 (row_reduce.h).
    IGNIS_JIT_STRINGIFY(IGNIS_JIT_VALUE_CODE) "\n"
    // A functor with an exact path for rare inputs (see cpu/loops.h) takes it here too.
    "template <class F, class T> inline T ignis_apply(const F& f, T x) {\n"
    "  if constexpr (requires { f.needs_exact(x); }) return f.needs_exact(x) ? f.exact(x) : "
    "f(x);\n"
    "  else return ignis_value<T>(f(x));\n}\n"
    "template <class F, class T> inline T ignis_apply(const F& f, T x, T y) {\n"
    "  return ignis_value<T>(f(x, y));\n}\n"
    "template <class F, class T> inline T ignis_apply(const F& f, T x, T y, T z) {\n"
    "  return f(x, y, z);\n}\n";

/// The element type of an input: T, or the bytes of a bool one (a mask).
const char* element_type(char layout) { return is_bool_layout(layout) ? "unsigned char" : "T"; }

/// The input pointers in0, in1, ... of the kernel's arguments (`args`: the array holding them),
/// typed by their layouts (num_inputs of them; any more are the statistics, of type T).
void emit_inputs(std::ostream& s, int num_inputs, const std::string& layouts,
                 const std::string& args = "in") {
  for (int i = 0; i < num_inputs; ++i) {
    const char* t = i < static_cast<int>(layouts.size()) ? element_type(layouts[i]) : "T";
    s << "  const " << t << "* __restrict in" << i << " = static_cast<const " << t << "*>(" << args
      << "[" << i << "]);\n";
  }
}

/// An input's element as T (a bool's byte as 1 or 0).
std::string as_t(char layout, const std::string& element) {
  return is_bool_layout(layout) ? "static_cast<T>(" + element + " != 0)" : element;
}

/// Per row r: full and row inputs as pointers p<i> into the row, column and scalar ones as
/// values b<i>.
void emit_row_pointers(std::ostream& s, const std::string& layouts, const std::string& indent) {
  for (size_t i = 0; i < layouts.size(); ++i) {
    const std::string n = std::to_string(i), in = "in" + n;
    const char l = layouts[i];
    switch (float_layout(l)) {
      case 'f':
        s << indent << "const " << element_type(l) << "* __restrict p" << n << " = " << in
          << " + r * cols;\n";
        break;
      case 'r':
        s << indent << "const " << element_type(l) << "* __restrict p" << n << " = " << in << ";\n";
        break;
      case 'c': s << indent << "const T b" << n << " = " << as_t(l, in + "[r]") << ";\n"; break;
      default: s << indent << "const T b" << n << " = " << as_t(l, in + "[0]") << ";\n"; break;
    }
  }
}

/// Inside the loop over c: the element of each input (a<i>), then the instructions (v<j>).
/// Returns the name of the program's result.
std::string emit_body(std::ostream& s, const FusedProgram& p, const std::string& layouts,
                      const std::string& indent) {
  for (int i = 0; i < p.num_inputs && i < static_cast<int>(layouts.size()); ++i) {
    const std::string n = std::to_string(i);
    const char l = layouts[static_cast<size_t>(i)], f = float_layout(l);
    s << indent << "const T a" << n << " = "
      << (f == 'f' || f == 'r' ? as_t(l, "p" + n + "[c]") : "b" + n) << ";\n";
  }
  for (size_t j = 0; j < p.code.size(); ++j) {
    const FusedInstr& in = p.code[j];
    const FusedOpInfo& info = fused_op_info(in.op);
    if (in.op == FusedOp::dropout) {
      // element k = r * cols + c of stream d: counter base + d n + k (rng_: seed, base, n)
      s << indent << "const T v" << j << " = " << operand(in.a)
        << " * ignis::dropout_factor<T>(rng_[0], rng_[1] + " << static_cast<int>(in.b.number)
        << "ull * rng_[2] + static_cast<unsigned long long>(r "
        << "* cols + c), " << literal(in.param) << ", " << literal(1.0 / (1.0 - in.param))
        << ");\n";
      continue;
    }
    s << indent << "const T v" << j << " = ignis_apply(ignis::fn::" << info.functor
      << "{ignis::OpArgs{" << double_literal(in.param) << ", " << double_literal(in.param2) << ", "
      << double_literal(in.param3) << "}}, " << operand(in.a);
    for (int k = 1; k < info.arity; ++k) s << ", " << operand(operand_at(in, k));
    s << ");\n";
  }
  std::string result(1, 'v');
  return result += std::to_string(p.code.size() - 1);
}

/// A fused reduction's source up to its kernel: the functors, a comment naming it, ignis_apply.
void emit_reduction_header(std::ostream& s, const FusedProgram* prologue,
                           const std::string& reduction, const FusedProgram* epilogue,
                           const std::string& layouts) {
  s << kPrelude << "\n// ---- the kernel: " << reduction << " of "
    << (prologue ? prologue->str() : std::string("i0")) << ", then "
    << (epilogue ? epilogue->str() : std::string("nothing")) << " (inputs: " << layouts << ")\n"
    << kApply;
}

/// A fused reduction's last pass over the row (`loop`: the for-loop's header over c): the
/// reduction's value a<num_inputs> (`value`), then the epilogue, into o[c]; closes the kernel.
/// An epilogue with dropout draws from `rng_epi_` (the kernel declares it).
void emit_epilogue_loop(std::ostream& s, const std::string& loop, const std::string& value,
                        const FusedProgram* epilogue, int num_inputs, const std::string& layouts) {
  s << "    for (" << loop << ") {\n"
    << "      const T a" << num_inputs << " = " << value << ";\n";
  if (epilogue != nullptr && epilogue->random_streams() > 0)
    s << "      const unsigned long long* rng_ = rng_epi_;\n";
  if (epilogue != nullptr) {
    const std::string v = emit_body(s, *epilogue, layouts, "      ");
    s << "      o[c] = " << v << ";\n";
  } else {
    s << "      o[c] = a" << num_inputs << ";\n";
  }
  s << "    }\n  }\n}\n";
}

}  // namespace

namespace {

/// The CPU kernel: its outputs are `out_` (one result, `outputs` empty: the last value) or the
/// array `out_` of one pointer per value of `outputs`.
std::string elementwise_source(const FusedProgram& p, const std::vector<int>& outputs, DType dtype,
                               const std::string& layouts) {
  std::ostringstream s;
  s << kPrelude << "\n// ---- the kernel: " << p.str();
  for (size_t j = 0; j < outputs.size(); ++j) s << (j ? ", v" : ", storing v") << outputs[j];
  s << " (inputs: " << layouts << ")\n";
  s << kApply;
  s << "extern \"C\" void ignis_fused_kernel(const void* const* in, "
    << (outputs.empty() ? "void* out_" : "void* const* out_")
    << ", long long begin, long long end, long long cols) {\n";
  s << "  using T = " << c_type(dtype) << ";\n";
  emit_inputs(s, p.num_inputs, layouts);
  if (p.random_streams() > 0) {  // dropout's stream: the pointer after the inputs'
    s << "  const unsigned long long* rng_ = static_cast<const unsigned long long*>(in["
      << p.num_inputs << "]);\n";
  }
  if (outputs.empty()) s << "  T* __restrict out = static_cast<T*>(out_);\n";
  for (size_t j = 0; j < outputs.size(); ++j)
    s << "  T* __restrict out" << j << " = static_cast<T*>(out_[" << j << "]);\n";
  // Row segments: within one, full and row inputs are contiguous, column and scalar ones fixed.
  s << "  for (long long k = begin; k < end;) {\n"
       "    const long long r = k / cols, c0 = k - r * cols;\n"
       "    const long long c1 = c0 + (end - k < cols - c0 ? end - k : cols - c0);\n";
  if (outputs.empty()) s << "    T* __restrict o = out + r * cols;\n";
  for (size_t j = 0; j < outputs.size(); ++j)
    s << "    T* __restrict o" << j << " = out" << j << " + r * cols;\n";
  emit_row_pointers(s, layouts, "    ");
  // Several stores keep GCC from versioning the loop for aliasing; the outputs are fresh tensors,
  // so no iteration depends on another.
  if (!outputs.empty()) s << "#pragma GCC ivdep\n";
  s << "    for (long long c = c0; c < c1; ++c) {\n";
  const std::string result = emit_body(s, p, layouts, "      ");
  if (outputs.empty()) s << "      o[c] = " << result << ";\n";
  for (size_t j = 0; j < outputs.size(); ++j)
    s << "      o" << j << "[c] = v" << outputs[j] << ";\n";
  s << "    }\n    k += c1 - c0;\n  }\n}\n";
  return s.str();
}

}  // namespace

std::string fused_kernel_source(const FusedProgram& p, DType dtype, const std::string& layouts) {
  return elementwise_source(p, {}, dtype, layouts);
}

std::string fused_multi_kernel_source(const FusedProgram& p, const std::vector<int>& outputs,
                                      DType dtype, const std::string& layouts) {
  return elementwise_source(p, outputs, dtype, layouts);
}

namespace {
// Tree reductions of one value per thread over the block (blockDim.x a power of two), in a fixed
// order; every thread gets the result.
const char* const kCudaBlockFold =
    "template <class T, class F> T ignis_block_fold(T v, T* sh, const F& f) {\n"
    "  sh[threadIdx.x] = v;\n  __syncthreads();\n"
    "  for (unsigned w = blockDim.x / 2; w > 0; w /= 2) {\n"
    "    if (threadIdx.x < w) sh[threadIdx.x] = f(sh[threadIdx.x], sh[threadIdx.x + w]);\n"
    "    __syncthreads();\n  }\n"
    "  const T r = sh[0];\n  __syncthreads();\n  return r;\n}\n";

/// The generated CUDA kernels' first argument: the inputs' pointers and dropout's stream (seed,
/// base, n), as cuda/nvrtc_fusion.cpp packs them.
std::string cuda_inputs_struct() {
  return "struct IgnisFusedInputs { const void* p[" + std::to_string(kMaxFusedInputs) +
         "]; unsigned long long rng[3]; unsigned long long rng2[3]; };";
}
}  // namespace

std::string fused_cuda_kernel_source(const FusedProgram& p, DType dtype,
                                     const std::string& layouts) {
  std::ostringstream s;
  s << kPrelude << "\n// ---- the kernel: " << p.str() << " (inputs: " << layouts << ")\n";
  s << kApply;
  s << cuda_inputs_struct() << "\n"
       "extern \"C\" __global__ void ignis_fused_kernel(IgnisFusedInputs in, void* out_, "
       "long long n, long long cols) {\n";
  s << "  using T = " << c_type(dtype) << ";\n";
  emit_inputs(s, p.num_inputs, layouts, "in.p");
  if (p.random_streams() > 0) s << "  const unsigned long long* rng_ = in.rng;\n";
  s << "  T* __restrict out = static_cast<T*>(out_);\n"
       "  const long long step = static_cast<long long>(blockDim.x) * gridDim.x;\n"
       "  for (long long k = static_cast<long long>(blockIdx.x) * blockDim.x + threadIdx.x; "
       "k < n; k += step) {\n"
       "    const long long r = k / cols, c = k - r * cols;\n";
  emit_row_pointers(s, layouts, "    ");
  const std::string result = emit_body(s, p, layouts, "    ");
  s << "    out[k] = " << result << ";\n  }\n}\n";
  return s.str();
}

std::string fused_reduction_source(const FusedProgram* prologue, const std::string& reduction,
                                   const FusedProgram* epilogue, int num_inputs, DType dtype,
                                   const std::string& layouts) {
  std::ostringstream s;
  emit_reduction_header(s, prologue, reduction, epilogue, layouts);
  s << IGNIS_JIT_STRINGIFY(IGNIS_LANE_FOLD_CODE) << "\n"
    << IGNIS_JIT_STRINGIFY(IGNIS_JIT_ROW_REDUCE_CODE) << "\n";
  s << "extern \"C\" void ignis_fused_kernel(const void* const* in, void* out_, long long r0, "
       "long long r1, long long cols, double eps_, void* scratch_) {\n";
  s << "  using T = " << c_type(dtype) << ";\n";
  emit_inputs(s, num_inputs, layouts);
  // The programs' dropout streams (seed, base, n): the pointers after the inputs', the
  // prologue's then the epilogue's; element (r, c) of the output is element r * cols + c.
  int slot = num_inputs;
  const bool pro_rng = prologue != nullptr && prologue->random_streams() > 0;
  if (pro_rng) {
    s << "  const unsigned long long* rng_pro_ = static_cast<const unsigned long long*>(in["
      << slot++ << "]);\n";
  }
  if (epilogue != nullptr && epilogue->random_streams() > 0) {
    s << "  const unsigned long long* rng_epi_ = static_cast<const unsigned long long*>(in["
      << slot++ << "]);\n";
  }
  s << "  T* __restrict out = static_cast<T*>(out_);\n"
       "  T* __restrict xb = static_cast<T*>(scratch_);\n"
       "  const T eps = static_cast<T>(eps_);\n"
       "  (void)eps;\n";
  // Pass 1: the prologue of a row into half of the scratch (without one, the reduction reads
  // input 0). Rows of up to 2048 elements run it a row ahead: row r + 1's values are computed
  // before row r is reduced, so the reduction reads values stored a row earlier; read right
  // after their stores they cost as much again as the rest of a short row's kernel on an AMD
  // Zen 5 (a softmax over rows of 128: 1.5x faster ahead; docs/graph-mode.md). Longer rows
  // (whose two halves would not stay in the L1 cache) run it just before their reduction.
  if (prologue != nullptr) {
    s << "  auto ignis_prologue = [&](long long r, T* __restrict dst) {\n";
    emit_row_pointers(s, layouts, "    ");
    s << "    for (long long c = 0; c < cols; ++c) {\n";
    if (pro_rng) s << "      const unsigned long long* rng_ = rng_pro_;\n";
    const std::string v = emit_body(s, *prologue, layouts, "      ");
    s << "      dst[c] = " << v
      << ";\n    }\n  };\n"
         "  const bool ahead = cols <= 2048;\n"
         "  if (ahead && r0 < r1) ignis_prologue(r0, xb);\n";
  }
  s << "  for (long long r = r0; r < r1; ++r) {\n"
       "    T* __restrict o = out + r * cols;\n";
  emit_row_pointers(s, layouts, "    ");
  if (prologue != nullptr) {
    s << "    const T* x = xb + (ahead ? ((r - r0) & 1) * cols : 0);\n"
         "    if (!ahead)\n"
         "      ignis_prologue(r, xb);\n"
         "    else if (r + 1 < r1)\n"
         "      ignis_prologue(r + 1, xb + ((r + 1 - r0) & 1) * cols);\n";
  } else {
    s << "    const T* x = p0;\n";
  }
  // Pass 2: the row's statistics; pass 3: the normalised value a<n> and the epilogue.
  std::string value;
  if (reduction == "layer_norm") {
    s << "    T mean, rstd;\n    ignis_layer_norm_stats(x, cols, eps, mean, rstd);\n";
    value = "(x[c] - mean) * rstd";
  } else if (reduction == "rms_norm") {  // the squares' sum: deviations from 0
    s << "    const T rstd = ignis::fn::Rsqrt{}(ignis_row_sq_dev(x, cols, T(0)) / "
         "static_cast<T>(cols) + eps);\n";
    value = "x[c] * rstd";
  } else {
    // The exponentials go into the output row (as eager's softmax does; each element is read
    // before the epilogue's store to it), not a third buffer.
    s << "    const T m = ignis_row_max(x, cols);\n"
         "    const T sum = ignis_row_exp_sum(x, o, cols, m);\n";
    if (reduction == "softmax") {
      s << "    const T inv = T(1) / sum;\n";
      value = "o[c] * inv";
    } else {
      s << "    const T ls = std::log(sum);\n";
      value = "(x[c] - m) - ls";
    }
  }
  emit_epilogue_loop(s, "long long c = 0; c < cols; ++c", value, epilogue, num_inputs, layouts);
  return s.str();
}

std::string fused_cuda_reduction_source(const FusedProgram* prologue, const std::string& reduction,
                                        const FusedProgram* epilogue, int num_inputs, DType dtype,
                                        const std::string& layouts) {
  std::ostringstream s;
  emit_reduction_header(s, prologue, reduction, epilogue, layouts);
  s << kCudaBlockFold
    << "struct IgnisSum { template <class T> T operator()(T a, T b) const { return a + b; } };\n"
       "struct IgnisMax { template <class T> T operator()(T a, T b) const { return b > a ? b : a; "
       "} "
       "};\n";
  s << cuda_inputs_struct() << "\n"
       "extern \"C\" __global__ void ignis_fused_kernel(IgnisFusedInputs in, void* out_, "
       "long long rows, long long cols, double eps_, void* scratch_) {\n";
  s << "  using T = " << c_type(dtype) << ";\n  __shared__ T sh[256];\n";
  emit_inputs(s, num_inputs, layouts, "in.p");
  // The programs' dropout streams: the prologue's in rng, the epilogue's in rng2.
  const bool pro_rng = prologue != nullptr && prologue->random_streams() > 0;
  if (pro_rng) s << "  const unsigned long long* rng_pro_ = in.rng;\n";
  if (epilogue != nullptr && epilogue->random_streams() > 0)
    s << "  const unsigned long long* rng_epi_ = in.rng2;\n";
  s << "  T* __restrict out = static_cast<T*>(out_);\n"
       "  const T eps = static_cast<T>(eps_);\n"
       "  (void)eps;\n"
       "  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {\n"
       "    T* __restrict o = out + r * cols;\n";
  emit_row_pointers(s, layouts, "    ");
  // Pass 1: the prologue into this row's scratch (each thread reads back only what it wrote).
  if (prologue != nullptr) {
    s << "    T* __restrict xb = static_cast<T*>(scratch_) + blockIdx.x * cols;\n"
         "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {\n";
    if (pro_rng) s << "      const unsigned long long* rng_ = rng_pro_;\n";
    const std::string v = emit_body(s, *prologue, layouts, "      ");
    s << "      xb[c] = " << v << ";\n    }\n    const T* x = xb;\n";
  } else {
    s << "    const T* x = p0;\n";
  }
  s << "    T part = T(0);\n";
  std::string value;
  if (reduction == "layer_norm") {
    s << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) part += x[c];\n"
         "    const T mean = ignis_block_fold(part, sh, IgnisSum{}) / static_cast<T>(cols);\n"
         "    part = T(0);\n"
         "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {\n"
         "      const T d = x[c] - mean;\n      part += d * d;\n    }\n"
         "    const T var = ignis_block_fold(part, sh, IgnisSum{}) / static_cast<T>(cols);\n"
         "    const T rstd = ignis::fn::Rsqrt{}(var + eps);\n";
    value = "(x[c] - mean) * rstd";
  } else if (reduction == "rms_norm") {
    s << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) part += x[c] * x[c];\n"
         "    const T ms = ignis_block_fold(part, sh, IgnisSum{}) / static_cast<T>(cols);\n"
         "    const T rstd = ignis::fn::Rsqrt{}(ms + eps);\n";
    value = "x[c] * rstd";
  } else {
    s << "    part = -std::numeric_limits<T>::infinity();\n"
         "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) "
         "part = x[c] > part ? x[c] : part;\n"
         "    const T m = ignis_block_fold(part, sh, IgnisMax{});\n"
         "    part = T(0);\n"
         "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) "
         "part += ignis::fn::Exp{}(x[c] - m);\n"
         "    const T sum = ignis_block_fold(part, sh, IgnisSum{});\n";
    if (reduction == "softmax") {
      s << "    const T inv = T(1) / sum;\n";
      value = "ignis::fn::Exp{}(x[c] - m) * inv";
    } else {
      s << "    const T ls = std::log(sum);\n";
      value = "(x[c] - m) - ls";
    }
  }
  emit_epilogue_loop(s, "long long c = threadIdx.x; c < cols; c += blockDim.x", value, epilogue,
                     num_inputs, layouts);
  return s.str();
}

namespace {
/// The combining step of a statistic (row_reduce.h) and its identity.
const char* stat_combiner(const std::string& reduction) {
  return reduction == "amax" ? "IgnisMaxNan" : reduction == "amin" ? "IgnisMinNan" : "IgnisAdd";
}
const char* stat_identity(const std::string& reduction) {
  return reduction == "amax"   ? "-std::numeric_limits<T>::infinity()"
         : reduction == "amin" ? "std::numeric_limits<T>::infinity()"
                               : "T(0)";
}
/// The row's statistics of the stages before stage k as the values b<n> .. b<n+k-1> (the
/// programs read them as inputs i<n> ..., laid out 's'), from `st`.
void emit_stat_values(std::ostream& s, int num_inputs, size_t k, const std::string& indent) {
  for (size_t j = 0; j < k; ++j)
    s << indent << "const T b" << num_inputs + static_cast<int>(j) << " = st[" << j << "];\n";
}
/// The layouts of a program reading the inputs and k statistics (one value each).
std::string stat_layouts(const std::string& layouts, size_t k) {
  return layouts + std::string(k, 's');
}
/// The epilogue at one element (`store`: where its value goes), the row's statistics in `st`;
/// without one, the last statistic.
void emit_stat_epilogue(std::ostream& s, const FusedProgram* epilogue, int num_inputs, size_t K,
                        const std::string& layouts, const std::string& store,
                        const std::string& indent) {
  emit_stat_values(s, num_inputs, K, indent);
  std::string v = "st[";  // (not "st[" + ...: GCC 12's -Wrestrict)
  if (epilogue) {
    v = emit_body(s, *epilogue, stat_layouts(layouts, K), indent);
  } else {
    v += std::to_string(K - 1);
    v += ']';
  }
  s << indent << store << " = " << v << ";\n";
}
/// A statistics kernel's source up to its signature: the functors, a comment naming it,
/// ignis_apply, the combining steps.
void emit_stat_header(std::ostream& s, const std::vector<FusedStatStage>& stats,
                      const FusedProgram* epilogue, const std::string& layouts) {
  s << kPrelude << "\n// ---- the kernel:";
  for (size_t k = 0; k < stats.size(); ++k)
    s << (k ? ", then " : " ") << stats[k].reduction << " of "
      << (stats[k].prologue ? stats[k].prologue->str() : std::string("i0"));
  s << ", then " << (epilogue ? epilogue->str() : std::string("nothing")) << " (inputs: " << layouts
    << ")\n"
    << kApply << IGNIS_JIT_STRINGIFY(IGNIS_JIT_COMBINE_CODE) << "\n";
}
/// Each stage's combining step, f0, f1, ...
void emit_combiners(std::ostream& s, const std::vector<FusedStatStage>& stats) {
  for (size_t k = 0; k < stats.size(); ++k)
    s << "  const " << stat_combiner(stats[k].reduction) << " f" << k << "{};\n";
}
}  // namespace

std::string fused_stat_source(const std::vector<FusedStatStage>& stats,
                              const FusedProgram* epilogue, int num_inputs, DType dtype,
                              const std::string& layouts, bool full) {
  std::ostringstream s;
  emit_stat_header(s, stats, epilogue, layouts);
  s << IGNIS_JIT_STRINGIFY(IGNIS_LANE_FOLD_CODE) << "\n"
    << IGNIS_JIT_STRINGIFY(IGNIS_JIT_LANES_CODE) << "\n";
  s << "extern \"C\" void ignis_fused_kernel(const void* const* in, void* out_, long long i0, "
       "long long i1, long long cols, long long chunk, void* partial_, const void* stats_, "
       "int pass) {\n";
  s << "  using T = " << c_type(dtype) << ";\n";
  emit_inputs(s, num_inputs, layouts);
  const size_t K = stats.size();
  s << "  T* __restrict out = static_cast<T*>(out_);\n"
       "  T* __restrict partial = static_cast<T*>(partial_);\n"
       "  const T* __restrict stats = static_cast<const T*>(stats_);\n"
       "  const long long nc = (cols + chunk - 1) / chunk;\n";
  emit_combiners(s, stats);
  // Pass k: stage k's statistic of each part, the row's earlier statistics read from stats.
  for (size_t k = 0; k < K; ++k) {
    std::string f(1, 'f');  // (not "f" + ...: GCC 12's -Wrestrict)
    f += std::to_string(k);
    s << "  if (pass == " << k << ") {\n    T buf[" << kStatTile
      << "];\n    (void)buf;\n"
         "    for (long long it = i0; it < i1; ++it) {\n"
         "      const long long r = it / nc, c0 = (it - r * nc) * chunk;\n"
         "      const long long c1 = c0 + chunk < cols ? c0 + chunk : cols;\n"
         "      const T* __restrict st = stats + r * "
      << K << ";\n      (void)st;\n";
    emit_row_pointers(s, layouts, "      ");
    emit_stat_values(s, num_inputs, k, "      ");
    s << "      T acc[16];\n      for (int j = 0; j < 16; ++j) acc[j] = "
      << stat_identity(stats[k].reduction) << ";\n";
    if (const FusedProgram* pro = stats[k].prologue) {
      s << "      for (long long t0 = c0; t0 < c1; t0 += " << kStatTile << ") {\n"
        << "        const long long t1 = t0 + " << kStatTile << " < c1 ? t0 + " << kStatTile
        << " : c1;\n"
        << "        for (long long c = t0; c < t1; ++c) {\n";
      const std::string v = emit_body(s, *pro, stat_layouts(layouts, k), "          ");
      s << "          buf[c - t0] = " << v << ";\n"
        << "        }\n        ignis_lanes_add(acc, buf, t1 - t0, " << f << ");\n      }\n";
    } else {
      s << "      ignis_lanes_add(acc, p0 + c0, c1 - c0, " << f << ");\n";
    }
    s << "      partial[it] = ignis_lanes_total(acc, " << f << ");\n    }\n    return;\n  }\n";
  }
  // Pass K: the epilogue.
  if (full) {
    s << "  for (long long it = i0; it < i1; ++it) {  // parts again\n"
         "    const long long r = it / nc, c0 = (it - r * nc) * chunk;\n"
         "    const long long c1 = c0 + chunk < cols ? c0 + chunk : cols;\n"
         "    T* __restrict o = out + r * cols;\n"
         "    const T* __restrict st = stats + r * "
      << K << ";\n";
    emit_row_pointers(s, layouts, "    ");
    s << "    for (long long c = c0; c < c1; ++c) {\n";
    emit_stat_epilogue(s, epilogue, num_inputs, K, layouts, "o[c]", "      ");
    s << "    }\n  }\n}\n";
  } else {
    s << "  for (long long r = i0; r < i1; ++r) {  // rows\n"
         "    const long long c = 0;\n"
         "    (void)c;\n"
         "    const T* __restrict st = stats + r * "
      << K << ";\n";
    emit_row_pointers(s, layouts, "    ");
    emit_stat_epilogue(s, epilogue, num_inputs, K, layouts, "out[r]", "    ");
    s << "  }\n}\n";
  }
  return s.str();
}

std::string fused_cuda_stat_source(const std::vector<FusedStatStage>& stats,
                                   const FusedProgram* epilogue, int num_inputs, DType dtype,
                                   const std::string& layouts, bool full) {
  std::ostringstream s;
  emit_stat_header(s, stats, epilogue, layouts);
  s << kCudaBlockFold << cuda_inputs_struct()
    << "\n"
       "extern \"C\" __global__ void ignis_fused_kernel(IgnisFusedInputs in, void* out_, "
       "long long rows, long long cols, double eps_, void* scratch_) {\n";
  s << "  using T = " << c_type(dtype) << ";\n  __shared__ T sh[256];\n";
  emit_inputs(s, num_inputs, layouts, "in.p");
  const size_t K = stats.size();
  s << "  T* __restrict out = static_cast<T*>(out_);\n";
  emit_combiners(s, stats);
  s << "  for (long long r = blockIdx.x; r < rows; r += gridDim.x) {\n"
       "    T st["
    << K << "];\n";
  emit_row_pointers(s, layouts, "    ");
  for (size_t k = 0; k < K; ++k) {
    std::string f(1, 'f');  // (not "f" + ...: GCC 12's -Wrestrict)
    f += std::to_string(k);
    s << "    {  // stage " << k << "\n";
    emit_stat_values(s, num_inputs, k, "      ");
    s << "      T part = " << stat_identity(stats[k].reduction) << ";\n"
      << "      for (long long c = threadIdx.x; c < cols; c += blockDim.x) {\n";
    if (const FusedProgram* pro = stats[k].prologue) {
      const std::string v = emit_body(s, *pro, stat_layouts(layouts, k), "        ");
      s << "        part = " << f << "(part, " << v << ");\n";
    } else {
      s << "        part = " << f << "(part, p0[c]);\n";
    }
    s << "      }\n      st[" << k << "] = ignis_block_fold(part, sh, " << f << ")"
      << (stats[k].reduction == "mean" ? " / static_cast<T>(cols)" : "") << ";\n    }\n";
  }
  if (full) {
    s << "    for (long long c = threadIdx.x; c < cols; c += blockDim.x) {\n";
    emit_stat_epilogue(s, epilogue, num_inputs, K, layouts, "out[r * cols + c]", "      ");
    s << "    }\n";
  } else {
    s << "    if (threadIdx.x == 0) {\n      const long long c = 0;\n      (void)c;\n";
    emit_stat_epilogue(s, epilogue, num_inputs, K, layouts, "out[r]", "      ");
    s << "    }\n";
  }
  s << "  }\n}\n";
  return s.str();
}

void* compiled_symbol(const std::string& source, std::string& why) {
  Cache& c = cache();
  const std::string compiler = jit_compiler();
  std::string flags;
  for (const std::string& f : compile_flags()) flags += f + " ";
  const uint64_t key = fnv1a(source, fnv1a(compiler + "\n" + flags));
  std::lock_guard<std::mutex> lock(c.mu);
  if (auto it = c.kernels.find(key); it != c.kernels.end()) return it->second;
  if (auto it = c.broken.find(compiler); it != c.broken.end()) {
    why = it->second;
    return nullptr;
  }
  if (auto it = c.failed.find(key); it != c.failed.end()) {
    why = it->second;
    return nullptr;
  }
  const std::string dir = jit_cache_dir();
  const std::string base = dir + "/" + hex(key);
  const std::string so = base + ".so";
  if (access(so.c_str(), R_OK) != 0) {
    if (!make_dirs(dir)) {
      why = c.broken[compiler] = "cannot create the kernel cache directory " + dir;
      return nullptr;
    }
    // Written under names of this process, then renamed: a concurrent process compiling the
    // same kernel, or a crash, never leaves a partial file under the final name.
    const std::string tag = "." + std::to_string(getpid());
    const std::string cpp = base + tag + ".cpp", tmp = base + tag + ".so",
                      log = base + tag + ".log";
    {
      std::ofstream f(cpp);
      f << source;
      if (!f) {
        why = c.broken[compiler] = "cannot write " + cpp;
        return nullptr;
      }
    }
    std::vector<std::string> argv = {compiler};
    for (const std::string& f : compile_flags()) argv.push_back(f);
    argv.insert(argv.end(), {"-o", tmp, cpp});
    const int rc = run(argv, log);
    if (rc != 0) {
      why = "compiling a fused kernel with '" + compiler + "' failed (" +
            (rc < 0 ? std::string("could not run it") : "exit status " + std::to_string(rc)) +
            "): " + read_head(log, 400);
      // A compiler that does not run is broken for every kernel; one source that does not
      // compile is remembered alone (the other kernels still compile).
      (rc < 0 ? c.broken[compiler] : c.failed[key]) = why;
      std::remove(cpp.c_str());
      std::remove(tmp.c_str());
      std::remove(log.c_str());
      return nullptr;
    }
    std::rename(tmp.c_str(), so.c_str());
    std::remove(cpp.c_str());
    std::remove(log.c_str());
  }
  void* h = dlopen(so.c_str(), RTLD_NOW | RTLD_LOCAL);
  void* sym = h ? dlsym(h, "ignis_fused_kernel") : nullptr;
  if (sym == nullptr) {
    const char* e = dlerror();
    why = "loading the fused kernel " + so + " failed: " + (e ? e : "no ignis_fused_kernel");
    if (h) dlclose(h);
    std::remove(so.c_str());  // a damaged cache entry: compiled again next time
    return nullptr;
  }
  c.kernels.emplace(key, sym);
  return sym;
}

}  // namespace ignis::jit::detail
