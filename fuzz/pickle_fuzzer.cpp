// libFuzzer target: the inert pickle reader of the Planetoid files (src/data/graph_pickle.cpp)
// on bytes held in memory, then each interpreter of its result (NumPy array, SciPy CSR matrix,
// adjacency dict). Any input must give a value or an ignis::Error: no crash, no leak (values
// cannot form reference cycles), no unbounded allocation. Build and run: make fuzz
#include <cstdint>

#include "data/graph_pickle.h"
#include "fuzz_util.h"
#include "ignis/error.h"

extern "C" int LLVMFuzzerTestOneInput(const uint8_t* data, size_t size) {
  using namespace ignis::data::pickle;
  ValuePtr v;
  try {
    v = load(data, size, "in.pkl");
  } catch (const ignis::Error&) {
    return 0;
  }
  FUZZ_ASSERT(v != nullptr);
  try {
    ignis::Tensor a = to_array(v, "in.pkl");
    FUZZ_ASSERT(a.defined());
  } catch (const ignis::Error&) {
  }
  try {
    ignis::Tensor m = csr_to_dense(v, "in.pkl");
    FUZZ_ASSERT(m.dim() == 2);
  } catch (const ignis::Error&) {
  }
  try {
    (void)adjacency_dict(v, "in.pkl");
  } catch (const ignis::Error&) {
  }
  return 0;
}
