// The op registry: schemas, records, the one call path and its interposers, boxed calls.
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include "ignis/ignis.h"
#include "ignis/op_registry.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

/// Records every call it sees: the op's full name, its arguments and outputs as text.
class Recorder : public op::Interposer {
 public:
  std::vector<std::string> calls;
  void around(op::Call& call, const std::function<void()>& next) override {
    std::string line = call.op.schema.full_name() + "(";
    for (size_t i = 0; i < call.args.size(); ++i) {
      line += (i ? ", " : "") + call.op.schema.arguments[i].name + "=" + call.args[i].str();
    }
    next();
    line += ") -> ";
    for (const op::IValue& v : call.outputs) line += v.str();
    calls.push_back(line);
  }
};

}  // namespace

TEST(Schema, ParsesPyTorchSyntax) {
  op::Schema s =
      op::parse_schema("add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  EXPECT_EQ(s.name, "add");
  EXPECT_EQ(s.overload, "Tensor");
  ASSERT_EQ(s.arguments.size(), 3u);
  EXPECT_EQ(s.arguments[2].name, "alpha");
  EXPECT_EQ(s.arguments[2].type, op::ArgType::Scalar);
  EXPECT_TRUE(s.arguments[2].keyword_only);
  EXPECT_EQ(*s.arguments[2].default_value, "1");
  EXPECT_EQ(s.str(), "add.Tensor(Tensor self, Tensor other, *, Scalar alpha=1) -> Tensor");
  op::Schema m =
      op::parse_schema("max.dim(Tensor self, int dim, bool keepdim=False) -> (Tensor, Tensor)");
  EXPECT_EQ(m.returns, (std::vector<std::string>{"Tensor", "Tensor"}));
  op::Schema inplace = op::parse_schema("add_.Tensor(Tensor(a!) self, Tensor other) -> Tensor(a!)");
  EXPECT_EQ(inplace.arguments[0].type, op::ArgType::Tensor);
}

TEST(Schema, ErrorsNameTheText) {
  EXPECT_THAT(error_of([&] { op::parse_schema("add(Tensor self"); }),
              HasSubstr("op schema 'add(Tensor self': expected"));
  EXPECT_THAT(error_of([&] { op::parse_schema("f(Blob x) -> Tensor"); }),
              HasSubstr("unknown type 'Blob' of argument 'x'"));
  EXPECT_THAT(error_of([&] { op::parse_schema("f(Tensor) -> Tensor"); }),
              HasSubstr("argument 'Tensor' has no type"));
}

TEST(Registry, RecordsAreConsistentWithTheirFrontEnds) {
  std::vector<std::string> problems = op::validate_registry();
  std::string all;
  for (const auto& p : problems) all += p + "\n";
  EXPECT_TRUE(problems.empty()) << all;
  const op::Record* add = op::find("add.Tensor");
  ASSERT_NE(add, nullptr);
  EXPECT_TRUE(add->differentiable);
  EXPECT_EQ(add->kind, "kernel");
  // "cuda" when this build has the CUDA backend (whose kernels register at start-up too).
  std::vector<std::string> devices = {"cpu", "meta"};
  if (cuda::unavailable_reason() != "ignis was built without a CUDA backend") {
    devices.push_back("cuda");
  }
  EXPECT_EQ(add->devices, devices);
  // A composite runs wherever its parts run: only the CPU and meta are listed.
  const op::Record* layer_norm = op::find("layer_norm");
  ASSERT_NE(layer_norm, nullptr);
  EXPECT_EQ(layer_norm->devices, (std::vector<std::string>{"cpu", "meta"}));
  EXPECT_EQ(op::find("no_such_op"), nullptr);
}

TEST(Interposer, SeesEveryCallWithItsAttributesAndOutputs) {
  Tensor a = ones({2, 3});
  Tensor b = full({3}, 2.0);
  Recorder rec;
  Tensor c;
  {
    op::InterposerGuard guard(&rec);
    c = add(a, b, 3);
  }
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0],
            "add.Tensor(self=float32[2, 3], other=float32[3], alpha=3) -> float32[2, 3]");
  EXPECT_EQ(c.sum().item<double>(), 6 * 7.0);
  // Uninstalled: nothing more is seen.
  add(a, b);
  EXPECT_EQ(rec.calls.size(), 1u);
}

