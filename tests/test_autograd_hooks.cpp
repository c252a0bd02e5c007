// Engine additions for DistributedDataParallel: post-accumulate-grad hooks on leaves and
// callbacks queued to run when a backward finishes.
#include <gtest/gtest.h>

#include "ignis/ignis.h"

using namespace ignis;

TEST(PostAccumulateGradHook, RunsAfterTheGradientIsAccumulated) {
  Tensor w = tensor({1.0, 2.0, 3.0}).requires_grad_(true);
  std::vector<std::vector<double>> seen;
  w.register_post_accumulate_grad_hook([&](const Tensor& leaf) {
    const Tensor& g = leaf.grad();
    seen.push_back({g[0].item<double>(), g[1].item<double>(), g[2].item<double>()});
  });
  (w * w).sum().backward();    // grad 2w
  (w * 3.0).sum().backward();  // accumulates 3
  ASSERT_EQ(seen.size(), 2u);
  EXPECT_EQ(seen[0], (std::vector<double>{2, 4, 6}));
  EXPECT_EQ(seen[1], (std::vector<double>{5, 7, 9}));
}

TEST(PostAccumulateGradHook, OncePerBackwardForALeafUsedTwice) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_(true);
  int calls = 0;
  size_t h = w.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  (w * w + w).sum().backward();
  EXPECT_EQ(calls, 1);
  EXPECT_TRUE(equal(w.grad(), tensor({3.0, 5.0})));
  w.remove_hook(h);
  (w * 2.0).sum().backward();
  EXPECT_EQ(calls, 1);
}

TEST(PostAccumulateGradHook, NotOnNonLeavesNorUnderAutogradGrad) {
  Tensor w = tensor({1.0, 2.0}).requires_grad_(true);
  Tensor y = w * 2.0;
  try {
    y.register_post_accumulate_grad_hook([](const Tensor&) {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "register_post_accumulate_grad_hook: post accumulate grad hooks can "
                 "only be registered on leaf tensors that require grad");
  }
  int calls = 0;
  w.register_post_accumulate_grad_hook([&](const Tensor&) { ++calls; });
  autograd::grad({(w * w).sum()}, {w});  // .grad() is not touched: no hook
  EXPECT_EQ(calls, 0);
}

TEST(QueueCallback, RunsAfterTheLastNodeInOrder) {
  Tensor a = tensor({1.0}).requires_grad_(true);
  Tensor b = tensor({2.0}).requires_grad_(true);
  std::vector<std::string> log;
  a.register_post_accumulate_grad_hook([&](const Tensor&) {
    log.push_back("a");
    autograd::queue_callback([&] {
      log.push_back("callback 1");
      autograd::queue_callback([&] { log.push_back("callback 2 (queued by callback 1)"); });
    });
  });
  b.register_post_accumulate_grad_hook([&](const Tensor&) { log.push_back("b"); });
  (a * 3.0 + b * b * b).sum().backward();
  ASSERT_EQ(log.size(), 4u);
  EXPECT_EQ(log[2], "callback 1");
  EXPECT_EQ(log[3], "callback 2 (queued by callback 1)");
  // Nothing queued outlives its backward.
  log.clear();
  (b * 2.0).sum().backward();
  EXPECT_EQ(log, (std::vector<std::string>{"b"}));
}

TEST(QueueCallback, OutsideBackwardIsAnError) {
  try {
    autograd::queue_callback([] {});
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(),
                 "queue_callback: no backward is running on this thread (queue "
                 "callbacks from a hook during backward)");
  }
}

TEST(QueueCallback, AnErrorInACallbackReachesTheCaller) {
  Tensor a = tensor({1.0}).requires_grad_(true);
  a.register_post_accumulate_grad_hook(
      [](const Tensor&) { autograd::queue_callback([] { IGNIS_FAIL("callback failed"); }); });
  try {
    (a * 2.0).sum().backward();
    ADD_FAILURE() << "expected an error";
  } catch (const Error& e) {
    EXPECT_STREQ(e.what(), "callback failed");
  }
  EXPECT_TRUE(equal(a.grad(), tensor({2.0})));
}
