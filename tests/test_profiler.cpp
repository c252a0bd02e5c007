// The profiler: ops, backward nodes and user ranges recorded with self/total time; the table;
// the Chrome trace JSON (valid, nested ranges, backward ops).
#include <gmock/gmock.h>
#include <gtest/gtest.h>

#include <cstdio>
#include <fstream>
#include <sstream>

#include "ignis/ignis.h"
#include "io/json.h"
#include "test_util.h"

using namespace ignis;
using ::testing::HasSubstr;

namespace {

const profiler::Event* find_event(const std::vector<profiler::Event>& ev, const std::string& name) {
  for (const auto& e : ev) {
    if (e.name == name) return &e;
  }
  return nullptr;
}

}  // namespace

TEST(Profiler, RecordsOpsBackwardNodesAndRanges) {
  Tensor w = randn({8, 4}).requires_grad_();
  Tensor x = randn({16, 4});
  profiler::Profile prof;
  {
    profiler::Range step("step");
    Tensor loss;
    {
      profiler::Range fwd("forward");
      loss = relu(matmul(x, w.t())).sum();
    }
    loss.backward();
  }
  prof.stop();
  const auto ev = prof.events();
  const profiler::Event* step = find_event(ev, "step");
  const profiler::Event* fwd = find_event(ev, "forward");
  const profiler::Event* mm = find_event(ev, "matmul");
  const profiler::Event* relu_ev = find_event(ev, "relu");
  ASSERT_NE(step, nullptr);
  ASSERT_NE(fwd, nullptr);
  ASSERT_NE(mm, nullptr);
  ASSERT_NE(relu_ev, nullptr);
  EXPECT_EQ(step->category, "range");
  EXPECT_EQ(mm->category, "op");
  EXPECT_EQ(mm->input_shapes, "[[16, 4], [4, 8]]");
  // Nesting: step > forward > matmul, each inside its parent's interval.
  EXPECT_EQ(step->depth, 0);
  EXPECT_EQ(fwd->depth, 1);
  EXPECT_GE(mm->depth, 2);
  EXPECT_GE(fwd->start_ns, step->start_ns);
  EXPECT_LE(fwd->start_ns + fwd->duration_ns, step->start_ns + step->duration_ns);
  EXPECT_LE(step->self_ns, step->duration_ns);
  EXPECT_GT(mm->bytes, 0);  // the product's output stays allocated
  // Backward nodes are recorded, inside the step range.
  bool saw_backward = false;
  for (const auto& e : ev) {
    if (e.category == "backward") {
      saw_backward = true;
      EXPECT_GE(e.depth, 1) << e.name;
    }
  }
  EXPECT_TRUE(saw_backward);
}

TEST(Profiler, TableIsSortedByTotalTime) {
  Tensor a = randn({64, 64});
  profiler::Profile prof;
  for (int i = 0; i < 3; ++i) a = a.matmul(a).tanh();
  prof.stop();
  const auto rows = prof.key_averages();
  ASSERT_GE(rows.size(), 2u);
  for (size_t i = 1; i < rows.size(); ++i) EXPECT_GE(rows[i - 1].total_ns, rows[i].total_ns);
  bool found = false;
  for (const auto& r : rows) {
    if (r.name == "tanh") {
      EXPECT_EQ(r.calls, 3);
      found = true;
    }
  }
  EXPECT_TRUE(found);
  const std::string table = prof.table();
  EXPECT_THAT(table, HasSubstr("Name"));
  EXPECT_THAT(table, HasSubstr("Self CPU %"));
  EXPECT_THAT(table, HasSubstr("# of Calls"));
  EXPECT_THAT(table, HasSubstr("tanh"));
  EXPECT_THAT(table, HasSubstr("Self CPU time total:"));
}

TEST(Profiler, ChromeTraceIsValidJson) {
  Tensor w = randn({3, 3}).requires_grad_();
  std::string path = ::testing::TempDir() + "ignis_profile.json";
  {
    profiler::Profile prof;
    {
      profiler::Range r("outer \"quoted\"");
      profiler::Range inner("inner");
      (w * w).sum().backward();
    }
    prof.export_chrome_trace(path);
  }
  std::ifstream f(path);
  std::stringstream ss;
  ss << f.rdbuf();
  json::Value doc = json::parse(ss.str(), "trace");
  const json::Value* events = doc.find("traceEvents");
  ASSERT_NE(events, nullptr);
  ASSERT_EQ(events->kind, json::Value::Kind::Array);
  int ops = 0, backward = 0, ranges = 0;
  for (const json::Value& e : *events->arr) {
    EXPECT_EQ(e.find("ph")->str, "X");
    ASSERT_NE(e.find("ts"), nullptr);
    ASSERT_NE(e.find("dur"), nullptr);
    const std::string cat = e.find("cat")->str;
    ops += cat == "op";
    backward += cat == "backward";
    ranges += cat == "range";
    if (cat == "range" && e.find("name")->str != "inner") {
      EXPECT_EQ(e.find("name")->str, "outer \"quoted\"");
    }
  }
  EXPECT_GT(ops, 0);
  EXPECT_GT(backward, 0);
  EXPECT_EQ(ranges, 2);
  std::remove(path.c_str());
}

TEST(Profiler, OnlyOneAtATimeAndNothingWhenInactive) {
  {
    profiler::Profile a;
    EXPECT_TRUE(profiler::is_enabled());
    EXPECT_THAT(error_of([] { profiler::Profile b; }),
                HasSubstr("profiler: a Profile is already recording"));
  }
  EXPECT_FALSE(profiler::is_enabled());
  profiler::Profile p;
  p.stop();
  Tensor t = ones({2}) + 1;
  profiler::Range r("after stop");
  EXPECT_TRUE(p.events().empty());
}

TEST(Profiler, ExportToAnUnwritablePathFails) {
  profiler::Profile p;
  p.stop();
  EXPECT_THAT(error_of([&] { p.export_chrome_trace("/nonexistent-dir/x.json"); }),
              HasSubstr("export_chrome_trace: cannot open '/nonexistent-dir/x.json.tmp'"));
}
