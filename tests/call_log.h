// An interposer that records the name of every op call (nested ones included): what the graph
// mode tests use to see which ops a run or a backward called.
#pragma once

#include <functional>
#include <string>
#include <vector>

#include "ignis/op_registry.h"

namespace ignis::testing {

struct CallLog final : op::Interposer {
  std::vector<std::string> names;
  void around(op::Call& call, const std::function<void()>& next) override {
    names.push_back(call.op.schema.full_name());
    next();
  }
};

}  // namespace ignis::testing