TEST(Interposer, SeesCopiesWithTheirNonBlockingFlag) {
  // copy_ with non_blocking (PyTorch's schema) goes through the one call path, so traces and the
  // profiler see non-blocking copies to and from a GPU too.
  Tensor dst = zeros({2, 2});
  const Tensor src = ones({2});
  Recorder rec;
  {
    op::InterposerGuard guard(&rec);
    dst.copy_(src, /*non_blocking=*/true);
    dst.copy_(src);
  }
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_EQ(rec.calls[0],
            "copy_(self=float32[2, 2], src=float32[2], non_blocking=True) -> float32[2, 2]");
  EXPECT_EQ(rec.calls[1],
            "copy_(self=float32[2, 2], src=float32[2], non_blocking=False) -> float32[2, 2]");
  EXPECT_EQ(dst.sum().item<double>(), 4.0);
}

TEST(Interposer, NestedCallsAreSeenInsideOuterOnes) {
  Tensor a = ones({2});
  Recorder rec;
  op::InterposerGuard guard(&rec);
  a.mul(2.5);  // mul.Scalar wraps its scalar and calls mul.Tensor
  ASSERT_EQ(rec.calls.size(), 2u);
  EXPECT_THAT(rec.calls[0], HasSubstr("mul.Tensor(self=float32[2], other=float32[]"));
  EXPECT_THAT(rec.calls[1], HasSubstr("mul.Scalar(self=float32[2], other=2.5)"));
}

TEST(Interposer, InPlaceMethodsPassThrough) {
  Tensor a = ones({2});
  Tensor b = ones({2});
  Recorder rec;
  {
    op::InterposerGuard guard(&rec);
    a.add_(b, 2);
  }
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0], "add_.Tensor(self=float32[2], other=float32[2], alpha=2) -> float32[2]");
  EXPECT_EQ(a.sum().item<double>(), 6.0);
}

TEST(CallBoxed, CallsByNameWithDefaults) {
  std::vector<op::IValue> out =
      op::call_boxed("add.Tensor", {op::IValue(ones({2})), op::IValue(full({2}, 3.0))});
  ASSERT_EQ(out.size(), 1u);
  EXPECT_EQ(out[0].get<Tensor>().sum().item<double>(), 8.0);
  out = op::call_boxed(
      "sub.Tensor", {op::IValue(ones({2})), op::IValue(ones({2})), op::IValue(Scalar(int64_t(2)))});
  EXPECT_EQ(out[0].get<Tensor>().sum().item<double>(), -2.0);
}

// An in-place free function (elu_, relu6_) returns a reference to its argument; the boxed call
// unboxes that argument into a temporary, so the result must be copied out while it lives (ASan
// caught the dangling read through graph mode's executor).
TEST(CallBoxed, InPlaceFreeFunctionsReturnTheirArgument) {
  for (const char* name : {"elu_", "relu6_", "selu_", "hardtanh_"}) {
    SCOPED_TRACE(name);
    Tensor x = tensor({-1.0, 2.0}, kFloat64);
    std::vector<op::IValue> out = op::call_boxed(name, {op::IValue(x)});
    ASSERT_EQ(out.size(), 1u);
    const Tensor& r = out[0].get<Tensor>();
    EXPECT_TRUE(r.is_same(x));
    EXPECT_GT(r[1].item<double>(), 0.9);  // elu, relu6 2; selu 2.10; hardtanh 1
    EXPECT_LE(r[0].item<double>(), 0.0);  // elu -0.63, selu -1.11, hardtanh -1, relu6 0
  }
}

