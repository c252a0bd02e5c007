// A downstream program built against an installed ignis (see CMakeLists.txt): creates tensors,
// runs backward, checks the values and an error across the library boundary, prints OK.
#include <ignis/ignis.h>

#include <cmath>
#include <cstdio>
#include <string>

namespace {
int failures = 0;
void expect_near(double got, double want, const char* what) {
  if (std::fabs(got - want) > 1e-6 * (1 + std::fabs(want))) {
    std::printf("FAIL: %s = %g, expected %g\n", what, got, want);
    ++failures;
  }
}
}  // namespace

int main() {
  using namespace ignis;
  // y = sum(x * x + 2 * x) at x = [1, 2, 3]: y = 26, dy/dx = 2x + 2 = [4, 6, 8].
  Tensor x = tensor({1.0, 2.0, 3.0}, TensorOptions(kFloat32).requires_grad(true));
  Tensor y = (x * x + x * 2.0).sum();
  y.backward();
  expect_near(y.item<double>(), 26, "y");
  const Tensor& g = x.grad();
  if (!g.defined() || g.numel() != 3) {
    std::printf("FAIL: x.grad() is not a 3-element tensor\n");
    return 1;
  }
  const double want[] = {4, 6, 8};
  for (int64_t i = 0; i < 3; ++i) expect_near(g[i].item<double>(), want[i], "x.grad()[i]");

  // An ignis::Error thrown inside libignis is caught here as ignis::Error.
  try {
    (void)add(ones({2, 3}), ones({4}));
    std::printf("FAIL: adding shapes [2, 3] and [4] did not throw\n");
    ++failures;
  } catch (const Error& e) {
    if (std::string(e.what()).find("[2, 3]") == std::string::npos) {
      std::printf("FAIL: unexpected error message: %s\n", e.what());
      ++failures;
    }
  }
  if (failures) return 1;
  std::printf("OK\n");
  return 0;
}
