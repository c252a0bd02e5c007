// Printing: the exact strings PyTorch prints for the same tensors (its dtype suffix reads
// `dtype=torch.float64`; ignis prints `dtype=float64`, and grad_fn names have no version suffix).
#include <gtest/gtest.h>

#include <limits>
#include <sstream>

#include "ignis/ignis.h"

namespace ignis {
namespace {

std::string str(const Tensor& t) {
  std::ostringstream os;
  os << t;
  EXPECT_EQ(os.str(), t.toString());
  return os.str();
}

// std::cout << loss.item() prints the value.
TEST(Print, ScalarsFromItem) {
  std::ostringstream os;
  os << tensor({0.25}).sum().item() << " " << tensor(std::vector<int64_t>{3}).sum().item() << " "
     << tensor(std::vector<bool>{true}).all().item();
  EXPECT_EQ(os.str(), "0.25 3 true");
}

TEST(Print, FloatMatrixOfIntegers) {
  EXPECT_EQ(str(tensor({{1.0, 2.0}, {3.0, 4.0}})), "tensor([[1., 2.],\n        [3., 4.]])");
}

TEST(Print, FixedPoint) {
  EXPECT_EQ(str(tensor({1.5, -2.25, 3.0})), "tensor([ 1.5000, -2.2500,  3.0000])");
  EXPECT_EQ(str(tensor({0.001, 0.5})), "tensor([0.0010, 0.5000])");
  EXPECT_EQ(str(tensor({-1.0, 2.0})), "tensor([-1.,  2.])");
  EXPECT_EQ(str(zeros({2})), "tensor([0., 0.])");
}

TEST(Print, ScientificWhenNeeded) {
  EXPECT_EQ(str(tensor({1e-5, 1.0})), "tensor([1.0000e-05, 1.0000e+00])");
  EXPECT_EQ(str(tensor({1e10, 1.0})), "tensor([1.0000e+10, 1.0000e+00])");
  EXPECT_EQ(str(tensor({0.5, 2000.0})), "tensor([5.0000e-01, 2.0000e+03])");
}

TEST(Print, NonFinite) {
  const double inf = std::numeric_limits<double>::infinity();
  const double nan = std::numeric_limits<double>::quiet_NaN();
  EXPECT_EQ(str(tensor({1.5, nan, inf})), "tensor([1.5000,    nan,    inf])");
  EXPECT_EQ(str(tensor({1.0, -inf, -nan})), "tensor([1., -inf, nan])");
}

TEST(Print, IntegersAndBools) {
  EXPECT_EQ(str(tensor({1, 2, 3})), "tensor([1, 2, 3])");
  EXPECT_EQ(str(tensor({-10, 2})), "tensor([-10,   2])");
  EXPECT_EQ(str(tensor(std::vector<bool>{true, false})), "tensor([ True, False])");
  EXPECT_EQ(str(tensor({1, 2}, kInt32)), "tensor([1, 2], dtype=int32)");
  EXPECT_EQ(str(tensor({7}, kUInt8)), "tensor([7], dtype=uint8)");
}

TEST(Print, ZeroDim) {
  EXPECT_EQ(str(tensor(3.5)), "tensor(3.5000)");
  EXPECT_EQ(str(scalar_tensor(5, kInt64)), "tensor(5)");
  EXPECT_EQ(str(scalar_tensor(true, kBool)), "tensor(True)");
  EXPECT_EQ(str(scalar_tensor(2, kFloat64)), "tensor(2., dtype=float64)");
}

TEST(Print, Empty) {
  EXPECT_EQ(str(zeros({0, 3})), "tensor([], size=(0, 3))");
  EXPECT_EQ(str(zeros({0})), "tensor([])");
  EXPECT_EQ(str(zeros({0}, kInt64)), "tensor([], dtype=int64)");
  EXPECT_EQ(str(zeros({2, 0, 3}, kFloat64)), "tensor([], size=(2, 0, 3), dtype=float64)");
}

TEST(Print, DtypeSuffix) {
  EXPECT_EQ(str(tensor({1.0, 2.0}, kFloat64)), "tensor([1., 2.], dtype=float64)");
  EXPECT_EQ(str(tensor({1.5, 2.0}, kBFloat16)), "tensor([1.5000, 2.0000], dtype=bfloat16)");
}

TEST(Print, AutogradSuffix) {
  Tensor x = tensor({1.0, 2.0}).requires_grad_();
  EXPECT_EQ(str(x), "tensor([1., 2.], requires_grad=True)");
  EXPECT_EQ(str(x * 2.0), "tensor([2., 4.], grad_fn=<MulBackward0>)");
  EXPECT_EQ(str(matmul(x, x)), "tensor(5., grad_fn=<DotBackward0>)");
  Tensor w = ones({2, 2}, TensorOptions().requires_grad(true));
  EXPECT_EQ(str(linear(ones({1, 2}), w, zeros({2}))), "tensor([[2., 2.]], grad_fn=<AddmmBackward0>)");
  NoGradGuard ng;
  EXPECT_EQ(str(x * 2.0), "tensor([2., 4.])");
}

TEST(Print, WrapsLongRows) {
  EXPECT_EQ(str(arange(30).to(kFloat32)),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.,\n"
            "        14., 15., 16., 17., 18., 19., 20., 21., 22., 23., 24., 25., 26., 27.,\n"
            "        28., 29.])");
}

TEST(Print, SuffixMovesToNextLine) {
  Tensor t = arange(14, TensorOptions(kFloat64).requires_grad(true));
  EXPECT_EQ(str(t),
            "tensor([ 0.,  1.,  2.,  3.,  4.,  5.,  6.,  7.,  8.,  9., 10., 11., 12., 13.],\n"
            "       dtype=float64, requires_grad=True)");
}

TEST(Print, ThreeDims) {
  EXPECT_EQ(str(arange(8).reshape({2, 2, 2})),
            "tensor([[[0, 1],\n"
            "         [2, 3]],\n"
            "\n"
            "        [[4, 5],\n"
            "         [6, 7]]])");
}

TEST(Print, SummarisesLargeTensors) {
  EXPECT_EQ(str(arange(2000)), "tensor([   0,    1,    2,  ..., 1997, 1998, 1999])");
  EXPECT_EQ(str(arange(1200).reshape({40, 30})),
            "tensor([[   0,    1,    2,  ...,   27,   28,   29],\n"
            "        [  30,   31,   32,  ...,   57,   58,   59],\n"
            "        [  60,   61,   62,  ...,   87,   88,   89],\n"
            "        ...,\n"
            "        [1110, 1111, 1112,  ..., 1137, 1138, 1139],\n"
            "        [1140, 1141, 1142,  ..., 1167, 1168, 1169],\n"
            "        [1170, 1171, 1172,  ..., 1197, 1198, 1199]])");
  // The formatter only sees the shown values: 0 and 1..1199 span more than 1000x.
  EXPECT_EQ(str(arange(1200).to(kFloat32)),
            "tensor([0.0000e+00, 1.0000e+00, 2.0000e+00,  ..., 1.1970e+03, 1.1980e+03,\n"
            "        1.1990e+03])");
  // 1000 elements exactly is not summarised.
  EXPECT_EQ(str(zeros({1000}, kInt64)).find("..."), std::string::npos);
}

TEST(Print, NonContiguousAndUndefined) {
  Tensor t = tensor({{1, 2, 3}, {4, 5, 6}}).t();
  EXPECT_EQ(str(t), "tensor([[1, 4],\n        [2, 5],\n        [3, 6]])");
  EXPECT_EQ(Tensor().toString(), "[ Tensor (undefined) ]");
}

}  // namespace
}  // namespace ignis