TEST(CallBoxed, ErrorsNameTheOpAndTheArgument) {
  EXPECT_THAT(error_of([&] { op::call_boxed("no_such_op", {}); }),
              HasSubstr("call_boxed: no op named 'no_such_op' is registered"));
  EXPECT_THAT(error_of([&] { op::call_boxed("add", {}); }),
              HasSubstr("did you mean one of: add.Scalar, add.Tensor"));
  EXPECT_THAT(error_of([&] { op::call_boxed("add.Tensor", {op::IValue(ones({2}))}); }),
              HasSubstr("add.Tensor: missing argument 'other'"));
  EXPECT_THAT(error_of([&] {
                op::call_boxed("add.Tensor", {op::IValue(ones({2})), op::IValue(ones({2})),
                                              op::IValue(std::string("x"))});
              }),
              HasSubstr("add.Tensor: argument 'alpha' expects Scalar but got str 'x'"));
  EXPECT_THAT(error_of([&] {
                op::call_boxed("mul.Tensor", {op::IValue(ones({2})), op::IValue(int64_t(2))});
              }),
              HasSubstr("mul.Tensor: argument 'other' expects Tensor but got int 2"));
}

TEST(Interposer, GuardsDestroyedOutOfOrderRemoveTheirOwn) {
  Recorder a, b;
  Tensor x = ones({2});
  Tensor y = ones({2});
  auto ga = std::make_unique<op::InterposerGuard>(&a);
  auto gb = std::make_unique<op::InterposerGuard>(&b);
  ga.reset();  // a leaves first; b stays installed
  add(x, y);
  EXPECT_TRUE(a.calls.empty());
  EXPECT_EQ(b.calls.size(), 1u);
  gb.reset();
  add(x, y);
  EXPECT_EQ(b.calls.size(), 1u);
}

TEST(Schema, AnEmptyDefaultIsAnError) {
  EXPECT_THAT(error_of([] { op::parse_schema("f(Tensor self, int k=) -> Tensor"); }),
              HasSubstr("op schema 'f(Tensor self, int k=) -> Tensor': argument 'int k' has an "
                        "empty default"));
}

// to() takes LibTorch's positional arguments: (dtype | device[, dtype] | options | other,
// non_blocking, copy), so ported code means the same; cross-device copies are registry calls.
TEST(To, MatchesLibTorchSignaturesAndGoesThroughTheRegistry) {
  Tensor x = ones({2, 3});
  // The bool after a device is non_blocking: no copy to the same device.
  EXPECT_EQ(x.to(kCPU, true).data_ptr(), x.data_ptr());
  EXPECT_NE(x.to(kCPU, /*non_blocking=*/false, /*copy=*/true).data_ptr(), x.data_ptr());
  EXPECT_EQ(x.to(kFloat32, true).data_ptr(), x.data_ptr());
  EXPECT_NE(x.to(kFloat32, false, true).data_ptr(), x.data_ptr());
  const Tensor m = x.to(kMeta, kFloat64);
  EXPECT_EQ(m.device(), kMeta);
  EXPECT_EQ(m.dtype(), kFloat64);
  EXPECT_EQ(x.to(m).dtype(), kFloat64);  // to(other): other's dtype and device
  EXPECT_EQ(x.to(m).device(), kMeta);
  EXPECT_EQ(x.to(TensorOptions(kFloat64)).dtype(), kFloat64);

  Recorder rec;
  {
    op::InterposerGuard guard(&rec);
    (void)x.to(kMeta, true);
  }
  ASSERT_EQ(rec.calls.size(), 1u);
  EXPECT_EQ(rec.calls[0],
            "to.device(self=float32[2, 3], device=meta, dtype=float32, non_blocking=True, "
            "copy=False) -> float32[2, 3]@meta");

  // Differentiable across a dtype change: the gradient comes back in the input's dtype.
  Tensor w = full({3}, 2.0).requires_grad_(true);
  (w.to(kCPU, kFloat64, false, true) * 3).sum().backward();
  ASSERT_TRUE(w.grad().defined());
  EXPECT_EQ(w.grad().dtype(), kFloat32);
  EXPECT_EQ(vals(w.grad()), (std::vector<double>{3, 3, 3}));
}
