// libFuzzer target: fused elementwise programs (a fused_elementwise node's `program` attribute,
// untrusted when a graph file is loaded) and their reverse-mode derivatives. The first byte picks
// the number of inputs (1 to 8), the rest is the program text. Checks: the parser throws
// ignis::Error or returns a program whose text parses back to itself; then every input's
// backward program (fused_backward_program) parses back over one more input (the gradient) to
// the same text, and the multi-output backward (fused_backward) names only values it defines.
#include <cstdint>
#include <optional>
#include <string>
#include <string_view>
#include <vector>

#include "fuzz_util.h"
#include "ignis/error.h"
#include "jit/fused_program.h"

using namespace ignis::jit::detail;

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  if (size == 0) return 0;
  const int n = 1 + data[0] % 8;
  const std::string_view text(reinterpret_cast<const char*>(data) + 1, size - 1);
  FusedProgram p;
  try {
    p = parse_fused_program(text, n);
  } catch (const ignis::Error&) {
    return 0;
  }
  const std::string printed = p.str();
  FUZZ_ASSERT(parse_fused_program(printed, n).str() == printed);
  std::vector<int> all;
  for (int k = 0; k < n; ++k) {
    all.push_back(k);
    const std::optional<std::string> b = fused_backward_program(p, k);
    if (!b || b->empty()) continue;
    FUZZ_ASSERT(parse_fused_program(*b, n + 1).str() == *b);  // an error here is a bug
  }
  if (const std::optional<FusedBackward> m = fused_backward(p, all)) {
    FUZZ_ASSERT(m->outputs.size() == all.size());
    for (int v : m->outputs) FUZZ_ASSERT(v < static_cast<int>(m->program.code.size()));
    if (!m->program.code.empty()) {
      const std::string s = m->program.str();
      FUZZ_ASSERT(parse_fused_program(s, n + 1).str() == s);
    }
  }
  return 0;
}
