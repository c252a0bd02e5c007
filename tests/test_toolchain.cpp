// The compiler builds ignis's code as written: reproducers of miscompilations found on the
// machines ignis is built on, compiled with the library's flags (IGNIS_COMMON_FLAGS).
#include <gtest/gtest.h>

#include <cstdint>
#include <vector>

namespace {

// Debian's g++ 12.2 with -march=native on a Rocket Lake / Ice Lake Xeon (its -mtune for that
// core) folded this copy into two broadcasts: {1,1,1,1,2,2,2,2}. data::karate_club's label table
// came out wrong that way. CMakeLists.txt adds -mtune=generic.
__attribute__((noinline)) std::vector<int64_t> copy_table() {
  static const int64_t k[8] = {1, 1, 0, 0, 2, 2, 0, 0};
  return std::vector<int64_t>(k, k + 8);
}

TEST(Toolchain, AConstantInt64TableCopiesIntact) {
  EXPECT_EQ(copy_table(), (std::vector<int64_t>{1, 1, 0, 0, 2, 2, 0, 0}));
}

}  // namespace
