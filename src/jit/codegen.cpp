// Generated elementwise kernels (see codegen.h).
#include "jit/codegen.h"

#include <dlfcn.h>
#include <fcntl.h>
#include <spawn.h>
#include <sys/stat.h>
#include <sys/wait.h>
#include <unistd.h>

#include <cstdio>
#include <cstdlib>
#include <fstream>
#include <map>
#include <mutex>
#include <sstream>
#include <vector>

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
  if (!path.empty() && path[0] == '/') cur = "/";
  while (std::getline(ss, part, '/')) {
    if (part.empty()) continue;
    cur += part + "/";
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
  std::map<uint64_t, FusedKernelFn> kernels;
  std::map<std::string, std::string> broken;  // per compiler: why it failed (no more tries)
};
Cache& cache() {
  static Cache* c = new Cache;  // never destroyed: kernels may run during static destruction
  return *c;
}

std::string c_type(DType d) { return d == kFloat64 ? "double" : "float"; }

std::string operand(const FusedOperand& o) {
  switch (o.kind) {
    case FusedOperand::Kind::Input: return "a" + std::to_string(o.index);
    case FusedOperand::Kind::Value: return "v" + std::to_string(o.index);
    case FusedOperand::Kind::Number: {
      const std::string n = format_number(o.number);
      if (n == "inf") return "T(__builtin_inf())";
      if (n == "-inf") return "T(-__builtin_inf())";
      if (n == "nan") return "T(__builtin_nan(\"\"))";
      return "T(" + n + ")";
    }
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

std::string fused_kernel_source(const FusedProgram& p, DType dtype, const std::string& layouts) {
  std::ostringstream s;
  s << kPrelude << "\n// ---- the kernel: " << p.str() << " (inputs: " << layouts << ")\n";
  // A functor with an exact path for rare inputs (see cpu/loops.h) takes it here too.
  s << "template <class F, class T> inline T ignis_apply(const F& f, T x) {\n"
       "  if constexpr (requires { f.needs_exact(x); }) return f.needs_exact(x) ? f.exact(x) : f(x);\n"
       "  else return f(x);\n}\n"
       "template <class F, class T> inline T ignis_apply(const F& f, T x, T y) { return f(x, y); }\n";
  s << "extern \"C\" void ignis_fused_kernel(const void* const* in, void* out_, long long begin, "
       "long long end, long long cols) {\n";
  s << "  using T = " << c_type(dtype) << ";\n";
  for (int i = 0; i < p.num_inputs; ++i) {
    s << "  const T* __restrict in" << i << " = static_cast<const T*>(in[" << i << "]);\n";
  }
  s << "  T* __restrict out = static_cast<T*>(out_);\n";
  // Row segments: within one, full and row inputs are contiguous, column and scalar ones fixed.
  s << "  for (long long k = begin; k < end;) {\n"
       "    const long long r = k / cols, c0 = k - r * cols;\n"
       "    const long long c1 = c0 + (end - k < cols - c0 ? end - k : cols - c0);\n"
       "    T* __restrict o = out + r * cols;\n";
  for (int i = 0; i < p.num_inputs; ++i) {
    const std::string n = std::to_string(i);
    switch (layouts[static_cast<size_t>(i)]) {
      case 'f': s << "    const T* __restrict p" << n << " = in" << n << " + r * cols;\n"; break;
      case 'r': s << "    const T* __restrict p" << n << " = in" << n << ";\n"; break;
      case 'c': s << "    const T b" << n << " = in" << n << "[r];\n"; break;
      default: s << "    const T b" << n << " = in" << n << "[0];\n"; break;
    }
  }
  s << "    for (long long c = c0; c < c1; ++c) {\n";
  for (int i = 0; i < p.num_inputs; ++i) {
    const std::string n = std::to_string(i);
    const char l = layouts[static_cast<size_t>(i)];
    s << "      const T a" << n << " = " << (l == 'f' || l == 'r' ? "p" + n + "[c]" : "b" + n)
      << ";\n";
  }
  for (size_t j = 0; j < p.code.size(); ++j) {
    const FusedInstr& in = p.code[j];
    const FusedOpInfo& info = fused_op_info(in.op);
    s << "      const T v" << j << " = ignis_apply(ignis::fn::" << info.functor << "{ignis::OpArgs{"
      << format_number(in.param) << ", 0}}, " << operand(in.a);
    if (info.arity == 2) s << ", " << operand(in.b);
    s << ");\n";
  }
  s << "      o[c] = v" << p.code.size() - 1 << ";\n    }\n    k += c1 - c0;\n  }\n}\n";
  return s.str();
}

FusedKernelFn compiled_kernel(const std::string& source, std::string& why) {
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
    const std::string cpp = base + tag + ".cpp", tmp = base + tag + ".so", log = base + tag + ".log";
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
      why = c.broken[compiler] = "compiling a fused kernel with '" + compiler + "' failed (" +
                       (rc < 0 ? std::string("could not run it") : "exit status " + std::to_string(rc)) +
                       "): " + read_head(log, 400);
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
  auto fn = reinterpret_cast<FusedKernelFn>(sym);
  c.kernels.emplace(key, fn);
  return fn;
}

}  // namespace ignis::jit::detail
